//! Strategic merge patch with kustomize's (kyaml's) semantics.
//!
//! - Maps merge recursively; `null` in the patch removes the key.
//! - Lists are merged by key only where the schema of the target's kind declares the `merge`
//!   patch strategy ([`super::smp_schema`]); any other list is replaced whole. Lists of
//!   primitives with the strategy are unioned.
//! - Items the patch adds come before the original items.
//! - `$patch: delete|replace|merge` works on maps, on list elements and (as a one-key
//!   element) on whole lists. Other `$`-keys (`$setElementOrder/...`, `$retainKeys`,
//!   `$deleteFromPrimitiveList/...`) are not special to kustomize: they are merged like any
//!   other field.

use goyaml::PathStep;
use serde_json::{Map, Value};

use super::resource::{Gvk, Object, scalar_text};
use super::smp_schema::{Schema, SchemaSet};

/// The directive key of strategic merge patches.
const DIRECTIVE: &str = "$patch";

/// Why a strategic merge patch could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum SmpError {
    /// The patch and the target disagree on the type of a field.
    #[error("strategic merge patch: field {path}: expected {expected} but the patch has {found}")]
    WrongKind {
        /// Dotted path of the field.
        path: String,
        /// The type in the target.
        expected: &'static str,
        /// The type in the patch.
        found: &'static str,
    },
    /// A `$patch` directive with a value other than delete, replace or merge.
    #[error("strategic merge patch: field {path}: unknown patch strategy {value:?}")]
    UnknownDirective {
        /// Dotted path of the field.
        path: String,
        /// The directive's value.
        value: String,
    },
    /// A merged list holds an element of a kind its merge keys cannot apply to.
    #[error("strategic merge patch: field {path}: list element is not a {expected}")]
    BadElement {
        /// Dotted path of the list.
        path: String,
        /// What the element should have been.
        expected: &'static str,
    },
}

/// Whether the patch is a top-level `$patch: delete` (it removes the resource it targets).
pub fn is_delete_patch(patch: &Object) -> bool {
    patch.get(DIRECTIVE).and_then(Value::as_str) == Some("delete")
}

/// Applies `patch` to `target`, an object of kind `gvk`, with kustomize's strategic merge
/// semantics. A patch that deletes the whole object leaves `target` empty.
pub fn strategic_merge(target: &mut Object, patch: &Object, gvk: &Gvk) -> Result<(), SmpError> {
    strategic_merge_with(target, patch, gvk, SchemaSet::builtin())
}

/// [`strategic_merge`] with the schemas of `schemas` (a custom OpenAPI document's merge keys
/// before the built-in ones).
pub fn strategic_merge_with(
    target: &mut Object,
    patch: &Object,
    gvk: &Gvk,
    schemas: SchemaSet<'_>,
) -> Result<(), SmpError> {
    let schema = schemas.for_kind(&gvk.api_version(), &gvk.kind);
    let mut dest = Value::Object(std::mem::take(target));
    let patch = Value::Object(patch.clone());
    let outcome = walk(Some(&mut dest), Some(&patch), schema, &mut Vec::new())?;
    let result = match outcome {
        Outcome::Keep => dest,
        Outcome::Clear => Value::Object(Map::new()),
        Outcome::Set(value) => value,
    };
    *target = match result {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    Ok(())
}

/// What happens to a node after merging.
#[derive(Debug)]
enum Outcome {
    /// The destination node stays (possibly changed in place).
    Keep,
    /// The node is removed.
    Clear,
    /// The node is replaced by this value (`null` removes the field).
    Set(Value),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Map,
    List,
    Scalar,
}

fn kind_of(value: &Value) -> Option<Kind> {
    match value {
        Value::Null => None,
        Value::Object(_) => Some(Kind::Map),
        Value::Array(_) => Some(Kind::List),
        _ => Some(Kind::Scalar),
    }
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Map => "a map",
        Kind::List => "a list",
        Kind::Scalar => "a scalar",
    }
}

fn is_empty_map(value: &Value) -> bool {
    value.as_object().is_some_and(Map::is_empty)
}

fn dotted(path: &[String]) -> String {
    if path.is_empty() {
        "(root)".to_string()
    } else {
        path.join(".")
    }
}

