//! The offline commands under hostile input: files that are not regular files, a Kustomization
//! the API server would refuse, names with control characters. Each must end with a clear
//! error naming what is at fault, never hang, never echo raw terminal controls.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BINARY: &str = env!("CARGO_BIN_EXE_kustomize-controller");

/// Far longer than any of these runs takes; only a hang reaches it.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// Runs the binary with `args`, killing it (and failing the test) if it hangs.
fn run(args: &[&str]) -> Output {
    let mut child = Command::new(BINARY)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kustomize-controller");
    let started = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if started.elapsed() > HANG_GUARD {
            let _ = child.kill();
            panic!("kustomize-controller {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// A real age identity, so that key loading succeeds and the file under test is reached.
const AGE_KEY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/sops/keys/age-1.agekey"
);

fn app(dir: &Path) -> String {
    write(
        &dir.join("app/kustomization.yaml"),
        "resources: [cm.yaml]\n",
    );
    write(
        &dir.join("app/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n",
    );
    dir.join("app").to_str().expect("utf-8").to_string()
}

#[test]
fn fifos_given_on_the_command_line_are_refused_without_blocking() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("pipe.yaml");
    mkfifo(&fifo);
    let fifo = fifo.to_str().expect("utf-8");
    let app = app(dir.path());
    for args in [
        vec!["decrypt", fifo, "--sops-key", AGE_KEY],
        vec!["decrypt", AGE_KEY, "--sops-key", fifo],
        vec!["build", &app, "--sops-key", fifo],
        vec!["build", &app, "--kustomization", fifo],
        vec!["build", &app, "--var-file", fifo],
    ] {
        let output = run(&args);
        assert!(!output.status.success(), "{args:?} succeeded");
        assert!(output.stdout.is_empty(), "{args:?} printed output");
        let message = stderr(&output);
        assert!(
            message.contains("pipe.yaml") && message.contains("named pipe (FIFO)"),
            "{args:?}: {message}"
        );
    }
}

#[test]
fn devices_given_on_the_command_line_are_refused_without_reading_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let zero = dir.path().join("zero.agekey");
    std::os::unix::fs::symlink("/dev/zero", &zero).expect("symlink");
    let output = run(&[
        "decrypt",
        "/dev/zero",
        "--sops-key",
        zero.to_str().expect("utf-8"),
    ]);
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(
        message.contains("zero.agekey") && message.contains("character device"),
        "{message}"
    );
}

#[test]
fn an_oversized_sops_file_is_refused_from_its_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big = dir.path().join("big.yaml");
    // Sparse: 1.5 GiB that is never read.
    let file = std::fs::File::create(&big).expect("create");
    file.set_len(3 << 29).expect("set_len");
    let output = run(&[
        "decrypt",
        big.to_str().expect("utf-8"),
        "--sops-key",
        AGE_KEY,
    ]);
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(
        message.contains("big.yaml") && message.contains("larger than the limit of 5 MiB"),
        "{message}"
    );
}

#[test]
fn a_kustomization_the_api_server_would_refuse_is_refused_offline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = app(dir.path());
    let ks = dir.path().join("ks.yaml");
    let long = "n".repeat(64);
    write(
        &ks,
        &format!(
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\n\
             metadata: {{name: app, namespace: flux-system}}\n\
             spec:\n  interval: 5 minutes\n  prune: true\n  path: ./app\n\
             \x20 sourceRef: {{kind: GitRepository, name: repo}}\n  targetNamespace: {long}\n"
        ),
    );
    let ks = ks.to_str().expect("utf-8");
    let root = dir.path().to_str().expect("utf-8");
    let output = run(&["build", &app, "--kustomization", ks, "--root", root]);
    assert!(!output.status.success());
    assert!(output.stdout.is_empty());
    let message = stderr(&output);
    for expected in [
        "ks.yaml: The Kustomization \"app\" is invalid",
        "spec.targetNamespace: Too long: may not be more than 63 bytes",
        "spec.interval: Invalid value: \"5 minutes\"",
    ] {
        assert!(message.contains(expected), "{expected:?} not in {message}");
    }

    let typo = dir.path().join("typo.yaml");
    write(
        &typo,
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\n\
         metadata: {name: app}\nspec:\n  interval: 5m\n  prune: true\n  sourceRef: {kind: GitRepository, name: repo}\n  targetNamspace: apps\n",
    );
    let output = run(&[
        "build",
        &app,
        "--kustomization",
        typo.to_str().expect("utf-8"),
        "--root",
        root,
    ]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("unknown field \"spec.targetNamspace\""),
        "{}",
        stderr(&output)
    );

    let v2 = dir.path().join("v2.yaml");
    write(
        &v2,
        "apiVersion: kustomize.toolkit.fluxcd.io/v2\nkind: Kustomization\nmetadata: {name: app}\nspec: {}\n",
    );
    let output = run(&[
        "build",
        &app,
        "--kustomization",
        v2.to_str().expect("utf-8"),
        "--root",
        root,
    ]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains(
            "no matches for kind \"Kustomization\" in version \"kustomize.toolkit.fluxcd.io/v2\""
        ),
        "{}",
        stderr(&output)
    );
}

#[test]
fn control_characters_in_file_names_are_escaped_in_messages() {
    let dir = tempfile::tempdir().expect("tempdir");
    let name = dir.path().join("evil\x1b[2Jname.agekey");
    mkfifo(&name);
    let output = run(&[
        "decrypt",
        AGE_KEY,
        "--sops-key",
        name.to_str().expect("utf-8"),
    ]);
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(!message.contains('\x1b'), "raw ESC in {message:?}");
    assert!(message.contains("evil\\u{1b}[2Jname.agekey"), "{message}");
}
