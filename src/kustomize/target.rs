//! Building one kustomization directory: the accumulation of resources, generators,
//! components and transformers in kustomize's order.

use std::path::Path;

use super::loader::LoadRestrictions;
use super::resource::Object;

/// Options of a build.
#[derive(Clone, Debug, Default)]
pub struct BuildOptions {
    /// Which files kustomizations may read (the loader is always confined to the root).
    pub load_restrictions: LoadRestrictions,
}

/// Why a build failed.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Placeholder until the accumulator lands.
    #[error("{0}")]
    Other(String),
}

/// Builds the kustomization in `dir`, reading files only under `root`, and returns the
/// objects in kustomize's FIFO order.
pub fn build(root: &Path, dir: &Path, options: &BuildOptions) -> Result<Vec<Object>, BuildError> {
    let _ = (root, dir, options);
    Err(BuildError::Other("not implemented".into()))
}
