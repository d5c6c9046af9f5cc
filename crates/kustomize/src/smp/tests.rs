use super::*;
use crate::smp_schema::CustomSchema;

fn obj(yaml: &str) -> Object {
    match goyaml::parse_documents(yaml).unwrap().remove(0) {
        Value::Object(map) => map,
        other => panic!("not a map: {other}"),
    }
}

fn merged(target: &str, patch: &str) -> Value {
    let mut t = obj(target);
    let gvk = super::super::resource::Resource::new(t.clone()).gvk();
    strategic_merge(&mut t, &obj(patch), &gvk).unwrap();
    Value::Object(t)
}

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap_or("").to_string())
        .collect()
}

const DEPLOY: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n\
        spec: {replicas: 1, template: {spec: {containers: [\
        {name: a, image: 'a:1', env: [{name: X, value: '1'}]}, {name: b, image: 'b:1'}]}}}\n";

#[test]
fn maps_merge_and_null_deletes() {
    let out = merged(
        DEPLOY,
        "kind: Deployment\nmetadata: {name: web, labels: {x: z}}\nspec: {replicas: null, paused: true}\n",
    );
    assert_eq!(out["metadata"]["labels"]["x"], "z");
    assert!(out["spec"].get("replicas").is_none());
    assert_eq!(out["spec"]["paused"], true);
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"][0]["image"],
        "a:1"
    );
}

#[test]
fn keyed_lists_merge_with_new_items_first() {
    let out = merged(
        DEPLOY,
        "spec: {template: {spec: {containers: [{name: c, image: 'c:1'}, \
             {name: a, image: 'a:2', env: [{name: YV, value: '2'}]}]}}}\n",
    );
    let containers = &out["spec"]["template"]["spec"]["containers"];
    assert_eq!(names(containers), ["c", "a", "b"]);
    assert_eq!(containers[1]["image"], "a:2");
    assert_eq!(names(&containers[1]["env"]), ["YV", "X"]);
}

#[test]
fn element_and_list_directives() {
    let out = merged(
        DEPLOY,
        "spec: {template: {spec: {containers: [{name: b, $patch: delete}]}}}\n",
    );
    assert_eq!(names(&out["spec"]["template"]["spec"]["containers"]), ["a"]);
    let out = merged(
        DEPLOY,
        "spec: {template: {spec: {containers: [{$patch: replace}, {name: z, image: z}]}}}\n",
    );
    let containers = &out["spec"]["template"]["spec"]["containers"];
    assert_eq!(names(containers), ["z"]);
    let out = merged(
        DEPLOY,
        "spec: {template: {spec: {containers: [{name: a, $patch: delete}, {name: b, $patch: delete}]}}}\n",
    );
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        serde_json::json!([])
    );
    let out = merged(DEPLOY, "spec:\n  template:\n    $patch: delete\n");
    assert!(out["spec"].get("template").is_none());
    let out = merged(DEPLOY, "spec:\n  $patch: replace\n  replicas: 5\n");
    assert_eq!(out["spec"], serde_json::json!({"replicas": 5}));
    let out = merged(DEPLOY, "spec:\n  $patch: merge\n  replicas: 5\n");
    assert_eq!(out["spec"]["replicas"], 5);
    assert!(out["spec"].get("$patch").is_none());
    let mut t = obj(DEPLOY);
    let gvk = Gvk::from_api_version("apps/v1", "Deployment");
    let err = strategic_merge(&mut t, &obj("spec:\n  $patch: frob\n"), &gvk).unwrap_err();
    assert!(err.to_string().contains("frob") && err.to_string().contains("spec"));
}

#[test]
fn delete_patch_is_recognised_and_clears_the_target() {
    let patch = obj("$patch: delete\nkind: Deployment\nmetadata: {name: web}\n");
    assert!(is_delete_patch(&patch));
    assert!(!is_delete_patch(&obj("kind: Deployment\n")));
    let mut t = obj(DEPLOY);
    strategic_merge(
        &mut t,
        &patch,
        &Gvk::from_api_version("apps/v1", "Deployment"),
    )
    .unwrap();
    assert!(t.is_empty());
}

