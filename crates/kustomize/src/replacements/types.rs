//! The schema of `replacements` entries.

use serde::{Deserialize, Deserializer};

use crate::kustfile::Selector;

/// Decodes `null` as the default value, as Go's decoders do.
fn null_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// One replacement: a value (read from a source object, or given as `sourceValue`) and
/// the fields it is written to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Replacement {
    /// Where the value is read from.
    #[serde(default)]
    pub source: Option<SourceSelector>,
    /// A literal value, instead of `source`.
    #[serde(default)]
    pub source_value: Option<String>,
    /// Where the value is written; absent is an error, unlike an empty list.
    #[serde(default)]
    pub targets: Option<Vec<TargetSelector>>,
}

/// The one object (selected by exact id fields) and field a value is read from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SourceSelector {
    /// API group.
    #[serde(default, deserialize_with = "null_default")]
    pub group: String,
    /// API version.
    #[serde(default, deserialize_with = "null_default")]
    pub version: String,
    /// Kind.
    #[serde(default, deserialize_with = "null_default")]
    pub kind: String,
    /// Name (current or any previous one).
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    /// Namespace ("" and "default" are the same).
    #[serde(default, deserialize_with = "null_default")]
    pub namespace: String,
    /// Field path of the value; `metadata.name` when empty.
    #[serde(default, deserialize_with = "null_default")]
    pub field_path: String,
    /// Splitting the value.
    #[serde(default)]
    pub options: Option<FieldOptions>,
}

/// The objects and fields a value is written to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TargetSelector {
    /// Objects to write to (regexes, labels, annotations); required.
    #[serde(default)]
    pub select: Option<Selector>,
    /// Objects excluded from `select`.
    #[serde(default, deserialize_with = "null_default")]
    pub reject: Vec<Selector>,
    /// Field paths written in every selected object; `metadata.name` when empty.
    #[serde(default, deserialize_with = "null_default")]
    pub field_paths: Vec<String>,
    /// Writing part of a delimited string, and creating missing fields.
    #[serde(default)]
    pub options: Option<FieldOptions>,
}

/// Refinements of how a field is read or written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FieldOptions {
    /// Splits the field's string on this delimiter.
    #[serde(default, deserialize_with = "null_default")]
    pub delimiter: String,
    /// Which part of the split string (targets: negative prepends, past the end appends).
    #[serde(default, deserialize_with = "null_default")]
    pub index: i64,
    /// Accepted and ignored, as kustomize does.
    #[serde(default, deserialize_with = "null_default")]
    pub encoding: String,
    /// Creates missing fields of targets.
    #[serde(default, deserialize_with = "null_default")]
    pub create: bool,
}

/// `Kind.version.group/name.namespace`, with kustomize's placeholders for empty parts.
fn describe_id(group: &str, version: &str, kind: &str, name: &str, namespace: &str) -> String {
    let or = |s: &str, placeholder: &str| {
        if s.is_empty() {
            placeholder.to_string()
        } else {
            s.to_string()
        }
    };
    format!(
        "{}.{}.{}/{}.{}",
        or(kind, "[noKind]"),
        or(version, "[noVer]"),
        or(group, "[noGrp]"),
        or(name, "[noName]"),
        or(namespace, "[noNs]")
    )
}

impl SourceSelector {
    /// The selected id, as kustomize prints it.
    pub fn describe_id(&self) -> String {
        describe_id(
            &self.group,
            &self.version,
            &self.kind,
            &self.name,
            &self.namespace,
        )
    }

    /// The whole selector: id, field path and options.
    pub fn describe(&self) -> String {
        let mut out = self.describe_id();
        if !self.field_path.is_empty() {
            out.push(':');
            out.push_str(&self.field_path);
        }
        if let Some(options) = self
            .options
            .as_ref()
            .filter(|o| !o.delimiter.is_empty() || o.create)
        {
            out.push_str(&format!(
                ":{}({}), create={}",
                options.delimiter, options.index, options.create
            ));
        }
        out
    }
}

/// A target selector as shown in messages.
pub fn describe_selector(selector: &Selector) -> String {
    let mut out = describe_id(
        &selector.group,
        &selector.version,
        &selector.kind,
        &selector.name,
        &selector.namespace,
    );
    if !selector.label_selector.is_empty() {
        out.push_str(&format!(" labelSelector={:?}", selector.label_selector));
    }
    if !selector.annotation_selector.is_empty() {
        out.push_str(&format!(
            " annotationSelector={:?}",
            selector.annotation_selector
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_strictly_and_tolerates_nulls() {
        let r: Replacement = serde_json::from_value(json!({
            "source": {"kind": "ConfigMap", "name": "cm", "fieldPath": "data.k",
                       "options": {"delimiter": ":", "index": 1}},
            "targets": [{"select": {"kind": "Deployment"}, "reject": null,
                         "fieldPaths": ["spec.x"], "options": {"create": true}}]
        }))
        .unwrap();
        let source = r.source.as_ref().unwrap();
        assert_eq!(source.field_path, "data.k");
        assert_eq!(source.options.as_ref().unwrap().index, 1);
        let targets = r.targets.unwrap();
        assert!(targets[0].reject.is_empty());
        assert!(targets[0].options.as_ref().unwrap().create);
        assert!(
            serde_json::from_value::<Replacement>(json!({"source": {"kind": "A", "bogus": 1}}))
                .is_err()
        );
        assert!(serde_json::from_value::<Replacement>(json!({"sourceValue": 2})).is_err());
    }

    #[test]
    fn lenient_decoding_drops_unknown_fields_at_every_level() {
        let v = json!({"extra": 1,
            "source": {"kind": "A", "x": 1, "options": {"create": true, "y": 2}},
            "targets": [{"select": {"name": "n", "z": 3}, "reject": [{"kind": "K", "w": 4}],
                         "fieldPaths": ["a", 1.5], "q": 5}]});
        let r: Replacement = crate::gojson::from_value(&v, crate::gojson::Mode::LENIENT).unwrap();
        assert_eq!(r.source.unwrap().kind, "A");
        let targets = r.targets.unwrap();
        assert_eq!(targets[0].reject[0].kind, "K");
        assert_eq!(targets[0].field_paths, ["a", "1.5"]);
        assert!(
            crate::gojson::from_value::<Replacement>(&v, crate::gojson::Mode::KUSTOMIZATION)
                .is_err()
        );
    }

    #[test]
    fn describes_selectors_like_kustomize() {
        let s = SourceSelector {
            kind: "ConfigMap".into(),
            name: "cm.*".into(),
            field_path: "data.HOST".into(),
            ..Default::default()
        };
        assert_eq!(
            s.describe(),
            "ConfigMap.[noVer].[noGrp]/cm.*.[noNs]:data.HOST"
        );
        let with_options = SourceSelector {
            options: Some(FieldOptions {
                delimiter: "-".into(),
                index: 2,
                ..Default::default()
            }),
            ..s
        };
        assert!(
            with_options
                .describe()
                .ends_with(":data.HOST:-(2), create=false")
        );
    }
}
