use super::*;
use serde_json::json;

fn obj(value: Value) -> Object {
    match value {
        Value::Object(map) => map,
        _ => panic!("not a map"),
    }
}

fn deployment() -> Object {
    obj(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "template": {"spec": {"containers": [
            {"name": "a", "image": "a:1"}]}}}}))
}

fn list_doc() -> Object {
    obj(
        json!({"kind": "ConfigMap", "spec": {"list": ["a", "b", "c"],
        "obj": {"k": "v", "a/b": 1, "m~n": 2}, "num": 1, "fl": 1.5, "s": "x<y", "n": null}}),
    )
}

/// Applies `ops` to `doc`, returning the patched document or the error message.
fn patched(doc: Object, ops: &str) -> Result<Value, String> {
    let mut doc = doc;
    apply_json6902(&mut doc, ops, "p.yaml")
        .map(|()| Value::Object(doc))
        .map_err(|e| e.to_string())
}

fn error_of(doc: Object, ops: &str) -> String {
    match patched(doc, ops) {
        Ok(v) => panic!("{ops:?} applied: {v}"),
        Err(e) => e,
    }
}

#[test]
fn applies_yaml_and_json_ops() {
    let mut d = deployment();
    apply_json6902(
        &mut d,
        "- op: replace\n  path: /spec/replicas\n  value: 3\n\
         - op: add\n  path: /spec/template/spec/containers/-\n  value: {name: b, image: b:1}\n\
         - op: add\n  path: /metadata/labels\n  value: {app: web}\n",
        "patch.yaml",
    )
    .unwrap();
    assert_eq!(d["spec"]["replicas"], json!(3));
    assert_eq!(d["spec"]["template"]["spec"]["containers"][1]["name"], "b");
    assert_eq!(d["metadata"]["labels"], json!({"app": "web"}));

    apply_json6902(
        &mut d,
        r#"[{"op": "copy", "from": "/metadata/name", "path": "/metadata/labels/name"},
            {"op": "move", "from": "/spec/replicas", "path": "/spec/count"},
            {"op": "test", "path": "/spec/count", "value": 3},
            {"op": "remove", "path": "/spec/template/spec/containers/0"}]"#,
        "inline patch",
    )
    .unwrap();
    assert_eq!(d["metadata"]["labels"]["name"], "web");
    assert_eq!(d["spec"]["count"], json!(3));
    assert!(d["spec"].get("replicas").is_none());
    assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["name"], "b");
}

#[test]
fn replace_of_a_missing_object_member_adds_it() {
    let doc = obj(json!({"spec": {"jwtRules": [{"issuer": "x"}]}}));
    let out = patched(
        doc,
        "- op: replace\n  path: /spec/jwtRules/0/jwksUri\n  value: http://x\n",
    )
    .unwrap();
    assert_eq!(
        out["spec"]["jwtRules"][0],
        json!({"issuer": "x", "jwksUri": "http://x"})
    );
    // An array element must exist.
    let err = error_of(
        list_doc(),
        "- {op: replace, path: /spec/list/3, value: 1}\n",
    );
    assert!(
        err.ends_with(
            "operation 0: replace operation does not apply: doc is missing key: \
             /spec/list/3: missing value"
        ),
        "{err}"
    );
    // The parent must exist.
    let err = error_of(list_doc(), "- {op: replace, path: /spec/no/x, value: 1}\n");
    assert!(
        err.ends_with("doc is missing path: /spec/no/x: missing value"),
        "{err}"
    );
}

