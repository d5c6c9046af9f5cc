//! The build: a kustomize overlay end to end (what the controller applies must equal what the
//! reference `kustomize build` makes of the same tree with the Kustomization's fields laid over
//! it the way Flux lays them), custom resources after their definitions, and bad input or
//! broken overlays refused with a clear condition and nothing applied.

use super::*;

#[tokio::test]
async fn custom_resources_are_applied_after_their_definitions() {
    let f = Fixture::new("crds").await;
    let ns = f.ns();
    let group = format!("{ns}.example.com");
    let crd = format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.{group}\n\
         spec:\n  group: {group}\n  names: {{kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}}\n\
         \x20 scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n\
         \x20   schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true\n"
    );
    let extra_ns = format!("{ns}-extra");
    let widget = format!(
        "apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: {ns}\nspec:\n  size: 3\n"
    );
    let namespace = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {extra_ns}\n");
    f.create_source("repo").await;
    // Files are read in path order, so the custom resource comes before its definition.
    f.publish(
        1,
        &[
            ("deploy/a-widget.yaml", &widget),
            ("deploy/b-cm.yaml", &config_map(&extra_ns, "in-new-ns", "1")),
            ("deploy/c-crd.yaml", &crd),
            ("deploy/d-ns.yaml", &namespace),
        ],
    )
    .await;
    create_kustomization(&f.client, ns, "app", "repo", json!({})).await;
    wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::True,
        "CRD, namespace and custom resource applied",
    )
    .await;
    assert_eq!(
        inventory(&f.client, ns, "app").await,
        [
            format!("_widgets.{group}_apiextensions.k8s.io_CustomResourceDefinition"),
            format!("_{extra_ns}__Namespace"),
            format!("{extra_ns}_in-new-ns__ConfigMap"),
            format!("{ns}_w_{group}_Widget"),
        ],
        "inventory in apply order"
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(
        f.client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(&group, "v1", "Widget"),
            "widgets",
        ),
    );
    let w = widgets.get("w").await.expect("widget");
    assert_eq!(w.data["spec"]["size"], json!(3));

    Api::<Kustomization>::namespaced(f.client.clone(), ns)
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for(WAIT, "the CRD to be pruned", async || {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        let crds: Api<CustomResourceDefinition> = Api::all(f.client.clone());
        match crds.get_opt(&format!("widgets.{group}")).await {
            Ok(None) => Ok(()),
            Ok(Some(crd)) if crd.metadata.deletion_timestamp.is_some() => Ok(()),
            other => Err(format!("{:?}", other.map(|c| c.map(|c| c.metadata.name)))),
        }
    })
    .await;
}

