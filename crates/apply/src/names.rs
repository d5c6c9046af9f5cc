//! The labels, annotations and field manager the apply engine shares with Flux's
//! kustomize-controller. A cluster can switch between this engine and Flux's only while these
//! stay byte-for-byte the same; the controller's `api::names` re-exports them.

/// Field manager for applied objects.
pub const APPLY_FIELD_MANAGER: &str = "kustomize-controller";

/// Owner label carrying the Kustomization's name.
pub const OWNER_NAME_LABEL: &str = "kustomize.toolkit.fluxcd.io/name";

/// Owner label carrying the Kustomization's namespace.
pub const OWNER_NAMESPACE_LABEL: &str = "kustomize.toolkit.fluxcd.io/namespace";

/// `kubectl apply`'s copy of the whole object it last applied.
pub const KUBECTL_LAST_APPLIED_ANNOTATION: &str =
    "kubectl.kubernetes.io/last-applied-configuration";

/// Label or annotation that excludes an object from apply and prune (`disabled`).
pub const RECONCILE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/reconcile";

/// Label or annotation that protects an object from pruning (`disabled`).
pub const PRUNE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/prune";

/// Label or annotation that selects the server-side apply policy of an object.
pub const SSA_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/ssa";

/// Label or annotation that lets an object be recreated on immutable field changes.
pub const FORCE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/force";

/// The value that switches a behaviour off, compared case-insensitively.
pub const DISABLED_VALUE: &str = "disabled";

/// The value that switches a behaviour on, compared case-insensitively.
pub const ENABLED_VALUE: &str = "enabled";
