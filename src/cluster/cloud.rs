//! Remote clusters of the `aws`, `azure` and `gcp` providers: the ConfigMap's ServiceAccount
//! (or the controller's identity) as the key services use it, with the same token cache,
//! and the REST config `keyservice::cluster` makes with it.

use std::collections::BTreeMap;
use std::sync::Arc;

use keyservice::cluster::{ClusterAccess, rest_config};
use keyservice::identity::AUDIENCES_ANNOTATION;
use keyservice::{
    Credentials, KeyServices, Purpose, ServiceAccountTokenSource, ServiceAccountTokens,
};
use sha2::{Digest, Sha256};

use super::provider::{self, CloudReference, ClusterReference};
use super::{ClusterError, Clusters, TargetCluster};

/// The ConfigMap a cloud cluster is named by, and the Kustomization it is reached for.
pub(super) struct ConfigMapAt<'a> {
    /// The ConfigMap's (and the Kustomization's) namespace.
    pub namespace: &'a str,
    /// `namespace/name` of the ConfigMap.
    pub config_map: &'a str,
    /// The Kustomization's name (the token cache's metrics name it).
    pub kustomization: &'a str,
}

impl Clusters {
    /// The cluster of a cloud provider's ConfigMap, as `account` (none: the controller).
    pub(super) async fn cloud_cluster(
        &self,
        at: ConfigMapAt<'_>,
        reference: CloudReference,
        account: Option<String>,
        user: Option<String>,
    ) -> Result<TargetCluster, ClusterError> {
        let digest = digest(&reference, account.as_deref());
        let slot = (format!("configmap {}", at.config_map), user.clone());
        if let Some(found) = self.lookup(&slot, Some(&digest)) {
            return Ok(found);
        }
        let failed = |source| ClusterError::Cloud {
            provider: reference.cloud.name(),
            config_map: at.config_map.to_string(),
            source,
        };
        let identity = match &account {
            Some(name) => Some(self.identity(&at, name, &reference.audiences).await?),
            None => None,
        };
        let http = self
            .cloud_http
            .get_or_init(keyservice::HttpClient::new)
            .clone()
            .map_err(|e| {
                ClusterError::AccessToken(format!("cannot set up the HTTPS client: {e}"))
            })?;
        let services = KeyServices::new(
            tokio::runtime::Handle::current(),
            http,
            Credentials {
                identity: identity.map(Arc::new),
                ..Credentials::default()
            },
            self.environment.clone(),
        )
        .with_purpose(Purpose::RemoteCluster);
        let access: ClusterAccess = rest_config(&services, reference.cloud, &reference.request)
            .await
            .map_err(failed)?;
        let url = provider::parse_cluster_address(&access.host)?;
        let ca = access
            .ca
            .filter(|ca| !ca.is_empty())
            .map(|ca| {
                String::from_utf8(ca).map_err(|_| {
                    ClusterError::AccessToken(format!(
                        "the CA certificate of the cluster at {url} is not PEM text"
                    ))
                })
            })
            .transpose()?;
        let target = ClusterReference {
            url,
            ca,
            audiences: Vec::new(),
            service_account: None,
        };
        let config = super::token_client_config(&target, &access.token).await?;
        self.make(slot, config, user, Some(digest), Some(access.renew_at))
            .await
    }

    /// The ServiceAccount `name` as an identity: its annotations read (its credential
    /// provider checked), the ConfigMap's audiences in place of any it names, tokens kept in
    /// the shared token cache.
    async fn identity(
        &self,
        at: &ConfigMapAt<'_>,
        name: &str,
        audiences: &[String],
    ) -> Result<ServiceAccountTokens, ClusterError> {
        let namespace = at.namespace;
        let mut annotations: BTreeMap<String, String> =
            self.reads.annotations(namespace, name).await.map_err(|e| {
                ClusterError::AccessToken(format!(
                    "failed to get service account '{namespace}/{name}': {e}"
                ))
            })?;
        if let Some(provider) = annotations
            .get(provider::CREDENTIAL_PROVIDER_ANNOTATION)
            .filter(|p| !p.is_empty() && p.as_str() != "kubernetes")
        {
            return Err(provider::ProviderError::CredentialProvider {
                account: format!("{namespace}/{name}"),
                provider: provider.clone(),
            }
            .into());
        }
        if !audiences.is_empty() {
            annotations.insert(AUDIENCES_ANNOTATION.to_string(), audiences.join(","));
        }
        let source: Arc<dyn ServiceAccountTokenSource> = Arc::new(self.reads.clone());
        let tokens = ServiceAccountTokens::new(source, namespace, name, annotations)
            .map_err(|e| ClusterError::AccessToken(e.to_string()))?;
        Ok(match &self.settings.token_cache {
            Some(cache) => tokens.with_cache(cache.clone(), at.kustomization),
            None => tokens,
        })
    }
}

/// What the cluster's client depends on in the ConfigMap and the flags.
fn digest(reference: &CloudReference, account: Option<&str>) -> [u8; 32] {
    let mut hasher = Sha256::new();
    let request = &reference.request;
    for part in [
        reference.cloud.name(),
        request.cluster.as_deref().unwrap_or(""),
        request.address.as_deref().unwrap_or(""),
        request.ca.as_deref().unwrap_or(""),
        &reference.audiences.join("\n"),
        account.unwrap_or(""),
    ] {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    hasher.finalize().into()
}
