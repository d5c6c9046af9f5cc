//! The verdict on a reconcile: what its outcome changes in the status, the event it emits,
//! the line it logs and when the Kustomization is reconciled next. [`decide`] is a pure
//! function of the outcome and a few facts about the run (no clock, no client, no random
//! number); `reconcile` runs the pipeline, calls it once and applies what it returns.

use std::time::Duration;

use super::events::{Action as EventAction, Severity};
use super::status;
use crate::api::duration;
use crate::api::names::reason;
use crate::api::{Kustomization, KustomizationSpec, KustomizationStatus};
use crate::render::SecretValues;

/// The prefix Flux gives errors that no retry can fix.
const TERMINAL_ERROR_MESSAGE: &str = "Reconciliation failed terminally due to configuration error";

/// The interval when `spec.interval` cannot be read (the CRD's schema makes it required).
const DEFAULT_INTERVAL: Duration = Duration::from_secs(600);

/// A failed stage: the Ready reason Flux uses for it, a message naming what is at fault, and
/// the stage its event names.
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) reason: &'static str,
    pub(super) message: String,
    pub(super) kind: FailureKind,
    pub(super) action: EventAction,
}

/// What follows a failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum FailureKind {
    /// Retried after `retryInterval`, with an error event: `event` when Flux's differs from
    /// the condition's message, else that message.
    Retry {
        /// The event's message.
        event: Option<String>,
    },
    /// Something else must happen first (a dependency, the source): checked again after
    /// `retry_in`, with an informational `event` when there is one, as Flux does.
    Wait {
        /// When to check again.
        retry_in: Duration,
        /// The event's message.
        event: Option<String>,
    },
    /// A configuration error: Stalled, retried only when the Kustomization changes. Flux
    /// records the generation as observed for invalid expressions, not for denied access.
    Terminal {
        /// Set `status.observedGeneration`.
        observe_generation: bool,
    },
    /// A new reconcile request cancelled the health checks: reconciled again at once.
    Canceled {
        /// What requested it (`Kind/namespace/name`).
        trigger: String,
    },
}

impl Failure {
    pub(super) fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Failure {
            reason,
            message: message.into(),
            kind: FailureKind::Retry { event: None },
            action: EventAction::Reconcile,
        }
    }

    pub(super) fn terminal(reason: &'static str, error: impl std::fmt::Display) -> Self {
        Failure {
            reason,
            message: format!("{TERMINAL_ERROR_MESSAGE}: {error}"),
            kind: FailureKind::Terminal {
                observe_generation: true,
            },
            action: EventAction::Reconcile,
        }
    }

    /// Access that the flags deny: Stalled with the reason `AccessDenied`.
    pub(super) fn denied(message: impl Into<String>) -> Self {
        Failure {
            reason: reason::ACCESS_DENIED,
            message: message.into(),
            kind: FailureKind::Terminal {
                observe_generation: false,
            },
            action: EventAction::Reconcile,
        }
    }

    /// Not ready to proceed: checked again after `retry_in`.
    pub(super) fn wait(
        reason: &'static str,
        message: impl Into<String>,
        retry_in: Duration,
    ) -> Self {
        Failure {
            reason,
            message: message.into(),
            kind: FailureKind::Wait {
                retry_in,
                event: None,
            },
            action: EventAction::Reconcile,
        }
    }

    /// The health checks were cancelled by `trigger` (`Kind/namespace/name`).
    pub(super) fn canceled(trigger: &str) -> Self {
        Failure {
            reason: reason::HEALTH_CHECK_CANCELED,
            message: format!("New reconciliation triggered by {trigger}"),
            kind: FailureKind::Canceled {
                trigger: trigger.to_string(),
            },
            action: EventAction::HealthCheck,
        }
    }

    /// The failure, its event naming `action` as the stage that failed.
    pub(super) fn during(self, action: EventAction) -> Self {
        Failure { action, ..self }
    }

    /// The failure with every secret value masked out of its message: any message written
    /// after the build decrypted values or read variables from Secrets goes through this
    /// before it reaches the Ready condition, an event or a log line.
    pub(super) fn redacted(self, secrets: &SecretValues) -> Self {
        Failure {
            message: secrets.redact(&self.message),
            ..self
        }
    }
}

