//! One object through a stage, as Flux's controller takes it: read the live object, honour
//! the skip switches, take fields over, dry-run, compare, and apply only what drifted.

use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PropagationPolicy};
use serde_json::Value;

use super::Object;
use super::applied::{AppliedRecord, configuration_hash};
use super::drift::{Drift, drift_of};
use super::ignore::{self, IgnorePatchError};
use super::managed_fields::{
    FieldManager, before_dry_run_managers, cleanup_managers, has_switch, migrate_api_version,
    owned_fields, remove_stale_metadata, take_over,
};
use super::names::{
    APPLY_FIELD_MANAGER, DISABLED_VALUE, ENABLED_VALUE, FORCE_ANNOTATION, OWNER_NAME_LABEL,
    OWNER_NAMESPACE_LABEL, RECONCILE_ANNOTATION, SSA_ANNOTATION,
};
use super::revision::Revision;
use super::{Action, Applier, ApplyError, Change, ObjectId};

/// An object ready to be sent: its configuration and where it goes.
pub(super) struct Target {
    pub(super) id: ObjectId,
    pub(super) name: String,
    resource: kube::api::ApiResource,
    pub(super) api: Api<DynamicObject>,
    pub(super) configuration: Value,
    hash: u64,
}

/// Where an object stands between validation and apply.
pub(super) enum Planned {
    /// Nothing more to do.
    Done(Change),
    /// Validated; to be applied with `configuration`.
    Apply {
        target: Target,
        configuration: Value,
        action: Action,
        /// How the live object had drifted, when it is configured.
        drift: Option<Drift>,
    },
    /// Applied before with this configuration and seen unchanged at `resource_version`:
    /// re-applied with that version as a precondition.
    Reassert {
        target: Target,
        resource_version: Revision,
    },
}

impl Applier {
    /// Resolves the object's kind and prepares the configuration to apply: normalized as
    /// Flux normalizes it, an invalid CRD conversion `caBundle` stripped, the owner labels
    /// added, a namespace dropped from cluster-scoped kinds.
    pub(super) async fn target(&self, object: &Object) -> Result<Target, ApplyError> {
        let mut object = object.clone();
        super::normalize::normalize(&mut object);
        super::ca_bundle::strip_invalid_ca_bundle(&mut object);
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
        object.set_labels(&std::collections::BTreeMap::from([
            (OWNER_NAME_LABEL.to_string(), self.owner.name.clone()),
            (
                OWNER_NAMESPACE_LABEL.to_string(),
                self.owner.namespace.clone(),
            ),
        ]));
        let api = self.api(object.namespace(), &resource.api_resource);
        let name = object.name().to_string();
        let configuration = Value::from(object);
        Ok(Target {
            id,
            name,
            resource: resource.api_resource,
            api,
            hash: configuration_hash(&configuration),
            configuration,
        })
    }

    /// Validates one object: the precondition path when it may take it, Flux's full path
    /// otherwise.
    pub(super) async fn validate(&self, target: Target) -> Result<Planned, ApplyError> {
        if let Some(resource_version) = self.reassertable(&target) {
            if self.options.trust_live_versions
                && let Some(live) = &self.options.live_versions
                && live.version(&target.resource, &target.id.namespace, &target.name)
                    == Some(resource_version)
            {
                self.remember(&target, resource_version);
                self.confirmed_by_watch
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Ok(done(target.id, Action::Unchanged));
            }
            return Ok(Planned::Reassert {
                target,
                resource_version,
            });
        }
        if self.probably_new(&target) {
            return self.plan_new(target).await;
        }
        self.plan(target).await
    }

    /// Whether `target` is outside the inventory and is to be applied at all.
    fn probably_new(&self, target: &Target) -> bool {
        !self.options.inventoried.contains(&target.id.inventory_id())
            && policy(&target.configuration) != Policy::Skip
    }

