//! A Kustomization's life against its source: applied, Ready, pruned when objects leave the
//! source, re-run on request, suspended and resumed, deleted with its objects; artifacts that
//! fail verification (wrong digest, unsafe tarball) change nothing; sources in other
//! namespaces followed unless denied; change sets and failures recorded as events.

use super::*;

#[tokio::test]
async fn applies_reports_ready_and_prunes_what_left_the_source() {
    let f = Fixture::new("apply-prune").await;
    let ns = f.ns();
    f.create_source("repo").await;
    let (a, b) = (config_map(ns, "a", "1"), config_map(ns, "b", "2"));
    let svc = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  ports:\n  - port: 80\n"
    );
    f.publish::<&str, &str>(
        1,
        &[
            ("deploy/a.yaml", &a),
            ("deploy/more/b-and-svc.yaml", &format!("{b}---\n{svc}")),
            ("README.md", "x"),
        ],
    )
    .await;
    create_kustomization(&f.client, ns, "app", "repo", json!({})).await;

    let (reason, message) = wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::True,
        "Ready=True for revision 1",
    )
    .await;
    assert_eq!(reason, "ReconciliationSucceeded");
    assert_eq!(message, format!("Applied revision: {}", f.revision(1)));

    let cm = Api::<ConfigMap>::namespaced(f.client.clone(), ns)
        .get("a")
        .await
        .expect("configmap a");
    let labels = cm.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels
            .get("kustomize.toolkit.fluxcd.io/name")
            .map(String::as_str),
        Some("app")
    );
    assert_eq!(
        labels
            .get("kustomize.toolkit.fluxcd.io/namespace")
            .map(String::as_str),
        Some(ns)
    );
    let managers: Vec<String> = cm
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(
        managers.contains(&"kustomize-controller".to_string()),
        "{managers:?}"
    );

    let mut ids = inventory(&f.client, ns, "app").await;
    ids.sort();
    assert_eq!(
        ids,
        [
            format!("{ns}_a__ConfigMap"),
            format!("{ns}_b__ConfigMap"),
            format!("{ns}_web__Service")
        ]
    );

    let ks = Api::<Kustomization>::namespaced(f.client.clone(), ns)
        .get("app")
        .await
        .expect("ks");
    let status = ks.status.clone().expect("status");
    assert_eq!(status.last_applied_revision, Some(f.revision(1)));
    assert_eq!(status.last_attempted_revision, Some(f.revision(1)));
    assert_eq!(status.observed_generation, ks.metadata.generation);
    assert!(
        ks.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"finalizers.fluxcd.io".to_string())
    );

    let wait = support::kubectl()
        .args([
            "wait",
            "kustomization/app",
            "-n",
            ns,
            "--for=condition=ready",
            "--timeout=60s",
        ])
        .output()
        .expect("run kubectl wait");
    assert!(
        wait.status.success(),
        "kubectl wait failed: {}",
        String::from_utf8_lossy(&wait.stderr)
    );

    // Revision 2 drops b: it is pruned and leaves the inventory.
    f.publish(
        2,
        &[
            ("deploy/a.yaml", &config_map(ns, "a", "changed")),
            ("deploy/more/svc.yaml", &svc),
        ],
    )
    .await;
    wait_for(WAIT, "revision 2 applied", async || {
        match ready(&f.client, ns, "app").await {
            Some((ConditionStatus::True, _, message))
                if message == format!("Applied revision: {}", f.revision(2)) =>
            {
                Ok(())
            }
            other => Err(other),
        }
    })
    .await;
    assert_eq!(config_map_names(&f.client, ns).await, ["a"]);
    let a = Api::<ConfigMap>::namespaced(f.client.clone(), ns)
        .get("a")
        .await
        .expect("a");
    assert_eq!(
        a.data.unwrap_or_default().get("value").map(String::as_str),
        Some("changed")
    );
    let mut ids = inventory(&f.client, ns, "app").await;
    ids.sort();
    assert_eq!(
        ids,
        [format!("{ns}_a__ConfigMap"), format!("{ns}_web__Service")]
    );
}

