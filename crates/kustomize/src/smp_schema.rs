//! Patch metadata of the Kubernetes kinds, as kustomize sees it.
//!
//! kustomize merges lists by key only where the OpenAPI document in use declares a merge patch
//! strategy. By default that is the document it embeds (Kubernetes v1.21.2); this module
//! encodes just the facts of it that matter for a strategic merge: which list fields are
//! merged, by which keys, and the chain of object fields that leads to them from each built-in
//! kind. Every other field of a known kind is "known, nothing to merge"; kinds not listed
//! (custom resources, API versions newer than v1.21 such as `autoscaling/v2`) have no schema.
//!
//! A kustomization may name its own OpenAPI v2 document (`openapi: {path: file}`), parsed into
//! a [`CustomSchema`]: its `definitions` that carry `x-kubernetes-group-version-kind` give
//! kinds a schema, and `x-kubernetes-patch-strategy`, `x-kubernetes-patch-merge-key` and
//! `x-kubernetes-list-map-keys` give lists their merge keys. kustomize adds such a document's
//! definitions to the embedded ones, so a [`SchemaSet`] consults the custom document first (by
//! kind and by `$ref` definition name) and falls back to the built-in facts.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// How deep `$ref` chains are followed before giving up (a guard against cycles).
const MAX_REF_DEPTH: usize = 64;

/// The JSON pointer prefix of references to definitions of the same document.
const DEFINITIONS_REF: &str = "#/definitions/";

const GVK_EXTENSION: &str = "x-kubernetes-group-version-kind";
const PATCH_STRATEGY_EXTENSION: &str = "x-kubernetes-patch-strategy";
const MERGE_KEY_EXTENSION: &str = "x-kubernetes-patch-merge-key";
const LIST_MAP_KEYS_EXTENSION: &str = "x-kubernetes-list-map-keys";

/// Why a custom OpenAPI document could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The document is not a valid OpenAPI v2 document.
    #[error("invalid OpenAPI schema file {file}: {message}")]
    Invalid {
        /// The file, as the kustomization names it.
        file: String,
        /// What is wrong.
        message: String,
    },
}

/// A custom OpenAPI v2 document: its definitions, and which of them describe which kinds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CustomSchema {
    /// `definitions`, by name.
    definitions: HashMap<String, Value>,
    /// Definition names by (`apiVersion`, `kind`), from `x-kubernetes-group-version-kind`.
    kinds: HashMap<(String, String), String>,
}

impl CustomSchema {
    /// Parses an OpenAPI document, JSON when it starts with `{`, YAML otherwise (as kustomize
    /// decides). `file` names the document in errors.
    pub fn parse(text: &str, file: &str) -> Result<Self, SchemaError> {
        let invalid = |message: String| SchemaError::Invalid {
            file: file.to_string(),
            message,
        };
        if text.is_empty() {
            return Err(invalid("the file is empty".to_string()));
        }
        let doc = if text.starts_with('{') {
            serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?
        } else {
            let mut docs = goyaml::parse_documents(text).map_err(|e| invalid(e.to_string()))?;
            if docs.is_empty() {
                Value::Null
            } else {
                docs.swap_remove(0)
            }
        };
        let definitions = match doc {
            Value::Null => Map::new(),
            Value::Object(mut doc) => match doc.shift_remove("definitions") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(definitions)) => definitions,
                Some(_) => return Err(invalid("`definitions` is not a map".to_string())),
            },
            _ => return Err(invalid("the document is not a map".to_string())),
        };
        let mut schema = CustomSchema::default();
        for (name, definition) in definitions {
            let Value::Object(fields) = &definition else {
                return Err(invalid(format!("definition {name:?} is not a map")));
            };
            for (api_version, kind) in kinds_of(fields) {
                schema.kinds.insert((api_version, kind), name.clone());
            }
            schema.definitions.insert(name, definition);
        }
        Ok(schema)
    }

    /// The number of definitions.
    pub fn len(&self) -> usize {
        self.definitions.len()
    }

    /// Whether the document has no definitions.
    pub fn is_empty(&self) -> bool {
        self.definitions.is_empty()
    }
}

/// The (`apiVersion`, `kind`) pairs a definition's `x-kubernetes-group-version-kind` names;
/// malformed entries are skipped.
fn kinds_of(definition: &Map<String, Value>) -> Vec<(String, String)> {
    let Some(Value::Array(entries)) = definition.get(GVK_EXTENSION) else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|entry| {
            let version = entry.get("version")?.as_str()?;
            let kind = entry.get("kind")?.as_str()?;
            let api_version = match entry.get("group").and_then(Value::as_str) {
                Some(group) if !group.is_empty() => format!("{group}/{version}"),
                _ => version.to_string(),
            };
            Some((api_version, kind.to_string()))
        })
        .collect()
}

/// The schemas a strategic merge consults: the built-in facts, extended by a custom document
/// when the build has one.
#[derive(Clone, Copy, Debug, Default)]
pub struct SchemaSet<'a> {
    custom: Option<&'a CustomSchema>,
}

