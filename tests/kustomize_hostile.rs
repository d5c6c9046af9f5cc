//! Hostile inputs to the kustomize engine: each must end in a clear error (never a stack
//! overflow, a hang or unbounded memory). Builds run on a thread with a 1 MiB stack, half of
//! what a tokio worker thread has, so a recursion that only just fits fails here first.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kustomize::target::{self, BuildError, BuildOptions};
use support::hostile::{mkfifo, write};

/// How long a build may run before it counts as hung: a watchdog, not a measure of speed
/// (every build here takes well under a second; `benches/hostile_builds.rs` times them).
const HANG: Duration = Duration::from_secs(300);

/// Builds `dir` under `root` on a thread with a 1 MiB stack and returns the error message
/// (or the objects, as YAML); a build that does not end within [`HANG`] fails the test.
fn build_small_stack(root: &Path, dir: &Path) -> Result<String, String> {
    let (root, dir) = (root.to_path_buf(), dir.to_path_buf());
    let (answer, answered) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || {
            let built = target::build(&root, &dir, &BuildOptions::default())
                .map(|objects| {
                    let values: Vec<serde_json::Value> =
                        objects.into_iter().map(serde_json::Value::Object).collect();
                    goyaml::to_yaml_stream(&values)
                })
                .map_err(|e: BuildError| e.to_string());
            let _ = answer.send(built);
        })
        .expect("spawn build thread");
    match answered.recv_timeout(HANG) {
        Ok(result) => result,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("the build hangs"),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            panic!("the build thread panicked")
        }
    }
}

fn tempdir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical tempdir");
    (dir, root)
}

fn expect_err(result: Result<String, String>, needles: &[&str]) -> String {
    let message = match result {
        Ok(out) => panic!("expected an error, built:\n{out}"),
        Err(message) => message,
    };
    for needle in needles {
        assert!(
            message.contains(needle),
            "error {message:?} does not contain {needle:?}"
        );
    }
    message
}

#[test]
fn a_kustomization_listing_itself_is_a_cycle() {
    let (_keep, root) = tempdir();
    write(&root.join("app/kustomization.yaml"), "resources:\n- .\n");
    let err = build_small_stack(&root, &root.join("app"));
    expect_err(err, &["cycle detected: app -> app"]);
}

#[test]
fn an_empty_resource_entry_is_refused() {
    let (_keep, root) = tempdir();
    write(&root.join("app/kustomization.yaml"), "resources:\n- \"\"\n");
    let err = build_small_stack(&root, &root.join("app"));
    expect_err(err, &["app: resources: an entry is empty"]);
}

#[test]
fn two_directories_listing_each_other_are_a_cycle() {
    let (_keep, root) = tempdir();
    write(&root.join("a/kustomization.yaml"), "resources:\n- ../b\n");
    write(&root.join("b/kustomization.yaml"), "resources:\n- ../a\n");
    let err = build_small_stack(&root, &root.join("a"));
    expect_err(err, &["cycle detected: a -> b -> a"]);
}

#[test]
fn a_longer_cycle_names_the_whole_chain() {
    let (_keep, root) = tempdir();
    write(&root.join("a/kustomization.yaml"), "resources:\n- ../b\n");
    write(&root.join("b/kustomization.yaml"), "resources:\n- ../c\n");
    write(&root.join("c/kustomization.yaml"), "resources:\n- ../a\n");
    let err = build_small_stack(&root, &root.join("a"));
    expect_err(err, &["cycle detected: a -> b -> c -> a"]);
}

#[test]
fn a_base_that_contains_the_kustomization_is_a_cycle() {
    let (_keep, root) = tempdir();
    write(&root.join("a/kustomization.yaml"), "resources:\n- b\n");
    write(&root.join("a/b/kustomization.yaml"), "resources:\n- ..\n");
    let err = build_small_stack(&root, &root.join("a"));
    expect_err(
        err,
        &[
            "cycle detected: a -> a/b -> a",
            "candidate root 'a' contains visited root 'a/b'",
        ],
    );
}

