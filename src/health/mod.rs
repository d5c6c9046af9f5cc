//! Stage `health`: the readiness of objects, as Flux's kustomize-controller judges it.
//!
//! - `apply::kstatus` (in the apply engine's crate): kstatus' rules (sigs.k8s.io/cli-utils
//!   `pkg/kstatus/status`), object in, status out; no client.
//! - [`cel`]: `spec.healthCheckExprs`, CEL expressions per apiVersion+kind; no client.
//! - [`assess`]: which rule judges an object, in Flux's order of precedence.
//! - `apply::wait` (in the apply engine's crate): waiting on a set of live objects through
//!   shared watches, judged by [`assess`].

pub mod assess;
pub mod cel;
