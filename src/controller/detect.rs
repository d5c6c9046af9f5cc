//! Detect-only drift mode, beyond Flux and off by default: with the annotation
//! `kustomize.toolkit.fluxcd.io/drift-detection: warn`, objects that drifted are reported and
//! left as they are, as HelmRelease's `spec.driftDetection.mode: warn` leaves a release.
//!
//! Drift is what the controller would change although the Kustomization's inputs are those of
//! its last successful apply ([`inputs_unchanged`]): the same generation, the same artifact
//! revision, and a build with the digest of the last run that applied one. Told from the
//! status alone, the decision is the same after a restart. With other inputs (a new revision,
//! a changed spec or variables), the build is applied as ever, drift included, as Helm's warn
//! mode upgrades a release. Objects outside the inventory are created and prunes run in both
//! cases.
//!
//! A run that reaches the apply stage in warn mode sets the `Drifted` condition (True with
//! reason `DriftDetected`, or False with `NoDrift`); Ready keeps Flux's meaning and message.
//! Each distinct set of drifted objects is told once in a Warning event `DriftDetected` (each
//! object, how it drifted, the managers that wrote it, the fields). Without the annotation the
//! condition is removed and everything is Flux's.

use std::hash::{DefaultHasher, Hash, Hasher};

use kube::ResourceExt;

use crate::api::condition::{find_condition, remove_condition, set_condition};
use crate::api::kustomization::Snapshot;
use crate::api::names::reason::RECONCILIATION_SUCCEEDED;
use crate::api::{Condition, ConditionStatus, Kustomization, KustomizationStatus};
use apply::drift::Drift;
use apply::{Action, ChangeSet, ObjectId};

/// The annotation by which a Kustomization chooses whether drift is corrected or reported.
pub const DRIFT_DETECTION_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/drift-detection";

/// The condition that says whether objects were left drifted.
pub const DRIFTED: &str = "Drifted";

/// `Drifted` is True: some objects drifted and were left as they are.
pub const DRIFT_DETECTED: &str = "DriftDetected";

/// `Drifted` is False: nothing drifted.
pub const NO_DRIFT: &str = "NoDrift";

/// How many objects the condition's message names.
const LISTED_OBJECTS: usize = 5;

/// How many fields of one object the event names.
const LISTED_FIELDS: usize = 10;

/// What is done with drift.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detection {
    /// Corrected, as Flux does (`enabled`, the default).
    Enabled,
    /// Reported, and the objects left as they are (`warn`).
    Warn,
}

/// `ks`'s choice: `warn` reports, `enabled` (or no annotation) corrects. Any other value
/// corrects, as Flux would, and is logged.
pub fn mode(ks: &Kustomization) -> Detection {
    match ks.annotations().get(DRIFT_DETECTION_ANNOTATION) {
        None => Detection::Enabled,
        Some(value) => match value.trim().to_ascii_lowercase().as_str() {
            "warn" => Detection::Warn,
            "enabled" => Detection::Enabled,
            other => {
                tracing::warn!(kustomization = %ks.name_any(), namespace = ks.namespace().unwrap_or_default(), value = other, "unknown {DRIFT_DETECTION_ANNOTATION} value (enabled or warn): drift is corrected");
                Detection::Enabled
            }
        },
    }
}

/// Whether a build of `revision` with `digest` is what the last successful run applied, with
/// the spec it applied it for: `status` (as the last run left it) observed the current
/// generation and applied `revision`, and the newest snapshot of its history with another
/// digest, if any, is older than one that succeeded with `digest`. A run that failed with
/// another digest since may have applied part of it: then the inputs changed.
pub fn inputs_unchanged(
    ks: &Kustomization,
    status: &KustomizationStatus,
    revision: &str,
    digest: &str,
) -> bool {
    ks.metadata.generation.is_some()
        && status.observed_generation == ks.metadata.generation
        && status.last_applied_revision.as_deref() == Some(revision)
        && applied_last(status.history.as_deref().unwrap_or_default(), digest)
}

fn applied_last(history: &[Snapshot], digest: &str) -> bool {
    for snapshot in history {
        if snapshot.digest != digest {
            return false;
        }
        if snapshot.last_reconciled_status == RECONCILIATION_SUCCEEDED {
            return true;
        }
    }
    false
}

/// The objects a run left drifted.
#[derive(Debug, Default)]
pub struct Report<'a>(Vec<(&'a ObjectId, &'a Drift)>);

