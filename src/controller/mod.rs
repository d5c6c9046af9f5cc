//! The controller: watches Kustomizations and the four source kinds, and runs
//! [`reconcile::reconcile`] for each Kustomization that needs it.

mod config_watch;
mod context;
pub mod dependencies;
mod detect;
mod drift;
pub mod events;
pub mod history;
mod interrupts;
mod key;
mod outcome;
mod reconcile;
mod reuse;
pub mod schedule;
mod sources;
pub mod status;
mod triggers;

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store, reflector};
use kube::runtime::watcher::{self, watcher};
use kube::{Client, ResourceExt};
use tracing::Instrument;

use config_watch::ConfigKind;
pub use context::{Context, Settings};
pub use interrupts::Interrupts;
pub use reconcile::{ReconcileError, reconcile};
use sources::SourceReader;
use triggers::Triggers;

use crate::api::Kustomization;
use crate::api::kustomization::SourceKind;
use crate::api::names::KUBECTL_LAST_APPLIED_ANNOTATION;
use crate::api::source::SourceObject;
use crate::cluster::{ClusterSettings, Clusters, KubeConfigPolicy, ObjectCache};
use crate::flags::{ControllerFlags, DriftCorrection};
use crate::http::{self, Readiness};
use crate::leader::{self, Candidate};
use crate::metrics::{Metrics, Outcome};
use crate::render::keys::{DecryptionSettings, GlobalAgeSecret};
use artifact::{ArtifactCache, ArtifactFetcher, FetchConfig};
use keyservice::token_cache::TokenCache;

