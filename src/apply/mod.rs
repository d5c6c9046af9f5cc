//! The apply stage: server-side apply of a build in Flux's stages, the inventory of what was
//! applied, and pruning of what left it.
//!
//! Everything goes through kube's dynamic API with an injected client, so that
//! impersonation or a remote cluster is only another client.

mod inventory;
mod order;
mod resolve;

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PropagationPolicy};
use kube::{Client, ResourceExt};
use serde_json::Value;

pub use inventory::{InvalidInventoryId, ObjectId};
pub use order::{sort_for_apply, stage, stage_of_kind};
pub use resolve::{ResolveError, Resolver};

use crate::api::names::{
    APPLY_FIELD_MANAGER, DISABLED_VALUE, ENABLED_VALUE, FORCE_ANNOTATION, OWNER_NAME_LABEL,
    OWNER_NAMESPACE_LABEL, PRUNE_ANNOTATION, RECONCILE_ANNOTATION, SSA_ANNOTATION,
};
use crate::manifest::Object;

/// The Kustomization that owns applied objects; written as the two owner labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// The Kustomization's name.
    pub name: String,
    /// The Kustomization's namespace.
    pub namespace: String,
}

/// What happened to one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The object did not exist and was created.
    Created,
    /// The object existed and changed.
    Configured,
    /// The object existed and the apply changed nothing.
    Unchanged,
    /// The object was deleted.
    Deleted,
    /// The object was left alone by an annotation or label.
    Skipped,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Created => "created",
            Action::Configured => "configured",
            Action::Unchanged => "unchanged",
            Action::Deleted => "deleted",
            Action::Skipped => "skipped",
        })
    }
}

/// One line of a change set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The object.
    pub id: ObjectId,
    /// What happened to it.
    pub action: Action,
    /// `metadata.generation` of the object the API server returned, when it was applied.
    pub generation: Option<i64>,
}

/// The outcome of an apply or a prune, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangeSet(pub Vec<Change>);

impl ChangeSet {
    /// Whether anything other than "unchanged" happened.
    pub fn has_changes(&self) -> bool {
        self.0.iter().any(|c| c.action != Action::Unchanged)
    }

    /// Flux's event text: one `Kind/namespace/name action` line per change, unchanged
    /// objects left out.
    pub fn summary(&self) -> String {
        self.0
            .iter()
            .filter(|c| c.action != Action::Unchanged)
            .map(|c| format!("{} {}", c.id.describe(), c.action))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Why applying or pruning failed; each variant names the object.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The kind is not served by the cluster.
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// A namespaced object without a namespace.
    #[error("{object} is namespaced but has no metadata.namespace")]
    MissingNamespace {
        /// `Kind/name` of the object.
        object: String,
    },
    /// The API server refused the object.
    #[error("{object} apply failed{}", api_failure(source))]
    Apply {
        /// `Kind/namespace/name` of the object.
        object: String,
        /// The API error.
        source: kube::Error,
    },
    /// A CustomResourceDefinition did not become established in time.
    #[error("CustomResourceDefinition/{name} was not established within {seconds}s")]
    NotEstablished {
        /// The CRD's name.
        name: String,
        /// How long we waited.
        seconds: u64,
    },
    /// A deleted object was still there when the timeout ran out.
    #[error("{object} was not terminated within {seconds}s")]
    NotTerminated {
        /// `Kind/namespace/name` of the object.
        object: String,
        /// How long we waited.
        seconds: u64,
    },
    /// Deleting an object failed.
    #[error("{object} delete failed{}", api_failure(source))]
    Delete {
        /// `Kind/namespace/name` of the object.
        object: String,
        /// The API error.
        source: kube::Error,
    },
}

/// What the API server said, as Flux words it: ` (<reason>): <message>` for a refusal
/// (`(Invalid): Service "web" is invalid: ...`), `: <error>` for anything else.
fn api_failure(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            let reason = if status.reason.is_empty() {
                status.code.to_string()
            } else {
                status.reason.clone()
            };
            format!(" ({reason}): {}", status.message)
        }
        other => format!(": {other}"),
    }
}

/// Applies builds and prunes objects on one cluster, as one client.
pub struct Applier {
    client: Client,
    resolver: Resolver,
    owner: Owner,
    concurrency: usize,
    custom_stage_kinds: Vec<String>,
    force: bool,
    timeout: Duration,
}

