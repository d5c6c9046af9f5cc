//! Recovering the data key: each key group's first master key that opens (age, then
//! OpenPGP, then key services in file order, as sops orders them), combined with Shamir when
//! there are several groups.

use zeroize::Zeroizing;

use super::keys::{KeyError, Keyring};
use super::metadata::{MasterKey, Metadata, decryption_order};
use super::shamir::{self, ShamirError};

/// No data key: what the file offers, what was supplied, and what each group said.
#[derive(Debug, thiserror::Error)]
pub enum DataKeyError {
    /// Not enough key groups could be opened.
    #[error(
        "no supplied key can decrypt the data key: the file is encrypted for {offered}; supplied: {supplied}{detail}"
    )]
    NoKey {
        /// The master keys of the file, by type and public id.
        offered: String,
        /// What the keyring holds (counts only).
        supplied: String,
        /// Per-group failures worth reporting (e.g. a matching key that failed).
        detail: String,
    },
    /// The Shamir parts do not combine.
    #[error("could not combine the data key from its key groups: {0}")]
    Shamir(#[from] ShamirError),
    /// The recovered data key is not an AES-256 key.
    #[error("the recovered data key is {0} bytes, not 32")]
    Length(usize),
}

/// The file's data key, opened with `keys`.
pub fn recover(metadata: &Metadata, keys: &Keyring) -> Result<Zeroizing<Vec<u8>>, DataKeyError> {
    let mut parts = Vec::new();
    let mut failures = Vec::new();
    for (i, group) in metadata.key_groups.iter().enumerate() {
        match open_group(group, keys) {
            Ok(part) => parts.push(part),
            Err(reasons) => failures.extend(reasons.into_iter().map(|r| (i, r))),
        }
    }
    let groups = metadata.key_groups.len();
    let key = if groups > 1 {
        let needed = if metadata.shamir_threshold > 0 {
            metadata.shamir_threshold
        } else {
            groups
        };
        if parts.len() < needed {
            return Err(no_key(
                metadata,
                keys,
                &failures,
                Some((parts.len(), needed, groups)),
            ));
        }
        shamir::combine(&parts)?
    } else {
        parts
            .pop()
            .ok_or_else(|| no_key(metadata, keys, &failures, None))?
    };
    if key.len() != 32 {
        return Err(DataKeyError::Length(key.len()));
    }
    Ok(key)
}

/// The group's part from its first key that opens, or why each key did not.
fn open_group(group: &[MasterKey], keys: &Keyring) -> Result<Zeroizing<Vec<u8>>, Vec<String>> {
    let mut reasons = Vec::new();
    for key in decryption_order(group) {
        let opened = match key {
            MasterKey::Age { enc, .. } if keys.age_count() > 0 => keys.decrypt_age(enc),
            MasterKey::Pgp { enc, .. } if keys.pgp_count() > 0 => keys.decrypt_pgp(enc),
            MasterKey::Service { key, enc } if keys.has_key_services() => {
                keys.decrypt_service(key, enc)
            }
            _ => continue,
        };
        match opened {
            Ok(part) => return Ok(part),
            Err(KeyError::NoMatchingKey) => {}
            Err(e) => reasons.push(format!("{}: {e}", key.describe())),
        }
    }
    Err(reasons)
}

