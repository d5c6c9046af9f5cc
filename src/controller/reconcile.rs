//! The reconcile of one Kustomization: source -> decrypt -> build -> substitute -> apply ->
//! health -> prune -> status. Each stage is one call; a failed stage stops the pipeline
//! before anything from that build is applied or pruned.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action as Requeue;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::context::Context;
use super::decryption;
use super::events::Severity;
use super::schedule;
use super::status;
use super::variables;
use crate::api::duration;
use crate::api::kustomization::{DeletionPolicy, SourceKind};
use crate::api::names::{FINALIZER, reason};
use crate::api::source::{Artifact, artifact_of, source_version};
use crate::api::{Kustomization, KustomizationStatus, ResourceRef};
use crate::apply::{Applier, ApplyError, ChangeSet, ObjectId, Owner, stale_objects};
use crate::build::{self, BuildError};
use crate::decrypt::Keyring;
use crate::manifest::Object;
use crate::source::{FetchError, PathError, resolve_path};

/// Errors that end a reconcile without a verdict on the Kustomization (the API server was
/// unreachable, a status write conflicted, ...). They are retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// A request for the controller's own bookkeeping failed.
    #[error("{action} failed: {source}")]
    Kube {
        /// What was being done.
        action: &'static str,
        /// The API error.
        source: kube::Error,
    },
    /// Objects could not be pruned during finalization.
    #[error("finalizing failed: {0}")]
    Finalize(#[from] ApplyError),
}

/// A failed stage: the Ready reason Flux uses for it and a message naming what is at fault.
#[derive(Debug)]
struct Failure {
    reason: &'static str,
    message: String,
}

impl Failure {
    fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Failure {
            reason,
            message: message.into(),
        }
    }

    /// Spec fields whose behaviour this controller does not have yet; `subject` names them
    /// with their verb (`spec.kubeConfig is`).
    fn unsupported(reason: &'static str, subject: &str) -> Self {
        Failure::new(
            reason,
            format!("{subject} not supported by this controller yet"),
        )
    }
}

/// What a successful pipeline run produced.
struct Applied {
    revision: String,
    origin_revision: Option<String>,
    inventory: Vec<ResourceRef>,
    changes: ChangeSet,
}

/// Reconciles one Kustomization.
pub async fn reconcile(
    cached: Arc<Kustomization>,
    ctx: Arc<Context>,
) -> Result<Requeue, ReconcileError> {
    let namespace = cached.namespace().unwrap_or_default();
    let api: Api<Kustomization> = Api::namespaced(ctx.client.clone(), &namespace);
    // The watch cache may not hold the status this controller wrote last, and pruning
    // against an older inventory would orphan objects: read the object itself.
    let Some(ks) =
        api.get_opt(&cached.name_any())
            .await
            .map_err(|source| ReconcileError::Kube {
                action: "reading the Kustomization",
                source,
            })?
    else {
        return Ok(Requeue::await_change());
    };

    if ks.meta().deletion_timestamp.is_some() {
        return finalize(&api, &ks, &ctx).await;
    }
    if !ks.finalizers().iter().any(|f| f == FINALIZER) {
        add_finalizer(&api, &ks).await?;
    }
    if ks.spec.suspend == Some(true) {
        tracing::info!(kustomization = %ks.name_any(), namespace, "reconciliation is suspended for this object");
        return Ok(Requeue::await_change());
    }

    let started = Instant::now();
    let mut status = ks.status.clone().unwrap_or_default();
    let outcome = run_pipeline(&api, &ks, &ctx, &mut status).await;
    status::record_requested_at(&ks, &mut status);
    let interval = duration::parse(&ks.spec.interval).unwrap_or(Duration::from_secs(600));
    let requeue = match outcome {
        Ok(applied) => {
            status::mark_ready(
                &ks,
                &mut status,
                &applied.revision,
                applied.origin_revision.as_deref(),
            );
            status.inventory = Some(crate::api::kustomization::ResourceInventory {
                entries: applied.inventory,
            });
            status::write(&api, &ks, &status)
                .await
                .map_err(|source| ReconcileError::Kube {
                    action: "status update",
                    source,
                })?;
            if applied.changes.has_changes() {
                let summary = applied.changes.summary();
                ctx.events
                    .publish(
                        &ks,
                        Severity::Info,
                        reason::RECONCILIATION_SUCCEEDED,
                        &summary,
                        Some(&applied.revision),
                    )
                    .await;
            }
            let next = schedule::with_jitter(interval, ctx.settings.interval_jitter_percentage);
            let message = format!(
                "Reconciliation finished in {}, next run in {}",
                duration::format(started.elapsed()),
                duration::format(interval)
            );
            tracing::info!(kustomization = %ks.name_any(), namespace, revision = %applied.revision, "{message}");
            ctx.events
                .publish(
                    &ks,
                    Severity::Info,
                    reason::RECONCILIATION_SUCCEEDED,
                    &message,
                    Some(&applied.revision),
                )
                .await;
            next
        }
        Err(failure) => {
            status::mark_failed(&ks, &mut status, failure.reason, &failure.message);
            status::write(&api, &ks, &status)
                .await
                .map_err(|source| ReconcileError::Kube {
                    action: "status update",
                    source,
                })?;
            tracing::error!(kustomization = %ks.name_any(), namespace, reason = failure.reason, "{}", failure.message);
            let revision = status.last_attempted_revision.clone();
            ctx.events
                .publish(
                    &ks,
                    Severity::Error,
                    failure.reason,
                    &failure.message,
                    revision.as_deref(),
                )
                .await;
            ks.spec
                .retry_interval
                .as_deref()
                .and_then(|r| duration::parse(r).ok())
                .unwrap_or(interval)
        }
    };
    ctx.metrics
        .observe_reconcile(&namespace, &ks.name_any(), started.elapsed());
    Ok(Requeue::requeue(requeue))
}

