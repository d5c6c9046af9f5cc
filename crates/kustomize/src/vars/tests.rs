use serde_json::{Value, json};

use super::*;
use crate::kustfile::{FieldRef, VarTarget};
use crate::resource::{test_map_of as map_of, test_resource as res};

fn var(name: &str, kind: &str, target: &str, namespace: &str, field: Option<&str>) -> Var {
    Var {
        name: name.into(),
        objref: VarTarget {
            kind: kind.into(),
            api_version: if kind == "Deployment" {
                "apps/v1"
            } else {
                "v1"
            }
            .into(),
            name: target.into(),
            namespace: namespace.into(),
            ..VarTarget::default()
        },
        fieldref: field.map(|f| FieldRef {
            field_path: f.into(),
        }),
    }
}

fn specs() -> Vec<FieldSpec> {
    vec![
        FieldSpec::any_kind("spec/template/spec/containers/env/value", false),
        FieldSpec::any_kind("spec/template/spec/containers/args", false),
        FieldSpec::for_kind("Pod", "spec/containers/command", false),
        FieldSpec::any_kind("metadata/annotations", false),
    ]
}

fn service(namespace: &str, protocol: &str) -> Resource {
    res(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "elasticsearch", "namespace": namespace},
        "spec": {"ports": [{"name": "transport", "port": 9300, "protocol": protocol}]}
    }))
}

fn stateful_set(namespace: &str, env: &str) -> Resource {
    res(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "elasticsearch", "namespace": namespace},
        "spec": {"template": {"spec": {"containers": [{
            "name": "es",
            "env": [
                {"name": "SERVICE", "value": format!("$({env}-name).monitoring.svc")},
                {"name": "PROTOCOL", "value": format!("$({env}-protocol)")}
            ]
        }]}}}
    }))
}

fn env_values(map: &ResMap, namespace: &str) -> Value {
    let set = map
        .iter()
        .find(|r| r.kind() == "StatefulSet" && r.namespace() == namespace)
        .unwrap();
    let env = &set.obj["spec"]["template"]["spec"]["containers"][0]["env"];
    json!([env[0]["value"], env[1]["value"]])
}

fn es_vars(with_namespace: bool) -> Vec<Var> {
    let mut vars = Vec::new();
    for ns in ["dev", "test"] {
        let objref_ns = if with_namespace { ns } else { "" };
        vars.push(var(
            &format!("{ns}-name"),
            "Service",
            "elasticsearch",
            objref_ns,
            None,
        ));
        vars.push(var(
            &format!("{ns}-protocol"),
            "Service",
            "elasticsearch",
            objref_ns,
            Some("spec.ports[0].protocol"),
        ));
    }
    vars
}

#[test]
fn namespaces_disambiguate_vars() {
    let mut map = map_of(vec![
        stateful_set("dev", "dev"),
        service("dev", "TCP"),
        stateful_set("test", "test"),
        service("test", "UDP"),
    ]);
    resolve_vars(&mut map, &es_vars(true), &specs()).unwrap();
    assert_eq!(
        env_values(&map, "dev"),
        json!(["elasticsearch.monitoring.svc", "TCP"])
    );
    assert_eq!(
        env_values(&map, "test"),
        json!(["elasticsearch.monitoring.svc", "UDP"])
    );
}

#[test]
fn same_objref_in_two_namespaces_is_ambiguous() {
    let mut map = map_of(vec![service("dev", "TCP"), service("test", "UDP")]);
    let err = resolve_vars(&mut map, &es_vars(false), &specs()).unwrap_err();
    assert!(err.to_string().contains("unable to disambiguate"), "{err}");
    assert!(err.to_string().contains("'dev-name'"), "{err}");
    let err = bind_vars(&mut map, &es_vars(false)).unwrap_err();
    assert!(matches!(err, VarError::Ambiguous { count: 2, .. }));
}

