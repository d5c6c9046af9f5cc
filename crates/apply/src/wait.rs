//! Waiting until a set of live objects is healthy, learning of every change from watches.
//!
//! Flux's controller polls every object every 5 s. Here each wait registers its objects with
//! watches shared by every Kustomization: one watch per kind and namespace (or per kind for
//! cluster-scoped kinds), started when the first wait needs it and stopped when the last one
//! is done. A watch keeps only the objects some wait is assessing, so its memory follows what
//! is being assessed, not the size of the namespace. A wait re-assesses its objects whenever
//! one of its watches reports a change, so it returns as soon as the last object is ready.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use serde_json::Value;
use tokio::sync::Notify;

use super::kstatus::{self, Assessment, Status};
use super::watch::{Event, WatchConfig, watch};
use super::{ObjectId, ResolveError, Resolver};

/// How often a wait re-assesses without a watch event: kstatus' Pod rule depends on the
/// clock, and kinds the cluster did not serve yet are looked up again. No request is made
/// for objects already watched.
const TICK: Duration = Duration::from_secs(2);

/// What judges an object's health: kstatus' rules ([`Kstatus`]), or a caller's rules on top
/// of them (the controller's `spec.healthCheckExprs`).
pub trait Assessor: Sync {
    /// The status of `object` at `now`.
    fn assess(&self, object: &Value, now: Timestamp) -> Assessment;
}

/// kstatus' rules alone; an object they cannot read is Unknown with the error.
#[derive(Clone, Copy, Debug, Default)]
pub struct Kstatus;

impl Assessor for Kstatus {
    fn assess(&self, object: &Value, now: Timestamp) -> Assessment {
        kstatus::compute(object, now).unwrap_or_else(|e| Assessment::unknown(&e))
    }
}

/// One object to assess.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The object (the version is the one it is read at).
    pub id: ObjectId,
    /// The generation the apply produced: an older copy in a watch is not assessed, so a
    /// status from before the apply can never pass for the new one.
    pub min_generation: Option<i64>,
}

/// How to wait.
#[derive(Clone, Debug, Default)]
pub struct WaitOptions {
    /// When to give up.
    pub timeout: Duration,
    /// Stop as soon as one object is Failed (Flux's default; `DisableFailFastBehavior` turns
    /// it off).
    pub fail_fast: bool,
    /// Jobs with `spec.ttlSecondsAfterFinished`: once deleted by the TTL controller they
    /// count as completed.
    pub jobs_with_ttl: HashSet<ObjectId>,
}

/// Why a wait ended without every object being Current. The messages are Flux's.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WaitError {
    /// The timeout ran out; every object that was not Current is listed.
    #[error("timeout waiting for: [{}]", .0.join(", "))]
    Timeout(Vec<String>),
    /// Every object is Current or Failed (or one is Failed, with fail-fast): the Failed ones
    /// are listed.
    #[error("failed early due to stalled resources: [{}]", .0.join(", "))]
    Stalled(Vec<String>),
    /// The wait was cancelled; the text says by what.
    #[error("health checks canceled: {0}")]
    Canceled(String),
}

/// The watches shared by every wait of the controller.
pub struct HealthWatches {
    client: Client,
    watches: Mutex<HashMap<WatchKey, Weak<SharedWatch>>>,
}

/// One watch: a kind, in one namespace or cluster-wide.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct WatchKey {
    api_version: String,
    plural: String,
    namespace: Option<String>,
}

struct SharedWatch {
    state: Arc<Mutex<WatchState>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SharedWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What a watch knows. Only objects some wait is interested in are kept.
#[derive(Default)]
struct WatchState {
    /// The initial list has been read (the store is complete for interesting names).
    synced: bool,
    /// The last watch error, while not synced.
    error: Option<String>,
    /// Name -> number of waits assessing it.
    interest: HashMap<String, usize>,
    /// The latest copy of each interesting object.
    objects: HashMap<String, Arc<Value>>,
    /// resourceVersion at which an interesting object was seen deleted (or 0: not found by a
    /// direct read), so that a read that raced with the deletion cannot resurrect it.
    absent: HashMap<String, u64>,
    /// Objects of a relist in progress.
    relist: Option<HashMap<String, Arc<Value>>>,
    /// Waits to wake on every change.
    listeners: Vec<Weak<Notify>>,
}

impl WatchState {
    fn is_interesting(&self, name: &str) -> bool {
        self.interest.contains_key(name)
    }

