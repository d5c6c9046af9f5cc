use super::*;
use flate2::Compression;
use flate2::write::GzEncoder;
use std::io::Write;
use tar::{Builder, Header};

/// A sandbox: `outer` contains `root` (the extraction root) and is checked to
/// contain nothing else afterwards.
struct Sandbox {
    outer: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        let outer = tempfile::tempdir().unwrap();
        fs::create_dir(outer.path().join("root")).unwrap();
        Sandbox { outer }
    }

    fn root(&self) -> PathBuf {
        self.outer.path().join("root")
    }

    /// Asserts nothing was written next to the root (or at `/tmp/evil`-style
    /// absolute paths used by the tests).
    fn assert_nothing_outside(&self) {
        let names: Vec<_> = fs::read_dir(self.outer.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec!["root".to_string()], "written outside the root");
    }

    fn extract(&self, tgz: &[u8]) -> Result<ExtractSummary, ExtractError> {
        extract_tar_gz_bytes(tgz, &self.root(), &ExtractLimits::default())
    }
}

fn gzip(tar: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(tar).unwrap();
    enc.finish().unwrap()
}

/// Appends an entry with raw (unvalidated) name and link name.
fn raw(b: &mut Builder<Vec<u8>>, kind: EntryType, name: &str, link: Option<&str>, data: &[u8]) {
    let mut h = Header::new_gnu();
    {
        let old = h.as_old_mut();
        old.name.fill(0);
        old.name[..name.len()].copy_from_slice(name.as_bytes());
        if let Some(link) = link {
            old.linkname.fill(0);
            old.linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
    }
    h.set_entry_type(kind);
    h.set_size(data.len() as u64);
    h.set_mode(if kind == EntryType::Directory {
        0o755
    } else {
        0o644
    });
    h.set_cksum();
    b.append(&h, data).unwrap();
}

fn file(b: &mut Builder<Vec<u8>>, name: &str, data: &[u8]) {
    raw(b, EntryType::Regular, name, None, data);
}

fn finish(b: Builder<Vec<u8>>) -> Vec<u8> {
    gzip(&b.into_inner().unwrap())
}

fn unsafe_reason(err: ExtractError) -> (String, UnsafeReason) {
    match err {
        ExtractError::UnsafeEntry { entry, reason } => (entry, reason),
        other => panic!("expected UnsafeEntry, got {other:?}"),
    }
}

#[test]
fn extracts_valid_tree() {
    let sb = Sandbox::new();
    let mut b = Builder::new(Vec::new());
    raw(&mut b, EntryType::Directory, "./", None, b"");
    raw(&mut b, EntryType::Directory, "apps/", None, b"");
    file(&mut b, "apps/prod/kustomization.yaml", b"resources: []\n");
    file(&mut b, "./apps/prod/deploy.yaml", b"kind: Deployment\n");
    raw(
        &mut b,
        EntryType::Symlink,
        "current",
        Some("apps/prod"),
        b"",
    );
    raw(
        &mut b,
        EntryType::Symlink,
        "apps/prod/up",
        Some("../../apps"),
        b"",
    );
    raw(
        &mut b,
        EntryType::Symlink,
        "dangling",
        Some("does/not/exist"),
        b"",
    );
    raw(
        &mut b,
        EntryType::Link,
        "copy.yaml",
        Some("apps/prod/deploy.yaml"),
        b"",
    );
    let mut h = Header::new_gnu();
    h.set_path("bin/run.sh").unwrap();
    h.set_size(3);
    h.set_mode(0o4775); // setuid + group write must not survive
    h.set_cksum();
    b.append(&h, &b"#!\n"[..]).unwrap();
    let summary = sb.extract(&finish(b)).unwrap();

    let root = sb.root();
    assert_eq!(
        fs::read_to_string(root.join("apps/prod/kustomization.yaml")).unwrap(),
        "resources: []\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("current/deploy.yaml")).unwrap(),
        "kind: Deployment\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("copy.yaml")).unwrap(),
        "kind: Deployment\n"
    );
    assert!(root.join("apps/prod/up/prod").is_dir());
    assert_eq!(
        fs::read_link(root.join("dangling")).unwrap(),
        PathBuf::from("does/not/exist")
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &str| fs::metadata(root.join(p)).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode("bin/run.sh"), 0o755);
        assert_eq!(mode("apps/prod/deploy.yaml"), 0o644);
        assert_eq!(mode("apps/prod"), 0o755);
    }
    assert_eq!(summary.files, 4);
    assert_eq!(summary.symlinks, 3);
    assert_eq!(summary.directories, 1);
    assert_eq!(summary.bytes, 14 + 17 + 17 + 3);
    sb.assert_nothing_outside();
}

