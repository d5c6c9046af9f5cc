//! The `namespace` field and the `NamespaceTransformer` plugin.

use serde_json::Value;

use super::{Create, FieldSetError, TransformError, apply_spec, scalar_text};
use crate::fieldspec::FieldSpec;
use crate::resource::{ResMap, Resource};

/// Annotation marking objects a Helm chart rendered; Helm sets their namespaces itself.
const HELM_GENERATED: &str = "internal.config.kubernetes.io/helm-generated";

/// Which RoleBinding / ClusterRoleBinding subjects get the namespace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RoleBindingSubjects {
    /// Subjects named `default` (kustomize's default, `defaultOnly`).
    #[default]
    DefaultOnly,
    /// Every subject of kind `ServiceAccount` (`allServiceAccounts`).
    AllServiceAccounts,
    /// No subject (`none`).
    None,
}

impl RoleBindingSubjects {
    /// Parses the `setRoleBindingSubjects` value; "" is the default.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "" | "defaultOnly" => Some(RoleBindingSubjects::DefaultOnly),
            "allServiceAccounts" => Some(RoleBindingSubjects::AllServiceAccounts),
            "none" => Some(RoleBindingSubjects::None),
            _ => None,
        }
    }
}

/// Options of the namespace transformer beyond the namespace itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NamespaceOptions {
    /// Only set namespace fields that are missing or empty (`unsetOnly`).
    pub unset_only: bool,
    /// Which role binding subjects to update (`setRoleBindingSubjects`).
    pub role_binding_subjects: RoleBindingSubjects,
}

/// Moves every resource into `namespace`, as kustomize's `NamespaceTransformer` does:
///
/// - `metadata.namespace` is set on every type not known to be cluster-scoped;
/// - of `field_specs`, `metadata/namespace` specs are ignored (handled above) and
///   `metadata/name` specs only apply to `apiVersion: v1` objects (so only core
///   `Namespace` objects are renamed); the others set the namespace where they point;
/// - RoleBinding / ClusterRoleBinding subjects follow `options.role_binding_subjects`
///   (field specs for `subjects/namespace` on those kinds are ignored);
/// - objects marked Helm-generated and empty objects are left alone.
///
/// The id history of every resource visited is kept. Two resources ending with the same
/// id is an error. An empty `namespace` changes nothing.
pub fn set_namespace(
    resmap: &mut ResMap,
    namespace: &str,
    options: &NamespaceOptions,
    field_specs: &[FieldSpec],
) -> Result<(), TransformError> {
    if namespace.is_empty() {
        return Ok(());
    }
    for res in resmap.iter_mut() {
        if res.obj.is_empty() || res.annotation(HELM_GENERATED) == Some("true") {
            continue;
        }
        res.remember_id();
        move_resource(res, namespace, options, field_specs)?;
    }
    match resmap.first_duplicate() {
        Some(id) => Err(TransformError::NamespaceConflict { id: id.describe() }),
        None => Ok(()),
    }
}

/// Sets a namespace scalar, honouring `unset_only`.
fn set_value(node: &mut Value, namespace: &str, unset_only: bool) -> Result<(), FieldSetError> {
    let Some(current) = scalar_text(node) else {
        return Err(FieldSetError::NamespaceNotScalar);
    };
    if !unset_only || current.is_empty() {
        *node = Value::String(namespace.to_string());
    }
    Ok(())
}

fn is_role_binding(kind: &str) -> bool {
    kind == "RoleBinding" || kind == "ClusterRoleBinding"
}

fn move_resource(
    res: &mut Resource,
    namespace: &str,
    options: &NamespaceOptions,
    field_specs: &[FieldSpec],
) -> Result<(), TransformError> {
    let gvk = res.gvk();
    let core_v1 = res.api_version() == "v1";
    let unset_only = options.unset_only;
    let mut setter = |node: &mut Value| set_value(node, namespace, unset_only);
    if !gvk.is_cluster_scoped() {
        let meta = FieldSpec::any_kind("metadata/namespace", true);
        apply_spec(res, &meta, Create::Scalar, &mut setter)?;
    }
    let role_binding = is_role_binding(&gvk.kind);
    if role_binding {
        set_subject_namespaces(res, namespace, options)?;
    }
    for spec in field_specs {
        let skip = spec.path == "metadata/namespace"
            || (spec.path == "metadata/name" && !core_v1)
            || (role_binding && is_role_binding(&spec.kind) && spec.path == "subjects/namespace");
        if !skip {
            apply_spec(res, spec, Create::Scalar, &mut setter)?;
        }
    }
    Ok(())
}