/// Errors that stop the controller process.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// No usable kubeconfig or in-cluster configuration.
    #[error("failed to load the Kubernetes client configuration: {0}")]
    Config(#[from] kube::config::InferConfigError),
    /// The client could not be built.
    #[error("failed to create the Kubernetes client: {0}")]
    Client(#[from] kube::Error),
    /// The HTTPS connector of artifact downloads could not be set up.
    #[error("failed to build the artifact HTTP client: {0}")]
    ArtifactClient(rustls::Error),
    /// An HTTP endpoint could not be served.
    #[error(transparent)]
    Serve(#[from] http::ServeError),
    /// The namespace the controller runs in is needed but unknown.
    #[error(
        "RUNTIME_NAMESPACE is not set and the controller does not run in a pod: it is needed for {0}"
    )]
    NoRuntimeNamespace(&'static str),
    /// A flag cannot be used.
    #[error(transparent)]
    Flag(#[from] crate::flags::FlagError),
    /// The SPIFFE identities the flags ask for could not be set up.
    #[error(transparent)]
    Spiffe(#[from] crate::spiffe::SpiffeError),
    /// Leadership was lost; the process exits so that another replica takes over.
    #[error("leader election lost")]
    LeadershipLost,
}

/// Runs the controller until SIGTERM or SIGINT.
pub async fn run(flags: ControllerFlags) -> Result<(), RunError> {
    let gates = flags.feature_gates()?;
    let spiffe = crate::spiffe::SpiffeIdentity::from_flags(&flags).await?;
    let config = kube::Config::infer().await?;
    let metrics = Metrics::new(usize::from(flags.concurrent.max(1)));
    let client = crate::client::build(
        config.clone(),
        flags.kube_api_qps,
        flags.kube_api_burst,
        &metrics.rest_requests,
    )
    .await?;
    let readiness = Readiness::default();
    http::serve_probes(&flags.health_addr, readiness.clone()).await?;
    http::serve_metrics(&flags.metrics_addr, metrics.clone()).await?;

    let runtime_namespace = runtime_namespace();
    let identity = instance_identity();
    readiness.set_ready();

    let mut leadership = None;
    if flags.enable_leader_election {
        let namespace = runtime_namespace
            .clone()
            .ok_or(RunError::NoRuntimeNamespace("leader election"))?;
        let timings = leader::Timings {
            lease_duration: flags.leader_election_lease_duration,
            renew_deadline: flags.leader_election_renew_deadline,
            retry_period: flags.leader_election_retry_period,
        };
        let lease = leader::lease_name(&flags.watch_label_selector);
        tracing::info!(lease, namespace, "waiting for leadership");
        metrics.set_leader(&lease, false);
        let candidate = Candidate::new(
            client.clone(),
            &namespace,
            lease.clone(),
            identity.clone(),
            timings,
        );
        candidate.acquire().await;
        tracing::info!(identity, "acquired leadership");
        metrics.set_leader(&lease, true);
        let candidate = Arc::new(candidate);
        let holder = Arc::clone(&candidate);
        leadership = Some((candidate, tokio::spawn(async move { holder.hold().await })));
    }

    let connector = match spiffe.artifact_tls {
        Some(tls) => crate::tls::https_connector_with(tls, artifact::CONNECT_TIMEOUT),
        None => crate::tls::https_connector(artifact::CONNECT_TIMEOUT, "artifact downloads")
            .map_err(RunError::ArtifactClient)?,
    };
    let artifacts = ArtifactCache::new(
        ArtifactFetcher::from_env(
            FetchConfig {
                retries: flags.http_retry,
                ..FetchConfig::default()
            },
            connector,
        ),
        flags.artifact_cache_max_size,
    );
    let settings = Settings {
        no_cross_namespace_refs: flags.no_cross_namespace_refs,
        allow_remote_bases: !flags.no_remote_bases,
        allow_external_artifact: gates.enabled("ExternalArtifact"),
        strict_substitution: gates.enabled("StrictPostBuildSubstitutions"),
        concurrent_ssa: usize::from(flags.concurrent_ssa),
        custom_apply_stage_kinds: flags.custom_apply_stage_kinds(),
        interval_jitter_percentage: flags.interval_jitter_percentage,
        concurrent: usize::from(flags.concurrent.max(1)),
        health_fail_fast: !gates.enabled("DisableFailFastBehavior"),
        cancel_health_check_on_new_revision: gates.enabled("CancelHealthCheckOnNewRevision"),
        min_retry_delay: flags.min_retry_delay,
        max_retry_delay: flags.max_retry_delay,
        requeue_dependency: flags.requeue_dependency,
        dependency_policy: dependencies::Policy {
            no_cross_namespace_refs: flags.no_cross_namespace_refs,
            additive_cel: gates.enabled("AdditiveCELDependencyCheck"),
        },
        disable_commit_status_event: gates.enabled("DisableCommitStatusEvent"),
        override_managers: flags.override_manager.clone(),
        override_managers_before_dry_run: flags.override_manager_before_dry_run.clone(),
        migrate_api_version: gates.enabled("MigrateAPIVersion"),
        group_change_log: gates.enabled("GroupChangeLog"),
        drift_correction: flags.drift_correction,
        decryption: DecryptionSettings {
            global_age_secret: match (&runtime_namespace, flags.sops_age_secret.as_str()) {
                (Some(namespace), name) if !name.is_empty() => Some(GlobalAgeSecret {
                    namespace: namespace.clone(),
                    name: name.to_owned(),
                }),
                _ => None,
            },
            default_service_account: Some(flags.default_decryption_service_account.clone())
                .filter(|n| !n.is_empty()),
            vault_config_map: match (&runtime_namespace, flags.sops_vault_configmap.as_str()) {
                (Some(namespace), name) if !name.is_empty() => {
                    Some((namespace.clone(), name.to_owned()))
                }
                _ => None,
            },
            token_cache: TokenCache::new(
                flags.token_cache_max_size,
                flags.token_cache_max_duration,
                metrics.token_cache.clone(),
            )
            .map(Arc::new),
            spiffe_broker: spiffe.broker.clone().map(|broker| {
                Arc::new(crate::spiffe::BrokerTokens(broker)) as Arc<dyn keyservice::JwtSvidSource>
            }),
        },
    };
    let events = events::sink(
        client.clone(),
        host_name(),
        &flags.events_addr,
        spiffe.event_tls,
    );
    let interrupts = Arc::new(Interrupts::new(
        settings.cancel_health_check_on_new_revision,
    ));
    let (kustomizations, cache_writer) = reflector::store();
    let watch_namespace = if flags.watch_all_namespaces {
        None
    } else {
        Some(
            runtime_namespace
                .ok_or(RunError::NoRuntimeNamespace("--watch-all-namespaces=false"))?,
        )
    };
    // Sources are read from the caches of their watches unless `DirectSourceFetch`.
    let source_writers: HashMap<SourceKind, reflector::store::Writer<SourceObject>> =
        if gates.enabled("DirectSourceFetch") {
            HashMap::new()
        } else {
            watched_source_kinds(&settings)
                .map(|kind| (kind, reflector::store::Writer::new(kind)))
                .collect()
        };
    let sources = SourceReader::new(
        client.clone(),
        source_writers
            .iter()
            .map(|(kind, writer)| (*kind, writer.as_reader()))
            .collect(),
        watch_namespace.clone(),
    );
    let clusters = Clusters::new(
        client.clone(),
        config,
        ClusterSettings {
            default_service_account: flags.default_service_account.clone(),
            default_kubeconfig_service_account: flags.default_kubeconfig_service_account.clone(),
            kubeconfig_policy: KubeConfigPolicy {
                allow_exec: flags.insecure_kubeconfig_exec,
                allow_insecure_tls: flags.insecure_kubeconfig_tls,
            },
            qps: flags.kube_api_qps,
            burst: flags.kube_api_burst,
            rest_requests: metrics.rest_requests.clone(),
            token_cache: settings.decryption.token_cache.clone(),
            spiffe_broker: spiffe.broker.clone(),
        },
    );
    // Secrets and ConfigMaps are read with a GET each unless `CacheSecretsAndConfigMaps`.
    let clusters = if gates.enabled("CacheSecretsAndConfigMaps") {
        clusters.reading_through(ObjectCache::new(client.clone(), watch_namespace.clone()))
    } else {
        clusters
    };
    let context = Arc::new(Context::new(
        client.clone(),
        clusters,
        artifacts,
        events,
        metrics,
        settings.clone(),
        Arc::clone(&interrupts),
        kustomizations,
        sources,
    ));

    let mut controller = build_controller(
        client,
        watch_namespace.as_deref(),
        &flags.watch_label_selector,
        (!gates.enabled("DisableConfigWatchers"))
            .then_some(flags.watch_configs_label_selector.as_str()),
        &settings,
        interrupts,
        CacheWriters {
            kustomizations: cache_writer,
            sources: source_writers,
        },
    );
    if let Some(live_versions) = &context.clusters.own().live_versions {
        let kustomizations = context.kustomizations.clone();
        let default = flags.drift_correction;
        let writes = live_versions.writes_for(move |namespace, name| {
            let owner = ObjectRef::new(name).within(namespace);
            kustomizations
                .get(&owner)
                .is_some_and(|ks| drift::watches_writes(&ks, default))
        });
        let corrections = drift::corrections(writes, Arc::clone(&context), flags.drift_correction);
        controller = controller.reconcile_on(corrections);
    }
    let (stopping, stop_requested) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stopping.send(true);
    });
    let reconciles = controller
        .graceful_shutdown_on(stopped(stop_requested.clone()))
        .run(reconcile_and_track, error_policy, context)
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::debug!(error = %err, "reconcile did not complete");
            }
        });
    // In-flight reconciles get a grace period to finish; one stuck in artifact download
    // retries must not hold the process past its pod's termination grace period.
    let grace_expired = async move {
        stopped(stop_requested).await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
        tracing::warn!("in-flight reconciles did not finish within {SHUTDOWN_GRACE:?}; exiting");
    };
    let (candidate, mut holding) = leadership.unzip();
    let leadership_lost = async {
        match holding.as_mut() {
            Some(holding) => {
                let _ = holding.await;
            }
            None => std::future::pending().await,
        }
    };
    let outcome = tokio::select! {
        () = reconciles => Ok(()),
        () = grace_expired => Ok(()),
        () = leadership_lost => Err(RunError::LeadershipLost),
    };
    // A leader that stops on its own gives the lease up (unless
    // `--leader-election-release-on-cancel=false`), so that a successor starts now rather
    // than when the lease would have expired.
    if let (Some(candidate), Some(holding), Ok(())) = (candidate, holding, &outcome) {
        holding.abort();
        if flags.leader_election_release_on_cancel {
            candidate.release().await;
        }
    }
    outcome
}