impl<'a> Report<'a> {
    /// The objects of `changes` left drifted, in apply order.
    pub fn of(changes: &'a ChangeSet) -> Self {
        Report(
            changes
                .0
                .iter()
                .filter(|change| change.action == Action::Drifted)
                .filter_map(|change| Some((&change.id, change.drift.as_ref()?)))
                .collect(),
        )
    }

    /// Whether nothing was left drifted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The Warning event's message: a sentence, then one line per object with the fields
    /// that drifted.
    pub fn event_message(&self) -> String {
        let mut message = format!(
            "{} drifted from the last applied revision and {} left as {} ({DRIFT_DETECTION_ANNOTATION}: warn):",
            objects(self.0.len()),
            if self.0.len() == 1 { "was" } else { "were" },
            if self.0.len() == 1 {
                "it is"
            } else {
                "they are"
            },
        );
        for (id, drift) in &self.0 {
            message.push('\n');
            message.push_str(&describe(id, drift));
            let fields: Vec<&str> = drift.fields.iter().map(|f| f.path.as_str()).collect();
            if !fields.is_empty() {
                message.push_str(": ");
                message.push_str(&listed(&fields, LISTED_FIELDS));
            }
        }
        message
    }

    /// The `Drifted` condition's message: how many objects, the first few of them.
    pub fn condition_message(&self) -> String {
        let described: Vec<String> = self.0.iter().map(|(id, d)| describe(id, d)).collect();
        let described: Vec<&str> = described.iter().map(String::as_str).collect();
        format!(
            "{} drifted and left as {}: {}",
            objects(self.0.len()),
            if self.0.len() == 1 {
                "it is"
            } else {
                "they are"
            },
            listed(&described, LISTED_OBJECTS)
        )
    }

    /// A fingerprint of the drift set (objects, fields, writers), which tells one set from
    /// another.
    pub fn fingerprint(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        self.event_message().hash(&mut hasher);
        hasher.finish()
    }
}

fn objects(count: usize) -> String {
    if count == 1 {
        "1 object".to_string()
    } else {
        format!("{count} objects")
    }
}

/// `ConfigMap/apps/a changed by kubectl-edit`, `ConfigMap/apps/b changed`,
/// `Deployment/apps/web deleted`.
fn describe(id: &ObjectId, drift: &Drift) -> String {
    let object = id.describe();
    if drift.deleted {
        return format!("{object} deleted");
    }
    let managers = drift.managers();
    if managers.is_empty() {
        format!("{object} changed")
    } else {
        format!("{object} changed by {}", managers.join(", "))
    }
}

/// The first `max` items, then how many more.
fn listed(items: &[&str], max: usize) -> String {
    let shown = items[..items.len().min(max)].join(", ");
    match items.len().saturating_sub(max) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// Sets the `Drifted` condition after a run in warn mode reached the apply stage, or removes
/// it in correcting mode.
pub fn mark(
    ks: &Kustomization,
    status: &mut KustomizationStatus,
    mode: Detection,
    report: &Report<'_>,
) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    if mode == Detection::Enabled {
        remove_condition(conditions, DRIFTED);
        return;
    }
    let generation = ks.metadata.generation;
    if report.is_empty() {
        let message = "No drift detected";
        set_condition(
            conditions,
            DRIFTED,
            ConditionStatus::False,
            NO_DRIFT,
            message,
            generation,
        );
    } else {
        let message = report.condition_message();
        set_condition(
            conditions,
            DRIFTED,
            ConditionStatus::True,
            DRIFT_DETECTED,
            &message,
            generation,
        );
    }
}

/// Whether a drift set with `fingerprint` and `message` (its condition message) is to be told
/// in an event: it differs from the set last reported since the controller started
/// (`previous`: `None` when none was; `Some(None)` when the last run had no drift), or, with
/// nothing known since the start, from the one the `Drifted` condition read before the run
/// names.
pub fn is_new(
    previous: Option<Option<u64>>,
    condition: Option<&Condition>,
    fingerprint: u64,
    message: &str,
) -> bool {
    match previous {
        Some(previous) => previous != Some(fingerprint),
        None => !condition.is_some_and(|c| {
            c.status == ConditionStatus::True && c.reason == DRIFT_DETECTED && c.message == message
        }),
    }
}

/// The `Drifted` condition of `status`.
pub fn condition(status: &KustomizationStatus) -> Option<&Condition> {
    find_condition(status.conditions.as_deref().unwrap_or_default(), DRIFTED)
}

#[cfg(test)]
mod tests;
