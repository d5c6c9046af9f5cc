//! Resolution of a Kustomization's `spec.path` inside an extracted artifact.
//!
//! Semantics follow Flux: an empty path, `.` or `./` is the artifact root; a
//! leading `./` (or `/`, which Flux's secure join also treats as the root) is
//! allowed. `..` and symlinks are resolved on the filesystem, and the result
//! must still lie within the root.

use std::io;
use std::path::{Component, Path, PathBuf};

/// Errors from [`resolve_path`].
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// The path resolves (through `..` or a symlink) outside the artifact root.
    #[error("path {path:?} escapes the artifact root")]
    Escapes {
        /// The `spec.path` as given.
        path: String,
    },
    /// Nothing exists at the path. Worded as Flux words it (`kustomization path not found:`
    /// and the failed `stat`), naming the path looked up.
    #[error("kustomization path not found: stat {}: {cause}", looked_up.display())]
    NotFound {
        /// The `spec.path` as given.
        path: String,
        /// The root joined with the path (lexically cleaned), as Flux reports it.
        looked_up: PathBuf,
        /// Why the lookup failed, in the operating system's words as Go prints them.
        cause: &'static str,
    },
    /// The artifact root itself cannot be resolved.
    #[error("cannot resolve artifact root {}: {source}", root.display())]
    Root {
        /// The root directory.
        root: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Resolving the path failed for another reason.
    #[error("cannot resolve path {path:?} in the artifact: {source}")]
    Io {
        /// The `spec.path` as given.
        path: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// Resolves `spec_path` against the artifact `root`.
///
/// Returns the canonical (symlink-free, absolute) path, which is guaranteed to
/// be the canonical root or below it. The path may name a file or a directory.
pub fn resolve_path(root: &Path, spec_path: &str) -> Result<PathBuf, PathError> {
    let canonical_root = root.canonicalize().map_err(|source| PathError::Root {
        root: root.to_path_buf(),
        source,
    })?;

    // Keep `..` so that the filesystem resolves it after following symlinks;
    // drop root/prefix components so an absolute path is taken as root-relative.
    let mut joined = canonical_root.clone();
    for component in Path::new(spec_path).components() {
        match component {
            Component::Normal(part) => joined.push(part),
            Component::ParentDir => joined.push(".."),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }

    match joined.canonicalize() {
        Ok(resolved) if resolved.starts_with(&canonical_root) => Ok(resolved),
        Ok(_) => Err(PathError::Escapes {
            path: spec_path.to_string(),
        }),
        Err(e) if is_not_found(&e) => {
            if escapes_lexically(spec_path) {
                Err(PathError::Escapes {
                    path: spec_path.to_string(),
                })
            } else {
                Err(PathError::NotFound {
                    path: spec_path.to_string(),
                    looked_up: lexically_joined(&canonical_root, spec_path),
                    cause: if e.kind() == io::ErrorKind::NotADirectory {
                        "not a directory"
                    } else {
                        "no such file or directory"
                    },
                })
            }
        }
        Err(source) => Err(PathError::Io {
            path: spec_path.to_string(),
            source,
        }),
    }
}

fn is_not_found(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// `root` joined with `spec_path`, `.` and `..` resolved without the filesystem (the caller
/// has checked that `..` never climbs above the root).
fn lexically_joined(root: &Path, spec_path: &str) -> PathBuf {
    let mut joined = root.to_path_buf();
    for component in Path::new(spec_path).components() {
        match component {
            Component::Normal(part) => joined.push(part),
            Component::ParentDir => {
                joined.pop();
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    joined
}

/// Whether the `..` components of a path climb above its start, ignoring symlinks.
fn escapes_lexically(spec_path: &str) -> bool {
    let mut depth: usize = 0;
    for component in Path::new(spec_path).components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::ParentDir => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return true,
            },
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("apps/prod")).unwrap();
        fs::write(root.join("apps/prod/kustomization.yaml"), "").unwrap();
        dir
    }

    fn root_of(dir: &tempfile::TempDir) -> PathBuf {
        dir.path().canonicalize().unwrap()
    }

    #[test]
    fn empty_and_dot_mean_root() {
        let dir = tree();
        for p in ["", ".", "./", "/", ".//"] {
            assert_eq!(resolve_path(dir.path(), p).unwrap(), root_of(&dir), "{p:?}");
        }
    }

    #[test]
    fn resolves_relative_paths() {
        let dir = tree();
        let want = root_of(&dir).join("apps/prod");
        for p in [
            "apps/prod",
            "./apps/prod",
            "./apps/prod/",
            "/apps/prod",
            "apps/./prod",
            "apps/prod/../prod",
        ] {
            assert_eq!(resolve_path(dir.path(), p).unwrap(), want, "{p:?}");
        }
        assert_eq!(
            resolve_path(dir.path(), "apps/prod/kustomization.yaml").unwrap(),
            want.join("kustomization.yaml")
        );
    }

    #[test]
    fn dotdot_inside_root_is_fine() {
        let dir = tree();
        assert_eq!(resolve_path(dir.path(), "apps/..").unwrap(), root_of(&dir));
    }

    #[test]
    fn dotdot_escape_is_refused() {
        let dir = tree();
        for p in ["..", "../", "./apps/../..", "../../etc"] {
            let err = resolve_path(dir.path(), p).unwrap_err();
            assert!(matches!(err, PathError::Escapes { .. }), "{p:?}: {err}");
            assert_eq!(
                err.to_string(),
                format!("path {p:?} escapes the artifact root")
            );
        }
    }

    #[test]
    fn missing_path_is_not_found() {
        let dir = tree();
        for p in ["nope", "./apps/staging", "apps/prod/kustomization.yaml/x"] {
            let err = resolve_path(dir.path(), p).unwrap_err();
            assert!(matches!(err, PathError::NotFound { .. }), "{p:?}: {err}");
        }
        let root = root_of(&dir);
        let message = |p: &str| resolve_path(dir.path(), p).unwrap_err().to_string();
        assert_eq!(
            message("./apps/../nope"),
            format!(
                "kustomization path not found: stat {}: no such file or directory",
                root.join("nope").display()
            )
        );
        assert_eq!(
            message("apps/prod/kustomization.yaml/x"),
            format!(
                "kustomization path not found: stat {}: not a directory",
                root.join("apps/prod/kustomization.yaml/x").display()
            )
        );
    }

    #[cfg(unix)]
    #[test]
    fn symlink_outside_is_refused() {
        let outside = tempfile::tempdir().unwrap();
        fs::create_dir(outside.path().join("secrets")).unwrap();
        let dir = tree();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        std::os::unix::fs::symlink("/", dir.path().join("apps/slash")).unwrap();
        for p in ["out", "./out/secrets", "apps/slash", "apps/slash/etc"] {
            let err = resolve_path(dir.path(), p).unwrap_err();
            assert!(matches!(err, PathError::Escapes { .. }), "{p:?}: {err}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn symlink_inside_is_followed() {
        let dir = tree();
        std::os::unix::fs::symlink("apps/prod", dir.path().join("current")).unwrap();
        assert_eq!(
            resolve_path(dir.path(), "./current").unwrap(),
            root_of(&dir).join("apps/prod")
        );
        // `..` is resolved after following the symlink, as the kernel does.
        assert_eq!(
            resolve_path(dir.path(), "current/..").unwrap(),
            root_of(&dir).join("apps")
        );
    }

    #[test]
    fn missing_root_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = resolve_path(&dir.path().join("gone"), "").unwrap_err();
        assert!(matches!(err, PathError::Root { .. }), "{err}");
    }
}
