//! The offline commands under hostile input: files that are not regular files, a Kustomization
//! the API server would refuse, names with control characters. Each must end with a clear
//! error naming what is at fault, never hang, never echo raw terminal controls.

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::hostile::{
    alias_bomb, alias_tree, big_variable, deep_nesting, kustomization, mkfifo, self_copy_patch,
    substitution_bomb, write,
};

const BINARY: &str = env!("CARGO_BIN_EXE_kustomize-controller");

/// The address space the offline build gets in the bomb tests: each bomb needs far more
/// expanded, the bounded build far less.
const ADDRESS_SPACE_KIB: u64 = 1 << 20;

/// Far longer than any of these runs takes; only a hang reaches it.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// Runs the binary with `args`, killing it (and failing the test) if it hangs.
fn run(args: &[&str]) -> Output {
    run_command(Command::new(BINARY).args(args), args)
}

/// Runs the binary with `args` in an address space of [`ADDRESS_SPACE_KIB`].
fn run_bounded(args: &[&str]) -> Output {
    let script = format!("ulimit -v {ADDRESS_SPACE_KIB} && exec \"$0\" \"$@\"");
    run_command(
        Command::new("sh").args(["-c", &script, BINARY]).args(args),
        args,
    )
}

fn run_command(command: &mut Command, args: &[&str]) -> Output {
    let mut child = command
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

/// Builds `dir` with `extra` arguments within [`ADDRESS_SPACE_KIB`], and returns the error:
/// the build must fail cleanly (exit status 1, nothing on stdout), not abort or be killed.
fn bounded_build_error(dir: &Path, extra: &[&str]) -> String {
    let dir = dir.to_str().expect("utf-8");
    let mut args = vec!["build", dir];
    args.extend_from_slice(extra);
    let output = run_bounded(&args);
    let message = stderr(&output);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{args:?} did not fail cleanly ({}): {message}",
        output.status
    );
    assert!(output.stdout.is_empty(), "{args:?} printed output");
    assert!(message.len() < 4096, "a message of {} bytes", message.len());
    message
}

#[test]
fn kustomization_cycles_are_reported_with_their_chain() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(
        &root.join("self/kustomization.yaml"),
        &kustomization("resources: [.]\n"),
    );
    write(
        &root.join("empty/kustomization.yaml"),
        &kustomization("resources: [\"\"]\n"),
    );
    write(
        &root.join("pair/a/kustomization.yaml"),
        &kustomization("resources: [../b]\n"),
    );
    write(
        &root.join("pair/b/kustomization.yaml"),
        &kustomization("resources: [../a]\n"),
    );
    for (from, to) in [("a", "b"), ("b", "c"), ("c", "a")] {
        write(
            &root.join(format!("ring/{from}/kustomization.yaml")),
            &kustomization(&format!("resources: [../{to}]\n")),
        );
    }
    write(
        &root.join("component/kustomization.yaml"),
        &kustomization("components: [comp]\n"),
    );
    write(
        &root.join("component/comp/kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncomponents: [.]\n",
    );
    let root_arg = format!("--root={}", root.display());
    for case in ["self", "pair/a", "ring/a", "component"] {
        let message = bounded_build_error(&root.join(case), &[&root_arg]);
        assert!(message.contains("cycle detected"), "{case}: {message}");
    }
    let message = bounded_build_error(&root.join("ring/a"), &[&root_arg]);
    assert!(
        message.contains("ring/a -> ring/b -> ring/c -> ring/a"),
        "{message}"
    );
    // kustomize refuses the empty entry before it could loop.
    let message = bounded_build_error(&root.join("empty"), &[&root_arg]);
    assert!(message.contains("new root cannot be empty"), "{message}");
    // The controller's own build path.
    let ks = root.join("ks.yaml");
    write(
        &ks,
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: app}\n\
         spec: {interval: 5m, prune: true, path: ./pair/a, sourceRef: {kind: GitRepository, name: repo}}\n",
    );
    let message = bounded_build_error(
        &root.join("pair/a"),
        &[&root_arg, "--kustomization", ks.to_str().expect("utf-8")],
    );
    assert!(message.contains("cycle"), "{message}");
}

#[test]
fn memory_bombs_end_with_a_clear_error_within_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(
        &root.join("alias/kustomization.yaml"),
        &kustomization("resources: [bomb.yaml]\n"),
    );
    write(&root.join("alias/bomb.yaml"), &alias_bomb());
    write(
        &root.join("tree/kustomization.yaml"),
        &kustomization("resources: [tree.yaml]\n"),
    );
    write(&root.join("tree/tree.yaml"), &alias_tree());
    let (patch, grow) = self_copy_patch();
    write(&root.join("patch/kustomization.yaml"), &patch);
    write(&root.join("patch/cm.yaml"), &grow);
    write(
        &root.join("deep/kustomization.yaml"),
        &kustomization("resources: [deep.yaml]\n"),
    );
    write(&root.join("deep/deep.yaml"), &deep_nesting());
    for (case, names) in [
        ("alias", "bomb.yaml"),
        ("tree", "tree.yaml"),
        ("patch", "grow"),
        ("deep", "deep.yaml"),
    ] {
        let message = bounded_build_error(&root.join(case), &[]);
        assert!(message.contains(names), "{case}: {message}");
    }

    write(
        &root.join("subst/kustomization.yaml"),
        &kustomization("resources: [cm.yaml]\n"),
    );
    write(&root.join("subst/cm.yaml"), &substitution_bomb("default"));
    let vars = root.join("vars.env");
    write(&vars, &format!("big={}\n", big_variable()));
    let message = bounded_build_error(
        &root.join("subst"),
        &["--var-file", vars.to_str().expect("utf-8")],
    );
    assert!(message.contains("subst"), "{message}");
    assert!(!message.contains(&"s".repeat(64)), "the value is echoed");
}

#[test]
fn special_and_huge_resource_files_are_refused_before_reading() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(
        &root.join("app/kustomization.yaml"),
        &kustomization("resources: [zero.yaml]\n"),
    );
    std::os::unix::fs::symlink("/dev/zero", root.join("app/zero.yaml")).expect("symlink");
    // Without a load restriction (and with the default root, `/`), only its type refuses it.
    let message = bounded_build_error(
        &root.join("app"),
        &["--load-restrictor", "LoadRestrictionsNone"],
    );
    assert!(
        message.contains("zero.yaml") && message.contains("character device"),
        "{message}"
    );

    write(
        &root.join("fifo/kustomization.yaml"),
        &kustomization("resources: [pipe.yaml]\n"),
    );
    mkfifo(&root.join("fifo/pipe.yaml"));
    let message = bounded_build_error(&root.join("fifo"), &[]);
    assert!(
        message.contains("pipe.yaml") && message.contains("named pipe (FIFO)"),
        "{message}"
    );

    write(
        &root.join("huge/kustomization.yaml"),
        &kustomization("resources: [huge.yaml]\n"),
    );
    let huge = std::fs::File::create(root.join("huge/huge.yaml")).expect("create");
    huge.set_len(3 << 29).expect("sparse 1.5 GiB");
    let message = bounded_build_error(&root.join("huge"), &[]);
    assert!(
        message.contains("huge.yaml") && message.contains("larger than the limit of 32 MiB"),
        "{message}"
    );
}
