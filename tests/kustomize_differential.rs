//! Differential tests: `kustomize-controller build DIR` against the real kustomize v5.8 CLI.
//!
//! Every directory under `tests/fixtures/kustomize/` is a fixture: a `case.json` (`description`,
//! `builds`: directories relative to the fixture to build, `expect`: `success` or `error`) next to
//! the kustomization trees. For each build directory both tools run from the fixture directory:
//!
//! - reference: `kustomize build --reorder none <build>` (FIFO order, what the library does);
//!   the binary comes from `tests/kustomize/install-kustomize.sh`, built once per machine;
//! - ours: `kustomize-controller build <build>`.
//!
//! Both must succeed or both must fail, and the reference must do what `case.json` says (so a
//! fixture that silently stopped exercising its feature is noticed). On success the outputs are
//! parsed as YAML streams and compared document by document, in order. The output text is also
//! compared byte for byte; a difference there is only reported, unless `KC_DIFF_STRICT_BYTES=1`.
//!
//! Environment overrides:
//! - `KC_DIFF_OURS`: the command to test instead of ours, split on whitespace; the build directory
//!   is appended. `KC_DIFF_OURS="kustomize build --reorder none"` checks the harness itself.
//! - `KC_DIFF_KUSTOMIZE`: a reference kustomize binary to use instead of installing one.
//! - `KC_DIFF_STRICT_BYTES=1`: fail on byte differences too.
//!
//! The tests never skip: if the reference binary cannot be had, they panic with the reason.

mod support;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::OnceLock;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

/// Env var: command line replacing ours.
const OURS_ENV: &str = "KC_DIFF_OURS";
/// Env var: reference kustomize binary replacing the installed one.
const KUSTOMIZE_ENV: &str = "KC_DIFF_KUSTOMIZE";
/// Env var: make byte-for-byte differences fatal.
const STRICT_BYTES_ENV: &str = "KC_DIFF_STRICT_BYTES";
/// Longest a single build may take before it is killed and reported.
const BUILD_TIMEOUT: Duration = Duration::from_secs(120);
/// At most this many differing paths are listed per document.
const MAX_LISTED_PATHS: usize = 40;

/// One test per fixture directory. `every_fixture_has_a_test` keeps this list complete.
macro_rules! fixtures {
    ($($test:ident => $dir:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                check_fixture($dir);
            }
        )*
        /// Fixture directories that have a test above.
        const LISTED: &[&str] = &[$($dir),*];
    };
}

fixtures! {
    base_overlays => "base-overlays",
    binary_scalars => "binary-scalars",
    builtin_plugins => "builtin-plugins",
    components => "components",
    crds => "crds",
    empty_metadata => "empty-metadata",
    typed_metadata => "typed-metadata",
    written_scalars => "written-scalars",
    generators => "generators",
    kustomization_field_case => "kustomization-field-case",
    kustomization_null_fields => "kustomization-null-fields",
    patches => "patches",
    rbac => "rbac",
    replacements => "replacements",
    services_webhooks => "services-webhooks",
    yaml_edge_cases => "yaml-edge-cases",
    error_binary_invalid => "error-binary-invalid",
    error_duplicate_id => "error-duplicate-id",
    error_missing_resource => "error-missing-resource",
    error_patch_no_match => "error-patch-no-match",
    error_unknown_field => "error-unknown-field",
    json6902_library_rules => "json6902-library-rules",
    error_json6902_refusals => "error-json6902-refusals",
    kustomization_first_document => "kustomization-first-document",
    error_empty_kustomization => "error-empty-kustomization",
    error_ancestor_cycle => "error-ancestor-cycle",
    lenient_config_files => "lenient-config-files",
    error_config_file_schema => "error-config-file-schema",
    go_regexp_selectors => "go-regexp-selectors",
    json6902_absent_annotations => "json6902-absent-annotations",
    error_json6902_absent_labels => "error-json6902-absent-labels",
    whole_number_floats => "whole-number-floats",
}

#[test]
fn every_fixture_has_a_test() {
    let root = fixtures_root();
    let mut on_disk: Vec<String> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", root.display()))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = LISTED.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(
        on_disk, listed,
        "fixture directories and the fixtures! list in this file differ"
    );
}

/// `case.json` of a fixture.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    /// What the fixture exercises (documentation only).
    #[allow(dead_code)]
    description: String,
    /// Directories to build, relative to the fixture directory.
    builds: Vec<String>,
    /// What the reference kustomize does with every build.
    expect: Expect,
    /// For an error case, what each build's error must name in both tools' messages: the
    /// file, field, object or path at fault (the two word their errors differently). Both
    /// failing for different causes is a difference.
    #[serde(default)]
    causes: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Deserialize, PartialEq, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Expect {
    Success,
    Error,
}

