//! Behaviour tables for the substitution grammar, written from Flux's fork of
//! drone/envsubst (parser, scanner, functions and its `path.Match` variant).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::*;

fn vars() -> BTreeMap<&'static str, &'static str> {
    BTreeMap::from([
        ("var01", "abcdEFGH28ij"),
        ("upper", "ABCDEFGH28IJ"),
        ("path", "/home/bozo/ideas/thoughts.for.today"),
        ("file", "bash.string.txt"),
        ("stringZ", "abcABC123ABCabc"),
        ("slashes", "foo/bar/baz"),
        ("empty", ""),
        ("uni", "éàü"),
        ("dflt", "foo"),
        ("n", "3"),
        ("neg", "-2"),
        ("far", "-100"),
        ("tricky", "${var01}"),
        ("café", "crème"),
    ])
}

fn run(text: &str, strict: bool) -> Result<String, SubstituteError> {
    let vars = vars();
    eval(text, &|name| vars.get(name).map(|v| v.to_string()), strict)
}

fn check(cases: &[(&str, &str)], strict: bool) {
    for (input, want) in cases {
        match run(input, strict) {
            Ok(got) => assert_eq!(&got, want, "input {input:?} (strict: {strict})"),
            Err(e) => panic!("input {input:?} (strict: {strict}) failed: {e}"),
        }
    }
}

fn syntax(kind: SyntaxError) -> SubstituteError {
    SubstituteError::Syntax { line: 1, kind }
}

fn check_errors(cases: &[(&str, SubstituteError)], strict: bool) {
    for (input, want) in cases {
        assert_eq!(
            run(input, strict).as_ref(),
            Err(want),
            "input {input:?} (strict: {strict})"
        );
    }
}

#[test]
fn plain_text_and_escapes() {
    check(
        &[
            ("", ""),
            ("abcdEFGH28ij", "abcdEFGH28ij"),
            ("}text{", "}text{"),
            ("http://github.com", "http://github.com"),
            (r"\\.\pipe\name", r"\\.\pipe\name"),
            ("$var01 and $", "$var01 and $"),
            ("a$b", "a$b"),
            // `$$` is an escape anywhere, even outside `${`.
            ("$$var01", "$var01"),
            ("cost: $$5", "cost: $5"),
            ("$$$", "$$"),
            ("$$$$", "$$"),
            ("$${var01}", "${var01}"),
            ("$$${var01}", "$abcdEFGH28ij"),
            (
                "some text ${var01}$${var$${var01}$var01${var01}",
                "some text abcdEFGH28ij${var${var01}$var01abcdEFGH28ij",
            ),
            ("something $${var=${dflt}}", "something ${var=foo}"),
            ("a: ${var01}\nb: ${n}\n", "a: abcdEFGH28ij\nb: 3\n"),
            // Values are not expanded again.
            ("${tricky}", "${var01}"),
            // A NUL character ends the text, as it does in Flux.
            ("a\0${var01}", "a"),
        ],
        false,
    );
}

#[test]
fn plain_variables_and_names() {
    check(
        &[
            ("${var01}", "abcdEFGH28ij"),
            ("<${var01}>", "<abcdEFGH28ij>"),
            ("${unset}", ""),
            ("${empty}", ""),
            ("${uni}", "éàü"),
            // Names may hold any Unicode letter or digit, and start with a digit.
            ("${café}", "crème"),
            ("${1}", ""),
            ("${_}", ""),
        ],
        false,
    );
}

#[test]
fn length() {
    check(
        &[
            ("${#var01}", "12"),
            ("${#empty}", "0"),
            ("${#unset}", "0"),
            // Bytes, not characters.
            ("${#uni}", "6"),
        ],
        false,
    );
}

