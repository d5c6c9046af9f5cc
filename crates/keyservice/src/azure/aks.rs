//! Azure Kubernetes Service clusters as remote clusters, as fluxcd/pkg/auth/azure reaches
//! them: a Microsoft Entra ID token for the AKS server application
//! (`6dae42f8-4368-4678-94ff-3960e28e3630/.default`) with the same credentials as Azure Key
//! Vault (the ServiceAccount's workload identity, else the controller's), and, when the
//! ConfigMap does not give both the address and the CA, a second token for Azure Resource
//! Manager to read the managed cluster (which must have Entra ID integration) and its user
//! kubeconfigs (`listClusterUserCredential`): the one whose server is the ConfigMap's address,
//! else the first. `AZURE_AUTHORITY_HOST` chooses the cloud, and the file
//! `AZURE_ENVIRONMENT_FILEPATH` names may give `resourceManagerEndpoint` and `tokenAudience`,
//! as in Flux.

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

/// The scope of tokens for AKS clusters with Entra ID integration (the AKS server app).
pub const AKS_SCOPE: &str = "6dae42f8-4368-4678-94ff-3960e28e3630/.default";
/// The managed clusters API version of the SDK Flux builds with.
const API_VERSION: &str = "2022-04-01";
/// The AKS cluster resource IDs fluxcd/pkg/auth accepts.
const CLUSTER_PATTERN: &str = r"(?i)^/subscriptions/([^/]{36})/resourceGroups/([^/]{1,200})/providers/Microsoft\.ContainerService/managedClusters/([^/]{1,200})$";

/// Why the ConfigMap's `cluster` is not an AKS cluster resource ID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid AKS cluster ID: '{0}'. must match {CLUSTER_PATTERN}")]
pub struct InvalidClusterId(pub String);

/// An AKS cluster's resource ID: subscription, resource group and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterId {
    /// The subscription ID.
    pub subscription: String,
    /// The resource group.
    pub resource_group: String,
    /// The cluster's name.
    pub name: String,
}

impl ClusterId {
    /// `/subscriptions/S/resourceGroups/G/providers/Microsoft.ContainerService/managedClusters/N`,
    /// the fixed words in any case.
    pub fn parse(id: &str) -> Result<Self, InvalidClusterId> {
        let parts: Vec<&str> = id.split('/').collect();
        let within = |s: &str, max: usize| (1..=max).contains(&s.chars().count());
        match parts.as_slice() {
            [
                "",
                subscriptions,
                subscription,
                groups,
                group,
                providers,
                namespace,
                clusters,
                name,
            ] if subscriptions.eq_ignore_ascii_case("subscriptions")
                && groups.eq_ignore_ascii_case("resourceGroups")
                && providers.eq_ignore_ascii_case("providers")
                && namespace.eq_ignore_ascii_case("Microsoft.ContainerService")
                && clusters.eq_ignore_ascii_case("managedClusters")
                && subscription.chars().count() == 36
                && within(group, 200)
                && within(name, 200) =>
            {
                Ok(ClusterId {
                    subscription: (*subscription).to_owned(),
                    resource_group: (*group).to_owned(),
                    name: (*name).to_owned(),
                })
            }
            _ => Err(InvalidClusterId(id.to_owned())),
        }
    }

    fn path(&self) -> String {
        format!(
            "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.ContainerService/managedClusters/{}",
            oauth::percent_encode(&self.subscription),
            oauth::percent_encode(&self.resource_group),
            oauth::percent_encode(&self.name)
        )
    }
}

/// The REST config of the AKS cluster `request` names.
pub(crate) async fn rest_config(
    services: &KeyServices,
    request: &ClusterRequest,
) -> Result<ClusterAccess, KeyServiceError> {
    let cluster = request.cluster.as_deref().unwrap_or_default();
    let id = request
        .needs_lookup()
        .then(|| ClusterId::parse(cluster))
        .transpose()
        .map_err(|e| KeyServiceError::invalid_key_because(None, e))?;
    let aks = new_token(services, AKS_SCOPE).await?;
    let renew_at = oauth::renew_at(aks.expires_in);
    let (host, ca) = match (&request.address, &request.ca, id) {
        (Some(address), Some(ca), _) => (address.clone(), ca.as_bytes().to_vec()),
        (address, ca, id) => {
            // `id` is set whenever the address or the CA is missing.
            let id = id.ok_or_else(|| {
                KeyServiceError::invalid_key(InvalidClusterId(cluster.to_owned()).to_string())
            })?;
            let found = lookup(services, &id, address.as_deref()).await?;
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
        token: aks.access_token,
        renew_at,
    })
}

