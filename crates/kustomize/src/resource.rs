//! Resources as kustomize sees them: an object plus the build-time facts kustomize keeps
//! beside it (name history, generator options), and the ordered map of resources a
//! kustomization accumulates.

use std::collections::HashSet;

use goyaml::PathStep;
use serde_json::{Map, Value};

/// A Kubernetes object as an order-preserving JSON map.
pub type Object = Map<String, Value>;

/// Group, version and kind of an object. Empty strings mean "the core group" for `group`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gvk {
    /// API group; empty for the core group.
    pub group: String,
    /// API version without the group.
    pub version: String,
    /// Kind.
    pub kind: String,
}

impl Gvk {
    /// Splits an `apiVersion` and pairs it with `kind`.
    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        let (group, version) = match api_version.rsplit_once('/') {
            Some((group, version)) => (group, version),
            None => ("", api_version),
        };
        Gvk {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
        }
    }

    /// The `apiVersion` string (`group/version`, or `version` for the core group).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether `self`, used as a selector, selects `other`: every non-empty field must equal.
    pub fn selects(&self, other: &Gvk) -> bool {
        (self.group.is_empty() || self.group == other.group)
            && (self.version.is_empty() || self.version == other.version)
            && (self.kind.is_empty() || self.kind == other.kind)
    }

    /// Whether objects of this type are cluster-scoped, as far as kustomize knows: the
    /// built-in cluster-scoped types of its embedded Kubernetes schema, matched on the exact
    /// `apiVersion` and kind. Anything else (custom resources, a `Namespace` kind of another
    /// group, unknown versions) is namespaced.
    pub fn is_cluster_scoped(&self) -> bool {
        cluster_scoped_api_versions(&self.kind).contains(&self.api_version().as_str())
    }
}

/// The `apiVersion`s in which kustomize's schema knows `kind` as cluster-scoped.
fn cluster_scoped_api_versions(kind: &str) -> &'static [&'static str] {
    const ADMISSION: &[&str] = &[
        "admissionregistration.k8s.io/v1",
        "admissionregistration.k8s.io/v1beta1",
    ];
    const RBAC: &[&str] = &[
        "rbac.authorization.k8s.io/v1",
        "rbac.authorization.k8s.io/v1beta1",
    ];
    const STORAGE: &[&str] = &["storage.k8s.io/v1", "storage.k8s.io/v1beta1"];
    match kind {
        "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration" => ADMISSION,
        "ValidatingAdmissionPolicy" | "ValidatingAdmissionPolicyBinding" => {
            &["admissionregistration.k8s.io/v1"]
        }
        "CustomResourceDefinition" => &["apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1"],
        "APIService" => &[
            "apiregistration.k8s.io/v1",
            "apiregistration.k8s.io/v1beta1",
        ],
        "CertificateSigningRequest" => &["certificates.k8s.io/v1", "certificates.k8s.io/v1beta1"],
        "FlowSchema" | "PriorityLevelConfiguration" => &["flowcontrol.apiserver.k8s.io/v1beta1"],
        "IngressClass" => &["networking.k8s.io/v1", "networking.k8s.io/v1beta1"],
        "RuntimeClass" => &["node.k8s.io/v1", "node.k8s.io/v1beta1"],
        "PodSecurityPolicy" => &["policy/v1beta1"],
        "ClusterRole" | "ClusterRoleBinding" => RBAC,
        "PriorityClass" => &["scheduling.k8s.io/v1", "scheduling.k8s.io/v1beta1"],
        "CSIDriver" | "CSINode" | "StorageClass" | "VolumeAttachment" => STORAGE,
        "ComponentStatus" | "Namespace" | "Node" | "NodeProxyOptions" | "PersistentVolume" => {
            &["v1"]
        }
        _ => &[],
    }
}

