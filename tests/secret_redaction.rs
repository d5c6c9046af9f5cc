//! Decrypted values never reach a message: a sops-encrypted Secret whose values hold `${...}`
//! references goes through the build and post-build substitution, and every failure after
//! decryption (substitution syntax, strict mode, the substituted object, API server
//! messages quoting a value) is checked for the decrypted text.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use apply::Object;
use kustomize_controller::api::KustomizationSpec;
use kustomize_controller::api::kustomization::SubstituteStrategy;
use kustomize_controller::render::{self, SecretValues};
use sops::Keyring;

/// Every decrypted value of the fixture, and the parts of them a message could quote.
const DECRYPTED: [&str; 6] = [
    "hunter2-redaction-fixture",
    "${SUPER_SECRET_TEXT}",
    "SUPER_SECRET_TEXT",
    "${abc def}",
    "abc def",
    "${replicas}",
];

fn fixture() -> (PathBuf, Keyring) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sops-redaction");
    let mut keys = Keyring::new();
    let identity = std::fs::read_to_string(dir.join("test.agekey")).expect("test key");
    keys.import_age(&identity).expect("test key imports");
    (dir, keys)
}

fn built() -> (Vec<Object>, SecretValues) {
    let (dir, keys) = fixture();
    let built =
        render::build_with_secrets(&dir, &dir, &KustomizationSpec::default(), Some(&keys), None)
            .expect("the fixture builds");
    (built.objects, built.secrets)
}

fn without(objects: &[Object], fields: &[&str]) -> Vec<Object> {
    let mut objects = objects.to_vec();
    for field in fields {
        objects[0]
            .as_map_mut()
            .get_mut("stringData")
            .and_then(|d| d.as_object_mut())
            .map(|d| d.remove(*field));
    }
    objects
}

fn substitute(objects: Vec<Object>, vars: &[(&str, &str)], secrets: &SecretValues) -> String {
    // Some variable, so that substitution runs at all.
    let vars: BTreeMap<String, String> = [("unrelated", "x")]
        .iter()
        .chain(vars)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    render::substitute_objects_redacting(
        objects,
        &vars,
        SubstituteStrategy::WithVariables,
        true,
        secrets,
    )
    .expect_err("substitution fails")
    .to_string()
}

fn assert_clean(message: &str) {
    for value in DECRYPTED {
        assert!(
            !message.contains(value),
            "{message:?} holds decrypted text {value:?}"
        );
    }
}

#[test]
fn the_build_decrypts_and_reports_what_it_revealed() {
    let (objects, secrets) = built();
    assert_eq!(
        objects[0].as_map()["stringData"]["password"],
        "hunter2-redaction-fixture"
    );
    assert!(!secrets.is_empty());
    assert_eq!(
        secrets.redact("value hunter2-redaction-fixture"),
        "value *****"
    );
}

#[test]
fn substitution_errors_after_decryption_hold_no_decrypted_text() {
    let (objects, secrets) = built();
    // Invalid syntax inside a decrypted value.
    let syntax = substitute(objects.clone(), &[], &secrets);
    assert!(syntax.contains("missing closing brace"), "{syntax}");
    assert_clean(&syntax);
    // Strict mode, a reference spelled by a decrypted value.
    let strict = substitute(without(&objects, &["syntax"]), &[], &secrets);
    assert!(
        strict.contains("Secret/apps/db") && strict.contains("variable not set (strict mode)"),
        "{strict}"
    );
    assert_clean(&strict);
    // The substituted object no longer reads as YAML.
    let yaml = substitute(
        without(&objects, &["syntax", "reference"]),
        &[("replicas", "it's: [")],
        &secrets,
    );
    assert!(yaml.contains("not valid YAML"), "{yaml}");
    assert_clean(&yaml);
}

#[test]
fn a_build_failing_on_a_decrypted_source_masks_it() {
    let (dir, keys) = fixture();
    let err = render::build_with_secrets(
        &dir,
        &dir.join("bad-patch"),
        &KustomizationSpec::default(),
        Some(&keys),
        None,
    )
    .expect_err("the decrypted patch is refused")
    .to_string();
    assert!(err.contains("unknown patch strategy \"*****\""), "{err}");
    assert!(!err.contains("hunter2-bogus-directive"), "{err}");
}

#[test]
fn api_server_messages_quoting_a_decrypted_or_secret_value_are_masked() {
    let (_, mut secrets) = built();
    // A post-build variable read from a Secret (`substituteFrom` kind Secret).
    secrets.add("token-from-a-secret-0123456789-0123456789-0123456789-0123456789");
    let messages = [
        // A dry-run refusing a decrypted value substituted into an integer field.
        r#"Deployment/apps/web dry-run failed (Invalid): Deployment.apps "web" is invalid: spec.replicas: Invalid value: "hunter2-redaction-fixture": spec.replicas in body must be of type integer: "string""#,
        // A label value over 63 characters, echoed back.
        r#"ConfigMap/apps/cfg dry-run failed (Invalid): ConfigMap "cfg" is invalid: metadata.labels: Invalid value: "token-from-a-secret-0123456789-0123456789-0123456789-0123456789": must be no more than 63 characters"#,
        // A value quoted JSON-escaped.
        r#"Secret/apps/db dry-run failed: unknown field "stringData.reference": "${SUPER_SECRET_TEXT}""#,
    ];
    for message in messages {
        let masked = secrets.redact(message);
        assert_clean(&masked);
        assert!(!masked.contains("token-from-a-secret"), "{masked}");
        assert!(masked.contains("*****"), "{masked}");
        assert!(masked.contains("dry-run failed"), "{masked}");
    }
}