#[test]
fn remove_of_a_missing_member_fails_as_kustomize_says() {
    let err = error_of(list_doc(), "- {op: remove, path: /spec/missing}\n");
    assert!(
        err.ends_with(
            "operation 0: error in remove for path: '/spec/missing': \
             Unable to remove nonexistent key: missing: missing value"
        ),
        "{err}"
    );
    assert!(err.contains("p.yaml"), "{err}");
    let err = error_of(list_doc(), "- {op: remove, path: /spec/list/-}\n");
    assert!(
        err.ends_with(
            "error in remove for path: '/spec/list/-': strconv.Atoi: parsing \"-\": invalid syntax"
        ),
        "{err}"
    );
    let err = error_of(list_doc(), "- {op: remove, path: /spec/no/x}\n");
    assert!(
        err.ends_with(
            "remove operation does not apply: doc is missing path: \"/spec/no/x\": missing value"
        ),
        "{err}"
    );
    // A member holding null exists.
    let out = patched(list_doc(), "- {op: remove, path: /spec/n}\n").unwrap();
    assert!(out["spec"].get("n").is_none());
}

#[test]
fn array_indices_are_read_as_go_atoi_and_may_be_negative() {
    let out = patched(
        list_doc(),
        "- {op: replace, path: /spec/list/-1, value: Z}\n\
         - {op: add, path: /spec/list/-1, value: W}\n\
         - {op: add, path: /spec/list/-5, value: V}\n\
         - {op: add, path: /spec/list/+1, value: P}\n\
         - {op: add, path: /spec/list/01, value: Q}\n\
         - {op: add, path: /spec/list/7, value: E}\n\
         - {op: add, path: /spec/list/-, value: F}\n\
         - {op: remove, path: /spec/list/-2}\n",
    )
    .unwrap();
    assert_eq!(
        out["spec"]["list"],
        json!(["V", "Q", "P", "a", "b", "Z", "W", "F"])
    );
    let err = error_of(list_doc(), "- {op: add, path: /spec/list/5, value: W}\n");
    assert!(
        err.ends_with(
            "error in add for path: '/spec/list/5': Unable to access invalid index: 5: \
             invalid index referenced"
        ),
        "{err}"
    );
    let err = error_of(list_doc(), "- {op: add, path: /spec/list/-5, value: W}\n");
    assert!(
        err.ends_with("invalid index: -5: invalid index referenced"),
        "{err}"
    );
    let err = error_of(list_doc(), "- {op: add, path: /spec/list/x, value: W}\n");
    assert!(
        err.ends_with(
            "error in add for path: '/spec/list/x': value was not a proper array index: 'x': \
             strconv.Atoi: parsing \"x\": invalid syntax"
        ),
        "{err}"
    );
    // `-` is no index for traversal.
    let err = error_of(list_doc(), "- {op: add, path: /spec/list/-/x, value: W}\n");
    assert!(err.contains("doc is missing path"), "{err}");
}

#[test]
fn paths_are_split_and_decoded_as_the_library_does() {
    let out = patched(
        list_doc(),
        "- {op: add, path: /spec/obj/a~1b, value: 5}\n\
         - {op: add, path: /spec/obj/m~0n, value: 6}\n\
         - {op: add, path: /spec/a~2b, value: 7}\n\
         - {op: add, path: /spec/t~01, value: 8}\n\
         - {op: add, path: spec/top, value: 9}\n",
    )
    .unwrap();
    assert_eq!(out["spec"]["obj"]["a/b"], json!(5));
    assert_eq!(out["spec"]["obj"]["m~n"], json!(6));
    assert_eq!(out["spec"]["a~2b"], json!(7));
    assert_eq!(out["spec"]["t~1"], json!(8));
    assert_eq!(out["top"], json!(9), "the first token is ignored");
    let err = error_of(list_doc(), "- {op: add, path: nothing, value: 1}\n");
    assert!(
        err.ends_with(
            "add operation does not apply: doc is missing path: \"nothing\": missing value"
        ),
        "{err}"
    );
    // Through a scalar or null nothing is found.
    for path in ["/spec/num/x", "/spec/n/x"] {
        let err = error_of(
            list_doc(),
            &format!("- {{op: add, path: {path}, value: 1}}\n"),
        );
        assert!(err.contains("doc is missing path"), "{err}");
    }
}

