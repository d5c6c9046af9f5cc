//! Where sources, Secrets and ConfigMaps are read: sources from the watch cache by default,
//! from the API server with the `DirectSourceFetch` feature gate; Secrets and ConfigMaps from
//! the API server by default, from watch caches with `CacheSecretsAndConfigMaps`. Run side by
//! side with Flux v1.9.5, each way: an object that does not exist yet fails with the same
//! sentence as Flux's (a cache names the kind, the API server the resource), and is read once
//! it appears.

use super::apply::kustomization_status;
use super::*;
use k8s_openapi::api::core::v1::Secret;

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

/// The sum of `rest_client_requests_total` samples for `method` in a `/metrics` text.
fn requests(metrics: &str, method: &str) -> u64 {
    let label = format!("method=\"{method}\"");
    metrics
        .lines()
        .filter(|line| line.starts_with("rest_client_requests_total{") && line.contains(&label))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// What a controller did with a Kustomization whose variables come from ConfigMap `vars`
/// and Secret `creds`.
struct Substituted {
    /// Ready's (reason, message) while `vars` does not exist.
    missing: (String, String),
    /// The values applied: before and after `vars` was written.
    values: Vec<String>,
    /// GET requests the controller sent during three periodic runs, once all was applied.
    gets: u64,
}

/// Kustomization `app` of `shard`, every 2 s, applying ConfigMap `out` from `${greeting}`
/// (ConfigMap `vars`) and `${token}` (Secret `creds`): missing `vars`, then created, then
/// written; the GETs of three further periodic runs counted.
async fn substituted(shard: &str, controller: &ControllerProcess) -> Substituted {
    let client = support::client().await;
    let ns = TestNamespace::new(&client, shard).await;
    let ns = ns.name();
    create_git_repository(&client, ns, "repo").await;
    let out = config_map(ns, "out", "${greeting}-${token}");
    publish(&client, ns, "repo", 1, &[("deploy/out.yaml", out)]).await;
    let spec = json!({
        "interval": "2s",
        "postBuild": {"substituteFrom": [
            {"kind": "ConfigMap", "name": "vars"},
            {"kind": "Secret", "name": "creds"},
        ]}
    });
    create_labelled_kustomization(
        &client,
        ns,
        "app",
        "repo",
        spec,
        json!({SHARD_LABEL: shard}),
    )
    .await;
    let missing = wait_for(
        WAIT,
        &format!("{shard}: vars missing"),
        async || match ready(&client, ns, "app").await {
            Some((ConditionStatus::False, reason, message)) => Ok((reason, message)),
            other => Err(format!("{other:?}\n{}", tail(&controller.log(), 20))),
        },
    )
    .await;
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "creds"},
        "stringData": {"token": "t"}
    }))
    .expect("secret");
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create creds");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let vars: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "vars"},
        "data": {"greeting": "one"}
    }))
    .expect("config map");
    config_maps
        .create(&PostParams::default(), &vars)
        .await
        .expect("create vars");
    let applied = async |expected: &str| {
        wait_for(WAIT, &format!("{shard}: {expected} applied"), async || {
            let out = config_maps.get_opt("out").await.ok().flatten();
            let value = out.and_then(|o| o.data?.get("value").cloned());
            match value {
                Some(value) if value == expected => Ok(value),
                other => Err(format!("{other:?}\n{}", tail(&controller.log(), 20))),
            }
        })
        .await
    };
    let mut values = vec![applied("one-t").await];
    config_maps
        .patch(
            "vars",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"greeting": "two"}})),
        )
        .await
        .expect("write vars");
    values.push(applied("two-t").await);
    let reconciles = async || {
        kustomization_status(&client, ns, "app").await["history"][0]["totalReconciliations"]
            .as_i64()
            .unwrap_or(0)
    };
    let (first, before) = (reconciles().await, requests(&controller.metrics(), "GET"));
    wait_for(WAIT, &format!("{shard}: three more runs"), async || {
        let now = reconciles().await;
        if now >= first + 3 {
            Ok(())
        } else {
            Err(format!("{now} runs"))
        }
    })
    .await;
    let gets = requests(&controller.metrics(), "GET") - before;
    Substituted {
        missing,
        values,
        gets,
    }
}

#[tokio::test]
async fn secrets_and_config_maps_are_read_from_caches_with_cache_secrets_and_config_maps() {
    let ours = std::path::Path::new(env!("CARGO_BIN_EXE_kustomize-controller"));
    let flux = flux_parity::flux_binary();
    let cached = ["--feature-gates=CacheSecretsAndConfigMaps=true"];
    let controllers = [
        (
            "vars-cached-ours",
            start_shard_binary("vars-cached-ours", ours, &cached),
        ),
        (
            "vars-cached-flux",
            start_shard_binary("vars-cached-flux", flux, &cached),
        ),
        (
            "vars-direct-ours",
            start_shard_binary("vars-direct-ours", ours, &[]),
        ),
        (
            "vars-direct-flux",
            start_shard_binary("vars-direct-flux", flux, &[]),
        ),
    ];
    let outcomes = futures::future::join_all(
        controllers
            .iter()
            .map(|(shard, controller)| substituted(shard, controller)),
    )
    .await;
    let [cached_ours, cached_flux, direct_ours, direct_flux] =
        <[Substituted; 4]>::try_from(outcomes)
            .ok()
            .expect("four outcomes");
    assert_eq!(cached_ours.missing, cached_flux.missing, "from the cache");
    assert_eq!(
        direct_ours.missing, direct_flux.missing,
        "from the API server"
    );
    assert!(
        cached_ours
            .missing
            .1
            .contains("ConfigMap \"vars\" not found"),
        "{:?}",
        cached_ours.missing
    );
    assert!(
        direct_ours
            .missing
            .1
            .contains("configmaps \"vars\" not found"),
        "{:?}",
        direct_ours.missing
    );
    for outcome in [&cached_ours, &cached_flux, &direct_ours, &direct_flux] {
        assert_eq!(outcome.values, ["one-t", "two-t"]);
    }
    eprintln!(
        "GETs in three runs: cached ours {}, flux {}; direct ours {}, flux {}",
        cached_ours.gets, cached_flux.gets, direct_ours.gets, direct_flux.gets
    );
    // Read directly, each of the (at least) three runs GETs both objects; from the caches,
    // neither: at least six GETs fewer (a run more or less moves either count by its other
    // requests, fewer than six).
    assert!(
        cached_ours.gets + 6 <= direct_ours.gets,
        "cached {} direct {}",
        cached_ours.gets,
        direct_ours.gets
    );
}