/// Dependents woken by a dependency's change, waiting to be queued.
const WAKE_QUEUE: usize = 4096;

/// How long in-flight reconciles may run after SIGTERM.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(20);

/// Resolves once a stop was requested.
async fn stopped(mut stop_requested: tokio::sync::watch::Receiver<bool>) {
    let _ = stop_requested.wait_for(|stop| *stop).await;
}

/// The controller: Kustomizations and what triggers their reconciles. Every trigger also
/// interrupts a running health check of the Kustomization it names, when the
/// `CancelHealthCheckOnNewRevision` gate is on.
///
/// A change to a Kustomization also wakes the Kustomizations waiting for it as a dependency
/// (see [`dependencies::Waker`]).
///
/// The controller itself runs any number of reconciles at once; `--concurrent` bounds the
/// working part of each (see [`Context::work_permits`]), so Kustomizations waiting for
/// their workloads never hold back others.
fn build_controller(
    client: Client,
    namespace: Option<&str>,
    watch_label_selector: &str,
    watch_configs: Option<&str>,
    settings: &Settings,
    interrupts: Arc<Interrupts>,
    caches: CacheWriters,
) -> Controller<Kustomization> {
    let CacheWriters {
        kustomizations: writer,
        sources: mut source_writers,
    } = caches;
    let kustomizations: Api<Kustomization> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut watch_config = watcher::Config::default();
    if !watch_label_selector.is_empty() {
        watch_config = watch_config.labels(watch_label_selector);
    }
    let reader = writer.as_reader();
    let spec_interrupts = Arc::clone(&interrupts);
    let waker = dependencies::Waker::new(reader.clone());
    // Bounded: should it fill up, a dependent still re-checks after --requeue-dependency.
    let (wake, woken) = futures::channel::mpsc::channel(WAKE_QUEUE);
    let triggers = watcher(kustomizations, watch_config)
        .default_backoff()
        // Trimmed before the waker compares it with the cached previous version.
        .modify({
            let drift_correction = settings.drift_correction;
            move |ks| keep_what_the_cache_serves(ks, drift_correction)
        })
        .inspect(move |event| {
            // Before the cache takes the new version: the cached one is the previous.
            let changed = match event {
                Ok(watcher::Event::Apply(ks) | watcher::Event::InitApply(ks)) => ks,
                _ => return,
            };
            let mut wake = wake.clone();
            for dependent in waker.dependents_to_wake(changed) {
                let _ = wake.try_send(dependent);
            }
        })
        .reflect(writer)
        .filter_map({
            let mut triggers = Triggers::default();
            move |event| {
                // The controller keeps the request it makes of an object until the next
                // reconcile: it is given the object's identity alone.
                let trigger = match event {
                    Ok(event) => triggers.on_event(&event).map(key::identity_of).map(Ok),
                    Err(err) => Some(Err(err)),
                };
                futures::future::ready(trigger)
            }
        })
        .inspect(move |ks| {
            if let Ok(ks) = ks {
                let object = key::request_for(ks);
                let trigger = format!(
                    "Kustomization/{}/{}",
                    object.namespace.as_deref().unwrap_or(""),
                    object.name
                );
                spec_interrupts.interrupt(&object, &trigger);
            }
        });
    let mut controller = Controller::for_stream(triggers, reader.clone())
        .with_config(ControllerConfig::default().concurrency(0))
        .reconcile_on(woken);
    for kind in watched_source_kinds(settings) {
        let sources: Api<SourceObject> = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &kind),
            None => Api::all_with(client.clone(), &kind),
        };
        let store = reader.clone();
        let interrupts = Arc::clone(&interrupts);
        let mapper = move |source: SourceObject| {
            let updated = kustomizations_to_update(&store, kind, &source);
            let trigger = format!(
                "{kind}/{}/{}",
                source.namespace().unwrap_or_default(),
                source.name_any()
            );
            for object in &updated {
                interrupts.interrupt(object, &trigger);
            }
            updated
        };
        controller = match source_writers.remove(&kind) {
            // The cache is written before the change is mapped: the reconcile it wakes reads
            // the changed source.
            Some(cache) => {
                let sources = watcher(sources, watcher::Config::default())
                    .modify(sources::keep_what_reconciles_read);
                let changes = reflector(cache, sources).touched_objects();
                controller.watches_stream_with(changes, mapper, kind)
            }
            None => controller.watches_with(sources, kind, watcher::Config::default(), mapper),
        };
    }
    // `DisableConfigWatchers`: no ConfigMap or Secret watch at all, as with Flux (changes
    // are then seen at the next interval).
    let Some(selector) = watch_configs else {
        return controller;
    };
    controller = config_watch::watch::<ConfigMap>(
        controller,
        &client,
        namespace,
        &reader,
        ConfigKind::ConfigMap,
        selector,
    );
    config_watch::watch::<Secret>(
        controller,
        &client,
        namespace,
        &reader,
        ConfigKind::Secret,
        selector,
    )
}

