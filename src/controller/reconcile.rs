//! The reconcile of one Kustomization: source -> decrypt -> build -> substitute -> apply ->
//! health -> prune -> status. Each stage is one call; a failed stage stops the pipeline
//! before anything from that build is applied or pruned.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;
use tokio::sync::OwnedSemaphorePermit;

use super::context::Context;
use super::dependencies::{self, DependencyError};
use super::detect::{self, Detection};
use super::drift;
use super::events::{self, Action as EventAction, InvolvedObject, Notice, Reference, Severity};
use super::history;
use super::outcome::{
    self, Decision, Facts, Failure, FailureKind, Level, LogLine, Next, Outcome, Schedule,
};
use super::reuse::{self, Inputs, LastBuild};
use super::schedule;
use super::sources::SourceReadError;
use super::status::{self, StatusWriter};
use crate::api::duration;
use crate::api::kustomization::ResourceInventory;
use crate::api::kustomization::{DeletionPolicy, SourceKind};
use crate::api::names::{FINALIZER, GROUP, reason};
use crate::api::source::{Artifact, source_version};
use crate::api::{ConditionStatus, Kustomization, KustomizationStatus};
use crate::client::api_message;
use crate::cluster::TargetCluster;
use crate::flags::DriftCorrection;
use crate::render::keys::ClusterKeys;
use crate::render::variables::ClusterVariables;
use crate::render::{self, Rendered, SecretValues};
use apply::Object;
use apply::wait::{Target, WaitError, WaitOptions};
use apply::{
    Action, AppliedObjects, Applier, ApplyError, ApplyOptions, ChangeSet, IgnoreRules, ObjectId,
    Owner, stale_objects,
};
use artifact::{DigestError, Extraction, FetchError, PathError, resolve_path};
use fluxcel::HealthCheckExprs;

/// Errors that end a reconcile without a verdict on the Kustomization (the API server was
/// unreachable, a status write conflicted, ...). They are retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// A request for the controller's own bookkeeping failed.
    #[error("{action} failed: {}", api_message(source))]
    Kube {
        /// What was being done.
        action: &'static str,
        /// The API error.
        source: kube::Error,
    },
    /// The reconcile panicked.
    #[error("reconcile panicked: {0}")]
    Panicked(String),
    /// Objects could not be pruned during finalization.
    #[error("finalizing failed: {0}")]
    Finalize(#[from] ApplyError),
    /// No client could be made to prune with during finalization.
    #[error("finalizing failed: {0}")]
    FinalizeClient(#[from] crate::cluster::ClusterError),
}

/// How a reconcile ended: what kube-runtime is to do next, and what the metrics count.
#[derive(Debug)]
pub struct Done {
    /// When to run again.
    pub action: Requeue,
    /// The delay `action` holds, which kube-runtime does not tell.
    pub requeue_after: Option<Duration>,
    /// The run ended on a terminal failure (Stalled), which no retry fixes.
    pub terminal: bool,
}

impl Done {
    fn await_change() -> Self {
        Done {
            action: Requeue::await_change(),
            requeue_after: None,
            terminal: false,
        }
    }

    fn after(delay: Duration) -> Self {
        Done {
            action: Requeue::requeue(delay),
            requeue_after: Some(delay),
            terminal: false,
        }
    }

    fn terminal() -> Self {
        Done {
            terminal: true,
            ..Done::await_change()
        }
    }
}

/// Reconciles one Kustomization. `permit` is one of the `--concurrent` permits; it is given
/// back before health checks wait.
pub async fn reconcile(
    cached: Arc<Kustomization>,
    ctx: Arc<Context>,
    permit: Option<OwnedSemaphorePermit>,
) -> Result<Done, ReconcileError> {
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
        return Ok(Done::await_change());
    };

    if ks.meta().deletion_timestamp.is_some() {
        return finalize(&api, &ks, &ctx).await;
    }
    if !ks.finalizers().iter().any(|f| f == FINALIZER) {
        add_finalizer(&api, &ks).await?;
    }
    let started = Instant::now();
    let mut status = ks.status.clone().unwrap_or_default();
    let mut run = Run::default();
    let writer = StatusWriter::new(api.clone(), &ks);
    let outcome = if ks.spec.suspend == Some(true) {
        Outcome::Suspended
    } else {
        let ran = run_pipeline(&writer, &ks, &ctx, &mut status, &mut run, permit).await;
        status::record_requested_at(&ks, &mut status);
        Outcome::Ran(ran)
    };
    let facts = Facts {
        revision: run.revision.as_deref(),
        origin_revision: run.origin_revision.as_deref(),
        elapsed: started.elapsed(),
        schedule: Schedule::of(&ks.spec),
        jitter_percentage: ctx.settings.interval_jitter_percentage,
        success_event: !ctx.settings.disable_commit_status_event,
    };
    let decision = outcome::decide(outcome, &facts);
    settle(&ks, &ctx, &run, &writer, status, decision, started).await
}

/// Carries out `decision`: writes the status it names, logs, emits its event, counts the run
/// and says when to run again.
async fn settle(
    ks: &Kustomization,
    ctx: &Context,
    run: &Run,
    writer: &StatusWriter,
    mut status: KustomizationStatus,
    decision: Decision,
    started: Instant,
) -> Result<Done, ReconcileError> {
    let Decision {
        status: change,
        event,
        log,
        next,
    } = decision;
    let name = ks.name_any();
    let namespace = ks.namespace().unwrap_or_default();
    if let Some(change) = &change {
        change.apply_to(ks, &mut status);
        write_status(writer, &status).await?;
    }
    match log {
        LogLine {
            level: Level::Info,
            revision: Some(revision),
            message,
            ..
        } => tracing::info!(kustomization = %name, namespace, revision = %revision, "{message}"),
        LogLine {
            level: Level::Info,
            message,
            ..
        } => tracing::info!(kustomization = %name, namespace, "{message}"),
        LogLine {
            level: Level::Error,
            reason,
            revision: Some(revision),
            message,
        } => {
            tracing::error!(kustomization = %name, namespace, reason = reason.unwrap_or_default(), revision = revision.as_str(), "{message}")
        }
        LogLine {
            level: Level::Error,
            reason,
            message,
            ..
        } => {
            tracing::error!(kustomization = %name, namespace, reason = reason.unwrap_or_default(), "{message}")
        }
    }
    if let Some(event) = event {
        let object = InvolvedObject::of(ks);
        let notice = Notice {
            severity: event.severity,
            action: event.action,
            reason: event.reason,
            message: &event.message,
            metadata: events::metadata(
                &object,
                run.revision.as_deref(),
                run.origin_revision.as_deref(),
                event.commit_status,
            ),
            related: run.source.as_ref(),
        };
        ctx.events.publish(&object, notice).await;
    }
    // A run that wrote no status (suspended) is not a reconcile the metrics count.
    if change.is_some() {
        ctx.metrics
            .observe_reconcile(&namespace, &name, started.elapsed());
    }
    Ok(match next {
        Next::AwaitChange => Done::await_change(),
        Next::Terminal => Done::terminal(),
        Next::After(delay) => Done::after(delay),
        Next::Jittered {
            interval,
            percentage,
        } => Done::after(schedule::with_jitter(interval, percentage)),
    })
}