    /// Stores `object` unless a newer copy (or its deletion) is already known.
    fn store(&mut self, name: String, object: Arc<Value>) {
        let incoming = resource_version(&object);
        let known = self
            .objects
            .get(&name)
            .and_then(|o| resource_version(o))
            .or_else(|| self.absent.get(&name).copied());
        if let (Some(incoming), Some(known)) = (incoming, known)
            && incoming <= known
            && known != 0
        {
            return;
        }
        self.absent.remove(&name);
        self.objects.insert(name, object);
    }

    fn remove(&mut self, name: &str, deleted_at: Option<u64>) {
        self.objects.remove(name);
        self.absent
            .insert(name.to_string(), deleted_at.unwrap_or(0));
    }

    fn wake(&mut self) {
        self.listeners.retain(|listener| match listener.upgrade() {
            Some(notify) => {
                notify.notify_one();
                true
            }
            None => false,
        });
    }
}

fn lock(state: &Mutex<WatchState>) -> MutexGuard<'_, WatchState> {
    // A panic while holding the lock cannot leave the state inconsistent in a way that
    // matters more than stopping health checks would.
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// An object as the rules read it. Items of a list come without `apiVersion` and `kind`;
/// the rules need both, so they are taken from the resource the watch serves.
fn object_value(object: &DynamicObject, resource: &ApiResource) -> Option<Value> {
    let mut value = serde_json::to_value(object).ok()?;
    let map = value.as_object_mut()?;
    map.insert(
        "apiVersion".into(),
        Value::String(resource.api_version.clone()),
    );
    map.insert("kind".into(), Value::String(resource.kind.clone()));
    Some(value)
}

fn resource_version(object: &Value) -> Option<u64> {
    object
        .pointer("/metadata/resourceVersion")?
        .as_str()?
        .parse()
        .ok()
}

/// A wait's interest in one object of one watch; released on drop.
struct Registration {
    watch: Arc<SharedWatch>,
    name: String,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut state = lock(&self.watch.state);
        if let Some(count) = state.interest.get_mut(&self.name) {
            *count -= 1;
            if *count == 0 {
                state.interest.remove(&self.name);
                state.objects.remove(&self.name);
                state.absent.remove(&self.name);
            }
        }
    }
}

/// Whether a newly registered name must be read once: the watch may have passed it in its
/// list before the name was of interest. Before the first list, it will come with it.
fn needs_read(state: &WatchState, name: &str) -> bool {
    !state.objects.contains_key(name) && (state.synced || state.relist.is_some())
}

/// The state of one target during a wait.
enum Slot {
    /// The kind is not served (yet): retried on every tick.
    Unresolved(String),
    /// Watched.
    Watched(Registration),
}

impl HealthWatches {
    /// No watch runs until a wait needs one.
    pub fn new(client: Client) -> Self {
        HealthWatches {
            client,
            watches: Mutex::new(HashMap::new()),
        }
    }

    /// The number of watches running, for tests and metrics.
    pub fn active(&self) -> usize {
        self.watches
            .lock()
            .map(|w| w.values().filter(|w| w.strong_count() > 0).count())
            .unwrap_or(0)
    }

