//! The keys of what is kept for every Kustomization: its state between reconciles, and its
//! requests in the controller's queue.

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use crate::api::Kustomization;

/// A Kustomization's namespace and name in one boxed string. An `ObjectRef` made from an
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

    // Neither a namespace nor a name holds a `/`.
    fn new(namespace: &str, name: &str) -> Self {
        KustomizationKey(format!("{namespace}/{name}").into_boxed_str())
    }
}

/// `ks` with its namespace and name only: what the watch of Kustomizations hands the
/// controller, which makes its request from it (as an object it updated) with
/// [`request_for`]'s reference.
pub fn identity_of(ks: &Kustomization) -> Kustomization {
    let mut identity = Kustomization::new(&ks.name_any(), Default::default());
    identity.metadata.namespace = ks.namespace();
    identity
}

/// The reference to `ks` that a reconcile is requested with: its namespace and name only.
/// The controller's queue keeps each request until the next reconcile (the requeue after
/// `spec.interval` included), twice; one made with `ObjectRef::from_obj` would also keep the
/// object's `resourceVersion` and `uid`, which no reconcile reads (it reads the object from the
/// watch cache).
pub fn request_for(ks: &Kustomization) -> ObjectRef<Kustomization> {
    ObjectRef::new(&ks.name_any()).within(ks.namespace().as_deref().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_names_the_namespace_and_the_name() {
        let ks = |namespace: &str, uid: &str| -> Kustomization {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
                "kind": "Kustomization",
                "metadata": {"name": "apps", "namespace": namespace, "uid": uid},
                "spec": {"interval": "10m", "prune": true,
                         "sourceRef": {"kind": "GitRepository", "name": "repo"}}
            }))
            .expect("a Kustomization")
        };
        let key = KustomizationKey::of(&ks("flux-system", "u1"));
        assert_eq!(key, KustomizationKey::of(&ks("flux-system", "u2")));
        assert_ne!(key, KustomizationKey::of(&ks("other", "u1")));
        assert_eq!(key.0.as_ref(), "flux-system/apps");
        let request = request_for(&ks("flux-system", "u1"));
        assert_eq!(request, ObjectRef::from_obj(&ks("flux-system", "u1")));
        assert_eq!(request.extra.uid, None);
        assert_eq!(request.extra.resource_version, None);
        let identity = identity_of(&ks("flux-system", "u1"));
        let from_identity = ObjectRef::from_obj(&identity);
        assert_eq!(from_identity, request);
        assert_eq!(
            (
                from_identity.extra.uid,
                from_identity.extra.resource_version
            ),
            (None, None)
        );
    }
}