#[test]
fn builder_made_archive_with_long_names_and_pax_global_header() {
    let sb = Sandbox::new();
    let mut b = Builder::new(Vec::new());
    let mut g = Header::new_ustar();
    g.set_path("pax_global_header").unwrap();
    g.set_entry_type(EntryType::XGlobalHeader);
    let record = b"52 comment=0123456789012345678901234567890123456789\n";
    g.set_size(record.len() as u64);
    g.set_cksum();
    b.append(&g, &record[..]).unwrap();
    let long = format!("{}/file.yaml", "d".repeat(150));
    let mut h = Header::new_gnu();
    h.set_size(2);
    h.set_mode(0o644);
    b.append_data(&mut h, &long, &b"ok"[..]).unwrap();
    sb.extract(&finish(b)).unwrap();
    assert_eq!(fs::read_to_string(sb.root().join(&long)).unwrap(), "ok");
    assert!(!sb.root().join("pax_global_header").exists());
}

#[test]
fn refuses_path_traversal() {
    for name in ["../evil", "a/../../evil", "./../evil", "a/b/../../../evil"] {
        let sb = Sandbox::new();
        let mut b = Builder::new(Vec::new());
        file(&mut b, name, b"pwned");
        let err = sb.extract(&finish(b)).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("unsafe entry {name:?} in artifact: path escapes the root")
        );
        assert_eq!(
            unsafe_reason(err),
            (name.to_string(), UnsafeReason::EscapesRoot)
        );
        sb.assert_nothing_outside();
        assert_eq!(fs::read_dir(sb.root()).unwrap().count(), 0);
    }
}

#[test]
fn refuses_absolute_paths() {
    let sb = Sandbox::new();
    let target = sb.outer.path().join("abs-evil");
    let name = target.to_str().unwrap().to_string();
    let mut b = Builder::new(Vec::new());
    file(&mut b, &name, b"pwned");
    let (entry, reason) = unsafe_reason(sb.extract(&finish(b)).unwrap_err());
    assert_eq!(entry, name);
    assert_eq!(reason, UnsafeReason::AbsolutePath);
    assert!(!target.exists());
    sb.assert_nothing_outside();
}

#[test]
fn refuses_escaping_symlink_and_writes_through_it() {
    let sb = Sandbox::new();
    let mut b = Builder::new(Vec::new());
    raw(
        &mut b,
        EntryType::Symlink,
        "link",
        Some("../../outside"),
        b"",
    );
    file(&mut b, "link/file", b"pwned");
    let err = sb.extract(&finish(b)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unsafe entry \"link\" in artifact: link target \"../../outside\" escapes the root"
    );
    assert!(fs::symlink_metadata(sb.root().join("link")).is_err());
    sb.assert_nothing_outside();

    // One level up from the root is just as bad.
    let sb = Sandbox::new();
    let mut b = Builder::new(Vec::new());
    raw(&mut b, EntryType::Symlink, "a/link", Some("../.."), b"");
    let (_, reason) = unsafe_reason(sb.extract(&finish(b)).unwrap_err());
    assert!(matches!(reason, UnsafeReason::LinkEscapesRoot { .. }));
    sb.assert_nothing_outside();
}

#[test]
fn refuses_absolute_symlink() {
    let sb = Sandbox::new();
    let mut b = Builder::new(Vec::new());
    raw(&mut b, EntryType::Symlink, "etc", Some("/etc"), b"");
    let (entry, reason) = unsafe_reason(sb.extract(&finish(b)).unwrap_err());
    assert_eq!(entry, "etc");
    assert_eq!(
        reason,
        UnsafeReason::AbsoluteLinkTarget {
            target: "/etc".into()
        }
    );
    sb.assert_nothing_outside();
}

#[test]
fn refuses_dotdot_after_normal_component_in_symlink() {
    // `a -> .` is fine, but `b -> a/..` would resolve to the root's parent.
    let sb = Sandbox::new();
    let mut b = Builder::new(Vec::new());
    raw(&mut b, EntryType::Symlink, "a", Some("."), b"");
    raw(&mut b, EntryType::Symlink, "b", Some("a/.."), b"");
    file(&mut b, "b/evil", b"pwned");
    let (entry, reason) = unsafe_reason(sb.extract(&finish(b)).unwrap_err());
    assert_eq!(entry, "b");
    assert!(matches!(
        reason,
        UnsafeReason::LinkTargetNotNormalized { .. }
    ));
    sb.assert_nothing_outside();
}