/// The Azure Resource Manager endpoint and token scope of the cloud in use.
fn resource_manager(services: &KeyServices) -> Result<(String, String), KeyServiceError> {
    let env = &services.environment;
    if let Some(path) = env.get("AZURE_ENVIRONMENT_FILEPATH") {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct File {
            resource_manager_endpoint: Option<String>,
            token_audience: Option<String>,
        }
        let text = std::fs::read(path).map_err(|e| {
            KeyServiceError::credentials_because(
                Some(&format!("failed to read Azure environment file '{path}'")),
                e,
            )
        })?;
        let file: File = serde_json::from_slice(&text).map_err(|e| {
            KeyServiceError::credentials_because(
                Some(&format!("failed to parse Azure environment file '{path}'")),
                e,
            )
        })?;
        let endpoint = file
            .resource_manager_endpoint
            .filter(|e| !e.is_empty())
            .ok_or_else(|| {
                KeyServiceError::credentials(format!(
                    "Azure environment file '{path}' has no resourceManagerEndpoint"
                ))
            })?;
        let endpoint = endpoint.trim_end_matches('/').to_owned();
        let audience = file
            .token_audience
            .filter(|a| !a.is_empty())
            .unwrap_or_else(|| endpoint.clone());
        return Ok((
            endpoint,
            format!("{}/.default", audience.trim_end_matches('/')),
        ));
    }
    let authority = env.get("AZURE_AUTHORITY_HOST").unwrap_or_default();
    let endpoint = if authority.contains("chinacloudapi.cn") {
        "https://management.chinacloudapi.cn"
    } else if authority.contains("microsoftonline.us") {
        "https://management.usgovcloudapi.net"
    } else {
        "https://management.azure.com"
    };
    Ok((endpoint.to_owned(), format!("{endpoint}/.default")))
}

/// The managed cluster's address and PEM CA from Azure Resource Manager: the user kubeconfig
/// whose server is `address` (compared as Flux normalises addresses), else the first.
async fn lookup(
    services: &KeyServices,
    id: &ClusterId,
    address: Option<&str>,
) -> Result<(String, Vec<u8>), KeyServiceError> {
    let (endpoint, scope) = resource_manager(services)?;
    let arm = new_token(services, &scope).await?;
    let url = format!("{endpoint}{}", id.path());
    let context = "failed to describe AKS cluster";
    let call = |method: Method, url: String| {
        let token = arm.access_token.clone();
        move || {
            Request::builder()
                .method(method.clone())
                .uri(&url)
                .header(
                    http::header::AUTHORIZATION,
                    format!("Bearer {}", token.as_str()),
                )
                .header(http::header::CONTENT_LENGTH, "0")
                .body(Full::new(Bytes::new()))
                .map_err(|e| Failure::Permanent(format!("invalid request: {e}")))
        }
    };
    let cluster: ManagedCluster = services
        .exchange(
            services.policy,
            call(Method::GET, format!("{url}?api-version={API_VERSION}")),
            |answer| oauth::json_answer(answer.status, &answer.body),
        )
        .await
        .map_err(|source| KeyServiceError::call(context, source))?;
    if cluster.properties.and_then(|p| p.aad_profile).is_none() {
        return Err(KeyServiceError::credentials(format!(
            "AKS cluster {} does not have Microsoft Entra ID integration enabled. See docs for enabling: https://learn.microsoft.com/en-us/azure/aks/enable-authentication-microsoft-entra-id",
            id.name
        )));
    }
    let wanted = address
        .map(|a| {
            normalise(a).ok_or_else(|| {
                KeyServiceError::invalid_key(format!(
                    "failed to parse specified cluster address '{a}'"
                ))
            })
        })
        .transpose()?;
    let credentials: CredentialResults = services
        .exchange(
            services.policy,
            call(
                Method::POST,
                format!("{url}/listClusterUserCredential?api-version={API_VERSION}"),
            ),
            |answer| oauth::json_answer(answer.status, &answer.body),
        )
        .await
        .map_err(|source| {
            KeyServiceError::call(
                format!(
                    "failed to list the user kubeconfigs of AKS cluster {}",
                    id.name
                ),
                source,
            )
        })?;
    let mut addresses = Vec::new();
    for (i, entry) in credentials.kubeconfigs.iter().enumerate() {
        let (server, ca) =
            read_kubeconfig(&entry.value).map_err(|message| KeyServiceError::Response {
                context: format!("failed to parse kubeconfig[{i}]"),
                message: message.to_owned(),
            })?;
        let canonical = normalise(&server).ok_or_else(|| KeyServiceError::Response {
            context: format!("failed to parse address '{server}' from kubeconfig[{i}]"),
            message: "not an https URL".to_owned(),
        })?;
        addresses.push(format!("'{server}'"));
        if wanted.as_ref().is_none_or(|w| *w == canonical) {
            return Ok((server, ca));
        }
    }
    Err(KeyServiceError::credentials(match address {
        None => format!("no kubeconfig found for AKS cluster {}", id.name),
        Some(address) => format!(
            "no kubeconfig found for AKS cluster {} matching the specified address '{address}'. cluster addresses: [{}]",
            id.name,
            addresses.join(", ")
        ),
    }))
}