#[test]
fn case() {
    check(
        &[
            ("${var01^}", "AbcdEFGH28ij"),
            ("${var01^^}", "ABCDEFGH28IJ"),
            ("${upper,}", "aBCDEFGH28IJ"),
            ("${upper,,}", "abcdefgh28ij"),
            ("${uni^}", "Éàü"),
            ("${uni^^}", "ÉÀÜ"),
            ("${café^^}", "CRÈME"),
            ("${empty^^}", ""),
            ("${unset,}", ""),
            // Mixed operators are accepted and change nothing.
            ("${var01,^}", "abcdEFGH28ij"),
            ("${upper^,}", "ABCDEFGH28IJ"),
        ],
        false,
    );
}

#[test]
fn substring() {
    check(
        &[
            ("${path:11}", "ideas/thoughts.for.today"),
            ("${path:11:5}", "ideas"),
            ("${var01:0}", "abcdEFGH28ij"),
            ("${var01:05}", "FGH28ij"),
            ("${var01:+5}", "abcdEFGH28ij"), // `:+` is a default, not an offset
            ("${var01:11}", "j"),
            ("${var01:12}", ""),
            ("${var01:100}", ""),
            ("${var01:2:100}", "cdEFGH28ij"),
            ("${var01:2:0}", ""),
            ("${var01:100:2}", ""),
            // Negative offsets only come from a nested expression (`:-` is a default).
            ("${var01:${neg}}", "ij"),
            ("${var01:${neg}:1}", "i"),
            ("${var01:${far}}", "abcdEFGH28ij"),
            ("${var01:${far}:3}", "abc"),
            // A negative length that still reaches the end gives the rest.
            ("${var01:20:-1}", ""),
            // Offsets and lengths that are not integers give the whole value.
            ("${var01:x}", "abcdEFGH28ij"),
            ("${var01: 2}", "abcdEFGH28ij"),
            ("${var01:2:x}", "abcdEFGH28ij"),
            ("${var01:99999999999999999999}", "abcdEFGH28ij"),
            // Any run of colons separates offset and length.
            ("${var01:1::2}", "bc"),
            // The length runs to the closing brace, so this one is not a number.
            ("${var01:1:2:3}", "abcdEFGH28ij"),
            ("${uni:2:2}", "à"),
            ("${unset:2}", ""),
            ("${n:${n}}", ""),
            ("${var01:1:${n}}", "bcd"),
        ],
        false,
    );
    check_errors(
        &[
            (
                "${var01:5:-2}",
                SubstituteError::NegativeLength("var01".into()),
            ),
            (
                "${var01:1:${neg}}",
                SubstituteError::NegativeLength("var01".into()),
            ),
            (
                "${var01:9223372036854775807:9223372036854775807}",
                SubstituteError::NegativeLength("var01".into()),
            ),
            ("${uni:1}", SubstituteError::InvalidUtf8),
            ("${var01:}", syntax(SyntaxError::FuncSubstitution)),
            ("${var01::2}", syntax(SyntaxError::FuncSubstitution)),
            ("${var01:1:}", syntax(SyntaxError::FuncSubstitution)),
            // Flux's scanner steps back by the wrong width here.
            ("${var01:é}", syntax(SyntaxError::BadSubstitution)),
        ],
        false,
    );
}