/// The writers of the watch caches reconciles read: Kustomizations, and the sources unless
/// `DirectSourceFetch`.
struct CacheWriters {
    kustomizations: reflector::store::Writer<Kustomization>,
    sources: HashMap<SourceKind, reflector::store::Writer<SourceObject>>,
}

/// The source kinds watched: all but ExternalArtifact without its feature gate.
fn watched_source_kinds(settings: &Settings) -> impl Iterator<Item = SourceKind> + use<> {
    let allow_external_artifact = settings.allow_external_artifact;
    SourceKind::ALL
        .into_iter()
        .filter(move |kind| *kind != SourceKind::ExternalArtifact || allow_external_artifact)
}

/// The Kustomizations that reference `source` and have not yet attempted its current
/// artifact revision.
/// Trims a Kustomization to what is read from its watch cache: triggers, dependency checks
/// and the drift feed read the spec, metadata and conditions; a reconcile reads the object
/// itself. With thousands of Kustomizations, managed fields, the last-applied annotation,
/// `status.history` and `status.inventory` were most of the cache's memory; the inventory
/// stays where drift is corrected promptly, as the drift feed reads it.
fn keep_what_the_cache_serves(ks: &mut Kustomization, drift_correction: DriftCorrection) {
    ks.managed_fields_mut().clear();
    ks.annotations_mut().remove(KUBECTL_LAST_APPLIED_ANNOTATION);
    let prompt = drift::watches_writes(ks, drift_correction);
    if let Some(status) = ks.status.as_mut() {
        status.history = None;
        if !prompt {
            status.inventory = None;
        }
    }
}