impl<'a> SchemaSet<'a> {
    /// Only the built-in Kubernetes v1.21.2 facts.
    pub fn builtin() -> Self {
        SchemaSet { custom: None }
    }

    /// `custom` first, then the built-in facts.
    pub fn with_custom(custom: &'a CustomSchema) -> Self {
        SchemaSet {
            custom: Some(custom),
        }
    }

    /// The custom document, when there is one.
    pub fn custom(self) -> Option<&'a CustomSchema> {
        self.custom
    }

    /// The schema of a whole object of `apiVersion`/`kind`: the custom document's definition
    /// for that kind, else the built-in one, else [`Schema::is_unknown`].
    pub fn for_kind(self, api_version: &str, kind: &str) -> Schema<'a> {
        let custom = self.custom.and_then(|custom| {
            let key = (api_version.to_string(), kind.to_string());
            custom
                .kinds
                .get(&key)
                .and_then(|name| custom.definitions.get(name))
        });
        match custom {
            Some(definition) => self.resolve(definition),
            None => self.at(builtin_kind(api_version, kind).map_or(At::Unknown, At::Builtin)),
        }
    }

    fn at(self, at: At<'a>) -> Schema<'a> {
        Schema { set: self, at }
    }

    /// The schema a custom schema node stands for, following `$ref`s: to the custom
    /// definitions first, then to the built-in types of the same name.
    fn resolve(self, node: &'a Value) -> Schema<'a> {
        let mut node = node;
        for _ in 0..MAX_REF_DEPTH {
            let Value::Object(fields) = node else {
                return self.at(At::Unknown);
            };
            let reference = match fields.get("$ref") {
                None => return self.at(At::Custom(fields)),
                Some(Value::String(reference)) => reference,
                Some(_) => return self.at(At::Unknown),
            };
            let Some(name) = reference.strip_prefix(DEFINITIONS_REF) else {
                return self.at(At::Unknown);
            };
            let name = name.replace("~1", "/").replace("~0", "~");
            match self.custom.and_then(|c| c.definitions.get(&name)) {
                Some(definition) => node = definition,
                None => {
                    return self.at(builtin_definition(&name).map_or(At::Unknown, At::Builtin));
                }
            }
        }
        self.at(At::Unknown)
    }
}

/// Where a strategic merge stands in the schema.
#[derive(Clone, Copy, Debug)]
pub struct Schema<'a> {
    set: SchemaSet<'a>,
    at: At<'a>,
}

/// A position in the schema.
#[derive(Clone, Copy, Debug)]
enum At<'a> {
    /// No schema: lists are replaced whole, and maps that name their own `apiVersion`/`kind`
    /// take that kind's schema.
    Unknown,
    /// A position in the built-in facts.
    Builtin(Node),
    /// A schema object of the custom document (references resolved).
    Custom(&'a Map<String, Value>),
}

/// A position in the built-in facts.
#[derive(Clone, Copy, Debug)]
enum Node {
    /// A known field with no merge metadata anywhere below it.
    Opaque,
    /// An object type with fields that lead to merge metadata.
    Object(&'static TypeDef),
    /// A list merged by key (or, with no keys, a merged list of primitives).
    MergeList(&'static ListDef),
}

/// An object type: only the fields leading to merge metadata are listed.
#[derive(Debug)]
struct TypeDef {
    fields: &'static [(&'static str, Node)],
}

/// A list field with the `merge` patch strategy.
#[derive(Debug)]
struct ListDef {
    /// The keys identifying an element (`x-kubernetes-list-map-keys`, else the merge key);
    /// empty for a list of primitives.
    keys: &'static [&'static str],
    /// The element type, when it has merge metadata of its own.
    elem: Option<&'static TypeDef>,
}

impl<'a> Schema<'a> {
    /// The schemas this position belongs to (to look up the kinds of embedded objects).
    pub fn set(self) -> SchemaSet<'a> {
        self.set
    }

    /// Whether there is no schema at this position.
    pub fn is_unknown(self) -> bool {
        matches!(self.at, At::Unknown)
    }

    /// The schema of field `name` of an object at this position.
    pub fn field(self, name: &str) -> Schema<'a> {
        match self.at {
            At::Unknown => self,
            At::Builtin(node) => self.set.at(At::Builtin(builtin_field(node, name))),
            At::Custom(fields) => {
                let property = fields
                    .get("properties")
                    .and_then(Value::as_object)
                    .and_then(|properties| properties.get(name));
                match (property, fields.get("additionalProperties")) {
                    (Some(property), _) => self.set.resolve(property),
                    (None, Some(values @ Value::Object(_))) => self.set.resolve(values),
                    _ => self.set.at(At::Unknown),
                }
            }
        }
    }

    /// The schema of the elements of a list at this position.
    pub fn elements(self) -> Schema<'a> {
        match self.at {
            At::Unknown => self,
            At::Builtin(Node::MergeList(list)) => self
                .set
                .at(At::Builtin(list.elem.map_or(Node::Opaque, Node::Object))),
            At::Builtin(_) => self.set.at(At::Builtin(Node::Opaque)),
            At::Custom(fields) => match fields.get("items") {
                Some(items @ Value::Object(_)) if is_array_type(fields) => self.set.resolve(items),
                _ => self.set.at(At::Unknown),
            },
        }
    }

    /// The merge keys, when this position is a list merged by key or (no keys) by value.
    pub fn merge_keys(self) -> Option<Vec<String>> {
        match self.at {
            At::Builtin(Node::MergeList(list)) => {
                Some(list.keys.iter().map(|k| k.to_string()).collect())
            }
            At::Custom(fields) => custom_merge_keys(fields),
            At::Unknown | At::Builtin(_) => None,
        }
    }
}

