//! The kustomization file (`kustomization.yaml`): its schema, strict parsing, and the
//! folding of deprecated fields into their successors.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::fieldspec::FieldSpec;
use super::gojson::Mode;

/// File names kustomize recognises as a kustomization, in the order it looks for them.
pub const KUSTOMIZATION_FILE_NAMES: [&str; 3] =
    ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// `apiVersion` of kustomization files.
pub const KUSTOMIZATION_API_VERSION: &str = "kustomize.config.k8s.io/v1beta1";
/// `apiVersion` of component files.
pub const COMPONENT_API_VERSION: &str = "kustomize.config.k8s.io/v1alpha1";

/// Whether a kustomization file declares a Kustomization or a Component.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KustomizationKind {
    /// `kind: Kustomization` (or no kind).
    #[default]
    Kustomization,
    /// `kind: Component`.
    Component,
}

/// A kustomization file.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Kustomization {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata` (informational).
    pub metadata: Option<Value>,
    /// Custom OpenAPI schema for strategic merge patches (`openapi: {path: file}`).
    pub openapi: BTreeMap<String, String>,
    /// `namePrefix`.
    pub name_prefix: String,
    /// `nameSuffix`.
    pub name_suffix: String,
    /// `namespace`.
    pub namespace: String,
    /// `commonLabels` (deprecated but supported; selectors included).
    pub common_labels: BTreeMap<String, String>,
    /// `labels`.
    pub labels: Vec<Label>,
    /// `commonAnnotations`.
    pub common_annotations: BTreeMap<String, String>,
    /// `patchesStrategicMerge` (deprecated): file paths or inline patches.
    pub patches_strategic_merge: Vec<String>,
    /// `patchesJson6902` (deprecated).
    pub patches_json6902: Vec<Patch>,
    /// `patches`.
    pub patches: Vec<Patch>,
    /// `images`.
    pub images: Vec<Image>,
    /// `imageTags` (deprecated; folded into `images`).
    pub image_tags: Vec<Image>,
    /// `replacements`: inline replacements or `{path: file}` entries, parsed by the
    /// replacement transformer.
    pub replacements: Vec<Value>,
    /// `replicas`.
    pub replicas: Vec<Replica>,
    /// `vars`.
    pub vars: Vec<Var>,
    /// `sortOptions`.
    pub sort_options: Option<SortOptions>,
    /// `resources`: files, directories.
    pub resources: Vec<String>,
    /// `components`: directories holding a Component.
    pub components: Vec<String>,
    /// `crds`: files of CustomResourceDefinitions whose OpenAPI informs name references.
    pub crds: Vec<String>,
    /// `bases` (deprecated; folded into `resources`).
    pub bases: Vec<String>,
    /// `configMapGenerator`.
    pub config_map_generator: Vec<GeneratorArgs>,
    /// `secretGenerator`.
    pub secret_generator: Vec<GeneratorArgs>,
    /// `generatorOptions`: defaults for every generator of this kustomization.
    pub generator_options: Option<GeneratorOptions>,
    /// `helmGlobals` (refused).
    pub helm_globals: Option<Value>,
    /// `helmCharts` (refused).
    pub helm_charts: Vec<Value>,
    /// `helmChartInflationGenerator` (refused).
    pub helm_chart_inflation_generator: Vec<Value>,
    /// `configurations`: transformer configuration files.
    pub configurations: Vec<String>,
    /// `generators`: generator plugin configs (files or inline).
    pub generators: Vec<String>,
    /// `transformers`: transformer plugin configs (files or inline).
    pub transformers: Vec<String>,
    /// `validators`: validator plugin configs (files or inline).
    pub validators: Vec<String>,
    /// `buildMetadata`: `originAnnotations`, `transformerAnnotations`, `managedByLabel`.
    pub build_metadata: Vec<String>,
}

/// An entry of `labels`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Label {
    /// The labels.
    pub pairs: BTreeMap<String, String>,
    /// Also set them in selectors (and templates).
    pub include_selectors: bool,
    /// Also set them in pod templates (without selectors).
    pub include_templates: bool,
    /// Also set them in StatefulSet `volumeClaimTemplates` metadata (without selectors);
    /// `None` when not written. kustomize v5.8.1, which Flux v1.10.1 builds with, does not
    /// know the field (and refuses it) but reaches volume claim templates with
    /// `includeTemplates`; where the field is written, v5.8.2's meaning applies.
    pub include_volume_claim_templates: Option<bool>,
    /// Extra fields to set them in.
    pub fields: Vec<FieldSpec>,
}

