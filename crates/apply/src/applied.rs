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

use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::Value;

use super::ObjectId;
use super::revision::Revision;

/// The state of one object after this controller applied it (or found it unchanged).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppliedRecord {
    /// Hash of the configuration applied.
    pub configuration: u64,
    /// `metadata.resourceVersion` right after.
    pub resource_version: Revision,
}

/// Records by object, for the objects of one Kustomization: 24 bytes each, sorted by a hash
/// of the object's identity, as tens of thousands are kept.
///
/// Two objects whose identities hash alike share one record, which costs requests and never
/// a change: the record no longer matches the other object's configuration, and the set no
/// longer has a record per object, so both take the full path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppliedObjects(Vec<(u64, AppliedRecord)>);

impl AppliedObjects {
    /// The record of `id`.
    pub fn get(&self, id: &ObjectId) -> Option<&AppliedRecord> {
        let key = key(id);
        self.0
            .binary_search_by_key(&key, |(k, _)| *k)
            .ok()
            .map(|at| &self.0[at].1)
    }

    /// Records `id`'s state.
    pub fn insert(&mut self, id: &ObjectId, record: AppliedRecord) {
        let key = key(id);
        match self.0.binary_search_by_key(&key, |(k, _)| *k) {
            Ok(at) => self.0[at].1 = record,
            Err(at) => self.0.insert(at, (key, record)),
        }
    }

    /// Releases the room kept for more records, once no more are coming.
    pub fn shrink_to_fit(&mut self) {
        self.0.shrink_to_fit();
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
        version: impl Fn(&ObjectId) -> Option<Revision>,
    ) -> bool {
        objects.len() == self.len()
            && objects.iter().all(|id| {
                self.get(id)
                    .is_some_and(|record| version(id) == Some(record.resource_version))
            })
    }
}

/// A record's key: a hash of the object's identity and API version, stable within the
/// process.
fn key(id: &ObjectId) -> u64 {
    let mut hasher = DefaultHasher::new();
    id.hash(&mut hasher);
    hasher.finish()
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

    fn rv(version: &str) -> Revision {
        Revision::parse(version).expect("a decimal version")
    }

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
            resource_version: rv("42"),
        };
        records.insert(&id("v1"), record);
        assert_eq!(records.get(&id("v1")), Some(&record));
        assert_eq!(records.get(&id("v2")), None);
        assert_eq!(records.len(), 1);
    }

    #[test]
    fn records_of_many_objects_are_found_and_replaced() {
        let named = |n: usize| ObjectId {
            name: format!("cm-{n}"),
            ..id("v1")
        };
        let mut records = AppliedObjects::default();
        for n in (0..500).rev() {
            let record = AppliedRecord {
                configuration: n as u64,
                resource_version: rv(&n.to_string()),
            };
            records.insert(&named(n), record);
        }
        let replaced = AppliedRecord {
            configuration: 7,
            resource_version: rv("9000"),
        };
        records.insert(&named(250), replaced);
        records.shrink_to_fit();
        assert_eq!(records.len(), 500);
        assert_eq!(records.get(&named(250)), Some(&replaced));
        for n in (0..500).filter(|n| *n != 250) {
            let record = records.get(&named(n)).map(|r| r.configuration);
            assert_eq!(record, Some(n as u64), "cm-{n}");
        }
        assert_eq!(records.get(&named(500)), None);
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
                resource_version: rv(version),
            };
            records.insert(&named(name), record);
        }
        let live = |versions: [(&'static str, &'static str); 2]| {
            move |id: &ObjectId| {
                versions
                    .iter()
                    .find(|(name, _)| *name == id.name)
                    .and_then(|(_, version)| Revision::parse(version))
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