#[test]
fn operations_are_checked_only_when_applied() {
    for (ops, message) in [
        ("- {op: frob, path: /x}\n", "Unexpected kind: frob"),
        ("- {a: b}\n", "Unexpected kind: unknown"),
        ("[null]", "Unexpected kind: unknown"),
        ("- {op: 3, path: /x}\n", "Unexpected kind: unknown"),
        (
            "- {op: add, path: 5}\n",
            "add operation failed to decode path: missing value",
        ),
        (
            "- {op: replace, value: 1}\n",
            "replace operation failed to decode path: operation missing path field: missing value",
        ),
        (
            "- {op: test, path: [a]}\n",
            "test operation failed to decode path: json: cannot unmarshal array into Go value of type string",
        ),
        (
            "- {op: move, path: /x}\n",
            "move operation failed to decode from: operation, missing from field: missing value",
        ),
        (
            "- {op: copy, from: /spec/num}\n",
            "copy operation failed to decode path: missing value",
        ),
        (
            "- {op: replace, path: '', value: 5}\n",
            "replace operation value must be object or array: %!w(<nil>)",
        ),
    ] {
        // Parsing accepts them all.
        parse_ops(ops).unwrap();
        let err = error_of(list_doc(), ops);
        assert!(
            err.ends_with(&format!("operation 0: {message}")),
            "{ops:?}: {err}"
        );
    }
    // A missing value is null.
    let out = patched(list_doc(), "- {op: add, path: /spec/nov}\n").unwrap();
    assert_eq!(out["spec"]["nov"], Value::Null);
}

#[test]
fn copy_and_move_follow_the_library() {
    // A missing member copies as null.
    let out = patched(
        list_doc(),
        "- {op: copy, from: /spec/none, path: /spec/c}\n",
    )
    .unwrap();
    assert_eq!(out["spec"]["c"], Value::Null);
    let out = patched(
        list_doc(),
        "- {op: copy, from: /spec/list/0, path: /spec/list/-}\n",
    )
    .unwrap();
    assert_eq!(out["spec"]["list"], json!(["a", "b", "c", "a"]));
    for (ops, message) in [
        (
            "- {op: copy, from: /spec/num, path: /spec/nope/x}\n",
            "copy operation does not apply: doc is missing destination path: /spec/nope/x: missing value",
        ),
        (
            "- {op: copy, from: /spec/nope/x, path: /spec/y}\n",
            "copy operation does not apply: doc is missing from path: /spec/nope/x: missing value",
        ),
        (
            "- {op: copy, from: /spec/list/9, path: /spec/y}\n",
            "error in copy for from: '/spec/list/9': Unable to access invalid index: 9: invalid index referenced",
        ),
        (
            "- {op: copy, from: /spec/num, path: /spec/list/9}\n",
            "error while adding value during copy: Unable to access invalid index: 9: invalid index referenced",
        ),
        (
            "- {op: move, from: /spec/list/9, path: /spec/x}\n",
            "error in move for path: '9': Unable to access invalid index: 9: invalid index referenced",
        ),
        (
            "- {op: move, from: /spec/nope, path: /spec/x}\n",
            "error in move for path: 'nope': Unable to remove nonexistent key: nope: missing value",
        ),
        (
            "- {op: move, from: /spec/obj, path: /spec/obj/k2}\n",
            "move operation does not apply: doc is missing destination path: /spec/obj/k2: missing value",
        ),
    ] {
        let err = error_of(list_doc(), ops);
        assert!(
            err.ends_with(&format!("operation 0: {message}")),
            "{ops:?}: {err}"
        );
    }
}

