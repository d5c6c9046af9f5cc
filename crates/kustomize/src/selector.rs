//! Resource selection for patch and replacement targets: anchored regexes over group,
//! version, kind, name and namespace (matched against the original and the current id),
//! plus Kubernetes label and annotation selectors (apimachinery's `labels.Parse`, from the
//! `labelselector` crate).

use labelselector::LabelSelector;
use regex::Regex;

use super::kustfile::Selector;
use super::resource::{ResMap, Resource};

/// A selector that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SelectorError {
    /// A field is not a valid regular expression.
    #[error("invalid {field} regex {pattern:?} in target selector: {}", .source.reason)]
    Regex {
        /// `group`, `version`, `kind`, `name` or `namespace`.
        field: &'static str,
        /// The pattern.
        pattern: String,
        /// The regex compiler's error.
        source: Box<crate::goregex::GoRegexError>,
    },
    /// A label or annotation selector that does not parse.
    #[error("invalid {field} {selector:?}: {source}")]
    Label {
        /// `labelSelector` or `annotationSelector`.
        field: &'static str,
        /// The selector text.
        selector: String,
        /// What is wrong.
        source: Box<labelselector::ParseError>,
    },
}

/// A compiled [`Selector`].
#[derive(Debug)]
pub struct CompiledSelector {
    group: Option<Regex>,
    version: Option<Regex>,
    kind: Option<Regex>,
    name: Option<Regex>,
    namespace: Option<Regex>,
    labels: LabelSelector,
    annotations: LabelSelector,
}

/// `pattern` anchored at both ends, with Go's meaning ([`crate::goregex`]); `None` for an
/// empty pattern, which matches anything.
pub(crate) fn anchored(field: &'static str, pattern: &str) -> Result<Option<Regex>, SelectorError> {
    if pattern.is_empty() {
        return Ok(None);
    }
    crate::goregex::compile_anchored(pattern)
        .map(Some)
        .map_err(|source| SelectorError::Regex {
            field,
            pattern: pattern.to_string(),
            source: Box::new(source),
        })
}

fn is_match(regex: &Option<Regex>, value: &str) -> bool {
    regex.as_ref().is_none_or(|r| r.is_match(value))
}

impl CompiledSelector {
    /// Compiles the regexes and selectors of `selector`.
    pub fn new(selector: &Selector) -> Result<Self, SelectorError> {
        Ok(CompiledSelector {
            group: anchored("group", &selector.group)?,
            version: anchored("version", &selector.version)?,
            kind: anchored("kind", &selector.kind)?,
            name: anchored("name", &selector.name)?,
            namespace: anchored("namespace", &selector.namespace)?,
            // apimachinery's `labels.Parse` grammar, as kustomize parses them; an empty
            // selector selects everything.
            labels: LabelSelector::parse(&selector.label_selector).map_err(|source| {
                SelectorError::Label {
                    field: "labelSelector",
                    selector: selector.label_selector.clone(),
                    source: Box::new(source),
                }
            })?,
            annotations: LabelSelector::parse(&selector.annotation_selector).map_err(|source| {
                SelectorError::Label {
                    field: "annotationSelector",
                    selector: selector.annotation_selector.clone(),
                    source: Box::new(source),
                }
            })?,
        })
    }

    /// Whether `resource` is selected: namespace and name may match either the original or
    /// the current id; group, version and kind are the current ones.
    pub fn matches(&self, resource: &Resource) -> bool {
        let current = resource.id();
        let original = resource.org_id();
        if !is_match(&self.namespace, original.effective_namespace())
            && !is_match(&self.namespace, current.effective_namespace())
        {
            return false;
        }
        if !is_match(&self.name, &original.name) && !is_match(&self.name, &current.name) {
            return false;
        }
        if !is_match(&self.group, &current.gvk.group)
            || !is_match(&self.version, &current.gvk.version)
            || !is_match(&self.kind, &current.gvk.kind)
        {
            return false;
        }
        let labels = resource.labels();
        let annotations = resource.annotations();
        selects(&self.labels, &labels) && selects(&self.annotations, &annotations)
    }
}

/// Indexes of the resources of `resmap` that `selector` selects, in order.
pub fn select(resmap: &ResMap, selector: &Selector) -> Result<Vec<usize>, SelectorError> {
    let compiled = CompiledSelector::new(selector)?;
    Ok(resmap
        .iter()
        .enumerate()
        .filter(|(_, r)| compiled.matches(r))
        .map(|(i, _)| i)
        .collect())
}

/// Whether the pairs meet every requirement of `selector`.
fn selects(selector: &LabelSelector, pairs: &[(String, String)]) -> bool {
    selector.matches_with(|key| {
        pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::test_resource as resource;
    use serde_json::json;

    fn selector(yaml: serde_json::Value) -> Selector {
        serde_json::from_value(yaml).unwrap()
    }

    #[test]
    fn matches_anchored_regexes_on_original_and_current_names() {
        let mut r = resource(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web", "tier": "front"}}}));
        r.set_name("prod-web");
        let yes = |s| CompiledSelector::new(&selector(s)).unwrap().matches(&r);
        assert!(yes(json!({"kind": "Deployment", "name": "web"})));
        assert!(yes(json!({"name": "prod-.*"})));
        assert!(!yes(json!({"name": "we"})));
        assert!(yes(json!({"group": "apps", "version": "v1"})));
        assert!(!yes(json!({"kind": "Deploy"})));
        assert!(yes(json!({"namespace": "default"})));
        assert!(yes(
            json!({"labelSelector": "app=web,tier in (front, back)"})
        ));
        assert!(yes(
            json!({"labelSelector": "app,!missing,tier notin (back)"})
        ));
        assert!(!yes(json!({"labelSelector": "app!=web"})));
        assert!(!yes(json!({"annotationSelector": "note"})));
    }

    #[test]
    fn rejects_bad_selectors() {
        assert!(CompiledSelector::new(&selector(json!({"name": "("}))).is_err());
        assert!(CompiledSelector::new(&selector(json!({"labelSelector": "a in b"}))).is_err());
        assert!(CompiledSelector::new(&selector(json!({"labelSelector": "a,,b"}))).is_err());
    }
}
