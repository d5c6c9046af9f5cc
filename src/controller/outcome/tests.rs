//! The verdict on each kind of outcome, as a table of scenarios: what Flux's
//! kustomize-controller does with the same outcome (its `reconcile` and `finalizeStatus`).

use super::*;
use crate::api::names::condition;
use crate::api::{ConditionStatus, KustomizationSpec};

const REVISION: &str = "main@sha1:0123456789abcdef";

fn schedule(interval: &str, retry_interval: Option<&str>) -> Schedule {
    Schedule::of(&KustomizationSpec {
        interval: interval.into(),
        retry_interval: retry_interval.map(str::to_string),
        ..Default::default()
    })
}

/// A run that read `REVISION`, took 2.5 s, every 10 minutes, retried every 2, no jitter.
fn facts() -> Facts<'static> {
    Facts {
        revision: Some(REVISION),
        origin_revision: None,
        elapsed: Duration::from_millis(2500),
        schedule: schedule("10m", Some("2m")),
        jitter_percentage: 0,
        success_event: true,
    }
}

fn failed(reason: &'static str, message: &str) -> Option<StatusChange> {
    Some(StatusChange::Failed {
        reason,
        message: message.into(),
    })
}

fn event(
    severity: Severity,
    action: EventAction,
    reason: &'static str,
    message: &str,
) -> Option<Event> {
    Some(Event {
        severity,
        action,
        reason,
        message: message.into(),
        commit_status: false,
    })
}

fn info(message: &str) -> LogLine {
    LogLine {
        level: Level::Info,
        reason: None,
        revision: None,
        message: message.into(),
    }
}

/// The error line of a failure that is retried after `retry`.
fn retried(reason: &'static str, retry: &str, message: &str) -> LogLine {
    LogLine {
        level: Level::Error,
        reason: Some(reason),
        revision: Some(REVISION.into()),
        message: format!("Reconciliation failed after 2.5s, next try in {retry}: {message}"),
    }
}

struct Case {
    name: &'static str,
    outcome: Outcome,
    facts: Facts<'static>,
    want: Decision,
}

fn success_decision(event: bool, next: Next, origin_revision: Option<&str>) -> Decision {
    let message = "Reconciliation finished in 2.5s, next run in 10m0s";
    Decision {
        status: Some(StatusChange::Ready {
            revision: REVISION.into(),
            origin_revision: origin_revision.map(str::to_string),
        }),
        event: event.then(|| Event {
            severity: Severity::Info,
            action: EventAction::Reconcile,
            reason: reason::RECONCILIATION_SUCCEEDED,
            message: message.into(),
            commit_status: true,
        }),
        log: LogLine {
            level: Level::Info,
            reason: None,
            revision: Some(REVISION.into()),
            message: message.into(),
        },
        next,
    }
}

