//! How long hostile inputs take to be refused: the timings that the tests of
//! `tests/kustomize_hostile.rs`, `crates/kustomize/src/json6902/tests.rs` and
//! `crates/render/src/redact.rs` do not assert (they check that the refusal comes from a budget, or
//! that the work is linear, which no load on the machine changes).
//!
//! ```text
//! cargo bench --bench hostile_builds
//! ```
//!
//! Each case runs five times; the median and the slowest run are printed. A case that does
//! not end as expected (refused, or built) fails the bench.

use std::path::Path;
use std::time::{Duration, Instant};

use kustomize::target::{self, BuildOptions};
use kustomize_controller::render::SecretValues;

fn main() {
    // `cargo test --all-targets` builds and runs bench targets too, without the `--bench` flag
    // `cargo bench` passes: do nothing then.
    if !std::env::args().any(|arg| arg == "--bench") {
        eprintln!("hostile_builds: run with `cargo bench --bench hostile_builds`");
        return;
    }
    let many: String = (0..500)
        .map(|i| {
            format!(
                "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: t{i}\ndata:\n  a: b\n"
            )
        })
        .collect();
    let big = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: src\ndata:\n  big: {}\n",
        "x".repeat(1 << 20)
    );
    let alias = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: &a {}\n  l: [{}]\n",
        "x".repeat(1 << 20),
        vec!["*a"; 1500].join(", ")
    );
    let copies: Vec<String> = (0..40)
        .map(|i| format!("{{\"op\":\"copy\",\"from\":\"/data\",\"path\":\"/data/c{i}\"}}"))
        .collect();
    let cases: Vec<(&str, Vec<(&str, String)>)> = vec![
        (
            "alias bomb",
            vec![
                ("kustomization.yaml", "resources:\n- cm.yaml\n".into()),
                ("cm.yaml", alias),
            ],
        ),
        (
            "self-copying JSON 6902 patch",
            vec![
                (
                    "kustomization.yaml",
                    format!(
                        "resources:\n- cm.yaml\npatches:\n- target:\n    kind: ConfigMap\n  patch: '[{}]'\n",
                        copies.join(",")
                    ),
                ),
                (
                    "cm.yaml",
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: b\n"
                        .into(),
                ),
            ],
        ),
        (
            "replacement of 1 MiB into 500 objects",
            vec![
                (
                    "kustomization.yaml",
                    "resources:\n- src.yaml\n- many.yaml\nreplacements:\n- source:\n    kind: ConfigMap\n    name: src\n    fieldPath: data.big\n  targets:\n  - select:\n      kind: ConfigMap\n    fieldPaths:\n    - data.x\n    options:\n      create: true\n".into(),
                ),
                ("src.yaml", big.clone()),
                ("many.yaml", many.clone()),
            ],
        ),
    ];
    println!("| case | median | slowest |\n|---|---|---|");
    for (name, files) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical tempdir");
        let app = root.join("app");
        std::fs::create_dir_all(&app).expect("app dir");
        for (file, text) in &files {
            std::fs::write(app.join(file), text).expect("write input");
        }
        report(name, || refused(&root, &app));
    }
    report("100,000 secret values added twice", || {
        let mut values = SecretValues::new();
        for i in 0..100_000 {
            values.add(&format!("value-{i}"));
            values.add(&format!("value-{i}"));
        }
        assert!(values.len() >= 200_000);
    });
}

/// Builds `app` under `root`, which must be refused.
fn refused(root: &Path, app: &Path) {
    if target::build(root, app, &BuildOptions::default()).is_ok() {
        panic!("{} built", app.display());
    }
}

fn report(name: &str, run: impl Fn()) {
    let mut times: Vec<Duration> = (0..5)
        .map(|_| {
            let started = Instant::now();
            run();
            started.elapsed()
        })
        .collect();
    times.sort();
    println!("| {name} | {:?} | {:?} |", times[2], times[4]);
}