#[test]
fn a_component_listing_itself_is_a_cycle() {
    let (_keep, root) = tempdir();
    write(
        &root.join("app/kustomization.yaml"),
        "resources:\n- cm.yaml\ncomponents:\n- ../comp\n",
    );
    write(
        &root.join("app/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
    );
    write(
        &root.join("comp/kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncomponents:\n- .\n",
    );
    let err = build_small_stack(&root, &root.join("app"));
    expect_err(err, &["cycle detected: app -> comp -> comp"]);
}

#[test]
fn a_directory_reached_twice_without_a_cycle_is_not_one() {
    let (_keep, root) = tempdir();
    write(
        &root.join("app/kustomization.yaml"),
        "resources:\n- ../one\n- ../two\n",
    );
    write(
        &root.join("one/kustomization.yaml"),
        "resources:\n- ../base\nnamePrefix: one-\n",
    );
    write(
        &root.join("two/kustomization.yaml"),
        "resources:\n- ../base\nnamePrefix: two-\n",
    );
    write(
        &root.join("base/kustomization.yaml"),
        "resources:\n- cm.yaml\n",
    );
    write(
        &root.join("base/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
    );
    let out = build_small_stack(&root, &root.join("app")).expect("diamond builds");
    assert!(
        out.contains("name: one-x") && out.contains("name: two-x"),
        "{out}"
    );
}

#[test]
fn a_long_chain_of_nested_directories_is_bounded() {
    let (_keep, root) = tempdir();
    for i in 0..3000 {
        write(
            &root.join(format!("n{i}/kustomization.yaml")),
            &format!("resources:\n- ../n{}\n", i + 1),
        );
    }
    write(&root.join("n3000/kustomization.yaml"), "namePrefix: x-\n");
    let err = build_small_stack(&root, &root.join("n0"));
    expect_err(err, &["nest more than"]);
}

#[test]
fn a_chain_just_under_the_bound_builds_on_a_small_stack() {
    let (_keep, root) = tempdir();
    let depth = target::MAX_KUSTOMIZATION_DEPTH - 1;
    for i in 0..depth {
        write(
            &root.join(format!("n{i}/kustomization.yaml")),
            &format!(
                "resources:\n- ../n{}\ncommonLabels:\n  l{i}: v\npatches:\n- patch: |\n    - op: add\n      path: /data/k{i}\n      value: v\n  target:\n    kind: ConfigMap\n",
                i + 1
            ),
        );
    }
    write(
        &root.join(format!("n{depth}/kustomization.yaml")),
        "resources:\n- cm.yaml\n",
    );
    write(
        &root.join(format!("n{depth}/cm.yaml")),
        &format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: b\ndeep: {}\n",
            deep_flow(goyaml::MAX_DEPTH - 2, true)
        ),
    );
    let out = build_small_stack(&root, &root.join("n0")).expect("builds");
    assert!(
        out.contains("k0: v") && out.contains(&format!("k{}: v", depth - 1)),
        "{out}"
    );
    assert!(out.contains("deep:"), "{out}");
}

/// Nested flow collections `[[[[...]]]]` (or `{a: {a: ...}}`) as deep as `depth`.
fn deep_flow(depth: usize, map: bool) -> String {
    if map {
        format!("{}1{}", "{a: ".repeat(depth), "}".repeat(depth))
    } else {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }
}

#[test]
fn deeply_nested_yaml_in_a_resource_is_refused() {
    for map in [false, true] {
        let (_keep, root) = tempdir();
        write(
            &root.join("app/kustomization.yaml"),
            "resources:\n- cm.yaml\n",
        );
        write(
            &root.join("app/cm.yaml"),
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata: {}\n",
                deep_flow(200_000, map)
            ),
        );
        let err = build_small_stack(&root, &root.join("app"));
        expect_err(err, &["cm.yaml", "nested"]);
    }
}

#[test]
fn deeply_nested_yaml_in_a_kustomization_is_refused() {
    let (_keep, root) = tempdir();
    write(
        &root.join("app/kustomization.yaml"),
        &format!("resources: {}\n", deep_flow(200_000, false)),
    );
    let err = build_small_stack(&root, &root.join("app"));
    expect_err(err, &["kustomization.yaml", "nested"]);
}

#[test]
fn nesting_within_the_bound_survives_every_step_on_a_small_stack() {
    // Just under the YAML nesting bound, through a strategic merge patch (recursive merge),
    // a JSON patch, labels, sorting, serialising and dropping.
    let depth = goyaml::MAX_DEPTH - 8;
    let (_keep, root) = tempdir();
    write(
        &root.join("app/kustomization.yaml"),
        "resources:\n- cm.yaml\npatches:\n- path: smp.yaml\n- patch: '[{\"op\": \"add\", \"path\": \"/spec/b\", \"value\": 1}]'\n  target:\n    kind: Thing\ncommonLabels:\n  a: b\n",
    );
    write(
        &root.join("app/cm.yaml"),
        &format!(
            "apiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: x\nspec:\n  deep: {}\n",
            deep_flow(depth, true)
        ),
    );
    write(
        &root.join("app/smp.yaml"),
        &format!(
            "apiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: x\nspec:\n  deep: {}\n",
            deep_flow(depth, true).replace("1}", "2}")
        ),
    );
    let out = build_small_stack(&root, &root.join("app")).expect("builds");
    assert!(out.contains("a: 2"), "the patch reached the bottom");
}

fn offline_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kustomize-controller"))
}

