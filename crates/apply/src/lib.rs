//! The apply stage: server-side apply of a build in Flux's stages, the inventory of what was
//! applied, and pruning of what left it.
//!
//! Within a stage every object is validated before any is applied, as Flux's controller does:
//! a server-side dry-run per object, compared with the live object to tell `configured` from
//! `unchanged`. An object whose configuration was applied (or found unchanged) by this
//! controller before, and that nobody wrote since, skips that: see [`AppliedObjects`].
//!
//! Each object is first normalized as Flux normalizes a build (see `normalize`: a Secret's
//! `stringData` applied as `data`, ports given `TCP`, built-in kinds through their typed form),
//! and the first two stages (cluster definitions, then `*Class` kinds) are waited for as Flux
//! waits for them (see `stage_wait`).
//!
//! Everything goes through kube's dynamic API with an injected client, so that
//! impersonation or a remote cluster is only another client.

#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod applied;
mod ca_bundle;
pub mod drift;
mod field_paths;
pub mod ignore;
mod inventory;
pub mod kstatus;
mod live_versions;
pub mod managed_fields;
pub mod names;
mod normalize;
mod object;
mod order;
mod plan;
mod preview;
mod prune;
mod resolve;
mod revision;
mod spec;
mod stage_wait;
pub mod wait;
pub mod watch;

use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::Client;
use kube::api::{Api, DynamicObject};

pub use applied::AppliedObjects;
pub use ignore::{IgnoreRuleError, IgnoreRules};
pub use inventory::{InvalidInventoryId, ObjectId, inventory_of};
pub use live_versions::{LiveVersions, Written};
pub use object::Object;
pub use order::{sort_for_apply, stage, stage_of_kind};
pub use preview::Preview;
pub use resolve::{ResolveError, Resolver};
pub use revision::Revision;
pub use spec::{IgnoreRule, ResourceRef, Selector};

use plan::Planned;

/// The API server's message (`secrets "kubeconfig" not found`), without the Rust error
/// around it; other errors as they display.
pub fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// The Kustomization that owns applied objects; written as the two owner labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// The Kustomization's name.
    pub name: String,
    /// The Kustomization's namespace.
    pub namespace: String,
}

/// What happened to one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The object did not exist and was created.
    Created,
    /// The object existed and changed.
    Configured,
    /// The object existed and the apply changed nothing.
    Unchanged,
    /// The object was deleted.
    Deleted,
    /// The object was left alone by an annotation or label.
    Skipped,
    /// The object drifted from the configuration and was left as it is, drift being
    /// reported rather than corrected ([`ApplyOptions::report_drift`]).
    Drifted,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Created => "created",
            Action::Configured => "configured",
            Action::Unchanged => "unchanged",
            Action::Deleted => "deleted",
            Action::Skipped => "skipped",
            Action::Drifted => "drifted",
        })
    }
}

/// One line of a change set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The object.
    pub id: ObjectId,
    /// What happened to it.
    pub action: Action,
    /// `metadata.generation` of the object the API server returned, when it was applied.
    pub generation: Option<i64>,
    /// How the object had drifted: for an object configured (its fields changed by other
    /// managers, if any) and for one [`Action::Drifted`].
    pub drift: Option<drift::Drift>,
}

impl Change {
    /// A change of `id` that applied nothing (unchanged, skipped, deleted).
    pub fn new(id: ObjectId, action: Action) -> Self {
        Change {
            id,
            action,
            generation: None,
            drift: None,
        }
    }

    /// Whether the object is gone and was left so: drift reported, not corrected.
    pub fn left_deleted(&self) -> bool {
        self.action == Action::Drifted && self.drift.as_ref().is_some_and(|d| d.deleted)
    }

