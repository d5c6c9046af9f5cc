//! Patch metadata of the built-in Kubernetes kinds, as kustomize sees it.
//!
//! kustomize merges lists by key only where the Kubernetes OpenAPI document it embeds
//! (Kubernetes v1.21.2) declares a merge patch strategy. This module encodes just the facts
//! that matter for a strategic merge: which list fields are merged, by which keys, and the
//! chain of object fields that leads to them from each built-in kind. Every other field of a
//! known kind is "known, nothing to merge"; kinds not listed (custom resources, API versions
//! newer than v1.21 such as `autoscaling/v2`) have no schema at all.

/// Where a strategic merge stands in the schema.
#[derive(Clone, Copy, Debug)]
pub enum Schema {
    /// No schema: a kind kustomize does not know. Lists are replaced whole.
    Unknown,
    /// A known field with no merge metadata anywhere below it.
    Opaque,
    /// An object type with fields that lead to merge metadata.
    Object(&'static TypeDef),
    /// A list merged by key (or, with no keys, a merged list of primitives).
    MergeList(&'static ListDef),
}

/// An object type: only the fields leading to merge metadata are listed.
#[derive(Debug)]
pub struct TypeDef {
    fields: &'static [(&'static str, Schema)],
}

/// A list field with the `merge` patch strategy.
#[derive(Debug)]
pub struct ListDef {
    /// The keys identifying an element (`x-kubernetes-list-map-keys`, else the merge key);
    /// empty for a list of primitives.
    pub keys: &'static [&'static str],
    /// The element type, when it has merge metadata of its own.
    elem: Option<&'static TypeDef>,
}

impl Schema {
    /// The schema of field `name` of an object at this position.
    pub fn field(self, name: &str) -> Schema {
        match self {
            Schema::Unknown => Schema::Unknown,
            Schema::Object(def) => def
                .fields
                .iter()
                .find(|(field, _)| *field == name)
                .map_or(Schema::Opaque, |(_, schema)| *schema),
            Schema::Opaque | Schema::MergeList(_) => Schema::Opaque,
        }
    }

    /// The schema of the elements of a list at this position.
    pub fn elements(self) -> Schema {
        match self {
            Schema::Unknown => Schema::Unknown,
            Schema::MergeList(list) => list.elem.map_or(Schema::Opaque, Schema::Object),
            Schema::Opaque | Schema::Object(_) => Schema::Opaque,
        }
    }

    /// The merge keys, when this position is a list merged by key or by value.
    pub fn merge_keys(self) -> Option<&'static [&'static str]> {
        match self {
            Schema::MergeList(list) => Some(list.keys),
            _ => None,
        }
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
        ("finalizers", Schema::MergeList(&FINALIZERS)),
        ("ownerReferences", Schema::MergeList(&BY_UID)),
    ],
};

/// A kind whose only merge metadata is in `metadata`.
static META_ONLY: TypeDef = TypeDef {
    fields: &[("metadata", Schema::Object(&OBJECT_META))],
};

/// A `status` holding `conditions` merged by `type`.
static CONDITIONS_STATUS: TypeDef = TypeDef {
    fields: &[("conditions", Schema::MergeList(&BY_TYPE))],
};

static CONTAINER: TypeDef = TypeDef {
    fields: &[
        ("env", Schema::MergeList(&BY_NAME)),
        ("ports", Schema::MergeList(&BY_CONTAINER_PORT_PROTOCOL)),
        ("volumeDevices", Schema::MergeList(&BY_DEVICE_PATH)),
        ("volumeMounts", Schema::MergeList(&BY_MOUNT_PATH)),
    ],
};

static EPHEMERAL_CONTAINER: TypeDef = TypeDef {
    fields: &[
        ("env", Schema::MergeList(&BY_NAME)),
        ("volumeDevices", Schema::MergeList(&BY_DEVICE_PATH)),
        ("volumeMounts", Schema::MergeList(&BY_MOUNT_PATH)),
    ],
};

static EPHEMERAL_VOLUME_SOURCE: TypeDef = TypeDef {
    fields: &[("volumeClaimTemplate", Schema::Object(&META_ONLY))],
};

static VOLUME: TypeDef = TypeDef {
    fields: &[("ephemeral", Schema::Object(&EPHEMERAL_VOLUME_SOURCE))],
};

