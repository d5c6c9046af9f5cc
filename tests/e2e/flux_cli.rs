//! The `flux` CLI as a real client of this controller: what users type against Flux
//! (`flux get`, `tree`, `events`, `suspend`/`resume`, `reconcile`, `diff`) must work unchanged
//! against ours, because those commands read the status, inventory, events and annotations the
//! controller writes and wait on them with Flux's own rules.
//!
//! The binary is `KC_FLUX_CLI` (tests/run.sh sets it), else the one
//! `tests/flux/install-flux-cli.sh` builds from the Go module proxy (once per machine). When
//! neither gives a binary the tests fail and say why; they never skip.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams};
use kustomize_controller::api::Kustomization;

use super::support::{self, wait_for};
use super::*;

/// Env var naming the flux CLI binary.
const FLUX_CLI_ENV: &str = "KC_FLUX_CLI";

pub(super) fn flux_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let path = support::reference_tool(FLUX_CLI_ENV, "tests/flux/install-flux-cli.sh");
        assert!(
            path.is_file(),
            "{FLUX_CLI_ENV}={} is not a file: the flux CLI is needed for these tests \
             (tests/flux/install-flux-cli.sh builds it)",
            path.display()
        );
        path
    })
}

/// What one flux command did.
struct FluxRun {
    command: String,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl FluxRun {
    /// Both streams: flux prints tables on stdout and its progress lines (`►`, `✔`, `◎`, `✗`)
    /// on stderr.
    fn output(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    /// Panics, with everything flux printed and the controller log's tail, unless the command
    /// exited with `code`.
    fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(code),
            "`{}` exited with {:?}, expected {code}\n--- stdout ---\n{}\n--- stderr ---\n{}\n\
             --- controller log tail ---\n{}",
            self.command,
            self.code,
            self.stdout,
            self.stderr,
            tail(&controller_log(), 30)
        );
        self
    }

    /// Panics unless the output (both streams) has a line containing every one of `parts`.
    fn expect_line(&self, parts: &[&str]) -> &Self {
        let output = self.output();
        assert!(
            output
                .lines()
                .any(|line| parts.iter().all(|part| line.contains(part))),
            "`{}` printed no line containing all of {parts:?}:\n{output}",
            self.command
        );
        self
    }
}

