//! The apply engine against the real API server, with Flux's semantics
//! (`fluxcd/pkg/ssa` `ApplyAllStaged`, as kustomize-controller v1.10 configures it): every
//! object is dry-run before anything is applied, only objects that drifted are applied, the
//! change set names what was created, configured or deleted, foreign field managers that
//! Flux takes over are cleaned up, `spec.ignore` paths are left alone, and immutable fields
//! are recreated only when forced.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Event;
use kube::api::ListParams;

use super::*;

/// Shard of the controller started with `--override-manager=node-fetch`.
const OVERRIDE_SHARD: &str = "override-manager";

/// The field manager `kubectl edit` writes with (an Update, a merge patch here).
const KUBECTL_EDIT: &str = "kubectl-edit";

/// The controller's field manager.
const MANAGER: &str = "kustomize-controller";

/// A controller that, like Flux's with `--override-manager=node-fetch`, takes over and
/// cleans up every field manager whose name starts with `node-fetch`.
fn override_manager_controller() -> &'static ControllerProcess {
    static CONTROLLER: OnceLock<ControllerProcess> = OnceLock::new();
    CONTROLLER
        .get_or_init(|| start_shard_controller(OVERRIDE_SHARD, "--override-manager=node-fetch"))
}

/// Shard of the controller started with `--override-manager-before-dry-run=legacy-controller`.
const BEFORE_DRY_RUN_SHARD: &str = "before-dry-run";

/// A controller that, like Flux's with `--override-manager-before-dry-run=legacy-controller`,
/// takes the fields of exactly that manager over before validating an object.
fn before_dry_run_controller() -> &'static ControllerProcess {
    static CONTROLLER: OnceLock<ControllerProcess> = OnceLock::new();
    CONTROLLER.get_or_init(|| {
        start_shard_controller(
            BEFORE_DRY_RUN_SHARD,
            "--override-manager-before-dry-run=legacy-controller",
        )
    })
}

/// Shard of the controller started with `--feature-gates=MigrateAPIVersion=true`.
const MIGRATE_SHARD: &str = "migrate-api-version";

/// A controller with Flux's `MigrateAPIVersion` feature gate on.
fn migrate_controller() -> &'static ControllerProcess {
    static CONTROLLER: OnceLock<ControllerProcess> = OnceLock::new();
    CONTROLLER.get_or_init(|| {
        start_shard_controller(MIGRATE_SHARD, "--feature-gates=MigrateAPIVersion=true")
    })
}

// ---------------------------------------------------------------------------------------
// The tests.

/// A build whose last object the API server refuses applies none of its objects: the
/// dry-run of every object comes first, and the failure names the object and quotes the API
/// server, for a value substitution turned into a number and for an invalid data key.
#[tokio::test]
async fn a_refused_object_fails_the_whole_apply_and_nothing_is_applied() {
    let f = Fixture::new("apply-all-or-nothing").await;
    let ns = f.ns();
    let counted = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: num-c\n  namespace: {ns}\ndata:\n  \
         count: ${{count}}\n"
    );
    let bad_key = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: key-c\n  namespace: {ns}\ndata:\n  \
         bad/key: x\n"
    );
    f.create_source("repo").await;
    f.publish(
        1,
        &[
            ("number/a.yaml", &config_map(ns, "num-a", "1")),
            ("number/b.yaml", &config_map(ns, "num-b", "1")),
            ("number/c.yaml", &counted),
            ("key/a.yaml", &config_map(ns, "key-a", "1")),
            ("key/b.yaml", &config_map(ns, "key-b", "1")),
            ("key/c.yaml", &bad_key),
        ],
    )
    .await;
    // (Kustomization, spec, refused object, what the API server says about it)
    let cases = [
        (
            "number",
            json!({"path": "./number", "postBuild": {"substitute": {"count": "3"}}}),
            "num-c",
            ".data.count: expected string",
        ),
        (
            "key",
            json!({"path": "./key"}),
            "key-c",
            "data[bad/key]: Invalid value: \"bad/key\": a valid config key must consist of \
             alphanumeric characters",
        ),
    ];
    for (name, spec, ..) in &cases {
        create_kustomization(&f.client, ns, name, "repo", spec.clone()).await;
    }
    for (name, _, refused, api_message) in &cases {
        let (reason, message) = wait_ready_with(
            &f.client,
            ns,
            name,
            ConditionStatus::False,
            &format!("{name}: Ready=False"),
        )
        .await;
        assert_eq!(reason, "ReconciliationFailed", "{name}: {message}");
        assert!(
            message.starts_with(&format!("ConfigMap/{ns}/{refused} dry-run failed")),
            "{name}: {message}"
        );
        assert!(message.contains(api_message), "{name}: {message}");
        assert_no_debug_dump(&message);
        // The status of a failed run itself: a retry that starts meanwhile records its
        // intended inventory first (Ready Unknown) and takes it back when its dry-run fails.
        let status = wait_for(
            WAIT,
            &format!("{name}: a failed run's status"),
            async || {
                let status = kustomization_status(&f.client, ns, name).await;
                let failed = status["conditions"].as_array().is_some_and(|conditions| {
                    conditions
                        .iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "False")
                });
                if failed { Ok(status) } else { Err(status) }
            },
        )
        .await;
        assert!(status["inventory"].is_null(), "{name}: {status:#}");
        assert!(
            status["lastAppliedRevision"].is_null(),
            "{name}: {status:#}"
        );
        assert_eq!(
            status["lastAttemptedRevision"],
            json!(f.revision(1)),
            "{name}"
        );
        let failure = wait_for(WAIT, &format!("{name}: the failure event"), async || {
            let events = kustomization_events(&f.client, ns, name).await;
            match events.iter().find(|e| e.reason == "ReconciliationFailed") {
                Some(failure) => Ok(failure.clone()),
                None => Err(events),
            }
        })
        .await;
        assert!(
            failure
                .message
                .starts_with(&format!("ConfigMap/{ns}/{refused} dry-run failed")),
            "{name}: {failure:?}"
        );
        assert_no_debug_dump(&failure.message);
        let events = kustomization_events(&f.client, ns, name).await;
        assert!(
            change_sets(&events).is_empty(),
            "{name}: nothing applied, no change set: {events:?}"
        );
    }
    assert!(
        config_map_names(&f.client, ns).await.is_empty(),
        "the objects before the refused one must not be applied"
    );
}

