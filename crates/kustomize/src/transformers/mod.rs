//! kustomize's simple builtin transformers: labels, annotations, namespace, name prefix and
//! suffix, images and replicas, plus the `apiVersion: builtin` plugin configs that drive them
//! from a kustomization's `transformers:` list.
//!
//! Fields are located with kustomize's field-spec walk (see `apply_spec`'s rules), which
//! differs from [`crate::fieldspec::visit_fields`] in a few ways that show in
//! output: a `[]` path segment is never created, a sequence at the end of a path is handed
//! to the setter whole, and a scalar met along the path is an error.

pub mod annotations;
pub mod images;
pub mod labels;
pub mod namespace;
pub mod plugin;
pub mod prefix_suffix;
pub mod replicas;

pub use annotations::add_annotations;
pub use images::{set_image, set_images, split_image};
pub use labels::{add_labels, apply_kustomization_labels, label_entry_field_specs};
pub use namespace::{NamespaceOptions, RoleBindingSubjects, set_namespace};
pub use plugin::apply_builtin;
pub use prefix_suffix::{add_name_prefix, add_name_suffix};
pub use replicas::{set_all_replicas, set_replicas};

use serde_json::{Map, Value};

use super::fieldspec::FieldSpec;
use super::resource::{Gvk, Resource};

/// A builtin transformer failed on a resource or could not be configured.
#[derive(Debug, thiserror::Error)]
pub enum TransformError {
    /// A field a field spec selects could not be set.
    #[error("considering field '{path}' of object {id}: {source}")]
    Field {
        /// The resource, as kustomize prints ids.
        id: String,
        /// The field spec's path.
        path: String,
        /// What was wrong with the field.
        source: FieldSetError,
    },
    /// Two resources ended up with the same id after the namespace was set.
    #[error("namespace transformation produces ID conflict: {id} already exists")]
    NamespaceConflict {
        /// The id both resources now have.
        id: String,
    },
    /// A `replicas` entry names no resource of a kind the replica field specs select.
    #[error("resource with name {name} does not match a config with the following GVK [{gvks}]")]
    ReplicaTargetNotFound {
        /// The name in the `replicas` entry.
        name: String,
        /// The kinds the field specs select.
        gvks: String,
    },
    /// Field specs for the same field disagree about creating it.
    #[error(
        "conflicting fieldspecs for path '{path}' (kind '{kind}'): create is both set and unset"
    )]
    ConflictingFieldSpecs {
        /// The path of the conflicting specs.
        path: String,
        /// The kind of the conflicting specs.
        kind: String,
    },
    /// A builtin plugin config is malformed.
    #[error("invalid {kind} config: {reason}")]
    Config {
        /// The plugin kind.
        kind: String,
        /// What is wrong.
        reason: String,
    },
}

/// Why a field a field spec selects could not be set, in kyaml's words.
#[derive(Debug, thiserror::Error)]
pub enum FieldSetError {
    /// The path goes through a scalar.
    #[error("expected sequence or mapping node")]
    NotContainer,
    /// The path has an empty segment.
    #[error("cannot set or create an empty field name")]
    EmptyName,
    /// A namespace field that is a map or a list.
    #[error("namespace field specs must target scalar nodes")]
    NamespaceNotScalar,
    /// An image field that is a map or a list.
    #[error("wrong node kind: expected a scalar image")]
    ImageNotScalar,
    /// A name field that is a map or a list.
    #[error("expected a scalar name field")]
    NameNotScalar,
    /// A label or annotation field that is not a map.
    #[error("wrong node kind: expected MappingNode")]
    NotAMap,
    /// A (cluster)role binding's `subjects` that is not a list.
    #[error("subjects is not a sequence")]
    SubjectsNotASequence,
    /// A (cluster)role binding's subjects could not be given the namespace.
    #[error("setting namespace on (cluster)role binding subjects: {0}")]
    Subjects(#[source] Box<FieldSetError>),
}

/// What a field spec with `create: true` creates where its last field is missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Create {
    /// Never create (kustomize's image transformer).
    Nothing,
    /// A map (labels, annotations).
    Map,
    /// A scalar (names, namespaces, replica counts).
    Scalar,
}

/// One segment of a field-spec path.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Segment {
    /// The field name.
    name: String,
    /// Written with a trailing `[]`: a sequence, never created.
    sequence: bool,
}