/// Runs `flux <args> --kubeconfig <test cluster> -n <ns>` and waits for it to exit. Runs on a
/// blocking thread: `resume` and `reconcile` poll the cluster for up to their timeout.
async fn flux(ns: &str, args: &[&str]) -> FluxRun {
    let binary = flux_binary();
    let mut full: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    full.extend([
        "--kubeconfig".to_string(),
        support::kubeconfig_path().display().to_string(),
        "--namespace".to_string(),
        ns.to_string(),
        "--timeout".to_string(),
        format!("{}s", WAIT.as_secs()),
    ]);
    let command = format!("flux {}", args.join(" "));
    let output = tokio::task::spawn_blocking(move || {
        Command::new(binary)
            .args(&full)
            .stdin(Stdio::null())
            .output()
    })
    .await
    .expect("flux runner thread")
    .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
    FluxRun {
        command,
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A source revision whose 8-character short form (what `flux get` prints) tells `n` apart.
fn short_revision(n: u32) -> String {
    format!("main@sha1:{n:08x}")
}

fn full_revision(n: u32) -> String {
    format!("{}{}", short_revision(n), "0".repeat(32))
}

/// Publishes `files` as the GitRepository `repo`'s artifact at `full_revision(n)`.
async fn publish_at(f: &Fixture, n: u32, files: &[(&str, &str)]) {
    let (url, digest) = serve(tarball(files));
    publish_artifact(&f.client, f.ns(), "repo", &full_revision(n), &url, &digest).await;
}

/// A GitRepository `repo` with `files` at `full_revision(1)`, and a Kustomization `app` of its
/// `./deploy` that has become Ready.
async fn app_ready(f: &Fixture, files: &[(&str, &str)]) {
    create_git_repository(&f.client, f.ns(), "repo").await;
    publish_at(f, 1, files).await;
    create_kustomization(&f.client, f.ns(), "app", "repo", json!({})).await;
    wait_ready_with(
        &f.client,
        f.ns(),
        "app",
        ConditionStatus::True,
        "revision 1 applied",
    )
    .await;
}

async fn kustomization(client: &kube::Client, ns: &str, name: &str) -> Kustomization {
    Api::<Kustomization>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .expect("get Kustomization")
}

#[tokio::test]
async fn flux_get_lists_the_kustomization_ready_with_its_applied_revision() {
    let f = Fixture::new("flux-get").await;
    let ns = f.ns();
    app_ready(&f, &[("deploy/a.yaml", &config_map(ns, "a", "1"))]).await;
    // The controller's message names the full revision; flux shortens digests in both columns.
    let ks = kustomization(&f.client, ns, "app").await;
    assert_eq!(
        ks.status.and_then(|s| s.last_applied_revision),
        Some(full_revision(1))
    );
    let applied = format!("Applied revision: {}", short_revision(1));

    // Columns: NAME REVISION SUSPENDED READY MESSAGE.
    let run = flux(ns, &["get", "kustomizations"]).await;
    run.expect_code(0);
    let row = run
        .stdout
        .lines()
        .find(|line| line.starts_with("app "))
        .unwrap_or_else(|| panic!("no row for app in:\n{}", run.output()));
    let columns: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        columns[..4],
        ["app", short_revision(1).as_str(), "False", "True"],
        "row: {row}"
    );
    assert!(row.trim_end().ends_with(&applied), "row: {row}");

    // With -A the namespace comes first.
    flux(ns, &["get", "kustomizations", "--all-namespaces"])
        .await
        .expect_code(0)
        .expect_line(&[ns, "app", &short_revision(1), "True", &applied]);
}

#[tokio::test]
async fn flux_tree_prints_the_inventory() {
    let f = Fixture::new("flux-tree").await;
    let ns = f.ns();
    let service = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  ports:\n  - port: 80\n"
    );
    app_ready(
        &f,
        &[
            ("deploy/a.yaml", &config_map(ns, "a", "1")),
            ("deploy/b.yaml", &config_map(ns, "b", "2")),
            ("deploy/web.yaml", &service),
        ],
    )
    .await;

    let run = flux(ns, &["tree", "kustomization", "app"]).await;
    run.expect_code(0);
    let mut lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some(format!("Kustomization/{ns}/app").as_str()),
        "{}",
        run.output()
    );
    let mut objects: Vec<String> = lines
        .drain(1..)
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            line.trim_start_matches(['├', '└', '─', '│', ' '])
                .to_string()
        })
        .collect();
    objects.sort();
    assert_eq!(
        objects,
        [
            format!("ConfigMap/{ns}/a"),
            format!("ConfigMap/{ns}/b"),
            format!("Service/{ns}/web"),
        ],
        "{}",
        run.output()
    );
}

#[tokio::test]
async fn flux_events_shows_the_controller_events() {
    let f = Fixture::new("flux-events").await;
    let ns = f.ns();
    app_ready(&f, &[("deploy/a.yaml", &config_map(ns, "a", "1"))]).await;
    let target = "Kustomization/app";

    // Columns: LAST SEEN TYPE REASON OBJECT MESSAGE. The finished event follows the Ready
    // status by a moment, so wait for it.
    let run = wait_for(
        WAIT,
        "flux events to list the finished reconciliation",
        async || {
            let run = flux(ns, &["events", "--for", target]).await;
            run.expect_code(0);
            let finished = run.stdout.lines().any(|line| {
                line.contains("Normal")
                    && line.contains("ReconciliationSucceeded")
                    && line.contains(target)
                    && line.contains("Reconciliation finished in ")
            });
            if finished { Ok(run) } else { Err(run.output()) }
        },
    )
    .await;
    run.expect_line(&[
        "Normal",
        "Progressing",
        target,
        &format!("ConfigMap/{ns}/a created"),
    ]);
    assert!(
        run.stdout.lines().skip(1).all(|line| line.contains(target)),
        "--for lists only the Kustomization's events:\n{}",
        run.output()
    );
}