#[test]
fn refuses_entries_through_in_root_symlink() {
    let sb = Sandbox::new();
    let mut b = Builder::new(Vec::new());
    raw(&mut b, EntryType::Directory, "real", None, b"");
    raw(&mut b, EntryType::Symlink, "link", Some("real"), b"");
    file(&mut b, "link/file", b"data");
    let err = sb.extract(&finish(b)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unsafe entry \"link/file\" in artifact: path goes through symlink \"link\""
    );
    assert!(!sb.root().join("real/file").exists());
    sb.assert_nothing_outside();
}

#[test]
fn refuses_hardlink_outside() {
    for (target, want) in [
        (
            "/etc/passwd",
            UnsafeReason::AbsoluteLinkTarget {
                target: "/etc/passwd".into(),
            },
        ),
        (
            "../../../../etc/passwd",
            UnsafeReason::LinkEscapesRoot {
                target: "../../../../etc/passwd".into(),
            },
        ),
        (
            "missing",
            UnsafeReason::HardLinkTargetInvalid {
                target: "missing".into(),
            },
        ),
    ] {
        let sb = Sandbox::new();
        let mut b = Builder::new(Vec::new());
        raw(&mut b, EntryType::Link, "passwd", Some(target), b"");
        let (entry, reason) = unsafe_reason(sb.extract(&finish(b)).unwrap_err());
        assert_eq!(entry, "passwd");
        assert_eq!(reason, want);
        assert!(!sb.root().join("passwd").exists());
        sb.assert_nothing_outside();
    }
}

#[test]
fn refuses_hardlink_to_symlink() {
    let sb = Sandbox::new();
    let outside = sb.outer.path().join("secret");
    let mut b = Builder::new(Vec::new());
    raw(&mut b, EntryType::Symlink, "s", Some("x"), b"");
    raw(&mut b, EntryType::Link, "h", Some("s"), b"");
    let (_, reason) = unsafe_reason(sb.extract(&finish(b)).unwrap_err());
    assert!(matches!(reason, UnsafeReason::HardLinkTargetInvalid { .. }));
    assert!(!outside.exists());
    sb.assert_nothing_outside();
}

#[test]
fn refuses_devices_and_fifos() {
    for (kind, want) in [
        (EntryType::Char, "character device"),
        (EntryType::Block, "block device"),
        (EntryType::Fifo, "fifo"),
    ] {
        let sb = Sandbox::new();
        let mut b = Builder::new(Vec::new());
        raw(&mut b, kind, "dev/null", None, b"");
        let err = sb.extract(&finish(b)).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("unsafe entry \"dev/null\" in artifact: {want} entries are not allowed")
        );
        assert_eq!(fs::read_dir(sb.root()).unwrap().count(), 0);
        sb.assert_nothing_outside();
    }
}

#[test]
fn later_file_replaces_symlink_without_following_it() {
    let sb = Sandbox::new();
    let victim = sb.outer.path().join("victim");
    fs::write(&victim, "original").unwrap();
    // A dangling in-root symlink, then a file of the same name.
    let mut b = Builder::new(Vec::new());
    raw(&mut b, EntryType::Symlink, "f", Some("target"), b"");
    file(&mut b, "f", b"new");
    sb.extract(&finish(b)).unwrap();
    assert_eq!(fs::read_to_string(sb.root().join("f")).unwrap(), "new");
    assert!(!sb.root().join("target").exists());
    assert_eq!(fs::read_to_string(&victim).unwrap(), "original");
}

#[test]
fn refuses_replacing_directory_and_dir_over_file() {
    let sb = Sandbox::new();
    let mut b = Builder::new(Vec::new());
    file(&mut b, "d/x", b"1");
    raw(&mut b, EntryType::Symlink, "d", Some("elsewhere"), b"");
    let (_, reason) = unsafe_reason(sb.extract(&finish(b)).unwrap_err());
    assert_eq!(reason, UnsafeReason::ReplacesDirectory);

    let sb = Sandbox::new();
    let mut b = Builder::new(Vec::new());
    file(&mut b, "f", b"1");
    raw(&mut b, EntryType::Directory, "f/", None, b"");
    let (_, reason) = unsafe_reason(sb.extract(&finish(b)).unwrap_err());
    assert_eq!(reason, UnsafeReason::CollidesWithNonDirectory);

    let sb = Sandbox::new();
    let mut b = Builder::new(Vec::new());
    file(&mut b, "f", b"1");
    file(&mut b, "f/g", b"1");
    let (_, reason) = unsafe_reason(sb.extract(&finish(b)).unwrap_err());
    assert_eq!(
        reason,
        UnsafeReason::ParentNotDirectory { parent: "f".into() }
    );
}

