//! The builtin `IAMPolicyGenerator`: a Kubernetes ServiceAccount bound to a cloud
//! provider's service account. Only GKE workload identity is supported, as in kustomize.

use serde::Deserialize;
use serde_json::Value;

use super::GeneratorError;
use crate::resource::{Object, Resource};

/// The annotation GKE reads to map a Kubernetes service account to a Google one.
const GKE_ANNOTATION: &str = "iam.gke.io/gcp-service-account";

/// The plugin config's fields (unknown fields are ignored, as Go's decoder does).
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct IamPolicyArgs {
    cloud: String,
    kubernetes_service: KubernetesService,
    service_account: CloudServiceAccount,
}

/// The Kubernetes service account to create.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct KubernetesService {
    name: String,
    namespace: String,
}

/// The cloud provider's service account it stands for.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct CloudServiceAccount {
    name: String,
    project_id: String,
}

/// Generates the ServiceAccount an `IAMPolicyGenerator` plugin config describes: named
/// `kubernetesService.name` (in `kubernetesService.namespace` when given) and annotated
/// with the Google service account `<serviceAccount.name>@<projectId>.iam.gserviceaccount.com`.
/// `cloud` must be `gke`.
pub fn generate_iam_policy(config: &Object) -> Result<Resource, GeneratorError> {
    let config_name = config
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let plugin_error = |message: String| GeneratorError::PluginConfig {
        kind: "IAMPolicyGenerator".to_string(),
        name: config_name.clone(),
        message,
    };
    // Go declares every field in an embedded struct: no number becomes a string.
    let args: IamPolicyArgs = crate::gojson::from_value(
        &Value::Object(config.clone()),
        crate::gojson::Mode::LENIENT_UNCONVERTED,
    )
    .map_err(|e| plugin_error(e.to_string()))?;
    if args.cloud != "gke" {
        return Err(plugin_error(format!(
            "cloud provider {:?} not supported yet (only \"gke\" is)",
            args.cloud
        )));
    }
    if args.kubernetes_service.name.is_empty() {
        return Err(plugin_error(
            "kubernetesService.name is required: it names the generated ServiceAccount".to_string(),
        ));
    }
    Ok(Resource {
        obj: gke_service_account(&args),
        ..Resource::default()
    })
}

fn gke_service_account(args: &IamPolicyArgs) -> Object {
    let google_account = format!(
        "{}@{}.iam.gserviceaccount.com",
        args.service_account.name, args.service_account.project_id
    );
    let mut annotations = Object::new();
    annotations.insert(GKE_ANNOTATION.into(), Value::String(google_account));
    let mut meta = Object::new();
    meta.insert("annotations".into(), Value::Object(annotations));
    meta.insert(
        "name".into(),
        Value::String(args.kubernetes_service.name.clone()),
    );
    if !args.kubernetes_service.namespace.is_empty() {
        meta.insert(
            "namespace".into(),
            Value::String(args.kubernetes_service.namespace.clone()),
        );
    }
    let mut obj = Object::new();
    obj.insert("apiVersion".into(), Value::String("v1".into()));
    obj.insert("kind".into(), Value::String("ServiceAccount".into()));
    obj.insert("metadata".into(), Value::Object(meta));
    obj
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(value: Value) -> Object {
        match value {
            Value::Object(map) => map,
            _ => panic!("not a map"),
        }
    }

    fn gke(namespace: Option<&str>) -> Object {
        let mut service = json!({"name": "app-sa"});
        if let Some(ns) = namespace {
            service["namespace"] = json!(ns);
        }
        config(json!({
            "apiVersion": "builtin", "kind": "IAMPolicyGenerator",
            "metadata": {"name": "wi"}, "cloud": "gke",
            "kubernetesService": service,
            "serviceAccount": {"name": "robot", "projectId": "proj-1"},
            "somethingElse": true,
        }))
    }

    #[test]
    fn gke_service_account_with_namespace() {
        let res = generate_iam_policy(&gke(Some("apps"))).unwrap();
        assert_eq!(
            Value::Object(res.obj),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {
                "annotations": {"iam.gke.io/gcp-service-account": "robot@proj-1.iam.gserviceaccount.com"},
                "name": "app-sa", "namespace": "apps"}})
        );
        assert!(!res.needs_hash_suffix);
    }

    #[test]
    fn gke_service_account_without_namespace() {
        let res = generate_iam_policy(&gke(None)).unwrap();
        assert_eq!(res.name(), "app-sa");
        assert!(res.obj["metadata"].get("namespace").is_none());
    }

    #[test]
    fn other_clouds_are_refused() {
        let mut cfg = gke(None);
        cfg.insert("cloud".into(), json!("aws"));
        let err = generate_iam_policy(&cfg).unwrap_err().to_string();
        assert!(err.contains("\"aws\" not supported"), "{err}");
        assert!(err.contains("\"wi\""), "{err}");
    }

    #[test]
    fn missing_name_and_bad_types_are_errors() {
        let mut cfg = gke(None);
        cfg.insert("kubernetesService".into(), json!({"namespace": "x"}));
        let err = generate_iam_policy(&cfg).unwrap_err().to_string();
        assert!(err.contains("kubernetesService.name"), "{err}");
        let mut cfg = gke(None);
        cfg.insert("serviceAccount".into(), json!("robot"));
        assert!(generate_iam_policy(&cfg).is_err());
    }
}
