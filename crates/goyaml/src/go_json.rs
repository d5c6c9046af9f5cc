//! Text exactly as Go's `encoding/json` writes it, for outputs whose bytes must match Go
//! programs (kustomize's name hashes, sops' JSON store).

/// Appends `s` as a JSON string the way Go escapes it (HTML-safe: `<`, `>`, `&`, U+2028 and
/// U+2029 as `\u` escapes).
pub fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_like_go() {
        let mut out = String::new();
        super::write_string(&mut out, "a\"<b>&\u{1}\n\u{2028}é");
        assert_eq!(out, "\"a\\\"\\u003cb\\u003e\\u0026\\u0001\\n\\u2028é\"");
    }
}
