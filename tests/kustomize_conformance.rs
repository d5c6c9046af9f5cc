//! The kustomize conformance corpus: every build that kustomize's own krusty tests make, as
//! `tests/kustomize/extract-conformance.sh` records it from the `sigs.k8s.io/kustomize/api`
//! module (the file tree, the directory built, the load restrictor, and what kustomize
//! produced), built again with `kustomize-controller build`.
//!
//! An output case passes when our build succeeds and its YAML documents equal kustomize's, in
//! order (both read with serde-saphyr, independent of the engine under test; empty documents
//! dropped). An error case passes when our build fails too; kustomize's message is shown, not
//! compared. The cases that pass are listed in `tests/kustomize/conformance-passing.txt`: a
//! listed case that fails is a regression and fails the test; a case that passes unlisted is
//! reported so the list can grow.
//!
//! Environment:
//! - `KC_CONFORMANCE_CORPUS`: a corpus folder to use instead of the extracted one.
//! - `KC_CONFORMANCE_UPDATE=1`: rewrite the list of passing cases from this run.
//! - `KC_CONFORMANCE_VERBOSE=1`: print why each failing case failed, in full.
mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

const CORPUS_ENV: &str = "KC_CONFORMANCE_CORPUS";
const UPDATE_ENV: &str = "KC_CONFORMANCE_UPDATE";
const VERBOSE_ENV: &str = "KC_CONFORMANCE_VERBOSE";
const PASSING_LIST: &str = "tests/kustomize/conformance-passing.txt";
/// Longest one build may take before it is killed and counted as failed.
const BUILD_LIMIT: Duration = Duration::from_secs(60);

/// A case's `case.json`.
#[derive(Deserialize)]
struct Case {
    test: String,
    source: String,
    build: String,
    expect: Expect,
    load_restrictor: String,
    #[serde(default)]
    error_contains: String,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "lowercase")]
enum Expect {
    Output,
    Error,
}

/// What one build did, judged against what kustomize did.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Passed,
    Failed(String),
}

#[test]
fn kustomize_conformance_has_no_regressions() {
    let corpus = support::reference_data(CORPUS_ENV, "tests/kustomize/extract-conformance.sh");
    let names = case_names(&corpus);
    assert!(
        names.len() > 100,
        "the corpus at {} holds only {} cases",
        corpus.display(),
        names.len()
    );
    let results = run_all(&corpus, &names);

    let passed: BTreeSet<&str> = results
        .iter()
        .filter(|(_, _, verdict)| *verdict == Verdict::Passed)
        .map(|(name, _, _)| name.as_str())
        .collect();
    let by_expect = |expect: Expect| {
        let all = results.iter().filter(|(_, e, _)| *e == expect);
        let total = all.clone().count();
        let ok = all.filter(|(_, _, v)| *v == Verdict::Passed).count();
        format!("{ok}/{total}")
    };
    eprintln!(
        "kustomize conformance: {} of {} cases pass (output cases {}, error cases {}); corpus {}",
        passed.len(),
        results.len(),
        by_expect(Expect::Output),
        by_expect(Expect::Error),
        corpus.display()
    );
    let verbose = std::env::var_os(VERBOSE_ENV).is_some_and(|v| v == "1");
    for (name, _, verdict) in &results {
        if let Verdict::Failed(why) = verdict {
            let why = if verbose {
                why.as_str()
            } else {
                why.lines().next().unwrap_or("")
            };
            eprintln!("  failed: {name}: {why}");
        }
    }

    let list_path = support::repo_root().join(PASSING_LIST);
    if std::env::var_os(UPDATE_ENV).is_some_and(|v| v == "1") {
        let text: String = passed.iter().map(|name| format!("{name}\n")).collect();
        std::fs::write(&list_path, text)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", list_path.display()));
        eprintln!("{} passing cases written to {PASSING_LIST}", passed.len());
        return;
    }
    let listed = read_list(&list_path);
    let unknown: Vec<&str> = listed
        .iter()
        .map(String::as_str)
        .filter(|name| !names.iter().any(|n| n == name))
        .collect();
    let newly: Vec<&&str> = passed
        .iter()
        .filter(|name| !listed.contains(**name))
        .collect();
    if !newly.is_empty() {
        eprintln!(
            "{} cases pass and are not in {PASSING_LIST} (add them with {UPDATE_ENV}=1): {newly:?}",
            newly.len()
        );
    }
    let regressions: Vec<&str> = listed
        .iter()
        .map(String::as_str)
        .filter(|name| !passed.contains(name) && !unknown.contains(name))
        .collect();
    assert!(
        unknown.is_empty(),
        "{PASSING_LIST} lists cases the corpus does not have (a different corpus version? \
         rewrite the list with {UPDATE_ENV}=1): {unknown:?}"
    );
    assert!(
        regressions.is_empty(),
        "cases in {PASSING_LIST} that no longer pass (run with {VERBOSE_ENV}=1 for the \
         differences): {regressions:?}"
    );
}

/// The case folders of the corpus (those holding a case.json), sorted.
fn case_names(corpus: &Path) -> Vec<String> {
    let entries = std::fs::read_dir(corpus)
        .unwrap_or_else(|e| panic!("cannot read the corpus at {}: {e}", corpus.display()));
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|entry| entry.path().join("case.json").is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Judges every case, on as many threads as the machine has cores.
fn run_all(corpus: &Path, names: &[String]) -> Vec<(String, Expect, Verdict)> {
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::with_capacity(names.len()));
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(name) = names.get(i) else { break };
                    let (expect, verdict) = run_case(&corpus.join(name));
                    results
                        .lock()
                        .expect("results")
                        .push((name.clone(), expect, verdict));
                }
            });
        }
    });
    let mut results = results.into_inner().expect("results");
    results.sort_by(|a, b| a.0.cmp(&b.0));
    results
}

