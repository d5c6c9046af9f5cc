//! `spec.kubeConfig.configMapRef`: a remote cluster named by a ConfigMap, as Flux's
//! controller (v1.10) reads it: with the `generic` provider, reached with a Kubernetes
//! ServiceAccount token; with `aws`, `azure` or `gcp`, with a token of the cloud (made by
//! `keyservice::cluster`). This module reads the ConfigMap and the tokens; it makes no
//! request itself.

use std::collections::BTreeMap;

use base64::Engine;
use keyservice::cluster::{Cloud, ClusterRequest};

/// ConfigMap keys, as Flux names them.
pub mod keys {
    /// `generic`, `aws`, `azure` or `gcp`.
    pub const PROVIDER: &str = "provider";
    /// The API server's address (`https://host:port` or `host`).
    pub const ADDRESS: &str = "address";
    /// PEM CA certificate of the API server.
    pub const CA: &str = "ca.crt";
    /// Audiences of the token, one per line.
    pub const AUDIENCES: &str = "audiences";
    /// The ServiceAccount whose token is sent.
    pub const SERVICE_ACCOUNT_NAME: &str = "serviceAccountName";
    /// The cloud's name of the cluster (EKS ARN, AKS resource ID, GKE cluster ID).
    pub const CLUSTER: &str = "cluster";
}

/// The annotation of a ServiceAccount that chooses its credential provider.
pub const CREDENTIAL_PROVIDER_ANNOTATION: &str = "credential.auth.fluxcd.io/provider";

/// The generic provider's name.
pub const GENERIC: &str = "generic";

/// What the ConfigMap says of the remote cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterReference {
    /// The API server's URL, as Flux normalises it (`https://host:port`, lower case).
    pub url: String,
    /// The PEM CA certificate, if given.
    pub ca: Option<String>,
    /// The audiences of the token: the `audiences` key, else the address as written.
    pub audiences: Vec<String>,
    /// The `serviceAccountName` key.
    pub service_account: Option<String>,
}

/// What the ConfigMap says, by provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterConfig {
    /// `generic`: a ServiceAccount token for the cluster's audiences.
    Generic(ClusterReference),
    /// `aws`, `azure` or `gcp`.
    Cloud(CloudReference),
}

/// What the ConfigMap of a cloud provider says of the remote cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloudReference {
    /// The provider.
    pub cloud: Cloud,
    /// The `cluster`, `address` and `ca.crt` keys.
    pub request: ClusterRequest,
    /// The `audiences` key (the ServiceAccount token's audiences), empty when not given or
    /// not used (`gcp` without a `serviceAccountName`, as in Flux).
    pub audiences: Vec<String>,
    /// The `serviceAccountName` key.
    pub service_account: Option<String>,
}

/// Why the ConfigMap or a token cannot be used. Messages follow Flux's where it has one.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// A provider name Flux does not know.
    #[error("provider '{0}' not implemented")]
    Unknown(String),
    /// No address.
    #[error("cluster address is required to create a REST config")]
    NoAddress,
    /// The address is not an https URL.
    #[error("the Kubernetes API server address '{0}' must use https scheme")]
    NotHttps(String),
    /// The address is not a URL.
    #[error("failed to parse Kubernetes API server address '{0}'")]
    BadAddress(String),
    /// The ServiceAccount asks for a credential provider that is not built.
    #[error(
        "service account '{account}' asks for the credential provider '{provider}' ({CREDENTIAL_PROVIDER_ANNOTATION}), which is not supported by this controller: only 'kubernetes' and 'spiffe' are"
    )]
    CredentialProvider {
        /// `namespace/name`.
        account: String,
        /// The annotation's value.
        provider: String,
    },
    /// A token that is not a JWT with the claims needed.
    #[error("invalid service account token: {0}")]
    Token(&'static str),
}

