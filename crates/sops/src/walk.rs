//! Walking a document as sops does: which values the rule says are encrypted, decrypting
//! them with the value's key path as additional data, and hashing every value (or only the
//! encrypted ones) in order into the MAC.

use regex::Regex;
use sha2::{Digest, Sha512};
use zeroize::Zeroizing;

use super::cipher::{self, CipherError};
use super::go_text;
use super::metadata::Rule;
use super::tree::{Branch, Comment, Key, Value};

/// The MAC's starting bytes when it covers only encrypted values (sha256 of "sops").
const MAC_ONLY_ENCRYPTED_INIT: [u8; 32] = [
    0x8a, 0x3f, 0xd2, 0xad, 0x54, 0xce, 0x66, 0x52, 0x7b, 0x10, 0x34, 0xf3, 0xd1, 0x47, 0xbe, 0x0b,
    0x0b, 0x97, 0x5b, 0x3b, 0xf4, 0x4f, 0x72, 0xc6, 0xfd, 0xad, 0xec, 0x81, 0x76, 0xf2, 0x7d, 0x69,
];

/// A value that could not be decrypted; names its key path, never its content.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WalkError {
    /// The value at `path` failed to decrypt.
    #[error("could not decrypt the value at '{path}': {source}")]
    Value {
        /// Key path, `:`-separated as sops writes it.
        path: String,
        /// Why.
        source: CipherError,
    },
    /// The rule says the value at `path` is encrypted, but it is not a string.
    #[error("the value at '{0}' should be encrypted but is a plain {1}")]
    NotEncrypted(String, &'static str),
    /// sops only walks string keys.
    #[error("the key '{0}' is not a string; sops only supports string keys")]
    NonStringKey(String),
}

/// An encryption rule with its regex compiled.
enum Compiled {
    UnencryptedSuffix(String),
    EncryptedSuffix(String),
    UnencryptedRegex(Option<Regex>),
    EncryptedRegex(Option<Regex>),
    UnencryptedCommentRegex(Option<Regex>),
    EncryptedCommentRegex(Option<Regex>),
}

impl Compiled {
    /// An invalid regex never matches, as Go's `regexp.Match` error is ignored by sops.
    fn new(rule: &Rule) -> Compiled {
        let re = |s: &str| Regex::new(s).ok();
        match rule {
            Rule::UnencryptedSuffix(s) => Compiled::UnencryptedSuffix(s.clone()),
            Rule::EncryptedSuffix(s) => Compiled::EncryptedSuffix(s.clone()),
            Rule::UnencryptedRegex(s) => Compiled::UnencryptedRegex(re(s)),
            Rule::EncryptedRegex(s) => Compiled::EncryptedRegex(re(s)),
            Rule::UnencryptedCommentRegex(s) => Compiled::UnencryptedCommentRegex(re(s)),
            Rule::EncryptedCommentRegex(s) => Compiled::EncryptedCommentRegex(re(s)),
        }
    }

    /// sops' `shouldBeEncrypted`.
    fn encrypts(&self, path: &[String], comments: &[Vec<String>], is_comment: bool) -> bool {
        let matches = |re: &Option<Regex>, s: &str| re.as_ref().is_some_and(|re| re.is_match(s));
        match self {
            Compiled::UnencryptedSuffix(suffix) => {
                suffix.is_empty() || !path.iter().any(|k| k.ends_with(suffix.as_str()))
            }
            Compiled::EncryptedSuffix(suffix) => {
                !suffix.is_empty() && path.iter().any(|k| k.ends_with(suffix.as_str()))
            }
            Compiled::UnencryptedRegex(re) => !path.iter().any(|k| matches(re, k)),
            Compiled::EncryptedRegex(re) => path.iter().any(|k| matches(re, k)),
            Compiled::UnencryptedCommentRegex(re) => {
                !comments.iter().flatten().any(|c| matches(re, c))
            }
            Compiled::EncryptedCommentRegex(re) => {
                let last = comments.len().saturating_sub(1);
                comments.iter().enumerate().any(|(i, level)| {
                    level.iter().enumerate().any(|(j, c)| {
                        // The comment that enables encryption is itself left plain.
                        let is_self = is_comment && i == last && j + 1 == level.len();
                        !is_self && matches(re, c)
                    })
                })
            }
        }
    }
}

