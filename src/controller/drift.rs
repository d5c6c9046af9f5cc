//! Prompt drift correction, beyond Flux and off by default (`--drift-correction=prompt`, or
//! per Kustomization the annotation `kustomize.toolkit.fluxcd.io/drift-correction: prompt`).
//!
//! The watches that keep every managed object's `resourceVersion` see each write to it as it
//! happens. A write by another manager (`kubectl edit`, a controller, a script), or a
//! deletion, of an object a Kustomization in prompt mode applied reconciles that
//! Kustomization after a short debounce, which reverts the drift as the next interval would.
//! Writes that change nothing Flux would correct never trigger one: the controller's own
//! applies, status updates, objects with `kustomize.toolkit.fluxcd.io/reconcile: disabled` or
//! `ssa: Ignore`/`IfNotPresent`, and writes whose fields all lie under the Kustomization's
//! `spec.ignore` paths (an HPA owning `spec.replicas`). Two writers fighting over a field
//! do not make a loop: each further correction within a minute of the last waits twice as
//! long (2 s, 4 s, 8 s, ... up to 5 minutes), and the first throttled one says so in an event.
//!
//! A Kustomization in detect-only mode (`kustomize.toolkit.fluxcd.io/drift-detection: warn`,
//! see [`super::detect`]) is reconciled as promptly, and that reconcile reports the drift
//! instead of correcting it: no correction is counted, and its report counts the detection.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::mpsc;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use serde_json::json;
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::context::Context;
use super::detect::{self, Detection};
use super::events::{self, Action, InvolvedObject, Notice, Severity};
use crate::api::Kustomization;
use crate::flags::DriftCorrection;
use apply::drift::{LastWrite, last_write, only_ignored};
use apply::names::{APPLY_FIELD_MANAGER, DISABLED_VALUE, RECONCILE_ANNOTATION, SSA_ANNOTATION};
use apply::{IgnoreRules, Revision, Written};

/// The annotation by which a Kustomization chooses when its drift is corrected.
pub const DRIFT_CORRECTION_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/drift-correction";

/// How long writes to one Kustomization's objects are gathered before it is reconciled.
const DEBOUNCE: Duration = Duration::from_secs(2);

/// A correction within this long of the previous one waits twice as long as that one did.
const CALM: Duration = Duration::from_secs(60);

/// The longest a correction is held back.
const MAX_GAP: Duration = Duration::from_secs(300);

/// Reconcile requests waiting to be queued.
const QUEUE: usize = 1024;

/// When `ks`'s drift is corrected: its annotation, else the flag.
pub fn correction(ks: &Kustomization, default: DriftCorrection) -> DriftCorrection {
    ks.annotations()
        .get(DRIFT_CORRECTION_ANNOTATION)
        .and_then(|value| DriftCorrection::parse(value))
        .unwrap_or(default)
}

/// Whether the writes to `ks`'s objects are worth reading as they happen (its drift is
/// corrected promptly); the others' writes are not even copied.
pub fn watches_writes(ks: &Kustomization, default: DriftCorrection) -> bool {
    correction(ks, default) == DriftCorrection::Prompt
}

/// Drift of one object, worth a prompt reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Drift {
    /// Another manager wrote the object.
    Written {
        /// Its name (`kubectl-edit`, ...).
        manager: String,
    },
    /// Somebody deleted it.
    Deleted,
}

