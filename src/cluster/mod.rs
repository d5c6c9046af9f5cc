//! Where, and as whom, a Kustomization's objects are applied, pruned and health-checked.
//!
//! As Flux's controller does it: with `spec.serviceAccountName` (or
//! `--default-service-account`) every such request carries impersonation headers for
//! `system:serviceaccount:<namespace>:<name>`; with `spec.kubeConfig.secretRef` the requests
//! go to the cluster of the kubeconfig in that Secret, impersonating there when an account is
//! named too. The controller's own bookkeeping (the Kustomization, its status, events, the
//! source, decryption keys and variables) always uses the controller's own client.
//!
//! Clients are kept per Secret and account and made again when the Secret's kubeconfig
//! changes, so a reconcile costs no TLS set-up or priority-and-fairness probe.

mod cloud;
pub mod kubeconfig;
pub mod object_cache;
pub mod provider;
pub mod reads;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use std::time::{Duration, Instant};

use base64::Engine;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::PostParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use sha2::{Digest, Sha256};

pub use kubeconfig::{KubeConfigError, KubeConfigPolicy};
pub use object_cache::ObjectCache;
pub use reads::{ControllerReads, ReadError};

use crate::api::Kustomization;
use apply::LiveVersions;
use apply::wait::HealthWatches;

/// The client a Kustomization's objects are handled with, and the watches made with it.
#[derive(Clone)]
pub struct TargetCluster {
    /// Client for applying, pruning and reading the objects.
    pub client: Client,
    /// Health-check watches made with that client.
    pub health_watches: Arc<HealthWatches>,
    /// The watch cache of managed objects' versions, only on the controller's own identity:
    /// a tenant or a remote cluster has every object checked by a dry-run.
    pub live_versions: Option<Arc<LiveVersions>>,
    /// Which cluster and identity this is, to tell records made on another apart.
    pub key: ClusterKey,
    /// When the client's credentials (a requested token) must be renewed.
    renew_at: Option<Instant>,
}

/// A cluster and the identity used on it.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq)]
pub struct ClusterKey {
    /// The kubeconfig Secret or cluster ConfigMap (`secret ns/name`, `configmap ns/name`) and
    /// the digest of what it says; none for the controller's own cluster.
    pub kubeconfig: Option<(String, [u8; 32])>,
    /// The impersonated user, if any.
    pub user: Option<String>,
}

/// Why no client could be made for a Kustomization. Messages are Flux's where it has one.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The kubeconfig Secret could not be read.
    #[error("unable to read KubeConfig secret '{secret}' error: {source}")]
    ReadSecret {
        /// `namespace/name`.
        secret: String,
        /// Why it could not be read.
        source: ReadError,
    },
    /// The Secret has no kubeconfig under the key looked for.
    #[error("KubeConfig secret '{secret}' does not contain a '{key}' key with a kubeconfig")]
    MissingKey {
        /// `namespace/name`.
        secret: String,
        /// The key named in `spec.kubeConfig.secretRef.key`, or `value`.
        key: String,
    },
    /// The kubeconfig is not usable.
    #[error("invalid KubeConfig in secret '{secret}': {source}")]
    Invalid {
        /// `namespace/name`.
        secret: String,
        /// What is wrong with it.
        source: KubeConfigError,
    },
    /// Neither reference is set (the CRD's validation normally refuses it).
    #[error(
        "invalid .spec.kubeConfig, neither .spec.kubeConfig.configMapRef nor .spec.kubeConfig.secretRef is set"
    )]
    NoReference,
    /// The cluster ConfigMap could not be read.
    #[error("failed to get configmap {config_map}: {source}")]
    ReadConfigMap {
        /// `namespace/name`.
        config_map: String,
        /// Why it could not be read.
        source: ReadError,
    },
    /// The cluster ConfigMap or a token is not usable.
    #[error("{0}")]
    Provider(#[from] provider::ProviderError),
    /// No token could be had for the remote cluster.
    #[error("failed to get access token for cluster: {0}")]
    AccessToken(String),
    /// A cloud provider could not make a REST config for the cluster.
    #[error(
        "failed to get a REST config with provider '{provider}' for the cluster of configmap {config_map}: {source}"
    )]
    Cloud {
        /// `aws`, `azure` or `gcp`.
        provider: &'static str,
        /// `namespace/name`.
        config_map: String,
        /// What failed, without any credential.
        source: keyservice::KeyServiceError,
    },
    /// A client could not be built from a valid configuration.
    #[error("{}", crate::client::api_message(.0))]
    Client(kube::Error),
}