/// The pipeline proper. Progress is written to status once the revision is known.
async fn run_pipeline(
    api: &Api<Kustomization>,
    ks: &Kustomization,
    ctx: &Context,
    status: &mut KustomizationStatus,
) -> Result<Applied, Failure> {
    refuse_unsupported_fields(ks)?;
    let artifact = get_artifact(ks, ctx).await?;
    let revision = artifact.revision.clone();
    status.last_attempted_revision = Some(revision.clone());
    let timeout = reconcile_timeout(ks);
    let step = format!(
        "Fetching manifests for revision {revision} with a timeout of {}",
        duration::format(timeout)
    );
    status::mark_progressing(ks, status, &revision, &step);
    status::write(api, ks, status).await.map_err(|e| {
        Failure::new(
            reason::RECONCILIATION_FAILED,
            format!("status update failed: {e}"),
        )
    })?;

    let workdir = tempfile::Builder::new()
        .prefix("kustomization-")
        .tempdir()
        .map_err(|e| {
            Failure::new(
                reason::ARTIFACT_FAILED,
                format!("failed to create a temporary directory: {e}"),
            )
        })?;
    fetch(ctx, &artifact, workdir.path()).await?;
    let keys = decryption_keys(ks, ctx).await?;
    let objects = build(ks, workdir.path(), keys.as_ref())?;
    drop(keys);
    let objects = substitute(ks, ctx, objects).await?;
    drop(workdir);
    refuse_encrypted_secrets(&objects)?;

    let applier = Applier::new(
        ctx.client.clone(),
        owner(ks),
        ctx.settings.concurrent_ssa,
        ctx.settings.custom_apply_stage_kinds.clone(),
        ks.spec.force,
        timeout,
    );
    let mut changes = apply(&applier, objects, timeout).await?;
    check_health(ks)?;
    let inventory: Vec<ObjectId> = changes.0.iter().map(|c| c.id.clone()).collect();
    if ks.spec.prune {
        let pruned = prune(&applier, status, &inventory).await?;
        changes.0.extend(pruned.0);
    }
    Ok(Applied {
        revision,
        origin_revision: artifact.origin_revision().map(str::to_string),
        inventory: inventory.iter().map(ObjectId::to_ref).collect(),
        changes,
    })
}

/// Fields whose behaviour this controller does not have yet. Ignoring them would apply to
/// the wrong cluster, as the wrong identity, before dependencies, or over ignored fields, so
/// the Kustomization fails instead, naming the field.
fn refuse_unsupported_fields(ks: &Kustomization) -> Result<(), Failure> {
    let spec = &ks.spec;
    let non_empty = |s: &Option<String>| s.as_deref().is_some_and(|s| !s.is_empty());
    let unsupported = [
        ("kubeConfig", spec.kube_config.is_some()),
        ("serviceAccountName", non_empty(&spec.service_account_name)),
        (
            "dependsOn",
            spec.depends_on.as_ref().is_some_and(|d| !d.is_empty()),
        ),
        (
            "ignore",
            spec.ignore.as_ref().is_some_and(|i| !i.is_empty()),
        ),
    ];
    match unsupported.into_iter().find(|(_, used)| *used) {
        Some((field, _)) => Err(Failure::unsupported(
            reason::RECONCILIATION_FAILED,
            &format!("spec.{field} is"),
        )),
        None => Ok(()),
    }
}

