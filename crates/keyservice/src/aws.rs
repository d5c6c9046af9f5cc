//! AWS KMS: `Decrypt` of the data key with SigV4-signed requests (the `aws-sigv4` crate),
//! with the credentials Flux uses: the decryption Secret's `sops.aws-kms` entry, else the
//! decryption ServiceAccount's role (`eks.amazonaws.com/role-arn`, a web identity token
//! from the TokenRequest API), else the controller's environment (`AWS_ACCESS_KEY_ID`...,
//! IRSA's `AWS_WEB_IDENTITY_TOKEN_FILE`, the shared config and credentials files (see
//! [`profile`]), EKS Pod Identity's `AWS_CONTAINER_CREDENTIALS_FULL_URI`, an EC2 instance
//! profile), in the AWS SDK for Go's order. A key with a role (`arn+role`) assumes it
//! first, as sops does. `AWS_ENDPOINT_URL_KMS`, `AWS_ENDPOINT_URL_STS` and
//! `AWS_ENDPOINT_URL` override the endpoints, as in the AWS SDKs.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials as AwsCredentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningParams, SigningSettings};
use aws_sigv4::sign::v4;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::Full;
use serde::Deserialize;
use serde_json::{Map, Value};
use zeroize::Zeroizing;

pub mod eks;
pub mod profile;

use profile::{DEFAULT_PROFILE, ProfileCredentials, ProfileError, SharedFiles};

use super::oauth;
use super::token_cache::CachedToken;
use super::{CallError, Failure, KeyServiceError, KeyServices};

/// The role ARN annotation of a decryption ServiceAccount (IRSA's).
pub const ROLE_ARN_ANNOTATION: &str = "eks.amazonaws.com/role-arn";
/// The audience of web identity tokens for AWS STS.
pub const DEFAULT_AUDIENCE: &str = "sts.amazonaws.com";
/// The token cache's name for AWS KMS decryption (Flux's `MetricDecryptWithAWS`).
const OPERATION: &str = "decrypt_with_aws";
/// Session credentials are renewed this long before they expire.
const EXPIRY_MARGIN: Duration = Duration::from_secs(60);

/// Static credentials from the decryption Secret's `sops.aws-kms` entry.
#[derive(Clone)]
pub struct StaticCredentials(AwsCredentials);

impl std::fmt::Debug for StaticCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StaticCredentials(***)")
    }
}

/// Why a `sops.aws-kms` entry cannot be used (never its content).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    /// Not UTF-8 text.
    #[error("failed to unmarshal AWS credentials file: not UTF-8 text")]
    NotUtf8,
    /// Not the YAML mapping Flux reads.
    #[error(
        "failed to unmarshal AWS credentials file: not a YAML mapping of aws_access_key_id, aws_secret_access_key and aws_session_token"
    )]
    NotMapping,
}

impl CredentialsError {
    /// The Flux reason of a reconcile that stops on this error.
    pub fn reason(&self) -> &'static str {
        crate::reason::BUILD_FAILED
    }
}

/// Why a signed request to KMS or STS could not be made (before anything is sent).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The endpoint is not a URL.
    #[error("the endpoint '{0}' is not a URL")]
    NotUrl(String),
    /// The endpoint has no host to sign for.
    #[error("the endpoint '{0}' has no host")]
    NoHost(String),
    /// SigV4 signing failed.
    #[error("cannot sign the request: {0}")]
    Sign(String),
    /// The request cannot be built.
    #[error("cannot build the request: {0}")]
    Build(String),
}

/// Why the EC2 instance metadata service gave no credentials.
#[derive(Debug, thiserror::Error)]
pub enum InstanceMetadataError {
    /// The metadata URL is not a URL.
    #[error("'{0}' is not a URL")]
    NotUrl(String),
    /// The service did not answer.
    #[error(transparent)]
    Http(#[from] super::http::HttpError),
    /// The service answered with another status than 200.
    #[error("{path} answered HTTP {status}")]
    Status {
        /// The path asked.
        path: String,
        /// The status.
        status: u16,
    },
    /// The instance has no role.
    #[error("the instance has no IAM role")]
    NoRole,
    /// The role's credentials document is not readable.
    #[error("the credentials of instance role '{0}' are not readable")]
    Unreadable(String),
}

/// What an STS answer lacks (never its content).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StsAnswerError {
    /// The answer is not text.
    #[error("STS answered with non-text")]
    NotText,
    /// An element the credentials need is missing.
    #[error("STS's answer has no {0}")]
    Missing(&'static str),
}

/// Reads a `sops.aws-kms` entry: YAML with `aws_access_key_id`, `aws_secret_access_key`
/// and `aws_session_token`, as Flux reads it (absent fields are empty).
pub fn parse_static_credentials(data: &[u8]) -> Result<StaticCredentials, CredentialsError> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Entry {
        aws_access_key_id: String,
        aws_secret_access_key: Zeroizing<String>,
        aws_session_token: Zeroizing<String>,
    }
    let text = std::str::from_utf8(data).map_err(|_| CredentialsError::NotUtf8)?;
    let entry: Entry = if text.trim().is_empty() {
        Entry::default()
    } else {
        serde_saphyr::from_str(text).map_err(|_| CredentialsError::NotMapping)?
    };
    let token = (!entry.aws_session_token.is_empty()).then(|| entry.aws_session_token.to_string());
    Ok(StaticCredentials(AwsCredentials::new(
        entry.aws_access_key_id,
        entry.aws_secret_access_key.as_str(),
        token,
        None,
        "sops.aws-kms",
    )))
}

