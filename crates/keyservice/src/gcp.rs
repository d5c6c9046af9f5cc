//! GCP Cloud KMS: `decrypt` of the data key over the JSON API, with the credentials Flux
//! uses: the decryption Secret's `sops.gcp-kms` entry (a service account key or an
//! authorized user), else the decryption ServiceAccount (workload identity federation:
//! its Kubernetes token exchanged at Google STS, optionally impersonating the GCP service
//! account of its `iam.gke.io/gcp-service-account` annotation), else the controller's own
//! identity (`GOOGLE_APPLICATION_CREDENTIALS`, then the GCE metadata server).
//!
//! `SOPS_GCP_KMS_ENDPOINT` and `SOPS_GCP_KMS_UNIVERSE_DOMAIN` override the KMS endpoint,
//! as in sops.
//!
//! The OAuth 2.0 and JOSE helpers (`super::oauth`) are shared with the Azure key service.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::Full;
use serde::Deserialize;
use serde_json::json;
use zeroize::Zeroizing;

use super::http::Response;
use super::identity::{AUDIENCES_ANNOTATION, ServiceAccountTokens};
use super::{CallError, Failure, KeyServiceError, KeyServices};

use super::oauth::{self, Rsa, TokenResponse, json_error_kind};

pub mod external;
pub mod gke;

use external::ExternalAccount;

/// The annotation naming the GCP service account a decryption ServiceAccount impersonates.
pub const SERVICE_ACCOUNT_ANNOTATION: &str = "iam.gke.io/gcp-service-account";
/// The annotation naming the workload identity provider of a cluster outside GKE.
pub const WORKLOAD_IDENTITY_PROVIDER_ANNOTATION: &str =
    "gcp.auth.fluxcd.io/workload-identity-provider";

/// The scopes of tokens from Secret credentials (`kms.DefaultAuthScopes()`).
const KMS_SCOPES: &[&str] = &[
    "https://www.googleapis.com/auth/cloud-platform",
    "https://www.googleapis.com/auth/cloudkms",
];
/// The scopes of workload identity and controller tokens (fluxcd/pkg/auth/gcp).
const IDENTITY_SCOPES: &[&str] = &[
    "https://www.googleapis.com/auth/cloud-platform",
    "https://www.googleapis.com/auth/userinfo.email",
];
const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
const DEFAULT_KMS_ENDPOINT: &str = "https://cloudkms.googleapis.com";
const STS_TOKEN_URL: &str = "https://sts.googleapis.com/v1/token";
const IAM_CREDENTIALS_URL: &str = "https://iamcredentials.googleapis.com";
const DEFAULT_METADATA_HOST: &str = "169.254.169.254";
/// How long a signed assertion, and an impersonated token, are asked to be valid.
const ASSERTION_LIFETIME: u64 = 3600;

/// Credentials from the decryption Secret's `sops.gcp-kms` entry, or from
/// `GOOGLE_APPLICATION_CREDENTIALS`.
pub struct Credentials {
    kind: Kind,
}

enum Kind {
    /// A service account key: tokens are got with a signed JWT assertion.
    ServiceAccount {
        client_email: String,
        private_key_id: Option<String>,
        key: Box<Rsa>,
        token_uri: String,
    },
    /// A user's refresh token (`gcloud auth application-default login`).
    AuthorizedUser {
        client_id: String,
        client_secret: Zeroizing<String>,
        refresh_token: Zeroizing<String>,
        token_uri: String,
    },
    /// Workload identity federation from outside Google Cloud (see [`external`]).
    ExternalAccount(Box<ExternalAccount>),
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            Kind::ServiceAccount {
                client_email,
                private_key_id,
                token_uri,
                ..
            } => f
                .debug_struct("ServiceAccount")
                .field("client_email", client_email)
                .field("private_key_id", private_key_id)
                .field("private_key", &"***")
                .field("token_uri", token_uri)
                .finish(),
            Kind::AuthorizedUser {
                client_id,
                token_uri,
                ..
            } => f
                .debug_struct("AuthorizedUser")
                .field("client_id", client_id)
                .field("client_secret", &"***")
                .field("refresh_token", &"***")
                .field("token_uri", token_uri)
                .finish(),
            Kind::ExternalAccount(account) => account.fmt(f),
        }
    }
}

impl Credentials {
    /// What the credentials are, for messages: never a secret.
    fn describe(&self) -> String {
        match &self.kind {
            Kind::ServiceAccount { client_email, .. } => {
                format!("service account '{client_email}'")
            }
            Kind::AuthorizedUser { client_id, .. } => {
                format!("authorized user of client '{client_id}'")
            }
            Kind::ExternalAccount(account) => account.describe(),
        }
    }
}

/// The fields of a Google credentials JSON file this controller reads.
#[derive(Deserialize)]
struct CredentialsFile {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    client_email: String,
    #[serde(default)]
    private_key: Zeroizing<String>,
    #[serde(default)]
    private_key_id: String,
    #[serde(default)]
    token_uri: String,
    #[serde(default)]
    client_id: String,
    #[serde(default)]
    client_secret: Zeroizing<String>,
    #[serde(default)]
    refresh_token: Zeroizing<String>,
}

/// Why a `sops.gcp-kms` entry (or the `GOOGLE_APPLICATION_CREDENTIALS` file) cannot be used,
/// in the words of `google.CredentialsFromJSON`. Names the field at fault, never its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    /// Not UTF-8 text.
    #[error("failed to parse GCP credentials JSON: not UTF-8 text")]
    NotUtf8,
    /// Not JSON, or not the document's shape.
    #[error("failed to parse GCP credentials JSON: {kind} at line {line} column {column}")]
    Json {
        /// What is wrong (never the text at fault).
        kind: &'static str,
        /// Where.
        line: usize,
        /// Where on the line.
        column: usize,
    },
    /// No `type` field.
    #[error("GCP credentials JSON: missing 'type' field")]
    MissingType,
    /// A `type` other than `service_account`, `authorized_user` and `external_account`.
    #[error(
        "GCP credentials of type '{0}' are not supported: use a 'service_account' key, 'authorized_user' or 'external_account' credentials, or workload identity"
    )]
    UnsupportedType(String),
    /// An `external_account` whose subject token comes from a source this controller does
    /// not read.
    #[error(
        "GCP external_account credentials with credential_source {0} are not supported: use a file or url source"
    )]
    UnsupportedSource(&'static str),
    /// A field the type needs is missing or empty.
    #[error("GCP credentials of type '{kind}': missing '{field}' field")]
    MissingField {
        /// The credentials' type.
        kind: &'static str,
        /// The field.
        field: &'static str,
    },
    /// The service account's key is not a usable RSA key.
    #[error("GCP service account '{client_email}': private_key: {source}")]
    PrivateKey {
        /// The service account.
        client_email: String,
        /// Why.
        source: oauth::PemError,
    },
}