/// Each apply that changes something is one `Progressing` event listing exactly what was
/// created, configured or deleted; a revision that changes no object (a comment, a moved
/// file) or a requested reconcile writes nothing and records no change set.
#[tokio::test]
async fn change_set_events_list_exactly_what_changed() {
    let f = Fixture::new("apply-change-sets").await;
    let ns = f.ns();
    let (a1, b, c) = (
        config_map(ns, "a", "1"),
        config_map(ns, "b", "1"),
        config_map(ns, "c", "1"),
    );
    f.app_ready_with(&[
        ("deploy/a.yaml", &a1),
        ("deploy/b.yaml", &b),
        ("deploy/c.yaml", &c),
    ])
    .await;
    let created =
        format!("ConfigMap/{ns}/a created\nConfigMap/{ns}/b created\nConfigMap/{ns}/c created");
    assert_eq!(
        change_set_counts(&f.client, ns, "app").await,
        [(created.clone(), 1)]
    );

    // Revision 2 changes a's value only.
    let a2 = config_map(ns, "a", "2");
    f.publish(
        2,
        &[
            ("deploy/a.yaml", &a2),
            ("deploy/b.yaml", &b),
            ("deploy/c.yaml", &c),
        ],
    )
    .await;
    wait_applied(&f.client, ns, "app", &f.revision(2), controller()).await;
    let configured = format!("ConfigMap/{ns}/a configured");
    assert_eq!(
        change_set_counts(&f.client, ns, "app").await,
        [(created.clone(), 1), (configured.clone(), 1)]
    );
    let versions = resource_versions(&f.client, ns, &["a", "b", "c"]).await;

    // Revision 3 changes the artifact but no object: a comment, and c moved to a subfolder.
    let commented = format!("# owned by the platform team\n{b}");
    f.publish(
        3,
        &[
            ("deploy/a.yaml", &a2),
            ("deploy/b.yaml", &commented),
            ("deploy/more/c.yaml", &c),
        ],
    )
    .await;
    wait_applied(&f.client, ns, "app", &f.revision(3), controller()).await;
    assert_eq!(
        change_set_counts(&f.client, ns, "app").await,
        [(created.clone(), 1), (configured.clone(), 1)],
        "an unchanged build records no change set"
    );
    assert_eq!(
        resource_versions(&f.client, ns, &["a", "b", "c"]).await,
        versions,
        "unchanged objects are not written"
    );

    // A requested reconcile of the same revision changes nothing either.
    let (status, reason, message) = reconcile_now(&f.client, ns, "app", controller()).await;
    assert_eq!(
        (status, reason.as_str()),
        (ConditionStatus::True, "ReconciliationSucceeded"),
        "{message}"
    );
    assert_eq!(
        change_set_counts(&f.client, ns, "app").await,
        [(created.clone(), 1), (configured.clone(), 1)]
    );
    assert_eq!(
        resource_versions(&f.client, ns, &["a", "b", "c"]).await,
        versions
    );

    // Revision 4 drops b: the prune is its own change set.
    f.publish(4, &[("deploy/a.yaml", &a2), ("deploy/more/c.yaml", &c)])
        .await;
    wait_applied(&f.client, ns, "app", &f.revision(4), controller()).await;
    let deleted = format!("ConfigMap/{ns}/b deleted");
    wait_for(WAIT, "the prune change set", async || {
        let counts = change_set_counts(&f.client, ns, "app").await;
        let expected = [
            (created.clone(), 1),
            (configured.clone(), 1),
            (deleted.clone(), 1),
        ];
        if counts == expected {
            Ok(())
        } else {
            Err(counts)
        }
    })
    .await;
    assert_eq!(config_map_names(&f.client, ns).await, ["a", "c"]);
}

/// A value changed in the cluster the way `kubectl edit` changes it is put back by the next
/// reconcile, which reports the object `configured`; `kubectl-edit` owns nothing afterwards.
#[tokio::test]
async fn drift_from_kubectl_edit_is_reverted_on_the_next_reconcile() {
    let f = Fixture::new("apply-drift").await;
    let ns = f.ns();
    f.app_ready_with(&[
        ("deploy/a.yaml", &config_map(ns, "a", "1")),
        ("deploy/b.yaml", &config_map(ns, "b", "1")),
    ])
    .await;
    let config_maps = Api::<ConfigMap>::namespaced(f.client.clone(), ns);
    merge_patch_as(
        &config_maps,
        "a",
        KUBECTL_EDIT,
        json!({"data": {"value": "edited"}}),
    )
    .await;
    assert_eq!(data_of(&config_maps, "a").await["value"], "edited");
    let b_version = resource_versions(&f.client, ns, &["b"]).await;

    let (status, _, message) = reconcile_now(&f.client, ns, "app", controller()).await;
    assert_eq!(status, ConditionStatus::True, "{message}");
    assert_eq!(data_of(&config_maps, "a").await, json!({"value": "1"}));
    let configured = format!("ConfigMap/{ns}/a configured");
    assert!(
        change_set_counts(&f.client, ns, "app")
            .await
            .contains(&(configured, 1)),
        "{:?}",
        change_set_counts(&f.client, ns, "app").await
    );
    let live = config_maps.get("a").await.expect("a");
    let managers = managers(&live.metadata);
    assert!(
        !managers.iter().any(|(m, _)| m == KUBECTL_EDIT),
        "{managers:?}"
    );
    assert!(
        owns(&live.metadata, MANAGER, "Apply", &["f:data", "f:value"]),
        "{managers:?}"
    );
    assert_eq!(
        resource_versions(&f.client, ns, &["b"]).await,
        b_version,
        "the object that did not drift is not written"
    );
}