#[test]
fn lists_without_strategy_are_replaced() {
    let target = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: w}\n\
            spec: {template: {spec: {tolerations: [{key: a}], \
            containers: [{name: a, envFrom: [{configMapRef: {name: x}}]}]}}}\n";
    let out = merged(
        target,
        "spec: {template: {spec: {tolerations: [{key: b}], \
             containers: [{name: a, envFrom: [{secretRef: {name: sec}}]}]}}}\n",
    );
    let spec = &out["spec"]["template"]["spec"];
    assert_eq!(spec["tolerations"], serde_json::json!([{"key": "b"}]));
    assert_eq!(
        spec["containers"][0]["envFrom"],
        serde_json::json!([{"secretRef": {"name": "sec"}}])
    );
}

#[test]
fn kinds_without_schema_replace_every_list() {
    let crd = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, finalizers: [a]}\n\
            spec:\n  containers: [{name: a, image: a}, {name: b, image: b}]\n";
    let out = merged(
        crd,
        "metadata: {finalizers: [b]}\nspec:\n  containers: [{name: a, image: x}]\n",
    );
    assert_eq!(
        out["spec"]["containers"],
        serde_json::json!([{"name": "a", "image": "x"}])
    );
    assert_eq!(out["metadata"]["finalizers"], serde_json::json!(["b"]));
    let hpa = "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: h}\n\
            spec:\n  metrics: [{type: Resource}]\n";
    let out = merged(hpa, "spec:\n  metrics: [{type: Pods}]\n");
    assert_eq!(
        out["spec"]["metrics"],
        serde_json::json!([{"type": "Pods"}])
    );
}

#[test]
fn primitive_lists_with_merge_strategy_are_unioned() {
    let out = merged(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, finalizers: [a, b]}\n",
        "metadata: {finalizers: [c, a]}\n",
    );
    assert_eq!(
        out["metadata"]["finalizers"],
        serde_json::json!(["c", "a", "b"])
    );
}

#[test]
fn service_ports_merge_by_port_and_protocol() {
    let svc = "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n\
            spec:\n  ports:\n  - {port: 80, targetPort: 8080, protocol: TCP}\n";
    let out = merged(
        svc,
        "spec:\n  ports:\n  - {port: 443, targetPort: 8443, name: https}\n",
    );
    let ports = out["spec"]["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 2);
    assert_eq!(ports[0]["port"], 443);
    assert_eq!(ports[1]["port"], 80);
    let out = merged(
        svc,
        "spec:\n  ports:\n  - {port: 80, targetPort: 9090, protocol: TCP}\n",
    );
    assert_eq!(
        out["spec"]["ports"],
        serde_json::json!([
            {"port": 80, "targetPort": 9090, "protocol": "TCP"}])
    );
    // A patch port without protocol matches no port with one (kyaml's rule).
    let out = merged(svc, "spec:\n  ports:\n  - {port: 80, targetPort: 80}\n");
    assert_eq!(
        out["spec"]["ports"],
        serde_json::json!([
            {"port": 80, "targetPort": 8080, "protocol": "TCP"}])
    );
}

#[test]
fn container_ports_with_mixed_protocols_keep_their_order() {
    let target = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\n\
            spec: {template: {spec: {containers: [{name: c, ports: [\
            {containerPort: 8500, name: http}, \
            {containerPort: 8301, protocol: TCP, name: t}, \
            {containerPort: 8301, protocol: UDP, name: u}, \
            {containerPort: 8302, name: w}]}]}}}\n";
    let before = obj(target);
    let out = merged(target, "metadata: {labels: {a: b}}\n");
    assert_eq!(out["spec"], before["spec"]);
    assert_eq!(out["metadata"]["labels"]["a"], "b");
}

#[test]
fn volumes_and_nested_nulls() {
    let target = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: w}\n\
            spec:\n  template:\n    spec:\n      volumes:\n      - {name: v, emptyDir: {}}\n";
    let out = merged(
        target,
        "spec:\n  template:\n    spec:\n      volumes:\n      - name: v\n        emptyDir: null\n        gcePersistentDisk: {pdName: d}\n",
    );
    assert_eq!(
        out["spec"]["template"]["spec"]["volumes"],
        serde_json::json!([{"name": "v", "gcePersistentDisk": {"pdName": "d"}}])
    );
}