/// Credentials resolved during one decryption: the base ones, and those of assumed roles.
#[derive(Default)]
pub struct Sessions {
    base: HashMap<String, AwsCredentials>,
    roles: HashMap<(String, String), AwsCredentials>,
}

fn fresh(credentials: &AwsCredentials) -> bool {
    credentials
        .expiry()
        .is_none_or(|at| at > SystemTime::now() + EXPIRY_MARGIN)
}

/// Opens `enc` with the KMS key `arn`, assuming `role` first when it is set.
pub async fn decrypt(
    services: &KeyServices,
    arn: &str,
    role: &str,
    context: &[(String, String)],
    enc: &str,
) -> Result<Zeroizing<Vec<u8>>, KeyServiceError> {
    let key = KmsKey::parse(arn)?;
    let blob = STANDARD.decode(enc).map_err(|_| {
        KeyServiceError::invalid_key(format!("the encrypted data key of {arn} is not base64"))
    })?;
    let credentials = credentials(services, &key, role).await?;
    let endpoint = endpoint(services, "KMS", "kms", &key);
    let body = decrypt_body(arn, &blob, context);
    let request = || {
        signed(
            &endpoint,
            &key.region,
            "kms",
            &credentials,
            &[
                ("content-type", "application/x-amz-json-1.1"),
                ("x-amz-target", "TrentService.Decrypt"),
            ],
            body.clone(),
        )
    };
    let response = call_ok(services, request, |status, body| {
        json_failure(status, body, "Decrypt")
    })
    .await
    .map_err(|source| KeyServiceError::call("failed to decrypt the sops data key", source))?;
    parse_decrypt_response(&response).map_err(|message| KeyServiceError::Response {
        context: "Decrypt".to_owned(),
        message: message.to_owned(),
    })
}

/// One call: sends the request `request` builds and returns the body of a 200 answer;
/// another status is `failure`'s.
async fn call_ok(
    services: &KeyServices,
    request: impl Fn() -> Result<Request<Full<Bytes>>, RequestError>,
    failure: impl Fn(StatusCode, &[u8]) -> Failure,
) -> Result<Bytes, CallError> {
    services
        .exchange(
            services.policy,
            || request().map_err(|e| Failure::Permanent(e.to_string())),
            |answer| match answer.status {
                StatusCode::OK => Ok(answer.body),
                status => Err(failure(status, &answer.body)),
            },
        )
        .await
}

/// A KMS key ARN's parts that address the service.
#[derive(Debug, PartialEq, Eq)]
struct KmsKey {
    partition: String,
    region: String,
}

impl KmsKey {
    /// sops' rule: `arn:aws[-partition]:kms:REGION:ACCOUNT:(key|alias)/ID`.
    fn parse(arn: &str) -> Result<KmsKey, KeyServiceError> {
        let invalid = || KeyServiceError::invalid_key(format!("no valid ARN found in '{arn}'"));
        let mut parts = arn.splitn(6, ':');
        let (Some("arn"), Some(partition), Some("kms"), Some(region), Some(account), Some(rest)) = (
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
        let account_ok = !account.is_empty() && account.chars().all(|c| c.is_ascii_digit());
        let id_ok = rest
            .strip_prefix("key/")
            .or_else(|| rest.strip_prefix("alias/"))
            .is_some_and(|id| !id.is_empty());
        if !partition_ok || region.is_empty() || !account_ok || !id_ok {
            return Err(invalid());
        }
        Ok(KmsKey {
            partition: partition.to_owned(),
            region: region.to_owned(),
        })
    }

    fn dns_suffix(&self) -> &'static str {
        if self.partition == "aws-cn" {
            "amazonaws.com.cn"
        } else {
            "amazonaws.com"
        }
    }
}

/// The service's endpoint: `AWS_ENDPOINT_URL_<SERVICE>`, `AWS_ENDPOINT_URL`, else the
/// regional one.
fn endpoint(services: &KeyServices, env_id: &str, prefix: &str, key: &KmsKey) -> String {
    services
        .environment
        .get(&format!("AWS_ENDPOINT_URL_{env_id}"))
        .or_else(|| services.environment.get("AWS_ENDPOINT_URL"))
        .map(|url| url.trim_end_matches('/').to_owned())
        .unwrap_or_else(|| format!("https://{prefix}.{}.{}", key.region, key.dns_suffix()))
}

fn decrypt_body(arn: &str, blob: &[u8], context: &[(String, String)]) -> Bytes {
    let mut body = Map::new();
    body.insert(
        "CiphertextBlob".into(),
        Value::String(STANDARD.encode(blob)),
    );
    if !context.is_empty() {
        let context: Map<String, Value> = context
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        body.insert("EncryptionContext".into(), Value::Object(context));
    }
    body.insert("KeyId".into(), Value::String(arn.to_owned()));
    Bytes::from(Value::Object(body).to_string())
}