fn builtin_field(node: Node, name: &str) -> Node {
    match node {
        Node::Object(def) => def
            .fields
            .iter()
            .find(|(field, _)| *field == name)
            .map_or(Node::Opaque, |(_, node)| *node),
        Node::Opaque | Node::MergeList(_) => Node::Opaque,
    }
}

/// Whether a schema object's `type` is exactly `array`.
fn is_array_type(fields: &Map<String, Value>) -> bool {
    match fields.get("type") {
        Some(Value::String(t)) => t == "array",
        Some(Value::Array(types)) => types.len() == 1 && types[0] == "array",
        _ => false,
    }
}

/// The merge keys of a custom schema object: only when its patch strategy includes `merge`;
/// `x-kubernetes-list-map-keys` before `x-kubernetes-patch-merge-key`.
fn custom_merge_keys(fields: &Map<String, Value>) -> Option<Vec<String>> {
    let strategy = fields.get(PATCH_STRATEGY_EXTENSION)?.as_str()?;
    if !strategy.split(',').any(|s| s == "merge") {
        return None;
    }
    if let Some(Value::Array(keys)) = fields.get(LIST_MAP_KEYS_EXTENSION) {
        return Some(
            keys.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
        );
    }
    match fields.get(MERGE_KEY_EXTENSION).and_then(Value::as_str) {
        Some(key) => Some(vec![key.to_string()]),
        None => Some(Vec::new()),
    }
}

// Lists merged by value or by key whose elements have no further metadata.
const FINALIZERS: ListDef = ListDef {
    keys: &[],
    elem: None,
};
const BY_TYPE: ListDef = ListDef {
    keys: &["type"],
    elem: None,
};
const BY_NAME: ListDef = ListDef {
    keys: &["name"],
    elem: None,
};

const BY_CONTAINER_PORT_PROTOCOL: ListDef = ListDef {
    keys: &["containerPort", "protocol"],
    elem: None,
};
const BY_DEVICE_PATH: ListDef = ListDef {
    keys: &["devicePath"],
    elem: None,
};
const BY_IP: ListDef = ListDef {
    keys: &["ip"],
    elem: None,
};
const BY_MOUNT_PATH: ListDef = ListDef {
    keys: &["mountPath"],
    elem: None,
};
const BY_PORT_PROTOCOL: ListDef = ListDef {
    keys: &["port", "protocol"],
    elem: None,
};
const BY_TOPOLOGY_KEY_WHEN_UNSATISFIABLE: ListDef = ListDef {
    keys: &["topologyKey", "whenUnsatisfiable"],
    elem: None,
};
const BY_UID: ListDef = ListDef {
    keys: &["uid"],
    elem: None,
};

static OBJECT_META: TypeDef = TypeDef {
    fields: &[
        ("finalizers", Node::MergeList(&FINALIZERS)),
        ("ownerReferences", Node::MergeList(&BY_UID)),
    ],
};

/// A kind whose only merge metadata is in `metadata`.
static META_ONLY: TypeDef = TypeDef {
    fields: &[("metadata", Node::Object(&OBJECT_META))],
};

/// A `status` holding `conditions` merged by `type`.
static CONDITIONS_STATUS: TypeDef = TypeDef {
    fields: &[("conditions", Node::MergeList(&BY_TYPE))],
};

static CONTAINER: TypeDef = TypeDef {
    fields: &[
        ("env", Node::MergeList(&BY_NAME)),
        ("ports", Node::MergeList(&BY_CONTAINER_PORT_PROTOCOL)),
        ("volumeDevices", Node::MergeList(&BY_DEVICE_PATH)),
        ("volumeMounts", Node::MergeList(&BY_MOUNT_PATH)),
    ],
};

static EPHEMERAL_CONTAINER: TypeDef = TypeDef {
    fields: &[
        ("env", Node::MergeList(&BY_NAME)),
        ("volumeDevices", Node::MergeList(&BY_DEVICE_PATH)),
        ("volumeMounts", Node::MergeList(&BY_MOUNT_PATH)),
    ],
};

static EPHEMERAL_VOLUME_SOURCE: TypeDef = TypeDef {
    fields: &[("volumeClaimTemplate", Node::Object(&META_ONLY))],
};

