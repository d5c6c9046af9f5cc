//! Round trips against the real `sops` 3.13.2: `testdata/NAME.EXT` is a plaintext input,
//! `NAME.enc.EXT` what `sops -e` (age) made of it and `NAME.dec.EXT` what `sops -d` printed
//! for that (see `testdata/README.md`).

use proptest::prelude::*;

use super::*;
use crate::tree::Comment;

fn testdata(name: &str) -> Vec<u8> {
    let path = format!("{}/src/stores/testdata/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

/// sops' decryption hands comments back without their inline flag, so `sops -d` prints every
/// comment on a line of its own.
fn clear_inline(branches: &mut Branches) {
    fn value(v: &mut Value) {
        match v {
            Value::Comment(c) => c.inline = false,
            Value::Map(b) => branch(b),
            Value::Seq(items) => items.iter_mut().for_each(value),
            _ => {}
        }
    }
    fn branch(b: &mut Branch) {
        for item in b {
            if let Key::Comment(c) = &mut item.key {
                c.inline = false;
            }
            value(&mut item.value);
        }
    }
    branches.0.iter_mut().for_each(branch);
}

fn assert_same_text(format: Format, ours: &[u8], name: &str, expected: &[u8]) {
    if ours != expected {
        panic!(
            "{name} ({}) differs from sops -d:\n--- ours\n{}\n--- sops\n{}",
            format.name(),
            String::from_utf8_lossy(ours),
            String::from_utf8_lossy(expected)
        );
    }
}

fn round_trip(format: Format, name: &str, ext: &str) {
    let plain = testdata(&format!("{name}.{ext}"));
    let mut branches = load_plain(format, &plain).unwrap();
    clear_inline(&mut branches);
    let ours = emit_plain(format, &branches).unwrap();
    let expected = testdata(&format!("{name}.dec.{ext}"));
    assert_same_text(format, &ours, name, &expected);
}

/// The names of a branch's keys, comments left out.
fn key_names(branch: &Branch) -> Vec<String> {
    branch
        .iter()
        .filter_map(|item| match &item.key {
            Key::Name(k) => Some(k.clone()),
            _ => None,
        })
        .collect()
}

fn has_key(branch: &Branch, key: &str) -> bool {
    key_names(branch).iter().any(|k| k == key)
}

fn encrypted(format: Format, name: &str, ext: &str) -> (Branches, Branch) {
    let (branches, metadata) = load_encrypted(format, &testdata(&format!("{name}.enc.{ext}")))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    for key in ["mac", "lastmodified", "version", "age"] {
        assert!(has_key(&metadata, key), "{name}: metadata lacks {key}");
    }
    let age = metadata
        .iter()
        .find(|i| i.key == Key::Name("age".into()))
        .map(|i| &i.value);
    let Some(Value::Seq(recipients)) = age else {
        panic!("{name}: age is not a list");
    };
    let Some(Value::Map(first)) = recipients.first() else {
        panic!("{name}: age entry is not a map");
    };
    assert!(has_key(first, "recipient") && has_key(first, "enc"));
    let enc = first
        .iter()
        .find(|i| i.key == Key::Name("enc".into()))
        .map(|i| &i.value);
    assert!(
        matches!(enc, Some(Value::String(s)) if s.starts_with("-----BEGIN AGE ENCRYPTED FILE-----\n")),
        "{name}: age enc is not the armored text with real newlines"
    );
    (branches, metadata)
}

/// Every leaf of an encrypted file is an `ENC[...]` string, null or empty string.
fn assert_leaves_encrypted(value: &Value) {
    match value {
        Value::Map(b) => b.iter().for_each(|i| assert_leaves_encrypted(&i.value)),
        Value::Seq(items) => items.iter().for_each(assert_leaves_encrypted),
        Value::String(s) => assert!(s.is_empty() || s.starts_with("ENC[AES256_GCM,data:")),
        Value::Null | Value::Comment(_) => {}
        other => panic!("unencrypted leaf {other:?}"),
    }
}

fn assert_same_shape(plain: &Value, enc: &Value) {
    match (plain, enc) {
        (Value::Map(p), Value::Map(e)) => {
            assert_eq!(key_names(p), key_names(e));
            let pv = p.iter().filter(|i| matches!(i.key, Key::Name(_)));
            let ev = e.iter().filter(|i| matches!(i.key, Key::Name(_)));
            for (a, b) in pv.zip(ev) {
                assert_same_shape(&a.value, &b.value);
            }
        }
        (Value::Seq(p), Value::Seq(e)) => {
            let p: Vec<_> = p
                .iter()
                .filter(|v| !matches!(v, Value::Comment(_)))
                .collect();
            // sops writes an inline comment of a list as an encrypted `type:comment` item.
            let e: Vec<_> = e
                .iter()
                .filter(|v| !matches!(v, Value::String(s) if s.ends_with(",type:comment]")))
                .collect();
            assert_eq!(p.len(), e.len());
            p.iter().zip(e).for_each(|(a, b)| assert_same_shape(a, b));
        }
        (Value::Map(_) | Value::Seq(_), _) | (_, Value::Map(_) | Value::Seq(_)) => {
            panic!("shape differs: {plain:?} vs {enc:?}")
        }
        _ => {}
    }
}

fn check_encrypted_structure(format: Format, name: &str, ext: &str) {
    let (branches, _) = encrypted(format, name, ext);
    let plain = load_plain(format, &testdata(&format!("{name}.{ext}"))).unwrap();
    assert_eq!(branches.0.len(), plain.0.len(), "{name}: document count");
    for (p, e) in plain.0.iter().zip(&branches.0) {
        let (p, e) = (Value::Map(p.clone()), Value::Map(e.clone()));
        assert_same_shape(&p, &e);
        if format != Format::Ini && format != Format::Dotenv {
            assert_leaves_encrypted(&e);
        }
    }
}

#[test]
fn yaml_matches_sops() {
    for name in [
        "basic", "comments", "multi", "k8s", "feet", "blanks", "edge",
    ] {
        round_trip(Format::Yaml, name, "yaml");
        check_encrypted_structure(Format::Yaml, name, "yaml");
    }
}

#[test]
fn json_matches_sops() {
    round_trip(Format::Json, "basic", "json");
    check_encrypted_structure(Format::Json, "basic", "json");
}

#[test]
fn dotenv_matches_sops() {
    round_trip(Format::Dotenv, "basic", "env");
    check_encrypted_structure(Format::Dotenv, "basic", "env");
}

#[test]
fn ini_matches_sops() {
    for name in ["basic", "sections"] {
        round_trip(Format::Ini, name, "ini");
        check_encrypted_structure(Format::Ini, name, "ini");
    }
}

#[test]
fn binary_matches_sops() {
    let plain = testdata("blob.bin");
    let branches = load_plain(Format::Binary, &plain).unwrap();
    let ours = emit_plain(Format::Binary, &branches).unwrap();
    assert_eq!(ours.as_slice(), testdata("blob.dec.bin").as_slice());
    let (branches, _) = encrypted(Format::Binary, "blob", "bin");
    assert_eq!(key_names(&branches.0[0]), vec!["data".to_string()]);
}

#[test]
fn yaml_typing_follows_go_yaml_v3() {
    let doc = b"i: 0755\nf: 1.0\ne: 1e10\nb: true\nn: ~\nt: 2001-12-14\nq: \"2001-12-14\"\n\
ts: !!timestamp 2001-12-14t21:59:43.10-05:00\ny: yes\nbig: 99999999999999999999\n1: x\n";
    let branches = load_plain(Format::Yaml, doc).unwrap();
    let values: Vec<_> = branches.0[0].iter().map(|i| i.value.clone()).collect();
    assert_eq!(
        values,
        vec![
            Value::Int(493),
            Value::Float(1.0),
            Value::Float(1e10),
            Value::Bool(true),
            Value::Null,
            Value::Time("2001-12-14T00:00:00Z".into()),
            Value::String("2001-12-14".into()),
            Value::Time("2001-12-14T21:59:43.1-05:00".into()),
            Value::String("yes".into()),
            Value::Float(1e20),
            Value::String("x".into()),
        ]
    );
    assert_eq!(branches.0[0][10].key, Key::NonString("1".into()));
}

#[test]
fn yaml_comments_are_placed_like_sops() {
    let doc = b"# head\na: 1 # inline\nb:\n    c: 2\n    # foot of b\n# before d\nd: 3\n";
    let branches = load_plain(Format::Yaml, doc).unwrap();
    let c = |text: &str, inline: bool| {
        Key::Comment(Comment {
            text: text.into(),
            inline,
        })
    };
    let keys: Vec<_> = branches.0[0].iter().map(|i| i.key.clone()).collect();
    assert_eq!(
        keys,
        vec![
            c(" head", false),
            c(" inline", true),
            Key::Name("a".into()),
            Key::Name("b".into()),
            c(" before d", false),
            Key::Name("d".into()),
        ]
    );
    let Value::Map(b) = &branches.0[0][3].value else {
        panic!("b is not a map")
    };
    assert_eq!(b[1].key, c(" foot of b", false));
}

#[test]
fn yaml_inline_comments_are_written_inline() {
    let doc = b"a: 1 # inline\nl:\n    - x # on x\n";
    let branches = load_plain(Format::Yaml, doc).unwrap();
    let out = emit_plain(Format::Yaml, &branches).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out),
        "a: 1 # inline\nl:\n    - x # on x\n"
    );
}

