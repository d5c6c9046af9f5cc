//! kustomize's `replacements`: copy a value from one field of one object (or a literal
//! `sourceValue`) into fields of the selected objects.
//!
//! Entries come from a kustomization's `replacements:` (inline, strictly checked, or
//! `{path: file}`) or from a `ReplacementTransformer` config. Replacements run in order;
//! each sees the changes of the previous ones.
//!
//! - The source must match exactly one object: exact group/version/kind/name/namespace
//!   over the object's current and previous ids ("" and "default" namespaces are equal).
//! - Targets: `select` regexes (anchored) over any current or previous id, labels and
//!   annotations; minus objects matching a `reject` (by id, or by labels/annotations).
//!   The source object is a target like any other.
//! - An existing scalar target keeps its type (a number stays a number); a created field
//!   takes the type its text resolves to; maps and lists are copied whole.
//! - A target path that matches nothing is an error.

mod path;
mod scalar;
mod types;

use crate::budget::Budget;
use goyaml::MAX_DEPTH;
use std::path::Path;

use regex::Regex;
use serde_json::Value;

pub use types::{FieldOptions, Replacement, SourceSelector, TargetSelector};

use super::gojson::{self, Mode};
use super::kustfile::Selector;
use super::loader::{LoadError, Loader};
use super::resource::{Object, ResId, ResMap, Resource};
use super::selector::{CompiledSelector, SelectorError, anchored};
pub use path::PathError;
use path::{Leaf, NodeKind, WalkError};
use scalar::{is_scalar, resolve_plain, scalar_text};

/// The field a source or target reads or writes when none is given.
pub const DEFAULT_FIELD_PATH: &str = "metadata.name";

/// A replacement that cannot be loaded or applied.
#[derive(Debug, thiserror::Error)]
pub enum ReplacementError {
    /// The replacement would copy too much (one value into very many fields).
    #[error("replacements entry {index}: {source}")]
    Budget {
        /// Position of the entry in its list.
        index: usize,
        /// The bound that was reached.
        source: crate::budget::BudgetError,
    },
    /// A target field path is deeper than any document may nest.
    #[error("replacements entry {index}: fieldPath '{field_path}' has more than {limit} segments")]
    PathTooDeep {
        /// Position of the entry in its list.
        index: usize,
        /// The field path (shortened).
        field_path: String,
        /// The bound.
        limit: usize,
    },
    /// An entry does not match the replacement schema.
    #[error("replacements entry {index}: {message}")]
    Schema {
        /// Position of the entry in its list.
        index: usize,
        /// What is wrong.
        message: String,
    },
    /// An entry has both `path` and inline fields.
    #[error("replacements entry {index}: cannot specify both path and inline replacement")]
    PathAndInline {
        /// Position of the entry in its list.
        index: usize,
    },
    /// A replacements file cannot be read.
    #[error("replacements file {path}: {source}")]
    Load {
        /// The file as named.
        path: String,
        /// Why it cannot be read.
        source: LoadError,
    },
    /// A replacements file holds something else than replacements.
    #[error("replacements file {path}: {message}")]
    File {
        /// The file as named.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A `ReplacementTransformer` config with a `replacements` field that is not a list.
    #[error("ReplacementTransformer {name}: replacements must be a list")]
    Config {
        /// `metadata.name` of the config.
        name: String,
    },
    /// Neither `source` nor `sourceValue`, or no `targets`.
    #[error("replacement {index}: replacements must specify a source and at least one target")]
    Incomplete {
        /// Position of the replacement.
        index: usize,
    },
    /// Both `source` and `sourceValue`.
    #[error("replacement {index}: value and resource selectors are mutually exclusive")]
    SourceAndValue {
        /// Position of the replacement.
        index: usize,
    },
    /// No object matches the source selector.
    #[error("nothing selected by {selector}")]
    NoSource {
        /// The source selector.
        selector: String,
    },
    /// More than one object matches the source selector.
    #[error("multiple matches for selector {selector}")]
    AmbiguousSource {
        /// The source selector.
        selector: String,
    },
    /// The source field path cannot be followed.
    #[error("error looking up replacement source {selector}: {source}")]
    SourceLookup {
        /// The source selector.
        selector: String,
        /// Why.
        source: PathError,
    },
    /// The source field is absent, null or empty.
    #[error("fieldPath `{field_path}` is missing for replacement source {id}")]
    SourceFieldMissing {
        /// The field path.
        field_path: String,
        /// The source id.
        id: String,
    },
    /// The source `options.index` does not name a part of the split value.
    #[error(
        "options.index {index} is out of bounds for the value of replacement source {selector} ({parts} parts)"
    )]
    SourceIndex {
        /// The index.
        index: i64,
        /// How many parts the value split into.
        parts: usize,
        /// The source selector.
        selector: String,
    },
    /// `options.delimiter` on a source field that is a map or a list.
    #[error("delimiter option can only be used with scalar nodes (replacement source {selector})")]
    SourceNotScalar {
        /// The source selector.
        selector: String,
    },
    /// A target without `select`.
    #[error("replacement {index}: target must specify resources to select")]
    NoSelect {
        /// Position of the replacement.
        index: usize,
    },
    /// A target selector that does not compile.
    #[error("replacement {index}: error creating target selector {selector}: {source}")]
    Selector {
        /// Position of the replacement.
        index: usize,
        /// The `select` part of the target.
        selector: String,
        /// The selector error.
        source: SelectorError,
    },
    /// A target field path that matches nothing, or cannot be followed or created.
    #[error(
        "unable to find{} field {field_path:?} in replacement target {target}{}",
        if *.create { " or create" } else { "" },
        .detail.as_ref().map(|d| format!(": {d}")).unwrap_or_default()
    )]
    TargetField {
        /// The field path.
        field_path: String,
        /// The target object's id.
        target: String,
        /// Whether `options.create` was set.
        create: bool,
        /// Why, when known.
        detail: Option<PathError>,
    },
    /// The value cannot be written into a matched target field.
    #[error("field {field_path:?} of replacement target {target}: {source}")]
    TargetValue {
        /// The field path.
        field_path: String,
        /// The target object's id.
        target: String,
        /// Why.
        source: ValueError,
    },
}

