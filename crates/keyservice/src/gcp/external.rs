//! GCP `external_account` credentials (workload identity federation from outside Google
//! Cloud), as Google's auth library reads them for sops: a subject token read from a file or
//! a URL (as text, or one field of a JSON answer), exchanged at the `token_url` (Google STS)
//! for a federated token, then, with `service_account_impersonation_url`, for a service
//! account's token. Executable-sourced and AWS-sourced subject tokens are refused by name.

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::Full;
use serde::Deserialize;
use serde_json::Value;
use zeroize::Zeroizing;

use super::super::oauth::{self, AccessToken};
use super::super::{CallError, Failure, KeyServices};
use super::CredentialsError;

/// The credentials' `type`.
pub const TYPE: &str = "external_account";

/// An `external_account` credentials document.
#[derive(Clone, Debug)]
pub struct ExternalAccount {
    /// The workload identity provider's audience (`//iam.googleapis.com/projects/...`).
    audience: String,
    /// The subject token's type (`urn:ietf:params:oauth:token-type:jwt`, ...).
    subject_token_type: String,
    /// Where the token is exchanged (Google STS).
    token_url: String,
    /// Where the subject token comes from.
    source: SubjectSource,
    /// `generateAccessToken` of the service account to impersonate, if any.
    impersonation_url: Option<String>,
}

/// Where an external account's subject token is read.
#[derive(Clone, Debug, PartialEq, Eq)]
enum SubjectSource {
    /// A file (a projected ServiceAccount token, an OIDC token another agent writes).
    File { path: String, format: Format },
    /// A URL answering a GET with the token (a local metadata or token endpoint).
    Url {
        url: String,
        headers: Vec<(String, String)>,
        format: Format,
    },
}

/// How the subject token is written.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Format {
    /// The whole text.
    Text,
    /// The named field of a JSON object.
    Json { field: String },
}

/// The document's fields.
#[derive(Deserialize)]
struct Document {
    #[serde(default)]
    audience: String,
    #[serde(default)]
    subject_token_type: String,
    #[serde(default)]
    token_url: String,
    #[serde(default)]
    credential_source: Option<Value>,
    #[serde(default)]
    service_account_impersonation_url: String,
}

impl ExternalAccount {
    /// Reads an `external_account` document; the error names the field at fault.
    pub fn parse(text: &str) -> Result<Self, CredentialsError> {
        let document: Document =
            serde_json::from_str(text).map_err(|e| CredentialsError::Json {
                kind: "not an external_account document",
                line: e.line(),
                column: e.column(),
            })?;
        let missing = |field: &'static str| CredentialsError::MissingField { kind: TYPE, field };
        for (value, field) in [
            (&document.audience, "audience"),
            (&document.subject_token_type, "subject_token_type"),
            (&document.token_url, "token_url"),
        ] {
            if value.is_empty() {
                return Err(missing(field));
            }
        }
        let source = document
            .credential_source
            .ok_or_else(|| missing("credential_source"))?;
        Ok(ExternalAccount {
            audience: document.audience,
            subject_token_type: document.subject_token_type,
            token_url: document.token_url,
            source: subject_source(&source)?,
            impersonation_url: Some(document.service_account_impersonation_url)
                .filter(|url| !url.is_empty()),
        })
    }

    /// What the credentials are, for messages: never a secret.
    pub fn describe(&self) -> String {
        format!("external account of audience '{}'", self.audience)
    }

    /// A token for `scopes`: the subject token exchanged, then the service account
    /// impersonated if the document says so.
    pub async fn token(
        &self,
        services: &KeyServices,
        scopes: &[&str],
    ) -> Result<AccessToken, CallError> {
        let subject = self.subject_token(services).await?;
        let federated = services
            .exchange(
                services.policy,
                || self.exchange_request(&subject, scopes),
                |answer| oauth::parse_token_response(answer.status, &answer.body),
            )
            .await?;
        let Some(url) = &self.impersonation_url else {
            return Ok(AccessToken::from_response(federated));
        };
        let token = federated.access_token;
        let impersonated = services
            .exchange(
                services.policy,
                || super::impersonation_request(url, &token, scopes),
                |answer| {
                    super::parse_impersonation_response(
                        answer.status,
                        &answer.body,
                        oauth::unix_now(),
                    )
                },
            )
            .await?;
        Ok(AccessToken::from_response(impersonated))
    }

