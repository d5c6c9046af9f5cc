use super::*;
use crate::loader::LoadRestrictions;
use goyaml::parse_documents;
use serde_json::json;

fn resmap(yaml: &str) -> ResMap {
    let mut map = ResMap::new();
    for doc in parse_documents(yaml).unwrap() {
        map.append(Resource::new(doc.as_object().cloned().unwrap()))
            .unwrap();
    }
    map
}

fn entries(yaml: &str) -> Vec<Value> {
    match parse_documents(yaml).unwrap().into_iter().next().unwrap() {
        Value::Array(items) => items,
        other => panic!("not a list: {other}"),
    }
}

fn loader_in(dir: &Path) -> Loader {
    Loader::new(dir, LoadRestrictions::None).unwrap()
}

/// Runs inline replacements over `resources` and returns the objects.
fn run(resources: &str, replacements: &str) -> Result<Vec<Value>, ReplacementError> {
    let dir = tempfile::tempdir().unwrap();
    let mut map = resmap(resources);
    apply_replacements(
        &mut map,
        &entries(replacements),
        &loader_in(dir.path()),
        dir.path(),
    )?;
    Ok(map.iter().map(|r| Value::Object(r.obj.clone())).collect())
}

fn run_ok(resources: &str, replacements: &str) -> Vec<Value> {
    run(resources, replacements).unwrap_or_else(|e| panic!("unexpected error: {e}"))
}

fn run_err(resources: &str, replacements: &str) -> String {
    match run(resources, replacements) {
        Ok(out) => panic!("expected an error, got {out:?}"),
        Err(e) => e.to_string(),
    }
}

const APP: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  host: db.internal
  port: "5432"
  flag: "true"
  triple: a-b-c
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    tier: front
spec:
  replicas: 1
  template:
    spec:
      automountServiceAccountToken: false
      containers:
      - name: main
        image: web:1.0
        env:
        - name: DB_HOST
          value: placeholder
        - name: DB_PORT
          value: "0"
        resources:
          limits:
            cpu: "1"
      - name: sidecar
        image: proxy:2.0
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: store
  namespace: data
  labels:
    tier: back
spec:
  replicas: 2
  template:
    spec:
      containers:
      - name: main
        image: store:1.0
"#;

#[test]
fn copies_a_value_into_list_elements_matched_by_key() {
    let out = run_ok(
        APP,
        r#"
- source: {kind: ConfigMap, name: settings, fieldPath: data.host}
  targets:
  - select: {kind: Deployment}
    fieldPaths:
    - spec.template.spec.containers.[name=main].env.[name=DB_HOST].value
"#,
    );
    assert_eq!(
        out[1]["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"],
        json!("db.internal")
    );
    // Untouched objects stay untouched.
    assert_eq!(out[2], Value::Object(resmap(APP).as_slice()[2].obj.clone()));
}

#[test]
fn scalar_targets_keep_their_type_and_created_fields_resolve_theirs() {
    let out = run_ok(
        APP,
        r#"
- source: {kind: ConfigMap, fieldPath: data.port}
  targets:
  - select: {kind: Deployment}
    fieldPaths:
    - spec.replicas
    - spec.template.spec.containers.0.env.1.value
    - spec.template.spec.containers.1.ports.0.containerPort
    options: {create: true}
- source: {kind: ConfigMap, fieldPath: data.flag}
  targets:
  - select: {kind: Deployment}
    fieldPaths: [spec.template.spec.automountServiceAccountToken]
- source: {kind: StatefulSet, fieldPath: spec.replicas}
  targets:
  - select: {kind: ConfigMap}
    fieldPaths: [data.host]
- sourceValue: "0755"
  targets:
  - select: {kind: ConfigMap}
    fieldPaths: [data.mode]
    options: {create: true}
"#,
    );
    let spec = &out[1]["spec"];
    assert_eq!(spec["replicas"], json!(5432));
    let containers = &spec["template"]["spec"]["containers"];
    assert_eq!(containers[0]["env"][1]["value"], json!("5432"));
    assert_eq!(containers[1]["ports"][0]["containerPort"], json!(5432));
    assert_eq!(
        spec["template"]["spec"]["automountServiceAccountToken"],
        json!(true)
    );
    assert_eq!(out[0]["data"]["host"], json!("2"));
    assert_eq!(out[0]["data"]["mode"], json!(493));
}

