//! The errors of the key services, as types: what failed (the key's address, the
//! credentials, a call, the answer), which key it was about, and the Flux reason the
//! reconcile reports it with. No message carries a credential, a token or a data key.
//!
//! The decryptor (`sops`) receives these as [`sops::ServiceError::Failed`] text, so a
//! message is exactly what Flux's condition shows; the variants are for the code that
//! handles them before that.

use crate::reason;

/// Why a call, retried under [`super::CallPolicy`], failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The service refused the request, or it could not be made: not retried.
    #[error("{0}")]
    Refused(String),
    /// The service did not answer, or said it is busy, on every attempt.
    #[error("{message} (after {attempts} attempts)")]
    GaveUp {
        /// The last attempt's failure.
        message: String,
        /// How many attempts were made.
        attempts: u32,
    },
    /// The service did not answer, or said it is busy, and the policy allows one attempt.
    #[error("{0}")]
    Unavailable(String),
}

impl CallError {
    /// Whether another call later may succeed (the service was silent or busy).
    pub fn is_transient(&self) -> bool {
        !matches!(self, CallError::Refused(_))
    }
}

/// The typed cause an error keeps as its source.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Why a key service did not open a data key.
#[derive(Debug, thiserror::Error)]
pub enum KeyServiceError {
    /// The key's address (ARN, URL, resource id) or its encrypted data key is not one the
    /// service accepts; the message names the key.
    #[error("{message}")]
    InvalidKey {
        /// What is wrong, of which key (with the cause's text, when there is a cause).
        message: String,
        /// The typed cause, when there is one.
        #[source]
        source: Option<Cause>,
    },
    /// No credentials for the key, or they could not be obtained (Secret entry,
    /// ServiceAccount, environment, token exchange); the message never holds them.
    #[error("{message}")]
    Credentials {
        /// What is missing or failed (with the cause's text, when there is a cause).
        message: String,
        /// The typed cause, when there is one.
        #[source]
        source: Option<Cause>,
    },
    /// A call to the service failed; `context` says which call and for which key.
    #[error("{context}: {source}")]
    Call {
        /// What was asked, of which key.
        context: String,
        /// How the call failed.
        #[source]
        source: CallError,
    },
    /// The service answered, but not with what was asked.
    #[error("{context}: {message}")]
    Response {
        /// Which answer, of which key.
        context: String,
        /// What is wrong with it.
        message: String,
    },
    /// The key belongs to a service this controller does not call.
    #[error("{0}")]
    Unsupported(String),
}

impl KeyServiceError {
    /// The Flux reason of a reconcile that stops on this error: decryption happens during
    /// the build, and Flux reports its failures as `BuildFailed`.
    pub fn reason(&self) -> &'static str {
        reason::BUILD_FAILED
    }

    /// The same failure, said to have happened while doing `outer` (a role assumption, a
    /// token exchange): the message becomes `{outer}: {message}`, the kind is kept.
    pub fn within(self, outer: &str) -> Self {
        match self {
            KeyServiceError::InvalidKey { message, source } => KeyServiceError::InvalidKey {
                message: format!("{outer}: {message}"),
                source,
            },
            KeyServiceError::Credentials { message, source } => KeyServiceError::Credentials {
                message: format!("{outer}: {message}"),
                source,
            },
            KeyServiceError::Unsupported(m) => {
                KeyServiceError::Unsupported(format!("{outer}: {m}"))
            }
            KeyServiceError::Call { context, source } => KeyServiceError::Call {
                context: format!("{outer}: {context}"),
                source,
            },
            KeyServiceError::Response { context, message } => KeyServiceError::Response {
                context: format!("{outer}: {context}"),
                message,
            },
        }
    }

    /// A call to the service that failed; `context` says which call and for which key.
    pub fn call(context: impl Into<String>, source: CallError) -> Self {
        KeyServiceError::Call {
            context: context.into(),
            source,
        }
    }

    /// A key the service does not accept; `message` names it.
    pub fn invalid_key(message: impl Into<String>) -> Self {
        KeyServiceError::InvalidKey {
            message: message.into(),
            source: None,
        }
    }

    /// A key the service does not accept, for the typed reason `cause`: the message is
    /// `{context}: {cause}`, or the cause's alone without a context.
    pub fn invalid_key_because(
        context: Option<&str>,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        KeyServiceError::InvalidKey {
            message: with_context(context, &cause),
            source: Some(Box::new(cause)),
        }
    }

    /// Credentials that are missing or could not be obtained; `message` says which.
    pub fn credentials(message: impl Into<String>) -> Self {
        KeyServiceError::Credentials {
            message: message.into(),
            source: None,
        }
    }

    /// Credentials that could not be obtained, for the typed reason `cause`: the message is
    /// `{context}: {cause}`, or the cause's alone without a context.
    pub fn credentials_because(
        context: Option<&str>,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        KeyServiceError::Credentials {
            message: with_context(context, &cause),
            source: Some(Box::new(cause)),
        }
    }

    /// Whether the service was silent or busy (a later reconcile may succeed).
    pub fn is_transient(&self) -> bool {
        matches!(self, KeyServiceError::Call { source, .. } if source.is_transient())
    }
}