/// The data key of KMS's `Decrypt` answer; the error says what is wrong with it.
fn parse_decrypt_response(body: &[u8]) -> Result<Zeroizing<Vec<u8>>, &'static str> {
    #[derive(Deserialize)]
    struct Answer {
        #[serde(rename = "Plaintext")]
        plaintext: Zeroizing<String>,
    }
    let answer: Answer =
        serde_json::from_slice(body).map_err(|_| "the answer is not KMS's Decrypt response")?;
    STANDARD
        .decode(answer.plaintext.as_bytes())
        .map(Zeroizing::new)
        .map_err(|_| "the answer's Plaintext is not base64")
}

/// A JSON-protocol error answer: `{"__type": "...#Code", "message": "..."}`; an answer in
/// XML (what an access check in front of the service writes) is read for its code and
/// message too.
fn json_failure(status: StatusCode, body: &[u8], action: &str) -> Failure {
    let parsed: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let mut code = parsed
        .get("__type")
        .and_then(Value::as_str)
        .map(|t| t.rsplit('#').next().unwrap_or(t).to_owned())
        .unwrap_or_default();
    let mut message = parsed
        .get("message")
        .or_else(|| parsed.get("Message"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if parsed.is_null() {
        let text = String::from_utf8_lossy(body);
        code = xml_text(&text, "Code").unwrap_or_default();
        message = xml_text(&text, "Message").unwrap_or_default();
    }
    let mut text = format!("{action} answered HTTP {}", status.as_u16());
    for part in [code.as_str(), message.as_str()] {
        if !part.is_empty() {
            text.push_str(": ");
            text.push_str(part);
        }
    }
    if code == "ThrottlingException" {
        Failure::Transient(text)
    } else {
        Failure::from_status(status, text)
    }
}

/// A POST to `url` signed for `service` in `region`.
fn signed(
    url: &str,
    region: &str,
    service: &str,
    credentials: &AwsCredentials,
    headers: &[(&str, &str)],
    body: Bytes,
) -> Result<Request<Full<Bytes>>, RequestError> {
    signed_at(
        Method::POST,
        url,
        "/",
        Signing {
            region,
            service,
            credentials,
        },
        headers,
        body,
    )
}

/// Who signs a request, for which service and region.
struct Signing<'a> {
    region: &'a str,
    service: &'a str,
    credentials: &'a AwsCredentials,
}

/// A `method` request to `url` + `path` signed for `signing`'s service and region.
fn signed_at(
    method: Method,
    url: &str,
    path: &str,
    signing: Signing<'_>,
    headers: &[(&str, &str)],
    body: Bytes,
) -> Result<Request<Full<Bytes>>, RequestError> {
    let Signing {
        region,
        service,
        credentials,
    } = signing;
    let uri: http::Uri = format!("{url}{path}")
        .parse()
        .map_err(|_| RequestError::NotUrl(url.to_owned()))?;
    let host = uri
        .authority()
        .map(|a| a.as_str().to_owned())
        .ok_or_else(|| RequestError::NoHost(url.to_owned()))?;
    let mut all: Vec<(&str, &str)> = vec![("host", host.as_str())];
    all.extend_from_slice(headers);
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(SystemTime::now())
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| RequestError::Sign(e.to_string()))?;
    let params = SigningParams::V4(params);
    let signable = SignableRequest::new(
        method.as_str(),
        uri.to_string(),
        all.iter().copied(),
        SignableBody::Bytes(&body),
    )
    .map_err(|e| RequestError::Sign(e.to_string()))?;
    let (instructions, _) = aws_sigv4::http_request::sign(signable, &params)
        .map_err(|e| RequestError::Sign(e.to_string()))?
        .into_parts();
    let mut request = Request::builder().method(method).uri(uri);
    for (name, value) in all.iter().copied().chain(instructions.headers()) {
        request = request.header(name, value);
    }
    request
        .body(Full::new(body))
        .map_err(|e| RequestError::Build(e.to_string()))
}

/// The credentials to call KMS for `key` with: the base ones, then the key's role.
async fn credentials(
    services: &KeyServices,
    key: &KmsKey,
    role: &str,
) -> Result<AwsCredentials, KeyServiceError> {
    let base = base_credentials(services, key).await?;
    if role.is_empty() {
        return Ok(base);
    }
    let cache_key = (role.to_owned(), key.region.clone());
    if let Some(cached) = services.sessions.lock().await.roles.get(&cache_key)
        && fresh(cached)
    {
        return Ok(cached.clone());
    }
    let assumed = assume_role(services, key, &base, role, &sops_session_name(), None).await?;
    services
        .sessions
        .lock()
        .await
        .roles
        .insert(cache_key, assumed.clone());
    Ok(assumed)
}