/// Looks up the source and its artifact, enforcing the cross-namespace policy.
async fn get_artifact(ks: &Kustomization, ctx: &Context) -> Result<Artifact, Failure> {
    let source_ref = &ks.spec.source_ref;
    let ks_namespace = ks.namespace().unwrap_or_default();
    let namespace = source_ref
        .namespace
        .clone()
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| ks_namespace.clone());
    let display = format!("{}/{}/{}", source_ref.kind, namespace, source_ref.name);
    if ctx.settings.no_cross_namespace_refs && namespace != ks_namespace {
        return Err(Failure::new(
            reason::ACCESS_DENIED,
            format!("cannot access {display}, cross-namespace references have been disabled"),
        ));
    }
    if source_ref.kind == SourceKind::ExternalArtifact && !ctx.settings.allow_external_artifact {
        return Err(Failure::new(
            reason::ACCESS_DENIED,
            format!("source {display} is not allowed: enable the ExternalArtifact feature gate"),
        ));
    }
    let version = source_version(source_ref.api_version.as_deref())
        .map_err(|e| Failure::new(reason::ARTIFACT_FAILED, e.to_string()))?;
    let api: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &namespace,
        &source_ref.kind.api_resource(version),
    );
    let source = match api.get_opt(&source_ref.name).await {
        Ok(Some(source)) => source,
        Ok(None) => {
            return Err(Failure::new(
                reason::ARTIFACT_FAILED,
                format!("Source '{display}' not found"),
            ));
        }
        Err(e) => {
            return Err(Failure::new(
                reason::ARTIFACT_FAILED,
                format!("failed to get source '{display}': {e}"),
            ));
        }
    };
    artifact_of(&source).ok_or_else(|| {
        Failure::new(
            reason::ARTIFACT_FAILED,
            format!("Source '{display}' is not ready, artifact not found"),
        )
    })
}

/// Stage `source`: download, verify and extract the artifact into `root`.
async fn fetch(ctx: &Context, artifact: &Artifact, root: &std::path::Path) -> Result<(), Failure> {
    let digest = artifact.digest.as_deref().unwrap_or("");
    ctx.fetcher
        .fetch(&artifact.url, digest, root)
        .await
        .map_err(|e: FetchError| Failure::new(reason::ARTIFACT_FAILED, e.to_string()))
}

/// Stage `decrypt` (keys): the SOPS keyring of `spec.decryption`, when there is one.
async fn decryption_keys(ks: &Kustomization, ctx: &Context) -> Result<Option<Keyring>, Failure> {
    if ks
        .spec
        .decryption
        .as_ref()
        .is_some_and(|d| d.service_account_name.is_some())
    {
        return Err(Failure::unsupported(
            reason::BUILD_FAILED,
            "spec.decryption.serviceAccountName (cloud KMS authentication) is",
        ));
    }
    decryption::load(&ctx.client, ks, ctx.settings.sops_age_secret.as_ref())
        .await
        .map_err(|e| Failure::new(reason::BUILD_FAILED, e.to_string()))
}

/// Stage `build` (with `decrypt`): the objects under `spec.path`, SOPS-encrypted sources
/// and objects decrypted with `keys`.
fn build(
    ks: &Kustomization,
    root: &std::path::Path,
    keys: Option<&Keyring>,
) -> Result<Vec<Object>, Failure> {
    let path = ks.spec.path.as_deref().unwrap_or("");
    let dir = resolve_path(root, path)
        .map_err(|e: PathError| Failure::new(reason::ARTIFACT_FAILED, e.to_string()))?;
    build::build(root, &dir, &ks.spec, keys)
        .map_err(|e: BuildError| Failure::new(reason::BUILD_FAILED, e.to_string()))
}

/// A Secret that is still SOPS-encrypted is never applied (Flux's check before apply).
fn refuse_encrypted_secrets(objects: &[Object]) -> Result<(), Failure> {
    match objects
        .iter()
        .find(|o| build::is_encrypted_secret(o) && !build::decrypt::is_decryption_disabled(o))
    {
        Some(secret) => Err(Failure::new(
            reason::RECONCILIATION_FAILED,
            format!(
                "{} is SOPS encrypted, configuring decryption is required for this secret to be reconciled",
                secret.describe()
            ),
        )),
        None => Ok(()),
    }
}