/// A patch target selector.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Selector {
    /// Group regex.
    pub group: String,
    /// Version regex.
    pub version: String,
    /// Kind regex.
    pub kind: String,
    /// Name regex.
    pub name: String,
    /// Namespace regex.
    pub namespace: String,
    /// Kubernetes label selector.
    pub label_selector: String,
    /// Kubernetes label selector syntax over annotations.
    pub annotation_selector: String,
}

/// An entry of `patches` or `patchesJson6902`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Patch {
    /// File holding the patch.
    pub path: String,
    /// Inline patch text.
    pub patch: String,
    /// Which resources to patch.
    pub target: Option<Selector>,
    /// `allowNameChange` / `allowKindChange`.
    pub options: PatchArgs,
}

/// `options` of a patch (kustomize's `PatchArgs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct PatchArgs {
    /// Whether a strategic merge patch may change the target's name.
    pub allow_name_change: bool,
    /// Whether a strategic merge patch may change the target's kind.
    pub allow_kind_change: bool,
}

/// An entry of `images`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Image {
    /// Image name to match.
    pub name: String,
    /// Replacement name.
    pub new_name: String,
    /// Replacement tag.
    pub new_tag: String,
    /// Replacement digest.
    pub digest: String,
    /// Suffix appended to the tag.
    pub tag_suffix: String,
}

/// An entry of `replicas`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Replica {
    /// Name of the resource.
    pub name: String,
    /// The replica count.
    pub count: i64,
}

/// An entry of `vars`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Var {
    /// Variable name, used as `$(NAME)`.
    pub name: String,
    /// The object the value is read from.
    pub objref: VarTarget,
    /// The field the value is read from (default `metadata.name`).
    #[serde(default)]
    pub fieldref: Option<FieldRef>,
}

/// `objref` of a var.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct VarTarget {
    /// `group`.
    pub group: String,
    /// `version`.
    pub version: String,
    /// `kind`.
    pub kind: String,
    /// `apiVersion` (alternative to group/version).
    pub api_version: String,
    /// `name`.
    pub name: String,
    /// `namespace`.
    pub namespace: String,
}

/// `fieldref` of a var.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct FieldRef {
    /// Dotted path of the field (kustomize also accepts the lower-case `fieldpath`).
    #[serde(alias = "fieldpath")]
    pub field_path: String,
}

/// `sortOptions`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct SortOptions {
    /// `legacy` or `fifo`.
    pub order: String,
    /// Options of the legacy order.
    pub legacy_sort_options: Option<LegacySortOptions>,
}

/// `sortOptions.legacySortOptions`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct LegacySortOptions {
    /// Kinds first, in this order.
    pub order_first: Vec<String>,
    /// Kinds last, in this order.
    pub order_last: Vec<String>,
}

/// A `configMapGenerator` or `secretGenerator` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct GeneratorArgs {
    /// `name`.
    pub name: String,
    /// `namespace`.
    pub namespace: String,
    /// `behavior`: `create` (default), `merge` or `replace`.
    pub behavior: String,
    /// `literals`: `KEY=VALUE`.
    pub literals: Vec<String>,
    /// `files`: `path` or `key=path`.
    pub files: Vec<String>,
    /// `envs`: dotenv files.
    pub envs: Vec<String>,
    /// `env` (deprecated; folded into `envs`).
    pub env: String,
    /// `options`.
    pub options: Option<GeneratorOptions>,
    /// `type` (secrets only).
    #[serde(rename = "type")]
    pub secret_type: String,
}

/// Generator options.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct GeneratorOptions {
    /// Labels for generated objects.
    pub labels: BTreeMap<String, String>,
    /// Annotations for generated objects.
    pub annotations: BTreeMap<String, String>,
    /// No content-hash suffix.
    pub disable_name_suffix_hash: Option<bool>,
    /// `immutable: true` on generated objects.
    pub immutable: Option<bool>,
}

