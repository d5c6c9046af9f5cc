//! Validation of a Kustomization document against the CRD, as the API server does it on
//! create: the served versions, strict field decoding (unknown fields are errors, as with
//! `kubectl apply`'s default `--validate=strict`), the OpenAPI schema (types, required
//! fields, patterns, lengths, enums, bounds) and the CEL rules (`x-kubernetes-validations`),
//! plus the names in `metadata`. Messages are the API server's, so the offline `build`
//! command refuses what a cluster would refuse, in the words a cluster would use.
//!
//! `status` is not validated: the API server drops it on create.

use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::Value;

use super::crd::crd;

/// Why a Kustomization document would not be accepted by the API server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// `apiVersion`/`kind` name no version the CRD serves.
    #[error("no matches for kind \"{kind}\" in version \"{api_version}\"")]
    NoMatch {
        /// The document's `apiVersion`.
        api_version: String,
        /// The document's `kind`.
        kind: String,
    },
    /// Fields the schema does not know (the API server's strict decoding).
    #[error(
        "Kustomization in version \"{version}\" cannot be handled as a Kustomization: strict decoding error: {}",
        fields.iter().map(|f| format!("unknown field \"{f}\"")).collect::<Vec<_>>().join(", ")
    )]
    UnknownFields {
        /// The served version.
        version: String,
        /// The unknown fields, as paths (`spec.foo`).
        fields: Vec<String>,
    },
    /// Values the schema or its rules refuse.
    #[error("The Kustomization \"{name}\" is invalid: {}", causes.join(", "))]
    Invalid {
        /// `metadata.name`.
        name: String,
        /// One message per field, as the API server words them.
        causes: Vec<String>,
    },
}

/// Metadata fields a client may set (the rest of ObjectMeta is the server's, but decoding it is
/// still not an error).
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Validates a Kustomization document (`apiVersion`, `kind`, `metadata`, `spec`) as the API
/// server would on create.
pub fn validate(document: &Value) -> Result<(), ValidationError> {
    let api_version = document
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = document.get("kind").and_then(Value::as_str).unwrap_or("");
    let crd = crd();
    let group = crd.spec.group.as_str();
    let served = crd.spec.versions.iter().find(|v| {
        v.served && api_version == format!("{group}/{}", v.name) && kind == crd.spec.names.kind
    });
    let Some(version) = served else {
        return Err(ValidationError::NoMatch {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
        });
    };
    let Some(schema) = version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
    else {
        return Ok(());
    };
    let mut check = Check::default();
    check.unknown_fields(document, schema, "");
    if !check.unknown.is_empty() {
        return Err(ValidationError::UnknownFields {
            version: version.name.clone(),
            fields: check.unknown,
        });
    }
    let metadata = document.get("metadata").unwrap_or(&Value::Null);
    check.metadata(metadata);
    let spec_schema = schema.properties.as_ref().and_then(|p| p.get("spec"));
    if let Some(spec_schema) = spec_schema {
        match document.get("spec").filter(|s| !s.is_null()) {
            Some(spec) => check.value(spec, spec_schema, "spec"),
            None if schema.required.iter().flatten().any(|r| r == "spec") => {
                check.causes.push("spec: Required value".into())
            }
            None => {}
        }
    }
    // As the API server: type errors and unsupported enum values block the CEL rules.
    if !check.blocking {
        if let (Some(spec), Some(spec_schema)) = (document.get("spec"), spec_schema) {
            check.rules(spec, spec_schema, "spec");
        }
    } else if has_rules(schema) {
        check.causes.push(
            "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into(),
        );
    }
    if check.causes.is_empty() {
        return Ok(());
    }
    Err(ValidationError::Invalid {
        name: metadata
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        causes: check.causes,
    })
}

#[derive(Default)]
struct Check {
    unknown: Vec<String>,
    causes: Vec<String>,
    /// Whether a cause is a type error or an unsupported value, which skip the CEL rules.
    blocking: bool,
}