#[tokio::test]
async fn bad_input_is_refused_with_a_clear_condition_and_nothing_applied() {
    let f = Fixture::new("bad-input").await;
    let ns = f.ns();
    f.create_source("repo").await;
    f.publish::<&str, &str>(
        1,
        &[
            ("deploy/a.yaml", &config_map(ns, "a", "1")),
            (
                "overlay/kustomization.yaml",
                "resources: [base]\nnamePrefx: dropped-as-flux-drops-it-\n",
            ),
            // A base is read by kustomize itself, strictly: the typo is refused there.
            (
                "overlay/base/kustomization.yaml",
                "resources: [cm.yaml]\nnamePrefx: x-\n",
            ),
            ("overlay/base/cm.yaml", &config_map(ns, "o", "1")),
            ("dup/one.yaml", &config_map(ns, "d", "1")),
            ("dup/two.yaml", &config_map(ns, "d", "2")),
        ],
    )
    .await;
    let cases = [
        (
            "escape",
            json!({"path": "../../etc"}),
            "ArtifactFailed",
            "escapes the artifact root",
        ),
        (
            "missing",
            json!({"path": "./nope"}),
            "ArtifactFailed",
            "kustomization path not found: stat ",
        ),
        (
            "overlay",
            json!({"path": "./overlay"}),
            "BuildFailed",
            "overlay/base/kustomization.yaml: invalid Kustomization: unknown field `namePrefx`",
        ),
        (
            "duplicate",
            json!({"path": "./dup"}),
            "BuildFailed",
            "already registered id: ConfigMap",
        ),
        (
            "post-build",
            json!({"postBuild": {"substitute": {"1x": "y"}}}),
            "BuildFailed",
            "'1x' var name is invalid",
        ),
        (
            "decryption",
            json!({"decryption": {"provider": "sops", "secretRef": {"name": "no-such-keys"}}}),
            "BuildFailed",
            "secrets \"no-such-keys\" not found",
        ),
        (
            "patches",
            json!({"patches": [{"patch": "x"}]}),
            "BuildFailed",
            "inline patch",
        ),
        (
            "kubeconfig",
            json!({"kubeConfig": {"secretRef": {"name": "remote"}}}),
            "ReconciliationFailed",
            "unable to read KubeConfig secret",
        ),
        (
            "cel-syntax",
            json!({"wait": true, "healthCheckExprs": [
                {"apiVersion": "example.com/v1", "kind": "Widget", "current": "status.phase =="}
            ]}),
            "InvalidCELExpression",
            "Reconciliation failed terminally due to configuration error: \
             failed to create custom status evaluator for healthchecks[0]: \
             failed to parse the expression Current: \
             failed to parse the CEL expression 'status.phase =='",
        ),
    ];
    for (name, extra, _, _) in &cases {
        create_kustomization(&f.client, ns, name, "repo", extra.clone()).await;
    }
    for (name, _, expected_reason, expected_message) in &cases {
        let (reason, message) = wait_ready_with(
            &f.client,
            ns,
            name,
            ConditionStatus::False,
            &format!("{name}: Ready=False"),
        )
        .await;
        assert_eq!(&reason, expected_reason, "{name}: {message}");
        assert!(message.contains(expected_message), "{name}: {message}");
    }
    // Every case stopped before the apply stage.
    assert!(config_map_names(&f.client, ns).await.is_empty());
    let api = Api::<Kustomization>::namespaced(f.client.clone(), ns);
    let cel = api
        .get("cel-syntax")
        .await
        .expect("ks")
        .status
        .expect("status");
    let stalled = cel
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Stalled")
        .expect("an invalid expression stalls the Kustomization");
    assert_eq!(stalled.reason, "InvalidCELExpression");
    for (name, ..) in &cases {
        let status = api.get(name).await.expect("ks").status.expect("status");
        assert!(
            status.inventory.is_none(),
            "{name}: no inventory without an apply"
        );
        assert!(status.last_applied_revision.is_none(), "{name}");
    }
}

/// The source tree of the kustomize tests, published whole as the artifact.
const KUSTOMIZE_FIXTURE: &str = "tests/fixtures/e2e-kustomize";

/// The overlay `spec.path` points at in the happy-path test.
const PROD_OVERLAY: &str = "overlays/prod";

/// The build fields of the Kustomization under test: a target namespace, an image override
/// of an image the overlay does not touch, and inline patches with targets (one JSON 6902
/// patch selecting by name, one strategic-merge patch selecting by label).
fn overlay_build_fields(ns: &str) -> Value {
    json!({
        "path": format!("./{PROD_OVERLAY}"),
        "targetNamespace": ns,
        "images": [
            {"name": "busybox", "newName": "registry.example.com/tools/busybox", "newTag": "1.37"}
        ],
        "patches": [
            {
                "patch": "- op: add\n  path: /spec/template/metadata/labels/tier\n  value: frontend\n",
                "target": {"kind": "Deployment", "name": "web"}
            },
            {
                "patch": "apiVersion: v1\nkind: Service\nmetadata:\n  name: any\n  annotations:\n    example.com/exposed: \"true\"\n",
                "target": {"kind": "Service", "labelSelector": "app.kubernetes.io/name=web"}
            }
        ]
    })
}