/// Why a kustomization file is not valid.
#[derive(Debug, thiserror::Error)]
pub enum KustfileError {
    /// Not YAML, or not a single map.
    #[error("{file}: {message}")]
    Syntax {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// A field kustomize does not know, or a field of the wrong type.
    #[error("{file}: invalid Kustomization: {message}")]
    Schema {
        /// The file.
        file: String,
        /// The decoder's message (names the field).
        message: String,
    },
    /// The file sets no field but `apiVersion` and `kind` (kustomize: "kustomization.yaml is
    /// empty").
    #[error("{file}: kustomization is empty (it sets no field besides apiVersion and kind)")]
    Empty {
        /// The file.
        file: String,
    },
    /// An `apiVersion`/`kind` kustomize does not accept.
    #[error("{file}: {message}")]
    Kind {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
}

/// Every top-level field of a kustomization file, as spelled in the schema.
const FIELD_NAMES: [&str; 34] = [
    "apiVersion",
    "kind",
    "metadata",
    "openapi",
    "namePrefix",
    "nameSuffix",
    "namespace",
    "commonLabels",
    "labels",
    "commonAnnotations",
    "patchesStrategicMerge",
    "patchesJson6902",
    "patches",
    "images",
    "imageTags",
    "replacements",
    "replicas",
    "vars",
    "sortOptions",
    "resources",
    "components",
    "crds",
    "bases",
    "configMapGenerator",
    "secretGenerator",
    "generatorOptions",
    "helmGlobals",
    "helmCharts",
    "helmChartInflationGenerator",
    "configurations",
    "generators",
    "transformers",
    "validators",
    "buildMetadata",
];

/// Names the field of a kustomization that does not decode, `Kustomization.<path>` (with
/// list indices: `Kustomization.patches[0].target`), followed by the decoder's reason in
/// plain words.
fn describe_schema_error(error: &serde_json::Error) -> String {
    let message = error.to_string();
    match message.strip_prefix("at ").and_then(|m| m.split_once(": ")) {
        Some((path, reason)) => format!("Kustomization.{path}: {}", plain_reason(reason)),
        None => plain_reason(&message),
    }
}

/// serde's "invalid type: map, expected a sequence" as "expected a list, got a map".
fn plain_reason(message: &str) -> String {
    let Some(rest) = message.strip_prefix("invalid type: ") else {
        return message.to_string();
    };
    let Some((got, expected)) = rest.split_once(", expected ") else {
        return message.to_string();
    };
    let word = |w: &str| match w {
        "map" => "a map".to_string(),
        "sequence" | "a sequence" => "a list".to_string(),
        other => other.to_string(),
    };
    format!("expected {}, got {}", word(expected), word(got))
}

/// Maps of strings in a kustomization file (labels, annotations, label pairs).
const STRING_MAPS: [&str; 5] = [
    "commonLabels",
    "commonAnnotations",
    "pairs",
    "labels",
    "annotations",
];

/// kustomize decodes kustomization files with Go's JSON rules, under which a `null` leaves a
/// field at its zero value: a field written with no value (`resources:`, `patches: ~`) is as
/// if absent, and a `null` value in a map of strings is the empty string. Applied before the
/// strict decoding, which would refuse a `null` where a list, map or string is expected.
fn go_json_nulls(value: Value, string_map: bool) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter_map(|(key, v)| match v {
                    Value::Null if string_map => Some((key, Value::String(String::new()))),
                    Value::Null => None,
                    v => {
                        let nested_map = v.is_object() && STRING_MAPS.contains(&key.as_str());
                        Some((key, go_json_nulls(v, nested_map)))
                    }
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|item| go_json_nulls(item, false))
                .collect(),
        ),
        other => other,
    }
}

/// kustomize decodes kustomization files with Go's JSON rules, which match field names
/// case-insensitively (`nameprefix` is `namePrefix`); spell top-level keys canonically, for
/// the emptiness test (decoding matches names at every level itself).
fn canonical_field_names(value: Value) -> Value {
    let Value::Object(map) = value else {
        return value;
    };
    let canonical = map
        .into_iter()
        .map(|(key, v)| {
            let name = if FIELD_NAMES.contains(&key.as_str()) {
                key
            } else {
                FIELD_NAMES
                    .iter()
                    .find(|f| f.eq_ignore_ascii_case(&key))
                    .map_or(key, |f| f.to_string())
            };
            (name, v)
        })
        .collect();
    Value::Object(canonical)
}

