//! Amazon EKS clusters as remote clusters, as fluxcd/pkg/auth/aws reaches them: the region
//! and name from the cluster's ARN (the ConfigMap's `cluster`), the endpoint and CA from EKS
//! `DescribeCluster` when the ConfigMap does not give both, and a token that is a presigned
//! STS `GetCallerIdentity` URL (`k8s-aws-v1.` and the URL in base64url) whose signature
//! covers the `x-k8s-aws-id` header naming the cluster, valid for 15 minutes. The API server's
//! authenticator (aws-iam-authenticator) sends the request with its own cluster name and
//! maps the answering ARN to a user. `AWS_ENDPOINT_URL_EKS` and `AWS_ENDPOINT_URL_STS` (or
//! `AWS_ENDPOINT_URL`) override the endpoints.

use std::time::{Duration, Instant, SystemTime};

use aws_credential_types::Credentials as AwsCredentials;
use aws_sigv4::http_request::{
    SignableBody, SignableRequest, SignatureLocation, SigningParams, SigningSettings,
};
use aws_sigv4::sign::v4;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bytes::Bytes;
use http::Method;
use serde::Deserialize;
use zeroize::Zeroizing;

use super::{KmsKey, RequestError, Signing, base_credentials, call_ok, endpoint, json_failure};
use crate::cluster::{ClusterAccess, ClusterRequest};
use crate::{KeyServiceError, KeyServices};

/// The header whose signed value names the cluster a token is for.
pub const CLUSTER_ID_HEADER: &str = "x-k8s-aws-id";
/// The prefix of an EKS token.
pub const TOKEN_PREFIX: &str = "k8s-aws-v1.";
/// How long a presigned token is valid (EKS accepts 15 minutes at most).
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(900);
/// The ARN of an EKS cluster, as fluxcd/pkg/auth checks it.
const CLUSTER_PATTERN: &str = r"^arn:aws[\w-]*:eks:([^:]{1,100}):[0-9]{1,30}:cluster/(.{1,200})$";

/// An EKS cluster's ARN: its partition, region and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterArn {
    /// `aws`, `aws-cn`, ...
    pub partition: String,
    /// The region.
    pub region: String,
    /// The cluster's name.
    pub name: String,
}

/// Why the ConfigMap's `cluster` is not an EKS cluster ARN.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid EKS cluster ARN: '{0}'. must match {CLUSTER_PATTERN}")]
pub struct InvalidClusterArn(pub String);

impl ClusterArn {
    /// `arn:PARTITION:eks:REGION:ACCOUNT:cluster/NAME`.
    pub fn parse(arn: &str) -> Result<Self, InvalidClusterArn> {
        let invalid = || InvalidClusterArn(arn.to_owned());
        let mut parts = arn.splitn(6, ':');
        let (Some("arn"), Some(partition), Some("eks"), Some(region), Some(account), Some(rest)) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(invalid());
        };
        let partition_ok = partition.strip_prefix("aws").is_some_and(|p| {
            p.chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
        });
        let account_ok =
            (1..=30).contains(&account.len()) && account.bytes().all(|b| b.is_ascii_digit());
        let name = rest.strip_prefix("cluster/").unwrap_or_default();
        let name_ok = (1..=200).contains(&name.chars().count()) && !name.contains('\n');
        if !partition_ok || !(1..=100).contains(&region.chars().count()) || !account_ok || !name_ok
        {
            return Err(invalid());
        }
        Ok(ClusterArn {
            partition: partition.to_owned(),
            region: region.to_owned(),
            name: name.to_owned(),
        })
    }

    fn key(&self) -> KmsKey {
        KmsKey {
            partition: self.partition.clone(),
            region: self.region.clone(),
        }
    }
}

/// The REST config of the EKS cluster `request` names.
pub(crate) async fn rest_config(
    services: &KeyServices,
    request: &ClusterRequest,
) -> Result<ClusterAccess, KeyServiceError> {
    // The token is valid 15 minutes from its signing; counted from before any call.
    let started = Instant::now();
    let arn = ClusterArn::parse(request.cluster.as_deref().unwrap_or_default())
        .map_err(|e| KeyServiceError::invalid_key_because(None, e))?;
    let key = arn.key();
    let credentials = base_credentials(services, &key).await?;
    let (host, ca) = match (&request.address, &request.ca) {
        (Some(address), Some(ca)) => (address.clone(), ca.as_bytes().to_vec()),
        (address, ca) => {
            let found = describe_cluster(services, &key, &credentials, &arn.name).await?;
            (
                address.clone().unwrap_or(found.0),
                ca.as_ref()
                    .map(|c| c.as_bytes().to_vec())
                    .unwrap_or(found.1),
            )
        }
    };
    let url = presigned_caller_identity(
        &endpoint(services, "STS", "sts", &key),
        &key.region,
        &credentials,
        &arn.name,
        SystemTime::now(),
    )
    .map_err(|e| {
        KeyServiceError::credentials_because(Some("failed to presign GetCallerIdentity request"), e)
    })?;
    let mut renew_at = started + TOKEN_LIFETIME * 4 / 5;
    if let Some(expiry) = credentials.expiry()
        && let Ok(left) = expiry.duration_since(SystemTime::now())
    {
        renew_at = renew_at.min(Instant::now() + left);
    }
    Ok(ClusterAccess {
        host,
        ca: Some(ca),
        token: Zeroizing::new(format!(
            "{TOKEN_PREFIX}{}",
            URL_SAFE_NO_PAD.encode(url.as_bytes())
        )),
        renew_at,
    })
}

