use super::*;
use serde::Deserialize;
use serde_json::json;
use std::collections::BTreeMap;

#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Inner {
    #[serde(default)]
    name: String,
    #[serde(default)]
    count: i64,
    #[serde(default)]
    create: bool,
}

#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Outer {
    #[serde(default)]
    field_specs: Vec<Inner>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    target: Option<Inner>,
    #[serde(default)]
    tags: Vec<String>,
}

#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct FieldSpec {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    path: String,
}

#[test]
fn field_names_match_case_insensitively_and_the_last_sorted_key_wins() {
    let v = json!({"FieldSpecs": [{"NAME": "a", "Count": 2}], "Labels": {"K": "v"}});
    let o: Outer = from_value(&v, Mode::KUSTOMIZATION).unwrap();
    assert_eq!(o.field_specs[0].name, "a");
    assert_eq!(o.field_specs[0].count, 2);
    // Map keys are data, not field names.
    assert_eq!(o.labels.get("K").map(String::as_str), Some("v"));
    let v = json!({"target": {"name": "exact", "Name": "folded"}});
    let o: Outer = from_value(&v, Mode::KUSTOMIZATION).unwrap();
    assert_eq!(
        o.target.unwrap().name,
        "exact",
        "\"name\" sorts after \"Name\""
    );
}

#[test]
fn unknown_fields_are_refused_or_ignored_by_mode() {
    let v = json!({"fieldSpecs": [{"name": "a", "bogus": 1}], "bogus": 2});
    let err = from_value::<Outer>(&v, Mode::KUSTOMIZATION).unwrap_err();
    assert!(err.to_string().contains("unknown field `bogus`"), "{err}");
    assert!(from_value::<Outer>(&v, Mode::STRICT).is_err());
    let o: Outer = from_value(&v, Mode::LENIENT).unwrap();
    assert_eq!(o.field_specs[0].name, "a");
}

#[test]
fn null_is_the_zero_value_and_whole_floats_are_integers() {
    let v = json!({"fieldSpecs": [{"name": null, "count": 3.0, "create": null}],
        "labels": {"a": null}, "target": null, "tags": null});
    let o: Outer = from_value(&v, Mode::KUSTOMIZATION).unwrap();
    assert_eq!(
        o.field_specs[0],
        Inner {
            count: 3,
            ..Inner::default()
        }
    );
    assert_eq!(o.labels.get("a").map(String::as_str), Some(""));
    assert!(o.target.is_none() && o.tags.is_empty());
    let err =
        from_value::<Outer>(&json!({"fieldSpecs": [{"count": 3.5}]}), Mode::LENIENT).unwrap_err();
    assert!(err.to_string().contains("3.5"), "{err}");
    assert!(from_value::<Outer>(&json!({"fieldSpecs": [{"count": "3"}]}), Mode::LENIENT).is_err());
}

#[test]
fn numbers_and_booleans_become_strings_where_go_converts_them() {
    let v = json!({"labels": {"a": 1, "b": true, "c": 1.10, "d": 0.1234567891, "e": 1500000.0,
        "f": 0.00001, "g": 100000.0}, "tags": [2, false], "target": {"name": 7}});
    let o: Outer = from_value(&v, Mode::LENIENT).unwrap();
    let labels: Vec<&str> = o.labels.values().map(String::as_str).collect();
    assert_eq!(
        labels,
        [
            "1",
            "true",
            "1.1",
            "0.12345679",
            "1.5e+06",
            "1e-05",
            "100000"
        ]
    );
    assert_eq!(o.tags, ["2", "false"]);
    assert_eq!(o.target.unwrap().name, "7");
    // Not in a kustomization file.
    assert!(from_value::<Outer>(&json!({"labels": {"a": 1}}), Mode::KUSTOMIZATION).is_err());
    assert!(from_value::<Outer>(&json!({"labels": {"a": 1}}), Mode::LENIENT_UNCONVERTED).is_err());
    // Not into fields Go declares in an embedded struct.
    let err = from_value::<FieldSpec>(&json!({"kind": 12, "path": 3}), Mode::LENIENT).unwrap_err();
    assert!(err.to_string().contains("12"), "{err}");
    let spec: FieldSpec = from_value(&json!({"kind": "K", "path": 3}), Mode::LENIENT).unwrap();
    assert_eq!(spec.path, "3");
}

#[test]
fn go_formats_float32_with_g() {
    for (f, text) in [
        (1.0, "1"),
        (-2.5, "-2.5"),
        (123456.0, "123456"),
        (1234567.0, "1.234567e+06"),
        (0.0001, "0.0001"),
        (0.00001234, "1.234e-05"),
        (0.0, "0"),
    ] {
        assert_eq!(go_g_float32(f), text, "{f}");
    }
}
