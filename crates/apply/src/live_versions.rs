//! The `resourceVersion` of every object the controller manages, kept current by one
//! metadata-only watch per kind, limited to objects with the owner label.
//!
//! With it, a periodic reconcile needs no request at all for an object whose version is the
//! one recorded after the last apply: nobody wrote it since, so applying the same
//! configuration again would change nothing. Only the version is kept per object (the
//! watch decodes metadata and drops it), so memory grows by tens of bytes per object.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, PartialObjectMeta};
use kube::{Api, Client, ResourceExt};

use super::ObjectId;
use super::names::OWNER_NAME_LABEL;
use super::watch::{Event, WatchConfig, watch};

/// Versions of managed objects, by kind.
pub struct LiveVersions {
    client: Client,
    kinds: Mutex<HashMap<String, Arc<KindVersions>>>,
}

/// One kind's versions, and whether the watch behind them is in step with the API server.
struct KindVersions {
    name: String,
    synced: AtomicBool,
    versions: Mutex<HashMap<(String, String), String>>,
}

impl fmt::Debug for LiveVersions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kinds = self.kinds.lock().map(|k| k.len()).unwrap_or(0);
        f.debug_struct("LiveVersions")
            .field("kinds", &kinds)
            .finish()
    }
}

fn kind_key(resource: &ApiResource) -> String {
    format!("{}/{}", resource.api_version, resource.kind)
}

fn id_kind_key(id: &ObjectId) -> String {
    format!("{}/{}", id.api_version(), id.kind)
}

impl LiveVersions {
    /// No kind watched yet; watches start with [`LiveVersions::watch`].
    pub fn new(client: Client) -> Arc<Self> {
        Arc::new(LiveVersions {
            client,
            kinds: Mutex::new(HashMap::new()),
        })
    }

    /// The version the watch last saw of an object; None when its kind is not watched,
    /// the watch is not in step (starting, or reconnecting after an error), or the object
    /// does not exist or lost the owner label.
    pub fn version(&self, resource: &ApiResource, namespace: &str, name: &str) -> Option<String> {
        self.version_by_key(&kind_key(resource), namespace, name)
    }

    /// [`LiveVersions::version`] of an applied object, at the API version it was applied at.
    pub fn version_of(&self, id: &ObjectId) -> Option<String> {
        self.version_by_key(&id_kind_key(id), &id.namespace, &id.name)
    }

    fn version_by_key(&self, key: &str, namespace: &str, name: &str) -> Option<String> {
        let kind = self.kinds.lock().ok()?.get(key)?.clone();
        if !kind.synced.load(Ordering::Acquire) {
            return None;
        }
        let versions = kind.versions.lock().ok()?;
        versions
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// Starts watching `resource`'s kind, once.
    pub fn watch(&self, resource: &ApiResource) {
        let Ok(mut kinds) = self.kinds.lock() else {
            return;
        };
        let key = kind_key(resource);
        if kinds.contains_key(&key) {
            return;
        }
        let kind = Arc::new(KindVersions {
            name: key.clone(),
            synced: AtomicBool::new(false),
            versions: Mutex::new(HashMap::new()),
        });
        kinds.insert(key, kind.clone());
        let api: Api<PartialObjectMeta<DynamicObject>> =
            Api::all_with(self.client.clone(), resource);
        tracing::debug!(kind = %kind.name, "starting a watch of managed objects");
        tokio::spawn(follow(api, kind));
    }
}

/// Keeps `kind` in step with the watch until the process ends.
async fn follow(api: Api<PartialObjectMeta<DynamicObject>>, kind: Arc<KindVersions>) {
    let config = WatchConfig::default().labels(OWNER_NAME_LABEL);
    let mut events = std::pin::pin!(watch(api, config));
    let mut listing: HashMap<(String, String), String> = HashMap::new();
    let key = |object: &PartialObjectMeta<DynamicObject>| {
        (object.namespace().unwrap_or_default(), object.name_any())
    };
    while let Some(event) = events.next().await {
        let Ok(mut versions) = kind.versions.lock() else {
            return;
        };
        match event {
            Ok(Event::Init) => {
                kind.synced.store(false, Ordering::Release);
                listing.clear();
            }
            Ok(Event::InitApply(object)) => {
                if let Some(version) = object.resource_version() {
                    listing.insert(key(&object), version);
                }
            }
            Ok(Event::InitDone) => {
                *versions = std::mem::take(&mut listing);
                kind.synced.store(true, Ordering::Release);
                tracing::debug!(kind = %kind.name, objects = versions.len(), "watching managed objects");
            }
            Ok(Event::Apply(object)) => {
                match object.resource_version() {
                    Some(version) => versions.insert(key(&object), version),
                    None => versions.remove(&key(&object)),
                };
                kind.synced.store(true, Ordering::Release);
            }
            Ok(Event::Delete(object)) => {
                versions.remove(&key(&object));
                kind.synced.store(true, Ordering::Release);
            }
            // The watcher resumes from the last version it saw (or lists again); until it
            // delivers, what is kept may be behind.
            Err(error) => {
                tracing::debug!(kind = %kind.name, %error, "watch of managed objects interrupted");
                kind.synced.store(false, Ordering::Release);
            }
        }
    }
}
