//! Remote bases and files of a build, fetched natively for the kustomize engine: git
//! repositories checked out by `gitfetch` (no `git` binary) and http(s) files, each bounded
//! in time and size.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kustomize::{ClonedRepo, RemoteError, RemoteFetcher, RepoSpec};

/// The most bytes one remote base may check out (its files, submodules included).
pub const MAX_CHECKOUT_BYTES: u64 = 256 << 20;

/// How long fetching one remote file may take (kustomize sets no bound).
pub const FILE_TIMEOUT: Duration = Duration::from_secs(60);

/// Fetches remote bases into temporary directories (removed when the build drops them).
#[derive(Clone, Debug)]
pub struct NativeRemote {
    max_checkout_bytes: u64,
    file_timeout: Duration,
}

impl Default for NativeRemote {
    fn default() -> Self {
        NativeRemote {
            max_checkout_bytes: MAX_CHECKOUT_BYTES,
            file_timeout: FILE_TIMEOUT,
        }
    }
}

impl NativeRemote {
    /// The fetcher a build is given.
    pub fn shared() -> Arc<dyn RemoteFetcher> {
        Arc::new(NativeRemote::default())
    }
}

impl RemoteFetcher for NativeRemote {
    fn clone_repo(&self, spec: &RepoSpec) -> Result<ClonedRepo, RemoteError> {
        let dir = tempfile::Builder::new()
            .prefix("kustomize-")
            .tempdir()
            .map_err(|e| {
                RemoteError::Failed(format!(
                    "failed to create a directory to clone into: {}",
                    kustomize::loader::io_reason(&e)
                ))
            })?;
        let options = gitfetch::FetchOptions {
            timeout: spec.timeout,
            max_bytes: self.max_checkout_bytes,
            submodules: spec.submodules,
        };
        match gitfetch::checkout(&spec.clone_url(), &spec.git_ref, dir.path(), &options) {
            Ok(_) => Ok(ClonedRepo::new(dir.path().to_path_buf(), dir)),
            Err(gitfetch::GitError::Timeout { url, git_ref, .. }) => Err(RemoteError::Timeout {
                operation: format!("fetching {git_ref} of {url}"),
                after: spec.timeout,
            }),
            Err(e @ gitfetch::GitError::Refused { .. }) => Err(RemoteError::Refused(e.to_string())),
            Err(e) => Err(RemoteError::Failed(e.to_string())),
        }
    }

    fn fetch_file(&self, url: &str) -> Result<Vec<u8>, RemoteError> {
        let limit = kustomize::loader::MAX_FILE_SIZE;
        // kustomize tries a repository URL as a file first; that try gets the repository's
        // timeout (27 s unless `?timeout=`), so a server that hangs is given up on as soon
        // as the clone would be.
        let timeout = RepoSpec::parse(url).map_or(self.file_timeout, |spec| spec.timeout);
        gitfetch::fetch_file(url, timeout, limit).map_err(|e| match e {
            gitfetch::FetchError::Status { status, .. } => RemoteError::Http {
                status: status
                    .split_whitespace()
                    .next()
                    .and_then(|code| code.parse().ok())
                    .unwrap_or(0),
            },
            gitfetch::FetchError::TooLarge { limit, .. } => RemoteError::TooLarge { limit },
            gitfetch::FetchError::Timeout { url, .. } => RemoteError::Timeout {
                operation: format!("fetching {url}"),
                after: timeout,
            },
            refused @ gitfetch::FetchError::Refused { .. } => {
                RemoteError::Refused(refused.to_string())
            }
            other => RemoteError::Failed(other.to_string()),
        })
    }
}

/// What a build is given under `--no-remote-bases`: every remote base and file is refused,
/// naming the flag.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoRemoteBases;

impl NoRemoteBases {
    /// The fetcher a build is given under the flag.
    pub fn shared() -> Arc<dyn RemoteFetcher> {
        Arc::new(NoRemoteBases)
    }

    fn refusal() -> RemoteError {
        RemoteError::Refused(
            "remote bases are not allowed: --no-remote-bases is set, so every resource must be a file of the source artifact".to_string(),
        )
    }
}

impl RemoteFetcher for NoRemoteBases {
    fn clone_repo(&self, _spec: &RepoSpec) -> Result<ClonedRepo, RemoteError> {
        Err(Self::refusal())
    }

    fn fetch_file(&self, _url: &str) -> Result<Vec<u8>, RemoteError> {
        Err(Self::refusal())
    }
}

/// The fetcher for a build: [`NativeRemote`], or [`NoRemoteBases`] when they are refused.
pub fn fetcher(allow_remote_bases: bool) -> Arc<dyn RemoteFetcher> {
    if allow_remote_bases {
        NativeRemote::shared()
    } else {
        NoRemoteBases::shared()
    }
}

/// A fetcher that notes whether a build asked it for anything: a build that did depends on
/// more than its source artifact.
pub struct Noted {
    inner: Arc<dyn RemoteFetcher>,
    asked: Arc<AtomicBool>,
}

impl Noted {
    /// `inner`, noting each request in `asked`.
    pub fn shared(inner: Arc<dyn RemoteFetcher>, asked: Arc<AtomicBool>) -> Arc<dyn RemoteFetcher> {
        Arc::new(Noted { inner, asked })
    }
}

impl RemoteFetcher for Noted {
    fn clone_repo(&self, spec: &RepoSpec) -> Result<ClonedRepo, RemoteError> {
        self.asked.store(true, Ordering::Relaxed);
        self.inner.clone_repo(spec)
    }

    fn fetch_file(&self, url: &str) -> Result<Vec<u8>, RemoteError> {
        self.asked.store(true, Ordering::Relaxed);
        self.inner.fetch_file(url)
    }
}