#[tokio::test]
async fn kustomize_overlay_is_applied_exactly_as_kustomize_builds_it() {
    let f = Fixture::new("kustomize-overlay").await;
    let ns = f.ns();
    let fields = overlay_build_fields(ns);
    let expected = reference_build(PROD_OVERLAY, &fields)
        .unwrap_or_else(|e| panic!("the reference kustomize must build the fixture: {e}"));
    assert_reference_used_every_feature(&expected, ns);

    f.create_source("repo").await;
    let files = kustomize_fixture_files();
    f.publish(1, &files).await;
    create_kustomization(&f.client, ns, "app", "repo", fields).await;
    let (reason, message) = wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::True,
        "the overlay to be applied",
    )
    .await;
    assert_eq!(reason, "ReconciliationSucceeded", "{message}");
    assert_eq!(message, format!("Applied revision: {}", f.revision(1)));

    // Every object kustomize builds is on the cluster, field for field.
    let mut mismatches = Vec::new();
    for object in &expected {
        let id = object_display(object);
        match live_object(&f.client, object).await {
            Some(live) => mismatches.extend(
                compare_with_live(object, &live)
                    .into_iter()
                    .map(|m| format!("{id}: {m}")),
            ),
            None => mismatches.push(format!("{id}: not found on the cluster")),
        }
    }
    assert!(
        mismatches.is_empty(),
        "applied objects differ from `kustomize build`:\n{}",
        mismatches.join("\n")
    );

    // The inventory lists exactly the built objects.
    let mut ids = inventory(&f.client, ns, "app").await;
    ids.sort();
    let mut expected_ids: Vec<String> = expected.iter().map(inventory_id).collect();
    expected_ids.sort();
    assert_eq!(ids, expected_ids);

    // The Deployment refers to the generated ConfigMap by its hashed name, which exists.
    let config_map_name = expected
        .iter()
        .find(|o| o["kind"] == "ConfigMap")
        .and_then(|o| o["metadata"]["name"].as_str())
        .expect("the build has a ConfigMap")
        .to_string();
    assert_hashed_name(&config_map_name, "prod-web-config-");
    assert_eq!(
        config_map_names(&f.client, ns).await,
        std::slice::from_ref(&config_map_name)
    );
    let deployment =
        Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(f.client.clone(), ns)
            .get("prod-web")
            .await
            .expect("the prefixed Deployment");
    let pod = deployment
        .spec
        .and_then(|s| s.template.spec)
        .expect("pod template spec");
    let env_from: Vec<String> = pod
        .containers
        .iter()
        .flat_map(|c| c.env_from.iter().flatten())
        .filter_map(|e| e.config_map_ref.as_ref().map(|r| r.name.clone()))
        .collect();
    assert_eq!(
        env_from,
        std::slice::from_ref(&config_map_name),
        "envFrom.configMapRef"
    );
    let volumes: Vec<String> = pod
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.config_map.as_ref().map(|c| c.name.clone()))
        .collect();
    assert_eq!(volumes, [config_map_name], "volumes[].configMap");
}

