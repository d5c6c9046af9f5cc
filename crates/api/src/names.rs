//! Every name the controller shares with Flux: labels, annotations, the finalizer, field
//! managers, condition types and reasons. A cluster can switch between this controller and
//! Flux's only while these stay byte-for-byte the same.

// The names the apply engine writes and reads are defined once, in its crate.
pub use apply::names::{
    APPLY_FIELD_MANAGER, DISABLED_VALUE, ENABLED_VALUE, FORCE_ANNOTATION,
    KUBECTL_LAST_APPLIED_ANNOTATION, OWNER_NAME_LABEL, OWNER_NAMESPACE_LABEL, PRUNE_ANNOTATION,
    RECONCILE_ANNOTATION, SSA_ANNOTATION,
};

/// The API group of Kustomizations.
pub const GROUP: &str = "kustomize.toolkit.fluxcd.io";

/// The resource (plural) name of Kustomizations.
pub const PLURAL: &str = "kustomizations";

/// The finalizer that guards pruning on deletion.
pub const FINALIZER: &str = "finalizers.fluxcd.io";

/// Field manager for the Kustomization's own status and finalizers.
pub const STATUS_FIELD_MANAGER: &str = "gotk-kustomize-controller";

/// Annotation whose changing value asks for an immediate reconcile.
pub const RECONCILE_REQUESTED_AT_ANNOTATION: &str = "reconcile.fluxcd.io/requestedAt";

/// Label on a ConfigMap or Secret asking that a change to it reconciles the Kustomizations
/// that read post-build variables from it.
pub const RECONCILE_WATCH_LABEL: &str = "reconcile.fluxcd.io/watch";

/// The value of [`RECONCILE_WATCH_LABEL`] that enables the watch.
pub const RECONCILE_WATCH_ENABLED: &str = "Enabled";

/// Group of Flux's source kinds.
pub const SOURCE_GROUP: &str = "source.toolkit.fluxcd.io";

/// Condition types.
pub mod condition {
    /// The overall readiness of the Kustomization.
    pub const READY: &str = "Ready";
    /// Present while a reconcile is in progress.
    pub const RECONCILING: &str = "Reconciling";
    /// Present when the reconcile cannot make progress without a spec change.
    pub const STALLED: &str = "Stalled";
    /// The outcome of the health checks.
    pub const HEALTHY: &str = "Healthy";
}

/// Condition reasons, as Flux writes them.
pub mod reason {
    /// A reconcile is running.
    pub const PROGRESSING: &str = "Progressing";
    /// A reconcile is running after a failed one.
    pub const PROGRESSING_WITH_RETRY: &str = "ProgressingWithRetry";
    /// The last reconcile applied the revision.
    pub const RECONCILIATION_SUCCEEDED: &str = "ReconciliationSucceeded";
    /// Applying the build failed.
    pub const RECONCILIATION_FAILED: &str = "ReconciliationFailed";
    /// The source artifact could not be fetched, verified or extracted.
    pub const ARTIFACT_FAILED: &str = "ArtifactFailed";
    /// The manifests could not be built (the key services' errors carry the same reason,
    /// `keyservice::reason::BUILD_FAILED`; a test keeps the two equal).
    pub const BUILD_FAILED: &str = "BuildFailed";
    /// Garbage collection failed.
    pub const PRUNE_FAILED: &str = "PruneFailed";
    /// The applied objects did not become healthy.
    pub const HEALTH_CHECK_FAILED: &str = "HealthCheckFailed";
    /// A dependency is not ready yet.
    pub const DEPENDENCY_NOT_READY: &str = "DependencyNotReady";
    /// A reference the controller is not allowed to follow.
    pub const ACCESS_DENIED: &str = "AccessDenied";
    /// Health checks passed.
    pub const SUCCEEDED: &str = "Succeeded";
    /// A new reconcile request cancelled the health checks.
    pub const HEALTH_CHECK_CANCELED: &str = "HealthCheckCanceled";
    /// A CEL expression of the spec does not parse; the Kustomization is stalled.
    pub const INVALID_CEL_EXPRESSION: &str = "InvalidCELExpression";
    /// The Kustomization is suspended.
    pub const SUSPENDED: &str = "Suspended";
}

#[cfg(test)]
mod tests {
    #[test]
    fn build_failed_is_the_key_services_reason() {
        // Decryption fails during the build; the key services report it with this reason.
        assert_eq!(
            super::reason::BUILD_FAILED,
            keyservice::reason::BUILD_FAILED
        );
    }
}
