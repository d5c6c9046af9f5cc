//! The key of the state kept for every Kustomization.

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use crate::api::Kustomization;

/// A Kustomization's namespace and name in one boxed string. An [`ObjectRef`] made from an
/// object also holds its `resourceVersion` and `uid`: four strings where this is one, in maps
/// that hold an entry for each of thousands of Kustomizations.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KustomizationKey(Box<str>);

impl KustomizationKey {
    /// The key of `ks`.
    pub fn of(ks: &Kustomization) -> Self {
        Self::new(
            ks.namespace().as_deref().unwrap_or_default(),
            &ks.name_any(),
        )
    }

    /// The key of the Kustomization `object` refers to.
    pub fn of_ref(object: &ObjectRef<Kustomization>) -> Self {
        Self::new(
            object.namespace.as_deref().unwrap_or_default(),
            &object.name,
        )
    }

    // Neither a namespace nor a name holds a `/`.
    fn new(namespace: &str, name: &str) -> Self {
        KustomizationKey(format!("{namespace}/{name}").into_boxed_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_and_a_reference_to_it_have_one_key() {
        let ks: Kustomization = serde_json::from_value(serde_json::json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": "apps", "namespace": "flux-system", "uid": "u1",
                         "resourceVersion": "7"},
            "spec": {"interval": "10m", "prune": true,
                     "sourceRef": {"kind": "GitRepository", "name": "repo"}}
        }))
        .expect("a Kustomization");
        let key = KustomizationKey::of(&ks);
        assert_eq!(key, KustomizationKey::of_ref(&ObjectRef::from_obj(&ks)));
        assert_eq!(
            key,
            KustomizationKey::of_ref(&ObjectRef::new("apps").within("flux-system"))
        );
        assert_ne!(
            key,
            KustomizationKey::of_ref(&ObjectRef::new("apps").within("other"))
        );
    }
}