#[test]
fn removal() {
    check(
        &[
            ("${file#*.}", "string.txt"),
            ("${file##*.}", "txt"),
            ("${file%.*}", "bash.string"),
            ("${file%%.*}", "bash"),
            ("${file#bash}", ".string.txt"),
            ("${file%txt}", "bash.string."),
            ("${file#nomatch}", "bash.string.txt"),
            ("${file#?}", "ash.string.txt"),
            ("${file#[a-c]*}", "ash.string.txt"),
            ("${file##[a-c]*}", ""),
            // `!` does not negate a class, only `^` does.
            ("${file#[!b]*}", "ash.string.txt"),
            ("${file#[^b]*}", "bash.string.txt"),
            ("${file#[^a]*}", "ash.string.txt"),
            // `*` and `?` match `/` too.
            ("${path#*/}", "home/bozo/ideas/thoughts.for.today"),
            ("${path##*/}", "thoughts.for.today"),
            ("${path%/*}", "/home/bozo/ideas"),
            ("${path%%/*}", ""),
            ("${slashes#foo?bar}", "/baz"),
            // Suffix removal reverses the pattern, which breaks classes.
            ("${file%[a-z]}", "bash.string.txt"),
            ("${file%t[x]t}", "bash.string.txt"),
            ("${file%t]x[t}", "bash.string."),
            // A malformed pattern leaves the value alone.
            ("${file#[}", "bash.string.txt"),
            ("${file#*\\}", "bash.string.txt"),
            // An empty pattern never removes anything.
            ("${file#${empty}}", "bash.string.txt"),
            ("${file#${dflt}}", "bash.string.txt"),
            ("${file#$%:*{}", "bash.string.txt"),
            ("${uni##?}", "àü"),
            ("${uni%%?}", "éà"),
            // Byte-wise prefixes: the shortest match of `?` is half a character, and the
            // reversal back turns the stray byte into U+FFFD, as Go does.
            ("${uni%?}", "éà\u{fffd}"),
            ("${unset#*}", ""),
            ("${empty%%*}", ""),
        ],
        false,
    );
    check_errors(
        &[
            ("${uni#?}", SubstituteError::InvalidUtf8),
            ("${file#}", syntax(SyntaxError::FuncSubstitution)),
            ("${file%%}", syntax(SyntaxError::FuncSubstitution)),
            // Only one argument: text after a nested expression is not allowed.
            ("${file#b${n}}", syntax(SyntaxError::BadSubstitution)),
        ],
        false,
    );
}

#[test]
fn replacement() {
    check(
        &[
            ("${stringZ/abc/xyz}", "xyzABC123ABCabc"),
            ("${stringZ//abc/xyz}", "xyzABC123ABCxyz"),
            ("${stringZ/#abc/XYZ}", "XYZABC123ABCabc"),
            ("${stringZ/%abc/XYZ}", "abcABC123ABCXYZ"),
            ("${stringZ/#ABC/XYZ}", "abcABC123ABCabc"),
            ("${stringZ/%ABC/XYZ}", "abcABC123ABCabc"),
            ("${stringZ/abc/}", "ABC123ABCabc"),
            ("${stringZ//abc/}", "ABC123ABC"),
            // Prefix and suffix replacement need a replacement text.
            ("${stringZ/#abc/}", "abcABC123ABCabc"),
            ("${stringZ/%abc/}", "abcABC123ABCabc"),
            // Patterns are literal text, not globs.
            ("${stringZ/a*c/X}", "abcABC123ABCabc"),
            ("${file//./-}", "bash-string-txt"),
            ("${slashes/\\//-}", "foo-bar/baz"),
            ("${slashes//\\//-}", "foo-bar-baz"),
            ("${stringZ//b/\\\\}", "a\\cABC123ABCa\\c"),
            ("${stringZ//b/\\x}", "a\\xcABC123ABCa\\xc"),
            ("${stringZ//a/$$}", "$bcABC123ABC$bc"),
            // Any run of slashes separates pattern and replacement.
            ("${stringZ/a//x}", "xbcABC123ABCabc"),
            ("${stringZ//${dflt}/x}", "abcABC123ABCabc"),
            ("${slashes//${dflt}/${n}}", "3/bar/baz"),
            // An empty pattern (from a nested expression) matches before each character.
            ("${n/${empty}/x}", "x3"),
            ("${var01//${empty}/-}", "-a-b-c-d-E-F-G-H-2-8-i-j-"),
            ("${uni//${empty}/-}", "-é-à-ü-"),
            ("${n/#${empty}/x}", "x3"),
            ("${n/%${empty}/x}", "3x"),
            ("${unset/a/b}", ""),
            ("${uni/à/a}", "éaü"),
        ],
        false,
    );
    check_errors(
        &[
            ("${stringZ/abc}", syntax(SyntaxError::BadSubstitution)),
            ("${stringZ///x}", syntax(SyntaxError::FuncSubstitution)),
            ("${stringZ/abc/x${n}}", syntax(SyntaxError::BadSubstitution)),
            ("${stringZ/}", syntax(SyntaxError::BadSubstitution)),
        ],
        false,
    );
}

