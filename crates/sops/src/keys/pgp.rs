//! OpenPGP: secret keys as `gpg --export-secret-keys --armor` writes them, and the armored
//! `PGP MESSAGE` sops writes into `enc` (through gpg or Go's openpgp package).
//!
//! Errors are this module's own words: rPGP's messages are not passed on, so nothing from a
//! parsed key or a decrypted message can reach one.

use std::io::Read;

use ::pgp::composed::{DecryptionOptions, Deserializable, Message, SignedSecretKey, TheRing};
use ::pgp::errors::Error as PgpError;
use ::pgp::types::{KeyDetails, Password, S2kParams, SecretParams, StringToKey};
use zeroize::Zeroizing;

use super::{KeyError, MAX_PLAINTEXT};

/// The S2K type GnuPG uses for a secret key packet without its secret (`gnu-dummy`, e.g.
/// the primary key after `--export-secret-subkeys`, or a key moved to a smartcard).
const GNU_DUMMY_S2K: u8 = 101;

/// How gpg's armor lines start.
const BEGIN: &str = "-----BEGIN PGP ";
const END: &str = "-----END PGP ";

/// Parses every secret key in `data`: one or more armored blocks (a `PRIVATE KEY BLOCK` may
/// hold several keys; `PUBLIC KEY BLOCK`s add nothing, as for `gpg --import`), or binary
/// key packets.
pub(super) fn parse_secret_keys(data: &[u8]) -> Result<Vec<SignedSecretKey>, KeyError> {
    let text = std::str::from_utf8(data).ok();
    let blocks = text.map(armor_blocks).unwrap_or_default();
    let keys = if blocks.is_empty() {
        if looks_binary(data) {
            collect_keys(SignedSecretKey::from_bytes_many(data))?
        } else {
            return Err(KeyError::PgpKeyData(
                "no armored OpenPGP key block (-----BEGIN PGP PRIVATE KEY BLOCK-----) found",
            ));
        }
    } else {
        let mut keys = Vec::new();
        for block in blocks
            .into_iter()
            .filter(|b| b.contains("PRIVATE KEY BLOCK-----"))
        {
            let parsed = SignedSecretKey::from_armor_many(block.as_bytes()).map(|(keys, _)| keys);
            keys.extend(collect_keys(parsed)?);
        }
        keys
    };
    for key in &keys {
        refuse_protected(key)?;
    }
    Ok(keys)
}

/// The armored blocks in `text`, each from its BEGIN line through its END line.
fn armor_blocks(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(BEGIN) {
        let from_begin = &rest[start..];
        let Some(end_at) = from_begin.find(END) else {
            // Unterminated: hand it to the parser, which reports it.
            blocks.push(from_begin);
            break;
        };
        let after_end = &from_begin[end_at..];
        let end_len = after_end.find('\n').map_or(after_end.len(), |n| n + 1);
        blocks.push(&from_begin[..end_at + end_len]);
        rest = &after_end[end_len..];
    }
    blocks
}

/// Whether `data` starts like an OpenPGP packet (the tag byte's high bit is set).
fn looks_binary(data: &[u8]) -> bool {
    data.first().is_some_and(|b| b & 0x80 != 0)
}

/// Collects parsed keys, turning rPGP's errors into this module's.
fn collect_keys(
    parsed: ::pgp::errors::Result<
        Box<dyn Iterator<Item = ::pgp::errors::Result<SignedSecretKey>> + '_>,
    >,
) -> Result<Vec<SignedSecretKey>, KeyError> {
    let malformed = |err: PgpError| {
        KeyError::PgpKeyData(match err {
            PgpError::InvalidChecksum => "armor checksum mismatch",
            PgpError::InvalidArmorWrappers => "invalid armor header or footer",
            _ => "malformed OpenPGP secret key data",
        })
    };
    parsed
        .map_err(malformed)?
        .map(|key| key.map_err(malformed))
        .collect()
}

/// Refuses a key whose secret material is locked with a passphrase (a gnu-dummy stub, which
/// has no secret at all, is fine).
fn refuse_protected(key: &SignedSecretKey) -> Result<(), KeyError> {
    let locked = is_locked(key.primary_key.secret_params())
        || key
            .secret_subkeys
            .iter()
            .any(|sub| is_locked(sub.key.secret_params()));
    if locked {
        return Err(KeyError::PgpProtected {
            fingerprint: format!("{:X}", key.primary_key.fingerprint()),
        });
    }
    Ok(())
}

