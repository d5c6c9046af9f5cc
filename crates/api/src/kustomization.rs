//! The `kustomize.toolkit.fluxcd.io/v1` Kustomization: spec and status, field for field as
//! Flux defines them, with the same validation in the generated CRD schema.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::condition::Condition;

// The fields the apply engine reads (ignore rules and their selector, inventory entries) are
// defined once, in its crate, with the same schema.
pub use apply::{IgnoreRule, ResourceRef, Selector};
// The health check expressions are defined with the CEL engine that evaluates them.
pub use fluxcel::CustomHealthCheck;

/// The Go duration pattern Flux validates `interval`, `retryInterval` and `timeout` with.
pub const DURATION_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$";

/// KustomizationSpec defines the configuration to calculate the desired state from a Source
/// using Kustomize.
// The printer columns repeat `type_` on purpose.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kustomize.toolkit.fluxcd.io",
    version = "v1",
    kind = "Kustomization",
    plural = "kustomizations",
    singular = "kustomization",
    namespaced,
    status = "KustomizationStatus",
    shortname = "ks",
    category = "all",
    category = "fluxcd",
    category = "fluxcd-appliers",
    doc = "Kustomization is the Schema for the kustomizations API.",
    printcolumn(
        json_path = ".metadata.creationTimestamp",
        name = "Age",
        type_ = "date"
    ),
    printcolumn(
        json_path = r#".status.conditions[?(@.type=="Ready")].status"#,
        name = "Ready",
        type_ = "string"
    ),
    printcolumn(
        json_path = r#".status.conditions[?(@.type=="Ready")].message"#,
        name = "Status",
        type_ = "string"
    )
)]
#[serde(rename_all = "camelCase")]
// The serde impls are written below: a Kustomization without `spec` is read with the default
// spec, as Flux's CRD accepts one and Go reads it as the zero value. The optional structs are
// boxed: the watch cache holds a spec per Kustomization, and most leave them unset.
#[serde(remote = "Self")]
pub struct KustomizationSpec {
    /// CommonMetadata specifies the common labels and annotations that are applied to all
    /// resources. Any existing label or annotation will be overridden if its key matches a
    /// common one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_metadata: Option<Box<CommonMetadata>>,

    /// DependsOn may contain a DependencyReference slice with references to Kustomization
    /// resources that must be ready before this Kustomization can be reconciled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depends_on: Option<Vec<DependencyReference>>,

    /// Decrypt Kubernetes secrets before applying them on the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decryption: Option<Box<Decryption>>,

    /// DeletionPolicy can be used to control garbage collection when this Kustomization is
    /// deleted. Valid values are ('MirrorPrune', 'Delete', 'WaitForTermination', 'Orphan').
    /// 'MirrorPrune' mirrors the Prune field (orphan if false, delete if true). Defaults to
    /// 'MirrorPrune'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_policy: Option<DeletionPolicy>,

    /// The interval at which to reconcile the Kustomization. This interval is approximate
    /// and may be subject to jitter to ensure efficient use of resources.
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"))]
    pub interval: String,

    /// The interval at which to retry a previously failed reconciliation. When not
    /// specified, the controller uses the KustomizationSpec.Interval value to retry failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"))]
    pub retry_interval: Option<String>,

    /// The KubeConfig for reconciling the Kustomization on a remote cluster. When used in
    /// combination with KustomizationSpec.ServiceAccountName, forces the controller to act on
    /// behalf of that Service Account at the target cluster. If the --default-service-account
    /// flag is set, its value will be used as a controller level fallback for when
    /// KustomizationSpec.ServiceAccountName is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_config: Option<Box<KubeConfigReference>>,

    /// Path to the directory containing the kustomization.yaml file, or the set of plain
    /// YAMLs a kustomization.yaml should be generated for. Defaults to 'None', which
    /// translates to the root path of the SourceRef.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,

    /// PostBuild describes which actions to perform on the YAML manifest generated by
    /// building the kustomize overlay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_build: Option<Box<PostBuild>>,

    /// Prune enables garbage collection.
    pub prune: bool,

    /// A list of resources to be included in the health assessment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_checks: Option<Vec<NamespacedObjectKindReference>>,

    /// NamePrefix will prefix the names of all managed resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 200))]
    pub name_prefix: Option<String>,

    /// NameSuffix will suffix the names of all managed resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 200))]
    pub name_suffix: Option<String>,

    /// Strategic merge and JSON patches, defined as inline YAML objects, capable of
    /// targeting objects based on kind, label and annotation selectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patches: Option<Vec<Patch>>,

