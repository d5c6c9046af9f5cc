//! What the render pipeline reads from the cluster, with the controller's own client (not
//! impersonating, as Flux): the decryption Secret and the `substituteFrom` objects
//! ([`render::cluster::ObjectReader`]), and for the key services the decryption
//! ServiceAccount, its tokens (TokenRequest API) and the Vault ConfigMap.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use kube::api::PostParams;
use kube::{Api, Client};
use zeroize::Zeroizing;

use keyservice::{ConfigMapSource, ServiceAccountTokenSource};
use render::cluster::{ObjectReader, SourceError, SourceFuture, not_found};

use super::object_cache::{CacheError, ObjectCache};

/// The cluster as the controller's own client reads it: Secrets and ConfigMaps from the
/// [`ObjectCache`] when the feature gate `CacheSecretsAndConfigMaps` asks for it, else with a
/// GET each.
#[derive(Clone)]
pub struct ControllerReads {
    client: Client,
    cache: Option<Arc<ObjectCache>>,
}

/// A Secret or ConfigMap that could not be read. Messages are the API server's words.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The API server refused or failed the request.
    #[error("{}", crate::client::api_message(.0))]
    Api(#[from] kube::Error),
    /// The cache could not answer.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// The object does not exist: the sentence of whoever answered (API server or cache).
    #[error("{0}")]
    NotFound(String),
}

impl ControllerReads {
    /// Every read a GET.
    pub fn direct(client: Client) -> Self {
        ControllerReads {
            client,
            cache: None,
        }
    }

    /// Secrets and ConfigMaps that `cache` covers read from it.
    pub fn cached(client: Client, cache: Arc<ObjectCache>) -> Self {
        ControllerReads {
            client,
            cache: Some(cache),
        }
    }

    /// The controller's own client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// `object`, or [`ReadError::NotFound`] for the `kind` (`Secret`, `ConfigMap`) named
    /// `namespace/name` when there is none.
    pub fn require<T>(
        &self,
        object: Option<T>,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<T, ReadError> {
        object.ok_or_else(|| ReadError::NotFound(not_found(self, namespace, kind, name)))
    }

    fn cache_for(&self, namespace: &str) -> Option<&ObjectCache> {
        self.cache
            .as_deref()
            .filter(|cache| cache.covers(namespace))
    }

    /// The Secret `namespace/name`; `None` when it does not exist.
    pub async fn get_secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Secret>, ReadError> {
        match self.cache_for(namespace) {
            Some(cache) => Ok(cache.secret(namespace, name).await?),
            None => Ok(Api::<Secret>::namespaced(self.client.clone(), namespace)
                .get_opt(name)
                .await?),
        }
    }

    /// The ConfigMap `namespace/name`; `None` when it does not exist.
    pub async fn get_config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ConfigMap>, ReadError> {
        match self.cache_for(namespace) {
            Some(cache) => Ok(cache.config_map(namespace, name).await?),
            None => Ok(Api::<ConfigMap>::namespaced(self.client.clone(), namespace)
                .get_opt(name)
                .await?),
        }
    }

    /// The `resourceVersion` of the Secret (`secret`) or ConfigMap `namespace/name`, read as
    /// metadata only when it is not cached; `None` when it does not exist.
    pub async fn version(
        &self,
        secret: bool,
        namespace: &str,
        name: &str,
    ) -> Result<Option<String>, ReadError> {
        let metadata = match (self.cache_for(namespace), secret) {
            (Some(cache), true) => cache.secret(namespace, name).await?.map(|s| s.metadata),
            (Some(cache), false) => cache.config_map(namespace, name).await?.map(|c| c.metadata),
            (None, true) => Api::<Secret>::namespaced(self.client.clone(), namespace)
                .get_metadata_opt(name)
                .await?
                .map(|o| o.metadata),
            (None, false) => Api::<ConfigMap>::namespaced(self.client.clone(), namespace)
                .get_metadata_opt(name)
                .await?
                .map(|o| o.metadata),
        };
        Ok(metadata.and_then(|m| m.resource_version))
    }
}

impl ObjectReader for ControllerReads {
    fn secret<'a>(&'a self, namespace: &'a str, name: &'a str) -> SourceFuture<'a, Option<Secret>> {
        Box::pin(async move {
            self.get_secret(namespace, name)
                .await
                .map_err(|e| SourceError::with_source(e.to_string(), e))
        })
    }

    fn config_map<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> SourceFuture<'a, Option<ConfigMap>> {
        Box::pin(async move {
            self.get_config_map(namespace, name)
                .await
                .map_err(|e| SourceError::with_source(e.to_string(), e))
        })
    }

    fn answers_from_cache(&self, namespace: &str) -> bool {
        self.cache_for(namespace).is_some()
    }
}

/// The API's own words for a failed request (its Status message), else the client's.
fn api_message(error: kube::Error) -> SourceError {
    let message = match &error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    };
    SourceError::with_source(message, error)
}

impl ServiceAccountTokenSource for ControllerReads {
    fn annotations<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> SourceFuture<'a, BTreeMap<String, String>> {
        Box::pin(async move {
            let account = Api::<ServiceAccount>::namespaced(self.client.clone(), namespace)
                .get(name)
                .await
                .map_err(api_message)?;
            Ok(account.metadata.annotations.unwrap_or_default())
        })
    }

    fn token<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        audiences: Vec<String>,
        lifetime: Duration,
    ) -> SourceFuture<'a, Zeroizing<String>> {
        Box::pin(async move {
            let request = TokenRequest {
                spec: TokenRequestSpec {
                    audiences,
                    expiration_seconds: Some(i64::try_from(lifetime.as_secs()).unwrap_or(i64::MAX)),
                    ..TokenRequestSpec::default()
                },
                ..TokenRequest::default()
            };
            let issued: TokenRequest =
                Api::<ServiceAccount>::namespaced(self.client.clone(), namespace)
                    .create_subresource("token", name, &PostParams::default(), &request)
                    .await
                    .map_err(api_message)?;
            Ok(Zeroizing::new(
                issued.status.map(|s| s.token).unwrap_or_default(),
            ))
        })
    }
}

impl ConfigMapSource for ControllerReads {
    fn data<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> SourceFuture<'a, BTreeMap<String, String>> {
        Box::pin(async move {
            let map = self
                .get_config_map(namespace, name)
                .await
                .and_then(|map| self.require(map, "ConfigMap", namespace, name))
                .map_err(|e| SourceError::with_source(e.to_string(), e))?;
            Ok(map.data.unwrap_or_default())
        })
    }
}
