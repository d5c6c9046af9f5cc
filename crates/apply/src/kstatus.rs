//! kstatus' rules (sigs.k8s.io/cli-utils `pkg/kstatus/status`, in Flux's fork): the status of one
//! object computed from the object alone, plus Flux's own rule for `batch/Job`.
//!
//! Everything here reads a JSON object the way kstatus reads an `unstructured.Unstructured`: an
//! integer field is only an integer when the JSON number is one (a float or a string falls back to
//! the default), a string field only a string, and `status.conditions` is decoded strictly, a
//! malformed one being an error (which the caller turns into the status `Unknown`).

use std::fmt;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::Value;

/// kstatus' statuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Status {
    /// The object is being reconciled.
    InProgress,
    /// The object's controller gave up, or the object can not become ready.
    Failed,
    /// The object is ready.
    Current,
    /// The object is being deleted.
    Terminating,
    /// The object does not exist.
    NotFound,
    /// The status could not be computed.
    Unknown,
}

impl Status {
    /// The name kstatus gives the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::InProgress => "InProgress",
            Status::Failed => "Failed",
            Status::Current => "Current",
            Status::Terminating => "Terminating",
            Status::NotFound => "NotFound",
            Status::Unknown => "Unknown",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The verdict on one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assessment {
    /// The object's status.
    pub status: Status,
    /// kstatus' message ("Deployment is available. Replicas: 2", "Ready: 1/2", ...).
    pub message: String,
    /// Set when the status could not be computed (status is then Unknown): the error text, which Flux
    /// appends to its timeout message as `<Kind>/<ns>/<name> status: 'Unknown': <error>`.
    pub error: Option<String>,
}

impl Assessment {
    /// A verdict with `status` and `message`, and no error.
    pub fn new(status: Status, message: impl Into<String>) -> Self {
        Assessment {
            status,
            message: message.into(),
            error: None,
        }
    }

    /// The verdict for an object whose status could not be computed: `Unknown`, no message, and
    /// the error's text, as kstatus' generic status reader reports a rule's error.
    pub fn unknown(error: &dyn std::error::Error) -> Self {
        Assessment {
            status: Status::Unknown,
            message: String::new(),
            error: Some(error.to_string()),
        }
    }

    fn in_progress(message: impl Into<String>) -> Self {
        Assessment::new(Status::InProgress, message)
    }

    fn failed(message: impl Into<String>) -> Self {
        Assessment::new(Status::Failed, message)
    }

