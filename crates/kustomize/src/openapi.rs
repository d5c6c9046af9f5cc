//! The `openapi` field of kustomizations: which OpenAPI schema a build's strategic merge
//! patches consult.
//!
//! kustomize keeps the choice in process-wide state, set when a kustomization that has an
//! `openapi` field is loaded: the top-level kustomization first, then every kustomization
//! directory (resources, components, generator and transformer directories) in the order the
//! build reaches it. The first kustomization that chooses wins for the rest of the build; a
//! later one still has its file read (a missing file is an error) but is otherwise ignored.
//! Patches applied before the choice (in directories built earlier) used the built-in
//! schema; every patch applied after it, in any directory, sees the chosen one.
//!
//! Here the choice lives in an [`OpenApiChoice`] owned by one build and shared by reference
//! with every directory of it.

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::path::Path;

use super::loader::{LoadError, Loader};
use super::smp_schema::{CustomSchema, SchemaError, SchemaSet};

/// The only built-in Kubernetes OpenAPI version kustomize v5.8 has (also its default).
pub const BUILTIN_VERSION: &str = "v1.21.2";

/// Why a kustomization's `openapi` field could not be used.
#[derive(Debug, thiserror::Error)]
pub enum OpenApiError {
    /// The schema file does not exist (named from the build root, as `/path`).
    #[error("'{file}' doesn't exist")]
    Missing {
        /// The file.
        file: String,
    },
    /// The schema file could not be read.
    #[error("reading OpenAPI schema file {file}: {source}")]
    Load {
        /// The file, as the kustomization names it.
        file: String,
        /// The loader's error.
        source: LoadError,
    },
    /// The schema file is not a valid OpenAPI document.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// Both `path` and `version` are set.
    #[error("builtin version '{version}' and custom schema '{file}' provided, cannot use both")]
    Both {
        /// The version asked for.
        version: String,
        /// The schema file.
        file: String,
    },
    /// `version` names a schema kustomize does not embed.
    #[error(
        "the specified OpenAPI version '{version}' is not built in (the only built-in version is {BUILTIN_VERSION})"
    )]
    NotBuiltin {
        /// The version asked for.
        version: String,
    },
}

/// What a build chose.
#[derive(Debug)]
enum Chosen {
    /// The built-in schema, by an explicit `version`.
    Builtin,
    /// A custom document.
    Custom(CustomSchema),
}

/// The OpenAPI choice of one build: unset until a kustomization chooses, then fixed.
#[derive(Debug, Default)]
pub struct OpenApiChoice {
    chosen: OnceCell<Chosen>,
}

impl OpenApiChoice {
    /// Nothing chosen yet: the built-in schema applies.
    pub fn new() -> Self {
        Self::default()
    }

    /// The schemas strategic merges consult now.
    pub fn schemas(&self) -> SchemaSet<'_> {
        match self.chosen.get() {
            Some(Chosen::Custom(custom)) => SchemaSet::with_custom(custom),
            Some(Chosen::Builtin) | None => SchemaSet::builtin(),
        }
    }

    /// Takes the `openapi` field of the kustomization in `dir` into account: reads its
    /// `path` (relative to `dir`), and makes it (or its `version`) the build's choice when
    /// none was made before.
    pub fn consider(
        &self,
        openapi: &BTreeMap<String, String>,
        loader: &Loader,
        dir: &Path,
    ) -> Result<(), OpenApiError> {
        let text = match openapi.get("path") {
            Some(path) => Some((path, read_schema(loader, dir, path)?)),
            None => None,
        };
        if self.chosen.get().is_some() {
            return Ok(());
        }
        let version = openapi.get("version");
        let chosen = match (text, version) {
            (Some((path, _)), Some(version)) => {
                return Err(OpenApiError::Both {
                    version: version.clone(),
                    file: path.clone(),
                });
            }
            (Some((path, text)), None) => Chosen::Custom(CustomSchema::parse(&text, path)?),
            (None, None) => return Ok(()),
            (None, Some(version)) if version.is_empty() => return Ok(()),
            (None, Some(version)) if version == BUILTIN_VERSION => Chosen::Builtin,
            (None, Some(version)) => {
                return Err(OpenApiError::NotBuiltin {
                    version: version.clone(),
                });
            }
        };
        // Unset was checked above, and builds are single-threaded: this always sets.
        let _ = self.chosen.set(chosen);
        Ok(())
    }
}

