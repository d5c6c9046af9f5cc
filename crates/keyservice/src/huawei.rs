//! Huawei Cloud KMS (`hckms` keys): `decrypt-data` of the data key at the region's KMS
//! endpoint, as sops opens these keys with the Huawei Cloud Go SDK. Flux's controller has no
//! credential of its own for them: the SDK's default chain reads the controller's
//! environment, and so does this module: `HUAWEICLOUD_SDK_AK` and `HUAWEICLOUD_SDK_SK` (with
//! `HUAWEICLOUD_SDK_SECURITY_TOKEN` for temporary keys), `HUAWEICLOUD_SDK_PROJECT_ID` or else
//! the project of the key's region looked up in IAM. Requests are signed with
//! `SDK-HMAC-SHA256`. `HUAWEICLOUD_SDK_REGION_KMS_<REGION>` and `HUAWEICLOUD_SDK_IAM_ENDPOINT`
//! override the endpoints, as they do for the SDK. The SDK's other credential sources (the
//! profile file, ECS metadata, pod identity, IdP token files) are refused by name.

use std::collections::HashMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::Full;
use serde::Deserialize;
use serde_json::json;
use zeroize::Zeroizing;

use super::{Environment, Failure, KeyServiceError, KeyServices};

/// The regions of the SDK's KMS endpoint table (v0.1.207); all but one are
/// `https://kms.<region>.myhuaweicloud.com`.
const KMS_REGIONS: &[&str] = &[
    "af-north-1",
    "af-south-1",
    "ae-ad-1",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-southeast-3",
    "ap-southeast-4",
    "ap-southeast-5",
    "cn-east-2",
    "cn-east-3",
    "cn-east-4",
    "cn-east-5",
    "cn-north-1",
    "cn-north-2",
    "cn-north-4",
    "cn-north-9",
    "cn-north-11",
    "cn-north-12",
    "cn-south-1",
    "cn-south-2",
    "cn-south-4",
    "cn-southwest-2",
    "cn-southwest-3",
    "eu-west-101",
    "la-north-2",
    "la-south-2",
    "me-east-1",
    "my-kualalumpur-1",
    "na-mexico-1",
    "ru-moscow-1",
    "sa-brazil-1",
    "tr-west-1",
];

/// The regions with an IAM endpoint of their own; others use [`GLOBAL_IAM_ENDPOINT`].
const IAM_REGIONS: &[&str] = &[
    "ae-ad-1",
    "af-south-1",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-southeast-3",
    "ap-southeast-4",
    "cn-east-2",
    "cn-east-3",
    "cn-east-4",
    "cn-east-5",
    "cn-north-1",
    "cn-north-2",
    "cn-north-4",
    "cn-north-9",
    "cn-north-12",
    "cn-south-1",
    "cn-south-2",
    "cn-southwest-2",
    "eu-west-0",
    "la-north-2",
    "la-south-2",
    "me-east-1",
    "my-kualalumpur-1",
    "na-mexico-1",
    "ru-moscow-1",
    "sa-brazil-1",
    "tr-west-1",
];

const GLOBAL_IAM_ENDPOINT: &str = "https://iam.myhuaweicloud.com";
const ALGORITHM: &str = "SDK-HMAC-SHA256";
const DATE_FORMAT: &str = "%Y%m%dT%H%M%SZ";

/// Project ids looked up in IAM, per access key and region.
#[derive(Debug, Default)]
pub struct Projects(HashMap<(String, String), String>);

/// An `hckms` key id, `region:key-uuid`, as sops parses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyId {
    /// The region, e.g. `tr-west-1`.
    pub region: String,
    /// The key's UUID.
    pub uuid: String,
}

impl KeyId {
    /// Parses `region:key-uuid`, with sops's messages for what is missing.
    pub fn parse(key_id: &str) -> Result<Self, KeyServiceError> {
        let trimmed = key_id.trim();
        let Some((region, uuid)) = trimmed.split_once(':') else {
            return Err(KeyServiceError::invalid_key(format!(
                "invalid key ID format: expected 'region:key-uuid', got \"{trimmed}\""
            )));
        };
        let (region, uuid) = (region.trim(), uuid.trim());
        if region.is_empty() {
            return Err(KeyServiceError::invalid_key(format!(
                "region cannot be empty in key ID: \"{trimmed}\""
            )));
        }
        if uuid.is_empty() {
            return Err(KeyServiceError::invalid_key(format!(
                "key UUID cannot be empty in key ID: \"{trimmed}\""
            )));
        }
        Ok(KeyId {
            region: region.to_owned(),
            uuid: uuid.to_owned(),
        })
    }
}

