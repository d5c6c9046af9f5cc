//! Leader election with a coordination.k8s.io Lease, compatible with controller-runtime's:
//! the same Lease name, so this controller and Flux's never reconcile at the same time, and,
//! for an instance started with `--watch-label-selector` (a shard), a Lease named after its
//! selector as Flux names it, so that the instances of different shards never wait for one
//! another.
//!
//! Expiry is judged as client-go judges it: by the local (monotonic) time at which this
//! candidate last saw the Lease record change, plus the record's duration, never by comparing
//! the Lease's `renewTime` with the local clock, which would let two leaders coexist when the
//! clocks of their nodes disagree. On shutdown the leader releases the Lease (Flux's
//! `--leader-election-release-on-cancel` default), so a successor takes over at once.

use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use tokio::time::Instant;

/// The Lease Flux's kustomize-controller elects its leader with, when it watches every
/// Kustomization.
pub const LEASE_NAME: &str = "kustomize-controller-leader-election";

/// The Lease of an instance that watches the Kustomizations `label_selector` matches: Flux's
/// `leaderelection.GenerateID`, [`LEASE_NAME`] followed by the first 8 hex digits of the
/// selector's SHA-256 (the selector as given on the command line).
pub fn lease_name(label_selector: &str) -> String {
    use sha2::{Digest, Sha256};
    if label_selector.is_empty() {
        return LEASE_NAME.to_string();
    }
    let digest = hex::encode(Sha256::digest(label_selector.as_bytes()));
    format!("{LEASE_NAME}-{}", &digest[..8])
}

/// Timings of the election (Flux's `--leader-election-*` flags).
#[derive(Clone, Copy, Debug)]
pub struct Timings {
    /// How long a lease is valid without renewal.
    pub lease_duration: Duration,
    /// How long the leader tries to renew before giving up.
    pub renew_deadline: Duration,
    /// Pause between attempts.
    pub retry_period: Duration,
}

/// The Lease record as last seen, and when (local time) it was first seen that way.
#[derive(Debug, Default)]
struct Observation {
    record: Option<LeaseSpec>,
    since: Option<Instant>,
}

impl Observation {
    /// Notes `record` as read at `now`; the time moves only when the record changed.
    fn see(&mut self, record: &LeaseSpec, now: Instant) {
        if self.record.as_ref() != Some(record) {
            self.record = Some(record.clone());
            self.since = Some(now);
        }
    }

    /// Whether someone other than `identity` holds the lease and has renewed it within its
    /// duration, as far as this candidate has observed.
    fn held_by_another(&self, identity: &str, now: Instant) -> bool {
        let (Some(record), Some(since)) = (&self.record, self.since) else {
            return false;
        };
        let holder = record.holder_identity.as_deref().unwrap_or("");
        if holder.is_empty() || holder == identity {
            return false;
        }
        let seconds = record.lease_duration_seconds.unwrap_or(0).max(0);
        now < since + Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
    }
}

/// A candidate for leadership.
pub struct Candidate {
    api: Api<Lease>,
    lease: String,
    identity: String,
    timings: Timings,
    observed: Mutex<Observation>,
}

impl Candidate {
    /// A candidate named `identity` competing for the Lease `lease` in `namespace`.
    pub fn new(
        client: Client,
        namespace: &str,
        lease: String,
        identity: String,
        timings: Timings,
    ) -> Self {
        Candidate {
            api: Api::namespaced(client, namespace),
            lease,
            identity,
            timings,
            observed: Mutex::new(Observation::default()),
        }
    }

