//! What every reconcile shares: the client, the artifact cache, the event sink, metrics and the
//! settings taken from the flags.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use kube::Client;
use kube::runtime::reflector::Store;
use tokio::sync::Semaphore;

use super::events::EventSink;
use super::interrupts::Interrupts;
use super::key::KustomizationKey;
use crate::api::Kustomization;
use crate::cluster::{ClusterKey, Clusters};
use crate::metrics::Metrics;
use apply::AppliedObjects;
use artifact::ArtifactCache;

use super::reuse::{Inputs, LastBuild};

use super::sources::SourceReader;

/// What the last apply of a Kustomization recorded.
struct Applied {
    /// The cluster and identity it applied on.
    cluster: ClusterKey,
    /// The objects' records.
    records: AppliedObjects,
    /// Its build, when it may be reused.
    build: Option<LastBuild>,
}

/// Settings of the reconciler, from the flags.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Deny sources in other namespaces (`--no-cross-namespace-refs`).
    pub no_cross_namespace_refs: bool,
    /// Fetch kustomize remote bases (not `--no-remote-bases`).
    pub allow_remote_bases: bool,
    /// Allow ExternalArtifact sources (feature gate `ExternalArtifact`).
    pub allow_external_artifact: bool,
    /// Unset post-build variables are errors (feature gate `StrictPostBuildSubstitutions`).
    pub strict_substitution: bool,
    /// Objects applied in parallel (`--concurrent-ssa`).
    pub concurrent_ssa: usize,
    /// Kinds with their own apply stage (`--custom-apply-stage-kinds`).
    pub custom_apply_stage_kinds: Vec<String>,
    /// Jitter on `spec.interval`, in percent.
    pub interval_jitter_percentage: u8,
    /// Backoff bounds for reconciles that return an error.
    pub min_retry_delay: Duration,
    /// Upper bound of that backoff.
    pub max_retry_delay: Duration,
    /// Kustomizations that fetch, build, apply and prune at once (`--concurrent`). Health
    /// checks wait outside this bound: a wait costs no CPU and must not hold back others.
    pub concurrent: usize,
    /// Stop a health check at the first Failed object (unless `DisableFailFastBehavior`).
    pub health_fail_fast: bool,
    /// A new reconcile request cancels a running health check
    /// (`CancelHealthCheckOnNewRevision`).
    pub cancel_health_check_on_new_revision: bool,
    /// `--sops-age-secret`, `--default-decryption-service-account` and
    /// `--sops-vault-configmap`.
    pub decryption: crate::render::keys::DecryptionSettings,
    /// How long a Kustomization waits before its dependencies are checked again when no
    /// change to them was seen (`--requeue-dependency`).
    pub requeue_dependency: Duration,
    /// How `spec.dependsOn` is judged (`--no-cross-namespace-refs`,
    /// `AdditiveCELDependencyCheck`).
    pub dependency_policy: super::dependencies::Policy,
    /// No success event for Git commit statuses (`DisableCommitStatusEvent`).
    pub disable_commit_status_event: bool,
    /// Field managers taken over after the dry-run (`--override-manager`).
    pub override_managers: Vec<String>,
    /// Field managers taken over before the dry-run (`--override-manager-before-dry-run`).
    pub override_managers_before_dry_run: Vec<String>,
    /// Rewrite managed field entries to the applied API version (`MigrateAPIVersion`).
    pub migrate_api_version: bool,
    /// Log change sets grouped by action (`GroupChangeLog`).
    pub group_change_log: bool,
    /// When drift is corrected unless a Kustomization's annotation says (`--drift-correction`).
    pub drift_correction: crate::flags::DriftCorrection,
}

/// State shared by all reconciles. Nothing in it is mutated by a reconcile except the
/// per-object failure counts used for error backoff.
pub struct Context {
    /// Client for the controller's own objects (Kustomizations, sources, Secrets, events).
    pub client: Client,
    /// Clients for applying: the controller's own, impersonating ones and remote ones.
    pub clusters: Clusters,
    /// Downloads source artifacts, once per digest, and shares their extractions.
    pub artifacts: ArtifactCache,
    /// Records events.
    pub events: EventSink,
    /// Prometheus metrics.
    pub metrics: Metrics,
    /// Settings from the flags.
    pub settings: Settings,
    /// Health checks a new reconcile request may cancel.
    pub interrupts: std::sync::Arc<Interrupts>,
    /// Permits for the working part of a reconcile (`--concurrent`).
    pub work_permits: std::sync::Arc<Semaphore>,
    /// The watch cache of Kustomizations (dependency cycles are looked for in it).
    pub kustomizations: Store<Kustomization>,
    /// Where source objects are read (their watch caches, or the API server).
    pub sources: SourceReader,
    failures: Mutex<HashMap<KustomizationKey, u32>>,
    applied: Mutex<HashMap<KustomizationKey, Applied>>,
    /// The drift set each Kustomization in warn mode last reported (`None`: no drift).
    drift_reports: Mutex<HashMap<KustomizationKey, Option<u64>>>,
}