/// Splits a field-spec path on `/` (a leading `/` ignored, `\/` a literal slash) and notes
/// segments marked `[]`. Empty segments are kept; the walk rejects them.
fn split_spec_path(path: &str) -> Vec<Segment> {
    let trimmed = match path.strip_prefix('/') {
        Some(rest) if !rest.is_empty() => rest,
        _ => path,
    };
    let mut parts: Vec<String> = Vec::new();
    for piece in trimmed.split('/') {
        match parts.last_mut() {
            Some(last) if last.ends_with('\\') => {
                last.pop();
                last.push('/');
                last.push_str(piece);
            }
            _ => parts.push(piece.to_string()),
        }
    }
    parts
        .into_iter()
        .map(|part| match part.strip_suffix("[]") {
            Some(name) => Segment {
                name: name.to_string(),
                sequence: true,
            },
            None => Segment {
                name: part,
                sequence: false,
            },
        })
        .collect()
}

/// Whether `spec` selects the object's current `apiVersion` and `kind`.
pub(crate) fn spec_selects(spec: &FieldSpec, gvk: &Gvk) -> bool {
    spec.selects(gvk)
}

/// A setter applied to each field a spec finds; `Err` carries the reason.
pub(crate) type Setter<'a> = dyn FnMut(&mut Value) -> Result<(), FieldSetError> + 'a;

/// Calls `set` on every field `spec` locates in `res` (when the spec selects it).
///
/// The walk follows kustomize: sequences along the path are walked element by element; a
/// `null` met before the end stops the walk; a missing field is created (as a map, or as
/// `create` at the end of the path) only when `spec.create` is set, `create` is not
/// [`Create::Nothing`] and the segment is not marked `[]`; a `null` field that would have
/// been created becomes the created kind; a `null` `[]` field becomes an empty sequence.
pub(crate) fn apply_spec(
    res: &mut Resource,
    spec: &FieldSpec,
    create: Create,
    set: &mut Setter<'_>,
) -> Result<(), TransformError> {
    if !spec_selects(spec, &res.gvk()) {
        return Ok(());
    }
    let create = if spec.create { create } else { Create::Nothing };
    let segments = split_spec_path(&spec.path);
    let result = match segments.split_first() {
        Some((first, rest)) => walk_map(&mut res.obj, first, rest, create, set),
        None => Ok(()),
    };
    result.map_err(|source| TransformError::Field {
        id: res.id().describe(),
        path: spec.path.clone(),
        source,
    })
}

fn walk(
    node: &mut Value,
    segments: &[Segment],
    create: Create,
    set: &mut Setter<'_>,
) -> Result<(), FieldSetError> {
    let Some((first, rest)) = segments.split_first() else {
        return set(node);
    };
    match node {
        Value::Null => Ok(()),
        Value::Array(items) => {
            for item in items {
                walk(item, segments, create, set)?;
            }
            Ok(())
        }
        Value::Object(map) => walk_map(map, first, rest, create, set),
        _ => Err(FieldSetError::NotContainer),
    }
}

fn created(create: Create, last: bool) -> Value {
    match (create, last) {
        (Create::Scalar, true) => Value::String(String::new()),
        _ => Value::Object(Map::new()),
    }
}

fn walk_map(
    map: &mut Map<String, Value>,
    segment: &Segment,
    rest: &[Segment],
    create: Create,
    set: &mut Setter<'_>,
) -> Result<(), FieldSetError> {
    if segment.name.is_empty() {
        return Err(FieldSetError::EmptyName);
    }
    let creating = create != Create::Nothing && !segment.sequence;
    if !map.contains_key(&segment.name) {
        if !creating {
            return Ok(());
        }
        map.insert(segment.name.clone(), created(create, rest.is_empty()));
    }
    let Some(field) = map.get_mut(&segment.name) else {
        return Ok(());
    };
    if field.is_null() {
        if segment.sequence {
            *field = Value::Array(Vec::new());
        } else if creating {
            *field = created(create, rest.is_empty());
        }
    }
    walk(field, rest, create, set)
}

pub(crate) use crate::resource::scalar_node_text as scalar_text;