/// Flux's normal form of a cluster address: `https://host:port`, lower case.
fn normalise(address: &str) -> Option<String> {
    let with_scheme = if address.starts_with("http") {
        address.to_owned()
    } else {
        format!("https://{address}")
    };
    let uri: http::Uri = with_scheme.parse().ok()?;
    if uri.scheme_str() != Some("https") {
        return None;
    }
    let authority = uri.authority()?;
    let port = authority.port_u16().unwrap_or(443);
    Some(format!("https://{}:{port}", authority.host()).to_ascii_lowercase())
}

/// The server and CA of a kubeconfig's current context (else its first cluster).
fn read_kubeconfig(text: &str) -> Result<(String, Vec<u8>), &'static str> {
    #[derive(Deserialize)]
    struct Config {
        #[serde(rename = "current-context", default)]
        current_context: String,
        #[serde(default)]
        contexts: Vec<Named<Context>>,
        #[serde(default)]
        clusters: Vec<Named<Cluster>>,
    }
    #[derive(Deserialize)]
    struct Named<T> {
        name: String,
        #[serde(alias = "context")]
        cluster: T,
    }
    #[derive(Deserialize)]
    struct Context {
        cluster: String,
    }
    #[derive(Deserialize)]
    struct Cluster {
        server: String,
        #[serde(rename = "certificate-authority-data", default)]
        ca: String,
    }
    let config: Config = serde_saphyr::from_str(text).map_err(|_| "not a kubeconfig")?;
    let wanted = config
        .contexts
        .iter()
        .find(|c| c.name == config.current_context)
        .map(|c| c.cluster.cluster.as_str());
    let cluster = config
        .clusters
        .iter()
        .find(|c| Some(c.name.as_str()) == wanted)
        .or(config.clusters.first())
        .ok_or("the kubeconfig names no cluster")?;
    let ca = if cluster.cluster.ca.is_empty() {
        Vec::new()
    } else {
        STANDARD
            .decode(cluster.cluster.ca.trim())
            .map_err(|_| "its certificate-authority-data is not base64")?
    };
    Ok((cluster.cluster.server.clone(), ca))
}

/// The part of a managed cluster resource read.
#[derive(Deserialize)]
struct ManagedCluster {
    properties: Option<Properties>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Properties {
    aad_profile: Option<serde_json::Value>,
}

/// `listClusterUserCredential`'s answer: kubeconfigs, base64 in JSON.
#[derive(Deserialize)]
struct CredentialResults {
    #[serde(default)]
    kubeconfigs: Vec<CredentialResult>,
}

#[derive(Deserialize)]
struct CredentialResult {
    #[serde(deserialize_with = "base64_text")]
    value: String,
}

fn base64_text<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let text = String::deserialize(deserializer)?;
    let bytes = STANDARD
        .decode(text.trim())
        .map_err(serde::de::Error::custom)?;
    String::from_utf8(bytes).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests;
