//! HashiCorp Vault (and OpenBao) transit: `decrypt` of the data key at
//! `{address}/v1/{engine_path}/decrypt/{key_name}`. The token is the decryption Secret's
//! `sops.vault-token`; else a login with the decryption ServiceAccount's token at the path
//! of its `transit-engine.auth.fluxcd.io/login-path` annotation (role from
//! `transit-engine.auth.fluxcd.io/role`) or of `--sops-vault-configmap` for the address
//! (role `NAMESPACE_NAME`); else `VAULT_TOKEN` or `~/.vault-token`, as sops reads them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::Full;
use serde::Deserialize;
use serde_json::json;
use zeroize::Zeroizing;

use super::identity::SourceFuture;
use super::{CallError, Failure, KeyServiceError, KeyServices};

/// The ServiceAccount annotation naming the login path (e.g. `auth/kubernetes/login`).
pub const LOGIN_PATH_ANNOTATION: &str = "transit-engine.auth.fluxcd.io/login-path";
/// The ServiceAccount annotation naming the role to log in as.
pub const ROLE_ANNOTATION: &str = "transit-engine.auth.fluxcd.io/role";

/// Opens `enc` (a `vault:v1:...` ciphertext) with the transit key.
pub async fn decrypt(
    services: &KeyServices,
    address: &str,
    engine_path: &str,
    key_name: &str,
    enc: &str,
) -> Result<Zeroizing<Vec<u8>>, KeyServiceError> {
    let address = address.trim_end_matches('/');
    let path = format!("{}/decrypt/{key_name}", engine_path.trim_matches('/'));
    let token = token(services, address).await?;
    let body = Bytes::from(json!({ "ciphertext": enc }).to_string());
    let answer = post(services, address, &path, Some(&token), body)
        .await
        .map_err(|source| {
            let context = format!(
                "failed to decrypt sops data key from Vault transit backend '{address}/v1/{path}'"
            );
            KeyServiceError::call(context, source)
        })?;
    parse_plaintext(&answer).map_err(|message| KeyServiceError::Response {
        context: format!("Vault transit backend '{address}/v1/{path}'"),
        message: message.to_owned(),
    })
}

/// The data key of a transit `decrypt` answer; the error says what is wrong with it.
fn parse_plaintext(body: &[u8]) -> Result<Zeroizing<Vec<u8>>, &'static str> {
    #[derive(Deserialize)]
    struct Answer {
        data: Data,
    }
    #[derive(Deserialize)]
    struct Data {
        plaintext: Zeroizing<String>,
    }
    let answer: Answer =
        serde_json::from_slice(body).map_err(|_| "the answer has no data.plaintext")?;
    STANDARD
        .decode(answer.data.plaintext.as_bytes())
        .map(Zeroizing::new)
        .map_err(|_| "the answer's plaintext is not base64")
}

/// The token for `address`, logging in once per decryption when needed.
async fn token(
    services: &KeyServices,
    address: &str,
) -> Result<Zeroizing<String>, KeyServiceError> {
    if let Some(token) = &services.credentials.vault_token {
        return Ok(token.clone());
    }
    if let Some(cached) = services.vault_tokens.lock().await.get(address) {
        return Ok(cached.clone());
    }
    if let Some(token) = kubernetes_login(services, address).await? {
        services
            .vault_tokens
            .lock()
            .await
            .insert(address.to_owned(), token.clone());
        return Ok(token);
    }
    if let Some(token) = services.environment.get("VAULT_TOKEN") {
        return Ok(Zeroizing::new(token.trim().to_owned()));
    }
    if let Some(home) = services.environment.get("HOME") {
        let file = std::path::Path::new(home).join(".vault-token");
        if let Ok(token) = tokio::fs::read_to_string(&file).await {
            let token = Zeroizing::new(token);
            if !token.trim().is_empty() {
                return Ok(Zeroizing::new(token.trim().to_owned()));
            }
        }
    }
    Err(KeyServiceError::credentials(format!(
        "no token for Vault '{address}': set the decryption Secret's sops.vault-token entry, or name a decryption service account with the {LOGIN_PATH_ANNOTATION} and {ROLE_ANNOTATION} annotations"
    )))
}

