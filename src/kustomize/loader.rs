//! Reading the files a kustomization names, confined to a root directory.
//!
//! Every path is resolved (symlinks included) before it is read, and refused when it lands
//! outside the root. With [`LoadRestrictions::RootOnly`] (the kustomize CLI's default) files
//! must also lie under the directory of the kustomization that names them; directories of
//! bases and components may still be elsewhere under the root. Flux builds with
//! [`LoadRestrictions::None`] on a filesystem confined to the artifact root.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use zeroize::Zeroizing;

/// Which files a kustomization may read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LoadRestrictions {
    /// Files only under the kustomization's own directory.
    #[default]
    RootOnly,
    /// Any file under the loader's root.
    None,
}

/// Why a path could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The path does not exist or cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// The path as named, relative to the root.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The path is not a regular file, or holds more bytes than a build reads from one file.
    #[error("{path}: {source}")]
    File {
        /// The path as named, relative to the root.
        path: String,
        /// Why it was not read.
        source: crate::regular_file::FileError,
    },
    /// The path resolves outside the root.
    #[error("{path}: resolves outside the root {root}")]
    OutsideRoot {
        /// The path as named.
        path: String,
        /// The root, as shown to users.
        root: String,
    },
    /// The path is a file outside the kustomization's directory (`RootOnly`).
    #[error(
        "security; file '{path}' is not in or below '{dir}' (files must be under the kustomization's directory)"
    )]
    OutsideKustomization {
        /// The file.
        path: String,
        /// The kustomization's directory.
        dir: String,
    },
}

/// The most bytes a build reads from one file: far above any real manifest bundle (the API
/// server refuses objects over 3 MiB), low enough that a hostile file cannot exhaust memory.
pub const MAX_FILE_SIZE: u64 = 32 << 20;

/// What a path names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A regular file (after symlinks), at this resolved path.
    File(PathBuf),
    /// A directory (after symlinks), at this resolved path.
    Dir(PathBuf),
}

/// Reads files for a build, confined to `root`.
#[derive(Clone, Debug)]
pub struct Loader {
    root: PathBuf,
    restrictions: LoadRestrictions,
    in_memory: InMemoryFiles,
}

/// File contents served instead of the files on disk (decrypted sources: their plaintext
/// never touches the disk). Keyed by resolved path; wiped when the last loader is dropped.
#[derive(Clone, Default)]
pub struct InMemoryFiles(Arc<HashMap<PathBuf, Zeroizing<Vec<u8>>>>);

impl InMemoryFiles {
    /// Serves `files` (resolved paths inside the root) from memory.
    pub fn new(files: HashMap<PathBuf, Zeroizing<Vec<u8>>>) -> Self {
        InMemoryFiles(Arc::new(files))
    }

    fn get(&self, path: &Path) -> Option<&[u8]> {
        self.0.get(path).map(|b| b.as_slice())
    }
}

impl std::fmt::Debug for InMemoryFiles {
    /// Names the files, never their contents.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl Loader {
    /// A loader confined to `root` (resolved now).
    pub fn new(root: &Path, restrictions: LoadRestrictions) -> Result<Self, LoadError> {
        let root = root.canonicalize().map_err(|source| LoadError::Io {
            path: root.display().to_string(),
            source,
        })?;
        Ok(Loader {
            root,
            restrictions,
            in_memory: InMemoryFiles::default(),
        })
    }

    /// This loader, serving `files` from memory instead of from disk.
    pub fn with_in_memory_files(mut self, files: InMemoryFiles) -> Self {
        self.in_memory = files;
        self
    }

    /// The resolved root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The load restrictions in force.
    pub fn restrictions(&self) -> LoadRestrictions {
        self.restrictions
    }

