//! Vars: `$(NAME)` references in chosen string fields, replaced by a field of another
//! object (kustomize's deprecated `vars:`).
//!
//! Kustomize binds each var to its object in the kustomization that declares it
//! ([`bind_vars`], after that kustomization's transformers ran), and expands the
//! references once, at the top level, after name references were fixed
//! ([`resolve_vars`]).

use crate::budget::Budget;
use serde_json::{Map, Number, Value};

use super::fieldspec::{FieldSpec, split_path};
use super::kustfile::Var;
use super::namereference::{kustomize_id_string, previous_ids, visit_leaf_values};
use super::resource::{
    Gvk, ResId, ResMap, Resource, is_cluster_scoped_kind, non_null_scalar_text as scalar_text,
};

/// The field a var reads when its `fieldref` names none.
pub const DEFAULT_FIELD_PATH: &str = "metadata.name";

/// Why vars could not be bound or resolved.
#[derive(Debug, thiserror::Error)]
pub enum VarError {
    /// Expanding references would copy too much (a large var referenced very often).
    #[error("var references in {object}: {source}")]
    Budget {
        /// The object whose fields were being expanded.
        object: String,
        /// The bound that was reached.
        source: crate::budget::BudgetError,
    },
    /// Two vars of one build share a name.
    #[error("var '{0}' already encountered")]
    Duplicate(String),
    /// The var's `objref` matches several objects.
    #[error("found {count} resId matches for var '{name}' (unable to disambiguate)")]
    Ambiguous {
        /// The var.
        name: String,
        /// How many objects matched.
        count: usize,
    },
    /// No object matches the var's `objref`.
    #[error(
        "var '{name}' cannot be mapped to a field in the set of known resources (objref {objref})"
    )]
    Unmatched {
        /// The var.
        name: String,
        /// The `objref`, printed as an id.
        objref: String,
    },
    /// The object lacks the var's field.
    #[error(
        "field '{field}' specified in var '{name}' not found in corresponding resource {object}"
    )]
    FieldNotFound {
        /// The var.
        name: String,
        /// The field path.
        field: String,
        /// The object.
        object: String,
    },
    /// A list at a var-reference field holds something other than strings.
    #[error(
        "var reference in '{field}' of {object}: invalid value type, expected a list of strings"
    )]
    NotAStringList {
        /// The field-spec path.
        field: String,
        /// The object.
        object: String,
    },
}

/// Fails when two vars share a name (kustomize: "var 'X' already encountered").
pub fn check_var_names(vars: &[Var]) -> Result<(), VarError> {
    let mut seen: Vec<&str> = Vec::with_capacity(vars.len());
    for var in vars {
        if seen.contains(&var.name.as_str()) {
            return Err(VarError::Duplicate(var.name.clone()));
        }
        seen.push(&var.name);
    }
    Ok(())
}

/// The id a var's `objref` names; `apiVersion`, when set, overrides group and version.
fn target_id(var: &Var) -> ResId {
    let target = &var.objref;
    let mut gvk = Gvk {
        group: target.group.clone(),
        version: target.version.clone(),
        kind: target.kind.clone(),
    };
    let parts: Vec<&str> = target.api_version.split('/').collect();
    match parts.as_slice() {
        [""] => {}
        [version] => gvk.version = (*version).to_string(),
        [group, version] => {
            gvk.group = (*group).to_string();
            gvk.version = (*version).to_string();
        }
        _ => {}
    }
    ResId {
        gvk,
        name: target.name.clone(),
        namespace: target.namespace.clone(),
    }
}

/// Whether `id` is the var's target: same group, version, kind and name; and same
/// namespace when the objref gives one (or names a cluster-scoped kind).
fn id_matches(target: &ResId, id: &ResId) -> bool {
    let exact_namespace = !target.namespace.is_empty() || is_cluster_scoped_kind(&target.gvk.kind);
    target.gvk == id.gvk
        && target.name == id.name
        && (!exact_namespace || target.effective_namespace() == id.effective_namespace())
}

/// Indexes of the resources whose current or any previous id is the var's target.
fn matching(resmap: &ResMap, var: &Var) -> Vec<usize> {
    let target = target_id(var);
    resmap
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            id_matches(&target, &r.id()) || previous_ids(r).iter().any(|id| id_matches(&target, id))
        })
        .map(|(i, _)| i)
        .collect()
}

/// Binds the vars a kustomization declares to their objects in that kustomization's
/// resources (call after its transformers and validators ran). A var matching several
/// objects is an error; one matching none stays unbound (and fails at resolution unless
/// the final resources hold exactly one match).
pub fn bind_vars(resmap: &mut ResMap, vars: &[Var]) -> Result<(), VarError> {
    for var in vars {
        let matched = matching(resmap, var);
        if matched.len() > 1 {
            return Err(VarError::Ambiguous {
                name: var.name.clone(),
                count: matched.len(),
            });
        }
        if let Some(&index) = matched.first() {
            resmap.as_mut_vec()[index]
                .ref_var_names
                .push(var.name.clone());
        }
    }
    Ok(())
}

