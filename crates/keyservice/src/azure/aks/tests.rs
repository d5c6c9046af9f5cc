use serde_json::json;

use super::*;
use crate::gcp::tests::{policy, server};

const AKS_TOKEN: &str = "aks-access-token-DO-NOT-LEAK";
const ARM_TOKEN: &str = "arm-access-token-DO-NOT-LEAK";
const SECRET: &str = "client-secret-DO-NOT-LEAK";
const TENANT: &str = "72f988bf-86f1-41af-91ab-2d7cd011db47";
const SUBSCRIPTION: &str = "00000000-0000-0000-0000-000000000001";
const SERVER: &str = "https://prod-dns-1a2b3c.hcp.westeurope.azmk8s.io:443";

fn cluster_id(name: &str) -> String {
    format!(
        "/subscriptions/{SUBSCRIPTION}/resourceGroups/flux/providers/Microsoft.ContainerService/managedClusters/{name}"
    )
}

/// Key services with the controller's client secret, the double as Entra ID and as Azure
/// Resource Manager (through an environment file, as Flux reads one).
fn services(server: &str, dir: &tempfile::TempDir) -> KeyServices {
    let file = dir.path().join("environment.json");
    let environment = json!({
        "resourceManagerEndpoint": server,
        "tokenAudience": "https://management.core.windows.net/",
    });
    std::fs::write(&file, environment.to_string()).unwrap();
    let path = file.to_string_lossy().into_owned();
    KeyServices::new(
        tokio::runtime::Handle::current(),
        crate::HttpClient::new().unwrap(),
        crate::Credentials::default(),
        crate::Environment::from_pairs([
            ("AZURE_TENANT_ID", TENANT),
            ("AZURE_CLIENT_ID", "11111111-2222-3333-4444-555555555555"),
            ("AZURE_CLIENT_SECRET", SECRET),
            ("AZURE_AUTHORITY_HOST", server),
            ("AZURE_ENVIRONMENT_FILEPATH", path.as_str()),
        ]),
    )
    .with_policy(policy())
    .with_purpose(crate::Purpose::RemoteCluster)
}

fn token(value: &str) -> (u16, String) {
    (
        200,
        json!({"token_type": "Bearer", "expires_in": 3599, "access_token": value}).to_string(),
    )
}

fn managed_cluster(entra_id: bool) -> (u16, String) {
    let mut properties = json!({"fqdn": "prod-dns-1a2b3c.hcp.westeurope.azmk8s.io"});
    if entra_id {
        properties["aadProfile"] = json!({"managed": true, "enableAzureRBAC": true});
    }
    (
        200,
        json!({"name": "prod", "properties": properties}).to_string(),
    )
}

fn user_credentials(ca: &str) -> (u16, String) {
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: prod\n  cluster:\n    server: {SERVER}\n    certificate-authority-data: {}\ncontexts:\n- name: prod\n  context:\n    cluster: prod\n    user: clusterUser\ncurrent-context: prod\nusers:\n- name: clusterUser\n  user:\n    exec:\n      command: kubelogin\n",
        STANDARD.encode(ca)
    );
    (
        200,
        json!({"kubeconfigs": [{"name": "clusterUser", "value": STANDARD.encode(kubeconfig)}]})
            .to_string(),
    )
}

fn request(cluster: &str, address: Option<&str>, ca: Option<&str>) -> ClusterRequest {
    ClusterRequest {
        cluster: Some(cluster.to_owned()),
        address: address.map(str::to_owned),
        ca: ca.map(str::to_owned),
    }
}

#[test]
fn cluster_ids_as_flux_reads_them() {
    let id = ClusterId::parse(&cluster_id("prod")).unwrap();
    assert_eq!(
        (
            id.subscription.as_str(),
            id.resource_group.as_str(),
            id.name.as_str()
        ),
        (SUBSCRIPTION, "flux", "prod")
    );
    // The fixed words in any case, as Flux's (?i) pattern.
    let lower = cluster_id("prod").to_ascii_lowercase();
    assert_eq!(ClusterId::parse(&lower).unwrap().name, "prod");
    for bad in [
        String::new(),
        "prod".to_owned(),
        "/subscriptions/short/resourceGroups/flux/providers/Microsoft.ContainerService/managedClusters/prod".to_owned(),
        cluster_id(""),
        format!("{}/agentPools/a", cluster_id("prod")),
    ] {
        assert_eq!(
            ClusterId::parse(&bad).unwrap_err().to_string(),
            format!("invalid AKS cluster ID: '{bad}'. must match {CLUSTER_PATTERN}")
        );
    }
}

