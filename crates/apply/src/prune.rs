//! Pruning: deleting the objects that left the build, in reverse apply order.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, PropagationPolicy};

use super::names::{
    DISABLED_VALUE, OWNER_NAME_LABEL, OWNER_NAMESPACE_LABEL, PRUNE_ANNOTATION, RECONCILE_ANNOTATION,
};
use super::{
    Action, Applier, ApplyError, Change, ChangeSet, ObjectId, ResolveError, stage_of_kind,
};

impl Applier {
    /// Deletes the live objects among `stale` that still carry this owner's labels and are
    /// not protected by `prune: disabled` or `reconcile: disabled`: stage by stage in
    /// reverse apply order, `concurrency` requests at a time within a stage.
    pub async fn prune(&self, stale: &[ObjectId]) -> Result<ChangeSet, ApplyError> {
        let mut changes = Vec::new();
        for stage in (1..=4).rev() {
            let batch: Vec<_> = stale
                .iter()
                .rev()
                .filter(|id| stage_of_kind(&id.kind, &self.options.custom_stage_kinds) == stage)
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

    /// The live object `id` names and whether this owner may prune it (it carries both owner
    /// labels and neither `prune: disabled` nor `reconcile: disabled`); `None` when it does
    /// not exist.
    pub(super) async fn prune_candidate(
        &self,
        id: &ObjectId,
    ) -> Result<Option<(Api<DynamicObject>, DynamicObject, bool)>, ApplyError> {
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
        let live = api
            .get_opt(&id.name)
            .await
            .map_err(|source| ApplyError::Delete {
                object: id.describe(),
                source,
            })?;
        let Some(live) = live else {
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
        let prunable = owned && !protected;
        Ok(Some((api, live, prunable)))
    }

    async fn delete_owned(&self, id: &ObjectId) -> Result<Option<Change>, ApplyError> {
        let delete_error = |source| ApplyError::Delete {
            object: id.describe(),
            source,
        };
        let Some((api, live, prunable)) = self.prune_candidate(id).await? else {
            return Ok(None);
        };
        if !prunable {
            return Ok(Some(Change::new(id.clone(), Action::Skipped)));
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
        Ok(Some(Change::new(id.clone(), Action::Deleted)))
    }
}
