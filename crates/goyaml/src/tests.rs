use proptest::prelude::*;
use serde_json::{Map, json};

use super::*;

fn one(text: &str) -> Value {
    let mut docs = parse_documents(text).unwrap();
    assert_eq!(docs.len(), 1, "{text:?}");
    docs.remove(0)
}

#[test]
fn streams_drop_empty_and_null_documents() {
    let docs =
        parse_documents("a: 1\n---\n---\n# only a comment\n---\nnull\n---\nb: [x, 'y']\n...\n")
            .unwrap();
    assert_eq!(docs, vec![json!({"a": 1}), json!({"b": ["x", "y"]})]);
    assert!(parse_documents("").unwrap().is_empty());
}

#[test]
fn scalars_resolve_like_go_yaml_v3() {
    let v = one(concat!(
        "a: null\nb: ~\nc:\nd: yes\ne: on\nf: True\ng: 0755\nh: 0x1F\ni: 0o17\nj: 1_000\n",
        "k: 1.5\nl: .inf\nm: -.Inf\nn: .nan\no: '0755'\np: \"true\"\nq: |\n  x\nr: >-\n  a\n  b\n",
        "s: 99999999999999999999\nt: 2001-12-14\nu: 1e3\n"
    ));
    assert_eq!(
        v,
        json!({"a": null, "b": null, "c": null, "d": "yes", "e": "on", "f": true, "g": 493,
               "h": 31, "i": 15, "j": 1000, "k": 1.5, "l": ".inf", "m": "-.inf", "n": ".nan",
               "o": "0755", "p": "true", "q": "x\n", "r": "a b", "s": 1e20, "t": "2001-12-14T00:00:00Z",
               "u": 1000.0})
    );
}

#[test]
fn explicit_tags_are_honoured() {
    let v = one(concat!(
        "a: !!str 12\nb: !!int \"12\"\nc: !!float 1\nd: !!bool \"true\"\ne: !!null ''\n",
        "f: !!binary aGVsbG8=\ng: !custom 12\nh: !!map {x: 1}\ni: !!seq [1]\n"
    ));
    assert_eq!(
        v,
        json!({"a": "12", "b": 12, "c": 1.0, "d": true, "e": null, "f": "hello",
               "g": "12", "h": {"x": 1}, "i": [1]})
    );
    let err = parse_documents("a: !!int abc\n").unwrap_err();
    assert!(err.0.contains("line 1") && err.0.contains("!!int"), "{err}");
}

#[test]
fn keys_are_scalar_text() {
    let v = one("1: a\ntrue: b\n~: c\n0x10: d\n'q': e\n");
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["1", "true", "~", "0x10", "q"]);
    assert!(parse_documents("? [a]\n: b\n").is_err());
}

#[test]
fn anchors_aliases_and_merges_expand() {
    let v = one(concat!(
        "base: &b {x: 1, y: 2}\nother: &o {y: 3, z: 4}\n",
        "one:\n  <<: *b\n  x: 9\n",
        "many:\n  k: 0\n  <<: [*b, *o]\n",
        "list: &l [1, 2]\ncopy: *l\n"
    ));
    assert_eq!(v["one"], json!({"x": 9, "y": 2}));
    let many = v["many"].as_object().unwrap();
    assert_eq!(many.keys().collect::<Vec<_>>(), ["k", "y", "z", "x"]);
    assert_eq!(v["many"], json!({"k": 0, "y": 2, "z": 4, "x": 1}));
    assert_eq!(v["copy"], json!([1, 2]));
    assert!(parse_documents("a: {<<: 1}\n").is_err());
    assert!(parse_documents("a: *nope\n").is_err());
}

#[test]
fn duplicate_keys_are_errors_with_lines() {
    let text = "spec:\n  env:\n  - a\n  name: x\n  env:\n  - b\n";
    let err = parse_documents(text).unwrap_err();
    assert_eq!(
        err.0,
        "line 5: mapping key \"env\" already defined at line 2"
    );
}