static POD_SPEC: TypeDef = TypeDef {
    fields: &[
        (
            "containers",
            Schema::MergeList(&ListDef {
                keys: &["name"],
                elem: Some(&CONTAINER),
            }),
        ),
        (
            "ephemeralContainers",
            Schema::MergeList(&ListDef {
                keys: &["name"],
                elem: Some(&EPHEMERAL_CONTAINER),
            }),
        ),
        ("hostAliases", Schema::MergeList(&BY_IP)),
        ("imagePullSecrets", Schema::MergeList(&BY_NAME)),
        (
            "initContainers",
            Schema::MergeList(&ListDef {
                keys: &["name"],
                elem: Some(&CONTAINER),
            }),
        ),
        (
            "topologySpreadConstraints",
            Schema::MergeList(&BY_TOPOLOGY_KEY_WHEN_UNSATISFIABLE),
        ),
        (
            "volumes",
            Schema::MergeList(&ListDef {
                keys: &["name"],
                elem: Some(&VOLUME),
            }),
        ),
    ],
};

static POD_STATUS: TypeDef = TypeDef {
    fields: &[
        ("conditions", Schema::MergeList(&BY_TYPE)),
        ("podIPs", Schema::MergeList(&BY_IP)),
    ],
};

static POD: TypeDef = TypeDef {
    fields: &[
        ("metadata", Schema::Object(&OBJECT_META)),
        ("spec", Schema::Object(&POD_SPEC)),
        ("status", Schema::Object(&POD_STATUS)),
    ],
};

static POD_TEMPLATE_SPEC: TypeDef = TypeDef {
    fields: &[
        ("metadata", Schema::Object(&OBJECT_META)),
        ("spec", Schema::Object(&POD_SPEC)),
    ],
};

static POD_TEMPLATE: TypeDef = TypeDef {
    fields: &[
        ("metadata", Schema::Object(&OBJECT_META)),
        ("template", Schema::Object(&POD_TEMPLATE_SPEC)),
    ],
};

/// The `spec` of the workload kinds: a pod `template`.
static WORKLOAD_SPEC: TypeDef = TypeDef {
    fields: &[("template", Schema::Object(&POD_TEMPLATE_SPEC))],
};

/// DaemonSet, Deployment, ReplicaSet, StatefulSet, Job, ReplicationController.
static WORKLOAD: TypeDef = TypeDef {
    fields: &[
        ("metadata", Schema::Object(&OBJECT_META)),
        ("spec", Schema::Object(&WORKLOAD_SPEC)),
        ("status", Schema::Object(&CONDITIONS_STATUS)),
    ],
};

static JOB_TEMPLATE_SPEC: TypeDef = TypeDef {
    fields: &[
        ("metadata", Schema::Object(&OBJECT_META)),
        ("spec", Schema::Object(&WORKLOAD_SPEC)),
    ],
};

static CRON_JOB_SPEC: TypeDef = TypeDef {
    fields: &[("jobTemplate", Schema::Object(&JOB_TEMPLATE_SPEC))],
};

static CRON_JOB: TypeDef = TypeDef {
    fields: &[
        ("metadata", Schema::Object(&OBJECT_META)),
        ("spec", Schema::Object(&CRON_JOB_SPEC)),
    ],
};

/// Kinds with metadata and a `status.conditions` list (Namespace, PVC, PDB, APIService).
static WITH_CONDITIONS: TypeDef = TypeDef {
    fields: &[
        ("metadata", Schema::Object(&OBJECT_META)),
        ("status", Schema::Object(&CONDITIONS_STATUS)),
    ],
};

static COMPONENT_STATUS: TypeDef = TypeDef {
    fields: &[
        ("conditions", Schema::MergeList(&BY_TYPE)),
        ("metadata", Schema::Object(&OBJECT_META)),
    ],
};

static NODE_SPEC: TypeDef = TypeDef {
    fields: &[("podCIDRs", Schema::MergeList(&FINALIZERS))],
};

static NODE_STATUS: TypeDef = TypeDef {
    fields: &[
        ("addresses", Schema::MergeList(&BY_TYPE)),
        ("conditions", Schema::MergeList(&BY_TYPE)),
    ],
};