#[test]
fn test_compares_json_text_as_the_library_does() {
    let passes = [
        "- {op: test, path: /spec/num, value: 1.0}\n",
        "- {op: test, path: /spec/fl, value: 1.50}\n",
        "- {op: test, path: /spec/s, value: x<y}\n",
        "- {op: test, path: /spec/n, value: null}\n",
        "- {op: test, path: /spec/n}\n",
        "- {op: test, path: /spec/missing}\n",
        "- {op: test, path: /spec/missing, value: null}\n",
        "- {op: test, path: /spec/obj, value: {m~n: 2, a/b: 1, k: v}}\n",
        r#"[{"op":"test","path":"/spec/s","value":"x\u003cy"}]"#,
        r#"[{"op":"test","path":"/spec/obj","value":{"k" : "v","a/b":1,"m~n":2}}]"#,
        r#"[{"op":"test","path":"/spec/list","value":["a","b","c"]}]"#,
        r#"[{"op":"test","path":"/spec/fl","value":1.5}]"#,
    ];
    for ops in passes {
        patched(list_doc(), ops).unwrap_or_else(|e| panic!("{ops:?}: {e}"));
    }
    let fails = [
        (
            r#"[{"op":"test","path":"/spec/s","value":"x<y"}]"#,
            "/spec/s",
        ),
        (
            r#"[{"op":"test","path":"/spec/num","value":1.0}]"#,
            "/spec/num",
        ),
        (
            r#"[{"op":"test","path":"/spec/num","value":"1"}]"#,
            "/spec/num",
        ),
        ("- {op: test, path: /spec/num}\n", "/spec/num"),
        (
            "- {op: test, path: /spec/missing, value: 0}\n",
            "/spec/missing",
        ),
        (
            "- {op: test, path: /spec/list, value: [a, b]}\n",
            "/spec/list",
        ),
    ];
    for (ops, path) in fails {
        let err = error_of(list_doc(), ops);
        assert!(
            err.ends_with(&format!(
                "operation 0: testing value {path} failed: test failed"
            )),
            "{ops:?}: {err}"
        );
    }
    let err = error_of(list_doc(), "- {op: test, path: /spec/list/x, value: 1}\n");
    assert!(
        err.ends_with(
            "error in test for path: '/spec/list/x': strconv.Atoi: parsing \"x\": invalid syntax"
        ),
        "{err}"
    );
    // A value added raw keeps its text; a copy of it is written as Go writes JSON.
    let ops = r#"[{"op":"add","path":"/spec/r","value":1.0},
        {"op":"test","path":"/spec/r","value":1.0},
        {"op":"add","path":"/spec/h","value":"<"},
        {"op":"copy","from":"/spec/h","path":"/spec/h2"},
        {"op":"test","path":"/spec/h2","value":"\u003c"}]"#;
    patched(list_doc(), ops).unwrap();
}

#[test]
fn the_patched_document_goes_through_json_numbers() {
    let doc = obj(
        json!({"kind": "X", "spec": {"big": 9007199254740993_u64, "f": 1.0,
        "huge": 12345678901234567890_u64, "half": 0.5}}),
    );
    let out = patched(doc, r#"[{"op":"add","path":"/spec/x","value":1.0e3}]"#).unwrap();
    assert_eq!(out["spec"]["big"], json!(9007199254740992_u64));
    assert_eq!(out["spec"]["f"], json!(1));
    assert_eq!(out["spec"]["x"], json!(1000));
    assert_eq!(out["spec"]["huge"], json!(12345678901234567000_u64));
    assert_eq!(out["spec"]["half"], json!(0.5));
    let err = error_of(
        list_doc(),
        r#"[{"op":"add","path":"/spec/x","value":1e400}]"#,
    );
    assert!(err.contains("cannot unmarshal number 1e400"), "{err}");
    // Keys come out sorted.
    let out = patched(obj(json!({"b": 1, "a": {"z": 1, "y": 2}})), "[]").unwrap();
    let keys: Vec<_> = out.as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["a", "b"]);
}

#[test]
fn the_whole_document_may_be_replaced_or_tested() {
    let out = patched(
        list_doc(),
        "- {op: replace, path: '', value: {kind: Other, a: 1}}\n\
         - {op: test, path: '', value: {a: 1, kind: Other}}\n",
    )
    .unwrap();
    assert_eq!(out, json!({"a": 1, "kind": "Other"}));
    let err = error_of(list_doc(), "- {op: test, path: '', value: {a: 1}}\n");
    assert!(err.ends_with("testing value  failed: test failed"), "{err}");
    let err = error_of(list_doc(), "- {op: replace, path: '', value: [1]}\n");
    assert!(err.contains("cannot unmarshal array"), "{err}");
}

