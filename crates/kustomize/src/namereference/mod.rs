//! Name-reference back-fixing: after prefixes, suffixes, namespaces, patches and hashes
//! changed names, the fields that referred to the old names are rewritten.
//!
//! For every referenced kind of the table and every field that may hold such a name, the
//! name found in the field is looked up among the objects that once carried it (their
//! previous names), narrowed down by kind, namespace and the layers that renamed them,
//! and replaced with the referral's current name.

mod defaults;

use std::collections::HashMap;

use serde_json::Value;

use super::config::NameBackReference;
use super::fieldspec::{FieldSpec, split_path, visit_fields};
use super::resource::{
    Gvk, ResId, ResMap, Resource, is_cluster_scoped_kind, non_null_scalar_text as scalar_text,
};

pub use defaults::builtin_name_references;

/// Why name references could not be fixed.
#[derive(Debug, thiserror::Error)]
pub enum NameRefError {
    /// Several objects with different new names could be meant by one reference.
    #[error(
        "updating name reference in '{field}' field of '{referrer}': found multiple possible \
         referrals: {candidates}"
    )]
    Ambiguous {
        /// Field-spec path of the reference.
        field: String,
        /// The referring object.
        referrer: String,
        /// The candidates, comma-separated.
        candidates: String,
    },
    /// A field that should hold a map with a `name` lacks it.
    #[error(
        "updating name reference in '{field}' field of '{referrer}': path config error; no \
         'name' field in node"
    )]
    NoNameField {
        /// Field-spec path of the reference.
        field: String,
        /// The referring object.
        referrer: String,
    },
    /// A list element of a name field is neither a string nor a map.
    #[error(
        "updating name reference in '{field}' field of '{referrer}': a list element is \
         neither a string nor a map"
    )]
    BadElement {
        /// Field-spec path of the reference.
        field: String,
        /// The referring object.
        referrer: String,
    },
    /// A RoleBinding subject of kind ServiceAccount has a namespace that is not a string.
    #[error("invalid input: a ServiceAccount subject of '{referrer}' has a non-string namespace")]
    BadSubjectNamespace {
        /// The RoleBinding.
        referrer: String,
    },
}

/// A resource id as kustomize prints it: `Kind.version.group/name.namespace`, with
/// `[noGrp]`, `[noVer]` and `[noNs]` for empty parts.
pub fn kustomize_id_string(id: &ResId) -> String {
    fn or<'a>(value: &'a str, empty: &'a str) -> &'a str {
        if value.is_empty() { empty } else { value }
    }
    format!(
        "{}.{}.{}/{}.{}",
        or(&id.gvk.kind, "[noKind]"),
        or(&id.gvk.version, "[noVer]"),
        or(&id.gvk.group, "[noGrp]"),
        or(&id.name, "[noName]"),
        or(&id.namespace, "[noNs]")
    )
}

/// Previous ids the way kustomize reconstructs them: the kind, name and namespace of each
/// earlier identity, paired with the CURRENT group and version.
pub(crate) fn previous_ids(resource: &Resource) -> Vec<ResId> {
    let current = resource.gvk();
    resource
        .prev_ids
        .iter()
        .map(|id| ResId {
            gvk: Gvk {
                group: current.group.clone(),
                version: current.version.clone(),
                kind: id.gvk.kind.clone(),
            },
            name: id.name.clone(),
            namespace: id.namespace.clone(),
        })
        .collect()
}

/// The original id, as kustomize reconstructs it (see [`previous_ids`]).
fn original_id(resource: &Resource) -> ResId {
    previous_ids(resource)
        .into_iter()
        .next()
        .unwrap_or_else(|| resource.id())
}

/// Calls `visit` on every non-null value at the end of `segments`, without walking into a
/// final list: a list found at the last field is handed over whole. Lists met earlier on
/// the path are walked element by element; nothing is created.
pub(crate) fn visit_leaf_values<E>(
    node: &mut Value,
    segments: &[String],
    visit: &mut dyn FnMut(&mut Value) -> Result<(), E>,
) -> Result<(), E> {
    let Some((last, parents)) = segments.split_last() else {
        return Ok(());
    };
    visit_fields(node, parents, false, &mut |parent| match parent {
        Value::Object(map) => match map.get_mut(last) {
            Some(value) if !value.is_null() => visit(value),
            _ => Ok(()),
        },
        _ => Ok(()),
    })
}

/// What the selection rules need to know about a possible referral.
struct Candidate {
    id: ResId,
    previous: Vec<ResId>,
    original_namespace: String,
    prefixes: Vec<String>,
    suffixes: Vec<String>,
}