    /// Images is a list of (image name, new name, new tag or digest) for changing image
    /// names, tags or digests. This can also be achieved with a patch, but this operator is
    /// simpler to specify.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<Vec<Image>>,

    /// The name of the Kubernetes service account to impersonate when reconciling this
    /// Kustomization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,

    /// Reference of the source where the kustomization file is.
    pub source_ref: CrossNamespaceSourceReference,

    /// This flag tells the controller to suspend subsequent kustomize executions, it does
    /// not apply to already started executions. Defaults to false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,

    /// TargetNamespace sets or overrides the namespace in the kustomization.yaml file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub target_namespace: Option<String>,

    /// Timeout for validation, apply and health checking operations. Defaults to 'Interval'
    /// duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"))]
    pub timeout: Option<String>,

    /// Force instructs the controller to recreate resources when patching fails due to an
    /// immutable field change.
    #[serde(default)]
    pub force: bool,

    /// Wait instructs the controller to check the health of all the reconciled resources.
    /// When enabled, the HealthChecks are ignored. Defaults to false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<bool>,

    /// Components specifies relative paths to kustomize Components.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub components: Option<Vec<String>>,

    /// IgnoreMissingComponents instructs the controller to ignore Components paths not
    /// found in source by removing them from the generated kustomization.yaml before running
    /// kustomize build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_missing_components: Option<bool>,

    /// BuildMetadata specifies which kustomize build metadata should be added to the built
    /// resources. The allowed values are 'originAnnotations' to annotate resources with
    /// their source origin, and 'transformerAnnotations' to annotate resources with the
    /// transformers that produced them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_metadata: Option<Vec<BuildMetadataOption>>,

    /// HealthCheckExprs is a list of healthcheck expressions for evaluating the health of
    /// custom resources using Common Expression Language (CEL). The expressions are
    /// evaluated only when Wait or HealthChecks are specified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check_exprs: Option<Vec<CustomHealthCheck>>,

    /// Ignore is a list of rules for specifying which changes to ignore during diffing and
    /// applying.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore: Option<Vec<IgnoreRule>>,
}

impl Serialize for KustomizationSpec {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        KustomizationSpec::serialize(self, serializer)
    }
}

/// An absent or `null` spec reads as the default one. serde reads a missing field through
/// `deserialize_option`, so this also covers a Kustomization without `spec` at all: the watch
/// keeps going instead of failing on one object the API server accepted.
impl<'de> Deserialize<'de> for KustomizationSpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Present(KustomizationSpec);
        impl<'de> Deserialize<'de> for Present {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                KustomizationSpec::deserialize(deserializer).map(Present)
            }
        }
        Ok(Option::<Present>::deserialize(deserializer)?
            .map(|present| present.0)
            .unwrap_or_default())
    }
}

/// CommonMetadata defines the common labels and annotations.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct CommonMetadata {
    /// Annotations to be added to the object's metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Labels to be added to the object's metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
}

/// DependencyReference defines a Kustomization dependency on another Kustomization resource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DependencyReference {
    /// Name of the referent.
    pub name: String,
    /// Namespace of the referent, defaults to the namespace of the Kustomization resource
    /// object that contains the reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// ReadyExpr is a CEL expression that can be used to assess the readiness of a
    /// dependency. When specified, the built-in readiness check is replaced by the logic
    /// defined in the CEL expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_expr: Option<String>,
}

/// Decryption defines how decryption is handled for Kubernetes manifests.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Decryption {
    /// Provider is the name of the decryption engine.
    pub provider: DecryptionProvider,
    /// The secret name containing the private OpenPGP keys used for decryption. A static
    /// credential for a cloud provider defined inside the Secret takes priority to
    /// secret-less authentication with the ServiceAccountName field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
    /// ServiceAccountName is the name of the service account used to authenticate with
    /// KMS services from cloud providers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}

/// The decryption engine.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DecryptionProvider {
    /// Mozilla SOPS.
    #[default]
    #[serde(rename = "sops")]
    Sops,
}

/// What happens to the managed objects when the Kustomization is deleted.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DeletionPolicy {
    /// Delete the objects when `prune` is true, orphan them otherwise.
    #[default]
    MirrorPrune,
    /// Always delete the objects.
    Delete,
    /// Delete the objects and wait until they are gone.
    WaitForTermination,
    /// Leave the objects in the cluster.
    Orphan,
}

/// LocalObjectReference contains enough information to locate the referenced Kubernetes
/// resource object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct LocalObjectReference {
    /// Name of the referent.
    pub name: String,
}