/// How clients are made, from the controller's flags.
#[derive(Clone, Debug, Default)]
pub struct ClusterSettings {
    /// `--default-service-account`.
    pub default_service_account: String,
    /// `--default-kubeconfig-service-account`: whose token is sent to a cluster named by a
    /// ConfigMap that names no account.
    pub default_kubeconfig_service_account: String,
    /// `--insecure-kubeconfig-exec`, `--insecure-kubeconfig-tls`.
    pub kubeconfig_policy: KubeConfigPolicy,
    /// `--kube-api-qps`.
    pub qps: f32,
    /// `--kube-api-burst`.
    pub burst: u32,
    /// The request counter every client made here adds to.
    pub rest_requests: crate::metrics::RestRequests,
    /// The token cache (`--token-cache-max-size`) cloud credentials are kept in, shared with
    /// the key services.
    pub token_cache: Option<Arc<keyservice::token_cache::TokenCache>>,
    /// The SPIFFE Broker of a ServiceAccount of the `spiffe` credential provider.
    pub spiffe_broker: Option<Arc<spiffe::Broker>>,
}

/// The controller's own target and a cache of the others.
pub struct Clusters {
    own: TargetCluster,
    /// How the controller's own client reads Secrets and ConfigMaps.
    reads: ControllerReads,
    own_config: kube::Config,
    settings: ClusterSettings,
    /// Keyed by Secret (`namespace/name`, empty for the own cluster) and user; one entry per
    /// pair in use, replaced when the Secret's kubeconfig changes.
    cache: Mutex<HashMap<(String, Option<String>), TargetCluster>>,
    /// The HTTPS client of the clouds' APIs, made on first use (inside the runtime).
    cloud_http: OnceLock<Result<keyservice::HttpClient, rustls::Error>>,
    /// The environment the clouds' credentials are found in.
    environment: keyservice::Environment,
}

impl Clusters {
    /// `client` is the controller's own, made from `config`.
    pub fn new(client: Client, config: kube::Config, settings: ClusterSettings) -> Self {
        Clusters {
            reads: ControllerReads::direct(client.clone()),
            own: TargetCluster {
                health_watches: Arc::new(HealthWatches::new(client.clone())),
                live_versions: Some(LiveVersions::new(client.clone())),
                client,
                key: ClusterKey::default(),
                renew_at: None,
            },
            own_config: config,
            settings,
            cache: Mutex::new(HashMap::new()),
            cloud_http: OnceLock::new(),
            environment: keyservice::Environment::from_process(),
        }
    }

    /// Reads Secrets and ConfigMaps from `cache` where it covers them (feature gate
    /// `CacheSecretsAndConfigMaps`).
    pub fn reading_through(mut self, cache: Arc<ObjectCache>) -> Self {
        self.reads = ControllerReads::cached(self.own.client.clone(), cache);
        self
    }

    /// How the controller's own client reads Secrets and ConfigMaps.
    pub fn reads(&self) -> &ControllerReads {
        &self.reads
    }

    /// The controller's own client and watches.
    pub fn own(&self) -> &TargetCluster {
        &self.own
    }

    /// The account `ks` is handled as: its own `spec.serviceAccountName`, else
    /// `--default-service-account`; none means the controller's identity.
    pub fn service_account<'a>(&'a self, ks: &'a Kustomization) -> Option<&'a str> {
        [
            ks.spec.service_account_name.as_deref().unwrap_or(""),
            self.settings.default_service_account.as_str(),
        ]
        .into_iter()
        .find(|name| !name.is_empty())
    }