impl Candidate {
    fn of(resource: &Resource) -> Self {
        let original = original_id(resource);
        Candidate {
            id: resource.id(),
            previous: previous_ids(resource),
            original_namespace: effective_namespace(&original),
            prefixes: resource.name_prefixes.clone(),
            suffixes: resource.name_suffixes.clone(),
        }
    }

    fn is_cluster_scoped(&self) -> bool {
        is_cluster_scoped_kind(&self.id.gvk.kind)
    }

    fn had_kind_selected_by(&self, selector: &Gvk) -> bool {
        self.previous.iter().any(|id| selector.selects(&id.gvk))
    }
}

/// `""` for cluster-scoped ids, else the namespace with "" meaning "default".
fn effective_namespace(id: &ResId) -> String {
    if is_cluster_scoped_kind(&id.gvk.kind) {
        String::new()
    } else if id.namespace.is_empty() {
        "default".to_string()
    } else {
        id.namespace.clone()
    }
}

/// Whether the shorter list is the tail of the longer one (two empty lists match).
fn same_ending(a: &[String], b: &[String]) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if short.is_empty() {
        return long.is_empty();
    }
    long.ends_with(short)
}

fn prefixes_suffixes_match(a: &Candidate, b: &Candidate, allow_empty: bool) -> bool {
    let part = |x: &[String], y: &[String]| {
        (allow_empty && (x.is_empty() || y.is_empty())) || same_ending(x, y)
    };
    part(&a.prefixes, &b.prefixes) && part(&a.suffixes, &b.suffixes)
}

/// The referring object while its fields are rewritten.
struct Referrer<'a> {
    index: usize,
    me: &'a Candidate,
    role_ref: Option<Gvk>,
}

/// The objects of a build indexed by every name they ever had, so that a reference is
/// resolved among the objects that carried its name instead of among all objects.
struct Index<'a> {
    all: &'a [Candidate],
    by_name: HashMap<&'a str, Vec<usize>>,
    by_original_namespace: HashMap<&'a str, Vec<usize>>,
}

impl<'a> Index<'a> {
    fn new(all: &'a [Candidate]) -> Self {
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut by_original_namespace: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, candidate) in all.iter().enumerate() {
            for id in &candidate.previous {
                let holders = by_name.entry(id.name.as_str()).or_default();
                if holders.last() != Some(&i) {
                    holders.push(i);
                }
            }
            if !candidate.original_namespace.is_empty() {
                by_original_namespace
                    .entry(candidate.original_namespace.as_str())
                    .or_default()
                    .push(i);
            }
        }
        Index {
            all,
            by_name,
            by_original_namespace,
        }
    }

    /// The objects that once carried `name`, in build order.
    fn named(&self, name: &str) -> &[usize] {
        self.by_name.get(name).map_or(&[], Vec::as_slice)
    }
}

/// Which objects a referrer may refer to: any object for a cluster-scoped referrer; else
/// cluster-scoped objects, objects of its namespace, and for a RoleBinding objects in the
/// namespaces of its ServiceAccount subjects.
struct Referable {
    /// The referrer's effective namespace; `None` for a cluster-scoped referrer.
    namespace: Option<String>,
    subject_namespaces: Vec<String>,
}

impl Referable {
    fn allows(&self, c: &Candidate) -> bool {
        let Some(namespace) = &self.namespace else {
            return true;
        };
        c.is_cluster_scoped()
            || effective_namespace(&c.id) == *namespace
            || self.subject_namespaces.contains(&c.id.namespace)
    }
}

/// One field spec applied to one referrer.
struct Update<'a> {
    referrer: &'a Referrer<'a>,
    spec: &'a FieldSpec,
    target: Gvk,
    index: &'a Index<'a>,
    referable: &'a Referable,
    referrals: Vec<usize>,
}