    fn current(message: impl Into<String>) -> Self {
        Assessment::new(Status::Current, message)
    }
}

/// A field of the object is not of the type kstatus reads it as (apimachinery's
/// `NestedFieldNoCopy` family).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path} accessor error: {value} is of the type {found}, expected {expected}")]
pub struct AccessorError {
    /// The field path, in apimachinery's notation (`.metadata.generation`).
    pub path: String,
    /// The value found, as Go's `%v` prints it.
    pub value: String,
    /// The Go type of the value found (`string`, `int64`, `map[string]interface {}`, ...).
    pub found: &'static str,
    /// The Go type expected.
    pub expected: &'static str,
}

/// Why a status could not be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatusError {
    /// A field the generic rules look up has the wrong type.
    #[error("looking up {field} from resource: {source}")]
    Lookup {
        /// The field looked up (`metadata.generation`).
        field: &'static str,
        /// What is wrong with it.
        source: AccessorError,
    },
    /// A field a kind's rule reads has the wrong type.
    #[error(transparent)]
    Accessor(#[from] AccessorError),
    /// Part of the object can not be decoded as the rule needs it (`status.conditions` that is not
    /// a list of conditions, a container status that is not an object, ...).
    #[error("{path} is not {expected} (it is of the type {found})")]
    Malformed {
        /// The field, as `status.conditions[1].type`.
        path: String,
        /// What it should be ("a list of conditions").
        expected: &'static str,
        /// The Go type of what it is.
        found: &'static str,
    },
    /// A Pod in a phase kstatus does not know.
    #[error("unknown phase {0}")]
    UnknownPhase(String),
}

/// kstatus' `status.Compute`: generic properties first (deletionTimestamp -> Terminating "Resource scheduled
/// for deletion"; generation vs status.observedGeneration -> InProgress with kstatus' message; Reconciling=True
/// -> InProgress; Stalled=True -> Failed), then the per-kind rules (Service incl. LoadBalancer, Pod, Secret,
/// PVC, StatefulSet, DaemonSet, Deployment, ReplicaSet, PodDisruptionBudget, CronJob, ConfigMap, Job, CRD),
/// then the Ready condition, else Current "Resource is current". `now` is used by the Pod rule's 15 s
/// schedule window (pass the current time; tests pass fixed times).
pub fn compute(object: &Value, now: Timestamp) -> Result<Assessment, StatusError> {
    if let Some(verdict) = check_generic_properties(object)? {
        return Ok(verdict);
    }
    if let Some(rule) = legacy_rule(object) {
        return match rule {
            Rule::AlwaysReady => Ok(Assessment::current("Resource is always ready")),
            Rule::Service => Ok(service(object)),
            Rule::Pod => pod(object, now),
            Rule::Pvc => Ok(pvc(object)),
            Rule::StatefulSet => Ok(stateful_set(object)),
            Rule::DaemonSet => daemon_set(object),
            Rule::Deployment => deployment(object),
            Rule::ReplicaSet => replica_set(object),
            Rule::PodDisruptionBudget => {
                Ok(Assessment::current("AllowedDisruptions has been computed."))
            }
            Rule::Job => job(object),
            Rule::Crd => crd(object),
        };
    }
    if let Some(verdict) = check_ready_condition(object)? {
        return Ok(verdict);
    }
    Ok(Assessment::current("Resource is current"))
}

/// Flux's custom Job rule (fluxcd/pkg/runtime statusreaders/job.go): suspended Job is Current, Complete ->
/// Current "Job Completed. succeeded: x/y", Failed -> Failed, not started / in progress -> InProgress.
///
/// Unlike [`compute`], it does not look at the generic properties (deletion, generation, Reconciling,
/// Stalled): Flux's Job reader calls this rule alone.
pub fn compute_flux_job(object: &Value) -> Result<Assessment, StatusError> {
    if let Ok(Some(Value::Bool(true))) = nested(object, &["spec", "suspend"]) {
        return Ok(Assessment::current("Job is suspended"));
    }
    job_status(object, JobRule::Flux)
}

/// The object's group and kind as kstatus' `GroupVersionKind()` gives them: both empty when
/// `apiVersion` is not a valid group/version.
pub(crate) fn kstatus_group_kind(object: &Value) -> (&str, &str) {
    let api_version = top_level_string(object, "apiVersion");
    match parse_group(api_version) {
        Some(group) => (group, top_level_string(object, "kind")),
        None => ("", ""),
    }
}

/// The group of an apiVersion as apimachinery's `ParseGroupVersion` reads it; None when it is not
/// a valid group/version (more than one `/`).
pub fn parse_group(api_version: &str) -> Option<&str> {
    if api_version.is_empty() || api_version == "/" {
        return Some("");
    }
    match api_version.matches('/').count() {
        0 => Some(""),
        1 => api_version.split_once('/').map(|(group, _)| group),
        _ => None,
    }
}

/// A top-level string field (`kind`, `apiVersion`), empty when absent or not a string.
pub fn top_level_string<'a>(object: &'a Value, field: &str) -> &'a str {
    object.get(field).and_then(Value::as_str).unwrap_or("")
}

/// The integer at `fields`, as apimachinery's `NestedInt64`: absent is None, present but not an
/// integer is an error.
pub fn nested_int64(object: &Value, fields: &[&str]) -> Result<Option<i64>, AccessorError> {
    match nested(object, fields)? {
        None => Ok(None),
        Some(value) => match value.as_i64() {
            Some(i) => Ok(Some(i)),
            None => Err(accessor_error(fields, value, "int64")),
        },
    }
}

