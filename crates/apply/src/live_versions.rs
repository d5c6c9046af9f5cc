//! The `resourceVersion` of every object the controller manages, kept current by one
//! metadata-only watch per kind, limited to objects with the owner label.
//!
//! With it, a periodic reconcile needs no request at all for an object whose version is the
//! one recorded after the last apply: nobody wrote it since, so applying the same
//! configuration again would change nothing. Only the version is kept per object (the
//! watch decodes metadata and drops it), as a number under a hash of the object's namespace
//! and name: about 20 bytes per object.
//!
//! Two objects of a kind whose names hash alike share one entry, which costs requests and
//! never a change: the entry holds the version of one of them, and no two objects have the
//! same `resourceVersion` (each write is a new etcd revision), so the other one's recorded
//! version does not match it and that object takes the full path.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, PartialObjectMeta};
use kube::{Api, Client, ResourceExt};

use super::ObjectId;
use super::names::{OWNER_NAME_LABEL, OWNER_NAMESPACE_LABEL};
use super::revision::Revision;
use super::watch::{Event, WatchConfig, watch};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

/// Versions of managed objects, by kind.
pub struct LiveVersions {
    client: Client,
    kinds: Mutex<HashMap<String, Arc<KindVersions>>>,
    writes: Arc<Announcer>,
}

/// Sends writes to the readers of [`LiveVersions::writes_for`], for the owners they want.
struct Announcer {
    sender: tokio::sync::broadcast::Sender<Written>,
    wanted: Mutex<Vec<Arc<OwnerFilter>>>,
}

/// Whether a reader wants the writes to the objects of the Kustomization (namespace, name).
type OwnerFilter = dyn Fn(&str, &str) -> bool + Send + Sync;

/// One kind's versions, and whether the watch behind them is in step with the API server.
struct KindVersions {
    name: String,
    resource: ApiResource,
    synced: AtomicBool,
    versions: Mutex<HashMap<u64, Revision>>,
}

/// A write to (or the deletion of) a managed object, seen by its kind's watch once in step.
#[derive(Clone, Debug)]
pub struct Written {
    /// The object, at the API version its kind is watched at.
    pub id: ObjectId,
    /// The Kustomization that applied it, from the owner labels: (namespace, name).
    pub owner: (String, String),
    /// Its `resourceVersion` now; `None` once it was deleted.
    pub resource_version: Option<String>,
    /// Its labels (`spec.ignore` selectors match them).
    pub labels: BTreeMap<String, String>,
    /// Its annotations (`reconcile: disabled`, `ssa: Ignore` exempt it from correction).
    pub annotations: BTreeMap<String, String>,
    /// Its `managedFields`, which tell who wrote it (see [`crate::drift::last_write`]).
    pub managed_fields: Vec<ManagedFieldsEntry>,
}

/// How many writes a slow reader of [`LiveVersions::writes`] may fall behind by before it
/// misses some (it is told how many).
const WRITES_BUFFER: usize = 1024;

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
            writes: Arc::new(Announcer {
                sender: tokio::sync::broadcast::channel(WRITES_BUFFER).0,
                wanted: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Every write to a managed object from now on whose owner `wanted(namespace, name)`
    /// accepts, as the watches see them (creations and updates, the controller's own
    /// included, and deletions; not the listings a watch starts or resumes with). Writes no
    /// reader wants are not copied at all, so the feed costs nothing while nobody asks
    /// for it.
    pub fn writes_for(
        &self,
        wanted: impl Fn(&str, &str) -> bool + Send + Sync + 'static,
    ) -> tokio::sync::broadcast::Receiver<Written> {
        if let Ok(mut filters) = self.writes.wanted.lock() {
            filters.push(Arc::new(wanted));
        }
        self.writes.sender.subscribe()
    }

    /// The version the watch last saw of an object; None when its kind is not watched,
    /// the watch is not in step (starting, or reconnecting after an error), or the object
    /// does not exist or lost the owner label, or its version is not a decimal number.
    pub fn version(&self, resource: &ApiResource, namespace: &str, name: &str) -> Option<Revision> {
        self.version_by_key(&kind_key(resource), namespace, name)
    }

    /// [`LiveVersions::version`] of an applied object, at the API version it was applied at.
    pub fn version_of(&self, id: &ObjectId) -> Option<Revision> {
        self.version_by_key(&id_kind_key(id), &id.namespace, &id.name)
    }

    fn version_by_key(&self, key: &str, namespace: &str, name: &str) -> Option<Revision> {
        let kind = self.kinds.lock().ok()?.get(key)?.clone();
        if !kind.synced.load(Ordering::Acquire) {
            return None;
        }
        let versions = kind.versions.lock().ok()?;
        versions.get(&object_key(namespace, name)).copied()
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
            resource: resource.clone(),
            synced: AtomicBool::new(false),
            versions: Mutex::new(HashMap::new()),
        });
        kinds.insert(key, kind.clone());
        let api: Api<PartialObjectMeta<DynamicObject>> =
            Api::all_with(self.client.clone(), resource);
        tracing::debug!(kind = %kind.name, "starting a watch of managed objects");
        tokio::spawn(follow(api, kind, self.writes.clone()));
    }
}