/// Merges `patch` into `dest` at a position with `schema`.
fn walk(
    dest: Option<&mut Value>,
    patch: Option<&Value>,
    schema: Schema<'_>,
    path: &mut Vec<String>,
) -> Result<Outcome, SmpError> {
    let dest_kind = dest.as_deref().and_then(kind_of);
    let patch_kind = patch.and_then(kind_of);
    let kind = dest_kind.or(patch_kind);
    if let (Some(expected), Some(found)) = (dest_kind, patch_kind)
        && expected != found
    {
        return Err(SmpError::WrongKind {
            path: dotted(path),
            expected: kind_name(expected),
            found: kind_name(found),
        });
    }
    match kind {
        None | Some(Kind::Map) => walk_map(dest, patch, schema, path),
        Some(Kind::List) => match schema.merge_keys() {
            Some(keys) => walk_merge_list(dest, patch, &keys, schema.elements(), path),
            None => Ok(patch.map_or(Outcome::Keep, |p| Outcome::Set(p.clone()))),
        },
        Some(Kind::Scalar) => Ok(patch.map_or(Outcome::Keep, |p| Outcome::Set(p.clone()))),
    }
}

/// A map directive: `$patch` of a map.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Directive {
    Merge,
    Replace,
    Delete,
}

fn parse_directive(value: &Value) -> Option<Directive> {
    match value.as_str() {
        Some("merge") => Some(Directive::Merge),
        Some("replace") => Some(Directive::Replace),
        Some("delete") => Some(Directive::Delete),
        _ => None,
    }
}

/// A `$patch` value that is not a directive: its text.
struct UnknownDirective(String);

/// The directive of a patch map, and the map without it. An unknown directive is an
/// error, reported only where kustomize reports it.
fn map_directive(
    patch: &Map<String, Value>,
) -> Result<(Directive, Map<String, Value>), UnknownDirective> {
    let Some(raw) = patch.get(DIRECTIVE) else {
        return Ok((Directive::Merge, patch.clone()));
    };
    let directive = parse_directive(raw).ok_or_else(|| {
        UnknownDirective(match raw {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    })?;
    let mut rest = patch.clone();
    rest.shift_remove(DIRECTIVE);
    Ok((directive, rest))
}

/// The schema of a map: the given one, or for a map of an unknown kind, the schema of the
/// `apiVersion`/`kind` written in it (the target's first, then the patch's).
fn resolve_schema<'a>(
    schema: Schema<'a>,
    dest: Option<&Value>,
    patch: Option<&Value>,
) -> Schema<'a> {
    if !schema.is_unknown() {
        return schema;
    }
    for node in [dest, patch].into_iter().flatten() {
        let api_version = node.get("apiVersion").and_then(Value::as_str);
        let kind = node.get("kind").and_then(Value::as_str);
        if let (Some(api_version), Some(kind)) = (api_version, kind)
            && !api_version.is_empty()
            && !kind.is_empty()
        {
            let found = schema.set().for_kind(api_version, kind);
            if !found.is_unknown() {
                return found;
            }
        }
    }
    schema
}

fn walk_map(
    dest: Option<&mut Value>,
    patch: Option<&Value>,
    schema: Schema<'_>,
    path: &mut Vec<String>,
) -> Result<Outcome, SmpError> {
    let schema = resolve_schema(schema, dest.as_deref(), patch);
    let dest = match dest {
        Some(dest) if !dest.is_null() => dest,
        dest_missing_or_null => {
            return add_map(dest_missing_or_null.is_some(), patch, schema, path);
        }
    };
    let Some(patch) = patch else {
        merge_fields(dest, None, schema, path)?;
        return Ok(Outcome::Keep);
    };
    let Value::Object(patch_map) = patch else {
        // A null patch clears the field.
        return Ok(Outcome::Clear);
    };
    let (directive, rest) =
        map_directive(patch_map).map_err(|UnknownDirective(value)| SmpError::UnknownDirective {
            path: dotted(path),
            value,
        })?;
    match directive {
        Directive::Delete => Ok(Outcome::Clear),
        Directive::Replace => Ok(Outcome::Set(self_merged(rest, schema, path)?)),
        Directive::Merge => {
            merge_fields(dest, Some(&rest), schema, path)?;
            Ok(Outcome::Keep)
        }
    }
}