fn cases() -> Vec<Case> {
    let every_10m = Next::Jittered {
        interval: Duration::from_secs(600),
        percentage: 0,
    };
    let after = |secs| Next::After(Duration::from_secs(secs));
    vec![
    Case {
        name: "success: Ready, a commit-status event, next run at the interval",
        outcome: Outcome::Ran(Ok(())),
        facts: facts(),
        want: success_decision(true, every_10m, None),
    },
    Case {
        name: "success with an origin revision: recorded as applied",
        outcome: Outcome::Ran(Ok(())),
        facts: Facts {
            origin_revision: Some("v1.2.0@sha1:0123456789abcdef"),
            ..facts()
        },
        want: success_decision(true, every_10m, Some("v1.2.0@sha1:0123456789abcdef")),
    },
    Case {
        name: "success with DisableCommitStatusEvent: no event",
        outcome: Outcome::Ran(Ok(())),
        facts: Facts {
            success_event: false,
            ..facts()
        },
        want: success_decision(false, every_10m, None),
    },
    Case {
        name: "success with --interval-jitter-percentage: the interval, jittered",
        outcome: Outcome::Ran(Ok(())),
        facts: Facts {
            jitter_percentage: 10,
            ..facts()
        },
        want: success_decision(
            true,
            Next::Jittered {
                interval: Duration::from_secs(600),
                percentage: 10,
            },
            None,
        ),
    },
    Case {
        name: "suspended: nothing written, no event, waits for a change",
        outcome: Outcome::Suspended,
        facts: facts(),
        want: Decision {
            status: None,
            event: None,
            log: info("Reconciliation is suspended for this object"),
            next: Next::AwaitChange,
        },
    },
    Case {
        name: "ArtifactFailed: retried after retryInterval with an error event",
        outcome: Outcome::Ran(Err(Failure::new(
            reason::ARTIFACT_FAILED,
            "unable to get source 'flux-system/repo': forbidden",
        ))),
        facts: facts(),
        want: Decision {
            status: failed(
                reason::ARTIFACT_FAILED,
                "unable to get source 'flux-system/repo': forbidden",
            ),
            event: event(
                Severity::Error,
                EventAction::Reconcile,
                reason::ARTIFACT_FAILED,
                "unable to get source 'flux-system/repo': forbidden",
            ),
            log: retried(
                reason::ARTIFACT_FAILED,
                "2m0s",
                "unable to get source 'flux-system/repo': forbidden",
            ),
            next: after(120),
        },
    },
    Case {
        name: "BuildFailed without retryInterval: retried after the interval",
        outcome: Outcome::Ran(Err(Failure::new(
            reason::BUILD_FAILED,
            "kustomize build failed: missing resource",
        ))),
        facts: Facts {
            schedule: schedule("10m", None),
            ..facts()
        },
        want: Decision {
            status: failed(reason::BUILD_FAILED, "kustomize build failed: missing resource"),
            event: event(
                Severity::Error,
                EventAction::Reconcile,
                reason::BUILD_FAILED,
                "kustomize build failed: missing resource",
            ),
            log: retried(
                reason::BUILD_FAILED,
                "10m0s",
                "kustomize build failed: missing resource",
            ),
            next: after(600),
        },
    },
    Case {
        name: "an unreadable retryInterval counts as absent: the interval",
        outcome: Outcome::Ran(Err(Failure::new(reason::BUILD_FAILED, "x"))),
        facts: Facts {
            schedule: schedule("5m", Some("soon")),
            ..facts()
        },
        want: Decision {
            status: failed(reason::BUILD_FAILED, "x"),
            event: event(
                Severity::Error,
                EventAction::Reconcile,
                reason::BUILD_FAILED,
                "x",
            ),
            log: retried(reason::BUILD_FAILED, "5m0s", "x"),
            next: after(300),
        },
    },
    Case {
        name: "ReconciliationFailed: the event says what Flux's does, the condition the error",
        outcome: Outcome::Ran(Err(Failure {
            reason: reason::RECONCILIATION_FAILED,
            message: "no kubeconfig".into(),
            kind: FailureKind::Retry {
                event: Some("failed to build kube client: no kubeconfig".into()),
            },
            action: EventAction::Reconcile,
        })),
        facts: facts(),
        want: Decision {
            status: failed(reason::RECONCILIATION_FAILED, "no kubeconfig"),
            event: event(
                Severity::Error,
                EventAction::Reconcile,
                reason::RECONCILIATION_FAILED,
                "failed to build kube client: no kubeconfig",
            ),
            log: retried(reason::RECONCILIATION_FAILED, "2m0s", "no kubeconfig"),
            next: after(120),
        },
    },
    Case {
        name: "HealthCheckFailed: retried after retryInterval, the event names the stage",
        outcome: Outcome::Ran(Err(Failure::new(
            reason::HEALTH_CHECK_FAILED,
            "health check failed after 30s: timeout waiting for: [Deployment/apps/web status: 'InProgress']",
        )
        .during(EventAction::HealthCheck))),
        facts: facts(),
        want: Decision {
            status: failed(
                reason::HEALTH_CHECK_FAILED,
                "health check failed after 30s: timeout waiting for: [Deployment/apps/web status: 'InProgress']",
            ),
            event: event(
                Severity::Error,
                EventAction::HealthCheck,
                reason::HEALTH_CHECK_FAILED,
                "health check failed after 30s: timeout waiting for: [Deployment/apps/web status: 'InProgress']",
            ),
            log: retried(
                reason::HEALTH_CHECK_FAILED,
                "2m0s",
                "health check failed after 30s: timeout waiting for: [Deployment/apps/web status: 'InProgress']",
            ),
            next: after(120),
        },
    },
    Case {
        name: "PruneFailed: retried after retryInterval",
        outcome: Outcome::Ran(Err(Failure::new(reason::PRUNE_FAILED, "forbidden"))),
        facts: facts(),
        want: Decision {
            status: failed(reason::PRUNE_FAILED, "forbidden"),
            event: event(
                Severity::Error,
                EventAction::Reconcile,
                reason::PRUNE_FAILED,
                "forbidden",
            ),
            log: retried(reason::PRUNE_FAILED, "2m0s", "forbidden"),
            next: after(120),
        },
    },
    Case {
        name: "a failure before the source was read logs an empty revision",
        outcome: Outcome::Ran(Err(Failure::new(reason::ARTIFACT_FAILED, "x"))),
        facts: Facts {
            revision: None,
            ..facts()
        },
        want: Decision {
            status: failed(reason::ARTIFACT_FAILED, "x"),
            event: event(
                Severity::Error,
                EventAction::Reconcile,
                reason::ARTIFACT_FAILED,
                "x",
            ),
            log: LogLine {
                revision: Some(String::new()),
                ..retried(reason::ARTIFACT_FAILED, "2m0s", "x")
            },
            next: after(120),
        },
    },
    Case {
        name: "DependencyNotReady: waits --requeue-dependency, not retryInterval, info event",
        outcome: Outcome::Ran(Err(Failure {
            reason: reason::DEPENDENCY_NOT_READY,
            message: "dependency 'apps/db' is not ready".into(),
            kind: FailureKind::Wait {
                retry_in: Duration::from_secs(30),
                event: Some("Dependencies do not meet ready condition, retrying in 30s".into()),
            },
            action: EventAction::CheckDependencies,
        })),
        facts: facts(),
        want: Decision {
            status: failed(
                reason::DEPENDENCY_NOT_READY,
                "dependency 'apps/db' is not ready",
            ),
            event: event(
                Severity::Info,
                EventAction::CheckDependencies,
                reason::DEPENDENCY_NOT_READY,
                "Dependencies do not meet ready condition, retrying in 30s",
            ),
            log: info("Dependencies do not meet ready condition, retrying in 30s"),
            next: after(30),
        },
    },
    Case {
        name: "a source without artifact: waits, no event",
        outcome: Outcome::Ran(Err(Failure::wait(
            reason::ARTIFACT_FAILED,
            "Source artifact not found, retrying in 30s",
            Duration::from_secs(30),
        ))),
        facts: facts(),
        want: Decision {
            status: failed(
                reason::ARTIFACT_FAILED,
                "Source artifact not found, retrying in 30s",
            ),
            event: None,
            log: info("Source artifact not found, retrying in 30s"),
            next: after(30),
        },
    },
    Case {
        name: "an invalid expression: Stalled, generation observed, error event, no retry",
        outcome: Outcome::Ran(Err(Failure::terminal(
            reason::INVALID_CEL_EXPRESSION,
            "bad expression",
        )
        .during(EventAction::HealthCheck))),
        facts: facts(),
        want: Decision {
            status: Some(StatusChange::Stalled {
                reason: reason::INVALID_CEL_EXPRESSION,
                message: "Reconciliation failed terminally due to configuration error: bad expression".into(),
                observe_generation: true,
            }),
            event: event(
                Severity::Error,
                EventAction::HealthCheck,
                reason::INVALID_CEL_EXPRESSION,
                "Reconciliation failed terminally due to configuration error: bad expression",
            ),
            log: LogLine {
                level: Level::Error,
                reason: Some(reason::INVALID_CEL_EXPRESSION),
                revision: None,
                message: "Reconciliation failed terminally due to configuration error: bad expression".into(),
            },
            next: Next::Terminal,
        },
    },
    Case {
        name: "access denied: Stalled, generation not observed, no retry",
        outcome: Outcome::Ran(Err(Failure::denied(
            "can't access 'GitRepository/other/repo', cross-namespace references have been blocked",
        )
        .during(EventAction::ResolveSource))),
        facts: facts(),
        want: Decision {
            status: Some(StatusChange::Stalled {
                reason: reason::ACCESS_DENIED,
                message: "can't access 'GitRepository/other/repo', cross-namespace references have been blocked".into(),
                observe_generation: false,
            }),
            event: event(
                Severity::Error,
                EventAction::ResolveSource,
                reason::ACCESS_DENIED,
                "can't access 'GitRepository/other/repo', cross-namespace references have been blocked",
            ),
            log: LogLine {
                level: Level::Error,
                reason: Some(reason::ACCESS_DENIED),
                revision: None,
                message: "can't access 'GitRepository/other/repo', cross-namespace references have been blocked".into(),
            },
            next: Next::Terminal,
        },
    },
    Case {
        name: "health checks canceled by a new request: reconciled again at once",
        outcome: Outcome::Ran(Err(Failure::canceled("GitRepository/flux-system/repo"))),
        facts: facts(),
        want: Decision {
            status: failed(
                reason::HEALTH_CHECK_CANCELED,
                "New reconciliation triggered by GitRepository/flux-system/repo",
            ),
            event: event(
                Severity::Info,
                EventAction::HealthCheck,
                reason::HEALTH_CHECK_CANCELED,
                "Health checks canceled due to new reconciliation triggered by GitRepository/flux-system/repo",
            ),
            log: info(
                "New reconciliation triggered by GitRepository/flux-system/repo, canceling health checks",
            ),
            next: Next::After(Duration::ZERO),
        },
    },
]
}