impl Check {
    /// Collects the fields of `value` that `schema` does not declare.
    fn unknown_fields(&mut self, value: &Value, schema: &JSONSchemaProps, path: &str) {
        match value {
            Value::Object(fields) => {
                if schema.x_kubernetes_preserve_unknown_fields == Some(true) {
                    return;
                }
                for (name, child) in fields {
                    let child_path = join(path, name);
                    if path.is_empty() && name == "metadata" {
                        self.unknown_metadata(child);
                        continue;
                    }
                    if path.is_empty() && name == "status" {
                        continue;
                    }
                    if let Some(child_schema) = property(schema, name) {
                        self.unknown_fields(child, child_schema, &child_path);
                    } else if let Some(extra) = additional(schema) {
                        self.unknown_fields(child, extra, &child_path);
                    } else if !path.is_empty() || !matches!(name.as_str(), "apiVersion" | "kind") {
                        self.unknown.push(child_path);
                    }
                }
            }
            Value::Array(items_values) => {
                if let Some(items) = items(schema) {
                    for (index, item) in items_values.iter().enumerate() {
                        self.unknown_fields(item, items, &format!("{path}[{index}]"));
                    }
                }
            }
            _ => {}
        }
    }

    fn unknown_metadata(&mut self, metadata: &Value) {
        if let Value::Object(fields) = metadata {
            for name in fields.keys() {
                if !OBJECT_META_FIELDS.contains(&name.as_str()) {
                    self.unknown.push(format!("metadata.{name}"));
                }
            }
        }
    }

    /// The API server's checks of `metadata.name` and `metadata.namespace`.
    fn metadata(&mut self, metadata: &Value) {
        let name = metadata.get("name").and_then(Value::as_str);
        let generate_name = metadata.get("generateName").and_then(Value::as_str);
        match name {
            Some(name) if !name.is_empty() => {
                if let Some(problem) = dns1123_subdomain_problem(name) {
                    self.causes.push(format!(
                        "metadata.name: Invalid value: {}: {problem}",
                        go_quote(name)
                    ));
                }
            }
            _ if generate_name.is_some_and(|g| !g.is_empty()) => {}
            _ => self
                .causes
                .push("metadata.name: Required value: name or generateName is required".into()),
        }
        if let Some(namespace) = metadata.get("namespace").and_then(Value::as_str)
            && !namespace.is_empty()
            && let Some(problem) = dns1123_label_problem(namespace)
        {
            self.causes.push(format!(
                "metadata.namespace: Invalid value: {}: {problem}",
                go_quote(namespace)
            ));
        }
    }

    /// The structural checks of `schema` on `value` (never null: nulls are pruned first).
    fn value(&mut self, value: &Value, schema: &JSONSchemaProps, path: &str) {
        if schema.x_kubernetes_int_or_string == Some(true) {
            if !(value.is_string() || value.is_i64() || value.is_u64()) {
                self.blocking = true;
                self.causes.push(format!(
                    "{path}: Invalid value: {}: {path} in body must be of type integer,string: {}",
                    go_type_quoted(value),
                    go_type_quoted(value)
                ));
            }
            return;
        }
        if let Some(expected) = schema.type_.as_deref()
            && !has_type(value, expected)
        {
            self.blocking = true;
            self.causes.push(format!(
                "{path}: Invalid value: {}: {path} in body must be of type {expected}: {}",
                go_type_quoted(value),
                go_type_quoted(value)
            ));
            return;
        }
        match value {
            Value::String(text) => self.string(text, schema, path),
            Value::Number(number) => self.number(number, schema, path),
            Value::Object(fields) => {
                for required in schema.required.iter().flatten() {
                    if fields.get(required).is_none_or(Value::is_null) {
                        self.causes
                            .push(format!("{}: Required value", join(path, required)));
                    }
                }
                for (name, child) in fields {
                    if child.is_null() {
                        continue;
                    }
                    let child_schema = property(schema, name).or_else(|| additional(schema));
                    if let Some(child_schema) = child_schema {
                        self.value(child, child_schema, &join(path, name));
                    }
                }
            }
            Value::Array(values) => {
                if let Some(max) = schema.max_items
                    && values.len() as i64 > max
                {
                    self.causes.push(format!(
                        "{path}: Too many: {}: must have at most {max} items",
                        values.len()
                    ));
                }
                if let Some(items) = items(schema) {
                    for (index, item) in values.iter().enumerate() {
                        if !item.is_null() {
                            self.value(item, items, &format!("{path}[{index}]"));
                        }
                    }
                }
            }
            Value::Bool(_) | Value::Null => {}
        }
        self.enumeration(value, schema, path);
    }

