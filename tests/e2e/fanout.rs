//! One source, many Kustomizations: a monorepo artifact read by a dozen Kustomizations is
//! downloaded once per revision, where Flux's controller downloads it once per Kustomization.
//! Run side by side with Flux v1.9.5; the artifacts come from the tests' own server, which
//! counts the downloads.

use super::*;

/// Kustomizations reading the one source.
const APPS: usize = 12;

/// Publishes revision `n` of the monorepo `mono`: one ConfigMap per app, of value `n`.
/// Returns the artifact's URL.
async fn publish_monorepo(client: &kube::Client, ns: &str, n: u32) -> String {
    let files: Vec<(String, String)> = (0..APPS)
        .map(|i| {
            (
                format!("apps/app-{i}/cm.yaml"),
                config_map(ns, &format!("app-{i}"), &n.to_string()),
            )
        })
        .collect();
    let (url, digest) = serve(tarball(&files));
    publish_artifact(client, ns, "mono", &revision(n), &url, &digest).await;
    url
}

/// Waits until every app's Kustomization has applied revision `n`.
async fn wait_all_applied(client: &kube::Client, ns: &str, n: u32, controller: &ControllerProcess) {
    for i in 0..APPS {
        super::apply::wait_applied(client, ns, &format!("app-{i}"), &revision(n), controller).await;
    }
}

/// For the controller of `shard`: the downloads of revision 1 and of revision 2 of a
/// monorepo read by [`APPS`] Kustomizations.
async fn downloads_per_revision(shard: &str, controller: &ControllerProcess) -> [usize; 2] {
    let client = support::client().await;
    let ns = TestNamespace::new(&client, shard).await;
    let ns = ns.name();
    create_git_repository(&client, ns, "mono").await;
    let first = publish_monorepo(&client, ns, 1).await;
    for i in 0..APPS {
        create_labelled_kustomization(
            &client,
            ns,
            &format!("app-{i}"),
            "mono",
            json!({"path": format!("./apps/app-{i}")}),
            json!({SHARD_LABEL: shard}),
        )
        .await;
    }
    wait_all_applied(&client, ns, 1, controller).await;
    let second = publish_monorepo(&client, ns, 2).await;
    wait_all_applied(&client, ns, 2, controller).await;
    let value = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get("app-0")
        .await
        .expect("app-0")
        .data
        .unwrap_or_default()["value"]
        .clone();
    assert_eq!(value, "2", "{shard}");
    [artifacts::hits(&first), artifacts::hits(&second)]
}

#[tokio::test]
async fn a_monorepo_read_by_many_kustomizations_is_downloaded_once_per_revision() {
    let flux = start_shard_binary("fanout-flux", flux_parity::flux_binary(), &[]);
    let ours = start_shard_binary(
        "fanout-ours",
        std::path::Path::new(env!("CARGO_BIN_EXE_kustomize-controller")),
        &[],
    );
    let (flux_downloads, our_downloads) = tokio::join!(
        downloads_per_revision("fanout-flux", &flux),
        downloads_per_revision("fanout-ours", &ours),
    );
    eprintln!("downloads per revision: ours {our_downloads:?}, Flux {flux_downloads:?}");
    assert_eq!(
        our_downloads,
        [1, 1],
        "one download per revision for {APPS} Kustomizations (Flux: {flux_downloads:?})"
    );
    assert!(
        flux_downloads.iter().all(|&n| n >= APPS),
        "Flux's controller downloads once per Kustomization: {flux_downloads:?}"
    );
}