impl CredentialsError {
    /// The Flux reason of a reconcile that stops on this error.
    pub fn reason(&self) -> &'static str {
        crate::reason::BUILD_FAILED
    }
}

/// Why a ServiceAccount annotation of GCP workload identity is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnnotationError {
    /// `iam.gke.io/gcp-service-account` is not a service account email.
    #[error(
        "invalid {SERVICE_ACCOUNT_ANNOTATION} annotation: '{0}': must be a GCP service account email NAME@PROJECT.iam.gserviceaccount.com"
    )]
    ServiceAccount(String),
    /// `gcp.auth.fluxcd.io/workload-identity-provider` is not a provider's name.
    #[error(
        "invalid {WORKLOAD_IDENTITY_PROVIDER_ANNOTATION} annotation: '{0}': must be projects/PROJECT_NUMBER/locations/global/workloadIdentityPools/POOL_ID/providers/PROVIDER_ID"
    )]
    Provider(String),
}

/// Parses a Google credentials JSON document (the Secret's `sops.gcp-kms` entry, as
/// `google.CredentialsFromJSON` reads it): `service_account`, `authorized_user` and
/// `external_account` types.
pub fn parse_credentials(data: &[u8]) -> Result<Credentials, CredentialsError> {
    let text = std::str::from_utf8(data).map_err(|_| CredentialsError::NotUtf8)?;
    if serde_json::from_str::<serde_json::Value>(text)
        .is_ok_and(|document| document["type"] == external::TYPE)
    {
        let account = ExternalAccount::parse(text)?;
        return Ok(Credentials {
            kind: Kind::ExternalAccount(Box::new(account)),
        });
    }
    let file: CredentialsFile =
        serde_json::from_str(text.trim_matches('\n')).map_err(|e| CredentialsError::Json {
            kind: json_error_kind(&e),
            line: e.line(),
            column: e.column(),
        })?;
    let token_uri = non_empty(file.token_uri).unwrap_or_else(|| DEFAULT_TOKEN_URI.to_owned());
    let kind = match file.kind.as_str() {
        "service_account" => service_account(
            file.client_email,
            &file.private_key,
            file.private_key_id,
            token_uri,
        )?,
        "authorized_user" => {
            require(&file.client_id, "client_id", "authorized_user")?;
            require(&file.client_secret, "client_secret", "authorized_user")?;
            require(&file.refresh_token, "refresh_token", "authorized_user")?;
            Kind::AuthorizedUser {
                client_id: file.client_id,
                client_secret: file.client_secret,
                refresh_token: file.refresh_token,
                token_uri,
            }
        }
        "" => return Err(CredentialsError::MissingType),
        other => return Err(CredentialsError::UnsupportedType(other.to_owned())),
    };
    Ok(Credentials { kind })
}

fn service_account(
    client_email: String,
    private_key: &str,
    private_key_id: String,
    token_uri: String,
) -> Result<Kind, CredentialsError> {
    require(&client_email, "client_email", "service_account")?;
    require(private_key, "private_key", "service_account")?;
    let key = Rsa::from_pem(private_key).map_err(|source| CredentialsError::PrivateKey {
        client_email: client_email.clone(),
        source,
    })?;
    Ok(Kind::ServiceAccount {
        client_email,
        private_key_id: non_empty(private_key_id),
        key: Box::new(key),
        token_uri,
    })
}

fn require(value: &str, field: &'static str, kind: &'static str) -> Result<(), CredentialsError> {
    if value.is_empty() {
        Err(CredentialsError::MissingField { kind, field })
    } else {
        Ok(())
    }
}

fn non_empty(value: String) -> Option<String> {
    (!value.is_empty()).then_some(value)
}

/// An access token, cached in [`KeyServices`] until shortly before it expires.
pub use super::oauth::AccessToken;

/// Opens a data key: `enc` is the standard base64 of the KMS ciphertext, as sops writes it.
pub async fn decrypt(
    services: &KeyServices,
    resource_id: &str,
    enc: &str,
) -> Result<Zeroizing<Vec<u8>>, KeyServiceError> {
    let endpoint = kms_endpoint(&services.environment);
    decrypt_at(services, &endpoint, resource_id, enc).await
}

async fn decrypt_at(
    services: &KeyServices,
    endpoint: &str,
    resource_id: &str,
    enc: &str,
) -> Result<Zeroizing<Vec<u8>>, KeyServiceError> {
    let context = || format!("failed to decrypt sops data key with GCP KMS key '{resource_id}'");
    check_resource_id(resource_id).map_err(|e| KeyServiceError::invalid_key_because(None, e))?;
    let ciphertext = STANDARD.decode(enc.trim()).map_err(|e| {
        KeyServiceError::invalid_key_because(
            Some(&format!(
                "{}: the encrypted data key is not base64",
                context()
            )),
            e,
        )
    })?;
    let token = access_token(services).await?;
    services
        .exchange(
            services.policy,
            || decrypt_request(endpoint, resource_id, &ciphertext, &token),
            |answer| parse_decrypt_response(answer.status, &answer.body),
        )
        .await
        .map_err(|source| KeyServiceError::call(context(), source))
}

/// The KMS endpoint: `SOPS_GCP_KMS_ENDPOINT`, else `cloudkms.` the universe domain of
/// `SOPS_GCP_KMS_UNIVERSE_DOMAIN`, else Google's.
fn kms_endpoint(environment: &super::Environment) -> String {
    if let Some(endpoint) = environment.get("SOPS_GCP_KMS_ENDPOINT") {
        let endpoint = endpoint.trim_end_matches('/');
        if endpoint.contains("://") {
            endpoint.to_owned()
        } else {
            format!("https://{endpoint}")
        }
    } else if let Some(domain) = environment.get("SOPS_GCP_KMS_UNIVERSE_DOMAIN") {
        format!("https://cloudkms.{domain}")
    } else {
        DEFAULT_KMS_ENDPOINT.to_owned()
    }
}

/// Checks the resource ID is `projects/*/locations/*/keyRings/*/cryptoKeys/*`, as sops does.
fn check_resource_id(resource_id: &str) -> Result<(), InvalidResourceId> {
    let parts: Vec<&str> = resource_id.split('/').collect();
    let names = ["projects", "locations", "keyRings", "cryptoKeys"];
    let valid = parts.len() == 8
        && parts.iter().step_by(2).zip(names).all(|(p, n)| *p == n)
        && parts.iter().skip(1).step_by(2).all(|p| {
            !p.is_empty() && !p.contains(|c: char| c.is_whitespace() || c == '?' || c == '#')
        });
    if valid {
        Ok(())
    } else {
        Err(InvalidResourceId(resource_id.to_owned()))
    }
}

