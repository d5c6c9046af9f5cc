//! What the render pipeline reads from the cluster, with the controller's own client (not
//! impersonating, as Flux): the decryption Secret and the `substituteFrom` objects
//! ([`render::cluster::ObjectReader`]), and for the key services the decryption
//! ServiceAccount, its tokens (TokenRequest API) and the Vault ConfigMap.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use kube::api::PostParams;
use kube::{Api, Client};
use zeroize::Zeroizing;

use keyservice::{ConfigMapSource, ServiceAccountTokenSource};
use render::cluster::{ObjectReader, SourceError, SourceFuture};

/// The cluster as the controller's client reads it for a render.
#[derive(Clone)]
pub struct ControllerReads(pub Client);

impl ObjectReader for ControllerReads {
    fn secret<'a>(&'a self, namespace: &'a str, name: &'a str) -> SourceFuture<'a, Option<Secret>> {
        Box::pin(async move {
            Api::<Secret>::namespaced(self.0.clone(), namespace)
                .get_opt(name)
                .await
                .map_err(|e| SourceError::with_source(e.to_string(), e))
        })
    }

    fn config_map<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> SourceFuture<'a, Option<ConfigMap>> {
        Box::pin(async move {
            Api::<ConfigMap>::namespaced(self.0.clone(), namespace)
                .get_opt(name)
                .await
                .map_err(|e| SourceError::with_source(e.to_string(), e))
        })
    }
}

/// The API's own words for a failed request (its Status message), else the client's.
fn api_message(error: kube::Error) -> SourceError {
    let message = match &error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    };
    SourceError::with_source(message, error)
}

impl ServiceAccountTokenSource for ControllerReads {
    fn annotations<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> SourceFuture<'a, BTreeMap<String, String>> {
        Box::pin(async move {
            let account = Api::<ServiceAccount>::namespaced(self.0.clone(), namespace)
                .get(name)
                .await
                .map_err(api_message)?;
            Ok(account.metadata.annotations.unwrap_or_default())
        })
    }

    fn token<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        audiences: Vec<String>,
        lifetime: Duration,
    ) -> SourceFuture<'a, Zeroizing<String>> {
        Box::pin(async move {
            let request = TokenRequest {
                spec: TokenRequestSpec {
                    audiences,
                    expiration_seconds: Some(i64::try_from(lifetime.as_secs()).unwrap_or(i64::MAX)),
                    ..TokenRequestSpec::default()
                },
                ..TokenRequest::default()
            };
            let issued: TokenRequest = Api::<ServiceAccount>::namespaced(self.0.clone(), namespace)
                .create_subresource("token", name, &PostParams::default(), &request)
                .await
                .map_err(api_message)?;
            Ok(Zeroizing::new(
                issued.status.map(|s| s.token).unwrap_or_default(),
            ))
        })
    }
}

impl ConfigMapSource for ControllerReads {
    fn data<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> SourceFuture<'a, BTreeMap<String, String>> {
        Box::pin(async move {
            let map = Api::<ConfigMap>::namespaced(self.0.clone(), namespace)
                .get(name)
                .await
                .map_err(|e| SourceError::with_source(e.to_string(), e))?;
            Ok(map.data.unwrap_or_default())
        })
    }
}