    /// Waits until this candidate holds the lease.
    pub async fn acquire(&self) {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => return,
                Ok(false) => {}
                Err(err) => tracing::warn!(error = %err, "leader election attempt failed"),
            }
            tokio::time::sleep(self.timings.retry_period).await;
        }
    }

    /// Renews the lease until a renewal has failed for longer than the renew deadline, then
    /// returns: the caller must stop reconciling.
    pub async fn hold(&self) {
        let mut last_renewal = Instant::now();
        loop {
            tokio::time::sleep(self.timings.retry_period).await;
            match self.try_acquire_or_renew().await {
                Ok(true) => last_renewal = Instant::now(),
                Ok(false) => return,
                Err(err) => tracing::warn!(error = %err, "lease renewal failed"),
            }
            if last_renewal.elapsed() > self.timings.renew_deadline {
                return;
            }
        }
    }

    /// Gives the lease up, if this candidate holds it, as client-go's `ReleaseOnCancel` does:
    /// no holder, a duration of one second, so that the next candidate acquires it at once.
    pub async fn release(&self) {
        let released = async {
            let Some(mut lease) = self.api.get_opt(&self.lease).await? else {
                return Ok(false);
            };
            let spec = lease.spec.get_or_insert_with(Default::default);
            if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
                return Ok(false);
            }
            let now = MicroTime(Timestamp::now());
            spec.holder_identity = Some(String::new());
            spec.lease_duration_seconds = Some(1);
            spec.acquire_time = Some(now.clone());
            spec.renew_time = Some(now);
            self.api
                .replace(&lease.name_any(), &PostParams::default(), &lease)
                .await
                .map(|_| true)
        };
        match released.await {
            Ok(true) => tracing::info!(lease = %self.lease, "released the leader election lease"),
            Ok(false) => {}
            Err(err) => tracing::warn!(error = %err, "releasing the leader election lease failed"),
        }
    }

    async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let now = Timestamp::now();
        let lease_seconds =
            i32::try_from(self.timings.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let Some(mut lease) = self.api.get_opt(&self.lease).await? else {
            let spec = LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                lease_duration_seconds: Some(lease_seconds),
                acquire_time: Some(MicroTime(now)),
                renew_time: Some(MicroTime(now)),
                lease_transitions: Some(0),
                ..Default::default()
            };
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.lease.clone()),
                    ..Default::default()
                },
                spec: Some(spec.clone()),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => {
                    self.observe(&spec);
                    Ok(true)
                }
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
                Err(err) => Err(err),
            };
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        {
            let mut observed = self.observed.lock().unwrap_or_else(|p| p.into_inner());
            let seen_at = Instant::now();
            observed.see(spec, seen_at);
            if observed.held_by_another(&self.identity, seen_at) {
                return Ok(false);
            }
        }
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            spec.holder_identity = Some(self.identity.clone());
            spec.acquire_time = Some(MicroTime(now));
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.renew_time = Some(MicroTime(now));
        spec.lease_duration_seconds = Some(lease_seconds);
        let record = spec.clone();
        match self
            .api
            .replace(&lease.name_any(), &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                self.observe(&record);
                Ok(true)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Notes the record this candidate just wrote.
    fn observe(&self, record: &LeaseSpec) {
        let mut observed = self.observed.lock().unwrap_or_else(|p| p.into_inner());
        observed.see(record, Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(holder: &str, renewed: &str) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.to_string()),
            lease_duration_seconds: Some(35),
            renew_time: Some(MicroTime(renewed.parse().expect("timestamp"))),
            ..Default::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn expiry_is_judged_by_when_the_record_last_changed_here() {
        let mut observed = Observation::default();
        let start = Instant::now();
        // A renewTime far in the past (the holder's clock is behind ours) does not make the
        // lease expired: it was only just seen.
        let stale_clock = record("other", "2001-01-01T00:00:00Z");
        observed.see(&stale_clock, start);
        assert!(observed.held_by_another("me", start));
        assert!(observed.held_by_another("me", start + Duration::from_secs(34)));
        // Unchanged for the whole duration: expired, whatever renewTime says.
        assert!(!observed.held_by_another("me", start + Duration::from_secs(36)));
        // A renewal seen later restarts the count.
        let renewed = record("other", "2001-01-01T00:00:10Z");
        observed.see(&renewed, start + Duration::from_secs(36));
        assert!(observed.held_by_another("me", start + Duration::from_secs(60)));
        // Seeing the same record again does not.
        observed.see(&renewed, start + Duration::from_secs(70));
        assert!(!observed.held_by_another("me", start + Duration::from_secs(72)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_released_or_own_lease_is_not_held_by_another() {
        let mut observed = Observation::default();
        let now = Instant::now();
        observed.see(&record("", "2030-01-01T00:00:00Z"), now);
        assert!(!observed.held_by_another("me", now));
        observed.see(&record("me", "2030-01-01T00:00:00Z"), now);
        assert!(!observed.held_by_another("me", now));
        assert!(observed.held_by_another("you", now));
    }

    #[test]
    fn a_shard_elects_with_a_lease_named_after_its_selector_as_flux_names_it() {
        assert_eq!(lease_name(""), LEASE_NAME);
        assert_eq!(
            lease_name("sharding.fluxcd.io/key in (shard1)"),
            "kustomize-controller-leader-election-7ee98f29"
        );
        assert_ne!(
            lease_name("sharding.fluxcd.io/key in (shard2)"),
            lease_name("sharding.fluxcd.io/key in (shard1)")
        );
    }
}