/// The index of the object a var reads: the first one bound to it, else the single
/// object of the final resources that matches its `objref`.
fn var_source(resmap: &ResMap, var: &Var) -> Result<usize, VarError> {
    if let Some(index) = resmap
        .iter()
        .position(|r| r.ref_var_names.contains(&var.name))
    {
        return Ok(index);
    }
    let matched = matching(resmap, var);
    match matched.as_slice() {
        [index] => Ok(*index),
        [] => Err(VarError::Unmatched {
            name: var.name.clone(),
            objref: kustomize_id_string(&target_id(var)),
        }),
        _ => Err(VarError::Ambiguous {
            name: var.name.clone(),
            count: matched.len(),
        }),
    }
}

/// Splits a dotted field path: `\.` is a literal dot, `[...]` groups keep their dots,
/// `[a.b]` without `=` means the key `a.b`, and `name[3]` is `name` then index 3.
fn split_field_path(path: &str) -> Vec<String> {
    let mut pieces: Vec<String> = Vec::new();
    let raw: Vec<&str> = path.split('.').collect();
    let raw = if raw.len() > 1 && raw[0].is_empty() {
        &raw[1..]
    } else {
        &raw[..]
    };
    for piece in raw {
        match pieces.last_mut() {
            Some(last) if last.ends_with('\\') => {
                last.pop();
                last.push('.');
                last.push_str(piece);
            }
            _ => pieces.push((*piece).to_string()),
        }
    }
    let mut joined = Vec::new();
    let mut i = 0;
    while i < pieces.len() {
        let piece = &pieces[i];
        if piece.starts_with('[') && !piece.ends_with(']') {
            let mut group = vec![piece.clone()];
            while i + 1 < pieces.len() {
                i += 1;
                group.push(pieces[i].clone());
                if pieces[i].ends_with(']') {
                    break;
                }
            }
            let text = group.join(".");
            if text.contains('=') {
                joined.push(text);
            } else {
                joined.push(text.trim_matches(|c| c == '[' || c == ']').to_string());
            }
        } else {
            joined.push(piece.clone());
        }
        i += 1;
    }
    joined.into_iter().flat_map(split_index).collect()
}

/// `ports[0]` -> `ports`, `0`; `[2]` -> `2`; anything else unchanged.
fn split_index(piece: String) -> Vec<String> {
    if let Some(body) = piece.strip_suffix(']')
        && let Some((head, index)) = body.rsplit_once('[')
        && !index.is_empty()
        && index.bytes().all(|b| b.is_ascii_digit())
    {
        let mut out = Vec::new();
        if !head.is_empty() {
            out.push(head.to_string());
        }
        out.push(index.to_string());
        return out;
    }
    vec![piece]
}

/// One step of a field path: an index, a `[key=value]` element selector or a map key.
fn step<'a>(node: &'a Value, part: &str) -> Option<&'a Value> {
    if let Ok(index) = part.parse::<usize>() {
        return node.as_array()?.get(index);
    }
    if let Some(selector) = part.strip_prefix('[').and_then(|p| p.strip_suffix(']'))
        && let Some((key, wanted)) = selector.split_once('=')
    {
        return node.as_array()?.iter().find(|item| {
            let field = if key.is_empty() {
                Some(*item)
            } else {
                item.get(key)
            };
            field.and_then(scalar_text).as_deref() == Some(wanted)
        });
    }
    node.as_object()?.get(part)
}

/// The value at a dotted field path; null counts as missing.
fn field_value<'a>(obj: &'a Map<String, Value>, path: &str) -> Option<&'a Value> {
    let parts = split_field_path(path);
    let (first, rest) = parts.split_first()?;
    let mut node = obj.get(first.as_str())?;
    for part in rest {
        node = step(node, part)?;
    }
    (!node.is_null()).then_some(node)
}

/// The values of the vars, by name; `None` for a var whose field is a map or list (its
/// references are left as they are).
fn var_values(resmap: &ResMap, vars: &[Var]) -> Result<Vec<(String, Option<Value>)>, VarError> {
    let mut sorted: Vec<&Var> = vars.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut values = Vec::with_capacity(sorted.len());
    for var in sorted {
        let resource: &Resource = &resmap.as_slice()[var_source(resmap, var)?];
        let path = match var.fieldref.as_ref().map(|f| f.field_path.as_str()) {
            Some(path) if !path.is_empty() => path,
            _ => DEFAULT_FIELD_PATH,
        };
        let value = field_value(&resource.obj, path).ok_or_else(|| VarError::FieldNotFound {
            name: var.name.clone(),
            field: path.to_string(),
            object: kustomize_id_string(&resource.id()),
        })?;
        let primitive = matches!(value, Value::String(_) | Value::Number(_) | Value::Bool(_));
        values.push((var.name.clone(), primitive.then(|| value.clone())));
    }
    Ok(values)
}

