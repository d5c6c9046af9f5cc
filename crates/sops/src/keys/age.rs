//! age: identity files and the armored age files sops writes into `enc`.
//!
//! sops reads identities one per line (`#` comments and empty lines skipped, a trailing `\r`
//! dropped as Go's line scanner does) and accepts X25519 keys (`AGE-SECRET-KEY-1...`), plugin
//! identities and post-quantum hybrid keys; only X25519 keys are supported here, the others
//! are refused naming their line.

use std::io::Read;

use ::age::armor::ArmoredReader;
use ::age::x25519::Identity;
use ::age::{DecryptError, Decryptor};
use zeroize::Zeroizing;

use super::{KeyError, MAX_PLAINTEXT};

/// The first line of an armored age file.
const ARMOR_BEGIN: &str = "-----BEGIN AGE ENCRYPTED FILE-----";

/// How much whitespace age's armor reader skips before the header or after the footer.
const MAX_ARMOR_WHITESPACE: usize = 1024;

/// Parses an identity file's text into X25519 identities.
pub(super) fn parse_identities(text: &str) -> Result<Vec<Identity>, KeyError> {
    let mut out = Vec::new();
    for (index, raw) in text.split('\n').enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        out.push(parse_identity(line, index + 1)?);
    }
    Ok(out)
}

/// Parses one identity line (1-based `line` for errors; the text never goes into one).
fn parse_identity(text: &str, line: usize) -> Result<Identity, KeyError> {
    let unsupported = |kind| KeyError::AgeUnsupportedIdentity { line, kind };
    if text.starts_with("AGE-PLUGIN-") {
        Err(unsupported("age plugin"))
    } else if text.starts_with("AGE-SECRET-KEY-PQ-1") {
        Err(unsupported("post-quantum hybrid (ML-KEM-768 + X25519)"))
    } else if text.starts_with("AGE-SECRET-KEY-1") {
        text.parse::<Identity>()
            .map_err(|reason| KeyError::AgeIdentity { line, reason })
    } else if text.starts_with("-----BEGIN") || text.starts_with("ssh-") {
        Err(unsupported("SSH key"))
    } else {
        Err(KeyError::AgeIdentity {
            line,
            reason: "unknown identity type (expected AGE-SECRET-KEY-1...)",
        })
    }
}

/// Decrypts an armored age file with whichever of `identities` it is encrypted to.
pub(super) fn decrypt(identities: &[Identity], enc: &str) -> Result<Zeroizing<Vec<u8>>, KeyError> {
    let armored = strip_armor_whitespace(enc)?;
    let decryptor =
        Decryptor::new_buffered(ArmoredReader::new(armored.as_bytes())).map_err(enc_error)?;
    let reader = decryptor
        .decrypt(identities.iter().map(|i| i as &dyn ::age::Identity))
        .map_err(|err| match err {
            DecryptError::NoMatchingKeys => KeyError::NoMatchingKey,
            other => enc_error(other),
        })?;
    read_limited(reader)
}

/// The armored file inside `enc`, as age's Go armor reader (which sops uses) delimits it:
/// blank lines before the header and whitespace after the footer are dropped, each up to
/// [`MAX_ARMOR_WHITESPACE`] bytes; the header must then be the first line, exactly.
/// Unarmored (binary) age data is refused.
fn strip_armor_whitespace(enc: &str) -> Result<&str, KeyError> {
    let mut start = 0;
    while let Some(len) = enc[start..].find('\n') {
        if !enc[start..start + len].trim().is_empty() {
            break;
        }
        start += len + 1;
    }
    if start > MAX_ARMOR_WHITESPACE {
        return Err(KeyError::AgeEnc("too much leading whitespace".into()));
    }
    let body = enc[start..].trim_end();
    if enc.len() - start - body.len() >= MAX_ARMOR_WHITESPACE {
        return Err(KeyError::AgeEnc("too much trailing whitespace".into()));
    }
    let first = body.split('\n').next().unwrap_or_default();
    if first.strip_suffix('\r').unwrap_or(first) != ARMOR_BEGIN {
        return Err(KeyError::AgeEnc(format!(
            "not an armored age file (the first line must be {ARMOR_BEGIN})"
        )));
    }
    Ok(body)
}