    /// The path for an object most likely new: its dry-run alone shows that it does not
    /// exist (a dry-run create has no `resourceVersion`), which spares reading it. An object
    /// that exists after all, or a dry-run that fails, takes Flux's full path.
    async fn plan_new(&self, target: Target) -> Result<Planned, ApplyError> {
        let Ok(dry_run) = self.dry_run(&target).await else {
            return self.plan(target).await;
        };
        let exists = dry_run
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|version| !version.is_empty());
        if exists {
            return self.plan(target).await;
        }
        Ok(Planned::Apply {
            configuration: target.configuration.clone(),
            target,
            action: Action::Created,
            drift: None,
        })
    }

    /// The version at which `target`'s configuration is known to be applied, when nothing
    /// but a precondition re-apply is needed to confirm it.
    fn reassertable(&self, target: &Target) -> Option<Revision> {
        let record = self.previous.get(&target.id)?;
        let plain = record.configuration == target.hash
            && policy(&target.configuration) == Policy::Apply
            && !self.options.migrate_api_version
            && self
                .options
                .ignore
                .paths_for(&target.configuration)
                .is_empty();
        plain.then_some(record.resource_version)
    }

    /// Re-applies an object seen unchanged, with its last known version as a precondition:
    /// accepted, nothing was written since and nothing changes; refused, the object takes
    /// the full path.
    pub(super) async fn reassert(&self, planned: Planned) -> Result<Planned, ApplyError> {
        let Planned::Reassert {
            target,
            resource_version,
        } = planned
        else {
            return Ok(planned);
        };
        let mut configuration = target.configuration.clone();
        if let Some(metadata) = configuration
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
        {
            metadata.insert(
                "resourceVersion".into(),
                Value::from(resource_version.to_string()),
            );
        }
        let params = PatchParams::apply(APPLY_FIELD_MANAGER).force();
        match target
            .api
            .patch(&target.name, &params, &Patch::Apply(&configuration))
            .await
        {
            Ok(applied) => {
                let action = if applied
                    .resource_version()
                    .as_deref()
                    .and_then(Revision::parse)
                    == Some(resource_version)
                {
                    Action::Unchanged
                } else {
                    Action::Configured
                };
                self.record(&target, &applied);
                Ok(Planned::Done(Change {
                    id: target.id,
                    action,
                    generation: applied.metadata.generation,
                    drift: None,
                }))
            }
            // A conflict (written since), a deletion, or anything else: the full path finds
            // out what happened and words any error as Flux does.
            Err(_) => self.plan(target).await,
        }
    }

    /// Flux's path for one object: read, skip switches, takeovers, dry-run, compare.
    async fn plan(&self, target: Target) -> Result<Planned, ApplyError> {
        let object = target.id.describe();
        let mut live = match target.api.get_opt(&target.name).await {
            Ok(found) => found.and_then(|o| serde_json::to_value(o).ok()),
            // Flux goes on without the live object; the dry-run reports the error.
            Err(_) => None,
        };
        let desired = &target.configuration;
        if skipped(desired, live.as_ref()) {
            return Ok(done(target.id, Action::Skipped));
        }
        // Drift is of an object applied before: one taken over from others is not drifted.
        let inventoried = self.options.inventoried.contains(&target.id.inventory_id());
        if inventoried && self.options.report_drift {
            return self.detect(target, live).await;
        }
        // As read, before the takeovers below: who wrote what.
        let read = if inventoried { live.clone() } else { None };
        let mut patched = false;
        if let Some(current) = &live {
            let api_version = desired
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or("");
            if self.options.migrate_api_version
                && let Some(operation) = migrate_api_version(current, api_version)
            {
                live = Some(
                    self.json_patch(&target, vec![operation], "failed to migrate API version")
                        .await?,
                );
                patched = true;
            }
        }
        if let Some(current) = &live
            && !merged(desired, current)
        {
            let managers = before_dry_run_managers(&self.options.override_managers_before_dry_run);
            if let Some(operation) = take_over(current, &managers, APPLY_FIELD_MANAGER) {
                live = Some(
                    self.json_patch(&target, vec![operation], "metadata.managedFields takeover")
                        .await?,
                );
                patched = true;
            }
        }

        let dry_run = match self.dry_run(&target).await {
            Ok(dry_run) => dry_run,
            Err(error) if live.is_some() && self.recreates(desired, live.as_ref(), &error) => {
                self.delete_for_recreate(&target).await?;
                live = None;
                self.dry_run(&target)
                    .await
                    .map_err(|source| ApplyError::DryRun {
                        object: object.clone(),
                        source,
                    })?
            }
            Err(source) => return Err(ApplyError::DryRun { object, source }),
        };

        if let Some(current) = &live
            && !merged(desired, current)
        {
            let mut operations = remove_stale_metadata(current);
            let managers = cleanup_managers(APPLY_FIELD_MANAGER, &self.options.override_managers);
            operations.extend(take_over(current, &managers, APPLY_FIELD_MANAGER));
            if !operations.is_empty() {
                live = Some(
                    self.json_patch(&target, operations, "metadata.managedFields cleanup")
                        .await?,
                );
                patched = true;
            }
        }

        let created = dry_run
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        let drifted = match &live {
            Some(current) => ignore::try_has_drifted(current, &dry_run, &self.options.ignore)
                .map_err(|source| ApplyError::Ignore {
                    object: object.clone(),
                    source,
                })?,
            None => true,
        };
        let migrate_string_data = live.as_ref().is_some_and(|current| {
            super::normalize::owns_stale_string_data(current, desired, APPLY_FIELD_MANAGER)
        });
        if !patched && !drifted && !migrate_string_data {
            if let Some(current) = &live
                && owned_fields(current, APPLY_FIELD_MANAGER)
                    == owned_fields(&dry_run, APPLY_FIELD_MANAGER)
                && let Some(version) = current
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .and_then(Revision::parse)
            {
                self.remember(&target, version);
            }
            return Ok(done(target.id, Action::Unchanged));
        }
        let drift = match &read {
            Some(read) if !created => self.drift_between(desired, read, &dry_run).ok(),
            _ => None,
        };
        let mut configuration = target.configuration.clone();
        if let Some(current) = &live
            && !created
            && !self.options.ignore.is_empty()
        {
            let resolutions = ignore::resolve_drifted_paths(
                current,
                &dry_run,
                &self.options.ignore,
                APPLY_FIELD_MANAGER,
            );
            ignore::try_apply_resolutions(&mut configuration, &resolutions).map_err(|source| {
                ApplyError::Ignore {
                    object: object.clone(),
                    source,
                }
            })?;
        }
        Ok(Planned::Apply {
            target,
            configuration,
            action: if created {
                Action::Created
            } else {
                Action::Configured
            },
            drift,
        })
    }

    /// Detect-only: the object as it is, compared with the dry-run of its configuration
    /// without any write. Drifted (or deleted), it is left as it is and reported; otherwise
    /// it is unchanged, whatever bookkeeping of managed fields an apply would have done.
    async fn detect(&self, target: Target, live: Option<Value>) -> Result<Planned, ApplyError> {
        let Some(live) = live else {
            return Ok(Planned::Done(Change {
                drift: Some(Drift::deleted()),
                ..Change::new(target.id, Action::Drifted)
            }));
        };
        let object = target.id.describe();
        let dry_run = self
            .dry_run(&target)
            .await
            .map_err(|source| ApplyError::DryRun {
                object: object.clone(),
                source,
            })?;
        let drift = self
            .drift_between(&target.configuration, &live, &dry_run)
            .map_err(|source| ApplyError::Ignore { object, source })?;
        if !drift.is_empty() {
            return Ok(Planned::Done(Change {
                drift: Some(drift),
                ..Change::new(target.id, Action::Drifted)
            }));
        }
        if owned_fields(&live, APPLY_FIELD_MANAGER) == owned_fields(&dry_run, APPLY_FIELD_MANAGER)
            && let Some(version) = live
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .and_then(Revision::parse)
        {
            self.remember(&target, version);
        }
        Ok(done(target.id, Action::Unchanged))
    }

    /// What applying `desired` would change of `live`, as its dry-run `dry_run` shows, and
    /// who wrote each changed field (`spec.ignore` rules and taken-over managers applied).
    pub(super) fn drift_between(
        &self,
        desired: &Value,
        live: &Value,
        dry_run: &Value,
    ) -> Result<Drift, IgnorePatchError> {
        let taken_over = self.taken_over(desired, live);
        drift_of(
            live,
            dry_run,
            &self.options.ignore,
            APPLY_FIELD_MANAGER,
            &taken_over,
        )
    }

    /// The managers whose fields the apply stage takes over before or after the dry-run;
    /// none under `ssa: Merge`.
    fn taken_over(&self, desired: &Value, live: &Value) -> Vec<FieldManager> {
        if merged(desired, live) {
            return Vec::new();
        }
        let mut managers = before_dry_run_managers(&self.options.override_managers_before_dry_run);
        managers.extend(cleanup_managers(
            APPLY_FIELD_MANAGER,
            &self.options.override_managers,
        ));
        managers
    }

    /// Applies a validated object.
    pub(super) async fn write(&self, planned: Planned) -> Result<Change, ApplyError> {
        let (target, configuration, action, drift) = match planned {
            Planned::Done(change) => return Ok(change),
            Planned::Apply {
                target,
                configuration,
                action,
                drift,
            } => (target, configuration, action, drift),
            // `reassert` has turned every one of these into something else.
            Planned::Reassert { target, .. } => {
                let planned = Box::pin(self.plan(target)).await?;
                return Box::pin(self.write(planned)).await;
            }
        };
        let params = PatchParams::apply(APPLY_FIELD_MANAGER).force();
        let applied = target
            .api
            .patch(&target.name, &params, &Patch::Apply(&configuration))
            .await
            .map_err(|source| ApplyError::Apply {
                object: target.id.describe(),
                source,
            })?;
        if configuration == target.configuration {
            self.record(&target, &applied);
        }
        Ok(Change {
            id: target.id,
            action,
            generation: applied.metadata.generation,
            drift,
        })
    }

    pub(super) async fn dry_run(&self, target: &Target) -> Result<Value, kube::Error> {
        let mut params = PatchParams::apply(APPLY_FIELD_MANAGER).force();
        params.dry_run = true;
        let dry_run = target
            .api
            .patch(&target.name, &params, &Patch::Apply(&target.configuration))
            .await?;
        serde_json::to_value(dry_run).map_err(kube::Error::SerdeError)
    }

    /// Whether Flux's controller would delete and recreate the object after `error`: an
    /// immutable field change (as kubectl detects it) with force set on the Kustomization,
    /// the built object or the live one.
    fn recreates(&self, desired: &Value, live: Option<&Value>, error: &kube::Error) -> bool {
        let forced = self.options.force
            || has_switch(desired, FORCE_ANNOTATION, ENABLED_VALUE)
            || live.is_some_and(|l| has_switch(l, FORCE_ANNOTATION, ENABLED_VALUE));
        forced && is_immutable_error(error)
    }

    async fn delete_for_recreate(&self, target: &Target) -> Result<(), ApplyError> {
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..Default::default()
        };
        match target.api.delete(&target.name, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(source) => {
                return Err(ApplyError::Recreate {
                    object: target.id.describe(),
                    source,
                });
            }
        }
        let deadline = tokio::time::Instant::now() + self.timeout;
        while tokio::time::Instant::now() < deadline {
            if matches!(target.api.get_opt(&target.name).await, Ok(None)) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Ok(())
    }

    async fn json_patch(
        &self,
        target: &Target,
        operations: Vec<Value>,
        step: &'static str,
    ) -> Result<Value, ApplyError> {
        let failed = |source| ApplyError::Metadata {
            object: target.id.describe(),
            step,
            source,
        };
        let patch: json_patch::Patch = serde_json::from_value(Value::Array(operations))
            .map_err(|e| failed(kube::Error::SerdeError(e)))?;
        let patched = target
            .api
            .patch(
                &target.name,
                &PatchParams::apply(APPLY_FIELD_MANAGER),
                &Patch::Json::<()>(patch),
            )
            .await
            .map_err(failed)?;
        serde_json::to_value(patched).map_err(|e| failed(kube::Error::SerdeError(e)))
    }

    fn record(&self, target: &Target, applied: &DynamicObject) {
        if let Some(version) = applied
            .resource_version()
            .as_deref()
            .and_then(Revision::parse)
        {
            self.remember(target, version);
        }
    }

    fn remember(&self, target: &Target, resource_version: Revision) {
        // The kind is watched even when this object keeps no record: its writes are seen.
        if let Some(live) = &self.options.live_versions {
            live.watch(&target.resource);
        }
        if !self
            .options
            .ignore
            .paths_for(&target.configuration)
            .is_empty()
        {
            return;
        }
        if let Ok(mut recorded) = self.recorded.lock() {
            recorded.insert(
                &target.id,
                AppliedRecord {
                    configuration: target.hash,
                    resource_version,
                },
            );
        }
    }
}