enum Rule {
    AlwaysReady,
    Service,
    Pod,
    Pvc,
    StatefulSet,
    DaemonSet,
    Deployment,
    ReplicaSet,
    PodDisruptionBudget,
    Job,
    Crd,
}

/// kstatus' `legacyTypes`: the rule for the object's group and kind, if it has one.
fn legacy_rule(object: &Value) -> Option<Rule> {
    let rule = match kstatus_group_kind(object) {
        ("", "Service") => Rule::Service,
        ("", "Pod") => Rule::Pod,
        ("", "Secret") | ("", "ConfigMap") | ("batch", "CronJob") => Rule::AlwaysReady,
        ("", "PersistentVolumeClaim") => Rule::Pvc,
        ("apps", "StatefulSet") => Rule::StatefulSet,
        ("apps" | "extensions", "DaemonSet") => Rule::DaemonSet,
        ("apps" | "extensions", "Deployment") => Rule::Deployment,
        ("apps" | "extensions", "ReplicaSet") => Rule::ReplicaSet,
        ("policy", "PodDisruptionBudget") => Rule::PodDisruptionBudget,
        ("batch", "Job") => Rule::Job,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => Rule::Crd,
        _ => return None,
    };
    Some(rule)
}

/// kstatus' `checkGenericProperties`.
fn check_generic_properties(object: &Value) -> Result<Option<Assessment>, StatusError> {
    let deletion = nested(object, &["metadata", "deletionTimestamp"]).and_then(|v| match v {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(other) => Err(accessor_error(
            &["metadata", "deletionTimestamp"],
            other,
            "string",
        )),
    });
    let deletion = deletion.map_err(|source| StatusError::Lookup {
        field: "metadata.deletionTimestamp",
        source,
    })?;
    if deletion.is_some_and(|s| !s.is_empty()) {
        return Ok(Some(Assessment::new(
            Status::Terminating,
            "Resource scheduled for deletion",
        )));
    }

    if let Some(verdict) = check_generation(object)? {
        return Ok(Some(verdict));
    }

    for c in conditions(object)? {
        if c.kind == "Reconciling" && c.status == "True" {
            return Ok(Some(Assessment::in_progress(c.message)));
        }
        if c.kind == "Stalled" && c.status == "True" {
            return Ok(Some(Assessment::failed(c.message)));
        }
    }
    Ok(None)
}

/// kstatus' `checkGeneration`: InProgress while the controller has not observed the latest
/// generation; nothing to say when either field is absent.
fn check_generation(object: &Value) -> Result<Option<Assessment>, StatusError> {
    let Some(generation) =
        lookup_int64(object, &["metadata", "generation"], "metadata.generation")?
    else {
        return Ok(None);
    };
    let observed = lookup_int64(
        object,
        &["status", "observedGeneration"],
        "status.observedGeneration",
    )?;
    match observed {
        Some(observed) if observed != generation => Ok(Some(Assessment::in_progress(format!(
            "{} generation is {generation}, but latest observed generation is {observed}",
            top_level_string(object, "kind")
        )))),
        _ => Ok(None),
    }
}

/// kstatus' `checkGenerationSet`, which the DaemonSet rule uses: both fields must be there.
fn check_generation_set(object: &Value) -> Result<Option<Assessment>, StatusError> {
    let kind = top_level_string(object, "kind");
    if lookup_int64(object, &["metadata", "generation"], "metadata.generation")?.is_none() {
        return Ok(Some(Assessment::in_progress(format!(
            "{kind} metadata.generation not found"
        ))));
    }
    if lookup_int64(
        object,
        &["status", "observedGeneration"],
        "status.observedGeneration",
    )?
    .is_none()
    {
        return Ok(Some(Assessment::in_progress(format!(
            "{kind} status.observedGeneration not found"
        ))));
    }
    Ok(None)
}

