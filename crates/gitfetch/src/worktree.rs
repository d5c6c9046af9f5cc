//! Writing a commit's tree into a directory: regular files with their executable bit,
//! symlinks as symlinks, an empty directory for each submodule, and no `.git`.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use gix::ObjectId;
use gix::objs::tree::EntryKind;

use crate::deadline::Cancel;

/// The bytes a checkout may still write, shared by a repository and its submodules.
#[derive(Debug)]
pub(crate) struct Budget {
    limit: u64,
    used: u64,
}

impl Budget {
    /// A budget of `limit` bytes.
    pub(crate) fn new(limit: u64) -> Self {
        Budget { limit, used: 0 }
    }

    /// Counts `n` more bytes; `false` (and nothing counted) when they do not fit.
    fn take(&mut self, n: u64) -> bool {
        match self.used.checked_add(n) {
            Some(total) if total <= self.limit => {
                self.used = total;
                true
            }
            _ => false,
        }
    }

    /// The bytes counted so far.
    pub(crate) fn used(&self) -> u64 {
        self.used
    }

    /// The bytes that may still be written.
    pub(crate) fn remaining(&self) -> u64 {
        self.limit - self.used
    }

    /// The limit.
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }
}

/// A submodule's place in a tree: its path (relative, `/`-separated) and its commit.
#[derive(Debug, Clone)]
pub(crate) struct Gitlink {
    pub(crate) path: String,
    pub(crate) commit: ObjectId,
}

/// Why a tree could not be written.
#[derive(Debug)]
pub(crate) enum WriteError {
    /// The budget ran out.
    TooLarge,
    /// A name in the tree would escape the directory or write into `.git`.
    Unsafe(String),
    /// The filesystem refused.
    Io { path: PathBuf, message: String },
    /// An object could not be read or decoded.
    Object(String),
    /// The caller gave up.
    Cancelled,
}

/// Writes the tree `tree` of `repo` into `dest` (an existing, empty directory) and returns
/// the submodules it holds, in tree order.
pub(crate) fn write_tree(
    repo: &gix::Repository,
    tree: ObjectId,
    dest: &Path,
    budget: &mut Budget,
    cancel: &Cancel,
) -> Result<Vec<Gitlink>, WriteError> {
    let mut gitlinks = Vec::new();
    // Depth first with an explicit stack: a deep tree cannot exhaust the thread's stack.
    let mut pending = vec![(tree, String::new())];
    while let Some((tree_id, prefix)) = pending.pop() {
        let tree = repo
            .find_tree(tree_id)
            .map_err(|e| WriteError::Object(crate::error::chain(&e)))?;
        let decoded = tree
            .decode()
            .map_err(|e| WriteError::Object(crate::error::chain(&e)))?;
        for entry in &decoded.entries {
            if cancel.is_cancelled() {
                return Err(WriteError::Cancelled);
            }
            let name = std::str::from_utf8(entry.filename)
                .ok()
                .filter(|n| is_safe_name(n))
                .ok_or_else(|| WriteError::Unsafe(format!("{prefix}{}", entry.filename)))?;
            let rel = format!("{prefix}{name}");
            let path = dest.join(&rel);
            let id = entry.oid.to_owned();
            match entry.mode.kind() {
                EntryKind::Tree => {
                    create_dir(&path)?;
                    pending.push((id, format!("{rel}/")));
                }
                EntryKind::Commit => {
                    create_dir(&path)?;
                    gitlinks.push(Gitlink {
                        path: rel,
                        commit: id,
                    });
                }
                EntryKind::Blob => write_blob(repo, id, &path, false, budget)?,
                EntryKind::BlobExecutable => write_blob(repo, id, &path, true, budget)?,
                EntryKind::Link => write_link(repo, id, &path, budget)?,
            }
        }
    }
    gitlinks.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(gitlinks)
}

/// A name git would check out: one path component, not `.`, `..` or `.git` (in any case).
fn is_safe_name(name: &str) -> bool {
    !(name.is_empty()
        || name == "."
        || name == ".."
        || name.contains('/')
        || name.contains('\0')
        || name.eq_ignore_ascii_case(".git"))
}

fn create_dir(path: &Path) -> Result<(), WriteError> {
    fs::create_dir(path).map_err(|e| io_error(path, &e))
}

/// Reads a blob after checking its size against the budget, so that an oversized one is
/// refused before it is inflated.
fn read_blob(
    repo: &gix::Repository,
    id: ObjectId,
    budget: &mut Budget,
) -> Result<Vec<u8>, WriteError> {
    let header = repo
        .find_header(id)
        .map_err(|e| WriteError::Object(crate::error::chain(&e)))?;
    if !budget.take(header.size()) {
        return Err(WriteError::TooLarge);
    }
    let blob = repo
        .find_blob(id)
        .map_err(|e| WriteError::Object(crate::error::chain(&e)))?;
    Ok(blob.detach().data)
}

fn write_blob(
    repo: &gix::Repository,
    id: ObjectId,
    path: &Path,
    executable: bool,
    budget: &mut Budget,
) -> Result<(), WriteError> {
    let data = read_blob(repo, id, budget)?;
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // As git: 0666 or 0777, less the umask.
        options.mode(if executable { 0o777 } else { 0o666 });
    }
    #[cfg(not(unix))]
    let _ = executable;
    let mut file = options.open(path).map_err(|e| io_error(path, &e))?;
    file.write_all(&data).map_err(|e| io_error(path, &e))
}

fn write_link(
    repo: &gix::Repository,
    id: ObjectId,
    path: &Path,
    budget: &mut Budget,
) -> Result<(), WriteError> {
    let target = read_blob(repo, id, budget)?;
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&target), path)
            .map_err(|e| io_error(path, &e))
    }
    #[cfg(not(unix))]
    {
        // As git with core.symlinks=false: the link becomes a file holding its target.
        fs::write(path, &target).map_err(|e| io_error(path, &e))
    }
}

fn io_error(path: &Path, error: &std::io::Error) -> WriteError {
    WriteError::Io {
        path: path.to_path_buf(),
        message: crate::error::chain(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_names_are_refused() {
        for name in ["", ".", "..", ".git", ".GIT", "a/b", "a\0b"] {
            assert!(!is_safe_name(name), "{name:?}");
        }
        for name in ["a", ".gitmodules", ".github", "..a", "x.git"] {
            assert!(is_safe_name(name), "{name:?}");
        }
    }

    #[test]
    fn the_budget_counts_up_to_its_limit() {
        let mut b = Budget::new(10);
        assert!(b.take(6));
        assert!(!b.take(5));
        assert!(b.take(4));
        assert_eq!(b.used(), 10);
        assert!(!b.take(u64::MAX));
    }
}
