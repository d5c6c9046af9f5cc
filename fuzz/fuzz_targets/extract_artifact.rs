//! Artifacts are untrusted archives: any bytes must extract inside the root or fail.
#![no_main]

use artifact::{ExtractLimits, extract_tar_gz_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(sandbox) = tempfile::tempdir() else { return };
    let root = sandbox.path().join("root");
    if std::fs::create_dir(&root).is_err() {
        return;
    }
    let limits = ExtractLimits { max_total_size: 1 << 20, max_entries: 1000 };
    let _ = extract_tar_gz_bytes(data, &root, &limits);
    let outside = std::fs::read_dir(sandbox.path()).map(|entries| entries.count()).unwrap_or(0);
    assert_eq!(outside, 1, "extraction wrote next to the root");
});