fn lookup_int64(
    object: &Value,
    fields: &[&str],
    field: &'static str,
) -> Result<Option<i64>, StatusError> {
    nested_int64(object, fields).map_err(|source| StatusError::Lookup { field, source })
}

/// kstatus' `checkReadyCondition`: the first Ready condition whose status is True, False or
/// Unknown decides.
fn check_ready_condition(object: &Value) -> Result<Option<Assessment>, StatusError> {
    for c in conditions(object)? {
        if c.kind != "Ready" {
            continue;
        }
        match c.status.as_str() {
            "True" => return Ok(Some(Assessment::current("Resource is Ready"))),
            "False" | "Unknown" => return Ok(Some(Assessment::in_progress(c.message))),
            _ => {}
        }
    }
    Ok(None)
}

fn service(object: &Value) -> Assessment {
    let spec_type = string_field(object, &["spec", "type"], "ClusterIP");
    let cluster_ip = string_field(object, &["spec", "clusterIP"], "");
    if spec_type == "LoadBalancer" && cluster_ip.is_empty() {
        return Assessment::in_progress("ClusterIP not set. Service type: LoadBalancer");
    }
    Assessment::current("Service is ready")
}

fn pvc(object: &Value) -> Assessment {
    let phase = string_field(object, &["status", "phase"], "unknown");
    if phase != "Bound" {
        return Assessment::in_progress(format!("PVC is not Bound. phase: {phase}"));
    }
    Assessment::current("PVC is Bound")
}

/// How long a Pod may stay unscheduled before kstatus calls it unschedulable.
const SCHEDULE_WINDOW: SignedDuration = SignedDuration::from_secs(15);

fn pod(object: &Value, now: Timestamp) -> Result<Assessment, StatusError> {
    let conditions = conditions(object)?;
    let phase = string_field(object, &["status", "phase"], "");
    match phase {
        "Succeeded" => Ok(Assessment::current("Pod has completed successfully")),
        "Failed" => Ok(Assessment::current(
            "Pod has completed, but not successfully",
        )),
        "Running" => {
            if conditions
                .iter()
                .any(|c| c.kind == "Ready" && c.status == "True")
            {
                return Ok(Assessment::current("Pod is Ready"));
            }
            let crash_looping = crash_looping_containers(object)?;
            if !crash_looping.is_empty() {
                return Ok(Assessment::failed(format!(
                    "Containers in CrashLoop state: {}",
                    crash_looping.join(",")
                )));
            }
            Ok(Assessment::in_progress("Pod is running but is not Ready"))
        }
        "Pending" => {
            let scheduled = conditions
                .iter()
                .find(|c| c.kind == "PodScheduled" && c.status == "False");
            if scheduled.is_some_and(|c| c.reason == "Unschedulable") {
                if within_schedule_window(object, now) {
                    return Ok(Assessment::in_progress("Pod has not been scheduled"));
                }
                return Ok(Assessment::failed("Pod could not be scheduled"));
            }
            Ok(Assessment::in_progress("Pod is in the Pending phase"))
        }
        "" => Ok(Assessment::in_progress("Pod phase not available")),
        other => Err(StatusError::UnknownPhase(other.to_string())),
    }
}

/// Whether the object was created less than [`SCHEDULE_WINDOW`] before `now`. A missing or
/// unparsable creationTimestamp is Go's zero time, long ago.
fn within_schedule_window(object: &Value, now: Timestamp) -> bool {
    let created = string_field(object, &["metadata", "creationTimestamp"], "");
    let Ok(created) = created.parse::<Timestamp>() else {
        return false;
    };
    match now.checked_sub(SCHEDULE_WINDOW) {
        Ok(window_start) => window_start < created,
        Err(_) => true,
    }
}