fn kustomizations_to_update(
    store: &Store<Kustomization>,
    kind: SourceKind,
    source: &SourceObject,
) -> Vec<ObjectRef<Kustomization>> {
    let Some(artifact) = source.artifact() else {
        return Vec::new();
    };
    let source_namespace = source.namespace().unwrap_or_default();
    let source_name = source.name_any();
    store
        .state()
        .into_iter()
        .filter(|ks| {
            let reference = &ks.spec.source_ref;
            let namespace = reference
                .namespace
                .clone()
                .filter(|ns| !ns.is_empty())
                .or_else(|| ks.namespace());
            reference.kind == kind
                && reference.name == source_name
                && namespace.as_deref() == Some(source_namespace.as_str())
                && ks
                    .status
                    .as_ref()
                    .and_then(|s| s.last_attempted_revision.as_deref())
                    != Some(artifact.revision.as_str())
        })
        .map(|ks| key::request_for(&ks))
        .collect()
}

/// Runs one reconcile once it has one of the `--concurrent` permits, and accounts for it in
/// controller-runtime's metrics. A panic fails that reconcile alone, as controller-runtime
/// recovers it: the controller goes on and the Kustomization is retried with backoff.
async fn reconcile_and_track(
    ks: Arc<Kustomization>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    // What waits for a permit is kept small: thousands of Kustomizations may wait at once.
    let queued = ctx.metrics.reconciles.queued();
    let permit = Arc::clone(&ctx.work_permits).acquire_owned().await.ok();
    let working = queued.working();
    let (namespace, name) = (ks.namespace().unwrap_or_default(), ks.name_any());
    let span = crate::telemetry::reconcile_span(&namespace, &name);
    // Boxed once a permit is held: the pipeline's state machine is kilobytes, and with
    // thousands of Kustomizations queued for a permit it would otherwise be allocated for
    // each of them while they wait (11 MiB of heap at 1000).
    let pipeline = Box::pin(reconcile(Arc::clone(&ks), ctx.clone(), permit).instrument(span));
    let run = std::panic::AssertUnwindSafe(pipeline);
    let (result, outcome) = match futures::FutureExt::catch_unwind(run).await {
        Ok(Ok(done)) => {
            let outcome = if done.terminal {
                Outcome::TerminalError
            } else {
                Outcome::of_requeue(done.requeue_after)
            };
            (Ok(done.action), outcome)
        }
        Ok(Err(error)) => (Err(error), Outcome::Error),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|m| (*m).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!(kustomization = %name, %namespace, "Observed a panic: {message}");
            (Err(ReconcileError::Panicked(message)), Outcome::Panic)
        }
    };
    working.done(outcome);
    if result.is_ok() {
        ctx.clear_failures(&ks);
    }
    result
}

