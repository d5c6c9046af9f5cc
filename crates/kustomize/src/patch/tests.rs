use super::*;
use crate::loader::LoadRestrictions;
use crate::resource::Behavior;
use crate::resource::test_resource as resource;
use serde_json::json;

fn resmap() -> ResMap {
    let mut m = ResMap::new();
    let mut deploy = resource(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "app", "image": "app:1"}]}}}}));
    deploy.needs_hash_suffix = true;
    deploy.behavior = Behavior::Merge;
    deploy.origin = Some(crate::resource::Origin::file("deploy.yaml"));
    m.append(deploy).unwrap();
    m.append(resource(
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "worker"},
            "spec": {"replicas": 1}}),
    ))
    .unwrap();
    m.append(resource(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm"}, "data": {"a": "1"}})))
        .unwrap();
    m
}

struct Fixture {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    loader: Loader,
}

fn fixture(files: &[(&str, &str)]) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    for (name, text) in files {
        std::fs::write(root.join(name), text).unwrap();
    }
    let loader = Loader::new(&root, LoadRestrictions::RootOnly).unwrap();
    Fixture {
        _dir: dir,
        root,
        loader,
    }
}

impl Fixture {
    /// Applies `patch` to `m` with the fixture's loader and the builtin schemas.
    fn apply(&self, m: &mut ResMap, patch: Patch) -> Result<(), PatchError> {
        apply_patches(m, &[patch], &self.loader, &self.root, SchemaSet::builtin())
    }
}

fn patch(value: Value) -> Patch {
    serde_json::from_value(value).unwrap()
}

fn find<'a>(m: &'a ResMap, name: &str) -> &'a Resource {
    m.iter().find(|r| r.name() == name).unwrap()
}

#[test]
fn untargeted_smp_patches_the_resource_of_its_id_keeping_state() {
    let f = fixture(&[(
        "p.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n\
             ---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {b: '2'}\n",
    )]);
    let mut m = resmap();
    f.apply(&mut m, patch(json!({"path": "p.yaml"}))).unwrap();
    let web = find(&m, "web");
    assert_eq!(web.obj["spec"]["replicas"], 3);
    assert!(web.needs_hash_suffix);
    assert_eq!(web.behavior, Behavior::Merge);
    assert_eq!(
        web.origin.as_ref().map(|o| o.path.as_str()),
        Some("deploy.yaml")
    );
    assert!(web.prev_ids.is_empty());
    assert_eq!(find(&m, "cm").obj["data"], json!({"a": "1", "b": "2"}));
    assert_eq!(find(&m, "worker").obj["spec"]["replicas"], 1);
}

#[test]
fn untargeted_smp_finds_renamed_resources_and_reports_misses() {
    let f = fixture(&[]);
    let mut m = resmap();
    m.as_mut_vec()[0].set_name("prod-web");
    let inline =
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 5}\n";
    f.apply(&mut m, patch(json!({"patch": inline}))).unwrap();
    assert_eq!(find(&m, "prod-web").obj["spec"]["replicas"], 5);

    let missing =
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: nope}\nspec: {replicas: 5}\n";
    let err = f
        .apply(&mut m, patch(json!({"patch": missing})))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("inline patch") && err.contains("Deployment.v1.apps/nope"),
        "{err}"
    );
    // The group must match too.
    let other_group =
        "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: worker}\n";
    assert!(
        f.apply(&mut m, patch(json!({"patch": other_group})))
            .is_err()
    );
}

#[test]
fn targeted_smp_applies_to_every_selected_resource_keeping_names() {
    let f = fixture(&[]);
    let mut m = resmap();
    let inline =
        "kind: Deployment\nmetadata: {name: ignored, namespace: elsewhere}\nspec: {replicas: 7}\n";
    let p = patch(json!({"patch": inline, "target": {"kind": "Deployment"}}));
    f.apply(&mut m, p).unwrap();
    for name in ["web", "worker"] {
        let r = find(&m, name);
        assert_eq!(r.obj["spec"]["replicas"], 7);
        assert_eq!(r.namespace(), "");
    }
    assert!(m.iter().all(|r| r.name() != "ignored"));
    // An empty selection is not an error.
    let p = patch(json!({"patch": inline, "target": {"kind": "StatefulSet"}}));
    f.apply(&mut m, p).unwrap();
    // Several documents may not share a target.
    let two = format!("{inline}---\n{inline}");
    let p = patch(json!({"patch": two, "target": {"kind": "Deployment"}}));
    assert!(f.apply(&mut m, p).is_err());
}