/// kstatus' `getCrashLoopingContainers`: the containers waiting in CrashLoopBackOff. Where kstatus
/// would panic on a malformed container status, this is an error.
fn crash_looping_containers(object: &Value) -> Result<Vec<String>, StatusError> {
    let fields = ["status", "containerStatuses"];
    let statuses = match nested(object, &fields)? {
        None => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => return Err(accessor_error(&fields, other, "[]interface{}").into()),
    };
    let mut names = Vec::new();
    for (i, item) in statuses.iter().enumerate() {
        let path = format!("status.containerStatuses[{i}]");
        let status = as_object(item, &path, "an object")?;
        let Some(name) = status.get("name") else {
            continue;
        };
        let name = as_str(name, &format!("{path}.name"))?;
        let Some(state) = status.get("state") else {
            continue;
        };
        let state = as_object(state, &format!("{path}.state"), "an object")?;
        let Some(waiting) = state.get("waiting") else {
            continue;
        };
        let waiting = as_object(waiting, &format!("{path}.state.waiting"), "an object")?;
        let Some(reason) = waiting.get("reason") else {
            continue;
        };
        if as_str(reason, &format!("{path}.state.waiting.reason"))? == "CrashLoopBackOff" {
            names.push(name.to_string());
        }
    }
    Ok(names)
}

fn stateful_set(object: &Value) -> Assessment {
    if string_field(object, &["spec", "updateStrategy", "type"], "") == "OnDelete" {
        return Assessment::current("StatefulSet is using the ondelete update strategy");
    }
    let spec_replicas = int_field(object, &["spec", "replicas"], 1);
    let ready = int_field(object, &["status", "readyReplicas"], 0);
    let current = int_field(object, &["status", "currentReplicas"], 0);
    let updated = int_field(object, &["status", "updatedReplicas"], 0);
    let status_replicas = int_field(object, &["status", "replicas"], 0);
    let partition = int_field(
        object,
        &["spec", "updateStrategy", "rollingUpdate", "partition"],
        -1,
    );

    if spec_replicas > status_replicas {
        return Assessment::in_progress(format!("Replicas: {status_replicas}/{spec_replicas}"));
    }
    if spec_replicas > ready {
        return Assessment::in_progress(format!("Ready: {ready}/{spec_replicas}"));
    }
    if status_replicas > spec_replicas {
        return Assessment::in_progress(format!(
            "Pending termination: {}",
            status_replicas.wrapping_sub(spec_replicas)
        ));
    }
    if partition != -1 {
        let expected = spec_replicas.wrapping_sub(partition);
        if updated < expected {
            return Assessment::in_progress(format!("updated: {updated}/{expected}"));
        }
        return Assessment::current(format!("Partition rollout complete. updated: {updated}"));
    }
    if spec_replicas > current {
        return Assessment::in_progress(format!("current: {current}/{spec_replicas}"));
    }
    let current_revision = string_field(object, &["status", "currentRevision"], "");
    let update_revision = string_field(object, &["status", "updateRevision"], "");
    if current_revision != update_revision {
        return Assessment::in_progress("Waiting for updated revision to match current");
    }
    Assessment::current(format!(
        "All replicas scheduled as expected. Replicas: {status_replicas}"
    ))
}

