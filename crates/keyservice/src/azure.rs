//! Azure Key Vault: `decrypt` (RSA-OAEP-256) of the data key over the Key Vault REST API,
//! with the credentials Flux uses: the decryption Secret's `sops.azure-kv` entry (a client
//! secret, a client certificate, or a user-assigned managed identity), else the
//! decryption ServiceAccount (workload identity: its Kubernetes token as the client
//! assertion of the `azure.workload.identity/client-id` application), else the
//! controller's environment (`AZURE_CLIENT_SECRET` or `AZURE_CLIENT_CERTIFICATE_PATH`,
//! then `AZURE_FEDERATED_TOKEN_FILE`, then the managed identity endpoint).
//!
//! Tokens are asked for the Key Vault resource of the vault URL's domain (for
//! `x.vault.azure.net`, `https://vault.azure.net/.default`), so a key URL that points
//! elsewhere never receives a token for Key Vault.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::Full;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use zeroize::Zeroizing;

pub mod aks;

use super::identity::ServiceAccountTokens;
use super::oauth::{self, Alg, Rsa, TokenResponse};
use super::{CallError, Environment, Failure, KeyServiceError, KeyServices};

/// The annotation naming the application (client) ID of a decryption ServiceAccount.
pub const CLIENT_ID_ANNOTATION: &str = "azure.workload.identity/client-id";
/// The annotation naming the tenant ID of a decryption ServiceAccount.
pub const TENANT_ID_ANNOTATION: &str = "azure.workload.identity/tenant-id";
/// The audience of ServiceAccount tokens exchanged with Microsoft Entra ID.
pub const DEFAULT_AUDIENCE: &str = "api://AzureADTokenExchange";

/// The Key Vault API version of the azkeys SDK sops v3.13.2 builds with.
const API_VERSION: &str = "2025-07-01";
const PUBLIC_AUTHORITY_HOST: &str = "https://login.microsoftonline.com/";
const DEFAULT_IMDS_HOST: &str = "http://169.254.169.254";
const DEFAULT_SCOPE: &str = "https://vault.azure.net/.default";
/// The Key Vault and Managed HSM domains of Azure's clouds: their resource is the domain.
const KEY_VAULT_DOMAINS: &[&str] = &[
    "vault.azure.net",
    "vault.azure.cn",
    "vault.usgovcloudapi.net",
    "vault.microsoftazure.de",
    "managedhsm.azure.net",
    "managedhsm.azure.cn",
    "managedhsm.usgovcloudapi.net",
];
/// How long a signed client assertion is valid (MSAL's).
const ASSERTION_LIFETIME: u64 = 600;

/// The decryption Secret's `sops.azure-kv` entry, resolved as Flux's
/// `TokenCredentialFromAADConfig` does.
pub struct Credentials {
    kind: Kind,
    /// `authorityHost`, ending with `/`.
    authority_host: String,
}

enum Kind {
    ClientSecret {
        tenant_id: String,
        client_id: String,
        secret: Zeroizing<String>,
    },
    ClientCertificate {
        tenant_id: String,
        client_id: String,
        certificate: Box<ClientCertificate>,
    },
    /// A user-assigned managed identity (`clientId` alone).
    ManagedIdentity { client_id: String },
}

/// A client certificate: its RSA key, the SHA-256 thumbprint of its certificate and the
/// chain (leaf first) sent with `clientCertificateSendChain`.
struct ClientCertificate {
    key: Rsa,
    thumbprint: Vec<u8>,
    chain: Vec<String>,
    send_chain: bool,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("Credentials");
        match &self.kind {
            Kind::ClientSecret {
                tenant_id,
                client_id,
                ..
            } => out
                .field("tenant_id", tenant_id)
                .field("client_id", client_id)
                .field("client_secret", &"***"),
            Kind::ClientCertificate {
                tenant_id,
                client_id,
                certificate,
            } => out
                .field("tenant_id", tenant_id)
                .field("client_id", client_id)
                .field("client_certificate", &"***")
                .field("send_chain", &certificate.send_chain),
            Kind::ManagedIdentity { client_id } => out.field("managed_identity", client_id),
        };
        out.field("authority_host", &self.authority_host).finish()
    }
}

impl Credentials {
    fn describe(&self) -> String {
        match &self.kind {
            Kind::ClientSecret { client_id, .. } => format!("client secret of '{client_id}'"),
            Kind::ClientCertificate { client_id, .. } => {
                format!("client certificate of '{client_id}'")
            }
            Kind::ManagedIdentity { client_id } => format!("managed identity '{client_id}'"),
        }
    }
}

/// Why a `sops.azure-kv` entry (or the `AZURE_CLIENT_CERTIFICATE_PATH` file) cannot be
/// used. Names the field at fault, never its value (a tenant ID excepted: it is no secret
/// and says which is wrong).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    /// UTF-16 text (a byte order mark) that does not decode.
    #[error("failed to decode Azure authentication file bytes: invalid UTF-16")]
    NotUtf16,
    /// Neither UTF-16 nor UTF-8 text.
    #[error("failed to decode Azure authentication file bytes: not UTF-8 text")]
    NotUtf8,
    /// Valid JSON or YAML, but not a mapping.
    #[error("failed to unmarshal Azure authentication file: not a mapping")]
    NotMapping,
    /// Neither JSON nor YAML.
    #[error("failed to unmarshal Azure authentication file: not valid JSON or YAML")]
    NotJsonOrYaml,
    /// A field has the wrong type.
    #[error("failed to unmarshal Azure authentication file: '{field}' must be a {expected}")]
    FieldType {
        /// The field's name.
        field: String,
        /// `string` or `boolean`.
        expected: &'static str,
    },
    /// `tenantId` and `clientId` without a secret or certificate.
    #[error(
        "invalid data: requires 'clientSecret' or 'clientCertificate' when both 'tenantId' and 'clientId' are set"
    )]
    NoSecretOrCertificate,
    /// No usable combination of fields.
    #[error(
        "invalid data: requires a 'clientId' field, a combination of 'tenantId', 'clientId' and 'clientSecret', or 'tenantId', 'clientId' and 'clientCertificate'"
    )]
    NoClient,
    /// A tenant ID that is neither a GUID nor a domain name.
    #[error("invalid tenant ID '{0}'")]
    Tenant(String),
    /// The client certificate is not usable.
    #[error("invalid clientCertificate: {0}")]
    Certificate(#[from] CertificateError),
}

impl CredentialsError {
    /// The Flux reason of a reconcile that stops on this error.
    pub fn reason(&self) -> &'static str {
        crate::reason::BUILD_FAILED
    }
}

