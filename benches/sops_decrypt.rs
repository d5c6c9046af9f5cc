//! Side-by-side benchmark of SOPS decryption: `sops -d` (the real sops 3.13.2) against
//! `kustomize-controller decrypt` on the same file, and our library in this process.
//!
//! ```text
//! cargo bench --bench sops_decrypt -- [--docs N] [--runs R]
//! ```
//!
//! A multi-document YAML stream of `--docs` Kubernetes Secrets (20 values each) is encrypted
//! once with sops for a test age key; then each decryptor runs `--runs` times, alternating:
//! wall time from spawn to exit and peak RSS (GNU time). Both outputs must be byte-identical
//! before anything is reported. The sops binary is `KC_SOPS_BIN`, else the one
//! tests/sops/install-tools.sh builds.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sops::{Format, Keyring};

fn main() {
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let docs = flag("--docs").unwrap_or(500);
    let runs = flag("--runs").unwrap_or(5);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let key = repo.join("tests/fixtures/sops/keys/age-1.agekey");
    let sops = sops_binary(repo);
    let ours = PathBuf::from(env!("CARGO_BIN_EXE_kustomize-controller"));
    let work = tempfile::tempdir().expect("tempdir");

    let plain = work.path().join("secrets.yaml");
    std::fs::write(&plain, secrets(docs)).expect("write plaintext");
    let recipient = recipient(&key);
    let encrypted = run(
        &sops,
        &[
            "--encrypt",
            "--age",
            &recipient,
            "--encrypted-regex",
            "^(data|stringData)$",
        ],
        &plain,
        &key,
        work.path(),
    )
    .0;
    let file = work.path().join("secrets.enc.yaml");
    std::fs::write(&file, &encrypted).expect("write encrypted");

    let (reference, _, _) = run(&sops, &["--decrypt"], &file, &key, work.path());
    let key_arg = format!("--sops-key={}", key.display());
    let (mine, _, _) = run(&ours, &["decrypt", &key_arg], &file, &key, work.path());
    assert!(reference == mine, "our output differs from sops -d");

    let mut sops_times = Vec::new();
    let mut our_times = Vec::new();
    let (mut sops_rss, mut our_rss) = (0, 0);
    for _ in 0..runs {
        let (_, t, rss) = run(&sops, &["--decrypt"], &file, &key, work.path());
        sops_times.push(t);
        sops_rss = sops_rss.max(rss);
        let (_, t, rss) = run(&ours, &["decrypt", &key_arg], &file, &key, work.path());
        our_times.push(t);
        our_rss = our_rss.max(rss);
    }
    let mut keys = Keyring::new();
    keys.import_age(&std::fs::read_to_string(&key).expect("key"))
        .expect("identity");
    let start = Instant::now();
    for _ in 0..runs {
        let out =
            sops::decrypt(&encrypted, Format::Yaml, Format::Yaml, &keys, true).expect("decrypt");
        assert!(out.as_slice() == reference.as_slice());
    }
    let in_process = start.elapsed() / runs as u32;

    let (s, o) = (mean(&sops_times), mean(&our_times));
    let mut table = String::new();
    writeln!(
        table,
        "{docs} Secrets, {} values, {} KiB encrypted; mean of {runs} runs\n",
        docs * 20,
        encrypted.len() / 1024
    )
    .unwrap();
    writeln!(
        table,
        "| | sops -d | kustomize-controller decrypt | ratio |"
    )
    .unwrap();
    writeln!(table, "| --- | --- | --- | --- |").unwrap();
    writeln!(
        table,
        "| wall time | {:.3} s | {:.3} s | {:.1} |",
        s.as_secs_f64(),
        o.as_secs_f64(),
        s.as_secs_f64() / o.as_secs_f64()
    )
    .unwrap();
    writeln!(
        table,
        "| peak RSS | {:.1} MiB | {:.1} MiB | {:.1} |",
        sops_rss as f64 / 1024.0,
        our_rss as f64 / 1024.0,
        sops_rss as f64 / our_rss.max(1) as f64
    )
    .unwrap();
    writeln!(
        table,
        "\nIn process (library, no process start): {:.3} s per file",
        in_process.as_secs_f64()
    )
    .unwrap();
    print!("{table}");
    let _ = std::fs::write(repo.join("target/bench-sops-decrypt.md"), table);
}

fn flag(name: &str) -> Option<usize> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}

fn mean(times: &[Duration]) -> Duration {
    times.iter().sum::<Duration>() / times.len().max(1) as u32
}

fn sops_binary(repo: &Path) -> PathBuf {
    if let Some(path) = std::env::var_os("KC_SOPS_BIN").filter(|v| !v.is_empty()) {
        return PathBuf::from(path);
    }
    let output = Command::new("bash")
        .arg(repo.join("tests/sops/install-tools.sh"))
        .stdin(Stdio::null())
        .output()
        .expect("run install-tools.sh");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
}

fn recipient(key: &Path) -> String {
    std::fs::read_to_string(key)
        .expect("key")
        .lines()
        .find_map(|l| l.strip_prefix("# public key: "))
        .expect("recipient comment")
        .to_owned()
}

/// Runs `program args file` with GNU time; returns (stdout, wall time, peak RSS KiB).
fn run(
    program: &Path,
    args: &[&str],
    file: &Path,
    key: &Path,
    cwd: &Path,
) -> (Vec<u8>, Duration, u64) {
    let rss = tempfile::NamedTempFile::new().expect("rss file");
    let start = Instant::now();
    let output = Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(rss.path())
        .arg(program)
        .args(args)
        .arg(file)
        .current_dir(cwd)
        .env("HOME", cwd)
        .env("SOPS_AGE_KEY_FILE", key)
        .output()
        .expect("run decryptor");
    let elapsed = start.elapsed();
    assert!(
        output.status.success(),
        "{}: {}",
        program.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let kib = std::fs::read_to_string(rss.path())
        .ok()
        .and_then(|s| s.trim().lines().last()?.parse().ok())
        .unwrap_or(0);
    (output.stdout, elapsed, kib)
}

fn secrets(docs: usize) -> String {
    let mut out = String::new();
    for d in 0..docs {
        if d > 0 {
            out.push_str("---\n");
        }
        writeln!(out, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: app-{d}\n  namespace: apps\ntype: Opaque\nstringData:").unwrap();
        for v in 0..20 {
            writeln!(
                out,
                "  key_{v}: value-{d}-{v}-0123456789abcdef0123456789abcdef"
            )
            .unwrap();
        }
    }
    out
}