#[test]
fn defaults() {
    check(
        &[
            ("${var01=xyz}", "abcdEFGH28ij"),
            ("${unset=xyz}", "xyz"),
            ("${unset:=xyz}", "xyz"),
            ("${unset:-xyz}", "xyz"),
            // `:+` and `:?` behave as `:-`.
            ("${unset:+xyz}", "xyz"),
            ("${var01:+xyz}", "abcdEFGH28ij"),
            ("${unset:?xyz}", "xyz"),
            ("${var01:?xyz}", "abcdEFGH28ij"),
            // Every default treats an empty value as unset.
            ("${empty=xyz}", "xyz"),
            ("${empty:-xyz}", "xyz"),
            ("${unset:-}", ""),
            ("${unset:=}", ""),
            ("${unset:-a b: c}", "a b: c"),
            ("${unset:--x}", "-x"),
            ("${unset==x}", "=x"),
            ("${unset:-{}", "{"),
            ("${unset:-a}b}", "ab}"),
            ("${unset:-é}", "é"),
            ("${unset:-$}", "$"),
            ("${unset:-\\/}", "\\/"),
            // Nested expressions.
            ("${unset:-${dflt}}", "foo"),
            ("${unset:-pre${dflt}post}", "prefoopost"),
            ("${unset=${var01^^}}", "ABCDEFGH28IJ"),
            ("${unset:-${unset2:-deep}}", "deep"),
            ("${unset:-${unset2}}", ""),
            ("${var01:-${unset2:-deep}}", "abcdEFGH28ij"),
            ("${unset:-${dflt}-${n}}", "foo-3"),
            // `$$` is not an escape inside a default.
            ("${unset:-$${x}}", "$"),
            ("${café:-x}", "crème"),
        ],
        false,
    );
    check_errors(
        &[
            // Without a colon only `=` is an operator.
            ("${unset-xyz}", syntax(SyntaxError::MissingClosingBrace)),
            ("${unset+xyz}", syntax(SyntaxError::MissingClosingBrace)),
            ("${unset?xyz}", syntax(SyntaxError::MissingClosingBrace)),
            ("${unset:-", syntax(SyntaxError::FuncSubstitution)),
            ("${unset=", syntax(SyntaxError::FuncSubstitution)),
            ("${unset:-a", syntax(SyntaxError::FuncSubstitution)),
            ("${unset:-${b", syntax(SyntaxError::MissingClosingBrace)),
        ],
        false,
    );
}

#[test]
fn syntax_errors() {
    check_errors(
        &[
            ("${", syntax(SyntaxError::VariableName)),
            ("${}", syntax(SyntaxError::VariableName)),
            ("${ var01}", syntax(SyntaxError::VariableName)),
            ("${-}", syntax(SyntaxError::VariableName)),
            ("${var01", syntax(SyntaxError::MissingClosingBrace)),
            ("${var01 }", syntax(SyntaxError::MissingClosingBrace)),
            ("${var01.x}", syntax(SyntaxError::MissingClosingBrace)),
            ("${aⅫ}", syntax(SyntaxError::MissingClosingBrace)),
            ("${#}", syntax(SyntaxError::BadSubstitution)),
            ("${##}", syntax(SyntaxError::BadSubstitution)),
            ("${#var01:-x}", syntax(SyntaxError::BadSubstitution)),
            ("${var01^^^}", syntax(SyntaxError::BadSubstitution)),
            ("${var01}${", syntax(SyntaxError::VariableName)),
            (
                "a\nb\n${x",
                SubstituteError::Syntax {
                    line: 3,
                    kind: SyntaxError::MissingClosingBrace,
                },
            ),
        ],
        false,
    );
    let deep = "${a:-".repeat(200) + &"}".repeat(200);
    assert_eq!(run(&deep, false), Err(syntax(SyntaxError::TooDeep)));
}