static NODE: TypeDef = TypeDef {
    fields: &[
        ("metadata", Schema::Object(&OBJECT_META)),
        ("spec", Schema::Object(&NODE_SPEC)),
        ("status", Schema::Object(&NODE_STATUS)),
    ],
};

static SERVICE_SPEC: TypeDef = TypeDef {
    fields: &[("ports", Schema::MergeList(&BY_PORT_PROTOCOL))],
};

static SERVICE: TypeDef = TypeDef {
    fields: &[
        ("metadata", Schema::Object(&OBJECT_META)),
        ("spec", Schema::Object(&SERVICE_SPEC)),
        ("status", Schema::Object(&CONDITIONS_STATUS)),
    ],
};

static SERVICE_ACCOUNT: TypeDef = TypeDef {
    fields: &[
        ("metadata", Schema::Object(&OBJECT_META)),
        ("secrets", Schema::MergeList(&BY_NAME)),
    ],
};

static WEBHOOK_CONFIGURATION: TypeDef = TypeDef {
    fields: &[
        ("metadata", Schema::Object(&OBJECT_META)),
        ("webhooks", Schema::MergeList(&BY_NAME)),
    ],
};

static CSI_NODE_SPEC: TypeDef = TypeDef {
    fields: &[("drivers", Schema::MergeList(&BY_NAME))],
};

static CSI_NODE: TypeDef = TypeDef {
    fields: &[
        ("metadata", Schema::Object(&OBJECT_META)),
        ("spec", Schema::Object(&CSI_NODE_SPEC)),
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

/// The schema of a whole object of `apiVersion`/`kind`: [`Schema::Unknown`] for kinds the
/// embedded Kubernetes v1.21.2 API does not define.
pub fn root_schema(api_version: &str, kind: &str) -> Schema {
    if let Some((_, _, def)) = KINDS
        .iter()
        .find(|(av, k, _)| *av == api_version && *k == kind)
    {
        return Schema::Object(def);
    }
    let metadata_only = METADATA_ONLY_KINDS
        .iter()
        .any(|(av, kinds)| *av == api_version && kinds.contains(&kind));
    if metadata_only {
        Schema::Object(&META_ONLY)
    } else {
        Schema::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys_at(api_version: &str, kind: &str, path: &[&str]) -> Option<Vec<&'static str>> {
        let mut schema = root_schema(api_version, kind);
        for segment in path {
            schema = if *segment == "[]" {
                schema.elements()
            } else {
                schema.field(segment)
            };
        }
        schema.merge_keys().map(<[_]>::to_vec)
    }

    #[test]
    fn knows_merge_keys_of_builtin_kinds() {
        let containers = ["spec", "template", "spec", "containers"];
        assert_eq!(
            keys_at("apps/v1", "Deployment", &containers),
            Some(vec!["name"])
        );
        let ports = ["spec", "template", "spec", "containers", "[]", "ports"];
        assert_eq!(
            keys_at("apps/v1", "StatefulSet", &ports),
            Some(vec!["containerPort", "protocol"])
        );
        assert_eq!(
            keys_at("v1", "Service", &["spec", "ports"]),
            Some(vec!["port", "protocol"])
        );
        let cron = ["spec", "jobTemplate", "spec", "template", "spec", "volumes"];
        assert_eq!(
            keys_at("batch/v1beta1", "CronJob", &cron),
            Some(vec!["name"])
        );
        assert_eq!(
            keys_at("v1", "ConfigMap", &["metadata", "finalizers"]),
            Some(vec![])
        );
    }

    #[test]
    fn lists_without_strategy_or_schema_have_no_keys() {
        let env_from = ["spec", "template", "spec", "containers", "[]", "envFrom"];
        assert_eq!(keys_at("apps/v1", "Deployment", &env_from), None);
        let tolerations = ["spec", "template", "spec", "tolerations"];
        assert_eq!(keys_at("apps/v1", "Deployment", &tolerations), None);
        assert!(matches!(
            root_schema("autoscaling/v2", "HorizontalPodAutoscaler"),
            Schema::Unknown
        ));
        assert!(matches!(
            root_schema("example.com/v1", "Widget"),
            Schema::Unknown
        ));
        assert!(matches!(
            root_schema("extensions/v1beta1", "Deployment"),
            Schema::Unknown
        ));
    }
}