#[test]
fn errors_leave_the_target_intact() {
    let mut d = deployment();
    let before = d.clone();
    let err = apply_json6902(
        &mut d,
        "- op: replace\n  path: /spec/replicas\n  value: 2\n\
         - op: remove\n  path: /spec/missing\n",
        "p.yaml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("p.yaml")
            && err.contains("operation 1: error in remove for path: '/spec/missing'"),
        "{err}"
    );
    assert_eq!(d, before);
}

#[test]
fn the_text_must_be_a_list_of_maps() {
    let cases = [
        ("- [op, add]\n", "operation 0: expected a map, got a list"),
        ("[1]", "operation 0: expected a map, got a number"),
        (
            "op: add\npath: /a\nvalue: 1\n",
            "got a map (a single operation must still be written as a list",
        ),
        (
            r#"{"op": "add", "path": "/a", "value": 1}"#,
            "a single operation must still be written as a list",
        ),
        ("a: b\n", "expected a list of operations, got a map"),
        ("[{]", "JSON 6902 patch: "),
    ];
    for (text, needle) in cases {
        let err = parse_ops(text).unwrap_err().to_string();
        assert!(err.starts_with("JSON 6902 patch: "), "{err}");
        assert!(err.contains(needle), "{text:?}: {err}");
    }
    // Empty YAML is no operations; YAML scalars are YAML 1.1.
    assert!(parse_ops("# nothing\n").unwrap().is_empty());
    let out = patched(list_doc(), "- {op: add, path: /spec/y, value: yes}\n").unwrap();
    assert_eq!(out["spec"]["y"], json!(true));
}

#[test]
fn self_copies_cannot_grow_a_document_without_bound() {
    let mut d = deployment();
    let before = d.clone();
    let ops: String = (0..40)
        .map(|i| format!("- op: copy\n  from: /spec\n  path: /spec/c{i}\n"))
        .collect();
    let err = apply_json6902(&mut d, &ops, "bomb.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("bomb.yaml") && err.contains("would exceed"),
        "{err}"
    );
    // The work is bounded by the budget, not by the patch: each copy doubles the spec, so
    // the refusal comes at the copy that would pass the budget (the spec's few hundred
    // bytes doubled past MIN_PATCHED_BYTES), long before the 40th.
    let refused_at: usize = err
        .split("operation ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|index| index.parse().ok())
        .unwrap_or_else(|| panic!("no operation index in {err}"));
    let spec_bytes = serde_json::to_string(&before["spec"]).map_or(0, |s| s.len());
    let doublings_to_budget = (MIN_PATCHED_BYTES / spec_bytes.max(1)).ilog2() as usize;
    assert!(
        refused_at <= doublings_to_budget + 2,
        "refused at operation {refused_at}, the budget is passed after about {doublings_to_budget} copies: {err}"
    );
    assert!(err.contains("(copy)"), "{err}");
    assert_eq!(d, before, "the target is left as it was");
    // A few copies are fine.
    let ops: String = (0..3)
        .map(|i| format!("- op: copy\n  from: /spec\n  path: /spec/c{i}\n"))
        .collect();
    apply_json6902(&mut d, &ops, "ok.yaml").unwrap();
    assert!(d["spec"]["c2"]["c1"]["c0"].is_object());
}

#[test]
fn operations_cannot_nest_a_document_without_bound() {
    let mut d = deployment();
    // Each copy puts the spec one level deeper under itself: depth doubles.
    let mut ops = String::new();
    let mut path = String::from("/spec");
    for _ in 0..200 {
        ops.push_str(&format!(
            "- op: copy\n  from: /spec/replicas\n  path: {path}/n\n"
        ));
        ops.push_str(&format!("- op: add\n  path: {path}/m\n  value: {{}}\n"));
        path.push_str("/m");
    }
    let err = apply_json6902(&mut d, &ops, "deep.yaml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("nest more than"), "{err}");
}
