//! Kustomize's builtin field specs for the prefix/suffix, namespace, labels, annotations,
//! images, replicas and var-reference transformers.
//!
//! Each table is one function; [`builtin_field_specs`] assembles them.

use super::config::TransformerConfig;
use super::fieldspec::FieldSpec;
use super::namereference::builtin_name_references;

impl TransformerConfig {
    /// Kustomize's builtin configuration, each table in kustomize's sorted order. Defined
    /// here, with the tables, so that `config` (the types) depends on no defaults.
    pub fn builtin() -> Self {
        let mut config = builtin_field_specs();
        config.name_reference = builtin_name_references();
        config.sort();
        config
    }
}

/// The builtin field specs (name references excepted).
pub fn builtin_field_specs() -> TransformerConfig {
    TransformerConfig {
        name_prefix: name_prefix_specs(),
        name_suffix: name_suffix_specs(),
        name_space: namespace_specs(),
        common_labels: common_label_specs(),
        labels: Vec::new(),
        template_labels: template_label_specs(),
        volume_claim_template_labels: volume_claim_template_label_specs(),
        common_annotations: common_annotation_specs(),
        name_reference: Vec::new(),
        var_reference: var_reference_specs(),
        images: image_specs(),
        replicas: replica_specs(),
    }
}

/// A spec with every selector field spelled out.
fn spec(group: &str, version: &str, kind: &str, path: &str, create: bool) -> FieldSpec {
    FieldSpec {
        group: group.to_string(),
        version: version.to_string(),
        kind: kind.to_string(),
        path: path.to_string(),
        create,
    }
}

/// Where `namePrefix` applies.
pub fn name_prefix_specs() -> Vec<FieldSpec> {
    vec![FieldSpec::any_kind("metadata/name", false)]
}

/// Where `nameSuffix` applies.
pub fn name_suffix_specs() -> Vec<FieldSpec> {
    vec![FieldSpec::any_kind("metadata/name", false)]
}

/// Where `namespace` applies besides `metadata/namespace` (which the transformer handles
/// itself for every namespaced kind).
pub fn namespace_specs() -> Vec<FieldSpec> {
    vec![
        FieldSpec::for_kind("Namespace", "metadata/name", true),
        FieldSpec::for_group_kind(
            "apiregistration.k8s.io",
            "APIService",
            "spec/service/namespace",
            true,
        ),
        FieldSpec::for_group_kind(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            "spec/conversion/webhook/clientConfig/service/namespace",
            false,
        ),
    ]
}

/// Label maps of objects and of the pod (and job) templates they carry.
pub fn metadata_label_specs() -> Vec<FieldSpec> {
    vec![
        FieldSpec::any_kind("metadata/labels", true),
        spec(
            "",
            "v1",
            "ReplicationController",
            "spec/template/metadata/labels",
            true,
        ),
        FieldSpec::for_kind("Deployment", "spec/template/metadata/labels", true),
        FieldSpec::for_kind("ReplicaSet", "spec/template/metadata/labels", true),
        FieldSpec::for_kind("DaemonSet", "spec/template/metadata/labels", true),
        FieldSpec::for_group_kind("apps", "StatefulSet", "spec/template/metadata/labels", true),
        // kustomize v5.8.1 (Flux v1.10.1) lists volume claim templates among the template
        // labels, so `labels: [{includeTemplates: true}]` reaches them; v5.8.2 moved them to
        // a table of their own (`includeVolumeClaimTemplates`). Flux's behavior is kept.
        FieldSpec::for_group_kind(
            "apps",
            "StatefulSet",
            "spec/volumeClaimTemplates[]/metadata/labels",
            true,
        ),
        FieldSpec::for_group_kind("batch", "Job", "spec/template/metadata/labels", true),
        FieldSpec::for_group_kind("batch", "CronJob", "spec/jobTemplate/metadata/labels", true),
        FieldSpec::for_group_kind(
            "batch",
            "CronJob",
            "spec/jobTemplate/spec/template/metadata/labels",
            true,
        ),
    ]
}

