//! OAuth 2.0 and JOSE pieces shared by the GCP and Azure key services: RSA keys from PEM,
//! signed JWTs, form requests, token answers and service error bodies.

use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::Full;
use serde::Deserialize;
use zeroize::Zeroizing;

use super::Failure;

use ring::rand::SystemRandom;
use ring::signature::{RSA_PKCS1_SHA256, RSA_PSS_SHA256, RsaKeyPair};

/// Tokens are renewed this long before they expire.
const RENEW_MARGIN: Duration = Duration::from_secs(60);
/// Service messages are cut to this many characters.
const MAX_MESSAGE: usize = 512;

/// Why a PEM text holds no usable RSA private key, or is not PEM. Names the block's label
/// at most, never its content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PemError {
    /// An `ENCRYPTED PRIVATE KEY` block.
    #[error("encrypted private keys are not supported")]
    EncryptedKey,
    /// An `EC PRIVATE KEY` block.
    #[error("only RSA private keys are supported, not EC")]
    EcKey,
    /// The key block does not hold an RSA key the signer accepts.
    #[error("not a usable RSA private key: {0}")]
    UnusableKey(String),
    /// No private key block at all.
    #[error("no PEM private key found")]
    NoPrivateKey,
    /// A block's content is not base64.
    #[error("PEM block '{0}' is not valid base64")]
    NotBase64(String),
    /// An END line without its BEGIN.
    #[error("PEM block '{0}' ends without beginning")]
    EndWithoutBegin(String),
    /// A BEGIN line without its END.
    #[error("PEM block '{0}' does not end")]
    Unterminated(String),
}

/// A JWT assertion could not be made (no signature, no randomness).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignError {
    /// The signer failed.
    #[error("failed to sign the JWT assertion")]
    Signature,
    /// The system gave no random numbers for the assertion's id.
    #[error("no random numbers for the client assertion")]
    Randomness,
}

/// An RSA private key.
pub struct Rsa(RsaKeyPair);

impl Rsa {
    /// The first private key of a PEM text: PKCS#8 (`PRIVATE KEY`) or PKCS#1
    /// (`RSA PRIVATE KEY`). Encrypted and non-RSA keys are refused.
    pub fn from_pem(pem: &str) -> Result<Self, PemError> {
        for block in pem_blocks(pem)? {
            let parsed = match block.label.as_str() {
                "PRIVATE KEY" => RsaKeyPair::from_pkcs8(&block.der),
                "RSA PRIVATE KEY" => RsaKeyPair::from_der(&block.der),
                "ENCRYPTED PRIVATE KEY" => {
                    return Err(PemError::EncryptedKey);
                }
                "EC PRIVATE KEY" => {
                    return Err(PemError::EcKey);
                }
                _ => continue,
            };
            return parsed
                .map(Rsa)
                .map_err(|e| PemError::UnusableKey(e.to_string()));
        }
        Err(PemError::NoPrivateKey)
    }

    /// A PKCS#8 DER private key (as a PKCS#12 bundle holds it); non-RSA keys are refused.
    pub fn from_pkcs8(der: &[u8]) -> Result<Self, PemError> {
        RsaKeyPair::from_pkcs8(der)
            .map(Rsa)
            .map_err(|e| PemError::UnusableKey(e.to_string()))
    }

    /// The public key, DER `RSAPublicKey`.
    pub fn public_key(&self) -> &[u8] {
        self.0.public().as_ref()
    }
}

/// One PEM block.
pub struct PemBlock {
    /// `CERTIFICATE`, `PRIVATE KEY`, ...
    pub label: String,
    /// The decoded content.
    pub der: Zeroizing<Vec<u8>>,
}

/// The blocks of a PEM text, in order.
pub fn pem_blocks(text: &str) -> Result<Vec<PemBlock>, PemError> {
    let mut blocks = Vec::new();
    let mut current: Option<(String, Zeroizing<String>)> = None;
    for line in text.lines().map(str::trim) {
        if let Some(label) = line
            .strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
        {
            current = Some((label.to_owned(), Zeroizing::new(String::new())));
        } else if let Some(label) = line
            .strip_prefix("-----END ")
            .and_then(|l| l.strip_suffix("-----"))
        {
            match current.take() {
                Some((begun, body)) if begun == label => {
                    let der = STANDARD
                        .decode(body.as_bytes())
                        .map_err(|_| PemError::NotBase64(label.to_owned()))?;
                    blocks.push(PemBlock {
                        label: begun,
                        der: Zeroizing::new(der),
                    });
                }
                _ => return Err(PemError::EndWithoutBegin(label.to_owned())),
            }
        } else if let Some((_, body)) = current.as_mut()
            && !line.contains(':')
        {
            body.push_str(line);
        }
    }
    if let Some((label, _)) = current {
        return Err(PemError::Unterminated(label));
    }
    Ok(blocks)
}