/// What one run of a build command produced.
struct Outcome {
    /// How the command was started, for messages.
    command: String,
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

fn fixtures_root() -> PathBuf {
    support::repo_root().join("tests/fixtures/kustomize")
}

/// Runs every build of one fixture through both tools; panics listing every mismatch.
fn check_fixture(name: &str) {
    let dir = fixtures_root().join(name);
    let case_path = dir.join("case.json");
    let text = std::fs::read_to_string(&case_path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", case_path.display()));
    let case: Case = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("invalid {}: {e}", case_path.display()));
    assert!(!case.builds.is_empty(), "{name}: case.json lists no builds");

    for build in &case.builds {
        let named = case.causes.get(build).is_some_and(|c| !c.is_empty());
        assert!(
            named == (case.expect == Expect::Error),
            "{name}/{build}: case.json must name the cause (`causes`) of every build that fails, \
             and of no other"
        );
    }
    let no_cause = Vec::new();
    let mut failures = Vec::new();
    for build in &case.builds {
        let cause = case.causes.get(build).unwrap_or(&no_cause);
        if let Err(report) = check_build(name, &dir, build, case.expect, cause) {
            failures.push(report);
        }
    }
    if !failures.is_empty() {
        panic!(
            "{} of {} build(s) of fixture {name} differ from kustomize:\n\n{}",
            failures.len(),
            case.builds.len(),
            failures.join("\n\n")
        );
    }
}

/// Compares one build directory; `Err` is a readable report of what differs. When both fail,
/// each of `cause` must be in both error messages.
fn check_build(
    fixture: &str,
    dir: &Path,
    build: &str,
    expect: Expect,
    cause: &[String],
) -> Result<(), String> {
    let label = format!("{fixture}/{build}");
    let reference = run(&reference_command(), dir, build);
    let ours = run(&ours_command(), dir, build);

    let reference_ok = reference.status.success();
    match (expect, reference_ok) {
        (Expect::Success, false) => panic!(
            "{label}: case.json expects success but the reference kustomize failed \
             (fix the fixture):\n{}",
            reference.stderr.trim()
        ),
        (Expect::Error, true) => panic!(
            "{label}: case.json expects an error but the reference kustomize succeeded \
             (fix the fixture); its output:\n{}",
            reference.stdout
        ),
        _ => {}
    }

    match (reference_ok, ours.status.success()) {
        (false, false) => {
            ensure_ours_builds_something();
            let unnamed: Vec<String> = [("kustomize", &reference), ("ours", &ours)]
                .iter()
                .flat_map(|(tool, outcome)| {
                    cause
                        .iter()
                        .filter(|part| !outcome.stderr.contains(part.as_str()))
                        .map(move |part| format!("{tool} does not name {part:?}"))
                })
                .collect();
            if !unnamed.is_empty() {
                return Err(format!(
                    "[{label}] both failed, not for the same cause: {}.\n--- kustomize stderr:\n{}\n\
                     --- ours stderr:\n{}",
                    unnamed.join(", "),
                    reference.stderr.trim(),
                    ours.stderr.trim()
                ));
            }
            eprintln!(
                "[{label}] both failed as expected.\n  kustomize: {}\n  ours:      {}",
                first_line(&reference.stderr),
                first_line(&ours.stderr)
            );
            Ok(())
        }
        (false, true) => Err(format!(
            "[{label}] kustomize failed but ours succeeded.\n--- kustomize stderr:\n{}\n\
             --- ours ({}) stdout:\n{}",
            reference.stderr.trim(),
            ours.command,
            ours.stdout
        )),
        (true, false) => Err(format!(
            "[{label}] kustomize succeeded but ours failed ({}; {}).\n--- ours stderr:\n{}",
            ours.command,
            ours.status,
            ours.stderr.trim()
        )),
        (true, true) => {
            compare_bytes(&label, &reference.stdout, &ours.stdout)?;
            compare_documents(&label, &reference.stdout, &ours.stdout)
        }
    }
}

/// The reference kustomize binary: `KC_DIFF_KUSTOMIZE`, else the one the install script builds
/// (run once per test process).
fn reference_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        support::reference_tool(KUSTOMIZE_ENV, "tests/kustomize/install-kustomize.sh")
    })
}

/// Panics unless ours builds a trivial kustomization (checked once per process): without this, an
/// error fixture would pass against a command that cannot build anything at all.
fn ensure_ours_builds_something() {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    let result = PROBE.get_or_init(|| {
        let dir = tempfile::tempdir().map_err(|e| format!("cannot create a temp dir: {e}"))?;
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text)
                .map_err(|e| format!("cannot write the probe's {name}: {e}"))
        };
        write("kustomization.yaml", "resources:\n  - cm.yaml\n")?;
        write(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\n",
        )?;
        let outcome = run(&ours_command(), dir.path(), ".");
        if outcome.status.success() {
            Ok(())
        } else {
            Err(format!(
                "`{}` cannot build a one-ConfigMap kustomization ({}), so its failing here \
                 proves nothing:\n{}",
                outcome.command,
                outcome.status,
                outcome.stderr.trim()
            ))
        }
    });
    if let Err(reason) = result {
        panic!("{reason}");
    }
}

