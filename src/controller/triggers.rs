//! Which watch events of Kustomizations ask for a reconcile, as controller-runtime's event
//! handling and Flux's predicates decide it: an object the watch newly holds (created, or
//! newly matching `--watch-label-selector`) always; an update only when its generation, its
//! `reconcile.fluxcd.io/requestedAt` annotation or its deletion changed. Status updates alone
//! never trigger one. Beyond Flux, a change of this controller's own drift annotations
//! (`drift-correction`, `drift-detection`) does: switching a Kustomization from reporting
//! drift to correcting it corrects it at once.
//!
//! kube-runtime's `predicate_filter` is not enough here: it never hears that an object left
//! the watch, so a Kustomization relabelled away from a shard and back again would look
//! unchanged on its return and not be reconciled there.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

use kube::runtime::watcher::Event;
use kube::{Resource, ResourceExt};

use super::detect::DRIFT_DETECTION_ANNOTATION;
use super::drift::DRIFT_CORRECTION_ANNOTATION;
use super::key::KustomizationKey;
use crate::api::Kustomization;
use crate::api::names::RECONCILE_REQUESTED_AT_ANNOTATION;

/// The properties of each watched Kustomization that the last trigger decision saw.
#[derive(Default)]
pub struct Triggers {
    seen: HashMap<KustomizationKey, u64>,
    /// During a relist: the objects it has listed so far.
    relisted: Option<HashSet<KustomizationKey>>,
}

impl Triggers {
    /// The Kustomization that `event` asks to reconcile, if any.
    pub fn on_event<'a>(&mut self, event: &'a Event<Kustomization>) -> Option<&'a Kustomization> {
        match event {
            Event::Init => {
                self.relisted = Some(HashSet::new());
                None
            }
            Event::InitApply(ks) => {
                if let Some(relisted) = &mut self.relisted {
                    relisted.insert(KustomizationKey::of(ks));
                }
                self.changed(ks).then_some(ks)
            }
            Event::InitDone => {
                // What the relist did not return has left the watch while it was broken.
                if let Some(relisted) = self.relisted.take() {
                    self.seen.retain(|object, _| relisted.contains(object));
                }
                None
            }
            Event::Apply(ks) => self.changed(ks).then_some(ks),
            Event::Delete(ks) => {
                self.seen.remove(&KustomizationKey::of(ks));
                None
            }
        }
    }

    /// Records `ks`'s trigger properties; whether they differ from the last ones seen.
    fn changed(&mut self, ks: &Kustomization) -> bool {
        let key = trigger_key(ks);
        self.seen.insert(KustomizationKey::of(ks), key) != Some(key)
    }
}

/// A hash of what asks for a reconcile: the object's identity (a Kustomization deleted and
/// recreated under the same name while the watch was broken is a new one), its generation
/// (spec changes), the `requestedAt` annotation, the drift annotations, and deletion.
fn trigger_key(ks: &Kustomization) -> u64 {
    let mut hasher = DefaultHasher::new();
    ks.meta().uid.hash(&mut hasher);
    ks.meta().generation.hash(&mut hasher);
    for annotation in [
        RECONCILE_REQUESTED_AT_ANNOTATION,
        DRIFT_DETECTION_ANNOTATION,
        DRIFT_CORRECTION_ANNOTATION,
    ] {
        ks.annotations().get(annotation).hash(&mut hasher);
    }
    ks.meta().deletion_timestamp.is_some().hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kustomization(name: &str, generation: i64) -> Kustomization {
        let mut ks: Kustomization = serde_json::from_value(serde_json::json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
            "spec": {
                "interval": "10m", "prune": true,
                "sourceRef": {"kind": "GitRepository", "name": "repo"}
            }
        }))
        .expect("a Kustomization");
        ks.meta_mut().generation = Some(generation);
        ks
    }

    fn triggered(triggers: &mut Triggers, event: Event<Kustomization>) -> bool {
        triggers.on_event(&event).is_some()
    }

    #[test]
    fn new_objects_and_spec_changes_trigger_and_status_updates_do_not() {
        let mut triggers = Triggers::default();
        assert!(triggered(
            &mut triggers,
            Event::Apply(kustomization("a", 1))
        ));
        let mut status_only = kustomization("a", 1);
        status_only.meta_mut().resource_version = Some("2".into());
        assert!(!triggered(&mut triggers, Event::Apply(status_only)));
        assert!(triggered(
            &mut triggers,
            Event::Apply(kustomization("a", 2))
        ));
        let mut requested = kustomization("a", 2);
        requested.annotations_mut().insert(
            RECONCILE_REQUESTED_AT_ANNOTATION.into(),
            "2026-11-26T10:00:00Z".into(),
        );
        assert!(triggered(&mut triggers, Event::Apply(requested.clone())));
        assert!(!triggered(&mut triggers, Event::Apply(requested.clone())));
        let mut labelled = requested.clone();
        labelled
            .annotations_mut()
            .insert("team".into(), "web".into());
        assert!(
            !triggered(&mut triggers, Event::Apply(labelled)),
            "another annotation"
        );
        let mut warned = requested;
        warned
            .annotations_mut()
            .insert(DRIFT_DETECTION_ANNOTATION.into(), "warn".into());
        assert!(triggered(&mut triggers, Event::Apply(warned.clone())));
        warned.annotations_mut().remove(DRIFT_DETECTION_ANNOTATION);
        assert!(
            triggered(&mut triggers, Event::Apply(warned)),
            "back to correcting"
        );
    }

    #[test]
    fn an_object_that_left_the_watch_triggers_again_when_it_comes_back_unchanged() {
        let mut triggers = Triggers::default();
        assert!(triggered(
            &mut triggers,
            Event::Apply(kustomization("a", 1))
        ));
        // Relabelled away from this instance's selector: the watch reports a deletion.
        assert!(!triggered(
            &mut triggers,
            Event::Delete(kustomization("a", 1))
        ));
        // Relabelled back: same generation, same annotations, yet a reconcile is due.
        assert!(triggered(
            &mut triggers,
            Event::Apply(kustomization("a", 1))
        ));
    }

    #[test]
    fn a_relist_forgets_objects_that_left_while_the_watch_was_broken() {
        let mut triggers = Triggers::default();
        assert!(triggered(
            &mut triggers,
            Event::Apply(kustomization("a", 1))
        ));
        assert!(triggered(
            &mut triggers,
            Event::Apply(kustomization("b", 1))
        ));
        // The relist returns `b` unchanged and no `a`.
        assert!(!triggered(&mut triggers, Event::Init));
        assert!(!triggered(
            &mut triggers,
            Event::InitApply(kustomization("b", 1))
        ));
        assert!(!triggered(&mut triggers, Event::InitDone));
        // `a` comes back later: a reconcile is due.
        assert!(triggered(
            &mut triggers,
            Event::Apply(kustomization("a", 1))
        ));
        // Recreated under the same name: a new object.
        let mut recreated = kustomization("b", 1);
        recreated.meta_mut().uid = Some("uid-b-2".into());
        assert!(triggered(&mut triggers, Event::Apply(recreated)));
    }
}
