//! The patch transformers: `patches`, `patchesStrategicMerge`, `patchesJson6902` and their
//! builtin plugin forms (`PatchTransformer`, `PatchStrategicMergeTransformer`,
//! `PatchJson6902Transformer`).

use std::path::Path;

use serde_json::Value;

use super::budget::Budget;
use super::build_annotations;
use super::gojson::{self, Mode};
use super::json6902;
use super::kustfile::{Patch, PatchArgs, Selector};
use super::loader::{LoadError, Loader, escape_name};
use super::resource::{ResId, ResMap, Resource};
use super::selector::{SelectorError, select};
use super::smp::{SmpError, drop_empty_nulls, strategic_merge_with};
use super::smp_schema::SchemaSet;

/// Why a patch could not be loaded or applied.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The patch file could not be read.
    #[error("failed to get the patch file from path({path}): {source}")]
    Load {
        /// The path as written.
        path: String,
        /// The loader's error.
        source: LoadError,
    },
    /// The patch entry is malformed.
    #[error("{patch}: {message}")]
    Config {
        /// The patch (file, inline patch or plugin).
        patch: String,
        /// What is wrong.
        message: String,
    },
    /// The patch text is neither a strategic merge patch nor a JSON patch.
    #[error("unable to parse SM or JSON patch from {patch}: {source}")]
    Parse {
        /// The patch.
        patch: String,
        /// Why.
        source: ParseError,
    },
    /// The patch has no content.
    #[error("patch appears to be empty; {patch}")]
    Empty {
        /// The patch.
        patch: String,
    },
    /// A strategic merge patch without target matches no resource, or several.
    #[error("no unique resource matches strategic merge patch {id} from {patch}: {found} matches")]
    NoUniqueTarget {
        /// The patch.
        patch: String,
        /// The id the patch names.
        id: String,
        /// How many resources matched.
        found: usize,
    },
    /// A target selector is invalid.
    #[error("{patch}: {source}")]
    Selector {
        /// The patch.
        patch: String,
        /// The selector's error.
        source: SelectorError,
    },
    /// Merging failed.
    #[error("applying strategic merge patch {patch} to {target}: {source}")]
    Smp {
        /// The patch.
        patch: String,
        /// The target's id.
        target: String,
        /// The merge error.
        source: SmpError,
    },
    /// A JSON patch failed.
    #[error("applying JSON 6902 patch {patch}: {source}")]
    Json6902 {
        /// The patch (and target, when known).
        patch: String,
        /// The failing operation and path.
        source: Box<json6902::ApplyError>,
    },
    /// Applying the patch to all its targets would copy too much.
    #[error(transparent)]
    Budget(crate::budget::BudgetError),
    /// A patch left two resources with the same id.
    #[error("patch {patch} gives two resources the id {id}")]
    DuplicateId {
        /// The patch.
        patch: String,
        /// The id.
        id: String,
    },
    /// A `transformers:` entry of an unknown builtin kind.
    #[error("{kind} is not a builtin patch transformer")]
    UnknownPlugin {
        /// The kind.
        kind: String,
    },
}

impl From<json6902::Json6902Error> for PatchError {
    fn from(error: json6902::Json6902Error) -> Self {
        match error {
            json6902::Json6902Error::Parse { patch, source } => PatchError::Parse {
                patch,
                source: source.into(),
            },
            json6902::Json6902Error::Apply { patch, source } => {
                PatchError::Json6902 { patch, source }
            }
        }
    }
}