/// Whether `write` is drift that `ks` corrects promptly. `recorded` is the
/// `resourceVersion` the controller recorded after it last applied the object: when its own
/// write and another manager's fall within the same second, a different version means the
/// other came last.
pub fn judge(
    write: &Written,
    ks: &Kustomization,
    default: DriftCorrection,
    recorded: Option<Revision>,
) -> Option<Drift> {
    if correction(ks, default) != DriftCorrection::Prompt
        || ks.spec.suspend == Some(true)
        || ks.metadata.deletion_timestamp.is_some()
        || exempt(write)
        || !in_inventory(ks, write)
    {
        return None;
    }
    if write.resource_version.is_none() {
        return Some(Drift::Deleted);
    }
    match last_write(&write.managed_fields, APPLY_FIELD_MANAGER) {
        LastWrite::Other { manager, fields } => {
            (!ignored_by_spec(ks, write, &fields)).then_some(Drift::Written { manager })
        }
        LastWrite::Tied { manager, fields } => {
            let written = write.resource_version.as_deref().and_then(Revision::parse);
            let after_ours = recorded.is_some_and(|v| Some(v) != written);
            (after_ours && !ignored_by_spec(ks, write, &fields))
                .then_some(Drift::Written { manager })
        }
        LastWrite::Own | LastWrite::Status | LastWrite::Unknown => None,
    }
}

/// Objects whose annotations keep them out of correction.
fn exempt(write: &Written) -> bool {
    let is = |key: &str, values: &[&str]| {
        write
            .annotations
            .get(key)
            .is_some_and(|value| values.iter().any(|v| value.eq_ignore_ascii_case(v)))
    };
    is(RECONCILE_ANNOTATION, &[DISABLED_VALUE]) || is(SSA_ANNOTATION, &["Ignore", "IfNotPresent"])
}

/// Whether the object is in `ks`'s inventory (an object that left it was pruned, or is not
/// `ks`'s any more).
fn in_inventory(ks: &Kustomization, write: &Written) -> bool {
    let id = write.id.inventory_id();
    ks.status
        .as_ref()
        .and_then(|status| status.inventory.as_ref())
        .is_some_and(|inventory| inventory.entries.iter().any(|entry| entry.id == id))
}

/// Whether every field the writer owns is one `ks`'s `spec.ignore` leaves alone on this object.
fn ignored_by_spec(ks: &Kustomization, write: &Written, fields: &serde_json::Value) -> bool {
    let Some(rules) = ks.spec.ignore.as_deref().filter(|rules| !rules.is_empty()) else {
        return false;
    };
    let Ok(rules) = IgnoreRules::compile(rules) else {
        return false;
    };
    let object = json!({
        "apiVersion": write.id.api_version(),
        "kind": write.id.kind,
        "metadata": {
            "name": write.id.name,
            "namespace": write.id.namespace,
            "labels": write.labels,
            "annotations": write.annotations,
        },
    });
    only_ignored(fields, &rules.paths_for(&object))
}

/// When each Kustomization was last corrected, and how far its corrections are spaced.
#[derive(Default)]
struct Pace {
    /// When the last correction was queued.
    last: Option<Instant>,
    /// How many corrections came within [`CALM`] of the one before.
    streak: u32,
    /// A correction is waiting to be queued.
    pending: bool,
    /// The current streak was reported as throttled.
    reported: bool,
}

impl Pace {
    /// The delay before the next correction, from `now`, and whether it is held back longer
    /// than the debounce (throttled).
    fn next(&mut self, now: Instant) -> (Duration, bool) {
        let Some(last) = self.last.filter(|last| now.duration_since(*last) < CALM) else {
            self.streak = 0;
            self.reported = false;
            return (DEBOUNCE, false);
        };
        self.streak = self.streak.saturating_add(1);
        let gap = DEBOUNCE
            .saturating_mul(2u32.saturating_pow(self.streak))
            .min(MAX_GAP);
        let due = (last + gap).max(now + DEBOUNCE);
        let delay = due.duration_since(now);
        (delay, delay > DEBOUNCE)
    }
}