fn deployment(object: &Value) -> Result<Assessment, StatusError> {
    // Without progressDeadlineSeconds the controller never sets Progressing; Kubernetes reads
    // MaxInt32 as "no deadline".
    const NO_DEADLINE: i64 = i32::MAX as i64;
    let mut progressing =
        int_field(object, &["spec", "progressDeadlineSeconds"], NO_DEADLINE) == NO_DEADLINE;
    let mut available = false;

    for c in conditions(object)? {
        match c.kind.as_str() {
            "Progressing" => {
                if c.reason == "ProgressDeadlineExceeded" {
                    return Ok(Assessment::failed("Progress deadline exceeded"));
                }
                if c.status == "True" && c.reason == "NewReplicaSetAvailable" {
                    progressing = true;
                }
            }
            "Available" if c.status == "True" => available = true,
            _ => {}
        }
    }

    let spec_replicas = int_field(object, &["spec", "replicas"], 1);
    let status_replicas = int_field(object, &["status", "replicas"], 0);
    let updated = int_field(object, &["status", "updatedReplicas"], 0);
    let ready = int_field(object, &["status", "readyReplicas"], 0);
    let available_replicas = int_field(object, &["status", "availableReplicas"], 0);

    if spec_replicas > status_replicas {
        return Ok(Assessment::in_progress(format!(
            "Replicas: {status_replicas}/{spec_replicas}"
        )));
    }
    if spec_replicas > updated {
        return Ok(Assessment::in_progress(format!(
            "Updated: {updated}/{spec_replicas}"
        )));
    }
    if status_replicas > spec_replicas {
        return Ok(Assessment::in_progress(format!(
            "Pending termination: {}",
            status_replicas.wrapping_sub(spec_replicas)
        )));
    }
    if updated > available_replicas {
        return Ok(Assessment::in_progress(format!(
            "Available: {available_replicas}/{updated}"
        )));
    }
    if spec_replicas > ready {
        return Ok(Assessment::in_progress(format!(
            "Ready: {ready}/{spec_replicas}"
        )));
    }
    if !progressing {
        return Ok(Assessment::in_progress("ReplicaSet not Available"));
    }
    if !available {
        return Ok(Assessment::in_progress("Deployment not Available"));
    }
    Ok(Assessment::current(format!(
        "Deployment is available. Replicas: {status_replicas}"
    )))
}

fn replica_set(object: &Value) -> Result<Assessment, StatusError> {
    if conditions(object)?
        .iter()
        .any(|c| c.kind == "ReplicaFailure" && c.status == "True")
    {
        return Ok(Assessment::in_progress(
            "Replica Failure condition. Check Pods",
        ));
    }
    let spec_replicas = int_field(object, &["spec", "replicas"], 1);
    let status_replicas = int_field(object, &["status", "replicas"], 0);
    let ready = int_field(object, &["status", "readyReplicas"], 0);
    let available = int_field(object, &["status", "availableReplicas"], 0);
    let labelled = int_field(object, &["status", "fullyLabeledReplicas"], 0);

    if spec_replicas > labelled {
        return Ok(Assessment::in_progress(format!(
            "Labelled: {labelled}/{spec_replicas}"
        )));
    }
    if spec_replicas > available {
        return Ok(Assessment::in_progress(format!(
            "Available: {available}/{spec_replicas}"
        )));
    }
    if spec_replicas > ready {
        return Ok(Assessment::in_progress(format!(
            "Ready: {ready}/{spec_replicas}"
        )));
    }
    if status_replicas > spec_replicas {
        return Ok(Assessment::in_progress(format!(
            "Pending termination: {}",
            status_replicas.wrapping_sub(spec_replicas)
        )));
    }
    Ok(Assessment::current(format!(
        "ReplicaSet is available. Replicas: {status_replicas}"
    )))
}

fn daemon_set(object: &Value) -> Result<Assessment, StatusError> {
    if let Some(verdict) = check_generation_set(object)? {
        return Ok(verdict);
    }
    let desired = int_field(object, &["status", "desiredNumberScheduled"], -1);
    let current = int_field(object, &["status", "currentNumberScheduled"], 0);
    let updated = int_field(object, &["status", "updatedNumberScheduled"], 0);
    let available = int_field(object, &["status", "numberAvailable"], 0);
    let ready = int_field(object, &["status", "numberReady"], 0);

    let verdict = if desired == -1 {
        Assessment::in_progress("Missing .status.desiredNumberScheduled")
    } else if desired > current {
        Assessment::in_progress(format!("Current: {current}/{desired}"))
    } else if desired > updated {
        Assessment::in_progress(format!("Updated: {updated}/{desired}"))
    } else if desired > available {
        Assessment::in_progress(format!("Available: {available}/{desired}"))
    } else if desired > ready {
        Assessment::in_progress(format!("Ready: {ready}/{desired}"))
    } else {
        Assessment::current(format!(
            "All replicas scheduled as expected. Replicas: {desired}"
        ))
    };
    Ok(verdict)
}