/// A login with the decryption ServiceAccount's token, when one is configured for
/// `address`: `None` when no login applies.
async fn kubernetes_login(
    services: &KeyServices,
    address: &str,
) -> Result<Option<Zeroizing<String>>, KeyServiceError> {
    let Some(identity) = &services.credentials.identity else {
        return Ok(None);
    };
    let (login_path, role) = match identity.annotation(LOGIN_PATH_ANNOTATION) {
        Some(path) => (
            path.to_owned(),
            identity
                .annotation(ROLE_ANNOTATION)
                .unwrap_or_default()
                .to_owned(),
        ),
        None => match &services.credentials.vault_config_map {
            Some(config_map) => {
                let paths = config_map.login_paths().await?;
                let path = paths.get(address).filter(|p| !p.is_empty()).ok_or_else(|| {
                    KeyServiceError::credentials(format!("no Vault login path configured for address '{address}' in the --sops-vault-configmap ConfigMap"))
                })?;
                (
                    path.clone(),
                    format!("{}_{}", identity.namespace(), identity.name()),
                )
            }
            None => return Ok(None),
        },
    };
    let jwt = identity
        .token(
            identity.audiences(&[address]),
            "decrypt_with_transit_engine",
        )
        .await?;
    let body = Bytes::from(json!({ "role": role, "jwt": jwt.as_str() }).to_string());
    let login_path = login_path.trim_matches('/');
    let answer = post(services, address, login_path, None, body)
        .await
        .map_err(|source| {
            let context = format!(
                "failed to authenticate with Vault '{address}' at login path '{login_path}' as role '{role}'"
            );
            KeyServiceError::call(context, source)
        })?;
    #[derive(Deserialize)]
    struct Answer {
        auth: Option<Auth>,
    }
    #[derive(Deserialize)]
    struct Auth {
        client_token: Zeroizing<String>,
    }
    match serde_json::from_slice::<Answer>(&answer) {
        Ok(Answer {
            auth: Some(Auth { client_token }),
        }) if !client_token.is_empty() => Ok(Some(client_token)),
        _ => Err(KeyServiceError::credentials(format!(
            "Vault '{address}' returned no token for login at '{login_path}' as role '{role}'"
        ))),
    }
}

/// The Kubernetes side of the `--sops-vault-configmap` ConfigMap, injected by the
/// controller (with its client; tests give a fake).
pub trait ConfigMapSource: Send + Sync {
    /// The data of the ConfigMap `namespace/name` (empty when it has none); an error when
    /// it cannot be read.
    fn data<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> SourceFuture<'a, BTreeMap<String, String>>;
}

/// The `--sops-vault-configmap` ConfigMap (in the controller's namespace): `config.yaml`
/// lists the trusted Vault instances and their login paths, `instances: [{address,
/// loginPath}]`.
pub struct VaultConfigMap {
    source: Arc<dyn ConfigMapSource>,
    namespace: String,
    name: String,
}