    /// The target of `ks`: its kubeconfig's cluster or the own one, as its account or as the
    /// controller.
    pub async fn for_kustomization(
        &self,
        ks: &Kustomization,
    ) -> Result<TargetCluster, ClusterError> {
        let namespace = ks.metadata.namespace.as_deref().unwrap_or("default");
        let user = self
            .service_account(ks)
            .map(|name| format!("system:serviceaccount:{namespace}:{name}"));
        let Some(reference) = &ks.spec.kube_config else {
            return match user {
                None => Ok(self.own.clone()),
                Some(user) => self.impersonating_locally(user).await,
            };
        };
        let Some(secret_ref) = &reference.secret_ref else {
            return match &reference.config_map_ref {
                Some(config_map) => {
                    self.named_by_config_map(ks, namespace, &config_map.name, user)
                        .await
                }
                None => Err(ClusterError::NoReference),
            };
        };
        let secret = format!("{namespace}/{}", secret_ref.name);
        let data = self
            .reads
            .get_secret(namespace, &secret_ref.name)
            .await
            .and_then(|found| {
                self.reads
                    .require(found, "Secret", namespace, &secret_ref.name)
            })
            .map_err(|source| ClusterError::ReadSecret {
                secret: secret.clone(),
                source,
            })?
            .data
            .unwrap_or_default();
        let text = match secret_ref.key.as_deref().filter(|k| !k.is_empty()) {
            Some(key) => data.get(key).ok_or_else(|| ClusterError::MissingKey {
                secret: secret.clone(),
                key: key.to_string(),
            })?,
            None => data
                .get("value")
                .or_else(|| data.get("value.yaml"))
                .ok_or_else(|| ClusterError::MissingKey {
                    secret: secret.clone(),
                    key: "value".to_string(),
                })?,
        };
        let digest: [u8; 32] = Sha256::digest(&text.0).into();
        self.cached_remote(secret, user, &text.0, digest).await
    }

    async fn cached_remote(
        &self,
        secret: String,
        user: Option<String>,
        text: &[u8],
        digest: [u8; 32],
    ) -> Result<TargetCluster, ClusterError> {
        let slot = (format!("secret {secret}"), user.clone());
        if let Some(found) = self.lookup(&slot, Some(&digest)) {
            return Ok(found);
        }
        let config = kubeconfig::client_config(text, self.settings.kubeconfig_policy)
            .await
            .map_err(|source| ClusterError::Invalid {
                secret: secret.clone(),
                source,
            })?;
        self.make(slot, config, user, Some(digest), None).await
    }

    /// A cluster named by a ConfigMap, reached with a token of the ServiceAccount it names
    /// (or `--default-kubeconfig-service-account`, or the controller's own): a Kubernetes
    /// token with the `generic` provider, a cloud's with the others.
    async fn named_by_config_map(
        &self,
        ks: &Kustomization,
        namespace: &str,
        name: &str,
        user: Option<String>,
    ) -> Result<TargetCluster, ClusterError> {
        let config_map = format!("{namespace}/{name}");
        let kustomization = ks.metadata.name.as_deref().unwrap_or_default();
        let data = self
            .reads
            .get_config_map(namespace, name)
            .await
            .and_then(|found| self.reads.require(found, "ConfigMap", namespace, name))
            .map_err(|source| ClusterError::ReadConfigMap {
                config_map: config_map.clone(),
                source,
            })?
            .data
            .unwrap_or_default();
        let reference = match provider::read_config_map(&data)? {
            provider::ClusterConfig::Generic(reference) => reference,
            provider::ClusterConfig::Cloud(reference) => {
                let account = self.kubeconfig_account(reference.service_account.as_deref());
                let at = cloud::ConfigMapAt {
                    namespace,
                    config_map: &config_map,
                    kustomization,
                };
                return self.cloud_cluster(at, reference, account, user).await;
            }
        };
        let account = self.kubeconfig_account(reference.service_account.as_deref());
        let mut hasher = Sha256::new();
        for part in [
            reference.url.as_str(),
            reference.ca.as_deref().unwrap_or(""),
            &reference.audiences.join("\n"),
            account.as_deref().unwrap_or(""),
        ] {
            hasher.update(part.as_bytes());
            hasher.update([0]);
        }
        let digest: [u8; 32] = hasher.finalize().into();
        let slot = (format!("configmap {config_map}"), user.clone());
        if let Some(found) = self.lookup(&slot, Some(&digest)) {
            return Ok(found);
        }
        let (token, spiffe) = self
            .service_account_token(ks, namespace, account.as_deref(), &reference.audiences)
            .await?;
        let claims = provider::token_claims(&token)?;
        let config = token_client_config(&reference, &token).await?;
        let now = jiff_now_seconds();
        let lifetime = claims.expires_at - claims.issued_at.unwrap_or(now);
        let renew_in = (claims.expires_at - now).min(lifetime * 4 / 5).max(0);
        // A JWT-SVID is not kept (as Flux keeps none): its signing keys rotate often.
        let renew_in = if spiffe { 0 } else { renew_in };
        let renew_at = Instant::now() + Duration::from_secs(u64::try_from(renew_in).unwrap_or(0));
        self.make(slot, config, user, Some(digest), Some(renew_at))
            .await
    }

