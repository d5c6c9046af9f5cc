//! Go regular expressions (`regexp.Compile`, RE2 with Perl extensions) compiled with the
//! `regex` crate.
//!
//! kustomize compiles user-written patterns with Go's `regexp`: the group, version, kind,
//! name and namespace of patch and replacement targets, the image names of `images:` and
//! the `[field=value]` matchers of replacement paths. The two dialects mostly agree; this
//! module rewrites the places where they do not, so a pattern means what it means in Go:
//!
//! - a `{` that does not start a valid repetition (`{n}`, `{n,}`, `{n,m}`, no leading
//!   zeros) is a literal (`${CLUSTER_NAME}`); the `regex` crate refuses it;
//! - `\Q...\E` quotes literal text;
//! - `\d`, `\s`, `\w` and `\b` are ASCII-only (`\s` without `\v`); in the `regex` crate
//!   they are Unicode-aware;
//! - inside a class, `[`, `&&`, `--` and `~~` are plain characters (the `regex` crate
//!   nests classes and has set operations);
//! - octal escapes (`\0`, `\012`, `\101`) are characters;
//! - `\<`, `\>` and every other escaped ASCII punctuation are the character itself;
//! - repeated flags (`(?i-i)`) and the empty flag group `(?)` are allowed, and a repetition
//!   right after a flag group repeats what came before the group (`b(?i)+`).
//!
//! What Go refuses is refused here too, with Go's message (`invalid nested repetition
//! operator: `**``, `invalid repeat count: `{1001}``, `invalid escape sequence: `\e``,
//! `invalid or unsupported Perl syntax: `(?x``), so a pattern kustomize rejects does not
//! quietly match here. Unicode class names (`\p{Greek}`) are passed on as written.

mod class;
mod error;
mod escape;
mod translate;

#[cfg(test)]
mod tests;

use regex::Regex;

pub use error::{ErrorCode, GoRegexError, Reason, SyntaxError};
pub use translate::translate;

/// Compiles `pattern` with Go's meaning.
pub fn compile(pattern: &str) -> Result<Regex, GoRegexError> {
    let translated = translate(pattern)?;
    Regex::new(&translated).map_err(|e| GoRegexError {
        pattern: pattern.to_string(),
        reason: Reason::Unsupported(regex_crate_reason(&e)),
    })
}

/// The `regex` crate's complaint in one line, without its picture of the translated
/// pattern (which is not what the user wrote): "Unicode property not found".
fn regex_crate_reason(error: &regex::Error) -> String {
    let text = error.to_string();
    text.lines()
        .rev()
        .find_map(|line| line.strip_prefix("error: "))
        .map_or_else(
            || text.split_whitespace().collect::<Vec<_>>().join(" "),
            str::to_string,
        )
}

/// Compiles `pattern` anchored at both ends as kustomize anchors selector fields
/// (`^(?:pattern)$`, joined as text before parsing, as Go does).
pub fn compile_anchored(pattern: &str) -> Result<Regex, GoRegexError> {
    compile(&format!("^(?:{pattern})$")).map_err(|e| GoRegexError {
        pattern: pattern.to_string(),
        reason: e.reason,
    })
}
