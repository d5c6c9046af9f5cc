//! Object identity: a Kustomization's decryption ServiceAccount
//! (`spec.decryption.serviceAccountName`, else `--default-decryption-service-account`),
//! whose annotations say how to authenticate and whose tokens, issued by the TokenRequest
//! API for the audience each service expects, are exchanged for the service's credentials.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use zeroize::Zeroizing;

use super::KeyServiceError;
use super::spiffe::SpiffeObject;
use super::token_cache::{CachedToken, InvolvedObject, TokenCache};

/// The annotation choosing how the credential is obtained (`kubernetes` or `spiffe`).
pub const PROVIDER_ANNOTATION: &str = "credential.auth.fluxcd.io/provider";
/// The annotation choosing the credential's type (`jwt`, the only one built, or `x509`).
pub const TYPE_ANNOTATION: &str = "credential.auth.fluxcd.io/type";
/// The annotation overriding the token's audiences (comma-separated).
pub const AUDIENCES_ANNOTATION: &str = "credential.auth.fluxcd.io/audiences";

/// How long an issued token is valid (the TokenRequest API's minimum is 10 minutes).
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(600);

/// A future the Kubernetes side of the key services returns (boxed, so that the traits
/// below can be used as trait objects).
pub type SourceFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, SourceError>> + Send + 'a>>;

/// Why the Kubernetes API did not give what a key service asked of it. Its message is the
/// API's answer (the Status message when there is one), which the key services put after
/// their own context ("failed to create a token for service account 'ns/name': ...").
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct SourceError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl SourceError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        SourceError {
            message: message.into(),
            source: None,
        }
    }

    /// An error saying `message`, caused by `source` (kept as the error's source).
    pub fn with_source(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        SourceError {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }
}

/// The Kubernetes side of object identity, injected by the controller (with its client;
/// tests give a fake): reads a ServiceAccount's annotations, and issues its tokens through
/// the TokenRequest API.
pub trait ServiceAccountTokenSource: Send + Sync {
    /// The annotations of the ServiceAccount `namespace/name` (empty when it has none);
    /// an error when it cannot be read.
    fn annotations<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> SourceFuture<'a, BTreeMap<String, String>>;

    /// A token of the ServiceAccount `namespace/name` for `audiences`, valid for
    /// `lifetime`; an empty token is reported as none issued.
    fn token<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        audiences: Vec<String>,
        lifetime: Duration,
    ) -> SourceFuture<'a, Zeroizing<String>>;
}

/// The decryption ServiceAccount of one Kustomization.
pub struct ServiceAccountTokens {
    source: Arc<dyn ServiceAccountTokenSource>,
    namespace: String,
    name: String,
    annotations: BTreeMap<String, String>,
    cache: Option<(Arc<TokenCache>, String)>,
    /// Set for the `spiffe` credential provider: tokens are the object's JWT-SVIDs.
    spiffe: Option<SpiffeObject>,
}

/// Why the ServiceAccount cannot serve as an identity.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The ServiceAccount could not be read.
    #[error("failed to get decryption service account '{namespace}/{name}': {source}")]
    Get {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The API's answer.
        source: SourceError,
    },
    /// The credential provider annotation names one this controller does not implement.
    #[error(
        "decryption service account '{namespace}/{name}': credential provider '{provider}' (annotation {PROVIDER_ANNOTATION}) is not supported: use 'kubernetes' or 'spiffe'"
    )]
    UnsupportedProvider {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The annotation's value.
        provider: String,
    },
    /// The `spiffe` provider is asked for a credential type other than `jwt`.
    #[error(
        "decryption service account '{namespace}/{name}': credential type '{kind}' (annotation {TYPE_ANNOTATION}) for the spiffe credential provider is not implemented: use 'jwt'"
    )]
    UnsupportedType {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The annotation's value.
        kind: String,
    },
}

impl IdentityError {
    /// The Flux reason of a reconcile that stops on this error (see
    /// [`KeyServiceError::reason`]).
    pub fn reason(&self) -> &'static str {
        crate::reason::BUILD_FAILED
    }
}

impl ServiceAccountTokens {
    /// Reads the ServiceAccount `namespace/name` from `source` and checks its credential
    /// provider.
    pub async fn load(
        source: Arc<dyn ServiceAccountTokenSource>,
        namespace: &str,
        name: &str,
    ) -> Result<Self, IdentityError> {
        let annotations = source
            .annotations(namespace, name)
            .await
            .map_err(|source| IdentityError::Get {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                source,
            })?;
        Self::new(source, namespace, name, annotations)
    }