    /// Waits until every target is Current, as Flux's `WaitForSetWithContext` decides it,
    /// within `options.timeout`. `cancelled` resolves (with the reason) when the wait must
    /// stop early.
    pub async fn wait<A: Assessor + ?Sized>(
        &self,
        resolver: &Resolver,
        targets: &[Target],
        exprs: &A,
        options: &WaitOptions,
        cancelled: impl Future<Output = String>,
    ) -> Result<(), WaitError> {
        if targets.is_empty() {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + options.timeout;
        let notify = Arc::new(Notify::new());
        let mut targets = targets.to_vec();
        let mut slots = Vec::with_capacity(targets.len());
        for target in &mut targets {
            slots.push(self.register(resolver, &mut target.id, &notify).await);
        }
        tokio::pin!(cancelled);
        let mut ticks = 0u64;
        let statuses = |targets: &[Target], slots: &[Slot]| -> Vec<Option<Assessment>> {
            let now = Timestamp::now();
            targets
                .iter()
                .zip(slots)
                .map(|(target, slot)| current_status(target, slot, exprs, now))
                .collect()
        };
        loop {
            let statuses_now = statuses(&targets, &slots);
            if let Some(outcome) = verdict(&targets, &statuses_now, options, false) {
                return outcome;
            }
            tokio::select! {
                () = notify.notified() => {}
                () = tokio::time::sleep(TICK) => {
                    ticks += 1;
                    for (target, slot) in targets.iter_mut().zip(slots.iter_mut()) {
                        if matches!(slot, Slot::Unresolved(_)) {
                            *slot = self.register(resolver, &mut target.id, &notify).await;
                        }
                    }
                }
                () = tokio::time::sleep_until(deadline) => {
                    tracing::debug!(ticks, "health check timed out");
                    let statuses_now = statuses(&targets, &slots);
                    return verdict(&targets, &statuses_now, options, true).unwrap_or(Ok(()));
                }
                reason = &mut cancelled => return Err(WaitError::Canceled(reason)),
            }
        }
    }

    /// Resolves the target's kind and registers its name with the shared watch, reading the
    /// object once when the watch is already running (it did not keep objects nobody
    /// assessed). A cluster-scoped object loses the namespace it was named with.
    async fn register(&self, resolver: &Resolver, id: &mut ObjectId, notify: &Arc<Notify>) -> Slot {
        let resolved = match resolver.resolve(&id.api_version(), &id.kind).await {
            Ok(resolved) => resolved,
            // Flux's status poller maps the group and kind, and says so.
            Err(ResolveError::NotFound { .. }) => {
                return Slot::Unresolved(format!(
                    "no matches for kind \"{}\" in group \"{}\"",
                    id.kind, id.group
                ));
            }
            Err(err @ ResolveError::Discovery { .. }) => return Slot::Unresolved(err.to_string()),
        };
        if !resolved.namespaced {
            id.namespace.clear();
        }
        let namespace = resolved.namespaced.then(|| id.namespace.clone());
        let (watch, fresh) = self.acquire(&resolved.api_resource, namespace.clone(), &id.name);
        {
            let mut state = lock(&watch.state);
            state.listeners.push(Arc::downgrade(notify));
            if !fresh {
                *state.interest.entry(id.name.clone()).or_insert(0) += 1;
            }
        }
        let registration = Registration {
            watch,
            name: id.name.clone(),
        };
        if !fresh && needs_read(&lock(&registration.watch.state), &id.name) {
            let api = self.api(&resolved.api_resource, namespace.as_deref());
            match api.get_opt(&id.name).await {
                Ok(Some(object)) => {
                    if let Some(value) = object_value(&object, &resolved.api_resource) {
                        lock(&registration.watch.state).store(id.name.clone(), Arc::new(value));
                    }
                }
                Ok(None) => lock(&registration.watch.state).remove(&id.name, None),
                // The watch reports errors of its own; an object it has not delivered yet is
                // simply not known.
                Err(err) => {
                    tracing::debug!(object = %id.describe(), error = %err, "reading an object for its health failed")
                }
            }
        }
        Slot::Watched(registration)
    }

    fn api(&self, resource: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, resource),
            None => Api::all_with(self.client.clone(), resource),
        }
    }

    /// The shared watch for a kind and namespace, started if none runs. A watch started
    /// here is registered with `name` before its first event, so its initial list keeps it;
    /// the returned flag tells so.
    fn acquire(
        &self,
        resource: &ApiResource,
        namespace: Option<String>,
        name: &str,
    ) -> (Arc<SharedWatch>, bool) {
        let key = WatchKey {
            api_version: resource.api_version.clone(),
            plural: resource.plural.clone(),
            namespace: namespace.clone(),
        };
        let mut watches = self.watches.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(existing) = watches.get(&key).and_then(Weak::upgrade) {
            return (existing, false);
        }
        watches.retain(|_, watch| watch.strong_count() > 0);
        let state = Arc::new(Mutex::new(WatchState {
            interest: HashMap::from([(name.to_string(), 1)]),
            ..WatchState::default()
        }));
        let api = self.api(resource, namespace.as_deref());
        let task = tokio::spawn(run_watch(
            api,
            resource.clone(),
            Arc::clone(&state),
            key.clone(),
        ));
        let watch = Arc::new(SharedWatch { state, task });
        watches.insert(key, Arc::downgrade(&watch));
        (watch, true)
    }
}