/// Why a client certificate with its key (PEM text or a PKCS#12 bundle) is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertificateError {
    /// Neither PEM text nor DER PKCS#12 that can be read.
    #[error("neither PEM text nor a PKCS#12 bundle this controller can read")]
    Unreadable,
    /// The PKCS#12 bundle's integrity check failed: the password is not its password.
    #[error(
        "the PKCS#12 bundle's integrity check failed: {}",
        if *has_password { "the certificate password is wrong" } else { "it needs a password and none is set" }
    )]
    Pkcs12Password {
        /// Whether a password was given.
        has_password: bool,
    },
    /// The PKCS#12 bundle is protected by algorithms that cannot be read here.
    #[error(
        "the PKCS#12 bundle uses an encryption or integrity algorithm that is not supported (supported: PBES2 with AES, and the legacy 3DES and RC2 schemes with SHA-1)"
    )]
    Pkcs12Algorithm,
    /// The PKCS#12 bundle holds no private key with its certificate.
    #[error("the PKCS#12 bundle holds no private key with its certificate")]
    Pkcs12NoKey,
    /// The key is encrypted.
    #[error(
        "the private key is encrypted{}; encrypted keys are not supported: store the key unencrypted in the Secret",
        if *has_password { "" } else { " and no clientCertificatePassword is set" }
    )]
    EncryptedKey {
        /// Whether a password was given (which would not help).
        has_password: bool,
    },
    /// The key or the PEM text is not usable.
    #[error(transparent)]
    Pem(#[from] oauth::PemError),
    /// No certificate holds the key's public key.
    #[error("no certificate matches the private key")]
    NoMatchingCertificate,
}

/// Why the `AZURE_CLIENT_CERTIFICATE_PATH` file of the environment is not usable.
#[derive(Debug, thiserror::Error)]
pub enum CertificateFileError {
    /// It cannot be read.
    #[error("failed to read AZURE_CLIENT_CERTIFICATE_PATH '{path}': {source}")]
    Read {
        /// The path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// It holds no usable certificate and key.
    #[error("AZURE_CLIENT_CERTIFICATE_PATH '{path}': invalid clientCertificate: {source}")]
    Invalid {
        /// The path.
        path: String,
        /// Why.
        source: CertificateError,
    },
}

/// Why a Key Vault key's address is not one this service calls.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyUrlError {
    /// The vault URL does not parse.
    #[error("invalid vault URL '{0}'")]
    InvalidUrl(String),
    /// The vault URL is not HTTPS (plain HTTP is allowed on loopback only).
    #[error("vault URL '{0}' is not an https:// URL")]
    NotHttps(String),
    /// The key's name or version is not a plain identifier.
    #[error("invalid key name '{name}' or version '{version}'")]
    KeyName {
        /// The key's name.
        name: String,
        /// The key's version.
        version: String,
    },
}

/// Parses a `sops.azure-kv` entry: JSON or YAML (UTF-8, or UTF-16 with a byte order mark)
/// with `tenantId`, `clientId`, `clientSecret`, `clientCertificate` (PEM certificate and
/// RSA key), `clientCertificatePassword`, `clientCertificateSendChain`, `authorityHost`,
/// or the `az` service principal fields `tenant`, `appId`, `password`. Field names match
/// case-insensitively, as Go's JSON decoding does.
pub fn parse_credentials(data: &[u8]) -> Result<Credentials, CredentialsError> {
    let text = decode_text(data)?;
    let fields = parse_fields(&text)?;
    let get = |name: &str| string_field(&fields, name);
    let authority_host = get("authorityHost")?
        .map(|h| with_slash(&h))
        .unwrap_or_else(|| PUBLIC_AUTHORITY_HOST.to_owned());
    let (tenant_id, client_id) = (get("tenantId")?, get("clientId")?);
    let kind = match (tenant_id, client_id) {
        (Some(tenant_id), Some(client_id)) => {
            if let Some(secret) = get("clientSecret")? {
                Kind::ClientSecret {
                    tenant_id,
                    client_id,
                    secret: Zeroizing::new(secret),
                }
            } else if let Some(certificate) = get("clientCertificate")?.map(Zeroizing::new) {
                let send_chain = bool_field(&fields, "clientCertificateSendChain")?;
                let password = get("clientCertificatePassword")?.map(Zeroizing::new);
                let certificate = parse_certificate(
                    certificate.as_bytes(),
                    password.as_deref().map(String::as_str),
                    send_chain,
                )?;
                Kind::ClientCertificate {
                    tenant_id,
                    client_id,
                    certificate: Box::new(certificate),
                }
            } else {
                return Err(CredentialsError::NoSecretOrCertificate);
            }
        }
        (_, client_id) => match (get("tenant")?, get("appId")?, get("password")?, client_id) {
            (Some(tenant_id), Some(client_id), Some(secret), _) => Kind::ClientSecret {
                tenant_id,
                client_id,
                secret: Zeroizing::new(secret),
            },
            (.., Some(client_id)) => Kind::ManagedIdentity { client_id },
            _ => return Err(CredentialsError::NoClient),
        },
    };
    if let Kind::ClientSecret { tenant_id, .. } | Kind::ClientCertificate { tenant_id, .. } = &kind
    {
        check_tenant(tenant_id)?;
    }
    Ok(Credentials {
        kind,
        authority_host,
    })
}

/// The entry's text: UTF-8 (a byte order mark skipped), or UTF-16 with a byte order mark.
fn decode_text(data: &[u8]) -> Result<Zeroizing<String>, CredentialsError> {
    let utf16 = |rest: &[u8], big: bool| -> Result<Zeroizing<String>, CredentialsError> {
        let units: Zeroizing<Vec<u16>> = Zeroizing::new(
            rest.chunks_exact(2)
                .map(|c| {
                    if big {
                        u16::from_be_bytes([c[0], c[1]])
                    } else {
                        u16::from_le_bytes([c[0], c[1]])
                    }
                })
                .collect(),
        );
        String::from_utf16(&units)
            .map(Zeroizing::new)
            .map_err(|_| CredentialsError::NotUtf16)
    };
    match data {
        [0xFF, 0xFE, rest @ ..] => utf16(rest, false),
        [0xFE, 0xFF, rest @ ..] => utf16(rest, true),
        [0xEF, 0xBB, 0xBF, rest @ ..] | rest => std::str::from_utf8(rest)
            .map(|s| Zeroizing::new(s.to_owned()))
            .map_err(|_| CredentialsError::NotUtf8),
    }
}

/// The entry's top-level mapping (JSON is YAML).
fn parse_fields(text: &str) -> Result<Map<String, Value>, CredentialsError> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_saphyr::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(Value::Null) => Ok(Map::new()),
        Ok(_) => Err(CredentialsError::NotMapping),
        Err(_) => Err(CredentialsError::NotJsonOrYaml),
    }
}

/// A field by name: the exact key, else one equal ignoring case.
fn field<'a>(fields: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    fields.get(name).or_else(|| {
        fields
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    })
}

fn string_field(
    fields: &Map<String, Value>,
    name: &str,
) -> Result<Option<String>, CredentialsError> {
    match field(fields, name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok((!s.is_empty()).then(|| s.clone())),
        Some(_) => Err(CredentialsError::FieldType {
            field: name.to_owned(),
            expected: "string",
        }),
    }
}

fn bool_field(fields: &Map<String, Value>, name: &str) -> Result<bool, CredentialsError> {
    match field(fields, name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(CredentialsError::FieldType {
            field: name.to_owned(),
            expected: "boolean",
        }),
    }
}

fn with_slash(host: &str) -> String {
    if host.ends_with('/') {
        host.to_owned()
    } else {
        format!("{host}/")
    }
}

