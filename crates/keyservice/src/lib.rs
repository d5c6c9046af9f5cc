#![doc = include_str!("../README.md")]
//!
//! ## How a decryption calls them
//!
//! The decryptor (`sops`) is synchronous and runs on a blocking thread; [`KeyServices`]
//! answers it by running the calls on the tokio runtime. Each call has a deadline and is
//! retried with backoff while the service does not answer or says it is busy. Credentials
//! and data keys stay in memory; no message carries them.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod aws;
pub mod azure;
pub mod cluster;
pub mod error;
pub mod gcp;
pub mod http;
pub mod huawei;
pub mod identity;
mod oauth;
pub mod spiffe;
pub mod tls;
pub mod token_cache;
pub mod vault;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use sops::{ServiceError, ServiceKey};
use zeroize::Zeroizing;

pub use error::{CallError, CredentialsError, KeyServiceError};
pub use http::HttpClient;
pub use identity::{ServiceAccountTokenSource, ServiceAccountTokens, SourceError};
pub use oauth::{PemError, SignError};
pub use spiffe::{JwtSvidSource, ObjectReference, SpiffeObject};
pub use vault::ConfigMapSource;

/// The Flux reasons the key services' errors are reported with (the Kustomization API crate,
/// `kustomize-controller-api`, names the same reasons; its tests keep them equal).
pub mod reason {
    /// Decryption happens during the build, and Flux reports its failures as `BuildFailed`.
    pub const BUILD_FAILED: &str = "BuildFailed";
}

/// Deadline and retries of every key service call.
#[derive(Clone, Copy, Debug)]
pub struct CallPolicy {
    /// Deadline of one request.
    pub timeout: Duration,
    /// How many times a request is sent before its failure is reported.
    pub attempts: u32,
    /// The wait before the second attempt; doubled for each one after.
    pub backoff: Duration,
}

impl Default for CallPolicy {
    fn default() -> Self {
        CallPolicy {
            timeout: Duration::from_secs(10),
            attempts: 3,
            backoff: Duration::from_millis(250),
        }
    }
}

impl CallPolicy {
    /// For a link-local metadata service (cloud instance identity): it answers at once on
    /// its cloud and not at all elsewhere, so a short deadline and one retry.
    pub fn metadata(self) -> Self {
        CallPolicy {
            timeout: self.timeout.min(Duration::from_secs(2)),
            attempts: self.attempts.min(2),
            backoff: self.backoff,
        }
    }
}

/// Why one attempt at a call failed.
#[derive(Debug)]
pub enum Failure {
    /// The service did not answer, or said it is busy: worth another attempt.
    Transient(String),
    /// The service answered with a refusal, or the request cannot be made.
    Permanent(String),
}

impl From<http::HttpError> for Failure {
    fn from(error: http::HttpError) -> Self {
        if error.is_transient() {
            Failure::Transient(error.to_string())
        } else {
            Failure::Permanent(error.to_string())
        }
    }
}

impl Failure {
    /// The failure of an answer with HTTP `status`: 429 and 5xx are transient.
    pub fn from_status(status: ::http::StatusCode, message: String) -> Self {
        if status == ::http::StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            Failure::Transient(message)
        } else {
            Failure::Permanent(message)
        }
    }
}

/// How much longer than `policy.timeout` [`with_retries`] waits for one attempt: an attempt
/// that sends one request under the same deadline reports its own timeout, which names the
/// URL, instead of racing this guard for the message.
const ATTEMPT_GRACE: Duration = Duration::from_millis(100);

