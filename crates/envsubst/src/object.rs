//! Substitution applied to one built object, as Flux's kustomize-controller does it: the
//! object is printed as YAML, the text is expanded, and the result is read back, so that a
//! placeholder can produce any YAML type (`replicas: ${replicas}` gives a number).

use serde_json::{Map, Value};

use super::{SubstituteError, eval_limited};
use goyaml as yaml;

/// The label or annotation that opts an object out of substitution.
pub const OPT_OUT_KEY: &str = "kustomize.toolkit.fluxcd.io/substitute";

/// The opt-out value of [`OPT_OUT_KEY`].
pub const OPT_OUT_VALUE: &str = "disabled";

/// Whether the object is labelled or annotated `kustomize.toolkit.fluxcd.io/substitute:
/// disabled`.
pub fn is_opted_out(obj: &Map<String, Value>) -> bool {
    ["labels", "annotations"].iter().any(|field| {
        obj.get("metadata")
            .and_then(|m| m.get(*field))
            .and_then(|m| m.get(OPT_OUT_KEY))
            .and_then(Value::as_str)
            == Some(OPT_OUT_VALUE)
    })
}

/// Substitutes the variables of one object; see [`eval`](crate::eval) for the grammar and `strict`.
///
/// Opted-out objects (see [`is_opted_out`]) come back unchanged. Otherwise the object is
/// printed with its keys sorted (as kustomize prints it), expanded, and read back; the
/// result must be exactly one YAML mapping, and its keys come back sorted. Errors name the
/// object and the variable or line, never a value.
pub fn substitute_object(
    obj: &Map<String, Value>,
    lookup: &dyn Fn(&str) -> Option<String>,
    strict: bool,
) -> Result<Map<String, Value>, SubstituteError> {
    let mut unbounded = usize::MAX;
    substitute_object_limited(obj, lookup, strict, &mut unbounded)
}

/// [`substitute_object`] within a growth budget: the expansion may add at most `growth`
/// bytes to the object's text (checked while it runs), and what it added is taken off
/// `growth`, so one budget can bound a whole build. Going over is an error naming the
/// object.
pub fn substitute_object_limited(
    obj: &Map<String, Value>,
    lookup: &dyn Fn(&str) -> Option<String>,
    strict: bool,
    growth: &mut usize,
) -> Result<Map<String, Value>, SubstituteError> {
    if is_opted_out(obj) {
        return Ok(obj.clone());
    }
    let object = describe(obj);
    let mut sorted = Value::Object(obj.clone());
    yaml::sort_keys(&mut sorted);
    let text = yaml::to_yaml(&sorted);
    drop(sorted);
    let budget = text.len().saturating_add(*growth);
    let expanded = eval_limited(&text, lookup, strict, budget).map_err(|source| {
        let source = match source {
            SubstituteError::TooLarge { .. } => SubstituteError::TooLarge { limit: *growth },
            other => other,
        };
        SubstituteError::Object {
            object: object.clone(),
            source: Box::new(source),
        }
    })?;
    *growth = growth.saturating_sub(expanded.len().saturating_sub(text.len()));
    drop(text);
    let docs = yaml::parse_documents_yaml11(&expanded).map_err(|e| SubstituteError::Yaml {
        object: object.clone(),
        location: location(&e.0),
    })?;
    let mut docs = docs.into_iter();
    let found = match (docs.next(), docs.next()) {
        (Some(Value::Object(map)), None) => return Ok(map),
        (None, _) => "empty",
        (Some(_), None) => "not a mapping",
        (Some(_), Some(_)) => "several documents",
    };
    Err(SubstituteError::NotOneObject { object, found })
}

/// `Kind/namespace/name`, or `Kind/name` for an object without a namespace.
fn describe(obj: &Map<String, Value>) -> String {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let meta = obj.get("metadata");
    let field = |f: &str| meta.and_then(|m| m.get(f)).and_then(Value::as_str);
    let name = field("name").unwrap_or("");
    match field("namespace") {
        Some(ns) if !ns.is_empty() => format!("{kind}/{ns}/{name}"),
        _ => format!("{kind}/{name}"),
    }
}

/// The `line N, column M` part of a YAML error: the rest may quote substituted text.
fn location(message: &str) -> String {
    message
        .split(':')
        .next()
        .filter(|l| l.starts_with("line "))
        .unwrap_or("unknown position")
        .to_string()
}