/// A tenant ID is a GUID or a domain name: nothing that changes the token URL's path.
fn check_tenant(tenant_id: &str) -> Result<(), CredentialsError> {
    if tenant_id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
    {
        Ok(())
    } else {
        Err(CredentialsError::Tenant(tenant_id.to_owned()))
    }
}

/// A client certificate with its RSA key, from PEM text (an unencrypted key) or a PKCS#12
/// bundle opened with `password` (none: the empty one), as `azidentity.ParseCertificates`
/// reads either.
fn parse_certificate(
    data: &[u8],
    password: Option<&str>,
    send_chain: bool,
) -> Result<ClientCertificate, CertificateError> {
    let pem = std::str::from_utf8(data)
        .ok()
        .filter(|text| text.contains("-----BEGIN"));
    let (key, certificates) = match pem {
        Some(pem) => from_pem(pem, password.is_some())?,
        None => from_pkcs12(data, password)?,
    };
    // The leaf is the certificate of the key: the one holding its public key (as MSAL).
    let leaf = certificates
        .iter()
        .position(|der| contains(der, key.public_key()))
        .ok_or(CertificateError::NoMatchingCertificate)?;
    let mut chain = vec![STANDARD.encode(&certificates[leaf])];
    chain.extend(
        certificates
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != leaf)
            .map(|(_, der)| STANDARD.encode(der)),
    );
    let thumbprint = ring::digest::digest(&ring::digest::SHA256, &certificates[leaf])
        .as_ref()
        .to_vec();
    Ok(ClientCertificate {
        key,
        thumbprint,
        chain,
        send_chain,
    })
}

/// The key and the DER certificates of PEM text.
fn from_pem(pem: &str, has_password: bool) -> Result<(Rsa, Vec<Vec<u8>>), CertificateError> {
    if pem.contains("ENCRYPTED") {
        return Err(CertificateError::EncryptedKey { has_password });
    }
    let key = Rsa::from_pem(pem)?;
    let certificates = oauth::pem_blocks(pem)?
        .into_iter()
        .filter(|b| b.label == "CERTIFICATE")
        .map(|b| b.der.to_vec())
        .collect();
    Ok((key, certificates))
}

/// The key and the DER certificates of a PKCS#12 bundle. Its integrity check (the MAC) is
/// verified with the password before anything is decrypted.
fn from_pkcs12(
    der: &[u8],
    password: Option<&str>,
) -> Result<(Rsa, Vec<Vec<u8>>), CertificateError> {
    use p12_keystore::error::Error;
    use p12_keystore::{KeyStore, KeyStoreEntry};
    let store = KeyStore::from_pkcs12(der, password.unwrap_or("")).map_err(|e| match e {
        Error::MacError(_) | Error::UnpadError => CertificateError::Pkcs12Password {
            has_password: password.is_some(),
        },
        Error::UnsupportedEncryptionScheme | Error::UnsupportedMacAlgorithm => {
            CertificateError::Pkcs12Algorithm
        }
        _ => CertificateError::Unreadable,
    })?;
    let (_, key_chain) = store
        .private_key_chain()
        .ok_or(CertificateError::Pkcs12NoKey)?;
    let key = Rsa::from_pkcs8(key_chain.key())?;
    let mut certificates: Vec<Vec<u8>> = key_chain
        .chain()
        .iter()
        .map(|c| c.as_der().to_vec())
        .collect();
    for (_, entry) in store.entries() {
        if let KeyStoreEntry::Certificate(c) = entry
            && !certificates.iter().any(|known| known == c.as_der())
        {
            certificates.push(c.as_der().to_vec());
        }
    }
    Ok((key, certificates))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// An access token for one Key Vault resource, cached in [`KeyServices`] until shortly
/// before it expires.
#[derive(Debug)]
pub struct AccessToken {
    token: oauth::AccessToken,
    scope: String,
}

/// Opens a data key: `enc` is the unpadded base64url of the wrapped key, as sops writes it.
pub async fn decrypt(
    services: &KeyServices,
    vault_url: &str,
    name: &str,
    version: &str,
    enc: &str,
) -> Result<Zeroizing<Vec<u8>>, KeyServiceError> {
    let key_url = format!("{vault_url}/keys/{name}/{version}");
    let context =
        || format!("failed to decrypt sops data key with Azure Key Vault key '{key_url}'");
    let invalid =
        |reason: KeyUrlError| KeyServiceError::invalid_key_because(Some(&context()), reason);
    let url = decrypt_url(vault_url, name, version).map_err(invalid)?;
    let scope = scope_for(vault_url).map_err(invalid)?;
    let wrapped = URL_SAFE_NO_PAD.decode(enc.trim()).map_err(|e| {
        KeyServiceError::invalid_key_because(
            Some("failed to base64 decode Azure Key Vault encrypted key"),
            e,
        )
    })?;
    let token = access_token(services, &scope).await?;
    services
        .exchange(
            services.policy,
            || decrypt_request(&url, &wrapped, &token),
            |answer| parse_decrypt_response(answer.status, &answer.body),
        )
        .await
        .map_err(|source| KeyServiceError::call(context(), source))
}

/// `{vault}/keys/{name}[/{version}]/decrypt?api-version=...`; the vault must be HTTPS
/// (plain HTTP only on loopback, for tests), and the name and version plain identifiers.
fn decrypt_url(vault_url: &str, name: &str, version: &str) -> Result<String, KeyUrlError> {
    let vault: http::Uri = vault_url
        .parse()
        .map_err(|_| KeyUrlError::InvalidUrl(vault_url.to_owned()))?;
    let host = vault.host().unwrap_or("");
    let loopback = matches!(host, "127.0.0.1" | "localhost" | "[::1]");
    match vault.scheme_str() {
        Some("https") => {}
        Some("http") if loopback => {}
        _ => return Err(KeyUrlError::NotHttps(vault_url.to_owned())),
    }
    let plain = |s: &str| s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if name.is_empty() || !plain(name) || !plain(version) {
        return Err(KeyUrlError::KeyName {
            name: name.to_owned(),
            version: version.to_owned(),
        });
    }
    let base = vault_url.trim_end_matches('/');
    let version = if version.is_empty() {
        String::new()
    } else {
        format!("/{version}")
    };
    Ok(format!(
        "{base}/keys/{name}{version}/decrypt?api-version={API_VERSION}"
    ))
}

/// The token scope of a vault: its Key Vault domain's resource for Azure's clouds, else
/// the parent domain of its host (a token for nothing else).
fn scope_for(vault_url: &str) -> Result<String, KeyUrlError> {
    let uri: http::Uri = vault_url
        .parse()
        .map_err(|_| KeyUrlError::InvalidUrl(vault_url.to_owned()))?;
    let host = uri.host().unwrap_or("").to_ascii_lowercase();
    if let Some(domain) = KEY_VAULT_DOMAINS
        .iter()
        .find(|d| host.ends_with(&format!(".{d}")))
    {
        return Ok(format!("https://{domain}/.default"));
    }
    if matches!(host.as_str(), "127.0.0.1" | "localhost" | "[::1]") {
        return Ok(DEFAULT_SCOPE.to_owned());
    }
    match host.split_once('.') {
        Some((_, parent)) if parent.contains('.') => Ok(format!("https://{parent}/.default")),
        _ => Ok(format!("https://{host}/.default")),
    }
}

/// The Key Vault `decrypt` request with RSA-OAEP-256.
fn decrypt_request(
    url: &str,
    wrapped: &[u8],
    token: &str,
) -> Result<Request<Full<Bytes>>, Failure> {
    let body = json!({ "alg": "RSA-OAEP-256", "value": URL_SAFE_NO_PAD.encode(wrapped) });
    oauth::bearer_json_post(url, token, &body)
}

/// Reads a `decrypt` answer: `{"kid", "value": base64url}`.
fn parse_decrypt_response(status: StatusCode, body: &[u8]) -> Result<Zeroizing<Vec<u8>>, Failure> {
    #[derive(Deserialize)]
    struct Answer {
        #[serde(default)]
        value: Zeroizing<String>,
    }
    let answer: Answer = oauth::json_answer(status, body)?;
    URL_SAFE_NO_PAD
        .decode(answer.value.trim_end_matches('='))
        .map(Zeroizing::new)
        .map_err(|_| Failure::Permanent("the answer's value is not base64url".to_owned()))
}

/// A valid token for `scope`: the cached one, else a new one.
async fn access_token(
    services: &KeyServices,
    scope: &str,
) -> Result<Zeroizing<String>, KeyServiceError> {
    let mut cached = services.azure_tokens.lock().await;
    if let Some(token) = cached
        .as_ref()
        .filter(|t| t.scope == scope && t.token.is_fresh())
    {
        return Ok(token.token.value().clone());
    }
    let response = new_token(services, scope).await?;
    let value = response.access_token.clone();
    *cached = Some(AccessToken {
        token: oauth::AccessToken::from_response(response),
        scope: scope.to_owned(),
    });
    Ok(value)
}

/// How a token is got.
enum Grant<'a> {
    /// Client credentials: a secret, a certificate, or a ServiceAccount token as assertion.
    Client {
        authority_host: String,
        tenant_id: &'a str,
        client_id: &'a str,
        proof: Proof<'a>,
    },
    /// The managed identity endpoint (IMDS), for a user-assigned identity if given.
    ManagedIdentity { client_id: Option<&'a str> },
}

enum Proof<'a> {
    Secret(&'a str),
    Certificate(&'a ClientCertificate),
    Assertion(Zeroizing<String>),
}

/// A new token: from the Secret's credentials, else the decryption ServiceAccount's
/// workload identity, else the controller's environment.
async fn new_token(services: &KeyServices, scope: &str) -> Result<TokenResponse, KeyServiceError> {
    if let Some(credentials) = &services.credentials.azure {
        return request_token(services, secret_grant(credentials), scope)
            .await
            .map_err(|source| {
                KeyServiceError::call(
                    format!(
                        "failed to get an access token with the {} (sops.azure-kv)",
                        credentials.describe()
                    ),
                    source,
                )
            });
    }
    if let Some(identity) = &services.credentials.identity {
        let grant = identity_grant(services, identity).await?;
        return request_token(services, grant, scope)
            .await
            .map_err(|source| KeyServiceError::call(identity.token_failure_context(), source));
    }
    environment_token(services, scope).await
}

fn secret_grant(credentials: &Credentials) -> Grant<'_> {
    let client = |tenant_id, client_id, proof| Grant::Client {
        authority_host: credentials.authority_host.clone(),
        tenant_id,
        client_id,
        proof,
    };
    match &credentials.kind {
        Kind::ClientSecret {
            tenant_id,
            client_id,
            secret,
        } => client(tenant_id, client_id, Proof::Secret(secret)),
        Kind::ClientCertificate {
            tenant_id,
            client_id,
            certificate,
        } => client(tenant_id, client_id, Proof::Certificate(certificate)),
        Kind::ManagedIdentity { client_id } => Grant::ManagedIdentity {
            client_id: Some(client_id),
        },
    }
}

/// Workload identity of the decryption ServiceAccount, as fluxcd/pkg/auth/azure does it.
async fn identity_grant<'a>(
    services: &KeyServices,
    identity: &'a Arc<ServiceAccountTokens>,
) -> Result<Grant<'a>, KeyServiceError> {
    let account = format!("'{}/{}'", identity.namespace(), identity.name());
    let annotation = |key: &str, what: &str| {
        identity.annotation(key).ok_or_else(|| {
            KeyServiceError::credentials(format!(
                "azure {what} is not set in the annotation {key} of {} {account}",
                services.purpose.account()
            ))
        })
    };
    let tenant_id = annotation(TENANT_ID_ANNOTATION, "tenant ID")?;
    let client_id = annotation(CLIENT_ID_ANNOTATION, "client ID")?;
    check_tenant(tenant_id).map_err(|e| KeyServiceError::credentials_because(None, e))?;
    let token = identity
        .token(
            identity.audiences(&[DEFAULT_AUDIENCE]),
            services.purpose.operation("decrypt_with_azure"),
        )
        .await?;
    Ok(Grant::Client {
        authority_host: environment_authority(&services.environment),
        tenant_id,
        client_id,
        proof: Proof::Assertion(token),
    })
}

