//! Kustomize's builtin name-reference table: which fields of which kinds hold the name of
//! an object of another kind.

use crate::config::NameBackReference;
use crate::fieldspec::FieldSpec;

/// Kinds that embed a pod template, with the path of the pod spec inside them and the
/// version the spec is restricted to (only bare Pods are restricted to `v1`).
const POD_SPEC_HOLDERS: &[(&str, &str, &str)] = &[
    ("Pod", "v1", "spec"),
    ("PodTemplate", "", "template/spec"),
    ("Deployment", "", "spec/template/spec"),
    ("ReplicaSet", "", "spec/template/spec"),
    ("DaemonSet", "", "spec/template/spec"),
    ("StatefulSet", "", "spec/template/spec"),
    ("Job", "", "spec/template/spec"),
    ("CronJob", "", "spec/jobTemplate/spec/template/spec"),
];

/// Kinds whose pod spec may name a ServiceAccount, PVC or PriorityClass, with the path of
/// the pod spec.
const WORKLOADS: &[(&str, &str)] = &[
    ("Pod", "spec"),
    ("StatefulSet", "spec/template/spec"),
    ("Deployment", "spec/template/spec"),
    ("ReplicationController", "spec/template/spec"),
    ("CronJob", "spec/jobTemplate/spec/template/spec"),
    ("Job", "spec/template/spec"),
    ("DaemonSet", "spec/template/spec"),
];

const RBAC: &str = "rbac.authorization.k8s.io";
const ADMISSION: &str = "admissionregistration.k8s.io";

fn spec(group: &str, version: &str, kind: &str, path: &str) -> FieldSpec {
    FieldSpec {
        group: group.to_string(),
        version: version.to_string(),
        kind: kind.to_string(),
        path: path.to_string(),
        create: false,
    }
}

fn kind_spec(kind: &str, path: &str) -> FieldSpec {
    spec("", "", kind, path)
}

fn backref(group: &str, version: &str, kind: &str, referrers: Vec<FieldSpec>) -> NameBackReference {
    NameBackReference {
        group: group.to_string(),
        version: version.to_string(),
        kind: kind.to_string(),
        referrers,
    }
}

/// The fields of every pod spec holder that end in `suffixes` (relative to the pod spec).
fn in_pod_specs(suffixes: &[&str]) -> Vec<FieldSpec> {
    POD_SPEC_HOLDERS
        .iter()
        .flat_map(|(kind, version, pod_spec)| {
            suffixes
                .iter()
                .map(move |suffix| spec("", version, kind, &format!("{pod_spec}/{suffix}")))
        })
        .collect()
}

/// The field `suffix` of the pod spec of every workload kind.
fn in_workloads(suffix: &str) -> Vec<FieldSpec> {
    WORKLOADS
        .iter()
        .map(|(kind, pod_spec)| kind_spec(kind, &format!("{pod_spec}/{suffix}")))
        .collect()
}

fn scale_targets() -> Vec<NameBackReference> {
    [
        "Deployment",
        "ReplicationController",
        "ReplicaSet",
        "StatefulSet",
    ]
    .iter()
    .map(|kind| {
        backref(
            "",
            "",
            kind,
            vec![kind_spec(
                "HorizontalPodAutoscaler",
                "spec/scaleTargetRef/name",
            )],
        )
    })
    .collect()
}

fn config_maps() -> NameBackReference {
    let mut referrers = in_pod_specs(&[
        "volumes/configMap/name",
        "containers/env/valueFrom/configMapKeyRef/name",
        "initContainers/env/valueFrom/configMapKeyRef/name",
        "containers/envFrom/configMapRef/name",
        "initContainers/envFrom/configMapRef/name",
        "volumes/projected/sources/configMap/name",
    ]);
    referrers.extend([
        kind_spec("Node", "spec/configSource/configMap"),
        kind_spec("Role", "rules/resourceNames"),
        kind_spec("ClusterRole", "rules/resourceNames"),
        kind_spec(
            "Ingress",
            "metadata/annotations/nginx.ingress.kubernetes.io\\/fastcgi-params-configmap",
        ),
    ]);
    backref("", "v1", "ConfigMap", referrers)
}

