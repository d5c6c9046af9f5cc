//! Flux's normalization of built objects before they are applied (fluxcd/pkg ssa
//! `normalize.UnstructuredList`, which kustomize-controller runs on the whole build).
//!
//! What it changes, kind by kind, as the API server would have stored the object:
//!
//! - a `v1` Secret's `stringData` is merged into `data` (base64-encoded, `stringData` winning)
//!   and removed, so that the field manager owns `data` keys: a key the source drops then
//!   disappears from the live Secret, which it never does when `stringData` is applied;
//! - ports without a `protocol` get `TCP`: a `v1` Service's `spec.ports`, and the `containers`
//!   (not init or ephemeral containers) of a Pod, a Deployment, StatefulSet, DaemonSet,
//!   ReplicaSet, Job or CronJob template;
//! - every object gets `metadata.creationTimestamp: null` and loses `status`, except a
//!   CustomResourceDefinition, which keeps its status for kstatus.
//!
//! `rbac.authorization.k8s.io/v1` Roles and ClusterRoles are left exactly as built, as Flux
//! does. Flux makes the kind-specific changes only to objects its typed conversion accepts; an
//! object that conversion would refuse (a Secret whose `data` is not base64, a `stringData`
//! value that is not a string) is left for the API server to refuse.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

use crate::manifest::Object;

/// Normalizes one object in place (see the module documentation).
pub fn normalize(object: &mut Object) {
    if object.api_version() == "rbac.authorization.k8s.io/v1"
        && matches!(object.kind(), "Role" | "ClusterRole")
    {
        return;
    }
    match (object.api_version(), object.kind()) {
        ("v1", "Secret") => merge_string_data(object.as_map_mut()),
        ("v1", "Service") => {
            if let Some(ports) = pointer_array(object, "/spec/ports") {
                default_protocols(ports);
            }
        }
        ("v1", "Pod") => default_container_protocols(object, "/spec/containers"),
        ("apps/v1", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet")
        | ("batch/v1", "Job") => {
            default_container_protocols(object, "/spec/template/spec/containers");
        }
        ("batch/v1", "CronJob") => {
            default_container_protocols(object, "/spec/jobTemplate/spec/template/spec/containers")
        }
        _ => {}
    }
    let crd = object
        .kind()
        .eq_ignore_ascii_case("CustomResourceDefinition")
        && object.api_version().starts_with("apiextensions.k8s.io/");
    let map = object.as_map_mut();
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(metadata) = metadata {
        metadata.insert("creationTimestamp".into(), Value::Null);
    }
    if !crd {
        map.shift_remove("status");
    }
}

fn pointer_array<'a>(object: &'a mut Object, pointer: &str) -> Option<&'a mut Vec<Value>> {
    let mut segments = pointer.split('/').filter(|s| !s.is_empty());
    let mut value = object.as_map_mut().get_mut(segments.next()?)?;
    for segment in segments {
        value = value.get_mut(segment)?;
    }
    value.as_array_mut()
}

/// `TCP` for every port of every container under `pointer` that has no protocol.
fn default_container_protocols(object: &mut Object, pointer: &str) {
    let Some(containers) = pointer_array(object, pointer) else {
        return;
    };
    for container in containers {
        if let Some(ports) = container.get_mut("ports").and_then(Value::as_array_mut) {
            default_protocols(ports);
        }
    }
}

/// `TCP` for every port whose `protocol` is absent, null or empty.
fn default_protocols(ports: &mut [Value]) {
    for port in ports.iter_mut().filter_map(Value::as_object_mut) {
        let unset = port
            .get("protocol")
            .is_none_or(|p| p.is_null() || p.as_str() == Some(""));
        if unset {
            port.insert("protocol".into(), Value::from("TCP"));
        }
    }
}

/// A Secret's `stringData` merged into `data` and removed, when the Secret converts to its
/// typed form: every `data` value base64, every `stringData` value a string.
fn merge_string_data(secret: &mut Map<String, Value>) {
    let Some(string_data) = secret.get("stringData") else {
        return;
    };
    let strings: Option<Vec<(String, String)>> = match string_data {
        Value::Null => Some(Vec::new()),
        Value::Object(entries) => entries
            .iter()
            .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
            .collect(),
        _ => None,
    };
    let Some(strings) = strings else {
        return;
    };
    let data_converts = match secret.get("data") {
        None | Some(Value::Null) => true,
        Some(Value::Object(data)) => data.values().all(is_base64),
        Some(_) => false,
    };
    if !data_converts {
        return;
    }
    secret.shift_remove("stringData");
    if strings.is_empty() {
        return;
    }
    let data = secret
        .entry("data")
        .or_insert_with(|| Value::Object(Map::new()));
    if data.is_null() {
        *data = Value::Object(Map::new());
    }
    if let Value::Object(data) = data {
        for (key, value) in strings {
            data.insert(key, Value::from(STANDARD.encode(value)));
        }
    }
}