impl Update<'_> {
    fn ambiguous(&self, chosen: &[usize]) -> NameRefError {
        NameRefError::Ambiguous {
            field: self.spec.path.clone(),
            referrer: kustomize_id_string(&self.referrer.me.id),
            candidates: chosen
                .iter()
                .map(|&i| kustomize_id_string(&self.index.all[i].id))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    fn sieve(list: Vec<usize>, keep: impl Fn(&Candidate) -> bool, all: &[Candidate]) -> Vec<usize> {
        list.into_iter().filter(|&i| keep(&all[i])).collect()
    }

    /// The referable objects that once carried `name` and pass `keep`, in build order.
    fn named(&self, name: &str, keep: impl Fn(&Candidate) -> bool) -> Vec<usize> {
        let all = self.index.all;
        self.index
            .named(name)
            .iter()
            .copied()
            .filter(|&i| self.referable.allows(&all[i]) && keep(&all[i]))
            .collect()
    }

    /// Picks the referral meant by `old_name` among `pool` (objects that carried that
    /// name); `same_namespace_too` says whether candidates only count as identical when
    /// their namespaces match as well.
    fn select(
        &self,
        pool: Vec<usize>,
        same_namespace_too: bool,
    ) -> Result<Option<usize>, NameRefError> {
        let all = self.index.all;
        let mut list = Self::sieve(pool, |c| c.had_kind_selected_by(&self.target), all);
        if self.spec.path.ends_with("roleRef/name")
            && let Some(role_ref) = &self.referrer.role_ref
        {
            list = Self::sieve(list, |c| c.had_kind_selected_by(role_ref), all);
        }
        let me = self.referrer.me;
        if !me.is_cluster_scoped() {
            let namespace = effective_namespace(&me.id);
            list = Self::sieve(
                list,
                |c| {
                    c.is_cluster_scoped()
                        || c.id.gvk.kind == "ServiceAccount"
                        || effective_namespace(&c.id) == namespace
                },
                all,
            );
        }
        if list.len() == 1 {
            return Ok(list.first().copied());
        }
        list = Self::sieve(list, |c| prefixes_suffixes_match(c, me, true), all);
        if list.len() > 1 {
            list = Self::sieve(list, |c| prefixes_suffixes_match(c, me, false), all);
        }
        let Some(&first) = list.first() else {
            return Ok(None);
        };
        let identical = list.iter().all(|&i| {
            all[i].id.name == all[first].id.name
                && (!same_namespace_too || all[i].id.namespace == all[first].id.namespace)
        });
        if list.len() == 1 || identical {
            Ok(Some(first))
        } else {
            Err(self.ambiguous(&list))
        }
    }

    fn set_scalar(&mut self, node: &mut Value) -> Result<(), NameRefError> {
        let Some(old_name) = scalar_text(node) else {
            return Ok(());
        };
        let pool = self.named(&old_name, |_| true);
        let Some(chosen) = self.select(pool, false)? else {
            return Ok(());
        };
        self.referrals.push(chosen);
        let new_name = &self.index.all[chosen].id.name;
        if *new_name != old_name {
            *node = Value::String(new_name.clone());
        }
        Ok(())
    }

    /// The objects named `name` that a map reference with a `namespace` field can mean:
    /// those originally in that namespace when any referable object was, else those now
    /// in it.
    fn named_in_namespace(&self, name: &str, namespace: &str) -> Vec<usize> {
        let all = self.index.all;
        let any_originally_there = self
            .index
            .by_original_namespace
            .get(namespace)
            .is_some_and(|list| list.iter().any(|&i| self.referable.allows(&all[i])));
        if any_originally_there {
            self.named(name, |c| c.original_namespace == namespace)
        } else {
            self.named(name, |c| {
                !c.is_cluster_scoped() && effective_namespace(&c.id) == namespace
            })
        }
    }

    fn set_mapping(&mut self, node: &mut Value) -> Result<(), NameRefError> {
        let Value::Object(map) = node else {
            return Ok(());
        };
        let Some(name) = map.get("name") else {
            return Err(NameRefError::NoNameField {
                field: self.spec.path.clone(),
                referrer: kustomize_id_string(&self.referrer.me.id),
            });
        };
        let old_name = scalar_text(name).unwrap_or_default();
        let pool = match map.get("namespace") {
            Some(namespace) => {
                self.named_in_namespace(&old_name, &scalar_text(namespace).unwrap_or_default())
            }
            None => self.named(&old_name, |_| true),
        };
        let Some(chosen) = self.select(pool, true)? else {
            return Ok(());
        };
        self.referrals.push(chosen);
        let referral = &self.index.all[chosen].id;
        if referral.name == old_name && referral.namespace.is_empty() {
            return Ok(());
        }
        map.insert("name".into(), Value::String(referral.name.clone()));
        if !referral.namespace.is_empty() {
            map.insert(
                "namespace".into(),
                Value::String(referral.namespace.clone()),
            );
        }
        Ok(())
    }

    fn set(&mut self, node: &mut Value) -> Result<(), NameRefError> {
        match node {
            Value::Null => Ok(()),
            Value::Object(_) => self.set_mapping(node),
            Value::Array(items) => {
                for item in items {
                    match item {
                        Value::Null => {}
                        Value::Object(_) => self.set_mapping(item)?,
                        Value::Array(_) => {
                            return Err(NameRefError::BadElement {
                                field: self.spec.path.clone(),
                                referrer: kustomize_id_string(&self.referrer.me.id),
                            });
                        }
                        _ => self.set_scalar(item)?,
                    }
                }
                Ok(())
            }
            _ => self.set_scalar(node),
        }
    }
}

/// `roleRef.apiGroup` and `roleRef.kind` of a binding, when both are present.
fn role_ref_gvk(resource: &Resource) -> Option<Gvk> {
    let role_ref = resource.obj.get("roleRef")?;
    let group = role_ref.get("apiGroup")?;
    let kind = role_ref.get("kind")?;
    Some(Gvk {
        group: scalar_text(group).unwrap_or_default(),
        version: String::new(),
        kind: scalar_text(kind).unwrap_or_default(),
    })
}

/// Namespaces of the ServiceAccount subjects of a RoleBinding: objects there may be
/// referenced from the binding's namespace.
fn subject_namespaces(resource: &Resource) -> Result<Vec<String>, NameRefError> {
    if resource.kind() != "RoleBinding" {
        return Ok(Vec::new());
    }
    let Some(Value::Array(subjects)) = resource.obj.get("subjects") else {
        return Ok(Vec::new());
    };
    let mut namespaces = Vec::new();
    for subject in subjects.iter().filter_map(Value::as_object) {
        let (Some(namespace), Some(kind)) = (subject.get("namespace"), subject.get("kind")) else {
            continue;
        };
        if kind.as_str() != Some("ServiceAccount") {
            continue;
        }
        match namespace.as_str() {
            Some(ns) => namespaces.push(ns.to_string()),
            None => {
                return Err(NameRefError::BadSubjectNamespace {
                    referrer: kustomize_id_string(&resource.id()),
                });
            }
        }
    }
    Ok(namespaces)
}

/// What the referrer at `index` may refer to.
fn referable_by(
    resources: &[Resource],
    all: &[Candidate],
    index: usize,
) -> Result<Referable, NameRefError> {
    let me = &all[index];
    if me.is_cluster_scoped() {
        return Ok(Referable {
            namespace: None,
            subject_namespaces: Vec::new(),
        });
    }
    Ok(Referable {
        namespace: Some(effective_namespace(&me.id)),
        subject_namespaces: subject_namespaces(&resources[index])?,
    })
}

/// The (field spec, referenced kind) pairs that apply to a referrer, chosen by its
/// original kind, in table order.
fn specs_for<'a>(backrefs: &'a [NameBackReference], original: &Gvk) -> Vec<(&'a FieldSpec, Gvk)> {
    backrefs
        .iter()
        .flat_map(|backref| {
            backref
                .referrers
                .iter()
                .filter(|spec| spec.selects(original))
                .map(move |spec| (spec, backref.gvk()))
        })
        .collect()
}