static VOLUME: TypeDef = TypeDef {
    fields: &[("ephemeral", Node::Object(&EPHEMERAL_VOLUME_SOURCE))],
};

static POD_SPEC: TypeDef = TypeDef {
    fields: &[
        (
            "containers",
            Node::MergeList(&ListDef {
                keys: &["name"],
                elem: Some(&CONTAINER),
            }),
        ),
        (
            "ephemeralContainers",
            Node::MergeList(&ListDef {
                keys: &["name"],
                elem: Some(&EPHEMERAL_CONTAINER),
            }),
        ),
        ("hostAliases", Node::MergeList(&BY_IP)),
        ("imagePullSecrets", Node::MergeList(&BY_NAME)),
        (
            "initContainers",
            Node::MergeList(&ListDef {
                keys: &["name"],
                elem: Some(&CONTAINER),
            }),
        ),
        (
            "topologySpreadConstraints",
            Node::MergeList(&BY_TOPOLOGY_KEY_WHEN_UNSATISFIABLE),
        ),
        (
            "volumes",
            Node::MergeList(&ListDef {
                keys: &["name"],
                elem: Some(&VOLUME),
            }),
        ),
    ],
};

static POD_STATUS: TypeDef = TypeDef {
    fields: &[
        ("conditions", Node::MergeList(&BY_TYPE)),
        ("podIPs", Node::MergeList(&BY_IP)),
    ],
};

static POD: TypeDef = TypeDef {
    fields: &[
        ("metadata", Node::Object(&OBJECT_META)),
        ("spec", Node::Object(&POD_SPEC)),
        ("status", Node::Object(&POD_STATUS)),
    ],
};

static POD_TEMPLATE_SPEC: TypeDef = TypeDef {
    fields: &[
        ("metadata", Node::Object(&OBJECT_META)),
        ("spec", Node::Object(&POD_SPEC)),
    ],
};

static POD_TEMPLATE: TypeDef = TypeDef {
    fields: &[
        ("metadata", Node::Object(&OBJECT_META)),
        ("template", Node::Object(&POD_TEMPLATE_SPEC)),
    ],
};

/// The `spec` of the workload kinds: a pod `template`.
static WORKLOAD_SPEC: TypeDef = TypeDef {
    fields: &[("template", Node::Object(&POD_TEMPLATE_SPEC))],
};

/// DaemonSet, Deployment, ReplicaSet, StatefulSet, Job, ReplicationController.
static WORKLOAD: TypeDef = TypeDef {
    fields: &[
        ("metadata", Node::Object(&OBJECT_META)),
        ("spec", Node::Object(&WORKLOAD_SPEC)),
        ("status", Node::Object(&CONDITIONS_STATUS)),
    ],
};

static JOB_TEMPLATE_SPEC: TypeDef = TypeDef {
    fields: &[
        ("metadata", Node::Object(&OBJECT_META)),
        ("spec", Node::Object(&WORKLOAD_SPEC)),
    ],
};

static CRON_JOB_SPEC: TypeDef = TypeDef {
    fields: &[("jobTemplate", Node::Object(&JOB_TEMPLATE_SPEC))],
};

static CRON_JOB: TypeDef = TypeDef {
    fields: &[
        ("metadata", Node::Object(&OBJECT_META)),
        ("spec", Node::Object(&CRON_JOB_SPEC)),
    ],
};

/// Kinds with metadata and a `status.conditions` list (Namespace, PVC, PDB, APIService).
static WITH_CONDITIONS: TypeDef = TypeDef {
    fields: &[
        ("metadata", Node::Object(&OBJECT_META)),
        ("status", Node::Object(&CONDITIONS_STATUS)),
    ],
};

static COMPONENT_STATUS: TypeDef = TypeDef {
    fields: &[
        ("conditions", Node::MergeList(&BY_TYPE)),
        ("metadata", Node::Object(&OBJECT_META)),
    ],
};

static NODE_SPEC: TypeDef = TypeDef {
    fields: &[("podCIDRs", Node::MergeList(&FINALIZERS))],
};

static NODE_STATUS: TypeDef = TypeDef {
    fields: &[
        ("addresses", Node::MergeList(&BY_TYPE)),
        ("conditions", Node::MergeList(&BY_TYPE)),
    ],
};

static NODE: TypeDef = TypeDef {
    fields: &[
        ("metadata", Node::Object(&OBJECT_META)),
        ("spec", Node::Object(&NODE_SPEC)),
        ("status", Node::Object(&NODE_STATUS)),
    ],
};

static SERVICE_SPEC: TypeDef = TypeDef {
    fields: &[("ports", Node::MergeList(&BY_PORT_PROTOCOL))],
};

static SERVICE: TypeDef = TypeDef {
    fields: &[
        ("metadata", Node::Object(&OBJECT_META)),
        ("spec", Node::Object(&SERVICE_SPEC)),
        ("status", Node::Object(&CONDITIONS_STATUS)),
    ],
};

