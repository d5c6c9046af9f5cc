use std::time::{Duration, Instant};

use serde_json::json;

use super::*;
use crate::gcp::tests::{TEST_KEY, policy, server};

const TOKEN: &str = "ya29.gke-access-token-DO-NOT-LEAK";
const CLUSTER: &str = "projects/my-project/locations/europe-west1/clusters/prod";

/// Key services whose own credentials are a service account key file with `token_uri` the
/// double, and whose GKE API is the double.
fn services(server: &str, dir: &tempfile::TempDir) -> KeyServices {
    let file = dir.path().join("key.json");
    let key = json!({
        "type": "service_account",
        "project_id": "my-project",
        "private_key_id": "0123456789abcdef",
        "private_key": TEST_KEY,
        "client_email": "flux@my-project.iam.gserviceaccount.com",
        "token_uri": format!("{server}/token"),
    });
    std::fs::write(&file, key.to_string()).unwrap();
    let path = file.to_string_lossy().into_owned();
    KeyServices::new(
        tokio::runtime::Handle::current(),
        crate::HttpClient::new().unwrap(),
        crate::Credentials::default(),
        crate::Environment::from_pairs([
            ("GOOGLE_APPLICATION_CREDENTIALS", path.as_str()),
            ("GKE_API_ENDPOINT", server),
        ]),
    )
    .with_policy(policy())
    .with_purpose(crate::Purpose::RemoteCluster)
}

fn token_answer() -> (u16, String) {
    (
        200,
        json!({"access_token": TOKEN, "expires_in": 3600, "token_type": "Bearer"}).to_string(),
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
    assert!(check_cluster_id(CLUSTER).is_ok());
    for bad in [
        "",
        "prod",
        "projects/p/zones/z/clusters/c",
        "projects/p/locations/l/clusters/",
        "projects/p/locations/l/clusters/c/nodePools/n",
    ] {
        assert_eq!(
            check_cluster_id(bad).unwrap_err().to_string(),
            format!("invalid GKE cluster ID: '{bad}'. must match {CLUSTER_PATTERN}")
        );
    }
}

#[tokio::test]
async fn the_endpoint_and_ca_come_from_clusters_get_with_the_access_token() {
    let ca = "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n";
    let server = server::serve(vec![
        token_answer(),
        (
            200,
            json!({
                "name": "prod",
                "endpoint": "34.76.1.2",
                "masterAuth": {"clusterCaCertificate": STANDARD.encode(ca)},
            })
            .to_string(),
        ),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let services = services(&server.url, &dir);
    let access = rest_config(&services, &request(CLUSTER, None, None))
        .await
        .unwrap();
    assert_eq!(access.host, "34.76.1.2");
    assert_eq!(access.ca.as_deref(), Some(ca.as_bytes()));
    assert_eq!(access.token.as_str(), TOKEN);
    assert!(access.renew_at > Instant::now() + Duration::from_secs(3000));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        (requests[1].method.as_str(), requests[1].target.as_str()),
        ("GET", format!("/v1/{CLUSTER}").as_str())
    );
    assert!(
        requests[1].headers.contains(&format!(
            "authorization: bearer {}",
            TOKEN.to_ascii_lowercase()
        )),
        "{}",
        requests[1].headers
    );

    // With the address and CA of the ConfigMap, only the token is asked for, and the
    // cluster ID is not needed.
    let server = server::serve(vec![token_answer()]).await;
    let services = super::tests::services(&server.url, &dir);
    let access = rest_config(&services, &request("", Some("https://10.0.0.1"), Some(ca)))
        .await
        .unwrap();
    assert_eq!(access.host, "https://10.0.0.1");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_cluster_that_does_not_exist_is_named_without_the_token() {
    let server = server::serve(vec![
        token_answer(),
        (
            404,
            json!({"error": {"code": 404, "status": "NOT_FOUND",
                "message": format!("Not found: {CLUSTER}.")}})
            .to_string(),
        ),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let error = rest_config(&services(&server.url, &dir), &request(CLUSTER, None, None))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(&format!("failed to describe GKE cluster '{CLUSTER}': ")),
        "{error}"
    );
    assert!(error.contains("Not found"), "{error}");
    assert!(!error.contains(TOKEN), "{error}");
    // A lookup needs the cluster ID: refused before any call.
    let error = rest_config(&services(&server.url, &dir), &request("prod", None, None))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("invalid GKE cluster ID: 'prod'"),
        "{error}"
    );
    assert_eq!(server.requests().len(), 2);
}
