//! Reading a file that a source artifact or a command line names, without trusting what it
//! is: only regular files are read (a FIFO would block forever, a device such as
//! `/dev/zero` would never end), and never more than a byte limit.
//!
//! The type is checked on the opened handle, not on the path, so a file swapped for a FIFO
//! between the check and the read is still refused; on Unix the open itself does not block
//! on a FIFO (`O_NONBLOCK`) and never makes a terminal the controlling one (`O_NOCTTY`).

use std::fs::{File, Metadata};
use std::io::Read;
use std::path::Path;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The path names something other than a regular file (after symlinks).
    #[error("is {kind}, not a regular file")]
    NotRegular {
        /// What it is instead, as an article and a noun ("a named pipe (FIFO)").
        kind: &'static str,
    },
    /// The file holds more bytes than the caller accepts.
    #[error("is larger than the limit of {}", format_size(*limit))]
    TooLarge {
        /// The limit, in bytes.
        limit: u64,
    },
    /// The file could not be opened or read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Reads the regular file at `path` (symlinks followed), refusing anything else and any
/// file of more than `limit` bytes. The limit is enforced while reading, so a file that
/// grows after it was opened is refused as well.
pub fn read(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    let file = open(path)?;
    let metadata = file.metadata()?;
    check_regular(&metadata)?;
    if metadata.len() > limit {
        return Err(FileError::TooLarge { limit });
    }
    let capacity = usize::try_from(metadata.len()).unwrap_or(0);
    let mut bytes = Vec::with_capacity(capacity);
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge { limit });
    }
    Ok(bytes)
}

/// Reads the regular file at `path` as UTF-8 text (see [`read`]).
pub fn read_to_string(path: &Path, limit: u64) -> Result<String, FileError> {
    String::from_utf8(read(path, limit)?).map_err(|_| {
        FileError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not valid UTF-8",
        ))
    })
}

/// Refuses anything but a regular file, naming what it is instead.
pub fn check_regular(metadata: &Metadata) -> Result<(), FileError> {
    match special_kind(metadata) {
        Some(kind) => Err(FileError::NotRegular { kind }),
        None => Ok(()),
    }
}

/// What a non-regular file is, or `None` for a regular file.
fn special_kind(metadata: &Metadata) -> Option<&'static str> {
    let file_type = metadata.file_type();
    if file_type.is_file() {
        return None;
    }
    if file_type.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return Some("a named pipe (FIFO)");
        }
        if file_type.is_socket() {
            return Some("a socket");
        }
        if file_type.is_char_device() {
            return Some("a character device");
        }
        if file_type.is_block_device() {
            return Some("a block device");
        }
    }
    Some("a special file")
}

#[cfg(unix)]
fn open(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

#[cfg(not(unix))]
fn open(path: &Path) -> std::io::Result<File> {
    File::open(path)
}

/// A byte count for messages: "5 MiB", "512 KiB", "100 bytes".
pub fn format_size(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * KIB;
    const GIB: u64 = 1024 * MIB;
    match bytes {
        b if b >= GIB && b % GIB == 0 => format!("{} GiB", b / GIB),
        b if b >= MIB && b % MIB == 0 => format!("{} MiB", b / MIB),
        b if b >= KIB && b % KIB == 0 => format!("{} KiB", b / KIB),
        b if b >= MIB => format!("{:.1} MiB", b as f64 / MIB as f64),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_regular_file_within_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.yaml");
        std::fs::write(&path, "kind: A\n").unwrap();
        assert_eq!(read(&path, 8).unwrap(), b"kind: A\n");
        assert_eq!(read_to_string(&path, 100).unwrap(), "kind: A\n");
    }

    #[test]
    fn refuses_a_file_over_the_limit_before_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        let file = File::create(&path).unwrap();
        // A sparse file of 1.5 GiB: refused from its size, nothing is read.
        file.set_len(3 << 29).unwrap();
        let err = read(&path, 5 << 20).unwrap_err();
        assert_eq!(err.to_string(), "is larger than the limit of 5 MiB");
    }

    #[test]
    fn refuses_directories() {
        let dir = tempfile::tempdir().unwrap();
        let err = read(dir.path(), 10).unwrap_err();
        assert_eq!(err.to_string(), "is a directory, not a regular file");
    }

    #[cfg(unix)]
    #[test]
    fn refuses_devices_and_symlinks_to_them_without_reading() {
        let err = read(Path::new("/dev/zero"), 1 << 30).unwrap_err();
        assert_eq!(err.to_string(), "is a character device, not a regular file");
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("zero.yaml");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(matches!(
            read(&link, 1 << 30),
            Err(FileError::NotRegular {
                kind: "a character device"
            })
        ));
    }

    #[cfg(unix)]
    #[test]
    fn refuses_a_fifo_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe.yaml");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        // No writer ever opens the FIFO: a blocking open would hang this test.
        let err = read(&fifo, 100).unwrap_err();
        assert_eq!(
            err.to_string(),
            "is a named pipe (FIFO), not a regular file"
        );
    }

    #[test]
    fn formats_sizes_for_messages() {
        assert_eq!(format_size(5 << 20), "5 MiB");
        assert_eq!(format_size(512 << 10), "512 KiB");
        assert_eq!(format_size(100), "100 bytes");
        assert_eq!(format_size(3 << 29), "1536 MiB");
        assert_eq!(format_size((5 << 20) + 1), "5.0 MiB");
    }
}