#[test]
fn enforces_size_limit_before_writing() {
    let sb = Sandbox::new();
    let mut b = Builder::new(Vec::new());
    file(&mut b, "a", &[b'a'; 600]);
    file(&mut b, "big", &[b'b'; 600]);
    let limits = ExtractLimits {
        max_total_size: 1000,
        ..ExtractLimits::default()
    };
    let err = extract_tar_gz_bytes(&finish(b), &sb.root(), &limits).unwrap_err();
    assert_eq!(
        err.to_string(),
        "artifact exceeds the maximum uncompressed size of 1000 bytes (at entry \"big\")"
    );
    assert!(sb.root().join("a").exists());
    assert!(!sb.root().join("big").exists());
}

#[test]
fn hard_link_copies_count_towards_size_limit() {
    let sb = Sandbox::new();
    let mut b = Builder::new(Vec::new());
    file(&mut b, "a", &[b'a'; 600]);
    raw(&mut b, EntryType::Link, "b", Some("a"), b"");
    let limits = ExtractLimits {
        max_total_size: 1000,
        ..ExtractLimits::default()
    };
    let err = extract_tar_gz_bytes(&finish(b), &sb.root(), &limits).unwrap_err();
    assert!(matches!(err, ExtractError::TooLarge { ref entry, limit: 1000 } if entry == "b"));
}

#[test]
fn enforces_entry_limit() {
    let sb = Sandbox::new();
    let mut b = Builder::new(Vec::new());
    for i in 0..5 {
        file(&mut b, &format!("f{i}"), b"");
    }
    let limits = ExtractLimits {
        max_entries: 4,
        ..ExtractLimits::default()
    };
    let err = extract_tar_gz_bytes(&finish(b), &sb.root(), &limits).unwrap_err();
    assert!(
        matches!(err, ExtractError::TooManyEntries { limit: 4 }),
        "{err}"
    );
    assert_eq!(err.to_string(), "artifact has more than 4 entries");
}

#[test]
fn gzip_bomb_is_stopped_by_stream_cap() {
    // A header claiming a tiny file followed by megabytes of zero-filled
    // garbage would be skipped by tar; instead claim a huge size with a small
    // size limit so the stream cap triggers while reading.
    let sb = Sandbox::new();
    let mut tar = Vec::new();
    {
        let mut h = Header::new_gnu();
        h.set_path("pad").unwrap();
        h.set_size(0);
        h.set_cksum();
        tar.extend_from_slice(h.as_bytes());
    }
    {
        // PAX local header with a large (zero-filled) body: tar reads it fully.
        let mut h = Header::new_ustar();
        h.set_path("PaxHeaders/x").unwrap();
        h.set_entry_type(EntryType::XHeader);
        h.set_size(8 << 20);
        h.set_cksum();
        tar.extend_from_slice(h.as_bytes());
        tar.resize(tar.len() + (8 << 20), 0);
    }
    let limits = ExtractLimits {
        max_total_size: 1024,
        max_entries: 10,
    };
    let err = extract_tar_gz_bytes(&gzip(&tar), &sb.root(), &limits).unwrap_err();
    assert!(matches!(err, ExtractError::StreamTooLarge { .. }), "{err}");
}

#[test]
fn rejects_non_gzip_input() {
    let sb = Sandbox::new();
    let err = sb.extract(b"definitely not gzip").unwrap_err();
    assert!(matches!(err, ExtractError::Archive { .. }), "{err}");
}

#[test]
fn refuses_non_directory_entries_naming_the_root() {
    for (kind, name, link) in [
        (EntryType::Symlink, "./", Some("x")),
        (EntryType::Regular, ".", None),
        (EntryType::Link, "", Some("a")),
    ] {
        let sb = Sandbox::new();
        let mut b = Builder::new(Vec::new());
        raw(&mut b, kind, name, link, b"");
        let (entry, reason) = unsafe_reason(sb.extract(&finish(b)).unwrap_err());
        assert_eq!(entry, name);
        assert_eq!(reason, UnsafeReason::EmptyPath, "{kind:?} {name:?}");
        sb.assert_nothing_outside();
    }
}

#[test]
fn symlink_target_rules() {
    assert!(check_symlink_target(0, "a/b").is_ok());
    assert!(check_symlink_target(0, "./a").is_ok());
    assert!(check_symlink_target(1, "..").is_ok());
    assert!(check_symlink_target(2, "../../x").is_ok());
    assert!(check_symlink_target(0, "..").is_err());
    assert!(check_symlink_target(2, "../../..").is_err());
    assert!(check_symlink_target(2, "x/../y").is_err());
    assert!(check_symlink_target(0, "/abs").is_err());
}
