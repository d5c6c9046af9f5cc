//! Config watchers, as Flux's: a change to a ConfigMap or Secret that a Kustomization reads
//! (`postBuild.substituteFrom`, `decryption.secretRef`, `kubeConfig.secretRef` or
//! `kubeConfig.configMapRef`) reconciles that Kustomization at once.
//!
//! Only ConfigMaps and Secrets matching `--watch-configs-label-selector` (by default
//! `reconcile.fluxcd.io/watch=Enabled`; empty matches all) are watched, and only their
//! metadata: a Secret's data never reaches this watch. A creation, a deletion or a new
//! resourceVersion triggers; a relist that finds an object unchanged does not.

use kube::api::PartialObjectMeta;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::Store;
use kube::runtime::watcher::watcher;
use kube::runtime::{WatchStreamExt, predicates, watcher as watch_config};
use kube::{Api, Client, ResourceExt};

use crate::api::kustomization::{Kustomization, SubstituteKind};

/// The kind of a config object a Kustomization can read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigKind {
    /// A ConfigMap.
    ConfigMap,
    /// A Secret.
    Secret,
}

/// Whether `ks` reads the `kind` object `namespace/name`: Flux's `ConfigMap` and `Secret`
/// indexes of Kustomizations (the object is always in the Kustomization's namespace).
pub fn reads(ks: &Kustomization, kind: ConfigKind, namespace: &str, name: &str) -> bool {
    if ks.namespace().as_deref() != Some(namespace) {
        return false;
    }
    let spec = &ks.spec;
    let substitutes = spec
        .post_build
        .as_ref()
        .and_then(|p| p.substitute_from.as_ref())
        .is_some_and(|refs| {
            refs.iter().any(|r| {
                r.name == name
                    && match r.kind {
                        SubstituteKind::ConfigMap => kind == ConfigKind::ConfigMap,
                        SubstituteKind::Secret => kind == ConfigKind::Secret,
                    }
            })
        });
    let kube_config = spec.kube_config.as_ref();
    substitutes
        || match kind {
            ConfigKind::ConfigMap => kube_config
                .and_then(|k| k.config_map_ref.as_ref())
                .is_some_and(|r| r.name == name),
            ConfigKind::Secret => {
                kube_config
                    .and_then(|k| k.secret_ref.as_ref())
                    .is_some_and(|r| r.name == name)
                    || spec
                        .decryption
                        .as_ref()
                        .and_then(|d| d.secret_ref.as_ref())
                        .is_some_and(|r| r.name == name)
            }
        }
}

/// Adds to `controller` a metadata watch of the `kind` objects (`K`) matching `selector`,
/// reconciling the Kustomizations of `store` that read a changed one.
pub fn watch<K>(
    controller: Controller<Kustomization>,
    client: &Client,
    namespace: Option<&str>,
    store: &Store<Kustomization>,
    kind: ConfigKind,
    selector: &str,
) -> Controller<Kustomization>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let api: Api<PartialObjectMeta<K>> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut config = watch_config::Config::default();
    if !selector.is_empty() {
        config = config.labels(selector);
    }
    let changes = watcher(api, config)
        .default_backoff()
        .touched_objects()
        .predicate_filter(predicates::resource_version, Default::default());
    let store = store.clone();
    controller.watches_stream(changes, move |object| {
        let namespace = object.namespace().unwrap_or_default();
        let name = object.name_any();
        store
            .state()
            .into_iter()
            .filter(|ks| reads(ks, kind, &namespace, &name))
            .map(|ks| super::key::request_for(&ks))
            .collect::<Vec<_>>()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kustomization(spec: serde_json::Value) -> Kustomization {
        let mut full = serde_json::json!({
            "interval": "1m", "prune": true,
            "sourceRef": {"kind": "GitRepository", "name": "repo"},
        });
        if let (Some(full), Some(extra)) = (full.as_object_mut(), spec.as_object()) {
            full.extend(extra.clone());
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "app", "namespace": "apps"},
            "spec": full,
        }))
        .unwrap()
    }

    #[test]
    fn substitute_from_is_read_by_kind_name_and_namespace() {
        let ks = kustomization(serde_json::json!({
            "postBuild": {"substituteFrom": [{"kind": "ConfigMap", "name": "vars"},
                                             {"kind": "Secret", "name": "secret-vars"}]}
        }));
        assert!(reads(&ks, ConfigKind::ConfigMap, "apps", "vars"));
        assert!(reads(&ks, ConfigKind::Secret, "apps", "secret-vars"));
        assert!(!reads(&ks, ConfigKind::Secret, "apps", "vars"));
        assert!(!reads(&ks, ConfigKind::ConfigMap, "other", "vars"));
        assert!(!reads(&ks, ConfigKind::ConfigMap, "apps", "other"));
    }

    #[test]
    fn the_decryption_secret_is_read() {
        let ks = kustomization(serde_json::json!({
            "decryption": {"provider": "sops", "secretRef": {"name": "sops-age"}}
        }));
        assert!(reads(&ks, ConfigKind::Secret, "apps", "sops-age"));
        assert!(!reads(&ks, ConfigKind::ConfigMap, "apps", "sops-age"));
        assert!(!reads(&ks, ConfigKind::Secret, "flux-system", "sops-age"));
    }

    #[test]
    fn the_kubeconfig_secret_or_config_map_is_read() {
        let ks = kustomization(serde_json::json!({
            "kubeConfig": {"secretRef": {"name": "spoke", "key": "value"}}
        }));
        assert!(reads(&ks, ConfigKind::Secret, "apps", "spoke"));
        assert!(!reads(&ks, ConfigKind::ConfigMap, "apps", "spoke"));
        let ks = kustomization(serde_json::json!({
            "kubeConfig": {"configMapRef": {"name": "spoke"}}
        }));
        assert!(reads(&ks, ConfigKind::ConfigMap, "apps", "spoke"));
        assert!(!reads(&ks, ConfigKind::Secret, "apps", "spoke"));
    }
}