#[test]
fn syntax_errors_name_line_and_column() {
    let err = parse_documents("a: [1, 2\nb: c\n").unwrap_err();
    assert!(err.0.starts_with("line "), "{err}");
    assert!(err.0.contains("column"), "{err}");
}

#[test]
fn excessive_aliasing_is_refused() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..9 {
        let prev = format!("*a{}", i - 1);
        text.push_str(&format!("a{i}: &a{i} [{}]\n", vec![prev; 10].join(", ")));
    }
    let err = parse_documents(&text).unwrap_err();
    assert!(err.0.contains("excessive aliasing"), "{err}");
}

#[test]
fn a_large_anchor_aliased_many_times_is_refused_by_bytes() {
    // 1 MiB aliased 1500 times stays far under the node bound but would be 1.5 GiB.
    let text = format!(
        "a: &a {}\nl: [{}]\n",
        "x".repeat(1 << 20),
        vec!["*a"; 1500].join(", ")
    );
    let err = parse_documents(&text).unwrap_err();
    assert!(err.0.contains("excessive aliasing"), "{err}");
    assert!(err.0.contains("MiB"), "{err}");
}

#[test]
fn an_alias_tree_with_large_leaves_is_refused_by_bytes() {
    let mut text = format!("x0: &a0 {}\n", "y".repeat(10_000));
    for i in 1..=12 {
        let prev = format!("*a{}", i - 1);
        text.push_str(&format!("x{i}: &a{i} [{}]\n", vec![prev; 4].join(", ")));
    }
    let err = parse_documents(&text).unwrap_err();
    assert!(err.0.contains("excessive aliasing"), "{err}");
}

#[test]
fn modest_aliasing_is_expanded() {
    let text = format!(
        "a: &a {}\nl: [{}]\n",
        "x".repeat(1000),
        vec!["*a"; 100].join(", ")
    );
    let v = one(&text);
    assert_eq!(v["l"].as_array().map(Vec::len), Some(100));
}

#[test]
fn nesting_is_bounded() {
    let ok = format!("{}1{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
    assert!(parse_documents(&ok).is_ok());
    for deep in [
        format!(
            "{}1{}",
            "[".repeat(MAX_DEPTH + 1),
            "]".repeat(MAX_DEPTH + 1)
        ),
        format!("{}1{}", "{a: ".repeat(100_000), "}".repeat(100_000)),
        format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000)),
        // Block style, one level per line.
        (0..MAX_DEPTH + 5)
            .map(|i| format!("{}a:\n", "  ".repeat(i)))
            .collect::<String>(),
    ] {
        let err = parse_documents(&deep).unwrap_err();
        assert!(err.0.contains("nested"), "{err}");
    }
}

#[test]
fn aliases_cannot_nest_beyond_the_bound() {
    // Each anchor nests the previous one 100 levels deeper: few nodes, unbounded depth.
    let wrap = |inner: &str| format!("{}{inner}{}", "[".repeat(100), "]".repeat(100));
    let mut text = format!("a0: &a0 {}\n", wrap("1"));
    for i in 1..10 {
        text.push_str(&format!("a{i}: &a{i} {}\n", wrap(&format!("*a{}", i - 1))));
    }
    let err = parse_documents(&text).unwrap_err();
    assert!(err.0.contains("nested more than"), "{err}");
}

#[test]
fn binary_scalars_are_decoded_like_go_yaml() {
    let v = one(concat!(
        "a: !!binary aGVsbG8=\nb: !!binary |\n  aGVsbG8gd29y\n  bGQK\n",
        "c: !!binary /w==\nd: !!binary AAEC\ne: !!binary ''\nf: !!binary 8J+Y\n",
        "g: !!binary aGVsbG9=\n"
    ));
    assert_eq!(v["a"], "hello");
    assert_eq!(v["b"], "hello world\n", "line breaks are ignored");
    assert_eq!(v["c"], "\u{fffd}");
    assert_eq!(v["d"], "\u{0}\u{1}\u{2}");
    assert_eq!(v["e"], "");
    // A truncated 4-byte sequence: one U+FFFD per byte, as Go's JSON encoding writes it.
    assert_eq!(v["f"], "\u{fffd}\u{fffd}\u{fffd}");
    // Go's decoder accepts non-zero trailing bits.
    assert_eq!(v["g"], "hello");
    for bad in [
        "a: !!binary aGVs bG8=\n",
        "a: !!binary aGVsbG8\n",
        "a: !!binary \"not base64!\"\n",
    ] {
        let err = parse_documents(bad).unwrap_err();
        assert!(
            err.0.contains("line 1") && err.0.contains("invalid base64"),
            "{err}"
        );
    }
}

