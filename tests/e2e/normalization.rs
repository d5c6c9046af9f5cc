//! Flux's normalization before apply (fluxcd/pkg ssa `normalize.UnstructuredList`) and its
//! CRD `caBundle` sanitizing, against the real API server: a Secret written with
//! `stringData` is applied as `data`, so a key the source drops leaves the live Secret;
//! reconciles with nothing changed write nothing; a CRD with a placeholder conversion
//! `caBundle` is applied. And the wait that ends the cluster definition stage.

use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::apply::reconcile_now;
use super::*;

/// Secret `creds` in `ns` with `stringData` holding `keys` (each key's value is `<key>-value`).
pub(super) fn string_data_secret(ns: &str, keys: &[&str]) -> String {
    let entries: String = keys.iter().map(|k| format!("  {k}: {k}-value\n")).collect();
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: {ns}\n\
         type: Opaque\nstringData:\n{entries}"
    )
}

/// Service `web` in `ns` whose port has no `protocol`.
pub(super) fn protocol_less_service(ns: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: {ns}\n\
         spec:\n  selector:\n    app: web\n  ports:\n  - port: 80\n    targetPort: 8080\n"
    )
}

/// The keys of Secret `creds`' `data`, sorted.
pub(super) async fn secret_keys(client: &kube::Client, ns: &str) -> Vec<String> {
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get("creds")
        .await
        .expect("get Secret creds");
    secret
        .data
        .map(|d| d.into_keys().collect())
        .unwrap_or_default()
}

/// resourceVersions of Secret `creds` and Service `web`.
pub(super) async fn secret_and_service_versions(
    client: &kube::Client,
    ns: &str,
) -> (String, String) {
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get("creds")
        .await
        .expect("get Secret creds");
    let service = Api::<Service>::namespaced(client.clone(), ns)
        .get("web")
        .await
        .expect("get Service web");
    (
        secret.metadata.resource_version.unwrap_or_default(),
        service.metadata.resource_version.unwrap_or_default(),
    )
}

/// A key removed from a Secret's `stringData` in the source disappears from the live Secret:
/// the field manager owns `data` keys, as it does under Flux, not `stringData` ones, which
/// the API server never stores.
#[tokio::test]
async fn a_key_removed_from_string_data_leaves_the_live_secret() {
    let f = Fixture::new("norm-stringdata").await;
    let ns = f.ns();
    f.app_ready_with(&[(
        "deploy/secret.yaml",
        &string_data_secret(ns, &["a", "token"]),
    )])
    .await;
    assert_eq!(secret_keys(&f.client, ns).await, ["a", "token"]);

    f.publish(
        2,
        &[("deploy/secret.yaml", &string_data_secret(ns, &["a"]))],
    )
    .await;
    super::apply::wait_applied(&f.client, ns, "app", &f.revision(2), controller()).await;
    assert_eq!(secret_keys(&f.client, ns).await, ["a"]);
}

/// Reconciles with nothing changed write nothing: a `stringData` Secret and a Service whose
/// port has no protocol keep their resourceVersion through two requested reconciles, which
/// take the full path (read, dry-run, compare).
#[tokio::test]
async fn reconciles_with_nothing_changed_write_nothing() {
    let f = Fixture::new("norm-noop").await;
    let ns = f.ns();
    f.app_ready_with(&[
        (
            "deploy/secret.yaml",
            &string_data_secret(ns, &["a", "token"]),
        ),
        ("deploy/service.yaml", &protocol_less_service(ns)),
    ])
    .await;
    let before = secret_and_service_versions(&f.client, ns).await;
    for _ in 0..2 {
        let (status, _, message) = reconcile_now(&f.client, ns, "app", controller()).await;
        assert_eq!(status, ConditionStatus::True, "{message}");
    }
    assert_eq!(
        secret_and_service_versions(&f.client, ns).await,
        before,
        "(Secret, Service) resourceVersions after two reconciles with nothing changed"
    );
}

/// A CRD whose conversion webhook `caBundle` holds no certificate (a placeholder a CA
/// injector fills in later) is applied without it, as Flux applies it: the API server
/// refuses such a bundle.
#[tokio::test]
async fn a_crd_with_an_invalid_ca_bundle_is_applied_without_it() {
    let f = Fixture::new("norm-cabundle").await;
    let ns = f.ns();
    let group = format!("{ns}.example.com");
    let name = format!("gizmos.{group}");
    // "Cg==" is base64 of a newline: no certificate.
    let crd = format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {name}\n\
         spec:\n  group: {group}\n  names: {{kind: Gizmo, plural: gizmos, singular: gizmo, listKind: GizmoList}}\n\
         \x20 scope: Namespaced\n  conversion:\n    strategy: Webhook\n    webhook:\n\
         \x20     conversionReviewVersions: [v1]\n      clientConfig:\n        caBundle: Cg==\n\
         \x20       service: {{name: conversion, namespace: {ns}, path: /convert}}\n\
         \x20 versions:\n  - name: v1\n    served: true\n    storage: true\n\
         \x20   schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true\n"
    );
    f.app_ready_with(&[("deploy/crd.yaml", &crd)]).await;
    let crds: Api<CustomResourceDefinition> = Api::all(f.client.clone());
    let live = crds.get(&name).await.expect("the CRD was applied");
    let client_config = live
        .spec
        .conversion
        .and_then(|c| c.webhook)
        .and_then(|w| w.client_config)
        .expect("the conversion webhook is kept");
    assert!(client_config.ca_bundle.is_none(), "{client_config:?}");
    assert!(client_config.service.is_some(), "{client_config:?}");

    Api::<Kustomization>::namespaced(f.client.clone(), ns)
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for(WAIT, "the CRD to be pruned", async || {
        match crds.get_opt(&name).await {
            Ok(None) => Ok(()),
            Ok(Some(crd)) if crd.metadata.deletion_timestamp.is_some() => Ok(()),
            other => Err(format!("{:?}", other.map(|c| c.map(|c| c.metadata.name)))),
        }
    })
    .await;
}