/// Why a patch's text is neither a strategic merge patch nor a JSON patch.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// It is not a strategic merge patch.
    #[error(transparent)]
    Smp(#[from] SmpDocError),
    /// It is not a list of JSON patch operations.
    #[error(transparent)]
    Ops(#[from] json6902::OpsError),
    /// It is empty, so no JSON patch.
    #[error("empty json patch operations")]
    EmptyOps,
}

/// Why a patch's text is not a strategic merge patch.
#[derive(Debug, thiserror::Error)]
pub enum SmpDocError {
    /// The text is not YAML.
    #[error(transparent)]
    Yaml(#[from] goyaml::YamlError),
    /// A document is not a map.
    #[error("a strategic merge patch must be a map")]
    NotAMap,
    /// A document names no kind.
    #[error("strategic merge patch document {index}: missing kind")]
    MissingKind {
        /// The document's index.
        index: usize,
    },
    /// A document (not a list) names no object.
    #[error("strategic merge patch document {index}: missing metadata.name")]
    MissingName {
        /// The document's index.
        index: usize,
    },
    /// An item of a `*List` document is not a map.
    #[error("a list item must be a map")]
    ListItemNotAMap,
}

/// `options` of a patch.
#[derive(Clone, Copy, Debug, Default)]
struct PatchOptions {
    allow_name_change: bool,
    allow_kind_change: bool,
}

/// A strategic merge patch document and the patch (file or inline) it came from.
type SourcedPatch = (String, serde_json::Map<String, Value>);

/// A loaded patch: strategic merge documents or JSON operations.
enum Loaded {
    Smp(Vec<serde_json::Map<String, Value>>),
    Json(Vec<json6902::Operation>),
}

/// Parses strategic merge patch documents: every document must be a map with a `kind` and
/// (unless it is a `*List`) a `metadata.name`, as kustomize reads patches as resources.
fn parse_smp(text: &str) -> Result<Vec<serde_json::Map<String, Value>>, SmpDocError> {
    let docs = goyaml::parse_documents(text)?;
    docs.into_iter()
        .enumerate()
        .map(|(index, doc)| match doc {
            Value::Object(map) => {
                check_smp_metadata(&map, index)?;
                expand_list(map)
            }
            _ => Err(SmpDocError::NotAMap),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(|nested| nested.into_iter().flatten().collect())
}

/// A strategic merge patch names its target's kind and name (kustomize's
/// `GetValidatedMetadata`).
fn check_smp_metadata(
    map: &serde_json::Map<String, Value>,
    index: usize,
) -> Result<(), SmpDocError> {
    let kind = map.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind.is_empty() {
        return Err(SmpDocError::MissingKind { index });
    }
    let name = map
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if name.is_empty() && !kind.ends_with("List") {
        return Err(SmpDocError::MissingName { index });
    }
    Ok(())
}

/// A `*List` document with `items` stands for its items.
fn expand_list(
    map: serde_json::Map<String, Value>,
) -> Result<Vec<serde_json::Map<String, Value>>, SmpDocError> {
    let is_list = map
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"));
    match map.get("items") {
        Some(Value::Array(items)) if is_list => items
            .iter()
            .map(|item| {
                item.as_object()
                    .cloned()
                    .ok_or(SmpDocError::ListItemNotAMap)
            })
            .collect(),
        _ => Ok(vec![map]),
    }
}

/// Decides, as kustomize does, whether `text` is a strategic merge patch or a JSON patch.
fn classify(text: &str, source: &str) -> Result<Loaded, PatchError> {
    let smp = parse_smp(text);
    let json = if text.is_empty() {
        Err(ParseError::EmptyOps)
    } else {
        json6902::parse_ops(text).map_err(ParseError::from)
    };
    match (smp, json) {
        (Ok(docs), Ok(ops)) if !docs.is_empty() && !ops.is_empty() => Err(PatchError::Config {
            patch: source.to_string(),
            message: "illegally qualifies as both an SM and JSON patch".to_string(),
        }),
        (Ok(docs), _) => Ok(Loaded::Smp(docs)),
        (Err(_), Ok(ops)) => Ok(Loaded::Json(ops)),
        (Err(smp), Err(json)) => {
            // Report the kind of patch the text looks like: operations (a list, or a map
            // with `op`) get the JSON 6902 reason, anything else the strategic merge one.
            let ops_like = json6902::parse_ops_value(text)
                .map(|v| json6902::looks_like_ops(&v))
                .unwrap_or(false);
            Err(PatchError::Parse {
                patch: source.to_string(),
                source: if ops_like { json } else { smp.into() },
            })
        }
    }
}

/// How a patch is named in messages.
fn describe_source(path: &str) -> String {
    if path.is_empty() {
        "inline patch".to_string()
    } else {
        format!("patch file {}", escape_name(path))
    }
}

/// One configured `PatchTransformer`.
struct PatchTransformer {
    source: String,
    loaded: Loaded,
    target: Option<Selector>,
    options: PatchOptions,
}

impl PatchTransformer {
    fn configure(
        path: &str,
        inline: &str,
        target: Option<Selector>,
        options: PatchOptions,
        loader: &Loader,
        dir: &Path,
    ) -> Result<Self, PatchError> {
        let inline = inline.trim();
        let (text, source) = match (inline.is_empty(), path.is_empty()) {
            (true, true) => {
                return Err(PatchError::Config {
                    patch: "patches entry".to_string(),
                    message: "must specify one of patch and path".to_string(),
                });
            }
            (false, false) => {
                return Err(PatchError::Config {
                    patch: describe_source(path),
                    message: "patch and path can't be set at the same time".to_string(),
                });
            }
            (false, true) => (inline.to_string(), describe_source("")),
            (true, false) => (read_patch(loader, dir, path)?, describe_source(path)),
        };
        let loaded = classify(&text, &source)?;
        Ok(PatchTransformer {
            source,
            loaded,
            target,
            options,
        })
    }

    fn transform(
        &self,
        resmap: &mut ResMap,
        schemas: SchemaSet<'_>,
        budget: &mut Budget,
    ) -> Result<(), PatchError> {
        match &self.loaded {
            Loaded::Smp(docs) => match &self.target {
                Some(target) => {
                    if docs.len() > 1 {
                        return Err(PatchError::Config {
                            patch: self.source.clone(),
                            message: "multiple strategic merge patches in one `patches` entry \
                                      may not set `target`"
                                .to_string(),
                        });
                    }
                    let Some(doc) = docs.first() else {
                        return Ok(());
                    };
                    let selected =
                        select(resmap, target).map_err(|source| PatchError::Selector {
                            patch: self.source.clone(),
                            source,
                        })?;
                    apply_smp_to_selected(
                        resmap,
                        &selected,
                        doc,
                        self.options,
                        &self.source,
                        schemas,
                        budget,
                    )
                }
                None => {
                    for doc in docs {
                        let index = unique_target(resmap, doc, &self.source)?;
                        charge_patch(budget, doc, &self.source)?;
                        apply_smp_at(
                            resmap,
                            index,
                            doc.clone(),
                            self.options,
                            &self.source,
                            schemas,
                        )?;
                    }
                    check_unique_ids(resmap, &self.source)
                }
            },
            Loaded::Json(ops) => {
                let Some(target) = &self.target else {
                    return Err(PatchError::Config {
                        patch: self.source.clone(),
                        message: "must specify a target for a JSON patch".to_string(),
                    });
                };
                apply_json_to_selected(resmap, target, ops, &self.source, true, budget)
            }
        }
    }
}

/// Counts one application of `doc` against the step's copy budget.
fn charge_patch(
    budget: &mut Budget,
    doc: &serde_json::Map<String, Value>,
    source: &str,
) -> Result<(), PatchError> {
    let size = crate::budget::extent(&Value::Object(doc.clone()));
    budget
        .charge(size, || format!("applying {source}"))
        .map_err(PatchError::Budget)
}

fn read_patch(loader: &Loader, dir: &Path, path: &str) -> Result<String, PatchError> {
    loader
        .read_text(dir, path)
        .map_err(|source| PatchError::Load {
            path: escape_name(path),
            source,
        })
}

fn patch_id(doc: &serde_json::Map<String, Value>) -> ResId {
    Resource::new(doc.clone()).id()
}

/// The index of the one resource that has (or had) the id the patch names.
fn unique_target(
    resmap: &ResMap,
    doc: &serde_json::Map<String, Value>,
    source: &str,
) -> Result<usize, PatchError> {
    let id = patch_id(doc);
    let matches = resmap.positions_matching_any_id(&id);
    match matches.as_slice() {
        [index] => Ok(*index),
        _ => Err(PatchError::NoUniqueTarget {
            patch: source.to_string(),
            id: id.describe(),
            found: matches.len(),
        }),
    }
}

/// Applies one strategic merge patch document to the resource at `index`, keeping the
/// resource's name, kind and namespace unless the options allow changing them. A patch
/// that deletes the resource removes it from the map.
fn apply_smp_at(
    resmap: &mut ResMap,
    index: usize,
    patch: serde_json::Map<String, Value>,
    options: PatchOptions,
    source: &str,
    schemas: SchemaSet<'_>,
) -> Result<(), PatchError> {
    let Some(resource) = resmap.as_mut_vec().get_mut(index) else {
        return Ok(());
    };
    let deleted = apply_smp_to_resource(resource, &patch, options, source, schemas)?;
    if deleted {
        resmap.remove(index);
    }
    Ok(())
}

/// Merges `patch` into `resource`; returns whether the resource was deleted.
fn apply_smp_to_resource(
    resource: &mut Resource,
    patch: &serde_json::Map<String, Value>,
    options: PatchOptions,
    source: &str,
    schemas: SchemaSet<'_>,
) -> Result<bool, PatchError> {
    let name = resource.name().to_string();
    let namespace = resource.namespace().to_string();
    let kind = resource.kind().to_string();
    let target_id = resource.id();
    if options.allow_name_change || options.allow_kind_change {
        resource.remember_id();
    }
    let gvk = resource.gvk();
    let empty_nulls = std::mem::take(&mut resource.empty_nulls);
    drop_empty_nulls(&mut resource.obj, &empty_nulls, &gvk, schemas);
    strategic_merge_with(&mut resource.obj, patch, &gvk, schemas).map_err(|source_err| {
        PatchError::Smp {
            patch: source.to_string(),
            target: target_id.describe(),
            source: source_err,
        }
    })?;
    if resource.obj.is_empty() {
        return Ok(true);
    }
    if !options.allow_kind_change {
        resource.obj.insert("kind".into(), Value::String(kind));
    }
    let meta = resource.metadata_mut();
    if !options.allow_name_change {
        meta.insert("name".into(), Value::String(name));
    }
    if namespace.is_empty() {
        meta.shift_remove("namespace");
    } else {
        meta.insert("namespace".into(), Value::String(namespace));
    }
    Ok(false)
}

/// Applies one patch document to each selected resource: the patch takes the target's
/// `apiVersion` (its own kind stays, for kind changes).
fn apply_smp_to_selected(
    resmap: &mut ResMap,
    selected: &[usize],
    patch: &serde_json::Map<String, Value>,
    options: PatchOptions,
    source: &str,
    schemas: SchemaSet<'_>,
    budget: &mut Budget,
) -> Result<(), PatchError> {
    let mut deleted = Vec::new();
    let size = crate::budget::extent(&Value::Object(patch.clone()));
    for &index in selected {
        let Some(resource) = resmap.as_mut_vec().get_mut(index) else {
            continue;
        };
        budget
            .charge(size, || {
                format!("applying {source} to {}", resource.id().describe())
            })
            .map_err(PatchError::Budget)?;
        let mut copy = patch.clone();
        copy.insert(
            "apiVersion".into(),
            Value::String(resource.api_version().to_string()),
        );
        if !copy.get("kind").is_some_and(Value::is_string) {
            copy.insert("kind".into(), Value::String(resource.kind().to_string()));
        }
        if apply_smp_to_resource(resource, &copy, options, source, schemas)? {
            deleted.push(index);
        }
    }
    for index in deleted.into_iter().rev() {
        resmap.remove(index);
    }
    check_unique_ids(resmap, source)
}

/// Applies a JSON patch to every resource `target` selects.
fn apply_json_to_selected(
    resmap: &mut ResMap,
    target: &Selector,
    ops: &[json6902::Operation],
    source: &str,
    remember: bool,
    budget: &mut Budget,
) -> Result<(), PatchError> {
    let selected = select(resmap, target).map_err(|e| PatchError::Selector {
        patch: source.to_string(),
        source: e,
    })?;
    for index in selected {
        let Some(resource) = resmap.as_mut_vec().get_mut(index) else {
            continue;
        };
        if remember {
            resource.remember_id();
        }
        let label = format!("{source} (target {})", resource.id().describe());
        // The patch sees kustomize's build annotations: `metadata.annotations` exists.
        let inserted = build_annotations::insert_previous_ids(resource);
        let grown = json6902::apply_ops(&mut resource.obj, ops, &label);
        build_annotations::remove_previous_ids(resource, inserted);
        let grown = grown?;
        budget
            .charge(grown, || format!("applying {label}"))
            .map_err(PatchError::Budget)?;
    }
    check_unique_ids(resmap, source)
}

fn check_unique_ids(resmap: &ResMap, source: &str) -> Result<(), PatchError> {
    match resmap.first_duplicate() {
        Some(id) => Err(PatchError::DuplicateId {
            patch: source.to_string(),
            id: id.describe(),
        }),
        None => Ok(()),
    }
}

fn patch_options(options: &PatchArgs) -> PatchOptions {
    PatchOptions {
        allow_name_change: options.allow_name_change,
        allow_kind_change: options.allow_kind_change,
    }
}

/// Applies the `patches` of a kustomization: each entry a strategic merge patch (applied
/// to the resources of its own ids, or to every resource `target` selects) or a JSON
/// patch (which needs a `target`).
pub fn apply_patches(
    resmap: &mut ResMap,
    patches: &[Patch],
    loader: &Loader,
    dir: &Path,
    schemas: SchemaSet<'_>,
) -> Result<(), PatchError> {
    let configured = patches
        .iter()
        .map(|p| {
            PatchTransformer::configure(
                &p.path,
                &p.patch,
                p.target.clone(),
                patch_options(&p.options),
                loader,
                dir,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut budget = Budget::new();
    for transformer in &configured {
        transformer.transform(resmap, schemas, &mut budget)?;
    }
    Ok(())
}

/// Loads `patchesStrategicMerge` entries: each is inline YAML when it parses as patch
/// documents, else the path of a file of them.
fn load_smp_entries(
    entries: &[String],
    loader: &Loader,
    dir: &Path,
) -> Result<Vec<SourcedPatch>, PatchError> {
    let mut loaded = Vec::new();
    for entry in entries {
        let (source, docs) = match parse_smp(entry) {
            Ok(docs) => (describe_source(""), docs),
            Err(_) => {
                let source = describe_source(entry);
                let text = read_patch(loader, dir, entry)?;
                let docs = parse_smp(&text).map_err(|e| PatchError::Parse {
                    patch: source.clone(),
                    source: e.into(),
                })?;
                (source, docs)
            }
        };
        loaded.extend(docs.into_iter().map(|doc| (source.clone(), doc)));
    }
    Ok(loaded)
}

/// Applies strategic merge patches, each to the one resource of its id.
fn apply_smp_list(
    resmap: &mut ResMap,
    patches: &[SourcedPatch],
    schemas: SchemaSet<'_>,
    budget: &mut Budget,
) -> Result<(), PatchError> {
    for (source, doc) in patches {
        let index = unique_target(resmap, doc, source)?;
        let options = PatchOptions::default();
        apply_smp_to_selected(resmap, &[index], doc, options, source, schemas, budget)?;
    }
    Ok(())
}

/// Applies the deprecated `patchesStrategicMerge`: file paths or inline patches, applied
/// in order, each to the resource its id names.
pub fn apply_strategic_merge_patches(
    resmap: &mut ResMap,
    entries: &[String],
    loader: &Loader,
    dir: &Path,
    schemas: SchemaSet<'_>,
) -> Result<(), PatchError> {
    if entries.is_empty() {
        return Ok(());
    }
    let patches = load_smp_entries(entries, loader, dir)?;
    if patches.is_empty() {
        return Err(PatchError::Empty {
            patch: format!("files={entries:?}"),
        });
    }
    apply_smp_list(resmap, &patches, schemas, &mut Budget::new())
}

/// One configured `PatchJson6902Transformer`.
fn configure_json6902(
    target: Option<&Selector>,
    path: &str,
    json_op: &str,
    loader: &Loader,
    dir: &Path,
) -> Result<(Selector, Vec<json6902::Operation>, String), PatchError> {
    let source = describe_source(path);
    let Some(target) = target.filter(|t| !t.name.is_empty()) else {
        return Err(PatchError::Config {
            patch: source,
            message: "must specify the target name".to_string(),
        });
    };
    let text = match (path.is_empty(), json_op.is_empty()) {
        (true, true) => {
            return Err(PatchError::Config {
                patch: source,
                message: "empty file path and empty jsonOp".to_string(),
            });
        }
        (false, false) => {
            return Err(PatchError::Config {
                patch: source,
                message: "must specify a file path or jsonOp, not both".to_string(),
            });
        }
        (true, false) => json_op.to_string(),
        (false, true) => read_patch(loader, dir, path)?,
    };
    if text.is_empty() {
        return Err(PatchError::Empty { patch: source });
    }
    let ops = json6902::parse_ops(&text).map_err(|e| PatchError::Parse {
        patch: source.clone(),
        source: e.into(),
    })?;
    if ops.is_empty() {
        return Err(PatchError::Empty { patch: source });
    }
    Ok((target.clone(), ops, source))
}

/// Applies the deprecated `patchesJson6902`: JSON patches with a required target.
pub fn apply_json6902_patches(
    resmap: &mut ResMap,
    patches: &[Patch],
    loader: &Loader,
    dir: &Path,
) -> Result<(), PatchError> {
    let configured = patches
        .iter()
        .map(|p| configure_json6902(p.target.as_ref(), &p.path, &p.patch, loader, dir))
        .collect::<Result<Vec<_>, _>>()?;
    let mut budget = Budget::new();
    for (target, ops, source) in &configured {
        apply_json_to_selected(resmap, target, ops, source, false, &mut budget)?;
    }
    Ok(())
}

/// The config of a builtin patch transformer plugin: the fields of `PatchTransformer`,
/// `PatchStrategicMergeTransformer` and `PatchJson6902Transformer`, decoded leniently as
/// kustomize decodes plugin configs.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PatchPluginConfig {
    #[serde(default)]
    path: String,
    #[serde(default)]
    patch: String,
    #[serde(default)]
    target: Option<Selector>,
    #[serde(default)]
    options: Option<PatchArgs>,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    patches: String,
    #[serde(default)]
    json_op: String,
}

fn plugin_config(
    config: &serde_json::Map<String, Value>,
    kind: &str,
) -> Result<PatchPluginConfig, PatchError> {
    gojson::from_value(&Value::Object(config.clone()), Mode::LENIENT).map_err(|e| {
        PatchError::Config {
            patch: kind.to_string(),
            message: format!("invalid config: {e}"),
        }
    })
}

/// Runs a builtin patch transformer plugin configured in `transformers:` (`kind` is
/// `PatchTransformer`, `PatchStrategicMergeTransformer` or `PatchJson6902Transformer`).
pub fn apply_builtin_patch_transformer(
    resmap: &mut ResMap,
    kind: &str,
    config: &serde_json::Map<String, Value>,
    loader: &Loader,
    dir: &Path,
    schemas: SchemaSet<'_>,
) -> Result<(), PatchError> {
    let config = plugin_config(config, kind)?;
    match kind {
        "PatchTransformer" => {
            let options = patch_options(&config.options.unwrap_or_default());
            let transformer = PatchTransformer::configure(
                &config.path,
                &config.patch,
                config.target,
                options,
                loader,
                dir,
            )?;
            transformer.transform(resmap, schemas, &mut Budget::new())
        }
        "PatchStrategicMergeTransformer" => {
            let paths = config.paths;
            let inline = config.patches.as_str();
            if paths.is_empty() && inline.is_empty() {
                return Err(PatchError::Config {
                    patch: kind.to_string(),
                    message: "empty file path and empty patch content".to_string(),
                });
            }
            let mut patches = load_smp_entries(&paths, loader, dir)?;
            if !inline.is_empty() {
                let docs = parse_smp(inline).map_err(|e| PatchError::Parse {
                    patch: describe_source(""),
                    source: e.into(),
                })?;
                patches.extend(docs.into_iter().map(|d| (describe_source(""), d)));
            }
            if patches.is_empty() {
                return Err(PatchError::Empty {
                    patch: format!("files={paths:?}, Patch={inline}"),
                });
            }
            apply_smp_list(resmap, &patches, schemas, &mut Budget::new())
        }
        "PatchJson6902Transformer" => {
            let (target, ops, source) = configure_json6902(
                config.target.as_ref(),
                &config.path,
                &config.json_op,
                loader,
                dir,
            )?;
            apply_json_to_selected(resmap, &target, &ops, &source, false, &mut Budget::new())
        }
        other => Err(PatchError::UnknownPlugin {
            kind: other.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests;