/// A map the target does not have: the patch's, cleaned of directives and nulls.
fn add_map(
    dest_is_null: bool,
    patch: Option<&Value>,
    schema: Schema<'_>,
    path: &mut Vec<String>,
) -> Result<Outcome, SmpError> {
    match patch {
        // An explicit null in the target that the patch does not touch stays.
        None if dest_is_null => Ok(Outcome::Keep),
        None => Ok(Outcome::Clear),
        Some(Value::Object(patch_map)) => match map_directive(patch_map) {
            Ok((Directive::Delete, _)) => Ok(Outcome::Clear),
            Ok((_, rest)) => Ok(Outcome::Set(self_merged(rest, schema, path)?)),
            // kustomize ignores an unknown directive on a map it adds, keeping the key.
            Err(_) => Ok(Outcome::Set(self_merged(patch_map.clone(), schema, path)?)),
        },
        Some(other) => Ok(Outcome::Set(other.clone())),
    }
}

/// A map merged with itself: nested directives applied, nulls dropped.
fn self_merged(
    map: Map<String, Value>,
    schema: Schema<'_>,
    path: &mut Vec<String>,
) -> Result<Value, SmpError> {
    let snapshot = map.clone();
    let mut value = Value::Object(map);
    merge_fields(&mut value, Some(&snapshot), schema, path)?;
    Ok(value)
}

/// Merges the fields of `patch` into the map `dest`, visiting every field of both.
fn merge_fields(
    dest: &mut Value,
    patch: Option<&Map<String, Value>>,
    schema: Schema<'_>,
    path: &mut Vec<String>,
) -> Result<(), SmpError> {
    let Value::Object(dest_map) = dest else {
        return Ok(());
    };
    let mut names: Vec<String> = dest_map.keys().cloned().collect();
    if let Some(patch) = patch {
        names.extend(patch.keys().filter(|k| !dest_map.contains_key(*k)).cloned());
    }
    names.sort();
    names.dedup();
    for name in names {
        path.push(name.clone());
        let outcome = walk(
            dest_map.get_mut(&name),
            patch.and_then(|p| p.get(&name)),
            schema.field(&name),
            path,
        );
        path.pop();
        match outcome? {
            Outcome::Keep => {}
            Outcome::Clear | Outcome::Set(Value::Null) => {
                dest_map.shift_remove(&name);
            }
            Outcome::Set(value) => {
                dest_map.insert(name, value);
            }
        }
    }
    Ok(())
}

/// The directive of a patch list, when it has one: a one-key element `{$patch: ...}`.
fn list_directive(patch: &[Value], path: &[String]) -> Result<Option<Directive>, SmpError> {
    let Some(element) = patch
        .iter()
        .filter_map(Value::as_object)
        .find(|m| m.contains_key(DIRECTIVE))
    else {
        return Ok(None);
    };
    if element.len() > 1 {
        return Ok(None);
    }
    let raw = &element[DIRECTIVE];
    parse_directive(raw)
        .map(Some)
        .ok_or_else(|| SmpError::UnknownDirective {
            path: dotted(path),
            value: raw.as_str().map_or_else(|| raw.to_string(), str::to_string),
        })
}

/// `$patch` value of a directive.
fn directive_name(directive: Directive) -> &'static str {
    match directive {
        Directive::Merge => "merge",
        Directive::Replace => "replace",
        Directive::Delete => "delete",
    }
}

fn walk_merge_list(
    dest: Option<&mut Value>,
    patch: Option<&Value>,
    keys: &[String],
    elem_schema: Schema<'_>,
    path: &mut Vec<String>,
) -> Result<Outcome, SmpError> {
    let patch_list = match patch {
        Some(Value::Array(list)) => Some(list.as_slice()),
        _ => None,
    };
    let (base, patch_items): (Vec<Value>, Option<Vec<Value>>) = match dest {
        Some(Value::Array(dest_list)) => {
            if patch.is_some_and(Value::is_null) {
                return Ok(Outcome::Clear);
            }
            match patch_list {
                None => (std::mem::take(dest_list), None),
                Some(items) => {
                    let directive = list_directive(items, path)?;
                    let mut items = items.to_vec();
                    if let Some(directive) = directive {
                        let name = directive_name(directive).to_string();
                        Setter::new(vec![DIRECTIVE.to_string()], vec![name])
                            .apply(&mut items, None, path)?;
                    }
                    match directive.unwrap_or(Directive::Merge) {
                        Directive::Delete => return Ok(Outcome::Clear),
                        Directive::Replace => (items.clone(), Some(items)),
                        Directive::Merge => (std::mem::take(dest_list), Some(items)),
                    }
                }
            }
        }
        // The target has no list: the patch's list, merged with itself.
        _ => match patch_list {
            Some(items) => (items.to_vec(), Some(items.to_vec())),
            None => return Ok(Outcome::Keep),
        },
    };
    let merged = if keys.is_empty() {
        merge_primitives(base, patch_items.as_deref(), path)?
    } else {
        merge_by_keys(base, patch_items.as_deref(), keys, elem_schema, path)?
    };
    Ok(Outcome::Set(Value::Array(merged)))
}