#[test]
fn each_outcome_has_flux_verdict() {
    for Case {
        name,
        outcome,
        facts,
        want,
    } in cases()
    {
        assert_eq!(decide(outcome, &facts), want, "{name}");
    }
}

#[test]
fn the_schedule_reads_interval_and_retry_interval() {
    let minutes = |m: u64| Duration::from_secs(60 * m);
    let cases = [
        ("10m", Some("2m"), minutes(10), minutes(2)),
        ("10m", None, minutes(10), minutes(10)),
        ("1h", Some(""), minutes(60), minutes(60)),
        ("5m", Some("soon"), minutes(5), minutes(5)),
        ("often", None, minutes(10), minutes(10)),
        ("often", Some("30s"), minutes(10), Duration::from_secs(30)),
    ];
    for (interval, retry, want_interval, want_retry) in cases {
        assert_eq!(
            schedule(interval, retry),
            Schedule {
                interval: want_interval,
                retry_interval: want_retry,
            },
            "interval {interval:?}, retryInterval {retry:?}"
        );
    }
}

fn condition_of<'a>(
    status: &'a KustomizationStatus,
    type_: &str,
) -> Option<&'a crate::api::Condition> {
    status
        .conditions
        .as_deref()
        .and_then(|c| c.iter().find(|c| c.type_ == type_))
}