fn error_policy(ks: Arc<Kustomization>, err: &ReconcileError, ctx: Arc<Context>) -> Action {
    let delay = ctx.error_backoff(&ks);
    tracing::warn!(kustomization = %ks.name_any(), namespace = ks.namespace().unwrap_or_default(), error = %err, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// The namespace the controller runs in: `RUNTIME_NAMESPACE`, or the pod's service account
/// namespace.
fn runtime_namespace() -> Option<String> {
    std::env::var("RUNTIME_NAMESPACE")
        .ok()
        .filter(|ns| !ns.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace").ok()
        })
        .map(|ns| ns.trim().to_string())
}

/// This replica's identity for leader election: the host (pod) name and a random suffix.
fn instance_identity() -> String {
    let host = Some(host_name())
        .filter(|host| !host.is_empty())
        .unwrap_or_else(|| "kustomize-controller".into());
    format!("{host}_{:08x}", rand::random::<u32>())
}

/// The host (pod) name, which forwarded events report as their instance, as Flux's do.
fn host_name() -> String {
    hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default()
}

async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
    tracing::info!("shutting down");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::kustomization::{KustomizationStatus, ResourceInventory, ResourceRef};
    use serde_json::json;

    fn cached(annotations: serde_json::Value) -> Kustomization {
        let mut ks: Kustomization = serde_json::from_value(json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {
                "name": "apps", "namespace": "flux-system", "generation": 3,
                "annotations": annotations,
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}]
            },
            "spec": {"interval": "10m", "prune": true,
                     "sourceRef": {"kind": "GitRepository", "name": "repo"}}
        }))
        .expect("a valid Kustomization");
        ks.status = Some(KustomizationStatus {
            observed_generation: Some(3),
            last_applied_revision: Some("main@sha1:abc".into()),
            inventory: Some(ResourceInventory {
                entries: vec![ResourceRef {
                    id: "apps_web__ConfigMap".into(),
                    v: "v1".into(),
                }],
            }),
            history: Some(Vec::new()),
            ..Default::default()
        });
        ks
    }

    #[test]
    fn the_cache_keeps_what_triggers_and_dependencies_read_and_drops_the_rest() {
        let mut ks = cached(json!({
            KUBECTL_LAST_APPLIED_ANNOTATION: "{}",
            "reconcile.fluxcd.io/requestedAt": "now"
        }));
        keep_what_the_cache_serves(&mut ks, DriftCorrection::Interval);
        assert!(ks.managed_fields().is_empty());
        assert_eq!(
            ks.annotations().keys().collect::<Vec<_>>(),
            ["reconcile.fluxcd.io/requestedAt"]
        );
        let status = ks.status.expect("the status stays");
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(
            status.last_applied_revision.as_deref(),
            Some("main@sha1:abc")
        );
        assert_eq!(status.history, None);
        assert_eq!(status.inventory, None);
    }

    #[test]
    fn the_inventory_stays_where_drift_is_corrected_promptly() {
        let prompt = json!({drift::DRIFT_CORRECTION_ANNOTATION: "prompt"});
        let mut by_annotation = cached(prompt);
        keep_what_the_cache_serves(&mut by_annotation, DriftCorrection::Interval);
        let mut by_default = cached(json!({}));
        keep_what_the_cache_serves(&mut by_default, DriftCorrection::Prompt);
        for ks in [by_annotation, by_default] {
            let status = ks.status.expect("the status stays");
            assert_eq!(status.history, None);
            assert_eq!(
                status.inventory.map(|inventory| inventory.entries.len()),
                Some(1)
            );
        }
    }
}