    /// The line of Flux's change-set event: `Kind/namespace/name action`; a configured object
    /// that other managers had changed names them, `(drifted by kubectl-edit)`.
    fn line(&self) -> String {
        let line = format!("{} {}", self.id.describe(), self.action);
        let managers = match (&self.action, &self.drift) {
            (Action::Configured, Some(drift)) => drift.managers(),
            _ => Vec::new(),
        };
        if managers.is_empty() {
            line
        } else {
            format!("{line} (drifted by {})", managers.join(", "))
        }
    }
}

/// The outcome of an apply or a prune, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangeSet(pub Vec<Change>);

impl ChangeSet {
    /// Whether anything was created, configured or deleted.
    pub fn has_changes(&self) -> bool {
        self.0.iter().any(|c| changed(c.action))
    }

    /// Flux's apply event text: one `Kind/namespace/name action` line per object created,
    /// configured or deleted; unchanged, skipped and drifted objects left out. A configured
    /// object that other managers had changed names them (see [`Change`]), which Flux's does
    /// not; every other line is Flux's.
    pub fn summary(&self) -> String {
        self.0
            .iter()
            .filter(|c| changed(c.action))
            .map(Change::line)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Flux's garbage collection text: every object the prune looked at, skipped ones
    /// included.
    pub fn prune_summary(&self) -> String {
        self.lines(|c| c.action != Action::Unchanged)
    }

    /// The change set as Flux logs it: `{"Kind/ns/name": "action"}` for every object, or with
    /// `grouped` (`GroupChangeLog`) `{"action": ["Kind/ns/name", ...]}`.
    pub fn log_output(&self, grouped: bool) -> serde_json::Value {
        let mut output = serde_json::Map::new();
        for change in &self.0 {
            let subject = change.id.describe();
            let action = change.action.to_string();
            if grouped {
                if let Some(list) = output
                    .entry(action)
                    .or_insert_with(|| serde_json::Value::Array(Vec::new()))
                    .as_array_mut()
                {
                    list.push(subject.into());
                }
            } else {
                output.insert(subject, action.into());
            }
        }
        serde_json::Value::Object(output)
    }

    fn lines(&self, keep: impl Fn(&Change) -> bool) -> String {
        self.0
            .iter()
            .filter(|c| keep(c))
            .map(|c| format!("{} {}", c.id.describe(), c.action))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn changed(action: Action) -> bool {
    !matches!(
        action,
        Action::Unchanged | Action::Skipped | Action::Drifted
    )
}

/// Why applying or pruning failed; each variant names the object.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The kind is not served by the cluster.
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// A namespaced object without a namespace.
    #[error("{object} namespace not specified: the server could not find the requested resource")]
    MissingNamespace {
        /// `Kind/name` of the object.
        object: String,
    },
    /// The server-side dry-run refused the object.
    #[error("{object} dry-run failed{}", dry_run_failure(source))]
    DryRun {
        /// `Kind/namespace/name` of the object.
        object: String,
        /// The API error.
        source: kube::Error,
    },
    /// The API server refused the object after the dry-run accepted it.
    #[error("{object} apply failed: {}", api_message(source))]
    Apply {
        /// `Kind/namespace/name` of the object.
        object: String,
        /// The API error.
        source: kube::Error,
    },
    /// Rewriting the live object's metadata before the apply failed.
    #[error("{object} {step} failed: {}", api_message(source))]
    Metadata {
        /// `Kind/namespace/name` of the object.
        object: String,
        /// What was rewritten (`metadata.managedFields cleanup`, ...).
        step: &'static str,
        /// The API error.
        source: kube::Error,
    },
    /// A `spec.ignore` path could not be removed from or set in the object.
    #[error("{object} {source}")]
    Ignore {
        /// `Kind/namespace/name` of the object.
        object: String,
        /// What failed.
        source: ignore::IgnorePatchError,
    },
    /// An object with an immutable field change could not be deleted to be recreated.
    #[error(
        "{object} immutable field detected, failed to delete object: {}",
        api_message(source)
    )]
    Recreate {
        /// `Kind/namespace/name` of the object.
        object: String,
        /// The API error.
        source: kube::Error,
    },
    /// The objects of the cluster definition or class stage were not all Current when the
    /// 60 s Flux waits for them ran out; each entry is `Kind/namespace/name status: '...'`.
    #[error("timeout waiting for: [{}]", objects.join(", "))]
    StageTimeout {
        /// The objects that were not Current.
        objects: Vec<String>,
    },
    /// Some objects of the cluster definition or class stage are Failed and every other one
    /// is Current: waiting longer cannot help.
    #[error("failed early due to stalled resources: [{}]", objects.join(", "))]
    StageStalled {
        /// The Failed objects.
        objects: Vec<String>,
    },
    /// A deleted object was still there when the timeout ran out.
    #[error("{object} was not terminated within {seconds}s")]
    NotTerminated {
        /// `Kind/namespace/name` of the object.
        object: String,
        /// How long we waited.
        seconds: u64,
    },
    /// Deleting an object failed.
    #[error("{object} delete failed{}", api_failure(source))]
    Delete {
        /// `Kind/namespace/name` of the object.
        object: String,
        /// The API error.
        source: kube::Error,
    },
}