/// Why a key service credentials entry of a decryption Secret (`sops.aws-kms`,
/// `sops.azure-kv`, `sops.gcp-kms`) cannot be used: the provider's own error. Never holds
/// the entry's content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    /// `sops.aws-kms`.
    #[error(transparent)]
    Aws(#[from] crate::aws::CredentialsError),
    /// `sops.azure-kv`.
    #[error(transparent)]
    Azure(#[from] crate::azure::CredentialsError),
    /// `sops.gcp-kms`.
    #[error(transparent)]
    Gcp(#[from] crate::gcp::CredentialsError),
}

impl CredentialsError {
    /// The Flux reason of a reconcile that stops on this error (see
    /// [`KeyServiceError::reason`]).
    pub fn reason(&self) -> &'static str {
        reason::BUILD_FAILED
    }
}

fn with_context(context: Option<&str>, cause: &dyn std::error::Error) -> String {
    match context {
        Some(context) => format!("{context}: {cause}"),
        None => cause.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_the_context_and_the_cause() {
        let error = KeyServiceError::Call {
            context: "failed to decrypt the sops data key".into(),
            source: CallError::GaveUp {
                message: "no answer within 10s".into(),
                attempts: 3,
            },
        };
        assert_eq!(
            error.to_string(),
            "failed to decrypt the sops data key: no answer within 10s (after 3 attempts)"
        );
        assert!(error.is_transient());
        assert_eq!(error.reason(), "BuildFailed");
        let refused = KeyServiceError::Call {
            context: "Decrypt".into(),
            source: CallError::Refused("HTTP 403".into()),
        };
        assert!(!refused.is_transient());
        let within = refused.within("failed to assume role 'r'");
        assert_eq!(
            within.to_string(),
            "failed to assume role 'r': Decrypt: HTTP 403"
        );
        assert!(matches!(within, KeyServiceError::Call { .. }));
    }

    #[test]
    fn typed_causes_are_kept_as_sources() {
        use std::error::Error as _;
        let cause = crate::gcp::InvalidResourceId("projects/p".into());
        let error = KeyServiceError::invalid_key_because(None, cause.clone());
        assert_eq!(
            error.to_string(),
            "no valid resource ID found in \"projects/p\""
        );
        assert_eq!(error.reason(), "BuildFailed");
        let within = error.within("failed to decrypt");
        assert_eq!(
            within.to_string(),
            "failed to decrypt: no valid resource ID found in \"projects/p\""
        );
        assert!(
            within
                .source()
                .and_then(|s| s.downcast_ref::<crate::gcp::InvalidResourceId>())
                .is_some()
        );
        let error = KeyServiceError::credentials_because(Some("cannot read /token"), cause);
        assert_eq!(
            error.to_string(),
            "cannot read /token: no valid resource ID found in \"projects/p\""
        );
        assert!(!error.is_transient());
        assert!(KeyServiceError::credentials("none").source().is_none());
    }
}
