//! Safe extraction of a gzip-compressed tarball into a root directory.
//!
//! Every entry is validated *before* anything is written for it, and nothing is
//! ever written outside the root:
//!
//! * entry names must be relative and may not contain `..` components;
//! * no entry may go through a symlink (every existing parent must be a real
//!   directory), so an earlier symlink cannot redirect a later entry;
//! * symlinks must be relative, and their target must stay inside the root.
//!   To make that check sound regardless of what other symlinks exist, `..`
//!   may only appear at the start of a target (`../../a/b` is fine, `a/../b`
//!   is refused): the leading `..`s then walk up through real directories;
//! * hard links must name an already-extracted regular file inside the root;
//!   the file's contents are copied (no inode is shared);
//! * devices, fifos, sparse files and unknown entry types are refused;
//! * an entry may replace an earlier file or symlink of the same name, but
//!   never a directory, and a directory entry never replaces a non-directory;
//! * files are written with mode `0o755` if any executable bit was set in the
//!   archive and `0o644` otherwise (never setuid/setgid/sticky), directories
//!   with `0o755`;
//! * [`ExtractLimits`] caps the total size of file contents, the number of
//!   entries, and (derived from those) the size of the decompressed tar stream.
//!
//! If extraction fails part-way, whatever was already written stays in the
//! root: extract into a fresh temporary directory and discard it on error.

use std::cell::Cell;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use flate2::read::MultiGzDecoder;
use tar::EntryType;

/// Limits that bound the work and disk space an archive can claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractLimits {
    /// Maximum sum of the sizes of all regular files (including hard-link
    /// copies), in bytes. Default: 1 GiB.
    ///
    /// Flux's `fluxcd/pkg/tar` default is 100 MB of tar data, but the
    /// kustomize-controller passes "unlimited"; 1 GiB leaves room for any
    /// plausible Kustomization source while still stopping gzip bombs.
    pub max_total_size: u64,
    /// Maximum number of entries (files, directories, links). Default: 100 000.
    pub max_entries: u64,
}

impl ExtractLimits {
    /// Default for [`ExtractLimits::max_total_size`]: 1 GiB.
    pub const DEFAULT_MAX_TOTAL_SIZE: u64 = 1 << 30;
    /// Default for [`ExtractLimits::max_entries`]: 100 000.
    pub const DEFAULT_MAX_ENTRIES: u64 = 100_000;

    /// Cap on the decompressed tar stream: the file contents plus a generous
    /// allowance per entry for headers, padding, long names and PAX records.
    fn max_stream_size(&self) -> u64 {
        self.max_total_size
            .saturating_add(self.max_entries.saturating_mul(4096))
            .saturating_add(1 << 20)
    }
}

impl Default for ExtractLimits {
    fn default() -> Self {
        ExtractLimits {
            max_total_size: Self::DEFAULT_MAX_TOTAL_SIZE,
            max_entries: Self::DEFAULT_MAX_ENTRIES,
        }
    }
}

/// What was extracted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtractSummary {
    /// Regular files written (including hard-link copies).
    pub files: u64,
    /// Directories created by directory entries.
    pub directories: u64,
    /// Symlinks created.
    pub symlinks: u64,
    /// Total bytes of file contents written.
    pub bytes: u64,
}

/// Why an entry was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnsafeReason {
    /// The entry has an empty name.
    #[error("empty path")]
    EmptyPath,
    /// The entry name is not valid UTF-8.
    #[error("path is not valid UTF-8")]
    NotUtf8,
    /// The entry name is absolute.
    #[error("absolute path")]
    AbsolutePath,
    /// The entry name has a `..` component.
    #[error("path escapes the root")]
    EscapesRoot,
    /// A parent of the entry is a symlink.
    #[error("path goes through symlink {parent:?}")]
    ThroughSymlink {
        /// The parent that is a symlink, relative to the root.
        parent: String,
    },
    /// A parent of the entry exists but is not a directory.
    #[error("parent {parent:?} is not a directory")]
    ParentNotDirectory {
        /// The offending parent, relative to the root.
        parent: String,
    },
    /// A symlink or hard link has an empty target.
    #[error("link has an empty target")]
    EmptyLinkTarget,
    /// A symlink or hard link target is not valid UTF-8.
    #[error("link target is not valid UTF-8")]
    LinkTargetNotUtf8,
    /// A symlink or hard link target is absolute.
    #[error("link target {target:?} is absolute")]
    AbsoluteLinkTarget {
        /// The link target.
        target: String,
    },
    /// A symlink or hard link target resolves outside the root.
    #[error("link target {target:?} escapes the root")]
    LinkEscapesRoot {
        /// The link target.
        target: String,
    },
    /// A symlink target has `..` after a normal component.
    #[error("symlink target {target:?} has \"..\" after a normal component")]
    LinkTargetNotNormalized {
        /// The link target.
        target: String,
    },
    /// A hard link target is not an already-extracted regular file.
    #[error("hard link target {target:?} is not an extracted regular file")]
    HardLinkTargetInvalid {
        /// The link target.
        target: String,
    },
    /// The entry would replace an existing directory.
    #[error("entry would replace an existing directory")]
    ReplacesDirectory,
    /// A directory entry collides with an existing non-directory.
    #[error("directory entry collides with an existing non-directory")]
    CollidesWithNonDirectory,
    /// The entry type is not allowed (device, fifo, sparse file, ...).
    #[error("{kind} entries are not allowed")]
    UnsupportedType {
        /// Human-readable entry type.
        kind: String,
    },
}