#[test]
fn name_and_kind_changes_need_options_and_are_remembered() {
    let f = fixture(&[]);
    let mut m = resmap();
    let inline = "kind: StatefulSet\nmetadata: {name: renamed}\n";
    let p = patch(json!({"patch": inline, "target": {"name": "worker"}}));
    f.apply(&mut m, p).unwrap();
    let worker = find(&m, "worker");
    assert_eq!(worker.kind(), "Deployment");

    let p = patch(json!({"patch": inline, "target": {"name": "worker"},
            "options": {"allowNameChange": true, "allowKindChange": true}}));
    f.apply(&mut m, p).unwrap();
    let renamed = find(&m, "renamed");
    assert_eq!(renamed.kind(), "StatefulSet");
    assert_eq!(renamed.prev_ids.len(), 1);
    assert_eq!(renamed.prev_ids[0].name, "worker");
    assert_eq!(renamed.org_id().gvk.kind, "Deployment");
}

#[test]
fn delete_directive_removes_the_resource() {
    let f = fixture(&[]);
    let mut m = resmap();
    let inline = "$patch: delete\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n";
    f.apply(&mut m, patch(json!({"patch": inline}))).unwrap();
    assert_eq!(m.len(), 2);
    let p = patch(
        json!({"patch": "$patch: delete\nkind: Deployment\nmetadata: {name: x}\n",
            "target": {"kind": "Deployment"}}),
    );
    f.apply(&mut m, p).unwrap();
    assert!(m.is_empty());
}