    /// The subject token, from its file or URL.
    async fn subject_token(&self, services: &KeyServices) -> Result<Zeroizing<String>, CallError> {
        let (text, format) = match &self.source {
            SubjectSource::File { path, format } => {
                let text = tokio::fs::read_to_string(path).await.map_err(|e| {
                    CallError::Refused(format!("cannot read the subject token file {path}: {e}"))
                })?;
                (Zeroizing::new(text), format)
            }
            SubjectSource::Url {
                url,
                headers,
                format,
            } => {
                let text = services
                    .exchange(
                        services.policy,
                        || subject_request(url, headers),
                        |answer| {
                            if answer.status.is_success() {
                                Ok(Zeroizing::new(
                                    String::from_utf8_lossy(&answer.body).into_owned(),
                                ))
                            } else {
                                Err(Failure::Permanent(format!(
                                    "the subject token URL {url} answered HTTP {}",
                                    answer.status.as_u16()
                                )))
                            }
                        },
                    )
                    .await?;
                (text, format)
            }
        };
        let token = match format {
            Format::Text => Zeroizing::new(text.trim().to_string()),
            Format::Json { field } => {
                let value: Value = serde_json::from_str(&text).map_err(|_| {
                    CallError::Refused("the subject token source is not JSON".to_string())
                })?;
                let token = value.get(field).and_then(Value::as_str).ok_or_else(|| {
                    CallError::Refused(format!(
                        "the subject token source's JSON has no string field '{field}'"
                    ))
                })?;
                Zeroizing::new(token.to_string())
            }
        };
        if token.is_empty() {
            return Err(CallError::Refused(
                "the subject token source gave an empty token".to_string(),
            ));
        }
        Ok(token)
    }

    /// The RFC 8693 exchange of `subject` at the `token_url`.
    fn exchange_request(
        &self,
        subject: &str,
        scopes: &[&str],
    ) -> Result<Request<Full<Bytes>>, Failure> {
        oauth::form_request(
            &self.token_url,
            &[
                (
                    "grant_type",
                    "urn:ietf:params:oauth:grant-type:token-exchange",
                ),
                ("audience", &self.audience),
                ("scope", &scopes.join(" ")),
                (
                    "requested_token_type",
                    "urn:ietf:params:oauth:token-type:access_token",
                ),
                ("subject_token", subject),
                ("subject_token_type", &self.subject_token_type),
            ],
        )
    }
}