/// Label maps of StatefulSet volume claim templates.
pub fn volume_claim_template_label_specs() -> Vec<FieldSpec> {
    vec![FieldSpec::for_group_kind(
        "apps",
        "StatefulSet",
        "spec/volumeClaimTemplates[]/metadata/labels",
        true,
    )]
}

/// Where `labels` entries with `includeTemplates` apply.
pub fn template_label_specs() -> Vec<FieldSpec> {
    metadata_label_specs()
}

/// The pod-affinity and topology-spread label selectors of a workload kind's pod template.
fn pod_template_selector_specs(kind: &str) -> Vec<FieldSpec> {
    const AFFINITY: &str = "spec/template/spec/affinity";
    [
        format!("{AFFINITY}/podAffinity/preferredDuringSchedulingIgnoredDuringExecution/podAffinityTerm/labelSelector/matchLabels"),
        format!("{AFFINITY}/podAffinity/requiredDuringSchedulingIgnoredDuringExecution/labelSelector/matchLabels"),
        format!("{AFFINITY}/podAntiAffinity/preferredDuringSchedulingIgnoredDuringExecution/podAffinityTerm/labelSelector/matchLabels"),
        format!("{AFFINITY}/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution/labelSelector/matchLabels"),
        "spec/template/spec/topologySpreadConstraints/labelSelector/matchLabels".to_string(),
    ]
    .iter()
    .map(|path| FieldSpec::for_group_kind("apps", kind, path, false))
    .collect()
}

/// Where `commonLabels` (and `labels` entries with `includeSelectors`) apply: label maps
/// plus selectors.
pub fn common_label_specs() -> Vec<FieldSpec> {
    let mut specs = vec![
        spec("", "v1", "Service", "spec/selector", true),
        spec("", "v1", "ReplicationController", "spec/selector", true),
        FieldSpec::for_kind("Deployment", "spec/selector/matchLabels", true),
    ];
    specs.extend(pod_template_selector_specs("Deployment"));
    specs.push(FieldSpec::for_kind(
        "ReplicaSet",
        "spec/selector/matchLabels",
        true,
    ));
    specs.push(FieldSpec::for_kind(
        "DaemonSet",
        "spec/selector/matchLabels",
        true,
    ));
    specs.push(FieldSpec::for_group_kind(
        "apps",
        "StatefulSet",
        "spec/selector/matchLabels",
        true,
    ));
    specs.extend(pod_template_selector_specs("StatefulSet"));
    specs.extend([
        FieldSpec::for_group_kind("batch", "Job", "spec/selector/matchLabels", false),
        FieldSpec::for_group_kind(
            "batch",
            "CronJob",
            "spec/jobTemplate/spec/selector/matchLabels",
            false,
        ),
        FieldSpec::for_group_kind(
            "policy",
            "PodDisruptionBudget",
            "spec/selector/matchLabels",
            false,
        ),
        FieldSpec::for_group_kind(
            "networking.k8s.io",
            "NetworkPolicy",
            "spec/podSelector/matchLabels",
            false,
        ),
        FieldSpec::for_group_kind(
            "networking.k8s.io",
            "NetworkPolicy",
            "spec/ingress/from/podSelector/matchLabels",
            false,
        ),
        FieldSpec::for_group_kind(
            "networking.k8s.io",
            "NetworkPolicy",
            "spec/egress/to/podSelector/matchLabels",
            false,
        ),
    ]);
    specs.extend(metadata_label_specs());
    specs
}