#[test]
fn added_maps_lose_nulls_and_directives() {
    let out = merged(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
        "data: {a: '1', b: null}\nextra: {$patch: delete}\n",
    );
    assert_eq!(out["data"], serde_json::json!({"a": "1"}));
    assert!(out.get("extra").is_none());
}

#[test]
fn type_mismatch_names_the_field() {
    let mut t = obj(DEPLOY);
    let gvk = Gvk::from_api_version("apps/v1", "Deployment");
    let err = strategic_merge(&mut t, &obj("spec: {template: [1]}\n"), &gvk).unwrap_err();
    assert!(err.to_string().contains("spec.template"), "{err}");
}

const WIDGET_SCHEMA: &str = "definitions:\n  w.Widget:\n    properties:\n      spec:\n        $ref: '#/definitions/w.Spec'\n    x-kubernetes-group-version-kind:\n    - {group: example.com, version: v1, kind: Widget}\n  w.Spec:\n    properties:\n      parts:\n        type: array\n        items: {$ref: '#/definitions/w.Part'}\n        x-kubernetes-patch-strategy: merge\n        x-kubernetes-patch-merge-key: id\n      pod:\n        $ref: '#/definitions/io.k8s.api.core.v1.PodTemplateSpec'\n  w.Part:\n    properties:\n      tags:\n        type: array\n        x-kubernetes-patch-strategy: merge\n";

const WIDGET: &str = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n\
        spec:\n  parts:\n  - {id: a, size: 1, tags: [x]}\n  - {id: b, size: 2}\n\
        \x20 pod: {spec: {containers: [{name: c, image: 'c:1'}]}}\n";

fn merged_with(target: &str, patch: &str, schemas: SchemaSet<'_>) -> Value {
    let mut t = obj(target);
    let gvk = Gvk::from_api_version("example.com/v1", "Widget");
    strategic_merge_with(&mut t, &obj(patch), &gvk, schemas).unwrap();
    Value::Object(t)
}

#[test]
fn custom_schema_merges_by_its_merge_key() {
    let custom = CustomSchema::parse(WIDGET_SCHEMA, "widget.yaml").unwrap();
    let patch = "spec:\n  parts:\n  - {id: b, size: 3}\n  - {id: new}\n  - {id: a, tags: [y]}\n\
            \x20 pod: {spec: {containers: [{name: c, image: 'c:2'}]}}\n";
    let out = merged_with(WIDGET, patch, SchemaSet::with_custom(&custom));
    assert_eq!(
        out["spec"]["parts"],
        serde_json::json!([
            {"id": "b", "size": 3},
            {"id": "new"},
            {"id": "a", "size": 1, "tags": ["y", "x"]}
        ])
    );
    // A `$ref` to a Kubernetes type the document does not define uses the built-in one.
    assert_eq!(
        out["spec"]["pod"]["spec"]["containers"],
        serde_json::json!([{"name": "c", "image": "c:2"}])
    );
    // Without the document, the kind is unknown and lists are replaced.
    let out = merged_with(WIDGET, patch, SchemaSet::builtin());
    assert_eq!(out["spec"]["parts"].as_array().unwrap().len(), 3);
    assert_eq!(
        out["spec"]["parts"][0],
        serde_json::json!({"id": "b", "size": 3})
    );
    assert_eq!(
        out["spec"]["parts"][2],
        serde_json::json!({"id": "a", "tags": ["y"]})
    );
}