/// Rewrites every name reference in `resmap` to the current name (and, for map
/// references such as RBAC subjects and webhook services, namespace) of the object it
/// meant, using each object's name history. Runs once, at the top level, after hash
/// suffixes were added. Records on each referral the ids of its referrers (`ref_by`).
pub fn fix_name_references(
    resmap: &mut ResMap,
    backrefs: &[NameBackReference],
) -> Result<(), NameRefError> {
    let all: Vec<Candidate> = resmap.iter().map(Candidate::of).collect();
    let names = Index::new(&all);
    let mut found: Vec<(usize, ResId)> = Vec::new();
    let resources = resmap.as_mut_vec();
    for index in 0..resources.len() {
        let specs = specs_for(backrefs, &original_id(&resources[index]).gvk);
        if specs.is_empty() {
            continue;
        }
        let referable = referable_by(resources, &all, index)?;
        let referrer = Referrer {
            index,
            me: &all[index],
            role_ref: role_ref_gvk(&resources[index]),
        };
        let mut node = Value::Object(std::mem::take(&mut resources[index].obj));
        let result = apply_specs(&mut node, &specs, &referrer, &names, &referable);
        if let Value::Object(obj) = node {
            resources[index].obj = obj;
        }
        for referral in result? {
            found.push((referral, all[referrer.index].id.clone()));
        }
    }
    for (referral, referrer) in found {
        let refs = &mut resources[referral].ref_by;
        if !refs.contains(&referrer) {
            refs.push(referrer);
        }
    }
    Ok(())
}

/// Applies each spec to the referrer's object; returns the referrals it used.
fn apply_specs(
    node: &mut Value,
    specs: &[(&FieldSpec, Gvk)],
    referrer: &Referrer<'_>,
    index: &Index<'_>,
    referable: &Referable,
) -> Result<Vec<usize>, NameRefError> {
    let mut referrals = Vec::new();
    for (spec, target) in specs {
        let mut update = Update {
            referrer,
            spec,
            target: target.clone(),
            index,
            referable,
            referrals: Vec::new(),
        };
        visit_leaf_values(node, &split_path(&spec.path), &mut |value| {
            update.set(value)
        })?;
        referrals.append(&mut update.referrals);
    }
    Ok(referrals)
}

#[cfg(test)]
mod tests;
