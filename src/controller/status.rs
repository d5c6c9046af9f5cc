//! Status bookkeeping: the conditions, revisions and generations Flux writes, and writing
//! them back with the controller's own field manager.

use std::sync::Arc;

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::api::condition::{find_condition, remove_condition, set_condition};
use crate::api::names::{
    RECONCILE_REQUESTED_AT_ANNOTATION, STATUS_FIELD_MANAGER, condition, reason,
};
use crate::api::{ConditionStatus, Kustomization, KustomizationStatus};

/// Marks the reconcile as in progress with the current step, as Flux does: Ready turns
/// Unknown for the run. It reaches the API server with the run's first write, or after
/// [`PROGRESS_REPORT_DELAY`] (see [`StatusWriter`]).
pub fn mark_progressing(ks: &Kustomization, status: &mut KustomizationStatus, step: &str) {
    let generation = ks.meta().generation;
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let ready = find_condition(conditions, condition::READY);
    let retrying = ready.is_some_and(|c| c.status == ConditionStatus::False);
    let progress_reason = if retrying {
        reason::PROGRESSING_WITH_RETRY
    } else {
        reason::PROGRESSING
    };
    set_condition(
        conditions,
        condition::RECONCILING,
        ConditionStatus::True,
        progress_reason,
        step,
        generation,
    );
    set_condition(
        conditions,
        condition::READY,
        ConditionStatus::Unknown,
        reason::PROGRESSING,
        "Reconciliation in progress",
        generation,
    );
}

/// Moves the Reconciling condition to the next step of the run.
pub fn mark_step(ks: &Kustomization, status: &mut KustomizationStatus, step: &str) {
    let generation = ks.meta().generation;
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let reason =
        find_condition(conditions, condition::RECONCILING).map_or(reason::PROGRESSING, |c| {
            if c.reason == reason::PROGRESSING_WITH_RETRY {
                reason::PROGRESSING_WITH_RETRY
            } else {
                reason::PROGRESSING
            }
        });
    set_condition(
        conditions,
        condition::RECONCILING,
        ConditionStatus::True,
        reason,
        step,
        generation,
    );
}

/// Sets the Healthy condition (Flux writes it only when health checks are asked for).
pub fn mark_healthy(
    ks: &Kustomization,
    status: &mut KustomizationStatus,
    healthy: ConditionStatus,
    healthy_reason: &str,
    message: &str,
) {
    let generation = ks.meta().generation;
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    set_condition(
        conditions,
        condition::HEALTHY,
        healthy,
        healthy_reason,
        message,
        generation,
    );
}

/// Removes the Healthy condition: the Kustomization asks for no health checks.
pub fn clear_healthy(status: &mut KustomizationStatus) {
    if let Some(conditions) = status.conditions.as_mut() {
        remove_condition(conditions, condition::HEALTHY);
    }
}

/// Whether the last health check passed.
pub fn was_healthy(status: &KustomizationStatus) -> bool {
    status
        .conditions
        .as_deref()
        .and_then(|c| find_condition(c, condition::HEALTHY))
        .is_some_and(|c| c.status == ConditionStatus::True)
}

/// Records a configuration error that no retry can fix (Flux's terminal errors): Ready=False
/// and Stalled=True with the same reason and message, and, when `observe_generation`, the
/// generation observed (Flux does so for invalid expressions, not for denied access).
pub fn mark_stalled(
    ks: &Kustomization,
    status: &mut KustomizationStatus,
    stalled_reason: &str,
    message: &str,
    observe_generation: bool,
) {
    let generation = ks.meta().generation;
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    set_condition(
        conditions,
        condition::READY,
        ConditionStatus::False,
        stalled_reason,
        message,
        generation,
    );
    set_condition(
        conditions,
        condition::STALLED,
        ConditionStatus::True,
        stalled_reason,
        message,
        generation,
    );
    if let Some(reconciling) = conditions
        .iter_mut()
        .find(|c| c.type_ == condition::RECONCILING)
    {
        reconciling.reason = reason::PROGRESSING_WITH_RETRY.to_string();
    }
    if observe_generation {
        status.observed_generation = generation;
    }
}

