//! Post-build substitution runs on every built manifest: any template, with or without
//! strict mode, must expand or fail with an error, never panic.
#![no_main]

use envsubst as substitute;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let lookup = |name: &str| match name {
        "a" => Some("abc/def.txt".to_string()),
        "u" => Some("éàü".to_string()),
        "n" => Some("-2".to_string()),
        "e" => Some(String::new()),
        _ => None,
    };
    let _ = substitute::eval(text, &lookup, flags & 1 == 1);
});