/// Fields that `kubectl` added to a managed object (here a data key added by
/// `kubectl edit`) are taken over and removed, as Flux's default field manager cleanup does
/// for every manager whose name starts with `kubectl`; fields added by other managers stay.
#[tokio::test]
async fn fields_added_with_kubectl_are_removed_and_other_managers_fields_kept() {
    let f = Fixture::new("apply-kubectl-fields").await;
    let ns = f.ns();
    f.app_ready_with(&[("deploy/a.yaml", &config_map(ns, "a", "1"))])
        .await;
    let config_maps = Api::<ConfigMap>::namespaced(f.client.clone(), ns);
    merge_patch_as(
        &config_maps,
        "a",
        KUBECTL_EDIT,
        json!({"data": {"added-by-kubectl": "x"}}),
    )
    .await;
    merge_patch_as(
        &config_maps,
        "a",
        "other-tool",
        json!({"data": {"added-by-other-tool": "y"}}),
    )
    .await;

    let (status, _, message) = reconcile_now(&f.client, ns, "app", controller()).await;
    assert_eq!(status, ConditionStatus::True, "{message}");
    assert_eq!(
        data_of(&config_maps, "a").await,
        json!({"value": "1", "added-by-other-tool": "y"})
    );
    let live = config_maps.get("a").await.expect("a");
    let managers = managers(&live.metadata);
    assert!(
        !managers.iter().any(|(m, _)| m.starts_with("kubectl")),
        "{managers:?}"
    );
    assert!(
        owns(
            &live.metadata,
            "other-tool",
            "Update",
            &["f:data", "f:added-by-other-tool"]
        ),
        "{managers:?}"
    );
}

/// `kustomize.toolkit.fluxcd.io/reconcile: disabled` set on the live object (not in the
/// source) makes the controller leave it alone: a new revision changing it is not applied to
/// it, its change is not reported (not even as `skipped`), and it stays in the inventory.
#[tokio::test]
async fn objects_disabled_in_the_cluster_are_skipped() {
    let f = Fixture::new("apply-live-disabled").await;
    let ns = f.ns();
    f.app_ready_with(&[
        ("deploy/a.yaml", &config_map(ns, "a", "1")),
        ("deploy/b.yaml", &config_map(ns, "b", "1")),
    ])
    .await;
    let config_maps = Api::<ConfigMap>::namespaced(f.client.clone(), ns);
    merge_patch_as(
        &config_maps,
        "b",
        "operator",
        json!({
            "metadata": {"annotations": {"kustomize.toolkit.fluxcd.io/reconcile": "disabled"}},
            "data": {"value": "hand-made"}
        }),
    )
    .await;
    let b_version = resource_versions(&f.client, ns, &["b"]).await;
    let before = change_set_counts(&f.client, ns, "app").await;

    f.publish(
        2,
        &[
            ("deploy/a.yaml", &config_map(ns, "a", "2")),
            ("deploy/b.yaml", &config_map(ns, "b", "2")),
        ],
    )
    .await;
    wait_applied(&f.client, ns, "app", &f.revision(2), controller()).await;
    assert_eq!(data_of(&config_maps, "a").await["value"], "2");
    assert_eq!(data_of(&config_maps, "b").await["value"], "hand-made");
    assert_eq!(resource_versions(&f.client, ns, &["b"]).await, b_version);
    let mut expected = before;
    expected.push((format!("ConfigMap/{ns}/a configured"), 1));
    assert_eq!(
        change_set_counts(&f.client, ns, "app").await,
        expected,
        "one new change set, without b (not even as skipped)"
    );
    let mut ids = inventory(&f.client, ns, "app").await;
    ids.sort();
    assert_eq!(
        ids,
        [format!("{ns}_a__ConfigMap"), format!("{ns}_b__ConfigMap")]
    );
}

/// Deployment `web` of one replica, image `registry.example/web:1`, in namespace `ns`.
pub(super) fn web_deployment(ns: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\n\
         spec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: web\n  template:\n    \
         metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      \
         - name: app\n        image: registry.example/web:1\n"
    )
}

/// `spec.ignore` paths are not drift: replicas set by another field manager (as an HPA sets
/// them, with server-side apply) survive reconciles, which then apply nothing and report
/// nothing; a change to a field that is not ignored is still reverted, without touching the
/// ignored one.
#[tokio::test]
async fn ignored_paths_changed_in_the_cluster_are_left_alone() {
    let f = Fixture::new("apply-ignore").await;
    let ns = f.ns();
    let web = web_deployment(ns);
    f.create_source("repo").await;
    f.publish(1, &[("deploy/web.yaml", &web)]).await;
    create_kustomization(
        &f.client,
        ns,
        "app",
        "repo",
        json!({"ignore": [{"paths": ["/spec/replicas"], "target": {"kind": "Deployment"}}]}),
    )
    .await;
    wait_applied(&f.client, ns, "app", &f.revision(1), controller()).await;
    let deployments = Api::<Deployment>::namespaced(f.client.clone(), ns);
    let scale = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": 3}
    });
    deployments
        .patch(
            "web",
            &PatchParams::apply("hpa-like").force(),
            &Patch::Apply(&scale),
        )
        .await
        .expect("scale as hpa-like");
    let scaled = deployments.get("web").await.expect("web");
    let generation = scaled.metadata.generation;
    let before = change_set_counts(&f.client, ns, "app").await;

    let (status, _, message) = reconcile_now(&f.client, ns, "app", controller()).await;
    assert_eq!(status, ConditionStatus::True, "{message}");
    let live = deployments.get("web").await.expect("web");
    assert_eq!(
        replicas(&live),
        Some(3),
        "the ignored field keeps its value"
    );
    assert_eq!(
        live.metadata.generation, generation,
        "nothing was applied: the spec did not change"
    );
    assert_eq!(change_set_counts(&f.client, ns, "app").await, before);

    // A change to a field that is not ignored is reverted; replicas stay.
    merge_patch_as(
        &deployments,
        "web",
        "operator",
        json!({"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "registry.example/web:hotfix"}
        ]}}}}),
    )
    .await;
    let (status, _, message) = reconcile_now(&f.client, ns, "app", controller()).await;
    assert_eq!(status, ConditionStatus::True, "{message}");
    let live = deployments.get("web").await.expect("web");
    assert_eq!(image(&live), Some("registry.example/web:1".to_string()));
    assert_eq!(
        replicas(&live),
        Some(3),
        "the ignored field keeps its value"
    );
    assert!(
        owns(
            &live.metadata,
            "hpa-like",
            "Apply",
            &["f:spec", "f:replicas"]
        ),
        "{:?}",
        managers(&live.metadata)
    );
    let counts = change_set_counts(&f.client, ns, "app").await;
    assert!(
        counts.contains(&(format!("Deployment/{ns}/web configured"), 1)),
        "{counts:?}"
    );
}