/// Reads a decrypted stream into wiped memory, refusing more than [`MAX_PLAINTEXT`] bytes.
fn read_limited(reader: impl Read) -> Result<Zeroizing<Vec<u8>>, KeyError> {
    let mut out = Zeroizing::new(Vec::new());
    let limit = u64::try_from(MAX_PLAINTEXT + 1).unwrap_or(u64::MAX);
    reader
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|err| KeyError::AgeEnc(format!("reading the payload failed: {err}")))?;
    if out.len() > MAX_PLAINTEXT {
        return Err(KeyError::TooLarge(MAX_PLAINTEXT));
    }
    Ok(out)
}

/// An age error as a message; age's errors describe the file's structure, never its content.
fn enc_error(err: DecryptError) -> KeyError {
    KeyError::AgeEnc(err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID1: &str = include_str!("testdata/id1.txt");
    const ID2: &str = include_str!("testdata/id2.txt");
    const ID3: &str = include_str!("testdata/id3.txt");
    const MSG1: &str = include_str!("testdata/id1.msg.age");
    const MSG3: &str = include_str!("testdata/id3.msg.age");

    fn parse_err(text: &str) -> KeyError {
        match parse_identities(text) {
            Err(err) => err,
            Ok(ids) => panic!("parsed {} identities", ids.len()),
        }
    }

    fn key_line(file: &str) -> &str {
        file.lines()
            .find(|l| l.starts_with("AGE-SECRET-KEY-1"))
            .unwrap()
    }

    #[test]
    fn parses_keygen_file_with_comments() {
        assert_eq!(parse_identities(ID1).unwrap().len(), 1);
        let both = format!("{ID1}\n\n# another\n{ID2}");
        assert_eq!(parse_identities(&both).unwrap().len(), 2);
    }

    #[test]
    fn crlf_and_missing_final_newline() {
        let text = format!("# c\r\n{}\r\n{}", key_line(ID1), key_line(ID2));
        assert_eq!(parse_identities(&text).unwrap().len(), 2);
        assert!(parse_identities("").unwrap().is_empty());
        assert!(parse_identities("# only a comment\n\n").unwrap().is_empty());
    }

    #[test]
    fn leading_or_trailing_space_is_refused_like_sops() {
        let text = format!("# c\n  {}\n", key_line(ID1));
        let err = parse_err(&text);
        assert!(
            matches!(err, KeyError::AgeIdentity { line: 2, .. }),
            "{err:?}"
        );
        let text = format!("{} \n", key_line(ID1));
        let err = parse_err(&text);
        assert!(
            matches!(err, KeyError::AgeIdentity { line: 1, .. }),
            "{err:?}"
        );
        // A whitespace-only line is not empty for sops either.
        assert!(parse_identities("  \n").is_err());
    }

    #[test]
    fn errors_name_the_line_not_the_key() {
        let key = key_line(ID1);
        let last = if key.ends_with('Q') { 'P' } else { 'Q' };
        let broken = format!("{}{last}", &key[..key.len() - 1]);
        let text = format!("# one\n# two\n{broken}\n");
        let err = parse_err(&text);
        assert!(
            matches!(err, KeyError::AgeIdentity { line: 3, .. }),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(msg.contains("line 3"), "{msg}");
        assert!(!msg.contains(&broken[16..30]), "{msg}");
        assert!(!format!("{err:?}").contains(&broken[16..30]));
    }

    #[test]
    fn unsupported_identity_kinds_are_named() {
        let cases = [
            ("AGE-PLUGIN-YUBIKEY-1QQQQQQ", "plugin"),
            ("AGE-SECRET-KEY-PQ-1QQQQQQ", "post-quantum"),
            ("-----BEGIN OPENSSH PRIVATE KEY-----", "SSH"),
        ];
        for (line, kind) in cases {
            let err = parse_err(&format!("\n{line}\n"));
            let msg = err.to_string();
            assert!(matches!(
                err,
                KeyError::AgeUnsupportedIdentity { line: 2, .. }
            ));
            assert!(msg.contains(kind) && msg.contains("line 2"), "{msg}");
        }
        let err = parse_err("age1qqqq\n");
        assert!(err.to_string().contains("unknown identity type"), "{err}");
    }

    #[test]
    fn decrypts_with_one_or_several_identities() {
        let ids = parse_identities(ID1).unwrap();
        assert_eq!(decrypt(&ids, MSG1).unwrap().as_slice(), b"age-secret-data");
        let ids = parse_identities(&format!("{ID2}{ID1}{ID3}")).unwrap();
        assert_eq!(decrypt(&ids, MSG1).unwrap().as_slice(), b"age-secret-data");
        assert_eq!(decrypt(&ids, MSG3).unwrap().as_slice(), b"age-three-data");
    }

    #[test]
    fn armor_whitespace_variants() {
        let ids = parse_identities(ID1).unwrap();
        let trimmed = MSG1.trim_end();
        assert_eq!(
            decrypt(&ids, trimmed).unwrap().as_slice(),
            b"age-secret-data"
        );
        let leading = format!("\n{MSG1}");
        assert_eq!(
            decrypt(&ids, &leading).unwrap().as_slice(),
            b"age-secret-data"
        );
        let spaced = format!(" \t\n\r\n{MSG1}\n  \n");
        assert_eq!(
            decrypt(&ids, &spaced).unwrap().as_slice(),
            b"age-secret-data"
        );
        let crlf = MSG1.replace('\n', "\r\n");
        assert_eq!(decrypt(&ids, &crlf).unwrap().as_slice(), b"age-secret-data");
        // Indented header line, or too much padding: refused as by sops.
        assert!(matches!(
            decrypt(&ids, &format!(" {MSG1}")),
            Err(KeyError::AgeEnc(_))
        ));
        let padded = format!("{}{MSG1}", "\n".repeat(1100));
        assert!(matches!(decrypt(&ids, &padded), Err(KeyError::AgeEnc(_))));
        let padded = format!("{MSG1}{}", " ".repeat(1100));
        assert!(matches!(decrypt(&ids, &padded), Err(KeyError::AgeEnc(_))));
    }

    #[test]
    fn wrong_identity_is_no_matching_key() {
        let ids = parse_identities(ID2).unwrap();
        assert!(matches!(decrypt(&ids, MSG1), Err(KeyError::NoMatchingKey)));
        assert!(matches!(decrypt(&[], MSG1), Err(KeyError::NoMatchingKey)));
    }

    #[test]
    fn corrupted_armor_is_an_error() {
        let ids = parse_identities(ID1).unwrap();
        let flip = |line: usize| {
            let mut lines: Vec<String> = MSG1.lines().map(String::from).collect();
            let c = if lines[line].starts_with('A') {
                "B"
            } else {
                "A"
            };
            lines[line].replace_range(0..1, c);
            lines.join("\n")
        };
        // A flipped character in the header's MAC line, then in the payload (last line).
        let last_body = MSG1.lines().count() - 2;
        for line in [4, last_body] {
            let err = decrypt(&ids, &flip(line)).unwrap_err();
            assert!(matches!(err, KeyError::AgeEnc(_)), "line {line}: {err:?}");
        }
        // Truncated: no footer.
        let truncated: String = MSG1.lines().take(3).collect::<Vec<_>>().join("\n");
        assert!(matches!(
            decrypt(&ids, &truncated),
            Err(KeyError::AgeEnc(_))
        ));
        // Not armored at all.
        assert!(matches!(
            decrypt(&ids, "age-encryption.org/v1\n"),
            Err(KeyError::AgeEnc(_))
        ));
        assert!(matches!(decrypt(&ids, ""), Err(KeyError::AgeEnc(_))));
        // Garbage between the armor lines.
        let garbage = format!("{ARMOR_BEGIN}\n!!!!\n-----END AGE ENCRYPTED FILE-----\n");
        assert!(matches!(decrypt(&ids, &garbage), Err(KeyError::AgeEnc(_))));
    }
}
