//! Checking out the submodules of a tree, as `git submodule update --init --recursive`:
//! each gitlink's commit, from the URL `.gitmodules` gives for its path.

use gix::bstr::ByteSlice;

use crate::checkout::{self, Context, Target};
use crate::error::GitError;
use crate::refname;
use crate::url::{join_submodule_url, redact};
use crate::worktree::Gitlink;

/// The most levels of submodules within submodules followed.
pub const MAX_DEPTH: usize = 8;

/// A submodule that was checked out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submodule {
    /// Its directory, relative to the destination of the checkout, `/`-separated.
    pub path: String,
    /// The URL it was fetched from, without credentials.
    pub url: String,
    /// The commit checked out, as 40 hexadecimal digits.
    pub commit: String,
}

/// Checks out `gitlinks`, found in the tree `tree` of `repo` written for `parent`. A
/// submodule may point to a local path only when its parent is local too (git refuses
/// local submodules of remote repositories alike, through `protocol.file.allow`).
pub(crate) fn checkout_all(
    ctx: &mut Context<'_>,
    repo: &gix::Repository,
    tree: gix::ObjectId,
    parent: &Target<'_>,
    parent_is_local: bool,
    gitlinks: &[Gitlink],
) -> Result<(), GitError> {
    let shown = redact(parent.url);
    if parent.depth >= MAX_DEPTH {
        return Err(GitError::SubmoduleDepth {
            url: shown,
            max: MAX_DEPTH,
        });
    }
    let config_error = |path: &str, message: String| GitError::SubmoduleConfig {
        url: shown.clone(),
        git_ref: refname::label(parent.git_ref),
        path: format!("{path:?}"),
        message,
    };
    let modules = read_gitmodules(repo, tree).map_err(|m| config_error(".gitmodules", m))?;
    for link in gitlinks {
        let Some(modules) = modules.as_ref() else {
            return Err(config_error(
                &link.path,
                "there is no .gitmodules".to_string(),
            ));
        };
        let Some(name) = modules.name_by_path(link.path.as_bytes().as_bstr()) else {
            return Err(config_error(
                &link.path,
                "no URL for it in .gitmodules".to_string(),
            ));
        };
        if matches!(
            modules.update(name),
            Ok(Some(gix::submodule::config::Update::None))
        ) {
            continue;
        }
        let Some(raw_url) = modules.config().string_by("submodule", Some(name), "url") else {
            return Err(config_error(
                &link.path,
                "no URL for it in .gitmodules".to_string(),
            ));
        };
        let raw_url = raw_url
            .to_str()
            .map_err(|_| config_error(&link.path, "its URL is not UTF-8".to_string()))?;
        let url =
            join_submodule_url(parent.url, raw_url).map_err(|m| config_error(&link.path, m))?;
        let commit = link.commit.to_string();
        let dest = parent.dest.join(&link.path);
        let path = format!("{}{}", parent.prefix, link.path);
        let target = Target {
            url: &url,
            git_ref: &commit,
            dest: &dest,
            prefix: format!("{path}/"),
            depth: parent.depth + 1,
            allow_local: parent_is_local,
        };
        // Recorded before its own submodules, so that the outermost come first.
        ctx.submodules.push(Submodule {
            path,
            url: redact(&url),
            commit: commit.clone(),
        });
        checkout::checkout_into(ctx, target).map_err(|inner| GitError::Submodule {
            url: shown.clone(),
            path: format!("{:?}", link.path),
            inner: Box::new(inner),
        })?;
    }
    Ok(())
}

/// The `.gitmodules` at the root of `tree`, if there is one.
fn read_gitmodules(
    repo: &gix::Repository,
    tree: gix::ObjectId,
) -> Result<Option<gix::submodule::File>, String> {
    let tree = repo.find_tree(tree).map_err(|e| crate::error::chain(&e))?;
    let decoded = tree.decode().map_err(|e| crate::error::chain(&e))?;
    let Some(entry) = decoded
        .entries
        .iter()
        .find(|e| e.filename == ".gitmodules" && e.mode.is_blob())
    else {
        return Ok(None);
    };
    let blob = repo
        .find_blob(entry.oid.to_owned())
        .map_err(|e| crate::error::chain(&e))?;
    gix::submodule::File::from_bytes(&blob.data, None, &Default::default())
        .map(Some)
        .map_err(|e| crate::error::chain(&e))
}