/// An ignored path changed with `kubectl edit` keeps the edited value. The first reconcile
/// still writes the object, as Flux's does: it takes over `kubectl-edit`'s fields (the
/// managedFields cleanup) and applies the edited value as its own, so it reports the object
/// `configured`; the next reconcile finds nothing to do.
#[tokio::test]
async fn ignored_paths_edited_with_kubectl_keep_the_edited_value() {
    let f = Fixture::new("apply-ignore-edit").await;
    let ns = f.ns();
    let settings = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {ns}\n\
         data:\n  x: from-git\n  y: from-git\n"
    );
    f.create_source("repo").await;
    f.publish(1, &[("deploy/settings.yaml", &settings)]).await;
    create_kustomization(
        &f.client,
        ns,
        "app",
        "repo",
        json!({"ignore": [{"paths": ["/data/x"], "target": {"kind": "ConfigMap", "name": "settings"}}]}),
    )
    .await;
    wait_applied(&f.client, ns, "app", &f.revision(1), controller()).await;
    let config_maps = Api::<ConfigMap>::namespaced(f.client.clone(), ns);
    merge_patch_as(
        &config_maps,
        "settings",
        KUBECTL_EDIT,
        json!({"data": {"x": "edited"}}),
    )
    .await;

    let (status, _, message) = reconcile_now(&f.client, ns, "app", controller()).await;
    assert_eq!(status, ConditionStatus::True, "{message}");
    assert_eq!(
        data_of(&config_maps, "settings").await,
        json!({"x": "edited", "y": "from-git"})
    );
    let live = config_maps.get("settings").await.expect("settings");
    assert!(
        !managers(&live.metadata)
            .iter()
            .any(|(m, _)| m == KUBECTL_EDIT),
        "{:?}",
        managers(&live.metadata)
    );
    let configured = (format!("ConfigMap/{ns}/settings configured"), 1);
    let counts = change_set_counts(&f.client, ns, "app").await;
    assert_eq!(counts.last(), Some(&configured), "{counts:?}");
    let version = resource_versions(&f.client, ns, &["settings"]).await;

    let (status, _, message) = reconcile_now(&f.client, ns, "app", controller()).await;
    assert_eq!(status, ConditionStatus::True, "{message}");
    assert_eq!(
        data_of(&config_maps, "settings").await,
        json!({"x": "edited", "y": "from-git"})
    );
    assert_eq!(
        resource_versions(&f.client, ns, &["settings"]).await,
        version
    );
    assert_eq!(change_set_counts(&f.client, ns, "app").await, counts);
}

/// An object created with client-side `kubectl apply` is taken over: the keys the source no
/// longer has are removed, the `last-applied-configuration` annotation goes, and the
/// controller alone owns the fields.
#[tokio::test]
async fn objects_from_kubectl_client_side_apply_are_taken_over() {
    let f = Fixture::new("apply-takeover").await;
    let ns = f.ns();
    let manifest = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {ns}\n\
         data:\n  a: from-kubectl\n  b: only-in-kubectl\n"
    );
    kubectl_apply(&manifest);
    let config_maps = Api::<ConfigMap>::namespaced(f.client.clone(), ns);
    let before = config_maps.get("settings").await.expect("settings");
    assert!(
        managers(&before.metadata).contains(&(
            "kubectl-client-side-apply".to_string(),
            "Update".to_string()
        )),
        "{:?}",
        managers(&before.metadata)
    );
    assert!(annotations_of(&before.metadata).contains_key(LAST_APPLIED));

    let source = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {ns}\n\
         data:\n  a: from-git\n"
    );
    f.app_ready_with(&[("deploy/settings.yaml", &source)]).await;
    let live = config_maps.get("settings").await.expect("settings");
    assert_eq!(
        data_of(&config_maps, "settings").await,
        json!({"a": "from-git"})
    );
    assert!(
        !annotations_of(&live.metadata).contains_key(LAST_APPLIED),
        "{:?}",
        live.metadata.annotations
    );
    let managers = managers(&live.metadata);
    assert!(
        !managers.iter().any(|(m, _)| m.starts_with("kubectl")),
        "{managers:?}"
    );
    assert!(
        owns(&live.metadata, MANAGER, "Apply", &["f:data", "f:a"]),
        "{managers:?}"
    );
    let configured = format!("ConfigMap/{ns}/settings configured");
    assert_eq!(
        change_set_counts(&f.client, ns, "app").await,
        [(configured, 1)]
    );
}

