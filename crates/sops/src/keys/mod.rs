//! The keys that unwrap a sops data key: age identities and OpenPGP secret keys, held in
//! memory (Flux imports them from the decryption Secret's `*.agekey` and `*.asc` entries).
//!
//! Each `enc` in a sops file's metadata wraps the data key (or, with Shamir key groups, the
//! group's part of it) for one recipient; [`Keyring`] unwraps it with an imported key.

mod age;
mod pgp;

use std::fmt;
use std::sync::Arc;

use ::pgp::composed::SignedSecretKey;
use zeroize::Zeroizing;

use crate::service::{KeyService, ServiceError, ServiceKey};

/// The most plaintext an `enc` may unwrap to. A data key is 32 bytes (a Shamir part 33);
/// the bound keeps a compressed PGP message from expanding without limit.
const MAX_PLAINTEXT: usize = 64 * 1024;

/// Why a key could not be imported or a data key not unwrapped. Messages name the line,
/// fingerprint or stage at fault, never key material or plaintext.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// An age identity file that is not UTF-8 text.
    #[error("age identities are not UTF-8 text")]
    NotUtf8,
    /// A malformed age identity line.
    #[error("age identity on line {line}: {reason}")]
    AgeIdentity {
        /// 1-based line number in the identity text.
        line: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An age identity of a kind this implementation does not handle.
    #[error(
        "age identity on line {line}: {kind} identities are not supported, only X25519 ones (AGE-SECRET-KEY-1...)"
    )]
    AgeUnsupportedIdentity {
        /// 1-based line number in the identity text.
        line: usize,
        /// The kind of identity found.
        kind: &'static str,
    },
    /// An `enc` value that is not a readable armored age file.
    #[error("age-encrypted data key: {0}")]
    AgeEnc(String),
    /// OpenPGP key data that could not be read.
    #[error("OpenPGP key data: {0}")]
    PgpKeyData(&'static str),
    /// An OpenPGP secret key locked with a passphrase.
    #[error(
        "OpenPGP secret key {fingerprint} is protected by a passphrase, which is not supported: export it without one"
    )]
    PgpProtected {
        /// The key's (public) fingerprint.
        fingerprint: String,
    },
    /// An `enc` value that is not a readable, intact PGP message.
    #[error("PGP-encrypted data key: {0}")]
    PgpEnc(&'static str),
    /// None of the imported keys is a recipient of the `enc` value.
    #[error("no imported key can decrypt the data key")]
    NoMatchingKey,
    /// The `enc` value unwraps to more than any data key could be.
    #[error("the encrypted data key unwraps to more than {0} bytes")]
    TooLarge(usize),
    /// Identity text with no identity in it (empty, or only comments and blank lines).
    #[error(
        "no age identity found (AGE-SECRET-KEY-1...): the text is empty or holds only comments"
    )]
    NoAgeIdentity,
    /// OpenPGP data with no secret key in it (e.g. only a public key block).
    #[error(
        "no OpenPGP secret key found: the data holds only public keys (export it with gpg --export-secret-keys --armor)"
    )]
    NoPgpSecretKey,
    /// A key service did not open the data key (its message names the service and key).
    #[error(transparent)]
    Service(#[from] ServiceError),
    /// Key data larger than any key file is.
    #[error("key data of {size} bytes exceeds the limit of {limit} bytes")]
    KeyDataTooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
}

/// The most key data one import reads: far more than any identity file or armored key
/// ring holds, and a bound on the work a hostile Secret entry can cause.
pub const MAX_KEY_DATA: usize = 1 << 20;

fn check_size(size: usize) -> Result<(), KeyError> {
    if size > MAX_KEY_DATA {
        return Err(KeyError::KeyDataTooLarge {
            size,
            limit: MAX_KEY_DATA,
        });
    }
    Ok(())
}

/// Age identities and OpenPGP secret keys, in memory, and the key services to ask for keys
/// held elsewhere. Secret material is wiped on drop by the crates that hold it; `Debug`
/// shows only counts.
#[derive(Default)]
pub struct Keyring {
    age: Vec<::age::x25519::Identity>,
    pgp: Vec<SignedSecretKey>,
    services: Option<Arc<dyn KeyService>>,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring")
            .field("age_identities", &self.age.len())
            .field("pgp_keys", &self.pgp.len())
            .field("key_services", &self.services.is_some())
            .finish()
    }
}

