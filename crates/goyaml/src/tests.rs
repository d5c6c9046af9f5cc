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

/// Block scalars as go-yaml v3.0.1 reads them (`yaml.Decoder` into `interface{}`, all
/// documents, null ones left out), the last line of several without a final line break.
///
/// Each header of [`BLOCK_SCALAR_HEADERS`] is read with each of these bodies, as
/// `k: <header><body>`.
const BLOCK_SCALAR_BODIES: [&str; 5] = [
    "\n  a\n  b",
    "\n  a\n  b\n",
    "\n  a\n\n  b",
    "\n  a\n    b",
    "\n  a\n  b\n\n",
];

/// Block scalar headers (an explicit indentation of 2 reads as the detected one) and the value
/// of `k` go-yaml v3.0.1 reads with each of [`BLOCK_SCALAR_BODIES`].
#[rustfmt::skip]
const BLOCK_SCALAR_HEADERS: &[(&[&str], [&str; 5])] = &[
    (&["|", "|2"], ["a\nb", "a\nb\n", "a\n\nb", "a\n  b", "a\nb\n"]),
    (&["|-", "|2-"], ["a\nb", "a\nb", "a\n\nb", "a\n  b", "a\nb"]),
    (&["|+", "|+2"], ["a\nb", "a\nb\n", "a\n\nb", "a\n  b", "a\nb\n\n"]),
    (&[">"], ["a b", "a b\n", "a\nb", "a\n  b", "a b\n"]),
    (&[">-", ">2-"], ["a b", "a b", "a\nb", "a\n  b", "a b"]),
    (&[">+"], ["a b", "a b\n", "a\nb", "a\n  b", "a b\n\n"]),
];

