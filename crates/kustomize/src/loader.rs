//! Reading the files a kustomization names, confined to a root directory.
//!
//! Every path is resolved (symlinks included) before it is read, and refused when it lands
//! outside the root. With [`LoadRestrictions::RootOnly`] (the kustomize CLI's default) files
//! must also lie under the directory of the kustomization that names them; directories of
//! bases and components may still be elsewhere under the root. Flux builds with
//! [`LoadRestrictions::None`] on a filesystem confined to the artifact root.
//!
//! With a [`RemoteFetcher`] ([`Loader::with_remote_fetcher`]), files named by http(s) URL are
//! fetched instead of refused, and remote bases are built from a loader rooted at their
//! clone ([`Loader::for_clone`]), which never reads outside the clone.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use zeroize::Zeroizing;

use crate::remote::{self, ClonedRepo, MAX_REMOTE_FETCHES, RemoteError, RemoteFetcher, RepoSpec};

/// Which files a kustomization may read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LoadRestrictions {
    /// Files only under the kustomization's own directory.
    #[default]
    RootOnly,
    /// Any file under the loader's root.
    None,
}

/// An I/O error as a reason in a sentence: the operating system's text without Rust's
/// `(os error N)` suffix, lower-cased as Go prints it (`no such file or directory`).
pub fn io_reason(error: &std::io::Error) -> String {
    let text = error.to_string();
    let text = match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => &text[..at],
        _ => text.as_str(),
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) if chars.clone().next().is_some_and(char::is_lowercase) => {
            first.to_lowercase().chain(chars).collect()
        }
        _ => text.to_string(),
    }
}

/// Why a path could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The path does not exist or cannot be read.
    #[error("{path}: {}", io_reason(source))]
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
    /// The name is a URL: builds read only files inside the source.
    #[error(
        "'{name}' is a URL; remote files are not supported (only files inside the source can be read)"
    )]
    Remote {
        /// The name as written (escaped).
        name: String,
    },
    /// The path resolves outside the root.
    #[error("{path}: resolves outside the root {root}")]
    OutsideRoot {
        /// The path as named.
        path: String,
        /// The root, as shown to users.
        root: String,
    },
    /// A file named by http(s) URL could not be fetched.
    #[error("could not fetch '{url}': {source}")]
    Fetch {
        /// The URL as written (escaped).
        url: String,
        /// Why.
        source: RemoteError,
    },
    /// The build already fetched as many remote repositories and files as it may.
    #[error(
        "'{url}' would be remote fetch number {}: a build fetches at most {} remote repositories and files",
        MAX_REMOTE_FETCHES + 1,
        MAX_REMOTE_FETCHES
    )]
    TooManyFetches {
        /// The URL that was not fetched (escaped).
        url: String,
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
    remote: Remote,
}

