//! Where reconciles read the source objects Kustomizations name: from the watch cache the
//! source watches keep (Flux's default), or from the API server with the `DirectSourceFetch`
//! feature gate, as Flux's APIReader does.
//!
//! Read from the cache, a reconcile costs no request for its source, and the object it reads is
//! the one whose change woke it (the cache is written before the change is mapped to the
//! Kustomizations it wakes). Sources the cache cannot hold (another API version than the
//! watched `v1`, or a namespace outside a namespace-scoped controller's) are read directly.

use std::collections::HashMap;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::kustomization::SourceKind;
use crate::api::names::SOURCE_GROUP;
use crate::api::source::{DEFAULT_SOURCE_VERSION, SourceObject};

/// Why a source could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceReadError {
    /// The source does not exist; the message is the one Flux's reader gives.
    #[error("{0}")]
    NotFound(String),
    /// The API server refused or failed the read.
    #[error(transparent)]
    Api(#[from] kube::Error),
}

/// Reads source objects (see the module docs).
pub struct SourceReader {
    client: kube::Client,
    /// The watch caches of the source kinds at [`DEFAULT_SOURCE_VERSION`]; empty with
    /// `DirectSourceFetch`.
    caches: HashMap<SourceKind, Store<SourceObject>>,
    /// Per cache, whether its first list is in (false: its writer is gone). Shared, because
    /// `Store::wait_until_ready` wakes only the last of several tasks waiting at once.
    listed: HashMap<SourceKind, Shared<BoxFuture<'static, bool>>>,
    /// The one namespace a namespace-scoped controller watches.
    namespace: Option<String>,
}

impl SourceReader {
    /// A reader of `caches` (none: every read goes to the API server), for a controller
    /// watching `namespace` only, or every namespace.
    pub fn new(
        client: kube::Client,
        caches: HashMap<SourceKind, Store<SourceObject>>,
        namespace: Option<String>,
    ) -> SourceReader {
        let listed = caches
            .iter()
            .map(|(kind, cache)| {
                let cache = cache.clone();
                let listed = async move { cache.wait_until_ready().await.is_ok() };
                (*kind, listed.boxed().shared())
            })
            .collect();
        SourceReader {
            client,
            caches,
            listed,
            namespace,
        }
    }

    /// Source `namespace/name` of `kind` at API `version`: its metadata and artifact.
    pub async fn get(
        &self,
        kind: SourceKind,
        version: &str,
        namespace: &str,
        name: &str,
    ) -> Result<SourceObject, SourceReadError> {
        let watched = self
            .namespace
            .as_deref()
            .is_none_or(|watched| watched == namespace);
        if let (Some(cache), DEFAULT_SOURCE_VERSION, true) =
            (self.caches.get(&kind), version, watched)
        {
            // Before the first list the cache knows nothing: wait for it, as Flux's workers
            // wait for their caches to sync.
            let listed = match self.listed.get(&kind) {
                Some(listed) => listed.clone().await,
                None => false,
            };
            if !listed {
                return Err(SourceReadError::NotFound(not_found(kind.as_str(), name)));
            }
            let key = ObjectRef::new_with(name, kind).within(namespace);
            return match cache.get(&key) {
                Some(source) => Ok(source.as_ref().clone()),
                // The cache names the kind, as controller-runtime's does.
                None => Err(SourceReadError::NotFound(not_found(kind.as_str(), name))),
            };
        }
        let resource = kind.api_resource(version);
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &resource);
        match api.get(name).await {
            Ok(source) => Ok(SourceObject::from_dynamic(source)),
            // The API server names the resource.
            Err(kube::Error::Api(status)) if status.code == 404 => {
                Err(SourceReadError::NotFound(not_found(kind.plural(), name)))
            }
            Err(e) => Err(SourceReadError::Api(e)),
        }
    }
}

/// What the source watch caches keep of a source object: its identity (name, namespace, uid
/// and resourceVersion, which a reconcile and its events name) and `status.artifact`, which
/// a reconcile fetches (the decoding into [`SourceObject`] already dropped the rest of it).
/// Nothing else of it is read, and with thousands of sources labels, finalizers and
/// managedFields would be most of the cache.
pub fn keep_what_reconciles_read(source: &mut SourceObject) {
    let metadata = std::mem::take(&mut source.metadata);
    source.metadata = ObjectMeta {
        name: metadata.name,
        namespace: metadata.namespace,
        uid: metadata.uid,
        resource_version: metadata.resource_version,
        ..ObjectMeta::default()
    };
}