/// `--override-manager=node-fetch` makes the controller take over every field manager whose
/// name starts with `node-fetch`, by Update or by Apply: their changes to fields of the
/// source are reverted, fields the source does not have are removed, and their entries
/// leave `managedFields`; other managers' fields stay. Without the flag, a field added by
/// `node-fetch` stays.
#[tokio::test]
async fn override_manager_takes_over_and_cleans_up_the_named_managers() {
    let f = Fixture::new("apply-override-manager").await;
    override_manager_controller();
    let ns = f.ns();
    f.create_source("repo").await;
    let source = |name: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n\
             data:\n  key: from-git\n"
        )
    };
    f.publish(
        1,
        &[
            ("override/settings.yaml", &source("overridden")),
            ("plain/settings.yaml", &source("plain")),
        ],
    )
    .await;
    create_labelled_kustomization(
        &f.client,
        ns,
        "override",
        "repo",
        json!({"path": "./override"}),
        json!({SHARD_LABEL: OVERRIDE_SHARD}),
    )
    .await;
    create_kustomization(&f.client, ns, "plain", "repo", json!({"path": "./plain"})).await;
    wait_applied(
        &f.client,
        ns,
        "override",
        &f.revision(1),
        override_manager_controller(),
    )
    .await;
    wait_applied(&f.client, ns, "plain", &f.revision(1), controller()).await;

    let config_maps = Api::<ConfigMap>::namespaced(f.client.clone(), ns);
    for name in ["overridden", "plain"] {
        merge_patch_as(
            &config_maps,
            name,
            "node-fetch",
            json!({"data": {"key": "node-fetch", "bad-key": "by update"}}),
        )
        .await;
        let applied = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns},
            "data": {"bad-ssa-key": "by apply"}
        });
        config_maps
            .patch(
                name,
                &PatchParams::apply("node-fetch-agent").force(),
                &Patch::Apply(&applied),
            )
            .await
            .expect("apply as node-fetch-agent");
        merge_patch_as(
            &config_maps,
            name,
            "good-name",
            json!({"data": {"key2": "kept"}}),
        )
        .await;
    }

    let (status, _, message) =
        reconcile_now(&f.client, ns, "override", override_manager_controller()).await;
    assert_eq!(status, ConditionStatus::True, "{message}");
    assert_eq!(
        data_of(&config_maps, "overridden").await,
        json!({"key": "from-git", "key2": "kept"})
    );
    let live = config_maps.get("overridden").await.expect("overridden");
    let managers_left = managers(&live.metadata);
    assert!(
        !managers_left
            .iter()
            .any(|(m, _)| m.starts_with("node-fetch")),
        "{managers_left:?}"
    );
    assert!(
        owns(&live.metadata, "good-name", "Update", &["f:data", "f:key2"]),
        "{managers_left:?}"
    );
    let counts = change_set_counts(&f.client, ns, "override").await;
    assert!(
        counts.contains(&(format!("ConfigMap/{ns}/overridden configured"), 1)),
        "{counts:?}"
    );

    // The same changes under the controller without the flag: the source's field is
    // reverted, the fields node-fetch added stay.
    let (status, _, message) = reconcile_now(&f.client, ns, "plain", controller()).await;
    assert_eq!(status, ConditionStatus::True, "{message}");
    assert_eq!(
        data_of(&config_maps, "plain").await,
        json!({"key": "from-git", "bad-key": "by update", "bad-ssa-key": "by apply",
               "key2": "kept"})
    );
}

/// A changed immutable field (a Job's pod template) fails the apply with the API server's
/// message; with `spec.force` or the object's `kustomize.toolkit.fluxcd.io/force: enabled`
/// the Job is deleted and created again, and the change set says `created`.
#[tokio::test]
async fn immutable_fields_fail_unless_forced_and_forced_objects_are_recreated() {
    let f = Fixture::new("apply-immutable").await;
    let ns = f.ns();
    let job = |image: &str, annotations: &str| {
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  namespace: {ns}\n\
             {annotations}spec:\n  template:\n    spec:\n      restartPolicy: Never\n      \
             containers:\n      - name: migrate\n        image: registry.example/migrate:{image}\n"
        )
    };
    f.app_ready_with(&[("deploy/job.yaml", &job("1", ""))])
        .await;
    let jobs = Api::<Job>::namespaced(f.client.clone(), ns);
    let first_uid = uid_of(&jobs, "migrate").await;

    // Revision 2 changes the template: refused, the Job is left as it was.
    f.publish(2, &[("deploy/job.yaml", &job("2", ""))]).await;
    let (reason, message) = wait_for(WAIT, "revision 2 to fail", async || {
        match ready(&f.client, ns, "app").await {
            Some((ConditionStatus::False, reason, message))
                if message.contains("field is immutable") =>
            {
                Ok((reason, message))
            }
            other => Err(format!(
                "{other:?}\n--- controller log tail ---\n{}",
                tail(&controller_log(), 30)
            )),
        }
    })
    .await;
    assert_eq!(reason, "ReconciliationFailed", "{message}");
    assert!(
        message.starts_with(&format!("Job/{ns}/migrate dry-run failed (Invalid): ")),
        "{message}"
    );
    assert_no_debug_dump(&message);
    assert_eq!(uid_of(&jobs, "migrate").await, first_uid);
    assert_eq!(
        job_image(&jobs).await,
        "registry.example/migrate:1",
        "the refused revision changed nothing"
    );

    // spec.force recreates it.
    Api::<Kustomization>::namespaced(f.client.clone(), ns)
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"force": true}})),
        )
        .await
        .expect("set spec.force");
    wait_applied(&f.client, ns, "app", &f.revision(2), controller()).await;
    let second_uid = uid_of(&jobs, "migrate").await;
    assert_ne!(second_uid, first_uid, "the Job is recreated");
    assert_eq!(job_image(&jobs).await, "registry.example/migrate:2");
    let created = format!("Job/{ns}/migrate created");
    assert_eq!(
        change_set_counts(&f.client, ns, "app").await,
        [(created.clone(), 2)],
        "the first apply and the recreation are both `created`"
    );

    // Without spec.force, the object's force annotation does the same.
    Api::<Kustomization>::namespaced(f.client.clone(), ns)
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"force": false}})),
        )
        .await
        .expect("unset spec.force");
    let forced = "  annotations:\n    kustomize.toolkit.fluxcd.io/force: enabled\n";
    f.publish(3, &[("deploy/job.yaml", &job("3", forced))])
        .await;
    wait_applied(&f.client, ns, "app", &f.revision(3), controller()).await;
    assert_ne!(uid_of(&jobs, "migrate").await, second_uid);
    assert_eq!(job_image(&jobs).await, "registry.example/migrate:3");
    assert_eq!(
        change_set_counts(&f.client, ns, "app").await,
        [(created, 3)]
    );
}

// ---------------------------------------------------------------------------------------
// Helpers.

/// kubectl's client-side apply annotation.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// One core/v1 Event of a Kustomization.
#[derive(Debug, Clone)]
pub(super) struct KsEvent {
    pub(super) reason: String,
    pub(super) message: String,
    pub(super) count: i32,
}

