//! Property tests for post-build substitution: text without `${` passes through (apart from
//! the `$$` escape), and no template makes the expansion panic.

use std::collections::BTreeMap;

use envsubst::{SubstituteError, eval};
use proptest::prelude::*;

fn vars() -> BTreeMap<&'static str, &'static str> {
    BTreeMap::from([
        ("a", "abc/def.txt"),
        ("e", ""),
        ("u", "éàü"),
        ("n", "-2"),
        ("big", "9223372036854775807"),
    ])
}

fn expand(text: &str, strict: bool) -> Result<String, SubstituteError> {
    let vars = vars();
    eval(text, &|name| vars.get(name).map(|v| v.to_string()), strict)
}

/// Template fragments that exercise every production of the grammar.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "${", "}", "$", "$$", ":", "-", "=", "+", "?", "#", "%", "/", "\\", "^", ",", "*",
            "[", "]", "^", "a", "e", "u", "n", "big", "unset", "é", "1", "-1", "0", " ", "\n",
            "{", "\0", "9223372036854775807",
        ])
        .prop_map(str::to_string),
        1 => any::<String>(),
    ]
}

fn template() -> impl Strategy<Value = String> {
    prop::collection::vec(fragment(), 0..16).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn text_without_placeholders_is_unchanged(text in "[^\\x00]*") {
        prop_assume!(!text.contains("${"));
        // `$$` is an escape everywhere, so pairs collapse from the left.
        let want = text.replace("$$", "$");
        prop_assert_eq!(expand(&text, true).unwrap(), want.clone());
        prop_assert_eq!(expand(&text, false).unwrap(), want);
    }

    #[test]
    fn expansion_never_panics(text in template(), strict in any::<bool>()) {
        let _ = expand(&text, strict);
    }

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>(), strict in any::<bool>()) {
        let _ = expand(&text, strict);
    }

    #[test]
    fn values_are_inserted_verbatim(value in "[^\\x00]*", prefix in "[a-z ]{0,5}") {
        let text = format!("{prefix}${{v}}{prefix}");
        let got = eval(&text, &|name| (name == "v").then(|| value.clone()), true).unwrap();
        prop_assert_eq!(got, format!("{prefix}{value}{prefix}"));
    }
}