/// How an object is applied, from `spec.force` and its annotations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    Apply { force: bool },
    IfNotPresent,
    Skip,
}

impl Applier {
    /// An applier acting for `owner`. `concurrency` bounds parallel requests
    /// (`--concurrent-ssa`), `force` is `spec.force`, `timeout` bounds waiting for CRDs.
    pub fn new(
        client: Client,
        owner: Owner,
        concurrency: usize,
        custom_stage_kinds: Vec<String>,
        force: bool,
        timeout: Duration,
    ) -> Self {
        Applier {
            resolver: Resolver::new(client.clone()),
            client,
            owner,
            concurrency: concurrency.max(1),
            custom_stage_kinds,
            force,
            timeout,
        }
    }

    /// The discovery cache this applier resolves kinds with.
    pub fn resolver(&self) -> &Resolver {
        &self.resolver
    }

    /// Applies every object in Flux's stage order. Returns the change set in apply order,
    /// which is also the inventory order.
    pub async fn apply_all(&self, mut objects: Vec<Object>) -> Result<ChangeSet, ApplyError> {
        sort_for_apply(&mut objects, &self.custom_stage_kinds);
        let mut changes = Vec::with_capacity(objects.len());
        let mut start = 0;
        while start < objects.len() {
            let current = stage(&objects[start], &self.custom_stage_kinds);
            let end = objects[start..]
                .iter()
                .position(|o| stage(o, &self.custom_stage_kinds) != current)
                .map_or(objects.len(), |offset| start + offset);
            let batch = &objects[start..end];
            let pending: Vec<_> = batch.iter().map(|object| self.apply_one(object)).collect();
            let applied: Vec<Change> = futures::stream::iter(pending)
                .buffered(self.concurrency)
                .try_collect()
                .await?;
            changes.extend(applied);
            if current == 1 {
                self.wait_for_crds(batch).await?;
            }
            start = end;
        }
        Ok(ChangeSet(changes))
    }

