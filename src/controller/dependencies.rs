//! `spec.dependsOn`: whether a Kustomization may proceed, as Flux's `checkDependencies`
//! decides it; dependency cycles; and which waiting Kustomizations a change to another one
//! should wake.
//!
//! A dependency is ready when it exists and its `readyExpr` (CEL over `self` and `dep`) holds;
//! without an expression (or also, with the `AdditiveCELDependencyCheck` gate), when its Ready
//! condition is True at its latest generation and, if it reconciles the same source, it has
//! applied the revision this Kustomization is about to apply.
//!
//! Flux re-checks a waiting Kustomization every `--requeue-dependency`; here a waiting
//! Kustomization is also woken by the watch when one of its dependencies changes readiness
//! (see [`Waker`]), so a chain of N levels takes about the sum of its apply times.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};

use crate::api::condition::find_condition;
use crate::api::kustomization::DependencyReference;
use crate::api::names::condition;
use crate::api::{ConditionStatus, Kustomization};
use fluxcel::{CompileError, Predicate};

/// Why a Kustomization may not proceed yet, or ever.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DependencyError {
    /// A dependency is missing or not ready: checked again later.
    #[error("{0}")]
    NotReady(String),
    /// A `readyExpr` does not compile: a configuration error.
    #[error("failed to evaluate dependency {name}: {error}")]
    InvalidExpression {
        /// The dependency's name.
        name: String,
        /// Why the expression was refused.
        error: CompileError,
    },
    /// A dependency in another namespace, with `--no-cross-namespace-refs`.
    #[error(
        "can't access 'Kustomization/{namespace}/{name}', cross-namespace references have been blocked"
    )]
    CrossNamespace {
        /// The dependency's namespace.
        namespace: String,
        /// The dependency's name.
        name: String,
    },
    /// The Kustomization depends on itself through its dependencies: it can never proceed
    /// until one of them changes.
    #[error("dependency cycle detected: {}", .0.join(" -> "))]
    Cycle(Vec<String>),
}

/// How dependencies are judged, from the flags.
#[derive(Clone, Copy, Debug, Default)]
pub struct Policy {
    /// `--no-cross-namespace-refs`: dependencies must be in the Kustomization's namespace.
    pub no_cross_namespace_refs: bool,
    /// `AdditiveCELDependencyCheck`: a `readyExpr` adds to the built-in check instead of
    /// replacing it.
    pub additive_cel: bool,
}

/// `namespace/name` of the dependency `reference` of `ks`.
fn dependency_key(ks: &Kustomization, reference: &DependencyReference) -> ObjectRef<Kustomization> {
    let namespace = reference
        .namespace
        .clone()
        .filter(|ns| !ns.is_empty())
        .or_else(|| ks.namespace())
        .unwrap_or_default();
    ObjectRef::new(&reference.name).within(&namespace)
}

fn display(object: &ObjectRef<Kustomization>) -> String {
    format!(
        "{}/{}",
        object.namespace.as_deref().unwrap_or(""),
        object.name
    )
}

/// Checks `ks`'s dependencies before anything is fetched: refused references, expressions
/// that do not compile, and cycles through `ks` (found in `store`, the watch cache). Errors
/// here are configuration errors that no retry fixes.
pub fn check_configuration(
    ks: &Kustomization,
    store: &Store<Kustomization>,
    policy: Policy,
) -> Result<Vec<Option<Predicate>>, DependencyError> {
    let own_namespace = ks.namespace().unwrap_or_default();
    let references = ks.spec.depends_on.as_deref().unwrap_or(&[]);
    let mut predicates = Vec::with_capacity(references.len());
    for reference in references {
        let key = dependency_key(ks, reference);
        if policy.no_cross_namespace_refs && key.namespace.as_deref() != Some(&own_namespace) {
            return Err(DependencyError::CrossNamespace {
                namespace: key.namespace.unwrap_or_default(),
                name: key.name,
            });
        }
        let predicate = match reference.ready_expr.as_deref().filter(|e| !e.is_empty()) {
            Some(source) => Some(Predicate::compile(source, &["self", "dep"]).map_err(
                |error| DependencyError::InvalidExpression {
                    name: reference.name.clone(),
                    error,
                },
            )?),
            None => None,
        };
        predicates.push(predicate);
    }
    let blocking_edges = |k: &Kustomization| -> Vec<ObjectRef<Kustomization>> {
        k.spec
            .depends_on
            .iter()
            .flatten()
            .filter(|r| policy.additive_cel || r.ready_expr.as_deref().is_none_or(str::is_empty))
            .map(|r| dependency_key(k, r))
            .collect()
    };
    let me = ObjectRef::from_obj(ks);
    let cycle = find_cycle(&me, &blocking_edges(ks), |object| {
        store.get(object).map(|k| blocking_edges(&k))
    });
    match cycle {
        Some(path) => Err(DependencyError::Cycle(path.iter().map(display).collect())),
        None => Ok(predicates),
    }
}

