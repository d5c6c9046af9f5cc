#![doc = include_str!("../README.md")]
//!
//! ## Purity
//!
//! A pure stage: no kube client, no files written, no process-global state. Plaintext and key
//! material are wiped when dropped, and no error message carries a value.

mod cipher;
mod data_key;
mod go_text;
pub mod keys;
pub mod metadata;
pub mod service;
pub mod shamir;
pub mod stores;
pub mod tree;
mod walk;

use std::path::Path;

use serde_json::{Map, Value};
use zeroize::Zeroizing;

pub use data_key::DataKeyError;
pub use keys::{KeyError, Keyring};
pub use metadata::MetadataError;
pub use service::{KeyService, ServiceError, ServiceKey};
pub use stores::StoreError;
pub use walk::{ENVELOPE_PREFIX, Revealed, WalkError};

use metadata::Metadata;
use tree::Branches;

/// The largest encrypted file decrypted (Flux's limit).
pub const MAX_ENCRYPTED_FILE_SIZE: usize = 5 << 20;

/// Why a file or object could not be decrypted. Names the format, key or value path at
/// fault; never carries plaintext or key material.
#[derive(Debug, thiserror::Error)]
pub enum DecryptError {
    /// Over [`MAX_ENCRYPTED_FILE_SIZE`].
    #[error("cannot decrypt {size} bytes: the limit is {limit} bytes")]
    TooLarge {
        /// The input size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The input does not parse in its format, or has no sops metadata.
    #[error("failed to load encrypted {format} data: {source}")]
    Load {
        /// The input format's name.
        format: &'static str,
        /// Why.
        source: StoreError,
    },
    /// The `sops` block is malformed.
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    /// The data key could not be recovered.
    #[error("cannot get sops data key: {0}")]
    DataKey(#[from] DataKeyError),
    /// A value did not decrypt.
    #[error("error decrypting sops tree: {0}")]
    Value(#[from] WalkError),
    /// The MAC does not match the values: the file was changed after it was encrypted.
    #[error("failed to verify sops data integrity: {0}")]
    Mac(&'static str),
    /// A decrypted object is no longer a JSON object.
    #[error("the decrypted object is not a JSON object")]
    NotAnObject,
    /// The decrypted document cannot be written in the output format.
    #[error("failed to emit decrypted {format} data: {source}")]
    Emit {
        /// The output format's name.
        format: &'static str,
        /// Why.
        source: StoreError,
    },
}

/// Decrypts a sops-encrypted file written in `input` format and prints it in `output`
/// format, as `sops -d --input-type --output-type` does. With `verify_mac`, the MAC must
/// match the decrypted values.
pub fn decrypt(
    data: &[u8],
    input: Format,
    output: Format,
    keys: &Keyring,
    verify_mac: bool,
) -> Result<Zeroizing<Vec<u8>>, DecryptError> {
    decrypt_revealing(data, input, output, keys, verify_mac, &mut Vec::new())
}

/// [`decrypt`], adding every value it decrypted to `revealed` (so that messages written
/// afterwards can be kept free of them).
pub fn decrypt_revealing(
    data: &[u8],
    input: Format,
    output: Format,
    keys: &Keyring,
    verify_mac: bool,
    revealed: &mut Vec<Revealed>,
) -> Result<Zeroizing<Vec<u8>>, DecryptError> {
    if data.len() > MAX_ENCRYPTED_FILE_SIZE {
        return Err(DecryptError::TooLarge {
            size: data.len(),
            limit: MAX_ENCRYPTED_FILE_SIZE,
        });
    }
    let (mut branches, metadata) =
        stores::load_encrypted(input, data).map_err(|source| DecryptError::Load {
            format: input.name(),
            source,
        })?;
    // A file has every comment sops saw when it encrypted it (a JSON file never had any),
    // so sops' own walk applies, comment rules included.
    decrypt_branches(&mut branches, &metadata, keys, verify_mac, false, revealed)?;
    stores::emit_plain(output, &branches).map_err(|source| DecryptError::Emit {
        format: output.name(),
        source,
    })
}

/// Decrypts a built object carrying a `sops` block, read as sops' JSON store reads it (as
/// Flux does). The MAC is not checked: kustomize may have changed the object's plain fields.
///
/// The build dropped the object's comments, so when its rule selects values by comment
/// (`encrypted_comment_regex`, `unencrypted_comment_regex`), every value in sops' envelope
/// is decrypted and the others are left alone, as Flux does.
pub fn decrypt_object(
    object: &Map<String, Value>,
    keys: &Keyring,
) -> Result<Map<String, Value>, DecryptError> {
    decrypt_object_revealing(object, keys, &mut Vec::new())
}

/// [`decrypt_object`], adding every value it decrypted to `revealed`.
pub fn decrypt_object_revealing(
    object: &Map<String, Value>,
    keys: &Keyring,
    revealed: &mut Vec<Revealed>,
) -> Result<Map<String, Value>, DecryptError> {
    let (mut branches, metadata) = stores::branches_from_json(&Value::Object(object.clone()))
        .map_err(|source| DecryptError::Load {
            format: Format::Json.name(),
            source,
        })?;
    decrypt_branches(&mut branches, &metadata, keys, false, true, revealed)?;
    let emit = |source| DecryptError::Emit {
        format: Format::Json.name(),
        source,
    };
    match stores::json_from_branches(&branches).map_err(emit)? {
        Value::Object(map) => Ok(map),
        _ => Err(DecryptError::NotAnObject),
    }
}

/// Decrypts the branches; `comments_lost` says the comments of the encrypted file were
/// dropped (a built object), so a comment-regex rule cannot be followed and every
/// enveloped value is decrypted instead. No MAC can be checked then: with `verify_mac`
/// that is an error, in Flux's words.
fn decrypt_branches(
    branches: &mut Branches,
    metadata: &tree::Branch,
    keys: &Keyring,
    verify_mac: bool,
    comments_lost: bool,
    revealed: &mut Vec<Revealed>,
) -> Result<(), DecryptError> {
    let metadata = Metadata::parse(metadata)?;
    let by_comment = matches!(
        metadata.rule,
        metadata::Rule::EncryptedCommentRegex(_) | metadata::Rule::UnencryptedCommentRegex(_)
    );
    if comments_lost && by_comment {
        if verify_mac {
            return Err(DecryptError::Mac(
                "not supported for data encrypted with comment regexes",
            ));
        }
        let data_key = data_key::recover(&metadata, keys)?;
        walk::decrypt_enveloped(&mut branches.0, &data_key, revealed)?;
        return Ok(());
    }
    let data_key = data_key::recover(&metadata, keys)?;
    let mac = walk::decrypt_branches(
        &mut branches.0,
        &metadata.rule,
        metadata.mac_only_encrypted,
        &data_key,
        revealed,
    )?;
    if verify_mac {
        let stored =
            cipher::decrypt(&metadata.mac, &data_key, &metadata.last_modified).map_err(|_| {
                DecryptError::Mac(
                    "the stored MAC does not decrypt (it was changed, or lastmodified was)",
                )
            })?;
        match stored {
            tree::Value::String(s) if s.is_empty() => {
                return Err(DecryptError::Mac("the file has no MAC"));
            }
            tree::Value::String(s) if s == mac => {}
            _ => {
                return Err(DecryptError::Mac(
                    "MAC mismatch: the file was changed after it was encrypted",
                ));
            }
        }
    }
    Ok(())
}

/// The file formats sops reads and writes (its "stores").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// YAML, one or more documents.
    Yaml,
    /// JSON.
    Json,
    /// `KEY=value` lines.
    Dotenv,
    /// INI sections.
    Ini,
    /// Any other file: encrypted whole, stored as JSON with a single `data` value.
    Binary,
}

impl Format {
    /// The format sops picks for a file name (`FormatForPath`): `.yaml`/`.yml`, `.json`,
    /// `.env`, `.ini`, otherwise binary.
    pub fn for_path(path: impl AsRef<Path>) -> Format {
        let name = path.as_ref().to_string_lossy();
        if name.ends_with(".yaml") || name.ends_with(".yml") {
            Format::Yaml
        } else if name.ends_with(".json") {
            Format::Json
        } else if name.ends_with(".env") {
            Format::Dotenv
        } else if name.ends_with(".ini") {
            Format::Ini
        } else {
            Format::Binary
        }
    }

    /// The format Flux gives a Secret data key or a generator `files` key: like
    /// [`Format::for_path`], and a `.dockerconfigjson` key is JSON.
    pub fn for_key(key: &str) -> Format {
        if key.ends_with(".dockerconfigjson") {
            Format::Json
        } else {
            Format::for_path(key)
        }
    }

    /// The bytes that show a file of this format is sops-encrypted (Flux's markers).
    pub fn marker(self) -> &'static [u8] {
        match self {
            Format::Binary | Format::Json => b"\"mac\": \"ENC[",
            Format::Dotenv => b"sops_mac=ENC[",
            Format::Ini => b"[sops]",
            Format::Yaml => b"mac: ENC[",
        }
    }

    /// Whether `data` carries this format's sops marker.
    pub fn is_encrypted(self, data: &[u8]) -> bool {
        contains(data, self.marker())
    }

    /// The encrypted format `data` is in, from its markers (JSON before YAML, as a JSON file
    /// never carries the YAML marker).
    pub fn detect(data: &[u8]) -> Option<Format> {
        [Format::Json, Format::Dotenv, Format::Ini, Format::Yaml]
            .into_iter()
            .find(|f| f.is_encrypted(data))
    }

    /// The name sops and Flux use for the format in messages.
    pub fn name(self) -> &'static str {
        match self {
            Format::Yaml => "YAML",
            Format::Json => "JSON",
            Format::Dotenv => "dotenv",
            Format::Ini => "INI",
            Format::Binary => "binary",
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
