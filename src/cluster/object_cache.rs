//! Secrets and ConfigMaps read from watch-kept caches, as Flux's controller reads them with
//! the feature gate `CacheSecretsAndConfigMaps`: the first read of a kind lists and watches
//! every object of it (in the watched namespace, or all of them), and every read after that
//! is answered from memory. It needs `list` and `watch` on `secrets` and `configmaps`
//! (granted by the controller's ClusterRole) and costs the memory of every such object;
//! without the gate (Flux's default) each read is a GET.

use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::{NamespaceResourceScope, serde::de::DeserializeOwned};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use tokio::sync::OnceCell;

/// How long a first read waits for its kind's cache to be filled before it fails.
const SYNC_TIMEOUT: Duration = Duration::from_secs(30);

/// A cache that could not answer.
#[derive(Debug, thiserror::Error)]
#[error(
    "the {kind} cache (feature gate CacheSecretsAndConfigMaps) was not filled within {}s: {cause}",
    SYNC_TIMEOUT.as_secs()
)]
pub struct CacheError {
    /// `Secret` or `ConfigMap`.
    pub kind: &'static str,
    /// The watch's last error, or that it sent nothing yet.
    pub cause: String,
}

/// The caches of Secrets and ConfigMaps, each started by its first read.
pub struct ObjectCache {
    client: Client,
    /// The namespace the controller watches; `None` for all. Reads elsewhere are GETs.
    namespace: Option<String>,
    secrets: KindCache<Secret>,
    config_maps: KindCache<ConfigMap>,
}

/// What a kind must be to be cached: a namespaced built-in kind.
trait Cached:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
}

impl<K> Cached for K where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// One kind's store, and what its watch last failed with.
struct KindCache<K: Resource<DynamicType = ()> + 'static> {
    store: OnceCell<Store<K>>,
    last_error: Arc<Mutex<Option<String>>>,
}

impl<K: Resource<DynamicType = ()>> Default for KindCache<K> {
    fn default() -> Self {
        KindCache {
            store: OnceCell::new(),
            last_error: Arc::default(),
        }
    }
}

impl ObjectCache {
    /// Caches of the objects in `namespace` (all namespaces when `None`), read with `client`.
    pub fn new(client: Client, namespace: Option<String>) -> Arc<Self> {
        Arc::new(ObjectCache {
            client,
            namespace,
            secrets: KindCache::default(),
            config_maps: KindCache::default(),
        })
    }

    /// Whether reads of objects in `namespace` are answered by the cache.
    pub fn covers(&self, namespace: &str) -> bool {
        self.namespace.as_deref().is_none_or(|n| n == namespace)
    }

    /// The Secret `namespace/name`, once the cache holds every Secret.
    pub async fn secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>, CacheError> {
        let store = self.store_of(&self.secrets, "Secret").await?;
        Ok(store
            .get(&ObjectRef::new(name).within(namespace))
            .map(|s| (*s).clone()))
    }

    /// The ConfigMap `namespace/name`, once the cache holds every ConfigMap.
    pub async fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ConfigMap>, CacheError> {
        let store = self.store_of(&self.config_maps, "ConfigMap").await?;
        Ok(store
            .get(&ObjectRef::new(name).within(namespace))
            .map(|c| (*c).clone()))
    }

    /// The store of `cache`, started (and filled) on first use.
    async fn store_of<K>(
        &self,
        cache: &KindCache<K>,
        kind: &'static str,
    ) -> Result<Store<K>, CacheError>
    where
        K: Cached,
    {
        let store = cache
            .store
            .get_or_init(|| async { self.start(cache, kind) })
            .await
            .clone();
        match tokio::time::timeout(SYNC_TIMEOUT, store.wait_until_ready()).await {
            Ok(Ok(())) => Ok(store),
            Ok(Err(_)) => Err(CacheError {
                kind,
                cause: "its watch stopped".to_string(),
            }),
            Err(_) => Err(CacheError {
                kind,
                cause: cache
                    .last_error
                    .lock()
                    .ok()
                    .and_then(|e| e.clone())
                    .unwrap_or_else(|| "the API server listed nothing yet".to_string()),
            }),
        }
    }

    /// Starts the watch that fills `cache` for the life of the process.
    fn start<K>(&self, cache: &KindCache<K>, kind: &'static str) -> Store<K>
    where
        K: Cached,
    {
        let api: Api<K> = match &self.namespace {
            Some(namespace) => Api::namespaced(self.client.clone(), namespace),
            None => Api::all(self.client.clone()),
        };
        let (store, writer) = reflector::store();
        let last_error = Arc::clone(&cache.last_error);
        let watch = watcher(api, watcher::Config::default())
            .default_backoff()
            // Nobody reads who wrote an object; leaving managedFields out saves their memory.
            .modify(|object: &mut K| object.meta_mut().managed_fields = None)
            .reflect(writer)
            .for_each(move |event| {
                let last_error = Arc::clone(&last_error);
                async move {
                    let error = event.err().map(|e| e.to_string());
                    if let Some(message) = &error {
                        tracing::warn!(kind, error = %message, "watch of cached objects failed");
                    }
                    if let Ok(mut last) = last_error.lock() {
                        *last = error;
                    }
                }
            });
        tracing::info!(
            kind,
            "caching every object of this kind (feature gate CacheSecretsAndConfigMaps)"
        );
        tokio::spawn(watch);
        store
    }
}