/// Reads the ConfigMap's data.
pub fn read_config_map(data: &BTreeMap<String, String>) -> Result<ClusterConfig, ProviderError> {
    let text = |key: &str| data.get(key).map(String::as_str).filter(|v| !v.is_empty());
    let provider = text(keys::PROVIDER).unwrap_or("");
    let audiences: Vec<String> = text(keys::AUDIENCES)
        .map(|text| {
            text.split('\n')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let service_account = text(keys::SERVICE_ACCOUNT_NAME).map(str::to_string);
    if let Some(cloud) = Cloud::from_name(provider) {
        if let Some(address) = text(keys::ADDRESS) {
            parse_cluster_address(address)?;
        }
        let audiences = if cloud == Cloud::Gcp && service_account.is_none() {
            Vec::new()
        } else {
            audiences
        };
        return Ok(ClusterConfig::Cloud(CloudReference {
            cloud,
            request: ClusterRequest {
                cluster: text(keys::CLUSTER).map(str::to_string),
                address: text(keys::ADDRESS).map(str::to_string),
                ca: text(keys::CA).map(str::to_string),
            },
            audiences,
            service_account,
        }));
    }
    if provider != GENERIC {
        return Err(ProviderError::Unknown(provider.to_string()));
    }
    let address = text(keys::ADDRESS).ok_or(ProviderError::NoAddress)?;
    let url = parse_cluster_address(address)?;
    Ok(ClusterConfig::Generic(ClusterReference {
        url,
        ca: text(keys::CA).map(str::to_string),
        audiences: if audiences.is_empty() {
            vec![address.to_string()]
        } else {
            audiences
        },
        service_account,
    }))
}

/// Flux's normalisation of a cluster address: `https://` added when no scheme is given, only
/// https accepted, port 443 made explicit, the host lower-cased, any path dropped.
pub fn parse_cluster_address(address: &str) -> Result<String, ProviderError> {
    let with_scheme = if address.starts_with("http") {
        address.to_string()
    } else {
        format!("https://{address}")
    };
    let uri: http::Uri = with_scheme
        .parse()
        .map_err(|_| ProviderError::BadAddress(address.to_string()))?;
    if uri.scheme_str() != Some("https") {
        return Err(ProviderError::NotHttps(address.to_string()));
    }
    let authority = uri
        .authority()
        .ok_or_else(|| ProviderError::BadAddress(address.to_string()))?;
    let host = match authority.port() {
        Some(_) => authority.as_str().to_string(),
        None => format!("{}:443", authority.as_str()),
    };
    Ok(format!("https://{}", host.to_ascii_lowercase()))
}

/// The claims of a ServiceAccount token this module uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenClaims {
    /// `sub`: `system:serviceaccount:<namespace>:<name>`.
    pub subject: Option<String>,
    /// `iat`, seconds since the epoch.
    pub issued_at: Option<i64>,
    /// `exp`, seconds since the epoch.
    pub expires_at: i64,
}

/// Reads a JWT's claims without verifying it (the API server that issued it, or the one it
/// is sent to, verifies it).
pub fn token_claims(token: &str) -> Result<TokenClaims, ProviderError> {
    let payload = token
        .split('.')
        .nth(1)
        .ok_or(ProviderError::Token("not a JWT"))?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|_| ProviderError::Token("its payload is not base64url"))?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|_| ProviderError::Token("its payload is not JSON"))?;
    Ok(TokenClaims {
        subject: claims["sub"].as_str().map(str::to_string),
        issued_at: claims["iat"].as_i64(),
        expires_at: claims["exp"]
            .as_i64()
            .ok_or(ProviderError::Token("it has no expiration"))?,
    })
}