/// The credentials before any role of the key: Secret, ServiceAccount, environment.
async fn base_credentials(
    services: &KeyServices,
    key: &KmsKey,
) -> Result<AwsCredentials, KeyServiceError> {
    if let Some(StaticCredentials(credentials)) = &services.credentials.aws {
        return Ok(credentials.clone());
    }
    let cache_key = key.region.clone();
    if let Some(cached) = services.sessions.lock().await.base.get(&cache_key)
        && fresh(cached)
    {
        return Ok(cached.clone());
    }
    let resolved = if let Some(identity) = &services.credentials.identity {
        let role = identity.annotation(ROLE_ARN_ANNOTATION).ok_or_else(|| {
            KeyServiceError::credentials(format!(
                "{} '{}/{}' has no {ROLE_ARN_ANNOTATION} annotation naming the IAM role to assume",
                services.purpose.account(),
                identity.namespace(),
                identity.name()
            ))
        })?;
        let audiences = identity.audiences(&[DEFAULT_AUDIENCE]);
        let cache_key = format!("aws/{role}/{}/{}", key.region, audiences.join(","));
        let session = identity
            .cached(
                &cache_key,
                services.purpose.operation(OPERATION),
                || async {
                    let token = identity
                        .token(audiences, services.purpose.operation(OPERATION))
                        .await?;
                    let session = format!(
                        "{}.{}.{}.fluxcd.io",
                        identity.name(),
                        identity.namespace(),
                        key.region
                    );
                    let credentials = web_identity(services, key, role, &session, &token).await?;
                    let lifetime = credentials
                        .expiry()
                        .and_then(|at| at.duration_since(SystemTime::now()).ok())
                        .unwrap_or_default();
                    Ok((CachedToken::Aws(credentials), lifetime))
                },
            )
            .await?;
        match session {
            CachedToken::Aws(credentials) => credentials,
            CachedToken::Bearer(_) => {
                return Err(KeyServiceError::credentials(
                    "the token cache holds another kind of credential",
                ));
            }
        }
    } else {
        environment_credentials(services, key).await?
    };
    services
        .sessions
        .lock()
        .await
        .base
        .insert(cache_key, resolved.clone());
    Ok(resolved)
}

/// `AssumeRole` of `role` signed with `base`.
async fn assume_role(
    services: &KeyServices,
    key: &KmsKey,
    base: &AwsCredentials,
    role: &str,
    session: &str,
    external_id: Option<&str>,
) -> Result<AwsCredentials, KeyServiceError> {
    let mut form = vec![
        ("Action", "AssumeRole"),
        ("Version", "2011-06-15"),
        ("RoleArn", role),
        ("RoleSessionName", session),
    ];
    if let Some(external_id) = external_id {
        form.push(("ExternalId", external_id));
    }
    let context = format!("failed to assume role '{role}'");
    sts_call(services, key, Some(base), &form, &context).await
}

/// The shared config and credentials files, from `AWS_CONFIG_FILE` and
/// `AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/config` and `~/.aws/credentials`; a file that
/// does not exist is empty.
async fn shared_files(services: &KeyServices) -> Result<SharedFiles, KeyServiceError> {
    let env = &services.environment;
    let home = env.get("HOME").unwrap_or_default();
    let read = async |variable: &str, default: &str| {
        let path = env
            .get(variable)
            .map(str::to_owned)
            .unwrap_or_else(|| format!("{home}/.aws/{default}"));
        match tokio::fs::read_to_string(&path).await {
            Ok(text) => Ok(Zeroizing::new(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Zeroizing::default()),
            Err(e) => Err(KeyServiceError::credentials_because(
                Some(&format!("cannot read the AWS shared file {path}")),
                e,
            )),
        }
    };
    let config = read("AWS_CONFIG_FILE", "config").await?;
    let credentials = read("AWS_SHARED_CREDENTIALS_FILE", "credentials").await?;
    Ok(SharedFiles::parse(&config, &credentials))
}

/// The credentials a profile of the shared files gives.
async fn profile_credentials(
    services: &KeyServices,
    key: &KmsKey,
    credentials: ProfileCredentials,
) -> Result<AwsCredentials, KeyServiceError> {
    match credentials {
        ProfileCredentials::Static { id, secret, token } => Ok(AwsCredentials::new(
            id,
            secret.as_str(),
            token.map(|t| t.to_string()),
            None,
            "profile",
        )),
        ProfileCredentials::AssumeRole {
            role_arn,
            session_name,
            external_id,
            source,
        } => {
            let base = Box::pin(profile_credentials(services, key, *source)).await?;
            let session = session_name.unwrap_or_else(sops_session_name);
            assume_role(
                services,
                key,
                &base,
                &role_arn,
                &session,
                external_id.as_deref(),
            )
            .await
        }
        ProfileCredentials::WebIdentity {
            role_arn,
            token_file,
            session_name,
        } => {
            let token = read_token_file(&token_file).await?;
            let session = session_name.unwrap_or_else(sops_session_name);
            web_identity(services, key, &role_arn, &session, token.trim()).await
        }
    }
}

/// A web identity token from `file`.
async fn read_token_file(file: &str) -> Result<Zeroizing<String>, KeyServiceError> {
    tokio::fs::read_to_string(file)
        .await
        .map(Zeroizing::new)
        .map_err(|e| {
            KeyServiceError::credentials_because(
                Some(&format!("cannot read the web identity token file {file}")),
                e,
            )
        })
}

/// A profile error as a credentials error.
fn profile_error(error: ProfileError) -> KeyServiceError {
    KeyServiceError::credentials_because(None, error)
}

/// The controller's own credentials, as the AWS SDK for Go's default chain finds them: the
/// profile `AWS_PROFILE` names, else the environment's keys, else its web identity, else
/// the `default` profile's credentials, else EKS Pod Identity, else the EC2 instance profile.
async fn environment_credentials(
    services: &KeyServices,
    key: &KmsKey,
) -> Result<AwsCredentials, KeyServiceError> {
    let env = &services.environment;
    if let Some(profile) = env.get("AWS_PROFILE") {
        let files = shared_files(services).await?;
        let credentials = files.credentials(profile).map_err(profile_error)?;
        return profile_credentials(services, key, credentials).await;
    }
    if let (Some(id), Some(secret)) = (
        env.get("AWS_ACCESS_KEY_ID"),
        env.get("AWS_SECRET_ACCESS_KEY"),
    ) {
        return Ok(AwsCredentials::new(
            id,
            secret,
            env.get("AWS_SESSION_TOKEN").map(str::to_owned),
            None,
            "environment",
        ));
    }
    if let (Some(role), Some(file)) = (
        env.get("AWS_ROLE_ARN"),
        env.get("AWS_WEB_IDENTITY_TOKEN_FILE"),
    ) {
        let token = read_token_file(file).await?;
        let session = env
            .get("AWS_ROLE_SESSION_NAME")
            .map(str::to_owned)
            .unwrap_or_else(sops_session_name);
        return web_identity(services, key, role, &session, token.trim()).await;
    }
    let files = shared_files(services).await?;
    if files.has(DEFAULT_PROFILE) {
        match files.credentials(DEFAULT_PROFILE) {
            Ok(credentials) => return profile_credentials(services, key, credentials).await,
            // A default profile of settings only (a region): the chain goes on.
            Err(ProfileError::NoCredentials(_)) => {}
            Err(error) => return Err(profile_error(error)),
        }
    }
    if let Some(url) = env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI") {
        return container_credentials(services, url).await;
    }
    let no_credentials = "no AWS credentials: set aws_access_key_id and aws_secret_access_key in the decryption Secret's sops.aws-kms entry, name a decryption service account with an eks.amazonaws.com/role-arn annotation, or give the controller IRSA, EKS Pod Identity, an EC2 instance profile, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or a profile in the AWS shared config files";
    if env
        .get("AWS_EC2_METADATA_DISABLED")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    {
        return Err(KeyServiceError::credentials(no_credentials.to_owned()));
    }
    instance_credentials(services)
        .await
        .map_err(|e| KeyServiceError::Credentials {
            message: format!("{no_credentials} (EC2 instance metadata: {e})"),
            source: Some(Box::new(e)),
        })
}