/// Access keys from the environment.
struct AccessKeys {
    ak: String,
    sk: Zeroizing<String>,
    security_token: Option<Zeroizing<String>>,
}

impl AccessKeys {
    fn from_environment(env: &Environment) -> Result<Self, KeyServiceError> {
        if let Some(kind) = env
            .get("HUAWEICLOUD_SDK_CREDENTIAL_TYPE")
            .filter(|kind| !kind.starts_with("basic"))
        {
            return Err(KeyServiceError::credentials(format!(
                "Huawei Cloud credential type '{kind}' (HUAWEICLOUD_SDK_CREDENTIAL_TYPE) is not supported by this controller: only 'basic' access keys are"
            )));
        }
        match (env.get("HUAWEICLOUD_SDK_AK"), env.get("HUAWEICLOUD_SDK_SK")) {
            (Some(ak), Some(sk)) => Ok(AccessKeys {
                ak: ak.to_owned(),
                sk: Zeroizing::new(sk.to_owned()),
                security_token: env
                    .get("HUAWEICLOUD_SDK_SECURITY_TOKEN")
                    .map(|t| Zeroizing::new(t.to_owned())),
            }),
            _ if env.get("HUAWEICLOUD_SDK_ID_TOKEN_FILE").is_some() => {
                Err(KeyServiceError::credentials(
                    "Huawei Cloud IdP token files (HUAWEICLOUD_SDK_IDP_ID, HUAWEICLOUD_SDK_ID_TOKEN_FILE) are not supported by this controller: set HUAWEICLOUD_SDK_AK and HUAWEICLOUD_SDK_SK",
                ))
            }
            _ => Err(KeyServiceError::credentials(
                "no Huawei Cloud credentials: HUAWEICLOUD_SDK_AK and HUAWEICLOUD_SDK_SK are not both set in the controller's environment (the credentials profile file, ECS metadata and pod identity are not read by this controller)",
            )),
        }
    }
}

/// Opens `enc` (the `enc` of an `hckms` entry) with key `key_id` (`region:key-uuid`).
pub async fn decrypt(
    services: &KeyServices,
    key_id: &str,
    enc: &str,
) -> Result<Zeroizing<Vec<u8>>, KeyServiceError> {
    let key = KeyId::parse(key_id)?;
    let env = &services.environment;
    let endpoint = kms_endpoint(env, &key.region)?;
    let keys = AccessKeys::from_environment(env)?;
    let project = project_id(services, &keys, &key.region).await?;
    let url = format!("{endpoint}/v1.0/{project}/kms/decrypt-data");
    let body = Bytes::from(
        json!({
            "cipher_text": enc,
            "encryption_algorithm": "SYMMETRIC_DEFAULT",
            "key_id": key.uuid,
        })
        .to_string(),
    );
    let answer = services
        .exchange(
            services.policy,
            || {
                signed(
                    &keys,
                    Method::POST,
                    &url,
                    &[("x-project-id", project.as_str())],
                    body.clone(),
                    jiff::Timestamp::now(),
                )
            },
            |answer| match answer.status {
                StatusCode::OK => Ok(answer.body),
                status => Err(failure(status, &answer.body)),
            },
        )
        .await
        .map_err(|source| {
            KeyServiceError::call(
                format!("failed to decrypt sops data key with Huawei Cloud KMS key '{key_id}'"),
                source,
            )
        })?;
    parse_plaintext(&answer).map_err(|message| KeyServiceError::Response {
        context: format!("Huawei Cloud KMS answer for key '{key_id}'"),
        message: message.to_owned(),
    })
}