/// KubeConfigReference contains enough information build a kubeconfig in memory.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "message": "exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef must be specified",
        "rule": "has(self.configMapRef) != has(self.secretRef)"
    }
]))]
pub struct KubeConfigReference {
    /// ConfigMapRef holds an optional name of a ConfigMap that contains the following keys:
    /// `provider` (one of `aws`, `azure`, `gcp` or `generic`), `cluster`, `address`,
    /// `ca.crt`, `audience` and `serviceAccountName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<LocalObjectReference>,
    /// SecretRef holds the name of a secret that contains a key with the kubeconfig file as
    /// the value. If no key is set, the key will default to 'value'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeyReference>,
}

/// SecretKeyReference contains enough information to locate the referenced Kubernetes
/// Secret object in the same namespace. Optionally a key can be specified.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct SecretKeyReference {
    /// Name of the Secret.
    pub name: String,
    /// Key in the Secret, when not specified an implementation-specific default key is used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// PostBuild describes which actions to perform on the YAML manifest generated by building
/// the kustomize overlay.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PostBuild {
    /// Substitute holds a map of key/value pairs. The variables defined in your YAML
    /// manifests that match any of the keys defined in the map will be substituted with the
    /// set value. Includes support for bash string replacement functions e.g.
    /// ${var:=default}, ${var:position} and ${var/substring/replacement}.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub substitute: Option<BTreeMap<String, String>>,
    /// SubstituteFrom holds references to ConfigMaps and Secrets containing the variables
    /// and their values to be substituted in the YAML manifests. The ConfigMap and the
    /// Secret data keys represent the var names, and they must match the vars declared in
    /// the manifests for the substitution to happen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub substitute_from: Option<Vec<SubstituteReference>>,
    /// SubstituteStrategy defines the strategy for substituting variables. 'WithVariables'
    /// (the default) substitutes only when at least one variable is defined; 'Always'
    /// substitutes even when none is, so that defaults apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub substitute_strategy: Option<SubstituteStrategy>,
}

/// When post-build substitution runs.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SubstituteStrategy {
    /// Substitute only when at least one variable is defined.
    #[default]
    WithVariables,
    /// Always substitute.
    Always,
}

/// SubstituteReference contains a reference to a resource containing the variables name and
/// value.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct SubstituteReference {
    /// Kind of the values referent, valid values are ('Secret', 'ConfigMap').
    pub kind: SubstituteKind,
    /// Name of the values referent. Should reside in the same namespace as the referring
    /// resource.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Optional indicates whether the referenced resource must exist, or whether to tolerate
    /// its absence. If true and the referenced resource is absent, proceed as if the
    /// resource was present but empty, without any variables defined.
    #[serde(default)]
    pub optional: bool,
}

/// The kinds variables can be read from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum SubstituteKind {
    /// A Secret; values are decoded.
    Secret,
    /// A ConfigMap.
    #[default]
    ConfigMap,
}

/// NamespacedObjectKindReference contains enough information to locate the typed
/// referenced Kubernetes resource object in any namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespacedObjectKindReference {
    /// API version of the referent, if not specified the Kubernetes preferred version will
    /// be used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind of the referent.
    pub kind: String,
    /// Name of the referent.
    pub name: String,
    /// Namespace of the referent, when not specified it acts as LocalObjectReference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Patch contains an inline StrategicMerge or JSON6902 patch, and the target the patch
/// should be applied to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Patch {
    /// Patch contains an inline StrategicMerge patch or an inline JSON6902 patch with an
    /// array of operation objects.
    pub patch: String,
    /// Target points to the resources that the patch document should be applied to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Selector>,
}

/// Image contains an image name, a new name, a new tag or digest, which will replace the
/// original name and tag.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Image {
    /// Name is a tag-less image name.
    pub name: String,
    /// NewName is the value used to replace the original name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_name: Option<String>,
    /// NewTag is the value used to replace the original tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_tag: Option<String>,
    /// Digest is the value used to replace the original image tag. If digest is present
    /// NewTag value is ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// Reference to a source artifact, possibly in another namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrossNamespaceSourceReference {
    /// API version of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind of the referent.
    pub kind: SourceKind,
    /// Name of the referent.
    pub name: String,
    /// Namespace of the referent, defaults to the namespace of the Kubernetes resource
    /// object that contains the reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// The Flux source kinds a Kustomization can take its manifests from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum SourceKind {
    /// An OCI artifact (source.toolkit.fluxcd.io OCIRepository).
    #[serde(rename = "OCIRepository")]
    OciRepository,
    /// A Git repository.
    #[default]
    GitRepository,
    /// An S3-compatible bucket.
    Bucket,
    /// An artifact produced by a third-party controller.
    ExternalArtifact,
}

