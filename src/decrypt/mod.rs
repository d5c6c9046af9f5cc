//! SOPS decryption, native: reads the files the `sops` tool (3.x) writes and decrypts them
//! with age identities and OpenPGP secret keys held in memory.
//!
//! A pure stage: no kube client, no files written, no process-global state. Plaintext and key
//! material are wiped when dropped, and no error message carries a value.

pub mod stores;
pub mod tree;

use std::path::Path;

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