/// Other block scalars as go-yaml v3.0.1 reads them, the texts and the documents as JSON.
#[rustfmt::skip]
const GO_YAML_V3_BLOCK_SCALARS: &[(&str, &str)] = &[
    ("k: |\n  a\n  b\n   ", r#"[{"k": "a\nb\n "}]"#),
    ("k: |\n  a\n  b\n  ", r#"[{"k": "a\nb\n"}]"#),
    ("k: |+\n  a\n  b\n  ", r#"[{"k": "a\nb\n"}]"#),
    ("k: |+\n  ", r#"[{"k": ""}]"#),
    ("k: |+\n\n  ", r#"[{"k": "\n"}]"#),
    ("k: |\n", r#"[{"k": ""}]"#),
    ("k: |", r#"[{"k": ""}]"#),
    ("k: |+", r#"[{"k": ""}]"#),
    ("k: >+\n\n\n", r#"[{"k": "\n\n"}]"#),
    ("k: |\n  a\n  b\n---\nz: 1", r#"[{"k": "a\nb\n"}, {"z": 1}]"#),
    ("k: |\n  a\n  b\n---", r#"[{"k": "a\nb\n"}]"#),
    ("k: |\n  a\n  b\n...", r#"[{"k": "a\nb\n"}]"#),
    ("k: |\n  a\n  b\n# c", r#"[{"k": "a\nb\n"}]"#),
    ("k: |\r\n  a\r\n  b", r#"[{"k": "a\nb"}]"#),
    ("k: |\r\n  a\r\n  b\r\n", r#"[{"k": "a\nb\n"}]"#),
    ("- |\n  a\n  b", r#"[["a\nb"]]"#),
    ("a:\n  - k: >-\n      x\n        y", r#"[{"a": [{"k": "x\n  y"}]}]"#),
    ("a:\n- |\n  > quoted\n  b", r#"[{"a": ["> quoted\nb"]}]"#),
    ("k: |\n  > note\n\n  b\n", r#"[{"k": "> note\n\nb\n"}]"#),
];

/// Every block scalar case: [`BLOCK_SCALAR_HEADERS`] with each body, then
/// [`GO_YAML_V3_BLOCK_SCALARS`].
fn go_yaml_v3_block_scalars() -> Vec<(String, Value)> {
    let headers = BLOCK_SCALAR_HEADERS.iter().flat_map(|(headers, values)| {
        headers.iter().flat_map(move |header| {
            BLOCK_SCALAR_BODIES
                .iter()
                .zip(values)
                .map(move |(body, value)| (format!("k: {header}{body}"), json!([{"k": value}])))
        })
    });
    let others = GO_YAML_V3_BLOCK_SCALARS
        .iter()
        .map(|(text, want)| (text.to_string(), serde_json::from_str(want).unwrap()));
    headers.chain(others).collect()
}

#[test]
fn block_scalars_at_the_end_of_input_read_as_go_yaml_v3_reads_them() {
    let cases = go_yaml_v3_block_scalars();
    assert_eq!(cases.len(), 69, "every case is read");
    for (text, want) in &cases {
        let text = text.as_str();
        let got = parse_documents_go_yaml_v3(text).unwrap();
        assert_eq!(Value::Array(got), *want, "reading {text:?}");
        // The same from kustomize's reading, which differs only for folded scalars.
        if !text.contains('>') {
            assert_eq!(
                Value::Array(parse_documents(text).unwrap()),
                *want,
                "{text:?}"
            );
        }
    }
}

/// Folded scalars as go-yaml v3.0.1 reads them, then as kustomize v5.8.2 prints them: kyaml's
/// `ByteReader` and `RNode.MarshalJSON`, which writes the node with go-yaml v3 and reads it
/// back, gaining an empty line before each more-indented line.
#[rustfmt::skip]
const KYAML_FOLDED_SCALARS: &[(&str, &str, &str)] = &[
    (
        "k: >-\n  object.exists(c,\n    c.image.startsWith(\"x\")\n  )\n",
        r#"{"k": "object.exists(c,\n  c.image.startsWith(\"x\")\n)"}"#,
        r#"{"k": "object.exists(c,\n\n  c.image.startsWith(\"x\")\n)"}"#,
    ),
    (
        "k: >\n  a\n    b\n",
        r#"{"k": "a\n  b\n"}"#,
        r#"{"k": "a\n\n  b\n"}"#,
    ),
    (
        "k: >\n  a\n  b\n    c\n",
        r#"{"k": "a b\n  c\n"}"#,
        r#"{"k": "a b\n\n  c\n"}"#,
    ),
    (
        "k: >\n  a\n    b\n    c\n  d\n",
        r#"{"k": "a\n  b\n  c\nd\n"}"#,
        r#"{"k": "a\n\n  b\n  c\nd\n"}"#,
    ),
    (
        "k: >\n  a\n\n    b\n",
        r#"{"k": "a\n\n  b\n"}"#,
        r#"{"k": "a\n\n\n  b\n"}"#,
    ),
    (
        "k: >\n  a\n\n\n    b\n  c\n",
        r#"{"k": "a\n\n\n  b\nc\n"}"#,
        r#"{"k": "a\n\n\n\n  b\nc\n"}"#,
    ),
    (
        "k: >+\n  a\n    b\n\n",
        r#"{"k": "a\n  b\n\n"}"#,
        r#"{"k": "a\n\n  b\n\n"}"#,
    ),
    (
        "k: >-\n  a\n    b\n\n  c\n",
        r#"{"k": "a\n  b\n\nc"}"#,
        r#"{"k": "a\n\n  b\n\nc"}"#,
    ),
    (
        "k: >\n  a b\n  c\n\n  d\n",
        r#"{"k": "a b c\nd\n"}"#,
        r#"{"k": "a b c\nd\n"}"#,
    ),
    (
        "k: >\n  a\n  \tb\n",
        r#"{"k": "a\n\tb\n"}"#,
        r#"{"k": "a\n\n\tb\n"}"#,
    ),
    (
        "k: >\n  a\n    b \n",
        r#"{"k": "a\n  b \n"}"#,
        r#"{"k": "a\n  b \n"}"#,
    ),
    (
        "k: >\n  a\n    b\n  c \u{1f600}\n",
        r#"{"k": "a\n  b\nc 😀\n"}"#,
        r#"{"k": "a\n  b\nc 😀\n"}"#,
    ),
    (
        "k: >2\n   a\n  b\n    c\n",
        r#"{"k": " a\nb\n  c\n"}"#,
        r#"{"k": " a\nb\n  c\n"}"#,
    ),
    (
        "k: >\n\n  a\n    b\n",
        r#"{"k": "\na\n  b\n"}"#,
        r#"{"k": "\na\n\n  b\n"}"#,
    ),
    (
        "k: |\n  a\n    b\n",
        r#"{"k": "a\n  b\n"}"#,
        r#"{"k": "a\n  b\n"}"#,
    ),
    (
        "a:\n- >-\n  x\n    y\n- b: >\n    p\n      q\n",
        r#"{"a": ["x\n  y", {"b": "p\n  q\n"}]}"#,
        r#"{"a": ["x\n\n  y", {"b": "p\n\n  q\n"}]}"#,
    ),
    (
        "spec:\n  matchConditions:\n    - name: n\n      expression: >-\n        [\n          JSONPatch{\n            op: \"replace\",\n          }\n        ]\n",
        r#"{"spec": {"matchConditions": [{"expression": "[\n  JSONPatch{\n    op: \"replace\",\n  }\n]", "name": "n"}]}}"#,
        r#"{"spec": {"matchConditions": [{"expression": "[\n\n  JSONPatch{\n    op: \"replace\",\n  }\n]", "name": "n"}]}}"#,
    ),
];

#[test]
fn folded_scalars_read_as_kustomize_prints_them() {
    for (text, go_yaml_v3, kustomize) in KYAML_FOLDED_SCALARS {
        let go_yaml_v3: Value = serde_json::from_str(go_yaml_v3).unwrap();
        let kustomize: Value = serde_json::from_str(kustomize).unwrap();
        assert_eq!(
            parse_documents_go_yaml_v3(text).unwrap(),
            [go_yaml_v3],
            "{text:?}"
        );
        assert_eq!(parse_documents(text).unwrap(), [kustomize], "{text:?}");
    }
}

#[test]
fn readers_for_go_yaml_v2_neither_fold_twice_nor_convert_timestamps() {
    let text = "a: >\n  x\n    y\nb: 2001-12-14\nc: yes\nd: 0o-7\n";
    assert_eq!(
        parse_documents_yaml11(text).unwrap(),
        [json!({"a": "x\n  y\n", "b": "2001-12-14", "c": true, "d": "0o-7"})]
    );
    assert_eq!(
        parse_documents_last_key_wins(text).unwrap(),
        [json!({"a": "x\n  y\n", "b": "2001-12-14T00:00:00Z", "c": "yes", "d": -7})]
    );
}

#[test]
fn a_timestamp_go_cannot_print_is_an_error() {
    let err = parse_documents("t: 2002-01-01T01:02:03+24:00\n").unwrap_err();
    assert!(
        err.0.contains("line 1") && err.0.contains("timezone hour"),
        "{err}"
    );
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

/// What kustomize prints for `{"k": <string>}` (`sigs.k8s.io/yaml.JSONToYAML`, go-yaml v2
/// v2.4.0), after `k: `: plain unless go-yaml v2 would read the text back as something else
/// or its syntax forbids it, single-quoted when that is enough, double-quoted otherwise,
/// literal blocks for text with line feeds. Taken from the Go library.
#[rustfmt::skip]
const GO_YAML_V2_STRINGS: &[(&str, &str)] = &[
        ("=", "=\n"),
        ("<<", "<<\n"),
        ("<<<", "<<<\n"),
        ("==", "==\n"),
        ("a=b", "a=b\n"),
        ("matchType", "matchType\n"),
        ("~", "\"~\"\n"),
        ("~a", "~a\n"),
        ("-", "'-'\n"),
        ("--", "--\n"),
        ("---", "'---'\n"),
        ("- a", "'- a'\n"),
        ("-a", "-a\n"),
        ("...", "'...'\n"),
        ("....", "'....'\n"),
        (": a", "': a'\n"),
        ("a:", "'a:'\n"),
        ("a: b", "'a: b'\n"),
        ("a:b", "a:b\n"),
        ("a #b", "'a #b'\n"),
        ("a#b", "a#b\n"),
        ("#a", "'#a'\n"),
        ("?", "'?'\n"),
        ("? a", "'? a'\n"),
        ("?a", "?a\n"),
        (",a", "',a'\n"),
        ("a,b", "a,b\n"),
        ("[a", "'[a'\n"),
        ("a]", "a]\n"),
        ("{a", "'{a'\n"),
        ("a}", "a}\n"),
        ("&a", "'&a'\n"),
        ("*", "'*'\n"),
        ("*a", "'*a'\n"),
        ("!a", "'!a'\n"),
        ("|a", "'|a'\n"),
        (">a", "'>a'\n"),
        ("'a", "'''a'\n"),
        ("\"a", "'\"a'\n"),
        ("%a", "'%a'\n"),
        ("@a", "'@a'\n"),
        ("`a", "'`a'\n"),
        ("a'b", "a'b\n"),
        ("a\"b", "a\"b\n"),
        ("\\", "\\\n"),
        (" a", "' a'\n"),
        ("a ", "'a '\n"),
        ("a\tb", "\"a\\tb\"\n"),
        ("y", "\"y\"\n"),
        ("Y", "\"Y\"\n"),
        ("yes", "\"yes\"\n"),
        ("Yes", "\"Yes\"\n"),
        ("YES", "\"YES\"\n"),
        ("yEs", "yEs\n"),
        ("n", "\"n\"\n"),
        ("N", "\"N\"\n"),
        ("no", "\"no\"\n"),
        ("No", "\"No\"\n"),
        ("NO", "\"NO\"\n"),
        ("on", "\"on\"\n"),
        ("On", "\"On\"\n"),
        ("ON", "\"ON\"\n"),
        ("oN", "oN\n"),
        ("off", "\"off\"\n"),
        ("Off", "\"Off\"\n"),
        ("OFF", "\"OFF\"\n"),
        ("true", "\"true\"\n"),
        ("True", "\"True\"\n"),
        ("TRUE", "\"TRUE\"\n"),
        ("tRUE", "tRUE\n"),
        ("false", "\"false\"\n"),
        ("null", "\"null\"\n"),
        ("Null", "\"Null\"\n"),
        ("NULL", "\"NULL\"\n"),
        ("nULL", "nULL\n"),
        ("", "\"\"\n"),
        ("0", "\"0\"\n"),
        ("00", "\"00\"\n"),
        ("08", "\"08\"\n"),
        ("0755", "\"0755\"\n"),
        ("0x1F", "\"0x1F\"\n"),
        ("0X1F", "\"0X1F\"\n"),
        ("0x", "0x\n"),
        ("0xg", "0xg\n"),
        ("0o17", "\"0o17\"\n"),
        ("0O17", "\"0O17\"\n"),
        ("0o8", "0o8\n"),
        ("0o-7", "0o-7\n"),
        ("0b1", "\"0b1\"\n"),
        ("0b2", "0b2\n"),
        ("0b", "0b\n"),
        ("0b-1", "\"0b-1\"\n"),
        ("0b+1", "\"0b+1\"\n"),
        ("-0b1", "\"-0b1\"\n"),
        ("1_000", "\"1_000\"\n"),
        ("1__0", "\"1__0\"\n"),
        ("_1", "_1\n"),
        ("1_", "\"1_\"\n"),
        ("+1", "\"+1\"\n"),
        ("-1", "\"-1\"\n"),
        ("+", "+\n"),
        ("+-1", "+-1\n"),
        (".5", "\".5\"\n"),
        ("._5", "._5\n"),
        (".5_5", "\".5_5\"\n"),
        (".5e1_0", "\".5e1_0\"\n"),
        ("._", "._\n"),
        (".", ".\n"),
        ("..", "..\n"),
        ("1.", "\"1.\"\n"),
        ("1.2", "\"1.2\"\n"),
        ("1.2.3", "1.2.3\n"),
        ("-.5", "\"-.5\"\n"),
        ("1e3", "\"1e3\"\n"),
        ("1E3", "\"1E3\"\n"),
        ("1e", "1e\n"),
        ("e3", "e3\n"),
        ("1e+3", "\"1e+3\"\n"),
        ("1e400", "1e400\n"),
        ("-1e400", "-1e400\n"),
        (".5e400", ".5e400\n"),
        ("1e-400", "\"1e-400\"\n"),
        (".inf", "\".inf\"\n"),
        (".Inf", "\".Inf\"\n"),
        ("+.inf", "\"+.inf\"\n"),
        ("-.INF", "\"-.INF\"\n"),
        (".nan", "\".nan\"\n"),
        (".NaN", "\".NaN\"\n"),
        ("nan", "nan\n"),
        ("inf", "inf\n"),
        ("Infinity", "Infinity\n"),
        ("9223372036854775807", "\"9223372036854775807\"\n"),
        ("9223372036854775808", "\"9223372036854775808\"\n"),
        ("18446744073709551615", "\"18446744073709551615\"\n"),
        ("18446744073709551616", "\"18446744073709551616\"\n"),
        ("0xFFFFFFFFFFFFFFFF", "\"0xFFFFFFFFFFFFFFFF\"\n"),
        ("0x10000000000000000", "0x10000000000000000\n"),
        ("1:20", "\"1:20\"\n"),
        ("1:2", "\"1:2\"\n"),
        ("1:60", "1:60\n"),
        ("-1:20:30.5", "\"-1:20:30.5\"\n"),
        ("1_0:20", "\"1_0:20\"\n"),
        ("190:20:30.15", "\"190:20:30.15\"\n"),
        ("1:20:3x", "1:20:3x\n"),
        ("a:1", "a:1\n"),
        ("2001-12-14", "\"2001-12-14\"\n"),
        ("2002-1-2", "\"2002-1-2\"\n"),
        ("2002-02-29", "2002-02-29\n"),
        ("2004-02-29", "\"2004-02-29\"\n"),
        ("2002-13-02", "2002-13-02\n"),
        ("02002-01-01", "02002-01-01\n"),
        ("2001-12-14t21:59:43.10-05:00", "\"2001-12-14t21:59:43.10-05:00\"\n"),
        ("2001-12-14 21:59:43.10", "\"2001-12-14 21:59:43.10\"\n"),
        ("2001-12-14 21:59:43.10 -5", "2001-12-14 21:59:43.10 -5\n"),
        ("2002-01-01  01:02:03", "\"2002-01-01  01:02:03\"\n"),
        ("2002-01-01T01:02:03", "2002-01-01T01:02:03\n"),
        ("2002-01-01T01:02:03,5Z", "\"2002-01-01T01:02:03,5Z\"\n"),
        ("2002-01-01T01:02:03.1234567891Z", "\"2002-01-01T01:02:03.1234567891Z\"\n"),
        ("2002-01-01T25:02:03Z", "2002-01-01T25:02:03Z\n"),
        ("2002-01-01T01:02:03+24:00", "\"2002-01-01T01:02:03+24:00\"\n"),
        ("v1", "v1\n"),
        ("8080/TCP", "8080/TCP\n"),
        ("é", "é\n"),
        ("あ", "あ\n"),
        ("\u{1f600}", "\"\\U0001F600\"\n"),
        ("a\u{a0}b", "a\u{a0}b\n"),
        ("\u{a0}", "\u{a0}\n"),
        ("a\u{85}b", "a b\n"),
        ("\u{85}", "' '\n"),
        ("a \u{85} b", "a b\n"),
        ("a\u{85}\u{85}b", "|-\n  a\n  b\n"),
        ("a\u{2028}b", "'a\u{2028}  b'\n"),
        ("\u{2028}", "'\u{2028}'\n"),
        ("a\u{2029}b", "'a\u{2029}  b'\n"),
        ("x\u{2028} y", "\"x\\L y\"\n"),
        ("\u{feff}a", "\"\\uFEFF\\x61\"\n"),
        ("a\u{feff}b", "\"a\\uFEFFb\"\n"),
        ("\u{e000}", "\u{e000}\n"),
        ("\u{fffd}", "\u{fffd}\n"),
        ("a\u{1b}b", "\"a\\eb\"\n"),
        ("a\u{0}b", "\"a\\0b\"\n"),
        ("a\rb", "\"a\\rb\"\n"),
        ("a\nb", "|-\n  a\n  b\n"),
        ("a\nb\n", "|\n  a\n  b\n"),
        ("a\n\n", "|+\n  a\n\n"),
        ("\n", "|2+\n\n"),
        (" a\nb", "|2-\n   a\n  b\n"),
        ("\na", "|2-\n\n  a\n"),
        ("a \nb", "\"a \\nb\"\n"),
        ("a\n b", "|-\n  a\n   b\n"),
        ("a\n\tb", "\"a\\n\\tb\"\n"),
        ("\ta\nb", "\"\\ta\\nb\"\n"),
        ("a\nb\u{2028}", "|\n  a\n  b\u{2028}"),
        ("a\n\u{2028}b", "|-\n  a\n\u{2028}  b\n"),
        ("\u{2028}a\nb", "|2-\n\u{2028}  a\n  b\n"),
        ("a\n\u{2028}", "|+\n  a\n\u{2028}"),
];

#[test]
fn strings_are_written_as_go_yaml_v2_writes_them() {
    for (s, want) in GO_YAML_V2_STRINGS {
        let got = to_yaml(&json!({ "k": s }));
        assert_eq!(got, format!("k: {want}"), "writing {s:?}");
    }
}

#[test]
fn strings_go_yaml_v2_leaves_plain_read_back_as_strings() {
    // Everything go-yaml v2 prints plain reads back as the same string, except the forms
    // only go-yaml v3 reads as numbers (`0o-7`).
    for (s, want) in GO_YAML_V2_STRINGS {
        let plain = !want.starts_with(['"', '\'', '|']);
        if plain && !s.starts_with("0o") && !s.contains(['\u{85}', '\u{2028}', '\u{2029}']) {
            assert_eq!(one(&format!("k: {want}")), json!({ "k": s }), "{want:?}");
        }
    }
}

#[test]
fn keys_are_quoted_like_values() {
    let mut v = json!({"=": 1, "<<<": 2, "yes": 3, "1:20": 4, "a: b": 5});
    sort_keys(&mut v);
    assert_eq!(
        to_yaml(&v),
        "<<<: 2\n=: 1\n\"1:20\": 4\n'a: b': 5\n\"yes\": 3\n"
    );
}

#[test]
fn nel_folds_as_go_yaml_reads_it_back_from_json() {
    // kustomize hands go-yaml v2 JSON text, where U+0085 is not escaped: inside the quoted
    // string it is a line break, folded like any other.
    let cases = [
        ("a\u{85}b", "k: a b\n"),
        ("a \u{85}  b", "k: a b\n"),
        ("a\u{85}\u{85}b", "k: |-\n  a\n  b\n"),
        ("a\u{85}\u{85}\u{85}b", "k: |-\n  a\n\n  b\n"),
        ("\u{85}", "k: ' '\n"),
        ("a\u{85}", "k: 'a '\n"),
    ];
    for (s, want) in cases {
        assert_eq!(to_yaml(&json!({ "k": s })), want, "{s:?}");
    }
}

#[test]
fn line_and_paragraph_separators_are_line_breaks_to_the_writer() {
    // go-yaml v2 writes U+2028/U+2029 as they are and indents what follows; a value ending
    // with one is directly followed by the next key, and a document by nothing.
    let v = json!({"k": "a\u{2028}b", "l": "a\nb\u{2028}", "m": ["x\n\u{2028}y"], "z": 1});
    assert_eq!(
        to_yaml(&v),
        "k: 'a\u{2028}  b'\nl: |\n  a\n  b\u{2028}m:\n- |-\n  x\n\u{2028}  y\nz: 1\n"
    );
    assert_eq!(
        to_yaml(&json!({"k": "a\nb\u{2029}"})),
        "k: |\n  a\n  b\u{2029}"
    );
    assert_eq!(
        to_yaml(&json!({"k": "\u{2028}a\nb"})),
        "k: |2-\n\u{2028}  a\n  b\n"
    );
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
            "yes",
            "no",
            "on",
            "y",
            "null",
            "~",
            "true",
            "0755",
            "<<",
            "=",
            "1e400",
            "2002-02-30",
            "0o-7"
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

/// Whether go-yaml v2's printing of every string of `v` reads back unchanged with go-yaml v3.
/// It does not for a `<<` key (a merge key to the reader), for U+0085, U+2028 and U+2029
/// (line breaks to go-yaml, not to the YAML 1.2 parser), or for text only go-yaml v3 reads
/// as a number (`0o-7`).
fn go_round_trips(v: &Value) -> bool {
    let text_ok = |s: &str| {
        !s.contains(['\u{85}', '\u{2028}', '\u{2029}'])
            && (scalar::resolve_plain(s) == scalar::Plain::Str || scalar::go_yaml_v2_quotes(s))
    };
    match v {
        Value::String(s) => text_ok(s),
        Value::Array(items) => items.iter().all(go_round_trips),
        Value::Object(map) => map
            .iter()
            .all(|(k, v)| k != "<<" && text_ok(k) && go_round_trips(v)),
        _ => true,
    }
}

proptest! {
    #[test]
    fn values_round_trip(v in arb_value()) {
        prop_assume!(go_round_trips(&v));
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
        prop_assume!(vs.iter().all(go_round_trips));
        let vs: Vec<Value> = vs.into_iter().filter(|v| !v.is_null()).collect();
        let text = to_yaml_stream(&vs);
        prop_assert_eq!(parse_documents(&text).unwrap(), vs, "{}", text);
    }
}

#[test]
fn plain_texts_name_the_scalars_whose_value_lost_their_text() {
    let docs = crate::parse_documents_with_plain_texts(
        "---\n~\n---\na:\n  n: ~\n  e:\n  x: null\n  h: 0x1F\n  s: text\n  l: [1.50, 2, \"q\"]\n",
    )
    .unwrap();
    assert_eq!(docs.len(), 1, "the null document is dropped with its texts");
    let (value, texts) = &docs[0];
    assert_eq!(value["a"]["h"], 31);
    let key = |k: &str| crate::PathStep::Key(k.to_string());
    let found: Vec<(Vec<crate::PathStep>, &str)> = texts
        .iter()
        .map(|t| (t.path.clone(), t.text.as_str()))
        .collect();
    assert_eq!(
        found,
        vec![
            (vec![key("a"), key("n")], "~"),
            (vec![key("a"), key("e")], ""),
            (vec![key("a"), key("x")], "null"),
            (vec![key("a"), key("h")], "0x1F"),
            (vec![key("a"), key("l"), crate::PathStep::Index(0)], "1.50"),
            (vec![key("a"), key("l"), crate::PathStep::Index(1)], "2"),
        ]
    );
}