    fn string(&mut self, text: &str, schema: &JSONSchemaProps, path: &str) {
        let length = text.chars().count() as i64;
        if let Some(max) = schema.max_length
            && length > max
        {
            self.causes.push(format!(
                "{path}: Too long: may not be more than {max} bytes"
            ));
        }
        if let Some(min) = schema.min_length
            && length < min
        {
            self.causes.push(format!(
                "{path}: Invalid value: {}: {path} in body should be at least {min} chars long",
                go_quote(text)
            ));
        }
        if let Some(pattern) = &schema.pattern {
            match regex::Regex::new(pattern) {
                Ok(re) if !re.is_match(text) => self.causes.push(format!(
                    "{path}: Invalid value: {}: {path} in body should match '{pattern}'",
                    go_quote(text)
                )),
                _ => {}
            }
        }
    }

    fn number(&mut self, number: &serde_json::Number, schema: &JSONSchemaProps, path: &str) {
        let Some(value) = number.as_f64() else {
            return;
        };
        if let Some(min) = schema.minimum
            && value < min
        {
            self.causes.push(format!(
                "{path}: Invalid value: {number}: {path} in body should be greater than or equal to {min}"
            ));
        }
        if let Some(max) = schema.maximum
            && value > max
        {
            self.causes.push(format!(
                "{path}: Invalid value: {number}: {path} in body should be less than or equal to {max}"
            ));
        }
    }

    fn enumeration(&mut self, value: &Value, schema: &JSONSchemaProps, path: &str) {
        let Some(allowed) = &schema.enum_ else {
            return;
        };
        if allowed.iter().any(|a| a.0 == *value) {
            return;
        }
        let supported: Vec<String> = allowed.iter().map(|a| a.0.to_string()).collect();
        self.blocking = true;
        self.causes.push(format!(
            "{path}: Unsupported value: {value}: supported values: {}",
            supported.join(", ")
        ));
    }

    /// The CEL rules of `schema` and its children, evaluated with `self` bound to the value.
    fn rules(&mut self, value: &Value, schema: &JSONSchemaProps, path: &str) {
        for rule in schema.x_kubernetes_validations.iter().flatten() {
            match evaluate(&rule.rule, value) {
                Ok(true) => {}
                Ok(false) => {
                    let message = rule
                        .message
                        .clone()
                        .unwrap_or_else(|| format!("failed rule: {}", rule.rule));
                    self.causes
                        .push(format!("{path}: Invalid value: {message}"));
                }
                Err(reason) => self.causes.push(format!(
                    "{path}: Invalid value: rule {:?} could not be evaluated: {reason}",
                    rule.rule
                )),
            }
        }
        match value {
            Value::Object(fields) => {
                for (name, child) in fields {
                    let child_schema = property(schema, name).or_else(|| additional(schema));
                    if let Some(child_schema) = child_schema
                        && !child.is_null()
                    {
                        self.rules(child, child_schema, &join(path, name));
                    }
                }
            }
            Value::Array(values) => {
                if let Some(items) = items(schema) {
                    for (index, item) in values.iter().enumerate() {
                        self.rules(item, items, &format!("{path}[{index}]"));
                    }
                }
            }
            _ => {}
        }
    }
}

