//! Config watchers: rotating the decryption key Secret of a Kustomization (labelled
//! `reconcile.fluxcd.io/watch: Enabled`) reconciles it at once, not at its next retry, and an
//! unlabelled one waits. Run side by side with Flux's own controller (v1.9.5), each started
//! with the repeated flags a kustomize patch of Flux's Deployment gives.

use k8s_openapi::api::core::v1::Secret;
use std::path::Path;

use super::*;

/// The arguments of Flux's Deployment with a patch appending to them: repeated flags, the
/// last value counting, repeated feature gates merging.
const PATCHED_ARGS: [&str; 6] = [
    "--log-level=info",
    "--log-level=debug",
    "--concurrent=2",
    "--concurrent=6",
    "--feature-gates=DisableFailFastBehavior=true",
    "--feature-gates=GroupChangeLog=true",
];

/// Starts `binary` for shard `shard` of this run with [`PATCHED_ARGS`].
fn start_patched(shard: &str, binary: &std::path::Path) -> ControllerProcess {
    start_shard_binary(shard, binary, &PATCHED_ARGS)
}

/// A Secret `name` holding the age key file `key`, with `labels`.
async fn key_secret(client: &kube::Client, ns: &str, name: &str, key: &str, labels: Value) {
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "stringData": {"identity.agekey": sops_fixture(&format!("keys/{key}"))},
    }))
    .expect("secret");
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create key Secret");
}

/// Rotates Secret `name` to hold the age key file `key`.
async fn rotate(client: &kube::Client, ns: &str, name: &str, key: &str) {
    let patch = json!({"stringData": {"identity.agekey": sops_fixture(&format!("keys/{key}"))}});
    Api::<Secret>::namespaced(client.clone(), ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("rotate the key Secret");
}

/// Shows, for the controller of `shard`, that a labelled key Secret's rotation is applied at
/// once while the unlabelled one waits for its (hour-long) retry.
async fn rotation_reconciles_at_once(shard: &str) {
    let f = Fixture::new(&format!("watch-{shard}")).await;
    let ns = f.ns();
    let watched = json!({"reconcile.fluxcd.io/watch": "Enabled"});
    key_secret(&f.client, ns, "watched-keys", "age-2-and-3.agekey", watched).await;
    key_secret(&f.client, ns, "quiet-keys", "age-2-and-3.agekey", json!({})).await;
    f.create_source("repo").await;
    f.publish(
        1,
        &[(
            "deploy/secret.yaml",
            sops_fixture("encrypted/k8s/secret.yaml"),
        )],
    )
    .await;
    for (name, keys) in [("app", "watched-keys"), ("quiet", "quiet-keys")] {
        create_labelled_kustomization(
            &f.client,
            ns,
            name,
            "repo",
            json!({
                "interval": "1h", "retryInterval": "1h", "targetNamespace": ns,
                "namePrefix": format!("{name}-"),
                "decryption": {"provider": "sops", "secretRef": {"name": keys}},
            }),
            json!({SHARD_LABEL: shard}),
        )
        .await;
        let (reason, message) = wait_ready_with(
            &f.client,
            ns,
            name,
            ConditionStatus::False,
            &format!("{shard}: {name} fails to decrypt with the wrong key"),
        )
        .await;
        assert_eq!(reason, "BuildFailed", "{shard}: {message}");
    }

    rotate(&f.client, ns, "watched-keys", "age-1.agekey").await;
    rotate(&f.client, ns, "quiet-keys", "age-1.agekey").await;
    wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::True,
        &format!("{shard}: the rotated key applied at once, an hour before the retry"),
    )
    .await;
    let credentials = secret_data(&f.client, ns, "app-app-credentials").await;
    assert!(
        credentials.is_some(),
        "{shard}: the decrypted Secret is applied"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let quiet = ready(&f.client, ns, "quiet").await;
    assert!(
        matches!(&quiet, Some((ConditionStatus::False, reason, _)) if reason == "BuildFailed"),
        "{shard}: a Secret without the watch label triggers nothing: {quiet:?}"
    );
}

#[tokio::test]
async fn a_rotated_decryption_key_is_applied_at_once_as_flux_does() {
    let flux = start_patched("watch-flux", flux_parity::flux_binary());
    let ours = start_patched(
        "watch-ours",
        Path::new(env!("CARGO_BIN_EXE_kustomize-controller")),
    );
    tokio::join!(
        rotation_reconciles_at_once("watch-flux"),
        rotation_reconciles_at_once("watch-ours"),
    );
    for (shard, controller) in [("watch-flux", &flux), ("watch-ours", &ours)] {
        let log = controller.log();
        assert!(
            !log.contains("cannot be used multiple times"),
            "{shard} accepted the repeated flags: {log}"
        );
    }
}
