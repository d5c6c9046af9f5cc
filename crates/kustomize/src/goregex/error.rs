//! Why a pattern cannot be compiled, in Go's words where Go refuses it.

/// A pattern Go's `regexp` refuses, or one the `regex` crate cannot compile after
/// translation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid regular expression {pattern:?}: {reason}")]
pub struct GoRegexError {
    /// The pattern as written.
    pub pattern: String,
    /// What is wrong.
    #[source]
    pub reason: Reason,
}

/// What is wrong with a pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Reason {
    /// Go refuses it (`missing closing ]: `[a``).
    #[error(transparent)]
    Syntax(#[from] SyntaxError),
    /// The `regex` crate refuses its translation; its complaint in one line ("Unicode
    /// property not found").
    #[error("{0}")]
    Unsupported(String),
}

/// Go's `regexp/syntax.Error`: what is wrong, and the part of the pattern at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: `{expr}`")]
pub struct SyntaxError {
    /// What is wrong.
    pub code: ErrorCode,
    /// The part of the pattern at fault.
    pub expr: String,
}

/// Go's `regexp/syntax.ErrorCode`s this translation can report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ErrorCode {
    /// `ErrInvalidCharRange`.
    #[error("invalid character class range")]
    InvalidCharRange,
    /// `ErrInvalidEscape`.
    #[error("invalid escape sequence")]
    InvalidEscape,
    /// `ErrInvalidNamedCapture`.
    #[error("invalid named capture")]
    InvalidNamedCapture,
    /// `ErrDuplicatedName`.
    #[error("duplicate capture group name")]
    DuplicateName,
    /// `ErrInvalidPerlOp`.
    #[error("invalid or unsupported Perl syntax")]
    InvalidPerlOp,
    /// `ErrInvalidRepeatSize`.
    #[error("invalid repeat count")]
    InvalidRepeatSize,
    /// `ErrInvalidRepeatOp`.
    #[error("invalid nested repetition operator")]
    InvalidRepeatOp,
    /// `ErrMissingRepeatArgument`.
    #[error("missing argument to repetition operator")]
    MissingRepeatArgument,
    /// `ErrMissingParen`.
    #[error("missing closing )")]
    MissingParen,
    /// `ErrUnexpectedParen`.
    #[error("unexpected )")]
    UnexpectedParen,
    /// `ErrMissingBracket`.
    #[error("missing closing ]")]
    MissingBracket,
    /// `ErrTrailingBackslash`.
    #[error("trailing backslash at end of expression")]
    TrailingBackslash,
}