/// Whether `line` is the document marker `marker` (`---` or `...`): at the start of the
/// line, followed by a blank or the end of the line.
fn is_marker(line: &str, marker: &str) -> bool {
    line.strip_prefix(marker)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n']))
}

/// Whether `text` (part of a line) holds YAML content: not blank, not a comment.
fn holds_content(text: &str) -> bool {
    let text = text.trim();
    !text.is_empty() && !text.starts_with('#')
}

/// The text of the first YAML document of `text`: kustomize reads a kustomization file with
/// go-yaml v2, which reads only the first document (later ones are ignored, however
/// invalid). The first document ends at a `---` or `...` line once it has content or an
/// explicit start; directives and comments before it are no content. A document marker at
/// the start of a line always ends a document, even within a block scalar.
pub fn first_document(text: &str) -> &str {
    let mut started = false;
    let mut content = false;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if is_marker(line, "---") {
            if started || content {
                return &text[..offset];
            }
            started = true;
            content = holds_content(&line[3..]);
        } else if is_marker(line, "...") {
            if started || content {
                return &text[..offset];
            }
        } else if holds_content(line) && (started || !line.starts_with('%')) {
            content = true;
        }
        offset += line.len();
    }
    text
}

/// Whether a decoded kustomization (null fields already dropped) leaves every field at its
/// Go zero value once kustomize folded its deprecated fields, `apiVersion` and `kind`
/// aside: kustomize's "empty" test. A list, map or struct written empty is set (Go tells
/// an empty slice from a nil one), except `bases`, `imageTags` and
/// `helmChartInflationGenerator`, which kustomize folds into other fields and clears.
fn sets_no_field(fields: &serde_json::Map<String, Value>) -> bool {
    fields.iter().all(|(key, value)| match key.as_str() {
        "apiVersion" | "kind" => true,
        "bases" | "imageTags" | "helmChartInflationGenerator" => {
            value.as_array().is_some_and(Vec::is_empty)
        }
        "namePrefix" | "nameSuffix" | "namespace" => value.as_str() == Some(""),
        _ => false,
    })
}

impl Kustomization {
    /// Parses a kustomization file as kustomize does: its first YAML document, decoded
    /// strictly (unknown fields are errors); a file that sets no field besides `apiVersion`
    /// and `kind` is refused as empty, before they are checked; the deprecated fields are
    /// folded into their successors.
    pub fn parse(text: &str, file: &str) -> Result<Self, KustfileError> {
        let (kustomization, value) = Self::decode(
            file,
            goyaml::parse_documents_last_key_wins(first_document(text)),
            Mode::KUSTOMIZATION,
        )?;
        if value.as_object().is_some_and(sets_no_field) {
            return Err(KustfileError::Empty {
                file: file.to_string(),
            });
        }
        kustomization.checked(file)
    }

    /// Parses a kustomization file as Flux's kustomize-controller reads the one at the root of
    /// its build before it lays the Kustomization's fields over it and hands the result to
    /// kustomize: the first YAML document, read as go-yaml v2 reads it (YAML 1.1), decoded
    /// leniently (unknown fields are dropped, numbers and booleans given for strings become
    /// text), and not refused when it sets nothing.
    pub fn parse_as_flux(text: &str, file: &str) -> Result<Self, KustfileError> {
        let (kustomization, _) = Self::decode(
            file,
            goyaml::parse_documents_yaml11(first_document(text)),
            Mode::LENIENT,
        )?;
        kustomization.checked(file)
    }

