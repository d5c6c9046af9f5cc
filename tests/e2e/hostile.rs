//! Hostile sources end to end: one commit holding kustomization cycles, YAML alias bombs, a
//! self-copying JSON 6902 patch, a substitution bomb and deeply nested YAML. Each of its
//! Kustomizations must end Ready=False with a clear reason while the controller stays up,
//! stays within its memory, and keeps reconciling a healthy Kustomization beside them.

use super::support::hostile::{
    alias_bomb, alias_tree, big_variable, deep_nesting, kustomization, self_copy_patch,
    substitution_bomb,
};
use super::*;

/// The controller of the `hostile` shard: its memory is measured alone.
fn hostile_controller() -> &'static ControllerProcess {
    static CONTROLLER: OnceLock<ControllerProcess> = OnceLock::new();
    CONTROLLER.get_or_init(|| {
        start_controller(
            "hostile",
            &[&format!(
                "--watch-label-selector={RUN_LABEL}={},{SHARD_LABEL}=hostile",
                run_id()
            )],
        )
    })
}

/// The controller's own process (the child of the shell that runs it), if it is alive.
fn controller_pid(controller: &ControllerProcess) -> Option<u32> {
    let shell = controller._child.id();
    let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

/// The peak resident set size of `pid` (VmHWM), in KiB.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

#[tokio::test]
async fn hostile_sources_fail_alone_while_the_controller_keeps_reconciling() {
    hostile_controller();
    let client = support::client().await;
    let ns = TestNamespace::new(&client, "hostile").await;
    let ns = ns.name();
    let shard = json!({ SHARD_LABEL: "hostile" });

    // The healthy neighbour, on its own source.
    create_git_repository(&client, ns, "healthy").await;
    let publish_healthy = async |n: u32| {
        let (url, digest) = serve(tarball(&[(
            "deploy/cm.yaml",
            &config_map(ns, "healthy", &n.to_string()),
        )]));
        publish_artifact(&client, ns, "healthy", &revision(n), &url, &digest).await;
    };
    publish_healthy(1).await;
    create_labelled_kustomization(&client, ns, "healthy", "healthy", json!({}), shard.clone())
        .await;

    create_git_repository(&client, ns, "hostile").await;
    let (patch_kustomization, grow) = self_copy_patch();
    let files = [
        (
            "cycle-self/kustomization.yaml",
            kustomization("resources: [.]\n"),
        ),
        (
            "cycle-empty/kustomization.yaml",
            kustomization("resources: [\"\"]\n"),
        ),
        (
            "cycle-pair/a/kustomization.yaml",
            kustomization("resources: [../b]\n"),
        ),
        (
            "cycle-pair/b/kustomization.yaml",
            kustomization("resources: [../a]\n"),
        ),
        (
            "cycle-component/kustomization.yaml",
            kustomization("components: [comp]\n"),
        ),
        (
            "cycle-component/comp/kustomization.yaml",
            "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncomponents: [.]\n"
                .to_string(),
        ),
        (
            "alias-bomb/kustomization.yaml",
            kustomization("resources: [bomb.yaml]\n"),
        ),
        ("alias-bomb/bomb.yaml", alias_bomb()),
        (
            "alias-tree/kustomization.yaml",
            kustomization("resources: [tree.yaml]\n"),
        ),
        ("alias-tree/tree.yaml", alias_tree()),
        ("patch-bomb/kustomization.yaml", patch_kustomization),
        ("patch-bomb/cm.yaml", grow),
        ("subst-bomb/cm.yaml", substitution_bomb(ns)),
        (
            "deep/kustomization.yaml",
            kustomization("resources: [deep.yaml]\n"),
        ),
        ("deep/deep.yaml", deep_nesting()),
    ];
    let (url, digest) = serve(tarball(&files));
    publish_artifact(&client, ns, "hostile", &revision(1), &url, &digest).await;

    let big = big_variable();
    let cases = [
        (
            "cycle-self",
            json!({"path": "./cycle-self"}),
            "cycle detected",
        ),
        (
            "cycle-empty",
            json!({"path": "./cycle-empty"}),
            "new root cannot be empty",
        ),
        (
            "cycle-pair",
            json!({"path": "./cycle-pair/a"}),
            "cycle detected",
        ),
        (
            "cycle-component",
            json!({"path": "./cycle-component"}),
            "cycle detected",
        ),
        ("alias-bomb", json!({"path": "./alias-bomb"}), "bomb.yaml"),
        ("alias-tree", json!({"path": "./alias-tree"}), "tree.yaml"),
        ("patch-bomb", json!({"path": "./patch-bomb"}), "patch"),
        (
            "subst-bomb",
            json!({"path": "./subst-bomb", "postBuild": {"substitute": {"big": big}}}),
            "ConfigMap",
        ),
        ("deep", json!({"path": "./deep"}), "deep.yaml"),
    ];
    for (name, extra, _) in &cases {
        create_labelled_kustomization(&client, ns, name, "hostile", extra.clone(), shard.clone())
            .await;
    }
    for (name, _, expected) in &cases {
        let (reason, message) = wait_ready_with(
            &client,
            ns,
            name,
            ConditionStatus::False,
            &format!("{name}: Ready=False"),
        )
        .await;
        assert_eq!(reason, "BuildFailed", "{name}: {message}");
        assert!(message.contains(expected), "{name}: {message}");
        assert!(
            message.len() < 4096,
            "{name}: a message of {} bytes",
            message.len()
        );
    }

    // The healthy Kustomization was reconciled, and keeps being reconciled, while the hostile
    // ones retry every 2 s.
    wait_ready_with(
        &client,
        ns,
        "healthy",
        ConditionStatus::True,
        "healthy Ready",
    )
    .await;
    publish_healthy(2).await;
    wait_for(WAIT, "healthy: revision 2 applied", async || {
        let cm = Api::<ConfigMap>::namespaced(client.clone(), ns)
            .get_opt("healthy")
            .await
            .map_err(|e| e.to_string())?;
        match cm
            .and_then(|cm| cm.data)
            .and_then(|d| d.get("value").cloned())
        {
            Some(value) if value == "2" => Ok(()),
            other => Err(format!("value {other:?}")),
        }
    })
    .await;

    let pid = controller_pid(hostile_controller())
        .expect("the controller process is still running after the hostile reconciles");
    let peak_mib = peak_rss_kib(pid).expect("VmHWM") / 1024;
    eprintln!("hostile shard controller: peak RSS {peak_mib} MiB");
    // Expanded, any one of these bombs needs well over a GiB.
    assert!(
        peak_mib < 512,
        "the controller's peak RSS reached {peak_mib} MiB"
    );
    // Nothing of the hostile source was applied.
    for name in ["grow", "subst", "bomb", "tree", "deep"] {
        assert!(
            Api::<ConfigMap>::namespaced(client.clone(), ns)
                .get_opt(name)
                .await
                .expect("get")
                .is_none(),
            "{name} was applied"
        );
    }
}

/// What the redaction fixture's Secret decrypts to, and the parts a message could quote.
const DECRYPTED: [&str; 5] = [
    "hunter2-redaction-fixture",
    "SUPER_SECRET_TEXT",
    "abc def",
    "${replicas}",
    "${abc",
];

/// A value kept in a Secret read through `substituteFrom`; the API server echoes it back when
/// it is refused as a label value (over 63 characters).
const SECRET_LABEL: &str = "confidential-label-value-that-is-far-too-long-for-a-label-0123456789";

fn redaction_fixture(file: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sops-redaction")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[tokio::test]
async fn secrets_never_reach_conditions_events_or_logs() {
    use k8s_openapi::api::core::v1::Secret;

    hostile_controller();
    let client = support::client().await;
    let ns = TestNamespace::new(&client, "hostile-secrets").await;
    let ns = ns.name();
    let shard = json!({ SHARD_LABEL: "hostile" });
    let secrets = Api::<Secret>::namespaced(client.clone(), ns);
    let secret = |name: &str, data: Value| -> Secret {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": ns},
            "stringData": data,
        }))
        .expect("secret")
    };
    secrets
        .create(
            &PostParams::default(),
            &secret(
                "sops-keys",
                json!({"identity.agekey": redaction_fixture("test.agekey")}),
            ),
        )
        .await
        .expect("key Secret");
    secrets
        .create(
            &PostParams::default(),
            &secret("vars", json!({"LABEL": SECRET_LABEL})),
        )
        .await
        .expect("variables Secret");

    create_git_repository(&client, ns, "repo").await;
    let labelled = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: labelled\n  namespace: {ns}\n  labels:\n    team: ${{LABEL}}\n"
    );
    let files = [
        ("decrypted/db.yaml", redaction_fixture("db.yaml")),
        ("labelled/cm.yaml", labelled),
    ];
    let (url, digest) = serve(tarball(&files));
    publish_artifact(&client, ns, "repo", &revision(1), &url, &digest).await;

    // A decrypted value holding `${...}`, in strict mode: the error must not quote it.
    create_labelled_kustomization(
        &client,
        ns,
        "decrypted",
        "repo",
        json!({
            "path": "./decrypted",
            "targetNamespace": ns,
            "decryption": {"provider": "sops", "secretRef": {"name": "sops-keys"}},
            "postBuild": {"substitute": {"replicas": "2"}},
        }),
        shard.clone(),
    )
    .await;
    // A Secret-sourced variable the API server refuses and quotes back.
    create_labelled_kustomization(
        &client,
        ns,
        "labelled",
        "repo",
        json!({
            "path": "./labelled",
            "postBuild": {"substituteFrom": [{"kind": "Secret", "name": "vars"}]},
        }),
        shard.clone(),
    )
    .await;

    let mut messages = Vec::new();
    for (name, expected_reason, expected) in [
        ("decrypted", "BuildFailed", "Secret"),
        ("labelled", "ReconciliationFailed", "*****"),
    ] {
        let (reason, message) = wait_ready_with(
            &client,
            ns,
            name,
            ConditionStatus::False,
            &format!("{name}: Ready=False"),
        )
        .await;
        assert_eq!(reason, expected_reason, "{name}: {message}");
        assert!(message.contains(expected), "{name}: {message}");
        messages.push(message);
    }
    let events = event_notes(&client, ns, None).await;
    assert!(
        events.iter().any(|(_, note)| note.contains("*****")),
        "the failures were published as events: {events:?}"
    );
    messages.extend(events.into_iter().map(|(_, note)| note));
    messages.push(hostile_controller().log());
    for text in &messages {
        for secret in DECRYPTED.iter().chain([&SECRET_LABEL]) {
            assert!(
                !text.contains(secret),
                "{secret:?} leaked into a condition, an event or the log:\n{}",
                tail(text, 20)
            );
        }
    }
}

