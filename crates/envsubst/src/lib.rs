#![doc = include_str!("../README.md")]
//!
//! ## The grammar
//!
//! Only `${...}` is expanded; `$var` is left alone and `$${...}` prints `${...}`. Forms:
//! `${var}`, `${#var}` (length in bytes), `${var^}` `${var^^}` `${var,}` `${var,,}` (case),
//! `${var:offset}` `${var:offset:length}` (bytes; a negative offset counts from the end),
//! `${var#glob}` `${var##glob}` `${var%glob}` `${var%%glob}` (removal; the glob's `*` and
//! `?` also match `/`), `${var/old/new}` `${var//old/new}` `${var/#old/new}`
//! `${var/%old/new}` (literal text, not globs) and the defaults `${var=word}`
//! `${var:=word}` `${var:-word}` `${var:+word}` `${var:?word}`, which all give `word` when
//! the value is empty or unset (`:+` does not mean "alternative" and `:?` does not fail).
//! Defaults may nest: `${a:-${b}}`. `${var-word}` (no colon) is a syntax error, as in Flux.
//!
//! The module is pure: values come from a lookup function, and errors never hold a value.

mod envsubst;
mod funcs;
mod glob;
mod object;
mod parse;
mod scan;

#[cfg(test)]
mod tests;

pub use envsubst::{eval, eval_limited};
pub use object::{
    OPT_OUT_KEY, OPT_OUT_VALUE, is_opted_out, substitute_object, substitute_object_limited,
};

/// The most bytes post-build substitution may add to a build, over all its objects
/// together (expanded text less template text).
///
/// Substitution can multiply its input (2000 references to a 512 KiB value are 1 GiB), so
/// the expansion is refused, while it runs, once it passes this bound. 32 MiB is ten times
/// what the API server accepts in one request (about 3 MiB), so no build that could be
/// applied comes near it, and it keeps the peak memory of a hostile build small.
pub const MAX_SUBSTITUTION_GROWTH: usize = 32 << 20;

/// The syntax errors of a template, with Flux's wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SyntaxError {
    /// A malformed `${...}` (for example an unclosed one).
    #[error("bad substitution")]
    BadSubstitution,
    /// `${name` followed by something other than an operator or `}`.
    #[error("missing closing brace")]
    MissingClosingBrace,
    /// `${` not followed by a variable name.
    #[error("unable to parse variable name")]
    VariableName,
    /// An operator argument that is missing or unterminated.
    #[error("unable to parse substitution within function")]
    FuncSubstitution,
    /// A malformed default operator.
    #[error("unable to parse default function")]
    DefaultFunction,
    /// `${...}` nested deeper than this implementation allows.
    #[error("substitutions nested too deeply")]
    TooDeep,
}

/// A substitution failure. Messages name variables, lines and objects, never values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubstituteError {
    /// The template does not parse.
    #[error("line {line}: {kind}")]
    Syntax {
        /// 1-based line of the template where parsing stopped.
        line: usize,
        /// What is wrong.
        kind: SyntaxError,
    },
    /// Strict mode and the variable is not set (and has no default).
    #[error("variable not set (strict mode): \"{0}\"")]
    VarNotSet(String),
    /// Strict mode and the variable is not set, with a name that is better not quoted: one
    /// no variable can have (`${...}` admits more than Flux's names), or, found by the
    /// caller, part of a secret.
    #[error("variable not set (strict mode): {reason} (not quoted)")]
    VarNotSetUnquoted {
        /// Why the name is not quoted.
        reason: &'static str,
    },
    /// `${var:offset:length}` with a negative length that ends before the offset (Flux
    /// panics on this).
    #[error("substring of variable \"{0}\" has a length that ends before its offset")]
    NegativeLength(String),
    /// The expansion grew past its byte budget (see [`MAX_SUBSTITUTION_GROWTH`]).
    #[error(
        "the substituted output exceeds the limit: substitution may add at most {limit} bytes to a build"
    )]
    TooLarge {
        /// The budget, in bytes.
        limit: usize,
    },
    /// A byte offset or a pattern removal split a multi-byte character.
    #[error("the substitution split a multi-byte character, giving text that is not UTF-8")]
    InvalidUtf8,
    /// A variable name that Flux refuses.
    #[error("'{0}' var name is invalid, must match '^[_[:alpha:]][_[:alpha:][:digit:]]*$'")]
    InvalidVarName(String),
    /// A failure while substituting in one object.
    #[error("{object}: {source}")]
    Object {
        /// `Kind/namespace/name` of the object.
        object: String,
        /// The failure.
        #[source]
        source: Box<SubstituteError>,
    },
    /// The substituted text of an object is not valid YAML.
    #[error("{object}: the substituted manifest is not valid YAML ({location})")]
    Yaml {
        /// `Kind/namespace/name` of the object.
        object: String,
        /// Where the YAML reader stopped.
        location: String,
    },
    /// The substituted text of an object is not exactly one mapping.
    #[error("{object}: the substituted manifest is {found}, not one object")]
    NotOneObject {
        /// `Kind/namespace/name` of the object.
        object: String,
        /// What was found instead.
        found: &'static str,
    },
}

/// Checks a variable name against Flux's `^[_[:alpha:]][_[:alpha:][:digit:]]*$` (ASCII
/// letters, digits and `_`, not starting with a digit).
pub fn validate_var_name(name: &str) -> Result<(), SubstituteError> {
    let mut chars = name.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric());
    if valid {
        Ok(())
    } else {
        Err(SubstituteError::InvalidVarName(name.to_string()))
    }
}

/// The longest variable name quoted in a message.
pub const MAX_QUOTED_NAME: usize = 64;

/// Why `name` is not fit to be quoted in a message, if it is not: it is not a valid
/// variable name (so no variable can be set for it), or it is over [`MAX_QUOTED_NAME`].
pub fn unquotable_name(name: &str) -> Option<&'static str> {
    if validate_var_name(name).is_err() {
        Some("the reference's name is not a valid variable name")
    } else if name.len() > MAX_QUOTED_NAME {
        Some("the reference's name is over 64 bytes long")
    } else {
        None
    }
}

/// A variable's value as Flux loads it from `substitute`, a ConfigMap or a Secret: every
/// `\n` removed (a `\r` stays).
pub fn strip_newlines(value: &str) -> String {
    value.replace('\n', "")
}