/// A status as a run in progress leaves it: Reconciling=True, Ready=Unknown.
fn progressing(ks: &Kustomization) -> KustomizationStatus {
    let mut status = KustomizationStatus::default();
    status::mark_progressing(ks, &mut status, "Fetching manifests");
    status
}

#[test]
fn status_changes_set_flux_conditions_from_progressing() {
    let mut ks = Kustomization::new("app", KustomizationSpec::default());
    ks.metadata.generation = Some(4);

    let mut status = progressing(&ks);
    let reconciling = condition_of(&status, condition::RECONCILING).map(|c| c.reason.clone());
    assert_eq!(reconciling.as_deref(), Some(reason::PROGRESSING));
    decide(Outcome::Ran(Ok(())), &facts())
        .status
        .expect("a success writes status")
        .apply_to(&ks, &mut status);
    let ready = condition_of(&status, condition::READY).expect("Ready");
    assert_eq!(ready.status, ConditionStatus::True);
    assert_eq!(ready.reason, reason::RECONCILIATION_SUCCEEDED);
    assert_eq!(ready.message, format!("Applied revision: {REVISION}"));
    assert!(condition_of(&status, condition::RECONCILING).is_none());
    assert!(condition_of(&status, condition::STALLED).is_none());
    assert_eq!(status.last_applied_revision.as_deref(), Some(REVISION));
    assert_eq!(status.observed_generation, Some(4));

    let mut status = progressing(&ks);
    decide(
        Outcome::Ran(Err(Failure::new(reason::BUILD_FAILED, "broken"))),
        &facts(),
    )
    .status
    .expect("a failure writes status")
    .apply_to(&ks, &mut status);
    let ready = condition_of(&status, condition::READY).expect("Ready");
    assert_eq!(
        (ready.status, ready.reason.as_str(), ready.message.as_str()),
        (ConditionStatus::False, reason::BUILD_FAILED, "broken")
    );
    let reconciling = condition_of(&status, condition::RECONCILING).expect("Reconciling");
    assert_eq!(reconciling.reason, reason::PROGRESSING_WITH_RETRY);
    assert!(condition_of(&status, condition::STALLED).is_none());
    assert_eq!(status.last_applied_revision, None);
    assert_eq!(status.observed_generation, None);

    let mut status = progressing(&ks);
    decide(Outcome::Ran(Err(Failure::denied("can't access"))), &facts())
        .status
        .expect("a terminal failure writes status")
        .apply_to(&ks, &mut status);
    let stalled = condition_of(&status, condition::STALLED).expect("Stalled");
    assert_eq!(stalled.status, ConditionStatus::True);
    assert_eq!(stalled.reason, reason::ACCESS_DENIED);
    let ready = condition_of(&status, condition::READY).expect("Ready");
    assert_eq!(ready.status, ConditionStatus::False);
    assert_eq!(
        status.observed_generation, None,
        "denied access observes nothing"
    );

    let mut status = progressing(&ks);
    decide(
        Outcome::Ran(Err(Failure::terminal(
            reason::INVALID_CEL_EXPRESSION,
            "bad",
        ))),
        &facts(),
    )
    .status
    .expect("a terminal failure writes status")
    .apply_to(&ks, &mut status);
    assert_eq!(status.observed_generation, Some(4));
}