static SERVICE_ACCOUNT: TypeDef = TypeDef {
    fields: &[
        ("metadata", Node::Object(&OBJECT_META)),
        ("secrets", Node::MergeList(&BY_NAME)),
    ],
};

static WEBHOOK_CONFIGURATION: TypeDef = TypeDef {
    fields: &[
        ("metadata", Node::Object(&OBJECT_META)),
        ("webhooks", Node::MergeList(&BY_NAME)),
    ],
};

static CSI_NODE_SPEC: TypeDef = TypeDef {
    fields: &[("drivers", Node::MergeList(&BY_NAME))],
};

static CSI_NODE: TypeDef = TypeDef {
    fields: &[
        ("metadata", Node::Object(&OBJECT_META)),
        ("spec", Node::Object(&CSI_NODE_SPEC)),
    ],
};

/// Kinds of the v1.21.2 API whose merge metadata goes beyond `metadata`, by API version.
const KINDS: &[(&str, &str, &TypeDef)] = &[
    ("v1", "Pod", &POD),
    ("v1", "PodTemplate", &POD_TEMPLATE),
    ("v1", "ReplicationController", &WORKLOAD),
    ("apps/v1", "DaemonSet", &WORKLOAD),
    ("apps/v1", "Deployment", &WORKLOAD),
    ("apps/v1", "ReplicaSet", &WORKLOAD),
    ("apps/v1", "StatefulSet", &WORKLOAD),
    ("batch/v1", "Job", &WORKLOAD),
    ("batch/v1", "CronJob", &CRON_JOB),
    ("batch/v1beta1", "CronJob", &CRON_JOB),
    ("v1", "Service", &SERVICE),
    ("v1", "ServiceAccount", &SERVICE_ACCOUNT),
    ("v1", "Namespace", &WITH_CONDITIONS),
    ("v1", "PersistentVolumeClaim", &WITH_CONDITIONS),
    ("v1", "ComponentStatus", &COMPONENT_STATUS),
    ("v1", "Node", &NODE),
    ("policy/v1", "PodDisruptionBudget", &WITH_CONDITIONS),
    ("policy/v1beta1", "PodDisruptionBudget", &WITH_CONDITIONS),
    ("apiregistration.k8s.io/v1", "APIService", &WITH_CONDITIONS),
    (
        "apiregistration.k8s.io/v1beta1",
        "APIService",
        &WITH_CONDITIONS,
    ),
    (
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        &WEBHOOK_CONFIGURATION,
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        &WEBHOOK_CONFIGURATION,
    ),
    (
        "admissionregistration.k8s.io/v1beta1",
        "MutatingWebhookConfiguration",
        &WEBHOOK_CONFIGURATION,
    ),
    (
        "admissionregistration.k8s.io/v1beta1",
        "ValidatingWebhookConfiguration",
        &WEBHOOK_CONFIGURATION,
    ),
    ("storage.k8s.io/v1", "CSINode", &CSI_NODE),
    ("storage.k8s.io/v1beta1", "CSINode", &CSI_NODE),
];

/// Kinds of the v1.21.2 API that only carry `metadata` merge metadata, grouped by API
/// version.
const METADATA_ONLY_KINDS: &[(&str, &[&str])] = &[
    (
        "v1",
        &[
            "Binding",
            "ConfigMap",
            "Endpoints",
            "Event",
            "LimitRange",
            "PersistentVolume",
            "ResourceQuota",
            "Secret",
        ],
    ),
    ("apps/v1", &["ControllerRevision"]),
    ("authentication.k8s.io/v1", &["TokenRequest", "TokenReview"]),
    ("authentication.k8s.io/v1beta1", &["TokenReview"]),
    (
        "authorization.k8s.io/v1",
        &[
            "LocalSubjectAccessReview",
            "SelfSubjectAccessReview",
            "SelfSubjectRulesReview",
            "SubjectAccessReview",
        ],
    ),
    (
        "authorization.k8s.io/v1beta1",
        &[
            "LocalSubjectAccessReview",
            "SelfSubjectAccessReview",
            "SelfSubjectRulesReview",
            "SubjectAccessReview",
        ],
    ),
    ("autoscaling/v1", &["HorizontalPodAutoscaler", "Scale"]),
    ("autoscaling/v2beta1", &["HorizontalPodAutoscaler"]),
    ("autoscaling/v2beta2", &["HorizontalPodAutoscaler"]),
    ("certificates.k8s.io/v1", &["CertificateSigningRequest"]),
    (
        "certificates.k8s.io/v1beta1",
        &["CertificateSigningRequest"],
    ),
    ("coordination.k8s.io/v1", &["Lease"]),
    ("coordination.k8s.io/v1beta1", &["Lease"]),
    ("discovery.k8s.io/v1", &["EndpointSlice"]),
    ("discovery.k8s.io/v1beta1", &["EndpointSlice"]),
    ("events.k8s.io/v1", &["Event"]),
    ("events.k8s.io/v1beta1", &["Event"]),
    ("extensions/v1beta1", &["Ingress"]),
    (
        "flowcontrol.apiserver.k8s.io/v1beta1",
        &["FlowSchema", "PriorityLevelConfiguration"],
    ),
    (
        "networking.k8s.io/v1",
        &["Ingress", "IngressClass", "NetworkPolicy"],
    ),
    ("networking.k8s.io/v1beta1", &["Ingress", "IngressClass"]),
    ("node.k8s.io/v1", &["RuntimeClass"]),
    ("node.k8s.io/v1beta1", &["RuntimeClass"]),
    ("policy/v1beta1", &["Eviction", "PodSecurityPolicy"]),
    (
        "rbac.authorization.k8s.io/v1",
        &["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"],
    ),
    (
        "rbac.authorization.k8s.io/v1beta1",
        &["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"],
    ),
    ("scheduling.k8s.io/v1", &["PriorityClass"]),
    ("scheduling.k8s.io/v1beta1", &["PriorityClass"]),
    (
        "storage.k8s.io/v1",
        &["CSIDriver", "StorageClass", "VolumeAttachment"],
    ),
    (
        "storage.k8s.io/v1beta1",
        &[
            "CSIDriver",
            "CSIStorageCapacity",
            "StorageClass",
            "VolumeAttachment",
        ],
    ),
    ("apiextensions.k8s.io/v1", &["CustomResourceDefinition"]),
    (
        "apiextensions.k8s.io/v1beta1",
        &["CustomResourceDefinition"],
    ),
];