/// The fetcher of remote resources, and how many fetches the build has made (shared by the
/// loaders of remote bases).
#[derive(Clone, Default)]
struct Remote {
    fetcher: Option<Arc<dyn RemoteFetcher>>,
    fetches: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.fetcher {
            Some(_) => write!(f, "RemoteFetcher"),
            None => write!(f, "None"),
        }
    }
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
            remote: Remote::default(),
        })
    }

    /// This loader, reading remote resources through `fetcher`: http(s) URLs named as files
    /// are fetched, and builds may clone remote bases and components. Without one, every
    /// URL is refused by name.
    pub fn with_remote_fetcher(mut self, fetcher: Arc<dyn RemoteFetcher>) -> Self {
        self.remote = Remote {
            fetcher: Some(fetcher),
            fetches: Arc::default(),
        };
        self
    }

    /// The fetcher of remote resources, if any.
    pub fn remote_fetcher(&self) -> Option<&Arc<dyn RemoteFetcher>> {
        self.remote.fetcher.as_ref()
    }

    /// A loader for a remote base cloned at `clone` (resolved now): confined to the clone,
    /// with files restricted to each kustomization's own directory (kustomize never relaxes
    /// this for clones), sharing this loader's fetcher and fetch count.
    pub fn for_clone(&self, clone: &Path) -> Result<Loader, LoadError> {
        let mut loader = Loader::new(clone, LoadRestrictions::RootOnly)?;
        loader.remote = self.remote.clone();
        Ok(loader)
    }

    /// Counts one more remote fetch, refusing it past [`MAX_REMOTE_FETCHES`].
    fn count_fetch(&self, url: &str) -> Result<(), LoadError> {
        let before = self.remote.fetches.fetch_add(1, Ordering::Relaxed);
        if before >= MAX_REMOTE_FETCHES {
            return Err(LoadError::TooManyFetches {
                url: shown_url(url),
            });
        }
        Ok(())
    }

    /// The bytes of the http(s) URL `url` (at most `limit`), through the fetcher.
    pub fn fetch(&self, url: &str, limit: u64) -> Result<Vec<u8>, LoadError> {
        let failed = |source| LoadError::Fetch {
            url: shown_url(url),
            source,
        };
        let Some(fetcher) = &self.remote.fetcher else {
            return Err(LoadError::Remote {
                name: shown_url(url),
            });
        };
        self.count_fetch(url)?;
        let bytes = fetcher.fetch_file(url).map_err(failed)?;
        if bytes.len() as u64 > limit {
            return Err(failed(RemoteError::TooLarge { limit }));
        }
        Ok(bytes)
    }

    /// Clones the repository of `spec` through the fetcher.
    pub fn clone_repo(&self, spec: &RepoSpec) -> Result<ClonedRepo, LoadError> {
        let Some(fetcher) = &self.remote.fetcher else {
            return Err(LoadError::Remote {
                name: shown_url(&spec.raw),
            });
        };
        self.count_fetch(&spec.raw)?;
        fetcher.clone_repo(spec).map_err(|source| LoadError::Fetch {
            url: shown_url(&spec.raw),
            source,
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

    /// `path` relative to the root, for messages ("." for the root itself), with control
    /// characters escaped (see [`escape_name`]).
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => escape_name(&rel.to_string_lossy()),
            Err(_) => escape_name(&path.to_string_lossy()),
        }
    }

    /// The root, for messages.
    fn display_root(&self) -> String {
        escape_name(&self.root.to_string_lossy())
    }

    /// Resolves `name` (relative to directory `dir`, or absolute) and reports what it is.
    ///
    /// The path is first resolved lexically and refused, without touching the disk, when it
    /// leaves the root; symlinks are then followed one at a time, each step confined to the
    /// root, so an error never reveals whether something outside the root exists. Anything
    /// but a regular file or a directory (FIFOs, sockets, devices) is refused by its type,
    /// without being opened.
    ///
    /// With a fetcher, a name that looks like a URL is looked up as a local path like any
    /// other, as kustomize does (the build decides whether it names a repository).
    pub fn entry(&self, dir: &Path, name: &str) -> Result<Entry, LoadError> {
        if self.remote.fetcher.is_some() {
            return self.entry_path(dir, name);
        }
        let remote = || LoadError::Remote {
            name: escape_name(name),
        };
        match url_kind(name) {
            UrlKind::Scheme => return Err(remote()),
            UrlKind::Host => {
                return self.entry_path(dir, name).map_err(|e| match e {
                    LoadError::Io { source, .. }
                        if source.kind() == std::io::ErrorKind::NotFound =>
                    {
                        remote()
                    }
                    other => other,
                });
            }
            UrlKind::Path => {}
        }
        self.entry_path(dir, name)
    }

    /// [`Loader::entry`] for a name that is not a URL.
    fn entry_path(&self, dir: &Path, name: &str) -> Result<Entry, LoadError> {
        let joined = lexical_join(dir, name);
        let outside = || LoadError::OutsideRoot {
            path: escape_name(name),
            root: self.display_root(),
        };
        if !joined.starts_with(&self.root) {
            return Err(outside());
        }
        let resolved = self.resolve(&joined).map_err(|e| match e {
            Resolve::Outside => outside(),
            Resolve::Io(source) => LoadError::Io {
                path: self.display(&joined),
                source,
            },
        })?;
        let metadata = std::fs::metadata(&resolved).map_err(|source| LoadError::Io {
            path: self.display(&joined),
            source,
        })?;
        if metadata.is_dir() {
            return Ok(Entry::Dir(resolved));
        }
        crate::regular_file::check_regular(&metadata).map_err(|source| LoadError::File {
            path: self.display(&joined),
            source,
        })?;
        Ok(Entry::File(resolved))
    }

    /// Follows the symlinks of `path` (absolute, lexically clean, under the root) one
    /// component at a time, refusing as soon as a step leaves the root.
    fn resolve(&self, path: &Path) -> Result<PathBuf, Resolve> {
        let rel = path
            .strip_prefix(&self.root)
            .map_err(|_| Resolve::Outside)?;
        let mut pending: Vec<std::ffi::OsString> = rel
            .components()
            .rev()
            .map(|c| c.as_os_str().to_os_string())
            .collect();
        let mut current = self.root.clone();
        let mut hops = 0usize;
        while let Some(part) = pending.pop() {
            if part == "." || part.is_empty() {
                continue;
            }
            if part == ".." {
                if current == self.root {
                    return Err(Resolve::Outside);
                }
                current.pop();
                continue;
            }
            let next = current.join(&part);
            let metadata = std::fs::symlink_metadata(&next).map_err(Resolve::Io)?;
            if !metadata.file_type().is_symlink() {
                current = next;
                continue;
            }
            hops += 1;
            if hops > MAX_SYMLINK_HOPS {
                return Err(Resolve::Io(std::io::Error::other(
                    "too many levels of symbolic links",
                )));
            }
            let target = std::fs::read_link(&next).map_err(Resolve::Io)?;
            let relative = if target.is_absolute() {
                let clean = lexical_join(Path::new("/"), &target.to_string_lossy());
                let inside = clean
                    .strip_prefix(&self.root)
                    .map_err(|_| Resolve::Outside)?;
                current = self.root.clone();
                inside.to_path_buf()
            } else {
                target
            };
            pending.extend(
                relative
                    .components()
                    .rev()
                    .map(|c| c.as_os_str().to_os_string()),
            );
        }
        Ok(current)
    }

    /// Reads the file `name` named by the kustomization in `dir` (at most [`MAX_FILE_SIZE`]
    /// bytes; only regular files).
    pub fn read(&self, dir: &Path, name: &str) -> Result<Vec<u8>, LoadError> {
        self.read_limited(dir, name, MAX_FILE_SIZE)
    }

    /// Reads the file `name` named by the kustomization in `dir`, refusing anything but a
    /// regular file and any file of more than `limit` bytes (checked while reading).
    ///
    /// With a fetcher, an http(s) URL is fetched instead (kustomize applies no load
    /// restriction to those).
    pub fn read_limited(&self, dir: &Path, name: &str, limit: u64) -> Result<Vec<u8>, LoadError> {
        if self.remote.fetcher.is_some() && remote::is_remote_file(name) {
            return self.fetch(name, limit);
        }
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
        let shown = || {
            if self.remote.fetcher.is_some() && remote::is_remote_file(name) {
                shown_url(name)
            } else {
                self.display(&lexical_join(dir, name))
            }
        };
        String::from_utf8(bytes).map_err(|_| LoadError::Io {
            path: shown(),
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
                    path: escape_name(name),
                    dir: self.display(&dir),
                });
            }
        }
        Ok(())
    }
}