#[test]
fn failures_after_decryption_are_masked_keeping_reason_and_kind() {
    let mut secrets = SecretValues::new();
    secrets.add("hunter2-decrypted");
    let failure = Failure::new(
        reason::RECONCILIATION_FAILED,
        "Deployment/apps/web dry-run failed (Invalid): spec.replicas: Invalid value: \"hunter2-decrypted\"",
    )
    .redacted(&secrets);
    assert_eq!(
        failure.message,
        "Deployment/apps/web dry-run failed (Invalid): spec.replicas: Invalid value: \"*****\""
    );
    assert_eq!(failure.reason, reason::RECONCILIATION_FAILED);
    assert_eq!(failure.kind, FailureKind::Retry { event: None });
    let untouched = Failure::new(reason::PRUNE_FAILED, "prune failed").redacted(&secrets);
    assert_eq!(untouched.message, "prune failed");
}

#[test]
fn failures_name_the_stage_their_event_reports() {
    assert_eq!(
        Failure::new(reason::BUILD_FAILED, "x").action,
        EventAction::Reconcile
    );
    assert_eq!(
        Failure::canceled("GitRepository/ns/repo").action,
        EventAction::HealthCheck
    );
    let denied = Failure::denied("can't access").during(EventAction::ResolveSource);
    assert_eq!(denied.action, EventAction::ResolveSource);
    // `during` changes the stage only.
    assert_eq!(denied.reason, reason::ACCESS_DENIED);
    assert_eq!(denied.message, "can't access");
}

#[test]
fn invalid_expressions_are_terminal_with_flux_prefix() {
    let failure = Failure::terminal(reason::INVALID_CEL_EXPRESSION, "bad expression");
    assert_eq!(
        failure.kind,
        FailureKind::Terminal {
            observe_generation: true
        }
    );
    assert_eq!(
        failure.message,
        "Reconciliation failed terminally due to configuration error: bad expression"
    );
    assert_eq!(
        Failure::canceled("GitRepository/flux-system/repo").message,
        "New reconciliation triggered by GitRepository/flux-system/repo"
    );
}
