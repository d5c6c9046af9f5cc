//! Turning a [`Wanted`] ref into a commit of a repository whose objects are at hand: a
//! local repository read in place, or the private repository a fetch filled.

use std::collections::HashSet;

use gix::ObjectId;

use crate::refname::{self, Wanted};

/// The commit a ref resolved to.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    /// The commit.
    pub(crate) commit: ObjectId,
    /// The full name of the ref that led there (`HEAD`, `refs/heads/main`), if it was a name.
    pub(crate) reference: Option<String>,
}

/// Why a ref did not resolve.
#[derive(Debug)]
pub(crate) enum ResolveError {
    /// Nothing has that name or id.
    NotFound,
    /// Several commits start with the abbreviated id.
    Ambiguous(usize),
    /// It names a tree or a blob.
    NotACommit,
    /// The repository could not be read.
    Repository(String),
}

fn repo_error(e: &(dyn std::error::Error + 'static)) -> ResolveError {
    ResolveError::Repository(crate::error::chain(e))
}

/// Resolves `wanted` among the refs and objects of `repo`, as a fetch from it would.
pub(crate) fn resolve(repo: &gix::Repository, wanted: &Wanted) -> Result<Resolved, ResolveError> {
    match wanted {
        Wanted::Head => by_name(repo, "HEAD")?.ok_or(ResolveError::NotFound),
        Wanted::Name(name) => by_name(repo, name)?.ok_or(ResolveError::NotFound),
        Wanted::Id(id) => Ok(Resolved {
            commit: peel_to_commit(repo, *id)?,
            reference: None,
        }),
        Wanted::Prefix(prefix, text) => match by_name(repo, text)? {
            Some(found) => Ok(found),
            None => Ok(Resolved {
                commit: by_prefix(repo, *prefix)?,
                reference: None,
            }),
        },
    }
}

/// The ref `name` means among the refs of `repo` (plus `HEAD`), peeled to its commit.
fn by_name(repo: &gix::Repository, name: &str) -> Result<Option<Resolved>, ResolveError> {
    let mut names = vec!["HEAD".to_string()];
    let platform = repo.references().map_err(|e| repo_error(&e))?;
    for reference in platform.all().map_err(|e| repo_error(&e))? {
        let reference = reference.map_err(|e| repo_error(&e))?;
        names.push(reference.name().as_bstr().to_string());
    }
    let Some(full) = refname::pick(name, names.iter().map(String::as_str)) else {
        return Ok(None);
    };
    let target = if full == "HEAD" {
        let head = repo.head().map_err(|e| repo_error(&e))?;
        match head.id() {
            Some(id) => id.detach(),
            // An unborn HEAD: an empty repository, or a branch without commits.
            None => return Ok(None),
        }
    } else {
        let mut reference = repo.find_reference(full).map_err(|e| repo_error(&e))?;
        reference.peel_to_id().map_err(|e| repo_error(&e))?.detach()
    };
    Ok(Some(Resolved {
        commit: peel_to_commit(repo, target)?,
        reference: Some(full.to_string()),
    }))
}

/// `id`, or the commit an annotated tag `id` leads to.
pub(crate) fn peel_to_commit(
    repo: &gix::Repository,
    id: ObjectId,
) -> Result<ObjectId, ResolveError> {
    let exists = repo.has_object(id);
    if !exists {
        return Err(ResolveError::NotFound);
    }
    let object = repo
        .find_object(id)
        .map_err(|e| repo_error(&e))?
        .peel_tags_to_end()
        .map_err(|e| repo_error(&e))?;
    if object.kind == gix::object::Kind::Commit {
        Ok(object.id)
    } else {
        Err(ResolveError::NotACommit)
    }
}

/// The one commit whose id starts with `prefix`.
pub(crate) fn by_prefix(
    repo: &gix::Repository,
    prefix: gix::hash::Prefix,
) -> Result<ObjectId, ResolveError> {
    let mut candidates = HashSet::new();
    repo.objects
        .lookup_prefix(prefix, Some(&mut candidates))
        .map_err(|e| repo_error(&e))?;
    let mut commits = Vec::new();
    for id in candidates {
        let header = repo.find_header(id).map_err(|e| repo_error(&e))?;
        if header.kind() == gix::object::Kind::Commit {
            commits.push(id);
        }
    }
    match commits.as_slice() {
        [] => Err(ResolveError::NotFound),
        [one] => Ok(*one),
        many => Err(ResolveError::Ambiguous(many.len())),
    }
}

/// Opens the repository at `path` (a work tree or a bare repository) to read its objects,
/// ignoring the environment's and the user's git configuration.
pub(crate) fn open_local(path: &std::path::Path) -> Result<gix::Repository, String> {
    if !path.exists() {
        return Err(format!("{} does not exist", path.display()));
    }
    gix::open_opts(path, gix::open::Options::isolated()).map_err(|e| crate::error::chain(&e))
}