/// kstatus' built-in Job rule (Flux replaces it with [`compute_flux_job`], but `compute` keeps
/// kstatus' behaviour): a started Job is Current.
fn job(object: &Value) -> Result<Assessment, StatusError> {
    job_status(object, JobRule::Kstatus)
}

/// Which of the two Job rules [`job_status`] follows: they read the same fields and conditions,
/// and part only on a Job that is neither complete nor failed.
#[derive(Clone, Copy)]
enum JobRule {
    /// kstatus' built-in rule: a started Job is Current, the not-started message has no counts.
    Kstatus,
    /// Flux's Job reader: a started Job is InProgress, the not-started message counts active pods.
    Flux,
}

/// The Job rules: Complete -> Current "Job Completed. succeeded: x/y", Failed -> Failed, then
/// not started / started as `rule` says.
fn job_status(object: &Value, rule: JobRule) -> Result<Assessment, StatusError> {
    let parallelism = int_field(object, &["spec", "parallelism"], 1);
    let completions = int_field(object, &["spec", "completions"], parallelism);
    let succeeded = int_field(object, &["status", "succeeded"], 0);
    let active = int_field(object, &["status", "active"], 0);
    let failed = int_field(object, &["status", "failed"], 0);
    let start_time = string_field(object, &["status", "startTime"], "");

    for c in conditions(object)? {
        match c.kind.as_str() {
            "Complete" if c.status == "True" => {
                return Ok(Assessment::current(format!(
                    "Job Completed. succeeded: {succeeded}/{completions}"
                )));
            }
            "Failed" if c.status == "True" => {
                return Ok(Assessment::failed(format!(
                    "Job Failed. failed: {failed}/{completions}"
                )));
            }
            _ => {}
        }
    }
    if start_time.is_empty() {
        return Ok(Assessment::in_progress(match rule {
            JobRule::Kstatus => "Job not started".to_string(),
            JobRule::Flux => format!("Job not started. active: 0/{parallelism}"),
        }));
    }
    let message =
        format!("Job in progress. success:{succeeded}, active: {active}, failed: {failed}");
    Ok(match rule {
        JobRule::Kstatus => Assessment::current(message),
        JobRule::Flux => Assessment::in_progress(message),
    })
}

fn crd(object: &Value) -> Result<Assessment, StatusError> {
    for c in conditions(object)? {
        if c.kind == "NamesAccepted" && c.status == "False" {
            return Ok(Assessment::failed(c.message));
        }
        if c.kind == "Established" {
            if c.status == "False" && c.reason != "Installing" {
                return Ok(Assessment::failed(c.message));
            }
            if c.status == "True" {
                return Ok(Assessment::current("CRD is established"));
            }
        }
    }
    Ok(Assessment::in_progress("Install in progress"))
}

/// A condition as kstatus' `BasicCondition` decodes it.
#[derive(Debug, Default)]
struct BasicCondition {
    kind: String,
    status: String,
    reason: String,
    message: String,
}

/// `status.conditions` decoded as kstatus' `GetObjectWithConditions` does (apimachinery's
/// `FromUnstructured`): absent or null parts are empty, parts of the wrong type are errors.
fn conditions(object: &Value) -> Result<Vec<BasicCondition>, StatusError> {
    let Some(status) = object.get("status").filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let status = as_object(status, "status", "an object")?;
    let Some(list) = status.get("conditions").filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let Value::Array(items) = list else {
        return Err(malformed("status.conditions", "a list of conditions", list));
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        if item.is_null() {
            out.push(BasicCondition::default());
            continue;
        }
        let path = format!("status.conditions[{i}]");
        let fields = as_object(item, &path, "a condition")?;
        let text = |name: &str| -> Result<String, StatusError> {
            match fields.get(name) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(other) => Err(malformed(&format!("{path}.{name}"), "a string", other)),
            }
        };
        out.push(BasicCondition {
            kind: text("type")?,
            status: text("status")?,
            reason: text("reason")?,
            message: text("message")?,
        });
    }
    Ok(out)
}