#[test]
fn yaml_errors_name_no_values() {
    let err = load_plain(Format::Yaml, b"a: 1\na: secret-value\n").unwrap_err();
    assert!(
        matches!(err, StoreError::DuplicateKey { line: 2, .. }),
        "{err}"
    );
    assert!(!err.to_string().contains("secret-value"));
    let err = load_plain(Format::Yaml, b"- a\n- b\n").unwrap_err();
    assert!(matches!(err, StoreError::YamlNotMapping { document: 1 }));
    let err = load_plain(Format::Yaml, b"a: [secret\n").unwrap_err();
    assert!(!err.to_string().contains("secret"), "{err}");
}

#[test]
fn metadata_is_required() {
    let err = load_encrypted(Format::Yaml, b"a: 1\n").unwrap_err();
    assert!(matches!(err, StoreError::MetadataNotFound));
    let err = load_encrypted(Format::Dotenv, b"A=1\n").unwrap_err();
    assert!(matches!(err, StoreError::MetadataNotFound));
    let err = load_encrypted(Format::Yaml, b"sops: 1\n").unwrap_err();
    assert!(matches!(err, StoreError::MetadataNotMap));
}

#[test]
fn json_rejects_non_objects_and_bad_numbers() {
    assert!(matches!(
        load_plain(Format::Json, b"[1]"),
        Err(StoreError::JsonNotObject)
    ));
    assert!(load_plain(Format::Json, b"{\"a\": 1e400}").is_err());
    assert!(load_plain(Format::Json, b"{\"a\" 1}").is_err());
    // Like sops, the end of input where a key is expected closes the object.
    let branches = load_plain(Format::Json, b"{\"a\": 1").unwrap();
    assert_eq!(key_names(&branches.0[0]), vec!["a".to_string()]);
}

