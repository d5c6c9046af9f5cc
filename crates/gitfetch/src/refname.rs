//! What a ref given by the user asks for, and which of a repository's refs it names.

use gix::ObjectId;

/// The shortest abbreviated commit id accepted, as in git.
const MIN_ABBREV: usize = 4;

/// What `git_ref` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wanted {
    /// The remote's `HEAD` (an empty ref, or `HEAD`).
    Head,
    /// A branch, a tag or another ref, by full or short name.
    Name(String),
    /// A full commit id (git fetches a full hexadecimal id as an object, never as a name).
    Id(ObjectId),
    /// Hex digits that may be a short commit id, or a ref name made of hex digits: the
    /// name wins when a ref has it.
    Prefix(gix::hash::Prefix, String),
}

/// Why a ref is not one git fetches.
#[derive(Debug, thiserror::Error)]
pub enum RefNameError {
    /// A commit id, full or abbreviated, that gix does not read.
    #[error("{0}")]
    Id(#[from] gix::Error),
    /// A character git refuses in ref names.
    #[error("it contains {0:?}")]
    Character(char),
    /// A shape git refuses (`..`, `//`, a leading `/`, a `.lock` component, ...).
    #[error("git does not allow that name")]
    Shape,
}

/// Reads `git_ref` as `git fetch <url> <ref>` would, with abbreviated commit ids besides.
pub(crate) fn parse(git_ref: &str) -> Result<Wanted, RefNameError> {
    if git_ref.is_empty() || git_ref == "HEAD" {
        return Ok(Wanted::Head);
    }
    let hex = git_ref.bytes().all(|b| b.is_ascii_hexdigit());
    let full_len = gix::hash::Kind::Sha1.len_in_hex();
    if hex && git_ref.len() == full_len {
        let id = ObjectId::from_hex(git_ref.as_bytes())?;
        return Ok(Wanted::Id(id));
    }
    check_name(git_ref)?;
    if hex && (MIN_ABBREV..full_len).contains(&git_ref.len()) {
        let prefix = gix::hash::Prefix::from_hex(&git_ref.to_ascii_lowercase())?;
        return Ok(Wanted::Prefix(prefix, git_ref.to_string()));
    }
    Ok(Wanted::Name(git_ref.to_string()))
}

/// git's rules for a ref name (`git check-ref-format`), as far as a fetch needs them.
fn check_name(name: &str) -> Result<(), RefNameError> {
    let bad_char = name
        .chars()
        .find(|c| c.is_ascii_control() || " ~^:?*[\\".contains(*c));
    if let Some(c) = bad_char {
        return Err(RefNameError::Character(c));
    }
    if name.starts_with('/')
        || name.ends_with('/')
        || name.ends_with('.')
        || name.contains("//")
        || name.contains("..")
        || name.contains("@{")
        || name == "@"
    {
        return Err(RefNameError::Shape);
    }
    let component_bad = name
        .split('/')
        .any(|c| c.starts_with('.') || c.ends_with(".lock"));
    if component_bad {
        return Err(RefNameError::Shape);
    }
    Ok(())
}

/// The full names a short name may stand for, in git's order of preference
/// (`ref_rev_parse_rules`): the earlier, the stronger.
pub(crate) fn candidates(name: &str) -> [String; 6] {
    [
        name.to_string(),
        format!("refs/{name}"),
        format!("refs/tags/{name}"),
        format!("refs/heads/{name}"),
        format!("refs/remotes/{name}"),
        format!("refs/remotes/{name}/HEAD"),
    ]
}

/// Among `refs` (full names as a server advertises them), the one `name` means, as
/// `git fetch` picks it: the candidate earliest in [`candidates`]. Only `HEAD` and names
/// under `refs/` count, as only those are advertised.
pub(crate) fn pick<'a>(name: &str, refs: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let candidates = candidates(name);
    refs.into_iter()
        .filter(|r| *r == "HEAD" || r.starts_with("refs/"))
        .filter_map(|r| candidates.iter().position(|c| c == r).map(|rank| (rank, r)))
        .min_by_key(|(rank, _)| *rank)
        .map(|(_, r)| r)
}

/// The ref as messages show it: quoted, `HEAD` for an empty one.
pub(crate) fn label(git_ref: &str) -> String {
    if git_ref.is_empty() {
        "HEAD".to_string()
    } else {
        format!("{git_ref:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_of_refs() {
        let parsed = |git_ref: &str| parse(git_ref).expect("a ref git fetches");
        assert_eq!(parsed(""), Wanted::Head);
        assert_eq!(parsed("HEAD"), Wanted::Head);
        assert_eq!(parsed("main"), Wanted::Name("main".into()));
        assert_eq!(parsed("v1.2.3"), Wanted::Name("v1.2.3".into()));
        assert_eq!(parsed("abc"), Wanted::Name("abc".into()));
        assert!(matches!(parse("abcd"), Ok(Wanted::Prefix(_, s)) if s == "abcd"));
        let full = "0123456789abcdef0123456789abcdef01234567";
        assert!(matches!(parse(full), Ok(Wanted::Id(id)) if id == full));
        assert!(matches!(parse("a..b"), Err(RefNameError::Shape)));
        assert!(matches!(parse("a b"), Err(RefNameError::Character(' '))));
        assert!(matches!(
            parse("refs/heads/x.lock"),
            Err(RefNameError::Shape)
        ));
        assert_eq!(
            parse("a~b").map(|_| ()).unwrap_err().to_string(),
            "it contains '~'"
        );
    }

    #[test]
    fn picks_as_git_does() {
        let refs = ["HEAD", "refs/heads/v1", "refs/tags/v1", "refs/heads/main"];
        assert_eq!(pick("v1", refs), Some("refs/tags/v1"));
        assert_eq!(pick("main", refs), Some("refs/heads/main"));
        assert_eq!(pick("heads/main", refs), Some("refs/heads/main"));
        assert_eq!(pick("refs/heads/v1", refs), Some("refs/heads/v1"));
        assert_eq!(pick("HEAD", refs), Some("HEAD"));
        assert_eq!(pick("nope", refs), None);
        assert_eq!(pick("ain", refs), None);
    }
}