    /// The account whose identity reaches a cluster named by a ConfigMap: its own, else
    /// `--default-kubeconfig-service-account`; none means the controller's.
    fn kubeconfig_account(&self, named: Option<&str>) -> Option<String> {
        [
            named.unwrap_or(""),
            self.settings.default_kubeconfig_service_account.as_str(),
        ]
        .into_iter()
        .find(|name| !name.is_empty())
        .map(str::to_string)
    }

    /// A token for `account` in `namespace` (or, with none, for the controller's own
    /// ServiceAccount) with `audiences`, from the TokenRequest API of the controller's cluster;
    /// for an account of the `spiffe` credential provider, `ks`'s JWT-SVID from the SPIFFE
    /// Broker (then the flag is true).
    async fn service_account_token(
        &self,
        ks: &Kustomization,
        namespace: &str,
        account: Option<&str>,
        audiences: &[String],
    ) -> Result<(String, bool), ClusterError> {
        let (namespace, name, whose) = match account {
            Some(name) => {
                let found = Api::<ServiceAccount>::namespaced(self.own.client.clone(), namespace)
                    .get(name)
                    .await
                    .map_err(|e| {
                        ClusterError::AccessToken(format!(
                            "failed to get service account '{namespace}/{name}': {}",
                            crate::client::api_message(&e)
                        ))
                    })?;
                let provider = found
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(provider::CREDENTIAL_PROVIDER_ANNOTATION));
                if provider.is_some_and(|p| p == "spiffe") {
                    return self.jwt_svid(ks, audiences).await.map(|t| (t, true));
                }
                if let Some(provider) = provider.filter(|p| p.as_str() != "kubernetes") {
                    return Err(provider::ProviderError::CredentialProvider {
                        account: format!("{namespace}/{name}"),
                        provider: provider.clone(),
                    }
                    .into());
                }
                (namespace.to_string(), name.to_string(), "service account")
            }
            None => {
                let (namespace, name) = own_service_account()?;
                (namespace, name, "controller service account")
            }
        };
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: audiences.to_vec(),
                ..TokenRequestSpec::default()
            },
            ..TokenRequest::default()
        };
        let issued = Api::<ServiceAccount>::namespaced(self.own.client.clone(), &namespace)
            .create_token_request(&name, &PostParams::default(), &request)
            .await
            .map_err(|e| {
                ClusterError::AccessToken(format!(
                    "failed to create kubernetes token for {whose} '{namespace}/{name}': {}",
                    crate::client::api_message(&e)
                ))
            })?;
        issued
            .status
            .map(|status| (status.token, false))
            .filter(|(token, _)| !token.is_empty())
            .ok_or_else(|| {
                ClusterError::AccessToken(format!(
                    "the token request for {whose} '{namespace}/{name}' returned no token"
                ))
            })
    }

    /// `ks`'s JWT-SVID for `audiences` from the SPIFFE Broker.
    async fn jwt_svid(
        &self,
        ks: &Kustomization,
        audiences: &[String],
    ) -> Result<String, ClusterError> {
        let object = crate::spiffe::kustomization_object(ks);
        let Some(broker) = &self.settings.spiffe_broker else {
            return Err(ClusterError::AccessToken(
                "SPIFFE Broker client is required for the SPIFFE credential provider (--spiffe-broker-endpoint, --spiffe-broker-id)".into(),
            ));
        };
        broker
            .fetch_jwt_svid(&object, audiences)
            .await
            .map(|token| token.as_str().to_owned())
            .map_err(|e| {
                ClusterError::AccessToken(format!(
                    "failed to fetch SPIFFE JWT-SVID for object '{}/Kustomization {}/{}': {e}",
                    object.group, object.namespace, object.name
                ))
            })
    }

    async fn impersonating_locally(&self, user: String) -> Result<TargetCluster, ClusterError> {
        let slot = (String::new(), Some(user.clone()));
        if let Some(found) = self.lookup(&slot, None) {
            return Ok(found);
        }
        self.make(slot, self.own_config.clone(), Some(user), None, None)
            .await
    }

    fn lookup(
        &self,
        slot: &(String, Option<String>),
        digest: Option<&[u8; 32]>,
    ) -> Option<TargetCluster> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .get(slot)
            .filter(|found| found.key.kubeconfig.as_ref().map(|(_, d)| d) == digest)
            .filter(|found| found.renew_at.is_none_or(|at| Instant::now() < at))
            .cloned()
    }

    async fn make(
        &self,
        slot: (String, Option<String>),
        mut config: kube::Config,
        user: Option<String>,
        digest: Option<[u8; 32]>,
        renew_at: Option<Instant>,
    ) -> Result<TargetCluster, ClusterError> {
        let kubeconfig = digest.map(|digest| (slot.0.clone(), digest));
        config.auth_info.impersonate.clone_from(&user);
        let client = crate::client::build(
            config,
            self.settings.qps,
            self.settings.burst,
            &self.settings.rest_requests,
        )
        .await
        .map_err(ClusterError::Client)?;
        let target = TargetCluster {
            health_watches: Arc::new(HealthWatches::new(client.clone())),
            live_versions: None,
            client,
            key: ClusterKey { kubeconfig, user },
            renew_at,
        };
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.insert(slot, target.clone());
        Ok(target)
    }
}