#[tokio::test]
async fn flux_suspend_and_resume_wait_for_the_controller() {
    let f = Fixture::new("flux-suspend").await;
    let ns = f.ns();
    app_ready(&f, &[("deploy/a.yaml", &config_map(ns, "a", "1"))]).await;

    flux(ns, &["suspend", "kustomization", "app"])
        .await
        .expect_code(0)
        .expect_line(&["suspending kustomization app in", ns])
        .expect_line(&["kustomization suspended"]);
    let ks = kustomization(&f.client, ns, "app").await;
    assert_eq!(
        ks.spec.suspend,
        Some(true),
        "flux suspend sets spec.suspend"
    );
    let get = flux(ns, &["get", "kustomizations"]).await;
    get.expect_code(0);
    let columns: Option<Vec<&str>> = get
        .stdout
        .lines()
        .find(|line| line.starts_with("app "))
        .map(|line| line.split_whitespace().take(4).collect());
    assert_eq!(
        columns,
        Some(vec!["app", short_revision(1).as_str(), "True", "True"]),
        "NAME REVISION SUSPENDED READY:\n{}",
        get.output()
    );

    // A new revision while suspended; resume waits until the controller reports it Ready.
    publish_at(
        &f,
        2,
        &[
            ("deploy/a.yaml", &config_map(ns, "a", "1")),
            ("deploy/b.yaml", &config_map(ns, "b", "2")),
        ],
    )
    .await;
    flux(ns, &["resume", "kustomization", "app"])
        .await
        .expect_code(0)
        .expect_line(&["resuming kustomization app in", ns])
        .expect_line(&["kustomization resumed"])
        .expect_line(&["Kustomization app reconciliation completed"])
        .expect_line(&[&format!("applied revision {}", full_revision(2))]);
    assert_eq!(config_map_names(&f.client, ns).await, ["a", "b"]);
    let ks = kustomization(&f.client, ns, "app").await;
    assert!(
        !ks.spec.suspend.unwrap_or(false),
        "flux resume clears spec.suspend: {:?}",
        ks.spec.suspend
    );
}

#[tokio::test]
async fn flux_reconcile_is_handled_and_recorded() {
    let f = Fixture::new("flux-reconcile").await;
    let ns = f.ns();
    app_ready(&f, &[("deploy/a.yaml", &config_map(ns, "a", "1"))]).await;

    // Drift only a reconcile repairs: the object is deleted behind the controller's back.
    Api::<ConfigMap>::namespaced(f.client.clone(), ns)
        .delete("a", &DeleteParams::default())
        .await
        .expect("delete a");
    flux(ns, &["reconcile", "kustomization", "app"])
        .await
        .expect_code(0)
        .expect_line(&["annotating Kustomization app in", ns])
        .expect_line(&["Kustomization annotated"])
        .expect_line(&["waiting for Kustomization reconciliation"])
        .expect_line(&[&format!("applied revision {}", full_revision(1))]);

    let ks = kustomization(&f.client, ns, "app").await;
    let requested = ks
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("reconcile.fluxcd.io/requestedAt"))
        .cloned()
        .expect("flux reconcile sets reconcile.fluxcd.io/requestedAt");
    let handled = ks.status.and_then(|s| s.last_handled_reconcile_at);
    assert_eq!(handled, Some(requested), "status.lastHandledReconcileAt");
    assert_eq!(
        config_map_names(&f.client, ns).await,
        ["a"],
        "the reconcile re-applied the deleted ConfigMap"
    );
}