#[test]
fn dotenv_refuses_nested_values_and_lines_without_equals() {
    assert!(matches!(
        load_plain(Format::Dotenv, b"A=1\nnope\n"),
        Err(StoreError::DotenvLine { line: 2 })
    ));
    let branches = Branches(vec![vec![Item {
        key: Key::Name("A".into()),
        value: Value::Map(Vec::new()),
    }]]);
    assert!(matches!(
        emit_plain(Format::Dotenv, &branches),
        Err(StoreError::ComplexValue { .. })
    ));
}

#[test]
fn binary_needs_a_data_string() {
    let branches = Branches(vec![vec![Item {
        key: Key::Name("other".into()),
        value: Value::String("x".into()),
    }]]);
    assert!(matches!(
        emit_plain(Format::Binary, &branches),
        Err(StoreError::Binary(_))
    ));
}

#[test]
fn json_value_round_trip_keeps_order_and_types() {
    let value = serde_json::json!({
        "kind": "Secret",
        "data": {"z": "1", "a": 2, "f": 1.5, "n": null, "l": [true]},
        "sops": {"mac": "ENC[x]", "version": "3.13.2"}
    });
    let (branches, metadata) = branches_from_json(&value).unwrap();
    assert_eq!(key_names(&metadata), vec!["mac", "version"]);
    assert_eq!(key_names(&branches.0[0]), vec!["kind", "data"]);
    let back = json_from_branches(&branches).unwrap();
    assert_eq!(
        back,
        serde_json::json!({
            "kind": "Secret",
            "data": {"z": "1", "a": 2, "f": 1.5, "n": null, "l": [true]}
        })
    );
    let keys: Vec<_> = back["data"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, vec!["z", "a", "f", "n", "l"]);
}

proptest! {
    #[test]
    fn load_plain_never_panics(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        for format in [Format::Yaml, Format::Json, Format::Dotenv, Format::Ini, Format::Binary] {
            if let Ok(branches) = load_plain(format, &data) {
                let _ = emit_plain(format, &branches);
            }
            let _ = load_encrypted(format, &data);
        }
    }

    #[test]
    fn load_plain_never_panics_on_text(text in "[ -~\n\t#:=\\[\\]{}\"'|>-]{0,200}") {
        for format in [Format::Yaml, Format::Json, Format::Dotenv, Format::Ini] {
            if let Ok(branches) = load_plain(format, text.as_bytes()) {
                let _ = emit_plain(format, &branches);
            }
        }
    }
}
