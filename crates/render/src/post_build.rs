//! Post-build variable substitution over the built objects, as Flux runs it: every object
//! is printed as YAML, `${...}` expressions are expanded, and the text is read back, so a
//! substituted number becomes a number again.

use std::collections::BTreeMap;

use super::redact::SecretValues;
use api::kustomization::SubstituteStrategy;
use apply::Object;
use envsubst::SubstituteError;

/// Why substitution failed. Messages name the object and the variable, never a value.
#[derive(Debug, thiserror::Error)]
pub enum PostBuildError {
    /// A variable name that `${...}` could never refer to.
    #[error(transparent)]
    InvalidName(SubstituteError),
    /// Substitution in one object failed (the error names the object).
    #[error("post-build substitution failed: {0}")]
    Object(SubstituteError),
    /// A failure whose message had secret values masked out of it.
    #[error("{0}")]
    Redacted(String),
}

/// [`substitute_objects`] for a build that revealed `secrets` (decrypted values and the
/// variables read from Secrets): a missing variable whose name is part of a secret is not
/// quoted, and the message of any failure has every secret value masked out.
pub fn substitute_objects_redacting(
    objects: Vec<Object>,
    vars: &BTreeMap<String, String>,
    strategy: SubstituteStrategy,
    strict: bool,
    secrets: &SecretValues,
) -> Result<Vec<Object>, PostBuildError> {
    if secrets.is_empty() {
        return substitute_objects(objects, vars, strategy, strict);
    }
    substitute_objects(objects, vars, strategy, strict).map_err(|e| {
        let e = match e {
            PostBuildError::Object(SubstituteError::Object { object, source }) => {
                let source = match *source {
                    SubstituteError::VarNotSet(name) if secrets.contains_fragment(&name) => {
                        SubstituteError::VarNotSetUnquoted {
                            reason: "the reference's name is part of a decrypted or Secret value",
                        }
                    }
                    SubstituteError::NegativeLength(name) if secrets.contains_fragment(&name) => {
                        SubstituteError::NegativeLength("(a name that is not quoted)".into())
                    }
                    other => other,
                };
                PostBuildError::Object(SubstituteError::Object {
                    object,
                    source: Box::new(source),
                })
            }
            other => other,
        };
        PostBuildError::Redacted(secrets.redact(&e.to_string()))
    })
}