/// Why a value cannot be written into a target field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// A delimiter option on a field that is not a scalar.
    #[error("delimiter option can only be used with scalar nodes")]
    DelimiterOnNonScalar,
    /// A boolean field and a value that is not one.
    #[error("the field is a boolean and the new value is not")]
    NotABoolean,
    /// A floating-point field and a value that is not a number.
    #[error("the field is a number and the new value is not")]
    NotANumber,
    /// An integer field and a value that is not one.
    #[error("the field is an integer and the new value is not")]
    NotAnInteger,
    /// The build's copy budget ran out (the budget's own error is reported instead).
    #[error("over budget")]
    OverBudget,
}

/// Applies a kustomization's `replacements:` entries: inline replacements (strict schema)
/// or `{path: file}` entries, whose file holds one replacement or a list of them.
pub fn apply_replacements(
    resmap: &mut ResMap,
    entries: &[Value],
    loader: &Loader,
    dir: &Path,
) -> Result<(), ReplacementError> {
    let replacements = load_entries(entries, loader, dir, true)?;
    apply_list(resmap, &replacements)
}

/// Applies a `transformers:` entry of kind `ReplacementTransformer`: its `replacements`
/// field holds entries like a kustomization's, decoded leniently as kustomize does.
pub fn apply_builtin_replacement_transformer(
    resmap: &mut ResMap,
    config: &Object,
    loader: &Loader,
    dir: &Path,
) -> Result<(), ReplacementError> {
    let entries = match config.get("replacements") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(entries)) => entries,
        Some(_) => {
            let name = config
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            return Err(ReplacementError::Config { name });
        }
    };
    let replacements = load_entries(entries, loader, dir, false)?;
    apply_list(resmap, &replacements)
}