#[test]
fn a_non_numeric_value_cannot_go_into_a_number() {
    let err = run_err(
        APP,
        r#"
- source: {kind: ConfigMap, fieldPath: data.host}
  targets:
  - select: {kind: Deployment}
    fieldPaths: [spec.replicas]
"#,
    );
    assert!(err.contains("\"spec.replicas\""), "{err}");
    assert!(err.contains("Deployment.v1.apps/web"), "{err}");
    assert!(!err.contains("db.internal"), "value leaked: {err}");
}

#[test]
fn maps_are_copied_whole_and_replace_maps() {
    let out = run_ok(
        APP,
        r#"
- source: {kind: Deployment, fieldPath: spec.template.spec.containers.0.resources}
  targets:
  - select: {kind: StatefulSet}
    fieldPaths:
    - spec.template.spec.containers.0.resources
    options: {create: true}
- source: {kind: Deployment, fieldPath: metadata.labels}
  targets:
  - select: {kind: StatefulSet}
    fieldPaths: [metadata.labels]
"#,
    );
    assert_eq!(
        out[2]["spec"]["template"]["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "1"}})
    );
    assert_eq!(out[2]["metadata"]["labels"], json!({"tier": "front"}));
}

#[test]
fn source_delimiter_picks_one_part() {
    let out = run_ok(
        APP,
        r#"
- source:
    kind: ConfigMap
    fieldPath: data.triple
    options: {delimiter: "-", index: 2}
  targets:
  - select: {kind: Deployment}
    fieldPaths: [metadata.annotations.part]
    options: {create: true}
"#,
    );
    assert_eq!(out[1]["metadata"]["annotations"]["part"], json!("c"));
    let err = run_err(
        APP,
        r#"
- source:
    kind: ConfigMap
    fieldPath: data.triple
    options: {delimiter: "-", index: 3}
  targets:
  - select: {kind: Deployment}
"#,
    );
    assert!(err.contains("options.index 3 is out of bounds"), "{err}");
    assert!(err.contains("ConfigMap"), "{err}");
    assert!(!err.contains("a-b-c"), "value leaked: {err}");
    let err = run_err(
        APP,
        r#"
- source:
    kind: ConfigMap
    fieldPath: data
    options: {delimiter: "-"}
  targets:
  - select: {kind: Deployment}
"#,
    );
    assert!(err.contains("delimiter option can only be used with scalar nodes"));
}

#[test]
fn target_delimiter_replaces_prepends_or_appends() {
    let out = run_ok(
        APP,
        r#"
- sourceValue: "2.5"
  targets:
  - select: {kind: Deployment}
    fieldPaths: [spec.template.spec.containers.1.image]
    options: {delimiter: ":", index: 1}
- sourceValue: registry.local
  targets:
  - select: {kind: StatefulSet}
    fieldPaths: [spec.template.spec.containers.0.image]
    options: {delimiter: "/", index: -1}
- sourceValue: tail
  targets:
  - select: {kind: ConfigMap}
    fieldPaths: [data.triple]
    options: {delimiter: "-", index: 7}
"#,
    );
    assert_eq!(
        out[1]["spec"]["template"]["spec"]["containers"][1]["image"],
        json!("proxy:2.5")
    );
    assert_eq!(
        out[2]["spec"]["template"]["spec"]["containers"][0]["image"],
        json!("registry.local/store:1.0")
    );
    assert_eq!(out[0]["data"]["triple"], json!("a-b-c-tail"));
    let err = run_err(
        APP,
        r#"
- sourceValue: x
  targets:
  - select: {kind: Deployment}
    fieldPaths: [spec.template]
    options: {delimiter: ":"}
"#,
    );
    assert!(err.contains("delimiter option can only be used with scalar nodes"));
}

#[test]
fn created_fields_accumulate_delimited_parts() {
    let resources = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: one}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: two}