    async fn apply_one(&self, object: &Object) -> Result<Change, ApplyError> {
        let mut object = object.clone();
        let resource = self
            .resolver
            .resolve(object.api_version(), object.kind())
            .await?;
        if !resource.namespaced {
            object
                .as_map_mut()
                .get_mut("metadata")
                .and_then(Value::as_object_mut)
                .map(|m| m.remove("namespace"));
        } else if object.namespace().is_none() {
            return Err(ApplyError::MissingNamespace {
                object: object.describe(),
            });
        }
        let id = ObjectId::of(&object);
        let policy = self.policy(&object);
        if policy == Policy::Skip {
            return Ok(Change {
                id,
                action: Action::Skipped,
                generation: None,
            });
        }
        object.set_labels(&self.owner_labels());
        let api: Api<DynamicObject> = match object.namespace() {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource.api_resource),
            None => Api::all_with(self.client.clone(), &resource.api_resource),
        };
        let name = object.name().to_string();
        let apply_error = |source| ApplyError::Apply {
            object: id.describe(),
            source,
        };
        let live = api.get_opt(&name).await.map_err(apply_error)?;
        if live.is_some() && policy == Policy::IfNotPresent {
            return Ok(Change {
                id,
                action: Action::Skipped,
                generation: None,
            });
        }
        let params = PatchParams::apply(APPLY_FIELD_MANAGER).force();
        let patch = Value::from(object);
        let applied = match api.patch(&name, &params, &Patch::Apply(&patch)).await {
            Ok(applied) => applied,
            Err(err)
                if matches!(policy, Policy::Apply { force: true })
                    && is_immutable_field_error(&err) =>
            {
                api.delete(&name, &DeleteParams::foreground())
                    .await
                    .map_err(apply_error)?;
                self.wait_until_gone(&api, &name).await;
                api.patch(&name, &params, &Patch::Apply(&patch))
                    .await
                    .map_err(apply_error)?
            }
            Err(err) => return Err(apply_error(err)),
        };
        let action = match live {
            None => Action::Created,
            Some(live) if live.resource_version() != applied.resource_version() => {
                Action::Configured
            }
            Some(_) => Action::Unchanged,
        };
        Ok(Change {
            id,
            action,
            generation: applied.metadata.generation,
        })
    }

    fn policy(&self, object: &Object) -> Policy {
        let switch = |key: &str| {
            object
                .annotation(key)
                .or_else(|| object.label(key))
                .map(str::to_ascii_lowercase)
        };
        if switch(RECONCILE_ANNOTATION).as_deref() == Some(DISABLED_VALUE) {
            return Policy::Skip;
        }
        match switch(SSA_ANNOTATION).as_deref() {
            Some("ignore") => return Policy::Skip,
            Some("ifnotpresent") => return Policy::IfNotPresent,
            _ => {}
        }
        let force = self.force || switch(FORCE_ANNOTATION).as_deref() == Some(ENABLED_VALUE);
        Policy::Apply { force }
    }

    fn owner_labels(&self) -> std::collections::BTreeMap<String, String> {
        std::collections::BTreeMap::from([
            (OWNER_NAME_LABEL.to_string(), self.owner.name.clone()),
            (
                OWNER_NAMESPACE_LABEL.to_string(),
                self.owner.namespace.clone(),
            ),
        ])
    }

    async fn wait_until_gone(&self, api: &Api<DynamicObject>, name: &str) {
        let deadline = tokio::time::Instant::now() + self.timeout;
        while tokio::time::Instant::now() < deadline {
            if matches!(api.get_opt(name).await, Ok(None)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn wait_for_crds(&self, batch: &[Object]) -> Result<(), ApplyError> {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let deadline = tokio::time::Instant::now() + self.timeout;
        for crd in batch
            .iter()
            .filter(|o| o.kind() == "CustomResourceDefinition")
        {
            loop {
                let established = api
                    .get_opt(crd.name())
                    .await
                    .ok()
                    .flatten()
                    .is_some_and(|crd| {
                        crd.status.and_then(|s| s.conditions).is_some_and(|c| {
                            c.iter()
                                .any(|c| c.type_ == "Established" && c.status == "True")
                        })
                    });
                if established {
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(ApplyError::NotEstablished {
                        name: crd.name().to_string(),
                        seconds: self.timeout.as_secs(),
                    });
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
        Ok(())
    }

    /// Deletes the live objects among `stale` that still carry this owner's labels and are
    /// not protected by `prune: disabled` or `reconcile: disabled`: stage by stage in
    /// reverse apply order, `concurrency` requests at a time within a stage.
    pub async fn prune(&self, stale: &[ObjectId]) -> Result<ChangeSet, ApplyError> {
        let mut changes = Vec::new();
        for stage in (1..=4).rev() {
            let batch: Vec<_> = stale
                .iter()
                .rev()
                .filter(|id| stage_of_kind(&id.kind, &self.custom_stage_kinds) == stage)
                .map(|id| self.delete_owned(id))
                .collect();
            let deleted: Vec<Option<Change>> = futures::stream::iter(batch)
                .buffered(self.concurrency)
                .try_collect()
                .await?;
            changes.extend(deleted.into_iter().flatten());
        }
        Ok(ChangeSet(changes))
    }

    /// Waits until none of `deleted` exists any more, within the applier's timeout.
    pub async fn wait_until_deleted(&self, deleted: &[ObjectId]) -> Result<(), ApplyError> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        for id in deleted {
            let resource = match self.resolver.resolve(&id.api_version(), &id.kind).await {
                Ok(resource) => resource,
                Err(ResolveError::NotFound { .. }) => continue,
                Err(err) => return Err(err.into()),
            };
            let api: Api<DynamicObject> = if resource.namespaced {
                Api::namespaced_with(self.client.clone(), &id.namespace, &resource.api_resource)
            } else {
                Api::all_with(self.client.clone(), &resource.api_resource)
            };
            loop {
                match api.get_opt(&id.name).await {
                    Ok(None) => break,
                    Ok(Some(_)) if tokio::time::Instant::now() < deadline => {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                    Ok(Some(_)) => {
                        return Err(ApplyError::NotTerminated {
                            object: id.describe(),
                            seconds: self.timeout.as_secs(),
                        });
                    }
                    Err(source) => {
                        return Err(ApplyError::Delete {
                            object: id.describe(),
                            source,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    async fn delete_owned(&self, id: &ObjectId) -> Result<Option<Change>, ApplyError> {
        let resource = match self.resolver.resolve(&id.api_version(), &id.kind).await {
            Ok(resource) => resource,
            // The kind is gone from the cluster (its CRD was deleted): so are its objects.
            Err(ResolveError::NotFound { .. }) => return Ok(None),
            Err(err) => return Err(err.into()),
        };
        let api: Api<DynamicObject> = if resource.namespaced {
            Api::namespaced_with(self.client.clone(), &id.namespace, &resource.api_resource)
        } else {
            Api::all_with(self.client.clone(), &resource.api_resource)
        };
        let delete_error = |source| ApplyError::Delete {
            object: id.describe(),
            source,
        };
        let Some(live) = api.get_opt(&id.name).await.map_err(delete_error)? else {
            return Ok(None);
        };
        let labels = live.labels();
        let owned = labels.get(OWNER_NAME_LABEL) == Some(&self.owner.name)
            && labels.get(OWNER_NAMESPACE_LABEL) == Some(&self.owner.namespace);
        let switch = |key: &str| {
            live.annotations()
                .get(key)
                .or_else(|| labels.get(key))
                .map(|v| v.to_ascii_lowercase())
        };
        let protected = switch(PRUNE_ANNOTATION).as_deref() == Some(DISABLED_VALUE)
            || switch(RECONCILE_ANNOTATION).as_deref() == Some(DISABLED_VALUE);
        if !owned || protected {
            return Ok(Some(Change {
                id: id.clone(),
                action: Action::Skipped,
                generation: None,
            }));
        }
        if live.metadata.deletion_timestamp.is_none() {
            let params = DeleteParams {
                propagation_policy: Some(PropagationPolicy::Background),
                ..Default::default()
            };
            match api.delete(&id.name, &params).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => return Ok(None),
                Err(err) => return Err(delete_error(err)),
            }
        }
        Ok(Some(Change {
            id: id.clone(),
            action: Action::Deleted,
            generation: None,
        }))
    }
}

fn is_immutable_field_error(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 422 && status.message.contains("immutable"))
}

/// Inventory entries of `old` whose object is not in `new`, in `old`'s order.
pub fn stale_objects(old: &[ObjectId], new: &[ObjectId]) -> Vec<ObjectId> {
    let index: HashMap<(&str, &str, &str, &str), ()> = new
        .iter()
        .map(|id| {
            (
                (
                    id.namespace.as_str(),
                    id.name.as_str(),
                    id.group.as_str(),
                    id.kind.as_str(),
                ),
                (),
            )
        })
        .collect();
    old.iter()
        .filter(|id| {
            !index.contains_key(&(
                id.namespace.as_str(),
                id.name.as_str(),
                id.group.as_str(),
                id.kind.as_str(),
            ))
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_refusals_read_as_sentences_not_debug_dumps() {
        let status = kube::core::Status::failure(
            "Service \"web\" is invalid: spec.ports[0].port: Invalid value: 99999",
            "Invalid",
        )
        .with_code(422);
        let error = ApplyError::Apply {
            object: "Service/apps/web".into(),
            source: kube::Error::Api(Box::new(status)),
        };
        assert_eq!(
            error.to_string(),
            "Service/apps/web apply failed (Invalid): Service \"web\" is invalid: \
             spec.ports[0].port: Invalid value: 99999"
        );
    }

    fn id(name: &str, version: &str) -> ObjectId {
        ObjectId {
            namespace: "default".into(),
            name: name.into(),
            group: "apps".into(),
            kind: "Deployment".into(),
            version: version.into(),
        }
    }

    #[test]
    fn stale_ignores_version_changes() {
        let old = vec![id("a", "v1"), id("b", "v1"), id("c", "v1")];
        let new = vec![id("a", "v2"), id("c", "v1")];
        assert_eq!(stale_objects(&old, &new), vec![id("b", "v1")]);
    }

    #[test]
    fn change_set_summary_lists_changes_only() {
        let set = ChangeSet(vec![
            Change {
                id: id("a", "v1"),
                action: Action::Created,
                generation: None,
            },
            Change {
                id: id("b", "v1"),
                action: Action::Unchanged,
                generation: None,
            },
            Change {
                id: id("c", "v1"),
                action: Action::Deleted,
                generation: None,
            },
        ]);
        assert!(set.has_changes());
        assert_eq!(
            set.summary(),
            "Deployment/default/a created\nDeployment/default/c deleted"
        );
        let quiet = ChangeSet(vec![Change {
            id: id("b", "v1"),
            action: Action::Unchanged,
            generation: None,
        }]);
        assert!(!quiet.has_changes());
    }
}