/// Why a CEL rule of the schema (`x-kubernetes-validations`) could not be evaluated.
#[derive(Debug, thiserror::Error)]
enum RuleError {
    /// The rule does not parse.
    #[error("{0}")]
    Parse(#[from] cel::ParseErrors),
    /// The rule failed while it ran.
    #[error("{0}")]
    Execution(#[from] cel::ExecutionError),
    /// The rule gave a value other than a bool.
    #[error("the rule did not evaluate to a bool")]
    NotBool,
}

fn evaluate(rule: &str, value: &Value) -> Result<bool, RuleError> {
    let program = cel::Program::compile(rule)?;
    let mut context = cel::Context::default();
    context.add_variable_from_value("self", fluxcel::to_cel(value));
    match program.execute(&context)? {
        cel::Value::Bool(result) => Ok(result),
        _ => Err(RuleError::NotBool),
    }
}

fn has_rules(schema: &JSONSchemaProps) -> bool {
    schema
        .x_kubernetes_validations
        .as_ref()
        .is_some_and(|r| !r.is_empty())
        || schema
            .properties
            .iter()
            .flat_map(|p| p.values())
            .chain(items(schema))
            .chain(additional(schema))
            .any(has_rules)
}

fn property<'s>(schema: &'s JSONSchemaProps, name: &str) -> Option<&'s JSONSchemaProps> {
    schema.properties.as_ref().and_then(|p| p.get(name))
}

fn additional(schema: &JSONSchemaProps) -> Option<&JSONSchemaProps> {
    match schema.additional_properties.as_ref()? {
        JSONSchemaPropsOrBool::Schema(schema) => Some(schema),
        JSONSchemaPropsOrBool::Bool(_) => None,
    }
}

fn items(schema: &JSONSchemaProps) -> Option<&JSONSchemaProps> {
    match schema.items.as_ref()? {
        JSONSchemaPropsOrArray::Schema(schema) => Some(schema),
        JSONSchemaPropsOrArray::Schemas(_) => None,
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn has_type(value: &Value, expected: &str) -> bool {
    match expected {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        _ => true,
    }
}

/// The Go type name the API server quotes for a value of the wrong type.
fn go_type_quoted(value: &Value) -> &'static str {
    match value {
        Value::Null => "\"null\"",
        Value::Bool(_) => "\"boolean\"",
        Value::Number(n) if n.is_i64() || n.is_u64() => "\"integer\"",
        Value::Number(_) => "\"number\"",
        Value::String(_) => "\"string\"",
        Value::Array(_) => "\"array\"",
        Value::Object(_) => "\"object\"",
    }
}

/// A string quoted as Go's `%q` does for printable text (control characters escaped).
fn go_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&c.escape_default().to_string()),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn dns1123_label_problem(value: &str) -> Option<String> {
    static LABEL: std::sync::LazyLock<Arc<regex::Regex>> = std::sync::LazyLock::new(|| {
        Arc::new(regex::Regex::new("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$").expect("valid regex"))
    });
    if value.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    (!LABEL.is_match(value)).then(|| {
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".into()
    })
}