/// Stage `substitute`: `spec.postBuild` variables from the inline map and the referenced
/// ConfigMaps and Secrets, expanded in every object that has not opted out.
async fn substitute(
    ks: &Kustomization,
    ctx: &Context,
    objects: Vec<Object>,
) -> Result<Vec<Object>, Failure> {
    let Some(post_build) = &ks.spec.post_build else {
        return Ok(objects);
    };
    let vars = variables::load(&ctx.client, ks, post_build)
        .await
        .map_err(|e| Failure::new(reason::BUILD_FAILED, e.to_string()))?;
    let strategy = post_build.substitute_strategy.unwrap_or_default();
    build::substitute_objects(objects, &vars, strategy, ctx.settings.strict_substitution)
        .map_err(|e| Failure::new(reason::BUILD_FAILED, e.to_string()))
}

/// Stage `apply`, bounded by the reconcile timeout.
async fn apply(
    applier: &Applier,
    objects: Vec<Object>,
    timeout: Duration,
) -> Result<ChangeSet, Failure> {
    match tokio::time::timeout(timeout, applier.apply_all(objects)).await {
        Ok(Ok(changes)) => Ok(changes),
        Ok(Err(e)) => Err(Failure::new(reason::RECONCILIATION_FAILED, e.to_string())),
        Err(_) => Err(Failure::new(
            reason::RECONCILIATION_FAILED,
            format!("apply timed out after {}", duration::format(timeout)),
        )),
    }
}

/// Stage `health`: health assessment is not part of this controller yet, so a
/// Kustomization that asks for it is not reported ready without it.
fn check_health(ks: &Kustomization) -> Result<(), Failure> {
    let asks = ks.spec.wait == Some(true)
        || ks
            .spec
            .health_checks
            .as_ref()
            .is_some_and(|h| !h.is_empty());
    if asks {
        return Err(Failure::unsupported(
            reason::HEALTH_CHECK_FAILED,
            "spec.wait and spec.healthChecks are",
        ));
    }
    Ok(())
}

/// Stage `prune`: deletes what left the inventory.
async fn prune(
    applier: &Applier,
    status: &KustomizationStatus,
    inventory: &[ObjectId],
) -> Result<ChangeSet, Failure> {
    let previous = previous_inventory(status);
    let stale = stale_objects(&previous, inventory);
    applier
        .prune(&stale)
        .await
        .map_err(|e| Failure::new(reason::PRUNE_FAILED, e.to_string()))
}

fn previous_inventory(status: &KustomizationStatus) -> Vec<ObjectId> {
    status
        .inventory
        .as_ref()
        .map(|inventory| {
            inventory
                .entries
                .iter()
                .filter_map(|entry| ObjectId::from_ref(entry).ok())
                .collect()
        })
        .unwrap_or_default()
}

fn owner(ks: &Kustomization) -> Owner {
    Owner {
        name: ks.name_any(),
        namespace: ks.namespace().unwrap_or_default(),
    }
}

/// `spec.timeout`, or Flux's default: the interval less 30 s, never below 30 s.
fn reconcile_timeout(ks: &Kustomization) -> Duration {
    if let Some(timeout) = ks
        .spec
        .timeout
        .as_deref()
        .and_then(|t| duration::parse(t).ok())
    {
        return timeout;
    }
    let interval = duration::parse(&ks.spec.interval).unwrap_or(Duration::from_secs(600));
    interval
        .saturating_sub(Duration::from_secs(30))
        .max(Duration::from_secs(30))
}