/// `AZURE_AUTHORITY_HOST`, else the public cloud's.
fn environment_authority(environment: &Environment) -> String {
    environment
        .get("AZURE_AUTHORITY_HOST")
        .map(with_slash)
        .unwrap_or_else(|| PUBLIC_AUTHORITY_HOST.to_owned())
}

/// The controller's credentials, in the order of Flux's default Azure credential:
/// environment (secret, certificate), workload identity, managed identity.
async fn environment_token(
    services: &KeyServices,
    scope: &str,
) -> Result<TokenResponse, KeyServiceError> {
    let env = &services.environment;
    let authority_host = environment_authority(env);
    let (tenant, client) = (env.get("AZURE_TENANT_ID"), env.get("AZURE_CLIENT_ID"));
    if let (Some(tenant_id), Some(client_id)) = (tenant, client) {
        check_tenant(tenant_id).map_err(|e| KeyServiceError::credentials_because(None, e))?;
        let client = |proof| Grant::Client {
            authority_host: authority_host.clone(),
            tenant_id,
            client_id,
            proof,
        };
        let failed = |via: &str, source: CallError| KeyServiceError::Call {
            context: format!("failed to get an access token with {via} of '{client_id}'"),
            source,
        };
        if let Some(secret) = env.get("AZURE_CLIENT_SECRET") {
            return request_token(services, client(Proof::Secret(secret)), scope)
                .await
                .map_err(|e| failed("AZURE_CLIENT_SECRET", e));
        }
        if let Some(path) = env.get("AZURE_CLIENT_CERTIFICATE_PATH") {
            let certificate = read_certificate(env, path)
                .await
                .map_err(|e| KeyServiceError::credentials_because(None, e))?;
            return request_token(services, client(Proof::Certificate(&certificate)), scope)
                .await
                .map_err(|e| failed("AZURE_CLIENT_CERTIFICATE_PATH", e));
        }
        if let (Some(file), Some(_)) = (
            env.get("AZURE_FEDERATED_TOKEN_FILE"),
            env.get("AZURE_AUTHORITY_HOST"),
        ) {
            let token = tokio::fs::read_to_string(file).await.map_err(|e| {
                KeyServiceError::credentials_because(
                    Some(&format!(
                        "failed to read AZURE_FEDERATED_TOKEN_FILE '{file}'"
                    )),
                    e,
                )
            })?;
            let assertion = Zeroizing::new(token.trim().to_owned());
            return request_token(services, client(Proof::Assertion(assertion)), scope)
                .await
                .map_err(|e| failed("workload identity (AZURE_FEDERATED_TOKEN_FILE)", e));
        }
    }
    request_token(
        services,
        Grant::ManagedIdentity { client_id: client },
        scope,
    )
    .await
    .map_err(|source| {
        KeyServiceError::call(
            "failed to get an access token with managed identity",
            source,
        )
    })
}