#[tokio::test]
async fn the_aks_token_and_the_kubeconfig_of_resource_manager() {
    let ca = "-----BEGIN CERTIFICATE-----\nMIID\n-----END CERTIFICATE-----\n";
    let server = server::serve(vec![
        token(AKS_TOKEN),
        token(ARM_TOKEN),
        managed_cluster(true),
        user_credentials(ca),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let access = rest_config(
        &services(&server.url, &dir),
        &request(&cluster_id("prod"), None, None),
    )
    .await
    .unwrap();
    assert_eq!(access.host, SERVER);
    assert_eq!(access.ca.as_deref(), Some(ca.as_bytes()));
    assert_eq!(access.token.as_str(), AKS_TOKEN);
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(requests[0].target, format!("/{TENANT}/oauth2/v2.0/token"));
    assert!(
        requests[0]
            .body
            .contains("scope=6dae42f8-4368-4678-94ff-3960e28e3630%2F.default"),
        "{}",
        requests[0].body
    );
    assert!(
        requests[1]
            .body
            .contains("scope=https%3A%2F%2Fmanagement.core.windows.net%2F.default"),
        "{}",
        requests[1].body
    );
    assert_eq!(
        (requests[2].method.as_str(), requests[2].target.clone()),
        (
            "GET",
            format!("{}?api-version={API_VERSION}", cluster_id("prod"))
        )
    );
    assert!(requests[2].headers.contains(&format!(
        "authorization: bearer {}",
        ARM_TOKEN.to_ascii_lowercase()
    )));
    assert_eq!(
        (requests[3].method.as_str(), requests[3].target.clone()),
        (
            "POST",
            format!(
                "{}/listClusterUserCredential?api-version={API_VERSION}",
                cluster_id("prod")
            )
        )
    );
}

#[tokio::test]
async fn an_address_that_is_not_the_clusters_is_refused_by_name() {
    let server = server::serve(vec![
        token(AKS_TOKEN),
        token(ARM_TOKEN),
        managed_cluster(true),
        user_credentials("CA"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let request = request(&cluster_id("prod"), Some("https://other.example.com"), None);
    let error = rest_config(&services(&server.url, &dir), &request)
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        format!(
            "no kubeconfig found for AKS cluster prod matching the specified address 'https://other.example.com'. cluster addresses: ['{SERVER}']"
        )
    );
    // The same address in another form is the cluster's.
    let server = server::serve(vec![
        token(AKS_TOKEN),
        token(ARM_TOKEN),
        managed_cluster(true),
        user_credentials("CA"),
    ])
    .await;
    let request = super::tests::request(
        &cluster_id("prod"),
        Some("PROD-DNS-1a2b3c.hcp.westeurope.azmk8s.io"),
        None,
    );
    let access = rest_config(&services(&server.url, &dir), &request)
        .await
        .unwrap();
    assert_eq!(access.host, "PROD-DNS-1a2b3c.hcp.westeurope.azmk8s.io");
    assert_eq!(access.ca.as_deref(), Some(&b"CA"[..]));
}

#[tokio::test]
async fn failures_name_the_cluster_and_hold_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    // Without Entra ID integration, the AKS token is of no use.
    let server = server::serve(vec![
        token(AKS_TOKEN),
        token(ARM_TOKEN),
        managed_cluster(false),
    ])
    .await;
    let error = rest_config(
        &services(&server.url, &dir),
        &request(&cluster_id("prod"), None, None),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        error.starts_with("AKS cluster prod does not have Microsoft Entra ID integration enabled"),
        "{error}"
    );
    // A cluster that does not exist.
    let server = server::serve(vec![
        token(AKS_TOKEN),
        token(ARM_TOKEN),
        (
            404,
            json!({"error": {"code": "ResourceNotFound",
                "message": "The Resource 'Microsoft.ContainerService/managedClusters/gone' under resource group 'flux' was not found."}})
            .to_string(),
        ),
    ])
    .await;
    let error = rest_config(
        &services(&server.url, &dir),
        &request(&cluster_id("gone"), None, None),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        error.starts_with("failed to describe AKS cluster: "),
        "{error}"
    );
    assert!(error.contains("managedClusters/gone"), "{error}");
    // Entra ID refuses the client.
    let server = server::serve(vec![(
        401,
        json!({"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret provided."}).to_string(),
    )])
    .await;
    let error = rest_config(
        &services(&server.url, &dir),
        &request(&cluster_id("prod"), None, None),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(error.contains("AADSTS7000215"), "{error}");
    for secret in [SECRET, AKS_TOKEN, ARM_TOKEN] {
        assert!(!error.contains(secret), "{error}");
    }
}
