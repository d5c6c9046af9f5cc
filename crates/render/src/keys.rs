//! The SOPS keys of a Kustomization: the `*.agekey` and `*.asc` entries of its
//! `spec.decryption.secretRef` Secret, or of the controller's `--sops-age-secret` when it
//! names none; and the key services with their credentials: the Secret's `sops.aws-kms`,
//! `sops.vault-token`, `sops.gcp-kms` and `sops.azure-kv` entries, the decryption
//! ServiceAccount (`spec.decryption.serviceAccountName`, else
//! `--default-decryption-service-account`), else the controller's environment. Key material
//! and credentials stay in memory.

use std::sync::{Arc, OnceLock};

use k8s_openapi::api::core::v1::Secret;
use zeroize::Zeroizing;

use crate::cluster::{ClusterReader, ObjectReader, not_found};
use api::Kustomization;
use api::kustomization::DecryptionProvider;
use keyservice::token_cache::TokenCache;
use keyservice::vault::VaultConfigMap;
use keyservice::{
    Credentials, Environment, HttpClient, JwtSvidSource, KeyServices, ObjectReference,
    ServiceAccountTokens, SpiffeObject,
};
use sops::{KeyError, Keyring};

/// The Secret entry holding a Vault/OpenBao token.
const VAULT_TOKEN_ENTRY: &str = "sops.vault-token";
/// The Secret entry holding static AWS credentials (YAML).
const AWS_KMS_ENTRY: &str = "sops.aws-kms";
/// The Secret entry holding Azure AD credentials (JSON or YAML).
const AZURE_KV_ENTRY: &str = "sops.azure-kv";
/// The Secret entry holding GCP credentials (JSON).
const GCP_KMS_ENTRY: &str = "sops.gcp-kms";

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

/// The controller's decryption settings.
#[derive(Clone, Default)]
pub struct DecryptionSettings {
    /// `--sops-age-secret`, in the controller's namespace.
    pub global_age_secret: Option<GlobalAgeSecret>,
    /// `--default-decryption-service-account`: the ServiceAccount (in the Kustomization's
    /// namespace) whose identity decrypts when the Kustomization names none.
    pub default_service_account: Option<String>,
    /// `--sops-vault-configmap`, in the controller's namespace: Vault login paths by
    /// address, and the allowlist of Vault servers a ServiceAccount token is sent to.
    pub vault_config_map: Option<(String, String)>,
    /// The process-wide token cache (`--token-cache-max-size`), when on.
    pub token_cache: Option<Arc<TokenCache>>,
    /// The SPIFFE Broker (`--spiffe-broker-endpoint`) issuing the Kustomization's JWT-SVIDs
    /// to a ServiceAccount of the `spiffe` credential provider.
    pub spiffe_broker: Option<Arc<dyn JwtSvidSource>>,
}

impl std::fmt::Debug for DecryptionSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecryptionSettings")
            .field("global_age_secret", &self.global_age_secret)
            .field("default_service_account", &self.default_service_account)
            .field("vault_config_map", &self.vault_config_map)
            .field("token_cache", &self.token_cache.is_some())
            .field("spiffe_broker", &self.spiffe_broker.is_some())
            .finish()
    }
}

/// Why the keys could not be loaded; in Flux's words, naming the Secret and entry.
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    /// The Secret does not exist: the reader's sentence for it (see
    /// [`crate::cluster::not_found`]).
    #[error("{0}")]
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
    /// A key service credentials entry is malformed.
    #[error("failed to import '{entry}' data from sops decryption Secret '{secret}': {source}")]
    Credentials {
        /// The Secret entry.
        entry: String,
        /// `namespace/name`.
        secret: String,
        /// Why (never the credential).
        source: keyservice::CredentialsError,
    },
    /// The decryption ServiceAccount cannot be used.
    #[error(transparent)]
    Identity(#[from] keyservice::identity::IdentityError),
    /// The HTTPS client of the key services cannot be set up.
    #[error("cannot set up the key service client: {0}")]
    Client(#[source] rustls::Error),
}

/// The keys as the controller reads them: with its own client (not impersonating, as Flux)
/// and its decryption settings.
pub struct ClusterKeys<'a> {
    /// The cluster, as the controller's client reads it.
    pub reader: Arc<dyn ClusterReader>,
    /// `--sops-age-secret`, `--default-decryption-service-account`, ...
    pub settings: &'a DecryptionSettings,
}