#[tokio::test]
async fn digest_mismatch_fails_without_touching_applied_objects() {
    let f = Fixture::new("digest").await;
    let ns = f.ns();
    f.app_ready_with_forged_source(&[("deploy/a.yaml", &config_map(ns, "a", "1"))])
        .await;

    let (url, _) = serve(tarball(&[("deploy/b.yaml", &config_map(ns, "b", "2"))]));
    let wrong = format!("sha256:{}", "0".repeat(64));
    publish_artifact(&f.client, ns, "repo", &revision(2), &url, &wrong).await;
    let (reason, message) = wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::False,
        "Ready=False after digest mismatch",
    )
    .await;
    assert_eq!(reason, "ArtifactFailed");
    assert_eq!(
        message,
        "Source is not ready, artifact digest changed, retrying in 30s"
    );
    assert_eq!(
        config_map_names(&f.client, ns).await,
        ["a"],
        "the old object stays, nothing new is applied"
    );
    let ks = Api::<Kustomization>::namespaced(f.client.clone(), ns)
        .get("app")
        .await
        .expect("ks");
    let status = ks.status.expect("status");
    assert_eq!(status.last_applied_revision, Some(revision(1)));
    // As with Flux, a revision counts as attempted once its artifact was fetched.
    assert_eq!(status.last_attempted_revision, Some(revision(1)));
}

#[tokio::test]
async fn missing_source_then_created_becomes_ready_by_itself() {
    let f = Fixture::new("late-source").await;
    let ns = f.ns();
    create_kustomization(&f.client, ns, "app", "repo", json!({})).await;
    let (reason, message) = wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::False,
        "Ready=False without source",
    )
    .await;
    assert_eq!(reason, "ArtifactFailed");
    assert!(message.contains("not found"), "{message}");

    f.create_source("repo").await;
    f.publish(1, &[("deploy/a.yaml", &config_map(ns, "a", "1"))])
        .await;
    let (_, message) = wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::True,
        "Ready=True once the source exists",
    )
    .await;
    assert_eq!(message, format!("Applied revision: {}", f.revision(1)));
    assert_eq!(config_map_names(&f.client, ns).await, ["a"]);
}

