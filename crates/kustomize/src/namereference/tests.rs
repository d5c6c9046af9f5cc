use serde_json::{Value, json};

use super::*;
use crate::resource::{test_map_of as map_of, test_resource as res};

fn cm(name: &str, namespace: Option<&str>) -> Resource {
    let mut meta = json!({ "name": name });
    if let Some(ns) = namespace {
        meta["namespace"] = json!(ns);
    }
    res(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}))
}

fn deployment(name: &str, namespace: Option<&str>, config_map: &str) -> Resource {
    let mut meta = json!({ "name": name });
    if let Some(ns) = namespace {
        meta["namespace"] = json!(ns);
    }
    res(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {"template": {"spec": {
            "containers": [{
                "name": "app",
                "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": config_map, "key": "k"}}}],
                "envFrom": [{"configMapRef": {"name": config_map}}]
            }],
            "volumes": [{"name": "v", "configMap": {"name": config_map}}, {"name": "o", "configMap": {"name": "other"}}]
        }}}
    }))
}

fn renamed(mut r: Resource, name: &str) -> Resource {
    r.set_name(name);
    r
}

fn prefixed(mut r: Resource, prefix: &str) -> Resource {
    let name = format!("{prefix}{}", r.name());
    r.set_name(&name);
    r.name_prefixes.push(prefix.to_string());
    r
}

fn at<'a>(map: &'a ResMap, kind: &str, name: &str) -> &'a Resource {
    map.iter()
        .find(|r| r.kind() == kind && r.name() == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn pointer(r: &Resource, path: &str) -> Value {
    Value::Object(r.obj.clone())
        .pointer(path)
        .cloned()
        .unwrap_or_else(|| panic!("nothing at {path}"))
}

fn fix(map: &mut ResMap) -> Result<(), NameRefError> {
    fix_name_references(map, &builtin_name_references())
}

#[test]
fn renamed_config_map_is_followed_in_every_pod_field() {
    let mut map = map_of(vec![
        renamed(cm("cfg", None), "cfg-5fh8k2"),
        deployment("web", None, "cfg"),
    ]);
    fix(&mut map).unwrap();
    let dep = at(&map, "Deployment", "web");
    let spec = "/spec/template/spec";
    assert_eq!(
        pointer(
            dep,
            &format!("{spec}/containers/0/env/0/valueFrom/configMapKeyRef/name")
        ),
        "cfg-5fh8k2"
    );
    assert_eq!(
        pointer(
            dep,
            &format!("{spec}/containers/0/envFrom/0/configMapRef/name")
        ),
        "cfg-5fh8k2"
    );
    assert_eq!(
        pointer(dep, &format!("{spec}/volumes/0/configMap/name")),
        "cfg-5fh8k2"
    );
    assert_eq!(
        pointer(dep, &format!("{spec}/volumes/1/configMap/name")),
        "other"
    );
    let config = at(&map, "ConfigMap", "cfg-5fh8k2");
    assert_eq!(config.ref_by.len(), 1);
    assert_eq!(config.ref_by[0].name, "web");
}

#[test]
fn objects_in_other_namespaces_are_not_referenced() {
    let mut map = map_of(vec![
        renamed(cm("cfg", Some("a")), "cfg-1"),
        deployment("web", Some("b"), "cfg"),
        deployment("web", Some("a"), "cfg"),
    ]);
    fix(&mut map).unwrap();
    let name_in = |ns: &str| {
        let dep = map
            .iter()
            .find(|r| r.kind() == "Deployment" && r.namespace() == ns)
            .unwrap();
        pointer(dep, "/spec/template/spec/volumes/0/configMap/name")
    };
    assert_eq!(name_in("b"), "cfg");
    assert_eq!(name_in("a"), "cfg-1");
}

#[test]
fn layers_that_added_the_same_prefix_are_preferred() {
    // A diamond: one base config map reached through two prefixed branches.
    let mut map = map_of(vec![
        prefixed(cm("cm", None), "left-"),
        prefixed(deployment("dep", None, "cm"), "left-"),
        prefixed(cm("cm", None), "right-"),
        prefixed(deployment("dep", None, "cm"), "right-"),
    ]);
    fix(&mut map).unwrap();
    for side in ["left-", "right-"] {
        let dep = at(&map, "Deployment", &format!("{side}dep"));
        assert_eq!(
            pointer(dep, "/spec/template/spec/volumes/0/configMap/name"),
            json!(format!("{side}cm"))
        );
    }
}

#[test]
fn several_referrals_with_different_names_is_an_error() {
    let mut map = map_of(vec![
        renamed(cm("cm", None), "one"),
        renamed(cm("cm2", None), "two"),
        deployment("dep", None, "cm"),
    ]);
    // Give the second config map the same previous name as the first.
    map.as_mut_vec()[1].prev_ids[0].name = "cm".into();
    let err = fix(&mut map).unwrap_err().to_string();
    assert!(
        err.contains("found multiple possible referrals: ConfigMap.v1.[noGrp]/one.[noNs], ConfigMap.v1.[noGrp]/two.[noNs]"),
        "{err}"
    );
}

fn service_account(name: &str) -> Resource {
    res(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}))
}

