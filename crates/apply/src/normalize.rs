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
//! Built-in kinds go through their typed form first, which drops fields the type does not
//! have (see [`round_trip`]). `rbac.authorization.k8s.io/v1` Roles and ClusterRoles are left
//! exactly as built, as Flux does. Flux makes the kind-specific changes only to objects its typed conversion accepts; an
//! object that conversion would refuse (a Secret whose `data` is not base64, a `stringData`
//! value that is not a string) is left for the API server to refuse.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::{
    admissionregistration, apps, autoscaling, batch, coordination, core, discovery, networking,
    node, policy, rbac, scheduling, storage,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::Object;

/// Normalizes one object in place (see the module documentation).
pub fn normalize(object: &mut Object) {
    if object.api_version() == "rbac.authorization.k8s.io/v1"
        && matches!(object.kind(), "Role" | "ClusterRole")
    {
        return;
    }
    round_trip(object);
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

/// The built-in kinds of client-go's scheme, through their typed form and back, as Flux's
/// normalization converts them: fields the type does not have are dropped, and `data` of a
/// Secret or ConfigMap is re-encoded. An object the typed form does not accept is left as it
/// is. (Go's conversion also writes the zero values of struct fields, `resources: {}` and
/// the like, which the API server defaults to the same content; those are not reproduced.)
fn round_trip(object: &mut Object) {
    macro_rules! typed {
        ($($api_version:literal, $kind:literal => $type:ty;)*) => {
            let key = (object.api_version().to_string(), object.kind().to_string());
            match (key.0.as_str(), key.1.as_str()) {
                $(($api_version, $kind) => through::<$type>(object),)*
                _ => {}
            }
        };
    }
    typed! {
        "v1", "ConfigMap" => core::v1::ConfigMap;
        "v1", "Endpoints" => core::v1::Endpoints;
        "v1", "LimitRange" => core::v1::LimitRange;
        "v1", "Namespace" => core::v1::Namespace;
        "v1", "PersistentVolume" => core::v1::PersistentVolume;
        "v1", "PersistentVolumeClaim" => core::v1::PersistentVolumeClaim;
        "v1", "Pod" => core::v1::Pod;
        "v1", "PodTemplate" => core::v1::PodTemplate;
        "v1", "ReplicationController" => core::v1::ReplicationController;
        "v1", "ResourceQuota" => core::v1::ResourceQuota;
        "v1", "Secret" => core::v1::Secret;
        "v1", "Service" => core::v1::Service;
        "v1", "ServiceAccount" => core::v1::ServiceAccount;
        "apps/v1", "ControllerRevision" => apps::v1::ControllerRevision;
        "apps/v1", "DaemonSet" => apps::v1::DaemonSet;
        "apps/v1", "Deployment" => apps::v1::Deployment;
        "apps/v1", "ReplicaSet" => apps::v1::ReplicaSet;
        "apps/v1", "StatefulSet" => apps::v1::StatefulSet;
        "batch/v1", "CronJob" => batch::v1::CronJob;
        "batch/v1", "Job" => batch::v1::Job;
        "autoscaling/v1", "HorizontalPodAutoscaler" => autoscaling::v1::HorizontalPodAutoscaler;
        "autoscaling/v2", "HorizontalPodAutoscaler" => autoscaling::v2::HorizontalPodAutoscaler;
        "policy/v1", "PodDisruptionBudget" => policy::v1::PodDisruptionBudget;
        "networking.k8s.io/v1", "Ingress" => networking::v1::Ingress;
        "networking.k8s.io/v1", "IngressClass" => networking::v1::IngressClass;
        "networking.k8s.io/v1", "NetworkPolicy" => networking::v1::NetworkPolicy;
        "rbac.authorization.k8s.io/v1", "ClusterRoleBinding" => rbac::v1::ClusterRoleBinding;
        "rbac.authorization.k8s.io/v1", "RoleBinding" => rbac::v1::RoleBinding;
        "storage.k8s.io/v1", "CSIDriver" => storage::v1::CSIDriver;
        "storage.k8s.io/v1", "StorageClass" => storage::v1::StorageClass;
        "storage.k8s.io/v1", "VolumeAttachment" => storage::v1::VolumeAttachment;
        "scheduling.k8s.io/v1", "PriorityClass" => scheduling::v1::PriorityClass;
        "node.k8s.io/v1", "RuntimeClass" => node::v1::RuntimeClass;
        "coordination.k8s.io/v1", "Lease" => coordination::v1::Lease;
        "discovery.k8s.io/v1", "EndpointSlice" => discovery::v1::EndpointSlice;
        "admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration" =>
            admissionregistration::v1::MutatingWebhookConfiguration;
        "admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration" =>
            admissionregistration::v1::ValidatingWebhookConfiguration;
        "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy" =>
            admissionregistration::v1::ValidatingAdmissionPolicy;
        "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding" =>
            admissionregistration::v1::ValidatingAdmissionPolicyBinding;
    }
}

/// `object` through `T` and back, when `T` accepts it.
fn through<T: DeserializeOwned + Serialize>(object: &mut Object) {
    let mut input = Value::Object(object.as_map().clone());
    quantities_as_strings(&mut input, "");
    let typed = serde_json::to_vec(&input)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<T>(&bytes).ok());
    let back = typed
        .and_then(|typed| serde_json::to_vec(&typed).ok())
        .and_then(|bytes| serde_json::from_slice::<Map<String, Value>>(&bytes).ok());
    if let Some(map) = back {
        *object = Object::new(map);
    }
}

