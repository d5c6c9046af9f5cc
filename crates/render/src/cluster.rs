//! What a render reads from the cluster, injected by its caller: the controller and `diff`
//! implement these traits with the controller's own kube client (not impersonating, as
//! Flux); tests give fakes. The crate itself sends no request to the API server.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use keyservice::{ConfigMapSource, ServiceAccountTokenSource};

pub use keyservice::SourceError;
pub use keyservice::identity::SourceFuture;

/// The Secrets and ConfigMaps a render reads: the decryption Secret (keys and key service
/// credentials) and the `substituteFrom` objects of `spec.postBuild`.
pub trait ObjectReader: Send + Sync {
    /// The Secret `namespace/name`; `None` when it does not exist, an error (the client's
    /// message) when it cannot be read.
    fn secret<'a>(&'a self, namespace: &'a str, name: &'a str) -> SourceFuture<'a, Option<Secret>>;

    /// The ConfigMap `namespace/name`; `None` when it does not exist, an error (the client's
    /// message) when it cannot be read.
    fn config_map<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> SourceFuture<'a, Option<ConfigMap>>;

    /// Whether reads in `namespace` are answered from a watch cache rather than by the API
    /// server: the two name a missing object differently (see [`not_found`]).
    fn answers_from_cache(&self, namespace: &str) -> bool {
        let _ = namespace;
        false
    }
}

/// The sentence for a missing `kind` (`Secret`, `ConfigMap`) named `name` in `namespace`, as
/// `reader` reports it: by resource as the API server does (`secrets "x" not found`), by kind
/// as a controller-runtime watch cache does (`Secret "x" not found`).
pub fn not_found(reader: &dyn ObjectReader, namespace: &str, kind: &str, name: &str) -> String {
    if reader.answers_from_cache(namespace) {
        format!("{kind} \"{name}\" not found")
    } else {
        format!("{}s \"{name}\" not found", kind.to_lowercase())
    }
}

/// Everything decryption may read from the cluster: the objects of [`ObjectReader`], and for
/// the key services the decryption ServiceAccount with its tokens and the Vault ConfigMap.
pub trait ClusterReader: ObjectReader + ServiceAccountTokenSource + ConfigMapSource {}

impl<T: ObjectReader + ServiceAccountTokenSource + ConfigMapSource> ClusterReader for T {}
