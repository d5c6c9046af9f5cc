//! The SOPS keys of a Kustomization: the `*.agekey` and `*.asc` entries of its
//! `spec.decryption.secretRef` Secret, or of the controller's `--sops-age-secret` when it
//! names none. Key material stays in memory, in the keyring.

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};

use crate::api::Kustomization;
use crate::api::kustomization::DecryptionProvider;
use sops::{KeyError, Keyring};

/// Secret entries holding OpenPGP secret keys.
const PGP_EXTENSION: &str = ".asc";
/// Secret entries holding age identities.
const AGE_EXTENSION: &str = ".agekey";

/// The controller-wide age Secret (`--sops-age-secret`, in the controller's namespace).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlobalAgeSecret {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// Why the keys could not be loaded; in Flux's words, naming the Secret and entry.
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    /// The Secret does not exist.
    #[error("secrets \"{0}\" not found")]
    NotFound(String),
    /// The Secret could not be read.
    #[error("cannot get sops decryption Secret '{secret}': {message}")]
    Get {
        /// `namespace/name`.
        secret: String,
        /// The API error.
        message: String,
    },
    /// An entry does not hold valid keys.
    #[error("failed to import '{entry}' data from sops decryption Secret '{secret}': {source}")]
    Import {
        /// The Secret entry.
        entry: String,
        /// `namespace/name`.
        secret: String,
        /// Why (never the key).
        source: KeyError,
    },
}

/// The keyring for `ks`, or `None` when it does not ask for SOPS decryption.
pub async fn load(
    client: &Client,
    ks: &Kustomization,
    global: Option<&GlobalAgeSecret>,
) -> Result<Option<Keyring>, KeysError> {
    let Some(decryption) = &ks.spec.decryption else {
        return Ok(None);
    };
    // `sops` is the only provider the API admits.
    let DecryptionProvider::Sops = decryption.provider;
    let mut keys = Keyring::new();
    let namespace = ks.metadata.namespace.as_deref().unwrap_or("default");
    match (&decryption.secret_ref, global) {
        (Some(reference), _) => {
            let secret = read(client, namespace, &reference.name).await?;
            import(
                &mut keys,
                &secret,
                &format!("{namespace}/{}", reference.name),
                true,
            )?;
        }
        (None, Some(global)) => {
            let secret = read(client, &global.namespace, &global.name).await?;
            let id = format!("{}/{}", global.namespace, global.name);
            import(&mut keys, &secret, &id, false)?;
        }
        (None, None) => {}
    }
    Ok(Some(keys))
}

async fn read(client: &Client, namespace: &str, name: &str) -> Result<Secret, KeysError> {
    Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| KeysError::Get {
            secret: format!("{namespace}/{name}"),
            message: e.to_string(),
        })?
        .ok_or_else(|| KeysError::NotFound(name.to_owned()))
}

/// Imports the Secret's key entries; OpenPGP keys only from a Kustomization's own Secret.
///
/// An entry that holds no key is refused, naming the Secret and the entry (a comment-only
/// `.agekey`, an `.asc` holding only a public key), except an `.agekey` entry that is empty
/// or only whitespace: Flux imports that as no identities without complaint, so it is
/// skipped here too.
fn import(keys: &mut Keyring, secret: &Secret, id: &str, pgp: bool) -> Result<(), KeysError> {
    let Some(data) = &secret.data else {
        return Ok(());
    };
    for (entry, value) in data {
        let error = |source| KeysError::Import {
            entry: entry.clone(),
            secret: id.to_owned(),
            source,
        };
        if entry.ends_with(AGE_EXTENSION) {
            let text = std::str::from_utf8(&value.0).map_err(|_| error(KeyError::NotUtf8))?;
            if text.trim().is_empty() {
                continue;
            }
            keys.import_age(text).map_err(error)?;
        } else if pgp && entry.ends_with(PGP_EXTENSION) {
            keys.import_pgp(&value.0).map_err(error)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(entries: &[(&str, &str)]) -> Secret {
        Secret {
            data: Some(
                entries
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Secret::default()
        }
    }

    #[test]
    fn entries_without_keys_are_refused_by_secret_and_entry() {
        let mut keys = Keyring::new();
        let err = import(
            &mut keys,
            &secret(&[("comments.agekey", "# public key: age1abc\n")]),
            "apps/sops-keys",
            true,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with(
                "failed to import 'comments.agekey' data from sops decryption Secret 'apps/sops-keys': no age identity"
            ),
            "{err}"
        );
        let public = include_str!("../../crates/sops/src/keys/testdata/ecc.pub.asc");
        let err = import(
            &mut keys,
            &secret(&[("team.asc", public)]),
            "apps/sops-keys",
            true,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("'team.asc'")
                && err.contains("'apps/sops-keys'")
                && err.contains("no OpenPGP secret key"),
            "{err}"
        );
    }

    #[test]
    fn an_empty_age_entry_is_skipped_as_flux_does() {
        let mut keys = Keyring::new();
        import(
            &mut keys,
            &secret(&[("empty.agekey", ""), ("blank.agekey", " \n")]),
            "apps/sops-keys",
            true,
        )
        .unwrap();
        assert!(keys.is_empty());
    }
}