/// Applies replacements in order.
pub fn apply_list(
    resmap: &mut ResMap,
    replacements: &[Replacement],
) -> Result<(), ReplacementError> {
    let mut budget = Budget::new();
    for (index, replacement) in replacements.iter().enumerate() {
        let targets = match (&replacement.source, &replacement.source_value) {
            (None, None) => None,
            _ => replacement.targets.as_ref(),
        };
        let Some(targets) = targets else {
            return Err(ReplacementError::Incomplete { index });
        };
        let value = source_value(resmap, replacement, index)?;
        let size = value.extent();
        for target in targets {
            apply_target(resmap, &value, size, target, index, &mut budget)?;
        }
    }
    Ok(())
}

fn load_entries(
    entries: &[Value],
    loader: &Loader,
    dir: &Path,
    strict: bool,
) -> Result<Vec<Replacement>, ReplacementError> {
    let mut out = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        out.extend(load_entry(entry, index, loader, dir, strict)?);
    }
    Ok(out)
}

fn schema_error(index: usize, message: impl Into<String>) -> ReplacementError {
    ReplacementError::Schema {
        index,
        message: message.into(),
    }
}

fn load_entry(
    entry: &Value,
    index: usize,
    loader: &Loader,
    dir: &Path,
    strict: bool,
) -> Result<Vec<Replacement>, ReplacementError> {
    let Value::Object(map) = entry else {
        return Err(schema_error(index, "expected a map"));
    };
    let file = match map.get("path") {
        None | Some(Value::Null) => None,
        Some(Value::String(p)) if p.is_empty() => None,
        Some(Value::String(p)) => Some(p.as_str()),
        Some(_) => return Err(schema_error(index, "path must be a string")),
    };
    if let Some(file) = file {
        let has_source = map.get("source").is_some_and(|s| !s.is_null());
        let has_targets = map
            .get("targets")
            .and_then(Value::as_array)
            .is_some_and(|t| !t.is_empty());
        if has_source || has_targets {
            return Err(ReplacementError::PathAndInline { index });
        }
        return load_file(file, loader, dir);
    }
    let mut inline = entry.clone();
    if let Value::Object(map) = &mut inline {
        map.shift_remove("path");
    }
    // In a kustomization, strict; in a ReplacementTransformer config, lenient, and Go's
    // converter cannot see the types (they are declared in an embedded struct).
    let mode = if strict {
        Mode::KUSTOMIZATION
    } else {
        Mode::LENIENT_UNCONVERTED
    };
    let mut replacement: Replacement =
        gojson::from_value(&inline, mode).map_err(|e| schema_error(index, e.to_string()))?;
    if strict && replacement.targets.as_ref().is_some_and(Vec::is_empty) {
        // kustomize drops an empty list when it re-encodes the kustomization's entries.
        replacement.targets = None;
    }
    Ok(vec![replacement])
}

fn load_file(
    file: &str,
    loader: &Loader,
    dir: &Path,
) -> Result<Vec<Replacement>, ReplacementError> {
    let file_error = |message: String| ReplacementError::File {
        path: file.to_string(),
        message,
    };
    let text = loader
        .read_text(dir, file)
        .map_err(|source| ReplacementError::Load {
            path: file.to_string(),
            source,
        })?;
    // Read as go-yaml v2 reads it (YAML 1.1 booleans), decoded leniently.
    let docs = goyaml::parse_documents_yaml11(&text).map_err(|e| file_error(e.to_string()))?;
    let items = match docs.into_iter().next() {
        Some(Value::Array(items)) => items,
        Some(doc @ Value::Object(_)) => vec![doc],
        _ => {
            return Err(file_error(
                "expected a replacement or a list of replacements".to_string(),
            ));
        }
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            gojson::from_value(&item, Mode::LENIENT)
                .map_err(|e| file_error(format!("entry {i}: {e}")))
        })
        .collect()
}

/// The value a replacement writes.
#[derive(Clone, Debug, PartialEq)]
enum SourceValue {
    /// A node with a type of its own.
    Node(Value),
    /// Untyped scalar text (`sourceValue`, or part of a split non-string scalar).
    Plain(String),
}

impl SourceValue {
    /// The scalar text; "" for maps and lists.
    fn text(&self) -> String {
        match self {
            SourceValue::Node(v) => scalar_text(v).unwrap_or_default(),
            SourceValue::Plain(s) => s.clone(),
        }
    }