/// Records a successful reconcile of `revision`.
pub fn mark_ready(
    ks: &Kustomization,
    status: &mut KustomizationStatus,
    revision: &str,
    origin_revision: Option<&str>,
) {
    let generation = ks.meta().generation;
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    set_condition(
        conditions,
        condition::READY,
        ConditionStatus::True,
        reason::RECONCILIATION_SUCCEEDED,
        &format!("Applied revision: {revision}"),
        generation,
    );
    remove_condition(conditions, condition::RECONCILING);
    remove_condition(conditions, condition::STALLED);
    status.last_applied_revision = Some(revision.to_string());
    status.last_applied_origin_revision = origin_revision.map(str::to_string);
    status.observed_generation = generation;
}

/// Records a failed reconcile: Ready=False with Flux's reason, and the Reconciling condition
/// (if any) turned to `ProgressingWithRetry`.
pub fn mark_failed(
    ks: &Kustomization,
    status: &mut KustomizationStatus,
    failure_reason: &str,
    message: &str,
) {
    let generation = ks.meta().generation;
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    set_condition(
        conditions,
        condition::READY,
        ConditionStatus::False,
        failure_reason,
        message,
        generation,
    );
    if let Some(reconciling) = conditions
        .iter_mut()
        .find(|c| c.type_ == condition::RECONCILING)
    {
        reconciling.reason = reason::PROGRESSING_WITH_RETRY.to_string();
    }
}

/// Whether this reconcile was asked for with the `requestedAt` annotation (a value not yet
/// handled).
pub fn reconcile_requested(ks: &Kustomization) -> bool {
    let handled = ks
        .status
        .as_ref()
        .and_then(|s| s.last_handled_reconcile_at.as_deref());
    ks.annotations()
        .get(RECONCILE_REQUESTED_AT_ANNOTATION)
        .is_some_and(|requested| Some(requested.as_str()) != handled)
}

/// Records the handled `reconcile.fluxcd.io/requestedAt` value.
pub fn record_requested_at(ks: &Kustomization, status: &mut KustomizationStatus) {
    if let Some(requested) = ks.annotations().get(RECONCILE_REQUESTED_AT_ANNOTATION) {
        status.last_handled_reconcile_at = Some(requested.clone());
    }
}

/// Status fields this controller writes; those unset in a written status are removed.
const STATUS_FIELDS: [&str; 8] = [
    "observedGeneration",
    "conditions",
    "lastAppliedRevision",
    "lastAppliedOriginRevision",
    "lastAttemptedRevision",
    "lastHandledReconcileAt",
    "inventory",
    "history",
];

/// Writes the whole status as `gotk-kustomize-controller` with a merge patch of the status
/// subresource, as Flux's patch helper does (an `Update` in `managedFields`, so that the
/// objects' field ownership is the same whichever of the two controllers wrote last).
pub async fn write(
    api: &Api<Kustomization>,
    ks: &Kustomization,
    status: &KustomizationStatus,
) -> Result<(), kube::Error> {
    write_named(api, &ks.name_any(), status).await
}