/// Where `commonAnnotations` apply.
pub fn common_annotation_specs() -> Vec<FieldSpec> {
    const TEMPLATE: &str = "spec/template/metadata/annotations";
    vec![
        FieldSpec::any_kind("metadata/annotations", true),
        spec("", "v1", "ReplicationController", TEMPLATE, true),
        FieldSpec::for_kind("Deployment", TEMPLATE, true),
        FieldSpec::for_kind("ReplicaSet", TEMPLATE, true),
        FieldSpec::for_kind("DaemonSet", TEMPLATE, true),
        FieldSpec::for_kind("StatefulSet", TEMPLATE, true),
        FieldSpec::for_group_kind("batch", "Job", TEMPLATE, true),
        FieldSpec::for_group_kind(
            "batch",
            "CronJob",
            "spec/jobTemplate/metadata/annotations",
            true,
        ),
        FieldSpec::for_group_kind(
            "batch",
            "CronJob",
            "spec/jobTemplate/spec/template/metadata/annotations",
            true,
        ),
    ]
}

/// Container fields where `$(VAR)` is expanded, under a pod spec at `pod_spec`.
fn pod_var_specs(kind: &str, pod_spec: &str, volumes: &str) -> Vec<FieldSpec> {
    let mut specs = Vec::new();
    for list in ["containers", "initContainers"] {
        for field in ["args", "command", "env/value", "volumeMounts/mountPath"] {
            let path = format!("{pod_spec}/{list}/{field}");
            specs.push(FieldSpec::for_kind(kind, &path, false));
        }
    }
    specs.push(FieldSpec::for_kind(
        kind,
        &format!("{volumes}/volumes/nfs/server"),
        false,
    ));
    specs
}

/// Where `vars` are expanded.
pub fn var_reference_specs() -> Vec<FieldSpec> {
    let mut specs = pod_var_specs(
        "CronJob",
        "spec/jobTemplate/spec/template/spec",
        // kustomize's table omits the inner `spec` for CronJob volumes.
        "spec/jobTemplate/spec/template",
    );
    specs.extend(pod_var_specs(
        "DaemonSet",
        "spec/template/spec",
        "spec/template/spec",
    ));
    specs.extend(pod_var_specs(
        "Deployment",
        "spec/template/spec",
        "spec/template/spec",
    ));
    specs.push(FieldSpec::for_kind(
        "Deployment",
        "spec/template/metadata/annotations",
        false,
    ));
    for path in ["spec/rules/host", "spec/tls/hosts", "spec/tls/secretName"] {
        specs.push(FieldSpec::for_kind("Ingress", path, false));
    }
    specs.extend(pod_var_specs(
        "Job",
        "spec/template/spec",
        "spec/template/spec",
    ));
    specs.extend(pod_var_specs("Pod", "spec", "spec"));
    specs.extend(pod_var_specs(
        "ReplicaSet",
        "spec/template/spec",
        "spec/template/spec",
    ));
    specs.push(FieldSpec::for_kind("Service", "spec/ports/port", false));
    specs.push(FieldSpec::for_kind(
        "Service",
        "spec/ports/targetPort",
        false,
    ));
    let mut stateful = pod_var_specs("StatefulSet", "spec/template/spec", "unused");
    stateful.pop();
    specs.extend(stateful);
    specs.push(FieldSpec::for_kind(
        "StatefulSet",
        "spec/volumeClaimTemplates/spec/nfs/server",
        false,
    ));
    specs.push(FieldSpec::for_kind(
        "PersistentVolume",
        "spec/nfs/server",
        false,
    ));
    specs.push(FieldSpec::any_kind("metadata/labels", false));
    specs.push(FieldSpec::any_kind("metadata/annotations", false));
    specs
}

/// Fields holding container images.
pub fn image_specs() -> Vec<FieldSpec> {
    let mut specs = Vec::new();
    for pod_spec in ["spec", "spec/template/spec"] {
        specs.push(FieldSpec::any_kind(
            &format!("{pod_spec}/containers[]/image"),
            true,
        ));
        specs.push(FieldSpec::any_kind(
            &format!("{pod_spec}/initContainers[]/image"),
            true,
        ));
        specs.push(FieldSpec::any_kind(
            &format!("{pod_spec}/volumes[]/image/reference"),
            true,
        ));
    }
    // kustomize v5.8.2 adds a CronJob's image volumes
    // (spec/jobTemplate/spec/template/spec/volumes[]/image/reference); v5.8.1, which Flux
    // v1.10.1 builds with, does not rewrite them, and neither does this engine.
    specs
}