/// What a reconcile of a live (not deleted) Kustomization came to.
#[derive(Debug)]
pub(super) enum Outcome {
    /// `spec.suspend`: the pipeline did not run.
    Suspended,
    /// The pipeline ran, to the end or to the failure of one stage.
    Ran(Result<(), Failure>),
}

/// `spec.interval` and `spec.retryInterval` as durations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Schedule {
    /// Between two successful reconciles.
    pub(super) interval: Duration,
    /// After a failure that is retried: `spec.retryInterval`, else the interval.
    pub(super) retry_interval: Duration,
}

impl Schedule {
    /// The schedule `spec` asks for; a value that is not a Go duration counts as absent.
    pub(super) fn of(spec: &KustomizationSpec) -> Self {
        let interval = duration::parse(&spec.interval).unwrap_or(DEFAULT_INTERVAL);
        let retry_interval = spec
            .retry_interval
            .as_deref()
            .and_then(|r| duration::parse(r).ok())
            .unwrap_or(interval);
        Schedule {
            interval,
            retry_interval,
        }
    }
}

/// What the verdict needs to know about the run besides its outcome.
#[derive(Clone, Copy, Debug)]
pub(super) struct Facts<'a> {
    /// The artifact revision, once the source was read.
    pub(super) revision: Option<&'a str>,
    /// The artifact's origin revision, when it has one.
    pub(super) origin_revision: Option<&'a str>,
    /// How long the run took.
    pub(super) elapsed: Duration,
    /// When to run again.
    pub(super) schedule: Schedule,
    /// `--interval-jitter-percentage`.
    pub(super) jitter_percentage: u8,
    /// Whether a success emits its event (unless `--feature-gates=DisableCommitStatusEvent`):
    /// notification-controller turns it into a Git commit status.
    pub(super) success_event: bool,
}

/// The verdict: everything `reconcile` does once the pipeline has run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Decision {
    /// The conditions to set, then write; `None` writes nothing (and counts no run).
    pub(super) status: Option<StatusChange>,
    /// The event to emit.
    pub(super) event: Option<Event>,
    /// The line to log.
    pub(super) log: LogLine,
    /// When to reconcile again.
    pub(super) next: Next,
}

/// A change of the Ready, Stalled and Reconciling conditions (see [`status`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum StatusChange {
    /// Ready=True with `revision` applied, the generation observed.
    Ready {
        revision: String,
        origin_revision: Option<String>,
    },
    /// Ready=False and Stalled=True.
    Stalled {
        reason: &'static str,
        message: String,
        observe_generation: bool,
    },
    /// Ready=False, Reconciling (if any) `ProgressingWithRetry`.
    Failed {
        reason: &'static str,
        message: String,
    },
}

impl StatusChange {
    /// Sets the conditions and fields of `status` this change names.
    pub(super) fn apply_to(&self, ks: &Kustomization, status: &mut KustomizationStatus) {
        match self {
            StatusChange::Ready {
                revision,
                origin_revision,
            } => status::mark_ready(ks, status, revision, origin_revision.as_deref()),
            StatusChange::Stalled {
                reason,
                message,
                observe_generation,
            } => status::mark_stalled(ks, status, reason, message, *observe_generation),
            StatusChange::Failed { reason, message } => {
                status::mark_failed(ks, status, reason, message);
            }
        }
    }
}

/// An event about the Kustomization (and, as related object, its source).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Event {
    pub(super) severity: Severity,
    pub(super) action: EventAction,
    pub(super) reason: &'static str,
    pub(super) message: String,
    /// The event's metadata asks for a Git commit status.
    pub(super) commit_status: bool,
}

/// The level of a log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Level {
    Info,
    Error,
}

/// A log line about the Kustomization, with its optional `reason` and `revision` fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct LogLine {
    pub(super) level: Level,
    pub(super) reason: Option<&'static str>,
    pub(super) revision: Option<String>,
    pub(super) message: String,
}