#[tokio::test]
async fn broken_overlays_fail_the_build_and_apply_nothing() {
    let f = Fixture::new("kustomize-broken").await;
    let ns = f.ns();
    // (Kustomization, overlay, what the message must name)
    let cases: [(&str, &str, &[&str]); 2] = [
        (
            "broken-patch",
            "overlays/broken-patch",
            &["no-such-deployment", "broken-patch"],
        ),
        (
            "broken-generator",
            "overlays/broken-generator",
            &["settings-that-do-not-exist.properties"],
        ),
    ];
    for (name, overlay, _) in &cases {
        let fields = json!({"path": format!("./{overlay}"), "targetNamespace": ns});
        assert!(
            reference_build(overlay, &fields).is_err(),
            "{name}: the reference kustomize must refuse {overlay} too"
        );
    }

    f.create_source("repo").await;
    let files = kustomize_fixture_files();
    f.publish(1, &files).await;
    for (name, overlay, _) in &cases {
        let fields = json!({"path": format!("./{overlay}"), "targetNamespace": ns});
        create_kustomization(&f.client, ns, name, "repo", fields).await;
    }
    for (name, _, named) in &cases {
        let (reason, message) = wait_ready_with(
            &f.client,
            ns,
            name,
            ConditionStatus::False,
            &format!("{name}: Ready=False"),
        )
        .await;
        assert_eq!(reason, "BuildFailed", "{name}: {message}");
        for word in named.iter() {
            assert!(
                message.contains(word),
                "{name}: the message must name {word:?}: {message}"
            );
        }
    }

    // Nothing from either Kustomization reached the cluster.
    assert!(config_map_names(&f.client, ns).await.is_empty());
    let deployments =
        Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(f.client.clone(), ns)
            .list(&Default::default())
            .await
            .expect("list deployments");
    assert!(deployments.items.is_empty(), "no Deployment may be applied");
    let services = Api::<k8s_openapi::api::core::v1::Service>::namespaced(f.client.clone(), ns)
        .list(&Default::default())
        .await
        .expect("list services");
    assert!(services.items.is_empty(), "no Service may be applied");
    let api = Api::<Kustomization>::namespaced(f.client.clone(), ns);
    for (name, ..) in &cases {
        let status = api.get(name).await.expect("ks").status.expect("status");
        assert!(status.inventory.is_none(), "{name}: no inventory");
        assert!(status.last_applied_revision.is_none(), "{name}");
        assert_eq!(
            status.last_attempted_revision,
            Some(f.revision(1)),
            "{name}"
        );
    }
}

/// Every file of the kustomize fixture tree as (path relative to the tree, content), in
/// path order.
fn kustomize_fixture_files() -> Vec<(String, String)> {
    fn walk(dir: &std::path::Path, root: &std::path::Path, out: &mut Vec<(String, String)>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
            .map(|entry| entry.expect("directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, root, out);
            } else {
                let relative = path.strip_prefix(root).expect("under the root");
                let content = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
                out.push((relative.to_string_lossy().into_owned(), content));
            }
        }
    }
    let root = support::repo_root().join(KUSTOMIZE_FIXTURE);
    let mut files = Vec::new();
    walk(&root, &root, &mut files);
    assert!(!files.is_empty(), "{} is empty", root.display());
    files
}

/// Lays a Kustomization's build fields over a kustomization file the way Flux's generator
/// does: `targetNamespace` becomes `namespace`; each image replaces the entry of the same
/// name or is appended; each patch is appended with its target.
fn flux_overlay(kustomization: &mut Value, fields: &Value) {
    let file = kustomization
        .as_object_mut()
        .expect("a kustomization file is a mapping");
    if let Some(ns) = fields["targetNamespace"].as_str() {
        file.insert("namespace".into(), json!(ns));
    }
    for image in fields["images"].as_array().into_iter().flatten() {
        let images = file
            .entry("images")
            .or_insert_with(|| json!([]))
            .as_array_mut()
            .expect("images is a list");
        match images.iter_mut().find(|i| i["name"] == image["name"]) {
            Some(existing) => *existing = image.clone(),
            None => images.push(image.clone()),
        }
    }
    for patch in fields["patches"].as_array().into_iter().flatten() {
        file.entry("patches")
            .or_insert_with(|| json!([]))
            .as_array_mut()
            .expect("patches is a list")
            .push(patch.clone());
    }
}