/// Whether `value` decodes as Go decodes a `[]byte` field: standard base64, line breaks
/// ignored; null is an empty value.
fn is_base64(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(text) => {
            let joined: String = text.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
            STANDARD.decode(joined).is_ok()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn normalized(input: Value) -> Value {
        let mut object: Object = serde_json::from_value(input).expect("an object");
        normalize(&mut object);
        Value::from(object)
    }

    #[test]
    fn normalizes_as_fluxs_normalize_unstructured() {
        let cases = [
            (
                "stringData merged into data, stringData winning, then removed",
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                       "data": {"a": "b2xk", "keep": "a2VlcA=="},
                       "stringData": {"a": "new", "token": "t0k"}}),
                json!({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "s", "creationTimestamp": null},
                       "data": {"a": "bmV3", "keep": "a2VlcA==", "token": "dDBr"}}),
            ),
            (
                "stringData alone becomes data",
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                       "type": "Opaque", "stringData": {"a": "x"}}),
                json!({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "s", "creationTimestamp": null},
                       "type": "Opaque", "data": {"a": "eA=="}}),
            ),
            (
                "empty stringData dropped, as the typed round-trip omits it",
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                       "stringData": {}}),
                json!({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "s", "creationTimestamp": null}}),
            ),
            (
                "a Secret the typed conversion refuses keeps its stringData",
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                       "data": {"a": "not base64!"}, "stringData": {"b": "x"}}),
                json!({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "s", "creationTimestamp": null},
                       "data": {"a": "not base64!"}, "stringData": {"b": "x"}}),
            ),
            (
                "a stringData value that is not a string is left to the API server",
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                       "stringData": {"n": 1}}),
                json!({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "s", "creationTimestamp": null},
                       "stringData": {"n": 1}}),
            ),
            (
                "a Secret of another API version is not Flux's typed Secret",
                json!({"apiVersion": "example.com/v1", "kind": "Secret", "metadata": {"name": "s"},
                       "stringData": {"a": "x"}}),
                json!({"apiVersion": "example.com/v1", "kind": "Secret",
                       "metadata": {"name": "s", "creationTimestamp": null},
                       "stringData": {"a": "x"}}),
            ),
            (
                "Service ports get TCP, an explicit protocol kept",
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                       "spec": {"ports": [{"port": 80}, {"port": 53, "protocol": "UDP"},
                                          {"port": 81, "protocol": ""}]},
                       "status": {"loadBalancer": {}}}),
                json!({"apiVersion": "v1", "kind": "Service",
                       "metadata": {"name": "web", "creationTimestamp": null},
                       "spec": {"ports": [{"port": 80, "protocol": "TCP"},
                                          {"port": 53, "protocol": "UDP"},
                                          {"port": 81, "protocol": "TCP"}]}}),
            ),
            (
                "Deployment containers get TCP, init containers do not",
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                       "spec": {"template": {"spec": {
                           "initContainers": [{"name": "i", "ports": [{"containerPort": 1}]}],
                           "containers": [{"name": "c", "resources": {},
                                           "ports": [{"containerPort": 80}]}]}}}}),
                json!({"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"name": "d", "creationTimestamp": null},
                       "spec": {"template": {"spec": {
                           "initContainers": [{"name": "i", "ports": [{"containerPort": 1}]}],
                           "containers": [{"name": "c", "resources": {},
                                           "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}}}}),
            ),
            (
                "CronJob job template containers get TCP",
                json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
                       "spec": {"jobTemplate": {"spec": {"template": {"spec": {
                           "containers": [{"name": "c", "ports": [{"containerPort": 9}]}]}}}}}}),
                json!({"apiVersion": "batch/v1", "kind": "CronJob",
                       "metadata": {"name": "c", "creationTimestamp": null},
                       "spec": {"jobTemplate": {"spec": {"template": {"spec": {
                           "containers": [{"name": "c",
                                           "ports": [{"containerPort": 9, "protocol": "TCP"}]}]}}}}}}),
            ),
            (
                "Pod containers get TCP",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                       "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}}),
                json!({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "p", "creationTimestamp": null},
                       "spec": {"containers": [{"name": "c",
                                                "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}}),
            ),
            (
                "a custom resource loses its status",
                json!({"apiVersion": "example.com/v1", "kind": "Widget",
                       "metadata": {"name": "w"}, "spec": {"ports": [{"port": 1}]},
                       "status": {"ready": true}}),
                json!({"apiVersion": "example.com/v1", "kind": "Widget",
                       "metadata": {"name": "w", "creationTimestamp": null},
                       "spec": {"ports": [{"port": 1}]}}),
            ),
            (
                "a CRD keeps its status",
                json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                       "metadata": {"name": "w"}, "status": {"conditions": []}}),
                json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                       "metadata": {"name": "w", "creationTimestamp": null},
                       "status": {"conditions": []}}),
            ),
            (
                "a ClusterRole is left exactly as built",
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                       "metadata": {"name": "r"}, "rules": [], "status": {}}),
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                       "metadata": {"name": "r"}, "rules": [], "status": {}}),
            ),
            (
                "an object without metadata gets it",
                json!({"apiVersion": "v1", "kind": "ConfigMap"}),
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"creationTimestamp": null}}),
            ),
        ];
        for (case, input, want) in cases {
            assert_eq!(normalized(input), want, "{case}");
        }
    }

    #[test]
    fn go_ignores_line_breaks_in_base64() {
        assert!(is_base64(&json!("YWJj\nZGVm")));
        assert!(!is_base64(&json!("YWJj ZGVm")));
        assert!(!is_base64(&json!(3)));
    }
}