    /// Estimated bytes one copy of the value adds.
    fn extent(&self) -> usize {
        match self {
            SourceValue::Node(v) => crate::budget::extent(v),
            SourceValue::Plain(s) => s.len(),
        }
    }

    /// The value as a node.
    fn node(&self) -> Value {
        match self {
            SourceValue::Node(v) => v.clone(),
            SourceValue::Plain(s) => resolve_plain(s),
        }
    }

    fn kind(&self) -> NodeKind {
        match self {
            SourceValue::Node(v) => NodeKind::of(v),
            SourceValue::Plain(_) => NodeKind::Scalar,
        }
    }
}

fn source_value(
    resmap: &ResMap,
    replacement: &Replacement,
    index: usize,
) -> Result<SourceValue, ReplacementError> {
    let source = match (&replacement.source, &replacement.source_value) {
        (Some(_), Some(_)) => return Err(ReplacementError::SourceAndValue { index }),
        (None, Some(value)) => return Ok(SourceValue::Plain(value.clone())),
        (Some(source), None) => source,
        (None, None) => return Err(ReplacementError::Incomplete { index }),
    };
    let object = select_source(resmap, source)?;
    let mut source = source.clone();
    if source.field_path.is_empty() {
        source.field_path = DEFAULT_FIELD_PATH.to_string();
    }
    let segments = path::split_path(&source.field_path);
    let root = Value::Object(object.obj.clone());
    let found = path::lookup(&root, &segments).map_err(|e| ReplacementError::SourceLookup {
        selector: source.describe(),
        source: e,
    })?;
    let value = match found {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) if m.is_empty() => None,
        Some(Value::Array(a)) if a.is_empty() => None,
        Some(v) => Some(v.clone()),
    };
    let Some(value) = value else {
        return Err(ReplacementError::SourceFieldMissing {
            field_path: source.field_path.clone(),
            id: source.describe_id(),
        });
    };
    refine(&source, value)
}

/// Applies the source's `delimiter`/`index` options.
fn refine(source: &SourceSelector, value: Value) -> Result<SourceValue, ReplacementError> {
    let Some(options) = source.options.as_ref().filter(|o| !o.delimiter.is_empty()) else {
        return Ok(SourceValue::Node(value));
    };
    let Some(text) = scalar_text(&value).filter(|_| is_scalar(&value)) else {
        return Err(ReplacementError::SourceNotScalar {
            selector: source.describe(),
        });
    };
    let parts: Vec<&str> = text.split(options.delimiter.as_str()).collect();
    let part = usize::try_from(options.index)
        .ok()
        .and_then(|i| parts.get(i))
        .ok_or_else(|| ReplacementError::SourceIndex {
            index: options.index,
            parts: parts.len(),
            selector: source.describe(),
        })?;
    Ok(match value {
        Value::String(_) => SourceValue::Node(Value::String(part.to_string())),
        _ => SourceValue::Plain(part.to_string()),
    })
}

/// The namespace a source selector compares: unset means "default".
fn source_namespace(namespace: &str) -> &str {
    if namespace.is_empty() {
        "default"
    } else {
        namespace
    }
}

fn source_selects(source: &SourceSelector, id: &ResId) -> bool {
    let exact = |want: &str, have: &str| want.is_empty() || want == have;
    exact(&source.group, &id.gvk.group)
        && exact(&source.version, &id.gvk.version)
        && exact(&source.kind, &id.gvk.kind)
        && exact(&source.name, &id.name)
        && (source.namespace.is_empty()
            || source_namespace(&source.namespace) == source_namespace(&id.namespace))
}

fn select_source<'a>(
    resmap: &'a ResMap,
    source: &SourceSelector,
) -> Result<&'a Resource, ReplacementError> {
    let mut found = None;
    for resource in resmap.iter() {
        if resource.all_ids().any(|id| source_selects(source, &id)) {
            if found.is_some() {
                return Err(ReplacementError::AmbiguousSource {
                    selector: source.describe(),
                });
            }
            found = Some(resource);
        }
    }
    found.ok_or_else(|| ReplacementError::NoSource {
        selector: source.describe(),
    })
}