/// Whether a name is a URL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UrlKind {
    /// A scheme (`https://`, `git::`, `git@host:`): never a local path.
    Scheme,
    /// A well-known host (`github.com/...`): a URL unless such a local path exists.
    Host,
    /// A path.
    Path,
}

fn url_kind(name: &str) -> UrlKind {
    let lower = name.trim_start().to_ascii_lowercase();
    let scheme = lower.contains("://") || lower.starts_with("git::") || lower.starts_with("git@");
    if scheme {
        return UrlKind::Scheme;
    }
    let hosts = ["github.com/", "gitlab.com/", "bitbucket.org/"];
    if hosts.iter().any(|h| lower.starts_with(h)) {
        return UrlKind::Host;
    }
    UrlKind::Path
}

/// Why a path could not be resolved inside the root.
enum Resolve {
    /// A step leaves the root.
    Outside,
    /// A component could not be examined.
    Io(std::io::Error),
}

/// The most symlinks followed while resolving one path (Linux's own limit).
const MAX_SYMLINK_HOPS: usize = 40;

/// `name` as shown in messages: control characters (an escape sequence could rewrite the
/// terminal that shows the message) and bidirectional-text overrides are escaped, Rust
/// style (`\u{1b}`, `\n`); everything else is shown as is.
pub fn escape_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        let bidi = matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if c.is_control() {
            out.extend(c.escape_debug());
        } else if bidi {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// A URL as shown in messages: its password redacted ([`remote::redact_url`]) and control
/// characters escaped ([`escape_name`]).
pub fn shown_url(url: &str) -> String {
    escape_name(&remote::redact_url(url))
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

    #[test]
    fn paths_outside_the_root_do_not_reveal_whether_they_exist() {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("root");
        std::fs::create_dir_all(root.join("app")).unwrap();
        std::fs::write(outer.path().join("exists.txt"), "x").unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(outer.path().join("exists.txt"), root.join("app/l1"))
                .unwrap();
            std::os::unix::fs::symlink(outer.path().join("missing.txt"), root.join("app/l2"))
                .unwrap();
            std::os::unix::fs::symlink("../../missing.txt", root.join("app/l3")).unwrap();
        }
        let loader = Loader::new(&root, LoadRestrictions::None).unwrap();
        let app = root.canonicalize().unwrap().join("app");
        let message = |name: &str| match loader.read(&app, name) {
            Err(e @ LoadError::OutsideRoot { .. }) => e.to_string(),
            other => panic!("{name}: {other:?}"),
        };
        let existing = message("../../exists.txt");
        let missing = message("../../missing.txt");
        assert_eq!(
            existing.replace("exists", "X"),
            missing.replace("missing", "X")
        );
        #[cfg(unix)]
        for link in ["l1", "l2", "l3"] {
            assert!(message(link).contains("resolves outside the root"));
        }
    }

    #[test]
    fn symlinks_inside_the_root_are_followed() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/f.yaml"), "f").unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("a/b", root.join("rel")).unwrap();
            std::os::unix::fs::symlink(root.join("a"), root.join("abs")).unwrap();
            std::os::unix::fs::symlink("loop2", root.join("loop1")).unwrap();
            std::os::unix::fs::symlink("loop1", root.join("loop2")).unwrap();
            let loader = Loader::new(&root, LoadRestrictions::None).unwrap();
            assert_eq!(loader.read(&root, "rel/f.yaml").unwrap(), b"f");
            assert_eq!(loader.read(&root, "abs/b/f.yaml").unwrap(), b"f");
            // `..` is resolved lexically, as kustomize joins paths.
            assert_eq!(loader.read(&root, "rel/../a/b/f.yaml").unwrap(), b"f");
            let err = loader.read(&root, "loop1").unwrap_err().to_string();
            assert!(err.contains("too many levels"), "{err}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn special_files_are_refused_by_type_without_blocking() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let status = std::process::Command::new("mkfifo")
            .arg(root.join("pipe.yaml"))
            .status()
            .unwrap();
        assert!(status.success());
        std::os::unix::fs::symlink("/dev/zero", root.join("zero.yaml")).unwrap();
        let loader = Loader::new(&root, LoadRestrictions::None).unwrap();
        let err = loader.entry(&root, "pipe.yaml").unwrap_err().to_string();
        assert!(err.contains("pipe.yaml") && err.contains("FIFO"), "{err}");
        let err = loader.read(&root, "pipe.yaml").unwrap_err().to_string();
        assert!(err.contains("pipe.yaml") && err.contains("FIFO"), "{err}");
        let err = loader.read(&root, "zero.yaml").unwrap_err().to_string();
        assert!(err.contains("zero.yaml"), "{err}");
    }

    #[test]
    fn urls_are_refused_by_name() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("github.com/me")).unwrap();
        std::fs::write(root.join("github.com/me/f.yaml"), "local").unwrap();
        let loader = Loader::new(&root, LoadRestrictions::None).unwrap();
        for url in [
            "https://example.com/p.yaml",
            "http://example.com//p.yaml",
            "git::https://example.com/repo//p.yaml",
            "git@github.com:me/repo.git",
            "github.com/me/missing.yaml",
            "file:///etc/passwd",
        ] {
            let err = loader.read(&root, url).unwrap_err();
            assert!(matches!(err, LoadError::Remote { .. }), "{url}: {err:?}");
            let message = err.to_string();
            assert!(message.contains(url), "{message}");
            assert!(
                message.contains("remote files are not supported"),
                "{message}"
            );
        }
        // A local directory named like a host is still a path.
        assert_eq!(
            loader.read(&root, "github.com/me/f.yaml").unwrap(),
            b"local"
        );
    }

    #[test]
    fn control_characters_in_names_are_escaped() {
        assert_eq!(escape_name("a\u{1b}[31mb\n"), "a\\u{1b}[31mb\\n");
        assert_eq!(escape_name("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(escape_name("ünïcode/ok.yaml"), "ünïcode/ok.yaml");
        let root = tempfile::tempdir().unwrap();
        let loader = Loader::new(root.path(), LoadRestrictions::None).unwrap();
        let err = loader
            .read(loader.root(), "evil\u{1b}]0;title\u{7}.yaml")
            .unwrap_err()
            .to_string();
        assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
        assert!(err.contains("evil\\u{1b}]0;title\\u{7}.yaml"), "{err}");
        let err = loader
            .read(loader.root(), "../\u{1b}x")
            .unwrap_err()
            .to_string();
        assert!(!err.contains('\u{1b}'), "{err:?}");
    }

    #[test]
    fn io_errors_read_as_sentences_without_rusts_error_codes() {
        let missing = std::fs::read("/nonexistent/kustomization.yaml").unwrap_err();
        assert_eq!(io_reason(&missing), "no such file or directory");
        let custom = std::io::Error::other("is a directory, not a file");
        assert_eq!(io_reason(&custom), "is a directory, not a file");
        let named = std::io::Error::other("URL not allowed");
        assert_eq!(io_reason(&named), "URL not allowed");
    }
}