/// The ServiceAccount `sa` in `namespace`.
fn service_account_in(namespace: &str) -> Resource {
    let mut sa = service_account("sa");
    sa.set_namespace(namespace);
    sa
}

/// The ClusterRoleBinding `crb` of the ClusterRole `role`.
fn crb(subjects: Value) -> Resource {
    binding("ClusterRoleBinding", "crb", "ClusterRole", subjects)
}

fn binding(kind: &str, name: &str, role_kind: &str, subjects: Value) -> Resource {
    res(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": "role"},
        "subjects": subjects,
    }))
}

#[test]
fn same_service_account_name_in_two_namespaces_is_ambiguous() {
    let mut map = map_of(vec![
        service_account_in("a"),
        crb(json!([{"kind": "ServiceAccount", "name": "sa"}])),
        service_account_in("b"),
    ]);
    let err = fix(&mut map).unwrap_err().to_string();
    assert!(
        err.contains("found multiple possible referrals: ServiceAccount.v1.[noGrp]/sa.a, ServiceAccount.v1.[noGrp]/sa.b"),
        "{err}"
    );
}

#[test]
fn subjects_get_the_new_name_and_namespace() {
    let mut map = map_of(vec![
        prefixed(service_account_in("system"), "p-"),
        crb(json!([
            {"kind": "ServiceAccount", "name": "sa"},
            {"kind": "ServiceAccount", "name": "sa", "namespace": "default"},
            {"kind": "ServiceAccount", "name": "sa", "namespace": "elsewhere"},
            {"kind": "User", "name": "alice"}
        ])),
    ]);
    fix(&mut map).unwrap();
    let crb = at(&map, "ClusterRoleBinding", "crb");
    assert_eq!(
        pointer(crb, "/subjects"),
        json!([
            {"kind": "ServiceAccount", "name": "p-sa", "namespace": "system"},
            {"kind": "ServiceAccount", "name": "p-sa", "namespace": "system"},
            {"kind": "ServiceAccount", "name": "sa", "namespace": "elsewhere"},
            {"kind": "User", "name": "alice"}
        ])
    );
}

#[test]
fn role_binding_may_name_a_service_account_of_its_subject_namespace() {
    let sa = prefixed(service_account_in("other"), "p-");
    let mut rb = binding(
        "RoleBinding",
        "rb",
        "Role",
        json!([{"kind": "ServiceAccount", "name": "sa", "namespace": "other"}]),
    );
    rb.set_namespace("mine");
    let mut map = map_of(vec![sa, rb]);
    fix(&mut map).unwrap();
    let rb = at(&map, "RoleBinding", "rb");
    assert_eq!(pointer(rb, "/subjects/0/name"), "p-sa");
    assert_eq!(pointer(rb, "/subjects/0/namespace"), "other");
}