/// Writes the final status of a run; a failure is retried with backoff.
async fn write_status(
    writer: &StatusWriter,
    status: &KustomizationStatus,
) -> Result<(), ReconcileError> {
    writer
        .write(status)
        .await
        .map_err(|source| ReconcileError::Kube {
            action: "status update",
            source,
        })
}

/// What a run learned that its events and final status need.
#[derive(Default)]
struct Run {
    /// The artifact revision, once the source was read.
    revision: Option<String>,
    /// The artifact's origin revision, when it has one.
    origin_revision: Option<String>,
    /// The source, once it was read: the related object of every later event.
    source: Option<Reference>,
}

/// The pipeline proper. Progress is written to status once the revision is known. `permit`
/// is held until everything but the health checks is done.
async fn run_pipeline(
    writer: &StatusWriter,
    ks: &Kustomization,
    ctx: &Context,
    status: &mut KustomizationStatus,
    run: &mut Run,
    permit: Option<OwnedSemaphorePermit>,
) -> Result<(), Failure> {
    let exprs = HealthCheckExprs::new(ks.spec.health_check_exprs.as_deref().unwrap_or(&[]))
        .map_err(|e| {
            Failure::terminal(reason::INVALID_CEL_EXPRESSION, e).during(EventAction::HealthCheck)
        })?;
    let (artifact, source) = get_artifact(ks, ctx).await?;
    run.source = Some(source);
    let revision = artifact.revision.clone();
    run.revision = Some(revision.clone());
    run.origin_revision = artifact.origin_revision().map(str::to_string);
    check_dependencies(ks, ctx, &revision)
        .await
        .map_err(|failure| failure.during(EventAction::CheckDependencies))?;

    let started = Instant::now();
    let timeout = reconcile_timeout(ks);
    let with_timeout = |step: &str| {
        format!(
            "{step} for revision {revision} with a timeout of {}",
            duration::format(timeout)
        )
    };
    status::mark_progressing(ks, status, &with_timeout("Fetching manifests"));
    writer.report_progress_after(status::PROGRESS_REPORT_DELAY, status.clone());

    let (cluster, build, digest, secrets) = match reused_build(ks, ctx, status, &artifact).await {
        Some((cluster, last)) => {
            tracing::debug!(kustomization = %ks.name_any(), namespace = ks.namespace().unwrap_or_default(), objects = status.inventory_objects().len(), %revision, "inputs unchanged and no object written since the last successful run: its build is reused, nothing is fetched, built or applied");
            status.last_attempted_revision = Some(revision.clone());
            status::mark_step(ks, status, &with_timeout("Building manifests"));
            let digest = last.digest.clone();
            (
                cluster,
                Build::Reused(last),
                digest,
                SecretValues::default(),
            )
        }
        None => {
            let extracted = fetch(ctx, ks, &artifact).await?;
            let dir = build_dir(ks, extracted.path())?;
            status.last_attempted_revision = Some(revision.clone());
            status::mark_step(ks, status, &with_timeout("Building manifests"));
            let cluster = target_cluster(ks, ctx).await?;
            // The render masks what it revealed out of its own errors; from here on, every
            // failure is masked with `secrets` before it is reported.
            let (
                Rendered {
                    objects,
                    digest,
                    secrets,
                    fetched_remote,
                },
                inputs,
            ) = render(ks, ctx, &artifact, extracted.path(), &dir).await?;
            let inputs = inputs.filter(|_| reuse::reusable(!secrets.is_empty(), fetched_remote));
            (cluster, Build::Fresh { objects, inputs }, digest, secrets)
        }
    };
    let next_build = match &build {
        Build::Fresh {
            objects,
            inputs: Some(inputs),
        } => Some(LastBuild {
            inputs: *inputs,
            digest: digest.clone(),
            jobs_with_ttl: jobs_with_ttl(objects),
        }),
        Build::Reused(last) => Some(last.clone()),
        Build::Fresh { inputs: None, .. } => None,
    };
    let redact = |failure: Failure| failure.redacted(&secrets);
    status::mark_step(ks, status, &with_timeout("Detecting drift"));
    let record = |status: &mut KustomizationStatus, outcome: &'static str| {
        let record = history::Record {
            digest: &digest,
            status: outcome,
            duration: started.elapsed(),
            revision: &revision,
            origin_revision: run.origin_revision.as_deref(),
        };
        history::upsert(
            status.history.get_or_insert_with(Vec::new),
            &record,
            k8s_openapi::jiff::Timestamp::now(),
        );
    };
    let applied = apply_prune_and_check(
        writer,
        ks,
        ctx,
        status,
        run,
        Applying {
            cluster: &cluster,
            build,
            digest: &digest,
            exprs: &exprs,
            timeout,
            permit,
            secrets: &secrets,
        },
    )
    .await
    .map_err(redact);
    match applied {
        Ok(()) => {
            record(status, reason::RECONCILIATION_SUCCEEDED);
            if let Some(build) = next_build {
                ctx.keep_build(ks, &cluster.key, build);
            }
            Ok(())
        }
        Err(failure) if matches!(failure.kind, FailureKind::Canceled { .. }) => Err(failure),
        Err(failure) => {
            record(status, failure.reason);
            Err(failure)
        }
    }
}