/// Feeds one watch's events into its state and wakes the waits.
async fn run_watch(
    api: Api<DynamicObject>,
    resource: ApiResource,
    state: Arc<Mutex<WatchState>>,
    key: WatchKey,
) {
    tracing::debug!(api_version = %key.api_version, resource = %key.plural, namespace = ?key.namespace, "health watch started");
    let mut events = watch(api, WatchConfig::default().any_semantic()).boxed();
    while let Some(event) = events.next().await {
        let mut state = lock(&state);
        match event {
            Ok(Event::Init) => state.relist = Some(HashMap::new()),
            Ok(Event::InitApply(object)) => {
                let name = object.metadata.name.clone().unwrap_or_default();
                if state.is_interesting(&name)
                    && let Some(value) = object_value(&object, &resource)
                    && let Some(relist) = state.relist.as_mut()
                {
                    relist.insert(name, Arc::new(value));
                }
            }
            Ok(Event::InitDone) => {
                let listed = state.relist.take().unwrap_or_default();
                let names: Vec<String> = state.interest.keys().cloned().collect();
                for name in names {
                    match listed.get(&name) {
                        Some(object) => state.store(name, Arc::clone(object)),
                        None => state.remove(&name, None),
                    }
                }
                state.synced = true;
                state.error = None;
            }
            Ok(Event::Apply(object)) => {
                let name = object.metadata.name.clone().unwrap_or_default();
                if state.is_interesting(&name)
                    && let Some(value) = object_value(&object, &resource)
                {
                    state.store(name, Arc::new(value));
                }
            }
            Ok(Event::Delete(object)) => {
                let name = object.metadata.name.clone().unwrap_or_default();
                if state.is_interesting(&name) {
                    let deleted_at = object
                        .metadata
                        .resource_version
                        .as_deref()
                        .and_then(|rv| rv.parse().ok());
                    state.remove(&name, deleted_at);
                }
            }
            Err(err) => {
                tracing::debug!(api_version = %key.api_version, resource = %key.plural, error = %err, "health watch error");
                state.error = Some(err.to_string());
            }
        }
        state.wake();
    }
}

/// The status of one target now, or None when it cannot be told yet.
fn current_status<A: Assessor + ?Sized>(
    target: &Target,
    slot: &Slot,
    exprs: &A,
    now: Timestamp,
) -> Option<Assessment> {
    let registration = match slot {
        Slot::Unresolved(error) => {
            return Some(Assessment {
                status: Status::Unknown,
                message: String::new(),
                error: Some(error.clone()),
            });
        }
        Slot::Watched(registration) => registration,
    };
    let state = lock(&registration.watch.state);
    if let Some(object) = state.objects.get(&registration.name) {
        let generation = object
            .pointer("/metadata/generation")
            .and_then(Value::as_i64);
        if let (Some(seen), Some(applied)) = (generation, target.min_generation)
            && seen < applied
        {
            return Some(Assessment {
                status: Status::InProgress,
                message: format!("generation {applied} not observed yet"),
                error: None,
            });
        }
        return Some(exprs.assess(object, now));
    }
    if state.synced || state.absent.contains_key(&registration.name) {
        return Some(Assessment {
            status: Status::NotFound,
            message: "Resource not found".into(),
            error: None,
        });
    }
    state.error.as_ref().map(|error| Assessment {
        status: Status::Unknown,
        message: String::new(),
        error: Some(error.clone()),
    })
}