#[tokio::test]
async fn flux_diff_reports_no_change_then_the_local_change() {
    let f = Fixture::new("flux-diff").await;
    let ns = f.ns();
    let a = config_map(ns, "a", "1");
    app_ready(&f, &[("deploy/a.yaml", &a)]).await;

    let dir = tempfile::tempdir().expect("temp dir");
    let deploy = dir.path().join("deploy");
    std::fs::create_dir(&deploy).expect("mkdir deploy");
    std::fs::write(deploy.join("a.yaml"), &a).expect("write a.yaml");
    let path = deploy.display().to_string();
    let diff = [
        "diff",
        "kustomization",
        "app",
        "--path",
        &path,
        "--progress-bar=false",
    ];

    let run = flux(ns, &diff).await;
    run.expect_code(0);
    assert!(
        !run.output().contains('►'),
        "the local copy of the source is what the controller applied, so no change:\n{}",
        run.output()
    );

    // A local change to one object and a new one.
    std::fs::write(deploy.join("a.yaml"), config_map(ns, "a", "changed")).expect("edit a.yaml");
    std::fs::write(deploy.join("b.yaml"), config_map(ns, "b", "2")).expect("write b.yaml");
    flux(ns, &diff)
        .await
        .expect_code(1)
        .expect_line(&[&format!("ConfigMap/{ns}/a drifted")])
        .expect_line(&[&format!("ConfigMap/{ns}/b created")])
        .expect_line(&["changed"]);
}

/// Flux's getting-started workflow on the real stack: `flux create source git` and
/// `flux create kustomization --export` applied with kubectl, source-controller cloning the
/// repository, `flux diff` of the work tree, then a commit picked up by `flux reconcile ks
/// --with-source`.
#[tokio::test]
async fn flux_create_then_reconcile_with_source_on_source_controller() {
    let f = Fixture::new("flux-real").await;
    let ns = f.ns();
    let repo = GitRepo::new("flux-cli");
    let first = repo.commit(
        "first",
        &[("deploy/cm.yaml", &config_map(ns, "app-config", "1"))],
    );
    let source = flux(
        ns,
        &[
            "create",
            "source",
            "git",
            "repo",
            "--url",
            &repo.url,
            "--branch",
            "main",
            "--interval",
            "1h",
            "--export",
        ],
    )
    .await;
    source.expect_code(0);
    apply::kubectl_apply(&source.stdout);
    let run_label = format!("{RUN_LABEL}={}", run_id());
    let kustomization = flux(
        ns,
        &[
            "create",
            "kustomization",
            "app",
            "--source",
            "GitRepository/repo",
            "--path",
            "./deploy",
            "--prune",
            "true",
            "--interval",
            "1h",
            "--label",
            &run_label,
            "--export",
        ],
    )
    .await;
    kustomization.expect_code(0);
    apply::kubectl_apply(&kustomization.stdout);
    let short = |commit: &str| format!("main@sha1:{}", &commit[..8]);
    wait_for(
        WAIT,
        "flux get kustomizations shows the first commit applied",
        async || {
            let run = flux(ns, &["get", "kustomizations"]).await;
            if run.code == Some(0)
                && run.stdout.contains(&short(&first))
                && run.stdout.contains("True")
            {
                Ok(())
            } else {
                Err(run.output())
            }
        },
    )
    .await;
    flux(ns, &["get", "sources", "git"])
        .await
        .expect_code(0)
        .expect_line(&["repo", &short(&first), "True"]);

    // `flux diff` builds the work tree locally against what ours applied from the commit.
    let deploy = repo.work_tree().join("deploy");
    let path = deploy.display().to_string();
    let diff = [
        "diff",
        "kustomization",
        "app",
        "--path",
        &path,
        "--progress-bar=false",
    ];
    let unchanged = flux(ns, &diff).await;
    unchanged.expect_code(0);
    assert!(!unchanged.output().contains('►'), "{}", unchanged.output());
    std::fs::write(
        deploy.join("cm.yaml"),
        config_map(ns, "app-config", "edited"),
    )
    .expect("edit the work tree");
    flux(ns, &diff)
        .await
        .expect_code(1)
        .expect_line(&[&format!("ConfigMap/{ns}/app-config drifted")]);

    let second = repo.commit(
        "second",
        &[("deploy/cm.yaml", &config_map(ns, "app-config", "2"))],
    );
    flux(ns, &["reconcile", "kustomization", "app", "--with-source"])
        .await
        .expect_code(0)
        .expect_line(&["applied revision", &format!("main@sha1:{second}")]);
    let live = Api::<ConfigMap>::namespaced(f.client.clone(), ns)
        .get("app-config")
        .await
        .expect("app-config");
    assert_eq!(live.data.unwrap_or_default()["value"], "2");
}
