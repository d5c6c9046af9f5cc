//! kustomize remote bases: a git repository made by the test, served over `file://` and over
//! smart HTTP (`git http-backend` behind a server the test starts), fetched natively by the
//! controller and by the offline `build`, compared with kustomize v5.8's build of the same
//! tree; `--no-remote-bases` refuses them; a server that hangs is given up on at the URL's
//! timeout.

use std::path::Path;
use std::process::Command;

use super::*;

#[allow(dead_code)]
#[path = "../../crates/gitfetch/tests/support/server.rs"]
mod git_server;

/// The shard whose controller runs with `--no-remote-bases`.
const NO_REMOTE_SHARD: &str = "no-remote-bases";

fn no_remote_controller() -> &'static ControllerProcess {
    static CONTROLLER: OnceLock<ControllerProcess> = OnceLock::new();
    CONTROLLER.get_or_init(|| start_shard_controller(NO_REMOTE_SHARD, "--no-remote-bases"))
}

fn git(dir: &Path, args: &[&str]) {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .env("GIT_AUTHOR_NAME", "test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .output()
        .expect("run git");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// `<root>/repo`: bases `base-a` and `base-b`, each a kustomization of one ConfigMap (`a`,
/// `b`) whose value is `v1` at tag `v1` and `v2` on `main`.
fn repository() -> tempfile::TempDir {
    let root = tempfile::tempdir().expect("temp dir");
    let repo = root.path().join("repo");
    std::fs::create_dir_all(&repo).expect("repo dir");
    git(&repo, &["init", "-q", "-b", "main"]);
    for version in ["v1", "v2"] {
        for base in ["a", "b"] {
            write(
                &repo.join(format!("base-{base}/kustomization.yaml")),
                "resources:\n- cm.yaml\nlabels:\n- pairs:\n    from: git\n",
            );
            write(
                &repo.join(format!("base-{base}/cm.yaml")),
                &format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {base}\ndata:\n  value: {version}\n"
                ),
            );
        }
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", version]);
        if version == "v1" {
            git(&repo, &["tag", "v1"]);
        }
    }
    root
}

/// An overlay in namespace `ns` of `base-a` at `v1` over `file://` and `base-b` on `main`
/// over smart HTTP.
fn overlay(ns: &str, root: &Path, http: &str) -> String {
    format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {ns}\n\
         resources:\n- file://{}//base-a?ref=v1\n- {http}//base-b?ref=main\n",
        root.join("repo").display()
    )
}

fn run(command: &mut Command) -> String {
    let output = command.output().expect("run a build");
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

#[tokio::test]
async fn remote_bases_over_file_and_smart_http_are_built_as_kustomize_builds_them() {
    controller();
    let client = support::client().await;
    let ns = TestNamespace::new(&client, "remote-bases").await;
    let repos = repository();
    let server = git_server::git_server(repos.path(), true);
    let kustomization = overlay(ns.name(), repos.path(), &server.url("/repo"));

    // Offline: byte for byte what kustomize v5.8 builds (it clones with the git binary).
    let tree = tempfile::tempdir().expect("overlay dir");
    write(&tree.path().join("kustomization.yaml"), &kustomization);
    let theirs = run(Command::new(reference_kustomize())
        .args(["build", "--reorder", "none"])
        .arg(tree.path()));
    let ours = run(Command::new(env!("CARGO_BIN_EXE_kustomize-controller"))
        .arg("build")
        .arg(tree.path()));
    assert_eq!(ours, theirs, "offline build differs from kustomize's");
    assert!(
        ours.contains("value: v1") && ours.contains("value: v2"),
        "{ours}"
    );

    // The controller applies the same objects.
    create_git_source(&client, ns.name(), "repo").await;
    publish(
        &client,
        ns.name(),
        "repo",
        1,
        &[("deploy/kustomization.yaml", &kustomization)],
    )
    .await;
    let every_two_seconds = json!({"interval": "2s"});
    create_kustomization(&client, ns.name(), "app", "repo", every_two_seconds).await;
    wait_ready_with(
        &client,
        ns.name(),
        "app",
        ConditionStatus::True,
        "remote bases applied",
    )
    .await;
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    for (name, value) in [("a", "v1"), ("b", "v2")] {
        let live = config_maps
            .get(name)
            .await
            .expect("ConfigMap from a remote base");
        assert_eq!(live.data.unwrap_or_default()["value"], value, "{name}");
        assert_eq!(live.metadata.labels.unwrap_or_default()["from"], "git");
    }

    // Remote bases can change without the source changing: their build is never reused.
    super::reuse::wait_reconciles(&client, ns.name(), 2).await;
    assert!(
        !super::reuse::reused_in(ns.name()),
        "{}",
        tail(&controller().log(), 20)
    );
}

#[tokio::test]
async fn remote_bases_are_refused_under_no_remote_bases() {
    no_remote_controller();
    let client = support::client().await;
    let ns = TestNamespace::new(&client, "no-remote-bases").await;
    let repos = repository();
    let kustomization = format!(
        "resources:\n- file://{}//base-a?ref=v1\n",
        repos.path().join("repo").display()
    );
    create_git_source(&client, ns.name(), "repo").await;
    publish(
        &client,
        ns.name(),
        "repo",
        1,
        &[("deploy/kustomization.yaml", &kustomization)],
    )
    .await;
    create_labelled_kustomization(
        &client,
        ns.name(),
        "app",
        "repo",
        json!({}),
        json!({SHARD_LABEL: NO_REMOTE_SHARD}),
    )
    .await;
    let (reason, message) = wait_ready_with(
        &client,
        ns.name(),
        "app",
        ConditionStatus::False,
        "the remote base refused",
    )
    .await;
    assert_eq!(reason, "BuildFailed");
    assert!(message.contains("--no-remote-bases"), "{message}");
    assert!(config_map_names(&client, ns.name()).await.is_empty());

    // The offline build refuses it the same way with the same flag.
    let tree = tempfile::tempdir().expect("overlay dir");
    write(&tree.path().join("kustomization.yaml"), &kustomization);
    let output = Command::new(env!("CARGO_BIN_EXE_kustomize-controller"))
        .args(["build", "--no-remote-bases"])
        .arg(tree.path())
        .output()
        .expect("run the offline build");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--no-remote-bases"));
}

#[tokio::test]
async fn a_remote_base_that_hangs_is_given_up_on_at_its_timeout() {
    controller();
    let client = support::client().await;
    let ns = TestNamespace::new(&client, "remote-hangs").await;
    let hanging = git_server::hanging_server(Duration::from_secs(120));
    let kustomization = format!(
        "resources:\n- http://{}/repo//base?timeout=2s\n",
        hanging.addr
    );
    create_git_source(&client, ns.name(), "repo").await;
    publish(
        &client,
        ns.name(),
        "repo",
        1,
        &[("deploy/kustomization.yaml", &kustomization)],
    )
    .await;
    create_kustomization(&client, ns.name(), "app", "repo", json!({})).await;
    let (reason, message) = wait_ready_with(
        &client,
        ns.name(),
        "app",
        ConditionStatus::False,
        "the hanging remote base given up on",
    )
    .await;
    assert_eq!(reason, "BuildFailed");
    assert!(message.contains("timed out after 2s"), "{message}");
    // Given up on while the server was still silent: by the timeout, not a hang-up.
    assert!(hanging.still_silent(), "{message}");
}