/// Runs `attempt` until it succeeds, fails permanently, or `policy.attempts` are spent;
/// each attempt under `policy.timeout` (plus a short grace, see [`ATTEMPT_GRACE`]).
pub async fn with_retries<T, F, Fut>(policy: CallPolicy, mut attempt: F) -> Result<T, CallError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Failure>>,
{
    let mut backoff = policy.backoff;
    let mut tries = 0;
    loop {
        tries += 1;
        let outcome = match tokio::time::timeout(policy.timeout + ATTEMPT_GRACE, attempt()).await {
            Ok(outcome) => outcome,
            Err(_) => Err(Failure::Transient(format!(
                "no answer within {:?}",
                policy.timeout
            ))),
        };
        match outcome {
            Ok(value) => return Ok(value),
            Err(Failure::Transient(message)) if tries < policy.attempts => {
                tracing::debug!(attempt = tries, error = %message, "key service call failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
            Err(Failure::Transient(message)) if policy.attempts > 1 => {
                return Err(CallError::GaveUp {
                    message,
                    attempts: tries,
                });
            }
            Err(Failure::Transient(message)) => return Err(CallError::Unavailable(message)),
            Err(Failure::Permanent(message)) => return Err(CallError::Refused(message)),
        }
    }
}

/// The process environment variables the key services read (captured once, so that tests
/// can give their own; cloned for every decryption, so shared).
#[derive(Clone, Debug, Default)]
pub struct Environment(Arc<HashMap<String, String>>);

impl Environment {
    /// The variables of this process.
    pub fn from_process() -> Self {
        Environment(Arc::new(std::env::vars().collect()))
    }

    /// From explicit pairs.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Environment(Arc::new(
            pairs
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        ))
    }

    /// A variable's value, `None` when unset or empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

/// The credentials of one Kustomization's decryption, by service. What is `None` falls
/// back to object identity (a decryption ServiceAccount) and then to the environment.
#[derive(Default)]
pub struct Credentials {
    /// `sops.aws-kms`: static AWS credentials.
    pub aws: Option<aws::StaticCredentials>,
    /// `sops.vault-token`: a Vault/OpenBao token.
    pub vault_token: Option<Zeroizing<String>>,
    /// `sops.gcp-kms`: GCP credentials JSON.
    pub gcp: Option<gcp::Credentials>,
    /// `sops.azure-kv`: Azure AD configuration.
    pub azure: Option<azure::Credentials>,
    /// The decryption ServiceAccount's tokens and annotations (object identity).
    pub identity: Option<Arc<ServiceAccountTokens>>,
    /// The `--sops-vault-configmap` ConfigMap, read when a Vault login needs it.
    pub vault_config_map: Option<vault::VaultConfigMap>,
}

/// Where the blocking decryptor's calls run.
enum Executor {
    /// A runtime the caller already has (the controller).
    Handle(tokio::runtime::Handle),
    /// A runtime of our own (the offline commands).
    Owned(tokio::runtime::Runtime),
}

/// What the credentials of a [`KeyServices`] are for: the token cache counts them under
/// Flux's operation names, and messages name the ServiceAccount by its role.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Purpose {
    /// Opening SOPS data keys (`decrypt_with_aws`, ...; the decryption ServiceAccount).
    #[default]
    Decryption,
    /// Reaching a remote cluster of `spec.kubeConfig.configMapRef` (`fetch_kubeconfig`; the
    /// ConfigMap's ServiceAccount).
    RemoteCluster,
}

impl Purpose {
    /// The token cache's operation name: `decryption`'s, or `fetch_kubeconfig`.
    pub fn operation(self, decryption: &'static str) -> &'static str {
        match self {
            Purpose::Decryption => decryption,
            Purpose::RemoteCluster => "fetch_kubeconfig",
        }
    }

    /// How messages name the ServiceAccount whose identity is used.
    pub fn account(self) -> &'static str {
        match self {
            Purpose::Decryption => "decryption service account",
            Purpose::RemoteCluster => "service account",
        }
    }
}

/// The key services of one decryption (or the credentials of one remote cluster lookup,
/// see [`cluster`]): implements [`sops::KeyService`].
pub struct KeyServices {
    executor: Executor,
    purpose: Purpose,
    http: HttpClient,
    credentials: Credentials,
    environment: Environment,
    policy: CallPolicy,
    sessions: tokio::sync::Mutex<aws::Sessions>,
    vault_tokens: tokio::sync::Mutex<HashMap<String, Zeroizing<String>>>,
    gcp_tokens: tokio::sync::Mutex<Option<gcp::AccessToken>>,
    azure_tokens: tokio::sync::Mutex<Option<azure::AccessToken>>,
    huawei_projects: tokio::sync::Mutex<huawei::Projects>,
}