/// A JWS algorithm this module signs with.
#[derive(Clone, Copy)]
pub enum Alg {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256,
    /// RSASSA-PSS with SHA-256.
    Ps256,
}

/// A compact JWS of `claims` under `header` (whose `alg` the caller sets to match).
pub fn sign_jwt(
    header: &serde_json::Value,
    claims: &serde_json::Value,
    key: &Rsa,
    alg: Alg,
) -> Result<Zeroizing<String>, SignError> {
    let encode = |v: &serde_json::Value| URL_SAFE_NO_PAD.encode(v.to_string());
    let mut jwt = Zeroizing::new(format!("{}.{}", encode(header), encode(claims)));
    let mut signature = vec![0; key.0.public().modulus_len()];
    let padding: &'static dyn ring::signature::RsaEncoding = match alg {
        Alg::Rs256 => &RSA_PKCS1_SHA256,
        Alg::Ps256 => &RSA_PSS_SHA256,
    };
    key.0
        .sign(
            padding,
            &SystemRandom::new(),
            jwt.as_bytes(),
            &mut signature,
        )
        .map_err(|_| SignError::Signature)?;
    jwt.push('.');
    jwt.push_str(&URL_SAFE_NO_PAD.encode(signature));
    Ok(jwt)
}

use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// When a token valid for `expires_in` seconds from now should be renewed.
pub fn renew_at(expires_in: u64) -> Instant {
    let valid = Duration::from_secs(expires_in);
    Instant::now() + valid.saturating_sub(RENEW_MARGIN.min(valid / 2))
}

/// An access token and when it is due for renewal, as the GCP and Azure token caches of
/// [`KeyServices`](crate::KeyServices) keep it; its Debug form hides the value.
pub struct AccessToken {
    value: Zeroizing<String>,
    renew_at: Instant,
}

impl AccessToken {
    /// The token of an answer, due for renewal shortly before it expires.
    pub fn from_response(response: TokenResponse) -> Self {
        AccessToken {
            renew_at: renew_at(response.expires_in),
            value: response.access_token,
        }
    }

    /// The bearer token.
    pub fn value(&self) -> &Zeroizing<String> {
        &self.value
    }

    /// When it is due for renewal.
    pub fn renew_at(&self) -> Instant {
        self.renew_at
    }

    /// Whether it is not yet due for renewal.
    pub fn is_fresh(&self) -> bool {
        Instant::now() < self.renew_at
    }
}

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessToken")
            .field("value", &"***")
            .field("renew_at", &self.renew_at)
            .finish()
    }
}

