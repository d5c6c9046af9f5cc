//! The decryptor against files the real sops 3.13.2 wrote (tests/fixtures/sops, rebuilt by
//! tests/sops/generate-fixtures.sh): every case decrypts with each of its key sets to exactly
//! what `sops -d` printed, fails clearly with keys that cannot open it, and every kind of
//! damage is an error that names no secret.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use sops::{DecryptError, Format, Keyring};

#[derive(Deserialize)]
struct Case {
    name: String,
    encrypted: String,
    format: String,
    expected: String,
    key_sets: Vec<Vec<String>>,
    wrong_key_sets: Vec<Vec<String>>,
    mac_valid: bool,
}

/// Secret values of the plaintext sources: no error message may contain them.
const SECRETS: [&str; 5] = [
    "s3cr3t-Pa55word",
    "AKIAEXAMPLEKEY123456",
    "tok_0123456789abcdef",
    "czNjcjN0LVBhNTV3b3Jk",
    "AGE-SECRET-KEY-1",
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sops")
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(fixtures().join("cases.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn format(name: &str) -> Format {
    match name {
        "yaml" => Format::Yaml,
        "json" => Format::Json,
        "dotenv" => Format::Dotenv,
        "ini" => Format::Ini,
        "binary" => Format::Binary,
        other => panic!("unknown format {other}"),
    }
}

fn keyring(files: &[String]) -> Keyring {
    let mut keys = Keyring::new();
    for file in files {
        let bytes = std::fs::read(fixtures().join("keys").join(file)).unwrap();
        if file.ends_with(".asc") {
            keys.import_pgp(&bytes).unwrap();
        } else {
            keys.import_age(std::str::from_utf8(&bytes).unwrap())
                .unwrap();
        }
    }
    keys
}

fn all_keys() -> Keyring {
    keyring(&[
        "age-1.agekey".into(),
        "age-2-and-3.agekey".into(),
        "pgp-rsa.asc".into(),
        "pgp-ed25519.asc".into(),
    ])
}

fn read(case: &Case, path: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(path)).unwrap_or_else(|e| panic!("{}: {path}: {e}", case.name))
}

fn assert_no_secret(message: &str) {
    for secret in SECRETS {
        assert!(
            !message.contains(secret),
            "message leaks a secret: {message}"
        );
    }
}

#[test]
fn every_case_decrypts_to_what_sops_printed() {
    let mut failures = Vec::new();
    for case in cases() {
        let data = read(&case, &case.encrypted);
        let expected = read(&case, &case.expected);
        let fmt = format(&case.format);
        for set in &case.key_sets {
            match sops::decrypt(&data, fmt, fmt, &keyring(set), case.mac_valid) {
                Ok(plain) if plain.as_slice() == expected.as_slice() => {}
                Ok(plain) => failures.push(format!(
                    "{} with {set:?}: output differs\n--- sops -d\n{}\n--- ours\n{}",
                    case.name,
                    String::from_utf8_lossy(&expected),
                    String::from_utf8_lossy(&plain)
                )),
                Err(e) => failures.push(format!("{} with {set:?}: {e}", case.name)),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn keys_that_cannot_open_a_file_are_named_in_a_clear_error() {
    for case in cases() {
        let data = read(&case, &case.encrypted);
        let fmt = format(&case.format);
        for set in &case.wrong_key_sets {
            let err = sops::decrypt(&data, fmt, fmt, &keyring(set), false)
                .expect_err(&format!("{} opened with {set:?}", case.name));
            let message = err.to_string();
            assert!(
                matches!(err, DecryptError::DataKey(_)),
                "{}: {message}",
                case.name
            );
            assert!(message.contains("supplied:"), "{}: {message}", case.name);
            assert!(
                message.contains("encrypted for"),
                "{}: {message}",
                case.name
            );
            assert_no_secret(&message);
        }
    }
}

#[test]
fn no_keys_lists_what_the_file_offers() {
    let data = std::fs::read(fixtures().join("encrypted/keys/groups-age-pgp.yaml")).unwrap();
    let err = sops::decrypt(&data, Format::Yaml, Format::Yaml, &Keyring::new(), true).unwrap_err();
    let message = err.to_string();
    assert!(message.contains("age age1"), "{message}");
    assert!(message.contains("pgp "), "{message}");
    assert!(
        message.contains("0 age identities, 0 OpenPGP keys"),
        "{message}"
    );
    assert!(
        message.contains("0 of 2 key groups opened, 2 needed"),
        "{message}"
    );
}

/// The first `ENC[...]` value of the file with one base64 character of its data changed.
fn tamper_first_value(text: &str) -> String {
    let start = text.find("ENC[AES256_GCM,data:").unwrap() + "ENC[AES256_GCM,data:".len();
    let mut bytes = text.as_bytes().to_vec();
    bytes[start] = if bytes[start] == b'A' { b'B' } else { b'A' };
    String::from_utf8(bytes).unwrap()
}

#[test]
fn damaged_files_are_errors_that_name_no_secret() {
    let keys = all_keys();
    let original = std::fs::read_to_string(fixtures().join("encrypted/stores/app.yaml")).unwrap();
    let run = |text: &str, verify| {
        sops::decrypt(text.as_bytes(), Format::Yaml, Format::Yaml, &keys, verify)
    };
    assert!(run(&original, true).is_ok());

    let tampered = run(&tamper_first_value(&original), false).unwrap_err();
    assert!(matches!(tampered, DecryptError::Value(_)), "{tampered}");
    assert!(
        tampered.to_string().contains("authentication failed"),
        "{tampered}"
    );

    let mac_start = original.find("mac: ENC[AES256_GCM,data:").unwrap() + "mac: ".len();
    let bad_mac = format!(
        "{}{}",
        &original[..mac_start],
        tamper_first_value(&original[mac_start..])
    );
    let err = run(&bad_mac, true).unwrap_err();
    assert!(matches!(err, DecryptError::Mac(_)), "{err}");
    assert!(
        run(&bad_mac, false).is_ok(),
        "without MAC checks the values still decrypt"
    );

    // A value moved to another key keeps its ciphertext but not its authenticated path.
    let swapped = original.replacen("    user:", "    usr:", 1);
    assert!(matches!(run(&swapped, false), Err(DecryptError::Value(_))));

    // A value removed: the values still decrypt, the MAC does not match.
    let removed: String = original
        .lines()
        .filter(|l| !l.trim_start().starts_with("port:"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(matches!(run(&removed, true), Err(DecryptError::Mac(_))));

    for cut in [10, original.len() / 2, original.len() - 40] {
        let err = run(&original[..cut], true).unwrap_err();
        assert_no_secret(&err.to_string());
    }

    let oversize = "a: b\n".repeat(sops::MAX_ENCRYPTED_FILE_SIZE / 5 + 1);
    assert!(matches!(
        run(&oversize, true),
        Err(DecryptError::TooLarge { .. })
    ));

    for err in [tampered, err] {
        assert_no_secret(&err.to_string());
    }
}

#[test]
fn garbage_in_every_format_is_an_error() {
    let keys = all_keys();
    let inputs: [&[u8]; 6] = [
        b"",
        b"\xff\xfe",
        b"{",
        b"sops: 1",
        b"[sops]\nmac=x",
        b"sops_mac=ENC[x",
    ];
    for fmt in [
        Format::Yaml,
        Format::Json,
        Format::Dotenv,
        Format::Ini,
        Format::Binary,
    ] {
        for input in inputs {
            assert!(
                sops::decrypt(input, fmt, fmt, &keys, true).is_err(),
                "{fmt:?} accepted {input:?}"
            );
        }
    }
}

#[test]
fn formats_convert_like_sops_output_types() {
    // sops -d --output-type json of a YAML file: the same values, as JSON.
    let keys = all_keys();
    let data = std::fs::read(fixtures().join("encrypted/stores/app.yaml")).unwrap();
    let json = sops::decrypt(&data, Format::Yaml, Format::Json, &keys, true).unwrap();
    let value: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(value["database"]["port"], 5432);
    assert_eq!(value["database"]["password"], "s3cr3t-Pa55word");
}