#[test]
fn vars_bound_in_their_own_layer_stay_unambiguous() {
    let vars = es_vars(false);
    let mut dev = map_of(vec![stateful_set("dev", "dev"), service("dev", "TCP")]);
    bind_vars(&mut dev, &vars[..2]).unwrap();
    let mut test = map_of(vec![stateful_set("test", "test"), service("test", "UDP")]);
    bind_vars(&mut test, &vars[2..]).unwrap();
    let mut top = dev;
    top.append_all(test).unwrap();
    resolve_vars(&mut top, &vars, &specs()).unwrap();
    assert_eq!(
        env_values(&top, "dev"),
        json!(["elasticsearch.monitoring.svc", "TCP"])
    );
    assert_eq!(
        env_values(&top, "test"),
        json!(["elasticsearch.monitoring.svc", "UDP"])
    );
}

fn pod(name: &str) -> Resource {
    res(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": {"who": "pod $(POD_NAME)", "n": 1}},
        "spec": {"containers": [{"name": "c", "command": ["echo", "$(POD_NAME)", "$$(POD_NAME)", "$(OTHER)"]}]}
    }))
}

#[test]
fn var_reads_the_current_name_of_a_renamed_object() {
    let mut p = pod("kelley");
    p.set_name("base1-kelley");
    let mut map = map_of(vec![p]);
    let vars = [var("POD_NAME", "Pod", "kelley", "", Some("metadata.name"))];
    resolve_vars(&mut map, &vars, &specs()).unwrap();
    let p = map.iter().next().unwrap();
    assert_eq!(
        p.obj["spec"]["containers"][0]["command"],
        json!(["echo", "base1-kelley", "$(POD_NAME)", "$(OTHER)"])
    );
    assert_eq!(
        p.obj["metadata"]["annotations"],
        json!({"who": "pod base1-kelley", "n": 1})
    );
}

#[test]
fn whole_value_references_keep_the_var_type() {
    let deployment = res(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 3, "paused": false, "template": {"spec": {"containers": [{
            "name": "c",
            "args": ["$(REPLICAS)", "--n=$(REPLICAS)", "$(PAUSED)"],
            "env": [{"name": "E", "value": "$(REPLICAS)"}]
        }]}}}
    }));
    let mut map = map_of(vec![deployment]);
    let vars = [
        var("REPLICAS", "Deployment", "d", "", Some("spec.replicas")),
        var("PAUSED", "Deployment", "d", "", Some("spec.paused")),
    ];
    resolve_vars(&mut map, &vars, &specs()).unwrap();
    let c = &map.iter().next().unwrap().obj["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["args"], json!([3, "--n=3", false]));
    assert_eq!(c["env"][0]["value"], json!(3));
}

#[test]
fn vars_whose_value_is_a_map_are_left_unexpanded() {
    let mut map = map_of(vec![pod("p")]);
    let vars = [var("POD_NAME", "Pod", "p", "", Some("spec.containers[0]"))];
    resolve_vars(&mut map, &vars, &specs()).unwrap();
    assert_eq!(
        map.iter().next().unwrap().obj["spec"]["containers"][0]["command"][1],
        "$(POD_NAME)"
    );
}

#[test]
fn lists_at_var_fields_must_hold_strings() {
    let mut p = pod("p");
    p.obj["spec"]["containers"][0]["command"] = json!(["sleep", 5]);
    let mut map = map_of(vec![p]);
    let vars = [var("POD_NAME", "Pod", "p", "", None)];
    let err = resolve_vars(&mut map, &vars, &specs()).unwrap_err();
    assert!(matches!(err, VarError::NotAStringList { .. }), "{err}");
    assert!(err.to_string().contains("spec/containers/command"));
}

