//! Tests: a table of patterns and what Go 1.26's `regexp` does with them (recorded by
//! running Go), plus properties of the translation. (While it was written, 40,000 random
//! patterns over the syntax that differs were also compiled by Go and here, and matched
//! against 28 inputs each, with no difference.)

use proptest::prelude::*;

use super::{ErrorCode, Reason, SyntaxError, compile, compile_anchored, translate};

/// What Go does with a pattern: matches an input or not, or refuses it with a message.
type GoOutcome = Result<(&'static str, bool), &'static str>;

/// `(pattern, Ok((input, whether Go matches)))` or `(pattern, Err(Go's message without
/// its "error parsing regexp: " prefix))`.
const GO_CASES: &[(&str, GoOutcome)] = &[
    ("${CLUSTER_NAME}", Ok(("${CLUSTER_NAME}", false))),
    ("a{2}", Ok(("aa", true))),
    ("a{2,}", Ok(("aaa", true))),
    ("a{,2}", Ok(("a{,2}", true))),
    ("a{01}", Ok(("a{01}", true))),
    ("a{1,2", Ok(("a{1,2", true))),
    ("a{x}", Ok(("a{x}", true))),
    ("{", Ok(("{", true))),
    ("}", Ok(("}", true))),
    ("a{1001}", Err("invalid repeat count: `{1001}`")),
    ("a{2,1}", Err("invalid repeat count: `{2,1}`")),
    ("{2}", Err("missing argument to repetition operator: `{2}`")),
    ("\\Qa.b\\E", Ok(("a.b", true))),
    ("\\Qa.b\\E", Ok(("axb", false))),
    ("\\Qa.b", Ok(("a.b", true))),
    ("\\d", Ok(("\u{663}", false))),
    ("\\w", Ok(("\u{e9}", false))),
    ("\\s", Ok(("\u{b}", false))),
    ("\\s", Ok(("\u{a0}", false))),
    ("[\\d]", Ok(("5", true))),
    ("[^\\d]", Ok(("x", true))),
    ("[\\D]", Ok(("x", true))),
    ("\\b", Ok(("\u{e9}", false))),
    ("a\\b", Ok(("a\u{e9}", true))),
    ("\\<a", Ok(("<a", true))),
    ("a\\>", Ok(("a>", true))),
    ("[a[b]", Ok(("[", true))),
    ("[a&&b]", Ok(("&", true))),
    ("[a--b]", Err("invalid character class range: `a--`")),
    ("[a~~b]", Ok(("~", true))),
    ("[[:alpha:]]", Ok(("x", true))),
    ("[[:^alpha:]]", Ok(("1", true))),
    ("\\101", Ok(("A", true))),
    ("\\0", Ok(("\u{0}", true))),
    ("\\08", Ok(("\u{0}8", true))),
    ("\\1", Err("invalid escape sequence: `\\1`")),
    ("\\12", Ok(("\u{a}", true))),
    ("(?x)a b", Err("invalid or unsupported Perl syntax: `(?x`")),
    ("(?u)a", Err("invalid or unsupported Perl syntax: `(?u`")),
    ("(?i)A", Ok(("a", true))),
    ("(?U)a+", Ok(("aa", true))),
    ("(?P<n>a)", Ok(("a", true))),
    ("(?<n>a)", Ok(("a", true))),
    ("\\z", Ok(("", true))),
    ("\\Z", Err("invalid escape sequence: `\\Z`")),
    ("\\A", Ok(("", true))),
    ("\\e", Err("invalid escape sequence: `\\e`")),
    ("\\u0041", Err("invalid escape sequence: `\\u`")),
    ("\\x41", Ok(("A", true))),
    ("\\x{41}", Ok(("A", true))),
    ("\\ ", Ok((" ", true))),
    ("\\~", Ok(("~", true))),
    ("\\!", Ok(("!", true))),
    ("\\#", Ok(("#", true))),
    ("\\-", Ok(("-", true))),
    ("\\%", Ok(("%", true))),
    ("\\`", Ok(("`", true))),
    ("\\_", Ok(("_", true))),
    ("a**", Err("invalid nested repetition operator: `**`")),
    ("a*+", Err("invalid nested repetition operator: `*+`")),
    ("a*?", Ok(("a", true))),
    (
        "a{2}{3}",
        Err("invalid nested repetition operator: `{2}{3}`"),
    ),
    ("a{2}*", Err("invalid nested repetition operator: `{2}*`")),
    ("\\pL", Ok(("x", true))),
    ("\\p{Greek}", Ok(("\u{3b1}", true))),
    ("[\\pL]", Ok(("x", true))),
    ("\\b{start}", Ok(("b{start}", true))),
    ("[]a]", Ok(("]", true))),
    ("[^]a]", Ok(("b", true))),
    ("x{2}{", Ok(("xx{", true))),
    ("\\{", Ok(("{", true))),
    ("[{}]", Ok(("}", true))),
    ("(?i)K", Ok(("\u{212a}", true))),
    ("[a-\\d]", Err("invalid escape sequence: `\\d`")),
    ("[\\d-z]", Ok(("-", true))),
    (".", Ok(("\u{a}", false))),
    ("(?s).", Ok(("\u{a}", true))),
    ("^a$", Ok(("a\u{a}", false))),
    ("[^a]", Ok(("\u{a}", true))),
    ("(?m)^a$", Ok(("a\u{a}b", true))),
    ("\\C", Err("invalid escape sequence: `\\C`")),
    ("(?)a", Ok(("a", true))),
    ("(?i-i)a", Ok(("a", true))),
    ("(?-)a", Err("invalid or unsupported Perl syntax: `(?-)`")),
    ("()", Ok(("", true))),
    ("a|", Ok(("", true))),
    ("(?P=n)", Err("invalid or unsupported Perl syntax: `(?P`")),
    ("[[:word:]]", Ok(("_", true))),
    ("[[:foo:]]", Err("invalid character class range: `[:foo:]`")),
    ("[[:alpha:]", Err("missing closing ]: `[[:alpha:]`")),
    ("[[.a.]]", Ok(("", false))),
    ("[[=a=]]", Ok(("", false))),
    ("\\pN", Ok(("5", true))),
    ("\\p{Latin}", Ok(("a", true))),
    ("\\p{Lu}", Ok(("A", true))),
    ("\\p{Any}", Ok(("a", true))),
    ("\\p{L&}", Err("invalid character class range: `\\p{L&}`")),
    ("a{1000}", Ok(("", false))),
    ("(a){0}", Ok(("", true))),
    ("a{,}", Ok(("a{,}", true))),
    ("a{ 1}", Ok(("a{ 1}", true))),
    // A repetition after a flag group repeats what came before the group.
    ("b(?i)+", Ok(("bbb", true))),
    ("b(?i)+", Ok(("B", false))),
    ("a*(?i)+", Ok(("aaa", true))),
    ("(?i)*", Err("missing argument to repetition operator: `*`")),
    (
        "a|(?i)*",
        Err("missing argument to repetition operator: `*`"),
    ),
    ("x(?i)a{2}", Ok(("xAA", true))),
    ("(a(?i))b", Ok(("aB", false))),
    ("(a(?i)b)", Ok(("aB", true))),
    ("a(?i)|b", Ok(("B", true))),
];

#[test]
fn patterns_mean_what_they_mean_in_go() {
    let mut wrong = Vec::new();
    for (pattern, expected) in GO_CASES {
        let got = compile(pattern);
        match (expected, &got) {
            (Ok((input, matches)), Ok(regex)) if regex.is_match(input) == *matches => {}
            (Err(message), Err(error)) if error.reason.to_string() == *message => {}
            // Unicode class names are left to the `regex` crate, in its words.
            (Err(_), Err(error)) if error.reason.to_string() == "Unicode property not found" => {}
            _ => wrong.push(format!(
                "{pattern:?}: Go {expected:?}, here {:?}",
                got.map(|r| (r.as_str().to_string(), expected.map(|(i, _)| r.is_match(i))))
            )),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn anchored_patterns_are_joined_as_text_like_go() {
    // `$` ends the text, so Go's `^(?:${CLUSTER_NAME})$` matches nothing, and refuses nothing.
    let regex = compile_anchored("${CLUSTER_NAME}").expect("Go compiles it");
    assert!(!regex.is_match("${CLUSTER_NAME}"));
    assert!(!regex.is_match("CLUSTER_NAME"));
    let regex = compile_anchored("app-{x}").expect("Go compiles it");
    assert!(regex.is_match("app-{x}"));
    assert!(!regex.is_match("xapp-{x}"));
    // Joined as text: `a)|(b` closes kustomize's group and opens one of its own.
    let regex = compile_anchored("a)|(b").expect("Go compiles it");
    assert!(regex.is_match("a"));
    assert!(regex.is_match("xb"));
    assert!(
        regex.is_match("ax"),
        "the first branch is only anchored at the start"
    );
    assert!(!regex.is_match("xa"));
}

#[test]
fn errors_name_the_pattern_and_go_reason() {
    let error = compile_anchored("a{2}{3}").expect_err("Go refuses it");
    assert_eq!(error.pattern, "a{2}{3}");
    assert_eq!(
        error.reason,
        Reason::Syntax(SyntaxError {
            code: ErrorCode::InvalidRepeatOp,
            expr: "{2}{3}".to_string(),
        })
    );
    assert_eq!(
        error.reason.to_string(),
        "invalid nested repetition operator: `{2}{3}`"
    );
    assert_eq!(
        error.to_string(),
        "invalid regular expression \"a{2}{3}\": invalid nested repetition operator: `{2}{3}`"
    );
    let error = compile("[a").expect_err("Go refuses it");
    assert_eq!(error.reason.to_string(), "missing closing ]: `[a`");
    assert_eq!(
        compile("(a").expect_err("unclosed").reason.to_string(),
        "missing closing ): `(a`"
    );
    assert_eq!(
        compile("a)").expect_err("unopened").reason.to_string(),
        "unexpected ): `a)`"
    );
    assert_eq!(
        compile("(?P<n>a)(?P<n>b)")
            .expect_err("twice")
            .reason
            .to_string(),
        "duplicate capture group name: `n`"
    );
}

#[test]
fn translation_keeps_what_both_dialects_share() {
    assert_eq!(translate("abc").unwrap(), "abc");
    assert_eq!(translate("a{2,3}?").unwrap(), "a{2,3}?");
    assert_eq!(translate("(?i)a|b*").unwrap(), "(?i)a|b*");
    assert_eq!(translate("x{").unwrap(), r"x\x{7B}");
    assert_eq!(translate("[a-c]").unwrap(), "[a-c]");
}

/// Go's `regexp.QuoteMeta`.
fn quote_meta(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if r"\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

proptest! {
    /// Whatever Go's syntax the translation accepts, the `regex` crate compiles.
    #[test]
    fn accepted_patterns_compile(pattern in r"[ab01,{}\[\]\^\-\\dswbQEpL(|):?*+&~$.P<>ix ]{0,16}") {
        if let Ok(translated) = translate(&pattern) {
            let compiled = compile(&pattern);
            // Unknown Unicode class names are left to the `regex` crate (Go refuses them too).
            let unknown_class = compiled
                .as_ref()
                .is_err_and(|e| e.reason.to_string() == "Unicode property not found");
            prop_assert!(compiled.is_ok() || unknown_class, "{pattern:?} became {translated:?}: {compiled:?}");
        }
    }

    /// A quoted string matches itself and nothing longer.
    #[test]
    fn quoted_text_matches_itself(text in r"[a-z0-9{}\[\]$^.*+?()|\\, &~-]{0,12}") {
        let regex = compile_anchored(&quote_meta(&text)).expect("quoted text compiles");
        prop_assert!(regex.is_match(&text));
        let longer = format!("{text}x");
        prop_assert!(!regex.is_match(&longer));
    }

    /// `\Q...\E` quotes anything without `\E` in it.
    #[test]
    fn q_e_quotes_text(text in r"[a-z{}\[\]$^.*+?()|, &~-]{0,12}") {
        let regex = compile_anchored(&format!(r"\Q{text}\E")).expect("quoted text compiles");
        prop_assert!(regex.is_match(&text));
    }
}