/// A key's resource ID that is not `projects/*/locations/*/keyRings/*/cryptoKeys/*`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no valid resource ID found in \"{0}\"")]
pub struct InvalidResourceId(pub String);

/// The `cryptoKeys.decrypt` request: `POST {endpoint}/v1/{resource_id}:decrypt`.
fn decrypt_request(
    endpoint: &str,
    resource_id: &str,
    ciphertext: &[u8],
    token: &str,
) -> Result<Request<Full<Bytes>>, Failure> {
    let body = json!({ "ciphertext": STANDARD.encode(ciphertext) });
    oauth::bearer_json_post(
        &format!("{endpoint}/v1/{resource_id}:decrypt"),
        token,
        &body,
    )
}

/// Reads a `cryptoKeys.decrypt` answer: `{"plaintext": base64}`.
fn parse_decrypt_response(status: StatusCode, body: &[u8]) -> Result<Zeroizing<Vec<u8>>, Failure> {
    #[derive(Deserialize)]
    struct Answer {
        #[serde(default)]
        plaintext: Zeroizing<String>,
    }
    let answer: Answer = oauth::json_answer(status, body)?;
    STANDARD
        .decode(answer.plaintext.as_bytes())
        .map(Zeroizing::new)
        .map_err(|_| Failure::Permanent("the answer's plaintext is not base64".to_owned()))
}

/// A valid access token: the cached one, else a new one from the first credentials found.
async fn access_token(services: &KeyServices) -> Result<Zeroizing<String>, KeyServiceError> {
    let mut cached = services.gcp_tokens.lock().await;
    if let Some(token) = cached.as_ref().filter(|t| t.is_fresh()) {
        return Ok(token.value().clone());
    }
    let token = new_token(services).await?;
    let value = token.value().clone();
    *cached = Some(token);
    Ok(value)
}

/// A new token: from the Secret's credentials, else the decryption ServiceAccount's
/// workload identity, else the controller's (`GOOGLE_APPLICATION_CREDENTIALS`, else the
/// metadata server), as Flux's lazy token source resolves them.
async fn new_token(services: &KeyServices) -> Result<AccessToken, KeyServiceError> {
    if let Some(credentials) = &services.credentials.gcp {
        return token_from_credentials(services, credentials, KMS_SCOPES)
            .await
            .map_err(|source| {
                KeyServiceError::call(
                    format!(
                        "failed to get an access token for {} (sops.gcp-kms)",
                        credentials.describe()
                    ),
                    source,
                )
            });
    }
    if let Some(identity) = &services.credentials.identity {
        return workload_identity_token(services, identity)
            .await
            .map_err(|e| e.within(&identity.token_failure_context()));
    }
    if let Some(path) = services.environment.get("GOOGLE_APPLICATION_CREDENTIALS") {
        let credentials = read_credentials_file(path).await?;
        return token_from_credentials(services, &credentials, IDENTITY_SCOPES)
            .await
            .map_err(|source| {
                KeyServiceError::call(
                    format!(
                        "failed to get an access token for {} (GOOGLE_APPLICATION_CREDENTIALS)",
                        credentials.describe()
                    ),
                    source,
                )
            });
    }
    metadata_token(services).await.map_err(|source| {
        KeyServiceError::call(
            "failed to get an access token from the GCE metadata server",
            source,
        )
    })
}

async fn read_credentials_file(path: &str) -> Result<Credentials, KeyServiceError> {
    let data = Zeroizing::new(tokio::fs::read(path).await.map_err(|e| {
        KeyServiceError::credentials_because(
            Some(&format!(
                "failed to read GOOGLE_APPLICATION_CREDENTIALS file '{path}'"
            )),
            e,
        )
    })?);
    parse_credentials(&data).map_err(|e| {
        KeyServiceError::credentials_because(
            Some(&format!("GOOGLE_APPLICATION_CREDENTIALS file '{path}'")),
            e,
        )
    })
}

async fn token_from_credentials(
    services: &KeyServices,
    credentials: &Credentials,
    scopes: &[&str],
) -> Result<AccessToken, CallError> {
    if let Kind::ExternalAccount(account) = &credentials.kind {
        return account.token(services, scopes).await;
    }
    let response = services
        .exchange(
            services.policy,
            || credentials_token_request(credentials, scopes, oauth::unix_now()),
            |answer| oauth::parse_token_response(answer.status, &answer.body),
        )
        .await?;
    Ok(AccessToken::from_response(response))
}

/// The token request of Secret credentials: a JWT-bearer assertion signed with the
/// service account key, or a refresh token grant.
fn credentials_token_request(
    credentials: &Credentials,
    scopes: &[&str],
    now: u64,
) -> Result<Request<Full<Bytes>>, Failure> {
    match &credentials.kind {
        Kind::ServiceAccount {
            client_email,
            private_key_id,
            key,
            token_uri,
        } => {
            let assertion = service_account_assertion(
                client_email,
                private_key_id.as_deref(),
                key,
                token_uri,
                scopes,
                now,
            )
            .map_err(|e| Failure::Permanent(e.to_string()))?;
            oauth::form_request(
                token_uri,
                &[
                    ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
                    ("assertion", &assertion),
                ],
            )
        }
        Kind::AuthorizedUser {
            client_id,
            client_secret,
            refresh_token,
            token_uri,
        } => oauth::form_request(
            token_uri,
            &[
                ("grant_type", "refresh_token"),
                ("client_id", client_id),
                ("client_secret", client_secret),
                ("refresh_token", refresh_token),
            ],
        ),
        Kind::ExternalAccount(_) => Err(Failure::Permanent(
            "external_account credentials have no token request of their own".to_string(),
        )),
    }
}

/// The RS256 JWT a service account key proves itself with (RFC 7523).
fn service_account_assertion(
    client_email: &str,
    private_key_id: Option<&str>,
    key: &Rsa,
    token_uri: &str,
    scopes: &[&str],
    now: u64,
) -> Result<Zeroizing<String>, oauth::SignError> {
    let mut header = json!({ "alg": "RS256", "typ": "JWT" });
    if let Some(kid) = private_key_id {
        header["kid"] = json!(kid);
    }
    let claims = json!({
        "iss": client_email,
        "scope": scopes.join(" "),
        "aud": token_uri,
        "iat": now,
        "exp": now + ASSERTION_LIFETIME,
    });
    oauth::sign_jwt(&header, &claims, key, oauth::Alg::Rs256)
}