/// Built-in types other than whole kinds, by their definition name in the Kubernetes OpenAPI
/// document (what a custom document's `$ref`s name).
const DEFINITIONS: &[(&str, Node)] = &[
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        Node::Object(&OBJECT_META),
    ),
    (
        "io.k8s.api.core.v1.PodTemplateSpec",
        Node::Object(&POD_TEMPLATE_SPEC),
    ),
    ("io.k8s.api.core.v1.PodSpec", Node::Object(&POD_SPEC)),
    ("io.k8s.api.core.v1.PodStatus", Node::Object(&POD_STATUS)),
    ("io.k8s.api.core.v1.Container", Node::Object(&CONTAINER)),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        Node::Object(&EPHEMERAL_CONTAINER),
    ),
    ("io.k8s.api.core.v1.Volume", Node::Object(&VOLUME)),
    (
        "io.k8s.api.core.v1.EphemeralVolumeSource",
        Node::Object(&EPHEMERAL_VOLUME_SOURCE),
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimTemplate",
        Node::Object(&META_ONLY),
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        Node::Object(&SERVICE_SPEC),
    ),
    ("io.k8s.api.core.v1.NodeSpec", Node::Object(&NODE_SPEC)),
    ("io.k8s.api.core.v1.NodeStatus", Node::Object(&NODE_STATUS)),
    (
        "io.k8s.api.core.v1.ReplicationControllerSpec",
        Node::Object(&WORKLOAD_SPEC),
    ),
    (
        "io.k8s.api.apps.v1.DaemonSetSpec",
        Node::Object(&WORKLOAD_SPEC),
    ),
    (
        "io.k8s.api.apps.v1.DeploymentSpec",
        Node::Object(&WORKLOAD_SPEC),
    ),
    (
        "io.k8s.api.apps.v1.ReplicaSetSpec",
        Node::Object(&WORKLOAD_SPEC),
    ),
    (
        "io.k8s.api.apps.v1.StatefulSetSpec",
        Node::Object(&WORKLOAD_SPEC),
    ),
    ("io.k8s.api.batch.v1.JobSpec", Node::Object(&WORKLOAD_SPEC)),
    (
        "io.k8s.api.batch.v1.JobTemplateSpec",
        Node::Object(&JOB_TEMPLATE_SPEC),
    ),
    (
        "io.k8s.api.batch.v1beta1.JobTemplateSpec",
        Node::Object(&JOB_TEMPLATE_SPEC),
    ),
    (
        "io.k8s.api.batch.v1.CronJobSpec",
        Node::Object(&CRON_JOB_SPEC),
    ),
    (
        "io.k8s.api.batch.v1beta1.CronJobSpec",
        Node::Object(&CRON_JOB_SPEC),
    ),
    (
        "io.k8s.api.storage.v1.CSINodeSpec",
        Node::Object(&CSI_NODE_SPEC),
    ),
    (
        "io.k8s.api.storage.v1beta1.CSINodeSpec",
        Node::Object(&CSI_NODE_SPEC),
    ),
];

/// The facts of a built-in kind.
fn builtin_kind(api_version: &str, kind: &str) -> Option<Node> {
    if let Some((_, _, def)) = KINDS
        .iter()
        .find(|(av, k, _)| *av == api_version && *k == kind)
    {
        return Some(Node::Object(def));
    }
    METADATA_ONLY_KINDS
        .iter()
        .any(|(av, kinds)| *av == api_version && kinds.contains(&kind))
        .then_some(Node::Object(&META_ONLY))
}

