//! The errors of JSON 6902 patches, worded as the json-patch library (v4) and Go's decoders
//! word them, so kustomize's messages come out the same.

use goyaml::YamlError;

/// The hint given when a single operation is written without the list around it.
const SINGLE_OPERATION_HINT: &str =
    " (a single operation must still be written as a list: `- op: ...` or `[{...}]`)";

/// Why a patch's text could not be read as a document.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// The text starts with `[` but is not JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The text is not YAML.
    #[error(transparent)]
    Yaml(#[from] YamlError),
}

/// Why a patch's text is not a list of JSON patch operations.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// The text is not a JSON or YAML document.
    #[error("JSON 6902 patch: {0}")]
    Document(#[source] DocumentError),
    /// The document is not a list.
    #[error(
        "JSON 6902 patch: expected a list of operations, got {kind}{hint}",
        hint = if *single_operation { SINGLE_OPERATION_HINT } else { "" }
    )]
    NotAList {
        /// What the document is ("a map", "a string").
        kind: &'static str,
        /// Whether it is a map with an `op`: one operation, not in a list.
        single_operation: bool,
    },
    /// An item of the list is not a map.
    #[error("JSON 6902 patch: operation {index}: expected a map, got {kind}")]
    NotAMap {
        /// The item's index.
        index: usize,
        /// What the item is.
        kind: &'static str,
    },
    /// An item of a JSON list is not a JSON object of fields.
    #[error("JSON 6902 patch: operation {index}: {source}")]
    Fields {
        /// The item's index.
        index: usize,
        /// The decoder's error.
        source: serde_json::Error,
    },
}

/// Why a field of an operation that must be a string (`path`, `from`) cannot be read.
#[derive(Clone, Debug, thiserror::Error)]
pub enum FieldError {
    /// The field holds another JSON type.
    #[error("json: cannot unmarshal {go_type} into Go value of type string")]
    NotAString {
        /// Go's name for the type.
        go_type: &'static str,
    },
    /// `path` is absent.
    #[error("operation missing path field: missing value")]
    MissingPath,
    /// `from` is absent.
    #[error("operation, missing from field: missing value")]
    MissingFrom,
}

/// Why Go's `strconv.Atoi` rejects an array index.
#[derive(Debug, thiserror::Error)]
pub enum AtoiError {
    /// Not an optional sign followed by decimal digits.
    #[error("strconv.Atoi: parsing {}: invalid syntax", go_quote(.key))]
    Syntax {
        /// The index as written.
        key: String,
    },
    /// Beyond a 64-bit integer.
    #[error("strconv.Atoi: parsing {}: value out of range", go_quote(.key))]
    Range {
        /// The index as written.
        key: String,
    },
}

/// Why a member or element of an object or array could not be accessed.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// The array index is not a number.
    #[error(transparent)]
    Atoi(#[from] AtoiError),
    /// The array index is out of range.
    #[error("Unable to access invalid index: {index}: invalid index referenced")]
    InvalidIndex {
        /// The index.
        index: i64,
    },
    /// The index to insert at is not a number.
    #[error("value was not a proper array index: '{key}': {source}")]
    NotAnIndex {
        /// The index as written.
        key: String,
        /// Why it is not a number.
        source: AtoiError,
    },
    /// The object member to remove does not exist.
    #[error("Unable to remove nonexistent key: {key}: missing value")]
    NonexistentKey {
        /// The member's name.
        key: String,
    },
}