/// A path `start -> ... -> start` through the edges `dependencies` gives, if there is one.
/// Edges that carry a `readyExpr` are left out by the caller: such a dependency may be
/// satisfied without being ready, so it does not deadlock.
fn find_cycle<F>(
    start: &ObjectRef<Kustomization>,
    first: &[ObjectRef<Kustomization>],
    dependencies: F,
) -> Option<Vec<ObjectRef<Kustomization>>>
where
    F: Fn(&ObjectRef<Kustomization>) -> Option<Vec<ObjectRef<Kustomization>>>,
{
    // Depth-first, remembering every node already explored: each is expanded once.
    let mut visited = std::collections::HashSet::new();
    let mut stack: Vec<(ObjectRef<Kustomization>, Vec<ObjectRef<Kustomization>>)> =
        vec![(start.clone(), first.iter().rev().cloned().collect())];
    while let Some((_, pending)) = stack.last_mut() {
        let Some(next) = pending.pop() else {
            stack.pop();
            continue;
        };
        if next == *start {
            let mut path: Vec<ObjectRef<Kustomization>> =
                stack.iter().map(|(node, _)| node.clone()).collect();
            path.push(next);
            return Some(path);
        }
        if !visited.insert(next.clone()) {
            continue;
        }
        let mut edges = dependencies(&next).unwrap_or_default();
        edges.reverse();
        stack.push((next, edges));
    }
    None
}

/// Whether every dependency of `ks` is ready for `revision` (the artifact revision `ks` is
/// about to apply), reading each from the API server as Flux does (the watch cache may lag
/// behind a status just written). `predicates` are [`check_configuration`]'s.
pub async fn check_ready(
    client: &Client,
    ks: &Kustomization,
    predicates: &[Option<Predicate>],
    revision: &str,
    policy: Policy,
) -> Result<(), DependencyError> {
    let references = ks.spec.depends_on.as_deref().unwrap_or(&[]);
    let this = serde_json::to_value(ks).unwrap_or_default();
    for (reference, predicate) in references.iter().zip(predicates) {
        let key = dependency_key(ks, reference);
        let shown = display(&key);
        let api: Api<Kustomization> =
            Api::namespaced(client.clone(), key.namespace.as_deref().unwrap_or(""));
        let dep = match api.get(&key.name).await {
            Ok(dep) => dep,
            Err(kube::Error::Api(status)) => {
                return Err(DependencyError::NotReady(format!(
                    "dependency '{shown}' not found: {}",
                    status.message
                )));
            }
            Err(error) => {
                return Err(DependencyError::NotReady(format!(
                    "dependency '{shown}' not found: {error}"
                )));
            }
        };
        if let Some(predicate) = predicate {
            let dep_value = serde_json::to_value(&dep).unwrap_or_default();
            let ready = predicate
                .evaluate(&[("self", &this), ("dep", &dep_value)])
                .map_err(|e| DependencyError::NotReady(e.to_string()))?;
            if !ready {
                return Err(DependencyError::NotReady(format!(
                    "dependency '{shown}' is not ready according to readyExpr eval"
                )));
            }
            if !policy.additive_cel {
                continue;
            }
        }
        if !is_ready(&dep) {
            return Err(DependencyError::NotReady(format!(
                "dependency '{shown}' is not ready"
            )));
        }
        let applied = dep
            .status
            .as_ref()
            .and_then(|s| s.last_applied_revision.as_deref());
        if same_source(ks, &dep) && !same_revision(revision, applied.unwrap_or("")) {
            return Err(DependencyError::NotReady(format!(
                "dependency '{shown}' revision is not up to date"
            )));
        }
    }
    Ok(())
}