impl Context {
    /// A context for reconciles.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: Client,
        clusters: Clusters,
        artifacts: ArtifactCache,
        events: EventSink,
        metrics: Metrics,
        settings: Settings,
        interrupts: std::sync::Arc<Interrupts>,
        kustomizations: Store<Kustomization>,
        sources: SourceReader,
    ) -> Self {
        Context {
            kustomizations,
            sources,
            clusters,
            work_permits: std::sync::Arc::new(Semaphore::new(settings.concurrent.max(1))),
            interrupts,
            client,
            artifacts,
            events,
            metrics,
            settings,
            failures: Mutex::new(HashMap::new()),
            applied: Mutex::new(HashMap::new()),
            drift_reports: Mutex::new(HashMap::new()),
        }
    }

    /// What the last apply of `ks` on `cluster` recorded of its objects (taken: a reconcile
    /// that fails before its apply leaves nothing behind that could be stale). Records made
    /// on another cluster or as another identity are dropped.
    pub fn take_applied(&self, ks: &Kustomization, cluster: &ClusterKey) -> AppliedObjects {
        self.applied
            .lock()
            .ok()
            .and_then(|mut applied| applied.remove(&KustomizationKey::of(ks)))
            .filter(|applied| applied.cluster == *cluster)
            .map(|applied| applied.records)
            .unwrap_or_default()
    }

    /// Keeps what an apply of `ks` on `cluster` recorded, for its next reconcile, with the
    /// build it applied when that build may be reused.
    pub fn put_applied(
        &self,
        ks: &Kustomization,
        cluster: &ClusterKey,
        records: AppliedObjects,
        build: Option<LastBuild>,
    ) {
        if let Ok(mut applied) = self.applied.lock() {
            if records.is_empty() {
                applied.remove(&KustomizationKey::of(ks));
            } else {
                let cluster = cluster.clone();
                let entry = Applied {
                    cluster,
                    records,
                    build,
                };
                applied.insert(KustomizationKey::of(ks), entry);
            }
        }
    }

    /// The `resourceVersion` recorded for object `id` after `ks` last applied it.
    pub fn recorded_version(
        &self,
        ks: &Kustomization,
        id: &apply::ObjectId,
    ) -> Option<apply::Revision> {
        let applied = self.applied.lock().ok()?;
        let record = applied.get(&KustomizationKey::of(ks))?.records.get(id)?;
        Some(record.resource_version)
    }

    /// Keeps `build` as `ks`'s last successful build on `cluster`, beside what its apply
    /// recorded.
    pub fn keep_build(&self, ks: &Kustomization, cluster: &ClusterKey, build: LastBuild) {
        if let Ok(mut applied) = self.applied.lock()
            && let Some(applied) = applied.get_mut(&KustomizationKey::of(ks))
            && applied.cluster == *cluster
        {
            applied.build = Some(build);
        }
    }

    /// Whether a build of `ks` was kept for later runs to reuse.
    pub fn has_reusable_build(&self, ks: &Kustomization) -> bool {
        self.applied.lock().is_ok_and(|applied| {
            applied
                .get(&KustomizationKey::of(ks))
                .is_some_and(|applied| applied.build.is_some())
        })
    }

    /// The last build of `ks` on `cluster`, when it was built from `inputs` and `unchanged`
    /// holds for what its apply recorded.
    pub fn reusable_build(
        &self,
        ks: &Kustomization,
        cluster: &ClusterKey,
        inputs: Inputs,
        unchanged: impl FnOnce(&AppliedObjects) -> bool,
    ) -> Option<LastBuild> {
        let applied = self.applied.lock().ok()?;
        let applied = applied.get(&KustomizationKey::of(ks))?;
        let build = applied.build.as_ref()?;
        (applied.cluster == *cluster && build.inputs == inputs && unchanged(&applied.records))
            .then(|| build.clone())
    }

    /// Forgets what was recorded for `ks` (it is being deleted).
    pub fn forget_applied(&self, ks: &Kustomization) {
        if let Ok(mut applied) = self.applied.lock() {
            applied.remove(&KustomizationKey::of(ks));
        }
        if let Ok(mut reports) = self.drift_reports.lock() {
            reports.remove(&KustomizationKey::of(ks));
        }
    }

    /// Records `fingerprint` as the drift set `ks` reported last (`None`: no drift, or not
    /// in warn mode); returns the one before, `None` when none was recorded since the
    /// controller started.
    pub fn swap_drift_report(
        &self,
        ks: &Kustomization,
        fingerprint: Option<u64>,
    ) -> Option<Option<u64>> {
        let mut reports = self.drift_reports.lock().ok()?;
        reports.insert(KustomizationKey::of(ks), fingerprint)
    }

    /// Forgets the drift set `ks` reported last (it corrects drift).
    pub fn forget_drift_report(&self, ks: &Kustomization) {
        if let Ok(mut reports) = self.drift_reports.lock() {
            reports.remove(&KustomizationKey::of(ks));
        }
    }

    /// The delay before retrying a reconcile of `ks` that returned an error:
    /// exponential from `--min-retry-delay` to `--max-retry-delay`, as controller-runtime's
    /// rate limiter does.
    pub fn error_backoff(&self, ks: &Kustomization) -> Duration {
        let attempts = self
            .failures
            .lock()
            .map(|mut failures| {
                let count = failures.entry(KustomizationKey::of(ks)).or_insert(0);
                *count = count.saturating_add(1);
                *count
            })
            .unwrap_or(1);
        let factor = 2f64.powi(attempts.saturating_sub(1).min(32) as i32);
        self.settings
            .min_retry_delay
            .mul_f64(factor)
            .min(self.settings.max_retry_delay)
    }

    /// Forgets the failures of `ks` after a reconcile that did not return an error.
    pub fn clear_failures(&self, ks: &Kustomization) {
        if let Ok(mut failures) = self.failures.lock() {
            failures.remove(&KustomizationKey::of(ks));
        }
    }
}