/// Kubernetes' not-found sentence for `name` of `resource` (a kind or a plural) in the source
/// group.
fn not_found(resource: &str, name: &str) -> String {
    format!("{resource}.{SOURCE_GROUP} \"{name}\" not found")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher;
    use serde_json::json;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn every_read_waiting_for_the_first_list_is_woken_by_it() {
        let kind = SourceKind::GitRepository;
        let mut writer = Writer::new(kind);
        let caches = HashMap::from([(kind, writer.as_reader())]);
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("url"));
        let client = kube::Client::try_from(config).expect("client");
        let reader = std::sync::Arc::new(SourceReader::new(client, caches, None));
        // Reconciles are tasks of their own: each waits with its own waker.
        let reads: Vec<_> = (0..5)
            .map(|_| {
                let reader = reader.clone();
                tokio::spawn(async move {
                    reader
                        .get(kind, DEFAULT_SOURCE_VERSION, "apps", "repo")
                        .await
                        .map(|source| source.metadata.name)
                })
            })
            .collect();
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        let repo: SourceObject = serde_json::from_value(json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": "repo", "namespace": "apps"},
        }))
        .expect("source");
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitApply(repo));
        writer.apply_watcher_event(&watcher::Event::InitDone);
        for read in reads {
            // On the paused clock a read never woken ends the wait at once.
            let name = tokio::time::timeout(Duration::from_secs(60), read)
                .await
                .expect("every waiting read is woken by the first list")
                .expect("the read task")
                .expect("the source, from the cache");
            assert_eq!(name.as_deref(), Some("repo"));
        }
    }

    #[test]
    fn the_cache_keeps_the_identity_and_the_artifact_of_a_source() {
        let artifact = json!({
            "path": "gitrepository/apps/repo/abc.tar.gz",
            "url": "http://source-controller/gitrepository/apps/repo/abc.tar.gz",
            "revision": "main@sha1:abc", "digest": "sha256:def",
            "lastUpdateTime": "2026-01-01T00:00:00Z", "size": 1,
        });
        let full = json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {
                "name": "repo", "namespace": "apps", "uid": "u-1", "resourceVersion": "42",
                "generation": 3, "labels": {"team": "a"}, "finalizers": ["finalizers.fluxcd.io"],
                "managedFields": [{"manager": "source-controller"}],
            },
            "spec": {"url": "https://example.com/repo.git", "interval": "1m"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "artifact": artifact},
        });
        let dynamic: DynamicObject = serde_json::from_value(full.clone()).expect("source");
        let mut kept: SourceObject = serde_json::from_value(full).expect("source");
        keep_what_reconciles_read(&mut kept);
        let identity: ObjectMeta = serde_json::from_value(
            json!({"name": "repo", "namespace": "apps", "uid": "u-1", "resourceVersion": "42"}),
        )
        .expect("metadata");
        assert_eq!(kept.metadata, identity);
        let expected: crate::api::source::Artifact =
            serde_json::from_value(artifact).expect("artifact");
        assert_eq!(kept.artifact(), Some(&expected));
        assert_eq!(
            kept.artifact().cloned(),
            crate::api::source::artifact_of(&dynamic)
        );
        // Read from the API server at another version, the same source reads the same.
        let direct = SourceObject::from_dynamic(dynamic);
        assert_eq!(direct.artifact(), kept.artifact());
        let reference = |source: &SourceObject| {
            serde_json::to_value(super::super::events::source_reference(
                "GitRepository",
                source,
            ))
            .expect("json")
        };
        assert_eq!(reference(&kept), reference(&direct));

        let waiting: SourceObject = serde_json::from_value(json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": "new", "namespace": "apps"},
            "status": {"conditions": []},
        }))
        .expect("source");
        assert_eq!(waiting.artifact(), None);
    }

    #[test]
    fn a_malformed_artifact_reads_as_none_and_decodes_the_rest() {
        let source: SourceObject = serde_json::from_value(json!({
            "metadata": {"name": "odd", "namespace": "apps"},
            "status": {"artifact": {"revision": "no url"}},
        }))
        .expect("a malformed artifact does not fail the decoding");
        assert_eq!(source.metadata.name.as_deref(), Some("odd"));
        assert_eq!(source.artifact(), None);
    }

    #[test]
    fn not_found_names_the_kind_from_the_cache_and_the_resource_from_the_api_server() {
        assert_eq!(
            not_found(SourceKind::GitRepository.as_str(), "repo"),
            "GitRepository.source.toolkit.fluxcd.io \"repo\" not found"
        );
        assert_eq!(
            not_found(SourceKind::GitRepository.plural(), "repo"),
            "gitrepositories.source.toolkit.fluxcd.io \"repo\" not found"
        );
    }
}