/// Why one operation could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// `path` is absent or not a string (the library does not say which).
    #[error("{op} operation failed to decode path: missing value")]
    PathMissing {
        /// The operation's kind.
        op: &'static str,
    },
    /// `path` is absent or not a string.
    #[error("{op} operation failed to decode path: {source}")]
    DecodePath {
        /// The operation's kind.
        op: &'static str,
        /// Why the field cannot be read.
        source: FieldError,
    },
    /// `from` is absent or not a string.
    #[error("{op} operation failed to decode from: {source}")]
    DecodeFrom {
        /// The operation's kind.
        op: &'static str,
        /// Why the field cannot be read.
        source: FieldError,
    },
    /// The container `path` is in does not exist (as `add` and `remove` word it).
    #[error("{op} operation does not apply: doc is missing path: \"{path}\": missing value")]
    MissingPathQuoted {
        /// The operation's kind.
        op: &'static str,
        /// The path.
        path: String,
    },
    /// The container `path` is in does not exist (as `replace` words it).
    #[error("{op} operation does not apply: doc is missing path: {path}: missing value")]
    MissingPath {
        /// The operation's kind.
        op: &'static str,
        /// The path.
        path: String,
    },
    /// The array element `replace` replaces does not exist.
    #[error("{op} operation does not apply: doc is missing key: {path}: missing value")]
    MissingKey {
        /// The operation's kind.
        op: &'static str,
        /// The path.
        path: String,
    },
    /// The container `test` looks in does not exist.
    #[error("{op} operation does not apply: is missing path: {path}: missing value")]
    TestMissingPath {
        /// The operation's kind.
        op: &'static str,
        /// The path.
        path: String,
    },
    /// The container `from` is in does not exist.
    #[error("{op} operation does not apply: doc is missing from path: {from}: missing value")]
    MissingFrom {
        /// The operation's kind.
        op: &'static str,
        /// The path read from.
        from: String,
    },
    /// The container the destination is in does not exist.
    #[error(
        "{op} operation does not apply: doc is missing destination path: {path}: missing value"
    )]
    MissingDestination {
        /// The operation's kind.
        op: &'static str,
        /// The destination path.
        path: String,
    },
    /// Replacing the whole document with a scalar.
    #[error("replace operation value must be object or array: %!w(<nil>)")]
    ReplaceRootWithScalar,
    /// The value at `path` is not the expected one.
    #[error("testing value {path} failed: test failed")]
    TestFailed {
        /// The path.
        path: String,
    },
    /// The member or element at `path` could not be accessed.
    #[error("error in {op} for path: '{path}': {source}")]
    AtPath {
        /// The operation's kind.
        op: &'static str,
        /// The path (for `move`'s source, its last token, as the library says).
        path: String,
        /// Why.
        source: AccessError,
    },
    /// The member or element `copy` reads could not be accessed.
    #[error("error in {op} for from: '{from}': {source}")]
    AtFrom {
        /// The operation's kind.
        op: &'static str,
        /// The path read from.
        from: String,
        /// Why.
        source: AccessError,
    },
    /// `copy` could not add the value at its destination.
    #[error("error while adding value during copy: {source}")]
    CopyAdd {
        /// Why.
        source: AccessError,
    },
    /// `op` is not an operation the library knows.
    #[error("Unexpected kind: {kind}")]
    UnknownKind {
        /// The kind as written.
        kind: String,
    },
}

/// Why a patched scalar could not be read back as kustomize reads it.
#[derive(Debug, thiserror::Error)]
pub enum ScalarError {
    /// A string that is not valid JSON.
    #[error(transparent)]
    String(#[from] serde_json::Error),
    /// A number beyond float64.
    #[error("json: cannot unmarshal number {text} into Go value of type float64")]
    Number {
        /// The number as written.
        text: String,
    },
}

/// Why a list of operations could not be applied to a document.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// An operation failed.
    #[error("operation {index}: {source}")]
    Operation {
        /// The operation's index.
        index: usize,
        /// Why.
        source: OpError,
    },
    /// An operation would nest the document too deep.
    #[error("operation {index} ({op}): the document would nest more than {max_depth} levels deep")]
    TooDeep {
        /// The operation's index.
        index: usize,
        /// The operation's kind.
        op: String,
        /// The bound.
        max_depth: usize,
    },
    /// An operation would make the document too large.
    #[error("operation {index} ({op}): the patched document would exceed {mib} MiB")]
    TooLarge {
        /// The operation's index.
        index: usize,
        /// The operation's kind.
        op: String,
        /// The bound, in MiB.
        mib: usize,
    },
    /// The operations replaced the document with an array.
    #[error("json: cannot unmarshal array into Go value of type map[string]interface {{}}")]
    ArrayDocument,
    /// A patched scalar could not be read back.
    #[error(transparent)]
    Scalar(#[from] ScalarError),
    /// The operations replaced the document with something other than an object.
    #[error("the patched document is no longer an object")]
    NotAnObject,
}

/// `s` quoted as Go's `strconv.Quote` quotes it (enough for its error messages).
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
