//! How a run's progress reaches the status: a quick run writes its outcome once, a slow one
//! reports Ready=Unknown (Progressing) first, and the report never lands after the outcome.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kustomize_controller::api::{ConditionStatus, Kustomization};
use serde_json::json;
use tokio::time::timeout;

use super::artifacts::{publish_artifact, serve_after, tarball};
use super::*;

/// What one write of the Kustomization's status showed.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    ready: Option<(ConditionStatus, String)>,
    reconciling: Option<String>,
    runs: i64,
    /// How long the last run took (its history snapshot's `lastReconciledDuration`).
    last_run: Option<Duration>,
}

fn seen(ks: &Kustomization) -> Seen {
    let status = ks.status.clone().unwrap_or_default();
    let conditions = status.conditions.unwrap_or_default();
    let condition = |type_: &str| conditions.iter().find(|c| c.type_ == type_);
    let history = status.history.unwrap_or_default();
    Seen {
        ready: condition("Ready").map(|c| (c.status, c.message.clone())),
        reconciling: condition("Reconciling").map(|c| c.message.clone()),
        runs: history.iter().map(|h| h.total_reconciliations).sum(),
        last_run: history.first().map(|h| {
            goduration::parse(&h.last_reconciled_duration).unwrap_or_else(|| {
                panic!(
                    "lastReconciledDuration {:?} is not a duration",
                    h.last_reconciled_duration
                )
            })
        }),
    }
}

/// Every distinct status the Kustomization goes through until `done` holds for one, or
/// `within` has passed.
async fn statuses_until(
    client: &kube::Client,
    ns: &str,
    name: &str,
    within: Duration,
    done: impl Fn(&[Seen]) -> bool,
) -> Vec<Seen> {
    let api = Api::<Kustomization>::namespaced(client.clone(), ns);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut stream = watcher(api, config).applied_objects().boxed();
    let mut statuses: Vec<Seen> = Vec::new();
    let _ = timeout(within, async {
        while let Ok(Some(ks)) = stream.try_next().await {
            let now = seen(&ks);
            if statuses.last() != Some(&now) {
                statuses.push(now);
            }
            if done(&statuses) {
                break;
            }
        }
    })
    .await;
    statuses
}

/// A periodic run of an unchanged revision finishes within a second and writes its outcome
/// once: Ready stays True from one run to the next, where Flux's controller writes Unknown and
/// then True again every interval.
#[tokio::test]
async fn a_quick_periodic_run_writes_its_outcome_once() {
    let f = Fixture::new("progress-quick").await;
    let ns = f.ns();
    f.create_source("repo").await;
    f.publish(1, &[("deploy/a.yaml", config_map(ns, "a", "1"))])
        .await;
    create_kustomization(&f.client, ns, "app", "repo", json!({"interval": "2s"})).await;
    wait_ready_with(&f.client, ns, "app", ConditionStatus::True, "revision 1").await;

    let statuses = statuses_until(&f.client, ns, "app", WAIT, |seen| {
        seen.len() > 1 && seen[seen.len() - 1].runs >= seen[0].runs + 4
    })
    .await;
    let first = statuses.first().map_or(0, |s| s.runs);
    let last = statuses.last().map_or(0, |s| s.runs);
    assert!(last >= first + 4, "four periodic runs: {statuses:#?}");
    // Each status written is either a run's outcome (Ready=True, one run more than the status
    // before it) or a progress report (Ready=Unknown, no run more), at most one per run. A run
    // reports progress only once it has gone on for the report delay without a write, so a
    // run that took less than that wrote its outcome, once, and nothing else.
    let report_delay = kustomize_controller::controller::status::PROGRESS_REPORT_DELAY;
    // A run whose report came before the watch began still counts as having reported.
    let mut reported = statuses
        .first()
        .and_then(|s| s.ready.as_ref())
        .is_some_and(|r| r.0 == ConditionStatus::Unknown);
    let mut alone = 0;
    for pair in statuses.windows(2) {
        let (before, now) = (&pair[0], &pair[1]);
        let ready = now.ready.as_ref().map(|r| r.0);
        if ready == Some(ConditionStatus::True) {
            assert_eq!(
                now.runs,
                before.runs + 1,
                "each run writes its outcome once: {statuses:#?}"
            );
            let took = now.last_run.unwrap_or_default();
            if reported {
                // The run's duration is measured from just before its report was scheduled
                // to just before its outcome was written: a few milliseconds short of the time
                // the report waited, at the most.
                assert!(
                    took + Duration::from_millis(100) >= report_delay,
                    "a run of {took:?} reported progress: {statuses:#?}"
                );
            } else {
                alone += 1;
            }
            reported = false;
        } else {
            assert_eq!(
                ready,
                Some(ConditionStatus::Unknown),
                "only outcomes and progress reports: {statuses:#?}"
            );
            assert_eq!(
                now.runs, before.runs,
                "a report counts no run: {statuses:#?}"
            );
            assert!(!reported, "one progress report per run: {statuses:#?}");
            reported = true;
        }
    }
    assert!(
        alone >= 1,
        "at least one of the periodic runs was quick and wrote its outcome alone: {statuses:#?}"
    );
}

/// A run held up by a slow source download reports Ready=Unknown with its step before it
/// ends, and its outcome comes after the report.
#[tokio::test]
async fn a_slow_run_reports_progress_before_its_outcome() {
    let f = Fixture::new("progress-slow").await;
    let ns = f.ns();
    f.app_ready_with_forged_source(&[("deploy/a.yaml", &config_map(ns, "a", "1"))])
        .await;

    let files = [("deploy/a.yaml", config_map(ns, "a", "2"))];
    let (url, digest) = serve_after(tarball(&files), Duration::from_secs(3));
    let applied = format!("Applied revision: {}", revision(2));
    let watching = {
        let client = f.client.clone();
        let ns = ns.to_string();
        let applied = applied.clone();
        tokio::spawn(async move {
            statuses_until(&client, &ns, "app", WAIT, |seen| {
                seen.last()
                    .and_then(|s| s.ready.as_ref())
                    .is_some_and(|r| r.1 == applied)
            })
            .await
        })
    };
    publish_artifact(&f.client, ns, "repo", &revision(2), &url, &digest).await;
    let statuses = watching.await.expect("watch task");

    let fetching = format!("Fetching manifests for revision {}", revision(2));
    let reported = statuses.iter().position(|s| {
        s.ready
            .as_ref()
            .is_some_and(|r| r.0 == ConditionStatus::Unknown)
            && s.reconciling
                .as_ref()
                .is_some_and(|m| m.starts_with(&fetching))
    });
    let outcome = statuses
        .iter()
        .position(|s| s.ready.as_ref().is_some_and(|r| r.1 == applied));
    assert!(
        matches!((reported, outcome), (Some(r), Some(o)) if r < o),
        "progress reported, then the outcome: {statuses:#?}"
    );
    // Longer than the progress report's delay: a report still pending would have landed.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = ready(&f.client, ns, "app").await;
    assert_eq!(
        after.map(|(status, _, message)| (status, message)),
        Some((ConditionStatus::True, applied)),
        "nothing lands after the outcome: {statuses:#?}"
    );
}