---
apiVersion: v1
kind: Secret
metadata: {name: three}
"#;
    let stamp = |name: &str| {
        format!(
            r#"
- source: {{kind: ConfigMap, name: {name}}}
  targets:
  - select: {{kind: ConfigMap|Secret}}
    reject: [{{name: {name}}}]
    fieldPaths: [metadata.annotations.seen-by]
    options: {{delimiter: ",", index: -1, create: true}}
"#
        )
    };
    let out = run_ok(resources, &(stamp("one") + &stamp("two")));
    let seen = |i: usize| out[i]["metadata"]["annotations"]["seen-by"].clone();
    assert_eq!(seen(0), json!("two,"));
    assert_eq!(seen(1), json!("one,"));
    assert_eq!(seen(2), json!("two,one,"));
}

#[test]
fn source_must_match_exactly_one_object() {
    let err = run_err(
        APP,
        "- source: {kind: ConfigMap, name: nope}\n  targets: [{select: {kind: Deployment}}]\n",
    );
    assert_eq!(
        err,
        "nothing selected by ConfigMap.[noVer].[noGrp]/nope.[noNs]"
    );
    let err = run_err(
        APP,
        "- source: {group: apps}\n  targets: [{select: {kind: Deployment}}]\n",
    );
    assert_eq!(
        err,
        "multiple matches for selector [noKind].[noVer].apps/[noName].[noNs]"
    );
    // Source fields are exact, not regexes.
    let err = run_err(
        APP,
        "- source: {kind: Config.*}\n  targets: [{select: {kind: Deployment}}]\n",
    );
    assert!(err.starts_with("nothing selected by"), "{err}");
    let err = run_err(
        APP,
        "- source: {kind: ConfigMap, fieldPath: data.absent}\n  targets: [{select: {kind: Deployment}}]\n",
    );
    assert_eq!(
        err,
        "fieldPath `data.absent` is missing for replacement source ConfigMap.[noVer].[noGrp]/[noName].[noNs]"
    );
}

#[test]
fn source_matches_default_namespace_and_previous_names() {
    let mut map = resmap(APP);
    map.as_mut_vec()[0].set_name("prod-settings");
    let replacements: Vec<Replacement> = serde_json::from_value(json!([
        {"source": {"kind": "ConfigMap", "name": "settings", "namespace": "default",
                    "fieldPath": "metadata.name"},
         "targets": [{"select": {"kind": "Deployment"},
                      "fieldPaths": ["metadata.annotations.config"],
                      "options": {"create": true}}]},
        {"source": {"kind": "StatefulSet", "namespace": "data", "fieldPath": "metadata.name"},
         "targets": [{"select": {"name": "settings"},
                      "fieldPaths": ["data.store"]}]}
    ]))
    .unwrap();
    let err = apply_list(&mut map, &replacements).unwrap_err();
    // The second target matches the renamed ConfigMap by its old name, but data.store is
    // missing and create is off.
    assert_eq!(
        err.to_string(),
        "unable to find field \"data.store\" in replacement target ConfigMap.v1/prod-settings.[noNs]"
    );
    assert_eq!(
        map.as_slice()[1].annotation("config"),
        Some("prod-settings")
    );
}

#[test]
fn targets_select_by_regex_labels_and_reject() {
    let set_marker = |target: &str| {
        let replacements = format!(
            "- sourceValue: hit\n  targets:\n  - {target}\n    fieldPaths: [metadata.annotations.m]\n    options: {{create: true}}\n"
        );
        run_ok(APP, &replacements)
            .iter()
            .map(|o| o["metadata"]["annotations"]["m"] == json!("hit"))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        set_marker("select: {kind: .*Set|Deployment}"),
        [false, true, true]
    );
    assert_eq!(set_marker("select: {kind: Set}"), [false, false, false]);
    assert_eq!(
        set_marker("select: {group: apps, version: v1}"),
        [false, true, true]
    );
    assert_eq!(
        set_marker("select: {labelSelector: tier=back}"),
        [false, false, true]
    );
    assert_eq!(
        set_marker("select: {}\n    reject: [{kind: ConfigMap}, {labelSelector: tier=front}]"),
        [false, false, true]
    );
    // A reject with both id fields and labels rejects on either.
    assert_eq!(
        set_marker("select: {}\n    reject: [{kind: ConfigMap, labelSelector: tier=back}]"),
        [false, true, false]
    );
    // Target namespaces compare as written: an unset namespace is not "default".
    assert_eq!(
        set_marker("select: {namespace: default}"),
        [false, false, false]
    );
    assert_eq!(
        set_marker("select: {namespace: da.*}"),
        [false, false, true]
    );
}