impl KeyServices {
    /// Key services whose calls run on `handle`'s runtime; the decryptor must call them from
    /// a thread outside it (a blocking task).
    pub fn new(
        handle: tokio::runtime::Handle,
        http: HttpClient,
        credentials: Credentials,
        environment: Environment,
    ) -> Self {
        Self::with_executor(Executor::Handle(handle), http, credentials, environment)
    }

    /// Key services with a runtime of their own, for a caller that has none; fails when
    /// the runtime or the HTTPS client (its TLS roots) cannot be set up.
    pub fn standalone(
        credentials: Credentials,
        environment: Environment,
    ) -> Result<Self, std::io::Error> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        // The client's pool spawns onto the runtime current when it is built.
        let http = {
            let _guard = runtime.enter();
            HttpClient::new().map_err(std::io::Error::other)?
        };
        Ok(Self::with_executor(
            Executor::Owned(runtime),
            http,
            credentials,
            environment,
        ))
    }

    fn with_executor(
        executor: Executor,
        http: HttpClient,
        credentials: Credentials,
        environment: Environment,
    ) -> Self {
        KeyServices {
            executor,
            purpose: Purpose::Decryption,
            http,
            credentials,
            environment,
            policy: CallPolicy::default(),
            sessions: Default::default(),
            vault_tokens: Default::default(),
            gcp_tokens: Default::default(),
            azure_tokens: Default::default(),
            huawei_projects: Default::default(),
        }
    }

    /// Says what the credentials are for (by default, decryption).
    pub fn with_purpose(mut self, purpose: Purpose) -> Self {
        self.purpose = purpose;
        self
    }

    /// Replaces the deadline and retries of every call.
    pub fn with_policy(mut self, policy: CallPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// One call to a service: sends the request `request` builds (anew for each attempt) and
    /// reads the answer with `read`, retrying under `policy` as [`with_retries`] does.
    pub(crate) async fn exchange<T>(
        &self,
        policy: CallPolicy,
        request: impl Fn() -> Result<::http::Request<http_body_util::Full<bytes::Bytes>>, Failure>,
        read: impl Fn(http::Response) -> Result<T, Failure>,
    ) -> Result<T, CallError> {
        with_retries(policy, || async {
            let response = self.http.send(request()?, policy.timeout).await?;
            read(response)
        })
        .await
    }

    /// Opens `enc` with `key`'s service.
    pub async fn open(
        &self,
        key: &ServiceKey,
        enc: &str,
    ) -> Result<Zeroizing<Vec<u8>>, ServiceError> {
        let failed = |error: KeyServiceError| ServiceError::Service {
            service: key.service_name(),
            source: Box::new(error),
        };
        match key {
            ServiceKey::AwsKms {
                arn, role, context, ..
            } => aws::decrypt(self, arn, role, context, enc)
                .await
                .map_err(failed),
            ServiceKey::HcVault {
                address,
                engine_path,
                key_name,
            } => vault::decrypt(self, address, engine_path, key_name, enc)
                .await
                .map_err(failed),
            ServiceKey::GcpKms { resource_id } => {
                gcp::decrypt(self, resource_id, enc).await.map_err(failed)
            }
            ServiceKey::AzureKeyVault {
                vault_url,
                name,
                version,
            } => azure::decrypt(self, vault_url, name, version, enc)
                .await
                .map_err(failed),
            ServiceKey::HuaweiKms { key_id } => {
                huawei::decrypt(self, key_id, enc).await.map_err(failed)
            }
        }
    }
}