    /// The first of the parsed documents decoded in `mode`, and the map it was decoded from
    /// (field names made canonical, nulls as Go's decoder reads them).
    fn decode(
        file: &str,
        docs: Result<Vec<Value>, goyaml::YamlError>,
        mode: Mode,
    ) -> Result<(Self, Value), KustfileError> {
        let docs = docs.map_err(|e| KustfileError::Syntax {
            file: file.to_string(),
            message: e.to_string(),
        })?;
        let value = docs
            .into_iter()
            .next()
            .unwrap_or_else(|| Value::Object(Default::default()));
        if !value.is_object() {
            return Err(KustfileError::Syntax {
                file: file.to_string(),
                message: "expected a map of kustomization fields".to_string(),
            });
        }
        let value = go_json_nulls(canonical_field_names(value), false);
        let kustomization =
            crate::gojson::from_value(&value, mode).map_err(|e| KustfileError::Schema {
                file: file.to_string(),
                message: describe_schema_error(&e),
            })?;
        Ok((kustomization, value))
    }

    /// The kind checked and the deprecated fields folded into their successors.
    fn checked(mut self, file: &str) -> Result<Self, KustfileError> {
        self.check_kind(file)?;
        self.fold_deprecated_fields();
        Ok(self)
    }

    /// Whether this file declares a Component.
    pub fn kustomization_kind(&self) -> KustomizationKind {
        if self.kind == "Component" {
            KustomizationKind::Component
        } else {
            KustomizationKind::Kustomization
        }
    }

    fn check_kind(&self, file: &str) -> Result<(), KustfileError> {
        let kind_error = |message: String| KustfileError::Kind {
            file: file.to_string(),
            message,
        };
        match self.kind.as_str() {
            "" | "Kustomization" => {
                if !self.api_version.is_empty() && self.api_version != KUSTOMIZATION_API_VERSION {
                    return Err(kind_error(format!(
                        "apiVersion for Kustomization should be {KUSTOMIZATION_API_VERSION}, not {}",
                        self.api_version
                    )));
                }
            }
            "Component" => {
                if !self.api_version.is_empty() && self.api_version != COMPONENT_API_VERSION {
                    return Err(kind_error(format!(
                        "apiVersion for Component should be {COMPONENT_API_VERSION}, not {:?}",
                        self.api_version
                    )));
                }
            }
            other => {
                return Err(kind_error(format!(
                    "kind should be Kustomization or Component, not {other}"
                )));
            }
        }
        Ok(())
    }

