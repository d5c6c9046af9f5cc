//! Whole builds of fuzzed kustomization trees: any content must end in objects or an error,
//! never a panic, a stack overflow (builds run on a 1 MiB stack, half a tokio worker's), a
//! hang or unbounded memory (libFuzzer's RSS limit catches blow-ups).
//!
//! The input is split on NUL bytes into up to five files:
//! `app/kustomization.yaml`, `app/a.yaml`, `app/b.yaml`, `base/kustomization.yaml` and
//! `base/c.yaml`. The first byte of the input picks extra entries prepended to the app's
//! kustomization, so cycles (`resources: [.]`, app <-> base) and nesting are reached early.
#![no_main]

use kustomize::target::{self, BuildOptions};
use libfuzzer_sys::fuzz_target;

const FILES: [&str; 5] = [
    "app/kustomization.yaml",
    "app/a.yaml",
    "app/b.yaml",
    "base/kustomization.yaml",
    "base/c.yaml",
];

/// Kustomization prefixes the first byte selects (a YAML map's first lines; the fuzzed text
/// follows, and a repeated key keeps its last value).
const PREFIXES: [&str; 6] = [
    "",
    "resources:\n- .\n",
    "resources:\n- ../base\n",
    "resources:\n- a.yaml\n- b.yaml\n",
    "components:\n- ../base\n",
    "resources:\n- a.yaml\n- ../base\npatches:\n- path: b.yaml\n",
];

const BASE_PREFIXES: [&str; 3] = ["", "resources:\n- ../app\n", "resources:\n- c.yaml\n"];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(dir) = tempfile::tempdir() else {
        return;
    };
    let root = dir.path().to_path_buf();
    if std::fs::create_dir_all(root.join("app")).is_err()
        || std::fs::create_dir_all(root.join("base")).is_err()
    {
        return;
    }
    let mut parts = rest.split(|b| *b == 0);
    for (index, name) in FILES.iter().enumerate() {
        let part = parts.next().unwrap_or_default();
        let mut content = Vec::new();
        if index == 0 {
            content.extend_from_slice(PREFIXES[usize::from(selector) % PREFIXES.len()].as_bytes());
        }
        if index == 3 {
            let pick = usize::from(selector / 8) % BASE_PREFIXES.len();
            content.extend_from_slice(BASE_PREFIXES[pick].as_bytes());
        }
        content.extend_from_slice(part);
        if std::fs::write(root.join(name), &content).is_err() {
            return;
        }
    }
    let app = root.join("app");
    let handle = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || {
            let _ = target::build(&root, &app, &BuildOptions::default());
        });
    if let Ok(handle) = handle {
        // A panic in the build is a finding: let it through.
        if let Err(panic) = handle.join() {
            std::panic::resume_unwind(panic);
        }
    }
    drop(dir);
});
