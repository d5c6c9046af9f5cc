//! ConfigMap and Secret generators (`configMapGenerator`, `secretGenerator`, and the
//! builtin `ConfigMapGenerator`/`SecretGenerator` plugin configs of `generators:`), with
//! kustomize's create/merge/replace behaviors.

mod iam;
mod kv;
mod merge;

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::gojson::{self, Mode};
use super::kustfile::{GeneratorArgs, GeneratorOptions};
use super::loader::{LoadError, Loader};
use super::resource::{Behavior, Object, Resource};

pub use super::hash::{HashError, apply_hash_suffixes, hash_suffix};
pub use iam::generate_iam_policy;
pub use merge::add_generated;

/// Why a generator could not produce its object or add it to the build.
#[derive(Debug, thiserror::Error)]
pub enum GeneratorError {
    /// The generator has no name.
    #[error("{kind} generator: a generated {kind} must have a name")]
    MissingName {
        /// `ConfigMap` or `Secret`.
        kind: &'static str,
    },
    /// A file it names could not be read.
    #[error("{generator}: {source}")]
    Load {
        /// The generator, e.g. `configMapGenerator app-config`.
        generator: String,
        /// The loader's error (names the file).
        source: LoadError,
    },
    /// A line of an env file is unusable.
    #[error("{generator}: env file {file}: line {line} {reason}")]
    EnvLine {
        /// The generator.
        generator: String,
        /// The env file as named.
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A literal is not `KEY=VALUE` (its text is not shown: it may be secret).
    #[error("{generator}: literal #{} is invalid, expected KEY=VALUE with a non-empty KEY", index + 1)]
    InvalidLiteral {
        /// The generator.
        generator: String,
        /// 0-based position in `literals`.
        index: usize,
    },
    /// A `files` entry is not `path` or `key=path`.
    #[error("{generator}: invalid file source {entry:?}: {reason}")]
    InvalidFileSource {
        /// The generator.
        generator: String,
        /// The entry.
        entry: String,
        /// What is wrong.
        reason: String,
    },
    /// Two sources give the same key.
    #[error("{generator}: the key `{key}` is repeated")]
    DuplicateKey {
        /// The generator.
        generator: String,
        /// The repeated key.
        key: String,
    },
    /// A builtin generator plugin config does not decode or is not usable.
    #[error("{kind} plugin config {name:?}: {message}")]
    PluginConfig {
        /// The plugin kind, e.g. `SecretGenerator`.
        kind: String,
        /// `metadata.name` of the config, if any.
        name: String,
        /// The decoder's message.
        message: String,
    },
    /// `generate_builtin` was asked for a kind it does not know.
    #[error(
        "unknown builtin generator kind {0:?} (expected ConfigMapGenerator, SecretGenerator or IAMPolicyGenerator)"
    )]
    UnknownBuiltin(String),
    /// Behavior `merge` or `replace` with nothing to merge into or replace.
    #[error("id {id} does not exist; cannot merge or replace")]
    NothingToMerge {
        /// The generated object's id.
        id: String,
    },
    /// Behavior `create` for an id that already exists.
    #[error("id {id} exists; behavior must be merge or replace")]
    AlreadyExists {
        /// The generated object's id.
        id: String,
    },
    /// More than one existing object could take the merge.
    #[error("found multiple objects {matches:?} that could accept merge of {id}")]
    AmbiguousMerge {
        /// The generated object's id.
        id: String,
        /// The candidates' current ids.
        matches: Vec<String>,
    },
    /// A content-hash suffix could not be computed.
    #[error(transparent)]
    Hash(#[from] HashError),
}

/// Which object a generator makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    ConfigMap,
    Secret,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::ConfigMap => "ConfigMap",
            Kind::Secret => "Secret",
        }
    }

    fn field(self) -> &'static str {
        match self {
            Kind::ConfigMap => "configMapGenerator",
            Kind::Secret => "secretGenerator",
        }
    }
}

/// Generates the ConfigMap of one `configMapGenerator` entry; `defaults` is the
/// kustomization's `generatorOptions`.
pub fn generate_config_map(
    args: &GeneratorArgs,
    defaults: Option<&GeneratorOptions>,
    loader: &Loader,
    dir: &Path,
) -> Result<Resource, GeneratorError> {
    let options = merge_options(args.options.as_ref(), defaults);
    generate(Kind::ConfigMap, args, &options, loader, dir)
}