/// Workload identity federation, as fluxcd/pkg/auth/gcp does it: a ServiceAccount token
/// for the pool's (GKE) or provider's audience, exchanged at STS, then, with the
/// `iam.gke.io/gcp-service-account` annotation, for that account's token.
async fn workload_identity_token(
    services: &KeyServices,
    identity: &Arc<ServiceAccountTokens>,
) -> Result<AccessToken, KeyServiceError> {
    let credentials = |e: AnnotationError| KeyServiceError::credentials_because(None, e);
    let email = impersonated_account(identity).map_err(credentials)?;
    let provider = workload_identity_provider(identity).map_err(credentials)?;
    let (audiences, exchange_audience) = match provider {
        Some(provider) => {
            let audience = format!("//iam.googleapis.com/{provider}");
            (identity.audiences(&[&audience]), audience)
        }
        None => {
            if identity.annotation(AUDIENCES_ANNOTATION).is_some() {
                return Err(KeyServiceError::credentials(format!(
                    "cannot specify custom audiences ({AUDIENCES_ANNOTATION}) for GKE workload identity: set {WORKLOAD_IDENTITY_PROVIDER_ANNOTATION} outside GKE"
                )));
            }
            let cluster = gke_cluster(services).await?;
            (vec![cluster.pool()], cluster.exchange_audience())
        }
    };
    let subject = identity
        .token(audiences, services.purpose.operation("decrypt_with_gcp"))
        .await?;
    let federated = services
        .exchange(
            services.policy,
            || sts_request(STS_TOKEN_URL, &exchange_audience, &subject, IDENTITY_SCOPES),
            |answer| oauth::parse_token_response(answer.status, &answer.body),
        )
        .await
        .map_err(|source| KeyServiceError::call("token exchange at Google STS failed", source))?;
    let Some(email) = email else {
        return Ok(AccessToken::from_response(federated));
    };
    let token = federated.access_token;
    let impersonation_url = generate_access_token_url(IAM_CREDENTIALS_URL, &email);
    let impersonated = services
        .exchange(
            services.policy,
            || impersonation_request(&impersonation_url, &token, IDENTITY_SCOPES),
            |answer| parse_impersonation_response(answer.status, &answer.body, oauth::unix_now()),
        )
        .await
        .map_err(|source| {
            KeyServiceError::call(
                format!("impersonation of GCP service account '{email}' failed"),
                source,
            )
        })?;
    Ok(AccessToken::from_response(impersonated))
}

/// The validated `iam.gke.io/gcp-service-account` annotation, if any.
fn impersonated_account(
    identity: &ServiceAccountTokens,
) -> Result<Option<String>, AnnotationError> {
    let Some(email) = identity.annotation(SERVICE_ACCOUNT_ANNOTATION) else {
        return Ok(None);
    };
    let valid = email
        .strip_suffix(".iam.gserviceaccount.com")
        .and_then(|rest| rest.split_once('@'))
        .is_some_and(|(name, project)| {
            let ok = |s: &str| {
                (1..=100).contains(&s.len())
                    && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            };
            ok(name) && ok(project)
        });
    if valid {
        Ok(Some(email.to_owned()))
    } else {
        Err(AnnotationError::ServiceAccount(email.to_owned()))
    }
}

/// The validated `gcp.auth.fluxcd.io/workload-identity-provider` annotation, if any.
fn workload_identity_provider(
    identity: &ServiceAccountTokens,
) -> Result<Option<String>, AnnotationError> {
    let Some(provider) = identity.annotation(WORKLOAD_IDENTITY_PROVIDER_ANNOTATION) else {
        return Ok(None);
    };
    let parts: Vec<&str> = provider.split('/').collect();
    let valid = parts.len() == 8
        && parts[0] == "projects"
        && (1..=30).contains(&parts[1].len())
        && parts[1].bytes().all(|b| b.is_ascii_digit())
        && parts[2] == "locations"
        && parts[3] == "global"
        && parts[4] == "workloadIdentityPools"
        && parts[6] == "providers"
        && [parts[5], parts[7]]
            .iter()
            .all(|p| (1..=100).contains(&p.len()));
    if valid {
        Ok(Some(provider.to_owned()))
    } else {
        Err(AnnotationError::Provider(provider.to_owned()))
    }
}

/// The GKE cluster the controller runs in, from the metadata server.
struct GkeCluster {
    project: String,
    location: String,
    name: String,
}

impl GkeCluster {
    /// The workload identity pool: the audience of the ServiceAccount token.
    fn pool(&self) -> String {
        format!("{}.svc.id.goog", self.project)
    }

    /// The STS audience of a GKE ServiceAccount token.
    fn exchange_audience(&self) -> String {
        format!(
            "identitynamespace:{}:https://container.googleapis.com/v1/projects/{}/locations/{}/clusters/{}",
            self.pool(),
            self.project,
            self.location,
            self.name
        )
    }
}

async fn gke_cluster(services: &KeyServices) -> Result<GkeCluster, KeyServiceError> {
    let host = metadata_host(&services.environment);
    let project = metadata_value(
        services,
        &host,
        "project/project-id",
        "GKE cluster project ID",
    )
    .await?;
    let location = metadata_value(
        services,
        &host,
        "instance/attributes/cluster-location",
        "GKE cluster location",
    )
    .await?;
    let name = metadata_value(
        services,
        &host,
        "instance/attributes/cluster-name",
        "GKE cluster name",
    )
    .await?;
    Ok(GkeCluster {
        project,
        location,
        name,
    })
}

async fn metadata_value(
    services: &KeyServices,
    host: &str,
    path: &str,
    what: &str,
) -> Result<String, KeyServiceError> {
    let policy = services.policy.metadata();
    let read = |answer: Response| {
        if !answer.status.is_success() {
            return Err(Failure::from_status(
                answer.status,
                oauth::service_error(answer.status, &answer.body),
            ));
        }
        Ok(String::from_utf8_lossy(&answer.body).trim().to_owned())
    };
    let value = services
        .exchange(policy, || metadata_request(host, path), read)
        .await
        .map_err(|source| {
            KeyServiceError::call(
                format!("failed to get {what} from the metadata service"),
                source,
            )
        })?;
    if value.is_empty() {
        return Err(KeyServiceError::Response {
            context: format!("failed to get {what} from the metadata service"),
            message: "empty value".to_owned(),
        });
    }
    Ok(value)
}

/// The metadata server: `GCE_METADATA_HOST`, else its link-local address.
fn metadata_host(environment: &super::Environment) -> String {
    environment
        .get("GCE_METADATA_HOST")
        .unwrap_or(DEFAULT_METADATA_HOST)
        .to_owned()
}

fn metadata_request(host: &str, path: &str) -> Result<Request<Full<Bytes>>, Failure> {
    Request::builder()
        .method(Method::GET)
        .uri(format!("http://{host}/computeMetadata/v1/{path}"))
        .header("Metadata-Flavor", "Google")
        .body(Full::new(Bytes::new()))
        .map_err(|e| Failure::Permanent(format!("invalid metadata request: {e}")))
}