fn reference_command() -> Vec<OsString> {
    vec![
        reference_binary().as_os_str().to_owned(),
        "build".into(),
        "--reorder".into(),
        "none".into(),
    ]
}

/// Our command: `KC_DIFF_OURS` split on whitespace, else the crate's binary with `build`.
fn ours_command() -> Vec<OsString> {
    match std::env::var(OURS_ENV) {
        Ok(line) if !line.trim().is_empty() => {
            line.split_whitespace().map(OsString::from).collect()
        }
        _ => vec![
            env!("CARGO_BIN_EXE_kustomize-controller").into(),
            "build".into(),
        ],
    }
}

/// Runs `command build` in `dir`, with a timeout; panics only if the command cannot start.
fn run(command: &[OsString], dir: &Path, build: &str) -> Outcome {
    let (program, args) = command.split_first().expect("empty command");
    let shown = format!(
        "{} {build}",
        command
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let finished = support::bounded::run(
        Command::new(program).args(args).arg(build).current_dir(dir),
        BUILD_TIMEOUT,
    )
    .unwrap_or_else(|e| panic!("cannot start `{shown}` in {}: {e}", dir.display()))
    .unwrap_or_else(|| {
        panic!(
            "`{shown}` in {} took longer than {BUILD_TIMEOUT:?}",
            dir.display()
        )
    });
    Outcome {
        command: shown,
        status: finished.status,
        stdout: finished.stdout,
        stderr: finished.stderr,
    }
}

/// Informational unless `KC_DIFF_STRICT_BYTES=1`: reports the first differing line.
fn compare_bytes(label: &str, reference: &str, ours: &str) -> Result<(), String> {
    if reference == ours {
        eprintln!("[{label}] output identical byte for byte");
        return Ok(());
    }
    let report = format!(
        "[{label}] output differs byte for byte (the YAML documents are compared next):\n{}",
        first_text_difference(reference, ours)
    );
    if std::env::var(STRICT_BYTES_ENV).is_ok_and(|v| v == "1") {
        return Err(report);
    }
    eprintln!("{report}");
    Ok(())
}

/// The first differing line of two texts with a little context before it.
fn first_text_difference(reference: &str, ours: &str) -> String {
    let left: Vec<&str> = reference.split('\n').collect();
    let right: Vec<&str> = ours.split('\n').collect();
    let at = left
        .iter()
        .zip(&right)
        .position(|(a, b)| a != b)
        .unwrap_or(left.len().min(right.len()));
    let mut out = String::new();
    for line in &left[at.saturating_sub(3)..at] {
        let _ = writeln!(out, "      {line}");
    }
    let _ = writeln!(
        out,
        "  line {}:\n    kustomize: {:?}\n    ours:      {:?}",
        at + 1,
        left.get(at).copied().unwrap_or("<end of output>"),
        right.get(at).copied().unwrap_or("<end of output>")
    );
    out
}

/// Parses both outputs and compares them document by document, in order.
fn compare_documents(label: &str, reference: &str, ours: &str) -> Result<(), String> {
    let expected = parse_stream(reference).unwrap_or_else(|e| {
        panic!("[{label}] cannot parse the reference kustomize output as YAML: {e}\n{reference}")
    });
    let actual = parse_stream(ours)
        .map_err(|e| format!("[{label}] our output is not a valid YAML stream: {e}\n{ours}"))?;

    let mut report = String::new();
    if expected.len() != actual.len() {
        let _ = writeln!(
            report,
            "[{label}] kustomize printed {} document(s), ours {}.\n  kustomize: {}\n  ours:      {}",
            expected.len(),
            actual.len(),
            ids(&expected),
            ids(&actual)
        );
    }
    for (index, (want, got)) in expected.iter().zip(&actual).enumerate() {
        if want != got {
            let _ = writeln!(report, "{}", document_report(label, index, want, got));
        }
    }
    if report.is_empty() {
        Ok(())
    } else {
        Err(report)
    }
}

/// Every document of a YAML stream, in order (empty documents included, as nulls). Parsed with
/// serde-saphyr directly rather than the crate's reader, so the judge is independent of the code
/// under test.
fn parse_stream(text: &str) -> Result<Vec<Value>, String> {
    serde_saphyr::from_multiple::<Value>(text).map_err(|e| e.to_string())
}

/// `Kind namespace/name` of each document, for a one-line overview.
fn ids(docs: &[Value]) -> String {
    docs.iter().map(id).collect::<Vec<_>>().join(", ")
}

fn id(doc: &Value) -> String {
    let text = |pointer: &str| doc.pointer(pointer).and_then(Value::as_str).unwrap_or("");
    let namespace = text("/metadata/namespace");
    let name = text("/metadata/name");
    let kind = text("/kind");
    if namespace.is_empty() {
        format!("{kind} {name}")
    } else {
        format!("{kind} {namespace}/{name}")
    }
}

/// The differing paths of one document, then both documents as pretty JSON.
fn document_report(label: &str, index: usize, want: &Value, got: &Value) -> String {
    let mut paths = Vec::new();
    diff_paths(String::new(), want, got, &mut paths);
    let mut out = format!(
        "[{label}] document {index} differs (kustomize: {}, ours: {}):\n",
        id(want),
        id(got)
    );
    for line in paths.iter().take(MAX_LISTED_PATHS) {
        let _ = writeln!(out, "  {line}");
    }
    if paths.len() > MAX_LISTED_PATHS {
        let _ = writeln!(out, "  ... and {} more", paths.len() - MAX_LISTED_PATHS);
    }
    let _ = writeln!(out, "--- kustomize document {index}:\n{}", pretty(want));
    let _ = write!(out, "--- ours document {index}:\n{}", pretty(got));
    out
}

fn pretty(doc: &Value) -> String {
    serde_json::to_string_pretty(doc).unwrap_or_else(|e| format!("<unprintable: {e}>"))
}

/// Collects `path: kustomize <value> / ours <value>` lines for every place the two values differ.
fn diff_paths(path: String, want: &Value, got: &Value, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                let child = format!("{path}/{}", escape_pointer(key));
                match b.get(key) {
                    Some(other) => diff_paths(child, value, other, out),
                    None => out.push(format!("{child}: missing in ours (kustomize: {value})")),
                }
            }
            for (key, value) in b {
                if !a.contains_key(key) {
                    let child = format!("{path}/{}", escape_pointer(key));
                    out.push(format!("{child}: only in ours ({value})"));
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff_paths(format!("{path}/{i}"), x, y, out);
            }
            if a.len() != b.len() {
                out.push(format!(
                    "{path}: kustomize has {} item(s), ours {}",
                    a.len(),
                    b.len()
                ));
            }
        }
        _ if want != got => {
            let shown = if path.is_empty() { "/" } else { &path };
            out.push(format!("{shown}: kustomize {want} / ours {got}"));
        }
        _ => {}
    }
}