/// A value that decryption revealed: its key path (`:`-separated) and its text (wiped on
/// drop). Booleans are not kept: they carry one bit, and masking `true` would only blur
/// messages.
pub struct Revealed {
    /// Key path, `:`-separated as sops writes it.
    pub path: String,
    /// The decrypted value as text.
    pub text: Zeroizing<String>,
}

impl std::fmt::Debug for Revealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Revealed({}, {} bytes)", self.path, self.text.len())
    }
}

fn reveal(path: &[String], value: &Value, out: &mut Vec<Revealed>) {
    let text = match value {
        Value::String(s) | Value::Time(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => go_text::format_float(*f),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        _ => return,
    };
    if !text.is_empty() {
        out.push(Revealed {
            path: path.join(":"),
            text: Zeroizing::new(text),
        });
    }
}

/// Decrypts every encrypted value of the branches in place and returns the MAC sops would
/// compute (upper-case hex SHA-512). Every decrypted value is added to `revealed`.
pub fn decrypt_branches(
    branches: &mut [Branch],
    rule: &Rule,
    mac_only_encrypted: bool,
    data_key: &[u8],
    revealed: &mut Vec<Revealed>,
) -> Result<String, WalkError> {
    let mut walker = Walker {
        rule: Compiled::new(rule),
        mac_only_encrypted,
        data_key,
        hash: Sha512::new(),
        path: Vec::new(),
        comments: Vec::new(),
        revealed,
    };
    if mac_only_encrypted {
        walker.hash.update(MAC_ONLY_ENCRYPTED_INIT);
    }
    for branch in branches {
        walker.branch(branch)?;
    }
    Ok(hex::encode_upper(walker.hash.finalize()))
}

struct Walker<'k> {
    rule: Compiled,
    mac_only_encrypted: bool,
    data_key: &'k [u8],
    hash: Sha512,
    path: Vec<String>,
    comments: Vec<Vec<String>>,
    revealed: &'k mut Vec<Revealed>,
}