/// The built-in Kubernetes kinds that are cluster-scoped.
pub fn is_cluster_scoped_kind(kind: &str) -> bool {
    matches!(
        kind,
        "APIService"
            | "CSIDriver"
            | "CSINode"
            | "CertificateSigningRequest"
            | "ClusterRole"
            | "ClusterRoleBinding"
            | "ComponentStatus"
            | "CustomResourceDefinition"
            | "FlowSchema"
            | "IngressClass"
            | "MutatingWebhookConfiguration"
            | "Namespace"
            | "Node"
            | "PersistentVolume"
            | "PodSecurityPolicy"
            | "PriorityClass"
            | "PriorityLevelConfiguration"
            | "RuntimeClass"
            | "SelfSubjectAccessReview"
            | "SelfSubjectRulesReview"
            | "StorageClass"
            | "SubjectAccessReview"
            | "TokenReview"
            | "ValidatingAdmissionPolicy"
            | "ValidatingAdmissionPolicyBinding"
            | "ValidatingWebhookConfiguration"
            | "VolumeAttachment"
    )
}

/// The identity of a resource: its kind, name and namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResId {
    /// Group, version and kind.
    pub gvk: Gvk,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`; empty when unset.
    pub namespace: String,
}

/// The namespace kustomize compares: "default" for an unset namespace of a namespaced kind,
/// nothing at all for a cluster-scoped kind.
const CLUSTER_SCOPE: &str = "~cluster~";

impl ResId {
    /// The namespace used when comparing ids.
    pub fn effective_namespace(&self) -> &str {
        if self.gvk.is_cluster_scoped() {
            CLUSTER_SCOPE
        } else if self.namespace.is_empty() {
            "default"
        } else {
            &self.namespace
        }
    }

    /// Kustomize's id equality: same GVK and name, namespaces equal once "" means "default".
    pub fn same_as(&self, other: &ResId) -> bool {
        self.gvk == other.gvk
            && self.name == other.name
            && self.effective_namespace() == other.effective_namespace()
    }

    /// `Kind.version.group/name.namespace`, the form kustomize prints in errors.
    pub fn describe(&self) -> String {
        let mut out = self.gvk.kind.clone();
        if !self.gvk.version.is_empty() {
            out.push('.');
            out.push_str(&self.gvk.version);
        }
        if !self.gvk.group.is_empty() {
            out.push('.');
            out.push_str(&self.gvk.group);
        }
        out.push('/');
        out.push_str(&self.name);
        out.push('.');
        out.push_str(if self.namespace.is_empty() {
            "[noNs]"
        } else {
            &self.namespace
        });
        out
    }
}

/// What a generator asked for its output, kept until the top-level build finishes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Behavior {
    /// Not generated, or a generator with behavior `create` (the default).
    #[default]
    Create,
    /// Merge into a resource of the same id from a base.
    Merge,
    /// Replace a resource of the same id from a base.
    Replace,
}

/// The plugin (builtin or configured) that generated or transformed a resource.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PluginId {
    /// `apiVersion` of the plugin configuration (`builtin` for builtins).
    pub api_version: String,
    /// Its kind (`ConfigMapGenerator`, `PrefixTransformer`, ...).
    pub kind: String,
    /// `metadata.name` of a configuration object, if any.
    pub name: String,
    /// `metadata.namespace` of a configuration object, if any.
    pub namespace: String,
}

/// Where a resource came from, or which plugin touched it, as kustomize records it in the
/// `config.kubernetes.io/origin` and `alpha.config.kubernetes.io/transformations`
/// annotations. Paths are relative to the top-level kustomization.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    /// The file a resource was read from.
    pub path: String,
    /// The repository (clone URL) a resource or configuration came from, when remote.
    pub repo: String,
    /// The ref of that repository, when the URL named one.
    pub git_ref: String,
    /// The file that configured the generator or transformer.
    pub configured_in: String,
    /// The generator or transformer.
    pub configured_by: Option<PluginId>,
}

impl Origin {
    /// A resource read from `path`.
    pub fn file(path: impl Into<String>) -> Self {
        Origin {
            path: path.into(),
            ..Origin::default()
        }
    }

    /// A resource generated, or a change made, by `plugin` configured in `configured_in`.
    pub fn plugin(configured_in: impl Into<String>, plugin: PluginId) -> Self {
        Origin {
            configured_in: configured_in.into(),
            configured_by: Some(plugin),
            ..Origin::default()
        }
    }

    /// A builtin plugin of `kind` configured by the kustomization file `configured_in`.
    pub fn builtin(configured_in: impl Into<String>, kind: &str) -> Self {
        Origin::plugin(
            configured_in,
            PluginId {
                api_version: "builtin".into(),
                kind: kind.into(),
                ..PluginId::default()
            },
        )
    }

    /// The fields as kustomize serialises them (empty fields left out).
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        let put = |map: &mut Map<String, Value>, key: &str, value: &str| {
            if !value.is_empty() {
                map.insert(key.into(), Value::String(value.into()));
            }
        };
        put(&mut map, "path", &self.path);
        put(&mut map, "repo", &self.repo);
        put(&mut map, "ref", &self.git_ref);
        put(&mut map, "configuredIn", &self.configured_in);
        if let Some(plugin) = &self.configured_by {
            let mut by = Map::new();
            put(&mut by, "apiVersion", &plugin.api_version);
            put(&mut by, "kind", &plugin.kind);
            put(&mut by, "name", &plugin.name);
            put(&mut by, "namespace", &plugin.namespace);
            map.insert("configuredBy".into(), Value::Object(by));
        }
        Value::Object(map)
    }
}

/// One resource of a build.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resource {
    /// The object itself.
    pub obj: Object,
    /// Ids this resource had before it was renamed, moved or re-kinded, oldest first.
    pub prev_ids: Vec<ResId>,
    /// Generator behavior, for generated resources.
    pub behavior: Behavior,
    /// Whether a content-hash suffix is appended to the name at the end of the build.
    pub needs_hash_suffix: bool,
    /// Ids of resources whose fields reference this one by name (kustomize's `refBy`).
    pub ref_by: Vec<ResId>,
    /// Where this resource came from, for `buildMetadata: [originAnnotations]`.
    pub origin: Option<Origin>,
    /// The transformers that ran over this resource, for
    /// `buildMetadata: [transformerAnnotations]`.
    pub transformations: Vec<Origin>,
    /// Non-empty name prefixes applied by `namePrefix` transformers, innermost layer
    /// first; name-reference fixing prefers referrals from the same layers.
    pub name_prefixes: Vec<String>,
    /// Non-empty name suffixes applied by `nameSuffix` transformers, innermost first.
    pub name_suffixes: Vec<String>,
    /// Names of the vars whose `objref` matched this resource in the kustomization that
    /// declared them (kustomize binds a var to its object layer by layer).
    pub ref_var_names: Vec<String>,
    /// Fields written with no value (`replicas:` and nothing after it), which kustomize's
    /// strategic merge drops where a written `null` stays; cleared once a merge ran.
    pub empty_nulls: Vec<Vec<PathStep>>,
}

impl Resource {
    /// Wraps an object with no history.
    pub fn new(obj: Object) -> Self {
        Resource {
            obj,
            ..Resource::default()
        }
    }

    fn str_at<'a>(map: &'a Object, key: &str) -> &'a str {
        map.get(key).and_then(Value::as_str).unwrap_or("")
    }

    fn metadata(&self) -> Option<&Object> {
        self.obj.get("metadata").and_then(Value::as_object)
    }

    /// `metadata`, created when absent or not a map.
    pub fn metadata_mut(&mut self) -> &mut Object {
        let entry = self
            .obj
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        match entry {
            Value::Object(map) => map,
            _ => unreachable!("metadata was just made a map"),
        }
    }

    /// `apiVersion`, or "".
    pub fn api_version(&self) -> &str {
        Self::str_at(&self.obj, "apiVersion")
    }

    /// `kind`, or "".
    pub fn kind(&self) -> &str {
        Self::str_at(&self.obj, "kind")
    }

    /// Group, version and kind.
    pub fn gvk(&self) -> Gvk {
        Gvk::from_api_version(self.api_version(), self.kind())
    }

    /// `metadata.name`, or "".
    pub fn name(&self) -> &str {
        self.metadata().map_or("", |m| Self::str_at(m, "name"))
    }

    /// `metadata.namespace`, or "".
    pub fn namespace(&self) -> &str {
        self.metadata().map_or("", |m| Self::str_at(m, "namespace"))
    }

    /// The current id.
    pub fn id(&self) -> ResId {
        ResId {
            gvk: self.gvk(),
            name: self.name().to_string(),
            namespace: self.namespace().to_string(),
        }
    }

    /// The id the resource was first loaded or generated with.
    pub fn org_id(&self) -> ResId {
        self.prev_ids.first().cloned().unwrap_or_else(|| self.id())
    }

    /// Every id the resource has had, oldest first, ending with the current one.
    pub fn all_ids(&self) -> impl Iterator<Item = ResId> + '_ {
        self.prev_ids
            .iter()
            .cloned()
            .chain(std::iter::once(self.id()))
    }

    /// Records the current id in the history; call before changing name, namespace or kind.
    pub fn remember_id(&mut self) {
        let id = self.id();
        if self.prev_ids.last() != Some(&id) {
            self.prev_ids.push(id);
        }
    }

    /// Sets `metadata.name`, remembering the old id.
    pub fn set_name(&mut self, name: &str) {
        self.remember_id();
        self.metadata_mut()
            .insert("name".into(), Value::String(name.to_string()));
    }

    /// Sets `metadata.namespace`, remembering the old id.
    pub fn set_namespace(&mut self, namespace: &str) {
        self.remember_id();
        self.metadata_mut()
            .insert("namespace".into(), Value::String(namespace.to_string()));
    }

    /// A map under `metadata` (`labels` or `annotations`) as kustomize reads it: every value
    /// as its text (`0` is "0", `true` is "true"; see [`scalar_text`]).
    fn string_map(&self, field: &str) -> Vec<(String, String)> {
        self.metadata()
            .and_then(|m| m.get(field))
            .and_then(Value::as_object)
            .map(|map| {
                map.iter()
                    .map(|(k, v)| (k.clone(), scalar_text(v)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `metadata.labels` as pairs, in the object's order.
    pub fn labels(&self) -> Vec<(String, String)> {
        self.string_map("labels")
    }

    /// `metadata.annotations` as pairs, in the object's order.
    pub fn annotations(&self) -> Vec<(String, String)> {
        self.string_map("annotations")
    }

    /// One annotation, if it is a string.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata()
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
    }

    /// Sets one entry of `metadata.labels` or `metadata.annotations`.
    pub fn set_metadata_entry(&mut self, field: &str, key: &str, value: &str) {
        let meta = self.metadata_mut();
        let map = meta
            .entry(field)
            .or_insert_with(|| Value::Object(Map::new()));
        if !map.is_object() {
            *map = Value::Object(Map::new());
        }
        if let Value::Object(map) = map {
            map.insert(key.to_string(), Value::String(value.to_string()));
        }
    }

    /// Removes one entry of `metadata.labels` or `metadata.annotations`, and the map itself
    /// when it becomes empty.
    pub fn remove_metadata_entry(&mut self, field: &str, key: &str) {
        let meta = self.metadata_mut();
        if let Some(Value::Object(map)) = meta.get_mut(field) {
            map.shift_remove(key);
            if map.is_empty() {
                meta.shift_remove(field);
            }
        }
    }
}

/// The ordered resources of a build, unique by current id.
#[derive(Clone, Debug, Default)]
pub struct ResMap {
    resources: Vec<Resource>,
    /// The current ids, for constant-time duplicate checks while resources are appended;
    /// dropped whenever resources may have changed, rebuilt on the next append.
    index: Option<HashSet<IdKey>>,
}

impl PartialEq for ResMap {
    fn eq(&self, other: &Self) -> bool {
        self.resources == other.resources
    }
}

/// A [`ResId`] as kustomize compares ids: namespaces folded to their effective value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct IdKey {
    gvk: Gvk,
    name: String,
    namespace: String,
}

impl ResId {
    fn key(&self) -> IdKey {
        IdKey {
            namespace: self.effective_namespace().to_string(),
            gvk: self.gvk.clone(),
            name: self.name.clone(),
        }
    }
}

/// Two resources with the same id in one kustomization.
#[derive(Debug, thiserror::Error)]
#[error("may not add resource with an already registered id: {0}")]
pub struct DuplicateId(pub String);

impl ResMap {
    /// An empty map.
    pub fn new() -> Self {
        ResMap::default()
    }

    /// Number of resources.
    pub fn len(&self) -> usize {
        self.resources.len()
    }

    /// Whether there are no resources.
    pub fn is_empty(&self) -> bool {
        self.resources.is_empty()
    }

    /// Appends a resource; its current id must be new.
    pub fn append(&mut self, resource: Resource) -> Result<(), DuplicateId> {
        let resources = &self.resources;
        let index = self
            .index
            .get_or_insert_with(|| resources.iter().map(|r| r.id().key()).collect());
        let id = resource.id();
        if !index.insert(id.key()) {
            return Err(DuplicateId(id.describe()));
        }
        self.resources.push(resource);
        Ok(())
    }

    /// The first resource whose current id repeats an earlier one's, if any.
    pub fn first_duplicate(&self) -> Option<ResId> {
        let mut seen = HashSet::new();
        self.resources
            .iter()
            .map(Resource::id)
            .find(|id| !seen.insert(id.key()))
    }

    /// Appends every resource of `other`, in order.
    pub fn append_all(&mut self, other: ResMap) -> Result<(), DuplicateId> {
        for resource in other.resources {
            self.append(resource)?;
        }
        Ok(())
    }

    /// The resources in order.
    pub fn iter(&self) -> std::slice::Iter<'_, Resource> {
        self.resources.iter()
    }

    /// The resources in order, mutably.
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, Resource> {
        self.index = None;
        self.resources.iter_mut()
    }

    /// The resources as a slice.
    pub fn as_slice(&self) -> &[Resource] {
        &self.resources
    }

    /// The resources as a mutable vector, for transformers that add, remove or reorder.
    pub fn as_mut_vec(&mut self) -> &mut Vec<Resource> {
        self.index = None;
        &mut self.resources
    }

    /// Consumes the map into its resources.
    pub fn into_vec(self) -> Vec<Resource> {
        self.resources
    }

    /// Index of the resource whose current id equals `id`.
    pub fn position_of(&self, id: &ResId) -> Option<usize> {
        self.resources.iter().position(|r| r.id().same_as(id))
    }

    /// Indexes of the resources that have had `id` at any point (current or previous ids).
    pub fn positions_matching_any_id(&self, id: &ResId) -> Vec<usize> {
        self.resources
            .iter()
            .enumerate()
            .filter(|(_, r)| r.all_ids().any(|rid| rid.same_as(id)))
            .map(|(i, _)| i)
            .collect()
    }

    /// Removes and returns the resource at `index`.
    pub fn remove(&mut self, index: usize) -> Resource {
        self.index = None;
        self.resources.remove(index)
    }
}

/// The text of a YAML node as kyaml reads it (`Node.Value`), which is what kustomize compares
/// and copies where it wants strings: strings as they are, booleans and numbers in their
/// canonical form, null as "null", maps and lists as "".
pub fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => number.to_string(),
        Value::Null => "null".to_string(),
        Value::Array(_) | Value::Object(_) => String::new(),
    }
}

/// The text of a scalar node: strings as they are, numbers and booleans as written, null as
/// the empty string. `None` for maps and lists.
pub(crate) fn scalar_node_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null => Some(String::new()),
        Value::Array(_) | Value::Object(_) => None,
    }
}

/// The text of a string, number or boolean, as YAML holds it; `None` for null, maps and lists.
pub(crate) fn non_null_scalar_text(value: &Value) -> Option<String> {
    if value.is_null() {
        return None;
    }
    scalar_node_text(value)
}

/// The resource of a JSON object (for tests).
#[cfg(test)]
pub(crate) fn test_resource(value: Value) -> Resource {
    let Value::Object(obj) = value else {
        panic!("not a map: {value}")
    };
    Resource::new(obj)
}

/// A map of the given resources, in order (for tests).
#[cfg(test)]
pub(crate) fn test_map_of(resources: Vec<Resource>) -> ResMap {
    let mut map = ResMap::new();
    for resource in resources {
        map.append(resource).expect("unique ids");
    }
    map
}

/// A map of the given JSON objects, in order (for tests).
#[cfg(test)]
pub(crate) fn test_resmap(values: Vec<Value>) -> ResMap {
    test_map_of(values.into_iter().map(test_resource).collect())
}