#[test]
fn the_source_object_can_be_a_target() {
    let out = run_ok(
        APP,
        r#"
- source: {kind: ConfigMap, fieldPath: data.host}
  targets:
  - select: {kind: ConfigMap}
    fieldPaths: [data.copy]
    options: {create: true}
"#,
    );
    assert_eq!(out[0]["data"]["copy"], json!("db.internal"));
}

#[test]
fn replacements_run_in_order() {
    let out = run_ok(
        APP,
        r#"
- sourceValue: first
  targets:
  - select: {kind: ConfigMap}
    fieldPaths: [data.host]
- source: {kind: ConfigMap, fieldPath: data.host}
  targets:
  - select: {kind: StatefulSet}
    fieldPaths: [metadata.annotations.h]
    options: {create: true}
"#,
    );
    assert_eq!(out[2]["metadata"]["annotations"]["h"], json!("first"));
}

#[test]
fn missing_target_fields() {
    let target = |path: &str, create: bool| {
        format!(
            "- sourceValue: v\n  targets:\n  - select: {{kind: Deployment}}\n    fieldPaths: [\"{path}\"]\n    options: {{create: {create}}}\n"
        )
    };
    assert_eq!(
        run_err(APP, &target("spec.paused", false)),
        "unable to find field \"spec.paused\" in replacement target Deployment.v1.apps/web.[noNs]"
    );
    let err = run_err(
        APP,
        &target("spec.template.spec.containers.[name=nope].image", false),
    );
    assert!(err.starts_with("unable to find field"), "{err}");
    let err = run_err(APP, &target("spec.template.spec.volumes.3.name", true));
    assert_eq!(
        err,
        "unable to find or create field \"spec.template.spec.volumes.3.name\" in replacement \
         target Deployment.v1.apps/web.[noNs]: index 3 specified but only 0 elements found"
    );
    let err = run_err(APP, &target("spec.replicas.deeper", true));
    assert!(err.contains("or create"), "{err}");
    let out = run_ok(
        APP,
        &target(
            "spec.template.spec.containers.*.env.[name=EXTRA].value",
            true,
        ),
    );
    let containers = &out[1]["spec"]["template"]["spec"]["containers"];
    assert_eq!(
        containers[0]["env"][2],
        json!({"name": "EXTRA", "value": "v"})
    );
    assert_eq!(
        containers[1]["env"],
        json!([{"name": "EXTRA", "value": "v"}])
    );
}