#[test]
fn specs_apply_only_to_their_kinds() {
    let mut p = pod("p");
    p.obj.insert("kind".into(), json!("NotAPod"));
    let mut map = map_of(vec![p]);
    let vars = [var("POD_NAME", "NotAPod", "p", "", None)];
    resolve_vars(&mut map, &vars, &specs()).unwrap();
    let p = map.iter().next().unwrap();
    assert_eq!(p.obj["spec"]["containers"][0]["command"][1], "$(POD_NAME)");
    assert_eq!(p.obj["metadata"]["annotations"]["who"], "pod p");
}

#[test]
fn missing_objects_and_fields_are_errors() {
    let mut map = map_of(vec![pod("p")]);
    let err = resolve_vars(&mut map, &[var("X", "Pod", "nope", "", None)], &specs()).unwrap_err();
    assert!(
        err.to_string().contains("var 'X' cannot be mapped"),
        "{err}"
    );
    let err = resolve_vars(
        &mut map,
        &[var("X", "Pod", "p", "", Some("spec.nothing"))],
        &specs(),
    )
    .unwrap_err();
    assert!(matches!(err, VarError::FieldNotFound { .. }), "{err}");
    // The objref's kind must match exactly, version included.
    let mut unversioned = var("X", "Pod", "p", "", None);
    unversioned.objref.api_version.clear();
    assert!(resolve_vars(&mut map, &[unversioned], &specs()).is_err());
}

#[test]
fn duplicate_var_names_are_rejected() {
    let vars = [
        var("POD_NAME", "Pod", "a", "", None),
        var("POD_NAME", "Pod", "b", "", None),
    ];
    let err = check_var_names(&vars).unwrap_err();
    assert_eq!(err.to_string(), "var 'POD_NAME' already encountered");
    assert!(check_var_names(&vars[..1]).is_ok());
}

#[test]
fn expansion_follows_kustomize_syntax() {
    let lookup = |name: &str| match name {
        "A" => Some(json!("alpha")),
        "N" => Some(json!(8080)),
        "F" => Some(json!(1.5)),
        "B" => Some(json!(true)),
        _ => None,
    };
    let cases = [
        ("$(A)", json!("alpha")),
        ("$(N)", json!(8080)),
        ("$(B)", json!(true)),
        ("x-$(A)-$(N)-$(F)-$(B)", json!("x-alpha-8080-1.5-true")),
        ("$$(A)", json!("$(A)")),
        ("$$$(A)", json!("$alpha")),
        ("$(UNKNOWN) and $(A)", json!("$(UNKNOWN) and alpha")),
        ("$(A", json!("$(A")),
        ("cost: 5$", json!("cost: 5$")),
        ("$é$(A)", json!("$éalpha")),
        ("$x", json!("$x")),
        ("", json!("")),
    ];
    for (input, want) in cases {
        assert_eq!(expand(input, &lookup), want, "input {input:?}");
    }
}

#[test]
fn field_paths_split_like_kustomize() {
    assert_eq!(
        split_field_path("spec.ports[0].protocol"),
        ["spec", "ports", "0", "protocol"]
    );
    assert_eq!(
        split_field_path("metadata.annotations.[a.b/c]"),
        ["metadata", "annotations", "a.b/c"]
    );
    assert_eq!(
        split_field_path("spec.containers.[name=x.y].image"),
        ["spec", "containers", "[name=x.y]", "image"]
    );
    assert_eq!(split_field_path("data.a\\.b"), ["data", "a.b"]);
    assert_eq!(split_field_path("items[2]"), ["items", "2"]);
}

#[test]
fn field_paths_select_list_elements_by_key() {
    let d = res(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "ia"}, {"name": "b", "image": "ib"}
        ]}}}
    }));
    assert_eq!(
        field_value(&d.obj, "spec.template.spec.containers.[name=b].image"),
        Some(&json!("ib"))
    );
    assert_eq!(
        field_value(&d.obj, "spec.template.spec.containers[1].name"),
        Some(&json!("b"))
    );
    assert_eq!(
        field_value(&d.obj, "spec.template.spec.containers[5].name"),
        None
    );
}