/// The controller's own token from the GCE metadata server.
async fn metadata_token(services: &KeyServices) -> Result<AccessToken, CallError> {
    let host = metadata_host(&services.environment);
    let path = format!(
        "instance/service-accounts/default/token?scopes={}",
        oauth::percent_encode(&IDENTITY_SCOPES.join(","))
    );
    let policy = services.policy.metadata();
    let response = services
        .exchange(
            policy,
            || metadata_request(&host, &path),
            |answer| oauth::parse_token_response(answer.status, &answer.body),
        )
        .await?;
    Ok(AccessToken::from_response(response))
}

/// The STS token exchange of a Kubernetes ServiceAccount token (RFC 8693).
fn sts_request(
    url: &str,
    audience: &str,
    subject_token: &str,
    scopes: &[&str],
) -> Result<Request<Full<Bytes>>, Failure> {
    oauth::form_request(
        url,
        &[
            (
                "grant_type",
                "urn:ietf:params:oauth:grant-type:token-exchange",
            ),
            ("audience", audience),
            ("scope", &scopes.join(" ")),
            (
                "requested_token_type",
                "urn:ietf:params:oauth:token-type:access_token",
            ),
            ("subject_token", subject_token),
            ("subject_token_type", "urn:ietf:params:oauth:token-type:jwt"),
        ],
    )
}

/// IAM Credentials' `generateAccessToken` URL for `email` under `base`.
fn generate_access_token_url(base: &str, email: &str) -> String {
    format!("{base}/v1/projects/-/serviceAccounts/{email}:generateAccessToken")
}

/// A `generateAccessToken` request to `url`, authorized by the federated `token`.
fn impersonation_request(
    url: &str,
    token: &str,
    scopes: &[&str],
) -> Result<Request<Full<Bytes>>, Failure> {
    let body = json!({ "scope": scopes, "lifetime": format!("{ASSERTION_LIFETIME}s") });
    Request::builder()
        .method(Method::POST)
        .uri(url)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::AUTHORIZATION, format!("Bearer {token}"))
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| Failure::Permanent(format!("invalid request: {e}")))
}