async fn read_certificate(
    env: &Environment,
    path: &str,
) -> Result<ClientCertificate, CertificateFileError> {
    let data = Zeroizing::new(tokio::fs::read(path).await.map_err(|source| {
        CertificateFileError::Read {
            path: path.to_owned(),
            source,
        }
    })?);
    let send_chain = matches!(
        env.get("AZURE_CLIENT_SEND_CERTIFICATE_CHAIN"),
        Some("1" | "true" | "True" | "TRUE")
    );
    let password = env.get("AZURE_CLIENT_CERTIFICATE_PASSWORD");
    parse_certificate(&data, password, send_chain).map_err(|source| CertificateFileError::Invalid {
        path: path.to_owned(),
        source,
    })
}

/// Sends a grant's token request, with retries.
async fn request_token(
    services: &KeyServices,
    grant: Grant<'_>,
    scope: &str,
) -> Result<TokenResponse, CallError> {
    let imds = services
        .environment
        .get("AZURE_POD_IDENTITY_AUTHORITY_HOST")
        .unwrap_or(DEFAULT_IMDS_HOST)
        .trim_end_matches('/')
        .to_owned();
    let policy = match grant {
        Grant::ManagedIdentity { .. } => services.policy.metadata(),
        Grant::Client { .. } => services.policy,
    };
    let request = || match &grant {
        Grant::Client {
            authority_host,
            tenant_id,
            client_id,
            proof,
        } => client_token_request(
            authority_host,
            tenant_id,
            client_id,
            proof,
            scope,
            oauth::unix_now(),
        ),
        Grant::ManagedIdentity { client_id } => managed_identity_request(&imds, *client_id, scope),
    };
    services
        .exchange(policy, request, |answer| {
            oauth::parse_token_response(answer.status, &answer.body)
        })
        .await
}

/// The Microsoft identity platform's token endpoint of a tenant.
fn token_url(authority_host: &str, tenant_id: &str) -> String {
    format!("{authority_host}{tenant_id}/oauth2/v2.0/token")
}

/// A client credentials token request (v2.0 endpoint).
fn client_token_request(
    authority_host: &str,
    tenant_id: &str,
    client_id: &str,
    proof: &Proof<'_>,
    scope: &str,
    now: u64,
) -> Result<Request<Full<Bytes>>, Failure> {
    let url = token_url(authority_host, tenant_id);
    let mut form = vec![
        ("client_id", client_id),
        ("scope", scope),
        ("grant_type", "client_credentials"),
    ];
    let assertion;
    match proof {
        Proof::Secret(secret) => form.push(("client_secret", secret)),
        Proof::Certificate(certificate) => {
            assertion = client_assertion(certificate, client_id, &url, now)
                .map_err(|e| Failure::Permanent(e.to_string()))?;
            form.push(("client_assertion_type", JWT_BEARER));
            form.push(("client_assertion", &assertion));
        }
        Proof::Assertion(token) => {
            form.push(("client_assertion_type", JWT_BEARER));
            form.push(("client_assertion", token));
        }
    }
    oauth::form_request(&url, &form)
}

const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// The certificate's signed client assertion, as MSAL makes it: PS256, the SHA-256
/// thumbprint in `x5t#S256`, the chain in `x5c` when asked.
fn client_assertion(
    certificate: &ClientCertificate,
    client_id: &str,
    token_url: &str,
    now: u64,
) -> Result<Zeroizing<String>, oauth::SignError> {
    let mut header = json!({
        "alg": "PS256",
        "typ": "JWT",
        "x5t#S256": STANDARD.encode(&certificate.thumbprint),
    });
    if certificate.send_chain {
        header["x5c"] = json!(certificate.chain);
    }
    let claims = json!({
        "aud": token_url,
        "exp": now + ASSERTION_LIFETIME,
        "iss": client_id,
        "jti": random_id()?,
        "nbf": now,
        "sub": client_id,
    });
    oauth::sign_jwt(&header, &claims, &certificate.key, Alg::Ps256)
}

/// A random UUID (version 4) for `jti`.
fn random_id() -> Result<String, oauth::SignError> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| oauth::SignError::Randomness)?;
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    ))
}