/// Errors from [`extract_tar_gz`].
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    /// The extraction root could not be created or is not a directory.
    #[error("cannot use {} as extraction root: {source}", path.display())]
    Root {
        /// The root directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The gzip or tar stream is invalid.
    #[error("invalid artifact archive: {source}")]
    Archive {
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Reading an entry's data from the archive failed.
    #[error("failed to read entry {entry:?} from artifact archive: {source}")]
    ReadEntry {
        /// The entry name.
        entry: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// An entry was refused.
    #[error("unsafe entry {entry:?} in artifact: {reason}")]
    UnsafeEntry {
        /// The entry name as it appears in the archive.
        entry: String,
        /// Why it was refused.
        reason: UnsafeReason,
    },
    /// The files in the archive add up to more than [`ExtractLimits::max_total_size`].
    #[error("artifact exceeds the maximum uncompressed size of {limit} bytes (at entry {entry:?})")]
    TooLarge {
        /// The entry that crossed the limit.
        entry: String,
        /// The limit, in bytes.
        limit: u64,
    },
    /// The decompressed tar stream is larger than allowed by the limits.
    #[error("artifact archive exceeds the maximum decompressed stream size of {limit} bytes")]
    StreamTooLarge {
        /// The limit, in bytes.
        limit: u64,
    },
    /// The archive has more than [`ExtractLimits::max_entries`] entries.
    #[error("artifact has more than {limit} entries")]
    TooManyEntries {
        /// The limit.
        limit: u64,
    },
    /// Writing to the extraction root failed.
    #[error("failed to extract entry {entry:?} to {}: {source}", path.display())]
    Write {
        /// The entry name.
        entry: String,
        /// The path being written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// Extracts the gzip-compressed tarball in `data` into `root`. See [`extract_tar_gz`].
pub fn extract_tar_gz_bytes(
    data: &[u8],
    root: &Path,
    limits: &ExtractLimits,
) -> Result<ExtractSummary, ExtractError> {
    extract_tar_gz(data, root, limits)
}

/// Extracts the gzip-compressed tarball read from `reader` into `root`.
///
/// `root` is created if missing. It should be empty: entries may replace
/// files and symlinks already there. See the module docs for the rules.
pub fn extract_tar_gz<R: Read>(
    reader: R,
    root: &Path,
    limits: &ExtractLimits,
) -> Result<ExtractSummary, ExtractError> {
    prepare_root(root)?;
    let stream_limit = limits.max_stream_size();
    let exceeded = Rc::new(Cell::new(false));
    let capped = CappedReader {
        inner: MultiGzDecoder::new(reader),
        remaining: stream_limit,
        exceeded: Rc::clone(&exceeded),
    };
    let mut archive = tar::Archive::new(capped);
    let stream_err = |source: io::Error| {
        if exceeded.get() {
            ExtractError::StreamTooLarge {
                limit: stream_limit,
            }
        } else {
            ExtractError::Archive { source }
        }
    };

    let mut extractor = Extractor {
        root,
        limits,
        summary: ExtractSummary::default(),
        entries: 0,
    };
    for entry in archive.entries().map_err(stream_err)? {
        let mut entry = entry.map_err(stream_err)?;
        extractor.entry(&mut entry).map_err(|e| match e {
            ExtractError::ReadEntry { .. } if exceeded.get() => ExtractError::StreamTooLarge {
                limit: stream_limit,
            },
            other => other,
        })?;
    }
    Ok(extractor.summary)
}

fn prepare_root(root: &Path) -> Result<(), ExtractError> {
    let root_err = |source| ExtractError::Root {
        path: root.to_path_buf(),
        source,
    };
    fs::create_dir_all(root).map_err(root_err)?;
    let meta = fs::metadata(root).map_err(root_err)?;
    if !meta.is_dir() {
        return Err(root_err(io::Error::other("not a directory")));
    }
    Ok(())
}

/// Reader that fails once more than `remaining` bytes have been read.
struct CappedReader<R> {
    inner: R,
    remaining: u64,
    exceeded: Rc<Cell<bool>>,
}

impl<R: Read> Read for CappedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.remaining == 0 {
            // Allow reading exactly up to the cap, but fail if there is more.
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => {
                    self.exceeded.set(true);
                    Err(io::Error::other("decompressed archive exceeds size limit"))
                }
            };
        }
        let max = usize::try_from(self.remaining)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let n = self.inner.read(&mut buf[..max])?;
        self.remaining -= n as u64;
        Ok(n)
    }
}

/// What kind of thing an entry asks to create.
enum Kind {
    File { size: u64, executable: bool },
    Dir,
    Symlink { target: String },
    HardLink { target: Vec<String> },
}

struct Extractor<'a> {
    root: &'a Path,
    limits: &'a ExtractLimits,
    summary: ExtractSummary,
    entries: u64,
}