/// JSON pointer escaping of one key (`~` and `/`).
fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn first_line(text: &str) -> &str {
    text.lines()
        .find(|l| l.starts_with("Error") || l.starts_with("error"))
        .or_else(|| text.lines().next())
        .unwrap_or("")
}

#[test]
fn diff_paths_names_each_difference() {
    let want = serde_json::json!({"a": {"b": 1, "c": [1, 2]}, "k/x": "s"});
    let got = serde_json::json!({"a": {"b": 2, "c": [1]}, "d": true});
    let mut paths = Vec::new();
    diff_paths(String::new(), &want, &got, &mut paths);
    assert_eq!(
        paths,
        vec![
            "/a/b: kustomize 1 / ours 2",
            "/a/c: kustomize has 2 item(s), ours 1",
            "/k~1x: missing in ours (kustomize: \"s\")",
            "/d: only in ours (true)",
        ]
    );
}

#[test]
fn yaml_streams_keep_quoted_scalars_as_strings() {
    // The judge must tell `"0755"` from `0755` and `"on"` from `on` (YAML 1.1 booleans, which Go
    // YAML readers still honour). Sexagesimal `1:20` is a string either way: only the byte
    // comparison notices a missing quote there.
    let text =
        "a: \"0755\"\nb: 0755\nc: \"true\"\nd: true\ne: \"on\"\nf: on\ng: yes\n---\nh: \"1:20\"\n";
    let docs = parse_stream(text).expect("valid stream");
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[0]["a"], Value::from("0755"));
    assert_ne!(docs[0]["b"], Value::from("0755"));
    assert_eq!(docs[0]["c"], Value::from("true"));
    assert_eq!(docs[0]["d"], Value::Bool(true));
    assert_eq!(docs[0]["e"], Value::from("on"));
    assert_eq!(docs[0]["f"], Value::Bool(true));
    assert_eq!(docs[0]["g"], Value::Bool(true));
    assert_eq!(docs[1]["h"], Value::from("1:20"));
}

#[test]
fn first_text_difference_points_at_the_line() {
    let report = first_text_difference("a\nb\nc\n", "a\nb\nx\n");
    assert!(report.contains("line 3"), "{report}");
    assert!(
        report.contains("\"c\"") && report.contains("\"x\""),
        "{report}"
    );
}
