#![doc = include_str!("../README.md")]
//!
//! ## Modules
//!
//! * [`digest`]: parsing `<algorithm>:<hex>` digests and streaming verification;
//! * [`extract`]: safe tar.gz extraction (no path traversal, no escaping links,
//!   size and entry limits);
//! * [`path`]: `spec.path` resolution within the artifact root;
//! * [`fetch`]: the HTTP download with retries, tying the others together; the HTTPS
//!   [`Connector`] is the caller's (its TLS roots are the process's choice);
//! * [`cache`]: one download and extraction per artifact digest, shared by its readers.
//!
//! Every error of this stage corresponds to Flux's `ArtifactFailed` reason; the variants let
//! the caller tell the causes apart (an artifact gone or changed is waited for, not failed).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cache;
pub mod digest;
pub mod extract;
pub mod fetch;
pub mod path;

pub use cache::{ArtifactCache, Extraction};
pub use digest::{Algorithm, Digest, DigestError, Verifier};
pub use extract::{
    ExtractError, ExtractLimits, ExtractSummary, UnsafeReason, extract_tar_gz, extract_tar_gz_bytes,
};
pub use fetch::{
    ArtifactFetcher, CONNECT_TIMEOUT, Connector, FetchConfig, FetchError, LocationProblem,
    RedirectError, SOURCE_CONTROLLER_LOCALHOST_ENV, rewrite_url,
};
pub use path::{PathError, resolve_path};