impl Extractor<'_> {
    fn entry<R: Read>(&mut self, entry: &mut tar::Entry<'_, R>) -> Result<(), ExtractError> {
        let raw_name = entry.path_bytes().into_owned();
        let name = String::from_utf8_lossy(&raw_name).into_owned();
        let entry_type = entry.header().entry_type();
        if entry_type == EntryType::XGlobalHeader {
            // PAX global header (e.g. the commit id written by `git archive`).
            return Ok(());
        }
        self.entries += 1;
        if self.entries > self.limits.max_entries {
            return Err(ExtractError::TooManyEntries {
                limit: self.limits.max_entries,
            });
        }
        let unsafe_entry = |reason| ExtractError::UnsafeEntry {
            entry: name.clone(),
            reason,
        };

        // 1. Validate the name.
        let components = entry_components(&raw_name).map_err(unsafe_entry)?;

        // 2. Validate the type and, for links, the target.
        let kind = match entry_type {
            EntryType::Regular | EntryType::Continuous => {
                // Old (v7) archives mark directories with a trailing slash.
                if raw_name.ends_with(b"/") && entry.size() == 0 {
                    Kind::Dir
                } else {
                    let mode = entry.header().mode().unwrap_or(0o644);
                    Kind::File {
                        size: entry.size(),
                        executable: mode & 0o111 != 0,
                    }
                }
            }
            EntryType::Directory => Kind::Dir,
            EntryType::Symlink => {
                let target = link_target(entry).map_err(unsafe_entry)?;
                check_symlink_target(components.len().saturating_sub(1), &target)
                    .map_err(unsafe_entry)?;
                Kind::Symlink { target }
            }
            EntryType::Link => {
                let target = link_target(entry).map_err(unsafe_entry)?;
                let target_components = hard_link_components(&target).map_err(unsafe_entry)?;
                Kind::HardLink {
                    target: target_components,
                }
            }
            other => {
                return Err(unsafe_entry(UnsafeReason::UnsupportedType {
                    kind: type_name(other),
                }));
            }
        };

        let Some((last, parents)) = components.split_last() else {
            // "./" or similar: the root itself.
            return match kind {
                Kind::Dir => Ok(()),
                _ => Err(unsafe_entry(UnsafeReason::EmptyPath)),
            };
        };

        // 3. Validate the parents (no symlinks, no non-directories).
        let first_missing = check_parents(self.root, parents, &name)?;
        let mut path = self.root.to_path_buf();
        path.extend(parents);
        path.push(last);

        // 4. Validate against what is already at the path.
        let existing = lstat(&path, &name)?;
        match (&kind, &existing) {
            (_, None) => {}
            (Kind::Dir, Some(meta)) if meta.is_dir() => {}
            (Kind::Dir, Some(_)) => {
                return Err(unsafe_entry(UnsafeReason::CollidesWithNonDirectory));
            }
            (_, Some(meta)) if meta.is_dir() => {
                return Err(unsafe_entry(UnsafeReason::ReplacesDirectory));
            }
            (_, Some(_)) => {}
        }

        // 5. Validate hard link targets and size limits.
        let hard_link_source = match &kind {
            Kind::HardLink { target } => {
                let (source, meta) = self.hard_link_source(target, &name)?;
                if source == path {
                    return Err(unsafe_entry(UnsafeReason::HardLinkTargetInvalid {
                        target: target.join("/"),
                    }));
                }
                Some((source, meta))
            }
            _ => None,
        };
        let file_size = match (&kind, &hard_link_source) {
            (Kind::File { size, .. }, _) => Some(*size),
            (_, Some((_, meta))) => Some(meta.len()),
            _ => None,
        };
        if let Some(size) = file_size {
            let total = self.summary.bytes.saturating_add(size);
            if total > self.limits.max_total_size {
                return Err(ExtractError::TooLarge {
                    entry: name,
                    limit: self.limits.max_total_size,
                });
            }
        }

        // 6. Write.
        create_parents(self.root, parents, first_missing, &name)?;
        let write_err = |source| ExtractError::Write {
            entry: name.clone(),
            path: path.clone(),
            source,
        };
        if existing.is_some() && !matches!(kind, Kind::Dir) {
            fs::remove_file(&path).map_err(write_err)?;
        }
        match kind {
            Kind::Dir => {
                if existing.is_none() {
                    create_dir(&path).map_err(write_err)?;
                }
                self.summary.directories += 1;
            }
            Kind::File { size, executable } => {
                let mut file = create_file(&path, executable).map_err(write_err)?;
                let written = copy(entry, &mut file, &name, &path)?;
                if written != size {
                    return Err(ExtractError::ReadEntry {
                        entry: name.clone(),
                        source: io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            format!("expected {size} bytes, read {written}"),
                        ),
                    });
                }
                self.summary.files += 1;
                self.summary.bytes += written;
            }
            Kind::Symlink { target } => {
                make_symlink(&target, &path).map_err(write_err)?;
                self.summary.symlinks += 1;
            }
            Kind::HardLink { .. } => {
                if let Some((source, meta)) = hard_link_source {
                    let mut input = File::open(&source).map_err(write_err)?;
                    let mut file = create_file(&path, is_executable(&meta)).map_err(write_err)?;
                    let written = copy(&mut input, &mut file, &name, &path)?;
                    self.summary.files += 1;
                    self.summary.bytes += written;
                }
            }
        }
        Ok(())
    }

    /// Resolves a hard link target (relative to the archive root) to an
    /// existing regular file reached only through real directories.
    fn hard_link_source(
        &self,
        target: &[String],
        name: &str,
    ) -> Result<(PathBuf, fs::Metadata), ExtractError> {
        let invalid = || ExtractError::UnsafeEntry {
            entry: name.to_string(),
            reason: UnsafeReason::HardLinkTargetInvalid {
                target: target.join("/"),
            },
        };
        let Some((last, parents)) = target.split_last() else {
            return Err(invalid());
        };
        let mut path = self.root.to_path_buf();
        for parent in parents {
            path.push(parent);
            match lstat(&path, name)? {
                Some(meta) if meta.is_dir() => {}
                _ => return Err(invalid()),
            }
        }
        path.push(last);
        match lstat(&path, name)? {
            Some(meta) if meta.file_type().is_file() => Ok((path, meta)),
            _ => Err(invalid()),
        }
    }
}

