//! The document model sops works on: ordered branches of keys and typed values, with
//! comments kept in place.
//!
//! Every store (YAML, JSON, dotenv, INI, binary) loads a file into [`Branch`]es and emits
//! them back; the cipher and the MAC walk them in order. Plaintext values live only in this
//! model and are wiped when it is dropped.

use zeroize::Zeroize;

/// A comment line of a YAML, dotenv or INI file, without its leading `#`.
#[derive(Clone, Debug, PartialEq)]
pub struct Comment {
    /// The text after `#` (sops keeps the space that usually follows it).
    pub text: String,
    /// Whether the comment sat at the end of a value's line rather than on a line of its own.
    pub inline: bool,
}

/// The key of a branch item.
#[derive(Clone, Debug, PartialEq)]
pub enum Key {
    /// A mapping key.
    Name(String),
    /// A comment line between items (its item's value is [`Value::Null`]).
    Comment(Comment),
    /// A YAML key that is not a string (`1: a`), kept as written: sops refuses to walk it.
    NonString(String),
}

/// One key/value pair of a branch.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    /// The key.
    pub key: Key,
    /// The value.
    pub value: Value,
}

/// An ordered mapping: a document's top level, or a nested map.
pub type Branch = Vec<Item>;

/// A value in the tree, typed as sops types it (`type:` of an `ENC[...]` value).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `null` or an empty value: never encrypted, not part of the MAC.
    Null,
    /// `str`.
    String(String),
    /// `int` (Go's `int`).
    Int(i64),
    /// `float` (Go's `float64`).
    Float(f64),
    /// `bool`.
    Bool(bool),
    /// `time`: the RFC 3339 text Go's `time.Time.MarshalText` writes.
    Time(String),
    /// `bytes`: the binary store's payload.
    Bytes(Vec<u8>),
    /// `comment`: a comment line inside a sequence.
    Comment(Comment),
    /// A nested mapping.
    Map(Branch),
    /// A sequence.
    Seq(Vec<Value>),
}

impl Zeroize for Comment {
    fn zeroize(&mut self) {
        self.text.zeroize();
    }
}

impl Zeroize for Key {
    fn zeroize(&mut self) {
        match self {
            Key::Name(s) | Key::NonString(s) => s.zeroize(),
            Key::Comment(c) => c.zeroize(),
        }
    }
}

impl Zeroize for Item {
    fn zeroize(&mut self) {
        self.key.zeroize();
        self.value.zeroize();
    }
}

impl Zeroize for Value {
    fn zeroize(&mut self) {
        match self {
            Value::String(s) | Value::Time(s) => s.zeroize(),
            Value::Bytes(b) => b.zeroize(),
            Value::Comment(c) => c.zeroize(),
            Value::Map(items) => items.iter_mut().for_each(Zeroize::zeroize),
            Value::Seq(values) => values.iter_mut().for_each(Zeroize::zeroize),
            Value::Int(i) => i.zeroize(),
            Value::Float(f) => f.zeroize(),
            Value::Bool(b) => *b = false,
            Value::Null => {}
        }
    }
}

/// The branches of one file (a YAML stream has one per document); wiped on drop.
#[derive(Debug, Default)]
pub struct Branches(pub Vec<Branch>);

impl Drop for Branches {
    fn drop(&mut self) {
        self.0.iter_mut().flatten().for_each(Zeroize::zeroize);
    }
}