/// The Azure Instance Metadata Service's managed identity token request.
fn managed_identity_request(
    imds: &str,
    client_id: Option<&str>,
    scope: &str,
) -> Result<Request<Full<Bytes>>, Failure> {
    let resource = scope.trim_end_matches("/.default");
    let mut url = format!(
        "{imds}/metadata/identity/oauth2/token?api-version=2018-02-01&resource={}",
        oauth::percent_encode(resource)
    );
    if let Some(id) = client_id {
        url.push_str(&format!("&client_id={}", oauth::percent_encode(id)));
    }
    Request::builder()
        .method(Method::GET)
        .uri(url)
        .header("Metadata", "true")
        .body(Full::new(Bytes::new()))
        .map_err(|e| Failure::Permanent(format!("invalid managed identity request: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gcp::tests::{
        TEST_KEY, assert_refused, percent_decode, policy, server, verified_parts,
    };
    use crate::{Credentials as AllCredentials, HttpClient};
    use ring::signature::RSA_PSS_2048_8192_SHA256;

    const TEST_CERT: &str = include_str!("testdata/rsa-test-cert.pem");
    const TEST_KEY_PKCS1: &str = include_str!("testdata/rsa-test-key-pkcs1.pem");
    /// `openssl x509 -outform der | openssl dgst -sha256 -binary | base64` of the test cert.
    const TEST_CERT_SHA256: &str = "givuNtngl5faWi7k/T7m3NXopJM/DJEsxOA0MqCjTh8=";
    const TOKEN: &str = "eyJ0eXAiOiJKV1Qi.azure-access-token-DO-NOT-LEAK";
    const SECRET: &str = "qWgdYAmab0YSkuL1qKv5bPX-DO-NOT-LEAK";
    const TENANT: &str = "72f988bf-86f1-41af-91ab-2d7cd011db47";
    const CLIENT: &str = "535fb089-9ff3-47b6-9bfb-4f1264799865";

    fn form(body: &str) -> std::collections::HashMap<String, String> {
        body.split('&')
            .map(|pair| {
                let (k, v) = pair.split_once('=').unwrap();
                (k.to_owned(), percent_decode(v))
            })
            .collect()
    }

    async fn body_of(request: Request<Full<Bytes>>) -> String {
        use http_body_util::BodyExt;
        let bytes = request.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    fn certificate_config(key: &str, send_chain: bool) -> String {
        json!({
            "tenantId": TENANT,
            "clientId": CLIENT,
            "clientCertificate": format!("{TEST_CERT}{key}"),
            "clientCertificateSendChain": send_chain,
        })
        .to_string()
    }

    #[test]
    fn parses_a_client_secret_from_json_or_yaml() {
        let json =
            format!(r#"{{"tenantId":"{TENANT}","clientId":"{CLIENT}","clientSecret":"{SECRET}"}}"#);
        let yaml = format!(
            "tenantId: {TENANT}\nclientID: {CLIENT}\nclientsecret: {SECRET}\nauthorityHost: https://login.chinacloudapi.cn\n"
        );
        for (text, authority) in [
            (json, PUBLIC_AUTHORITY_HOST),
            (yaml, "https://login.chinacloudapi.cn/"),
        ] {
            let credentials = parse_credentials(text.as_bytes()).unwrap();
            let Kind::ClientSecret {
                tenant_id,
                client_id,
                secret,
            } = &credentials.kind
            else {
                panic!("not a client secret");
            };
            assert_eq!(
                (tenant_id.as_str(), client_id.as_str(), secret.as_str()),
                (TENANT, CLIENT, SECRET)
            );
            assert_eq!(credentials.authority_host, authority);
            assert!(!format!("{credentials:?}").contains(SECRET));
        }
    }

    #[test]
    fn follows_flux_precedence() {
        let az = format!(r#"{{"appId":"{CLIENT}","tenant":"{TENANT}","password":"{SECRET}"}}"#);
        assert!(matches!(
            parse_credentials(az.as_bytes()).unwrap().kind,
            Kind::ClientSecret { .. }
        ));
        let managed = format!(r#"{{"clientId":"{CLIENT}"}}"#);
        assert!(matches!(
            parse_credentials(managed.as_bytes()).unwrap().kind,
            Kind::ManagedIdentity { .. }
        ));
        let both = format!(
            r#"{{"tenantId":"{TENANT}","clientId":"{CLIENT}","clientSecret":"{SECRET}","clientCertificate":"junk"}}"#
        );
        assert!(matches!(
            parse_credentials(both.as_bytes()).unwrap().kind,
            Kind::ClientSecret { .. }
        ));
        let neither = format!(r#"{{"tenantId":"{TENANT}","clientId":"{CLIENT}"}}"#);
        let refused =
            |config: &[u8], says: &str| assert_refused(parse_credentials(config), &[says], &[]);
        refused(
            neither.as_bytes(),
            "requires 'clientSecret' or 'clientCertificate'",
        );
        refused(b"", "requires a 'clientId' field");
        refused(b"- a\n- b\n", "not a mapping");
    }

    #[test]
    fn decodes_utf16_with_a_byte_order_mark() {
        let text =
            format!(r#"{{"tenantId":"{TENANT}","clientId":"{CLIENT}","clientSecret":"{SECRET}"}}"#);
        let mut le = vec![0xFF, 0xFE];
        le.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
        let mut be = vec![0xFE, 0xFF];
        be.extend(text.encode_utf16().flat_map(u16::to_be_bytes));
        let mut utf8 = vec![0xEF, 0xBB, 0xBF];
        utf8.extend(text.as_bytes());
        for data in [le, be, utf8] {
            assert!(matches!(
                parse_credentials(&data).unwrap().kind,
                Kind::ClientSecret { .. }
            ));
        }
    }

    #[test]
    fn parses_client_certificates_with_pkcs8_or_pkcs1_keys() {
        for key in [TEST_KEY, TEST_KEY_PKCS1] {
            let credentials = parse_credentials(certificate_config(key, true).as_bytes()).unwrap();
            let Kind::ClientCertificate { certificate, .. } = &credentials.kind else {
                panic!("not a certificate");
            };
            assert_eq!(STANDARD.encode(&certificate.thumbprint), TEST_CERT_SHA256);
            assert_eq!(certificate.chain.len(), 1);
            assert!(certificate.send_chain);
            assert!(!format!("{credentials:?}").contains("PRIVATE"));
        }
    }

    const AES_P12: &[u8] = include_bytes!("testdata/rsa-test-aes.p12");
    const LEGACY_P12: &[u8] = include_bytes!("testdata/rsa-test-legacy.p12");
    const NO_PASSWORD_P12: &[u8] = include_bytes!("testdata/rsa-test-nopass.p12");

    /// Bundles made by `openssl pkcs12 -export` from the test key and certificate: OpenSSL 3's
    /// default (PBES2, AES-256, SHA-256 MAC), its `-legacy` one (3DES key, RC2-40
    /// certificates, SHA-1 MAC: what Go's pkcs12 package reads), and `-legacy` without a
    /// password.
    #[test]
    fn opens_pkcs12_bundles_with_their_password() {
        for (bundle, password) in [
            (AES_P12, Some("s3cret")),
            (LEGACY_P12, Some("s3cret")),
            (NO_PASSWORD_P12, None),
        ] {
            let certificate = parse_certificate(bundle, password, false).unwrap();
            assert_eq!(STANDARD.encode(&certificate.thumbprint), TEST_CERT_SHA256);
            assert_eq!(certificate.chain.len(), 1);
        }
    }

    #[tokio::test]
    async fn the_environment_certificate_file_may_be_pkcs12() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("client.p12");
        std::fs::write(&path, LEGACY_P12).unwrap();
        let path = path.to_str().unwrap();
        let env = Environment::from_pairs([("AZURE_CLIENT_CERTIFICATE_PASSWORD", "s3cret")]);
        let certificate = read_certificate(&env, path).await.unwrap();
        assert_eq!(STANDARD.encode(&certificate.thumbprint), TEST_CERT_SHA256);
        let error = read_certificate(&Environment::from_pairs([]), path)
            .await
            .err()
            .expect("refused without a password")
            .to_string();
        assert_eq!(
            error,
            format!(
                "AZURE_CLIENT_CERTIFICATE_PATH '{path}': invalid clientCertificate: the PKCS#12 bundle's integrity check failed: it needs a password and none is set"
            )
        );
    }

    #[test]
    fn refuses_pkcs12_bundles_it_cannot_open_naming_why() {
        let refused = |bundle: &[u8], password: Option<&str>| {
            parse_certificate(bundle, password, false)
                .err()
                .expect("refused")
                .to_string()
        };
        for bundle in [AES_P12, LEGACY_P12] {
            assert_eq!(
                refused(bundle, Some("hunter2-DO-NOT-LEAK")),
                "the PKCS#12 bundle's integrity check failed: the certificate password is wrong"
            );
        }
        assert_eq!(
            refused(&LEGACY_P12[..LEGACY_P12.len() / 2], Some("s3cret")),
            "neither PEM text nor a PKCS#12 bundle this controller can read"
        );
    }

    #[test]
    fn refuses_unusable_certificates_clearly() {
        let encrypted = certificate_config(
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n",
            false,
        );
        let refused = |config: &str, says: &str, hides: &[&str]| {
            assert_refused(parse_credentials(config.as_bytes()), &[says], hides)
        };
        refused(&encrypted, "encrypted keys are not supported", &[]);
        let pfx = format!(
            r#"{{"tenantId":"{TENANT}","clientId":"{CLIENT}","clientCertificate":"MIIKZQIBAzCCCi8GCSqGSIb3DQEHAaCC"}}"#
        );
        refused(&pfx, "neither PEM text nor a PKCS#12 bundle", &[]);
        let no_cert =
            json!({"tenantId": TENANT, "clientId": CLIENT, "clientCertificate": TEST_KEY})
                .to_string();
        refused(&no_cert, "no certificate matches the private key", &["MII"]);
    }

    #[test]
    fn signs_the_client_assertion_as_msal_does() {
        let credentials = parse_credentials(certificate_config(TEST_KEY, true).as_bytes()).unwrap();
        let Kind::ClientCertificate { certificate, .. } = &credentials.kind else {
            panic!()
        };
        let url = token_url(PUBLIC_AUTHORITY_HOST, TENANT);
        let request = client_token_request(
            PUBLIC_AUTHORITY_HOST,
            TENANT,
            CLIENT,
            &Proof::Certificate(certificate),
            DEFAULT_SCOPE,
            1_700_000_000,
        )
        .unwrap();
        assert_eq!(
            request.uri(),
            format!("https://login.microsoftonline.com/{TENANT}/oauth2/v2.0/token").as_str()
        );
        let fields = form(&futures::executor::block_on(body_of(request)));
        assert_eq!(fields["grant_type"], "client_credentials");
        assert_eq!(fields["scope"], "https://vault.azure.net/.default");
        assert_eq!(
            fields["client_assertion_type"],
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        );
        assert!(!fields.contains_key("client_secret"));
        let (header, claims) = verified_parts(
            &fields["client_assertion"],
            certificate.key.public_key(),
            &RSA_PSS_2048_8192_SHA256,
        );
        assert_eq!(header["alg"], "PS256");
        assert_eq!(header["typ"], "JWT");
        assert_eq!(header["x5t#S256"], TEST_CERT_SHA256);
        let leaf: String = TEST_CERT
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .collect();
        assert_eq!(header["x5c"], json!([leaf]));
        assert_eq!(claims["aud"], url.as_str());
        assert_eq!(claims["iss"], CLIENT);
        assert_eq!(claims["sub"], CLIENT);
        assert_eq!(claims["nbf"], 1_700_000_000u64);
        assert_eq!(claims["exp"], 1_700_000_600u64);
        assert_eq!(claims["jti"].as_str().unwrap().len(), 36);
    }

    #[test]
    fn builds_the_client_secret_request_of_the_identity_platform_reference() {
        let request = client_token_request(
            "https://login.microsoftonline.com/",
            TENANT,
            CLIENT,
            &Proof::Secret(SECRET),
            DEFAULT_SCOPE,
            0,
        )
        .unwrap();
        let body = futures::executor::block_on(body_of(request));
        assert_eq!(
            body,
            format!(
                "client_id={CLIENT}&scope=https%3A%2F%2Fvault.azure.net%2F.default&grant_type=client_credentials&client_secret={SECRET}"
            )
        );
        let request = client_token_request(
            PUBLIC_AUTHORITY_HOST,
            TENANT,
            CLIENT,
            &Proof::Assertion(Zeroizing::new("k8s.sa.jwt".into())),
            DEFAULT_SCOPE,
            0,
        )
        .unwrap();
        let fields = form(&futures::executor::block_on(body_of(request)));
        assert_eq!(fields["client_assertion"], "k8s.sa.jwt");
    }

    #[test]
    fn reads_identity_platform_answers() {
        let body = br#"{"token_type":"Bearer","expires_in":3599,"ext_expires_in":3599,"access_token":"eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiIsIng1dCI6Ik1uQ19WWmNBVGZNNXBP..."}"#;
        let token = oauth::parse_token_response(StatusCode::OK, body).unwrap();
        assert_eq!(token.expires_in, 3599);
        let imds = br#"{"access_token":"eyJ0eXAi...","refresh_token":"","expires_in":"3599","expires_on":"1506484173","not_before":"1506480273","resource":"https://vault.azure.net","token_type":"Bearer"}"#;
        assert_eq!(
            oauth::parse_token_response(StatusCode::OK, imds)
                .unwrap()
                .expires_in,
            3599
        );
        let refusal = br#"{"error":"invalid_client","error_description":"AADSTS7000215: Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID.","error_codes":[7000215],"timestamp":"2024-01-01 00:00:00Z"}"#;
        let Err(Failure::Permanent(message)) =
            oauth::parse_token_response(StatusCode::UNAUTHORIZED, refusal)
        else {
            panic!()
        };
        assert!(message.starts_with("status 401 Unauthorized: invalid_client: AADSTS7000215: Invalid client secret provided."), "{message}");
    }

    #[test]
    fn builds_the_decrypt_request_of_the_key_vault_reference() {
        let url = decrypt_url(
            "https://myvault.vault.azure.net/",
            "sdktestkey",
            "0698c2156c1a4e1da5b6bab6f6422fd6",
        )
        .unwrap();
        assert_eq!(
            url,
            "https://myvault.vault.azure.net/keys/sdktestkey/0698c2156c1a4e1da5b6bab6f6422fd6/decrypt?api-version=2025-07-01"
        );
        assert_eq!(
            decrypt_url("https://v.vault.azure.net", "k", "").unwrap(),
            "https://v.vault.azure.net/keys/k/decrypt?api-version=2025-07-01"
        );
        let request = decrypt_request(&url, &[0xfb, 0xff, 0x01], TOKEN).unwrap();
        assert_eq!(request.method(), Method::POST);
        assert_eq!(
            request.headers()[http::header::AUTHORIZATION],
            format!("Bearer {TOKEN}").as_str()
        );
        let body: Value =
            serde_json::from_str(&futures::executor::block_on(body_of(request))).unwrap();
        assert_eq!(body, json!({"alg": "RSA-OAEP-256", "value": "-_8B"}));
    }

    #[test]
    fn refuses_key_urls_that_could_leak_a_token() {
        assert!(decrypt_url("http://myvault.vault.azure.net", "k", "v").is_err());
        assert!(decrypt_url("https://v.vault.azure.net", "k/../../x", "v").is_err());
        assert!(decrypt_url("https://v.vault.azure.net", "k", "v?x=1").is_err());
        assert!(decrypt_url("http://127.0.0.1:8080", "k", "v").is_ok());
        for (vault_url, scope) in [
            (
                "https://x.vault.azure.net",
                "https://vault.azure.net/.default",
            ),
            (
                "https://x.vault.azure.cn/",
                "https://vault.azure.cn/.default",
            ),
            (
                "https://x.managedhsm.azure.net",
                "https://managedhsm.azure.net/.default",
            ),
            (
                "https://vault.azure.net.evil.example.com",
                "https://azure.net.evil.example.com/.default",
            ),
            ("https://evil.com", "https://evil.com/.default"),
        ] {
            assert_eq!(scope_for(vault_url).unwrap(), scope, "{vault_url}");
        }
    }

    #[test]
    fn reads_the_decrypt_answer_and_key_vault_errors() {
        let body = br#"{"kid":"https://myvault.vault.azure.net/keys/sdktestkey/0698c2156c1a4e1da5b6bab6f6422fd6","value":"ZGF0YSBrZXk"}"#;
        assert_eq!(
            parse_decrypt_response(StatusCode::OK, body)
                .unwrap()
                .as_slice(),
            b"data key"
        );
        let forbidden = br#"{"error":{"code":"Forbidden","message":"The user, group or application 'appid=...' does not have keys decrypt permission on key vault 'myvault'.","innererror":{"code":"ForbiddenByPolicy"}}}"#;
        let Err(Failure::Permanent(message)) =
            parse_decrypt_response(StatusCode::FORBIDDEN, forbidden)
        else {
            panic!()
        };
        assert!(
            message.starts_with("status 403 Forbidden: Forbidden: The user, group or application"),
            "{message}"
        );
        assert!(matches!(
            parse_decrypt_response(StatusCode::TOO_MANY_REQUESTS, b"{}"),
            Err(Failure::Transient(_))
        ));
    }

    #[test]
    fn builds_the_managed_identity_request() {
        let request =
            managed_identity_request(DEFAULT_IMDS_HOST, Some(CLIENT), DEFAULT_SCOPE).unwrap();
        assert_eq!(
            request.uri(),
            format!("http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fvault.azure.net&client_id={CLIENT}").as_str()
        );
        assert_eq!(request.headers()["Metadata"], "true");
    }

    fn services(credentials: AllCredentials, env: &[(&str, &str)]) -> KeyServices {
        KeyServices::new(
            tokio::runtime::Handle::current(),
            HttpClient::new().unwrap(),
            credentials,
            Environment::from_pairs(env.iter().copied()),
        )
        .with_policy(policy())
    }

    fn secret_credentials(authority: &str) -> AllCredentials {
        let config = json!({"tenantId": TENANT, "clientId": CLIENT, "clientSecret": SECRET, "authorityHost": authority});
        AllCredentials {
            azure: Some(parse_credentials(config.to_string().as_bytes()).unwrap()),
            ..Default::default()
        }
    }

    /// Why decrypting with the client secret against `server` failed.
    async fn secret_decrypt_error(server: &server::Server) -> String {
        let services = services(secret_credentials(&server.url), &[]);
        decrypt(&services, &server.url, "sops", "v1", "d3JhcHBlZA")
            .await
            .unwrap_err()
            .to_string()
    }

    fn token_answer() -> (u16, String) {
        (
            200,
            json!({"token_type": "Bearer", "expires_in": 3599, "access_token": TOKEN}).to_string(),
        )
    }

    #[tokio::test]
    async fn decrypts_retrying_a_busy_vault_and_caching_the_token() {
        let server = server::serve(vec![
            token_answer(),
            (
                503,
                r#"{"error":{"code":"ServiceUnavailable","message":"busy"}}"#.to_owned(),
            ),
            (200, r#"{"kid":"k","value":"ZGF0YSBrZXk"}"#.to_owned()),
            (200, r#"{"kid":"k","value":"c2Vjb25k"}"#.to_owned()),
        ])
        .await;
        let services = services(secret_credentials(&server.url), &[]);
        let enc = URL_SAFE_NO_PAD.encode(b"wrapped key");
        let key = decrypt(&services, &server.url, "sops", "v1", &enc)
            .await
            .unwrap();
        assert_eq!(key.as_slice(), b"data key");
        let again = decrypt(&services, &server.url, "sops", "v1", &enc)
            .await
            .unwrap();
        assert_eq!(again.as_slice(), b"second");
        let requests = server.requests();
        assert_eq!(
            requests.len(),
            4,
            "one token request, three decrypt requests"
        );
        assert_eq!(requests[0].target, format!("/{TENANT}/oauth2/v2.0/token"));
        assert_eq!(form(&requests[0].body)["client_secret"], SECRET);
        for request in &requests[1..] {
            assert_eq!(
                request.target,
                "/keys/sops/v1/decrypt?api-version=2025-07-01"
            );
            assert!(request.headers.contains(&format!(
                "authorization: bearer {}",
                TOKEN.to_ascii_lowercase()
            )));
            assert_eq!(
                request.body,
                json!({"alg": "RSA-OAEP-256", "value": enc}).to_string()
            );
        }
    }

    #[tokio::test]
    async fn reports_a_refusal_with_the_key_url_and_no_secret() {
        let server = server::serve(vec![
            token_answer(),
            (403, r#"{"error":{"code":"Forbidden","message":"Caller is not authorized to perform action on resource."}}"#.to_owned()),
        ])
        .await;
        let error = secret_decrypt_error(&server).await;
        assert_eq!(
            error,
            format!(
                "failed to decrypt sops data key with Azure Key Vault key '{}/keys/sops/v1': status 403 Forbidden: Forbidden: Caller is not authorized to perform action on resource.",
                server.url
            )
        );
        assert!(!error.contains(TOKEN) && !error.contains(SECRET));
        assert_eq!(server.requests().len(), 2);
    }

    #[tokio::test]
    async fn reports_a_token_refusal_without_the_secret() {
        let server = server::serve(vec![(
            401,
            r#"{"error":"invalid_client","error_description":"AADSTS7000215: Invalid client secret provided."}"#.to_owned(),
        )])
        .await;
        let error = secret_decrypt_error(&server).await;
        assert!(
            error.contains(CLIENT) && error.contains("AADSTS7000215"),
            "{error}"
        );
        assert!(!error.contains(SECRET), "{error}");
    }

    #[tokio::test]
    async fn uses_the_federated_token_file_of_the_environment() {
        let server =
            server::serve(vec![token_answer(), (200, r#"{"value":"YQ"}"#.to_owned())]).await;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "federated.k8s.jwt\n").unwrap();
        let file = file.to_str().unwrap().to_owned();
        let services = services(
            AllCredentials::default(),
            &[
                ("AZURE_TENANT_ID", TENANT),
                ("AZURE_CLIENT_ID", CLIENT),
                ("AZURE_FEDERATED_TOKEN_FILE", &file),
                ("AZURE_AUTHORITY_HOST", &server.url),
            ],
        );
        let key = decrypt(&services, &server.url, "sops", "", "d3JhcHBlZA")
            .await
            .unwrap();
        assert_eq!(key.as_slice(), b"a");
        let requests = server.requests();
        let fields = form(&requests[0].body);
        assert_eq!(fields["client_assertion"], "federated.k8s.jwt");
        assert_eq!(fields["client_id"], CLIENT);
        assert_eq!(
            requests[1].target,
            "/keys/sops/decrypt?api-version=2025-07-01"
        );
    }

    #[tokio::test]
    async fn falls_back_to_the_managed_identity_endpoint() {
        let imds = json!({"access_token": TOKEN, "expires_in": "3599", "token_type": "Bearer"})
            .to_string();
        let server = server::serve(vec![(200, imds), (200, r#"{"value":"YQ"}"#.to_owned())]).await;
        let services = services(
            AllCredentials::default(),
            &[("AZURE_POD_IDENTITY_AUTHORITY_HOST", &server.url)],
        );
        decrypt(&services, &server.url, "sops", "v1", "d3JhcHBlZA")
            .await
            .unwrap();
        let requests = server.requests();
        assert_eq!(requests[0].method, "GET");
        assert_eq!(
            requests[0].target,
            "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fvault.azure.net"
        );
        assert!(requests[0].headers.contains("metadata: true"));
    }
}
