//! Self-test of the integration-test control plane (`tests/controlplane/up.sh`) and of
//! `tests/support`: version, CRDs, namespaces, server-side apply.
mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};

const SOURCE_CRDS: [&str; 4] = [
    "gitrepositories.source.toolkit.fluxcd.io",
    "ocirepositories.source.toolkit.fluxcd.io",
    "buckets.source.toolkit.fluxcd.io",
    "externalartifacts.source.toolkit.fluxcd.io",
];
const KUSTOMIZATION_CRD: &str = "kustomizations.kustomize.toolkit.fluxcd.io";

/// True if some file in `<repo>/crds/` defines the Kustomization CRD.
fn repo_has_kustomization_crd() -> bool {
    let Ok(entries) = std::fs::read_dir(support::repo_root().join("crds")) else {
        return false;
    };
    entries.filter_map(Result::ok).any(|entry| {
        std::fs::read_to_string(entry.path())
            .map(|text| text.contains(&format!("name: {KUSTOMIZATION_CRD}")))
            .unwrap_or(false)
    })
}

#[tokio::test]
async fn control_plane_is_usable() {
    let client = support::client().await;

    let version = client.apiserver_version().await.expect("GET /version");
    assert_eq!(
        (version.major.as_str(), version.minor.trim_end_matches('+')),
        ("1", "35"),
        "unexpected server version {}",
        version.git_version
    );

    let mut expected: Vec<&str> = SOURCE_CRDS.to_vec();
    if repo_has_kustomization_crd() {
        expected.push(KUSTOMIZATION_CRD);
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in expected {
        let crd = crds
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("CRD {name}: {e}"));
        let established = crd
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Established" && c.status == "True");
        assert!(
            established,
            "CRD {name} is not Established: {:?}",
            crd.status
        );
    }

    let ns = support::TestNamespace::new(&client, "controlplane-smoke").await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let manifest = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": "smoke" },
        "data": { "greeting": "hello" },
    });
    configmaps
        .patch(
            "smoke",
            &PatchParams::apply("controlplane-smoke").force(),
            &Patch::Apply(&manifest),
        )
        .await
        .expect("server-side apply of a ConfigMap");

    let found = support::wait_for(
        Duration::from_secs(10),
        "ConfigMap smoke to be readable",
        async || match configmaps.get_opt("smoke").await {
            Ok(Some(cm)) => Ok(cm),
            Ok(None) => Err("not found".to_string()),
            Err(e) => Err(e.to_string()),
        },
    )
    .await;
    assert_eq!(
        found
            .data
            .unwrap_or_default()
            .get("greeting")
            .map(String::as_str),
        Some("hello")
    );
    let managers: Vec<String> = found
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|f| f.manager)
        .collect();
    assert!(
        managers.iter().any(|m| m == "controlplane-smoke"),
        "field manager missing from {managers:?}"
    );

    // kubectl from the support module talks to the same cluster.
    let out = support::kubectl()
        .args([
            "get",
            "configmap",
            "smoke",
            "-n",
            ns.name(),
            "-o",
            "jsonpath={.data.greeting}",
        ])
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello");
}

#[test]
fn unique_names_are_valid_dns_labels() {
    let long = "a_Very/Long::test name".repeat(10);
    for prefix in ["x", "", "--", long.as_str()] {
        let name = support::unique_name(prefix);
        assert!(name.len() <= 63, "{name}");
        assert!(name.starts_with("t-") && !name.ends_with('-'), "{name}");
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{name}"
        );
    }
    assert_ne!(support::unique_name("x"), support::unique_name("x"));
}
