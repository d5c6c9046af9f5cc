//! sops' value cipher: `ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]` strings, AES-256-GCM with
//! the value's key path as additional authenticated data.

use aes_gcm::aead::consts::{U12, U32};
use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::aes::Aes256;
use aes_gcm::{AesGcm, Nonce, Tag};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use zeroize::Zeroizing;

use super::go_text;
use super::tree::{Comment, Value};

const PREFIX: &str = "ENC[AES256_GCM,data:";

/// Why an encrypted value could not be decrypted. Never carries the value.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CipherError {
    /// The text is not an `ENC[AES256_GCM,...]` value.
    #[error("the value is not in sops' encrypted format")]
    NotEncrypted,
    /// One of the base64 fields does not decode.
    #[error("the {0} of the encrypted value is not valid base64")]
    Base64(&'static str),
    /// An IV length sops never writes.
    #[error("the encrypted value has an IV of {0} bytes")]
    IvLength(usize),
    /// The data key is not 32 bytes.
    #[error("the data key is {0} bytes, not 32")]
    KeyLength(usize),
    /// AES-GCM authentication failed: wrong key, or the value or its key path was changed.
    #[error(
        "authentication failed (wrong data key, or the value or its place in the file was changed)"
    )]
    Authentication,
    /// The decrypted text does not parse as the declared type.
    #[error("the decrypted value is not a valid {0}")]
    Type(&'static str),
    /// A `type:` sops does not write.
    #[error("unknown encrypted value type {0:?}")]
    UnknownType(String),
}

struct Parts<'a> {
    data: &'a str,
    iv: &'a str,
    tag: &'a str,
    kind: &'a str,
}

/// Splits `ENC[AES256_GCM,data:D,iv:I,tag:T,type:K]` like sops' unanchored-at-the-end regex.
fn parse(text: &str) -> Result<Parts<'_>, CipherError> {
    let rest = text.strip_prefix(PREFIX).ok_or(CipherError::NotEncrypted)?;
    let (data, rest) = rest.split_once(",iv:").ok_or(CipherError::NotEncrypted)?;
    let (iv, rest) = rest.split_once(",tag:").ok_or(CipherError::NotEncrypted)?;
    let (tag, rest) = rest.split_once(",type:").ok_or(CipherError::NotEncrypted)?;
    let kind = &rest[..rest.rfind(']').ok_or(CipherError::NotEncrypted)?];
    if [data, iv, tag, kind].iter().any(|p| p.is_empty()) {
        return Err(CipherError::NotEncrypted);
    }
    Ok(Parts {
        data,
        iv,
        tag,
        kind,
    })
}

/// Decrypts one value. An empty string is returned as is (sops leaves empty values plain).
pub fn decrypt(text: &str, key: &[u8], additional_data: &str) -> Result<Value, CipherError> {
    if text.is_empty() {
        return Ok(Value::String(String::new()));
    }
    let parts = parse(text)?;
    let mut plain = Zeroizing::new(decode(parts.data, "data")?);
    let iv = decode(parts.iv, "iv")?;
    let tag = decode(parts.tag, "tag")?;
    if tag.len() != 16 {
        return Err(CipherError::Authentication);
    }
    let tag = Tag::from_slice(&tag);
    if key.len() != 32 {
        return Err(CipherError::KeyLength(key.len()));
    }
    let aad = additional_data.as_bytes();
    let opened = match iv.len() {
        32 => AesGcm::<Aes256, U32>::new_from_slice(key)
            .map_err(|_| CipherError::KeyLength(key.len()))?
            .decrypt_in_place_detached(Nonce::<U32>::from_slice(&iv), aad, &mut plain, tag),
        12 => AesGcm::<Aes256, U12>::new_from_slice(key)
            .map_err(|_| CipherError::KeyLength(key.len()))?
            .decrypt_in_place_detached(Nonce::<U12>::from_slice(&iv), aad, &mut plain, tag),
        other => return Err(CipherError::IvLength(other)),
    };
    opened.map_err(|_| CipherError::Authentication)?;
    typed(parts.kind, plain)
}

fn decode(field: &str, name: &'static str) -> Result<Vec<u8>, CipherError> {
    STANDARD
        .decode(field)
        .map_err(|_| CipherError::Base64(name))
}