impl Keyring {
    /// An empty keyring.
    pub fn new() -> Self {
        Self::default()
    }

    /// Imports age identities from an identity file's text (as `age-keygen` writes it /
    /// Flux's `*.agekey` Secret entries): one `AGE-SECRET-KEY-1...` per line, `#` comments
    /// and blank lines allowed. Returns how many were added. Errors name the line number,
    /// never the key; on error nothing is added. Text holding no identity at all (empty,
    /// or only comments) is refused, as is text over [`MAX_KEY_DATA`].
    pub fn import_age(&mut self, text: &str) -> Result<usize, KeyError> {
        check_size(text.len())?;
        let ids = age::parse_identities(text)?;
        if ids.is_empty() {
            return Err(KeyError::NoAgeIdentity);
        }
        let added = ids.len();
        self.age.extend(ids);
        Ok(added)
    }

    /// Imports ASCII-armored OpenPGP secret keys (as `gpg --export-secret-keys --armor`
    /// writes them; one or more keys; RSA and ECC incl. ed25519 + cv25519 subkeys).
    /// Passphrase-protected keys give a clear error, and so does data holding no secret key
    /// (only a public key block) or over [`MAX_KEY_DATA`]. Returns how many keys were
    /// added; on error nothing is added.
    pub fn import_pgp(&mut self, armored: &[u8]) -> Result<usize, KeyError> {
        check_size(armored.len())?;
        let keys = pgp::parse_secret_keys(armored)?;
        if keys.is_empty() {
            return Err(KeyError::NoPgpSecretKey);
        }
        let added = keys.len();
        self.pgp.extend(keys);
        Ok(added)
    }

    /// How many age identities are held.
    pub fn age_count(&self) -> usize {
        self.age.len()
    }

    /// How many OpenPGP secret keys are held.
    pub fn pgp_count(&self) -> usize {
        self.pgp.len()
    }

    /// Whether no key at all is held and no key service can be asked.
    pub fn is_empty(&self) -> bool {
        self.age.is_empty() && self.pgp.is_empty() && self.services.is_none()
    }

    /// Asks `services` for the keys that key services hold (cloud KMS, Vault), after the
    /// group's age and OpenPGP keys, as sops does.
    pub fn set_key_services(&mut self, services: Arc<dyn KeyService>) {
        self.services = Some(services);
    }

    /// Whether key services can be asked.
    pub fn has_key_services(&self) -> bool {
        self.services.is_some()
    }

    /// Opens the data key (or Shamir part) that `enc` holds through `key`'s service.
    /// `Err(KeyError::NoMatchingKey)` when no key services are set.
    pub fn decrypt_service(
        &self,
        key: &ServiceKey,
        enc: &str,
    ) -> Result<Zeroizing<Vec<u8>>, KeyError> {
        let services = self.services.as_ref().ok_or(KeyError::NoMatchingKey)?;
        let part = services.decrypt(key, enc)?;
        if part.len() > MAX_PLAINTEXT {
            return Err(KeyError::TooLarge(MAX_PLAINTEXT));
        }
        Ok(part)
    }

    /// Unwraps a data key (or Shamir part) from the `enc` of an `age` metadata entry: an
    /// armored age file (`-----BEGIN AGE ENCRYPTED FILE-----`).
    /// `Err(KeyError::NoMatchingKey)` when no imported identity is a recipient.
    pub fn decrypt_age(&self, enc: &str) -> Result<Zeroizing<Vec<u8>>, KeyError> {
        age::decrypt(&self.age, enc)
    }