/// The KMS endpoint of `region`: `HUAWEICLOUD_SDK_REGION_KMS_<REGION>` (the first of a
/// comma-separated list), else the SDK's table.
fn kms_endpoint(env: &Environment, region: &str) -> Result<String, KeyServiceError> {
    let variable = format!(
        "HUAWEICLOUD_SDK_REGION_KMS_{}",
        region.replace('-', "_").to_ascii_uppercase()
    );
    if let Some(endpoint) = env
        .get(&variable)
        .and_then(|list| list.split(',').map(str::trim).find(|e| !e.is_empty()))
    {
        return Ok(endpoint.trim_end_matches('/').to_owned());
    }
    match region {
        "eu-west-101" => Ok("https://kms.eu-west-101.myhuaweicloud.eu".to_owned()),
        known if KMS_REGIONS.contains(&known) => {
            Ok(format!("https://kms.{known}.myhuaweicloud.com"))
        }
        unknown => Err(KeyServiceError::invalid_key(format!(
            "invalid region \"{unknown}\": region id '{unknown}' is not in the supported regions of Huawei Cloud KMS (set {variable} to its endpoint)"
        ))),
    }
}

/// The IAM endpoint for `region`: `HUAWEICLOUD_SDK_IAM_ENDPOINT` (https added when it has no
/// scheme), else the region's own, else the global one.
fn iam_endpoint(env: &Environment, region: &str) -> String {
    if let Some(endpoint) = env.get("HUAWEICLOUD_SDK_IAM_ENDPOINT") {
        let endpoint = endpoint.trim_end_matches('/');
        return if endpoint.starts_with("https://") || endpoint.starts_with("http://") {
            endpoint.to_owned()
        } else {
            format!("https://{endpoint}")
        };
    }
    if IAM_REGIONS.contains(&region) {
        format!("https://iam.{region}.myhuaweicloud.com")
    } else {
        GLOBAL_IAM_ENDPOINT.to_owned()
    }
}

/// `HUAWEICLOUD_SDK_PROJECT_ID`, else the one project IAM names for `region` (looked up once
/// per access key and region, as the SDK caches it).
async fn project_id(
    services: &KeyServices,
    keys: &AccessKeys,
    region: &str,
) -> Result<String, KeyServiceError> {
    if let Some(project) = services.environment.get("HUAWEICLOUD_SDK_PROJECT_ID") {
        return Ok(project.to_owned());
    }
    let slot = (keys.ak.clone(), region.to_owned());
    if let Some(project) = services.huawei_projects.lock().await.0.get(&slot) {
        return Ok(project.clone());
    }
    let url = format!(
        "{}/v3/projects?name={region}",
        iam_endpoint(&services.environment, region)
    );
    let context = || format!("failed to get the project id of Huawei Cloud region '{region}'");
    let answer = services
        .exchange(
            services.policy,
            || {
                signed(
                    keys,
                    Method::GET,
                    &url,
                    &[],
                    Bytes::new(),
                    jiff::Timestamp::now(),
                )
            },
            |answer| match answer.status {
                StatusCode::OK => Ok(answer.body),
                status => Err(failure(status, &answer.body)),
            },
        )
        .await
        .map_err(|source| KeyServiceError::call(context(), source))?;
    let project = parse_project(&answer).map_err(|error| KeyServiceError::Response {
        context: context(),
        message: error.to_string(),
    })?;
    services
        .huawei_projects
        .lock()
        .await
        .0
        .insert(slot, project.clone());
    Ok(project)
}

/// Why IAM's answer names no one project for the region.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProjectError {
    /// Not the JSON of a project list.
    #[error("the answer is not a list of projects")]
    NotAList,
    /// No project has the region's name.
    #[error("no project of that name in the account: create it or set HUAWEICLOUD_SDK_PROJECT_ID")]
    NoProject,
    /// Several projects have the region's name.
    #[error(
        "{} projects of that name ({}): set HUAWEICLOUD_SDK_PROJECT_ID to one of them",
        .0.len(),
        .0.join(", ")
    )]
    Several(Vec<String>),
}

/// The one project of a `GET /v3/projects?name=<region>` answer.
fn parse_project(body: &[u8]) -> Result<String, ProjectError> {
    #[derive(Deserialize)]
    struct Answer {
        #[serde(default)]
        projects: Vec<Project>,
    }
    #[derive(Deserialize)]
    struct Project {
        id: String,
    }
    let answer: Answer = serde_json::from_slice(body).map_err(|_| ProjectError::NotAList)?;
    match answer.projects.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => Err(ProjectError::NoProject),
        many => Err(ProjectError::Several(
            many.iter().map(|p| p.id.clone()).collect(),
        )),
    }
}