    /// `path` relative to the root, for messages ("." for the root itself).
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }

    /// Resolves `name` (relative to directory `dir`, or absolute) and reports what it is.
    pub fn entry(&self, dir: &Path, name: &str) -> Result<Entry, LoadError> {
        let joined = lexical_join(dir, name);
        let resolved = joined.canonicalize().map_err(|source| LoadError::Io {
            path: self.display(&joined),
            source,
        })?;
        if !resolved.starts_with(&self.root) {
            return Err(LoadError::OutsideRoot {
                path: self.display(&joined),
                root: self.root.display().to_string(),
            });
        }
        if resolved.is_dir() {
            Ok(Entry::Dir(resolved))
        } else {
            Ok(Entry::File(resolved))
        }
    }

    /// Reads the file `name` named by the kustomization in `dir` (at most [`MAX_FILE_SIZE`]
    /// bytes; only regular files).
    pub fn read(&self, dir: &Path, name: &str) -> Result<Vec<u8>, LoadError> {
        self.read_limited(dir, name, MAX_FILE_SIZE)
    }

    /// Reads the file `name` named by the kustomization in `dir`, refusing anything but a
    /// regular file and any file of more than `limit` bytes (checked while reading).
    pub fn read_limited(&self, dir: &Path, name: &str, limit: u64) -> Result<Vec<u8>, LoadError> {
        let path = match self.entry(dir, name)? {
            Entry::File(path) => path,
            Entry::Dir(path) => {
                return Err(LoadError::Io {
                    path: self.display(&path),
                    source: std::io::Error::other("is a directory, not a file"),
                });
            }
        };
        self.check_file_restriction(dir, &path, name)?;
        if let Some(bytes) = self.in_memory.get(&path) {
            return Ok(bytes.to_vec());
        }
        crate::regular_file::read(&path, limit).map_err(|source| LoadError::File {
            path: self.display(&path),
            source,
        })
    }

    /// Reads the file `name` as UTF-8 text.
    pub fn read_text(&self, dir: &Path, name: &str) -> Result<String, LoadError> {
        let bytes = self.read(dir, name)?;
        String::from_utf8(bytes).map_err(|_| LoadError::Io {
            path: self.display(&lexical_join(dir, name)),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not valid UTF-8"),
        })
    }

    /// Refuses a file outside `dir` under [`LoadRestrictions::RootOnly`].
    pub fn check_file_restriction(
        &self,
        dir: &Path,
        resolved: &Path,
        name: &str,
    ) -> Result<(), LoadError> {
        if self.restrictions == LoadRestrictions::RootOnly {
            let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
            if !resolved.starts_with(&dir) {
                return Err(LoadError::OutsideKustomization {
                    path: name.to_string(),
                    dir: self.display(&dir),
                });
            }
        }
        Ok(())
    }
}

/// Joins `name` onto `dir` and removes `.` and `..` components without touching the disk.
fn lexical_join(dir: &Path, name: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for component in dir.join(name).components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confines_reads_to_the_root() {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("root");
        std::fs::create_dir_all(root.join("app")).unwrap();
        std::fs::write(outer.path().join("secret.txt"), "x").unwrap();
        std::fs::write(root.join("app/a.yaml"), "a").unwrap();
        std::fs::write(root.join("b.yaml"), "b").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(outer.path().join("secret.txt"), root.join("app/link")).unwrap();

        let loader = Loader::new(&root, LoadRestrictions::None).unwrap();
        let app = root.join("app");
        assert_eq!(loader.read(&app, "a.yaml").unwrap(), b"a");
        assert_eq!(loader.read(&app, "../b.yaml").unwrap(), b"b");
        assert!(matches!(
            loader.read(&app, "../../secret.txt"),
            Err(LoadError::OutsideRoot { .. })
        ));
        #[cfg(unix)]
        assert!(matches!(
            loader.read(&app, "link"),
            Err(LoadError::OutsideRoot { .. })
        ));

        let strict = Loader::new(&root, LoadRestrictions::RootOnly).unwrap();
        assert!(matches!(
            strict.read(&app, "../b.yaml"),
            Err(LoadError::OutsideKustomization { .. })
        ));
        assert_eq!(
            strict.entry(&app, "..").unwrap(),
            Entry::Dir(root.canonicalize().unwrap())
        );
    }

    #[test]
    fn serves_in_memory_files_instead_of_the_disk() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("secret.env"), "ENCRYPTED").unwrap();
        std::fs::write(root.path().join("other.env"), "plain").unwrap();
        let resolved = root.path().canonicalize().unwrap().join("secret.env");
        let files = InMemoryFiles::new(HashMap::from([(
            resolved,
            Zeroizing::new(b"KEY=v".to_vec()),
        )]));
        let loader = Loader::new(root.path(), LoadRestrictions::None)
            .unwrap()
            .with_in_memory_files(files);
        assert_eq!(loader.read(root.path(), "secret.env").unwrap(), b"KEY=v");
        assert_eq!(loader.read(root.path(), "./secret.env").unwrap(), b"KEY=v");
        assert_eq!(loader.read(root.path(), "other.env").unwrap(), b"plain");
        assert!(!format!("{loader:?}").contains("KEY=v"));
    }
}