/// Whether a secret key packet needs a passphrase.
fn is_locked(params: &SecretParams) -> bool {
    match params {
        SecretParams::Plain(_) => false,
        SecretParams::Encrypted(enc) => !matches!(
            enc.string_to_key_params(),
            S2kParams::Cfb {
                s2k: StringToKey::Private {
                    typ: GNU_DUMMY_S2K,
                    ..
                },
                ..
            }
        ),
    }
}

/// Decrypts an armored `PGP MESSAGE` with whichever of `keys` (primary or subkey) it is
/// encrypted to, as `gpg -d` picks the key from the message.
pub(super) fn decrypt(keys: &[SignedSecretKey], enc: &str) -> Result<Zeroizing<Vec<u8>>, KeyError> {
    let (message, _) = Message::from_armor(enc.as_bytes())
        .map_err(|_| KeyError::PgpEnc("not an armored OpenPGP message"))?;
    if !message.is_encrypted() {
        return Err(KeyError::PgpEnc("the OpenPGP message is not encrypted"));
    }
    let empty = Password::empty();
    let ring = TheRing {
        secret_keys: keys.iter().collect(),
        key_passwords: vec![&empty],
        // gpg 2.3+ writes its OCB packets to keys that announce AEAD support.
        decrypt_options: DecryptionOptions::new().enable_gnupg_aead(),
        ..Default::default()
    };
    let (message, _) = message
        .decrypt_the_ring(ring, true)
        .map_err(|err| match err {
            PgpError::MissingKey => KeyError::NoMatchingKey,
            _ => KeyError::PgpEnc("decrypting the OpenPGP message failed"),
        })?;
    read_literal(message)
}

