//! Leader election with a coordination.k8s.io Lease, compatible with controller-runtime's:
//! the same Lease name, so this controller and Flux's never reconcile at the same time.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};

/// The Lease Flux's kustomize-controller elects its leader with.
pub const LEASE_NAME: &str = "kustomize-controller-leader-election";

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

/// A candidate for leadership.
pub struct Candidate {
    api: Api<Lease>,
    identity: String,
    timings: Timings,
}

impl Candidate {
    /// A candidate named `identity` competing for the Lease in `namespace`.
    pub fn new(client: Client, namespace: &str, identity: String, timings: Timings) -> Self {
        Candidate {
            api: Api::namespaced(client, namespace),
            identity,
            timings,
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
        let mut last_renewal = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.timings.retry_period).await;
            match self.try_acquire_or_renew().await {
                Ok(true) => last_renewal = tokio::time::Instant::now(),
                Ok(false) => return,
                Err(err) => tracing::warn!(error = %err, "lease renewal failed"),
            }
            if last_renewal.elapsed() > self.timings.renew_deadline {
                return;
            }
        }
    }

    async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let now = Timestamp::now();
        let lease_seconds =
            i32::try_from(self.timings.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let Some(mut lease) = self.api.get_opt(LEASE_NAME).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(LEASE_NAME.into()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(lease_seconds),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
                Err(err) => Err(err),
            };
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        let held_by_us = spec.holder_identity.as_deref() == Some(self.identity.as_str());
        let expired = spec.renew_time.as_ref().is_none_or(|renewed| {
            let valid_for = SignedDuration::from_secs(i64::from(
                spec.lease_duration_seconds.unwrap_or(lease_seconds),
            ));
            renewed
                .0
                .checked_add(valid_for)
                .is_ok_and(|until| until < now)
        });
        if !held_by_us && !expired {
            return Ok(false);
        }
        if !held_by_us {
            spec.holder_identity = Some(self.identity.clone());
            spec.acquire_time = Some(MicroTime(now));
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.renew_time = Some(MicroTime(now));
        spec.lease_duration_seconds = Some(lease_seconds);
        match self
            .api
            .replace(&lease.name_any(), &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(err) => Err(err),
        }
    }
}
