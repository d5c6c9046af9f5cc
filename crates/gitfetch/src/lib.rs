#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod checkout;
mod deadline;
mod error;
mod guard;
mod http;
mod meter;
mod refname;
mod remote;
mod resolve;
mod submodules;
mod tls;
mod url;
mod worktree;

use std::path::Path;
use std::time::Duration;

pub use error::{FetchError, GitError};
pub use refname::RefNameError;
pub use submodules::{MAX_DEPTH as MAX_SUBMODULE_DEPTH, Submodule};

/// How far a [`checkout`] may go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchOptions {
    /// The most time the whole checkout may take, submodules included. Kustomize's default
    /// is 27 seconds.
    pub timeout: Duration,
    /// The most bytes the checkout may write: the sizes of its files and the lengths of its
    /// symlinks' targets, submodules included.
    pub max_bytes: u64,
    /// Whether submodules are checked out too (kustomize's default), recursively. Without,
    /// each submodule is left an empty directory, as git leaves it.
    pub submodules: bool,
}

/// What a [`checkout`] checked out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkout {
    /// The commit, as 40 hexadecimal digits.
    pub commit: String,
    /// The full name of the ref the commit was found through (`HEAD`, `refs/heads/main`,
    /// `refs/tags/v1.0.0`), or `None` when the ref was a commit id.
    pub reference: Option<String>,
    /// The bytes written, submodules included.
    pub bytes: u64,
    /// The submodules checked out, outermost first.
    pub submodules: Vec<Submodule>,
}

/// Checks out `git_ref` of the repository at `url` into the empty (or missing) directory
/// `dest`, as `git fetch --depth=1 <url> <ref>; git checkout FETCH_HEAD` followed by
/// `git submodule update --init --recursive` would, without a `.git` directory.
///
/// `git_ref` is empty for the remote's `HEAD`, or a branch, a tag (short or full name; a
/// tag wins over a branch of the same name, as in git), a full commit id, or an
/// abbreviated one (at least 4 digits; a ref with that name wins). `url` is a `file://`
/// URL or a path (read in place), an `http(s)://` URL (smart HTTP), or an `ssh://` or
/// scp-style URL (through the `ssh` program, as git). Credentials are taken from the URL
/// only; they never appear in an error.
///
/// The call blocks: from async code, run it on a blocking thread. It returns at
/// `options.timeout` at the latest; the work still in flight then is told to stop and ends
/// by itself shortly after. On error, `dest` may hold part of the checkout.
pub fn checkout(
    url: &str,
    git_ref: &str,
    dest: &Path,
    options: &FetchOptions,
) -> Result<Checkout, GitError> {
    let owned_url = url.to_string();
    let owned_ref = git_ref.to_string();
    let owned_dest = dest.to_path_buf();
    let opts = options.clone();
    let answer = deadline::run(options.timeout, move |cancel| {
        let mut ctx = checkout::Context {
            cancel: &cancel,
            budget: worktree::Budget::new(opts.max_bytes),
            with_submodules: opts.submodules,
            timeout: opts.timeout,
            submodules: Vec::new(),
        };
        let target = checkout::Target {
            url: &owned_url,
            git_ref: &owned_ref,
            dest: &owned_dest,
            prefix: String::new(),
            depth: 0,
            allow_local: true,
        };
        checkout::checkout_into(&mut ctx, target).map(|resolved| Checkout {
            commit: resolved.commit.to_string(),
            reference: resolved.reference,
            bytes: ctx.budget.used(),
            submodules: ctx.submodules,
        })
    });
    match answer {
        Ok(result) => result,
        Err(deadline::Stopped::TimedOut) => Err(GitError::Timeout {
            url: url::redact(url),
            git_ref: refname::label(git_ref),
            timeout: goduration::format(options.timeout),
        }),
        Err(deadline::Stopped::Lost) => Err(GitError::Internal {
            url: url::redact(url),
            git_ref: refname::label(git_ref),
        }),
    }
}

/// GETs the `http://` or `https://` URL `url` (a remote resource file, as kustomize loads
/// one), following up to 10 redirects, and returns its body. A status outside 200–299 is
/// an error naming it; so is a body over `max_bytes`, and a request not done in `timeout`.
///
/// The call blocks: from async code, run it on a blocking thread.
pub fn fetch_file(url: &str, timeout: Duration, max_bytes: u64) -> Result<Vec<u8>, FetchError> {
    http::fetch_file(url, timeout, max_bytes)
}