fn as_object<'a>(
    value: &'a Value,
    path: &str,
    expected: &'static str,
) -> Result<&'a serde_json::Map<String, Value>, StatusError> {
    value
        .as_object()
        .ok_or_else(|| malformed(path, expected, value))
}

fn as_str<'a>(value: &'a Value, path: &str) -> Result<&'a str, StatusError> {
    value
        .as_str()
        .ok_or_else(|| malformed(path, "a string", value))
}

fn malformed(path: &str, expected: &'static str, found: &Value) -> StatusError {
    StatusError::Malformed {
        path: path.to_string(),
        expected,
        found: go_type(found),
    }
}

/// apimachinery's `NestedFieldNoCopy`: the value at `fields`, None when a step is absent or null,
/// an error when a step is not an object.
fn nested<'a>(object: &'a Value, fields: &[&str]) -> Result<Option<&'a Value>, AccessorError> {
    if !object.is_object() {
        return Ok(None);
    }
    let mut value = object;
    for (i, field) in fields.iter().enumerate() {
        match value {
            Value::Null => return Ok(None),
            Value::Object(map) => match map.get(*field) {
                Some(next) => value = next,
                None => return Ok(None),
            },
            other => {
                return Err(accessor_error(
                    &fields[..=i],
                    other,
                    "map[string]interface{}",
                ));
            }
        }
    }
    Ok(Some(value))
}

/// kstatus' `GetIntField`: the integer at `fields`, else `default` (absent, null, a float, a
/// string, or a path through a non-object).
fn int_field(object: &Value, fields: &[&str], default: i64) -> i64 {
    match nested(object, fields) {
        Ok(Some(value)) => value.as_i64().unwrap_or(default),
        _ => default,
    }
}

/// kstatus' `GetStringField`: the string at `fields`, else `default`.
fn string_field<'a>(object: &'a Value, fields: &[&str], default: &'a str) -> &'a str {
    match nested(object, fields) {
        Ok(Some(Value::String(s))) => s,
        _ => default,
    }
}

fn accessor_error(fields: &[&str], value: &Value, expected: &'static str) -> AccessorError {
    AccessorError {
        path: fields.iter().fold(String::new(), |mut path, field| {
            path.push('.');
            path.push_str(field);
            path
        }),
        value: go_value(value),
        found: go_type(value),
        expected,
    }
}

/// The Go type a JSON value decodes to in an `unstructured.Unstructured`.
pub(crate) fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.as_i64().is_some() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// A JSON value as Go's `%v` prints its unstructured form.
fn go_value(value: &Value) -> String {
    let mut out = String::new();
    write_go_value(&mut out, value);
    out
}

fn write_go_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match n.as_i64() {
            Some(i) => out.push_str(&i.to_string()),
            None => out.push_str(&go_float(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::String(s) => out.push_str(s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                write_go_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push_str("map[");
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(key);
                out.push(':');
                if let Some(v) = map.get(key) {
                    write_go_value(out, v);
                }
            }
            out.push(']');
        }
    }
}

/// A float as Go's `%v` prints it: the shortest representation, in exponent form when the
/// exponent is below -4 or at least 21.
fn go_float(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".to_string()
        } else if f > 0.0 {
            "+Inf".to_string()
        } else {
            "-Inf".to_string()
        };
    }
    let scientific = format!("{f:e}");
    let Some((mantissa, exponent)) = scientific.split_once('e') else {
        return format!("{f}");
    };
    let Ok(power) = exponent.parse::<i32>() else {
        return format!("{f}");
    };
    if (-4..21).contains(&power) {
        return format!("{f}");
    }
    let sign = if power < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", power.unsigned_abs())
}

#[cfg(test)]
mod tests;