impl Walker<'_> {
    fn branch(&mut self, items: &mut Branch) -> Result<(), WalkError> {
        self.comments.push(Vec::new());
        for item in items.iter_mut() {
            let key = match &mut item.key {
                Key::Comment(c) => {
                    self.note_comment(c);
                    *c = self.comment(c);
                    continue;
                }
                Key::NonString(k) => return Err(WalkError::NonStringKey(k.clone())),
                Key::Name(k) => k.clone(),
            };
            let value_is_comment = self.note_value_comment(&item.value);
            self.path.push(key);
            let result = self.value(&mut item.value);
            self.path.pop();
            result?;
            if !value_is_comment {
                self.clear_comments();
            }
        }
        self.comments.pop();
        Ok(())
    }

    fn sequence(&mut self, values: &mut [Value]) -> Result<(), WalkError> {
        self.comments.push(Vec::new());
        for value in values.iter_mut() {
            let is_comment = self.note_value_comment(value);
            self.value(value)?;
            if !is_comment {
                self.clear_comments();
            }
        }
        self.comments.pop();
        Ok(())
    }

    fn note_comment(&mut self, c: &Comment) {
        if let Some(level) = self.comments.last_mut() {
            level.push(c.text.clone());
        }
    }

    fn note_value_comment(&mut self, value: &Value) -> bool {
        match value {
            Value::Comment(c) => {
                self.note_comment(c);
                true
            }
            _ => false,
        }
    }

    fn clear_comments(&mut self) {
        if let Some(level) = self.comments.last_mut() {
            level.clear();
        }
    }

    fn value(&mut self, value: &mut Value) -> Result<(), WalkError> {
        match value {
            Value::Null => Ok(()),
            Value::Map(items) => self.branch(items),
            Value::Seq(values) => self.sequence(values),
            Value::Comment(c) => {
                *c = self.comment(c);
                Ok(())
            }
            leaf => self.leaf(leaf),
        }
    }

    /// A comment the rule encrypts is decrypted if it can be; one that does not decrypt was
    /// written plain (older sops) and stays. A decrypted comment loses its inline flag, as in
    /// sops.
    fn comment(&self, c: &Comment) -> Comment {
        if !self.rule.encrypts(&self.path, &self.comments, true) {
            return c.clone();
        }
        match cipher::decrypt(&c.text, self.data_key, &self.additional_data()) {
            Ok(Value::Comment(plain)) => plain,
            Ok(Value::String(text)) => Comment {
                text,
                inline: c.inline,
            },
            _ => c.clone(),
        }
    }

    fn leaf(&mut self, value: &mut Value) -> Result<(), WalkError> {
        let encrypted = self.rule.encrypts(&self.path, &self.comments, false);
        if encrypted {
            let Value::String(text) = value else {
                return Err(WalkError::NotEncrypted(
                    self.path.join(":"),
                    type_name(value),
                ));
            };
            *value = cipher::decrypt(text, self.data_key, &self.additional_data()).map_err(
                |source| WalkError::Value {
                    path: self.path.join(":"),
                    source,
                },
            )?;
            reveal(&self.path, value, self.revealed);
        }
        if !self.mac_only_encrypted || encrypted {
            self.hash_value(value);
        }
        Ok(())
    }

    fn additional_data(&self) -> String {
        let mut aad = self.path.join(":");
        aad.push(':');
        aad
    }

    /// sops' `ToBytes`.
    fn hash_value(&mut self, value: &Value) {
        match value {
            Value::String(s) => self.hash.update(s.as_bytes()),
            Value::Int(i) => self.hash.update(i.to_string()),
            Value::Float(f) => self.hash.update(go_text::format_float(*f)),
            Value::Bool(b) => self.hash.update(if *b { "True" } else { "False" }),
            Value::Time(t) => self
                .hash
                .update(go_text::time_marshal_text(t).unwrap_or_else(|| t.clone())),
            Value::Bytes(b) => self.hash.update(b),
            Value::Null | Value::Comment(_) | Value::Map(_) | Value::Seq(_) => {}
        }
    }
}

/// How every value sops encrypted with AES-GCM starts.
pub const ENVELOPE_PREFIX: &str = "ENC[AES256_GCM,";

/// Decrypts in place every string value in sops' envelope (`ENC[AES256_GCM,...]`), leaving
/// the others as they are, as Flux does for data whose comments are gone (a built object)
/// while its rule selects values by comment. The key path is the additional data, as in
/// [`decrypt_branches`]; list items share their list's path.
/// Every decrypted value is added to `revealed`.
pub fn decrypt_enveloped(
    branches: &mut [Branch],
    data_key: &[u8],
    revealed: &mut Vec<Revealed>,
) -> Result<(), WalkError> {
    let mut path = Vec::new();
    for branch in branches {
        enveloped_branch(branch, &mut path, data_key, revealed)?;
    }
    Ok(())
}

fn enveloped_branch(
    items: &mut Branch,
    path: &mut Vec<String>,
    data_key: &[u8],
    revealed: &mut Vec<Revealed>,
) -> Result<(), WalkError> {
    for item in items.iter_mut() {
        let Key::Name(key) = &item.key else {
            continue;
        };
        path.push(key.clone());
        let result = enveloped_value(&mut item.value, path, data_key, revealed);
        path.pop();
        result?;
    }
    Ok(())
}