/// How a build is annotated by kustomize.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum BuildMetadataOption {
    /// Annotate each resource with the file it came from.
    #[serde(rename = "originAnnotations")]
    OriginAnnotations,
    /// Annotate each resource with the transformers that changed it.
    #[serde(rename = "transformerAnnotations")]
    TransformerAnnotations,
}

/// KustomizationStatus defines the observed state of a kustomization.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("default" = {"observedGeneration": -1}))]
pub struct KustomizationStatus {
    /// ObservedGeneration is the last reconciled generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Conditions of the Kustomization (Ready, Reconciling, Stalled, Healthy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,

    /// The last successfully applied revision. Equals the Revision of the applied Artifact
    /// from the referenced Source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_revision: Option<String>,

    /// The last successfully applied origin revision. Equals the origin revision of the
    /// applied Artifact from the referenced Source. Usually present on the Metadata of the
    /// applied Artifact and depends on the Source type, e.g. for OCI it's the value
    /// associated with the key "org.opencontainers.image.revision".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_origin_revision: Option<String>,

    /// LastAttemptedRevision is the revision of the last reconciliation attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_revision: Option<String>,

    /// LastHandledReconcileAt holds the value of the most recent reconcile request value,
    /// so a change of the annotation value can be detected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,

    /// Inventory contains the list of Kubernetes resource object references that have been
    /// successfully applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory: Option<ResourceInventory>,

    /// History contains a set of snapshots of the last reconciliation attempts tracking the
    /// revision, the state and the duration of each attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<Snapshot>>,
}

impl KustomizationStatus {
    /// The objects of `status.inventory`, in its order; entries not in Flux's format are
    /// left out.
    pub fn inventory_objects(&self) -> Vec<apply::ObjectId> {
        self.inventory
            .as_ref()
            .map(|inventory| apply::inventory_of(&inventory.entries))
            .unwrap_or_default()
    }
}

/// ResourceInventory contains a list of Kubernetes resource object references that have
/// been applied by a Kustomization.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ResourceInventory {
    /// Entries of Kubernetes resource object references.
    pub entries: Vec<ResourceRef>,
}

/// Snapshot represents a point-in-time record of a group of resources reconciliation,
/// including timing information, status, and a unique digest identifier.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// Digest is the checksum in the format `<algo>:<hex>` of the resources in this
    /// snapshot.
    pub digest: String,
    /// FirstReconciled is the time when this revision was first reconciled to the cluster.
    pub first_reconciled: Time,
    /// LastReconciled is the time when this revision was last reconciled to the cluster.
    pub last_reconciled: Time,
    /// LastReconciledDuration is time it took to execute the last reconciliation of this
    /// revision.
    pub last_reconciled_duration: String,
    /// LastReconciledStatus is the status of the last reconciliation.
    pub last_reconciled_status: String,
    /// TotalReconciliations is the total number of reconciliations that have occurred for
    /// this snapshot.
    pub total_reconciliations: i64,
    /// Metadata contains additional information about the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kustomization_without_spec_reads_with_the_default_spec() {
        for object in [
            serde_json::json!({
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
                "kind": "Kustomization",
                "metadata": {"name": "bare", "namespace": "default"},
            }),
            serde_json::json!({
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
                "kind": "Kustomization",
                "metadata": {"name": "bare", "namespace": "default"},
                "spec": null,
            }),
        ] {
            let ks: Kustomization = serde_json::from_value(object).expect("read without spec");
            assert_eq!(ks.spec, KustomizationSpec::default());
        }
    }

    #[test]
    fn a_spec_reads_and_writes_its_fields() {
        let object = serde_json::json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": "app", "namespace": "default"},
            "spec": {
                "interval": "5m",
                "prune": true,
                "sourceRef": {"kind": "GitRepository", "name": "repo"},
            },
        });
        let ks: Kustomization = serde_json::from_value(object.clone()).expect("read");
        assert_eq!(ks.spec.interval, "5m");
        assert!(ks.spec.prune);
        let written = serde_json::to_value(&ks).expect("write");
        for field in ["interval", "prune", "sourceRef"] {
            assert_eq!(written["spec"][field], object["spec"][field], "{field}");
        }
        // A spec of the wrong shape is still an error, not a default.
        let wrong = serde_json::json!({"metadata": {"name": "x"}, "spec": "text"});
        assert!(serde_json::from_value::<Kustomization>(wrong).is_err());
    }
}