/// Reads `credential_source`.
fn subject_source(source: &Value) -> Result<SubjectSource, CredentialsError> {
    let unsupported = |what: &'static str| CredentialsError::UnsupportedSource(what);
    if source.get("executable").is_some() {
        return Err(unsupported("executable"));
    }
    if source.get("environment_id").is_some() {
        return Err(unsupported("environment_id (AWS)"));
    }
    if source.get("certificate").is_some() {
        return Err(unsupported("certificate (X.509)"));
    }
    let format = match source.get("format") {
        None => Format::Text,
        Some(format) => match format.get("type").and_then(Value::as_str).unwrap_or("text") {
            "text" => Format::Text,
            "json" => Format::Json {
                field: format
                    .get("subject_token_field_name")
                    .and_then(Value::as_str)
                    .filter(|f| !f.is_empty())
                    .ok_or(CredentialsError::MissingField {
                        kind: TYPE,
                        field: "credential_source.format.subject_token_field_name",
                    })?
                    .to_string(),
            },
            _ => return Err(unsupported("format.type other than text or json")),
        },
    };
    let text = |key: &str| {
        source
            .get(key)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    if let Some(path) = text("file") {
        return Ok(SubjectSource::File {
            path: path.to_string(),
            format,
        });
    }
    if let Some(url) = text("url") {
        let headers = source
            .get("headers")
            .and_then(Value::as_object)
            .map(|headers| {
                headers
                    .iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        return Ok(SubjectSource::Url {
            url: url.to_string(),
            headers,
            format,
        });
    }
    Err(CredentialsError::MissingField {
        kind: TYPE,
        field: "credential_source.file or credential_source.url",
    })
}

/// The GET of a URL-sourced subject token.
fn subject_request(
    url: &str,
    headers: &[(String, String)],
) -> Result<Request<Full<Bytes>>, Failure> {
    let mut request = Request::builder().method(Method::GET).uri(url);
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    request
        .body(Full::new(Bytes::new()))
        .map_err(|e| Failure::Permanent(format!("invalid subject token request: {e}")))
}

#[cfg(test)]
mod tests {
    use super::super::tests::server;
    use super::*;
    use crate::{Credentials as AllCredentials, Environment, HttpClient};
    use serde_json::json;

    fn document(source: Value, impersonation: Option<&str>, token_url: &str) -> String {
        let mut document = json!({
            "type": TYPE,
            "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/q",
            "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
            "token_url": token_url,
            "credential_source": source,
        });
        if let Some(url) = impersonation {
            document["service_account_impersonation_url"] = url.into();
        }
        document.to_string()
    }

    fn services() -> KeyServices {
        KeyServices::new(
            tokio::runtime::Handle::current(),
            HttpClient::new().unwrap(),
            AllCredentials::default(),
            Environment::from_pairs([]),
        )
        .with_policy(super::super::tests::policy())
    }

    fn form(body: &str) -> std::collections::HashMap<String, String> {
        body.split('&')
            .filter_map(|pair| pair.split_once('='))
            .map(|(k, v)| (k.to_string(), super::super::tests::percent_decode(v)))
            .collect()
    }

    #[tokio::test]
    async fn a_file_token_is_exchanged_then_the_service_account_impersonated() {
        let server = server::serve(vec![
            (
                200,
                json!({"access_token": "federated", "token_type": "Bearer", "expires_in": 3600})
                    .to_string(),
            ),
            (
                200,
                json!({"accessToken": "impersonated", "expireTime": "2099-01-01T00:00:00Z"})
                    .to_string(),
            ),
        ])
        .await;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "subject-jwt\n").unwrap();
        let impersonation = format!(
            "{}/v1/projects/-/serviceAccounts/sops@p.iam.gserviceaccount.com:generateAccessToken",
            server.url
        );
        let account = ExternalAccount::parse(&document(
            json!({"file": path.display().to_string()}),
            Some(&impersonation),
            &format!("{}/v1/token", server.url),
        ))
        .unwrap();
        let token = account
            .token(&services(), &["https://www.googleapis.com/auth/cloudkms"])
            .await
            .unwrap();
        assert_eq!(token.value().as_str(), "impersonated");
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        let exchange = form(&requests[0].body);
        assert_eq!(requests[0].target, "/v1/token");
        assert_eq!(exchange["subject_token"], "subject-jwt");
        assert_eq!(
            exchange["subject_token_type"],
            "urn:ietf:params:oauth:token-type:jwt"
        );
        assert!(exchange["audience"].starts_with("//iam.googleapis.com/projects/1/"));
        assert!(requests[1].target.ends_with(":generateAccessToken"));
        assert!(
            requests[1]
                .headers
                .contains("authorization: bearer federated")
        );
    }

    #[tokio::test]
    async fn a_url_token_is_read_from_its_json_field_with_the_headers_given() {
        let server = server::serve(vec![
            (200, json!({"id_token": "from-url"}).to_string()),
            (
                200,
                json!({"access_token": "federated", "token_type": "Bearer", "expires_in": 3600})
                    .to_string(),
            ),
        ])
        .await;
        let account = ExternalAccount::parse(&document(
            json!({
                "url": format!("{}/token", server.url),
                "headers": {"Metadata-Flavor": "Google"},
                "format": {"type": "json", "subject_token_field_name": "id_token"},
            }),
            None,
            &format!("{}/v1/token", server.url),
        ))
        .unwrap();
        let token = account.token(&services(), &["s"]).await.unwrap();
        assert_eq!(token.value().as_str(), "federated");
        let requests = server.requests();
        assert_eq!(requests[0].method, "GET");
        assert!(requests[0].headers.contains("metadata-flavor: google"));
        assert_eq!(form(&requests[1].body)["subject_token"], "from-url");
    }

    #[test]
    fn sources_this_controller_does_not_read_are_refused_by_name() {
        let refused = |source: Value| {
            ExternalAccount::parse(&document(
                source,
                None,
                "https://sts.googleapis.com/v1/token",
            ))
            .unwrap_err()
            .to_string()
        };
        assert!(refused(json!({"executable": {"command": "/bin/token"}})).contains("executable"));
        assert!(refused(json!({"environment_id": "aws1"})).contains("environment_id (AWS)"));
        assert!(refused(json!({})).contains("credential_source.file or credential_source.url"));
        assert!(
            refused(json!({"file": "/t", "format": {"type": "json"}}))
                .contains("subject_token_field_name")
        );
        let no_audience = json!({"type": TYPE, "subject_token_type": "t", "token_url": "u",
            "credential_source": {"file": "/t"}})
        .to_string();
        assert!(
            ExternalAccount::parse(&no_audience)
                .unwrap_err()
                .to_string()
                .contains("missing 'audience'")
        );
    }
}