#[test]
fn strict_mode() {
    check(
        &[
            ("text", "text"),
            ("${var01}", "abcdEFGH28ij"),
            ("${empty}", ""),
            ("${#empty}", "0"),
            ("$unset $${unset}", "$unset ${unset}"),
            ("${unset:-fallback}", "fallback"),
            ("${unset:=assigned}", "assigned"),
            ("${unset=assigned}", "assigned"),
            ("${unset:+x}", "x"),
            ("${unset:?x}", "x"),
            ("${unset:-}", ""),
            ("${unset:-${dflt}}", "foo"),
        ],
        true,
    );
    let not_set = |name: &str| SubstituteError::VarNotSet(name.into());
    check_errors(
        &[
            ("${unset}", not_set("unset")),
            ("a ${var01} ${unset} ${other}", not_set("unset")),
            ("${#unset}", not_set("unset")),
            ("${unset^}", not_set("unset")),
            ("${unset^^}", not_set("unset")),
            ("${unset,}", not_set("unset")),
            ("${unset,,}", not_set("unset")),
            ("${unset:0}", not_set("unset")),
            ("${unset:0:10}", not_set("unset")),
            ("${unset/a/b}", not_set("unset")),
            ("${unset//a/b}", not_set("unset")),
            ("${unset/#a/b}", not_set("unset")),
            ("${unset/%a/b}", not_set("unset")),
            ("${unset#a}", not_set("unset")),
            ("${unset##a}", not_set("unset")),
            ("${unset%a}", not_set("unset")),
            ("${unset%%a}", not_set("unset")),
            (
                "${1}",
                SubstituteError::VarNotSetUnquoted {
                    reason: "the reference's name is not a valid variable name",
                },
            ),
            // Arguments are expanded first, even when the default is not needed.
            ("${var01:-${inner}}", not_set("inner")),
            ("${unset:-${inner}}", not_set("inner")),
        ],
        true,
    );
    assert_eq!(
        not_set("x").to_string(),
        "variable not set (strict mode): \"x\""
    );
}

#[test]
fn names_no_variable_can_have_are_never_quoted() {
    let lookup = |_: &str| None;
    let long = "A".repeat(65);
    for name in ["пароль", "9lives", long.as_str()] {
        let err = eval(&format!("x: ${{{name}}}"), &lookup, true).unwrap_err();
        assert!(
            matches!(err, SubstituteError::VarNotSetUnquoted { .. }),
            "{err:?}"
        );
        assert!(!err.to_string().contains(name), "{err}");
        assert!(
            err.to_string()
                .starts_with("variable not set (strict mode): ")
        );
    }
    let limit = "A".repeat(64);
    assert_eq!(
        eval(&format!("${{{limit}}}"), &lookup, true),
        Err(SubstituteError::VarNotSet(limit))
    );
}

#[test]
fn errors_never_hold_values() {
    let secret = "s3cr3t-value";
    let lookup = |name: &str| (name == "pw").then(|| secret.to_string());
    for text in [
        "${pw#${missing}}",
        "${pw:5:-2}",
        "${pw:-${missing}}",
        "${pw} ${",
        "${pw/x/${pw}",
    ] {
        let err = eval(text, &lookup, true).unwrap_err().to_string();
        assert!(!err.contains(secret), "{text:?} gave {err:?}");
    }
}