/// The core/v1 Events recorded on Kustomization `name`, oldest first.
pub(super) async fn kustomization_events(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> Vec<KsEvent> {
    let mut events = Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default().fields(&format!(
            "involvedObject.kind=Kustomization,involvedObject.name={name}"
        )))
        .await
        .expect("list events")
        .items;
    events.sort_by_key(|e| {
        e.first_timestamp.as_ref().map(|t| t.0).or(e
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0))
    });
    events
        .into_iter()
        .map(|e| KsEvent {
            reason: e.reason.unwrap_or_default(),
            message: e.message.unwrap_or_default(),
            count: e.count.unwrap_or(1),
        })
        .collect()
}

/// The change-set events among `events`: reason `Progressing`, as is the `Health check
/// passed` event, which is not one.
fn change_sets(events: &[KsEvent]) -> Vec<&KsEvent> {
    events
        .iter()
        .filter(|e| e.reason == "Progressing" && !e.message.starts_with("Health check"))
        .collect()
}

/// (message, count) of every change-set event of Kustomization `name`, oldest first.
async fn change_set_counts(client: &kube::Client, ns: &str, name: &str) -> Vec<(String, i32)> {
    change_sets(&kustomization_events(client, ns, name).await)
        .into_iter()
        .map(|e| (e.message.clone(), e.count))
        .collect()
}

/// The status of Kustomization `name`, as JSON.
pub(super) async fn kustomization_status(client: &kube::Client, ns: &str, name: &str) -> Value {
    let ks = Api::<Kustomization>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .expect("get Kustomization");
    serde_json::to_value(ks.status).expect("status as JSON")
}

/// Waits until Kustomization `name` is Ready with `revision` applied.
pub(super) async fn wait_applied(
    client: &kube::Client,
    ns: &str,
    name: &str,
    revision: &str,
    controller: &ControllerProcess,
) {
    let applied = format!("Applied revision: {revision}");
    wait_for(
        WAIT,
        &format!("{name}: {revision} applied"),
        async || match ready(client, ns, name).await {
            Some((ConditionStatus::True, _, message)) if message == applied => Ok(()),
            other => Err(format!(
                "{other:?}\n--- controller log tail ---\n{}",
                tail(&controller.log(), 30)
            )),
        },
    )
    .await;
}

/// Requests a reconcile of Kustomization `name` with `reconcile.fluxcd.io/requestedAt` and
/// waits until the run has finished: its status records the request and Ready is no longer
/// Unknown. Returns Ready's (status, reason, message).
pub(super) async fn reconcile_now(
    client: &kube::Client,
    ns: &str,
    name: &str,
    controller: &ControllerProcess,
) -> (ConditionStatus, String, String) {
    let requested = support::unique_name("requested");
    let api = Api::<Kustomization>::namespaced(client.clone(), ns);
    let patch =
        json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": requested}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("request a reconcile");
    wait_for(
        WAIT,
        &format!("{name}: the requested reconcile to finish"),
        async || {
            let handled = api
                .get(name)
                .await
                .ok()
                .and_then(|ks| ks.status)
                .and_then(|s| s.last_handled_reconcile_at);
            match (handled, ready(client, ns, name).await) {
                (Some(handled), Some((status, reason, message)))
                    if handled == requested && status != ConditionStatus::Unknown =>
                {
                    Ok((status, reason, message))
                }
                other => Err(format!(
                    "{other:?}\n--- controller log tail ---\n{}",
                    tail(&controller.log(), 30)
                )),
            }
        },
    )
    .await
}

/// A JSON merge patch of `name` sent as field manager `manager` (an Update in
/// `managedFields`, as `kubectl edit` and `kubectl patch` write).
pub(super) async fn merge_patch_as<K>(api: &Api<K>, name: &str, manager: &str, patch: Value)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let params = PatchParams {
        field_manager: Some(manager.to_string()),
        ..PatchParams::default()
    };
    api.patch(name, &params, &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("merge patch of {name} as {manager}: {e}"));
}