/// `AssumeRoleWithWebIdentity`: a role's credentials for a web identity token.
async fn web_identity(
    services: &KeyServices,
    key: &KmsKey,
    role: &str,
    session: &str,
    token: &str,
) -> Result<AwsCredentials, KeyServiceError> {
    let form = [
        ("Action", "AssumeRoleWithWebIdentity"),
        ("Version", "2011-06-15"),
        ("RoleArn", role),
        ("RoleSessionName", session),
        ("WebIdentityToken", token),
    ];
    let context = format!("failed to assume role '{role}' with a web identity");
    sts_call(services, key, None, &form, &context).await
}

/// EKS Pod Identity's credential endpoint.
async fn container_credentials(
    services: &KeyServices,
    url: &str,
) -> Result<AwsCredentials, KeyServiceError> {
    let env = &services.environment;
    let authorization = match env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE") {
        Some(file) => Some(Zeroizing::new(
            tokio::fs::read_to_string(file)
                .await
                .map_err(|e| {
                    KeyServiceError::credentials_because(Some(&format!("cannot read {file}")), e)
                })?
                .trim()
                .to_owned(),
        )),
        None => env
            .get("AWS_CONTAINER_AUTHORIZATION_TOKEN")
            .map(|t| Zeroizing::new(t.to_owned())),
    };
    let request = || {
        let mut request = Request::builder().method(Method::GET).uri(url);
        if let Some(token) = &authorization {
            request = request.header("authorization", token.as_str());
        }
        request
            .body(Full::new(Bytes::new()))
            .map_err(|_| Failure::Permanent(format!("'{url}' is not a URL")))
    };
    let body = services
        .exchange(services.policy, request, |answer| match answer.status {
            StatusCode::OK => Ok(answer.body),
            status => Err(Failure::from_status(
                status,
                format!(
                    "the container credentials endpoint answered HTTP {}",
                    status.as_u16()
                ),
            )),
        })
        .await
        .map_err(|e| KeyServiceError::credentials_because(None, e))?;
    parse_credentials_document(&body).ok_or_else(|| {
        KeyServiceError::credentials(
            "the container credentials endpoint's answer is not credentials".to_owned(),
        )
    })
}

