//! Apply order: Flux's stages, then its kind order, then namespace and name.

use super::Object;

/// Kinds applied first and waited for (stage 1).
const CLUSTER_DEFINITION_KINDS: [&str; 3] =
    ["CustomResourceDefinition", "Namespace", "ClusterRole"];

/// Flux's reconcile order of well-known kinds within a stage; unknown kinds come after these
/// (by group, then kind) and webhook configurations come last.
const KIND_ORDER: [&str; 23] = [
    "CustomResourceDefinition",
    "Namespace",
    "ClusterRole",
    "ClusterClass",
    "RuntimeClass",
    "PriorityClass",
    "StorageClass",
    "VolumeSnapshotClass",
    "IngressClass",
    "GatewayClass",
    "ClusterRoleBinding",
    "ResourceQuota",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ConfigMap",
    "Secret",
    "Service",
    "LimitRange",
    "Deployment",
    "StatefulSet",
    "CronJob",
    "PodDisruptionBudget",
];

const LAST_KINDS: [&str; 2] = [
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// The stage an object is applied in (1 to 4); each stage completes before the next.
/// Stage 1 takes a CRD, Namespace or ClusterRole of its own API group only, as Flux's
/// `IsClusterDefinition` does: a custom kind of the same name goes by the other rules.
pub fn stage(object: &Object, custom_stage_kinds: &[String]) -> u8 {
    match stage_of_kind(object.kind(), custom_stage_kinds) {
        1 if !is_cluster_definition(object) => custom_or_last(object.kind(), custom_stage_kinds),
        stage => stage,
    }
}

/// The stage objects of `kind` are applied in.
pub fn stage_of_kind(kind: &str, custom_stage_kinds: &[String]) -> u8 {
    if CLUSTER_DEFINITION_KINDS.contains(&kind) {
        1
    } else if kind.ends_with("Class") {
        2
    } else {
        custom_or_last(kind, custom_stage_kinds)
    }
}

fn custom_or_last(kind: &str, custom_stage_kinds: &[String]) -> u8 {
    if custom_stage_kinds
        .iter()
        .any(|k| k.eq_ignore_ascii_case(kind))
    {
        3
    } else {
        4
    }
}

/// Flux's `IsCRD`, `IsNamespace` and `IsClusterRole`: the kind with its API group.
fn is_cluster_definition(object: &Object) -> bool {
    let api_version = object.api_version();
    match object.kind() {
        "CustomResourceDefinition" => api_version.starts_with("apiextensions.k8s.io/"),
        "Namespace" => api_version == "v1",
        "ClusterRole" => api_version.starts_with("rbac.authorization.k8s.io/"),
        _ => false,
    }
}

/// Sorts objects into apply order, stable for equal keys.
pub fn sort_for_apply(objects: &mut [Object], custom_stage_kinds: &[String]) {
    objects.sort_by(|a, b| {
        (
            stage(a, custom_stage_kinds),
            kind_rank(a),
            a.group(),
            a.kind(),
            a.namespace().unwrap_or(""),
            a.name(),
        )
            .cmp(&(
                stage(b, custom_stage_kinds),
                kind_rank(b),
                b.group(),
                b.kind(),
                b.namespace().unwrap_or(""),
                b.name(),
            ))
    });
}

fn kind_rank(object: &Object) -> usize {
    let kind = object.kind();
    if let Some(position) = KIND_ORDER.iter().position(|k| *k == kind) {
        position
    } else if let Some(position) = LAST_KINDS.iter().position(|k| *k == kind) {
        KIND_ORDER.len() + 1 + position
    } else {
        KIND_ORDER.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(api_version: &str, kind: &str, namespace: &str, name: &str) -> Object {
        serde_json::from_value(serde_json::json!({
            "apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": namespace}
        }))
        .unwrap()
    }

    #[test]
    fn cluster_definitions_are_told_by_kind_and_group() {
        let kinds = ["Namespace".to_string()];
        assert_eq!(stage(&object("v1", "Namespace", "", "a"), &[]), 1);
        assert_eq!(
            stage(&object("example.com/v1", "Namespace", "", "a"), &[]),
            4
        );
        assert_eq!(
            stage(&object("example.com/v1", "Namespace", "", "a"), &kinds),
            3
        );
        assert_eq!(
            stage(
                &object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "r"),
                &[]
            ),
            1
        );
        assert_eq!(
            stage(&object("example.com/v1", "ClusterRole", "", "r"), &[]),
            4
        );
        assert_eq!(
            stage(
                &object(
                    "apiextensions.k8s.io/v1",
                    "CustomResourceDefinition",
                    "",
                    "c"
                ),
                &[]
            ),
            1
        );
    }

    #[test]
    fn flux_apply_order() {
        let mut objects = vec![
            object(
                "admissionregistration.k8s.io/v1",
                "ValidatingWebhookConfiguration",
                "",
                "hook",
            ),
            object("example.com/v1", "Widget", "b", "w"),
            object("apps/v1", "Deployment", "b", "web"),
            object("v1", "ConfigMap", "b", "z"),
            object("v1", "ConfigMap", "a", "z"),
            object("networking.k8s.io/v1", "IngressClass", "", "nginx"),
            object("v1", "Namespace", "", "b"),
            object(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                "",
                "widgets.example.com",
            ),
            object("acme.io/v1", "Gadget", "b", "g"),
            object("batch/v1", "Job", "b", "once"),
        ];
        sort_for_apply(&mut objects, &["Job".to_string()]);
        let order: Vec<String> = objects.iter().map(Object::describe).collect();
        assert_eq!(
            order,
            [
                "CustomResourceDefinition/widgets.example.com",
                "Namespace/b",
                "IngressClass/nginx",
                "Job/b/once",
                "ConfigMap/a/z",
                "ConfigMap/b/z",
                "Deployment/b/web",
                "Gadget/b/g",
                "Widget/b/w",
                "ValidatingWebhookConfiguration/hook",
            ]
        );
    }
}