/// Splits an entry name into normal components, refusing absolute names and `..`.
fn entry_components(raw: &[u8]) -> Result<Vec<String>, UnsafeReason> {
    if raw.is_empty() {
        return Err(UnsafeReason::EmptyPath);
    }
    let name = std::str::from_utf8(raw).map_err(|_| UnsafeReason::NotUtf8)?;
    if name.starts_with('/') {
        return Err(UnsafeReason::AbsolutePath);
    }
    let mut out = Vec::new();
    for component in name.split('/') {
        match component {
            "" | "." => {}
            ".." => return Err(UnsafeReason::EscapesRoot),
            normal => out.push(normal.to_string()),
        }
    }
    Ok(out)
}

fn link_target<R: Read>(entry: &tar::Entry<'_, R>) -> Result<String, UnsafeReason> {
    let raw = entry
        .link_name_bytes()
        .ok_or(UnsafeReason::EmptyLinkTarget)?;
    if raw.is_empty() {
        return Err(UnsafeReason::EmptyLinkTarget);
    }
    String::from_utf8(raw.into_owned()).map_err(|_| UnsafeReason::LinkTargetNotUtf8)
}

/// Checks a symlink target for a link whose parent directory is `depth`
/// levels below the root.
fn check_symlink_target(depth: usize, target: &str) -> Result<(), UnsafeReason> {
    if target.starts_with('/') {
        return Err(UnsafeReason::AbsoluteLinkTarget {
            target: target.to_string(),
        });
    }
    let mut depth = depth;
    let mut seen_normal = false;
    for component in target.split('/') {
        match component {
            "" | "." => {}
            ".." if seen_normal => {
                return Err(UnsafeReason::LinkTargetNotNormalized {
                    target: target.to_string(),
                });
            }
            ".." => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| UnsafeReason::LinkEscapesRoot {
                        target: target.to_string(),
                    })?;
            }
            _ => seen_normal = true,
        }
    }
    Ok(())
}