/// Ready=True at the latest generation.
pub fn is_ready(ks: &Kustomization) -> bool {
    let Some(status) = &ks.status else {
        return false;
    };
    let conditions = status.conditions.as_deref().unwrap_or(&[]);
    !conditions.is_empty()
        && ks.meta().generation == status.observed_generation
        && find_condition(conditions, condition::READY)
            .is_some_and(|c| c.status == ConditionStatus::True)
}

/// Both reconcile the same source object.
fn same_source(a: &Kustomization, b: &Kustomization) -> bool {
    let namespace = |k: &Kustomization| {
        k.spec
            .source_ref
            .namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .or_else(|| k.namespace())
    };
    a.spec.source_ref.name == b.spec.source_ref.name
        && a.spec.source_ref.kind == b.spec.source_ref.kind
        && namespace(a) == namespace(b)
}

/// Flux's `Artifact.HasRevision`: equal, or equal digests for revisions written with and
/// without the `<ref>@` prefix.
fn same_revision(current: &str, applied: &str) -> bool {
    if current == applied {
        return true;
    }
    let digest = |revision: &str| {
        revision
            .rsplit_once('@')
            .map_or(revision, |(_, digest)| digest)
            .to_string()
    };
    !applied.is_empty() && digest(current) == digest(applied)
}

/// Wakes Kustomizations waiting on a dependency when that dependency changes, from the
/// Kustomization watch. Fed every watched version of every Kustomization before the watch
/// cache takes it, so the cached version is the previous one.
pub struct Waker {
    store: Store<Kustomization>,
}

impl Waker {
    /// A waker reading dependents and previous versions from `store`.
    pub fn new(store: Store<Kustomization>) -> Self {
        Waker { store }
    }

    /// The Kustomizations to reconcile now that `changed` was seen, among those that depend
    /// on it and are not ready themselves: with the built-in check, when `changed` has just
    /// become ready (or, ready, applied another revision), was created, or has a new spec;
    /// with a `readyExpr`, which may read any of its labels, annotations and status, whenever
    /// one of those changed (not `status.history` or `status.inventory`, which the watch cache
    /// does not keep: a change to those alone is seen at the next `--requeue-dependency`).
    pub fn dependents_to_wake(&self, changed: &Kustomization) -> Vec<ObjectRef<Kustomization>> {
        let key = ObjectRef::from_obj(changed);
        let previous = self.store.get(&key);
        // Created or given a new spec: a dependent may have found it missing, or in a cycle.
        let respecified = previous
            .as_deref()
            .is_none_or(|p| p.meta().generation != changed.meta().generation);
        let newly_ready = respecified
            || is_ready(changed)
                && previous
                    .as_deref()
                    .is_none_or(|p| readiness(p) != readiness(changed));
        let observed_change = previous
            .as_deref()
            .is_none_or(|p| observed_fingerprint(p) != observed_fingerprint(changed));
        if !newly_ready && !observed_change {
            return Vec::new();
        }
        self.store
            .state()
            .into_iter()
            .filter(|dependent| !is_ready(dependent))
            .filter(|dependent| {
                dependent.spec.depends_on.iter().flatten().any(|reference| {
                    let expression = reference
                        .ready_expr
                        .as_deref()
                        .is_some_and(|e| !e.is_empty());
                    dependency_key(dependent, reference) == key
                        && if expression {
                            observed_change
                        } else {
                            newly_ready
                        }
                })
            })
            .map(|dependent| super::key::request_for(&dependent))
            .collect()
    }
}

/// What the built-in check reads of a dependency.
fn readiness(ks: &Kustomization) -> (bool, Option<&str>) {
    (
        is_ready(ks),
        ks.status
            .as_ref()
            .and_then(|s| s.last_applied_revision.as_deref()),
    )
}

