//! Where a repository URL points, how it is written in messages, and how a submodule's
//! relative URL is read against its parent's.

use std::path::PathBuf;

/// Where a repository lives, as far as fetching it goes.
#[derive(Debug, Clone)]
pub(crate) enum Location {
    /// A repository on this machine (`file://` URLs and plain paths): its objects are read
    /// in place, no transport is involved.
    Local(PathBuf),
    /// A repository reached over the network (`http(s)://`, `ssh://`, scp-style, `git://`).
    Remote(gix::Url),
}

/// Reads `url` as git does.
pub(crate) fn classify(url: &str) -> Result<Location, String> {
    if url.is_empty() {
        return Err("the URL is empty".to_string());
    }
    let parsed = gix::url::parse(gix::bstr::BStr::new(url)).map_err(|e| crate::error::chain(&e))?;
    match parsed.scheme {
        gix::url::Scheme::File => {
            if let Some(host) = parsed.host().filter(|h| !h.is_empty() && *h != "localhost") {
                return Err(format!(
                    "file URLs on another host ({host}) are not supported"
                ));
            }
            let path = gix::path::from_bstring(parsed.path.clone())
                .map_err(|_| "the path is not valid on this system".to_string())?;
            Ok(Location::Local(path))
        }
        gix::url::Scheme::Http
        | gix::url::Scheme::Https
        | gix::url::Scheme::Ssh
        | gix::url::Scheme::Git => Ok(Location::Remote(parsed)),
        other => Err(format!("the {} protocol is not supported", other.as_str())),
    }
}

/// `url` as it may appear in a message: for a URL with a scheme, user information is
/// removed when it holds a password, and always for `http(s)` (where a user name alone is
/// often a token). scp-style `user@host:path` has no password and is kept.
pub(crate) fn redact(url: &str) -> String {
    match secret_span(url) {
        Some((start, end)) => format!("{}{}", &url[..start], &url[end..]),
        None => url.to_string(),
    }
}

/// Removes from `text` every trace of the credentials in `url`: the URL itself is replaced
/// by its redacted form, the user information is dropped, and the secret (the password,
/// or an `http(s)` user name, which is often a token) is replaced wherever it appears, as
/// written in the URL and percent-decoded. Secrets shorter than 4 characters are only
/// removed as part of the URL, so that a message is not riddled with replacements.
pub(crate) fn scrub(text: &str, url: &str) -> String {
    let Some((start, end)) = secret_span(url) else {
        return text.to_string();
    };
    let userinfo = &url[start..end];
    let mut out = text.replace(url, &redact(url));
    out = out.replace(userinfo, "");
    let credentials = userinfo.trim_end_matches('@');
    let secret = match credentials.split_once(':') {
        Some((_, password)) => password,
        None if is_http(url) => credentials,
        None => "",
    };
    let mut user = None;
    if let Some((name, _)) = credentials.split_once(':').filter(|_| is_http(url)) {
        user = Some(name);
    }
    for value in [Some(secret), user].into_iter().flatten() {
        for form in [value.to_string(), percent_decode(value)] {
            if form.chars().count() >= 4 {
                out = out.replace(&form, "<redacted>");
            }
        }
    }
    out
}

/// `%XX` escapes decoded; the input as it is when they do not make UTF-8.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

/// The byte range of `user[:password]@` in `url` when it must not be shown.
fn secret_span(url: &str) -> Option<(usize, usize)> {
    let scheme_end = url.find("://")? + 3;
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let at = rest[..authority_end].rfind('@')?;
    let userinfo = &rest[..at];
    if userinfo.contains(':') || is_http(url) {
        Some((scheme_end, scheme_end + at + 1))
    } else {
        None
    }
}

