//! Google Kubernetes Engine clusters as remote clusters, as fluxcd/pkg/auth/gcp reaches
//! them: an OAuth access token of the same credentials as GCP KMS (the ServiceAccount's
//! workload identity, else the controller's), and, when the ConfigMap does not give both the
//! address and the CA, the cluster's `endpoint` and `masterAuth.clusterCaCertificate` from
//! the GKE API (`GET container.googleapis.com/v1/projects/P/locations/L/clusters/C`).
//! `GKE_API_ENDPOINT` overrides the GKE API's address (for a local test double).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http::{Method, Request};
use http_body_util::Full;
use serde::Deserialize;

use super::new_token;
use crate::cluster::{ClusterAccess, ClusterRequest};
use crate::oauth;
use crate::{Failure, KeyServiceError, KeyServices};

/// The GKE API.
const DEFAULT_ENDPOINT: &str = "https://container.googleapis.com";
/// The cluster IDs fluxcd/pkg/auth accepts.
const CLUSTER_PATTERN: &str = "^projects/[^/]{1,200}/locations/[^/]{1,200}/clusters/[^/]{1,200}$";

/// Why the ConfigMap's `cluster` is not a GKE cluster ID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid GKE cluster ID: '{0}'. must match {CLUSTER_PATTERN}")]
pub struct InvalidClusterId(pub String);

/// Checks `cluster` is `projects/P/locations/L/clusters/C`.
pub fn check_cluster_id(cluster: &str) -> Result<(), InvalidClusterId> {
    let parts: Vec<&str> = cluster.split('/').collect();
    let segment = |s: &str| (1..=200).contains(&s.chars().count());
    match parts.as_slice() {
        ["projects", p, "locations", l, "clusters", c]
            if segment(p) && segment(l) && segment(c) =>
        {
            Ok(())
        }
        _ => Err(InvalidClusterId(cluster.to_owned())),
    }
}

/// The REST config of the GKE cluster `request` names.
pub(crate) async fn rest_config(
    services: &KeyServices,
    request: &ClusterRequest,
) -> Result<ClusterAccess, KeyServiceError> {
    let cluster = request.cluster.as_deref().unwrap_or_default();
    if request.needs_lookup() {
        check_cluster_id(cluster).map_err(|e| KeyServiceError::invalid_key_because(None, e))?;
    }
    let token = new_token(services).await?;
    let (host, ca) = match (&request.address, &request.ca) {
        (Some(address), Some(ca)) => (address.clone(), ca.as_bytes().to_vec()),
        (address, ca) => {
            let found = get_cluster(services, cluster, token.value()).await?;
            (
                address.clone().unwrap_or(found.0),
                ca.as_ref()
                    .map(|c| c.as_bytes().to_vec())
                    .unwrap_or(found.1),
            )
        }
    };
    Ok(ClusterAccess {
        host,
        ca: Some(ca),
        renew_at: token.renew_at(),
        token: token.value().clone(),
    })
}

/// `clusters.get`: the cluster's endpoint and PEM CA certificate.
async fn get_cluster(
    services: &KeyServices,
    cluster: &str,
    token: &str,
) -> Result<(String, Vec<u8>), KeyServiceError> {
    let context = format!("failed to describe GKE cluster '{cluster}'");
    let base = services
        .environment
        .get("GKE_API_ENDPOINT")
        .map(|e| e.trim_end_matches('/').to_owned())
        .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
    let url = format!("{base}/v1/{cluster}");
    let request = || {
        Request::builder()
            .method(Method::GET)
            .uri(&url)
            .header(http::header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Full::new(Bytes::new()))
            .map_err(|e| Failure::Permanent(format!("invalid request: {e}")))
    };
    let answer: Answer = services
        .exchange(services.policy, request, |answer| {
            oauth::json_answer(answer.status, &answer.body)
        })
        .await
        .map_err(|source| KeyServiceError::call(context.clone(), source))?;
    let failed = |message: &str| KeyServiceError::Response {
        context: context.clone(),
        message: message.to_owned(),
    };
    let endpoint = answer
        .endpoint
        .filter(|e| !e.is_empty())
        .ok_or_else(|| failed("the cluster has no endpoint yet"))?;
    let ca = answer
        .master_auth
        .and_then(|auth| auth.cluster_ca_certificate)
        .ok_or_else(|| failed("the cluster has no CA certificate yet"))?;
    let ca = STANDARD
        .decode(ca.trim())
        .map_err(|_| failed("failed to decode GKE CA certificate: not base64"))?;
    Ok((endpoint, ca))
}

/// The part of a `Cluster` resource read.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answer {
    endpoint: Option<String>,
    master_auth: Option<MasterAuth>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MasterAuth {
    cluster_ca_certificate: Option<String>,
}

#[cfg(test)]
mod tests;
