//! Post-build variables of a Kustomization: the data of the `substituteFrom` ConfigMaps and
//! Secrets in order (later ones override earlier ones), then the inline `substitute` map
//! over all of them. Newlines are stripped from values, as Flux does.

use std::collections::BTreeMap;

use crate::SecretValues;
use crate::cluster::{ObjectReader, SourceError, not_found};
use api::Kustomization;
use api::kustomization::{PostBuild, SubstituteKind};
use envsubst::strip_newlines;

/// A `substituteFrom` object that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("substitute from '{kind}/{name}' error: {message}")]
pub struct VariablesError {
    /// `ConfigMap` or `Secret`.
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// What went wrong (never a value).
    pub message: String,
}

impl VariablesError {
    /// The error with every secret value masked out of the object's name and the message.
    pub fn redacted(self, secrets: &SecretValues) -> Self {
        VariablesError {
            kind: self.kind,
            name: secrets.redact(&self.name),
            message: secrets.redact(&self.message),
        }
    }
}

/// The variables as the controller reads them: `spec.postBuild`'s `substituteFrom` objects
/// in the Kustomization's namespace, with the controller's own client (not impersonating, as
/// Flux), and its inline `substitute` map; none when there is no `spec.postBuild`.
pub struct ClusterVariables<'a> {
    /// The cluster, as the controller's client reads it.
    pub reader: &'a dyn ObjectReader,
}

impl super::VariableSource for ClusterVariables<'_> {
    async fn variables(
        self,
        ks: &Kustomization,
        secrets: &mut SecretValues,
    ) -> Result<Option<BTreeMap<String, String>>, VariablesError> {
        match &ks.spec.post_build {
            Some(post_build) => load(self.reader, ks, post_build, secrets).await.map(Some),
            None => Ok(None),
        }
    }
}

/// Loads the variables of `post_build` for `ks`, reading each referenced object once. The
/// values read from Secrets are added to `secrets`, to be masked out of messages.
pub async fn load(
    reader: &dyn ObjectReader,
    ks: &Kustomization,
    post_build: &PostBuild,
    secrets: &mut SecretValues,
) -> Result<BTreeMap<String, String>, VariablesError> {
    let namespace = ks.metadata.namespace.clone().unwrap_or_default();
    let mut vars = BTreeMap::new();
    for reference in post_build.substitute_from.iter().flatten() {
        let error = |message: String| VariablesError {
            kind: kind_name(reference.kind).to_string(),
            name: reference.name.clone(),
            message,
        };
        let data = read_data(reader, &namespace, reference.kind, &reference.name)
            .await
            .map_err(|e| error(e.to_string()))?;
        let from_secret = matches!(reference.kind, SubstituteKind::Secret);
        match data {
            Some(data) => {
                for (key, value) in data {
                    let value = strip_newlines(&value);
                    if from_secret {
                        secrets.add(&value);
                    }
                    vars.insert(key, value);
                }
            }
            None if reference.optional => {}
            None => {
                let kind = kind_name(reference.kind);
                return Err(error(not_found(reader, &namespace, kind, &reference.name)));
            }
        }
    }
    for (key, value) in post_build.substitute.iter().flatten() {
        vars.insert(key.clone(), strip_newlines(value));
    }
    Ok(vars)
}

/// The data of a ConfigMap, or the decoded data of a Secret; `None` when it does not exist.
async fn read_data(
    reader: &dyn ObjectReader,
    namespace: &str,
    kind: SubstituteKind,
    name: &str,
) -> Result<Option<Vec<(String, String)>>, SourceError> {
    Ok(match kind {
        SubstituteKind::ConfigMap => reader
            .config_map(namespace, name)
            .await?
            .map(|map| map.data.unwrap_or_default().into_iter().collect()),
        SubstituteKind::Secret => reader.secret(namespace, name).await?.map(|secret| {
            secret
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(key, value)| (key, String::from_utf8_lossy(&value.0).into_owned()))
                .collect()
        }),
    })
}

/// The kind's name as Kubernetes spells it.
pub fn kind_name(kind: SubstituteKind) -> &'static str {
    match kind {
        SubstituteKind::ConfigMap => "ConfigMap",
        SubstituteKind::Secret => "Secret",
    }
}