/// `(namespace, name)` of the ServiceAccount a token's subject names.
pub fn service_account_of(subject: &str) -> Result<(String, String), ProviderError> {
    match subject.split(':').collect::<Vec<_>>().as_slice() {
        ["system", "serviceaccount", namespace, name] => {
            Ok(((*namespace).to_string(), (*name).to_string()))
        }
        _ => Err(ProviderError::Token(
            "its subject is not system:serviceaccount:<namespace>:<name>",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn generic(pairs: &[(&str, &str)]) -> ClusterReference {
        match read_config_map(&data(pairs)).unwrap() {
            ClusterConfig::Generic(reference) => reference,
            other => panic!("not generic: {other:?}"),
        }
    }

    fn cloud(pairs: &[(&str, &str)]) -> CloudReference {
        match read_config_map(&data(pairs)).unwrap() {
            ClusterConfig::Cloud(reference) => reference,
            other => panic!("not a cloud: {other:?}"),
        }
    }

    #[test]
    fn the_generic_provider_reads_address_audiences_and_account() {
        let reference = generic(&[
            ("provider", "generic"),
            ("address", "Spoke.Example.com"),
            ("audiences", " a \n\nb\n"),
            ("serviceAccountName", "deployer"),
        ]);
        assert_eq!(reference.url, "https://spoke.example.com:443");
        assert_eq!(reference.audiences, ["a", "b"]);
        assert_eq!(reference.service_account.as_deref(), Some("deployer"));
        let reference = generic(&[
            ("provider", "generic"),
            ("address", "https://10.0.0.1:6443/ignored"),
        ]);
        assert_eq!(reference.url, "https://10.0.0.1:6443");
        assert_eq!(reference.audiences, ["https://10.0.0.1:6443/ignored"]);
        assert_eq!(reference.service_account, None);
    }

    #[test]
    fn providers_and_addresses_are_refused_by_name() {
        let refused =
            |pairs: &[(&str, &str)]| read_config_map(&data(pairs)).unwrap_err().to_string();
        assert_eq!(
            refused(&[("provider", "vsphere")]),
            "provider 'vsphere' not implemented"
        );
        assert_eq!(
            refused(&[("provider", "aws"), ("address", "http://eks:80")]),
            "the Kubernetes API server address 'http://eks:80' must use https scheme"
        );
        assert_eq!(
            refused(&[("provider", "generic")]),
            "cluster address is required to create a REST config"
        );
        assert_eq!(
            refused(&[("provider", "generic"), ("address", "http://spoke:80")]),
            "the Kubernetes API server address 'http://spoke:80' must use https scheme"
        );
    }

    #[test]
    fn cloud_providers_read_cluster_address_ca_audiences_and_account() {
        let reference = cloud(&[
            ("provider", "aws"),
            ("cluster", "arn:aws:eks:eu-west-1:1:cluster/prod"),
            ("address", "https://EKS.example.com"),
            ("ca.crt", "PEM"),
            ("audiences", "sts.amazonaws.com\nother"),
            ("serviceAccountName", "deployer"),
        ]);
        assert_eq!(reference.cloud, Cloud::Aws);
        assert_eq!(
            reference.request,
            ClusterRequest {
                cluster: Some("arn:aws:eks:eu-west-1:1:cluster/prod".into()),
                address: Some("https://EKS.example.com".into()),
                ca: Some("PEM".into()),
            }
        );
        assert_eq!(reference.audiences, ["sts.amazonaws.com", "other"]);
        assert_eq!(reference.service_account.as_deref(), Some("deployer"));
        // Nothing but the provider is required here: the cloud's lookup says what is missing.
        let reference = cloud(&[("provider", "azure")]);
        assert!(reference.request.needs_lookup());
        // GCP reads audiences only for a named account, as Flux does.
        assert!(
            cloud(&[("provider", "gcp"), ("audiences", "a")])
                .audiences
                .is_empty()
        );
        let with_account = cloud(&[
            ("provider", "gcp"),
            ("audiences", "a"),
            ("serviceAccountName", "s"),
        ]);
        assert_eq!(with_account.audiences, ["a"]);
    }

    #[test]
    fn token_claims_are_read_without_verification() {
        let encode = |json: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json);
        let token = format!(
            "{}.{}.sig",
            encode(r#"{"alg":"RS256"}"#),
            encode(
                r#"{"sub":"system:serviceaccount:flux-system:kustomize-controller","iat":100,"exp":3700}"#
            )
        );
        let claims = token_claims(&token).unwrap();
        assert_eq!(claims.expires_at, 3700);
        assert_eq!(claims.issued_at, Some(100));
        let (namespace, name) = service_account_of(claims.subject.as_deref().unwrap()).unwrap();
        assert_eq!(
            (namespace.as_str(), name.as_str()),
            ("flux-system", "kustomize-controller")
        );
        assert!(token_claims("not-a-token").is_err());
        assert!(token_claims(&format!("a.{}.c", encode("{}"))).is_err());
        assert!(service_account_of("system:node:worker").is_err());
    }
}