/// Fields holding replica counts.
pub fn replica_specs() -> Vec<FieldSpec> {
    [
        "Deployment",
        "ReplicationController",
        "ReplicaSet",
        "StatefulSet",
    ]
    .iter()
    .map(|kind| FieldSpec::for_kind(kind, "spec/replicas", true))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has(specs: &[FieldSpec], group: &str, version: &str, kind: &str, path: &str) -> bool {
        specs
            .iter()
            .any(|s| s.group == group && s.version == version && s.kind == kind && s.path == path)
    }

    #[test]
    fn common_labels_cover_selectors_templates_and_claims() {
        let specs = common_label_specs();
        assert_eq!(specs.len(), 32);
        assert!(has(&specs, "", "v1", "Service", "spec/selector"));
        assert!(has(
            &specs,
            "",
            "",
            "Deployment",
            "spec/selector/matchLabels"
        ));
        assert!(has(
            &specs,
            "apps",
            "",
            "StatefulSet",
            "spec/volumeClaimTemplates[]/metadata/labels"
        ));
        assert!(has(&specs, "", "", "", "metadata/labels"));
        let pdb = specs
            .iter()
            .find(|s| s.kind == "PodDisruptionBudget")
            .unwrap();
        assert!(!pdb.create);
        assert!(
            specs
                .iter()
                .filter(|s| s.path.contains("affinity"))
                .all(|s| !s.create && s.group == "apps")
        );
    }

    #[test]
    fn template_labels_have_no_selectors() {
        let specs = template_label_specs();
        assert_eq!(specs.len(), 10);
        // kustomize v5.8.1, as Flux pins it: volume claim templates are template labels.
        assert!(
            specs
                .iter()
                .any(|s| s.path == "spec/volumeClaimTemplates[]/metadata/labels")
        );
        assert!(specs.iter().all(|s| s.path.ends_with("metadata/labels")));
        assert!(specs.iter().all(|s| s.create));
    }

    #[test]
    fn var_reference_table_matches_kustomize_shape() {
        let specs = var_reference_specs();
        assert_eq!(specs.len(), 72);
        assert!(has(
            &specs,
            "",
            "",
            "CronJob",
            "spec/jobTemplate/spec/template/volumes/nfs/server"
        ));
        assert!(has(
            &specs,
            "",
            "",
            "StatefulSet",
            "spec/volumeClaimTemplates/spec/nfs/server"
        ));
        assert!(!has(
            &specs,
            "",
            "",
            "StatefulSet",
            "unused/volumes/nfs/server"
        ));
        assert!(has(&specs, "", "", "Ingress", "spec/tls/secretName"));
        assert!(specs.iter().all(|s| !s.create));
    }

    #[test]
    fn configuration_files_use_kustomize_keys() {
        let text = "namespace:\n- path: spec/ns\n  kind: Thing\nlabels:\n- path: spec/sel\n  create: true\nvolumeClaimTemplateLabels:\n- path: spec/claims/metadata/labels\n";
        let docs = goyaml::parse_documents(text).unwrap();
        let config: TransformerConfig = serde_json::from_value(docs[0].clone()).unwrap();
        assert_eq!(
            config.name_space,
            [FieldSpec::for_kind("Thing", "spec/ns", false)]
        );
        assert_eq!(config.labels, [FieldSpec::any_kind("spec/sel", true)]);
        assert_eq!(config.volume_claim_template_labels.len(), 1);
    }

    #[test]
    fn builtin_tables_are_filled() {
        let config = builtin_field_specs();
        assert_eq!(
            config.name_prefix,
            [FieldSpec::any_kind("metadata/name", false)]
        );
        assert_eq!(config.name_space.len(), 3);
        assert_eq!(config.common_annotations.len(), 9);
        assert_eq!(config.images.len(), 6);
        assert!(config.images.iter().all(|s| s.create));
        assert_eq!(config.replicas.len(), 4);
        assert!(config.name_reference.is_empty());
    }
}