/// The objects a run applies: built now, or the last run's build, reused.
enum Build {
    /// Built by this run.
    Fresh {
        /// The objects rendered.
        objects: Vec<Object>,
        /// The inputs it was built from, when later runs with the same inputs may reuse it
        /// (see [`reuse::reusable`]).
        inputs: Option<Inputs>,
    },
    /// The last successful run's, whose inputs are this run's and whose objects nobody
    /// wrote since: applying it again would change nothing.
    Reused(LastBuild),
}

/// The last successful build of `ks`, with the cluster it was applied on, when this run
/// may reuse it (see [`reuse`]): a periodic run, with the same inputs (read only when
/// there is a build to reuse), none of whose inventory objects anybody wrote since they
/// were applied, as the watches of their versions tell.
async fn reused_build(
    ks: &Kustomization,
    ctx: &Context,
    status: &KustomizationStatus,
    artifact: &Artifact,
) -> Option<(TargetCluster, LastBuild)> {
    if status::reconcile_requested(ks)
        || ctx.settings.migrate_api_version
        || !ctx.has_reusable_build(ks)
    {
        return None;
    }
    let inputs = reuse::inputs(ctx.clusters.reads(), ks, artifact).await?;
    let cluster = target_cluster(ks, ctx).await.ok()?;
    let live = cluster.live_versions.clone()?;
    let inventory = status.inventory_objects();
    let last = ctx.reusable_build(ks, &cluster.key, inputs, |records| {
        records.all_unchanged_since(&inventory, |id| live.version_of(id))
    })?;
    Some((cluster, last))
}

/// What the apply, prune and health stages work on.
struct Applying<'a> {
    cluster: &'a TargetCluster,
    build: Build,
    /// The build's digest (`status.history`).
    digest: &'a str,
    exprs: &'a HealthCheckExprs,
    timeout: Duration,
    permit: Option<OwnedSemaphorePermit>,
    secrets: &'a SecretValues,
}

/// Stages `apply`, `prune` and `health`, each change reported in an event as Flux does.
async fn apply_prune_and_check(
    writer: &StatusWriter,
    ks: &Kustomization,
    ctx: &Context,
    status: &mut KustomizationStatus,
    run: &Run,
    applying: Applying<'_>,
) -> Result<(), Failure> {
    let Applying {
        cluster,
        build,
        digest,
        exprs,
        timeout,
        permit,
        secrets,
    } = applying;
    let revision = run.revision.as_deref().unwrap_or("");
    let inventory_before = status.inventory.clone();
    let detection = detect::mode(ks);
    let mut options = apply_options(ks, ctx, cluster, inventory_before.as_ref())?;
    options.report_drift =
        detection == Detection::Warn && detect::inputs_unchanged(ks, status, revision, digest);
    let previous = ctx.take_applied(ks, &cluster.key);
    // A reused build applies nothing, so what was recorded stays true.
    let kept = matches!(build, Build::Reused(_)).then(|| previous.clone());
    let applier = Applier::new(
        cluster.client.clone(),
        owner(ks),
        ctx.settings.concurrent_ssa,
        options,
        timeout,
        previous,
    );
    let (applied, jobs_with_ttl) = match build {
        Build::Fresh { objects, .. } => {
            refuse_encrypted_secrets(&objects)?;
            record_intent(writer, status, &objects).await?;
            let jobs_with_ttl = jobs_with_ttl(&objects);
            let applied = apply(&applier, objects, timeout)
                .await
                .map(|changes| worded_for(ks, ctx, changes));
            // Each record is a fact about one object, kept whether the apply succeeded or not.
            ctx.put_applied(ks, &cluster.key, applier.take_records(), None);
            (applied, jobs_with_ttl)
        }
        Build::Reused(last) => {
            let unchanged = status
                .inventory_objects()
                .into_iter()
                .map(|id| apply::Change::new(id, Action::Unchanged));
            ctx.put_applied(ks, &cluster.key, kept.unwrap_or_default(), None);
            (Ok(ChangeSet(unchanged.collect())), last.jobs_with_ttl)
        }
    };
    let changes = match applied {
        Ok(changes) => changes,
        Err(ApplyFailure {
            failure,
            applied: Some(applied),
        }) => {
            // The intent goes; what this run did apply stays known.
            status.inventory = inventory_before;
            let previous = status.inventory_objects();
            let additions = stale_objects(&applied, &previous);
            if !additions.is_empty() {
                let known: Vec<ObjectId> = previous.into_iter().chain(additions).collect();
                set_inventory(status, &known);
            }
            return Err(failure);
        }
        Err(ApplyFailure { failure, .. }) => return Err(failure),
    };
    tracing::debug!(kustomization = %ks.name_any(), namespace = ks.namespace().unwrap_or_default(), objects = changes.0.len(), unchanged_by_watch = applier.confirmed_by_watch(), "objects confirmed unchanged by their watched resourceVersion, without a request");
    if !changes.0.is_empty() {
        let output = changes.log_output(ctx.settings.group_change_log);
        tracing::info!(kustomization = %ks.name_any(), namespace = ks.namespace().unwrap_or_default(), %output, %revision, "server-side apply completed");
    }
    report_drift(ks, ctx, status, run, &changes, detection, secrets).await;
    let drifted = changes.has_changes();
    if drifted {
        let summary = secrets.redact(&changes.summary());
        ctx.events
            .publish(
                &InvolvedObject::of(ks),
                progress(ks, run, EventAction::Apply, &summary),
            )
            .await;
    }
    let inventory: Vec<ObjectId> = changes.0.iter().map(|c| c.id.clone()).collect();
    let previous = status.inventory_objects();
    let stale = stale_objects(&previous, &inventory);
    // Until the prune is done, the stale objects stay in the inventory: a failed prune or a
    // crash leaves them to be pruned by the next reconcile, never orphaned.
    let pending: Vec<ObjectId> = inventory.iter().chain(&stale).cloned().collect();
    set_inventory(status, &pending);
    if ks.spec.prune {
        let pruned = prune(&applier, &stale).await?;
        if !pruned.0.is_empty() {
            tracing::info!(kustomization = %ks.name_any(), "garbage collection completed: {}", pruned.prune_summary());
            let summary = pruned.prune_summary();
            ctx.events
                .publish(
                    &InvolvedObject::of(ks),
                    progress(ks, run, EventAction::Prune, &summary),
                )
                .await;
        }
    }
    set_inventory(status, &inventory);
    drop(permit);

    check_health(
        writer,
        ks,
        ctx,
        status,
        HealthCheck {
            cluster,
            applier: &applier,
            changes: &changes,
            jobs_with_ttl,
            revision,
            origin_revision: run.origin_revision.as_deref(),
            source: run.source.as_ref(),
            exprs,
            timeout,
            drifted,
            secrets,
        },
    )
    .await
}