#[tokio::test]
async fn requested_at_annotation_triggers_a_reconcile() {
    let f = Fixture::new("requested-at").await;
    let ns = f.ns();
    f.app_ready_with(&[("deploy/a.yaml", &config_map(ns, "a", "1"))])
        .await;

    // Drift: the object is deleted behind the controller's back; only a reconcile brings it back.
    let configmaps = Api::<ConfigMap>::namespaced(f.client.clone(), ns);
    configmaps
        .delete("a", &DeleteParams::default())
        .await
        .expect("delete a");
    let requested = "2026-11-21T10:00:00.000000000Z";
    let patch =
        json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": requested}}});
    Api::<Kustomization>::namespaced(f.client.clone(), ns)
        .patch("app", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("annotate");
    wait_for(
        WAIT,
        "lastHandledReconcileAt to record the request",
        async || {
            let ks = Api::<Kustomization>::namespaced(f.client.clone(), ns)
                .get("app")
                .await
                .map_err(|e| e.to_string())?;
            match ks.status.and_then(|s| s.last_handled_reconcile_at) {
                Some(handled) if handled == requested => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    wait_for(WAIT, "the deleted ConfigMap to be re-applied", async || {
        configmaps.get_opt("a").await.ok().flatten().ok_or(())
    })
    .await;
}

#[tokio::test]
async fn deleting_the_kustomization_prunes_its_objects_and_releases_the_finalizer() {
    let f = Fixture::new("delete").await;
    let ns = f.ns();
    f.app_ready_with(&[
        ("deploy/a.yaml", &config_map(ns, "a", "1")),
        ("deploy/b.yaml", &config_map(ns, "b", "1")),
    ])
    .await;
    assert_eq!(config_map_names(&f.client, ns).await, ["a", "b"]);

    let api = Api::<Kustomization>::namespaced(f.client.clone(), ns);
    api.delete("app", &DeleteParams::default())
        .await
        .expect("delete ks");
    wait_for(WAIT, "the Kustomization to be gone", async || {
        match api.get_opt("app").await {
            Ok(None) => Ok(()),
            other => Err(format!(
                "{:?}",
                other.map(|k| k.map(|k| k.metadata.finalizers))
            )),
        }
    })
    .await;
    wait_for(WAIT, "its ConfigMaps to be deleted", async || {
        let names = config_map_names(&f.client, ns).await;
        if names.is_empty() { Ok(()) } else { Err(names) }
    })
    .await;
}

#[tokio::test]
async fn unsafe_tarballs_are_refused_and_write_nothing_outside_the_root() {
    let f = Fixture::new("unsafe-tar").await;
    let ns = f.ns();
    create_git_repository(&f.client, ns, "repo").await;
    create_kustomization(&f.client, ns, "app", "repo", json!({"path": "./"})).await;
    let marker = support::unique_name("escaped");
    let payload = config_map(ns, "evil", "1");
    let temp_parent = controller().temp_root.clone();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "path traversal",
            raw_tarball(&[(
                &format!("../../{marker}.yaml"),
                tar::EntryType::Regular,
                "",
                &payload,
            )]),
        ),
        (
            "absolute path",
            raw_tarball(&[(
                &format!("/tmp/{marker}.yaml"),
                tar::EntryType::Regular,
                "",
                &payload,
            )]),
        ),
        (
            "escaping symlink",
            raw_tarball(&[
                ("link", tar::EntryType::Symlink, "../..", ""),
                (
                    &format!("link/{marker}.yaml"),
                    tar::EntryType::Regular,
                    "",
                    &payload,
                ),
            ]),
        ),
    ];
    for (n, (case, tarball)) in cases.into_iter().enumerate() {
        let (url, digest) = serve(tarball);
        let rev = revision(100 + n as u32);
        publish_artifact(&f.client, ns, "repo", &rev, &url, &digest).await;
        // The artifact never extracts, so it is never attempted: the message names its URL.
        let (reason, message) =
            wait_for(WAIT, &format!("{case}: Ready=False"), async || match ready(
                &f.client, ns, "app",
            )
            .await
            {
                Some((ConditionStatus::False, reason, message)) if message.contains(&url) => {
                    Ok((reason, message))
                }
                other => Err(format!("{other:?}")),
            })
            .await;
        assert_eq!(reason, "ArtifactFailed", "{case}");
        assert!(message.contains("unsafe entry"), "{case}: {message}");
        assert!(
            config_map_names(&f.client, ns).await.is_empty(),
            "{case}: nothing may be applied"
        );
        for place in [
            temp_parent.clone(),
            temp_parent.join("tmp"),
            std::env::temp_dir(),
            PathBuf::from("/tmp"),
        ] {
            assert!(
                !place.join(format!("{marker}.yaml")).exists(),
                "{case}: a file escaped into {}",
                place.display()
            );
        }
    }
}

#[tokio::test]
async fn sources_in_other_namespaces_are_followed_unless_denied() {
    let f = Fixture::new("cross-ns").await;
    strict_controller();
    let sources = TestNamespace::new(&f.client, "cross-ns-sources").await;
    create_git_source(&f.client, sources.name(), "repo").await;
    let ns = f.ns();
    let files = [("deploy/a.yaml", config_map(ns, "a", "1"))];
    publish(&f.client, sources.name(), "repo", 1, &files).await;
    let source_ref = json!({"sourceRef": {"kind": "GitRepository", "name": "repo", "namespace": sources.name()}});

    create_kustomization(&f.client, ns, "allowed", "repo", source_ref.clone()).await;
    wait_ready_with(
        &f.client,
        ns,
        "allowed",
        ConditionStatus::True,
        "cross-namespace source applied",
    )
    .await;

    create_labelled_kustomization(
        &f.client,
        ns,
        "denied",
        "repo",
        source_ref,
        json!({SHARD_LABEL: "strict"}),
    )
    .await;
    let (reason, message) = wait_ready_with(
        &f.client,
        ns,
        "denied",
        ConditionStatus::False,
        "AccessDenied from the strict controller",
    )
    .await;
    assert_eq!(reason, "AccessDenied");
    assert!(
        message.contains("cross-namespace references have been blocked"),
        "{message}"
    );

    // A new revision in the other namespace reaches the allowed Kustomization by itself.
    let files = [("deploy/a.yaml", config_map(ns, "a", "2"))];
    let second = publish(&f.client, sources.name(), "repo", 2, &files).await;
    wait_for(
        WAIT,
        "revision 2 applied across namespaces",
        async || match ready(&f.client, ns, "allowed").await {
            Some((ConditionStatus::True, _, message)) if message.ends_with(&second) => Ok(()),
            other => Err(other),
        },
    )
    .await;
}

#[tokio::test]
async fn change_sets_and_failures_are_recorded_as_events() {
    let f = Fixture::new("events").await;
    let ns = f.ns();
    f.app_ready_with(&[("deploy/a.yaml", &config_map(ns, "a", "1"))])
        .await;
    let notes = async || event_notes(&f.client, ns, Some("app")).await;
    wait_for(WAIT, "the change set event", async || {
        let notes = notes().await;
        let change_set = format!("ConfigMap/{ns}/a created");
        if notes
            .iter()
            .any(|(reason, note)| reason == "Progressing" && note == &change_set)
            && notes.iter().any(|(_, note)| {
                note.starts_with("Reconciliation finished in")
                    && note.ends_with("next run in 10m0s")
            })
        {
            Ok(())
        } else {
            Err(notes)
        }
    })
    .await;

    f.publish(
        2,
        &[(
            "deploy/a.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [broken\n",
        )],
    )
    .await;
    let (reason, message) =
        wait_ready_with(&f.client, ns, "app", ConditionStatus::False, "BuildFailed").await;
    assert_eq!(reason, "BuildFailed");
    assert!(
        message.starts_with("failed to decode Kubernetes YAML from deploy/a.yaml"),
        "{message}"
    );
    wait_for(WAIT, "the failure event", async || {
        let notes = notes().await;
        if notes.iter().any(|(reason, note)| {
            reason == "BuildFailed"
                && note.starts_with("failed to decode Kubernetes YAML from deploy/a.yaml")
        }) {
            Ok(())
        } else {
            Err(notes)
        }
    })
    .await;
    let a = Api::<ConfigMap>::namespaced(f.client.clone(), ns)
        .get("a")
        .await
        .expect("a is untouched");
    assert_eq!(
        a.data.unwrap_or_default().get("value").map(String::as_str),
        Some("1")
    );
}

#[tokio::test]
async fn suspended_kustomizations_are_left_alone_until_resumed() {
    let f = Fixture::new("suspend").await;
    let ns = f.ns();
    f.app_ready_with(&[("deploy/a.yaml", &config_map(ns, "a", "1"))])
        .await;

    let api = Api::<Kustomization>::namespaced(f.client.clone(), ns);
    let suspend = |value: bool| json!({"spec": {"suspend": value}});
    api.patch(
        "app",
        &PatchParams::default(),
        &Patch::Merge(&suspend(true)),
    )
    .await
    .expect("suspend");
    f.publish(
        2,
        &[
            ("deploy/a.yaml", &config_map(ns, "a", "1")),
            ("deploy/b.yaml", &config_map(ns, "b", "2")),
        ],
    )
    .await;
    // A negative observation needs a window: long enough for an unsuspended controller to
    // apply (it does so in well under a second here), short enough to keep the test quick.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        config_map_names(&f.client, ns).await,
        ["a"],
        "a suspended Kustomization applies nothing"
    );
    let status = api.get("app").await.expect("ks").status.expect("status");
    assert_eq!(status.last_attempted_revision, Some(f.revision(1)));

    api.patch(
        "app",
        &PatchParams::default(),
        &Patch::Merge(&suspend(false)),
    )
    .await
    .expect("resume");
    wait_for(
        WAIT,
        "revision 2 applied after resuming",
        async || match ready(&f.client, ns, "app").await {
            Some((ConditionStatus::True, _, message)) if message.ends_with(&f.revision(2)) => {
                Ok(())
            }
            other => Err(other),
        },
    )
    .await;
    assert_eq!(config_map_names(&f.client, ns).await, ["a", "b"]);
}