/// The plaintext as the type sops recorded (`strconv` parsing, as sops' Go does).
fn typed(kind: &str, plain: Zeroizing<Vec<u8>>) -> Result<Value, CipherError> {
    let text = || std::str::from_utf8(&plain).map_err(|_| CipherError::Type("UTF-8 string"));
    Ok(match kind {
        // Go strings are bytes: a `str` that is not UTF-8 (a binary file) stays bytes.
        "str" => match String::from_utf8(plain.to_vec()) {
            Ok(s) => Value::String(s),
            Err(e) => Value::Bytes(e.into_bytes()),
        },
        "int" => Value::Int(go_text::parse_int(text()?).ok_or(CipherError::Type("int"))?),
        "float" => Value::Float(go_text::parse_float(text()?).ok_or(CipherError::Type("float"))?),
        "bool" => Value::Bool(go_text::parse_bool(text()?).ok_or(CipherError::Type("bool"))?),
        "time" => {
            Value::Time(go_text::time_marshal_text(text()?).ok_or(CipherError::Type("time"))?)
        }
        "bytes" => Value::Bytes(plain.to_vec()),
        "comment" => Value::Comment(Comment {
            text: text()?.to_owned(),
            inline: false,
        }),
        other => return Err(CipherError::UnknownType(other.chars().take(16).collect())),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use aes_gcm::aead::AeadInPlace;

    /// Encrypts like sops (32-byte IV), for tests.
    pub(crate) fn encrypt(
        plain: &[u8],
        kind: &str,
        key: &[u8; 32],
        aad: &str,
        iv: [u8; 32],
    ) -> String {
        let mut buf = plain.to_vec();
        let tag = AesGcm::<Aes256, U32>::new_from_slice(key)
            .unwrap()
            .encrypt_in_place_detached(Nonce::<U32>::from_slice(&iv), aad.as_bytes(), &mut buf)
            .unwrap();
        format!(
            "ENC[AES256_GCM,data:{},iv:{},tag:{},type:{kind}]",
            STANDARD.encode(&buf),
            STANDARD.encode(iv),
            STANDARD.encode(tag.as_slice())
        )
    }

    const KEY: [u8; 32] = [7; 32];

    #[test]
    fn decrypts_every_type() {
        let cases = [
            (b"hello".as_slice(), "str", Value::String("hello".into())),
            (b"-42", "int", Value::Int(-42)),
            (b"1.5", "float", Value::Float(1.5)),
            (b"True", "bool", Value::Bool(true)),
            (
                b"2024-01-02T03:04:05Z",
                "time",
                Value::Time("2024-01-02T03:04:05Z".into()),
            ),
            (b"\x00\xff", "bytes", Value::Bytes(vec![0, 255])),
            (
                b" note",
                "comment",
                Value::Comment(Comment {
                    text: " note".into(),
                    inline: false,
                }),
            ),
        ];
        for (plain, kind, want) in cases {
            let enc = encrypt(plain, kind, &KEY, "a:b:", [1; 32]);
            assert_eq!(decrypt(&enc, &KEY, "a:b:").unwrap(), want, "{kind}");
        }
    }

    #[test]
    fn empty_string_stays_empty() {
        assert_eq!(
            decrypt("", &KEY, "x:").unwrap(),
            Value::String(String::new())
        );
    }

    #[test]
    fn wrong_key_path_or_tampering_fails_authentication() {
        let enc = encrypt(b"secret", "str", &KEY, "data:password:", [2; 32]);
        assert_eq!(
            decrypt(&enc, &KEY, "data:other:"),
            Err(CipherError::Authentication)
        );
        assert_eq!(
            decrypt(&enc, &[8; 32], "data:password:"),
            Err(CipherError::Authentication)
        );
        let tampered = enc.replacen("data:", "data:A", 1);
        assert!(decrypt(&tampered, &KEY, "data:password:").is_err());
        let err =
            decrypt(&enc.replace("type:str", "type:int"), &KEY, "data:password:").unwrap_err();
        assert_eq!(err, CipherError::Type("int"));
        assert!(!err.to_string().contains("secret"));
    }

    #[test]
    fn malformed_values_are_refused() {
        for text in [
            "ENC[AES256_GCM,data:,iv:,tag:,type:str]",
            "ENC[AES256_GCM,data:AA==]",
            "plain",
            "ENC[AES256_GCM,data:@@,iv:AA==,tag:AA==,type:str]",
        ] {
            assert!(decrypt(text, &KEY, "").is_err(), "{text}");
        }
        assert!(parse("ENC[AES256_GCM,data:AA==,iv:AA==,tag:AA==,type:str]").is_ok());
        assert!(parse("ENC[AES256_GCM,data:AA==]").is_err());
    }
}