#[test]
fn json_patches_need_a_target() {
    let f = fixture(&[(
        "ops.yaml",
        "- op: replace\n  path: /spec/replicas\n  value: 4\n",
    )]);
    let mut m = resmap();
    let p = patch(json!({"path": "ops.yaml", "target": {"name": "w.*"}}));
    f.apply(&mut m, p).unwrap();
    assert_eq!(find(&m, "web").obj["spec"]["replicas"], 4);
    assert_eq!(find(&m, "worker").obj["spec"]["replicas"], 4);
    assert_eq!(find(&m, "web").prev_ids.len(), 1);

    let p = patch(json!({"patch": r#"[{"op": "add", "path": "/data/c", "value": "3"}]"#}));
    let err = f.apply(&mut m, p).unwrap_err().to_string();
    assert!(err.contains("target"), "{err}");

    let p = patch(
        json!({"patch": "- op: remove\n  path: /data/zz\n", "target": {"kind": "ConfigMap"}}),
    );
    let err = f.apply(&mut m, p).unwrap_err().to_string();
    assert!(
        err.contains("/data/zz") && err.contains("ConfigMap"),
        "{err}"
    );
}

#[test]
fn json_patch_shaped_text_gets_json_patch_errors_and_is_never_merged() {
    let f = fixture(&[]);
    let mut m = resmap();
    let before: Vec<_> = m.iter().map(|r| r.obj.clone()).collect();
    let cases = [
        (
            "op: add\npath: /data/x\nvalue: '1'\n",
            "a single operation must still be written as a list",
        ),
        (
            r#"{"op": "add", "path": "/data/x", "value": "1"}"#,
            "a single operation",
        ),
        (
            "- op: frob\n  path: /data/x\n",
            "operation 0: Unexpected kind: frob",
        ),
        ("- [op, add]\n", "operation 0: expected a map, got a list"),
        (
            "data:\n  x: y\n",
            "strategic merge patch document 0: missing kind",
        ),
        ("kind: ConfigMap\ndata:\n  x: y\n", "missing metadata.name"),
    ];
    for (text, needle) in cases {
        let p = patch(json!({"patch": text, "target": {"kind": "ConfigMap"}}));
        let err = f.apply(&mut m, p).unwrap_err().to_string();
        assert!(err.contains(needle), "{text:?}: {err}");
        if !needle.contains("strategic") && !needle.contains("metadata.name") {
            assert!(err.contains("JSON 6902 patch"), "{err}");
        }
    }
    let after: Vec<_> = m.iter().map(|r| r.obj.clone()).collect();
    assert_eq!(before, after);
}

#[test]
fn patch_entries_need_exactly_one_of_path_and_patch() {
    let f = fixture(&[("p.yaml", "kind: ConfigMap\nmetadata: {name: cm}\n")]);
    let mut m = resmap();
    assert!(f.apply(&mut m, patch(json!({}))).is_err());
    let both = patch(json!({"path": "p.yaml", "patch": "kind: ConfigMap\n"}));
    assert!(f.apply(&mut m, both).is_err());
    let missing = patch(json!({"path": "nope.yaml"}));
    let err = f.apply(&mut m, missing).unwrap_err().to_string();
    assert!(err.contains("nope.yaml"), "{err}");
    let garbage = patch(json!({"patch": "a: [b\n"}));
    assert!(f.apply(&mut m, garbage).is_err());
}

#[test]
fn patches_strategic_merge_takes_files_and_inline_patches_in_order() {
    let f = fixture(&[
        (
            "p1.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 2}\n",
        ),
        ("empty.yaml", ""),
        ("comments.yaml", "# nothing\n"),
    ]);
    let mut m = resmap();
    let entries = vec![
        "p1.yaml".to_string(),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 6}\n"
            .to_string(),
    ];
    apply_strategic_merge_patches(&mut m, &entries, &f.loader, &f.root, SchemaSet::builtin())
        .unwrap();
    assert_eq!(find(&m, "web").obj["spec"]["replicas"], 6);

    let empty = vec!["empty.yaml".to_string(), "comments.yaml".to_string()];
    let err =
        apply_strategic_merge_patches(&mut m, &empty, &f.loader, &f.root, SchemaSet::builtin())
            .unwrap_err()
            .to_string();
    assert!(err.contains("patch appears to be empty"), "{err}");
    apply_strategic_merge_patches(&mut m, &[], &f.loader, &f.root, SchemaSet::builtin()).unwrap();
}

#[test]
fn patches_json6902_requires_a_named_target() {
    let f = fixture(&[]);
    let mut m = resmap();
    let ops = "- op: add\n  path: /metadata/labels/x\n  value: z\n";
    let p = patch(json!({"patch": ops, "target": {"kind": "Deployment"}}));
    assert!(apply_json6902_patches(&mut m, &[p], &f.loader, &f.root).is_err());
    let p = patch(json!({"patch": ops, "target": {"kind": "Deployment", "name": "web"}}));
    apply_json6902_patches(&mut m, &[p], &f.loader, &f.root).unwrap();
    assert_eq!(find(&m, "web").obj["metadata"]["labels"]["x"], "z");
    assert!(find(&m, "web").prev_ids.is_empty());
}

#[test]
fn builtin_plugin_configs() {
    let f = fixture(&[]);
    let mut m = resmap();
    let config = |v: Value| v.as_object().cloned().unwrap();
    apply_builtin_patch_transformer(
            &mut m,
            "PatchTransformer",
            &config(json!({"apiVersion": "builtin", "kind": "PatchTransformer",
                "metadata": {"name": "p"}, "patch": "kind: ConfigMap\nmetadata: {name: x}\ndata: {p: t}\n",
                "target": {"kind": "ConfigMap"}})),
            &f.loader,
            &f.root,
            SchemaSet::builtin(),
        )
        .unwrap();
    assert_eq!(find(&m, "cm").obj["data"]["p"], "t");
    apply_builtin_patch_transformer(
            &mut m,
            "PatchStrategicMergeTransformer",
            &config(json!({"patches": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {q: s}\n"})),
            &f.loader,
            &f.root,
            SchemaSet::builtin(),
        )
        .unwrap();
    assert_eq!(find(&m, "cm").obj["data"]["q"], "s");
    apply_builtin_patch_transformer(
        &mut m,
        "PatchJson6902Transformer",
        &config(json!({"target": {"kind": "ConfigMap", "name": "cm"},
                "jsonOp": r#"[{"op": "remove", "path": "/data/a"}]"#})),
        &f.loader,
        &f.root,
        SchemaSet::builtin(),
    )
    .unwrap();
    assert!(find(&m, "cm").obj["data"].get("a").is_none());
    assert!(
        apply_builtin_patch_transformer(
            &mut m,
            "LabelTransformer",
            &config(json!({})),
            &f.loader,
            &f.root,
            SchemaSet::builtin(),
        )
        .is_err()
    );
    assert!(
        apply_builtin_patch_transformer(
            &mut m,
            "PatchStrategicMergeTransformer",
            &config(json!({})),
            &f.loader,
            &f.root,
            SchemaSet::builtin(),
        )
        .is_err()
    );
}