#[test]
fn wildcards_reach_every_list_element() {
    let out = run_ok(
        APP,
        r#"
- sourceValue: Always
  targets:
  - select: {kind: Deployment|StatefulSet}
    fieldPaths: [spec.template.spec.containers.*.imagePullPolicy]
    options: {create: true}
"#,
    );
    for (i, n) in [(1, 2), (2, 1)] {
        let containers = out[i]["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap();
        assert_eq!(containers.len(), n);
        assert!(containers.iter().all(|c| c["imagePullPolicy"] == "Always"));
    }
}

#[test]
fn structured_text_inside_a_string_field() {
    let resources = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  annotations:
    backend: '{"ports": {"http": "old"}}'
data:
  app.json: |-
    {
      "db": {"port": 1, "host": "x"}
    }
"#;
    let out = run_ok(
        resources,
        r#"
- sourceValue: "6543"
  targets:
  - select: {kind: ConfigMap}
    fieldPaths: [data.app\.json.db.port]
- sourceValue: new-backend
  targets:
  - select: {kind: ConfigMap}
    fieldPaths: [metadata.annotations.backend.ports.http]
"#,
    );
    assert_eq!(
        out[0]["data"]["app.json"],
        json!("{\n  \"db\": {\n    \"host\": \"x\",\n    \"port\": 6543\n  }\n}")
    );
    assert_eq!(
        out[0]["metadata"]["annotations"]["backend"],
        json!("{\"ports\":{\"http\":\"new-backend\"}}")
    );
}

#[test]
fn malformed_replacements() {
    let err = run_err(APP, "- targets: [{select: {kind: Deployment}}]\n");
    assert!(err.contains("must specify a source and at least one target"));
    let err = run_err(APP, "- sourceValue: x\n");
    assert!(err.contains("must specify a source and at least one target"));
    let err = run_err(APP, "- sourceValue: x\n  targets: []\n");
    assert!(err.contains("must specify a source and at least one target"));
    let err = run_err(
        APP,
        "- sourceValue: x\n  source: {kind: ConfigMap}\n  targets: [{fieldPaths: [a]}]\n",
    );
    assert!(err.contains("mutually exclusive"));
    let err = run_err(APP, "- sourceValue: x\n  targets: [{fieldPaths: [a]}]\n");
    assert!(err.contains("target must specify resources to select"));
    let err = run_err(
        APP,
        "- sourceValue: x\n  targets: [{select: {name: \"(\"}}]\n",
    );
    assert!(err.contains("invalid name regex"), "{err}");
    let err = run_err(APP, "- sourceValue: x\n  bogus: 1\n  targets: []\n");
    assert!(
        err.contains("replacements entry 0") && err.contains("bogus"),
        "{err}"
    );
}

#[test]
fn entries_from_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("one.yaml"),
        "source: {kind: ConfigMap, fieldPath: data.host}\nnote: ignored\ntargets:\n- select: {kind: StatefulSet}\n  fieldPaths: [metadata.annotations.a]\n  options: {create: true}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("many.yaml"),
        "- sourceValue: b\n  targets: [{select: {kind: StatefulSet}, fieldPaths: [metadata.annotations.b], options: {create: true}}]\n- sourceValue: c\n  targets: [{select: {kind: StatefulSet}, fieldPaths: [metadata.annotations.c], options: {create: true}}]\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("scalar.yaml"), "just text\n").unwrap();
    let loader = loader_in(dir.path());
    let mut map = resmap(APP);
    let list = entries("- path: one.yaml\n- path: many.yaml\n");
    apply_replacements(&mut map, &list, &loader, dir.path()).unwrap();
    let store = &map.as_slice()[2];
    assert_eq!(store.annotation("a"), Some("db.internal"));
    assert_eq!(store.annotation("b"), Some("b"));
    assert_eq!(store.annotation("c"), Some("c"));

    let both = entries("- path: one.yaml\n  source: {kind: ConfigMap}\n");
    let err = apply_replacements(&mut map, &both, &loader, dir.path()).unwrap_err();
    assert!(matches!(err, ReplacementError::PathAndInline { index: 0 }));
    let err = apply_replacements(
        &mut map,
        &entries("- path: scalar.yaml\n"),
        &loader,
        dir.path(),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("replacements file scalar.yaml:"),
        "{err}"
    );
    let err = apply_replacements(
        &mut map,
        &entries("- path: absent.yaml\n"),
        &loader,
        dir.path(),
    )
    .unwrap_err();
    assert!(matches!(err, ReplacementError::Load { .. }));
}

#[test]
fn builtin_transformer_config() {
    let dir = tempfile::tempdir().unwrap();
    let loader = loader_in(dir.path());
    let config = parse_documents(
        r#"
apiVersion: builtin
kind: ReplacementTransformer
metadata: {name: copy-spec}
replacements:
- source: {kind: Deployment, fieldPath: spec.template.spec}
  targets:
  - select: {kind: StatefulSet}
    unknownField: tolerated
    fieldPaths: [spec.template.spec]
"#,
    )
    .unwrap()
    .remove(0);
    let mut map = resmap(APP);
    apply_builtin_replacement_transformer(
        &mut map,
        config.as_object().unwrap(),
        &loader,
        dir.path(),
    )
    .unwrap();
    assert_eq!(
        map.as_slice()[2].obj["spec"]["template"]["spec"],
        map.as_slice()[1].obj["spec"]["template"]["spec"]
    );
    let bad =
        json!({"kind": "ReplacementTransformer", "metadata": {"name": "x"}, "replacements": 3});
    let err = apply_builtin_replacement_transformer(
        &mut map,
        bad.as_object().unwrap(),
        &loader,
        dir.path(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "ReplacementTransformer x: replacements must be a list"
    );
    let empty = json!({"kind": "ReplacementTransformer"});
    apply_builtin_replacement_transformer(
        &mut map,
        empty.as_object().unwrap(),
        &loader,
        dir.path(),
    )
    .unwrap();
}