fn no_key(
    metadata: &Metadata,
    keys: &Keyring,
    failures: &[(usize, String)],
    shamir: Option<(usize, usize, usize)>,
) -> DataKeyError {
    let offered: Vec<String> = metadata.master_keys().map(MasterKey::describe).collect();
    let supplied = format!(
        "{} age identit{}, {} OpenPGP key{}{}",
        keys.age_count(),
        if keys.age_count() == 1 { "y" } else { "ies" },
        keys.pgp_count(),
        if keys.pgp_count() == 1 { "" } else { "s" },
        if keys.has_key_services() {
            ", key services"
        } else {
            ""
        },
    );
    let mut detail = String::new();
    if let Some((opened, needed, groups)) = shamir {
        detail.push_str(&format!(
            "; {opened} of {groups} key groups opened, {needed} needed"
        ));
    }
    for (group, reason) in failures {
        detail.push_str(&format!("; group {}: {reason}", group + 1));
    }
    DataKeyError::NoKey {
        offered: offered.join(", "),
        supplied,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::service::{KeyService, ServiceError, ServiceKey};

    const ID1: &str = include_str!("keys/testdata/id1.txt");
    const SOPS_GNUPG: &str = include_str!("keys/testdata/sops_gnupg.yaml");

    /// A key service that opens `enc == "good"` to `key` and refuses anything else.
    struct FakeKms {
        key: Vec<u8>,
        calls: AtomicUsize,
    }

    impl KeyService for FakeKms {
        fn decrypt(
            &self,
            _key: &ServiceKey,
            enc: &str,
        ) -> Result<Zeroizing<Vec<u8>>, ServiceError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            match enc {
                "good" => Ok(Zeroizing::new(self.key.clone())),
                _ => Err(ServiceError::Failed(
                    "AWS KMS: AccessDeniedException".into(),
                )),
            }
        }
    }

    fn age_enc() -> String {
        #[derive(serde::Deserialize)]
        struct File {
            sops: Meta,
        }
        #[derive(serde::Deserialize)]
        struct Meta {
            age: Vec<Entry>,
        }
        #[derive(serde::Deserialize)]
        struct Entry {
            enc: String,
        }
        let file: File = serde_saphyr::from_str(SOPS_GNUPG).unwrap();
        file.sops.age[0].enc.clone()
    }

    fn kms(enc: &str) -> MasterKey {
        MasterKey::Service {
            key: ServiceKey::AwsKms {
                arn: "arn:aws:kms:us-east-1:111122223333:key/k".into(),
                role: String::new(),
                context: Vec::new(),
                profile: String::new(),
            },
            enc: enc.into(),
        }
    }

    fn metadata(groups: Vec<Vec<MasterKey>>) -> Metadata {
        Metadata {
            key_groups: groups,
            shamir_threshold: 0,
            last_modified: "2024-01-01T00:00:00Z".into(),
            mac: String::new(),
            rule: crate::metadata::Rule::UnencryptedSuffix("_unencrypted".into()),
            mac_only_encrypted: false,
        }
    }

    fn keyring(age: bool, service: &Arc<FakeKms>) -> Keyring {
        let mut keys = Keyring::new();
        if age {
            keys.import_age(ID1).unwrap();
        }
        keys.set_key_services(service.clone());
        keys
    }

    #[test]
    fn age_is_tried_before_the_key_service() {
        let service = Arc::new(FakeKms {
            key: vec![7; 32],
            calls: AtomicUsize::new(0),
        });
        let age = MasterKey::Age {
            recipient: "age1...".into(),
            enc: age_enc(),
        };
        let md = metadata(vec![vec![kms("good"), age]]);
        let from_age = recover(&md, &keyring(true, &service)).unwrap();
        assert_ne!(from_age.as_slice(), [7; 32]);
        assert_eq!(service.calls.load(Ordering::SeqCst), 0);
        let from_kms = recover(&md, &keyring(false, &service)).unwrap();
        assert_eq!(from_kms.as_slice(), [7; 32]);
        assert_eq!(service.calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_refusal_is_reported_with_the_key_and_the_next_key_is_tried() {
        let service = Arc::new(FakeKms {
            key: vec![9; 32],
            calls: AtomicUsize::new(0),
        });
        let keys = keyring(false, &service);
        let opened = recover(&metadata(vec![vec![kms("bad"), kms("good")]]), &keys).unwrap();
        assert_eq!(opened.as_slice(), [9; 32]);
        let err = recover(&metadata(vec![vec![kms("bad")]]), &keys)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("supplied: 0 age identities, 0 OpenPGP keys, key services")
                && err.contains(
                    "group 1: kms arn:aws:kms:us-east-1:111122223333:key/k: AWS KMS: AccessDeniedException"
                ),
            "{err}"
        );
        // Without key services, a service key is skipped, as sops skips a key no key
        // service handles.
        let err = recover(&metadata(vec![vec![kms("good")]]), &Keyring::new())
            .unwrap_err()
            .to_string();
        assert!(
            err.ends_with("supplied: 0 age identities, 0 OpenPGP keys"),
            "{err}"
        );
    }
}