/// Adds the finalizer with a JSON patch, so that a concurrent change to other fields of the
/// object cannot make it conflict.
async fn add_finalizer(api: &Api<Kustomization>, ks: &Kustomization) -> Result<(), ReconcileError> {
    let operation = if ks.meta().finalizers.is_none() {
        json!({"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]})
    } else {
        json!({"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER})
    };
    json_patch(api, ks, json!([operation]))
        .await
        .map_err(|source| ReconcileError::Kube {
            action: "adding the finalizer",
            source,
        })
}

/// Removes the finalizer, testing that it is still where it was read.
async fn remove_finalizer(
    api: &Api<Kustomization>,
    ks: &Kustomization,
) -> Result<(), ReconcileError> {
    let Some(index) = ks.finalizers().iter().position(|f| f == FINALIZER) else {
        return Ok(());
    };
    let path = format!("/metadata/finalizers/{index}");
    let patch =
        json!([{"op": "test", "path": path, "value": FINALIZER}, {"op": "remove", "path": path}]);
    match json_patch(api, ks, patch).await {
        Ok(()) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(ReconcileError::Kube {
            action: "removing the finalizer",
            source,
        }),
    }
}

async fn json_patch(
    api: &Api<Kustomization>,
    ks: &Kustomization,
    patch: serde_json::Value,
) -> Result<(), kube::Error> {
    let patch: json_patch::Patch =
        serde_json::from_value(patch).map_err(kube::Error::SerdeError)?;
    api.patch::<Kustomization>(&ks.name_any(), &PatchParams::default(), &Patch::Json(patch))
        .await?;
    Ok(())
}

/// Deletion: prune the inventory when the deletion policy says so, then release the
/// finalizer.
async fn finalize(
    api: &Api<Kustomization>,
    ks: &Kustomization,
    ctx: &Context,
) -> Result<Requeue, ReconcileError> {
    if !ks.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(Requeue::await_change());
    }
    let policy = ks.spec.deletion_policy.unwrap_or_default();
    let delete = match policy {
        DeletionPolicy::MirrorPrune => ks.spec.prune,
        DeletionPolicy::Delete | DeletionPolicy::WaitForTermination => true,
        DeletionPolicy::Orphan => false,
    };
    if delete && ks.spec.suspend != Some(true) {
        let status = ks.status.clone().unwrap_or_default();
        let inventory = previous_inventory(&status);
        let applier = Applier::new(
            ctx.client.clone(),
            owner(ks),
            ctx.settings.concurrent_ssa,
            ctx.settings.custom_apply_stage_kinds.clone(),
            false,
            reconcile_timeout(ks),
        );
        let changes = applier.prune(&inventory).await?;
        if policy == DeletionPolicy::WaitForTermination {
            let deleted: Vec<ObjectId> = changes
                .0
                .iter()
                .filter(|c| c.action == crate::apply::Action::Deleted)
                .map(|c| c.id.clone())
                .collect();
            applier.wait_until_deleted(&deleted).await?;
        }
        if changes.has_changes() {
            ctx.events
                .publish(
                    ks,
                    Severity::Info,
                    reason::SUCCEEDED,
                    &changes.summary(),
                    None,
                )
                .await;
        }
    }
    remove_finalizer(api, ks).await?;
    Ok(Requeue::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::KustomizationSpec;

    fn ks(interval: &str, timeout: Option<&str>) -> Kustomization {
        Kustomization::new(
            "app",
            KustomizationSpec {
                interval: interval.into(),
                timeout: timeout.map(str::to_string),
                ..Default::default()
            },
        )
    }

    #[test]
    fn timeout_defaults_like_flux() {
        assert_eq!(
            reconcile_timeout(&ks("10m", None)),
            Duration::from_secs(570)
        );
        assert_eq!(reconcile_timeout(&ks("40s", None)), Duration::from_secs(30));
        assert_eq!(
            reconcile_timeout(&ks("10m", Some("2m"))),
            Duration::from_secs(120)
        );
    }

    #[test]
    fn unbuilt_fields_are_refused_by_name() {
        let mut k = ks("1m", None);
        assert!(refuse_unsupported_fields(&k).is_ok());
        k.spec.service_account_name = Some("deployer".into());
        let failure = refuse_unsupported_fields(&k).unwrap_err();
        assert_eq!(failure.reason, reason::RECONCILIATION_FAILED);
        assert_eq!(
            failure.message,
            "spec.serviceAccountName is not supported by this controller yet"
        );
        k.spec.kube_config = Some(Default::default());
        assert!(
            refuse_unsupported_fields(&k)
                .unwrap_err()
                .message
                .contains("spec.kubeConfig")
        );
    }

    #[test]
    fn still_encrypted_secrets_are_never_applied() {
        let secret = |annotations: serde_json::Value| {
            Object::new(
                json!({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": "db", "namespace": "apps", "annotations": annotations},
                    "data": {"k": "ENC[AES256_GCM,data:x,iv:y,tag:z,type:str]"},
                    "sops": {"mac": "ENC[...]"}})
                .as_object()
                .unwrap()
                .clone(),
            )
        };
        let failure = refuse_encrypted_secrets(&[secret(json!({}))]).unwrap_err();
        assert_eq!(failure.reason, reason::RECONCILIATION_FAILED);
        assert!(
            failure
                .message
                .starts_with("Secret/apps/db is SOPS encrypted")
        );
        let opted_out = secret(json!({"kustomize.toolkit.fluxcd.io/decrypt": "Disabled"}));
        assert!(refuse_encrypted_secrets(&[opted_out]).is_ok());
    }

    #[test]
    fn unbuilt_stages_refuse_instead_of_pretending() {
        let mut k = ks("1m", None);
        k.spec.wait = Some(true);
        assert_eq!(
            check_health(&k).unwrap_err().reason,
            reason::HEALTH_CHECK_FAILED
        );
    }
}