/// The EC2 instance profile's credentials from the instance metadata service (IMDSv2: a
/// session token, the role's name, its credentials). Off EC2 nothing answers: one attempt
/// with a short deadline, as the AWS SDKs make.
async fn instance_credentials(
    services: &KeyServices,
) -> Result<AwsCredentials, InstanceMetadataError> {
    let base = services
        .environment
        .get("AWS_EC2_METADATA_SERVICE_ENDPOINT")
        .unwrap_or("http://169.254.169.254")
        .trim_end_matches('/')
        .to_owned();
    let call = |method: Method, path: String, header: (&'static str, String)| {
        let request = Request::builder()
            .method(method)
            .uri(format!("{base}{path}"))
            .header(header.0, header.1)
            .body(Full::new(Bytes::new()))
            .map_err(|_| InstanceMetadataError::NotUrl(format!("{base}{path}")));
        async move {
            let response = services.http.send(request?, IMDS_TIMEOUT).await?;
            match response.status {
                StatusCode::OK => Ok(response.body),
                status => Err(InstanceMetadataError::Status {
                    path,
                    status: status.as_u16(),
                }),
            }
        }
    };
    let token = call(
        Method::PUT,
        "/latest/api/token".to_owned(),
        ("x-aws-ec2-metadata-token-ttl-seconds", "21600".to_owned()),
    )
    .await?;
    let token = String::from_utf8_lossy(&token).trim().to_owned();
    let header = || ("x-aws-ec2-metadata-token", token.clone());
    let roles = call(Method::GET, IMDS_CREDENTIALS.to_owned(), header()).await?;
    let role = String::from_utf8_lossy(&roles)
        .lines()
        .next()
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .ok_or(InstanceMetadataError::NoRole)?
        .to_owned();
    let body = call(Method::GET, format!("{IMDS_CREDENTIALS}{role}"), header()).await?;
    parse_credentials_document(&body).ok_or(InstanceMetadataError::Unreadable(role))
}

/// The path listing the instance's role, and with the role's name, its credentials.
const IMDS_CREDENTIALS: &str = "/latest/meta-data/iam/security-credentials/";
/// The deadline of one instance metadata request.
const IMDS_TIMEOUT: Duration = Duration::from_secs(1);

/// `{"AccessKeyId", "SecretAccessKey", "Token", "Expiration"}`, as the container and
/// instance credential endpoints answer.
fn parse_credentials_document(body: &[u8]) -> Option<AwsCredentials> {
    #[derive(Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Answer {
        access_key_id: String,
        secret_access_key: Zeroizing<String>,
        token: Option<Zeroizing<String>>,
        expiration: Option<String>,
    }
    let answer: Answer = serde_json::from_slice(body).ok()?;
    let expiry = answer
        .expiration
        .as_deref()
        .and_then(oauth::parse_rfc3339)
        .map(|seconds| SystemTime::UNIX_EPOCH + Duration::from_secs(seconds));
    Some(AwsCredentials::new(
        answer.access_key_id,
        answer.secret_access_key.as_str(),
        answer.token.map(|t| t.to_string()),
        expiry,
        "instance",
    ))
}

/// An STS Query API call (`AssumeRole` signed with `signer`, `AssumeRoleWithWebIdentity`
/// unsigned) and the credentials it answers with.
async fn sts_call(
    services: &KeyServices,
    key: &KmsKey,
    signer: Option<&AwsCredentials>,
    form: &[(&str, &str)],
    context: &str,
) -> Result<AwsCredentials, KeyServiceError> {
    let endpoint = endpoint(services, "STS", "sts", key);
    let body = Bytes::from(oauth::form_encode(form).as_bytes().to_vec());
    let content_type = "application/x-www-form-urlencoded; charset=utf-8";
    let request = || match signer {
        Some(credentials) => signed(
            &endpoint,
            &key.region,
            "sts",
            credentials,
            &[("content-type", content_type)],
            body.clone(),
        ),
        None => Request::builder()
            .method(Method::POST)
            .uri(format!("{endpoint}/"))
            .header("content-type", content_type)
            .body(Full::new(body.clone()))
            .map_err(|_| RequestError::NotUrl(endpoint.clone())),
    };
    let answer = call_ok(services, request, xml_failure)
        .await
        .map_err(|source| KeyServiceError::call(context, source))?;
    parse_sts_credentials(&answer).map_err(|message| KeyServiceError::Response {
        context: context.to_owned(),
        message: message.to_string(),
    })
}

/// The credentials of an STS answer; the error says what is missing from it.
fn parse_sts_credentials(body: &[u8]) -> Result<AwsCredentials, StsAnswerError> {
    let text = std::str::from_utf8(body).map_err(|_| StsAnswerError::NotText)?;
    let field = |name: &'static str| xml_text(text, name).ok_or(StsAnswerError::Missing(name));
    let id = field("AccessKeyId")?;
    let secret = Zeroizing::new(field("SecretAccessKey")?);
    let token = Zeroizing::new(field("SessionToken")?);
    let expiry = xml_text(text, "Expiration")
        .and_then(|t| oauth::parse_rfc3339(&t))
        .map(|seconds| SystemTime::UNIX_EPOCH + Duration::from_secs(seconds));
    Ok(AwsCredentials::new(
        id,
        secret.as_str(),
        Some(token.to_string()),
        expiry,
        "sts",
    ))
}

/// A Query-protocol error answer: `<Error><Code>..</Code><Message>..</Message></Error>`.
fn xml_failure(status: StatusCode, body: &[u8]) -> Failure {
    let text = String::from_utf8_lossy(body);
    let code = xml_text(&text, "Code").unwrap_or_default();
    let message = xml_text(&text, "Message").unwrap_or_default();
    let mut description = format!("STS answered HTTP {}", status.as_u16());
    for part in [code.as_str(), message.as_str()] {
        if !part.is_empty() {
            description.push_str(": ");
            description.push_str(part);
        }
    }
    if code == "Throttling" {
        Failure::Transient(description)
    } else {
        Failure::from_status(status, description)
    }
}