#[test]
fn corpus_like_inputs() {
    // Quotes inside values, a lone quote, multibyte text with trailing space, literal newlines.
    let v = one("data:\n  TEST: this is a 'test'\n  Q: \"'\"\n  key: あ \n  nl: |\n    a\n    b\n");
    assert_eq!(
        v["data"],
        json!({"TEST": "this is a 'test'", "Q": "'", "key": "あ", "nl": "a\nb\n"})
    );
    assert_eq!(
        to_yaml(&v),
        "data:\n  TEST: this is a 'test'\n  Q: ''''\n  key: あ\n  nl: |\n    a\n    b\n"
    );
}

#[test]
fn layout_matches_kustomize() {
    let v = json!({"apiVersion": "v1", "spec": {"containers": [{"name": "a", "args": ["x", 1]}],
        "empty": {}, "none": [], "n": null, "nested": [[1, [2]], {"a": {}}]}});
    assert_eq!(
        to_yaml(&v),
        concat!(
            "apiVersion: v1\nspec:\n  containers:\n  - name: a\n    args:\n    - x\n    - 1\n",
            "  empty: {}\n  none: []\n  \"n\": null\n  nested:\n  - - 1\n    - - 2\n  - a: {}\n"
        )
    );
    assert_eq!(
        to_yaml_stream([&json!({"a": 1}), &json!({"b": 2})]),
        "a: 1\n---\nb: 2\n"
    );
    assert_eq!(to_yaml(&json!("x")), "x\n");
}

#[test]
fn long_lines_fold_at_column_80() {
    let text = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. Maecenas suscipit ex non molestie varius.";
    let v = json!({"value": text});
    assert_eq!(
        to_yaml(&v),
        "value: Lorem ipsum dolor sit amet, consectetur adipiscing elit. Maecenas suscipit\n  ex non molestie varius.\n"
    );
    assert_eq!(one(&to_yaml(&v)), v);
}

#[test]
fn writer_quoting_table() {
    let cases: &[(&str, &str)] = &[
        ("plain", "plain"),
        ("", "\"\""),
        ("8080", "\"8080\""),
        ("true", "\"true\""),
        ("True", "\"True\""),
        ("yes", "\"yes\""),
        ("y", "\"y\""),
        ("N", "\"N\""),
        ("on", "\"on\""),
        ("off", "\"off\""),
        ("null", "\"null\""),
        ("~", "\"~\""),
        ("0755", "\"0755\""),
        ("0x1F", "\"0x1F\""),
        ("0o17", "\"0o17\""),
        ("1_000", "\"1_000\""),
        ("1:20", "\"1:20\""),
        (".5", "\".5\""),
        ("1e3", "\"1e3\""),
        (".inf", "\".inf\""),
        (".NaN", "\".NaN\""),
        ("2001-12-14", "\"2001-12-14\""),
        (
            "2001-12-14t21:59:43.10-05:00",
            "\"2001-12-14t21:59:43.10-05:00\"",
        ),
        ("=", "\"=\""),
        ("<<", "\"<<\""),
        ("*", "'*'"),
        ("*/1 * * * *", "'*/1 * * * *'"),
        (": test", "': test'"),
        ("'", "''''"),
        (" lead", "' lead'"),
        ("trail ", "'trail '"),
        ("a #b", "'a #b'"),
        ("a: b", "'a: b'"),
        ("-", "'-'"),
        ("- a", "'- a'"),
        ("-a", "-a"),
        ("---", "'---'"),
        ("@x", "'@x'"),
        ("`x", "'`x'"),
        ("%x", "'%x'"),
        ("a#b", "a#b"),
        ("1.2.3", "1.2.3"),
        ("tab\tx", "\"tab\\tx\""),
        ("bell\u{7}", "\"bell\\a\""),
        ("😀", "\"\\U0001F600\""),
        ("あ", "あ"),
        ("é", "é"),
        ("a\u{2028}b", "\"a\\Lb\""),
        ("a\nb", "|-\n  a\n  b"),
        ("a\nb\n", "|\n  a\n  b"),
        ("a\n\n", "|+\n  a\n"),
        (" a\nb", "|2-\n   a\n  b"),
        ("a \nb", "\"a \\nb\""),
    ];
    for (s, want) in cases {
        let got = to_yaml(&json!({ "k": s }));
        let want = format!("k: {want}\n");
        assert_eq!(got, want, "writing {s:?}");
        assert_eq!(one(&got), json!({ "k": s }), "reading back {got:?}");
    }
}

