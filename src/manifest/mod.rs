//! Kubernetes objects as data: the [`Object`] type that flows between pipeline stages, and
//! reading objects from YAML.

mod object;
mod yaml;

pub use object::Object;
pub use yaml::{ManifestError, parse_objects};