/// Whether `live` is a Secret whose `stringData` keys the Apply entry of `field_manager`
/// still owns although `configuration` (normalized) has none: it was applied before this
/// controller normalized. Such a Secret is applied once more even without drift, so that the
/// manager owns its `data` keys and a key the source drops later leaves the Secret.
pub(super) fn owns_stale_string_data(
    live: &Value,
    configuration: &Value,
    field_manager: &str,
) -> bool {
    let secret = live.get("apiVersion").and_then(Value::as_str) == Some("v1")
        && live.get("kind").and_then(Value::as_str) == Some("Secret");
    secret
        && configuration.get("stringData").is_none()
        && super::managed_fields::owned_fields(live, field_manager)
            .is_some_and(|fields| fields.get("f:stringData").is_some())
}

/// Whether `key` under `parent` holds quantities: a map of them, or (`sizeLimit`) one.
fn holds_quantities(parent: &str, key: &str) -> bool {
    matches!(
        (parent, key),
        ("resources", "limits" | "requests")
            | ("emptyDir", "sizeLimit")
            | ("overhead", "podFixed")
            | ("spec", "hard" | "capacity" | "overhead")
            | (
                "limits",
                "max" | "min" | "default" | "defaultRequest" | "maxLimitRequestRatio"
            )
    )
}