impl super::KeySource for ClusterKeys<'_> {
    async fn keys(self, ks: &Kustomization) -> Result<Option<Keyring>, KeysError> {
        load(self.reader, ks, self.settings).await
    }
}

/// The keyring for `ks`, or `None` when it does not ask for SOPS decryption. Must be
/// called on the tokio runtime; the keyring's key services run their calls on it.
pub async fn load(
    reader: Arc<dyn ClusterReader>,
    ks: &Kustomization,
    settings: &DecryptionSettings,
) -> Result<Option<Keyring>, KeysError> {
    let Some(decryption) = &ks.spec.decryption else {
        return Ok(None);
    };
    // `sops` is the only provider the API admits.
    let DecryptionProvider::Sops = decryption.provider;
    let mut keys = Keyring::new();
    let mut credentials = Credentials::default();
    let namespace = ks.metadata.namespace.as_deref().unwrap_or("default");
    match (&decryption.secret_ref, &settings.global_age_secret) {
        (Some(reference), _) => {
            let secret = read(&*reader, namespace, &reference.name).await?;
            let id = format!("{namespace}/{}", reference.name);
            import(&mut keys, &secret, &id, true)?;
            import_credentials(&mut credentials, &secret, &id)?;
        }
        (None, Some(global)) => {
            let secret = read(&*reader, &global.namespace, &global.name).await?;
            let id = format!("{}/{}", global.namespace, global.name);
            import(&mut keys, &secret, &id, false)?;
        }
        (None, None) => {}
    }
    let account = decryption
        .service_account_name
        .as_deref()
        .filter(|n| !n.is_empty())
        .or(settings.default_service_account.as_deref());
    if let Some(account) = account {
        let mut tokens = ServiceAccountTokens::load(reader.clone(), namespace, account)
            .await?
            .with_spiffe(SpiffeObject {
                broker: settings.spiffe_broker.clone(),
                object: ObjectReference {
                    group: api::names::GROUP.to_owned(),
                    kind: "Kustomization".to_owned(),
                    plural: api::names::PLURAL.to_owned(),
                    namespace: namespace.to_owned(),
                    name: ks.metadata.name.clone().unwrap_or_default(),
                    uid: ks.metadata.uid.clone().unwrap_or_default(),
                },
            });
        if let Some(cache) = &settings.token_cache {
            let name = ks.metadata.name.as_deref().unwrap_or_default();
            tokens = tokens.with_cache(cache.clone(), name);
        }
        credentials.identity = Some(Arc::new(tokens));
        if let Some((cm_namespace, cm_name)) = &settings.vault_config_map {
            credentials.vault_config_map = Some(VaultConfigMap::new(reader, cm_namespace, cm_name));
        }
    }
    let http = shared_http().clone().map_err(KeysError::Client)?;
    keys.set_key_services(Arc::new(KeyServices::new(
        tokio::runtime::Handle::current(),
        http,
        credentials,
        process_environment().clone(),
    )));
    Ok(Some(keys))
}

/// One HTTP client for every decryption: its connection pool outlives a reconcile.
fn shared_http() -> &'static Result<HttpClient, rustls::Error> {
    static HTTP: OnceLock<Result<HttpClient, rustls::Error>> = OnceLock::new();
    HTTP.get_or_init(HttpClient::new)
}

fn process_environment() -> &'static Environment {
    static ENVIRONMENT: OnceLock<Environment> = OnceLock::new();
    ENVIRONMENT.get_or_init(Environment::from_process)
}