/// An apply that stopped at a failure, with what earlier stages had already changed.
#[derive(Debug)]
pub struct PartialApply {
    /// Why it stopped.
    pub error: ApplyError,
    /// What was applied before it stopped.
    pub applied: ChangeSet,
}

impl fmt::Display for PartialApply {
    /// Flux's form: the error, a newline, then one line per object already changed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.error)?;
        for change in self.applied.0.iter().filter(|c| changed(c.action)) {
            writeln!(f, "{} {}", change.id.describe(), change.action)?;
        }
        Ok(())
    }
}

/// What the API server said, as Flux words it: ` (<reason>): <message>` for a refusal
/// (`(Invalid): Service "web" is invalid: ...`), `: <error>` for anything else.
fn api_failure(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            let reason = if status.reason.is_empty() {
                status.code.to_string()
            } else {
                status.reason.clone()
            };
            format!(" ({reason}): {}", status.message)
        }
        other => format!(": {other}"),
    }
}

/// A dry-run refusal as Flux's controller words it: the API reason in parentheses (a field
/// manager conflict named as such), then the message.
fn dry_run_failure(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            let conflict = status.details.as_ref().is_some_and(|details| {
                details
                    .causes
                    .iter()
                    .any(|cause| cause.reason == "FieldManagerConflict")
            });
            let reason = if conflict {
                "FieldManagerConflict"
            } else {
                status.reason.as_str()
            };
            if reason.is_empty() {
                format!(": {}", status.message)
            } else {
                format!(" ({reason}): {}", status.message)
            }
        }
        other => format!(": {other}"),
    }
}

/// How a build is applied: from the Kustomization's spec and the controller's flags.
#[derive(Clone, Debug, Default)]
pub struct ApplyOptions {
    /// Recreate objects whose immutable fields changed (`spec.force`).
    pub force: bool,
    /// Fields excluded from drift detection and correction (`spec.ignore`).
    pub ignore: IgnoreRules,
    /// Managers whose fields are taken over after the dry-run, besides Flux's defaults
    /// (`--override-manager`).
    pub override_managers: Vec<String>,
    /// Managers whose fields are taken over before the dry-run
    /// (`--override-manager-before-dry-run`).
    pub override_managers_before_dry_run: Vec<String>,
    /// Rewrite managed field entries to the applied API version (`MigrateAPIVersion`).
    pub migrate_api_version: bool,
    /// Kinds with their own apply stage (`--custom-apply-stage-kinds`).
    pub custom_stage_kinds: Vec<String>,
    /// The versions of managed objects seen by the controller's watches; kinds applied are
    /// added to them.
    pub live_versions: Option<std::sync::Arc<LiveVersions>>,
    /// Take an object whose watched version is the one recorded after the last apply as
    /// unchanged, without a request. Off for a reconcile a user requested, which must see
    /// a change made a moment before even if the watch has not delivered it yet.
    pub trust_live_versions: bool,
    /// Detect-only drift: an object of the inventory ([`ApplyOptions::inventoried`]) that
    /// drifted from its configuration, or that somebody deleted, is left as it is and
    /// reported as [`Action::Drifted`] with its [`drift::Drift`]; nothing is written to it,
    /// not even the managed-field takeovers of the apply stage. Objects outside the
    /// inventory are applied as ever. For a Kustomization whose inputs are those of its last
    /// successful apply: anything an apply would change is somebody else's doing.
    pub report_drift: bool,
    /// Inventory IDs (`<namespace>_<name>_<group>_<kind>`) of the objects the Kustomization
    /// held before this run. An object outside it is most likely new: it is dry-run before
    /// it is read, and read only when the dry-run shows that it exists.
    pub inventoried: std::collections::HashSet<String>,
}