/// Reads the literal data of a decrypted message (decompressing as needed) into wiped
/// memory, at most [`MAX_PLAINTEXT`] bytes. Empty data is an error, as for sops.
fn read_literal(mut message: Message<'_>) -> Result<Zeroizing<Vec<u8>>, KeyError> {
    while message.is_compressed() {
        message = message
            .decompress()
            .map_err(|_| KeyError::PgpEnc("decompressing the OpenPGP message failed"))?;
    }
    let mut out = Zeroizing::new(Vec::new());
    let limit = u64::try_from(MAX_PLAINTEXT + 1).unwrap_or(u64::MAX);
    (&mut message)
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|_| {
            KeyError::PgpEnc("reading the OpenPGP message failed (corrupt or tampered)")
        })?;
    if out.len() > MAX_PLAINTEXT {
        return Err(KeyError::TooLarge(MAX_PLAINTEXT));
    }
    if out.is_empty() {
        return Err(KeyError::PgpEnc(
            "the OpenPGP message decrypted to zero bytes",
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RSA: &str = include_str!("testdata/rsa.sec.asc");
    const ECC: &str = include_str!("testdata/ecc.sec.asc");
    const WRONG: &str = include_str!("testdata/wrong.sec.asc");
    const BOTH: &str = include_str!("testdata/both.sec.asc");
    const PROTECTED: &str = include_str!("testdata/protected.sec.asc");
    const RSA_MSG: &str = include_str!("testdata/rsa.msg.asc");
    const ECC_MSG: &str = include_str!("testdata/ecc.msg.asc");
    const SYM_MSG: &str = include_str!("testdata/sym.msg.asc");
    /// `gpg --export-secret-subkeys --armor`: the primary is a gnu-dummy stub.
    const ECC_SUBKEYS_ONLY: &str = include_str!("testdata/ecc.subkeys.sec.asc");
    /// `gpg --export-secret-keys` without `--armor`.
    const ECC_BINARY: &[u8] = include_bytes!("testdata/ecc.sec.gpg");

    fn keys(text: &str) -> Vec<SignedSecretKey> {
        parse_secret_keys(text.as_bytes()).unwrap()
    }

    #[test]
    fn imports_rsa_and_ecc_keys() {
        assert_eq!(keys(RSA).len(), 1);
        let ecc = keys(ECC);
        assert_eq!(ecc.len(), 1);
        assert_eq!(ecc[0].secret_subkeys.len(), 1, "cv25519 subkey");
        assert_eq!(keys(BOTH).len(), 2, "two keys in one armor block");
        assert_eq!(
            keys(&format!("{RSA}\n{ECC}{WRONG}")).len(),
            3,
            "concatenated blocks"
        );
    }

    #[test]
    fn decrypts_to_rsa_primary_and_cv25519_subkey() {
        let ring = keys(&format!("{WRONG}{RSA}{ECC}"));
        assert_eq!(
            decrypt(&ring, RSA_MSG).unwrap().as_slice(),
            b"rsa-secret-data"
        );
        assert_eq!(
            decrypt(&ring, ECC_MSG).unwrap().as_slice(),
            b"ecc-secret-data"
        );
        assert_eq!(
            decrypt(&keys(BOTH), ECC_MSG).unwrap().as_slice(),
            b"ecc-secret-data"
        );
        let crlf = RSA_MSG.replace('\n', "\r\n");
        assert_eq!(
            decrypt(&ring, &crlf).unwrap().as_slice(),
            b"rsa-secret-data"
        );
    }

    #[test]
    fn subkey_only_export_and_binary_keys() {
        let stub = keys(ECC_SUBKEYS_ONLY);
        assert_eq!(stub.len(), 1);
        assert!(
            stub[0].primary_key.secret_params().is_encrypted(),
            "primary is a stub"
        );
        assert_eq!(
            decrypt(&stub, ECC_MSG).unwrap().as_slice(),
            b"ecc-secret-data"
        );
        let binary = parse_secret_keys(ECC_BINARY).unwrap();
        assert_eq!(binary.len(), 1);
        assert_eq!(
            decrypt(&binary, ECC_MSG).unwrap().as_slice(),
            b"ecc-secret-data"
        );
    }

    #[test]
    fn wrong_key_is_no_matching_key() {
        assert!(matches!(
            decrypt(&keys(WRONG), RSA_MSG),
            Err(KeyError::NoMatchingKey)
        ));
        assert!(matches!(
            decrypt(&keys(RSA), ECC_MSG),
            Err(KeyError::NoMatchingKey)
        ));
        assert!(matches!(
            decrypt(&[], ECC_MSG),
            Err(KeyError::NoMatchingKey)
        ));
        // A passphrase-only message is encrypted to no key at all.
        assert!(matches!(
            decrypt(&keys(RSA), SYM_MSG),
            Err(KeyError::NoMatchingKey)
        ));
    }

    #[test]
    fn protected_key_is_refused_with_its_fingerprint() {
        let err = parse_secret_keys(PROTECTED.as_bytes()).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, KeyError::PgpProtected { .. }), "{err:?}");
        assert!(
            msg.contains("385A6CB9D0781B715BA80BE0A6B667434F9F118F"),
            "{msg}"
        );
        assert!(msg.contains("passphrase"), "{msg}");
    }

    #[test]
    fn public_blocks_add_nothing_garbage_is_an_error() {
        let public =
            "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nxx\n-----END PGP PUBLIC KEY BLOCK-----\n";
        assert!(keys(public).is_empty());
        for bad in ["", "hello", "AGE-SECRET-KEY-1QQQ"] {
            let err = parse_secret_keys(bad.as_bytes()).unwrap_err();
            assert!(matches!(err, KeyError::PgpKeyData(_)), "{bad:?}: {err:?}");
        }
        let body_garbage =
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n!!!!\n-----END PGP PRIVATE KEY BLOCK-----\n";
        assert!(matches!(
            parse_secret_keys(body_garbage.as_bytes()),
            Err(KeyError::PgpKeyData(_))
        ));
        let truncated = &RSA[..RSA.len() / 2];
        assert!(matches!(
            parse_secret_keys(truncated.as_bytes()),
            Err(KeyError::PgpKeyData(_))
        ));
    }

    #[test]
    fn garbage_message_is_an_error() {
        let ring = keys(RSA);
        for bad in [
            "",
            "hello",
            "-----BEGIN PGP MESSAGE-----\n\n!!!!\n-----END PGP MESSAGE-----\n",
        ] {
            let err = decrypt(&ring, bad).unwrap_err();
            assert!(matches!(err, KeyError::PgpEnc(_)), "{bad:?}: {err:?}");
        }
        // Flip a character in the encrypted payload (the last body line before the checksum).
        let mut lines: Vec<String> = RSA_MSG.lines().map(String::from).collect();
        let idx = lines.len() - 3;
        let c = if lines[idx].starts_with('A') {
            "B"
        } else {
            "A"
        };
        lines[idx].replace_range(0..1, c);
        let err = decrypt(&ring, &lines.join("\n")).unwrap_err();
        assert!(matches!(err, KeyError::PgpEnc(_)), "{err:?}");
    }
}