#[test]
fn numbers_are_written_so_they_read_back() {
    let cases: &[(Value, &str)] = &[
        (json!(1), "1"),
        (json!(-5), "-5"),
        (json!(u64::MAX), "18446744073709551615"),
        (json!(1.0), "1.0"),
        (json!(-0.0), "-0.0"),
        (json!(0.5), "0.5"),
        (json!(100000.0), "100000.0"),
        (json!(1e6), "1e+06"),
        (json!(1.5e20), "1.5e+20"),
        (json!(1e-7), "1e-07"),
        (json!(0.0001), "0.0001"),
        (json!(123.456), "123.456"),
        (json!(true), "true"),
        (json!(null), "null"),
    ];
    for (v, want) in cases {
        let doc = json!({ "k": v });
        let got = to_yaml(&doc);
        assert_eq!(got, format!("k: {want}\n"));
        assert_eq!(one(&got), doc, "reading back {got:?}");
    }
}

#[test]
fn explicit_keys_for_long_or_multiline_keys() {
    let long = "k".repeat(130);
    let mut m = Map::new();
    m.insert(long.clone(), json!({"a": [1]}));
    m.insert("x\ny".into(), json!("v"));
    let v = Value::Object(m);
    let text = to_yaml(&v);
    assert_eq!(
        text,
        format!("? {long}\n: a:\n  - 1\n? |-\n  x\n  y\n: v\n")
    );
    assert_eq!(one(&text), v);
}

fn arb_string() -> impl Strategy<Value = String> {
    let pieces = prop_oneof![
        any::<char>().prop_map(String::from),
        Just(" ".to_owned()),
        Just("\n".to_owned()),
        Just(": ".to_owned()),
        Just(" #".to_owned()),
        Just("'".to_owned()),
        Just("\"".to_owned()),
        Just("\t".to_owned()),
        Just("-".to_owned()),
        "[a-z]{1,8}",
        "[0-9._:+eExob-]{1,6}",
        prop::sample::select(vec![
            "yes", "no", "on", "y", "null", "~", "true", "0755", "<<"
        ])
        .prop_map(str::to_owned),
    ];
    prop::collection::vec(pieces, 0..12).prop_map(|v| v.concat())
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        any::<u64>().prop_map(|u| json!(u)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        arb_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((arb_string(), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    #[test]
    fn values_round_trip(v in arb_value()) {
        let text = to_yaml(&v);
        let docs = parse_documents(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        if v.is_null() {
            prop_assert!(docs.is_empty());
        } else {
            prop_assert_eq!(docs.len(), 1, "{}", text);
            prop_assert_eq!(&docs[0], &v, "{}", text);
        }
    }

    #[test]
    fn streams_round_trip(vs in prop::collection::vec(arb_value(), 1..4)) {
        let vs: Vec<Value> = vs.into_iter().filter(|v| !v.is_null()).collect();
        let text = to_yaml_stream(&vs);
        prop_assert_eq!(parse_documents(&text).unwrap(), vs, "{}", text);
    }
}