    /// The ServiceAccount `namespace/name` with the `annotations` already read; refused
    /// when its credential provider is neither `kubernetes` nor `spiffe` (whose tokens come
    /// from [`ServiceAccountTokens::with_spiffe`]'s broker).
    pub fn new(
        source: Arc<dyn ServiceAccountTokenSource>,
        namespace: &str,
        name: &str,
        annotations: BTreeMap<String, String>,
    ) -> Result<Self, IdentityError> {
        match annotations.get(PROVIDER_ANNOTATION).map(String::as_str) {
            None | Some("") | Some("kubernetes") => {}
            Some("spiffe") => match annotations.get(TYPE_ANNOTATION).map(String::as_str) {
                None | Some("") | Some("jwt") => {}
                Some(other) => {
                    return Err(IdentityError::UnsupportedType {
                        namespace: namespace.to_owned(),
                        name: name.to_owned(),
                        kind: other.to_owned(),
                    });
                }
            },
            Some(other) => {
                return Err(IdentityError::UnsupportedProvider {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                    provider: other.to_owned(),
                });
            }
        }
        Ok(ServiceAccountTokens {
            source,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            annotations,
            cache: None,
            spiffe: None,
        })
    }

    /// Whether the ServiceAccount asks for the `spiffe` credential provider.
    pub fn wants_spiffe(&self) -> bool {
        self.annotation(PROVIDER_ANNOTATION) == Some("spiffe")
    }

    /// For the `spiffe` credential provider: its tokens are JWT-SVIDs of `object` from its
    /// broker (none configured is an error when a token is asked for). Without effect for a
    /// ServiceAccount of the `kubernetes` provider.
    pub fn with_spiffe(mut self, object: SpiffeObject) -> Self {
        if self.wants_spiffe() {
            self.spiffe = Some(object);
        }
        self
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
                // SPIFFE identities are the object's, not the ServiceAccount's: Flux never
                // shares them between objects.
                let key = match &self.spiffe {
                    Some(spiffe) => format!(
                        "{}/{}/spiffe/{}/{}/{key}",
                        self.namespace, self.name, spiffe.object, spiffe.object.uid
                    ),
                    None => format!("{}/{}/{key}", self.namespace, self.name),
                };
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

    /// What a failed token request made as this ServiceAccount was doing, the context of the
    /// error every provider reports then.
    pub(crate) fn token_failure_context(&self) -> String {
        format!(
            "failed to get an access token with workload identity of service account '{}/{}'",
            self.namespace, self.name
        )
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
    /// For the `spiffe` provider, the object's JWT-SVID from the broker, never cached
    /// (SPIFFE signing keys rotate; what is exchanged for it is cached per object).
    pub async fn token(
        &self,
        audiences: Vec<String>,
        operation: &'static str,
    ) -> Result<Zeroizing<String>, KeyServiceError> {
        if self.wants_spiffe() {
            return self.jwt_svid(audiences).await;
        }
        let key = format!("token/{}", audiences.join(","));
        let token = self
            .cached(&key, operation, || async {
                let token = self.issue(audiences).await?;
                Ok((CachedToken::Bearer(token), TOKEN_LIFETIME))
            })
            .await?;
        match token {
            CachedToken::Bearer(token) => Ok(token),
            CachedToken::Aws(_) => Err(KeyServiceError::credentials(
                "the token cache holds another kind of credential",
            )),
        }
    }

    async fn jwt_svid(&self, audiences: Vec<String>) -> Result<Zeroizing<String>, KeyServiceError> {
        let Some(SpiffeObject {
            broker: Some(broker),
            object,
        }) = &self.spiffe
        else {
            return Err(KeyServiceError::credentials(format!(
                "service account '{}/{}' asks for the spiffe credential provider, but no SPIFFE Broker is configured (--spiffe-broker-endpoint, --spiffe-broker-id)",
                self.namespace, self.name
            )));
        };
        broker.jwt_svid(object, audiences).await.map_err(|e| {
            KeyServiceError::credentials_because(
                Some(&format!(
                    "failed to fetch SPIFFE JWT-SVID for object '{object}'"
                )),
                e,
            )
        })
    }

    async fn issue(&self, audiences: Vec<String>) -> Result<Zeroizing<String>, KeyServiceError> {
        let token = self
            .source
            .token(&self.namespace, &self.name, audiences, TOKEN_LIFETIME)
            .await
            .map_err(|e| {
                KeyServiceError::credentials_because(
                    Some(&format!(
                        "failed to create a token for service account '{}/{}'",
                        self.namespace, self.name
                    )),
                    e,
                )
            })?;
        if token.is_empty() {
            return Err(KeyServiceError::credentials(format!(
                "the TokenRequest for service account '{}/{}' returned no token",
                self.namespace, self.name
            )));
        }
        Ok(token)
    }
}