/// `GET {sts}/?Action=GetCallerIdentity&Version=2011-06-15` presigned with `credentials` in
/// `region` at `time`, its signature covering `host` and `x-k8s-aws-id: cluster`, valid for
/// [`TOKEN_LIFETIME`]. The URL carries a signature (and a session token): it is a credential.
pub fn presigned_caller_identity(
    sts: &str,
    region: &str,
    credentials: &AwsCredentials,
    cluster: &str,
    time: SystemTime,
) -> Result<Zeroizing<String>, RequestError> {
    let base = format!("{sts}/?Action=GetCallerIdentity&Version=2011-06-15");
    let uri: http::Uri = base
        .parse()
        .map_err(|_| RequestError::NotUrl(sts.to_owned()))?;
    let host = uri
        .authority()
        .map(|a| a.as_str().to_owned())
        .ok_or_else(|| RequestError::NoHost(sts.to_owned()))?;
    let headers = [("host", host.as_str()), (CLUSTER_ID_HEADER, cluster)];
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(TOKEN_LIFETIME);
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("sts")
        .time(time)
        .settings(settings)
        .build()
        .map_err(|e| RequestError::Sign(e.to_string()))?;
    let signable = SignableRequest::new(
        "GET",
        base.as_str(),
        headers.iter().copied(),
        SignableBody::Bytes(&[]),
    )
    .map_err(|e| RequestError::Sign(e.to_string()))?;
    let (instructions, _) = aws_sigv4::http_request::sign(signable, &SigningParams::V4(params))
        .map_err(|e| RequestError::Sign(e.to_string()))?
        .into_parts();
    let mut url = Zeroizing::new(base);
    for (name, value) in instructions.params() {
        url.push('&');
        url.push_str(name);
        url.push('=');
        url.push_str(&crate::oauth::percent_encode(value));
    }
    Ok(url)
}

/// EKS `DescribeCluster`: the cluster's endpoint and PEM CA certificate.
async fn describe_cluster(
    services: &KeyServices,
    key: &KmsKey,
    credentials: &AwsCredentials,
    name: &str,
) -> Result<(String, Vec<u8>), KeyServiceError> {
    let context = format!("failed to describe EKS cluster '{name}'");
    let url = endpoint(services, "EKS", "eks", key);
    let path = format!("/clusters/{}", crate::oauth::percent_encode(name));
    let request = || {
        super::signed_at(
            Method::GET,
            &url,
            &path,
            Signing {
                region: &key.region,
                service: "eks",
                credentials,
            },
            &[],
            Bytes::new(),
        )
    };
    let body = call_ok(services, request, |status, body| {
        json_failure(status, body, "DescribeCluster")
    })
    .await
    .map_err(|source| KeyServiceError::call(context.clone(), source))?;
    parse_describe_cluster(&body).map_err(|message| KeyServiceError::Response {
        context,
        message: message.to_owned(),
    })
}

/// The endpoint and decoded CA of a `DescribeCluster` answer.
fn parse_describe_cluster(body: &[u8]) -> Result<(String, Vec<u8>), &'static str> {
    #[derive(Deserialize)]
    struct Answer {
        cluster: Cluster,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Cluster {
        endpoint: Option<String>,
        certificate_authority: Option<Authority>,
    }
    #[derive(Deserialize)]
    struct Authority {
        data: Option<String>,
    }
    let answer: Answer = serde_json::from_slice(body)
        .map_err(|_| "the answer is not EKS's DescribeCluster response")?;
    let endpoint = answer
        .cluster
        .endpoint
        .filter(|e| !e.is_empty())
        .ok_or("the cluster has no endpoint yet")?;
    let data = answer
        .cluster
        .certificate_authority
        .and_then(|a| a.data)
        .ok_or("the cluster has no certificate authority data yet")?;
    let ca = STANDARD
        .decode(data.trim())
        .map_err(|_| "failed to decode EKS CA certificate: not base64")?;
    Ok((endpoint, ca))
}

#[cfg(test)]
mod tests;