/// In warn mode, records the objects left drifted in the `Drifted` condition and tells a new
/// set of them in a Warning event, counted in `gotk_drift_detected_total`; in correcting
/// mode, removes the condition.
async fn report_drift(
    ks: &Kustomization,
    ctx: &Context,
    status: &mut KustomizationStatus,
    run: &Run,
    changes: &ChangeSet,
    detection: Detection,
    secrets: &SecretValues,
) {
    let report = detect::Report::of(changes);
    if detection == Detection::Enabled {
        ctx.forget_drift_report(ks);
        detect::mark(ks, status, detection, &report);
        return;
    }
    let fingerprint = (!report.is_empty()).then(|| report.fingerprint());
    let previous = ctx.swap_drift_report(ks, fingerprint);
    let new = fingerprint.is_some_and(|fingerprint| {
        detect::is_new(
            previous,
            detect::condition(status),
            fingerprint,
            &report.condition_message(),
        )
    });
    detect::mark(ks, status, detection, &report);
    if !new {
        return;
    }
    let (name, namespace) = (ks.name_any(), ks.namespace().unwrap_or_default());
    let message = secrets.redact(&report.event_message());
    tracing::warn!(kustomization = %name, namespace, revision = run.revision.as_deref().unwrap_or_default(), "{message}");
    ctx.metrics.count_drift(&namespace, &name);
    let object = InvolvedObject::of(ks);
    let notice = Notice {
        severity: Severity::Error,
        action: EventAction::Apply,
        reason: detect::DRIFT_DETECTED,
        message: &message,
        metadata: events::metadata(
            &object,
            run.revision.as_deref(),
            run.origin_revision.as_deref(),
            false,
        ),
        related: run.source.as_ref(),
    };
    ctx.events.publish(&object, notice).await;
}

/// An informational event of a stage of `run` that goes on.
fn progress<'a>(
    ks: &Kustomization,
    run: &'a Run,
    action: EventAction,
    message: &'a str,
) -> Notice<'a> {
    Notice {
        severity: Severity::Info,
        action,
        // Ready is Unknown while the run goes on, so the event has its reason.
        reason: reason::PROGRESSING,
        message,
        metadata: events::metadata(
            &InvolvedObject::of(ks),
            run.revision.as_deref(),
            run.origin_revision.as_deref(),
            false,
        ),
        related: run.source.as_ref(),
    }
}

/// `spec.dependsOn`: configuration errors stall the Kustomization; dependencies that are
/// missing or not ready make it wait (woken early when one of them changes).
async fn check_dependencies(
    ks: &Kustomization,
    ctx: &Context,
    revision: &str,
) -> Result<(), Failure> {
    if ks.spec.depends_on.as_ref().is_none_or(Vec::is_empty) {
        return Ok(());
    }
    let policy = ctx.settings.dependency_policy;
    let failure = |error: DependencyError| match error {
        DependencyError::NotReady(message) => {
            let retry_in = ctx.settings.requeue_dependency;
            Failure {
                reason: reason::DEPENDENCY_NOT_READY,
                message,
                kind: FailureKind::Wait {
                    retry_in,
                    event: Some(format!(
                        "Dependencies do not meet ready condition, retrying in {}",
                        duration::format(retry_in)
                    )),
                },
                action: EventAction::CheckDependencies,
            }
        }
        DependencyError::CrossNamespace { .. } => Failure::denied(error.to_string()),
        // Flux wraps this one in controller-runtime's TerminalError, whose text it keeps.
        DependencyError::InvalidExpression { .. } => Failure::terminal(
            reason::INVALID_CEL_EXPRESSION,
            format!("terminal error: {error}"),
        ),
        DependencyError::Cycle(_) => Failure::terminal(reason::DEPENDENCY_NOT_READY, error),
    };
    let predicates =
        dependencies::check_configuration(ks, &ctx.kustomizations, policy).map_err(failure)?;
    dependencies::check_ready(&ctx.client, ks, &predicates, revision, policy)
        .await
        .map_err(failure)?;
    tracing::info!(kustomization = %ks.name_any(), namespace = ks.namespace().unwrap_or_default(), "All dependencies are ready, proceeding with reconciliation");
    Ok(())
}

/// Writes the objects about to be applied into the inventory before anything is applied,
/// when some are not in it yet: a controller killed after the apply and before its final
/// status write then still knows them, and prunes them when the source drops them. A run
/// that applies nothing new (the periodic one of an unchanged revision) writes nothing here.
async fn record_intent(
    writer: &StatusWriter,
    status: &mut KustomizationStatus,
    objects: &[Object],
) -> Result<(), Failure> {
    let previous = status.inventory_objects();
    let planned: Vec<ObjectId> = objects.iter().map(ObjectId::of).collect();
    let additions = stale_objects(&planned, &previous);
    if additions.is_empty() {
        return Ok(());
    }
    let intended: Vec<ObjectId> = previous.into_iter().chain(additions).collect();
    set_inventory(status, &intended);
    writer.write(status).await.map_err(|e| {
        Failure::new(
            reason::RECONCILIATION_FAILED,
            format!("failed to update status: {}", api_message(&e)),
        )
    })
}

fn set_inventory(status: &mut KustomizationStatus, objects: &[ObjectId]) {
    status.inventory = Some(ResourceInventory {
        entries: objects.iter().map(ObjectId::to_ref).collect(),
    });
}

/// Jobs with `spec.ttlSecondsAfterFinished`: the TTL controller may delete them once
/// complete, which then counts as completed.
fn jobs_with_ttl(objects: &[Object]) -> HashSet<ObjectId> {
    objects
        .iter()
        .filter(|o| o.group() == "batch" && o.kind() == "Job")
        .filter(|o| {
            o.as_map()
                .get("spec")
                .and_then(|spec| spec.get("ttlSecondsAfterFinished"))
                .is_some_and(|ttl| !ttl.is_null())
        })
        .map(ObjectId::of)
        .collect()
}