/// Runs the offline build command with a time bound; returns (success, stdout, stderr).
fn offline_build(dir: &Path) -> (bool, String, String) {
    let mut child = Command::new(offline_binary())
        .arg("build")
        .arg(dir)
        .arg("--root")
        .arg(dir.parent().expect("parent"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the offline build");
    let started = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if started.elapsed() > HANG {
            child.kill().ok();
            panic!("the offline build of {} hangs", dir.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().expect("output");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn the_offline_build_reports_cycles_and_depth() {
    let (_keep, root) = tempdir();
    write(&root.join("self/kustomization.yaml"), "resources:\n- .\n");
    write(&root.join("a/kustomization.yaml"), "resources:\n- ../b\n");
    write(&root.join("b/kustomization.yaml"), "resources:\n- ../a\n");
    write(
        &root.join("deep/kustomization.yaml"),
        &format!("resources: {}\n", deep_flow(500_000, false)),
    );
    for (dir, needle) in [
        ("self", "cycle detected"),
        ("a", "cycle detected: a -> b -> a"),
        ("deep", "nested"),
    ] {
        let (ok, _, stderr) = offline_build(&root.join(dir));
        assert!(!ok, "{dir} built");
        assert!(stderr.contains(needle), "{dir}: {stderr}");
        assert!(!stderr.contains("overflow"), "{dir}: {stderr}");
    }
}

#[cfg(unix)]
#[test]
fn special_files_are_refused_by_name_without_hanging() {
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n";
    let cases: [(&str, &str); 10] = [
        ("resources:\n- special.yaml\n", "special.yaml"),
        (
            "resources:\n- cm.yaml\nopenapi:\n  path: special.yaml\n",
            "special.yaml",
        ),
        (
            "resources:\n- cm.yaml\nreplacements:\n- path: special.yaml\n",
            "special.yaml",
        ),
        (
            "resources:\n- cm.yaml\ntransformers:\n- special.yaml\n",
            "special.yaml",
        ),
        (
            "resources:\n- cm.yaml\npatches:\n- path: special.yaml\n",
            "special.yaml",
        ),
        (
            "resources:\n- cm.yaml\npatchesStrategicMerge:\n- special.yaml\n",
            "special.yaml",
        ),
        (
            "configMapGenerator:\n- name: g\n  files:\n  - special.yaml\n",
            "special.yaml",
        ),
        (
            "secretGenerator:\n- name: g\n  envs:\n  - special.yaml\n",
            "special.yaml",
        ),
        (
            "resources:\n- cm.yaml\nconfigurations:\n- special.yaml\n",
            "special.yaml",
        ),
        (
            "resources:\n- cm.yaml\ncrds:\n- special.yaml\n",
            "special.yaml",
        ),
    ];
    for (kustomization, needle) in cases {
        for special in ["fifo", "zero"] {
            let (_keep, root) = tempdir();
            write(&root.join("app/kustomization.yaml"), kustomization);
            write(&root.join("app/cm.yaml"), cm);
            let path = root.join("app/special.yaml");
            match special {
                "fifo" => mkfifo(&path),
                _ => std::os::unix::fs::symlink("/dev/zero", &path).expect("symlink"),
            }
            let err = build_small_stack(&root, &root.join("app"));
            let message = expect_err(err, &[needle]);
            assert!(
                message.contains("FIFO") || message.contains("outside the root"),
                "{kustomization}: {message}"
            );
        }
    }
}

#[cfg(unix)]
#[test]
fn a_kustomization_file_that_is_a_fifo_is_refused_by_name() {
    let (_keep, root) = tempdir();
    std::fs::create_dir_all(root.join("app")).expect("mkdir");
    mkfifo(&root.join("app/kustomization.yaml"));
    let err = build_small_stack(&root, &root.join("app"));
    expect_err(err, &["app/kustomization.yaml", "FIFO"]);
    let (ok, _, stderr) = offline_build(&root.join("app"));
    assert!(!ok && stderr.contains("FIFO"), "{stderr}");
}

#[cfg(unix)]
#[test]
fn the_offline_build_refuses_a_fifo_resource() {
    let (_keep, root) = tempdir();
    write(
        &root.join("app/kustomization.yaml"),
        "resources:\n- pipe.yaml\n",
    );
    mkfifo(&root.join("app/pipe.yaml"));
    let (ok, _, stderr) = offline_build(&root.join("app"));
    assert!(!ok, "built");
    assert!(
        stderr.contains("pipe.yaml") && stderr.contains("FIFO"),
        "{stderr}"
    );
}

#[test]
fn urls_in_file_fields_are_refused_as_remote() {
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n";
    let cases = [
        (
            "configMapGenerator:\n- name: g\n  files:\n  - https://example.com/a.txt\n",
            "configMapGenerator",
        ),
        (
            "secretGenerator:\n- name: g\n  envs:\n  - git::https://e.com/r//a.env\n",
            "secretGenerator",
        ),
        (
            "configMapGenerator:\n- name: g\n  files:\n  - k=http://e.com/a\n",
            "configMapGenerator",
        ),
        (
            "resources:\n- cm.yaml\npatches:\n- path: https://e.com/p.yaml\n",
            "patches",
        ),
        (
            "resources:\n- cm.yaml\ncrds:\n- github.com/x/crd.yaml\n",
            "crds",
        ),
        (
            "resources:\n- cm.yaml\nconfigurations:\n- https://e.com/c.yaml\n",
            "configurations",
        ),
        (
            "resources:\n- cm.yaml\nopenapi:\n  path: https://e.com/s.json\n",
            "openapi",
        ),
        (
            "resources:\n- cm.yaml\npatchesStrategicMerge:\n- https://e.com/p.yaml\n",
            "patchesStrategicMerge",
        ),
        (
            "resources:\n- cm.yaml\nreplacements:\n- path: https://e.com/r.yaml\n",
            "replacements",
        ),
    ];
    for (kustomization, field) in cases {
        let (_keep, root) = tempdir();
        write(&root.join("app/kustomization.yaml"), kustomization);
        write(&root.join("app/cm.yaml"), cm);
        let err = build_small_stack(&root, &root.join("app"));
        let message = expect_err(err, &["is a URL", "remote files are not supported"]);
        assert!(message.starts_with("app: "), "{message}");
        assert!(message.contains(field), "{message}");
    }
}

/// 500 small ConfigMaps, one file.
fn many_config_maps() -> String {
    (0..500)
        .map(|i| {
            format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: t{i}\ndata:\n  a: b\n"
            )
        })
        .collect()
}

fn big_config_map(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  big: {}\n",
        "x".repeat(1 << 20)
    )
}

/// Builds each bomb: it must fail quickly with `needle` in the message.
fn expect_bomb_refused(files: &[(&str, String)], needles: &[&str]) {
    let (_keep, root) = tempdir();
    for (name, text) in files {
        write(&root.join("app").join(name), text);
    }
    // Refused by a budget, which the needles name: the work is bounded by the budget, not by
    // the input (the time it takes is in `benches/hostile_builds.rs`).
    let err = build_small_stack(&root, &root.join("app"));
    expect_err(err, needles);
}

#[test]
fn alias_bombs_are_refused_by_bytes() {
    let lines = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: &a {}\n  l: [{}]\n",
        "x".repeat(1 << 20),
        vec!["*a"; 1500].join(", ")
    );
    expect_bomb_refused(
        &[
            ("kustomization.yaml", "resources:\n- cm.yaml\n".into()),
            ("cm.yaml", lines),
        ],
        &["app/cm.yaml", "excessive aliasing"],
    );
    let mut tree = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\nx0: &a0 {}\n",
        "y".repeat(10_000)
    );
    for i in 1..=12 {
        tree.push_str(&format!(
            "x{i}: &a{i} [{}]\n",
            vec![format!("*a{}", i - 1); 4].join(", ")
        ));
    }
    expect_bomb_refused(
        &[
            ("kustomization.yaml", "resources:\n- cm.yaml\n".into()),
            ("cm.yaml", tree),
        ],
        &["app/cm.yaml", "excessive aliasing"],
    );
}

#[test]
fn self_copying_json_patches_are_refused() {
    let ops: Vec<String> = (0..40)
        .map(|i| format!("{{\"op\":\"copy\",\"from\":\"/data\",\"path\":\"/data/c{i}\"}}"))
        .collect();
    expect_bomb_refused(
        &[
            (
                "kustomization.yaml",
                format!(
                    "resources:\n- cm.yaml\npatches:\n- target:\n    kind: ConfigMap\n  patch: '[{}]'\n",
                    ops.join(",")
                ),
            ),
            (
                "cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: b\n".into(),
            ),
        ],
        &["JSON 6902 patch", "would exceed"],
    );
}

#[test]
fn replacements_copying_a_large_value_everywhere_are_refused() {
    expect_bomb_refused(
        &[
            (
                "kustomization.yaml",
                "resources:\n- src.yaml\n- many.yaml\nreplacements:\n- source:\n    kind: ConfigMap\n    name: src\n    fieldPath: data.big\n  targets:\n  - select:\n      kind: ConfigMap\n    fieldPaths:\n    - data.x\n    options:\n      create: true\n".into(),
            ),
            ("src.yaml", big_config_map("src")),
            ("many.yaml", many_config_maps()),
        ],
        &["replacements entry 0", "would copy more than"],
    );
}

#[test]
fn replacement_paths_deeper_than_any_document_are_refused() {
    let path = vec!["a"; 5000].join(".");
    expect_bomb_refused(
        &[
            (
                "kustomization.yaml",
                format!(
                    "resources:\n- cm.yaml\nreplacements:\n- source:\n    kind: ConfigMap\n    name: x\n    fieldPath: data.a\n  targets:\n  - select:\n      kind: ConfigMap\n    fieldPaths:\n    - {path}\n    options:\n      create: true\n"
                ),
            ),
            (
                "cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: b\n".into(),
            ),
        ],
        &["replacements entry 0", "segments"],
    );
}

#[test]
fn vars_expanding_a_large_value_many_times_are_refused() {
    expect_bomb_refused(
        &[
            (
                "kustomization.yaml",
                "resources:\n- src.yaml\n- pod.yaml\nvars:\n- name: A\n  objref:\n    kind: ConfigMap\n    name: src\n    apiVersion: v1\n  fieldref:\n    fieldpath: data.big\n".into(),
            ),
            ("src.yaml", big_config_map("src")),
            (
                "pod.yaml",
                format!(
                    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    image: i\n    args:\n    - \"{}\"\n",
                    "$(A)".repeat(2000)
                ),
            ),
        ],
        &["var references in", "would copy more than"],
    );
}

#[test]
fn large_labels_on_many_objects_are_refused() {
    expect_bomb_refused(
        &[
            (
                "kustomization.yaml",
                format!(
                    "resources:\n- many.yaml\ncommonLabels:\n  a: {}\n",
                    "x".repeat(1 << 20)
                ),
            ),
            ("many.yaml", many_config_maps()),
        ],
        &["labels and annotations", "would copy more than"],
    );
}

#[test]
fn a_large_patch_on_many_targets_is_refused() {
    expect_bomb_refused(
        &[
            (
                "kustomization.yaml",
                "resources:\n- many.yaml\npatches:\n- path: p.yaml\n  target:\n    kind: ConfigMap\n".into(),
            ),
            ("many.yaml", many_config_maps()),
            ("p.yaml", big_config_map("any")),
        ],
        &["applying patch file p.yaml", "would copy more than"],
    );
}

#[test]
fn control_characters_in_names_are_escaped_in_messages() {
    for kustomization in [
        "resources:\n- \"evil\\e]0;owned\\a.yaml\"\n",
        "resources:\n- cm.yaml\npatches:\n- path: \"p\\e[2J.yaml\"\n",
        "resources:\n- \"https://e.com/\\e[2J\"\n",
        "resources:\n- \"../../\\e[2J\"\n",
    ] {
        let (_keep, root) = tempdir();
        write(&root.join("app/kustomization.yaml"), kustomization);
        write(
            &root.join("app/cm.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
        );
        let message = expect_err(build_small_stack(&root, &root.join("app")), &["\\u{1b}"]);
        assert!(
            !message.contains('\u{1b}') && !message.contains('\u{7}'),
            "{message:?}"
        );
    }
}

#[test]
fn paths_outside_the_root_give_one_message_whether_or_not_they_exist() {
    let (_keep, outer) = tempdir();
    let root = outer.join("root");
    write(
        &outer.join("exists.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
    );
    let mut messages = Vec::new();
    for name in ["exists.yaml", "missing.yaml"] {
        write(
            &root.join("app/kustomization.yaml"),
            &format!("resources:\n- ../../{name}\n"),
        );
        let message = expect_err(
            build_small_stack(&root, &root.join("app")),
            &["outside the root"],
        );
        messages.push(message.replace(name, "NAME"));
    }
    assert_eq!(messages[0], messages[1]);
}

#[test]
fn the_flux_build_path_detects_cycles_too() {
    use kustomize::loader::{LoadRestrictions, Loader};
    let (_keep, root) = tempdir();
    write(&root.join("a/kustomization.yaml"), "resources:\n- ../b\n");
    write(&root.join("b/kustomization.yaml"), "resources:\n- ../a\n");
    write(&root.join("self/kustomization.yaml"), "resources:\n- .\n");
    for (dir, needle) in [
        ("a", "cycle detected: a -> b -> a"),
        ("self", "cycle detected: self -> self"),
    ] {
        let root = root.clone();
        let result = std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(move || {
                let loader =
                    Loader::new(&root, LoadRestrictions::None).map_err(|e| e.to_string())?;
                let dir = root.join(dir);
                let kustomization =
                    target::load_kustomization(&loader, &dir).map_err(|e| e.to_string())?;
                target::build_kustomization(&loader, &dir, kustomization)
                    .map(|objects| format!("{} objects", objects.len()))
                    .map_err(|e| e.to_string())
            })
            .expect("spawn")
            .join()
            .expect("the build thread panicked");
        expect_err(result, &[needle]);
    }
}

#[test]
fn copies_adding_up_over_many_kustomizations_are_refused() {
    // Each level stays within the per-step copy budget (a 1 MiB patch on 60 objects), but
    // the levels together hold more than any build is allowed to.
    let (_keep, root) = tempdir();
    let levels = 6;
    let objects: String = (0..60)
        .map(|i| format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: t{i}\n"))
        .collect();
    write(
        &root.join(format!("l{levels}/kustomization.yaml")),
        "resources:\n- many.yaml\n",
    );
    write(&root.join(format!("l{levels}/many.yaml")), &objects);
    for level in 0..levels {
        write(
            &root.join(format!("l{level}/kustomization.yaml")),
            &format!(
                "resources:\n- ../l{}\npatches:\n- path: p.yaml\n  target:\n    kind: ConfigMap\n",
                level + 1
            ),
        );
        write(
            &root.join(format!("l{level}/p.yaml")),
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: any\ndata:\n  k{level}: {}\n",
                "x".repeat(1 << 20)
            ),
        );
    }
    let err = build_small_stack(&root, &root.join("l0"));
    expect_err(err, &["the objects built hold more than"]);
}
