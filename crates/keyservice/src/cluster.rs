//! Remote clusters on the clouds (`spec.kubeConfig.configMapRef` with provider `aws`,
//! `azure` or `gcp`), as fluxcd/pkg/auth builds their REST configs: a bearer token made
//! with the same credentials the key services use (the ConfigMap's ServiceAccount, else the
//! controller's own), and the API server's address and CA certificate, from the ConfigMap
//! or looked up in the cloud's API (EKS `DescribeCluster`, AKS's ARM resource, GKE's
//! `clusters.get`).
//!
//! The [`KeyServices`] given carry the credentials (its [`crate::Credentials::identity`]);
//! make them with [`crate::Purpose::RemoteCluster`] so that the token cache counts the
//! lookups as Flux's `fetch_kubeconfig`.

use std::time::Instant;

use zeroize::Zeroizing;

use crate::{KeyServiceError, KeyServices};

/// The cloud a remote cluster runs on (the ConfigMap's `provider`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cloud {
    /// Amazon EKS.
    Aws,
    /// Azure Kubernetes Service.
    Azure,
    /// Google Kubernetes Engine.
    Gcp,
}

impl Cloud {
    /// The provider's name, as the ConfigMap writes it.
    pub fn name(self) -> &'static str {
        match self {
            Cloud::Aws => "aws",
            Cloud::Azure => "azure",
            Cloud::Gcp => "gcp",
        }
    }

    /// The cloud of a provider name, `None` for another.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "aws" => Some(Cloud::Aws),
            "azure" => Some(Cloud::Azure),
            "gcp" => Some(Cloud::Gcp),
            _ => None,
        }
    }
}

/// What the ConfigMap says of the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterRequest {
    /// `cluster`: the cloud's name of the cluster (an EKS ARN, an AKS resource ID, a GKE
    /// `projects/P/locations/L/clusters/C`).
    pub cluster: Option<String>,
    /// `address`: the API server's address, as written.
    pub address: Option<String>,
    /// `ca.crt`: the API server's PEM CA certificate.
    pub ca: Option<String>,
}

impl ClusterRequest {
    /// Whether the cloud's API must be asked for the address or the CA certificate.
    pub fn needs_lookup(&self) -> bool {
        self.address.is_none() || self.ca.is_none()
    }
}

/// How to reach the cluster: its API server, CA and a bearer token, and when the token is due
/// for renewal. Its Debug form hides the token.
pub struct ClusterAccess {
    /// The API server's address (the ConfigMap's, else the cloud's; not yet normalised).
    pub host: String,
    /// The PEM CA certificate(s), if any.
    pub ca: Option<Vec<u8>>,
    /// The bearer token.
    pub token: Zeroizing<String>,
    /// When a new token must be made.
    pub renew_at: Instant,
}

impl std::fmt::Debug for ClusterAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterAccess")
            .field("host", &self.host)
            .field("ca", &self.ca.as_ref().map(Vec::len))
            .field("token", &"***")
            .field("renew_at", &self.renew_at)
            .finish()
    }
}

/// The REST config of `request`'s cluster on `cloud`, with `services`' credentials.
pub async fn rest_config(
    services: &KeyServices,
    cloud: Cloud,
    request: &ClusterRequest,
) -> Result<ClusterAccess, KeyServiceError> {
    match cloud {
        Cloud::Aws => crate::aws::eks::rest_config(services, request).await,
        Cloud::Azure => crate::azure::aks::rest_config(services, request).await,
        Cloud::Gcp => crate::gcp::gke::rest_config(services, request).await,
    }
}