/// Flux's skip switches: `reconcile: disabled` or `ssa: Ignore` on the built or the live
/// object, `ssa: IfNotPresent` on the built object when the live one exists.
pub(super) fn skipped(desired: &Value, live: Option<&Value>) -> bool {
    match policy(desired) {
        Policy::Skip => true,
        Policy::IfNotPresent => live.is_some(),
        Policy::Apply => live.is_some_and(|live| policy(live) == Policy::Skip),
    }
}

/// `ssa: Merge` on either object: fields of other managers are left to them.
fn merged(desired: &Value, live: &Value) -> bool {
    has_switch(desired, SSA_ANNOTATION, "merge") || has_switch(live, SSA_ANNOTATION, "merge")
}

fn done(id: ObjectId, action: Action) -> Planned {
    Planned::Done(Change::new(id, action))
}

/// How the built object asks to be applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    Apply,
    IfNotPresent,
    Skip,
}

fn policy(desired: &Value) -> Policy {
    if has_switch(desired, RECONCILE_ANNOTATION, DISABLED_VALUE)
        || has_switch(desired, SSA_ANNOTATION, "ignore")
    {
        Policy::Skip
    } else if has_switch(desired, SSA_ANNOTATION, "ifnotpresent") {
        Policy::IfNotPresent
    } else {
        Policy::Apply
    }
}

