//! Object identities in Flux's inventory format: `<namespace>_<name>_<group>_<kind>`.

use super::Object;
use super::spec::ResourceRef;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The identity of an applied object, plus the API version it was applied at.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ObjectId {
    /// Namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// API group; empty for the core group.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// API version without the group.
    pub version: String,
}

/// The objects of a Kustomization's status inventory (`status.inventory.entries`), in its
/// order; entries not in Flux's format are left out.
pub fn inventory_of(entries: &[ResourceRef]) -> Vec<ObjectId> {
    entries
        .iter()
        .filter_map(|entry| ObjectId::from_ref(entry).ok())
        .collect()
}

/// An inventory entry that is not in Flux's format.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid inventory entry {0:?}: expected <namespace>_<name>_<group>_<kind>")]
pub struct InvalidInventoryId(pub String);

impl ObjectId {
    /// The identity of a built object.
    pub fn of(object: &Object) -> ObjectId {
        ObjectId {
            namespace: object.namespace().unwrap_or("").to_string(),
            name: object.name().to_string(),
            group: object.group().to_string(),
            kind: object.kind().to_string(),
            version: object.version().to_string(),
        }
    }

    /// The inventory ID, as Flux (cli-utils' ObjMetadata) writes it. RBAC names may contain
    /// `:`, which is written as `__`.
    pub fn inventory_id(&self) -> String {
        let name = if self.group == RBAC_GROUP {
            self.name.replace(':', "__")
        } else {
            self.name.clone()
        };
        format!("{}_{}_{}_{}", self.namespace, name, self.group, self.kind)
    }

    /// The status inventory entry.
    pub fn to_ref(&self) -> ResourceRef {
        ResourceRef {
            id: self.inventory_id(),
            v: self.version.clone(),
        }
    }

    /// Reads an inventory entry back.
    pub fn from_ref(entry: &ResourceRef) -> Result<ObjectId, InvalidInventoryId> {
        let invalid = || InvalidInventoryId(entry.id.clone());
        let (rest, kind) = entry.id.rsplit_once('_').ok_or_else(invalid)?;
        let (rest, group) = rest.rsplit_once('_').ok_or_else(invalid)?;
        let (namespace, name) = rest.split_once('_').ok_or_else(invalid)?;
        if name.is_empty() || kind.is_empty() {
            return Err(invalid());
        }
        let name = if group == RBAC_GROUP {
            name.replace("__", ":")
        } else {
            name.to_string()
        };
        Ok(ObjectId {
            namespace: namespace.to_string(),
            name,
            group: group.to_string(),
            kind: kind.to_string(),
            version: entry.v.clone(),
        })
    }

    /// `apiVersion` as written in manifests.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `Kind/namespace/name` or `Kind/name`, as in Flux's change set events.
    pub fn describe(&self) -> String {
        if self.namespace.is_empty() {
            format!("{}/{}", self.kind, self.name)
        } else {
            format!("{}/{}/{}", self.kind, self.namespace, self.name)
        }
    }

    /// Whether two identities name the same object, whatever the version.
    pub fn same_object(&self, other: &ObjectId) -> bool {
        self.namespace == other.namespace
            && self.name == other.name
            && self.group == other.group
            && self.kind == other.kind
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn id(namespace: &str, name: &str, group: &str, kind: &str, version: &str) -> ObjectId {
        ObjectId {
            namespace: namespace.into(),
            name: name.into(),
            group: group.into(),
            kind: kind.into(),
            version: version.into(),
        }
    }

    #[test]
    fn flux_format() {
        assert_eq!(
            id("default", "podinfo", "", "Service", "v1").inventory_id(),
            "default_podinfo__Service"
        );
        assert_eq!(
            id("", "apps", "", "Namespace", "v1").inventory_id(),
            "_apps__Namespace"
        );
        assert_eq!(
            id("default", "podinfo", "apps", "Deployment", "v1").inventory_id(),
            "default_podinfo_apps_Deployment"
        );
        let rbac = id("", "system:auth", RBAC_GROUP, "ClusterRole", "v1");
        assert_eq!(
            rbac.inventory_id(),
            "_system__auth_rbac.authorization.k8s.io_ClusterRole"
        );
        assert_eq!(ObjectId::from_ref(&rbac.to_ref()), Ok(rbac));
    }

    #[test]
    fn invalid_entries_are_errors() {
        for bad in ["", "a_b", "ns__group_Kind", "ns_name_group_"] {
            assert!(
                ObjectId::from_ref(&ResourceRef {
                    id: bad.into(),
                    v: "v1".into()
                })
                .is_err(),
                "{bad}"
            );
        }
    }

    proptest! {
        #[test]
        fn round_trips(
            namespace in "([a-z][a-z0-9-]{0,20})?",
            name in "[a-z][a-z0-9.-]{0,30}",
            group in "([a-z]+(\\.[a-z]+)*)?",
            kind in "[A-Z][A-Za-z]{0,15}",
        ) {
            let original = id(&namespace, &name, &group, &kind, "v1");
            prop_assert_eq!(ObjectId::from_ref(&original.to_ref()), Ok(original));
        }
    }
}