/// How a number prints inside a string (Go's `%v`).
fn number_text(number: &Number) -> String {
    match number.as_f64() {
        Some(f) if !number.is_i64() && !number.is_u64() => {
            if f.fract() == 0.0 && f.abs() < 1e21 {
                format!("{f:.0}")
            } else {
                f.to_string()
            }
        }
        _ => number.to_string(),
    }
}

fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => number_text(n),
        Value::Bool(b) => b.to_string(),
        _ => String::new(),
    }
}

/// Expands the `$(NAME)` references of `input`. `$$` is a literal `$`; unknown names and
/// unterminated `$(` are kept. A string that is exactly one reference becomes the var's
/// value with its own type (a number stays a number).
pub fn expand(input: &str, lookup: &dyn Fn(&str) -> Option<Value>) -> Value {
    expand_within(input, lookup, usize::MAX).unwrap_or_else(|| Value::String(input.to_string()))
}

/// [`expand`], giving up (`None`) as soon as the text grows by more than `room` bytes.
fn expand_within(
    input: &str,
    lookup: &dyn Fn(&str) -> Option<Value>,
    room: usize,
) -> Option<Value> {
    let limit = input.len().saturating_add(room);
    let bytes = input.as_bytes();
    let mut out = String::with_capacity(input.len());
    let mut checkpoint = 0;
    let mut cursor = 0;
    while cursor < bytes.len() {
        if bytes[cursor] != b'$' || cursor + 1 >= bytes.len() {
            cursor += 1;
            continue;
        }
        out.push_str(&input[checkpoint..cursor]);
        let rest = &input[cursor + 1..];
        let advance = match rest.as_bytes()[0] {
            b'$' => {
                out.push('$');
                1
            }
            b'(' => match rest.find(')') {
                Some(close) => {
                    let name = &rest[1..close];
                    let mapped = lookup(name);
                    if input.len() == close + 2 && cursor == 0 {
                        return Some(mapped.unwrap_or_else(|| Value::String(input.to_string())));
                    }
                    match mapped {
                        Some(value) => {
                            let text = value_text(&value);
                            if out.len().saturating_add(text.len()) > limit {
                                return None;
                            }
                            out.push_str(&text);
                        }
                        None => out.push_str(&input[cursor..cursor + 2 + close]),
                    }
                    close + 1
                }
                None => {
                    out.push_str("$(");
                    1
                }
            },
            _ => {
                let width = rest.chars().next().map_or(1, char::len_utf8);
                out.push('$');
                out.push_str(&rest[..width]);
                width
            }
        };
        cursor += advance + 1;
        checkpoint = cursor;
    }
    out.push_str(&input[checkpoint.min(input.len())..]);
    Some(Value::String(out))
}

/// Expands references in every string found at one var-reference field.
fn expand_at(
    node: &mut Value,
    lookup: &dyn Fn(&str) -> Option<Value>,
    field: &str,
    object: &ResId,
    budget: &mut Budget,
) -> Result<(), VarError> {
    let mut expand = |s: &str| -> Result<Value, VarError> {
        let over = |source| VarError::Budget {
            object: kustomize_id_string(object),
            source,
        };
        let Some(expanded) = expand_within(s, lookup, budget.remaining()) else {
            return Err(over(crate::budget::BudgetError {
                what: format!("expanding {field}"),
            }));
        };
        let grown = crate::budget::extent(&expanded).saturating_sub(s.len());
        budget
            .charge(grown, || format!("expanding {field}"))
            .map_err(over)?;
        Ok(expanded)
    };
    match node {
        Value::String(s) => *node = expand(s)?,
        Value::Object(map) => {
            for value in map.values_mut() {
                if let Value::String(s) = value {
                    *value = expand(s)?;
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                let Value::String(s) = item else {
                    return Err(VarError::NotAStringList {
                        field: field.to_string(),
                        object: kustomize_id_string(object),
                    });
                };
                *item = expand(s)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Resolves the vars of the whole build: reads each var's field from its object (bound by
/// [`bind_vars`], else matched now among the final resources by current or previous id)
/// and expands `$(NAME)` in every string at the `var_reference` fields. Runs once, at the
/// top level, after name references were fixed. Does nothing when there are no vars.
pub fn resolve_vars(
    resmap: &mut ResMap,
    vars: &[Var],
    var_reference: &[FieldSpec],
) -> Result<(), VarError> {
    if vars.is_empty() {
        return Ok(());
    }
    check_var_names(vars)?;
    let values = var_values(resmap, vars)?;
    let lookup = |name: &str| -> Option<Value> {
        values
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.clone())
    };
    let mut budget = Budget::new();
    for resource in resmap.iter_mut() {
        let gvk = resource.gvk();
        let id = resource.id();
        let mut node = Value::Object(std::mem::take(&mut resource.obj));
        let mut result = Ok(());
        for spec in var_reference.iter().filter(|s| s.selects(&gvk)) {
            result = visit_leaf_values(&mut node, &split_path(&spec.path), &mut |value| {
                expand_at(value, &lookup, &spec.path, &id, &mut budget)
            });
            if result.is_err() {
                break;
            }
        }
        if let Value::Object(obj) = node {
            resource.obj = obj;
        }
        result?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