/// Reads a `generateAccessToken` answer: `{"accessToken", "expireTime": RFC 3339}`.
fn parse_impersonation_response(
    status: StatusCode,
    body: &[u8],
    now: u64,
) -> Result<TokenResponse, Failure> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Answer {
        #[serde(default)]
        access_token: Zeroizing<String>,
        #[serde(default)]
        expire_time: String,
    }
    let answer: Answer = oauth::json_answer(status, body)?;
    if answer.access_token.is_empty() {
        return Err(Failure::Permanent(
            "the answer has no accessToken".to_owned(),
        ));
    }
    let expires_in = oauth::parse_rfc3339(&answer.expire_time)
        .map(|at| at.saturating_sub(now))
        .unwrap_or(ASSERTION_LIFETIME);
    Ok(TokenResponse {
        access_token: answer.access_token,
        expires_in,
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::{CallPolicy, Credentials as AllCredentials, Environment, HttpClient};
    use ring::signature::{RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};
    use std::time::Duration;

    pub(crate) const TEST_KEY: &str = include_str!("testdata/rsa-test-key.pem");
    const TOKEN: &str = "ya29.c.test-access-token-DO-NOT-LEAK";
    const SECRET: &str = "test-client-secret-DO-NOT-LEAK";
    const RESOURCE: &str = "projects/my-project/locations/global/keyRings/flux/cryptoKeys/sops";

    /// A tiny HTTP/1.1 server answering canned responses in order, recording requests.
    pub(crate) mod server {
        use std::sync::{Arc, Mutex};

        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        use tokio::net::TcpListener;

        /// One request as received.
        #[derive(Clone, Debug)]
        pub struct Recorded {
            pub method: String,
            pub target: String,
            pub headers: String,
            pub body: String,
        }

        pub struct Server {
            pub url: String,
            pub requests: Arc<Mutex<Vec<Recorded>>>,
        }

        impl Server {
            pub fn requests(&self) -> Vec<Recorded> {
                self.requests.lock().unwrap().clone()
            }
        }

        pub async fn serve(responses: Vec<(u16, String)>) -> Server {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}", listener.local_addr().unwrap());
            let requests = Arc::new(Mutex::new(Vec::new()));
            let recorded = requests.clone();
            tokio::spawn(async move {
                let mut responses = responses.into_iter();
                loop {
                    let Ok((mut stream, _)) = listener.accept().await else {
                        return;
                    };
                    let Some(request) = read_request(&mut stream).await else {
                        continue;
                    };
                    recorded.lock().unwrap().push(request);
                    let (status, body) = responses.next().unwrap_or((500, "{}".to_owned()));
                    let answer = format!(
                        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                    let _ = stream.shutdown().await;
                }
            });
            Server { url, requests }
        }

        async fn read_request(stream: &mut tokio::net::TcpStream) -> Option<Recorded> {
            let mut data = Vec::new();
            let mut buf = [0u8; 4096];
            let head_end = loop {
                let n = stream.read(&mut buf).await.ok()?;
                if n == 0 {
                    return None;
                }
                data.extend_from_slice(&buf[..n]);
                if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                    break at + 4;
                }
            };
            let head = String::from_utf8_lossy(&data[..head_end]).to_string();
            let length = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0usize);
            while data.len() < head_end + length {
                let n = stream.read(&mut buf).await.ok()?;
                if n == 0 {
                    break;
                }
                data.extend_from_slice(&buf[..n]);
            }
            let mut first = head.lines().next()?.split(' ');
            Some(Recorded {
                method: first.next()?.to_owned(),
                target: first.next()?.to_owned(),
                headers: head.to_ascii_lowercase(),
                body: String::from_utf8_lossy(&data[head_end..]).to_string(),
            })
        }
    }

    pub(crate) fn policy() -> CallPolicy {
        CallPolicy {
            timeout: Duration::from_secs(1),
            attempts: 3,
            backoff: Duration::from_millis(10),
        }
    }

    fn service_account_json(token_uri: &str) -> String {
        json!({
            "type": "service_account",
            "project_id": "my-project",
            "private_key_id": "0123456789abcdef",
            "private_key": TEST_KEY,
            "client_email": "sops@my-project.iam.gserviceaccount.com",
            "client_id": "123456789",
            "token_uri": token_uri,
        })
        .to_string()
    }

    fn authorized_user_json() -> String {
        json!({
            "type": "authorized_user",
            "client_id": "764086051850-6qr4p6gpi6hn506pt8ejuq83di341hur.apps.googleusercontent.com",
            "client_secret": SECRET,
            "refresh_token": "1//refresh-token-DO-NOT-LEAK",
        })
        .to_string()
    }

    /// The decoded header and claims of a JWT, after checking its RS256 signature.
    pub(crate) fn verified_parts(
        jwt: &str,
        public_key: &[u8],
        alg: &'static dyn ring::signature::VerificationAlgorithm,
    ) -> (serde_json::Value, serde_json::Value) {
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let (signed, signature) = jwt.rsplit_once('.').unwrap();
        UnparsedPublicKey::new(alg, public_key)
            .verify(
                signed.as_bytes(),
                &URL_SAFE_NO_PAD.decode(signature).unwrap(),
            )
            .expect("the signature verifies with the key's public half");
        let (header, claims) = signed.split_once('.').unwrap();
        let decode =
            |part: &str| serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap();
        (decode(header), decode(claims))
    }

    fn form(body: &str) -> std::collections::HashMap<String, String> {
        body.split('&')
            .map(|pair| {
                let (k, v) = pair.split_once('=').unwrap();
                (k.to_owned(), percent_decode(v))
            })
            .collect()
    }

    pub(crate) fn percent_decode(text: &str) -> String {
        let bytes = text.replace('+', " ").into_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' {
                out.push(
                    u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap(), 16)
                        .unwrap(),
                );
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8(out).unwrap()
    }

    async fn body_of(request: Request<Full<Bytes>>) -> String {
        use http_body_util::BodyExt;
        let bytes = request.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[test]
    fn parses_a_service_account_key_and_hides_it_in_debug() {
        let credentials = parse_credentials(
            format!("\n{}\n", service_account_json(DEFAULT_TOKEN_URI)).as_bytes(),
        )
        .unwrap();
        let Kind::ServiceAccount {
            client_email,
            private_key_id,
            token_uri,
            ..
        } = &credentials.kind
        else {
            panic!("not a service account");
        };
        assert_eq!(client_email, "sops@my-project.iam.gserviceaccount.com");
        assert_eq!(private_key_id.as_deref(), Some("0123456789abcdef"));
        assert_eq!(token_uri, DEFAULT_TOKEN_URI);
        let debug = format!("{credentials:?}");
        assert!(debug.contains("sops@my-project"), "{debug}");
        assert!(
            !debug.contains("PRIVATE KEY") && !debug.contains("MII"),
            "{debug}"
        );
    }

    #[test]
    fn parses_an_authorized_user_with_the_default_token_uri() {
        let credentials = parse_credentials(authorized_user_json().as_bytes()).unwrap();
        let Kind::AuthorizedUser {
            token_uri,
            client_secret,
            ..
        } = &credentials.kind
        else {
            panic!("not an authorized user");
        };
        assert_eq!(token_uri, DEFAULT_TOKEN_URI);
        assert_eq!(client_secret.as_str(), SECRET);
        assert!(!format!("{credentials:?}").contains(SECRET));
        assert!(!format!("{credentials:?}").contains("DO-NOT-LEAK"));
    }

    /// `parsed` is a refusal whose message says each of `says` and quotes none of `hides`
    /// (also used by the Azure tests).
    pub(crate) fn assert_refused<T, E: std::fmt::Display>(
        parsed: Result<T, E>,
        says: &[&str],
        hides: &[&str],
    ) {
        let error = match parsed {
            Ok(_) => panic!("accepted, wanted an error saying {says:?}"),
            Err(e) => e.to_string(),
        };
        for said in says {
            assert!(error.contains(said), "{error:?} does not say {said:?}");
        }
        for hidden in hides {
            assert!(!error.contains(hidden), "{error:?} quotes {hidden:?}");
        }
    }

    /// `config` is refused with an error saying each of `says` and quoting none of `hides`.
    fn refused(config: &str, says: &[&str], hides: &[&str]) {
        assert_refused(parse_credentials(config.as_bytes()), says, hides);
    }

    #[test]
    fn refuses_other_credential_types_naming_them() {
        refused(
            r#"{"type":"impersonated_service_account"}"#,
            &["'impersonated_service_account'", "not supported"],
            &[],
        );
        refused(r#"{"client_email":"a@b"}"#, &["missing 'type'"], &[]);
        refused(
            r#"{"type":"service_account","client_email":"a@b.iam.gserviceaccount.com"}"#,
            &["missing 'private_key'"],
            &[],
        );
    }

    #[test]
    fn malformed_json_errors_do_not_quote_the_secret() {
        let broken = format!(
            r#"{{"type":"authorized_user","client_secret":"{SECRET}" "refresh_token":"x"}}"#
        );
        refused(&broken, &["syntax error"], &[SECRET]);
        let bad_key = service_account_json(DEFAULT_TOKEN_URI).replace("MII", "XII");
        refused(&bad_key, &["private_key"], &["XII"]);
    }

    #[test]
    fn signs_the_service_account_assertion_with_rs256() {
        let credentials =
            parse_credentials(service_account_json(DEFAULT_TOKEN_URI).as_bytes()).unwrap();
        let Kind::ServiceAccount { key, .. } = &credentials.kind else {
            panic!()
        };
        let request = credentials_token_request(&credentials, KMS_SCOPES, 1_700_000_000).unwrap();
        assert_eq!(request.uri(), DEFAULT_TOKEN_URI);
        assert_eq!(
            request.headers()[http::header::CONTENT_TYPE],
            "application/x-www-form-urlencoded"
        );
        let body = futures::executor::block_on(body_of(request));
        let fields = form(&body);
        assert_eq!(
            fields["grant_type"],
            "urn:ietf:params:oauth:grant-type:jwt-bearer"
        );
        let (header, claims) = verified_parts(
            &fields["assertion"],
            key.public_key(),
            &RSA_PKCS1_2048_8192_SHA256,
        );
        assert_eq!(
            header,
            json!({"alg": "RS256", "typ": "JWT", "kid": "0123456789abcdef"})
        );
        assert_eq!(
            claims,
            json!({
                "iss": "sops@my-project.iam.gserviceaccount.com",
                "scope": "https://www.googleapis.com/auth/cloud-platform https://www.googleapis.com/auth/cloudkms",
                "aud": "https://oauth2.googleapis.com/token",
                "iat": 1_700_000_000u64,
                "exp": 1_700_003_600u64,
            })
        );
    }

    #[test]
    fn a_tampered_assertion_does_not_verify() {
        let credentials =
            parse_credentials(service_account_json(DEFAULT_TOKEN_URI).as_bytes()).unwrap();
        let Kind::ServiceAccount { key, .. } = &credentials.kind else {
            panic!()
        };
        let jwt = service_account_assertion("a@b", None, key, "https://t", &["s"], 1).unwrap();
        let (signed, signature) = jwt.rsplit_once('.').unwrap();
        let forged = format!("{}x.{signature}", signed);
        let result = UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, key.public_key()).verify(
            forged.as_bytes(),
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(signature)
                .unwrap(),
        );
        assert!(result.is_err());
    }

    #[test]
    fn builds_the_refresh_token_request() {
        let credentials = parse_credentials(authorized_user_json().as_bytes()).unwrap();
        let request = credentials_token_request(&credentials, KMS_SCOPES, 0).unwrap();
        let body = futures::executor::block_on(body_of(request));
        let fields = form(&body);
        assert_eq!(fields["grant_type"], "refresh_token");
        assert_eq!(fields["client_secret"], SECRET);
        assert_eq!(fields["refresh_token"], "1//refresh-token-DO-NOT-LEAK");
        assert!(fields["client_id"].ends_with(".apps.googleusercontent.com"));
    }

    #[test]
    fn builds_the_decrypt_request_of_the_rest_reference() {
        let request =
            decrypt_request(DEFAULT_KMS_ENDPOINT, RESOURCE, b"\x0a\x24ciphertext", TOKEN).unwrap();
        assert_eq!(request.method(), Method::POST);
        assert_eq!(
            request.uri(),
            "https://cloudkms.googleapis.com/v1/projects/my-project/locations/global/keyRings/flux/cryptoKeys/sops:decrypt"
        );
        assert_eq!(
            request.headers()[http::header::AUTHORIZATION],
            format!("Bearer {TOKEN}").as_str()
        );
        let body: serde_json::Value =
            serde_json::from_str(&futures::executor::block_on(body_of(request))).unwrap();
        assert_eq!(body, json!({"ciphertext": "CiRjaXBoZXJ0ZXh0"}));
    }

    #[test]
    fn reads_the_decrypt_response_of_the_rest_reference() {
        let body = br#"{"plaintext": "ZGF0YSBrZXk=", "plaintextCrc32c": "1234567", "usedPrimary": true, "protectionLevel": "SOFTWARE"}"#;
        let plaintext = parse_decrypt_response(StatusCode::OK, body).unwrap();
        assert_eq!(plaintext.as_slice(), b"data key");
    }

    #[test]
    fn reads_google_error_bodies() {
        let body = br#"{"error": {"code": 403, "message": "Permission 'cloudkms.cryptoKeyVersions.useToDecrypt' denied on resource 'projects/my-project/locations/global/keyRings/flux/cryptoKeys/sops' (or it may not exist).", "status": "PERMISSION_DENIED"}}"#;
        let Err(Failure::Permanent(message)) = parse_decrypt_response(StatusCode::FORBIDDEN, body)
        else {
            panic!("403 is permanent");
        };
        assert!(message.starts_with("status 403 Forbidden: PERMISSION_DENIED: Permission 'cloudkms.cryptoKeyVersions.useToDecrypt' denied"), "{message}");
        let busy = br#"{"error": {"code": 503, "message": "The service is currently unavailable.", "status": "UNAVAILABLE"}}"#;
        assert!(matches!(
            parse_decrypt_response(StatusCode::SERVICE_UNAVAILABLE, busy),
            Err(Failure::Transient(_))
        ));
        let Err(Failure::Permanent(message)) = oauth::parse_token_response(
            StatusCode::BAD_REQUEST,
            br#"{"error": "invalid_grant", "error_description": "Invalid JWT Signature."}"#,
        ) else {
            panic!("400 is permanent");
        };
        assert_eq!(
            message,
            "status 400 Bad Request: invalid_grant: Invalid JWT Signature."
        );
    }

    #[test]
    fn reads_the_oauth_token_response() {
        let body = br#"{"access_token": "1/8xbJqaOZXSUZbHLl5EOtu1pxz3fmmetKx9W8CV4t79M", "scope": "https://www.googleapis.com/auth/cloudkms", "token_type": "Bearer", "expires_in": 3599}"#;
        let token = oauth::parse_token_response(StatusCode::OK, body).unwrap();
        assert_eq!(
            token.access_token.as_str(),
            "1/8xbJqaOZXSUZbHLl5EOtu1pxz3fmmetKx9W8CV4t79M"
        );
        assert_eq!(token.expires_in, 3599);
        assert!(
            oauth::parse_token_response(StatusCode::OK, br#"{"token_type":"Bearer"}"#).is_err()
        );
    }

    #[test]
    fn builds_the_sts_exchange_and_reads_the_impersonation_answer() {
        let request = sts_request(
            STS_TOKEN_URL,
            "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/k",
            "k8s.jwt",
            IDENTITY_SCOPES,
        )
        .unwrap();
        assert_eq!(request.uri(), STS_TOKEN_URL);
        let fields = form(&futures::executor::block_on(body_of(request)));
        assert_eq!(
            fields["grant_type"],
            "urn:ietf:params:oauth:grant-type:token-exchange"
        );
        assert_eq!(
            fields["subject_token_type"],
            "urn:ietf:params:oauth:token-type:jwt"
        );
        assert_eq!(
            fields["requested_token_type"],
            "urn:ietf:params:oauth:token-type:access_token"
        );
        assert_eq!(fields["subject_token"], "k8s.jwt");
        assert_eq!(
            fields["scope"],
            "https://www.googleapis.com/auth/cloud-platform https://www.googleapis.com/auth/userinfo.email"
        );
        assert_eq!(
            fields["audience"],
            "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/k"
        );

        let request = impersonation_request(
            &generate_access_token_url(IAM_CREDENTIALS_URL, "sops@p.iam.gserviceaccount.com"),
            TOKEN,
            IDENTITY_SCOPES,
        )
        .unwrap();
        assert_eq!(
            request.uri(),
            "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/sops@p.iam.gserviceaccount.com:generateAccessToken"
        );
        let body: serde_json::Value =
            serde_json::from_str(&futures::executor::block_on(body_of(request))).unwrap();
        assert_eq!(body["lifetime"], "3600s");
        let answer = br#"{"accessToken": "ya29.impersonated", "expireTime": "2014-10-02T15:01:23.045123456Z"}"#;
        let token =
            parse_impersonation_response(StatusCode::OK, answer, 1_412_262_083 - 1800).unwrap();
        assert_eq!(token.access_token.as_str(), "ya29.impersonated");
        assert_eq!(token.expires_in, 1800);
    }

    #[test]
    fn gke_audiences_name_the_pool_and_cluster() {
        let cluster = GkeCluster {
            project: "p".into(),
            location: "europe-west1".into(),
            name: "c".into(),
        };
        assert_eq!(cluster.pool(), "p.svc.id.goog");
        assert_eq!(
            cluster.exchange_audience(),
            "identitynamespace:p.svc.id.goog:https://container.googleapis.com/v1/projects/p/locations/europe-west1/clusters/c"
        );
    }

    #[test]
    fn parses_rfc3339_times() {
        assert_eq!(
            oauth::parse_rfc3339("2014-10-02T15:01:23.045123456Z"),
            Some(1_412_262_083)
        );
        assert_eq!(oauth::parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            oauth::parse_rfc3339("2024-02-29T12:00:00Z"),
            Some(1_709_208_000)
        );
        assert_eq!(oauth::parse_rfc3339("2024-02-29 12:00:00"), None);
    }

    #[test]
    fn checks_resource_ids_and_endpoints() {
        assert!(check_resource_id(RESOURCE).is_ok());
        assert!(
            check_resource_id("projects/p/locations/l/keyRings/r/cryptoKeys/k/cryptoKeyVersions/1")
                .is_err()
        );
        assert!(check_resource_id("projects/p/locations/l/keyRings//cryptoKeys/k").is_err());
        assert!(check_resource_id("projects/p/locations/l/keyRings/r/cryptoKeys/k?x").is_err());
        assert_eq!(
            kms_endpoint(&Environment::from_pairs([])),
            DEFAULT_KMS_ENDPOINT
        );
        assert_eq!(
            kms_endpoint(&Environment::from_pairs([(
                "SOPS_GCP_KMS_ENDPOINT",
                "cloudkms.s3nsapis.fr:443"
            )])),
            "https://cloudkms.s3nsapis.fr:443"
        );
        assert_eq!(
            kms_endpoint(&Environment::from_pairs([(
                "SOPS_GCP_KMS_UNIVERSE_DOMAIN",
                "s3nsapis.fr"
            )])),
            "https://cloudkms.s3nsapis.fr"
        );
    }

    #[test]
    fn encodes_forms() {
        assert_eq!(
            oauth::form_encode(&[("a b", "x/y:z=1&2"), ("c", "~é")]).as_str(),
            "a+b=x%2Fy%3Az%3D1%262&c=%7E%C3%A9"
        );
    }

    fn services(server: &server::Server, with_credentials: bool) -> KeyServices {
        let credentials = AllCredentials {
            gcp: with_credentials.then(|| {
                parse_credentials(service_account_json(&format!("{}/token", server.url)).as_bytes())
                    .unwrap()
            }),
            ..Default::default()
        };
        KeyServices::new(
            tokio::runtime::Handle::current(),
            HttpClient::new().unwrap(),
            credentials,
            Environment::from_pairs([("SOPS_GCP_KMS_ENDPOINT", server.url.as_str())]),
        )
        .with_policy(policy())
    }

    fn token_answer() -> (u16, String) {
        (
            200,
            json!({"access_token": TOKEN, "token_type": "Bearer", "expires_in": 3599}).to_string(),
        )
    }

    #[tokio::test]
    async fn decrypts_with_a_token_retrying_a_busy_service_and_caching_the_token() {
        let server = server::serve(vec![
            token_answer(),
            (
                503,
                r#"{"error":{"code":503,"message":"unavailable","status":"UNAVAILABLE"}}"#
                    .to_owned(),
            ),
            (200, r#"{"plaintext":"ZGF0YSBrZXk="}"#.to_owned()),
            (200, r#"{"plaintext":"c2Vjb25k"}"#.to_owned()),
        ])
        .await;
        let services = services(&server, true);
        let enc = STANDARD.encode(b"wrapped");
        let key = decrypt(&services, RESOURCE, &enc).await.unwrap();
        assert_eq!(key.as_slice(), b"data key");
        let again = decrypt(&services, RESOURCE, &enc).await.unwrap();
        assert_eq!(again.as_slice(), b"second");
        let requests = server.requests();
        assert_eq!(
            requests.len(),
            4,
            "one token request, three decrypt requests"
        );
        assert_eq!(requests[0].target, "/token");
        assert!(form(&requests[0].body)["assertion"].split('.').count() == 3);
        for decrypt in &requests[1..] {
            assert_eq!(decrypt.method, "POST");
            assert_eq!(decrypt.target, format!("/v1/{RESOURCE}:decrypt"));
            assert!(decrypt.headers.contains(&format!(
                "authorization: bearer {}",
                TOKEN.to_ascii_lowercase()
            )));
            assert_eq!(decrypt.body, json!({"ciphertext": enc}).to_string());
        }
    }

    #[tokio::test]
    async fn reports_a_refusal_with_the_key_and_the_service_message_only() {
        let server = server::serve(vec![
            token_answer(),
            (403, r#"{"error":{"code":403,"message":"Permission denied on resource.","status":"PERMISSION_DENIED"}}"#.to_owned()),
        ])
        .await;
        let services = services(&server, true);
        let error = decrypt(&services, RESOURCE, &STANDARD.encode(b"wrapped"))
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            format!(
                "failed to decrypt sops data key with GCP KMS key '{RESOURCE}': status 403 Forbidden: PERMISSION_DENIED: Permission denied on resource."
            )
        );
        assert!(!error.contains(TOKEN) && !error.contains("PRIVATE KEY"));
        assert_eq!(server.requests().len(), 2, "a refusal is not retried");
    }

    #[tokio::test]
    async fn reports_a_token_refusal_without_secrets() {
        let server = server::serve(vec![(
            400,
            r#"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#.to_owned(),
        )])
        .await;
        let services = services(&server, true);
        let error = decrypt(&services, RESOURCE, &STANDARD.encode(b"x"))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("sops@my-project.iam.gserviceaccount.com")
                && error.contains("invalid_grant: Invalid JWT Signature."),
            "{error}"
        );
        assert!(
            !error.contains("BEGIN") && !error.contains("assertion"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn uses_the_metadata_server_without_credentials() {
        let server = server::serve(vec![
            token_answer(),
            (200, r#"{"plaintext":"YQ=="}"#.to_owned()),
        ])
        .await;
        let host = server.url.trim_start_matches("http://").to_owned();
        let services = KeyServices::new(
            tokio::runtime::Handle::current(),
            HttpClient::new().unwrap(),
            AllCredentials::default(),
            Environment::from_pairs([
                ("SOPS_GCP_KMS_ENDPOINT", server.url.as_str()),
                ("GCE_METADATA_HOST", host.as_str()),
            ]),
        )
        .with_policy(policy());
        let key = decrypt(&services, RESOURCE, &STANDARD.encode(b"x"))
            .await
            .unwrap();
        assert_eq!(key.as_slice(), b"a");
        let requests = server.requests();
        assert_eq!(requests[0].method, "GET");
        assert!(
            requests[0]
                .target
                .starts_with("/computeMetadata/v1/instance/service-accounts/default/token?scopes="),
            "{}",
            requests[0].target
        );
        assert!(requests[0].headers.contains("metadata-flavor: google"));
    }

    #[tokio::test]
    async fn refuses_bad_input_before_any_call() {
        let server = server::serve(vec![]).await;
        let services = services(&server, true);
        let error = decrypt(&services, "projects/p/cryptoKeys/k", "YQ==")
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains("no valid resource ID"), "{error}");
        let error = decrypt(&services, RESOURCE, "not base64!")
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains("not base64"), "{error}");
        assert!(server.requests().is_empty());
    }
}