/// Flux's decision over a set of statuses: Ok when all are Current; an error listing the
/// Failed ones when the set is terminal (only Current and Failed) or, with fail-fast, when
/// one is Failed; at the deadline, an error listing every object that is not Current. None
/// while waiting should go on.
fn verdict(
    targets: &[Target],
    statuses: &[Option<Assessment>],
    options: &WaitOptions,
    timed_out: bool,
) -> Option<Result<(), WaitError>> {
    let with_ttl = |target: &Target| options.jobs_with_ttl.contains(&target.id);
    let effective = |target: &Target, status: Status| {
        if status == Status::NotFound && with_ttl(target) {
            Status::Current
        } else {
            status
        }
    };
    let known: Vec<Status> = targets
        .iter()
        .zip(statuses)
        .filter_map(|(target, status)| status.as_ref().map(|s| effective(target, s.status)))
        .collect();
    let all_known = known.len() == targets.len();
    let failed = known.contains(&Status::Failed);
    let terminal = all_known
        && known
            .iter()
            .all(|s| matches!(s, Status::Current | Status::Failed));
    let done = all_known && known.iter().all(|s| *s == Status::Current);
    if done {
        return Some(Ok(()));
    }
    if !(timed_out || terminal || (options.fail_fast && failed)) {
        return None;
    }
    let mut problems = Vec::new();
    for (target, status) in targets.iter().zip(statuses) {
        let id = target.id.describe();
        match status {
            None if !with_ttl(target) => problems.push(format!("can't determine status for {id}")),
            None => {}
            Some(assessment) => {
                let status = effective(target, assessment.status);
                if status == Status::Failed || (timed_out && status != Status::Current) {
                    let mut line = format!("{id} status: '{}'", assessment.status);
                    if let Some(error) = &assessment.error {
                        line.push_str(": ");
                        line.push_str(error);
                    }
                    problems.push(line);
                }
            }
        }
    }
    if problems.is_empty() {
        return Some(Ok(()));
    }
    Some(Err(if timed_out {
        WaitError::Timeout(problems)
    } else {
        WaitError::Stalled(problems)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(kind: &str, name: &str) -> Target {
        Target {
            id: ObjectId {
                namespace: "apps".into(),
                name: name.into(),
                group: "apps".into(),
                kind: kind.into(),
                version: "v1".into(),
            },
            min_generation: None,
        }
    }

    fn status(status: Status) -> Option<Assessment> {
        Some(Assessment {
            status,
            message: String::new(),
            error: None,
        })
    }

    fn options() -> WaitOptions {
        WaitOptions {
            timeout: Duration::from_secs(1),
            fail_fast: true,
            jobs_with_ttl: HashSet::new(),
        }
    }

    #[test]
    fn all_current_is_done() {
        let targets = [target("Deployment", "a"), target("Deployment", "b")];
        let statuses = [status(Status::Current), status(Status::Current)];
        assert_eq!(
            verdict(&targets, &statuses, &options(), false),
            Some(Ok(()))
        );
    }

    #[test]
    fn waiting_goes_on_while_something_progresses() {
        let targets = [target("Deployment", "a"), target("Deployment", "b")];
        let statuses = [status(Status::Current), status(Status::InProgress)];
        assert_eq!(verdict(&targets, &statuses, &options(), false), None);
        let unknown = [status(Status::Current), None];
        assert_eq!(verdict(&targets, &unknown, &options(), false), None);
    }

    #[test]
    fn timeout_lists_every_object_not_current_in_flux_words() {
        let targets = [
            target("Deployment", "a"),
            target("Deployment", "b"),
            target("StatefulSet", "c"),
            target("Deployment", "d"),
        ];
        let statuses = [
            status(Status::Current),
            status(Status::InProgress),
            Some(Assessment {
                status: Status::Unknown,
                message: String::new(),
                error: Some("no matches for kind \"StatefulSet\"".into()),
            }),
            None,
        ];
        let err = verdict(&targets, &statuses, &options(), true)
            .unwrap()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "timeout waiting for: [Deployment/apps/b status: 'InProgress', \
             StatefulSet/apps/c status: 'Unknown': no matches for kind \"StatefulSet\", \
             can't determine status for Deployment/apps/d]"
        );
    }

    #[test]
    fn failed_stops_early_with_fail_fast_and_when_terminal() {
        let targets = [target("Job", "a"), target("Deployment", "b")];
        let statuses = [status(Status::Failed), status(Status::InProgress)];
        let err = verdict(&targets, &statuses, &options(), false)
            .unwrap()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "failed early due to stalled resources: [Job/apps/a status: 'Failed']"
        );
        let slow = WaitOptions {
            fail_fast: false,
            ..options()
        };
        assert_eq!(verdict(&targets, &statuses, &slow, false), None);
        let terminal = [status(Status::Failed), status(Status::Current)];
        assert!(matches!(
            verdict(&targets, &terminal, &slow, false),
            Some(Err(WaitError::Stalled(_)))
        ));
    }

    #[test]
    fn deleted_jobs_with_ttl_count_as_complete() {
        let job = target("Job", "migrate");
        let mut opts = options();
        opts.jobs_with_ttl.insert(job.id.clone());
        let targets = [job, target("Deployment", "b")];
        let statuses = [status(Status::NotFound), status(Status::Current)];
        assert_eq!(verdict(&targets, &statuses, &opts, false), Some(Ok(())));
        assert_eq!(verdict(&targets, &statuses, &options(), false), None);
    }

    #[test]
    fn cluster_scoped_objects_are_named_without_namespace() {
        let mut crd = target("CustomResourceDefinition", "widgets.example.com");
        crd.id.namespace.clear();
        let err = verdict(&[crd], &[status(Status::InProgress)], &options(), true)
            .unwrap()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "timeout waiting for: [CustomResourceDefinition/widgets.example.com status: 'InProgress']"
        );
    }

    #[test]
    fn list_items_are_assessed_with_their_kind() {
        // A Job from a list has no apiVersion/kind of its own; without them it would be
        // judged by the generic rules ("Resource is current") instead of the Job rule.
        let item: DynamicObject = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "migrate", "namespace": "apps", "generation": 1},
            "spec": {"template": {}},
            "status": {},
        }))
        .unwrap();
        let jobs = ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("batch", "v1", "Job"),
            "jobs",
        );
        let value = object_value(&item, &jobs).unwrap();
        assert_eq!(value["apiVersion"], "batch/v1");
        assert_eq!(value["kind"], "Job");
        assert_eq!(
            Kstatus.assess(&value, Timestamp::now()).status,
            Status::InProgress
        );
    }

    #[test]
    fn a_newer_copy_is_never_replaced_by_an_older_read() {
        let mut state = WatchState::default();
        let object = |rv: &str, phase: &str| {
            Arc::new(
                serde_json::json!({"metadata": {"name": "a", "resourceVersion": rv}, "status": {"phase": phase}}),
            )
        };
        state.store("a".into(), object("10", "Running"));
        state.store("a".into(), object("9", "Pending"));
        assert_eq!(state.objects["a"]["status"]["phase"], "Running");
        state.remove("a", Some(12));
        state.store("a".into(), object("11", "Running"));
        assert!(!state.objects.contains_key("a"));
        state.store("a".into(), object("13", "Pending"));
        assert_eq!(state.objects["a"]["status"]["phase"], "Pending");
    }
}