impl VaultConfigMap {
    /// The ConfigMap `namespace/name`, not read yet: read from `source` when a Vault login
    /// needs it.
    pub fn new(source: Arc<dyn ConfigMapSource>, namespace: &str, name: &str) -> Self {
        VaultConfigMap {
            source,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    /// Login paths by Vault address.
    async fn login_paths(&self) -> Result<HashMap<String, String>, KeyServiceError> {
        #[derive(Deserialize)]
        struct Config {
            #[serde(default)]
            instances: Vec<Instance>,
        }
        #[derive(Deserialize)]
        struct Instance {
            address: String,
            #[serde(rename = "loginPath", default)]
            login_path: String,
        }
        let id = format!("{}/{}", self.namespace, self.name);
        let mut data = self
            .source
            .data(&self.namespace, &self.name)
            .await
            .map_err(|e| {
                KeyServiceError::credentials_because(
                    Some(&format!("failed to get Vault ConfigMap '{id}'")),
                    e,
                )
            })?;
        let text = data.remove("config.yaml").ok_or_else(|| {
            KeyServiceError::credentials(format!(
                "Vault ConfigMap '{id}' is missing the 'config.yaml' key"
            ))
        })?;
        let config: Config = serde_saphyr::from_str(&text).map_err(|e| {
            KeyServiceError::credentials_because(
                Some(&format!(
                    "failed to parse 'config.yaml' in Vault ConfigMap '{id}'"
                )),
                e,
            )
        })?;
        Ok(config
            .instances
            .into_iter()
            .map(|i| (i.address.trim_end_matches('/').to_owned(), i.login_path))
            .collect())
    }
}

/// A POST to `{address}/v1/{path}`, with the token when there is one.
async fn post(
    services: &KeyServices,
    address: &str,
    path: &str,
    token: Option<&Zeroizing<String>>,
    body: Bytes,
) -> Result<Bytes, CallError> {
    let url = format!("{address}/v1/{path}");
    let namespace = services.environment.get("VAULT_NAMESPACE");
    let request = || {
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(&url)
            .header("content-type", "application/json");
        if let Some(token) = token {
            request = request.header("x-vault-token", token.as_str());
        }
        if let Some(namespace) = namespace {
            request = request.header("x-vault-namespace", namespace);
        }
        request
            .body(Full::new(body.clone()))
            .map_err(|_| Failure::Permanent(format!("'{url}' is not a URL")))
    };
    services
        .exchange(services.policy, request, |answer| match answer.status {
            StatusCode::OK | StatusCode::NO_CONTENT => Ok(answer.body),
            status => Err(failure(status, &answer.body)),
        })
        .await
}

/// Vault's error answer: `{"errors": ["..."]}`.
fn failure(status: StatusCode, body: &[u8]) -> Failure {
    #[derive(Deserialize)]
    struct Answer {
        #[serde(default)]
        errors: Vec<String>,
    }
    let errors = serde_json::from_slice::<Answer>(body)
        .map(|a| a.errors)
        .unwrap_or_default();
    let mut message = format!("HTTP {}", status.as_u16());
    // Vault lists nested errors over several lines ("2 errors occurred:\n\t* ..."): one
    // line reads better in a condition.
    let errors: Vec<String> = errors
        .iter()
        .map(|e| e.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    if !errors.is_empty() {
        message.push_str(": ");
        message.push_str(&errors.join("; "));
    }
    Failure::from_status(status, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plaintext_is_the_base64_data_key() {
        let key = parse_plaintext(br#"{"request_id":"x","data":{"plaintext":"AQID"}}"#).unwrap();
        assert_eq!(key.as_slice(), [1, 2, 3]);
        assert!(parse_plaintext(br#"{"data":{}}"#).is_err());
        assert!(parse_plaintext(br#"{"data":{"plaintext":"%%"}}"#).is_err());
    }

    #[test]
    fn errors_carry_vaults_words() {
        let denied = failure(
            StatusCode::FORBIDDEN,
            br#"{"errors":["permission denied"]}"#,
        );
        assert!(matches!(&denied, Failure::Permanent(m) if m == "HTTP 403: permission denied"));
        let nested = failure(
            StatusCode::FORBIDDEN,
            br#"{"errors":["2 errors occurred:\n\t* permission denied\n\t* invalid token\n\n"]}"#,
        );
        assert!(
            matches!(&nested, Failure::Permanent(m) if m == "HTTP 403: 2 errors occurred: * permission denied * invalid token"),
            "{nested:?}"
        );
        assert!(matches!(
            failure(
                StatusCode::SERVICE_UNAVAILABLE,
                br#"{"errors":["Vault is sealed"]}"#
            ),
            Failure::Transient(_)
        ));
        assert!(
            matches!(failure(StatusCode::BAD_REQUEST, b"oops"), Failure::Permanent(m) if m == "HTTP 400")
        );
    }
}
