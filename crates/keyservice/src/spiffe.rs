//! The `spiffe` credential provider (ServiceAccount annotation
//! `credential.auth.fluxcd.io/provider: spiffe`): the identity token exchanged for a key
//! service's credentials is a JWT-SVID the SPIFFE Broker issues for the Kustomization
//! itself, in place of a ServiceAccount token. The broker client is the controller's,
//! injected through [`JwtSvidSource`].

use std::sync::Arc;

use zeroize::Zeroizing;

use super::identity::SourceFuture;

/// The Kubernetes object a JWT-SVID is issued for (the Kustomization being decrypted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectReference {
    /// API group (`kustomize.toolkit.fluxcd.io`).
    pub group: String,
    /// Kind (`Kustomization`), for messages.
    pub kind: String,
    /// Resource plural (`kustomizations`), for the broker.
    pub plural: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
}

impl std::fmt::Display for ObjectReference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{} {}/{}",
            self.group, self.kind, self.namespace, self.name
        )
    }
}

/// Issues JWT-SVIDs for objects (a SPIFFE Broker client; tests give a fake).
pub trait JwtSvidSource: Send + Sync {
    /// A JWT-SVID of `object` for `audiences`.
    fn jwt_svid<'a>(
        &'a self,
        object: &'a ObjectReference,
        audiences: Vec<String>,
    ) -> SourceFuture<'a, Zeroizing<String>>;
}

/// The broker and the object a `spiffe` ServiceAccount's tokens are asked for.
#[derive(Clone)]
pub struct SpiffeObject {
    /// The broker; `None` when the controller has none (`--spiffe-broker-endpoint` unset).
    pub broker: Option<Arc<dyn JwtSvidSource>>,
    /// The Kustomization.
    pub object: ObjectReference,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;
    use crate::identity::{
        IdentityError, PROVIDER_ANNOTATION, ServiceAccountTokenSource, ServiceAccountTokens,
        SourceError, TYPE_ANNOTATION,
    };

    /// A cluster whose TokenRequest API must not be asked for a `spiffe` account's tokens.
    struct NoTokenRequests;

    impl ServiceAccountTokenSource for NoTokenRequests {
        fn annotations<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
        ) -> SourceFuture<'a, BTreeMap<String, String>> {
            Box::pin(async { Ok(BTreeMap::new()) })
        }

        fn token<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
            _: Vec<String>,
            _: Duration,
        ) -> SourceFuture<'a, Zeroizing<String>> {
            Box::pin(async { Err(SourceError::new("a TokenRequest was made")) })
        }
    }

    /// A broker answering `answer`, recording what it was asked.
    struct FakeBroker {
        answer: Result<&'static str, &'static str>,
        asked: Mutex<Vec<(ObjectReference, Vec<String>)>>,
    }

    impl JwtSvidSource for FakeBroker {
        fn jwt_svid<'a>(
            &'a self,
            object: &'a ObjectReference,
            audiences: Vec<String>,
        ) -> SourceFuture<'a, Zeroizing<String>> {
            self.asked
                .lock()
                .expect("lock")
                .push((object.clone(), audiences));
            let answer = self.answer;
            Box::pin(async move {
                answer
                    .map(|t| Zeroizing::new(t.to_owned()))
                    .map_err(SourceError::new)
            })
        }
    }

    fn object() -> ObjectReference {
        ObjectReference {
            group: "kustomize.toolkit.fluxcd.io".into(),
            kind: "Kustomization".into(),
            plural: "kustomizations".into(),
            namespace: "apps".into(),
            name: "podinfo".into(),
            uid: "uid-1".into(),
        }
    }

    fn account(annotations: &[(&str, &str)]) -> Result<ServiceAccountTokens, IdentityError> {
        ServiceAccountTokens::new(
            Arc::new(NoTokenRequests),
            "apps",
            "decryptor",
            annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    #[tokio::test]
    async fn a_spiffe_account_gets_the_objects_jwt_svid_from_the_broker() {
        let broker = Arc::new(FakeBroker {
            answer: Ok("jwt-svid-of-podinfo"),
            asked: Mutex::new(Vec::new()),
        });
        let tokens = account(&[(PROVIDER_ANNOTATION, "spiffe")])
            .expect("spiffe is built")
            .with_spiffe(SpiffeObject {
                broker: Some(broker.clone()),
                object: object(),
            });
        let token = tokens
            .token(vec!["sts.amazonaws.com".into()], "decrypt_with_aws")
            .await
            .expect("a JWT-SVID");
        assert_eq!(token.as_str(), "jwt-svid-of-podinfo");
        let asked = broker.asked.lock().expect("lock").clone();
        assert_eq!(asked, [(object(), vec!["sts.amazonaws.com".to_owned()])]);
    }

    #[tokio::test]
    async fn a_broker_failure_or_none_names_the_object_or_the_flags() {
        let broker = Arc::new(FakeBroker {
            answer: Err("PermissionDenied"),
            asked: Mutex::new(Vec::new()),
        });
        let error = account(&[(PROVIDER_ANNOTATION, "spiffe")])
            .expect("spiffe is built")
            .with_spiffe(SpiffeObject {
                broker: Some(broker),
                object: object(),
            })
            .token(vec!["aud".into()], "decrypt_with_aws")
            .await
            .expect_err("refused")
            .to_string();
        assert!(
            error.contains(
                "failed to fetch SPIFFE JWT-SVID for object 'kustomize.toolkit.fluxcd.io/Kustomization apps/podinfo'"
            ) && error.contains("PermissionDenied"),
            "{error}"
        );

        let error = account(&[(PROVIDER_ANNOTATION, "spiffe")])
            .expect("spiffe is built")
            .with_spiffe(SpiffeObject {
                broker: None,
                object: object(),
            })
            .token(vec!["aud".into()], "decrypt_with_aws")
            .await
            .expect_err("no broker")
            .to_string();
        assert!(
            error.contains("apps/decryptor") && error.contains("--spiffe-broker-endpoint"),
            "{error}"
        );
    }

    #[test]
    fn only_jwt_credentials_are_built_and_unknown_providers_refused() {
        let error = account(&[(PROVIDER_ANNOTATION, "spiffe"), (TYPE_ANNOTATION, "x509")])
            .err()
            .expect("x509 is not built")
            .to_string();
        assert!(error.contains("credential type 'x509'"), "{error}");
        assert!(account(&[(PROVIDER_ANNOTATION, "spiffe"), (TYPE_ANNOTATION, "jwt")]).is_ok());
        let error = account(&[(PROVIDER_ANNOTATION, "vault")])
            .err()
            .expect("unknown provider")
            .to_string();
        assert!(error.contains("credential provider 'vault'"), "{error}");
    }
}