/// The cluster and identity `ks`'s objects are handled with (`spec.kubeConfig`,
/// `spec.serviceAccountName`, `--default-service-account`), as Flux's controller builds its
/// client: after the source is fetched, before the build.
async fn target_cluster(ks: &Kustomization, ctx: &Context) -> Result<TargetCluster, Failure> {
    // Flux's condition has the error; its event has what the reconcile returned.
    ctx.clusters
        .for_kustomization(ks)
        .await
        .map_err(|e| Failure {
            reason: reason::RECONCILIATION_FAILED,
            message: e.to_string(),
            kind: FailureKind::Retry {
                event: Some(format!("failed to build kube client: {e}")),
            },
            action: EventAction::Reconcile,
        })
}

/// Looks up the source and its artifact, enforcing the cross-namespace policy, with Flux's
/// outcomes: a denied source stalls the Kustomization; a missing source is retried after
/// `retryInterval`, a source without artifact after `--requeue-dependency`, both without an
/// event. With the artifact comes the reference to the source, for events.
async fn get_artifact(ks: &Kustomization, ctx: &Context) -> Result<(Artifact, Reference), Failure> {
    let source_ref = &ks.spec.source_ref;
    let ks_namespace = ks.namespace().unwrap_or_default();
    let namespace = source_ref
        .namespace
        .clone()
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| ks_namespace.clone());
    let display = format!("{}/{}/{}", source_ref.kind, namespace, source_ref.name);
    if ctx.settings.no_cross_namespace_refs && namespace != ks_namespace {
        return Err(Failure::denied(format!(
            "can't access '{display}', cross-namespace references have been blocked"
        ))
        .during(EventAction::ResolveSource));
    }
    if source_ref.kind == SourceKind::ExternalArtifact && !ctx.settings.allow_external_artifact {
        return Err(Failure::denied(format!(
            "can't access '{display}', ExternalArtifact feature gate is disabled"
        ))
        .during(EventAction::ResolveSource));
    }
    let version = source_version(source_ref.api_version.as_deref())
        .map_err(|e| Failure::new(reason::ARTIFACT_FAILED, e.to_string()))?;
    let read = ctx
        .sources
        .get(source_ref.kind, version, &namespace, &source_ref.name)
        .await;
    let source = match read {
        Ok(source) => source,
        Err(SourceReadError::NotFound(message)) => {
            return Err(Failure::wait(
                reason::ARTIFACT_FAILED,
                message,
                Schedule::of(&ks.spec).retry_interval,
            ));
        }
        Err(SourceReadError::Api(e)) => {
            return Err(Failure::new(
                reason::ARTIFACT_FAILED,
                format!(
                    "unable to get source '{namespace}/{}': {}",
                    source_ref.name,
                    api_message(&e)
                ),
            ));
        }
    };
    let reference = events::source_reference(source_ref.kind.as_str(), &source);
    let artifact = source.artifact().cloned().ok_or_else(|| {
        let retry_in = ctx.settings.requeue_dependency;
        Failure::wait(
            reason::ARTIFACT_FAILED,
            format!(
                "Source artifact not found, retrying in {}",
                duration::format(retry_in)
            ),
            retry_in,
        )
    })?;
    Ok((artifact, reference))
}

/// Stage `source`: the artifact downloaded, verified and extracted, shared with every other
/// Kustomization reading the same digest (see [`artifact::ArtifactCache`]).
/// An artifact that is gone or changed since the source status was read is waited for
/// (`--requeue-dependency`), as the source status is about to change.
async fn fetch(
    ctx: &Context,
    ks: &Kustomization,
    artifact: &Artifact,
) -> Result<Arc<Extraction>, Failure> {
    let digest = artifact.digest.as_deref().unwrap_or("");
    let retry_in = ctx.settings.requeue_dependency;
    let not_ready = |cause: &str| {
        Failure::wait(
            reason::ARTIFACT_FAILED,
            format!(
                "Source is not ready, {cause}, retrying in {}",
                duration::format(retry_in)
            ),
            retry_in,
        )
    };
    let reader = artifact_reader(ks);
    let error = match ctx.artifacts.checkout(&reader, &artifact.url, digest).await {
        Ok(extracted) => return Ok(extracted),
        Err(error) => error,
    };
    match &*error {
        FetchError::NotFound { .. } => Err(not_ready("artifact not found")),
        FetchError::Verify {
            source: DigestError::Mismatch { .. },
            ..
        } => Err(not_ready("artifact digest changed")),
        e => Err(Failure::new(reason::ARTIFACT_FAILED, e.to_string())),
    }
}

