//! Source artifacts: download, digest verification and safe extraction.
//!
//! This is the "fetch" stage of the reconcile pipeline. Given a Flux source's
//! `status.artifact` (`url` and `digest`), [`ArtifactFetcher::fetch`] downloads
//! the tarball, verifies its digest, and extracts it into a directory;
//! [`resolve_path`] then locates the Kustomization's `spec.path` inside it.
//!
//! * [`digest`]: parsing `<algorithm>:<hex>` digests and streaming verification;
//! * [`extract`]: safe tar.gz extraction (no path traversal, no escaping links,
//!   size and entry limits);
//! * [`path`]: `spec.path` resolution within the artifact root;
//! * [`fetch`]: the HTTP download with retries, tying the others together;
//! * [`cache`]: one download and extraction per artifact digest, shared by its readers.
//!
//! Every error of this stage corresponds to Flux's `ArtifactFailed` reason.

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
    ArtifactFetcher, FetchConfig, FetchError, SOURCE_CONTROLLER_LOCALHOST_ENV, rewrite_url,
};
pub use path::{PathError, resolve_path};