async fn write_named(
    api: &Api<Kustomization>,
    name: &str,
    status: &KustomizationStatus,
) -> Result<(), kube::Error> {
    let mut fields = match serde_json::to_value(status) {
        Ok(serde_json::Value::Object(fields)) => fields,
        Ok(_) => serde_json::Map::new(),
        Err(e) => return Err(kube::Error::SerdeError(e)),
    };
    for field in STATUS_FIELDS {
        fields.entry(field).or_insert(serde_json::Value::Null);
    }
    let patch = json!({ "status": fields });
    let params = PatchParams {
        field_manager: Some(STATUS_FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    api.patch_status(name, &params, &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// How long a run goes on before it is reported as progressing, when it has written no status
/// of its own by then.
pub const PROGRESS_REPORT_DELAY: std::time::Duration = std::time::Duration::from_secs(1);

/// The status writes of one run. The progress report (Ready Unknown, "Fetching manifests
/// ...") is written only when the run goes on for [`PROGRESS_REPORT_DELAY`] without a write
/// of its own: a run that finishes sooner writes once, which spares the API server a write
/// and every watcher of Kustomizations an event per reconcile.
pub struct StatusWriter {
    api: Api<Kustomization>,
    name: String,
    namespace: String,
    /// Set once the run writes status itself; held while a progress report is written, so
    /// that a report never lands after a write of the run.
    run_wrote: Arc<tokio::sync::Mutex<bool>>,
    report: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl StatusWriter {
    /// The writer for one run of `ks`.
    pub fn new(api: Api<Kustomization>, ks: &Kustomization) -> Self {
        StatusWriter {
            api,
            name: ks.name_any(),
            namespace: ks.namespace().unwrap_or_default(),
            run_wrote: Arc::new(tokio::sync::Mutex::new(false)),
            report: std::sync::Mutex::new(None),
        }
    }

    /// Writes `progress` after `delay`, unless the run has written status by then.
    pub fn report_progress_after(&self, delay: std::time::Duration, progress: KustomizationStatus) {
        let api = self.api.clone();
        let name = self.name.clone();
        let namespace = self.namespace.clone();
        let run_wrote = Arc::clone(&self.run_wrote);
        let task = tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let run_wrote = run_wrote.lock().await;
            if *run_wrote {
                return;
            }
            // Advisory: the run's own writes say how it went.
            if let Err(error) = write_named(&api, &name, &progress).await {
                tracing::warn!(kustomization = %name, %namespace, "failed to report progress: {}", crate::client::api_message(&error));
            }
        });
        if let Ok(mut report) = self.report.lock()
            && let Some(previous) = report.replace(task)
        {
            previous.abort();
        }
    }

    /// Writes the run's status, after a progress report being written, if any.
    pub async fn write(&self, status: &KustomizationStatus) -> Result<(), kube::Error> {
        *self.run_wrote.lock().await = true;
        write_named(&self.api, &self.name, status).await
    }
}

impl Drop for StatusWriter {
    fn drop(&mut self) {
        if let Ok(mut report) = self.report.lock()
            && let Some(task) = report.take()
        {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::KustomizationSpec;

    fn ks(generation: i64) -> Kustomization {
        let mut ks = Kustomization::new("app", KustomizationSpec::default());
        ks.metadata.generation = Some(generation);
        ks
    }

    fn get(status: &KustomizationStatus, type_: &str) -> Option<(ConditionStatus, String, String)> {
        find_condition(status.conditions.as_deref().unwrap_or(&[]), type_)
            .map(|c| (c.status, c.reason.clone(), c.message.clone()))
    }

    #[test]
    fn success_after_progress() {
        let ks = ks(2);
        let mut status = KustomizationStatus::default();
        mark_progressing(
            &ks,
            &mut status,
            "Fetching manifests for revision main@sha1:abc",
        );
        assert_eq!(
            get(&status, "Ready").map(|c| c.0),
            Some(ConditionStatus::Unknown)
        );
        assert_eq!(
            get(&status, "Reconciling").map(|c| c.1),
            Some("Progressing".into())
        );
        mark_ready(&ks, &mut status, "main@sha1:abc", None);
        assert_eq!(
            get(&status, "Ready"),
            Some((
                ConditionStatus::True,
                "ReconciliationSucceeded".into(),
                "Applied revision: main@sha1:abc".into()
            ))
        );
        assert!(get(&status, "Reconciling").is_none());
        assert_eq!(status.observed_generation, Some(2));
        assert_eq!(
            status.last_applied_revision.as_deref(),
            Some("main@sha1:abc")
        );
        // A periodic reconcile of the same revision turns Ready Unknown for the run, as
        // Flux's controller does.
        mark_progressing(&ks, &mut status, "Fetching manifests");
        assert_eq!(
            get(&status, "Ready"),
            Some((
                ConditionStatus::Unknown,
                "Progressing".into(),
                "Reconciliation in progress".into()
            ))
        );
        mark_step(&ks, &mut status, "Running health checks");
        assert_eq!(
            get(&status, "Reconciling").map(|c| c.2),
            Some("Running health checks".into())
        );
    }

    #[test]
    fn failure_then_retry() {
        let ks = ks(1);
        let mut status = KustomizationStatus::default();
        mark_progressing(&ks, &mut status, "Fetching");
        mark_failed(&ks, &mut status, "ArtifactFailed", "digest mismatch");
        assert_eq!(
            get(&status, "Ready"),
            Some((
                ConditionStatus::False,
                "ArtifactFailed".into(),
                "digest mismatch".into()
            ))
        );
        assert_eq!(
            get(&status, "Reconciling").map(|c| c.1),
            Some("ProgressingWithRetry".into())
        );
        assert_eq!(status.observed_generation, None);
        mark_progressing(&ks, &mut status, "Fetching again");
        assert_eq!(
            get(&status, "Reconciling").map(|c| c.1),
            Some("ProgressingWithRetry".into())
        );
    }
}