/// The name a Kustomization reads artifacts under in the [`artifact::ArtifactCache`].
fn artifact_reader(ks: &Kustomization) -> String {
    format!(
        "{}/{}",
        ks.metadata.namespace.as_deref().unwrap_or_default(),
        ks.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The directory `spec.path` names in the artifact extracted at `root`.
fn build_dir(ks: &Kustomization, root: &std::path::Path) -> Result<std::path::PathBuf, Failure> {
    let path = ks.spec.path.as_deref().unwrap_or("");
    resolve_path(root, path)
        .map_err(|e: PathError| Failure::new(reason::ARTIFACT_FAILED, e.to_string()))
}

/// Stages `decrypt`, `build` and `substitute`: the objects in `dir` (inside the artifact
/// extracted at `root`), rendered as [`render::render`] renders them for every caller, with
/// the keys and variables read from the cluster. What the render revealed comes back in
/// `secrets` (its own failures are already masked), with the build's inputs as the render
/// read them (see [`reuse::NotedReads`]).
async fn render(
    ks: &Kustomization,
    ctx: &Context,
    artifact: &Artifact,
    root: &std::path::Path,
    dir: &std::path::Path,
) -> Result<(Rendered, Option<Inputs>), Failure> {
    let inputs = render::Inputs {
        kustomization: ks,
        root,
        dir,
        plain: None,
    };
    let reads = ctx.clusters.reads().clone();
    let keys = ClusterKeys {
        reader: Arc::new(reads.clone()),
        settings: &ctx.settings.decryption,
    };
    let noted = reuse::NotedReads::new(&reads);
    let variables = ClusterVariables { reader: &noted };
    let settings = render::Settings {
        strict_substitution: ctx.settings.strict_substitution,
        allow_remote_bases: ctx.settings.allow_remote_bases,
    };
    let rendered = render::render(inputs, keys, variables, settings)
        .await
        .map_err(|e| Failure::new(reason::BUILD_FAILED, e.to_string()))?;
    Ok((rendered, noted.inputs(ks, artifact)))
}

/// A Secret that is still SOPS-encrypted is never applied (Flux's check before apply).
fn refuse_encrypted_secrets(objects: &[Object]) -> Result<(), Failure> {
    match objects
        .iter()
        .find(|o| render::is_encrypted_secret(o) && !render::decrypt::is_decryption_disabled(o))
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

/// Stage `apply`, bounded by the reconcile timeout.
/// A failed apply, and what it had applied before it stopped (`None` when that is not
/// known: it timed out).
struct ApplyFailure {
    failure: Failure,
    applied: Option<Vec<ObjectId>>,
}

async fn apply(
    applier: &Applier,
    objects: Vec<Object>,
    timeout: Duration,
) -> Result<ChangeSet, ApplyFailure> {
    match tokio::time::timeout(timeout, applier.apply_all(objects)).await {
        Ok(Ok(changes)) => Ok(changes),
        Ok(Err(partial)) => Err(ApplyFailure {
            failure: Failure::new(reason::RECONCILIATION_FAILED, partial.to_string()),
            applied: Some(partial.applied.0.iter().map(|c| c.id.clone()).collect()),
        }),
        Err(_) => Err(ApplyFailure {
            failure: Failure::new(
                reason::RECONCILIATION_FAILED,
                format!("apply timed out after {}", duration::format(timeout)),
            ),
            applied: None,
        }),
    }
}

/// `changes` as Flux words its change set, unless `ks` chose a drift mode beyond Flux's
/// (prompt correction, or detect-only): only then does a corrected object's line name the
/// managers that drifted it, so that with nothing set the events are Flux's to the byte.
fn worded_for(ks: &Kustomization, ctx: &Context, mut changes: ChangeSet) -> ChangeSet {
    let beyond_flux = drift::correction(ks, ctx.settings.drift_correction)
        == DriftCorrection::Prompt
        || detect::mode(ks) == Detection::Warn;
    if !beyond_flux {
        for change in changes
            .0
            .iter_mut()
            .filter(|c| c.action == Action::Configured)
        {
            change.drift = None;
        }
    }
    changes
}

/// The apply options of a Kustomization: its spec and the controller's flags.
fn apply_options(
    ks: &Kustomization,
    ctx: &Context,
    cluster: &TargetCluster,
    inventory: Option<&ResourceInventory>,
) -> Result<ApplyOptions, Failure> {
    let ignore = IgnoreRules::compile(ks.spec.ignore.as_deref().unwrap_or_default())
        .map_err(|e| Failure::new(reason::RECONCILIATION_FAILED, e.to_string()))?;
    for path in ignore.not_pointers() {
        tracing::warn!(kustomization = %ks.name_any(), namespace = ks.namespace().unwrap_or_default(), "ignore path {path} is not a JSON pointer (it must start with '/'): it matches no field");
    }
    Ok(ApplyOptions {
        force: ks.spec.force,
        ignore,
        override_managers: ctx.settings.override_managers.clone(),
        override_managers_before_dry_run: ctx.settings.override_managers_before_dry_run.clone(),
        migrate_api_version: ctx.settings.migrate_api_version,
        custom_stage_kinds: ctx.settings.custom_apply_stage_kinds.clone(),
        live_versions: cluster.live_versions.clone(),
        trust_live_versions: !status::reconcile_requested(ks),
        report_drift: false,
        inventoried: inventory
            .map(|inventory| inventory.entries.iter().map(|e| e.id.clone()).collect())
            .unwrap_or_default(),
    })
}

/// What the health stage works on.
struct HealthCheck<'a> {
    cluster: &'a TargetCluster,
    applier: &'a Applier,
    changes: &'a ChangeSet,
    jobs_with_ttl: HashSet<ObjectId>,
    revision: &'a str,
    origin_revision: Option<&'a str>,
    /// The source, for the event.
    source: Option<&'a Reference>,
    exprs: &'a HealthCheckExprs,
    timeout: Duration,
    /// The apply changed something.
    drifted: bool,
    /// Values to mask out of the Healthy condition's message.
    secrets: &'a SecretValues,
}

/// Stage `health`: with `spec.wait`, every applied object; otherwise the objects of
/// `spec.healthChecks`. Waits until all are Current, as Flux's controller decides it, and
/// records the outcome in the Healthy condition.
async fn check_health(
    writer: &StatusWriter,
    ks: &Kustomization,
    ctx: &Context,
    status: &mut KustomizationStatus,
    check: HealthCheck<'_>,
) -> Result<(), Failure> {
    let targets = health_targets(ks, check.changes);
    if targets.is_empty() {
        status::clear_healthy(status);
        return Ok(());
    }
    let was_healthy = status::was_healthy(status);
    let new_revision = status.last_applied_revision.as_deref() != Some(check.revision);
    let step = format!(
        "Running health checks for revision {} with a timeout of {}",
        check.revision,
        duration::format(check.timeout)
    );
    status::mark_step(ks, status, &step);
    status::mark_healthy(
        ks,
        status,
        ConditionStatus::Unknown,
        reason::PROGRESSING,
        &step,
    );
    writer.write(status).await.map_err(|e| {
        Failure::new(
            reason::RECONCILIATION_FAILED,
            format!(
                "unable to update the healthy status to progressing: {}",
                api_message(&e)
            ),
        )
    })?;

    let started = Instant::now();
    let options = WaitOptions {
        timeout: check.timeout,
        fail_fast: ctx.settings.health_fail_fast,
        jobs_with_ttl: check.jobs_with_ttl,
    };
    let mut interruptible = ctx.interrupts.register(ObjectRef::from_obj(ks));
    let outcome = check
        .cluster
        .health_watches
        .wait(
            check.applier.resolver(),
            &targets,
            check.exprs,
            &options,
            interruptible.interrupted(),
        )
        .await;
    match outcome {
        Ok(()) => {
            let message = format!(
                "Health check passed in {}",
                duration::format(started.elapsed())
            );
            if !was_healthy || (new_revision && check.drifted) {
                let object = InvolvedObject::of(ks);
                let notice = Notice {
                    severity: Severity::Info,
                    action: EventAction::HealthCheck,
                    reason: reason::PROGRESSING,
                    message: &message,
                    metadata: events::metadata(
                        &object,
                        Some(check.revision),
                        check.origin_revision,
                        false,
                    ),
                    related: check.source,
                };
                ctx.events.publish(&object, notice).await;
            }
            status::mark_healthy(
                ks,
                status,
                ConditionStatus::True,
                reason::SUCCEEDED,
                &message,
            );
            Ok(())
        }
        Err(WaitError::Canceled(trigger)) => Err(Failure::canceled(&trigger)),
        Err(err) => {
            let message = check.secrets.redact(&err.to_string());
            status::mark_healthy(
                ks,
                status,
                ConditionStatus::False,
                reason::HEALTH_CHECK_FAILED,
                &message,
            );
            Err(Failure::new(
                reason::HEALTH_CHECK_FAILED,
                format!(
                    "health check failed after {}: {message}",
                    duration::format(started.elapsed())
                ),
            ))
        }
    }
}

/// The objects to assess: every applied object that was not skipped (`spec.wait`), or
/// those `spec.healthChecks` names, never the Kustomization itself (it would wait on
/// itself). A health check without apiVersion means `apps/v1`, as in Flux; one without a
/// namespace is in the Kustomization's namespace, as the API documents it.
fn health_targets(ks: &Kustomization, changes: &ChangeSet) -> Vec<Target> {
    let namespace = ks.namespace().unwrap_or_default();
    let name = ks.name_any();
    let is_self = |id: &ObjectId| {
        id.group == GROUP
            && id.kind == "Kustomization"
            && id.name == name
            && id.namespace == namespace
    };
    let targets: Vec<Target> = if ks.spec.wait == Some(true) {
        changes
            .0
            .iter()
            .filter(|c| !matches!(c.action, Action::Skipped | Action::Deleted))
            .filter(|c| !c.left_deleted())
            .map(|c| Target {
                id: c.id.clone(),
                min_generation: c.generation,
            })
            .collect()
    } else {
        ks.spec
            .health_checks
            .iter()
            .flatten()
            .map(|check| {
                let api_version = check
                    .api_version
                    .as_deref()
                    .filter(|v| !v.is_empty())
                    .unwrap_or("apps/v1");
                let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
                Target {
                    id: ObjectId {
                        namespace: check
                            .namespace
                            .clone()
                            .filter(|ns| !ns.is_empty())
                            .unwrap_or_else(|| namespace.clone()),
                        name: check.name.clone(),
                        group: group.to_string(),
                        kind: check.kind.clone(),
                        version: version.to_string(),
                    },
                    min_generation: None,
                }
            })
            .collect()
    };
    targets.into_iter().filter(|t| !is_self(&t.id)).collect()
}

/// Stage `prune`: deletes what left the inventory.
async fn prune(applier: &Applier, stale: &[ObjectId]) -> Result<ChangeSet, Failure> {
    applier
        .prune(stale)
        .await
        .map_err(|e| Failure::new(reason::PRUNE_FAILED, e.to_string()))
}

fn owner(ks: &Kustomization) -> Owner {
    Owner {
        name: ks.name_any(),
        namespace: ks.namespace().unwrap_or_default(),
    }
}

/// `spec.timeout`, or by default the interval less 30 s; never below 30 s, as Flux's
/// `GetTimeout` (a `timeout: 10s` waits 30 s there too).
fn reconcile_timeout(ks: &Kustomization) -> Duration {
    const MINIMUM: Duration = Duration::from_secs(30);
    let timeout = ks
        .spec
        .timeout
        .as_deref()
        .and_then(|t| duration::parse(t).ok())
        .unwrap_or_else(|| {
            duration::parse(&ks.spec.interval)
                .unwrap_or(Duration::from_secs(600))
                .saturating_sub(MINIMUM)
        });
    timeout.max(MINIMUM)
}

/// Adds the finalizer with a JSON patch, so that a concurrent change to other fields of the
/// object cannot make it conflict.
///
/// Not `kube::runtime::finalizer`: that helper patches without a field manager, so the
/// object's `managedFields` would name the client's user agent where Flux's controller writes
/// `gotk-kustomize-controller`, and its Apply/Cleanup split would hide the order Flux keeps on
/// deletion (a suspended Kustomization releases its finalizer without pruning).
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
    // Flux's patch helper writes finalizers as the status manager.
    let params = PatchParams {
        field_manager: Some(crate::api::names::STATUS_FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    api.patch::<Kustomization>(&ks.name_any(), &params, &Patch::Json(patch))
        .await?;
    Ok(())
}

/// Deletion: prune the inventory when the deletion policy says so, then release the
/// finalizer.
async fn finalize(
    api: &Api<Kustomization>,
    ks: &Kustomization,
    ctx: &Context,
) -> Result<Done, ReconcileError> {
    ctx.forget_applied(ks);
    ctx.artifacts.forget(&artifact_reader(ks));
    if !ks.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(Done::await_change());
    }
    let policy = ks.spec.deletion_policy.unwrap_or_default();
    let delete = match policy {
        DeletionPolicy::MirrorPrune => ks.spec.prune,
        DeletionPolicy::Delete | DeletionPolicy::WaitForTermination => true,
        DeletionPolicy::Orphan => false,
    };
    let status = ks.status.clone().unwrap_or_default();
    let inventory = status.inventory_objects();
    // As Flux decides it: with nothing in the inventory, no client is made (a Kustomization
    // whose kubeconfig Secret never existed can still go).
    if delete && ks.spec.suspend != Some(true) && !inventory.is_empty() {
        if !account_exists(ks, ctx).await {
            // As Flux does: with the account gone, nothing can be deleted as that account;
            // the objects are named and left, and the Kustomization goes.
            let objects: Vec<String> = inventory.iter().map(ObjectId::describe).collect();
            let message = format!("unable to prune objects: \n{}", objects.join("\n"));
            tracing::error!(kustomization = %ks.name_any(), namespace = ks.namespace().unwrap_or_default(), error = "skipping pruning, failed to find account to impersonate", "{message}");
            finalize_event(
                ks,
                ctx,
                &status,
                (Severity::Error, EventAction::Finalize),
                &message,
            )
            .await;
            remove_finalizer(api, ks).await?;
            return Ok(Done::await_change());
        }
        let cluster = ctx.clusters.for_kustomization(ks).await?;
        let applier = Applier::new(
            cluster.client.clone(),
            owner(ks),
            ctx.settings.concurrent_ssa,
            ApplyOptions {
                custom_stage_kinds: ctx.settings.custom_apply_stage_kinds.clone(),
                ..ApplyOptions::default()
            },
            reconcile_timeout(ks),
            AppliedObjects::default(),
        );
        let changes = match applier.prune(&inventory).await {
            Ok(changes) => changes,
            Err(err) => {
                // Retried with backoff; the event says so as Flux's does.
                let failed = (Severity::Error, EventAction::Finalize);
                let message = "pruning for deleted resource failed";
                finalize_event(ks, ctx, &status, failed, message).await;
                return Err(err.into());
            }
        };
        if !changes.0.is_empty() {
            let summary = changes.prune_summary();
            finalize_event(
                ks,
                ctx,
                &status,
                (Severity::Info, EventAction::Finalize),
                &summary,
            )
            .await;
            if policy == DeletionPolicy::WaitForTermination {
                let deleted: Vec<ObjectId> = changes
                    .0
                    .iter()
                    .filter(|c| c.action == apply::Action::Deleted)
                    .map(|c| c.id.clone())
                    .collect();
                // As Flux: a wait that times out is reported, and the Kustomization goes.
                if let Err(err) = applier.wait_until_deleted(&deleted).await {
                    let message = "failed to wait for resources termination";
                    tracing::error!(kustomization = %ks.name_any(), namespace = ks.namespace().unwrap_or_default(), error = %err, "{message}");
                    let failed = (Severity::Error, EventAction::WaitForTermination);
                    finalize_event(ks, ctx, &status, failed, message).await;
                }
            }
        }
    }
    remove_finalizer(api, ks).await?;
    Ok(Done::await_change())
}

/// An event of the finalization: as Flux's, it carries the reason Ready has at that point
/// (else the severity) and the revision last applied, and no related source (Flux does not
/// read the source of a Kustomization being deleted).
async fn finalize_event(
    ks: &Kustomization,
    ctx: &Context,
    status: &KustomizationStatus,
    (severity, action): (Severity, EventAction),
    message: &str,
) {
    let reason = status
        .conditions
        .as_deref()
        .and_then(|c| crate::api::condition::find_condition(c, crate::api::names::condition::READY))
        .map_or(severity.as_str(), |c| c.reason.as_str());
    let object = InvolvedObject::of(ks);
    let metadata = events::metadata(
        &object,
        status.last_applied_revision.as_deref(),
        status.last_applied_origin_revision.as_deref(),
        false,
    );
    let notice = Notice {
        severity,
        action,
        reason,
        message,
        metadata,
        related: None,
    };
    ctx.events.publish(&object, notice).await;
}

/// Whether the account `ks` is handled as still exists (always, when it names none), read
/// with the controller's own client in the Kustomization's namespace as Flux reads it.
async fn account_exists(ks: &Kustomization, ctx: &Context) -> bool {
    let Some(name) = ctx.clusters.service_account(ks) else {
        return true;
    };
    let namespace = ks.namespace().unwrap_or_default();
    Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(ctx.client.clone(), &namespace)
        .get(name)
        .await
        .is_ok()
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
        assert_eq!(
            reconcile_timeout(&ks("10m", Some("10s"))),
            Duration::from_secs(30)
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

    fn change(kind: &str, name: &str, action: Action) -> apply::Change {
        apply::Change {
            id: ObjectId {
                namespace: "apps".into(),
                name: name.into(),
                group: if kind == "Kustomization" {
                    GROUP.into()
                } else {
                    "apps".into()
                },
                kind: kind.into(),
                version: "v1".into(),
            },
            action,
            generation: Some(3),
            drift: None,
        }
    }

    #[test]
    fn wait_assesses_every_applied_object_but_skipped_ones_and_itself() {
        let mut k = ks("1m", None);
        k.metadata.namespace = Some("apps".into());
        let changes = ChangeSet(vec![
            change("Deployment", "web", Action::Created),
            change("Deployment", "ignored", Action::Skipped),
            change("StatefulSet", "db", Action::Unchanged),
            change("Kustomization", "app", Action::Configured),
        ]);
        assert!(health_targets(&k, &changes).is_empty());
        k.spec.wait = Some(true);
        let targets = health_targets(&k, &changes);
        let names: Vec<&str> = targets.iter().map(|t| t.id.name.as_str()).collect();
        assert_eq!(names, ["web", "db"]);
        assert_eq!(targets[0].min_generation, Some(3));
    }

    #[test]
    fn health_checks_default_to_apps_v1_and_the_kustomization_namespace() {
        let mut k = ks("1m", None);
        k.metadata.namespace = Some("apps".into());
        k.spec.health_checks = Some(vec![
            crate::api::kustomization::NamespacedObjectKindReference {
                api_version: None,
                kind: "Deployment".into(),
                name: "web".into(),
                namespace: None,
            },
            crate::api::kustomization::NamespacedObjectKindReference {
                api_version: Some("v1".into()),
                kind: "Service".into(),
                name: "db".into(),
                namespace: Some("data".into()),
            },
        ]);
        let targets = health_targets(&k, &ChangeSet::default());
        assert_eq!(targets[0].id.describe(), "Deployment/apps/web");
        assert_eq!(targets[0].id.api_version(), "apps/v1");
        assert_eq!(targets[1].id.describe(), "Service/data/db");
        assert_eq!(targets[1].id.api_version(), "v1");
        assert_eq!(targets[1].min_generation, None);
    }

    #[test]
    fn only_jobs_with_a_ttl_may_vanish() {
        let job = |name: &str, spec: serde_json::Value| {
            Object::new(
                json!({"apiVersion": "batch/v1", "kind": "Job",
                    "metadata": {"name": name, "namespace": "apps"}, "spec": spec})
                .as_object()
                .unwrap()
                .clone(),
            )
        };
        let set = jobs_with_ttl(&[
            job("ttl", json!({"ttlSecondsAfterFinished": 60})),
            job("plain", json!({})),
        ]);
        let names: Vec<&str> = set.iter().map(|id| id.name.as_str()).collect();
        assert_eq!(names, ["ttl"]);
    }
}
