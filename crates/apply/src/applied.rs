//! What the controller last saw of the objects it applied, so that a reconcile of an unchanged
//! object costs one request.
//!
//! A record holds the hash of the configuration applied and the `resourceVersion` the object
//! had right after: the object was validated with that configuration and, at that version,
//! applying it again changes nothing. The next reconcile re-applies the same configuration
//! with that `resourceVersion` as a precondition: if nobody wrote the object since, the API
//! server accepts it as a no-op (unchanged, one request); if anybody did, it answers
//! `409 Conflict` and the object takes the full path (read, dry-run, compare), which is
//! exactly Flux's.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::Value;

use super::ObjectId;

/// The state of one object after this controller applied it (or found it unchanged).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedRecord {
    /// Hash of the configuration applied.
    pub configuration: u64,
    /// `metadata.resourceVersion` right after.
    pub resource_version: Box<str>,
}

/// Records by object, for the objects of one Kustomization.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppliedObjects(HashMap<Box<str>, AppliedRecord>);

impl AppliedObjects {
    /// The record of `id`.
    pub fn get(&self, id: &ObjectId) -> Option<&AppliedRecord> {
        self.0.get(&*key(id))
    }

    /// Records `id`'s state.
    pub fn insert(&mut self, id: &ObjectId, record: AppliedRecord) {
        self.0.insert(key(id), record);
    }

    /// How many objects have a record.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no object has a record.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether applying the configurations recorded for `objects` again would change
    /// nothing: each has a record (none is missing, none extra), and each one's `version`
    /// (the `resourceVersion` a watch sees now) is the one recorded right after it was
    /// applied, so nobody wrote any of them since.
    pub fn all_unchanged_since(
        &self,
        objects: &[ObjectId],
        version: impl Fn(&ObjectId) -> Option<String>,
    ) -> bool {
        objects.len() == self.len()
            && objects.iter().all(|id| {
                self.get(id)
                    .is_some_and(|record| version(id).as_deref() == Some(&*record.resource_version))
            })
    }
}

/// One boxed string per object: with tens of thousands of objects, a record's key and version
/// are most of its memory.
fn key(id: &ObjectId) -> Box<str> {
    format!("{}_{}", id.inventory_id(), id.version).into_boxed_str()
}

/// A hash of an apply configuration, stable within the process.
pub fn configuration_hash(configuration: &Value) -> u64 {
    let mut hasher = DefaultHasher::new();
    // Serializing a Value cannot fail; an empty buffer would only cost a full reconcile.
    serde_json::to_vec(configuration)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id(version: &str) -> ObjectId {
        ObjectId {
            namespace: "apps".into(),
            name: "web".into(),
            group: "".into(),
            kind: "ConfigMap".into(),
            version: version.into(),
        }
    }

    #[test]
    fn records_are_per_object_and_version() {
        let mut records = AppliedObjects::default();
        let record = AppliedRecord {
            configuration: 1,
            resource_version: "42".into(),
        };
        records.insert(&id("v1"), record.clone());
        assert_eq!(records.get(&id("v1")), Some(&record));
        assert_eq!(records.get(&id("v2")), None);
        assert_eq!(records.len(), 1);
    }

    #[test]
    fn unchanged_only_when_every_object_is_recorded_at_its_live_version() {
        let named = |name: &str| ObjectId {
            name: name.into(),
            ..id("v1")
        };
        let mut records = AppliedObjects::default();
        for (name, version) in [("a", "1"), ("b", "2")] {
            let record = AppliedRecord {
                configuration: 0,
                resource_version: version.into(),
            };
            records.insert(&named(name), record);
        }
        let live = |versions: [(&'static str, &'static str); 2]| {
            move |id: &ObjectId| {
                versions
                    .iter()
                    .find(|(name, _)| *name == id.name)
                    .map(|(_, version)| version.to_string())
            }
        };
        let both = [named("a"), named("b")];
        assert!(records.all_unchanged_since(&both, live([("a", "1"), ("b", "2")])));
        // Somebody wrote b since.
        assert!(!records.all_unchanged_since(&both, live([("a", "1"), ("b", "3")])));
        // The watch does not see b (its kind is not in step, or the object is gone).
        assert!(!records.all_unchanged_since(&both, live([("a", "1"), ("x", "2")])));
        // An object without a record, and a record without an object.
        let three = [named("a"), named("b"), named("c")];
        assert!(!records.all_unchanged_since(&three, live([("a", "1"), ("b", "2")])));
        assert!(!records.all_unchanged_since(&both[..1], live([("a", "1"), ("b", "2")])));
    }

    #[test]
    fn configuration_hash_tells_configurations_apart() {
        let a = json!({"data": {"k": "1"}});
        let b = json!({"data": {"k": "2"}});
        assert_eq!(configuration_hash(&a), configuration_hash(&a.clone()));
        assert_ne!(configuration_hash(&a), configuration_hash(&b));
    }
}
