//! Resolving an object's `apiVersion` and `kind` to the API resource that serves it.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::Client;
use kube::api::{ApiResource, GroupVersionKind};
use kube::discovery::Scope;

/// A kind the cluster serves.
#[derive(Clone, Debug)]
pub struct ResolvedResource {
    /// The resource to address requests to.
    pub api_resource: ApiResource,
    /// Whether objects of the kind live in a namespace.
    pub namespaced: bool,
}

/// A kind the cluster cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The kind or its API version is not served.
    #[error("no matches for kind \"{kind}\" in version \"{api_version}\"")]
    NotFound {
        /// The object's apiVersion.
        api_version: String,
        /// The object's kind.
        kind: String,
    },
    /// Discovery itself failed.
    #[error(
        "failed to discover kind \"{kind}\" in version \"{api_version}\": {}",
        super::api_message(source)
    )]
    Discovery {
        /// The object's apiVersion.
        api_version: String,
        /// The object's kind.
        kind: String,
        /// The API error.
        source: kube::Error,
    },
}

/// Discovery with a cache of the kinds found, for one reconcile. Misses are not cached, so a
/// kind whose CRD was applied a moment ago is found on the next lookup.
pub struct Resolver {
    client: Client,
    found: Mutex<HashMap<(String, String), ResolvedResource>>,
}

impl Resolver {
    /// A resolver with an empty cache.
    pub fn new(client: Client) -> Self {
        Resolver {
            client,
            found: Mutex::new(HashMap::new()),
        }
    }

    /// The resource serving `kind` at `api_version` (`group/version` or `version`).
    pub async fn resolve(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<ResolvedResource, ResolveError> {
        let key = (api_version.to_string(), kind.to_string());
        if let Some(found) = self
            .found
            .lock()
            .ok()
            .and_then(|cache| cache.get(&key).cloned())
        {
            return Ok(found);
        }
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let not_found = || ResolveError::NotFound {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
        };
        let (api_resource, capabilities) =
            match kube::discovery::pinned_kind(&self.client, &gvk).await {
                Ok(found) => found,
                Err(kube::Error::Discovery(_)) => return Err(not_found()),
                Err(kube::Error::Api(status)) if status.code == 404 => return Err(not_found()),
                Err(source) => {
                    return Err(ResolveError::Discovery {
                        api_version: api_version.to_string(),
                        kind: kind.to_string(),
                        source,
                    });
                }
            };
        let resolved = ResolvedResource {
            api_resource,
            namespaced: capabilities.scope == Scope::Namespaced,
        };
        if let Ok(mut cache) = self.found.lock() {
            cache.insert(key, resolved.clone());
        }
        Ok(resolved)
    }
}