/// What a `readyExpr` may read of a dependency.
fn observed_fingerprint(ks: &Kustomization) -> u64 {
    let mut hasher = DefaultHasher::new();
    ks.meta().generation.hash(&mut hasher);
    ks.meta().labels.hash(&mut hasher);
    ks.meta().annotations.hash(&mut hasher);
    serde_json::to_string(&ks.status)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::KustomizationSpec;
    use std::collections::HashMap;

    fn key(name: &str) -> ObjectRef<Kustomization> {
        ObjectRef::new(name).within("apps")
    }

    fn graph(
        edges: &[(&str, &[&str])],
    ) -> HashMap<ObjectRef<Kustomization>, Vec<ObjectRef<Kustomization>>> {
        edges
            .iter()
            .map(|(from, to)| (key(from), to.iter().map(|t| key(t)).collect()))
            .collect()
    }

    fn cycle(edges: &[(&str, &[&str])], start: &str) -> Option<Vec<String>> {
        let graph = graph(edges);
        let first = graph.get(&key(start)).cloned().unwrap_or_default();
        find_cycle(&key(start), &first, |k| graph.get(k).cloned())
            .map(|path| path.iter().map(display).collect())
    }

    #[test]
    fn cycles_through_the_kustomization_are_found_with_their_path() {
        assert_eq!(
            cycle(&[("a", &["b"]), ("b", &["a"])], "a"),
            Some(vec!["apps/a".into(), "apps/b".into(), "apps/a".into()])
        );
        assert_eq!(
            cycle(&[("a", &["a"])], "a"),
            Some(vec!["apps/a".into(), "apps/a".into()])
        );
        assert_eq!(
            cycle(
                &[("a", &["x", "b"]), ("b", &["c"]), ("c", &["a"]), ("x", &[])],
                "a"
            ),
            Some(vec![
                "apps/a".into(),
                "apps/b".into(),
                "apps/c".into(),
                "apps/a".into()
            ])
        );
    }

    #[test]
    fn chains_diamonds_and_cycles_elsewhere_are_not_cycles_of_this_one() {
        assert_eq!(
            cycle(&[("a", &["b"]), ("b", &["c"]), ("c", &[])], "a"),
            None
        );
        assert_eq!(
            cycle(
                &[("a", &["b", "c"]), ("b", &["d"]), ("c", &["d"]), ("d", &[])],
                "a"
            ),
            None
        );
        // b and c wait on each other; a waits on them but is not part of the cycle.
        assert_eq!(
            cycle(&[("a", &["b"]), ("b", &["c"]), ("c", &["b"])], "a"),
            None
        );
        // Unknown dependencies end the walk.
        assert_eq!(cycle(&[("a", &["missing"])], "a"), None);
    }

    #[test]
    fn a_long_chain_is_walked_without_recursion() {
        let names: Vec<String> = (0..10_000).map(|i| format!("k{i}")).collect();
        let mut graph = HashMap::new();
        for pair in names.windows(2) {
            graph.insert(key(&pair[0]), vec![key(&pair[1])]);
        }
        graph.insert(key(&names[names.len() - 1]), vec![key(&names[0])]);
        let first = graph[&key(&names[0])].clone();
        let path = find_cycle(&key(&names[0]), &first, |k| graph.get(k).cloned()).expect("cycle");
        assert_eq!(path.len(), 10_001);
    }

    fn ks(name: &str, depends_on: &[(&str, Option<&str>, Option<&str>)]) -> Kustomization {
        let mut ks = Kustomization::new(
            name,
            KustomizationSpec {
                depends_on: Some(
                    depends_on
                        .iter()
                        .map(|(name, namespace, expr)| DependencyReference {
                            name: name.to_string(),
                            namespace: namespace.map(str::to_string),
                            ready_expr: expr.map(str::to_string),
                        })
                        .collect(),
                ),
                ..Default::default()
            },
        );
        ks.metadata.namespace = Some("apps".into());
        ks
    }

    fn store(objects: Vec<Kustomization>) -> Store<Kustomization> {
        let (reader, mut writer) = kube::runtime::reflector::store();
        for object in objects {
            writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(object));
        }
        reader
    }

    #[test]
    fn configuration_errors_come_before_any_read() {
        let empty = store(vec![]);
        let strict = Policy {
            no_cross_namespace_refs: true,
            additive_cel: false,
        };
        let cross = ks("app", &[("infra", Some("platform"), None)]);
        assert_eq!(
            check_configuration(&cross, &empty, strict).err().map(|e| e.to_string()),
            Some(
                "can't access 'Kustomization/platform/infra', cross-namespace references have been blocked"
                    .into()
            )
        );
        assert!(check_configuration(&cross, &empty, Policy::default()).is_ok());
        let same = ks("app", &[("infra", Some("apps"), None)]);
        assert!(check_configuration(&same, &empty, strict).is_ok());

        let bad = ks("app", &[("infra", None, Some("dep.status.ready"))]);
        assert_eq!(
            check_configuration(&bad, &empty, Policy::default())
                .err()
                .map(|e| e.to_string()),
            Some(
                "failed to evaluate dependency infra: CEL expression output type mismatch: expected bool, got dyn"
                    .into()
            )
        );
    }

    #[test]
    fn a_cycle_is_reported_unless_a_ready_expression_breaks_it() {
        let a = ks("a", &[("b", None, None)]);
        let b = ks("b", &[("a", None, None)]);
        let cached = store(vec![a.clone(), b]);
        assert_eq!(
            check_configuration(&a, &cached, Policy::default())
                .err()
                .map(|e| e.to_string()),
            Some("dependency cycle detected: apps/a -> apps/b -> apps/a".into())
        );
        let b_expr = ks("b", &[("a", None, Some("true"))]);
        let cached = store(vec![a.clone(), b_expr]);
        assert!(check_configuration(&a, &cached, Policy::default()).is_ok());
        let additive = Policy {
            additive_cel: true,
            ..Policy::default()
        };
        assert!(matches!(
            check_configuration(&a, &cached, additive),
            Err(DependencyError::Cycle(_))
        ));
    }

    fn ready(mut ks: Kustomization, generation: i64, observed: i64, status: &str) -> Kustomization {
        ks.metadata.generation = Some(generation);
        let mut conditions = Vec::new();
        crate::api::condition::set_condition(
            &mut conditions,
            "Ready",
            match status {
                "True" => ConditionStatus::True,
                "False" => ConditionStatus::False,
                _ => ConditionStatus::Unknown,
            },
            "R",
            "",
            Some(generation),
        );
        ks.status = Some(crate::api::KustomizationStatus {
            observed_generation: Some(observed),
            conditions: Some(conditions),
            ..Default::default()
        });
        ks
    }

    #[test]
    fn readiness_is_ready_true_at_the_latest_generation() {
        assert!(is_ready(&ready(ks("a", &[]), 2, 2, "True")));
        assert!(!is_ready(&ready(ks("a", &[]), 3, 2, "True")));
        assert!(!is_ready(&ready(ks("a", &[]), 2, 2, "Unknown")));
        assert!(!is_ready(&ks("a", &[])));
    }

    #[test]
    fn revisions_match_with_or_without_the_reference_prefix() {
        assert!(same_revision("main@sha1:abc", "main@sha1:abc"));
        assert!(same_revision("main@sha1:abc", "sha1:abc"));
        assert!(!same_revision("main@sha1:abc", "main@sha1:def"));
        assert!(!same_revision("main@sha1:abc", ""));
    }

    #[test]
    fn waiting_dependents_wake_when_their_dependency_changes_readiness() {
        let infra = ready(ks("infra", &[]), 1, 1, "Unknown");
        let waiting = ready(ks("app", &[("infra", None, None)]), 1, 1, "False");
        let done = ready(ks("done", &[("infra", None, None)]), 1, 1, "True");
        let unrelated = ready(ks("other", &[("elsewhere", None, None)]), 1, 1, "False");
        let with_expr = ready(
            ks(
                "probe",
                &[("infra", None, Some("dep.metadata.labels.size() > 0"))],
            ),
            1,
            1,
            "False",
        );
        let waker = Waker::new(store(vec![
            infra.clone(),
            waiting,
            done,
            unrelated,
            with_expr,
        ]));
        // The same version again (a resync): nothing to do.
        assert!(waker.dependents_to_wake(&infra).is_empty());
        // Still not ready, but changed: only the expression may see a difference.
        let mut labelled = infra.clone();
        labelled.metadata.labels = Some([("tier".to_string(), "1".to_string())].into());
        let woken: Vec<String> = waker
            .dependents_to_wake(&labelled)
            .iter()
            .map(display)
            .collect();
        assert_eq!(woken, ["apps/probe"]);
        let now_ready = ready(ks("infra", &[]), 1, 1, "True");
        let woken: Vec<String> = waker
            .dependents_to_wake(&now_ready)
            .iter()
            .map(display)
            .collect();
        let mut woken = woken;
        woken.sort();
        assert_eq!(woken, ["apps/app", "apps/probe"]);
    }
}