/// When the Kustomization is reconciled again (besides when it or a watched object changes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Next {
    /// Only when something changes.
    AwaitChange,
    /// Only when something changes: a terminal failure (Stalled), which no retry fixes.
    Terminal,
    /// After this delay.
    After(Duration),
    /// After `interval` moved by a random amount of up to `percentage` percent either way
    /// (`schedule::with_jitter`).
    Jittered { interval: Duration, percentage: u8 },
}

/// The verdict on `outcome`.
pub(super) fn decide(outcome: Outcome, facts: &Facts<'_>) -> Decision {
    let log = |level, reason, message| LogLine {
        level,
        reason,
        revision: None,
        message,
    };
    let failure = match outcome {
        Outcome::Suspended => {
            return Decision {
                status: None,
                event: None,
                log: log(
                    Level::Info,
                    None,
                    "Reconciliation is suspended for this object".to_string(),
                ),
                next: Next::AwaitChange,
            };
        }
        Outcome::Ran(Ok(())) => return succeeded(facts),
        Outcome::Ran(Err(failure)) => failure,
    };
    let Failure {
        reason: failure_reason,
        message,
        kind,
        action,
    } = failure;
    let failed = |message: &str| {
        Some(StatusChange::Failed {
            reason: failure_reason,
            message: message.to_string(),
        })
    };
    let event = |severity, message: String| {
        Some(Event {
            severity,
            action,
            reason: failure_reason,
            message,
            commit_status: false,
        })
    };
    match kind {
        FailureKind::Terminal { observe_generation } => Decision {
            status: Some(StatusChange::Stalled {
                reason: failure_reason,
                message: message.clone(),
                observe_generation,
            }),
            event: event(Severity::Error, message.clone()),
            log: log(Level::Error, Some(failure_reason), message),
            next: Next::Terminal,
        },
        FailureKind::Wait {
            retry_in,
            event: wait_event,
        } => Decision {
            status: failed(&message),
            log: log(
                Level::Info,
                None,
                wait_event.clone().unwrap_or_else(|| message.clone()),
            ),
            event: wait_event.and_then(|e| event(Severity::Info, e)),
            next: Next::After(retry_in),
        },
        FailureKind::Canceled { trigger } => Decision {
            status: failed(&message),
            event: event(
                Severity::Info,
                format!("Health checks canceled due to new reconciliation triggered by {trigger}"),
            ),
            log: log(
                Level::Info,
                None,
                format!("{message}, canceling health checks"),
            ),
            next: Next::After(Duration::ZERO),
        },
        FailureKind::Retry { event: retry_event } => {
            let retry_in = facts.schedule.retry_interval;
            Decision {
                status: failed(&message),
                event: event(
                    Severity::Error,
                    retry_event.unwrap_or_else(|| message.clone()),
                ),
                log: LogLine {
                    level: Level::Error,
                    reason: Some(failure_reason),
                    revision: Some(facts.revision.unwrap_or_default().to_string()),
                    message: format!(
                        "Reconciliation failed after {}, next try in {}: {message}",
                        duration::format(facts.elapsed),
                        duration::format(retry_in),
                    ),
                },
                next: Next::After(retry_in),
            }
        }
    }
}

/// The verdict on a run that applied its revision and found it healthy.
fn succeeded(facts: &Facts<'_>) -> Decision {
    let revision = facts.revision.unwrap_or_default().to_string();
    let interval = facts.schedule.interval;
    let message = format!(
        "Reconciliation finished in {}, next run in {}",
        duration::format(facts.elapsed),
        duration::format(interval)
    );
    Decision {
        status: Some(StatusChange::Ready {
            revision: revision.clone(),
            origin_revision: facts.origin_revision.map(str::to_string),
        }),
        event: facts.success_event.then(|| Event {
            severity: Severity::Info,
            action: EventAction::Reconcile,
            reason: reason::RECONCILIATION_SUCCEEDED,
            message: message.clone(),
            commit_status: true,
        }),
        log: LogLine {
            level: Level::Info,
            reason: None,
            revision: Some(revision),
            message,
        },
        next: Next::Jittered {
            interval,
            percentage: facts.jitter_percentage,
        },
    }
}

#[cfg(test)]
mod tests;