    /// Unwraps from the `enc` of a `pgp` metadata entry: an armored PGP MESSAGE, with
    /// whichever imported secret key (primary or subkey) it is encrypted to (the fingerprint
    /// in the metadata is informational; sops/gpg pick the key from the message).
    /// `Err(KeyError::NoMatchingKey)` when none.
    pub fn decrypt_pgp(&self, enc: &str) -> Result<Zeroizing<Vec<u8>>, KeyError> {
        pgp::decrypt(&self.pgp, enc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shamir;
    use aes_gcm::aead::{Aead, KeyInit, Payload, consts::U32};
    use aes_gcm::{AesGcm, aes::Aes256};
    use base64::Engine;
    use serde::Deserialize;

    const ID1: &str = include_str!("testdata/id1.txt");
    const ID2: &str = include_str!("testdata/id2.txt");
    const RSA: &str = include_str!("testdata/rsa.sec.asc");
    const ECC: &str = include_str!("testdata/ecc.sec.asc");
    const PROTECTED: &str = include_str!("testdata/protected.sec.asc");
    // `sops encrypt --age <id1> --pgp <rsa>,<ecc>` of the same YAML, with the pgp `enc`s
    // written by gpg (no pubring.gpg) and by Go's openpgp (pubring.gpg present).
    const SOPS_GNUPG: &str = include_str!("testdata/sops_gnupg.yaml");
    const SOPS_OPENPGP: &str = include_str!("testdata/sops_openpgp.yaml");
    // Three key groups (age id1 | pgp ecc | age id2), shamir_threshold 2.
    const SOPS_SHAMIR: &str = include_str!("testdata/sops_shamir.yaml");

    #[derive(Deserialize)]
    struct SopsFile {
        password: String,
        sops: Meta,
    }
    #[derive(Deserialize)]
    struct Meta {
        #[serde(default)]
        age: Vec<Entry>,
        #[serde(default)]
        pgp: Vec<Entry>,
        #[serde(default)]
        key_groups: Vec<Group>,
    }
    #[derive(Deserialize)]
    struct Group {
        #[serde(default)]
        age: Vec<Entry>,
        #[serde(default)]
        pgp: Vec<Entry>,
    }
    #[derive(Deserialize)]
    struct Entry {
        enc: String,
    }

    fn parse(text: &str) -> SopsFile {
        serde_saphyr::from_str(text).unwrap()
    }

    fn full_keyring() -> Keyring {
        let mut ring = Keyring::new();
        assert_eq!(ring.import_age(ID1).unwrap(), 1);
        assert_eq!(ring.import_age(ID2).unwrap(), 1);
        assert_eq!(ring.import_pgp(RSA.as_bytes()).unwrap(), 1);
        assert_eq!(ring.import_pgp(ECC.as_bytes()).unwrap(), 1);
        ring
    }

    /// Decrypts the top-level `password` value (`ENC[AES256_GCM,...]`, additional data
    /// `password:`) with `key`, independently of the cipher module, to prove the key is the
    /// file's data key.
    fn open_password(value: &str, key: &[u8]) -> Vec<u8> {
        let inner = value
            .strip_prefix("ENC[")
            .unwrap()
            .strip_suffix(']')
            .unwrap();
        let field = |name: &str| {
            let raw = inner
                .split(',')
                .find_map(|f| f.strip_prefix(&format!("{name}:")))
                .unwrap();
            base64::engine::general_purpose::STANDARD
                .decode(raw)
                .unwrap()
        };
        let mut ciphertext = field("data");
        ciphertext.extend(field("tag"));
        let cipher = AesGcm::<Aes256, U32>::new_from_slice(key).unwrap();
        let iv = field("iv");
        let nonce = aes_gcm::Nonce::<U32>::from_slice(&iv);
        let payload = Payload {
            msg: &ciphertext,
            aad: b"password:",
        };
        cipher.decrypt(nonce, payload).unwrap()
    }

    #[test]
    fn counts_and_debug_hide_material() {
        let ring = full_keyring();
        assert_eq!((ring.age_count(), ring.pgp_count()), (2, 2));
        assert!(!ring.is_empty());
        assert!(Keyring::new().is_empty());
        let debug = format!("{ring:?}");
        assert_eq!(
            debug,
            "Keyring { age_identities: 2, pgp_keys: 2, key_services: false }"
        );
        let secret = ID1.lines().find(|l| l.starts_with("AGE-")).unwrap();
        assert!(!debug.contains(&secret[16..]));
    }

    #[test]
    fn failed_import_adds_nothing() {
        let mut ring = Keyring::new();
        let text = format!("{ID1}\nnot-a-key\n");
        let err = ring.import_age(&text).unwrap_err();
        assert!(err.to_string().contains("line 5"), "{err}");
        assert_eq!(ring.age_count(), 0);
        let both = format!("{RSA}{PROTECTED}");
        assert!(matches!(
            ring.import_pgp(both.as_bytes()),
            Err(KeyError::PgpProtected { .. })
        ));
        assert_eq!(ring.pgp_count(), 0);
    }

    #[test]
    fn key_data_without_a_usable_key_is_refused() {
        let mut ring = Keyring::new();
        for text in ["", "\n\n", "# created: 2024-01-01\n# public key: age1xyz\n"] {
            assert!(
                matches!(ring.import_age(text), Err(KeyError::NoAgeIdentity)),
                "{text:?}"
            );
        }
        let public = include_str!("testdata/ecc.pub.asc");
        assert!(matches!(
            ring.import_pgp(public.as_bytes()),
            Err(KeyError::NoPgpSecretKey)
        ));
        assert!(ring.is_empty());
        let huge = "#".repeat(MAX_KEY_DATA + 1);
        assert!(matches!(
            ring.import_age(&huge),
            Err(KeyError::KeyDataTooLarge { .. })
        ));
        assert!(matches!(
            ring.import_pgp(huge.as_bytes()),
            Err(KeyError::KeyDataTooLarge { .. })
        ));
        // A public block next to a secret one is fine: the secret key is imported.
        let both = format!("{public}{ECC}");
        assert_eq!(ring.import_pgp(both.as_bytes()).unwrap(), 1);
    }

    #[test]
    fn sops_written_enc_values_unwrap_to_the_same_data_key() {
        let ring = full_keyring();
        for (name, text) in [("gnupg", SOPS_GNUPG), ("openpgp", SOPS_OPENPGP)] {
            let file = parse(text);
            assert_eq!((file.sops.age.len(), file.sops.pgp.len()), (1, 2), "{name}");
            let from_age = ring.decrypt_age(&file.sops.age[0].enc).unwrap();
            assert_eq!(from_age.len(), 32, "{name}");
            for entry in &file.sops.pgp {
                assert_eq!(ring.decrypt_pgp(&entry.enc).unwrap(), from_age, "{name}");
            }
            assert_eq!(
                open_password(&file.password, &from_age),
                b"hunter2",
                "{name}"
            );
        }
    }

    #[test]
    fn sops_enc_values_with_only_some_keys() {
        let file = parse(SOPS_GNUPG);
        let mut ring = Keyring::new();
        ring.import_pgp(ECC.as_bytes()).unwrap();
        assert!(matches!(
            ring.decrypt_age(&file.sops.age[0].enc),
            Err(KeyError::NoMatchingKey)
        ));
        assert!(matches!(
            ring.decrypt_pgp(&file.sops.pgp[0].enc),
            Err(KeyError::NoMatchingKey)
        ));
        let key = ring.decrypt_pgp(&file.sops.pgp[1].enc).unwrap();
        assert_eq!(open_password(&file.password, &key), b"hunter2");
    }

    #[test]
    fn sops_shamir_groups_combine_to_the_data_key() {
        let file = parse(SOPS_SHAMIR);
        let groups = &file.sops.key_groups;
        assert_eq!(groups.len(), 3);
        let ring = full_keyring();
        let parts = [
            ring.decrypt_age(&groups[0].age[0].enc).unwrap(),
            ring.decrypt_pgp(&groups[1].pgp[0].enc).unwrap(),
            ring.decrypt_age(&groups[2].age[0].enc).unwrap(),
        ];
        assert!(parts.iter().all(|p| p.len() == 33));
        let all = shamir::combine(&parts).unwrap();
        assert_eq!(all.len(), 32);
        assert_eq!(open_password(&file.password, &all), b"hunter2");
        for pair in [[0, 1], [0, 2], [1, 2]] {
            let chosen: Vec<_> = pair.iter().map(|&i| parts[i].clone()).collect();
            assert_eq!(shamir::combine(&chosen).unwrap(), all, "groups {pair:?}");
        }
        assert!(shamir::combine(&parts[..1]).is_err());
    }
}
