//! The `spiffe` credential provider (ServiceAccount annotation
//! `credential.auth.fluxcd.io/provider: spiffe`): the identity token exchanged for a key
//! service's credentials is a JWT-SVID the SPIFFE Broker issues for the Kustomization
//! itself, in place of a ServiceAccount token. The broker client is the controller's,
//! injected through [`JwtSvidSource`].

use std::sync::Arc;

use zeroize::Zeroizing;

use super::identity::SourceFuture;

/// The Kubernetes object a JWT-SVID is issued for (the Kustomization being decrypted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectReference {
    /// API group (`kustomize.toolkit.fluxcd.io`).
    pub group: String,
    /// Kind (`Kustomization`), for messages.
    pub kind: String,
    /// Resource plural (`kustomizations`), for the broker.
    pub plural: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
}

impl std::fmt::Display for ObjectReference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{} {}/{}",
            self.group, self.kind, self.namespace, self.name
        )
    }
}

/// Issues JWT-SVIDs for objects (a SPIFFE Broker client; tests give a fake).
pub trait JwtSvidSource: Send + Sync {
    /// A JWT-SVID of `object` for `audiences`.
    fn jwt_svid<'a>(
        &'a self,
        object: &'a ObjectReference,
        audiences: Vec<String>,
    ) -> SourceFuture<'a, Zeroizing<String>>;
}

/// The broker and the object a `spiffe` ServiceAccount's tokens are asked for.
#[derive(Clone)]
pub struct SpiffeObject {
    /// The broker; `None` when the controller has none (`--spiffe-broker-endpoint` unset).
    pub broker: Option<Arc<dyn JwtSvidSource>>,
    /// The Kustomization.
    pub object: ObjectReference,
}