/// The id part of a target selector: anchored regexes, the namespace compared as written.
struct IdRegexes {
    group: Option<Regex>,
    version: Option<Regex>,
    kind: Option<Regex>,
    name: Option<Regex>,
    namespace: Option<Regex>,
}

impl IdRegexes {
    fn new(selector: &Selector) -> Result<Self, SelectorError> {
        Ok(IdRegexes {
            group: anchored("group", &selector.group)?,
            version: anchored("version", &selector.version)?,
            kind: anchored("kind", &selector.kind)?,
            name: anchored("name", &selector.name)?,
            namespace: anchored("namespace", &selector.namespace)?,
        })
    }

    fn is_empty(&self) -> bool {
        self.group.is_none()
            && self.version.is_none()
            && self.kind.is_none()
            && self.name.is_none()
            && self.namespace.is_none()
    }

    fn matches(&self, id: &ResId) -> bool {
        let ok = |r: &Option<Regex>, s: &str| r.as_ref().is_none_or(|r| r.is_match(s));
        ok(&self.group, &id.gvk.group)
            && ok(&self.version, &id.gvk.version)
            && ok(&self.kind, &id.gvk.kind)
            && ok(&self.name, &id.name)
            && ok(&self.namespace, &id.namespace)
    }
}

/// The label and annotation part of a selector; `None` when it has neither.
fn label_part(selector: &Selector) -> Result<Option<CompiledSelector>, SelectorError> {
    if selector.label_selector.is_empty() && selector.annotation_selector.is_empty() {
        return Ok(None);
    }
    CompiledSelector::new(&Selector {
        label_selector: selector.label_selector.clone(),
        annotation_selector: selector.annotation_selector.clone(),
        ..Selector::default()
    })
    .map(Some)
}

/// A compiled target selector.
struct TargetFilter {
    select_ids: IdRegexes,
    select_labels: Option<CompiledSelector>,
    reject_ids: Vec<IdRegexes>,
    reject_labels: Vec<CompiledSelector>,
}

impl TargetFilter {
    fn new(select: &Selector, rejects: &[Selector]) -> Result<Self, SelectorError> {
        let mut reject_ids = Vec::new();
        let mut reject_labels = Vec::new();
        for reject in rejects {
            let ids = IdRegexes::new(reject)?;
            if !ids.is_empty() {
                reject_ids.push(ids);
            }
            reject_labels.extend(label_part(reject)?);
        }
        Ok(TargetFilter {
            select_ids: IdRegexes::new(select)?,
            select_labels: label_part(select)?,
            reject_ids,
            reject_labels,
        })
    }

    fn matches(&self, resource: &Resource) -> bool {
        if self
            .select_labels
            .as_ref()
            .is_some_and(|s| !s.matches(resource))
        {
            return false;
        }
        if self.reject_labels.iter().any(|s| s.matches(resource)) {
            return false;
        }
        let ids: Vec<ResId> = resource.all_ids().collect();
        if self
            .reject_ids
            .iter()
            .any(|r| ids.iter().any(|id| r.matches(id)))
        {
            return false;
        }
        ids.iter().any(|id| self.select_ids.matches(id))
    }
}

fn apply_target(
    resmap: &mut ResMap,
    value: &SourceValue,
    size: usize,
    target: &TargetSelector,
    index: usize,
    budget: &mut Budget,
) -> Result<(), ReplacementError> {
    let select = target
        .select
        .as_ref()
        .ok_or(ReplacementError::NoSelect { index })?;
    let filter =
        TargetFilter::new(select, &target.reject).map_err(|source| ReplacementError::Selector {
            index,
            selector: types::describe_selector(select),
            source,
        })?;
    let default_paths = [DEFAULT_FIELD_PATH.to_string()];
    let field_paths: &[String] = if target.field_paths.is_empty() {
        &default_paths
    } else {
        &target.field_paths
    };
    for field_path in field_paths {
        let segments = path::split_path(field_path).len();
        if segments > MAX_DEPTH {
            return Err(ReplacementError::PathTooDeep {
                index,
                field_path: field_path.chars().take(80).collect(),
                limit: MAX_DEPTH,
            });
        }
    }
    for resource in resmap.iter_mut() {
        if filter.matches(resource) {
            for field_path in field_paths {
                let mut charge = |target: &str| {
                    budget
                        .charge(size, || {
                            format!("copying the value into {field_path} of {target}")
                        })
                        .map_err(|source| ReplacementError::Budget { index, source })
                };
                write_target(
                    resource,
                    value,
                    field_path,
                    target.options.as_ref(),
                    &mut charge,
                )?;
            }
        }
    }
    Ok(())
}