/// The key service credentials among a Kustomization's own Secret entries.
fn import_credentials(
    credentials: &mut Credentials,
    secret: &Secret,
    id: &str,
) -> Result<(), KeysError> {
    let Some(data) = &secret.data else {
        return Ok(());
    };
    let error = |entry: &str, source: keyservice::CredentialsError| KeysError::Credentials {
        entry: entry.to_owned(),
        secret: id.to_owned(),
        source,
    };
    if let Some(value) = data.get(VAULT_TOKEN_ENTRY) {
        let token = String::from_utf8_lossy(&value.0);
        let token = token.trim();
        if !token.is_empty() {
            credentials.vault_token = Some(Zeroizing::new(token.to_owned()));
        }
    }
    if let Some(value) = data.get(AWS_KMS_ENTRY) {
        credentials.aws = Some(
            keyservice::aws::parse_static_credentials(&value.0)
                .map_err(|e| error(AWS_KMS_ENTRY, e.into()))?,
        );
    }
    if let Some(value) = data.get(AZURE_KV_ENTRY) {
        credentials.azure = Some(
            keyservice::azure::parse_credentials(&value.0)
                .map_err(|e| error(AZURE_KV_ENTRY, e.into()))?,
        );
    }
    if let Some(value) = data.get(GCP_KMS_ENTRY) {
        credentials.gcp = Some(
            keyservice::gcp::parse_credentials(&value.0)
                .map_err(|e| error(GCP_KMS_ENTRY, e.into()))?,
        );
    }
    Ok(())
}

async fn read(reader: &dyn ObjectReader, namespace: &str, name: &str) -> Result<Secret, KeysError> {
    reader
        .secret(namespace, name)
        .await
        .map_err(|e| KeysError::Get {
            secret: format!("{namespace}/{name}"),
            message: e.to_string(),
        })?
        .ok_or_else(|| KeysError::NotFound(not_found(reader, namespace, "Secret", name)))
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
        let public = include_str!("../../sops/src/keys/testdata/ecc.pub.asc");
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

    /// The cluster with one Secret, `apps/sops-keys`; nothing else exists.
    struct OneSecret(Secret);

    impl ObjectReader for OneSecret {
        fn secret<'a>(
            &'a self,
            namespace: &'a str,
            name: &'a str,
        ) -> crate::cluster::SourceFuture<'a, Option<Secret>> {
            let found = (namespace, name) == ("apps", "sops-keys");
            Box::pin(async move { Ok(found.then(|| self.0.clone())) })
        }

        fn config_map<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
        ) -> crate::cluster::SourceFuture<'a, Option<k8s_openapi::api::core::v1::ConfigMap>>
        {
            Box::pin(async { Ok(None) })
        }
    }

    impl keyservice::ServiceAccountTokenSource for OneSecret {
        fn annotations<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
        ) -> crate::cluster::SourceFuture<'a, std::collections::BTreeMap<String, String>> {
            Box::pin(async { Err(crate::cluster::SourceError::new("no ServiceAccount")) })
        }

        fn token<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
            _: Vec<String>,
            _: std::time::Duration,
        ) -> crate::cluster::SourceFuture<'a, Zeroizing<String>> {
            Box::pin(async { Err(crate::cluster::SourceError::new("no ServiceAccount")) })
        }
    }

    impl keyservice::ConfigMapSource for OneSecret {
        fn data<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
        ) -> crate::cluster::SourceFuture<'a, std::collections::BTreeMap<String, String>> {
            Box::pin(async { Err(crate::cluster::SourceError::new("no ConfigMap")) })
        }
    }

    fn decrypting_with(secret_name: &str) -> Kustomization {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "app", "namespace": "apps"},
            "spec": {
                "interval": "10m", "prune": true,
                "sourceRef": {"kind": "GitRepository", "name": "repo"},
                "decryption": {"provider": "sops", "secretRef": {"name": secret_name}},
            },
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn the_decryption_secret_is_read_through_the_injected_reader() {
        let age = include_str!("../../../tests/fixtures/sops-comment-regex/test.agekey");
        let reader = Arc::new(OneSecret(secret(&[("identity.agekey", age)])));
        let settings = DecryptionSettings::default();
        let keys = load(reader.clone(), &decrypting_with("sops-keys"), &settings)
            .await
            .unwrap()
            .expect("a keyring");
        assert!(!keys.is_empty());
        let err = load(reader, &decrypting_with("absent"), &settings)
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "secrets \"absent\" not found");
    }
}