fn run_case(dir: &Path) -> (Expect, Verdict) {
    let text = std::fs::read_to_string(dir.join("case.json"))
        .unwrap_or_else(|e| panic!("cannot read {}/case.json: {e}", dir.display()));
    let case: Case = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{}/case.json is not a case: {e}", dir.display()));
    let input = dir.join("input");
    let finished = support::bounded::run(
        Command::new(env!("CARGO_BIN_EXE_kustomize-controller"))
            .arg("build")
            .arg("--load-restrictor")
            .arg(&case.load_restrictor)
            .arg(input.join(&case.build))
            .current_dir(&input),
        BUILD_LIMIT,
    )
    .unwrap_or_else(|e| panic!("cannot run kustomize-controller build: {e}"));
    let Some(finished) = finished else {
        return (
            case.expect,
            Verdict::Failed(format!("the build ran longer than {BUILD_LIMIT:?}")),
        );
    };
    let expected = match case.expect {
        Expect::Output => {
            let path = dir.join("expected.yaml");
            Some(
                std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display())),
            )
        }
        Expect::Error => None,
    };
    let verdict = judge(
        &case,
        expected.as_deref(),
        finished.status.success(),
        &finished.stdout,
        &finished.stderr,
    );
    (case.expect, verdict)
}

/// Judges one build: `expected` is kustomize's output (None when kustomize failed).
fn judge(
    case: &Case,
    expected: Option<&str>,
    succeeded: bool,
    stdout: &str,
    stderr: &str,
) -> Verdict {
    let origin = format!("{} in {}", case.test, case.source);
    match (expected, succeeded) {
        (None, false) => Verdict::Passed,
        (None, true) => Verdict::Failed(format!(
            "kustomize fails this build ({}) and ours succeeded ({origin})",
            case.error_contains
        )),
        (Some(_), false) => Verdict::Failed(format!(
            "our build failed where kustomize's succeeded: {} ({origin})",
            stderr.trim()
        )),
        (Some(expected), true) => {
            let want = documents(expected)
                .unwrap_or_else(|e| panic!("kustomize's output for {origin} is not YAML: {e}"));
            match documents(stdout) {
                Err(e) => Verdict::Failed(format!("our output is not YAML: {e} ({origin})")),
                Ok(got) if got == want => Verdict::Passed,
                Ok(got) => Verdict::Failed(first_difference(&want, &got, &origin)),
            }
        }
    }
}

/// The non-empty documents of a YAML stream, in order.
fn documents(text: &str) -> Result<Vec<Value>, String> {
    let docs = serde_saphyr::from_multiple::<Value>(text).map_err(|e| e.to_string())?;
    Ok(docs.into_iter().filter(|doc| !doc.is_null()).collect())
}

fn first_difference(want: &[Value], got: &[Value], origin: &str) -> String {
    if want.len() != got.len() {
        return format!(
            "{} documents where kustomize has {} ({origin})",
            got.len(),
            want.len()
        );
    }
    let (index, (w, g)) = want
        .iter()
        .zip(got)
        .enumerate()
        .find(|(_, (w, g))| w != g)
        .unwrap_or((0, (&Value::Null, &Value::Null)));
    format!(
        "document {index} differs ({origin})\nkustomize:\n{}\nours:\n{}",
        serde_json::to_string_pretty(w).unwrap_or_default(),
        serde_json::to_string_pretty(g).unwrap_or_default()
    )
}

fn read_list(path: &PathBuf) -> BTreeSet<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod judge_tests {
    use super::*;

    fn case() -> Case {
        Case {
            test: "TestX".into(),
            source: "api/krusty/x_test.go".into(),
            build: ".".into(),
            expect: Expect::Output,
            load_restrictor: "LoadRestrictionsRootOnly".into(),
            error_contains: String::new(),
        }
    }

    #[test]
    fn equal_documents_pass_and_empty_documents_are_ignored() {
        let verdict = judge(
            &case(),
            Some("a: 1\n---\nb: x\n"),
            true,
            "---\na: 1\n---\nb: x\n---\n",
            "",
        );
        assert_eq!(verdict, Verdict::Passed);
    }

    #[test]
    fn a_different_value_an_order_or_a_failure_fails() {
        let want = "a: 1\n---\nb: x\n";
        for (succeeded, got) in [
            (true, "a: 2\n---\nb: x\n"),
            (true, "b: x\n---\na: 1\n"),
            (false, ""),
        ] {
            assert!(matches!(
                judge(&case(), Some(want), succeeded, got, "boom"),
                Verdict::Failed(_)
            ));
        }
    }

    #[test]
    fn an_error_case_passes_only_when_ours_fails_too() {
        assert_eq!(judge(&case(), None, false, "", "error"), Verdict::Passed);
        assert!(matches!(
            judge(&case(), None, true, "a: 1\n", ""),
            Verdict::Failed(_)
        ));
    }

    #[test]
    fn quoted_scalars_stay_strings() {
        assert!(matches!(
            judge(&case(), Some("a: \"1\"\n"), true, "a: 1\n", ""),
            Verdict::Failed(_)
        ));
    }
}