fn secrets() -> NameBackReference {
    let mut referrers = in_pod_specs(&[
        "volumes/secret/secretName",
        "containers/env/valueFrom/secretKeyRef/name",
        "initContainers/env/valueFrom/secretKeyRef/name",
        "containers/envFrom/secretRef/name",
        "initContainers/envFrom/secretRef/name",
        "imagePullSecrets/name",
        "volumes/projected/sources/secret/name",
    ]);
    referrers.extend([
        kind_spec("Ingress", "spec/tls/secretName"),
        kind_spec(
            "Ingress",
            "metadata/annotations/ingress.kubernetes.io\\/auth-secret",
        ),
        kind_spec(
            "Ingress",
            "metadata/annotations/nginx.ingress.kubernetes.io\\/auth-secret",
        ),
        kind_spec(
            "Ingress",
            "metadata/annotations/nginx.ingress.kubernetes.io\\/auth-tls-secret",
        ),
        kind_spec("ServiceAccount", "imagePullSecrets/name"),
        kind_spec("StorageClass", "parameters/secretName"),
        kind_spec("StorageClass", "parameters/adminSecretName"),
        kind_spec("StorageClass", "parameters/userSecretName"),
        kind_spec("StorageClass", "parameters/secretRef"),
        kind_spec("Role", "rules/resourceNames"),
        kind_spec("ClusterRole", "rules/resourceNames"),
        spec(
            "serving.knative.dev",
            "v1",
            "Service",
            "spec/template/spec/containers/env/valueFrom/secretKeyRef/name",
        ),
        kind_spec("PersistentVolume", "spec/azureFile/secretName"),
    ]);
    backref("", "v1", "Secret", referrers)
}

fn services() -> NameBackReference {
    backref(
        "",
        "v1",
        "Service",
        vec![
            spec("apps", "", "StatefulSet", "spec/serviceName"),
            kind_spec("Ingress", "spec/rules/http/paths/backend/serviceName"),
            kind_spec("Ingress", "spec/backend/serviceName"),
            kind_spec("Ingress", "spec/rules/http/paths/backend/service/name"),
            kind_spec("Ingress", "spec/defaultBackend/service/name"),
            spec(
                "apiregistration.k8s.io",
                "",
                "APIService",
                "spec/service/name",
            ),
            spec(
                ADMISSION,
                "",
                "ValidatingWebhookConfiguration",
                "webhooks/clientConfig/service",
            ),
            spec(
                ADMISSION,
                "",
                "MutatingWebhookConfiguration",
                "webhooks/clientConfig/service",
            ),
        ],
    )
}

fn roles() -> Vec<NameBackReference> {
    vec![
        backref(
            RBAC,
            "",
            "Role",
            vec![spec(RBAC, "", "RoleBinding", "roleRef/name")],
        ),
        backref(
            RBAC,
            "",
            "ClusterRole",
            vec![
                spec(RBAC, "", "RoleBinding", "roleRef/name"),
                spec(RBAC, "", "ClusterRoleBinding", "roleRef/name"),
            ],
        ),
    ]
}

fn service_accounts() -> NameBackReference {
    let mut referrers = vec![
        spec(RBAC, "", "RoleBinding", "subjects"),
        spec(RBAC, "", "ClusterRoleBinding", "subjects"),
    ];
    referrers.extend(in_workloads("serviceAccountName"));
    backref("", "v1", "ServiceAccount", referrers)
}