fn is_http(url: &str) -> bool {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// Reads a submodule URL from `.gitmodules` against the URL of the repository that holds it,
/// as `git submodule` does: `./x` and `../x` are relative to the parent's URL, anything else
/// stands on its own.
pub(crate) fn join_submodule_url(parent: &str, submodule: &str) -> Result<String, String> {
    if !(submodule.starts_with("./") || submodule.starts_with("../")) {
        return Ok(submodule.to_string());
    }
    let mut base = parent.trim_end_matches('/').to_string();
    // The part of the parent URL that cannot be stripped: `scheme://host` or `host:` of an
    // scp-style URL.
    let floor = match base.find("://") {
        Some(i) => base[i + 3..]
            .find('/')
            .map_or(base.len(), |slash| i + 3 + slash),
        None if is_scp_like(&base) => base.find(':').map_or(0, |c| c + 1),
        None => 0,
    };
    let mut separator = "/";
    let mut rest = submodule;
    loop {
        if let Some(tail) = rest.strip_prefix("./") {
            rest = tail;
        } else if let Some(tail) = rest.strip_prefix("../") {
            rest = tail;
            let stripped = &base[floor..];
            match stripped.rfind('/') {
                Some(slash) => base.truncate(floor + slash),
                None if floor > 0 && !stripped.is_empty() => {
                    base.truncate(floor);
                    if base.ends_with(':') {
                        separator = "";
                    }
                }
                None => {
                    return Err(format!(
                        "cannot resolve the relative URL {submodule:?} against {}",
                        redact(parent)
                    ));
                }
            }
        } else {
            break;
        }
    }
    if base.ends_with('/') || base.ends_with(':') {
        separator = "";
    }
    Ok(format!("{base}{separator}{rest}"))
}

/// `user@host:path` or `host:path` (git's rule: a colon before any slash, and not a
/// Windows drive letter).
fn is_scp_like(url: &str) -> bool {
    match (url.find(':'), url.find('/')) {
        (Some(colon), Some(slash)) => colon < slash && colon > 1,
        (Some(colon), None) => colon > 1,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_removed() {
        assert_eq!(
            redact("https://user:pw@example.com/a/b.git"),
            "https://example.com/a/b.git"
        );
        assert_eq!(
            redact("https://token@example.com/a.git"),
            "https://example.com/a.git"
        );
        assert_eq!(
            redact("ssh://git:secret@example.com/a.git"),
            "ssh://example.com/a.git"
        );
        assert_eq!(
            redact("ssh://git@example.com/a.git"),
            "ssh://git@example.com/a.git"
        );
        assert_eq!(
            redact("git@example.com:org/a.git"),
            "git@example.com:org/a.git"
        );
        assert_eq!(redact("/tmp/repo"), "/tmp/repo");
        assert_eq!(redact("https://example.com/a@b"), "https://example.com/a@b");
    }

    #[test]
    fn scrub_removes_credentials_in_any_form() {
        let url = "https://alice:s3cret@example.com/r.git";
        let text = format!("failed to reach {url:?}; auth alice:s3cret@ said s3cret");
        let out = scrub(&text, url);
        assert!(!out.contains("s3cret") && !out.contains("alice"), "{out}");
        assert!(out.contains("example.com/r.git"), "{out}");

        let url = "https://ghp_token123@example.com/r.git";
        let out = scrub("user ghp_token123 refused", url);
        assert_eq!(out, "user <redacted> refused");

        let url = "https://u:p%40ssword@example.com/r.git";
        let out = scrub("password p@ssword or p%40ssword", url);
        assert_eq!(out, "password <redacted> or <redacted>");

        // Short secrets go with the URL only; other text keeps its letters.
        let url = "https://a:b@example.com/r.git";
        assert_eq!(
            scrub(&format!("a b at {url}"), url),
            "a b at https://example.com/r.git"
        );
    }

    #[test]
    fn relative_submodule_urls() {
        let cases = [
            (
                "https://h/org/repo.git",
                "../other.git",
                "https://h/org/other.git",
            ),
            (
                "https://h/org/repo.git/",
                "./sub",
                "https://h/org/repo.git/sub",
            ),
            ("https://h/org/repo", "../../x", "https://h/x"),
            ("git@h:org/repo.git", "../x.git", "git@h:org/x.git"),
            ("git@h:repo.git", "../x.git", "git@h:x.git"),
            ("/tmp/a/super", "../sub", "/tmp/a/sub"),
            ("file:///tmp/a/super", "../sub", "file:///tmp/a/sub"),
            ("https://h/r", "https://other/x", "https://other/x"),
        ];
        for (parent, sub, want) in cases {
            assert_eq!(
                join_submodule_url(parent, sub).as_deref(),
                Ok(want),
                "{parent} + {sub}"
            );
        }
        assert!(join_submodule_url("https://h", "../x").is_err());
    }

    #[test]
    fn locations() {
        assert!(matches!(
            classify("file:///tmp/x"),
            Ok(Location::Local(p)) if p == std::path::Path::new("/tmp/x")
        ));
        assert!(matches!(classify("/tmp/x"), Ok(Location::Local(_))));
        assert!(matches!(
            classify("https://example.com/x.git"),
            Ok(Location::Remote(_))
        ));
        assert!(matches!(
            classify("git@example.com:x.git"),
            Ok(Location::Remote(_))
        ));
        assert!(classify("").is_err());
    }
}
