//! One repository's checkout: find its objects, resolve the ref, write the tree, then the
//! submodules.

use std::path::Path;
use std::time::Duration;

use crate::deadline::Cancel;
use crate::error::GitError;
use crate::refname::{self, Wanted};
use crate::remote::{self, FetchFailure};
use crate::resolve::{self, ResolveError, Resolved};
use crate::submodules::{self, Submodule};
use crate::url::{self, Location, redact, scrub};
use crate::worktree::{self, Budget, WriteError};

/// How many bytes more than the checkout may still write a fetched pack may hold: room for
/// tree objects and pack framing, which the checkout does not write.
const PACK_SLACK: u64 = 1 << 20;

/// What one top-level checkout shares with its submodules.
pub(crate) struct Context<'a> {
    pub(crate) cancel: &'a Cancel,
    pub(crate) budget: Budget,
    pub(crate) with_submodules: bool,
    pub(crate) timeout: Duration,
    pub(crate) submodules: Vec<Submodule>,
}

/// One repository to check out.
pub(crate) struct Target<'a> {
    pub(crate) url: &'a str,
    pub(crate) git_ref: &'a str,
    pub(crate) dest: &'a Path,
    /// The path of `dest` relative to the top-level destination, with a trailing `/`
    /// (empty at the top).
    pub(crate) prefix: String,
    /// How many submodule levels down this is (0 at the top).
    pub(crate) depth: usize,
    /// Whether a local path or `file://` URL is acceptable here.
    pub(crate) allow_local: bool,
}

/// Where the objects come from; a fetched repository's directory lives as long as this.
enum Source {
    Local(gix::Repository),
    Fetched(remote::Fetched),
}

impl Source {
    fn repo(&self) -> &gix::Repository {
        match self {
            Source::Local(repo) => repo,
            Source::Fetched(fetched) => &fetched.repo,
        }
    }
}

/// Checks `target` out, submodules included when asked for.
pub(crate) fn checkout_into(
    ctx: &mut Context<'_>,
    target: Target<'_>,
) -> Result<Resolved, GitError> {
    let shown = redact(target.url);
    let label = refname::label(target.git_ref);
    let location = url::classify(target.url).map_err(|reason| GitError::InvalidUrl {
        url: shown.clone(),
        reason: scrub(&reason, target.url),
    })?;
    if let Location::Remote(remote) = &location
        && let Some(Err(refusal)) = remote.host().map(crate::guard::check_host)
    {
        return Err(GitError::Refused {
            url: shown,
            reason: refusal.to_string(),
        });
    }
    let is_local = matches!(location, Location::Local(_));
    if is_local && !target.allow_local {
        return Err(GitError::InvalidUrl {
            url: shown,
            reason: "a submodule of a remote repository may not point to a local path".to_string(),
        });
    }
    let wanted = refname::parse(target.git_ref).map_err(|reason| GitError::InvalidRef {
        url: shown.clone(),
        git_ref: label.clone(),
        reason,
    })?;
    prepare_destination(target.dest).map_err(|e| match e {
        Destination::NotEmpty => GitError::DestinationNotEmpty {
            url: shown.clone(),
            git_ref: label.clone(),
            dest: target.dest.display().to_string(),
        },
        Destination::Io(message) => GitError::Write {
            url: shown.clone(),
            git_ref: label.clone(),
            path: target.dest.display().to_string(),
            message,
        },
    })?;

    let (source, resolved) = obtain(ctx, &location, &wanted)
        .map_err(|failure| failure.into_error(target.url, &label, ctx))?;
    let repo = source.repo();
    let tree = repo
        .find_commit(resolved.commit)
        .and_then(|commit| commit.tree_id().map(|id| id.detach()))
        .map_err(|e| GitError::Repository {
            url: shown.clone(),
            git_ref: label.clone(),
            message: crate::error::chain(&e),
        })?;
    let gitlinks = worktree::write_tree(repo, tree, target.dest, &mut ctx.budget, ctx.cancel)
        .map_err(|e| write_error(e, &target, &shown, &label, ctx))?;
    if ctx.with_submodules && !gitlinks.is_empty() {
        submodules::checkout_all(ctx, repo, tree, &target, is_local, &gitlinks)?;
    }
    Ok(resolved)
}