/// Substitutes `vars` into `objects`. With [`SubstituteStrategy::WithVariables`] nothing
/// happens when there are no variables; objects labelled or annotated
/// `kustomize.toolkit.fluxcd.io/substitute: disabled` are left untouched.
pub fn substitute_objects(
    objects: Vec<Object>,
    vars: &BTreeMap<String, String>,
    strategy: SubstituteStrategy,
    strict: bool,
) -> Result<Vec<Object>, PostBuildError> {
    for name in vars.keys() {
        envsubst::validate_var_name(name).map_err(PostBuildError::InvalidName)?;
    }
    if vars.is_empty() && strategy == SubstituteStrategy::WithVariables {
        return Ok(objects);
    }
    let lookup = |name: &str| vars.get(name).cloned();
    let mut growth = envsubst::MAX_SUBSTITUTION_GROWTH;
    objects
        .into_iter()
        .map(|object| {
            if envsubst::is_opted_out(object.as_map()) {
                return Ok(object);
            }
            envsubst::substitute_object_limited(object.as_map(), &lookup, strict, &mut growth)
                .map(Object::new)
                .map_err(PostBuildError::Object)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: serde_json::Value) -> Object {
        Object::new(value.as_object().cloned().unwrap())
    }

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn namespace() -> Object {
        object(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "apps", "labels": {"env": "${cluster_env:=dev}", "region": "${cluster_region}"}}}))
    }

    #[test]
    fn substitutes_values_and_defaults_and_types() {
        let deploy = object(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"}, "spec": {"replicas": "${replicas}"}}));
        let out = substitute_objects(
            vec![namespace(), deploy],
            &vars(&[("cluster_region", "eu-1"), ("replicas", "3")]),
            SubstituteStrategy::WithVariables,
            true,
        )
        .unwrap();
        assert_eq!(
            out[0].as_map()["metadata"]["labels"],
            json!({"env": "dev", "region": "eu-1"})
        );
        assert_eq!(out[1].as_map()["spec"]["replicas"], json!(3));
    }

    #[test]
    fn strict_mode_names_the_object_and_variable() {
        let err = substitute_objects(
            vec![namespace()],
            &vars(&[("other", "x")]),
            SubstituteStrategy::WithVariables,
            true,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("Namespace") && err.contains("apps") && err.contains("cluster_region"),
            "{err}"
        );
        let lenient = substitute_objects(
            vec![namespace()],
            &vars(&[("other", "x")]),
            SubstituteStrategy::WithVariables,
            false,
        )
        .unwrap();
        // An unset variable is empty: `region:` reads back as null, as in Flux.
        assert_eq!(
            lenient[0].as_map()["metadata"]["labels"]["region"],
            json!(null)
        );
    }

    #[test]
    fn strategy_and_opt_out_leave_objects_alone() {
        let untouched = substitute_objects(
            vec![namespace()],
            &BTreeMap::new(),
            SubstituteStrategy::WithVariables,
            true,
        )
        .unwrap();
        assert_eq!(untouched[0], namespace());
        let always = substitute_objects(
            vec![namespace()],
            &BTreeMap::new(),
            SubstituteStrategy::Always,
            false,
        )
        .unwrap();
        assert_eq!(
            always[0].as_map()["metadata"]["labels"]["env"],
            json!("dev")
        );
        let opted_out = object(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "raw", "annotations": {"kustomize.toolkit.fluxcd.io/substitute": "disabled"}},
            "data": {"script": "echo ${HOME}"}}));
        let out = substitute_objects(
            vec![opted_out.clone()],
            &vars(&[("x", "1")]),
            SubstituteStrategy::Always,
            true,
        )
        .unwrap();
        assert_eq!(out[0], opted_out);
    }

    #[test]
    fn substituted_text_is_read_back_as_yaml_1_1() {
        let cm = object(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "flags"}, "data": {"enabled": "${flag}", "quoted": "\"${flag}\""}}));
        let out = substitute_objects(
            vec![cm],
            &vars(&[("flag", "yes")]),
            SubstituteStrategy::WithVariables,
            true,
        )
        .unwrap();
        assert_eq!(out[0].as_map()["data"]["enabled"], json!(true));
        // Quotes that are part of the value stay part of it.
        assert_eq!(out[0].as_map()["data"]["quoted"], json!("\"yes\""));
    }

    #[test]
    fn substitution_output_is_bounded_over_the_whole_build() {
        let value = "x".repeat(512 << 10);
        let references = "${big}".repeat(2000);
        let cm = |name: &str, text: &str| {
            object(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "apps"}, "data": {"k": text}}))
        };
        let err = substitute_objects(
            vec![cm("bomb", &references)],
            &vars(&[("big", &value)]),
            SubstituteStrategy::WithVariables,
            true,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("ConfigMap/apps/bomb") && err.contains("exceeds the limit"),
            "{err}"
        );
        // 40 references each stay under the limit, but the build together does not.
        let some = "${big}".repeat(40);
        let objects: Vec<Object> = (0..3).map(|i| cm(&format!("cm{i}"), &some)).collect();
        let err = substitute_objects(
            objects,
            &vars(&[("big", &value)]),
            SubstituteStrategy::WithVariables,
            true,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("ConfigMap/apps/cm1"), "{err}");
        let fine = substitute_objects(
            vec![cm("one", "${big}")],
            &vars(&[("big", &value)]),
            SubstituteStrategy::WithVariables,
            true,
        )
        .unwrap();
        assert_eq!(fine[0].as_map()["data"]["k"], json!(value));
    }

    #[test]
    fn invalid_variable_names_are_refused_by_name() {
        let err = substitute_objects(
            vec![],
            &vars(&[("1bad", "x")]),
            SubstituteStrategy::WithVariables,
            true,
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("'1bad' var name is invalid"), "{err}");
    }
}