/// `application/x-www-form-urlencoded` pairs.
pub fn form_encode(pairs: &[(&str, &str)]) -> Zeroizing<String> {
    let mut out = Zeroizing::new(String::new());
    for (i, (name, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        encode_component(name, &mut out);
        out.push('=');
        encode_component(value, &mut out);
    }
    out
}

/// `text` percent-encoded for a form or query component.
pub fn percent_encode(text: &str) -> String {
    let mut out = String::new();
    encode_component(text, &mut out);
    out
}

fn encode_component(text: &str, out: &mut String) {
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                out.push(byte as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
}

/// A form POST to `url`.
pub fn form_request(url: &str, pairs: &[(&str, &str)]) -> Result<Request<Full<Bytes>>, Failure> {
    let body = form_encode(pairs);
    Request::builder()
        .method(Method::POST)
        .uri(url)
        .header(
            http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .header(http::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::copy_from_slice(body.as_bytes())))
        .map_err(|e| Failure::Permanent(format!("invalid token endpoint '{url}': {e}")))
}

/// A token endpoint's answer.
pub struct TokenResponse {
    /// The bearer token.
    pub access_token: Zeroizing<String>,
    /// Its validity in seconds.
    pub expires_in: u64,
}

/// Reads an OAuth 2.0 token answer: `{"access_token", "expires_in"}` (a number, or a
/// string as Azure's managed identity endpoint gives it).
pub fn parse_token_response(status: StatusCode, body: &[u8]) -> Result<TokenResponse, Failure> {
    #[derive(Deserialize)]
    struct Answer {
        #[serde(default)]
        access_token: Zeroizing<String>,
        #[serde(default)]
        expires_in: Option<serde_json::Value>,
    }
    if !status.is_success() {
        return Err(Failure::from_status(status, service_error(status, body)));
    }
    let answer: Answer = serde_json::from_slice(body).map_err(|e| {
        Failure::Permanent(format!("unreadable token answer: {}", json_error_kind(&e)))
    })?;
    if answer.access_token.is_empty() {
        return Err(Failure::Permanent(
            "the token answer has no access_token".to_owned(),
        ));
    }
    let expires_in = match answer.expires_in {
        Some(serde_json::Value::Number(n)) => n.as_u64(),
        Some(serde_json::Value::String(s)) => s.parse().ok(),
        _ => None,
    }
    .unwrap_or(300);
    Ok(TokenResponse {
        access_token: answer.access_token,
        expires_in,
    })
}

/// A service's refusal, for a message: the status and the service's own code and
/// message from a Google, Azure or OAuth 2.0 error body.
pub fn service_error(status: StatusCode, body: &[u8]) -> String {
    let detail = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| error_detail(&v))
        .unwrap_or_else(|| {
            let text = String::from_utf8_lossy(body);
            text.lines().next().unwrap_or("").trim().to_owned()
        });
    let detail = truncate(&detail);
    if detail.is_empty() {
        format!("status {status}")
    } else {
        format!("status {status}: {detail}")
    }
}

fn error_detail(value: &serde_json::Value) -> Option<String> {
    let text = |v: Option<&serde_json::Value>| match v {
        Some(serde_json::Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(serde_json::Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let error = value.get("error")?;
    if let Some(object) = error.as_object() {
        let code = text(object.get("status")).or_else(|| text(object.get("code")));
        let message = text(object.get("message"));
        return Some(join(code, message));
    }
    let code = text(Some(error));
    let message = text(value.get("error_description"));
    Some(join(code, message))
}

fn join(code: Option<String>, message: Option<String>) -> String {
    match (code, message) {
        (Some(c), Some(m)) => format!("{c}: {m}"),
        (Some(c), None) => c,
        (None, Some(m)) => m,
        (None, None) => String::new(),
    }
}

fn truncate(text: &str) -> String {
    match text.char_indices().nth(MAX_MESSAGE) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_owned(),
    }
}

/// Seconds since the epoch of an RFC 3339 UTC time (`2024-05-01T12:00:00.5Z`).
pub fn parse_rfc3339(text: &str) -> Option<u64> {
    let (date, time) = text.strip_suffix('Z')?.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (year, month, day) = (d.next()??, d.next()??, d.next()??);
    let time = time.split('.').next()?;
    let mut t = time.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (hour, minute, second) = (t.next()??, t.next()??, t.next()??);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    u64::try_from(days * 86_400 + hour * 3600 + minute * 60 + second).ok()
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The category of a JSON error, without the excerpt of the input serde_json may quote.
pub fn json_error_kind(error: &serde_json::Error) -> &'static str {
    match error.classify() {
        serde_json::error::Category::Io => "read error",
        serde_json::error::Category::Syntax => "syntax error",
        serde_json::error::Category::Data => "unexpected value",
        serde_json::error::Category::Eof => "unexpected end of input",
    }
}

/// A JSON POST to `url` with a bearer token.
pub fn bearer_json_post(
    url: &str,
    token: &str,
    body: &serde_json::Value,
) -> Result<Request<Full<Bytes>>, Failure> {
    Request::builder()
        .method(Method::POST)
        .uri(url)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::AUTHORIZATION, format!("Bearer {token}"))
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| Failure::Permanent(format!("invalid request: {e}")))
}

/// The JSON body of a successful answer as `T`; any other status is the service's error
/// (its code and message), transient or not by status.
pub fn json_answer<T: serde::de::DeserializeOwned>(
    status: StatusCode,
    body: &[u8],
) -> Result<T, Failure> {
    if !status.is_success() {
        return Err(Failure::from_status(status, service_error(status, body)));
    }
    serde_json::from_slice(body)
        .map_err(|e| Failure::Permanent(format!("unreadable answer: {}", json_error_kind(&e))))
}