/// The text of the first `<tag>` element (these answers have no attributes on the
/// elements read, and no nesting of the same name).
fn xml_text(document: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = document.find(&open)? + open.len();
    let end = start + document[start..].find(&close)?;
    Some(
        document[start..end]
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&"),
    )
}

/// sops' session name for an assumed role: `sops@HOSTNAME`, characters STS refuses
/// removed, at most 64 characters.
fn sops_session_name() -> String {
    let host = hostname::get()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default();
    let kept: String = host
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || "=,.".contains(*c) || ('@'..='_').contains(c))
        .collect();
    let mut name = format!("sops@{kept}");
    name.truncate(63);
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arns_as_sops_reads_them() {
        let key = KmsKey::parse("arn:aws:kms:eu-west-1:111122223333:key/1234abcd").unwrap();
        assert_eq!(key.region, "eu-west-1");
        assert_eq!(key.dns_suffix(), "amazonaws.com");
        let china = KmsKey::parse("arn:aws-cn:kms:cn-north-1:111122223333:alias/sops").unwrap();
        assert_eq!(china.dns_suffix(), "amazonaws.com.cn");
        for bad in [
            "",
            "arn:aws:kms:eu-west-1:111122223333",
            "arn:aws:s3:eu-west-1:111122223333:key/x",
            "arn:aws:kms::111122223333:key/x",
            "arn:aws:kms:eu-west-1:abc:key/x",
            "arn:aws:kms:eu-west-1:111122223333:role/x",
            "arn:gcp:kms:eu-west-1:111122223333:key/x",
        ] {
            let err = KmsKey::parse(bad).unwrap_err();
            assert!(matches!(err, KeyServiceError::InvalidKey { .. }));
            assert_eq!(err.to_string(), format!("no valid ARN found in '{bad}'"));
        }
    }

    #[test]
    fn static_credentials_entry_as_flux_reads_it() {
        let parsed = parse_static_credentials(
            b"aws_access_key_id: AKIAEXAMPLE\naws_secret_access_key: s3cr3t\naws_session_token: tok\n",
        )
        .unwrap();
        assert_eq!(parsed.0.access_key_id(), "AKIAEXAMPLE");
        assert_eq!(parsed.0.secret_access_key(), "s3cr3t");
        assert_eq!(parsed.0.session_token(), Some("tok"));
        assert_eq!(format!("{parsed:?}"), "StaticCredentials(***)");
        let without_token =
            parse_static_credentials(b"aws_access_key_id: A\naws_secret_access_key: B\n").unwrap();
        assert_eq!(without_token.0.session_token(), None);
        let err = parse_static_credentials(b"- not\n- a mapping: s3cr3t\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("failed to unmarshal AWS credentials file"),
            "{err}"
        );
        assert!(!err.contains("s3cr3t"), "{err}");
    }

    #[test]
    fn decrypt_body_carries_blob_context_and_key() {
        let body = decrypt_body(
            "arn:aws:kms:us-east-1:1:key/k",
            b"\x01\x02\x03",
            &[("team".into(), "a".into())],
        );
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            r#"{"CiphertextBlob":"AQID","EncryptionContext":{"team":"a"},"KeyId":"arn:aws:kms:us-east-1:1:key/k"}"#
        );
        let plain = parse_decrypt_response(
            br#"{"KeyId":"arn:aws:kms:us-east-1:1:key/k","Plaintext":"AQID","EncryptionAlgorithm":"SYMMETRIC_DEFAULT"}"#,
        )
        .unwrap();
        assert_eq!(plain.as_slice(), [1, 2, 3]);
        assert!(parse_decrypt_response(b"{}").is_err());
    }

    #[test]
    fn error_answers_name_code_and_message() {
        let denied = json_failure(
            StatusCode::BAD_REQUEST,
            br#"{"__type":"com.amazonaws.kms#AccessDeniedException","message":"not allowed"}"#,
            "Decrypt",
        );
        assert!(
            matches!(&denied, Failure::Permanent(m) if m == "Decrypt answered HTTP 400: AccessDeniedException: not allowed"),
            "{denied:?}"
        );
        let throttled = json_failure(
            StatusCode::BAD_REQUEST,
            br#"{"__type":"ThrottlingException"}"#,
            "Decrypt",
        );
        assert!(matches!(throttled, Failure::Transient(_)));
        assert!(matches!(
            json_failure(StatusCode::SERVICE_UNAVAILABLE, b"", "Decrypt"),
            Failure::Transient(_)
        ));
        let xml = json_failure(
            StatusCode::FORBIDDEN,
            b"<ErrorResponse><Errors><Error><Code>AccessDenied</Code><Message>User: arn:aws:iam::1:user/d is not authorized to perform: kms:Decrypt</Message></Error></Errors></ErrorResponse>",
            "Decrypt",
        );
        assert!(
            matches!(&xml, Failure::Permanent(m) if m == "Decrypt answered HTTP 403: AccessDenied: User: arn:aws:iam::1:user/d is not authorized to perform: kms:Decrypt"),
            "{xml:?}"
        );
        let sts = xml_failure(
            StatusCode::FORBIDDEN,
            b"<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>Not authorized &amp; logged</Message></Error></ErrorResponse>",
        );
        assert!(
            matches!(&sts, Failure::Permanent(m) if m == "STS answered HTTP 403: AccessDenied: Not authorized & logged"),
            "{sts:?}"
        );
    }

    #[test]
    fn sts_answers_give_session_credentials() {
        let body = br#"<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleResult>
    <Credentials>
      <AccessKeyId>ASIAEXAMPLE</AccessKeyId>
      <SecretAccessKey>wJalrXUtnFEMI</SecretAccessKey>
      <SessionToken>FwoGZXIvYXdzEJr</SessionToken>
      <Expiration>2030-01-02T03:04:05Z</Expiration>
    </Credentials>
  </AssumeRoleResult>
</AssumeRoleResponse>"#;
        let credentials = parse_sts_credentials(body).unwrap();
        assert_eq!(credentials.access_key_id(), "ASIAEXAMPLE");
        assert_eq!(credentials.session_token(), Some("FwoGZXIvYXdzEJr"));
        assert_eq!(
            credentials.expiry(),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_893_553_445))
        );
        assert!(parse_sts_credentials(b"<nothing/>").is_err());
    }

    #[test]
    fn signed_requests_carry_sigv4_headers() {
        let credentials = AwsCredentials::new("AKID", "SECRET", None, None, "test");
        let request = signed(
            "http://127.0.0.1:5000",
            "us-east-1",
            "kms",
            &credentials,
            &[("x-amz-target", "TrentService.Decrypt")],
            Bytes::from_static(b"{}"),
        )
        .unwrap();
        let authorization = request.headers()["authorization"].to_str().unwrap();
        assert!(
            authorization.starts_with("AWS4-HMAC-SHA256 Credential=AKID/"),
            "{authorization}"
        );
        assert!(authorization.contains("/us-east-1/kms/aws4_request"));
        assert!(authorization.contains("SignedHeaders=host;x-amz-date;x-amz-target"));
        assert!(!authorization.contains("SECRET"));
        assert!(request.headers().contains_key("x-amz-date"));
        assert_eq!(request.uri(), "http://127.0.0.1:5000/");
    }

    #[test]
    fn session_names_keep_what_sts_accepts() {
        let name = sops_session_name();
        assert!(name.starts_with("sops@"));
        assert!(name.len() < 64);
    }

    /// A fake instance metadata service: IMDSv2 session token, role list, credentials. A
    /// request without the session token is refused, as IMDSv2 refuses it.
    async fn fake_imds() -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut buffer = vec![0u8; 4096];
                let n = socket.read(&mut buffer).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buffer[..n]).to_lowercase();
                let authorized = head.contains("x-aws-ec2-metadata-token: session-1");
                let (status, body) = if head.starts_with("put /latest/api/token")
                    && head.contains("x-aws-ec2-metadata-token-ttl-seconds: 21600")
                {
                    ("200 OK", "session-1".to_owned())
                } else if !authorized {
                    ("401 Unauthorized", String::new())
                } else if head.starts_with("get /latest/meta-data/iam/security-credentials/ ") {
                    ("200 OK", "node-role\n".to_owned())
                } else if head
                    .starts_with("get /latest/meta-data/iam/security-credentials/node-role ")
                {
                    (
                        "200 OK",
                        r#"{"Code":"Success","AccessKeyId":"ASIANODE","SecretAccessKey":"node-secret","Token":"node-token","Expiration":"2030-01-02T03:04:05Z"}"#.to_owned(),
                    )
                } else {
                    ("404 Not Found", String::new())
                };
                let response = format!(
                    "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            }
        });
        format!("http://{address}")
    }

    fn services(env: &[(&str, &str)]) -> KeyServices {
        KeyServices::new(
            tokio::runtime::Handle::current(),
            crate::HttpClient::new().unwrap(),
            crate::Credentials::default(),
            crate::Environment::from_pairs(env.iter().copied()),
        )
    }

    #[tokio::test]
    async fn an_instance_profile_is_read_from_imdsv2() {
        let endpoint = fake_imds().await;
        let key = KmsKey::parse("arn:aws:kms:eu-west-1:111122223333:key/k").unwrap();
        let services = services(&[("AWS_EC2_METADATA_SERVICE_ENDPOINT", &endpoint)]);
        let credentials = environment_credentials(&services, &key).await.unwrap();
        assert_eq!(credentials.access_key_id(), "ASIANODE");
        assert_eq!(credentials.session_token(), Some("node-token"));
        assert_eq!(
            credentials.expiry(),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_893_553_445))
        );
        let disabled = services_disabled();
        let err = environment_credentials(&disabled, &key)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("no AWS credentials") && !err.contains("EC2 instance metadata"),
            "{err}"
        );
    }

    fn services_disabled() -> KeyServices {
        services(&[("AWS_EC2_METADATA_DISABLED", "true")])
    }

    #[tokio::test]
    async fn no_instance_metadata_service_is_no_credentials() {
        // A closed port: refused at once.
        let key = KmsKey::parse("arn:aws:kms:eu-west-1:111122223333:key/k").unwrap();
        let services = services(&[("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:1")]);
        let err = environment_credentials(&services, &key)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("no AWS credentials")
                && err.contains(
                    "EC2 instance metadata: request to http://127.0.0.1:1/latest/api/token failed"
                ),
            "{err}"
        );
    }
}
