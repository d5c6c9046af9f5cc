//! Object identity: a Kustomization's decryption ServiceAccount
//! (`spec.decryption.serviceAccountName`, else `--default-decryption-service-account`),
//! whose annotations say how to authenticate and whose tokens, issued by the TokenRequest
//! API for the audience each service expects, are exchanged for the service's credentials.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::PostParams;
use kube::{Api, Client};
use zeroize::Zeroizing;

use super::KeyServiceError;
use super::token_cache::{CachedToken, TokenCache};
use crate::metrics::InvolvedObject;

/// The annotation choosing how the credential is obtained (`kubernetes` or `spiffe`).
pub const PROVIDER_ANNOTATION: &str = "credential.auth.fluxcd.io/provider";
/// The annotation overriding the token's audiences (comma-separated).
pub const AUDIENCES_ANNOTATION: &str = "credential.auth.fluxcd.io/audiences";

/// How long an issued token is valid (the TokenRequest API's minimum is 10 minutes).
const TOKEN_SECONDS: i64 = 600;

/// The decryption ServiceAccount of one Kustomization.
pub struct ServiceAccountTokens {
    client: Client,
    namespace: String,
    name: String,
    annotations: BTreeMap<String, String>,
    cache: Option<(Arc<TokenCache>, String)>,
}

/// Why the ServiceAccount cannot serve as an identity.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The ServiceAccount could not be read.
    #[error("failed to get decryption service account '{namespace}/{name}': {reason}")]
    Get {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The API's answer.
        reason: String,
    },
    /// The credential provider annotation names one this controller does not implement.
    #[error(
        "decryption service account '{namespace}/{name}': credential provider '{provider}' (annotation {PROVIDER_ANNOTATION}) is not supported: use 'kubernetes'"
    )]
    UnsupportedProvider {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The annotation's value.
        provider: String,
    },
}

impl ServiceAccountTokens {
    /// Reads the ServiceAccount `namespace/name` and checks its credential provider.
    pub async fn load(client: Client, namespace: &str, name: &str) -> Result<Self, IdentityError> {
        let account = Api::<ServiceAccount>::namespaced(client.clone(), namespace)
            .get(name)
            .await
            .map_err(|e| IdentityError::Get {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                reason: match e {
                    kube::Error::Api(status) => status.message,
                    other => other.to_string(),
                },
            })?;
        let annotations = account.metadata.annotations.unwrap_or_default();
        match annotations.get(PROVIDER_ANNOTATION).map(String::as_str) {
            None | Some("") | Some("kubernetes") => {}
            Some(other) => {
                return Err(IdentityError::UnsupportedProvider {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                    provider: other.to_owned(),
                });
            }
        }
        Ok(ServiceAccountTokens {
            client,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            annotations,
            cache: None,
        })
    }

    /// Keeps the tokens issued (and the credentials exchanged for them) in `cache`, counted
    /// for the Kustomization `kustomization` (in the ServiceAccount's namespace).
    pub fn with_cache(mut self, cache: Arc<TokenCache>, kustomization: &str) -> Self {
        self.cache = Some((cache, kustomization.to_owned()));
        self
    }

    /// The credential under `key` (made unique to this ServiceAccount) from the token
    /// cache while it is fresh, else `fetch`'s, kept for its lifetime; without a cache,
    /// `fetch`'s.
    pub async fn cached<F, Fut, E>(
        &self,
        key: &str,
        operation: &'static str,
        fetch: F,
    ) -> Result<CachedToken, E>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<(CachedToken, Duration), E>>,
    {
        match &self.cache {
            Some((cache, kustomization)) => {
                let object = InvolvedObject {
                    name: kustomization.clone(),
                    namespace: self.namespace.clone(),
                    operation,
                };
                let key = format!("{}/{}/{key}", self.namespace, self.name);
                cache.get_or_fetch(&key, &object, fetch).await
            }
            None => fetch().await.map(|(token, _)| token),
        }
    }

    /// The ServiceAccount's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The ServiceAccount's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// An annotation's value, `None` when absent or empty.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The audiences for a token: the audiences annotation when set, else `default`.
    pub fn audiences(&self, default: &[&str]) -> Vec<String> {
        match self.annotation(AUDIENCES_ANNOTATION) {
            Some(list) => list
                .split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect(),
            None => default.iter().map(|a| (*a).to_owned()).collect(),
        }
    }

    /// A token of the ServiceAccount for `audiences`, from the TokenRequest API (or the
    /// token cache); `operation` names the use in the cache's metrics (`decrypt_with_aws`).
    pub async fn token(
        &self,
        audiences: Vec<String>,
        operation: &'static str,
    ) -> Result<Zeroizing<String>, KeyServiceError> {
        let key = format!("token/{}", audiences.join(","));
        let token = self
            .cached(&key, operation, || async {
                let token = self.issue(audiences).await?;
                Ok((
                    CachedToken::Bearer(token),
                    Duration::from_secs(TOKEN_SECONDS.unsigned_abs()),
                ))
            })
            .await?;
        match token {
            CachedToken::Bearer(token) => Ok(token),
            CachedToken::Aws(_) => Err(KeyServiceError::Credentials(
                "the token cache holds another kind of credential".into(),
            )),
        }
    }

    async fn issue(&self, audiences: Vec<String>) -> Result<Zeroizing<String>, KeyServiceError> {
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences,
                expiration_seconds: Some(TOKEN_SECONDS),
                ..TokenRequestSpec::default()
            },
            ..TokenRequest::default()
        };
        let issued: TokenRequest =
            Api::<ServiceAccount>::namespaced(self.client.clone(), &self.namespace)
                .create_subresource("token", &self.name, &PostParams::default(), &request)
                .await
                .map_err(|e| {
                    KeyServiceError::Credentials(format!(
                        "failed to create a token for service account '{}/{}': {}",
                        self.namespace,
                        self.name,
                        match e {
                            kube::Error::Api(status) => status.message,
                            other => other.to_string(),
                        }
                    ))
                })?;
        let token = issued.status.map(|s| s.token).unwrap_or_default();
        if token.is_empty() {
            return Err(KeyServiceError::Credentials(format!(
                "the TokenRequest for service account '{}/{}' returned no token",
                self.namespace, self.name
            )));
        }
        Ok(Zeroizing::new(token))
    }
}