/// The cluster definition stage is waited for as Flux waits for it: two CRDs of one group
/// claiming the same kind leave one of them with its names not accepted (kstatus: Failed),
/// which ends the wait at once with Flux's message, listing what was applied before.
#[tokio::test]
async fn a_crd_that_can_never_be_established_fails_the_stage_wait_early() {
    let f = Fixture::new("stage-stalled").await;
    let ns = f.ns();
    let group = format!("{ns}.example.com");
    let crd = |plural: &str| {
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {plural}.{group}\n\
             spec:\n  group: {group}\n  names: {{kind: Widget, plural: {plural}, listKind: WidgetList}}\n\
             \x20 scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n\
             \x20   schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true\n"
        )
    };
    f.create_source("repo").await;
    f.publish(
        1,
        &[
            ("deploy/gadgets.yaml", crd("gadgets")),
            ("deploy/widgets.yaml", crd("widgets")),
            ("deploy/cm.yaml", config_map(ns, "after", "1")),
        ],
    )
    .await;
    create_kustomization(&f.client, ns, "app", "repo", json!({})).await;
    let message = wait_for(WAIT, "the stage wait to fail", async || {
        match ready(&f.client, ns, "app").await {
            Some((ConditionStatus::False, _, message)) => Ok(message),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let crds: Api<CustomResourceDefinition> = Api::all(f.client.clone());
    for plural in ["gadgets", "widgets"] {
        crds.delete(&format!("{plural}.{group}"), &DeleteParams::default())
            .await
            .expect("delete a CRD of the test");
    }
    // Early, not at the timeout: a wait that runs out says "timeout waiting for: [...]".
    let mut lines = message.lines();
    let first = lines.next().unwrap_or_default();
    assert!(
        first.starts_with("failed early due to stalled resources: [CustomResourceDefinition/")
            && first.ends_with(&format!(".{group} status: 'Failed']")),
        "{message}"
    );
    // The first attempt lists the CRDs it created; a retry, finding them unchanged, none.
    let applied: Vec<&str> = lines.collect();
    let created = [
        format!("CustomResourceDefinition/gadgets.{group} created"),
        format!("CustomResourceDefinition/widgets.{group} created"),
    ];
    assert!(applied.is_empty() || applied == created, "{message}");
    let config_maps = Api::<ConfigMap>::namespaced(f.client.clone(), ns);
    assert!(
        config_maps.get_opt("after").await.expect("read").is_none(),
        "the last stage is not applied"
    );
}

/// A Secret this controller applied with `stringData` before it normalized (its Apply entry
/// owns `stringData` keys, not `data` ones) is applied once more on the first reconcile, so
/// that a key the source drops afterwards leaves it too.
#[tokio::test]
async fn a_secret_applied_before_normalization_loses_a_dropped_key_too() {
    let f = Fixture::new("norm-migrate").await;
    let ns = f.ns();
    let secrets = Api::<Secret>::namespaced(f.client.clone(), ns);
    let before = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "creds", "namespace": ns, "labels": {
            "kustomize.toolkit.fluxcd.io/name": "app",
            "kustomize.toolkit.fluxcd.io/namespace": ns,
        }},
        "type": "Opaque", "stringData": {"a": "a-value", "token": "token-value"},
    });
    secrets
        .patch(
            "creds",
            &PatchParams::apply("kustomize-controller").force(),
            &Patch::Apply(&before),
        )
        .await
        .expect("apply the Secret with stringData, as before normalization");
    f.app_ready_with(&[(
        "deploy/secret.yaml",
        &string_data_secret(ns, &["a", "token"]),
    )])
    .await;
    let live = secrets.get("creds").await.expect("get Secret creds");
    let fields = live
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .find(|m| m.manager.as_deref() == Some("kustomize-controller"))
        .and_then(|m| m.fields_v1)
        .map(|f| f.0)
        .unwrap_or_default();
    assert!(fields.get("f:stringData").is_none(), "{fields:#}");
    assert!(fields.pointer("/f:data/f:token").is_some(), "{fields:#}");

    f.publish(
        2,
        &[("deploy/secret.yaml", &string_data_secret(ns, &["a"]))],
    )
    .await;
    super::apply::wait_applied(&f.client, ns, "app", &f.revision(2), controller()).await;
    assert_eq!(secret_keys(&f.client, ns).await, ["a"]);
}