#[test]
fn custom_schema_applies_to_embedded_objects_of_its_kinds() {
    let custom = CustomSchema::parse(WIDGET_SCHEMA, "widget.yaml").unwrap();
    let target = "apiVersion: v1\nkind: List\nmetadata: {name: l}\nitems:\n- \
            {apiVersion: example.com/v1, kind: Widget, spec: {parts: [{id: a}]}}\n";
    let mut t = obj(target);
    let gvk = Gvk::from_api_version("example.com/v1", "Holder");
    let patch =
        obj("items:\n- {apiVersion: example.com/v1, kind: Widget, spec: {parts: [{id: z}]}}\n");
    strategic_merge_with(&mut t, &patch, &gvk, SchemaSet::with_custom(&custom)).unwrap();
    // `items` has no schema, so the list is replaced whole; the replacement is the patch's.
    assert_eq!(
        t["items"][0]["spec"]["parts"],
        serde_json::json!([{"id": "z"}])
    );
    let mut holder = obj(
        "spec: {widget: {apiVersion: example.com/v1, kind: Widget, spec: {parts: [{id: a}]}}}\n",
    );
    let patch = obj("spec: {widget: {spec: {parts: [{id: z}]}}}\n");
    strategic_merge_with(&mut holder, &patch, &gvk, SchemaSet::with_custom(&custom)).unwrap();
    assert_eq!(
        holder["spec"]["widget"]["spec"]["parts"],
        serde_json::json!([{"id": "z"}, {"id": "a"}])
    );
}

#[test]
fn empty_nulls_are_dropped_where_the_merge_walks_and_kept_elsewhere() {
    let mut target = obj(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n\
            spec: {replicas: null, template: {spec: {affinity: {nodeAffinity: {a: null}},\
            containers: [{name: c, args: null}], hostAliases: [{ip: null}]}}}\n",
    );
    let key = |k: &str| PathStep::Key(k.to_string());
    let spec =
        |rest: Vec<PathStep>| [vec![key("spec"), key("template"), key("spec")], rest].concat();
    let paths = vec![
        vec![key("spec"), key("replicas")],
        spec(vec![key("affinity"), key("nodeAffinity"), key("a")]),
        // containers are merged by name: their elements are walked.
        spec(vec![key("containers"), PathStep::Index(0), key("args")]),
        // hostAliases are merged by ip: walked too, but the path may also run out.
        spec(vec![key("hostAliases"), PathStep::Index(3), key("ip")]),
        // a path to a field that is not null is left alone.
        vec![key("metadata"), key("name")],
    ];
    let gvk = Gvk {
        group: "apps".into(),
        version: "v1".into(),
        kind: "Deployment".into(),
    };
    drop_empty_nulls(&mut target, &paths, &gvk, SchemaSet::builtin());
    let value = Value::Object(target);
    assert!(value["spec"].get("replicas").is_none());
    assert_eq!(
        value["spec"]["template"]["spec"]["affinity"]["nodeAffinity"],
        serde_json::json!({})
    );
    assert!(
        value["spec"]["template"]["spec"]["containers"][0]
            .get("args")
            .is_none()
    );
    assert_eq!(
        value["spec"]["template"]["spec"]["hostAliases"][0]["ip"],
        Value::Null
    );
    assert_eq!(value["metadata"]["name"], "web");
}

#[test]
fn empty_nulls_inside_lists_without_merge_keys_stay() {
    let mut target = obj("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n\
            other: {list: [{a: null}]}\n");
    let paths = vec![vec![
        PathStep::Key("other".into()),
        PathStep::Key("list".into()),
        PathStep::Index(0),
        PathStep::Key("a".into()),
    ]];
    let gvk = Gvk {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
    };
    drop_empty_nulls(&mut target, &paths, &gvk, SchemaSet::builtin());
    assert_eq!(target["other"]["list"][0]["a"], Value::Null);
}