fn dns1123_subdomain_problem(value: &str) -> Option<String> {
    static SUBDOMAIN: std::sync::LazyLock<Arc<regex::Regex>> = std::sync::LazyLock::new(|| {
        Arc::new(
            regex::Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
                .expect("valid regex"),
        )
    });
    if value.len() > 253 {
        return Some("must be no more than 253 characters".into());
    }
    (!SUBDOMAIN.is_match(value)).then(|| {
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Value {
        let docs = goyaml::parse_documents(text).unwrap();
        docs.into_iter().next().unwrap()
    }

    const VALID: &str = "apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: flux-system}
spec:
  interval: 10m
  prune: true
  sourceRef: {kind: GitRepository, name: repo}
";

    #[test]
    fn accepts_a_valid_kustomization() {
        validate(&doc(VALID)).unwrap();
    }

    #[test]
    fn refuses_unserved_versions() {
        let text = VALID.replace("/v1\n", "/v2\n");
        assert_eq!(
            validate(&doc(&text)).unwrap_err().to_string(),
            "no matches for kind \"Kustomization\" in version \"kustomize.toolkit.fluxcd.io/v2\""
        );
    }

    #[test]
    fn refuses_unknown_fields_with_their_paths() {
        let text = format!(
            "{VALID}  foo: 1\n  postBuild:\n    substituteFrom:\n    - {{kind: Secret, name: a, extra: 1}}\n"
        );
        assert_eq!(
            validate(&doc(&text)).unwrap_err().to_string(),
            "Kustomization in version \"v1\" cannot be handled as a Kustomization: strict decoding error: unknown field \"spec.foo\", unknown field \"spec.postBuild.substituteFrom[0].extra\""
        );
    }

    #[test]
    fn reports_every_schema_violation_as_the_api_server_does() {
        let text = "apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: bad, namespace: default}
spec:
  interval: 1x
  prune: 'yes'
  targetNamespace: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
  namePrefix: ''
  sourceRef: {kind: Foo}
  healthChecks:
  - {kind: Deployment, name: 3}
";
        let err = validate(&doc(text)).unwrap_err();
        let ValidationError::Invalid { name, causes } = &err else {
            panic!("{err}");
        };
        assert_eq!(name, "bad");
        for expected in [
            r#"spec.interval: Invalid value: "1x": spec.interval in body should match '^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$'"#,
            r#"spec.prune: Invalid value: "string": spec.prune in body must be of type boolean: "string""#,
            "spec.targetNamespace: Too long: may not be more than 63 bytes",
            r#"spec.namePrefix: Invalid value: "": spec.namePrefix in body should be at least 1 chars long"#,
            r#"spec.sourceRef.kind: Unsupported value: "Foo": supported values: "OCIRepository", "GitRepository", "Bucket", "ExternalArtifact""#,
            "spec.sourceRef.name: Required value",
            r#"spec.healthChecks[0].name: Invalid value: "integer": spec.healthChecks[0].name in body must be of type string: "integer""#,
        ] {
            assert!(
                causes.iter().any(|c| c == expected),
                "{expected}\nnot in {causes:#?}"
            );
        }
    }

    #[test]
    fn evaluates_the_cel_rules_once_the_schema_holds() {
        let text = format!(
            "{VALID}  kubeConfig:\n    secretRef: {{name: a}}\n    configMapRef: {{name: b}}\n"
        );
        assert_eq!(
            validate(&doc(&text)).unwrap_err().to_string(),
            "The Kustomization \"apps\" is invalid: spec.kubeConfig: Invalid value: exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef must be specified"
        );
        let one = format!("{VALID}  kubeConfig:\n    secretRef: {{name: a}}\n");
        validate(&doc(&one)).unwrap();
    }

    #[test]
    fn checks_the_names_in_metadata() {
        let text = VALID.replace("name: apps,", "name: Bad_,");
        let err = validate(&doc(&text)).unwrap_err().to_string();
        assert!(
            err.contains("metadata.name: Invalid value: \"Bad_\": a lowercase RFC 1123 subdomain"),
            "{err}"
        );
        let unnamed = VALID.replace("name: apps, ", "");
        assert!(
            validate(&doc(&unnamed))
                .unwrap_err()
                .to_string()
                .contains("metadata.name: Required value")
        );
    }

    #[test]
    fn treats_nulls_as_absent() {
        let text = format!("{VALID}  targetNamespace: null\n  patches: ~\n");
        validate(&doc(&text)).unwrap();
        let missing = VALID.replace("  prune: true\n", "  prune: null\n");
        assert!(
            validate(&doc(&missing))
                .unwrap_err()
                .to_string()
                .contains("spec.prune: Required value")
        );
    }

    #[test]
    fn a_rule_that_cannot_be_evaluated_says_why() {
        let value = serde_json::json!({"a": 1});
        assert!(evaluate("self.a == 1", &value).unwrap());
        assert!(matches!(
            evaluate("self.a ==", &value),
            Err(RuleError::Parse(_))
        ));
        assert!(matches!(
            evaluate("self.b == 1", &value),
            Err(RuleError::Execution(_))
        ));
        let not_bool = evaluate("self.a", &value).unwrap_err();
        assert!(matches!(not_bool, RuleError::NotBool));
        assert_eq!(not_bool.to_string(), "the rule did not evaluate to a bool");
    }
}
