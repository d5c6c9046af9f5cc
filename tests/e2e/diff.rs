//! `kustomize-controller diff` against the live cluster: a Kustomization the controller
//! applied, compared with local directories.

use std::path::Path;
use std::process::Output;

use k8s_openapi::api::core::v1::ConfigMap;

use super::*;

/// The files of the Kustomization: ConfigMap `a` with a post-build variable, ConfigMap `b`,
/// and Secret `s`.
fn files(
    ns: &str,
    a_value: &str,
    with_b: bool,
    token: &str,
    extra: Option<&str>,
) -> Vec<(String, String)> {
    let mut files = vec![
        ("deploy/a.yaml".to_string(), config_map(ns, "a", a_value)),
        (
            "deploy/s.yaml".to_string(),
            format!(
                "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  namespace: {ns}\nstringData:\n  token: {token}\n  kept: same\n"
            ),
        ),
    ];
    if with_b {
        files.push(("deploy/b.yaml".to_string(), config_map(ns, "b", "1")));
    }
    if let Some(name) = extra {
        files.push((format!("deploy/{name}.yaml"), config_map(ns, name, "new")));
    }
    files
}

/// Writes `files` under a fresh directory and returns its `deploy` folder.
pub(super) fn local_dir(files: &[(String, String)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (path, content) in files {
        let file = dir.path().join(path);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        std::fs::write(file, content).expect("write file");
    }
    dir
}

fn diff(args: &[&str], kubeconfig: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kustomize-controller"))
        .arg("diff")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .expect("run kustomize-controller diff")
}

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Nothing to change: exit 0, nothing printed. A changed value (with its post-build variable
/// read from the live ConfigMap), a new object, an object to prune and a changed Secret: each
/// shown, Secret values masked, exit 1. A bad kubeconfig and a build error: exit 2 with the
/// message.
#[tokio::test]
async fn diff_shows_what_applying_would_change() {
    let f = Fixture::new("diff").await;
    let ns = f.ns();
    let vars = serde_json::from_value::<ConfigMap>(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "vars", "namespace": ns},
        "data": {"greeting": "hello"},
    }))
    .expect("vars");
    Api::<ConfigMap>::namespaced(f.client.clone(), ns)
        .create(&PostParams::default(), &vars)
        .await
        .expect("create vars");
    f.create_source("repo").await;
    let applied = files(ns, "${greeting}", true, "first-token-value", None);
    f.publish(1, &applied).await;
    create_kustomization(
        &f.client,
        ns,
        "app",
        "repo",
        json!({"postBuild": {"substituteFrom": [{"kind": "ConfigMap", "name": "vars"}]}}),
    )
    .await;
    wait_ready_with(&f.client, ns, "app", ConditionStatus::True, "revision 1").await;
    let kubeconfig = support::kubeconfig_path();

    let same = local_dir(&applied);
    let stdout = diff_exiting(ns, &same, &kubeconfig, 0);
    assert_eq!(stdout, "", "nothing to change prints nothing");

    let changed = local_dir(&files(
        ns,
        "${greeting}-2",
        false,
        "second-token-value",
        Some("c"),
    ));
    let stdout = diff_exiting(ns, &changed, &kubeconfig, 1);
    for expected in [
        format!("► ConfigMap/{ns}/a drifted\n"),
        "-  value: hello\n".to_string(),
        "+  value: hello-2\n".to_string(),
        format!("► ConfigMap/{ns}/c created\n"),
        format!("► ConfigMap/{ns}/b deleted\n"),
        format!("► Secret/{ns}/s drifted\n"),
        "-  token: '*** (before)'\n".to_string(),
        "+  token: '*** (after)'\n".to_string(),
        "   kept: '***'\n".to_string(),
    ] {
        assert!(stdout.contains(&expected), "{expected:?} in:\n{stdout}");
    }
    for secret in [
        "first-token-value",
        "second-token-value",
        "c2Vjb25k",
        "Zmlyc3Q",
    ] {
        assert!(!stdout.contains(secret), "a Secret value shows: {stdout}");
    }
    assert_eq!(
        data_value(&f.client, ns, "a").await.as_deref(),
        Some("hello"),
        "diff changes nothing"
    );

    let path = changed.path().join("deploy");
    let bad = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(bad.path(), "not: [a kubeconfig").expect("write");
    let output = diff(
        &[
            "app",
            "-n",
            ns,
            "--path",
            &path.to_string_lossy(),
            "--kubeconfig",
            &bad.path().to_string_lossy(),
        ],
        &kubeconfig,
    );
    let (_, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("error: cannot read kubeconfig "),
        "{stderr}"
    );

    let broken = local_dir(&[(
        "deploy/kustomization.yaml".to_string(),
        "resources: [missing.yaml]\n".to_string(),
    )]);
    let path = broken.path().join("deploy");
    let output = diff(
        &["app", "-n", ns, "--path", &path.to_string_lossy()],
        &kubeconfig,
    );
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(2), "{stdout}{stderr}");
    assert!(
        stderr.starts_with("error: kustomize build failed: ") && stderr.contains("missing.yaml"),
        "{stderr}"
    );
}

/// Runs `diff app -n ns --path <dir>/deploy`, checks its exit status, returns its stdout.
pub(super) fn diff_exiting(
    ns: &str,
    dir: &tempfile::TempDir,
    kubeconfig: &Path,
    code: i32,
) -> String {
    let path = dir.path().join("deploy");
    let output = diff(
        &["app", "-n", ns, "--path", &path.to_string_lossy()],
        kubeconfig,
    );
    let (stdout, stderr) = text(&output);
    assert_eq!(
        output.status.code(),
        Some(code),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    stdout
}

async fn data_value(client: &kube::Client, ns: &str, name: &str) -> Option<String> {
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .ok()?
        .data?
        .get("value")
        .cloned()
}