/// The key values of a list element; "" where a key is missing, null or empty.
fn key_values(element: &Value, keys: &[String]) -> Vec<String> {
    keys.iter()
        .map(|key| match element.as_object().and_then(|m| m.get(key)) {
            None | Some(Value::Null) => String::new(),
            Some(Value::Object(m)) if m.is_empty() => String::new(),
            Some(Value::Array(a)) if a.is_empty() => String::new(),
            Some(v) => scalar_text(v),
        })
        .collect()
}

/// Unifies key tuples that agree where both are set and share at least one value.
fn unify_tuples(tuples: &mut [Vec<String>]) {
    for i in 0..tuples.len() {
        for j in 0..tuples.len() {
            if let Some(merged) = unified(&tuples[i], &tuples[j]) {
                tuples[i] = merged.clone();
                tuples[j] = merged;
            }
        }
    }
}

fn unified(a: &[String], b: &[String]) -> Option<Vec<String>> {
    if a.len() != b.len() {
        return None;
    }
    let mut common = false;
    let mut out = Vec::with_capacity(a.len());
    for (x, y) in a.iter().zip(b) {
        if x == y {
            common = true;
            out.push(x.clone());
        } else if !x.is_empty() && !y.is_empty() {
            return None;
        } else if x.is_empty() {
            out.push(y.clone());
        } else {
            out.push(x.clone());
        }
    }
    common.then_some(out)
}

/// The keys (and this tuple's values) that are set in at least one tuple of the list;
/// all keys when none is.
fn valid_keys(
    tuples: &[Vec<String>],
    values: &[String],
    keys: &[String],
) -> (Vec<String>, Vec<String>) {
    let used: Vec<bool> = (0..keys.len())
        .map(|i| {
            tuples
                .iter()
                .any(|t| t.get(i).is_some_and(|v| !v.is_empty()))
        })
        .collect();
    if !used.iter().any(|u| *u) {
        return (keys.to_vec(), values.to_vec());
    }
    let keep = |i: usize| used.get(i).copied().unwrap_or(false);
    let valid_keys = keys
        .iter()
        .enumerate()
        .filter(|(i, _)| keep(*i))
        .map(|(_, k)| k.clone())
        .collect();
    let valid_values = values
        .iter()
        .enumerate()
        .filter(|(i, v)| !v.is_empty() || keep(*i))
        .map(|(_, v)| v.clone())
        .collect();
    (valid_keys, valid_values)
}

/// Index of the first element whose key fields exist and equal `values`; keys this tuple
/// leaves empty are not compared (unless it leaves them all empty).
fn find_element(list: &[Value], keys: &[String], values: &[String]) -> Option<usize> {
    let (keys, values) = valid_keys(&[values.to_vec()], values, keys);
    let (keys, values) = (keys.as_slice(), values.as_slice());
    if keys.first().is_none_or(String::is_empty) {
        let wanted = values.first().map_or("", String::as_str);
        return list.iter().position(|e| scalar_text(e) == wanted);
    }
    list.iter().position(|element| {
        element.as_object().is_some_and(|map| {
            keys.iter().zip(values).all(|(key, value)| {
                map.get(key)
                    .is_some_and(|field| scalar_text(field) == *value)
            }) && keys.len() == values.len()
        })
    })
}

/// kyaml's element setter: rewrites a list, replacing the elements matching `keys`=`values`
/// with `element` (or removing them when `element` is `None`), appending `element` when
/// nothing matched. Null and empty-map elements are dropped on the way.
struct Setter {
    keys: Vec<String>,
    values: Vec<String>,
}

impl Setter {
    fn new(keys: Vec<String>, values: Vec<String>) -> Self {
        let keys = if keys.is_empty() {
            vec![String::new()]
        } else {
            keys
        };
        Setter { keys, values }
    }