/// Generates the Secret of one `secretGenerator` entry; `defaults` is the kustomization's
/// `generatorOptions`.
pub fn generate_secret(
    args: &GeneratorArgs,
    defaults: Option<&GeneratorOptions>,
    loader: &Loader,
    dir: &Path,
) -> Result<Resource, GeneratorError> {
    let options = merge_options(args.options.as_ref(), defaults);
    generate(Kind::Secret, args, &options, loader, dir)
}

/// Generates the object of a builtin generator plugin config (an entry of `generators:`
/// with `apiVersion: builtin` and kind `ConfigMapGenerator`, `SecretGenerator` or
/// `IAMPolicyGenerator`). Unknown fields are ignored and `generatorOptions` do not apply,
/// as in kustomize.
pub fn generate_builtin(
    kind: &str,
    config: &Object,
    loader: &Loader,
    dir: &Path,
) -> Result<Resource, GeneratorError> {
    let generator_kind = match kind {
        "ConfigMapGenerator" => Kind::ConfigMap,
        "SecretGenerator" => Kind::Secret,
        "IAMPolicyGenerator" => return generate_iam_policy(config),
        other => return Err(GeneratorError::UnknownBuiltin(other.to_string())),
    };
    let plugin: GeneratorPluginConfig =
        gojson::from_value(&Value::Object(config.clone()), Mode::LENIENT).map_err(|e| {
            GeneratorError::PluginConfig {
                kind: kind.to_string(),
                name: config
                    .get("metadata")
                    .and_then(|m| m.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                message: e.to_string(),
            }
        })?;
    let args = plugin.into_args(generator_kind);
    let options = merge_options(args.options.as_ref(), None);
    generate(generator_kind, &args, &options, loader, dir)
}

/// A builtin generator plugin config, decoded leniently (Go's decoder ignores unknown
/// fields). The deprecated `env` field is accepted but, as in kustomize, not read.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct GeneratorPluginConfig {
    metadata: PluginMetadata,
    name: String,
    namespace: String,
    behavior: String,
    literals: Vec<String>,
    files: Vec<String>,
    envs: Vec<String>,
    options: Option<PluginOptions>,
    #[serde(rename = "type")]
    secret_type: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PluginMetadata {
    name: String,
    namespace: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct PluginOptions {
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    disable_name_suffix_hash: Option<bool>,
    immutable: Option<bool>,
}

impl GeneratorPluginConfig {
    fn into_args(self, kind: Kind) -> GeneratorArgs {
        GeneratorArgs {
            name: if self.name.is_empty() {
                self.metadata.name
            } else {
                self.name
            },
            namespace: if self.namespace.is_empty() {
                self.metadata.namespace
            } else {
                self.namespace
            },
            behavior: self.behavior,
            literals: self.literals,
            files: self.files,
            envs: self.envs,
            env: String::new(),
            options: self.options.map(|o| GeneratorOptions {
                labels: o.labels,
                annotations: o.annotations,
                disable_name_suffix_hash: o.disable_name_suffix_hash,
                immutable: o.immutable,
            }),
            secret_type: if kind == Kind::Secret {
                self.secret_type
            } else {
                String::new()
            },
        }
    }
}

/// The options in force for one generator, after kustomize's merge of the
/// kustomization-wide defaults into the entry's own options.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct EffectiveOptions {
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    disable_name_suffix_hash: bool,
    immutable: bool,
}

/// Entry labels and annotations win over the defaults; `disableNameSuffixHash` and
/// `immutable` are on when either side turns them on (a default of `true` cannot be
/// switched off by an entry, as in kustomize).
fn merge_options(
    local: Option<&GeneratorOptions>,
    defaults: Option<&GeneratorOptions>,
) -> EffectiveOptions {
    let mut out = EffectiveOptions::default();
    for options in [defaults, local].into_iter().flatten() {
        out.labels
            .extend(options.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        out.annotations.extend(
            options
                .annotations
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        out.disable_name_suffix_hash |= options.disable_name_suffix_hash == Some(true);
        out.immutable |= options.immutable == Some(true);
    }
    out
}

/// kustomize's behavior names; anything else counts as `create`, as in kustomize.
fn parse_behavior(behavior: &str) -> Behavior {
    match behavior {
        "merge" => Behavior::Merge,
        "replace" => Behavior::Replace,
        _ => Behavior::Create,
    }
}

fn generate(
    kind: Kind,
    args: &GeneratorArgs,
    options: &EffectiveOptions,
    loader: &Loader,
    dir: &Path,
) -> Result<Resource, GeneratorError> {
    if args.name.is_empty() {
        return Err(GeneratorError::MissingName { kind: kind.name() });
    }
    let generator = format!("{} {}", kind.field(), args.name);
    let mut envs = args.envs.clone();
    if !args.env.is_empty() {
        envs.push(args.env.clone());
    }
    let sources = kv::Sources {
        envs: &envs,
        literals: &args.literals,
        files: &args.files,
    };
    let pairs = kv::load_pairs(&generator, &sources, loader, dir)?;
    let data = unique_sorted(&generator, pairs)?;
    let obj = build_object(kind, args, options, data);
    Ok(Resource {
        obj,
        behavior: parse_behavior(&args.behavior),
        needs_hash_suffix: !options.disable_name_suffix_hash,
        ..Resource::default()
    })
}

/// The pairs as a map sorted by key; a repeated key is an error.
fn unique_sorted(
    generator: &str,
    pairs: Vec<kv::Pair>,
) -> Result<BTreeMap<String, Vec<u8>>, GeneratorError> {
    let mut data = BTreeMap::new();
    for pair in pairs {
        if data.contains_key(&pair.key) {
            return Err(GeneratorError::DuplicateKey {
                generator: generator.to_string(),
                key: pair.key,
            });
        }
        data.insert(pair.key, pair.value);
    }
    Ok(data)
}

/// The generated object, fields in kustomize's order of creation.
fn build_object(
    kind: Kind,
    args: &GeneratorArgs,
    options: &EffectiveOptions,
    data: BTreeMap<String, Vec<u8>>,
) -> Object {
    let mut obj = Object::new();
    obj.insert("apiVersion".into(), Value::String("v1".into()));
    obj.insert("kind".into(), Value::String(kind.name().into()));
    obj.insert("metadata".into(), Value::Object(metadata(args, options)));
    match kind {
        Kind::ConfigMap => {
            let (text, binary) = split_config_map_data(data);
            if !text.is_empty() {
                obj.insert("data".into(), Value::Object(text));
            }
            if !binary.is_empty() {
                obj.insert("binaryData".into(), Value::Object(binary));
            }
        }
        Kind::Secret => {
            let secret_type = if args.secret_type.is_empty() {
                "Opaque"
            } else {
                &args.secret_type
            };
            obj.insert("type".into(), Value::String(secret_type.into()));
            let encoded = data
                .into_iter()
                .map(|(k, v)| (k, Value::String(encode_base64_lines(&v))))
                .collect();
            // kustomize creates `data` even when there is nothing to put in it.
            obj.insert("data".into(), Value::Object(encoded));
        }
    }
    if options.immutable {
        obj.insert("immutable".into(), Value::Bool(true));
    }
    obj
}

fn metadata(args: &GeneratorArgs, options: &EffectiveOptions) -> Object {
    let mut meta = Object::new();
    meta.insert("name".into(), Value::String(args.name.clone()));
    if !args.namespace.is_empty() {
        meta.insert("namespace".into(), Value::String(args.namespace.clone()));
    }
    if !options.labels.is_empty() {
        meta.insert("labels".into(), string_map(&options.labels));
    }
    if !options.annotations.is_empty() {
        meta.insert("annotations".into(), string_map(&options.annotations));
    }
    meta
}

fn string_map(map: &BTreeMap<String, String>) -> Value {
    Value::Object(
        map.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    )
}

/// UTF-8 values go to `data` verbatim; anything else to `binaryData`, base64-encoded.
fn split_config_map_data(data: BTreeMap<String, Vec<u8>>) -> (Object, Object) {
    let mut text = Map::new();
    let mut binary = Map::new();
    for (key, value) in data {
        match String::from_utf8(value) {
            Ok(s) => {
                text.insert(key, Value::String(s));
            }
            Err(e) => {
                binary.insert(key, Value::String(encode_base64_lines(e.as_bytes())));
            }
        }
    }
    (text, binary)
}

/// Standard base64 with padding, cut into 70-character lines that each end in a newline
/// when the encoding is 70 characters or longer (kustomize's layout, which the content
/// hash sees).
pub(crate) fn encode_base64_lines(bytes: &[u8]) -> String {
    const LINE: usize = 70;
    let encoded = encode_base64(bytes);
    if encoded.len() < LINE {
        return encoded;
    }
    let mut out = String::with_capacity(encoded.len() + encoded.len() / LINE + 1);
    for chunk in encoded.as_bytes().chunks(LINE) {
        // Base64 output is ASCII, so every chunk is valid UTF-8.
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out
}

fn encode_base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let symbols = chunk.len() + 1;
        for i in 0..4 {
            if i < symbols {
                let index = ((n >> (18 - 6 * i)) & 63) as usize;
                out.push(char::from(ALPHABET[index]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