/// Turns the drift seen in `writes` into reconcile requests for the Kustomizations of
/// `ctx` that correct it promptly, until `writes` closes.
pub fn corrections(
    mut writes: broadcast::Receiver<Written>,
    ctx: Arc<Context>,
    default: DriftCorrection,
) -> mpsc::Receiver<ObjectRef<Kustomization>> {
    let (queue, requests) = mpsc::channel(QUEUE);
    let paces: Arc<Mutex<HashMap<ObjectRef<Kustomization>, Pace>>> = Arc::default();
    tokio::spawn(async move {
        loop {
            let write = match writes.recv().await {
                Ok(write) => write,
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    // Missed writes are corrected at the next interval, as without this.
                    tracing::warn!(missed, "drift correction fell behind the object watches");
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            };
            let (namespace, name) = &write.owner;
            let owner = ObjectRef::new(name).within(namespace);
            let Some(ks) = ctx.kustomizations.get(&owner) else {
                continue;
            };
            let recorded = ctx.recorded_version(&ks, &write.id);
            let Some(drift) = judge(&write, &ks, default, recorded) else {
                continue;
            };
            // In warn mode the reconcile tells (and counts) what drifted.
            let reporting = detect::mode(&ks) == Detection::Warn;
            if !reporting {
                ctx.metrics.count_drift(namespace, name);
            }
            let request = Request {
                owner,
                drift,
                reporting,
            };
            schedule(&ctx, &paces, &queue, &ks, &write, request).await;
        }
    });
    requests
}

/// A reconcile to queue for drift.
struct Request {
    /// The Kustomization.
    owner: ObjectRef<Kustomization>,
    /// What drifted.
    drift: Drift,
    /// The reconcile reports the drift (warn mode) rather than correcting it.
    reporting: bool,
}

/// Queues a correction (or, in warn mode, a report) of `ks` after its pace's delay, unless
/// one is already waiting.
async fn schedule(
    ctx: &Arc<Context>,
    paces: &Arc<Mutex<HashMap<ObjectRef<Kustomization>, Pace>>>,
    queue: &mpsc::Sender<ObjectRef<Kustomization>>,
    ks: &Kustomization,
    write: &Written,
    request: Request,
) {
    let Request {
        owner,
        drift,
        reporting,
    } = request;
    let now = Instant::now();
    let (delay, report) = {
        let Ok(mut paces) = paces.lock() else { return };
        let pace = paces.entry(owner.clone()).or_default();
        if pace.pending {
            return;
        }
        let (delay, throttled) = pace.next(now);
        pace.pending = true;
        pace.last = Some(now + delay);
        let report = throttled && !pace.reported;
        pace.reported |= throttled;
        (delay, report)
    };
    let object = write.id.describe();
    let by = match &drift {
        Drift::Written { manager } => format!("written by {manager}"),
        Drift::Deleted => "deleted".to_string(),
    };
    let namespace = owner.namespace.as_deref().unwrap_or_default();
    if reporting {
        tracing::info!(kustomization = %owner.name, namespace, %object, drift = %by, delay = ?delay, "drift detected, reporting");
    } else {
        tracing::info!(kustomization = %owner.name, namespace, %object, drift = %by, delay = ?delay, "drift detected, correcting");
    }
    if report {
        let what = if reporting { "report" } else { "correction" };
        let message = format!(
            "drift {what} throttled: {object} was {by} again within a minute of the last \
             {what}; the next {what} runs in {}s",
            delay.as_secs()
        );
        let involved = InvolvedObject::of(ks);
        let notice = Notice {
            severity: Severity::Info,
            action: Action::Apply,
            reason: "DriftCorrectionThrottled",
            message: &message,
            metadata: events::metadata(&involved, None, None, false),
            related: None,
        };
        ctx.events.publish(&involved, notice).await;
    }
    let (ctx, paces, mut queue) = (Arc::clone(ctx), Arc::clone(paces), queue.clone());
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        if let Ok(mut paces) = paces.lock()
            && let Some(pace) = paces.get_mut(&owner)
        {
            pace.pending = false;
        }
        if !reporting {
            let namespace = owner.namespace.clone().unwrap_or_default();
            ctx.metrics.count_drift_correction(&namespace, &owner.name);
        }
        let _ = queue.try_send(owner);
    });
}

#[cfg(test)]
mod tests;