    fn mapping_setter(&self) -> bool {
        !self.keys[0].is_empty() && self.values.first().is_some_and(|v| !v.is_empty())
    }

    /// Whether field `key` of `element` matches `value` ("" matches any value of a present
    /// field; an empty key compares a scalar element itself).
    fn field_matches(
        element: &Value,
        key: &str,
        value: &str,
        path: &[String],
    ) -> Result<bool, SmpError> {
        if key.is_empty() {
            if kind_of(element) == Some(Kind::Map) || kind_of(element) == Some(Kind::List) {
                return Err(SmpError::BadElement {
                    path: dotted(path),
                    expected: "scalar",
                });
            }
            return Ok(scalar_text(element) == value || (value.is_empty() && element.is_null()));
        }
        let Value::Object(map) = element else {
            return Err(SmpError::BadElement {
                path: dotted(path),
                expected: "map",
            });
        };
        Ok(match map.get(key) {
            None => false,
            Some(field) => value.is_empty() || scalar_text(field) == value,
        })
    }

    fn apply(
        &self,
        list: &mut Vec<Value>,
        element: Option<Value>,
        path: &[String],
    ) -> Result<(), SmpError> {
        let mapping_setter = self.mapping_setter();
        let mut out = Vec::with_capacity(list.len() + 1);
        let mut found_any = false;
        for item in std::mem::take(list) {
            if item.is_null() || is_empty_map(&item) {
                continue;
            }
            if !item.is_object() && mapping_setter {
                out.push(item);
                continue;
            }
            let mut matched = false;
            let mut found = true;
            for (j, key) in self.keys.iter().enumerate() {
                if let Some(value) = self.values.get(j) {
                    matched = Self::field_matches(&item, key, value, path)?;
                }
                if !matched {
                    found = false;
                    break;
                }
            }
            if !found {
                if !self.values.is_empty() {
                    out.push(item);
                }
                continue;
            }
            found_any = true;
            if let Some(element) = &element {
                out.push(element.clone());
            }
        }
        *list = out;
        if let Some(element) = element
            && !element.is_null()
            && !found_any
        {
            list.push(element);
        }
        Ok(())
    }
}

/// Merges a list of primitives: the patch's values first, then the target's others.
fn merge_primitives(
    mut base: Vec<Value>,
    patch: Option<&[Value]>,
    path: &[String],
) -> Result<Vec<Value>, SmpError> {
    let mut values: Vec<String> = Vec::new();
    for item in patch.unwrap_or_default().iter().chain(base.iter()) {
        let text = scalar_text(item);
        if !values.contains(&text) {
            values.push(text);
        }
    }
    if values.is_empty() {
        return Ok(base);
    }
    let key = vec![String::new()];
    let tuples: Vec<Vec<String>> = values.iter().map(|v| vec![v.clone()]).collect();
    let mut items = Vec::new();
    for tuple in &tuples {
        let (valid_keys, valid_values) = valid_keys(&tuples, tuple, &key);
        let dest_index = find_element(&base, &valid_keys, &valid_values);
        let patch_item =
            patch.and_then(|p| find_element(p, &valid_keys, &valid_values).and_then(|i| p.get(i)));
        let val = match patch_item {
            Some(p) => Some(p.clone()),
            None => dest_index.and_then(|i| base.get(i)).cloned(),
        };
        let setter = Setter::new(valid_keys, valid_values);
        match val {
            Some(v) if !v.is_null() && !is_empty_map(&v) => {
                setter.apply(&mut items, Some(v), path)?
            }
            _ => setter.apply(&mut base, None, path)?,
        }
    }
    for item in base {
        let setter = Setter::new(key.clone(), vec![scalar_text(&item)]);
        setter.apply(&mut items, Some(item), path)?;
    }
    Ok(items)
}

