//! Kubernetes objects as data: the [`Object`] type that flows between pipeline stages.

mod object;

pub use object::Object;