fn enveloped_value(
    value: &mut Value,
    path: &mut Vec<String>,
    data_key: &[u8],
    revealed: &mut Vec<Revealed>,
) -> Result<(), WalkError> {
    match value {
        Value::String(text) if text.starts_with(ENVELOPE_PREFIX) => {
            let mut aad = path.join(":");
            aad.push(':');
            *value = cipher::decrypt(text, data_key, &aad).map_err(|source| WalkError::Value {
                path: path.join(":"),
                source,
            })?;
            reveal(path, value, revealed);
            Ok(())
        }
        Value::Map(items) => enveloped_branch(items, path, data_key, revealed),
        Value::Seq(values) => values
            .iter_mut()
            .try_for_each(|v| enveloped_value(v, path, data_key, revealed)),
        _ => Ok(()),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Int(_) => "integer",
        Value::Float(_) => "float",
        Value::Bool(_) => "boolean",
        Value::Time(_) => "timestamp",
        Value::Bytes(_) => "byte string",
        _ => "value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cipher::tests::encrypt;
    use crate::tree::Item;

    const KEY: [u8; 32] = [9; 32];

    fn item(key: &str, value: Value) -> Item {
        Item {
            key: Key::Name(key.into()),
            value,
        }
    }

    fn enc(plain: &str, kind: &str, aad: &str) -> Value {
        Value::String(encrypt(plain.as_bytes(), kind, &KEY, aad, [3; 32]))
    }

    fn sha512_hex(parts: &[&[u8]]) -> String {
        let mut h = Sha512::new();
        parts.iter().for_each(|p| h.update(p));
        hex::encode_upper(h.finalize())
    }

    #[test]
    fn decrypts_nested_values_and_hashes_them_in_order() {
        let mut branches = vec![vec![
            item("user", enc("admin", "str", "user:")),
            item("port", enc("8080", "int", "port:")),
            item("note_unencrypted", Value::String("plain".into())),
            item(
                "list",
                Value::Seq(vec![enc("true", "bool", "list:"), Value::Null]),
            ),
            item(
                "nested",
                Value::Map(vec![item("ratio", enc("0.5", "float", "nested:ratio:"))]),
            ),
            item("empty", Value::String(String::new())),
        ]];
        let rule = Rule::UnencryptedSuffix("_unencrypted".into());
        let mut revealed = Vec::new();
        let mac = decrypt_branches(&mut branches, &rule, false, &KEY, &mut revealed).unwrap();
        let texts: Vec<(&str, &str)> = revealed
            .iter()
            .map(|r| (r.path.as_str(), r.text.as_str()))
            .collect();
        // Every decrypted value but the boolean; never a plain one.
        assert_eq!(
            texts,
            [("user", "admin"), ("port", "8080"), ("nested:ratio", "0.5")]
        );
        assert_eq!(branches[0][0].value, Value::String("admin".into()));
        assert_eq!(branches[0][1].value, Value::Int(8080));
        assert_eq!(
            branches[0][3].value,
            Value::Seq(vec![Value::Bool(true), Value::Null])
        );
        let want = sha512_hex(&[b"admin", b"8080", b"plain", b"True", b"0.5"]);
        assert_eq!(mac, want);
    }

    #[test]
    fn mac_only_encrypted_skips_plain_values() {
        let mut branches = vec![vec![
            item("kind", Value::String("Secret".into())),
            item(
                "data",
                Value::Map(vec![item("k", enc("v", "str", "data:k:"))]),
            ),
        ]];
        let rule = Rule::EncryptedRegex("^data$".into());
        let mac = decrypt_branches(&mut branches, &rule, true, &KEY, &mut Vec::new()).unwrap();
        assert_eq!(mac, sha512_hex(&[&MAC_ONLY_ENCRYPTED_INIT, b"v"]));
    }

    #[test]
    fn enveloped_values_are_decrypted_wherever_they_are() {
        let mut branches = vec![vec![
            item("kind", Value::String("Secret".into())),
            item(
                "stringData",
                Value::Map(vec![
                    item("user", Value::String("admin".into())),
                    item("password", enc("hunter2", "str", "stringData:password:")),
                ]),
            ),
            item(
                "list",
                Value::Seq(vec![enc("7", "int", "list:"), Value::Bool(true)]),
            ),
        ]];
        let mut revealed = Vec::new();
        decrypt_enveloped(&mut branches, &KEY, &mut revealed).unwrap();
        let texts: Vec<(&str, &str)> = revealed
            .iter()
            .map(|r| (r.path.as_str(), r.text.as_str()))
            .collect();
        assert_eq!(texts, [("stringData:password", "hunter2"), ("list", "7")]);
        let data = &branches[0][1].value;
        assert_eq!(
            data,
            &Value::Map(vec![
                item("user", Value::String("admin".into())),
                item("password", Value::String("hunter2".into())),
            ])
        );
        assert_eq!(
            branches[0][2].value,
            Value::Seq(vec![Value::Int(7), Value::Bool(true)])
        );
        let mut moved = vec![vec![item("b", enc("secret", "str", "a:"))]];
        let err = decrypt_enveloped(&mut moved, &KEY, &mut Vec::new()).unwrap_err();
        assert!(
            matches!(&err, WalkError::Value { path, .. } if path == "b"),
            "{err}"
        );
        assert!(!err.to_string().contains("secret"));
    }

    #[test]
    fn a_moved_value_fails_with_its_path() {
        let mut branches = vec![vec![item("b", enc("secret", "str", "a:"))]];
        let rule = Rule::UnencryptedSuffix("_unencrypted".into());
        let err = decrypt_branches(&mut branches, &rule, false, &KEY, &mut Vec::new()).unwrap_err();
        assert!(
            matches!(&err, WalkError::Value { path, source: CipherError::Authentication } if path == "b")
        );
        assert!(!err.to_string().contains("secret"));
    }

    #[test]
    fn rules_select_values_like_sops() {
        let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let suffix = Compiled::new(&Rule::UnencryptedSuffix("_unencrypted".into()));
        assert!(suffix.encrypts(&path(&["a", "b"]), &[], false));
        assert!(!suffix.encrypts(&path(&["a_unencrypted", "b"]), &[], false));
        let enc_suffix = Compiled::new(&Rule::EncryptedSuffix("_enc".into()));
        assert!(enc_suffix.encrypts(&path(&["x_enc", "y"]), &[], false));
        assert!(!enc_suffix.encrypts(&path(&["x"]), &[], false));
        let regex = Compiled::new(&Rule::EncryptedRegex("^(data|stringData)$".into()));
        assert!(regex.encrypts(&path(&["stringData", "k"]), &[], false));
        assert!(!regex.encrypts(&path(&["metadata", "name"]), &[], false));
        let unregex = Compiled::new(&Rule::UnencryptedRegex("^public".into()));
        assert!(!unregex.encrypts(&path(&["public_key"]), &[], false));
        let comment = Compiled::new(&Rule::EncryptedCommentRegex("sops:enc".into()));
        let stack = vec![vec![" sops:enc".to_string()]];
        assert!(comment.encrypts(&path(&["k"]), &stack, false));
        assert!(
            !comment.encrypts(&path(&["k"]), &stack, true),
            "the marker comment stays plain"
        );
        let uncomment = Compiled::new(&Rule::UnencryptedCommentRegex("plain".into()));
        assert!(!uncomment.encrypts(&path(&["k"]), &[vec![" plain".into()]], false));
        let invalid = Compiled::new(&Rule::EncryptedRegex("(".into()));
        assert!(!invalid.encrypts(&path(&["k"]), &[], false));
    }

    #[test]
    fn plain_non_strings_where_encryption_is_expected_are_refused() {
        let mut branches = vec![vec![item("n", Value::Int(1))]];
        let err = decrypt_branches(
            &mut branches,
            &Rule::UnencryptedSuffix("_u".into()),
            false,
            &KEY,
            &mut Vec::new(),
        );
        assert_eq!(err, Err(WalkError::NotEncrypted("n".into(), "integer")));
        let mut keyed = vec![vec![Item {
            key: Key::NonString("1".into()),
            value: Value::Null,
        }]];
        assert!(
            decrypt_branches(
                &mut keyed,
                &Rule::UnencryptedSuffix("_u".into()),
                false,
                &KEY,
                &mut Vec::new()
            )
            .is_err()
        );
    }
}