/// Reads the schema file `path` of the kustomization in `dir`.
fn read_schema(loader: &Loader, dir: &Path, path: &str) -> Result<String, OpenApiError> {
    loader.read_text(dir, path).map_err(|source| match source {
        LoadError::Io {
            path: shown,
            source,
        } if source.kind() == std::io::ErrorKind::NotFound => OpenApiError::Missing {
            file: if shown.starts_with('/') {
                shown
            } else {
                format!("/{shown}")
            },
        },
        source => OpenApiError::Load {
            file: path.to_string(),
            source,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::LoadRestrictions;

    const SCHEMA: &str = r#"{"definitions": {"w.Widget": {
        "properties": {"parts": {"type": "array", "x-kubernetes-patch-strategy": "merge",
                                 "x-kubernetes-patch-merge-key": "id"}},
        "x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1",
                                             "kind": "Widget"}]}}}"#;

    fn field(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn has_custom(choice: &OpenApiChoice) -> bool {
        choice.schemas().custom().is_some()
    }

    struct Fixture {
        _dir: tempfile::TempDir,
        root: std::path::PathBuf,
        loader: Loader,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("schema.json"), SCHEMA).unwrap();
        std::fs::write(root.join("sub/bad.json"), "{").unwrap();
        let loader = Loader::new(&root, LoadRestrictions::None).unwrap();
        Fixture {
            _dir: dir,
            root,
            loader,
        }
    }

    #[test]
    fn first_choice_wins_for_the_rest_of_the_build() {
        let f = fixture();
        let choice = OpenApiChoice::new();
        assert!(!has_custom(&choice));
        choice.consider(&field(&[]), &f.loader, &f.root).unwrap();
        assert!(!has_custom(&choice));
        let path = field(&[("path", "schema.json")]);
        choice.consider(&path, &f.loader, &f.root).unwrap();
        assert!(has_custom(&choice));
        let widget = choice.schemas().for_kind("example.com/v1", "Widget");
        assert_eq!(widget.field("parts").merge_keys(), Some(vec!["id".into()]));
        // Later choices are ignored, invalid ones included, but their file must exist.
        let sub = f.root.join("sub");
        let bad = field(&[("path", "bad.json")]);
        choice.consider(&bad, &f.loader, &sub).unwrap();
        let version = field(&[("version", "v0.0.1")]);
        choice.consider(&version, &f.loader, &sub).unwrap();
        assert!(has_custom(&choice));
        let missing = field(&[("path", "nope.json")]);
        let err = choice.consider(&missing, &f.loader, &sub).unwrap_err();
        assert_eq!(err.to_string(), "'/sub/nope.json' doesn't exist");
    }

    #[test]
    fn versions_must_be_built_in() {
        let f = fixture();
        let choice = OpenApiChoice::new();
        let err = choice
            .consider(&field(&[("version", "v1.14.1")]), &f.loader, &f.root)
            .unwrap_err();
        assert!(
            err.to_string().contains("'v1.14.1' is not built in"),
            "{err}"
        );
        let builtin = field(&[("version", BUILTIN_VERSION)]);
        choice.consider(&builtin, &f.loader, &f.root).unwrap();
        let path = field(&[("path", "schema.json")]);
        choice.consider(&path, &f.loader, &f.root).unwrap();
        assert!(!has_custom(&choice));
    }

    #[test]
    fn path_and_version_together_are_refused() {
        let f = fixture();
        let both = field(&[("path", "schema.json"), ("version", BUILTIN_VERSION)]);
        let err = OpenApiChoice::new()
            .consider(&both, &f.loader, &f.root)
            .unwrap_err();
        assert!(err.to_string().contains("cannot use both"), "{err}");
        let bad = field(&[("path", "sub/bad.json")]);
        let err = OpenApiChoice::new()
            .consider(&bad, &f.loader, &f.root)
            .unwrap_err();
        assert!(err.to_string().contains("sub/bad.json"), "{err}");
    }
}