fn role(kind: &str, new_name: &str) -> Resource {
    renamed(
        res(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": {"name": "role"}}),
        ),
        new_name,
    )
}

#[test]
fn role_ref_follows_the_kind_it_names() {
    let mut map = map_of(vec![
        role("Role", "ns-role"),
        role("ClusterRole", "cluster-role"),
        binding("RoleBinding", "to-cluster", "ClusterRole", json!([])),
        binding("RoleBinding", "to-ns", "Role", json!([])),
        crb(json!([])),
    ]);
    fix(&mut map).unwrap();
    assert_eq!(
        pointer(at(&map, "RoleBinding", "to-cluster"), "/roleRef/name"),
        "cluster-role"
    );
    assert_eq!(
        pointer(at(&map, "RoleBinding", "to-ns"), "/roleRef/name"),
        "ns-role"
    );
    assert_eq!(
        pointer(at(&map, "ClusterRoleBinding", "crb"), "/roleRef/name"),
        "cluster-role"
    );
}

#[test]
fn resource_names_lists_in_cluster_roles_are_fixed() {
    let mut map = map_of(vec![
        res(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "autoscaler"},
            "rules": [{"resources": ["leases"], "resourceNames": ["autoscaler", "x"]}]
        })),
        renamed(cm("autoscaler", Some("kube-system")), "autoscaler-h8mm"),
    ]);
    fix(&mut map).unwrap();
    let role = at(&map, "ClusterRole", "autoscaler");
    assert_eq!(
        pointer(role, "/rules/0/resourceNames"),
        json!(["autoscaler-h8mm", "x"])
    );
}

#[test]
fn webhook_service_references_get_name_and_namespace() {
    let mut svc = res(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hook"}}));
    svc.set_namespace("system");
    let svc = prefixed(svc, "p-");
    let mut map = map_of(vec![
        svc,
        res(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "vwc"},
            "webhooks": [{"name": "w", "clientConfig": {"service": {"name": "hook", "namespace": "default", "path": "/v"}}}]
        })),
    ]);
    fix(&mut map).unwrap();
    let vwc = at(&map, "ValidatingWebhookConfiguration", "vwc");
    assert_eq!(
        pointer(vwc, "/webhooks/0/clientConfig/service"),
        json!({"name": "p-hook", "namespace": "system", "path": "/v"})
    );
}

#[test]
fn referrers_of_any_api_version_follow_renamed_referrals() {
    // The builtin specs name kinds only, so a Deployment written as apiVersion v1 counts.
    let mut map = map_of(vec![
        renamed(cm("old-name", None), "new-name"),
        deployment("deploy", None, "old-name"),
    ]);
    map.as_mut_vec()[1]
        .obj
        .insert("apiVersion".into(), json!("v1"));
    fix(&mut map).unwrap();
    let dep = at(&map, "Deployment", "deploy");
    assert_eq!(
        pointer(dep, "/spec/template/spec/volumes/0/configMap/name"),
        "new-name"
    );
}

