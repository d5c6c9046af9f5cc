//! Property tests for the kustomize engine's parsers and patchers, which read untrusted
//! input from users' repositories: no input may panic, and patches obey their laws.

use goyaml as yaml;
use kustomize::kustfile::Kustomization;
use kustomize::resource::Gvk;
use kustomize::{json6902, smp, target};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// YAML-ish text rich in the characters that matter to YAML.
fn yamlish() -> impl Strategy<Value = String> {
    "(\\PC|\n|  |- |: |\\[|\\]|\\{|\\}|&a|\\*a|!!|<<|\\$patch|---|#|'|\")*"
}

/// Small JSON values of every shape.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        "[a-z]{0,4}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,3}|name|\\$patch", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => Map::from_iter([("value".to_string(), other)]),
    }
}

fn deployment_with(extra: Map<String, Value>) -> Map<String, Value> {
    let mut containers = vec![json!({"name": "app", "image": "nginx"})];
    // List items are merged by their merge key, so every container has one.
    let mut sidecar = extra.clone();
    sidecar.insert("name".into(), json!("sidecar"));
    containers.push(Value::Object(sidecar));
    object(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": extra},
        "spec": {"template": {"spec": {"containers": containers}}}
    }))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn kustomization_parsing_does_not_panic(text in yamlish()) {
        let _ = Kustomization::parse(&text, "kustomization.yaml");
        let _ = target::parse_resources(&text, "resources.yaml");
    }

    #[test]
    fn parsed_yaml_prints_back_to_the_same_documents(text in yamlish()) {
        if let Ok(docs) = yaml::parse_documents(&text) {
            let printed = yaml::to_yaml_stream(&docs);
            let reread = yaml::parse_documents(&printed);
            prop_assert_eq!(reread.ok(), Some(docs), "printed:\n{}", printed);
        }
    }

    #[test]
    fn strategic_merge_of_arbitrary_patches_does_not_panic(
        target in json_value(), patch in json_value()
    ) {
        let mut merged = deployment_with(object(target));
        let _ = smp::strategic_merge(&mut merged, &object(patch), &Gvk::from_api_version("apps/v1", "Deployment"));
    }

    #[test]
    fn merging_an_object_into_itself_changes_nothing(extra in json_value()) {
        let extra = object(extra);
        // Directives and nulls mean something in a patch; leave them out of the law.
        let clean: Map<String, Value> = extra
            .into_iter()
            .filter(|(k, v)| !k.starts_with('$') && !v.is_null())
            .collect();
        let base = deployment_with(clean);
        if !serde_json::to_string(&base).unwrap_or_default().contains("null")
            && !serde_json::to_string(&base).unwrap_or_default().contains("$patch")
        {
            let mut merged = base.clone();
            smp::strategic_merge(&mut merged, &base, &Gvk::from_api_version("apps/v1", "Deployment"))
                .expect("self-merge succeeds");
            prop_assert_eq!(merged, base);
        }
    }

    #[test]
    fn json_patches_of_arbitrary_text_do_not_panic(text in yamlish(), target in json_value()) {
        let mut target = object(target);
        let _ = json6902::apply_json6902(&mut target, &text, "patch.yaml");
    }
}