/// Flux's CRD, and ours, accept a Kustomization without `spec`. It is read with the default
/// spec and fails on its own (it names no source); the watch goes on, so a Kustomization
/// created after it is still reconciled.
#[tokio::test]
async fn a_kustomization_without_spec_fails_alone() {
    hostile_controller();
    let client = support::client().await;
    let ns = TestNamespace::new(&client, "no-spec").await;
    let ns = ns.name();
    let shard = json!({ SHARD_LABEL: "hostile" });

    // Created untyped: the Rust type always writes a spec.
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::erase::<Kustomization>(&()),
    );
    let bare: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "bare", "namespace": ns, "labels": run_labels(shard.clone())},
    }))
    .expect("a Kustomization without spec");
    api.create(&PostParams::default(), &bare)
        .await
        .expect("the API server accepts a Kustomization without spec");

    create_git_repository(&client, ns, "repo").await;
    let (url, digest) = serve(tarball(&[("deploy/cm.yaml", config_map(ns, "a", "1"))]));
    publish_artifact(&client, ns, "repo", &revision(1), &url, &digest).await;
    create_labelled_kustomization(&client, ns, "app", "repo", json!({}), shard).await;
    let (reason, _) = wait_ready_with(
        &client,
        ns,
        "app",
        ConditionStatus::True,
        "the Kustomization created after the spec-less one to be Ready",
    )
    .await;
    assert_eq!(reason, "ReconciliationSucceeded");
    let (reason, message) = wait_ready_with(
        &client,
        ns,
        "bare",
        ConditionStatus::False,
        "the spec-less Kustomization to fail",
    )
    .await;
    assert_eq!(reason, "ArtifactFailed", "{message}");
    // Read from the watch cache as Flux reads it: a source without a name is not found.
    assert_eq!(
        message,
        "GitRepository.source.toolkit.fluxcd.io \"\" not found"
    );
}