/// The client configuration for a cluster URL, CA and bearer token.
async fn token_client_config(
    reference: &provider::ClusterReference,
    token: &str,
) -> Result<kube::Config, ClusterError> {
    let ca = reference
        .ca
        .as_ref()
        .map(|pem| base64::engine::general_purpose::STANDARD.encode(pem));
    let kubeconfig: Kubeconfig = serde_json::from_value(serde_json::json!({
        "clusters": [{"name": "remote", "cluster": {
            "server": reference.url,
            "certificate-authority-data": ca,
        }}],
        "users": [{"name": "remote", "user": {"token": token}}],
        "contexts": [{"name": "remote", "context": {"cluster": "remote", "user": "remote"}}],
        "current-context": "remote",
    }))
    .map_err(|e| ClusterError::AccessToken(format!("cannot make a client configuration: {e}")))?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| {
            ClusterError::AccessToken(format!(
                "cannot make a client configuration for {}: {e}",
                reference.url
            ))
        })
}

/// Where a pod's ServiceAccount token is mounted.
const TOKEN_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// `(namespace, name)` of the controller's own ServiceAccount, from its mounted token.
fn own_service_account() -> Result<(String, String), ClusterError> {
    let token = std::fs::read_to_string(TOKEN_FILE).map_err(|e| {
        ClusterError::AccessToken(format!(
            "failed to create provider access token for the controller: failed to read service account token file {TOKEN_FILE}: {e}"
        ))
    })?;
    let claims = provider::token_claims(token.trim())?;
    let subject = claims.subject.unwrap_or_default();
    Ok(provider::service_account_of(&subject)?)
}

/// Seconds since the epoch, now.
fn jiff_now_seconds() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_second()
}