    /// Moves `bases` into `resources`, `imageTags` into `images` and generator `env` into
    /// `envs`, as kustomize does when it loads a file.
    pub fn fold_deprecated_fields(&mut self) {
        self.resources.append(&mut self.bases);
        self.images.append(&mut self.image_tags);
        for args in self
            .config_map_generator
            .iter_mut()
            .chain(self.secret_generator.iter_mut())
        {
            if !args.env.is_empty() {
                let env = std::mem::take(&mut args.env);
                args.envs.push(env);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_unknown_fields_naming_them() {
        let err = Kustomization::parse("resources: [a.yaml]\nresorces: [b.yaml]\n", "k.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("k.yaml") && err.contains("resorces"), "{err}");
    }

    #[test]
    fn null_fields_are_absent_and_null_map_values_empty_like_go() {
        let k = Kustomization::parse(
            "resources:\n- a.yaml\npatches: ~\nimages:\nnamePrefix: null\n\
             configMapGenerator:\n- name: c\n  literals: ~\n\
             commonLabels: {team: null}\n",
            "k.yaml",
        )
        .unwrap();
        assert_eq!(k.resources, ["a.yaml"]);
        assert!(k.patches.is_empty() && k.images.is_empty());
        assert_eq!(k.name_prefix, "");
        assert_eq!(k.config_map_generator[0].name, "c");
        assert_eq!(k.common_labels.get("team").map(String::as_str), Some(""));
    }

    #[test]
    fn matches_field_names_case_insensitively_like_go() {
        let k = Kustomization::parse("nameprefix: p-\nNAMESPACE: x\n", "k.yaml").unwrap();
        assert_eq!((k.name_prefix.as_str(), k.namespace.as_str()), ("p-", "x"));
    }

    #[test]
    fn folds_deprecated_fields() {
        let k = Kustomization::parse(
            "bases: [../base]\nresources: [a.yaml]\nimageTags: [{name: nginx, newTag: '1.2'}]\n\
             configMapGenerator: [{name: c, env: a.env, envs: [b.env]}]\n",
            "k.yaml",
        )
        .unwrap();
        assert_eq!(k.resources, ["a.yaml", "../base"]);
        assert_eq!(k.images[0].new_tag, "1.2");
        assert_eq!(k.config_map_generator[0].envs, ["b.env", "a.env"]);
    }

    #[test]
    fn checks_component_api_version() {
        let err = Kustomization::parse("apiVersion: v1\nkind: Component\nresources: []\n", "k")
            .unwrap_err();
        assert!(matches!(err, KustfileError::Kind { .. }), "{err}");
        let c = Kustomization::parse(
            "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: []\n",
            "k",
        )
        .unwrap();
        assert_eq!(c.kustomization_kind(), KustomizationKind::Component);
    }

    #[test]
    fn a_file_setting_no_field_besides_api_version_and_kind_is_empty() {
        let empty = [
            "",
            "# only a comment\n",
            "{}\n",
            "null\n",
            "kind: Kustomization\n",
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n",
            "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n",
            // Emptiness is checked before the kind.
            "kind: Foo\n",
            "resources:\nmetadata: null\n",
            "namePrefix: ''\nnamespace: ''\n",
            // Folded away by kustomize.
            "bases: []\nimageTags: []\nhelmChartInflationGenerator: []\n",
            // Only the first document counts.
            "---\n---\nresources: [a.yaml]\n",
            "kind: Kustomization\n---\nresources: [a.yaml]\n",
        ];
        for text in empty {
            let err = Kustomization::parse(text, "k/kustomization.yaml").unwrap_err();
            assert!(
                matches!(err, KustfileError::Empty { .. }),
                "{text:?}: {err}"
            );
            assert!(
                err.to_string()
                    .starts_with("k/kustomization.yaml: kustomization is empty"),
                "{err}"
            );
        }
        // Written empty, a list, map or struct is set (Go tells it from nil).
        for text in [
            "resources: []\n",
            "metadata: {}\n",
            "commonLabels: {}\n",
            "openapi: {}\n",
            "configMapGenerator: []\n",
            "generatorOptions: {}\n",
            "components: []\n",
            "crds: []\n",
            "replicas: []\n",
            "namePrefix: p-\n",
            "bases: [../b]\n",
        ] {
            Kustomization::parse(text, "k").unwrap_or_else(|e| panic!("{text:?}: {e}"));
        }
        // A kind kustomize refuses is refused once something is set.
        let err = Kustomization::parse("kind: Foo\nresources: []\n", "k").unwrap_err();
        assert!(matches!(err, KustfileError::Kind { .. }), "{err}");
    }

    #[test]
    fn only_the_first_document_is_read() {
        let k = Kustomization::parse("resources: [a.yaml]\n---\nbogus: [\n", "k").unwrap();
        assert_eq!(k.resources, ["a.yaml"]);
        for text in [
            "# c\n---\nresources: [a.yaml]\n",
            "%YAML 1.1\n---\nresources: [a.yaml]\n",
            "--- {resources: [a.yaml]}\n--- {x: 1}\n",
            "resources: [a.yaml]\n...\nbogus: 1\n",
        ] {
            let k = Kustomization::parse(text, "k").unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(k.resources, ["a.yaml"], "{text:?}");
        }
        assert_eq!(first_document("a: 1\n----\nb: 2\n"), "a: 1\n----\nb: 2\n");
        assert_eq!(first_document("a: |\n  x\n--- \nb: 2\n"), "a: |\n  x\n");
    }

    #[test]
    fn type_errors_name_the_field() {
        let cases = [
            (
                "resources:\n  a: b\n",
                "Kustomization.resources: expected a list, got a map",
            ),
            (
                "resources:\n- a.yaml\n- {x: 1}\n",
                "Kustomization.resources[1]: expected a string, got a map",
            ),
            (
                "namePrefix: [a]\n",
                "Kustomization.namePrefix: expected a string, got a list",
            ),
            (
                "commonLabels: [1]\n",
                "Kustomization.commonLabels: expected a map, got a list",
            ),
            ("bogus: 1\n", "unknown field `bogus`"),
        ];
        for (text, needle) in cases {
            let err = Kustomization::parse(text, "k/kustomization.yaml")
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("k/kustomization.yaml: "), "{err}");
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }
}