/// The key of object `namespace/name` among its kind's versions.
fn object_key(namespace: &str, name: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    (namespace, name).hash(&mut hasher);
    hasher.finish()
}

/// Keeps `kind` in step with the watch until the process ends.
async fn follow(
    api: Api<PartialObjectMeta<DynamicObject>>,
    kind: Arc<KindVersions>,
    writes: Arc<Announcer>,
) {
    let config = WatchConfig::default().labels(OWNER_NAME_LABEL);
    let mut events = std::pin::pin!(watch(api, config));
    let mut listing: HashMap<u64, Revision> = HashMap::new();
    let key = |object: &PartialObjectMeta<DynamicObject>| {
        object_key(
            object.metadata.namespace.as_deref().unwrap_or(""),
            &object.name_any(),
        )
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
                if let Some(version) = revision_of(&object) {
                    listing.insert(key(&object), version);
                }
            }
            Ok(Event::InitDone) => {
                *versions = std::mem::take(&mut listing);
                kind.synced.store(true, Ordering::Release);
                tracing::debug!(kind = %kind.name, objects = versions.len(), "watching managed objects");
            }
            Ok(Event::Apply(object)) => {
                match revision_of(&object) {
                    Some(version) => versions.insert(key(&object), version),
                    None => versions.remove(&key(&object)),
                };
                kind.synced.store(true, Ordering::Release);
                announce(&writes, &kind.resource, object, false);
            }
            Ok(Event::Delete(object)) => {
                versions.remove(&key(&object));
                kind.synced.store(true, Ordering::Release);
                announce(&writes, &kind.resource, object, true);
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

/// The object's `resourceVersion`, when it is a decimal number.
fn revision_of(object: &PartialObjectMeta<DynamicObject>) -> Option<Revision> {
    Revision::parse(object.metadata.resource_version.as_deref()?)
}

impl Announcer {
    /// Whether some reader wants the writes to the objects of (namespace, name).
    fn wanted(&self, namespace: &str, name: &str) -> bool {
        if self.sender.receiver_count() == 0 {
            return false;
        }
        self.wanted
            .lock()
            .is_ok_and(|filters| filters.iter().any(|wanted| wanted(namespace, name)))
    }
}

/// Sends the write to `object` to the readers that want its owner's writes (none, unless
/// some Kustomization corrects drift promptly: then nothing is copied).
fn announce(
    writes: &Announcer,
    resource: &ApiResource,
    object: PartialObjectMeta<DynamicObject>,
    deleted: bool,
) {
    let labels = object.labels();
    let owner_namespace = labels.get(OWNER_NAMESPACE_LABEL).map_or("", String::as_str);
    let owner_name = labels.get(OWNER_NAME_LABEL).map_or("", String::as_str);
    if !writes.wanted(owner_namespace, owner_name) {
        return;
    }
    let owner = (owner_namespace.to_string(), owner_name.to_string());
    let id = ObjectId {
        namespace: object.namespace().unwrap_or_default(),
        name: object.name_any(),
        group: resource.group.clone(),
        kind: resource.kind.clone(),
        version: resource.version.clone(),
    };
    let resource_version = if deleted {
        None
    } else {
        object.resource_version()
    };
    let metadata = object.metadata;
    let _ = writes.sender.send(Written {
        id,
        owner,
        resource_version,
        labels: metadata.labels.unwrap_or_default(),
        annotations: metadata.annotations.unwrap_or_default(),
        managed_fields: metadata.managed_fields.unwrap_or_default(),
    });
}
