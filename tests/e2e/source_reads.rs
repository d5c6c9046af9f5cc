//! Where sources are read: from the watch cache by default, from the API server with the
//! `DirectSourceFetch` feature gate. Run side by side with Flux v1.9.5, each way: a Kustomization
//! of a source that does not exist yet fails with the same sentence as Flux's (the cache names
//! the kind, the API server the resource), and applies the source once it appears.

use super::*;

/// For the controller of `shard`: the Ready condition (reason, message) of a Kustomization
/// whose source is missing, then the source created and applied.
async fn missing_then_created(shard: &str, controller: &ControllerProcess) -> (String, String) {
    let client = support::client().await;
    let ns = TestNamespace::new(&client, shard).await;
    let ns = ns.name();
    create_labelled_kustomization(
        &client,
        ns,
        "app",
        "late",
        json!({}),
        json!({SHARD_LABEL: shard}),
    )
    .await;
    let failed = wait_for(
        WAIT,
        &format!("{shard}: the source is missing"),
        async || match ready(&client, ns, "app").await {
            Some((ConditionStatus::False, reason, message)) => Ok((reason, message)),
            other => Err(format!("{other:?}\n{}", tail(&controller.log(), 20))),
        },
    )
    .await;
    create_git_repository(&client, ns, "late").await;
    let files = [("deploy/cm.yaml", config_map(ns, "late", "1"))];
    publish(&client, ns, "late", 1, &files).await;
    super::apply::wait_applied(&client, ns, "app", &revision(1), controller).await;
    failed
}

#[tokio::test]
async fn sources_are_read_from_the_cache_or_with_direct_source_fetch_as_flux_reads_them() {
    let ours = std::path::Path::new(env!("CARGO_BIN_EXE_kustomize-controller"));
    let flux = flux_parity::flux_binary();
    let direct = ["--feature-gates=DirectSourceFetch=true"];
    let controllers = [
        ("cache-ours", start_shard_binary("cache-ours", ours, &[])),
        ("cache-flux", start_shard_binary("cache-flux", flux, &[])),
        (
            "direct-ours",
            start_shard_binary("direct-ours", ours, &direct),
        ),
        (
            "direct-flux",
            start_shard_binary("direct-flux", flux, &direct),
        ),
    ];
    let outcomes = futures::future::join_all(
        controllers
            .iter()
            .map(|(shard, controller)| missing_then_created(shard, controller)),
    )
    .await;
    let [cache_ours, cache_flux, direct_ours, direct_flux] =
        <[(String, String); 4]>::try_from(outcomes).expect("four outcomes");
    assert_eq!(cache_ours, cache_flux, "from the cache");
    assert_eq!(direct_ours, direct_flux, "from the API server");
    assert_eq!(
        cache_ours,
        (
            "ArtifactFailed".to_string(),
            "GitRepository.source.toolkit.fluxcd.io \"late\" not found".to_string()
        )
    );
    assert_eq!(
        direct_ours.1,
        "gitrepositories.source.toolkit.fluxcd.io \"late\" not found"
    );
}
