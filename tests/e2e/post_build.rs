//! Post-build substitution: variables from ConfigMaps, Secrets and the spec.

use super::*;

/// Labels of a live object, as a JSON map.
async fn labels_of<K>(api: &Api<K>, name: &str) -> Value
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    match api.get_opt(name).await {
        Ok(Some(object)) => json!(object.meta().labels.clone().unwrap_or_default()),
        other => json!(format!("{:?}", other.map(|o| o.is_some()))),
    }
}

#[tokio::test]
async fn post_build_variables_come_from_config_maps_secrets_and_the_spec() {
    use k8s_openapi::api::core::v1::{Namespace, Secret};
    let f = Fixture::new("post-build").await;
    let ns = f.ns();
    let target_ns = format!("{ns}-vars");
    let config_maps: Api<ConfigMap> = Api::namespaced(f.client.clone(), ns);
    let vars: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "cluster-vars", "labels": {"reconcile.fluxcd.io/watch": "Enabled"}},
        "data": {"cluster_region": "eu-west-1", "team": "from-config-map"}
    }))
    .expect("config map");
    config_maps
        .create(&PostParams::default(), &vars)
        .await
        .expect("create cluster-vars");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "secret-vars"},
        "stringData": {"team": "platform\n", "tier": "gold"}
    }))
    .expect("secret");
    Api::<Secret>::namespaced(f.client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create secret-vars");

    let namespace_manifest = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {target_ns}\n  labels:\n    \
         env: ${{cluster_env:=dev}}\n    region: ${{cluster_region}}\n    team: ${{team}}\n    \
         tier: ${{tier}}\n    owner: ${{owner}}\n"
    );
    let raw = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: raw\n  namespace: {ns}\n  \
         annotations:\n    kustomize.toolkit.fluxcd.io/substitute: disabled\ndata:\n  \
         script: echo ${{HOME}}\n"
    );
    f.create_source("repo").await;
    f.publish(
        1,
        &[
            ("deploy/ns.yaml", &namespace_manifest),
            ("deploy/raw.yaml", &raw),
        ],
    )
    .await;
    create_kustomization(
        &f.client,
        ns,
        "app",
        "repo",
        json!({"postBuild": {
            "substitute": {"owner": "sre"},
            "substituteFrom": [
                {"kind": "ConfigMap", "name": "cluster-vars"},
                {"kind": "Secret", "name": "secret-vars"},
                {"kind": "ConfigMap", "name": "absent-vars", "optional": true}
            ]
        }}),
    )
    .await;
    wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::True,
        "revision 1 applied",
    )
    .await;

    let namespaces: Api<Namespace> = Api::all(f.client.clone());
    assert_eq!(
        labels_of(&namespaces, &target_ns).await,
        json!({"env": "dev", "region": "eu-west-1", "team": "platform", "tier": "gold",
               "owner": "sre", "kubernetes.io/metadata.name": target_ns,
               "kustomize.toolkit.fluxcd.io/name": "app", "kustomize.toolkit.fluxcd.io/namespace": ns}),
        "defaults apply, later sources override earlier ones, newlines are stripped"
    );
    let raw_live = config_maps.get("raw").await.expect("raw");
    assert_eq!(
        raw_live
            .data
            .unwrap_or_default()
            .get("script")
            .map(String::as_str),
        Some("echo ${HOME}"),
        "an opted-out object keeps its expressions"
    );

    // A variable with no value in strict mode fails the build and applies nothing.
    let broken = namespace_manifest.replace("owner: ${owner}", "owner: ${missing_owner}");
    f.publish(2, &[("deploy/ns.yaml", &broken), ("deploy/raw.yaml", &raw)])
        .await;
    let (reason, message) = wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::False,
        "strict failure",
    )
    .await;
    assert_eq!(reason, "BuildFailed", "{message}");
    assert!(
        message.contains("missing_owner") && message.contains(&target_ns),
        "{message}"
    );
    assert_eq!(labels_of(&namespaces, &target_ns).await["owner"], "sre");

    // Back to a good revision; then a change to the watched ConfigMap is applied by itself.
    f.publish(
        3,
        &[
            ("deploy/ns.yaml", &namespace_manifest),
            ("deploy/raw.yaml", &raw),
        ],
    )
    .await;
    wait_ready_with(
        &f.client,
        ns,
        "app",
        ConditionStatus::True,
        "revision 3 applied",
    )
    .await;
    config_maps
        .patch(
            "cluster-vars",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"cluster_region": "us-east-2"}})),
        )
        .await
        .expect("update cluster-vars");
    wait_for(WAIT, "the new region to be applied", async || {
        let labels = labels_of(&namespaces, &target_ns).await;
        if labels["region"] == "us-east-2" {
            Ok(())
        } else {
            Err(labels)
        }
    })
    .await;
}