/// Hard link targets are relative to the archive root.
fn hard_link_components(target: &str) -> Result<Vec<String>, UnsafeReason> {
    if target.starts_with('/') {
        return Err(UnsafeReason::AbsoluteLinkTarget {
            target: target.to_string(),
        });
    }
    let mut out = Vec::new();
    for component in target.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                return Err(UnsafeReason::LinkEscapesRoot {
                    target: target.to_string(),
                });
            }
            normal => out.push(normal.to_string()),
        }
    }
    if out.is_empty() {
        return Err(UnsafeReason::EmptyLinkTarget);
    }
    Ok(out)
}

fn lstat(path: &Path, entry: &str) -> Result<Option<fs::Metadata>, ExtractError> {
    match fs::symlink_metadata(path) {
        Ok(meta) => Ok(Some(meta)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ExtractError::Write {
            entry: entry.to_string(),
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Checks that every existing parent is a real directory; returns the index
/// of the first parent that does not exist (`parents.len()` if all exist).
fn check_parents(root: &Path, parents: &[String], entry: &str) -> Result<usize, ExtractError> {
    let mut path = root.to_path_buf();
    for (i, parent) in parents.iter().enumerate() {
        path.push(parent);
        let rel = || parents[..=i].join("/");
        match lstat(&path, entry)? {
            None => return Ok(i),
            Some(meta) if meta.file_type().is_symlink() => {
                return Err(ExtractError::UnsafeEntry {
                    entry: entry.to_string(),
                    reason: UnsafeReason::ThroughSymlink { parent: rel() },
                });
            }
            Some(meta) if meta.is_dir() => {}
            Some(_) => {
                return Err(ExtractError::UnsafeEntry {
                    entry: entry.to_string(),
                    reason: UnsafeReason::ParentNotDirectory { parent: rel() },
                });
            }
        }
    }
    Ok(parents.len())
}

fn create_parents(
    root: &Path,
    parents: &[String],
    first_missing: usize,
    entry: &str,
) -> Result<(), ExtractError> {
    let mut path = root.to_path_buf();
    for (i, parent) in parents.iter().enumerate() {
        path.push(parent);
        if i >= first_missing {
            create_dir(&path).map_err(|source| ExtractError::Write {
                entry: entry.to_string(),
                path: path.clone(),
                source,
            })?;
        }
    }
    Ok(())
}

fn create_dir(path: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o755);
    }
    builder.create(path)?;
    set_mode(path, 0o755)
}

/// Creates a new file; never follows or reuses an existing path.
fn create_file(path: &Path, executable: bool) -> io::Result<File> {
    let mode = if executable { 0o755 } else { 0o644 };
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    let file = options.open(path)?;
    set_mode(path, mode)?;
    Ok(file)
}

fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(mode))
    }
    #[cfg(not(unix))]
    {
        let _ = (path, mode);
        Ok(())
    }
}

fn is_executable(meta: &fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        false
    }
}

/// Copies `reader` to `file`, attributing errors to the side that failed.
fn copy(
    reader: &mut impl Read,
    file: &mut File,
    entry: &str,
    path: &Path,
) -> Result<u64, ExtractError> {
    use std::io::Write;
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(ExtractError::ReadEntry {
                    entry: entry.to_string(),
                    source,
                });
            }
        };
        file.write_all(&buf[..n])
            .map_err(|source| ExtractError::Write {
                entry: entry.to_string(),
                path: path.to_path_buf(),
                source,
            })?;
        total += n as u64;
    }
}

fn make_symlink(target: &str, path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(target, path)
    }
    #[cfg(not(unix))]
    {
        let _ = (target, path);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "symlinks are only supported on unix",
        ))
    }
}

fn type_name(entry_type: EntryType) -> String {
    match entry_type {
        EntryType::Char => "character device".to_string(),
        EntryType::Block => "block device".to_string(),
        EntryType::Fifo => "fifo".to_string(),
        EntryType::GNUSparse => "sparse file".to_string(),
        EntryType::GNULongName | EntryType::GNULongLink | EntryType::XHeader => {
            format!("unattached extension header ({:?})", entry_type)
        }
        other => format!("entry type {:?}", char::from(other.as_byte())),
    }
}

#[cfg(test)]
mod tests;