/// The facts of the built-in type of definition `name`: a listed type, or a kind named
/// `io.k8s.<...>.<group>.<version>.<Kind>` (the group's first label; `core` for the core
/// group). `None` for a type without merge metadata or an unknown one.
fn builtin_definition(name: &str) -> Option<Node> {
    if let Some((_, node)) = DEFINITIONS.iter().find(|(n, _)| *n == name) {
        return Some(*node);
    }
    let rest = name.strip_prefix("io.k8s.")?;
    let mut parts = rest.rsplitn(4, '.');
    let (kind, version, group) = (parts.next()?, parts.next()?, parts.next()?);
    let api_versions = KINDS
        .iter()
        .filter(|(_, k, _)| *k == kind)
        .map(|(av, _, _)| *av)
        .chain(
            METADATA_ONLY_KINDS
                .iter()
                .filter(|(_, kinds)| kinds.contains(&kind))
                .map(|(av, _)| *av),
        );
    let api_version = api_versions
        .into_iter()
        .find(|av| api_version_matches(av, group, version))?;
    builtin_kind(api_version, kind)
}

/// Whether `api_version` has version `version` and a group whose first label is `group`.
fn api_version_matches(api_version: &str, group: &str, version: &str) -> bool {
    let (full_group, v) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let first_label = if full_group.is_empty() {
        "core"
    } else {
        full_group.split('.').next().unwrap_or("")
    };
    v == version && first_label == group
}