/// Whether a role binding subject gets the namespace under `mode`.
fn subject_selected(subject: &serde_json::Map<String, Value>, mode: RoleBindingSubjects) -> bool {
    let field = |key: &str| subject.get(key).and_then(Value::as_str);
    match mode {
        RoleBindingSubjects::None => false,
        RoleBindingSubjects::DefaultOnly => field("name") == Some("default"),
        RoleBindingSubjects::AllServiceAccounts => field("kind") == Some("ServiceAccount"),
    }
}

fn set_subject_namespaces(
    res: &mut Resource,
    namespace: &str,
    options: &NamespaceOptions,
) -> Result<(), TransformError> {
    if options.role_binding_subjects == RoleBindingSubjects::None {
        return Ok(());
    }
    let id = res.id().describe();
    let fail = |reason: FieldSetError| TransformError::Field {
        id: id.clone(),
        path: "subjects".to_string(),
        source: FieldSetError::Subjects(Box::new(reason)),
    };
    let subjects = match res.obj.get_mut("subjects") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(fail(FieldSetError::SubjectsNotASequence)),
    };
    for subject in subjects.iter_mut() {
        let Value::Object(map) = subject else {
            continue;
        };
        if !subject_selected(map, options.role_binding_subjects) {
            continue;
        }
        let slot = map
            .entry("namespace")
            .or_insert_with(|| Value::String(String::new()));
        set_value(slot, namespace, options.unset_only).map_err(fail)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TransformerConfig;
    use serde_json::json;

    use crate::resource::test_resmap as resmap;

    fn run(map: &mut ResMap, options: NamespaceOptions) -> Result<(), TransformError> {
        set_namespace(
            map,
            "prod",
            &options,
            &TransformerConfig::builtin().name_space,
        )
    }

    #[test]
    fn namespaced_kinds_move_cluster_scoped_do_not() {
        let mut map = resmap(vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "old"}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}}),
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "v"}, "spec": {}}),
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}),
        ]);
        run(&mut map, NamespaceOptions::default()).unwrap();
        let res = map.as_slice();
        assert_eq!(res[0].namespace(), "prod");
        assert_eq!(res[0].prev_ids[0].namespace, "old");
        assert_eq!(res[1].namespace(), "");
        assert_eq!(res[2].namespace(), "");
        assert_eq!(res[3].namespace(), "prod");
    }

    #[test]
    fn only_core_namespaces_are_renamed() {
        let mut map = resmap(vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "old"}}),
            json!({"apiVersion": "servicebus.azure.com/v1", "kind": "Namespace",
                   "metadata": {"name": "sb", "namespace": "elsewhere"}}),
        ]);
        run(&mut map, NamespaceOptions::default()).unwrap();
        let res = map.as_slice();
        assert_eq!(res[0].name(), "prod");
        assert_eq!(res[0].namespace(), "");
        assert_eq!(res[0].org_id().name, "old");
        assert_eq!(res[1].name(), "sb");
        assert_eq!(res[1].namespace(), "prod");
    }

    #[test]
    fn apiservice_and_crd_webhook_service_namespaces() {
        let mut map = resmap(vec![
            json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                   "metadata": {"name": "v1.x"}, "spec": {"service": {"name": "s"}}}),
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                   "metadata": {"name": "a.b"},
                   "spec": {"conversion": {"webhook": {"clientConfig": {"service": {"name": "s", "namespace": "x"}}}}}}),
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                   "metadata": {"name": "c.d"}, "spec": {}}),
        ]);
        run(&mut map, NamespaceOptions::default()).unwrap();
        let res = map.as_slice();
        assert_eq!(res[0].obj["spec"]["service"]["namespace"], json!("prod"));
        assert_eq!(
            res[1].obj["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["namespace"],
            json!("prod")
        );
        assert_eq!(res[2].obj["spec"], json!({}));
    }

    fn binding() -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "rb"},
        "subjects": [
            {"kind": "ServiceAccount", "name": "default", "namespace": "a"},
            {"kind": "ServiceAccount", "name": "app", "namespace": "b"},
            {"kind": "User", "name": "default"},
            {"kind": "Group", "name": "g"}
        ]})
    }

    fn subject_namespaces(map: &ResMap) -> Vec<Value> {
        map.as_slice()[0].obj["subjects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.get("namespace").cloned().unwrap_or(Value::Null))
            .collect()
    }

    #[test]
    fn role_binding_subject_modes() {
        let mut map = resmap(vec![binding()]);
        run(&mut map, NamespaceOptions::default()).unwrap();
        assert_eq!(
            subject_namespaces(&map),
            [json!("prod"), json!("b"), json!("prod"), Value::Null]
        );

        let mut map = resmap(vec![binding()]);
        let all = NamespaceOptions {
            role_binding_subjects: RoleBindingSubjects::AllServiceAccounts,
            ..NamespaceOptions::default()
        };
        run(&mut map, all).unwrap();
        assert_eq!(
            subject_namespaces(&map),
            [json!("prod"), json!("prod"), Value::Null, Value::Null]
        );

        let mut map = resmap(vec![binding()]);
        let none = NamespaceOptions {
            role_binding_subjects: RoleBindingSubjects::None,
            ..NamespaceOptions::default()
        };
        run(&mut map, none).unwrap();
        assert_eq!(
            subject_namespaces(&map),
            [json!("a"), json!("b"), Value::Null, Value::Null]
        );
        assert_eq!(map.as_slice()[0].namespace(), "prod");
    }

    #[test]
    fn unset_only_keeps_existing_namespaces() {
        let mut map = resmap(vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "keep"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}),
        ]);
        let options = NamespaceOptions {
            unset_only: true,
            ..NamespaceOptions::default()
        };
        run(&mut map, options).unwrap();
        assert_eq!(map.as_slice()[0].namespace(), "keep");
        assert_eq!(map.as_slice()[1].namespace(), "prod");
    }

    #[test]
    fn helm_generated_objects_are_skipped() {
        let mut map = resmap(vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "annotations": {HELM_GENERATED: "true"}}})]);
        run(&mut map, NamespaceOptions::default()).unwrap();
        assert_eq!(map.as_slice()[0].namespace(), "");
    }

    #[test]
    fn merging_into_an_existing_id_is_an_error() {
        let mut map = resmap(vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "x"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "prod"}}),
        ]);
        let err = run(&mut map, NamespaceOptions::default()).unwrap_err();
        assert!(err.to_string().contains("ConfigMap.v1/a.prod"), "{err}");
    }

    #[test]
    fn non_scalar_target_is_an_error() {
        let mut map = resmap(vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a"}, "data": {"ns": {"x": 1}}})]);
        let err = set_namespace(
            &mut map,
            "prod",
            &NamespaceOptions::default(),
            &[FieldSpec::any_kind("data/ns", false)],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("scalar") && err.contains("data/ns"), "{err}");
    }

    #[test]
    fn cluster_scope_is_per_api_version() {
        use crate::resource::Gvk;
        assert!(
            Gvk::from_api_version("rbac.authorization.k8s.io/v1", "ClusterRole")
                .is_cluster_scoped()
        );
        assert!(
            !Gvk::from_api_version("rbac.authorization.k8s.io/v1alpha1", "ClusterRole")
                .is_cluster_scoped()
        );
        assert!(!Gvk::from_api_version("example.com/v1", "Namespace").is_cluster_scoped());
        assert!(Gvk::from_api_version("v1", "PersistentVolume").is_cluster_scoped());
    }

    #[test]
    fn parses_subject_modes() {
        assert_eq!(
            RoleBindingSubjects::parse(""),
            Some(RoleBindingSubjects::DefaultOnly)
        );
        assert_eq!(
            RoleBindingSubjects::parse("none"),
            Some(RoleBindingSubjects::None)
        );
        assert_eq!(RoleBindingSubjects::parse("bogus"), None);
    }
}