/// Merges a list of maps by key: merged and new patch elements first (in patch order),
/// then the target's other elements. Mirrors kyaml's algorithm, quirks included (for
/// several keys, the target's elements keep their relative order at the end).
fn merge_by_keys(
    mut base: Vec<Value>,
    patch: Option<&[Value]>,
    keys: &[String],
    elem_schema: Schema<'_>,
    path: &mut Vec<String>,
) -> Result<Vec<Value>, SmpError> {
    let keys = keys.to_vec();
    let mut tuples: Vec<Vec<String>> = Vec::new();
    for item in patch.unwrap_or_default().iter().chain(base.iter()) {
        let tuple = key_values(item, &keys);
        if !tuples.contains(&tuple) {
            tuples.push(tuple);
        }
    }
    if tuples.is_empty() {
        return Ok(base);
    }
    if keys.len() > 1 {
        unify_tuples(&mut tuples);
    }
    let mut items: Vec<Value> = Vec::new();
    let mut last_keys = keys.clone();
    for tuple in &tuples {
        let (valid_keys, valid_values) = valid_keys(&tuples, tuple, &keys);
        last_keys = valid_keys.clone();
        let dest_index = find_element(&base, &valid_keys, &valid_values);
        let patch_item =
            patch.and_then(|p| find_element(p, &valid_keys, &valid_values).and_then(|i| p.get(i)));
        let outcome = walk(
            dest_index.and_then(|i| base.get_mut(i)),
            patch_item,
            elem_schema,
            path,
        )?;
        let val = match outcome {
            Outcome::Keep => dest_index.and_then(|i| base.get(i)).cloned(),
            Outcome::Clear => None,
            Outcome::Set(v) => Some(v),
        };
        let Some(mut val) = val.filter(|v| !v.is_null() && !is_empty_map(v)) else {
            Setter::new(valid_keys, valid_values).apply(&mut base, None, path)?;
            continue;
        };
        if let Value::Object(map) = &mut val {
            for (key, value) in valid_keys.iter().zip(&valid_values) {
                if !map.contains_key(key) && !value.is_empty() {
                    map.insert(key.clone(), untyped_scalar(value));
                }
            }
        }
        Setter::new(valid_keys, valid_values).apply(&mut items, Some(val), path)?;
    }
    append_base(items, base, &last_keys, path)
}

/// A plain YAML scalar as it would resolve: integer, boolean or string.
fn untyped_scalar(text: &str) -> Value {
    if let Ok(n) = text.parse::<i64>() {
        return Value::from(n);
    }
    match text {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => Value::String(text.to_string()),
    }
}

/// Puts the target's (merged) elements into the result list: in place of their match, or
/// at the end.
fn append_base(
    mut items: Vec<Value>,
    base: Vec<Value>,
    keys: &[String],
    path: &[String],
) -> Result<Vec<Value>, SmpError> {
    for element in base {
        let Value::Object(map) = &element else {
            return Err(SmpError::BadElement {
                path: dotted(path),
                expected: "map",
            });
        };
        let mut values = Vec::new();
        for key in keys {
            match map.get(key) {
                Some(value) => values.push(scalar_text(value)),
                None => items.push(element.clone()),
            }
        }
        if keys.len() > 1 {
            Setter::new(keys.to_vec(), values.clone()).apply(&mut items, None, path)?;
        }
        Setter::new(keys.to_vec(), values).apply(&mut items, Some(element), path)?;
    }
    Ok(items)
}

/// Removes the fields at `paths` that hold a null written with no text (`replicas:` and
/// nothing after it), as kustomize's merge does to every such field it walks: it keeps a null
/// written as `null` or `~` but drops an empty one. kustomize walks every map of the target
/// and the elements of lists merged by key, not the elements of other lists, so a path through
/// a list without merge keys is left alone.
pub fn drop_empty_nulls(
    target: &mut Object,
    paths: &[Vec<PathStep>],
    gvk: &Gvk,
    schemas: SchemaSet<'_>,
) {
    let schema = schemas.for_kind(&gvk.api_version(), &gvk.kind);
    for path in paths {
        drop_empty_null(target, path, schema);
    }
}

/// [`drop_empty_nulls`] for one path from the map `node`.
fn drop_empty_null(node: &mut Object, path: &[PathStep], schema: Schema<'_>) {
    let Some((PathStep::Key(name), rest)) = path.split_first() else {
        return;
    };
    let schema = schema.field(name);
    match (node.get_mut(name), rest) {
        (Some(Value::Null), []) => {
            node.shift_remove(name);
        }
        (Some(Value::Object(map)), _) => drop_empty_null(map, rest, schema),
        (Some(Value::Array(items)), [PathStep::Index(index), rest @ ..]) => {
            if schema.merge_keys().is_some()
                && let Some(Value::Object(map)) = items.get_mut(*index)
            {
                drop_empty_null(map, rest, schema.elements());
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
