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

pub mod kubeconfig;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use sha2::{Digest, Sha256};

pub use kubeconfig::{KubeConfigError, KubeConfigPolicy};

use crate::api::Kustomization;
use crate::apply::LiveVersions;
use crate::health::wait::HealthWatches;

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
}

/// A cluster and the identity used on it.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq)]
pub struct ClusterKey {
    /// `namespace/name` of the kubeconfig Secret, and the digest of the kubeconfig; none for
    /// the controller's own cluster.
    pub kubeconfig: Option<(String, [u8; 32])>,
    /// The impersonated user, if any.
    pub user: Option<String>,
}

/// Why no client could be made for a Kustomization. Messages are Flux's where it has one.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The kubeconfig Secret could not be read.
    #[error(
        "unable to read KubeConfig secret '{secret}' error: {}",
        crate::client::api_message(source)
    )]
    ReadSecret {
        /// `namespace/name`.
        secret: String,
        /// The API server's answer.
        source: kube::Error,
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
    /// `spec.kubeConfig.configMapRef` names a provider that is not built.
    #[error(
        "spec.kubeConfig.configMapRef is not supported by this controller yet: use spec.kubeConfig.secretRef"
    )]
    ConfigMapRef,
    /// A client could not be built from a valid configuration.
    #[error("{}", crate::client::api_message(.0))]
    Client(kube::Error),
}

/// How clients are made, from the controller's flags.
#[derive(Clone, Debug, Default)]
pub struct ClusterSettings {
    /// `--default-service-account`.
    pub default_service_account: String,
    /// `--insecure-kubeconfig-exec`, `--insecure-kubeconfig-tls`.
    pub kubeconfig_policy: KubeConfigPolicy,
    /// `--kube-api-qps`.
    pub qps: f32,
    /// `--kube-api-burst`.
    pub burst: u32,
}

/// The controller's own target and a cache of the others.
pub struct Clusters {
    own: TargetCluster,
    own_config: kube::Config,
    settings: ClusterSettings,
    /// Keyed by Secret (`namespace/name`, empty for the own cluster) and user; one entry per
    /// pair in use, replaced when the Secret's kubeconfig changes.
    cache: Mutex<HashMap<(String, Option<String>), TargetCluster>>,
}

impl Clusters {
    /// `client` is the controller's own, made from `config`.
    pub fn new(client: Client, config: kube::Config, settings: ClusterSettings) -> Self {
        Clusters {
            own: TargetCluster {
                health_watches: Arc::new(HealthWatches::new(client.clone())),
                live_versions: Some(LiveVersions::new(client.clone())),
                client,
                key: ClusterKey::default(),
            },
            own_config: config,
            settings,
            cache: Mutex::new(HashMap::new()),
        }
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
            return Err(ClusterError::ConfigMapRef);
        };
        let secret = format!("{namespace}/{}", secret_ref.name);
        let data = Api::<Secret>::namespaced(self.own.client.clone(), namespace)
            .get(&secret_ref.name)
            .await
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
        let slot = (secret.clone(), user.clone());
        if let Some(found) = self.lookup(&slot, Some(&digest)) {
            return Ok(found);
        }
        let config = kubeconfig::client_config(text, self.settings.kubeconfig_policy)
            .await
            .map_err(|source| ClusterError::Invalid {
                secret: secret.clone(),
                source,
            })?;
        self.make(slot, config, user, Some((secret, digest))).await
    }

    async fn impersonating_locally(&self, user: String) -> Result<TargetCluster, ClusterError> {
        let slot = (String::new(), Some(user.clone()));
        if let Some(found) = self.lookup(&slot, None) {
            return Ok(found);
        }
        self.make(slot, self.own_config.clone(), Some(user), None)
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
            .cloned()
    }

    async fn make(
        &self,
        slot: (String, Option<String>),
        mut config: kube::Config,
        user: Option<String>,
        kubeconfig: Option<(String, [u8; 32])>,
    ) -> Result<TargetCluster, ClusterError> {
        config.auth_info.impersonate.clone_from(&user);
        let client = crate::client::build(config, self.settings.qps, self.settings.burst)
            .await
            .map_err(ClusterError::Client)?;
        let target = TargetCluster {
            health_watches: Arc::new(HealthWatches::new(client.clone())),
            live_versions: None,
            client,
            key: ClusterKey { kubeconfig, user },
        };
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.insert(slot, target.clone());
        Ok(target)
    }
}
