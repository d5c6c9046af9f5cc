//! Adding a generated object to a build: kustomize's `create`, `merge` and `replace`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::GeneratorError;
use crate::resource::{Behavior, Object, ResMap, Resource};

/// Adds `generated` to `resmap` according to its behavior.
///
/// `create` appends (an existing resource with the same id, current or previous, is an
/// error). `merge` and `replace` need exactly one existing resource that has, or once had,
/// the generated id; the result takes that resource's place, name, namespace and history,
/// merges its labels and annotations under the generated ones, and for `merge` also its
/// `data` and `binaryData` entries (generated keys win). The result gets a hash suffix only
/// when both the existing resource and the generator ask for one.
pub fn add_generated(resmap: &mut ResMap, generated: Resource) -> Result<(), GeneratorError> {
    let id = generated.id();
    let matches = resmap.positions_matching_any_id(&id);
    match (matches.as_slice(), generated.behavior) {
        ([], Behavior::Merge | Behavior::Replace) => {
            Err(GeneratorError::NothingToMerge { id: id.describe() })
        }
        ([], Behavior::Create) => resmap
            .append(generated)
            .map_err(|_| GeneratorError::AlreadyExists { id: id.describe() }),
        ([_], Behavior::Create) => Err(GeneratorError::AlreadyExists { id: id.describe() }),
        (&[index], behavior) => {
            let slot = &mut resmap.as_mut_vec()[index];
            let merged = combine(slot, generated, behavior == Behavior::Merge);
            *slot = merged;
            Ok(())
        }
        (many, _) => Err(GeneratorError::AmbiguousMerge {
            id: id.describe(),
            matches: many
                .iter()
                .map(|&i| resmap.as_slice()[i].id().describe())
                .collect(),
        }),
    }
}

/// The generated resource with the existing one's identity and metadata folded in.
fn combine(old: &Resource, mut new: Resource, merge_data: bool) -> Resource {
    let labels = merged_string_map(old.labels(), new.labels());
    let annotations = merged_string_map(old.annotations(), new.annotations());
    set_string_map(&mut new.obj, "labels", &labels);
    set_string_map(&mut new.obj, "annotations", &annotations);
    {
        let meta = new.metadata_mut();
        meta.insert("name".into(), Value::String(old.name().to_string()));
        if old.namespace().is_empty() {
            meta.shift_remove("namespace");
        } else {
            meta.insert(
                "namespace".into(),
                Value::String(old.namespace().to_string()),
            );
        }
    }
    if merge_data {
        for field in ["data", "binaryData"] {
            let merged = merged_string_map(data_map(&old.obj, field), data_map(&new.obj, field));
            new.obj.shift_remove(field);
            if !merged.is_empty() {
                new.obj.insert(
                    field.into(),
                    Value::Object(
                        merged
                            .into_iter()
                            .map(|(k, v)| (k, Value::String(v)))
                            .collect(),
                    ),
                );
            }
        }
    }
    let origin = if merge_data {
        old.origin.clone().or(new.origin)
    } else {
        new.origin.or_else(|| old.origin.clone())
    };
    Resource {
        obj: new.obj,
        prev_ids: old.prev_ids.clone(),
        behavior: old.behavior,
        needs_hash_suffix: old.needs_hash_suffix && new.needs_hash_suffix,
        ref_by: old.ref_by.clone(),
        origin,
        transformations: old.transformations.clone(),
        name_prefixes: old.name_prefixes.clone(),
        name_suffixes: old.name_suffixes.clone(),
        ref_var_names: old.ref_var_names.clone(),
        empty_nulls: Vec::new(),
    }
}

/// `base` overlaid with `top`, sorted by key.
fn merged_string_map(
    base: Vec<(String, String)>,
    top: Vec<(String, String)>,
) -> BTreeMap<String, String> {
    base.into_iter().chain(top).collect()
}

/// Sets `metadata.<field>` to `map`, or removes it when `map` is empty.
fn set_string_map(obj: &mut Object, field: &str, map: &BTreeMap<String, String>) {
    let mut resource = Resource::new(std::mem::take(obj));
    let meta = resource.metadata_mut();
    if map.is_empty() {
        meta.shift_remove(field);
    } else {
        meta.insert(
            field.into(),
            Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect(),
            ),
        );
    }
    *obj = resource.obj;
}

/// A `data`-like map's entries as strings, the way kustomize reads them for merging:
/// scalars as their text (null as ""), nested values as "".
fn data_map(obj: &Object, field: &str) -> Vec<(String, String)> {
    let Some(Value::Object(map)) = obj.get(field) else {
        return Vec::new();
    };
    map.iter()
        .map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                Value::Null | Value::Array(_) | Value::Object(_) => String::new(),
            };
            (k.clone(), text)
        })
        .collect()
}
