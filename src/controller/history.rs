//! `status.history`: the snapshots of the last reconciles, kept as fluxcd/pkg/apis/meta's
//! `History.Upsert` keeps them, so that tools reading them see what they see with Flux.
//!
//! A snapshot is identified by the digest of the applied manifests (sha256 of the built
//! multi-document YAML, before `spec.commonMetadata`) together with the outcome (the Ready
//! reason). A reconcile with the same digest and outcome as an earlier snapshot updates that
//! one and moves it first; any other adds a snapshot first. At most five are kept, newest
//! first.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::api::duration;
use crate::api::kustomization::Snapshot;

/// How many snapshots are kept (Flux's `HistoryMaxSize`).
pub const MAX_SNAPSHOTS: usize = 5;

/// What a reconcile records in the history.
pub struct Record<'a> {
    /// [`crate::render::digest`] of the applied manifests.
    pub digest: &'a str,
    /// The Ready reason the reconcile ended with.
    pub status: &'a str,
    /// How long the reconcile took.
    pub duration: Duration,
    /// The artifact revision, and the origin revision when the artifact has one.
    pub revision: &'a str,
    /// `org.opencontainers.image.revision` of the artifact, when set.
    pub origin_revision: Option<&'a str>,
}

/// Records `record` in `history` at `now`.
pub fn upsert(history: &mut Vec<Snapshot>, record: &Record<'_>, now: Timestamp) {
    // metav1.Time is serialized with whole seconds.
    let now = Time(Timestamp::from_second(now.as_second()).unwrap_or(now));
    let mut metadata = BTreeMap::from([("revision".to_string(), record.revision.to_string())]);
    if let Some(origin) = record.origin_revision.filter(|o| !o.is_empty()) {
        metadata.insert("originRevision".into(), origin.to_string());
    }
    let duration = duration::format(record.duration);
    let existing = history
        .iter()
        .position(|s| s.digest == record.digest && s.last_reconciled_status == record.status);
    match existing {
        Some(index) => {
            let mut snapshot = history.remove(index);
            snapshot.last_reconciled = now;
            snapshot.last_reconciled_duration = duration;
            snapshot.total_reconciliations += 1;
            snapshot.metadata = Some(metadata);
            history.insert(0, snapshot);
        }
        None => history.insert(
            0,
            Snapshot {
                digest: record.digest.to_string(),
                first_reconciled: now.clone(),
                last_reconciled: now,
                last_reconciled_duration: duration,
                last_reconciled_status: record.status.to_string(),
                total_reconciliations: 1,
                metadata: Some(metadata),
            },
        ),
    }
    history.truncate(MAX_SNAPSHOTS);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record<'a>(digest: &'a str, status: &'a str) -> Record<'a> {
        Record {
            digest,
            status,
            duration: Duration::from_millis(1500),
            revision: "main@sha1:abc",
            origin_revision: None,
        }
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).expect("valid time")
    }

    fn summary(history: &[Snapshot]) -> Vec<(String, String, i64)> {
        history
            .iter()
            .map(|s| {
                (
                    s.digest.clone(),
                    s.last_reconciled_status.clone(),
                    s.total_reconciliations,
                )
            })
            .collect()
    }

    #[test]
    fn the_same_digest_and_outcome_update_one_snapshot() {
        let mut history = Vec::new();
        upsert(
            &mut history,
            &record("sha256:a", "ReconciliationSucceeded"),
            at(10),
        );
        upsert(
            &mut history,
            &record("sha256:a", "ReconciliationSucceeded"),
            at(20),
        );
        assert_eq!(
            summary(&history),
            [("sha256:a".into(), "ReconciliationSucceeded".into(), 2)]
        );
        assert_eq!(history[0].first_reconciled, Time(at(10)));
        assert_eq!(history[0].last_reconciled, Time(at(20)));
        assert_eq!(history[0].last_reconciled_duration, "1.5s");
        assert_eq!(
            history[0].metadata,
            Some(BTreeMap::from([(
                "revision".into(),
                "main@sha1:abc".into()
            )]))
        );
    }

    #[test]
    fn another_outcome_or_digest_goes_first_and_a_repeat_moves_back_to_front() {
        let mut history = Vec::new();
        upsert(
            &mut history,
            &record("sha256:a", "ReconciliationSucceeded"),
            at(1),
        );
        upsert(
            &mut history,
            &record("sha256:a", "HealthCheckFailed"),
            at(2),
        );
        upsert(
            &mut history,
            &record("sha256:b", "ReconciliationSucceeded"),
            at(3),
        );
        upsert(
            &mut history,
            &record("sha256:a", "ReconciliationSucceeded"),
            at(4),
        );
        let order: Vec<(String, String, i64)> = summary(&history);
        assert_eq!(
            order,
            [
                ("sha256:a".into(), "ReconciliationSucceeded".into(), 2),
                ("sha256:b".into(), "ReconciliationSucceeded".into(), 1),
                ("sha256:a".into(), "HealthCheckFailed".into(), 1),
            ]
        );
    }

    #[test]
    fn at_most_five_snapshots_are_kept_newest_first() {
        let mut history = Vec::new();
        for i in 0..8 {
            let digest = format!("sha256:{i}");
            upsert(
                &mut history,
                &record(&digest, "ReconciliationSucceeded"),
                at(i),
            );
        }
        let digests: Vec<&str> = history.iter().map(|s| s.digest.as_str()).collect();
        assert_eq!(
            digests,
            ["sha256:7", "sha256:6", "sha256:5", "sha256:4", "sha256:3"]
        );
    }
}