/// The data key of a `decrypt-data` answer: `plain_text` is the base64 that sops encrypted.
fn parse_plaintext(body: &[u8]) -> Result<Zeroizing<Vec<u8>>, &'static str> {
    #[derive(Deserialize)]
    struct Answer {
        plain_text: Option<Zeroizing<String>>,
    }
    let answer: Answer = serde_json::from_slice(body).map_err(|_| "the answer is not JSON")?;
    let plain_text = answer
        .plain_text
        .ok_or("decryption response missing plaintext")?;
    STANDARD
        .decode(plain_text.as_bytes())
        .map(Zeroizing::new)
        .map_err(|_| "the answer's plain_text is not base64")
}

/// A request to `url` signed as the SDK signs it (`SDK-HMAC-SHA256` over the method, path,
/// query, the lower-cased headers other than `content-type`, and the body's SHA-256).
fn signed(
    keys: &AccessKeys,
    method: Method,
    url: &str,
    extra_headers: &[(&str, &str)],
    body: Bytes,
    now: jiff::Timestamp,
) -> Result<Request<Full<Bytes>>, Failure> {
    let uri: http::Uri = url
        .parse()
        .map_err(|_| Failure::Permanent(format!("'{url}' is not a URL")))?;
    let date = now.strftime(DATE_FORMAT).to_string();
    let mut headers: Vec<(String, String)> = extra_headers
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    headers.push(("x-sdk-date".to_owned(), date.clone()));
    if let Some(token) = &keys.security_token {
        headers.push(("x-security-token".to_owned(), token.to_string()));
    }
    headers.sort();
    let signed_headers = headers
        .iter()
        .map(|(name, _)| name.as_str())
        .collect::<Vec<_>>()
        .join(";");
    let canonical_headers: String = headers
        .iter()
        .map(|(name, value)| format!("{name}:{}\n", value.trim()))
        .collect();
    let canonical = format!(
        "{}\n{}\n{}\n{canonical_headers}\n{signed_headers}\n{}",
        method.as_str(),
        canonical_path(uri.path()),
        canonical_query(uri.query().unwrap_or("")),
        hex(ring::digest::digest(&ring::digest::SHA256, &body).as_ref()),
    );
    let string_to_sign = format!(
        "{ALGORITHM}\n{date}\n{}",
        hex(ring::digest::digest(&ring::digest::SHA256, canonical.as_bytes()).as_ref())
    );
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, keys.sk.as_bytes());
    let signature = hex(ring::hmac::sign(&key, string_to_sign.as_bytes()).as_ref());
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .header(http::header::CONTENT_TYPE, "application/json;charset=UTF-8")
        .header(
            http::header::AUTHORIZATION,
            format!(
                "{ALGORITHM} Access={}, SignedHeaders={signed_headers}, Signature={signature}",
                keys.ak
            ),
        );
    for (name, value) in &headers {
        request = request.header(name.as_str(), value.as_str());
    }
    request
        .body(Full::new(body))
        .map_err(|e| Failure::Permanent(format!("invalid request: {e}")))
}

/// Each path segment escaped as the SDK escapes it, with a trailing slash.
fn canonical_path(path: &str) -> String {
    let mut escaped = path.split('/').map(escape).collect::<Vec<_>>().join("/");
    if !escaped.ends_with('/') {
        escaped.push('/');
    }
    escaped
}

/// The query's pairs sorted by key, then value, each side escaped.
fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (escape(key), escape(value))
        })
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// Percent-encoding of everything but letters, digits and `_-~.`.
fn escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'~' | b'.' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The failure of an error answer, with Huawei Cloud's code and message when it has them
/// (`{"error": {"error_code", "error_msg"}}` or the same fields at the top).
fn failure(status: StatusCode, body: &[u8]) -> Failure {
    #[derive(Deserialize, Default)]
    struct Fields {
        error_code: Option<String>,
        error_msg: Option<String>,
    }
    #[derive(Deserialize)]
    struct Answer {
        error: Option<Fields>,
        #[serde(flatten)]
        top: Fields,
    }
    let fields = serde_json::from_slice::<Answer>(body)
        .map(|a| a.error.unwrap_or(a.top))
        .unwrap_or_default();
    let mut message = format!("HTTP {}", status.as_u16());
    match (fields.error_code, fields.error_msg) {
        (Some(code), Some(text)) => message.push_str(&format!(": {code}: {text}")),
        (Some(code), None) => message.push_str(&format!(": {code}")),
        (None, Some(text)) => message.push_str(&format!(": {text}")),
        (None, None) => {}
    }
    Failure::from_status(status, message)
}

#[cfg(test)]
mod tests;