#[test]
fn objects_may_reference_themselves() {
    let backrefs: Vec<NameBackReference> = serde_json::from_value(json!([
        {"kind": "Namespace", "fieldSpecs": [
            {"path": "data/theNamespace", "kind": "ConfigMap", "version": "v1"},
            {"path": "metadata/annotations/theNamespace", "kind": "Namespace", "version": "v1"}
        ]},
        {"kind": "ConfigMap", "fieldSpecs": [
            {"path": "data/theConfigMap", "kind": "ConfigMap", "version": "v1"},
            {"path": "metadata/annotations/theConfigMap", "kind": "ConfigMap", "version": "v1"},
            {"path": "metadata/annotations/theConfigMap", "kind": "Namespace", "version": "v1"}
        ]}
    ]))
    .unwrap();
    let mut config = res(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "oldNs", "annotations": {"theConfigMap": "cm"}},
        "data": {"theConfigMap": "cm", "theNamespace": "oldNs"}
    }));
    config.set_namespace("newNs");
    let config = renamed(config, "cm-updated");
    let namespace = renamed(
        res(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "oldNs", "annotations": {"theConfigMap": "cm", "theNamespace": "oldNs"}}})),
        "newNs",
    );
    let mut map = map_of(vec![config, namespace]);
    fix_name_references(&mut map, &backrefs).unwrap();
    let config = at(&map, "ConfigMap", "cm-updated");
    assert_eq!(
        pointer(config, "/data"),
        json!({"theConfigMap": "cm-updated", "theNamespace": "newNs"})
    );
    assert_eq!(
        pointer(config, "/metadata/annotations/theConfigMap"),
        "cm-updated"
    );
    let ns = at(&map, "Namespace", "newNs");
    assert_eq!(
        pointer(ns, "/metadata/annotations"),
        json!({"theConfigMap": "cm-updated", "theNamespace": "newNs"})
    );
}

#[test]
fn map_reference_without_name_is_a_config_error() {
    let sa = prefixed(service_account("sa"), "p-");
    let mut map = map_of(vec![sa, crb(json!([{"kind": "ServiceAccount"}]))]);
    let err = fix(&mut map).unwrap_err();
    assert!(matches!(err, NameRefError::NoNameField { .. }), "{err}");
    assert!(err.to_string().contains(
        "'subjects' field of 'ClusterRoleBinding.v1.rbac.authorization.k8s.io/crb.[noNs]'"
    ));
}

#[test]
fn ingress_class_names_are_left_alone_like_kustomize() {
    let class = prefixed(
        res(
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "nginx"}}),
        ),
        "p-",
    );
    let mut map = map_of(vec![
        class,
        res(
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "i"},
            "spec": {"ingressClassName": "nginx"}}),
        ),
    ]);
    fix(&mut map).unwrap();
    assert_eq!(
        pointer(at(&map, "Ingress", "i"), "/spec/ingressClassName"),
        "nginx"
    );
}

#[test]
fn prefix_lists_compare_by_their_ends() {
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert!(same_ending(&v(&["a-", "b-"]), &v(&["b-"])));
    assert!(!same_ending(&v(&["a-", "b-"]), &v(&["a-"])));
    assert!(same_ending(&[], &[]));
    assert!(!same_ending(&v(&["a-"]), &[]));
}

#[test]
fn ids_print_like_kustomize() {
    let id = ResId {
        gvk: Gvk::from_api_version("v1", "Secret"),
        name: "s".into(),
        namespace: String::new(),
    };
    assert_eq!(kustomize_id_string(&id), "Secret.v1.[noGrp]/s.[noNs]");
}

#[test]
fn subject_namespace_may_name_the_new_namespace() {
    let mut map = map_of(vec![
        prefixed(service_account_in("system"), "p-"),
        crb(json!([{"kind": "ServiceAccount", "name": "sa", "namespace": "system"}])),
    ]);
    fix(&mut map).unwrap();
    let crb = at(&map, "ClusterRoleBinding", "crb");
    assert_eq!(
        pointer(crb, "/subjects/0"),
        json!({"kind": "ServiceAccount", "name": "p-sa", "namespace": "system"})
    );
}

#[test]
fn role_binding_subject_namespace_must_be_a_string() {
    let mut map = map_of(vec![binding(
        "RoleBinding",
        "rb",
        "Role",
        json!([{"kind": "ServiceAccount", "name": "sa", "namespace": 7}]),
    )]);
    let err = fix(&mut map).unwrap_err();
    assert!(
        matches!(err, NameRefError::BadSubjectNamespace { .. }),
        "{err}"
    );
}

#[test]
fn unrenamed_objects_are_never_candidates() {
    let mut map = map_of(vec![cm("cfg", None), deployment("web", None, "cfg")]);
    let before = map.clone();
    fix(&mut map).unwrap();
    assert_eq!(map, before);
}