/// Writes the value into every field `field_path` matches in `resource`.
fn write_target(
    resource: &mut Resource,
    value: &SourceValue,
    field_path: &str,
    options: Option<&FieldOptions>,
    charge: &mut dyn FnMut(&str) -> Result<(), ReplacementError>,
) -> Result<(), ReplacementError> {
    let create = options.is_some_and(|o| o.create);
    let target_id = resource.id().describe();
    let segments = path::split_path(field_path);
    let mut over_budget = None;
    let mut root = Value::Object(std::mem::take(&mut resource.obj));
    let result = path::walk(
        &mut root,
        &segments,
        create.then(|| value.kind()),
        &mut |node, leaf| {
            if let Err(e) = charge(&target_id) {
                over_budget = Some(e);
                return Err(ValueError::OverBudget);
            }
            set_field(node, leaf, value, options)
        },
    );
    if let Some(e) = over_budget {
        if let Value::Object(obj) = root {
            resource.obj = obj;
        }
        return Err(e);
    }
    if let Value::Object(obj) = root {
        resource.obj = obj;
    }
    let field_error = |detail| ReplacementError::TargetField {
        field_path: field_path.to_string(),
        target: target_id.clone(),
        create,
        detail,
    };
    match result {
        Ok(0) => Err(field_error(None)),
        Ok(_) => Ok(()),
        Err(WalkError::Path(detail)) => Err(field_error(Some(detail))),
        Err(WalkError::Visit(source)) => Err(ReplacementError::TargetValue {
            field_path: field_path.to_string(),
            target: target_id.clone(),
            source,
        }),
    }
}

/// Writes the value into one matched field. Delimiter options (ignored inside structured
/// text, as kustomize does) replace, prepend or append one part of the field's string.
fn set_field(
    target: &mut Value,
    leaf: Leaf,
    value: &SourceValue,
    options: Option<&FieldOptions>,
) -> Result<(), ValueError> {
    let delimited = options.filter(|o| !o.delimiter.is_empty() && !leaf.structured);
    let mut text = value.text();
    if let Some(options) = delimited {
        let current = scalar_text(target)
            .filter(|_| is_scalar(target))
            .ok_or(ValueError::DelimiterOnNonScalar)?;
        let mut parts: Vec<&str> = current.split(options.delimiter.as_str()).collect();
        match usize::try_from(options.index) {
            Err(_) => parts.insert(0, &text),
            Ok(i) if i >= parts.len() => parts.push(&text),
            Ok(i) => parts[i] = &text,
        }
        text = parts.join(&options.delimiter);
    }
    if is_scalar(target) {
        *target = typed_like(target, &text, leaf.created)?;
    } else {
        *target = value.node();
    }
    Ok(())
}

/// New text for an existing scalar keeps the scalar's type; a scalar the walk created has
/// no type yet and takes the one its text resolves to.
fn typed_like(target: &Value, text: &str, created: bool) -> Result<Value, ValueError> {
    if created {
        return Ok(resolve_plain(text));
    }
    match target {
        Value::String(_) => Ok(Value::String(text.to_string())),
        Value::Null if text.is_empty() => Ok(Value::Null),
        Value::Null => Ok(Value::String(text.to_string())),
        Value::Bool(_) => match resolve_plain(text) {
            b @ Value::Bool(_) => Ok(b),
            _ => Err(ValueError::NotABoolean),
        },
        Value::Number(n) => match resolve_plain(text) {
            Value::Number(new) if n.is_f64() || !new.is_f64() => Ok(Value::Number(new)),
            _ if n.is_f64() => Err(ValueError::NotANumber),
            _ => Err(ValueError::NotAnInteger),
        },
        Value::Array(_) | Value::Object(_) => Ok(target.clone()),
    }
}

#[cfg(test)]
mod tests;