/// `kustomize build --reorder none` of `overlay` in a copy of the fixture tree whose
/// kustomization file carries Flux's overlay of `fields`; the objects, or the error output.
fn reference_build(overlay: &str, fields: &Value) -> Result<Vec<Value>, String> {
    let dir = tempfile::tempdir().expect("temp dir");
    for (path, content) in kustomize_fixture_files() {
        let target = dir.path().join(path);
        std::fs::create_dir_all(target.parent().expect("parent")).expect("mkdir");
        std::fs::write(target, content).expect("write fixture copy");
    }
    let file = dir.path().join(overlay).join("kustomization.yaml");
    let text = std::fs::read_to_string(&file).expect("overlay kustomization.yaml");
    let mut kustomization: Value = serde_saphyr::from_str(&text).expect("kustomization YAML");
    flux_overlay(&mut kustomization, fields);
    // JSON is YAML: kustomize reads it back as written.
    std::fs::write(
        &file,
        serde_json::to_string_pretty(&kustomization).expect("serialise"),
    )
    .expect("write kustomization.yaml");
    let output = Command::new(reference_kustomize())
        .args(["build", "--reorder", "none"])
        .arg(dir.path().join(overlay))
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", reference_kustomize().display()));
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let documents: Vec<Value> = serde_saphyr::from_multiple(&stdout).expect("kustomize output");
    Ok(documents.into_iter().filter(|d| !d.is_null()).collect())
}