impl sops::KeyService for KeyServices {
    fn decrypt(&self, key: &ServiceKey, enc: &str) -> Result<Zeroizing<Vec<u8>>, ServiceError> {
        match &self.executor {
            Executor::Handle(handle) => handle.block_on(self.open(key, enc)),
            Executor::Owned(runtime) => runtime.block_on(self.open(key, enc)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quick() -> CallPolicy {
        CallPolicy {
            timeout: Duration::from_millis(200),
            attempts: 3,
            backoff: Duration::from_millis(10),
        }
    }

    #[tokio::test]
    async fn a_silent_service_times_out_after_every_attempt() {
        // Accepts connections and never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let http = HttpClient::new().unwrap();
        let mut attempts = 0;
        let started = std::time::Instant::now();
        let result: Result<(), CallError> = with_retries(quick(), || {
            attempts += 1;
            let request = ::http::Request::post(format!("http://{address}/v1/sops/decrypt/k"))
                .body(http_body_util::Full::new(bytes::Bytes::new()))
                .unwrap();
            let http = http.clone();
            async move {
                http.send(request, Duration::from_millis(200)).await?;
                Ok(())
            }
        })
        .await;
        let message = result.unwrap_err().to_string();
        assert_eq!(attempts, 3);
        assert!(
            message.contains(&format!(
                "no response from http://{address}/v1/sops/decrypt/k"
            )) && message.ends_with("(after 3 attempts)"),
            "{message}"
        );
        assert!(started.elapsed() >= Duration::from_millis(600));
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_that_never_ends_is_cut_by_the_guard() {
        let mut attempts = 0;
        let result: Result<(), CallError> = with_retries(quick(), || {
            attempts += 1;
            std::future::pending()
        })
        .await;
        assert_eq!(attempts, 3);
        assert_eq!(
            result.unwrap_err().to_string(),
            "no answer within 200ms (after 3 attempts)"
        );
    }

    #[tokio::test]
    async fn permanent_failures_are_not_retried() {
        let mut attempts = 0;
        let result: Result<(), CallError> = with_retries(quick(), || {
            attempts += 1;
            async { Err(Failure::Permanent("HTTP 403: permission denied".into())) }
        })
        .await;
        assert_eq!(
            result.unwrap_err(),
            CallError::Refused("HTTP 403: permission denied".into())
        );
        assert_eq!(attempts, 1);
        let mut attempts = 0;
        let result = with_retries(quick(), || {
            attempts += 1;
            let outcome = if attempts < 3 {
                Err(Failure::from_status(
                    ::http::StatusCode::SERVICE_UNAVAILABLE,
                    "HTTP 503".into(),
                ))
            } else {
                Ok(7)
            };
            async move { outcome }
        })
        .await;
        assert_eq!(result, Ok(7));
    }

    #[test]
    fn environment_ignores_empty_values() {
        let env = Environment::from_pairs([("VAULT_TOKEN", ""), ("AWS_REGION", "eu-west-1")]);
        assert_eq!(env.get("VAULT_TOKEN"), None);
        assert_eq!(env.get("AWS_REGION"), Some("eu-west-1"));
    }

    #[test]
    fn the_decryptor_gets_the_typed_error_as_the_source() {
        use std::error::Error as _;
        let services = KeyServices::standalone(Credentials::default(), Environment::default())
            .expect("a runtime and a client");
        let key = ServiceKey::HuaweiKms {
            key_id: "tr-west-1:k".into(),
        };
        let error = sops::KeyService::decrypt(&services, &key, "x").unwrap_err();
        assert!(
            error.to_string().starts_with(&format!(
                "{}: no Huawei Cloud credentials: HUAWEICLOUD_SDK_AK and HUAWEICLOUD_SDK_SK are not both set",
                key.service_name()
            )),
            "{error}"
        );
        let source = error
            .source()
            .and_then(|s| s.downcast_ref::<KeyServiceError>());
        assert!(
            matches!(source, Some(KeyServiceError::Credentials { .. })),
            "{source:?}"
        );
    }
}
