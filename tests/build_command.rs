//! The offline `build` subcommand: the controller's build stage on a local directory.

use std::path::Path;
use std::process::Command;

use goyaml::parse_documents;
use serde_json::Value;

const BINARY: &str = env!("CARGO_BIN_EXE_kustomize-controller");

fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// Runs the subcommand; returns (success, stdout documents, stderr).
fn build(args: &[&str]) -> (bool, Vec<Value>, String) {
    let output = Command::new(BINARY)
        .arg("build")
        .args(args)
        .output()
        .expect("run kustomize-controller build");
    let stdout = String::from_utf8(output.stdout).expect("utf-8 stdout");
    let docs = parse_documents(&stdout).expect("stdout is YAML");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.success(), docs, stderr)
}

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "app/kustomization.yaml",
        "resources: [cm.yaml]\nconfigMapGenerator:\n- name: settings\n  literals: [mode=fast]\n",
    );
    write(
        dir.path(),
        "app/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata:\n  port: \"8080\"\n",
    );
    dir
}

fn names(docs: &[Value]) -> Vec<String> {
    docs.iter()
        .map(|d| {
            let meta = &d["metadata"];
            format!(
                "{}/{}",
                meta["namespace"].as_str().unwrap_or(""),
                meta["name"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[test]
fn prints_the_kustomize_build_of_a_directory() {
    let dir = tree();
    let app = dir.path().join("app");
    let (ok, docs, stderr) = build(&[app.to_str().expect("utf-8 path")]);
    assert!(ok, "{stderr}");
    // The generated name is the one kustomize v5.8 gives this generator.
    assert_eq!(names(&docs), ["/plain", "/settings-t82mkhg8fd"]);
    assert_eq!(
        docs[0]["data"]["port"], "8080",
        "quoted numbers stay strings"
    );
}

#[test]
fn lays_a_kustomization_object_over_the_directory_as_the_controller_does() {
    let dir = tree();
    write(
        dir.path(),
        "ks.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: app\n  namespace: flux-system\n\
         spec:\n  interval: 5m\n  path: ./app\n  prune: true\n  sourceRef: {kind: GitRepository, name: repo}\n\
         \x20 targetNamespace: apps\n  namePrefix: prod-\n  commonMetadata:\n    labels: {team: platform}\n",
    );
    let app = dir.path().join("app");
    let ks = dir.path().join("ks.yaml");
    let root = dir.path().to_str().expect("utf-8 path");
    let (ok, docs, stderr) = build(&[
        app.to_str().expect("utf-8 path"),
        "--kustomization",
        ks.to_str().expect("utf-8 path"),
        "--root",
        root,
    ]);
    assert!(ok, "{stderr}");
    assert_eq!(
        names(&docs),
        ["apps/prod-plain", "apps/prod-settings-t82mkhg8fd"]
    );
    for doc in &docs {
        assert_eq!(doc["metadata"]["labels"]["team"], "platform");
    }
}

#[test]
fn a_failed_build_exits_non_zero_naming_the_file_and_prints_nothing() {
    let dir = tree();
    write(
        dir.path(),
        "app/kustomization.yaml",
        "resources: [missing.yaml]\n",
    );
    let app = dir.path().join("app");
    let (ok, docs, stderr) = build(&[app.to_str().expect("utf-8 path")]);
    assert!(!ok);
    assert!(docs.is_empty());
    assert!(stderr.contains("missing.yaml"), "{stderr}");
}

#[test]
fn files_outside_the_root_are_refused() {
    let dir = tree();
    write(
        dir.path(),
        "secret.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n",
    );
    write(
        dir.path(),
        "app/kustomization.yaml",
        "resources: [../secret.yaml]\n",
    );
    let app = dir.path().join("app");
    let root = app.to_str().expect("utf-8 path");
    let (ok, _, stderr) = build(&[
        root,
        "--root",
        root,
        "--load-restrictor",
        "LoadRestrictionsNone",
    ]);
    assert!(!ok);
    assert!(stderr.contains("outside"), "{stderr}");
}

#[test]
fn remote_files_on_cloud_metadata_addresses_are_refused_naming_the_url() {
    let url = "http://169.254.169.254/latest/meta-data/iam/security-credentials/node";
    let dir = tree();
    write(
        dir.path(),
        "app/kustomization.yaml",
        &format!("configMapGenerator:\n- name: stolen\n  files: [{url}]\n"),
    );
    let app = dir.path().join("app");
    let (ok, docs, stderr) = build(&[app.to_str().expect("utf-8 path")]);
    assert!(!ok, "the build must fail");
    assert!(docs.is_empty());
    assert!(
        stderr.contains(url) && stderr.contains("link-local or cloud metadata address"),
        "{stderr}"
    );
}

#[test]
fn substitutes_post_build_variables_like_the_controller() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "app/ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: apps\n  labels:\n    \
         env: ${cluster_env:=dev}\n    region: ${cluster_region}\n    team: ${team}\n",
    );
    write(
        dir.path(),
        "app/kustomization.yaml",
        "resources: [ns.yaml]\n",
    );
    write(
        dir.path(),
        "vars.env",
        "# cluster variables\ncluster_region=eu-west-1\nteam=\"from-file\"\n",
    );
    write(
        dir.path(),
        "ks.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: app\n\
         spec:\n  interval: 5m\n  path: ./app\n  prune: true\n  sourceRef: {kind: GitRepository, name: repo}\n\
         \x20 postBuild:\n    substitute:\n      team: platform\n",
    );
    let app = dir.path().join("app");
    let app = app.to_str().expect("utf-8 path");
    let var_file = dir.path().join("vars.env");
    let var_file = var_file.to_str().expect("utf-8 path");
    let ks = dir.path().join("ks.yaml");
    let ks = ks.to_str().expect("utf-8 path");

    let (ok, docs, stderr) = build(&[app, "--var-file", var_file, "--kustomization", ks]);
    assert!(ok, "{stderr}");
    assert_eq!(
        docs[0]["metadata"]["labels"],
        serde_json::json!({"env": "dev", "region": "eu-west-1", "team": "platform"}),
        "the inline substitute overrides the stand-ins for substituteFrom"
    );

    let (ok, docs, stderr) = build(&[app, "--var", "cluster_region=us", "--var", "team=t"]);
    assert!(ok, "{stderr}");
    assert_eq!(docs[0]["metadata"]["labels"]["region"], "us");

    let (ok, _, stderr) = build(&[app, "--var", "team=t"]);
    assert!(!ok, "strict by default");
    assert!(stderr.contains("cluster_region"), "{stderr}");

    let (ok, docs, stderr) = build(&[app, "--var", "team=t", "--strict-substitution", "false"]);
    assert!(ok, "{stderr}");
    assert_eq!(docs[0]["metadata"]["labels"]["env"], "dev");
}

fn sops_fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sops")
}

#[test]
fn sops_keys_decrypt_generator_sources_and_patches_as_the_controller_does() {
    let fixtures = sops_fixtures();
    let dir = fixtures.join("kustomize");
    let key = fixtures.join("keys/age-1.agekey");
    let (ok, docs, stderr) = build(&[dir.to_str().unwrap(), "--sops-key", key.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    let secret = docs
        .iter()
        .find(|d| d["kind"] == "Secret")
        .expect("the generated Secret");
    assert!(
        secret["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("app-secrets-")
    );
    use base64::Engine;
    // kustomize wraps generated base64 at 70 columns.
    let decode = |k: &str| {
        let text = secret["data"][k]
            .as_str()
            .unwrap_or_else(|| panic!("data.{k}"));
        let text: String = text.split_whitespace().collect();
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap()
    };
    assert_eq!(
        decode("config.yaml"),
        std::fs::read(fixtures.join("expected/kustomize/config.yaml")).unwrap()
    );
    assert_eq!(
        decode("tls.key"),
        std::fs::read(fixtures.join("expected/kustomize/tls.key")).unwrap()
    );
    assert_eq!(decode("DB_PASSWORD"), b"gener4tor-pa55");
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("Deployment");
    let env = &deployment["spec"]["template"]["spec"]["containers"][0]["env"][0];
    assert_eq!(
        env["value"], "lic-0123-4567-89ab",
        "the encrypted patch was decrypted and applied"
    );
}

#[test]
fn sops_errors_name_the_file_and_never_a_secret() {
    let fixtures = sops_fixtures();
    let dir = fixtures.join("kustomize");
    let wrong = fixtures.join("keys/age-2-and-3.agekey");
    let (ok, _, stderr) = build(&[dir.to_str().unwrap(), "--sops-key", wrong.to_str().unwrap()]);
    assert!(!ok);
    assert!(stderr.contains("config.yaml"), "{stderr}");
    assert!(
        stderr.contains("supplied: 2 age identities, 0 OpenPGP keys"),
        "{stderr}"
    );
    for secret in ["gener4tor", "lic-0123", "AGE-SECRET-KEY"] {
        assert!(!stderr.contains(secret), "{stderr}");
    }
    let not_a_key = fixtures.join("plain/stores/app.yaml");
    let (ok, _, stderr) = build(&[
        dir.to_str().unwrap(),
        "--sops-key",
        not_a_key.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(stderr.contains("failed to import SOPS key"), "{stderr}");
    assert!(!stderr.contains("s3cr3t"), "{stderr}");
}

#[test]
fn decrypt_prints_what_sops_prints_or_fails_without_output() {
    let fixtures = sops_fixtures();
    let run = |file: &str, key: &str| {
        Command::new(BINARY)
            .args([
                "decrypt",
                fixtures.join(file).to_str().unwrap(),
                "--sops-key",
            ])
            .arg(fixtures.join("keys").join(key))
            .output()
            .expect("run kustomize-controller decrypt")
    };
    let ok = run("encrypted/stores/app.ini", "age-1.agekey");
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert_eq!(
        ok.stdout,
        std::fs::read(fixtures.join("expected/stores/app.ini")).unwrap()
    );
    let wrong = run("encrypted/stores/app.ini", "pgp-rsa.asc");
    assert!(!wrong.status.success());
    assert!(wrong.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        stderr.contains("app.ini") && stderr.contains("0 age identities, 1 OpenPGP key"),
        "{stderr}"
    );
}

#[test]
fn secrets_encrypted_by_comment_regex_build_decrypted_never_as_ciphertext() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sops-comment-regex");
    let key = dir.join("test.agekey");
    let (ok, docs, stderr) = build(&[dir.to_str().unwrap(), "--sops-key", key.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert_eq!(names(&docs).len(), 2);
    let text = serde_json::to_string(&docs).unwrap();
    assert!(!text.contains("ENC["), "{text}");
    assert!(text.contains("hunter2-enc-comment") && text.contains("hunter2-unenc-comment"));
}

#[test]
fn files_encrypted_with_comment_rules_decrypt_as_sops_decrypts_them() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sops-comment-regex");
    for file in [
        "enc-comment.yaml",
        "unenc-comment.yaml",
        "app-enc-comment.json",
        "app-unenc-comment.json",
    ] {
        let out = Command::new(BINARY)
            .arg("decrypt")
            .arg(dir.join(file))
            .arg("--sops-key")
            .arg(dir.join("test.agekey"))
            .output()
            .expect("run kustomize-controller decrypt");
        assert!(
            out.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let expected = std::fs::read(dir.join("expected").join(file)).unwrap();
        assert_eq!(out.stdout, expected, "{file}");
    }
}