/// Numbers written as quantities (`cpu: 1`) turned into their text: Go's quantity type reads
/// both, k8s-openapi's only text. Only where the built-in types hold quantities, so that a
/// number anywhere else still makes the typed conversion fail, as in Go.
fn quantities_as_strings(value: &mut Value, parent: &str) {
    match value {
        Value::Object(map) => {
            for (key, field) in map.iter_mut() {
                if holds_quantities(parent, key) {
                    match field {
                        Value::Number(n) => *field = Value::from(n.to_string()),
                        Value::Object(entries) => {
                            for entry in entries.values_mut() {
                                if let Value::Number(n) = entry {
                                    *entry = Value::from(n.to_string());
                                }
                            }
                        }
                        _ => {}
                    }
                } else {
                    quantities_as_strings(field, key);
                }
            }
        }
        // Elements of a list are read under the list's key (`spec.limits[]` of a LimitRange).
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| quantities_as_strings(item, parent)),
        _ => {}
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
                       "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {"spec": {
                           "initContainers": [{"name": "i", "ports": [{"containerPort": 1}]}],
                           "containers": [{"name": "c", "resources": {},
                                           "ports": [{"containerPort": 80}]}]}}}}),
                json!({"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"name": "d", "creationTimestamp": null},
                       "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {"spec": {
                           "initContainers": [{"name": "i", "ports": [{"containerPort": 1}]}],
                           "containers": [{"name": "c", "resources": {},
                                           "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}}}}),
            ),
            (
                "CronJob job template containers get TCP, and the required schedule a zero value, as in Go",
                json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
                       "spec": {"jobTemplate": {"spec": {"template": {"spec": {
                           "containers": [{"name": "c", "ports": [{"containerPort": 9}]}]}}}}}}),
                json!({"apiVersion": "batch/v1", "kind": "CronJob",
                       "metadata": {"name": "c", "creationTimestamp": null},
                       "spec": {"jobTemplate": {"spec": {"template": {"spec": {
                           "containers": [{"name": "c",
                                           "ports": [{"containerPort": 9, "protocol": "TCP"}]}]}}}},
                                "schedule": ""}}),
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
    fn built_in_kinds_lose_fields_their_type_does_not_have() {
        let cases = [
            (
                "an unknown Deployment field is dropped, the rest kept",
                json!({"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"name": "d", "labels": {"app": "d"}},
                       "spec": {"replica": 2, "replicas": 1,
                                "selector": {"matchLabels": {"app": "d"}},
                                "template": {"metadata": {"labels": {"app": "d"}},
                                             "spec": {"containers": [{"name": "c", "image": "i",
                                                                      "imagePullPolicy": "Always",
                                                                      "resources": {}}]}}}}),
                json!({"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"name": "d", "labels": {"app": "d"}, "creationTimestamp": null},
                       "spec": {"replicas": 1,
                                "selector": {"matchLabels": {"app": "d"}},
                                "template": {"metadata": {"labels": {"app": "d"}},
                                             "spec": {"containers": [{"name": "c", "image": "i",
                                                                      "imagePullPolicy": "Always",
                                                                      "resources": {}}]}}}}),
            ),
            (
                "a ConfigMap's unknown top-level field is dropped",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                       "data": {"k": "v"}, "extra": true}),
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "c", "creationTimestamp": null},
                       "data": {"k": "v"}}),
            ),
            (
                "what the type refuses is left whole for the API server",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                       "data": {"k": 1}, "extra": true}),
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "c", "creationTimestamp": null},
                       "data": {"k": 1}, "extra": true}),
            ),
            (
                "a Secret's sops metadata does not survive, as in Flux",
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                       "stringData": {"a": "x"}, "sops": {"version": "3"}}),
                json!({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "s", "creationTimestamp": null},
                       "data": {"a": "eA=="}}),
            ),
            (
                "quantities written as numbers do not stop the conversion",
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                       "spec": {"containers": [{"name": "c", "typo": 1,
                                                "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}}],
                                "volumes": [{"name": "v", "emptyDir": {"sizeLimit": 2}}]}}),
                json!({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "p", "creationTimestamp": null},
                       "spec": {"containers": [{"name": "c",
                                                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
                                "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "2"}}]}}),
            ),
            (
                "a number where the type wants text is still refused whole",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                       "data": {"sizeLimit": 1, "hard": 2}, "extra": true}),
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "c", "creationTimestamp": null},
                       "data": {"sizeLimit": 1, "hard": 2}, "extra": true}),
            ),
            (
                "LimitRange and ResourceQuota quantities",
                json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"},
                       "spec": {"limits": [{"type": "Container", "max": {"cpu": 2},
                                            "default": {"cpu": 0.5}}]}}),
                json!({"apiVersion": "v1", "kind": "LimitRange",
                       "metadata": {"name": "l", "creationTimestamp": null},
                       "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"},
                                            "default": {"cpu": "0.5"}}]}}),
            ),
            (
                "custom resources keep unknown fields",
                json!({"apiVersion": "example.com/v1", "kind": "Deployment",
                       "metadata": {"name": "d"}, "spec": {"replica": 2}}),
                json!({"apiVersion": "example.com/v1", "kind": "Deployment",
                       "metadata": {"name": "d", "creationTimestamp": null},
                       "spec": {"replica": 2}}),
            ),
        ];
        for (case, input, want) in cases {
            assert_eq!(normalized(input), want, "{case}");
        }
    }

    #[test]
    fn secrets_applied_before_normalization_are_found() {
        let live = |manager: &str, operation: &str| {
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s",
                   "managedFields": [{"manager": manager, "operation": operation,
                                      "fieldsV1": {"f:stringData": {"f:a": {}}}}]}})
        };
        let normalized = json!({"apiVersion": "v1", "kind": "Secret", "data": {"a": "eA=="}});
        let manager = "kustomize-controller";
        assert!(owns_stale_string_data(
            &live(manager, "Apply"),
            &normalized,
            manager
        ));
        assert!(!owns_stale_string_data(
            &live("kubectl", "Apply"),
            &normalized,
            manager
        ));
        assert!(!owns_stale_string_data(
            &live(manager, "Update"),
            &normalized,
            manager
        ));
        let unconverted = json!({"apiVersion": "v1", "kind": "Secret", "stringData": {"a": 1}});
        assert!(!owns_stale_string_data(
            &live(manager, "Apply"),
            &unconverted,
            manager
        ));
    }

    #[test]
    fn go_ignores_line_breaks_in_base64() {
        assert!(is_base64(&json!("YWJj\nZGVm")));
        assert!(!is_base64(&json!("YWJj ZGVm")));
        assert!(!is_base64(&json!(3)));
    }
}