/// Guards the fixture: the reference build shows every feature the test is about, so a
/// fixture or overlay that silently stopped exercising one is noticed.
fn assert_reference_used_every_feature(expected: &[Value], ns: &str) {
    let kinds: Vec<&str> = expected.iter().filter_map(|o| o["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        ["Deployment", "Service", "ConfigMap"],
        "{expected:#?}"
    );
    for object in expected {
        assert_eq!(
            object["metadata"]["namespace"],
            json!(ns),
            "targetNamespace"
        );
        let name = object["metadata"]["name"].as_str().unwrap_or("");
        assert!(name.starts_with("prod-web"), "namePrefix: {name}");
    }
    let deployment = &expected[0];
    assert_eq!(deployment["spec"]["replicas"], json!(3), "patch file");
    let template = &deployment["spec"]["template"];
    assert_eq!(
        template["metadata"]["labels"]["tier"],
        json!("frontend"),
        "inline patch"
    );
    let containers = &template["spec"]["containers"];
    assert_eq!(
        containers[0]["image"],
        json!("nginx:1.27"),
        "overlay images"
    );
    assert_eq!(
        containers[0]["env"][0],
        json!({"name": "ENVIRONMENT", "value": "production"}),
        "patch file"
    );
    assert_eq!(
        containers[1]["image"],
        json!("registry.example.com/tools/busybox:1.37"),
        "spec.images"
    );
    assert_eq!(
        expected[1]["metadata"]["annotations"]["example.com/exposed"],
        json!("true"),
        "inline patch by label selector"
    );
    assert_eq!(
        expected[2]["data"],
        json!({"GREETING": "hello", "LOG_LEVEL": "warn", "REGION": "eu-west-1"}),
        "configMapGenerator merge"
    );
}

/// Asserts `name` is `prefix` followed by a kustomize content hash.
fn assert_hashed_name(name: &str, prefix: &str) {
    let hash = name.strip_prefix(prefix).unwrap_or("");
    assert!(
        hash.len() == 10 && hash.chars().all(|c| c.is_ascii_alphanumeric()),
        "{name} is not {prefix}<hash>"
    );
}

fn object_display(object: &Value) -> String {
    format!(
        "{}/{}/{}",
        object["kind"].as_str().unwrap_or("?"),
        object["metadata"]["namespace"].as_str().unwrap_or(""),
        object["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// The inventory entry id of an object: `<namespace>_<name>_<group>_<kind>`.
fn inventory_id(object: &Value) -> String {
    format!(
        "{}_{}_{}_{}",
        object["metadata"]["namespace"].as_str().unwrap_or(""),
        object["metadata"]["name"].as_str().unwrap_or(""),
        group_version(object).0,
        object["kind"].as_str().unwrap_or("")
    )
}

/// The live counterpart of a built object, as JSON.
async fn live_object(client: &kube::Client, object: &Value) -> Option<Value> {
    let (group, version) = group_version(object);
    let kind = object["kind"].as_str().unwrap_or("");
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(&group, &version, kind));
    let ns = object["metadata"]["namespace"].as_str().unwrap_or("");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    let name = object["metadata"]["name"].as_str().unwrap_or("");
    let live = api.get_opt(name).await.expect("get the live object")?;
    Some(serde_json::to_value(live).expect("live object as JSON"))
}

/// Labels and annotations the controller itself puts on what it applies.
const CONTROLLER_METADATA_PREFIX: &str = "kustomize.toolkit.fluxcd.io/";

/// Annotations Kubernetes' own controllers add to live objects (the deployment controller
/// numbers each rollout).
const CLUSTER_ANNOTATIONS: [&str; 1] = ["deployment.kubernetes.io/revision"];

/// Where `live` differs from the built `expected` object. The built object must be
/// contained in the live one (the API server adds defaults and bookkeeping), with lists of
/// equal length; maps the server never defaults (labels, selectors, annotations, ConfigMap
/// data) must be equal, and must not appear on the live object alone; the top-level labels
/// and annotations may only gain the controller's own and those of the cluster's controllers.
fn compare_with_live(expected: &Value, live: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for key in ["apiVersion", "kind"] {
        if expected[key] != live[key] {
            out.push(format!("{key}: {} != {}", expected[key], live[key]));
        }
    }
    let (metadata, live_metadata) = (&expected["metadata"], &live["metadata"]);
    for key in ["name", "namespace"] {
        if metadata[key] != live_metadata[key] {
            out.push(format!(
                "metadata.{key}: {} != {}",
                metadata[key], live_metadata[key]
            ));
        }
    }
    for key in ["labels", "annotations"] {
        let mut live_map = live_metadata[key].as_object().cloned().unwrap_or_default();
        live_map.retain(|k, _| {
            !k.starts_with(CONTROLLER_METADATA_PREFIX) && !CLUSTER_ANNOTATIONS.contains(&k.as_str())
        });
        let built = metadata[key].as_object().cloned().unwrap_or_default();
        if built != live_map {
            out.push(format!(
                "metadata.{key}: built {built:?}, live (without the controller's) {live_map:?}"
            ));
        }
    }
    let Some(fields) = expected.as_object() else {
        out.push("the built object is not a mapping".into());
        return out;
    };
    for (key, value) in fields {
        if !matches!(key.as_str(), "apiVersion" | "kind" | "metadata" | "status") {
            contained_in(value, &live[key], key, &mut out);
        }
    }
    out
}

/// Map keys whose values the API server never defaults into, compared for equality.
const EXACT_MAPS: [&str; 5] = ["labels", "matchLabels", "selector", "annotations", "data"];

/// Records in `out` where `expected` is not contained in `live` (see `compare_with_live`).
fn contained_in(expected: &Value, live: &Value, path: &str, out: &mut Vec<String>) {
    let last = path.rsplit('.').next().unwrap_or(path);
    match (expected, live) {
        (Value::Object(_), _) if EXACT_MAPS.contains(&last) && expected != live => {
            out.push(format!("{path}: built {expected}, live {live}"));
        }
        (Value::Object(built), Value::Object(actual)) => {
            for (key, value) in built {
                match actual.get(key) {
                    Some(live_value) => {
                        contained_in(value, live_value, &format!("{path}.{key}"), out)
                    }
                    None => out.push(format!("{path}.{key}: missing on the live object")),
                }
            }
            for key in actual.keys() {
                if EXACT_MAPS.contains(&key.as_str()) && !built.contains_key(key) {
                    out.push(format!("{path}.{key}: only on the live object"));
                }
            }
        }
        (Value::Array(built), Value::Array(actual)) if built.len() == actual.len() => {
            for (i, (value, live_value)) in built.iter().zip(actual).enumerate() {
                contained_in(value, live_value, &format!("{path}[{i}]"), out);
            }
        }
        _ if expected != live => out.push(format!("{path}: built {expected}, live {live}")),
        _ => {}
    }
}
