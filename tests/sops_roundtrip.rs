//! Round trip against the real sops binary: documents generated here (seeded, so a failure
//! reproduces) are encrypted by sops 3.13.3 in every store and under several encryption rules,
//! then decrypted by sops (`sops -d`) and by us; the two outputs must be identical.
//!
//! The binary is `KC_SOPS_BIN`, else the one tests/sops/install-tools.sh builds from the Go
//! module proxy. The test never skips: without sops it panics with the reason.

mod support;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sops::{Format, Keyring};

const SOPS_ENV: &str = "KC_SOPS_BIN";
const DOCUMENTS_PER_FORMAT: usize = 25;

fn sops() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| support::reference_tool(SOPS_ENV, "tests/sops/install-tools.sh"))
}

fn key_file() -> PathBuf {
    support::repo_root().join("tests/fixtures/sops/keys/age-1.agekey")
}

fn recipient() -> String {
    std::fs::read_to_string(key_file())
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("# public key: "))
        .expect("the identity file names its recipient")
        .to_owned()
}

/// Runs sops in an empty directory with an empty HOME, so no user configuration applies.
fn run_sops(dir: &Path, args: &[&str], input: &Path) -> Vec<u8> {
    let output = Command::new(sops())
        .args(["--disable-version-check"])
        .args(args)
        .arg(input)
        .current_dir(dir)
        .env_clear()
        .env("HOME", dir)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("SOPS_AGE_KEY_FILE", key_file())
        .output()
        .expect("run sops");
    assert!(
        output.status.success(),
        "sops {args:?} {} failed: {}",
        input.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

fn word(rng: &mut StdRng) -> String {
    const WORDS: [&str; 16] = [
        "alpha",
        "yes",
        "0755",
        "",
        "x: y",
        "- item",
        "ünïcødé",
        "1.5",
        "null",
        "true",
        "multi\nline\ntext",
        " padded ",
        "#hash",
        "quote'd",
        "dq\"x",
        "tab\there",
    ];
    WORDS[rng.gen_range(0..WORDS.len())].to_owned()
}

fn key(rng: &mut StdRng, i: usize) -> String {
    const KEYS: [&str; 6] = [
        "name",
        "secret",
        "token_unencrypted",
        "data",
        "s_value",
        "port",
    ];
    format!("{}{i}", KEYS[rng.gen_range(0..KEYS.len())])
}

fn yaml_value(rng: &mut StdRng, depth: usize, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match rng.gen_range(0..if depth > 2 { 5 } else { 7 }) {
        0 => writeln!(out, " {}", rng.gen_range(-100_000..100_000)).unwrap(),
        1 => writeln!(out, " {}", rng.gen_range(-1000.0..1000.0f64)).unwrap(),
        2 => writeln!(out, " {}", rng.gen_bool(0.5)).unwrap(),
        3 | 4 => writeln!(out, " {}", serde_json::to_string(&word(rng)).unwrap()).unwrap(),
        5 => {
            out.push('\n');
            for i in 0..rng.gen_range(1..4) {
                write!(out, "{pad}  {}:", key(rng, i)).unwrap();
                yaml_value(rng, depth + 1, indent + 2, out);
            }
        }
        _ => {
            out.push('\n');
            for _ in 0..rng.gen_range(1..4) {
                write!(out, "{pad}  -").unwrap();
                yaml_value(rng, depth + 1, indent + 4, out);
            }
        }
    }
}

fn yaml_document(rng: &mut StdRng) -> String {
    let mut out = String::new();
    for i in 0..rng.gen_range(1..6) {
        write!(out, "{}:", key(rng, i)).unwrap();
        yaml_value(rng, 0, 0, &mut out);
    }
    out
}

fn json_document(rng: &mut StdRng) -> String {
    let mut map = serde_json::Map::new();
    for i in 0..rng.gen_range(1..6) {
        let value = match rng.gen_range(0..5) {
            0 => serde_json::json!(rng.gen_range(-1000..1000)),
            1 => serde_json::json!(rng.gen_bool(0.5)),
            2 => serde_json::json!([word(rng), rng.gen_range(0..9)]),
            3 => serde_json::json!({"inner": word(rng), "n": rng.gen_range(0.0..10.0f64)}),
            _ => serde_json::json!(word(rng)),
        };
        map.insert(key(rng, i), value);
    }
    serde_json::to_string_pretty(&map).unwrap()
}

fn dotenv_document(rng: &mut StdRng) -> String {
    let mut out = String::new();
    for i in 0..rng.gen_range(1..6) {
        if rng.gen_bool(0.2) {
            out.push_str("# a comment\n");
        }
        let value = word(rng).replace('\n', " ");
        writeln!(out, "{}={value}", key(rng, i).to_uppercase()).unwrap();
    }
    out
}

#[test]
fn what_sops_encrypts_we_decrypt_to_what_sops_prints() {
    let dir = tempfile::tempdir().unwrap();
    let recipient = recipient();
    let mut keys = Keyring::new();
    keys.import_age(&std::fs::read_to_string(key_file()).unwrap())
        .unwrap();
    let rules: [&[&str]; 4] = [
        &[],
        &["--encrypted-regex", "^(s_|data)"],
        &[
            "--unencrypted-suffix",
            "_unencrypted",
            "--mac-only-encrypted",
        ],
        &["--encrypted-suffix", "0"],
    ];
    let mut rng = StdRng::seed_from_u64(0x5eed_50b5);
    let mut failures = Vec::new();
    let mut checked = 0;
    for (format, ext, generate) in [
        (
            Format::Yaml,
            "yaml",
            yaml_document as fn(&mut StdRng) -> String,
        ),
        (Format::Json, "json", json_document),
        (Format::Dotenv, "env", dotenv_document),
    ] {
        for n in 0..DOCUMENTS_PER_FORMAT {
            let plain_path = dir.path().join(format!("doc-{n}.{ext}"));
            let text = generate(&mut rng);
            std::fs::write(&plain_path, &text).unwrap();
            let rule = rules[n % rules.len()];
            let mut args = vec!["--encrypt", "--age", recipient.as_str()];
            args.extend_from_slice(rule);
            let encrypted = run_sops(dir.path(), &args, &plain_path);
            let encrypted_path = dir.path().join(format!("doc-{n}.enc.{ext}"));
            std::fs::write(&encrypted_path, &encrypted).unwrap();
            let expected = run_sops(dir.path(), &["--decrypt"], &encrypted_path);
            checked += 1;
            match sops::decrypt(&encrypted, format, format, &keys, true) {
                Ok(ours) if ours.as_slice() == expected.as_slice() => {}
                Ok(ours) => failures.push(format!(
                    "{ext} #{n} {rule:?}: output differs\n--- input\n{text}\n--- sops -d\n{}\n--- ours\n{}",
                    String::from_utf8_lossy(&expected),
                    String::from_utf8_lossy(&ours)
                )),
                Err(e) => failures.push(format!("{ext} #{n} {rule:?}: {e}\n--- input\n{text}")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} documents differ:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// The reference kustomize (`KC_DIFF_KUSTOMIZE`, else tests/kustomize/install-kustomize.sh).
fn kustomize() -> PathBuf {
    support::reference_tool("KC_DIFF_KUSTOMIZE", "tests/kustomize/install-kustomize.sh")
}

/// What Flux applies for an encrypted kustomization tree: its sources decrypted in place by
/// sops, then built by kustomize. Our offline build with the same key must print the same
/// objects, generated Secret names (content hashes) included.
#[test]
fn encrypted_generator_trees_build_exactly_as_flux_builds_them() {
    let fixtures = support::repo_root().join("tests/fixtures/sops/kustomize");
    let work = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&fixtures).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_owned();
        let data = std::fs::read(&path).unwrap();
        let format = Format::for_path(&path);
        let is_source = name != "kustomization.yaml" && name != "deployment.yaml";
        let out = if is_source && format.is_encrypted(&data) {
            let kind = match format {
                Format::Yaml => "yaml",
                Format::Dotenv => "dotenv",
                Format::Json => "json",
                Format::Ini => "ini",
                Format::Binary => "binary",
            };
            run_sops(
                work.path(),
                &["--decrypt", "--input-type", kind, "--output-type", kind],
                &path,
            )
        } else {
            data
        };
        std::fs::write(work.path().join(name), out).unwrap();
    }
    let reference = Command::new(kustomize())
        .args(["build", "--reorder", "none"])
        .arg(work.path())
        .output()
        .unwrap();
    assert!(
        reference.status.success(),
        "{}",
        String::from_utf8_lossy(&reference.stderr)
    );
    let ours = Command::new(env!("CARGO_BIN_EXE_kustomize-controller"))
        .arg("build")
        .arg(&fixtures)
        .arg("--sops-key")
        .arg(key_file())
        .output()
        .unwrap();
    assert!(
        ours.status.success(),
        "{}",
        String::from_utf8_lossy(&ours.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&ours.stdout),
        String::from_utf8_lossy(&reference.stdout),
        "our build with --sops-key differs from kustomize's build of the sops-decrypted tree"
    );
}