/// `kubectl apply -f -` (client-side) of `manifest`.
pub(super) fn kubectl_apply(manifest: &str) {
    let mut child = support::kubectl()
        .args(["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kubectl apply");
    child
        .stdin
        .take()
        .expect("kubectl stdin")
        .write_all(manifest.as_bytes())
        .expect("write the manifest to kubectl");
    let output = child.wait_with_output().expect("kubectl apply");
    assert!(
        output.status.success(),
        "kubectl apply failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `data` of ConfigMap `name`, as JSON.
async fn data_of(api: &Api<ConfigMap>, name: &str) -> Value {
    json!(api.get(name).await.expect("get ConfigMap").data)
}

/// resourceVersions of the ConfigMaps `names`.
async fn resource_versions(client: &kube::Client, ns: &str, names: &[&str]) -> Vec<String> {
    let api = Api::<ConfigMap>::namespaced(client.clone(), ns);
    let mut versions = Vec::new();
    for name in names {
        let cm = api.get(name).await.expect("get ConfigMap");
        versions.push(cm.metadata.resource_version.unwrap_or_default());
    }
    versions
}

/// (manager, operation) of each `managedFields` entry.
fn managers(
    metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Vec<(String, String)> {
    metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|m| {
            (
                m.manager.clone().unwrap_or_default(),
                m.operation.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// Whether `manager`'s `operation` entry (not of a subresource) owns the field at `path`
/// (`fieldsV1` keys such as `["f:data", "f:a"]`).
fn owns(
    metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    manager: &str,
    operation: &str,
    path: &[&str],
) -> bool {
    metadata.managed_fields.iter().flatten().any(|m| {
        m.manager.as_deref() == Some(manager)
            && m.operation.as_deref() == Some(operation)
            && m.subresource.as_deref().unwrap_or("").is_empty()
            && m.fields_v1.as_ref().is_some_and(|fields| {
                path.iter()
                    .try_fold(&fields.0, |node, key| node.get(*key))
                    .is_some()
            })
    })
}

fn annotations_of(
    metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> std::collections::BTreeMap<String, String> {
    metadata.annotations.clone().unwrap_or_default()
}

fn replicas(deployment: &Deployment) -> Option<i32> {
    deployment.spec.as_ref().and_then(|s| s.replicas)
}

fn image(deployment: &Deployment) -> Option<String> {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
}

async fn uid_of(jobs: &Api<Job>, name: &str) -> String {
    jobs.get(name)
        .await
        .expect("get Job")
        .metadata
        .uid
        .unwrap_or_default()
}

/// The image of Job `migrate`.
async fn job_image(jobs: &Api<Job>) -> String {
    let job = jobs.get("migrate").await.expect("get Job");
    job.spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.containers.into_iter().next())
        .and_then(|c| c.image)
        .unwrap_or_default()
}

/// A message meant for people quotes the API server; it never shows Rust's Debug output.
fn assert_no_debug_dump(message: &str) {
    for dump in ["Status {", "ErrorResponse", "Some(", "Api("] {
        assert!(!message.contains(dump), "{dump:?} in {message:?}");
    }
}

/// A Deployment wedged by a foreign co-owner: `legacy-controller` added an env var to
/// container `b`, the source then drops `b`, and the dry-run fails because `b` would remain
/// without its image. Flux's post-dry-run cleanup can never run; the controller with
/// `--override-manager-before-dry-run=legacy-controller` takes that manager's fields over
/// before the dry-run, and the Deployment reconciles with `b` gone.
#[tokio::test]
async fn a_foreign_co_owner_wedge_is_recovered_by_taking_over_before_the_dry_run() {
    let f = Fixture::new("apply-before-dry-run").await;
    before_dry_run_controller();
    let ns = f.ns();
    let deployment = |containers: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\n\
             spec:\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      \
             labels:\n        app: web\n    spec:\n      containers:\n{containers}"
        )
    };
    let container =
        |name: &str| format!("      - name: {name}\n        image: registry.example/{name}:1\n");
    let both = deployment(&format!("{}{}", container("a"), container("b")));
    f.app_ready_with(&[("deploy/web.yaml", &both)]).await;

    // Break-glass: a legacy client-side controller replaces the containers, dropping `b`
    // and adding it back with a hotfix image: its Update entry now anchors `b` (the element
    // and its name). The next reconcile reverts the image, taking `image` alone.
    let deployments = Api::<Deployment>::namespaced(f.client.clone(), ns);
    legacy_put(&deployments, &[("a", "registry.example/a:1")]).await;
    legacy_put(
        &deployments,
        &[
            ("a", "registry.example/a:1"),
            ("b", "registry.example/b:hotfix"),
        ],
    )
    .await;
    let (status, _, message) = reconcile_now(&f.client, ns, "app", controller()).await;
    assert_eq!(status, ConditionStatus::True, "{message}");

    f.publish(2, &[("deploy/web.yaml", &deployment(&container("a")))])
        .await;
    let (reason, message) = wait_for(WAIT, "the wedged apply to fail", async || {
        match ready(&f.client, ns, "app").await {
            Some((ConditionStatus::False, reason, message))
                if message.contains("dry-run failed") =>
            {
                Ok((reason, message))
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(reason, "ReconciliationFailed");
    assert!(
        message.starts_with(&format!("Deployment/{ns}/web dry-run failed (Invalid): "))
            && message.contains("image: Required value"),
        "{message}"
    );
    assert_no_debug_dump(&message);

    // Hand the Kustomization to the controller that takes the legacy manager over.
    Api::<Kustomization>::namespaced(f.client.clone(), ns)
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": {SHARD_LABEL: BEFORE_DRY_RUN_SHARD}}})),
        )
        .await
        .expect("label the Kustomization");
    wait_for(WAIT, "the recovered apply", async || {
        match ready(&f.client, ns, "app").await {
            Some((ConditionStatus::True, _, message)) if message.contains(&f.revision(2)) => Ok(()),
            other => Err(format!(
                "{other:?}\n--- controller log tail ---\n{}",
                tail(&before_dry_run_controller().log(), 30)
            )),
        }
    })
    .await;
    let live = deployments.get("web").await.expect("web");
    let names: Vec<String> = live
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|s| s.containers.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["a"]);
    let managers_left = managers(&live.metadata);
    assert!(
        !managers_left.iter().any(|(m, _)| m == "legacy-controller"),
        "{managers_left:?}"
    );
}

/// Replaces the Deployment's containers with a PUT as field manager `legacy-controller`,
/// read-modify-write as a client-side controller does (retried when kube-controller-manager
/// wrote the status in between).
async fn legacy_put(deployments: &Api<Deployment>, containers: &[(&str, &str)]) {
    let params = PostParams {
        field_manager: Some("legacy-controller".into()),
        ..Default::default()
    };
    wait_for(WAIT, "a PUT as legacy-controller", async || {
        let mut live = deployments.get("web").await.map_err(|e| e.to_string())?;
        if let Some(pod) = live.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
            pod.containers = containers
                .iter()
                .map(|(name, image)| k8s_openapi::api::core::v1::Container {
                    name: name.to_string(),
                    image: Some(image.to_string()),
                    ..Default::default()
                })
                .collect();
        }
        deployments
            .replace("web", &params, &live)
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    })
    .await;
}

/// With `MigrateAPIVersion`, every managed-fields entry of an object whose source moved to a
/// newer API version is rewritten to that version (a foreign manager's entry included), as
/// Flux does; without the gate the foreign entry keeps the old version.
#[tokio::test]
async fn managed_fields_are_migrated_to_the_applied_version_with_the_gate() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let f = Fixture::new("apply-migrate").await;
    migrate_controller();
    let ns = f.ns();
    let group = format!("{ns}.example.com");
    let versions: Vec<Value> = ["v1alpha1", "v1"]
        .iter()
        .map(|v| {
            json!({"name": v, "served": true, "storage": *v == "v1alpha1",
                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
        })
        .collect();
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                 "versions": versions}
    }))
    .expect("crd");
    let crds: Api<CustomResourceDefinition> = Api::all(f.client.clone());
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("create CRD");
    let widget = |name: &str, version: &str, size: u32| {
        format!(
            "apiVersion: {group}/{version}\nkind: Widget\nmetadata:\n  name: {name}\n  \
             namespace: {ns}\nspec:\n  size: {size}\n"
        )
    };
    let resource =
        |version: &str| ApiResource::from_gvk(&GroupVersionKind::gvk(&group, version, "Widget"));
    let widgets =
        Api::<DynamicObject>::namespaced_with(f.client.clone(), ns, &resource("v1alpha1"));
    wait_for(WAIT, "the Widget kind to be served", async || {
        widgets
            .list(&ListParams::default())
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    })
    .await;

    f.create_source("repo").await;
    f.publish(
        1,
        &[
            ("migrated/w.yaml", &widget("migrated", "v1alpha1", 1)),
            ("kept/w.yaml", &widget("kept", "v1alpha1", 1)),
        ],
    )
    .await;
    create_labelled_kustomization(
        &f.client,
        ns,
        "migrated",
        "repo",
        json!({"path": "./migrated"}),
        json!({SHARD_LABEL: MIGRATE_SHARD}),
    )
    .await;
    create_kustomization(&f.client, ns, "kept", "repo", json!({"path": "./kept"})).await;
    wait_applied(
        &f.client,
        ns,
        "migrated",
        &f.revision(1),
        migrate_controller(),
    )
    .await;
    wait_applied(&f.client, ns, "kept", &f.revision(1), controller()).await;

    for name in ["migrated", "kept"] {
        let owner = json!({"apiVersion": format!("{group}/v1alpha1"), "kind": "Widget",
                           "metadata": {"name": name, "namespace": ns}, "spec": {"owner": "ops"}});
        widgets
            .patch(
                name,
                &PatchParams::apply("old-operator"),
                &Patch::Apply(&owner),
            )
            .await
            .expect("apply as old-operator");
    }
    f.publish(
        2,
        &[
            ("migrated/w.yaml", &widget("migrated", "v1", 2)),
            ("kept/w.yaml", &widget("kept", "v1", 2)),
        ],
    )
    .await;
    wait_applied(
        &f.client,
        ns,
        "migrated",
        &f.revision(2),
        migrate_controller(),
    )
    .await;
    wait_applied(&f.client, ns, "kept", &f.revision(2), controller()).await;

    let entry_versions = |object: &DynamicObject| -> Vec<(String, String)> {
        object
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .map(|e| {
                (
                    e.manager.clone().unwrap_or_default(),
                    e.api_version.clone().unwrap_or_default(),
                )
            })
            .collect()
    };
    let v1 = format!("{group}/v1");
    let migrated = widgets.get("migrated").await.expect("migrated");
    assert!(
        entry_versions(&migrated)
            .iter()
            .all(|(_, version)| *version == v1),
        "{:?}",
        entry_versions(&migrated)
    );
    assert_eq!(migrated.data["spec"], json!({"size": 2, "owner": "ops"}));
    let kept = widgets.get("kept").await.expect("kept");
    assert!(
        entry_versions(&kept).contains(&("old-operator".to_string(), format!("{group}/v1alpha1"))),
        "{:?}",
        entry_versions(&kept)
    );
    crds.delete(&format!("widgets.{group}"), &Default::default())
        .await
        .expect("delete CRD");
}

/// Periodic reconciles of objects nobody touched send nothing for them (their watched
/// `resourceVersion` is the one recorded after the last apply), write nothing and emit no
/// event: with the inputs unchanged too, they reuse the last build without fetching,
/// building or applying. An object edited with `kubectl edit` is still reverted at the next
/// interval, without anyone asking, and reported as `configured`; the object nobody edited
/// is confirmed by its watched version, without a request.
#[tokio::test]
async fn periodic_reconciles_skip_untouched_objects_and_still_revert_drift() {
    let f = Fixture::new("apply-periodic").await;
    let ns = f.ns();
    f.create_source("repo").await;
    f.publish(
        1,
        &[
            ("deploy/a.yaml", &config_map(ns, "a", "1")),
            ("deploy/b.yaml", &config_map(ns, "b", "1")),
        ],
    )
    .await;
    create_kustomization(&f.client, ns, "app", "repo", json!({"interval": "2s"})).await;
    wait_applied(&f.client, ns, "app", &f.revision(1), controller()).await;
    let versions = resource_versions(&f.client, ns, &["a", "b"]).await;
    let reconciles = async || {
        kustomization_status(&f.client, ns, "app").await["history"][0]["totalReconciliations"]
            .as_i64()
            .unwrap_or(0)
    };
    let first = reconciles().await;
    wait_for(WAIT, "three periodic reconciles", async || {
        let count = reconciles().await;
        if count >= first + 3 {
            Ok(())
        } else {
            Err(format!("{count} reconciles"))
        }
    })
    .await;
    assert_eq!(
        resource_versions(&f.client, ns, &["a", "b"]).await,
        versions
    );
    let created = format!("ConfigMap/{ns}/a created\nConfigMap/{ns}/b created");
    assert_eq!(
        change_set_counts(&f.client, ns, "app").await,
        [(created.clone(), 1)]
    );
    let reused = controller().log().lines().map(without_colours).any(|line| {
        line.contains("its build is reused") && line.contains(ns) && line.contains("objects=2")
    });
    assert!(reused, "{}", tail(&controller().log(), 20));

    let config_maps = Api::<ConfigMap>::namespaced(f.client.clone(), ns);
    merge_patch_as(
        &config_maps,
        "a",
        KUBECTL_EDIT,
        json!({"data": {"value": "edited"}}),
    )
    .await;
    wait_for(
        WAIT,
        "the edit to be reverted by a periodic reconcile",
        async || match data_of(&config_maps, "a").await["value"].as_str() {
            Some("1") => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    let configured = format!("ConfigMap/{ns}/a configured");
    wait_for(WAIT, "the configured event", async || {
        let counts = change_set_counts(&f.client, ns, "app").await;
        if counts.contains(&(configured.clone(), 1)) {
            Ok(())
        } else {
            Err(format!("{counts:?}"))
        }
    })
    .await;
    let status = kustomization_status(&f.client, ns, "app").await;
    assert!(status["lastHandledReconcileAt"].is_null(), "{status:#}");
    let confirmed = controller().log().lines().map(without_colours).any(|line| {
        line.contains("without a request")
            && line.contains(ns)
            && line.contains("objects=2")
            && line.contains("unchanged_by_watch=1")
    });
    assert!(confirmed, "{}", tail(&controller().log(), 20));
}