/// kubectl's test for an immutable field change, which Flux's controller uses: a conflict or
/// an invalid object, or a message from an admission webhook or CEL rule saying so.
fn is_immutable_error(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => {
            status.code == 409
                || status.code == 422
                || status.reason == "Conflict"
                || status.reason == "Invalid"
                || status.message.contains("is immutable")
                || status.message.contains("immutable field")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn immutable_errors_are_detected_as_kubectl_does() {
        let status = |code: u16, reason: &str, message: &str| {
            kube::Error::Api(Box::new(
                kube::core::Status::failure(message, reason).with_code(code),
            ))
        };
        assert!(is_immutable_error(&status(
            422,
            "Invalid",
            "Job.batch \"x\" is invalid: spec.template: Invalid value: field is immutable"
        )));
        assert!(is_immutable_error(&status(409, "Conflict", "conflict")));
        assert!(is_immutable_error(&status(
            400,
            "BadRequest",
            "admission webhook denied: immutable field changed"
        )));
        assert!(!is_immutable_error(&status(403, "Forbidden", "denied")));
    }

    #[test]
    fn policies_come_from_the_built_object() {
        let with = |key: &str, value: &str| json!({"metadata": {"annotations": {key: value}}});
        assert_eq!(policy(&json!({"metadata": {}})), Policy::Apply);
        assert_eq!(
            policy(&with(SSA_ANNOTATION, "IfNotPresent")),
            Policy::IfNotPresent
        );
        assert_eq!(policy(&with(SSA_ANNOTATION, "Ignore")), Policy::Skip);
        assert_eq!(
            policy(&with(RECONCILE_ANNOTATION, "Disabled")),
            Policy::Skip
        );
        assert_eq!(policy(&with(SSA_ANNOTATION, "Merge")), Policy::Apply);
    }
}