/// Why the objects and the commit could not be had.
enum Obtain {
    Open(String),
    Fetch(FetchFailure),
}

impl Obtain {
    fn into_error(self, url: &str, label: &str, ctx: &Context<'_>) -> GitError {
        let (cancel, timeout, limit) = (ctx.cancel, ctx.timeout, ctx.budget.limit());
        let shown = redact(url);
        let git_ref = label.to_string();
        match self {
            // An interrupted transfer is reported as the timeout it is.
            _ if cancel.timed_out() => GitError::Timeout {
                url: shown,
                git_ref,
                timeout: goduration::format(timeout),
            },
            Obtain::Open(message) => GitError::Repository {
                url: shown,
                git_ref,
                message: scrub(&message, url),
            },
            Obtain::Fetch(FetchFailure::Transport(message)) => GitError::Fetch {
                url: shown,
                git_ref,
                message: scrub(&message, url),
            },
            Obtain::Fetch(FetchFailure::Resolve(e)) => resolve_error(e, url, label),
            Obtain::Fetch(FetchFailure::TooLarge) => GitError::TooLarge {
                url: shown,
                git_ref,
                limit,
            },
        }
    }
}

fn resolve_error(error: ResolveError, url: &str, label: &str) -> GitError {
    let shown = redact(url);
    let git_ref = label.to_string();
    match error {
        ResolveError::NotFound => GitError::RefNotFound {
            url: shown,
            git_ref,
        },
        ResolveError::Ambiguous(count) => GitError::AmbiguousRef {
            url: shown,
            git_ref,
            count,
        },
        ResolveError::NotACommit => GitError::NotACommit {
            url: shown,
            git_ref,
        },
        ResolveError::Repository(message) => GitError::Repository {
            url: shown,
            git_ref,
            message: scrub(&message, url),
        },
    }
}

fn obtain(
    ctx: &Context<'_>,
    location: &Location,
    wanted: &Wanted,
) -> Result<(Source, Resolved), Obtain> {
    match location {
        Location::Local(path) => {
            let repo = resolve::open_local(path).map_err(Obtain::Open)?;
            let resolved = resolve::resolve(&repo, wanted)
                .map_err(|e| Obtain::Fetch(FetchFailure::Resolve(e)))?;
            Ok((Source::Local(repo), resolved))
        }
        Location::Remote(url) => {
            // The pack may be somewhat larger than the files it holds (trees, framing).
            let pack_limit = ctx.budget.remaining().saturating_add(PACK_SLACK);
            let fetched = remote::fetch(url, wanted, ctx.timeout, pack_limit, ctx.cancel)
                .map_err(Obtain::Fetch)?;
            let resolved = fetched.resolved.clone();
            Ok((Source::Fetched(fetched), resolved))
        }
    }
}

fn write_error(
    error: WriteError,
    target: &Target<'_>,
    shown: &str,
    label: &str,
    ctx: &Context<'_>,
) -> GitError {
    let url = shown.to_string();
    let git_ref = label.to_string();
    match error {
        WriteError::TooLarge => GitError::TooLarge {
            url,
            git_ref,
            limit: ctx.budget.limit(),
        },
        WriteError::Unsafe(path) => GitError::UnsafePath {
            url,
            git_ref,
            path: format!("{path:?}"),
        },
        WriteError::Io { path, message } => GitError::Write {
            url,
            git_ref,
            path: path.display().to_string(),
            message,
        },
        WriteError::Object(message) => GitError::Repository {
            url,
            git_ref,
            message: scrub(&message, target.url),
        },
        WriteError::Cancelled => GitError::Timeout {
            url,
            git_ref,
            timeout: goduration::format(ctx.timeout),
        },
    }
}

enum Destination {
    NotEmpty,
    Io(String),
}

/// Creates `dest` if it is missing; refuses it when it holds anything.
fn prepare_destination(dest: &Path) -> Result<(), Destination> {
    match std::fs::read_dir(dest) {
        Ok(mut entries) => match entries.next() {
            None => Ok(()),
            Some(_) => Err(Destination::NotEmpty),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dest).map_err(|e| Destination::Io(crate::error::chain(&e)))
        }
        Err(e) => Err(Destination::Io(crate::error::chain(&e))),
    }
}