#[test]
fn variable_names() {
    for ok in ["a", "_", "A_1", "_9", "replicas", "CLUSTER_NAME"] {
        assert_eq!(validate_var_name(ok), Ok(()), "{ok}");
    }
    for bad in ["", "1a", "a-b", "a.b", "café", "a b", "$a"] {
        assert_eq!(
            validate_var_name(bad),
            Err(SubstituteError::InvalidVarName(bad.into())),
            "{bad}"
        );
    }
    assert_eq!(
        validate_var_name("a-b").unwrap_err().to_string(),
        "'a-b' var name is invalid, must match '^[_[:alpha:]][_[:alpha:][:digit:]]*$'"
    );
}

#[test]
fn newlines_are_stripped_from_values() {
    assert_eq!(strip_newlines("a\nb\r\nc\n"), "ab\rc");
}

fn object(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => unreachable!(),
    }
}

fn subst(obj: &Value, strict: bool) -> Result<Value, SubstituteError> {
    let vars = BTreeMap::from([
        ("replicas", "3"),
        ("flag", "true"),
        ("name", "web"),
        ("quoted", "'1'"),
        ("list", "[a, b]"),
        ("colon", "a: b"),
    ]);
    let lookup = |n: &str| vars.get(n).map(|v| v.to_string());
    substitute_object(&object(obj.clone()), &lookup, strict).map(Value::Object)
}

#[test]
fn objects_are_substituted_through_yaml() {
    let obj = json!({
        "kind": "Deployment",
        "apiVersion": "apps/v1",
        "metadata": {"name": "${name}", "namespace": "apps", "labels": {"x": "${name:-none}-v1"}},
        "spec": {
            "replicas": "${replicas}",
            "paused": "${flag}",
            "id": "${quoted}",
            "args": ["${list}", "$${escaped}", "${missing:=dflt}"],
        }
    });
    let got = subst(&obj, false).unwrap();
    assert_eq!(
        got,
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"labels": {"x": "web-v1"}, "name": "web", "namespace": "apps"},
            "spec": {
                "args": [["a", "b"], "${escaped}", "dflt"],
                "id": "1",
                "paused": true,
                "replicas": 3,
            }
        })
    );
    // Keys come back sorted, as kustomize prints them.
    let keys: Vec<_> = got.as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["apiVersion", "kind", "metadata", "spec"]);
}

#[test]
fn opted_out_objects_are_untouched() {
    for field in ["labels", "annotations"] {
        let obj = json!({
            "kind": "ConfigMap",
            "metadata": {"name": "x", field: {OPT_OUT_KEY: "disabled"}},
            "data": {"z": "${unset}", "a": "${"}
        });
        assert!(is_opted_out(&object(obj.clone())));
        assert_eq!(subst(&obj, true).unwrap(), obj);
    }
    let enabled = json!({"metadata": {"labels": {OPT_OUT_KEY: "enabled"}}});
    assert!(!is_opted_out(&object(enabled)));
    assert!(!is_opted_out(&object(
        json!({"metadata": {"labels": null}})
    )));
}

#[test]
fn object_errors_name_the_object_and_variable() {
    let obj = json!({
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": "team"},
        "data": {"a": "${missing}"}
    });
    let err = subst(&obj, true).unwrap_err();
    assert_eq!(
        err.to_string(),
        "ConfigMap/team/cfg: variable not set (strict mode): \"missing\""
    );
    // Not strict: `a: ` reads back as null, as it does in Flux.
    assert_eq!(subst(&obj, false).unwrap()["data"]["a"], Value::Null);

    let cluster = json!({"kind": "Namespace", "metadata": {"name": "team"}, "x": "${"});
    assert_eq!(
        subst(&cluster, false).unwrap_err().to_string(),
        "Namespace/team: line 4: unable to parse variable name"
    );

    let broken = json!({"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "${colon}"}});
    let err = subst(&broken, false).unwrap_err();
    assert!(matches!(err, SubstituteError::Yaml { .. }), "{err}");
    assert!(!err.to_string().contains("a: b"), "{err}");
}
