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
}

fn seen(ks: &Kustomization) -> Seen {
    let status = ks.status.clone().unwrap_or_default();
    let conditions = status.conditions.unwrap_or_default();
    let condition = |type_: &str| conditions.iter().find(|c| c.type_ == type_);
    Seen {
        ready: condition("Ready").map(|c| (c.status, c.message.clone())),
        reconciling: condition("Reconciling").map(|c| c.message.clone()),
        runs: status
            .history
            .unwrap_or_default()
            .iter()
            .map(|h| h.total_reconciliations)
            .sum(),
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
    // Runs that showed nothing but their outcome: each run's final write raises the count by
    // one, and a run that also reported progress adds a status with Ready Unknown.
    let unknown = statuses
        .iter()
        .filter(|s| {
            s.ready
                .as_ref()
                .is_some_and(|r| r.0 != ConditionStatus::True)
        })
        .count();
    let runs = usize::try_from(last - first).unwrap_or_default();
    assert!(
        unknown < runs,
        "at least one of {runs} periodic runs wrote its outcome alone: {statuses:#?}"
    );
    assert_eq!(
        statuses.len(),
        runs + 1 + unknown,
        "one write per run, plus one per progress report: {statuses:#?}"
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