fn storage() -> Vec<NameBackReference> {
    vec![
        backref(
            "",
            "v1",
            "PersistentVolumeClaim",
            in_workloads("volumes/persistentVolumeClaim/claimName"),
        ),
        backref(
            "",
            "v1",
            "PersistentVolume",
            vec![
                kind_spec("PersistentVolumeClaim", "spec/volumeName"),
                kind_spec("ClusterRole", "rules/resourceNames"),
            ],
        ),
        backref(
            "storage.k8s.io",
            "v1",
            "StorageClass",
            vec![
                kind_spec("PersistentVolume", "spec/storageClassName"),
                kind_spec("PersistentVolumeClaim", "spec/storageClassName"),
                kind_spec(
                    "StatefulSet",
                    "spec/volumeClaimTemplates/spec/storageClassName",
                ),
            ],
        ),
    ]
}

fn scheduling_and_networking() -> Vec<NameBackReference> {
    vec![
        backref(
            "scheduling.k8s.io",
            "v1",
            "PriorityClass",
            in_workloads("priorityClassName"),
        ),
        // Kustomize declares this entry with the group "networking.k8s.io/v1", which no
        // object's group ever equals, so Ingress class names are never rewritten. The
        // value is kept so that builds give the same output as kustomize.
        backref(
            "networking.k8s.io/v1",
            "v1",
            "IngressClass",
            vec![kind_spec("Ingress", "spec/ingressClassName")],
        ),
        backref(
            ADMISSION,
            "",
            "ValidatingAdmissionPolicy",
            vec![spec(
                ADMISSION,
                "",
                "ValidatingAdmissionPolicyBinding",
                "spec/policyName",
            )],
        ),
    ]
}

/// Kustomize's builtin table of which fields name which kinds.
pub fn builtin_name_references() -> Vec<NameBackReference> {
    let mut table = scale_targets();
    table.push(config_maps());
    table.push(secrets());
    table.push(services());
    table.extend(roles());
    table.push(service_accounts());
    table.extend(storage());
    table.extend(scheduling_and_networking());
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(table: &'a [NameBackReference], kind: &str) -> &'a NameBackReference {
        table.iter().find(|b| b.kind == kind).unwrap()
    }

    fn has(backref: &NameBackReference, kind: &str, path: &str) -> bool {
        backref
            .referrers
            .iter()
            .any(|s| s.kind == kind && s.path == path)
    }

    #[test]
    fn table_covers_the_usual_referrers() {
        let table = builtin_name_references();
        let cm = find(&table, "ConfigMap");
        assert_eq!(cm.version, "v1");
        assert!(has(
            cm,
            "Deployment",
            "spec/template/spec/volumes/configMap/name"
        ));
        assert!(has(
            cm,
            "CronJob",
            "spec/jobTemplate/spec/template/spec/containers/envFrom/configMapRef/name"
        ));
        let pod = cm.referrers.iter().find(|s| s.kind == "Pod").unwrap();
        assert_eq!(pod.version, "v1");
        let secret = find(&table, "Secret");
        assert!(has(
            secret,
            "StatefulSet",
            "spec/template/spec/imagePullSecrets/name"
        ));
        assert!(has(secret, "Ingress", "spec/tls/secretName"));
        let sa = find(&table, "ServiceAccount");
        assert!(has(sa, "ClusterRoleBinding", "subjects"));
        assert!(has(
            sa,
            "ReplicationController",
            "spec/template/spec/serviceAccountName"
        ));
        assert!(has(
            find(&table, "Deployment"),
            "HorizontalPodAutoscaler",
            "spec/scaleTargetRef/name"
        ));
        let cluster_role = find(&table, "ClusterRole");
        assert_eq!(cluster_role.group, RBAC);
        assert_eq!(cluster_role.referrers.len(), 2);
        assert!(has(
            find(&table, "Service"),
            "ValidatingWebhookConfiguration",
            "webhooks/clientConfig/service"
        ));
        // Kinds are unique in the table.
        let mut kinds: Vec<_> = table.iter().map(|b| b.gvk()).collect();
        kinds.sort();
        kinds.dedup();
        assert_eq!(kinds.len(), table.len());
    }
}
