//! Property tests for the parsers that read untrusted input: manifests and artifacts.

use std::path::Path;

use artifact::{Digest, ExtractLimits, extract_tar_gz_bytes};
use kustomize::target::parse_resources;
use proptest::prelude::*;

/// Path components an attacker would try, mixed with ordinary ones.
fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("..".to_string()),
        Just(".".to_string()),
        Just(String::new()),
        Just("link".to_string()),
        "[a-z]{1,6}",
    ]
}

fn entry_path() -> impl Strategy<Value = String> {
    (any::<bool>(), prop::collection::vec(component(), 1..5)).prop_map(|(absolute, parts)| {
        format!("{}{}", if absolute { "/" } else { "" }, parts.join("/"))
    })
}

#[derive(Debug, Clone)]
enum Entry {
    File(String),
    Dir(String),
    Symlink(String, String),
    HardLink(String, String),
}

fn entry() -> impl Strategy<Value = Entry> {
    prop_oneof![
        entry_path().prop_map(Entry::File),
        entry_path().prop_map(Entry::Dir),
        (entry_path(), entry_path()).prop_map(|(p, t)| Entry::Symlink(p, t)),
        (entry_path(), entry_path()).prop_map(|(p, t)| Entry::HardLink(p, t)),
    ]
}

/// A tar.gz whose raw entry names are written verbatim, so `..` and absolute paths get in.
fn tarball(entries: &[Entry]) -> Vec<u8> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    for entry in entries {
        let (name, link, kind, body): (&str, &str, tar::EntryType, &[u8]) = match entry {
            Entry::File(p) => (p, "", tar::EntryType::Regular, b"escaped"),
            Entry::Dir(p) => (p, "", tar::EntryType::Directory, b""),
            Entry::Symlink(p, t) => (p, t, tar::EntryType::Symlink, b""),
            Entry::HardLink(p, t) => (p, t, tar::EntryType::Link, b""),
        };
        if name.len() > 99 || link.len() > 99 {
            continue;
        }
        let mut header = tar::Header::new_old();
        header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        header.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        header.set_entry_type(kind);
        header.set_size(body.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append(&header, body).expect("append");
    }
    builder.into_inner().expect("tar").finish().expect("gzip")
}

/// Every path under `dir`, without following symlinks.
fn tree(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pending.push(path.clone());
            }
            found.push(path);
        }
    }
    found.sort();
    found
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever the archive holds, extraction writes only inside the root: the sandbox
    /// around the root ends up exactly as it was.
    #[test]
    fn extraction_never_writes_outside_the_root(entries in prop::collection::vec(entry(), 1..8)) {
        let sandbox = tempfile::tempdir().expect("sandbox");
        let root = sandbox.path().join("a/b/root");
        std::fs::create_dir_all(&root).expect("root");
        let before: Vec<_> = tree(sandbox.path()).into_iter().filter(|p| !p.starts_with(&root)).collect();
        let _ = extract_tar_gz_bytes(&tarball(&entries), &root, &ExtractLimits::default());
        let after: Vec<_> = tree(sandbox.path()).into_iter().filter(|p| !p.starts_with(&root)).collect();
        prop_assert_eq!(before, after);
    }

    /// Arbitrary bytes are an error or an archive, never a panic.
    #[test]
    fn extraction_of_arbitrary_bytes_does_not_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let root = tempfile::tempdir().expect("root");
        let _ = extract_tar_gz_bytes(&bytes, root.path(), &ExtractLimits::default());
    }

    /// Any text is a list of objects or an error naming the file, never a panic.
    #[test]
    fn manifest_parsing_does_not_panic(text in "(\\PC|\n| |-|:|\\[|\\{|&|\\*|!)*") {
        if let Err(err) = parse_resources(&text, "fuzz.yaml") {
            prop_assert!(err.to_string().starts_with("fuzz.yaml"));
        }
    }

    /// Digests parse or fail cleanly.
    #[test]
    fn digest_parsing_does_not_panic(text in "\\PC{0,80}") {
        let _ = Digest::parse(&text);
    }
}