/// Applies builds and prunes objects on one cluster, as one client.
pub struct Applier {
    client: Client,
    resolver: Resolver,
    owner: Owner,
    concurrency: usize,
    options: ApplyOptions,
    timeout: Duration,
    previous: AppliedObjects,
    recorded: Mutex<AppliedObjects>,
    confirmed_by_watch: std::sync::atomic::AtomicUsize,
}

impl Applier {
    /// An applier acting for `owner`. `concurrency` bounds parallel requests
    /// (`--concurrent-ssa`), `timeout` bounds waiting for deletions (a stage's objects are
    /// waited for as long as Flux waits), `previous`
    /// is what the last reconcile of this owner recorded.
    pub fn new(
        client: Client,
        owner: Owner,
        concurrency: usize,
        options: ApplyOptions,
        timeout: Duration,
        previous: AppliedObjects,
    ) -> Self {
        Applier {
            resolver: Resolver::new(client.clone()),
            client,
            owner,
            concurrency: concurrency.max(1),
            options,
            timeout,
            previous,
            recorded: Mutex::new(AppliedObjects::default()),
            confirmed_by_watch: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// How many objects were found unchanged from the watched versions alone, without a
    /// request.
    pub fn confirmed_by_watch(&self) -> usize {
        self.confirmed_by_watch
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The discovery cache this applier resolves kinds with.
    pub fn resolver(&self) -> &Resolver {
        &self.resolver
    }

    /// What this applier learnt of the objects it applied, for the next reconcile.
    pub fn take_records(&self) -> AppliedObjects {
        self.recorded
            .lock()
            .map(|mut recorded| {
                let mut records = std::mem::take(&mut *recorded);
                records.shrink_to_fit();
                records
            })
            .unwrap_or_default()
    }

    /// Applies every object in Flux's stage order, each stage validated as a whole before
    /// any of its objects is applied. Returns the change set in apply order, which is also
    /// the inventory order.
    pub async fn apply_all(&self, mut objects: Vec<Object>) -> Result<ChangeSet, PartialApply> {
        let kinds = &self.options.custom_stage_kinds;
        sort_for_apply(&mut objects, kinds);
        let mut changes = ChangeSet(Vec::with_capacity(objects.len()));
        let mut start = 0;
        while start < objects.len() {
            let current = stage(&objects[start], kinds);
            let end = objects[start..]
                .iter()
                .position(|o| stage(o, kinds) != current)
                .map_or(objects.len(), |offset| start + offset);
            let batch = &objects[start..end];
            let applied = match self.apply_stage(batch).await {
                Ok(applied) => applied,
                Err(error) => {
                    return Err(PartialApply {
                        error,
                        applied: changes,
                    });
                }
            };
            let waited = if current <= 2 {
                self.wait_for_stage(&applied).await
            } else {
                Ok(())
            };
            changes.0.extend(applied);
            if let Err(error) = waited {
                return Err(PartialApply {
                    error,
                    applied: changes,
                });
            }
            start = end;
        }
        Ok(changes)
    }

    /// One stage: validate every object (dry-run, or the precondition re-apply of an object
    /// seen unchanged), then apply those that changed.
    async fn apply_stage(&self, batch: &[Object]) -> Result<Vec<Change>, ApplyError> {
        let pending: Vec<_> = batch.iter().map(|o| self.target(o)).collect();
        let targets: Vec<_> = futures::stream::iter(pending)
            .buffered(self.concurrency)
            .try_collect()
            .await?;
        let pending: Vec<_> = targets.into_iter().map(|t| self.validate(t)).collect();
        let validated: Vec<Planned> = futures::stream::iter(pending)
            .buffered(self.concurrency)
            .try_collect()
            .await?;
        let pending: Vec<_> = validated.into_iter().map(|p| self.reassert(p)).collect();
        let reasserted: Vec<Planned> = futures::stream::iter(pending)
            .buffered(self.concurrency)
            .try_collect()
            .await?;
        let pending: Vec<_> = reasserted.into_iter().map(|p| self.write(p)).collect();
        futures::stream::iter(pending)
            .buffered(self.concurrency)
            .try_collect()
            .await
    }

    fn api(
        &self,
        namespace: Option<&str>,
        resource: &kube::api::ApiResource,
    ) -> Api<DynamicObject> {
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, resource),
            None => Api::all_with(self.client.clone(), resource),
        }
    }
}

/// Inventory entries of `old` whose object is not in `new`, in `old`'s order.
pub fn stale_objects(old: &[ObjectId], new: &[ObjectId]) -> Vec<ObjectId> {
    let present: std::collections::HashSet<(&str, &str, &str, &str)> = new
        .iter()
        .map(|id| {
            (
                id.namespace.as_str(),
                id.name.as_str(),
                id.group.as_str(),
                id.kind.as_str(),
            )
        })
        .collect();
    old.iter()
        .filter(|id| {
            !present.contains(&(
                id.namespace.as_str(),
                id.name.as_str(),
                id.group.as_str(),
                id.kind.as_str(),
            ))
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(message: &str) -> kube::Error {
        kube::Error::Api(Box::new(
            kube::core::Status::failure(message, "Invalid").with_code(422),
        ))
    }

    #[test]
    fn refusals_read_as_flux_sentences_not_debug_dumps() {
        let message = "Service \"web\" is invalid: spec.ports[0].port: Invalid value: 99999";
        let dry_run = ApplyError::DryRun {
            object: "Service/apps/web".into(),
            source: invalid(message),
        };
        assert_eq!(
            dry_run.to_string(),
            format!("Service/apps/web dry-run failed (Invalid): {message}")
        );
        let apply = ApplyError::Apply {
            object: "Service/apps/web".into(),
            source: invalid(message),
        };
        assert_eq!(
            apply.to_string(),
            format!("Service/apps/web apply failed: {message}")
        );
    }

    #[test]
    fn a_failed_discovery_reads_as_the_api_servers_words() {
        let unauthorized = kube::Error::Api(Box::new(
            kube::core::Status::failure("Unauthorized", "Unauthorized").with_code(401),
        ));
        let error = ResolveError::Discovery {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            source: unauthorized,
        };
        assert_eq!(
            error.to_string(),
            "failed to discover kind \"ConfigMap\" in version \"v1\": Unauthorized"
        );
    }

    #[test]
    fn a_partial_apply_lists_what_earlier_stages_changed() {
        let partial = PartialApply {
            error: ApplyError::DryRun {
                object: "ConfigMap/apps/c".into(),
                source: invalid("bad"),
            },
            applied: ChangeSet(vec![
                change("Namespace", "", "apps", Action::Created),
                change("Namespace", "", "same", Action::Unchanged),
            ]),
        };
        assert_eq!(
            partial.to_string(),
            "ConfigMap/apps/c dry-run failed (Invalid): bad\nNamespace/apps created\n"
        );
        let first_stage = PartialApply {
            error: ApplyError::DryRun {
                object: "ConfigMap/apps/c".into(),
                source: invalid("bad"),
            },
            applied: ChangeSet::default(),
        };
        assert_eq!(
            first_stage.to_string(),
            "ConfigMap/apps/c dry-run failed (Invalid): bad\n"
        );
    }

    fn change(kind: &str, namespace: &str, name: &str, action: Action) -> Change {
        Change {
            id: ObjectId {
                namespace: namespace.into(),
                name: name.into(),
                group: "".into(),
                kind: kind.into(),
                version: "v1".into(),
            },
            action,
            generation: None,
            drift: None,
        }
    }

    fn id(name: &str, version: &str) -> ObjectId {
        ObjectId {
            namespace: "default".into(),
            name: name.into(),
            group: "apps".into(),
            kind: "Deployment".into(),
            version: version.into(),
        }
    }

    #[test]
    fn stale_ignores_version_changes() {
        let old = vec![id("a", "v1"), id("b", "v1"), id("c", "v1")];
        let new = vec![id("a", "v2"), id("c", "v1")];
        assert_eq!(stale_objects(&old, &new), vec![id("b", "v1")]);
    }

    #[test]
    fn a_configured_object_names_the_managers_that_drifted_it() {
        let field = |path: &str, managers: &[&str]| drift::DriftedField {
            path: path.into(),
            managers: managers.iter().map(|m| m.to_string()).collect(),
        };
        let drifted = |fields| drift::Drift {
            fields,
            deleted: false,
        };
        let mut edited = change("ConfigMap", "default", "a", Action::Configured);
        edited.drift = Some(drifted(vec![
            field(".data.a", &["kubectl-edit"]),
            field(".data.b", &["rival", "kubectl-edit"]),
        ]));
        let mut upgraded = change("ConfigMap", "default", "b", Action::Configured);
        upgraded.drift = Some(drifted(vec![field(".data.a", &[])]));
        let mut left = change("ConfigMap", "default", "c", Action::Drifted);
        left.drift = Some(drift::Drift::deleted());
        let set = ChangeSet(vec![edited, upgraded, left.clone()]);
        assert_eq!(
            set.summary(),
            "ConfigMap/default/a configured (drifted by kubectl-edit, rival)\n\
             ConfigMap/default/b configured"
        );
        assert!(left.left_deleted());
        assert!(!ChangeSet(vec![left]).has_changes(), "drift left as it is");
    }

    #[test]
    fn change_set_summary_lists_changes_only() {
        let set = ChangeSet(vec![
            change("ConfigMap", "default", "a", Action::Created),
            change("ConfigMap", "default", "b", Action::Unchanged),
            change("ConfigMap", "default", "s", Action::Skipped),
            change("ConfigMap", "default", "c", Action::Deleted),
        ]);
        assert!(set.has_changes());
        assert_eq!(
            set.summary(),
            "ConfigMap/default/a created\nConfigMap/default/c deleted"
        );
        assert_eq!(
            set.prune_summary(),
            "ConfigMap/default/a created\nConfigMap/default/s skipped\nConfigMap/default/c deleted"
        );
        assert_eq!(
            set.log_output(true),
            serde_json::json!({"created": ["ConfigMap/default/a"], "unchanged": ["ConfigMap/default/b"],
                               "skipped": ["ConfigMap/default/s"], "deleted": ["ConfigMap/default/c"]})
        );
        assert_eq!(
            set.log_output(false)["ConfigMap/default/b"],
            serde_json::json!("unchanged")
        );
        let quiet = ChangeSet(vec![
            change("ConfigMap", "default", "b", Action::Unchanged),
            change("ConfigMap", "default", "s", Action::Skipped),
        ]);
        assert!(!quiet.has_changes());
        assert_eq!(quiet.summary(), "");
    }
}