/// Merges `incoming` into `specs` as kustomize does: a spec whose path is already covered
/// by one selecting its kind is skipped, unless the two disagree on `create`.
pub(crate) fn merge_specs(
    specs: &mut Vec<FieldSpec>,
    incoming: &[FieldSpec],
) -> Result<(), TransformError> {
    for spec in incoming {
        let existing = specs
            .iter()
            .find(|s| s.path == spec.path && s.selects(&spec.gvk()));
        match existing {
            Some(found) if found.create != spec.create => {
                return Err(TransformError::ConflictingFieldSpecs {
                    path: spec.path.clone(),
                    kind: spec.kind.clone(),
                });
            }
            Some(_) => {}
            None => specs.push(spec.clone()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::test_resource as resource;
    use serde_json::json;

    fn mark(res: &mut Resource, spec: &FieldSpec, create: Create) -> Result<usize, TransformError> {
        let mut count = 0;
        apply_spec(res, spec, create, &mut |v| {
            count += 1;
            *v = json!("X");
            Ok(())
        })?;
        Ok(count)
    }

    #[test]
    fn splits_paths_like_kustomize() {
        let segs = split_spec_path("/spec/containers[]/image");
        assert_eq!(segs.len(), 3);
        assert!(segs[1].sequence);
        assert_eq!(segs[1].name, "containers");
        let segs = split_spec_path("metadata/annotations/a\\/b");
        assert_eq!(segs[2].name, "a/b");
        assert_eq!(split_spec_path("a//b").len(), 3);
    }

    #[test]
    fn never_creates_sequence_segments() {
        let mut res = resource(json!({"kind": "Pod", "spec": {}}));
        let spec = FieldSpec::any_kind("spec/containers[]/image", true);
        assert_eq!(mark(&mut res, &spec, Create::Scalar).unwrap(), 0);
        assert_eq!(res.obj["spec"], json!({}));
    }

    #[test]
    fn creates_only_with_create_flag_and_kind() {
        let mut res = resource(json!({"kind": "Pod", "metadata": {"name": "a"}}));
        let spec = FieldSpec::any_kind("spec/replicas", true);
        assert_eq!(mark(&mut res, &spec, Create::Nothing).unwrap(), 0);
        assert!(res.obj.get("spec").is_none());
        assert_eq!(mark(&mut res, &spec, Create::Scalar).unwrap(), 1);
        assert_eq!(res.obj["spec"], json!({"replicas": "X"}));
        let spec = FieldSpec::any_kind("status/x", false);
        assert_eq!(mark(&mut res, &spec, Create::Scalar).unwrap(), 0);
    }

    #[test]
    fn walks_sequences_and_skips_nulls() {
        let mut res = resource(json!({
            "kind": "Pod",
            "spec": {"containers": [{"image": "a"}, {"name": "b"}], "initContainers": null}
        }));
        let spec = FieldSpec::any_kind("spec/containers/image", false);
        assert_eq!(mark(&mut res, &spec, Create::Nothing).unwrap(), 1);
        let spec = FieldSpec::any_kind("spec/initContainers[]/image", false);
        assert_eq!(mark(&mut res, &spec, Create::Nothing).unwrap(), 0);
        assert_eq!(res.obj["spec"]["initContainers"], json!([]));
    }

    #[test]
    fn scalar_on_the_path_is_an_error_naming_object_and_field() {
        let mut res = resource(json!({"kind": "Pod", "metadata": {"name": "p"}, "spec": "oops"}));
        let spec = FieldSpec::any_kind("spec/x", true);
        let err = mark(&mut res, &spec, Create::Scalar)
            .unwrap_err()
            .to_string();
        assert!(err.contains("'spec/x'"), "{err}");
        assert!(err.contains("Pod"), "{err}");
        assert!(err.contains("/p."), "{err}");
    }

    #[test]
    fn kind_selection_uses_group_and_version() {
        let mut res = resource(json!({"apiVersion": "apps/v1", "kind": "Deployment"}));
        let other = FieldSpec::for_group_kind("batch", "Deployment", "spec/x", true);
        assert_eq!(mark(&mut res, &other, Create::Scalar).unwrap(), 0);
        let apps = FieldSpec::for_group_kind("apps", "Deployment", "spec/x", true);
        assert_eq!(mark(&mut res, &apps, Create::Scalar).unwrap(), 1);
    }

    #[test]
    fn merge_skips_covered_specs_and_rejects_create_conflicts() {
        let mut specs = vec![FieldSpec::any_kind("metadata/labels", true)];
        merge_specs(
            &mut specs,
            &[FieldSpec::for_kind("Deployment", "metadata/labels", true)],
        )
        .unwrap();
        assert_eq!(specs.len(), 1);
        merge_specs(&mut specs, &[FieldSpec::any_kind("spec/x", false)]).unwrap();
        assert_eq!(specs.len(), 2);
        let err = merge_specs(&mut specs, &[FieldSpec::any_kind("spec/x", true)]);
        assert!(matches!(
            err,
            Err(TransformError::ConflictingFieldSpecs { .. })
        ));
    }
}