/// The built-in schema of a whole object of `apiVersion`/`kind`: unknown for kinds the
/// embedded Kubernetes v1.21.2 API does not define.
pub fn root_schema(api_version: &str, kind: &str) -> Schema<'static> {
    SchemaSet::builtin().for_kind(api_version, kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys_in(schema: Schema<'_>, path: &[&str]) -> Option<Vec<String>> {
        let mut schema = schema;
        for segment in path {
            schema = if *segment == "[]" {
                schema.elements()
            } else {
                schema.field(segment)
            };
        }
        schema.merge_keys()
    }

    fn keys_at(api_version: &str, kind: &str, path: &[&str]) -> Option<Vec<String>> {
        keys_in(root_schema(api_version, kind), path)
    }

    fn strings(items: &[&str]) -> Option<Vec<String>> {
        Some(items.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn knows_merge_keys_of_builtin_kinds() {
        let containers = ["spec", "template", "spec", "containers"];
        assert_eq!(
            keys_at("apps/v1", "Deployment", &containers),
            strings(&["name"])
        );
        let ports = ["spec", "template", "spec", "containers", "[]", "ports"];
        assert_eq!(
            keys_at("apps/v1", "StatefulSet", &ports),
            strings(&["containerPort", "protocol"])
        );
        assert_eq!(
            keys_at("v1", "Service", &["spec", "ports"]),
            strings(&["port", "protocol"])
        );
        let cron = ["spec", "jobTemplate", "spec", "template", "spec", "volumes"];
        assert_eq!(
            keys_at("batch/v1beta1", "CronJob", &cron),
            strings(&["name"])
        );
        assert_eq!(
            keys_at("v1", "ConfigMap", &["metadata", "finalizers"]),
            strings(&[])
        );
    }

    #[test]
    fn lists_without_strategy_or_schema_have_no_keys() {
        let env_from = ["spec", "template", "spec", "containers", "[]", "envFrom"];
        assert_eq!(keys_at("apps/v1", "Deployment", &env_from), None);
        let tolerations = ["spec", "template", "spec", "tolerations"];
        assert_eq!(keys_at("apps/v1", "Deployment", &tolerations), None);
        assert!(root_schema("autoscaling/v2", "HorizontalPodAutoscaler").is_unknown());
        assert!(root_schema("example.com/v1", "Widget").is_unknown());
        assert!(root_schema("extensions/v1beta1", "Deployment").is_unknown());
    }

    const WIDGET_JSON: &str = r##"{
      "definitions": {
        "com.example.v1.Widget": {
          "type": "object",
          "properties": {
            "spec": {"$ref": "#/definitions/com.example.v1.WidgetSpec"}
          },
          "x-kubernetes-group-version-kind": [
            {"group": "example.com", "version": "v1", "kind": "Widget"},
            {"group": "", "version": "v1", "kind": "Widget"}
          ]
        },
        "com.example.v1.WidgetSpec": {
          "type": "object",
          "properties": {
            "parts": {
              "type": "array",
              "items": {"$ref": "#/definitions/com.example.v1.Part"},
              "x-kubernetes-patch-strategy": "merge",
              "x-kubernetes-patch-merge-key": "id"
            },
            "slots": {
              "type": "array",
              "x-kubernetes-patch-strategy": "merge,retainKeys",
              "x-kubernetes-patch-merge-key": "slot",
              "x-kubernetes-list-map-keys": ["slot", "side"]
            },
            "tags": {"type": "array", "x-kubernetes-patch-strategy": "merge"},
            "notes": {
              "type": "array",
              "x-kubernetes-patch-strategy": "replace",
              "x-kubernetes-patch-merge-key": "id"
            },
            "labels": {
              "type": "object",
              "additionalProperties": {"$ref": "#/definitions/com.example.v1.WidgetSpec"}
            },
            "template": {"$ref": "#/definitions/io.k8s.api.core.v1.PodTemplateSpec"},
            "lost": {"$ref": "#/definitions/com.example.v1.Missing"}
          }
        },
        "com.example.v1.Part": {
          "type": "object",
          "properties": {
            "bolts": {
              "type": "array",
              "x-kubernetes-patch-strategy": "merge",
              "x-kubernetes-patch-merge-key": "size"
            }
          }
        }
      }
    }"##;

    #[test]
    fn custom_document_gives_kinds_merge_keys() {
        let custom = CustomSchema::parse(WIDGET_JSON, "widget.json").unwrap();
        assert_eq!(custom.len(), 3);
        let set = SchemaSet::with_custom(&custom);
        for api_version in ["example.com/v1", "v1"] {
            let widget = set.for_kind(api_version, "Widget");
            assert_eq!(keys_in(widget, &["spec", "parts"]), strings(&["id"]));
        }
        let widget = set.for_kind("example.com/v1", "Widget");
        let bolts = ["spec", "parts", "[]", "bolts"];
        assert_eq!(keys_in(widget, &bolts), strings(&["size"]));
        let slots = keys_in(widget, &["spec", "slots"]);
        assert_eq!(slots, strings(&["slot", "side"]));
        assert_eq!(keys_in(widget, &["spec", "tags"]), strings(&[]));
        assert_eq!(keys_in(widget, &["spec", "notes"]), None);
        let through_map = ["spec", "labels", "anything", "parts"];
        assert_eq!(keys_in(widget, &through_map), strings(&["id"]));
        assert!(widget.field("spec").field("lost").is_unknown());
        assert!(widget.field("spec").field("nope").is_unknown());
        assert!(set.for_kind("example.com/v2", "Widget").is_unknown());
    }

    #[test]
    fn custom_document_falls_back_to_builtin_types_and_kinds() {
        let custom = CustomSchema::parse(WIDGET_JSON, "widget.json").unwrap();
        let set = SchemaSet::with_custom(&custom);
        let widget = set.for_kind("example.com/v1", "Widget");
        let mounts = [
            "spec",
            "template",
            "spec",
            "containers",
            "[]",
            "volumeMounts",
        ];
        assert_eq!(keys_in(widget, &mounts), strings(&["mountPath"]));
        let deployment = set.for_kind("apps/v1", "Deployment");
        let containers = ["spec", "template", "spec", "containers"];
        assert_eq!(keys_in(deployment, &containers), strings(&["name"]));
        let by_name = builtin_definition("io.k8s.api.apps.v1.Deployment");
        assert!(matches!(by_name, Some(Node::Object(_))));
        assert!(builtin_definition("io.k8s.api.apps.v1beta9.Deployment").is_none());
        let hpa = builtin_definition("io.k8s.api.autoscaling.v1.HorizontalPodAutoscaler");
        assert!(hpa.is_some());
    }

    #[test]
    fn custom_document_reads_yaml() {
        let text = "definitions:\n  my.Thing:\n    properties:\n      items:\n        type: array\n        x-kubernetes-patch-strategy: merge\n        x-kubernetes-patch-merge-key: key\n    x-kubernetes-group-version-kind:\n    - group: example.com\n      version: v1alpha1\n      kind: Thing\n";
        let custom = CustomSchema::parse(text, "thing.yaml").unwrap();
        let thing = SchemaSet::with_custom(&custom).for_kind("example.com/v1alpha1", "Thing");
        assert_eq!(keys_in(thing, &["items"]), strings(&["key"]));
        let empty = CustomSchema::parse("# nothing\n", "empty.yaml").unwrap();
        assert!(empty.is_empty());
    }

    #[test]
    fn invalid_documents_are_errors_naming_the_file() {
        for text in [
            "",
            "[1, 2]\n",
            "definitions: [a]\n",
            "{\"definitions\": {\"x\": 1}}",
            "{",
        ] {
            let err = CustomSchema::parse(text, "bad/schema.json").unwrap_err();
            assert!(err.to_string().contains("bad/schema.json"), "{err}");
        }
    }

    #[test]
    fn reference_cycles_end_unknown() {
        let text = r##"{"definitions": {"a.A": {"$ref": "#/definitions/b.B"},
            "b.B": {"$ref": "#/definitions/a.A"},
            "c.C": {"properties": {"x": {"$ref": "#/definitions/a.A"}},
                    "x-kubernetes-group-version-kind": [{"version": "v1", "kind": "C"}]}}}"##;
        let custom = CustomSchema::parse(text, "cycle.json").unwrap();
        let c = SchemaSet::with_custom(&custom).for_kind("v1", "C");
        assert!(!c.is_unknown());
        assert!(c.field("x").is_unknown());
    }
}
