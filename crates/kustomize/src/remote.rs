//! Remote resources: git repositories named by URL (`https://github.com/org/repo//dir?ref=v1`)
//! and files named by http(s) URL, as kustomize v5.8 reads them.
//!
//! The engine has no network code. The program embedding it implements [`RemoteFetcher`]
//! (clone a repository at a ref, fetch the bytes of a URL) and passes it in
//! [`crate::BuildOptions::remote_fetcher`] or [`crate::loader::Loader::with_remote_fetcher`].
//! Without a fetcher every remote entry is refused by name, as before.
//!
//! [`RepoSpec::parse`] splits a URL into what kustomize hands to git (the clone URL, the ref,
//! the timeout, whether to fetch submodules) and the directory inside the clone that holds the
//! kustomization, with kustomize's exact rules (see its `repospec.go`).

use std::path::PathBuf;
use std::time::Duration;

/// How long git may run for one clone unless the URL says otherwise (`?timeout=`): 27 seconds.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(27);

/// The most remote repositories and files one build fetches. kustomize has no bound; a
/// kustomization listing thousands of remote bases (or a diamond of remote bases nested a
/// few levels deep) is refused instead of cloning without end.
pub const MAX_REMOTE_FETCHES: usize = 256;

/// A git repository, a ref in it and a directory inside it, as parsed from a remote URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepoSpec {
    /// The URL as written in the kustomization (used to detect cycles).
    pub raw: String,
    /// Scheme, user and host, with the separator that follows
    /// (`https://github.com/`, `git@github.com:`, `file://`).
    pub host: String,
    /// The repository's path on the host (`kubernetes-sigs/kustomize`, `org/repo.git`,
    /// `/abs/path/to/repo` for `file://`).
    pub repo_path: String,
    /// The directory inside the repository holding the kustomization, relative to its root
    /// (empty for the root; a trailing `/` is kept as written).
    pub kust_root_path: String,
    /// The branch, tag or commit to check out (`?ref=`, else `?version=`); empty for the
    /// remote's default branch (`HEAD`).
    pub git_ref: String,
    /// Whether git submodules are fetched too (`?submodules=`, default true).
    pub submodules: bool,
    /// How long the git commands of one clone may run (`?timeout=`, default 27s).
    pub timeout: Duration,
}

/// Why a name is not a git repository URL (kustomize's wording).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RepoSpecError {
    /// An absolute local path.
    #[error("uri looks like abs path: {0}")]
    AbsolutePath(String),
    /// No scheme kustomize clones from, and not scp-style (`user@host:path`).
    #[error("failed to parse scheme")]
    Scheme,
    /// Nothing after the scheme.
    #[error("failed to parse host segment")]
    Host,
    /// No repository path (fewer than `org/repo` segments and no `.git`, `_git/` or `//`).
    #[error("failed to parse repo path segment")]
    RepoPath,
    /// The directory inside the repository climbs out of it (`//../x`).
    #[error("url path exits repo: {0}")]
    ExitsRepo(String),
}

const FILE_SCHEME: &str = "file://";
const HTTP_SCHEME: &str = "http://";
const HTTPS_SCHEME: &str = "https://";
const SSH_SCHEME: &str = "ssh://";
/// `_git/`: Azure DevOps and TFS put the repository right after it.
const GIT_ROOT_DELIMITER: &str = "_git/";
const GIT_SUFFIX: &str = ".git";

impl RepoSpec {
    /// Parses `url` with kustomize's rules; an error means the name is not a repository URL
    /// (kustomize then treats it as a local path).
    pub fn parse(url: &str) -> Result<RepoSpec, RepoSpecError> {
        if url.starts_with('/') {
            return Err(RepoSpecError::AbsolutePath(url.to_string()));
        }
        // `?` only ever starts the query (RFC 3986), so it is split off first.
        let (rest, query) = url.split_once('?').unwrap_or((url, ""));
        let (git_ref, timeout, submodules) = parse_query(query);
        let (host, path) = extract_host(rest)?;
        let all_segments = host.starts_with(FILE_SCHEME);
        let (repo_path, kust_root_path) = split_path(path, all_segments)?;
        Ok(RepoSpec {
            raw: url.to_string(),
            host,
            repo_path,
            kust_root_path,
            git_ref,
            submodules,
            timeout,
        })
    }

    /// The URL given to `git fetch`: host and repository path
    /// (`https://github.com/kubernetes-sigs/kustomize`).
    pub fn clone_url(&self) -> String {
        format!("{}{}", self.host, self.repo_path)
    }

    /// The path kustomize records in origin annotations for the kustomization root of this
    /// URL: the root path, cleaned, or `notCloned` for the repository's root (kustomize
    /// derives it from a placeholder clone directory, `/notCloned`, and keeps that name).
    pub fn origin_path(&self) -> String {
        let abs = go_clean(&format!("/notCloned/{}", self.kust_root_path));
        // Drop the placeholder's own segment when there is a path under it.
        let tail = &abs[1..];
        match tail.find('/') {
            Some(at) => tail[at + 1..].to_string(),
            None => tail.to_string(),
        }
    }
}

/// The ref, timeout and submodules flag of a URL's query (`ref=v1&timeout=61&submodules=0`).
/// A query Go cannot parse (a `;`, a bad `%` escape) gives the defaults for all three.
fn parse_query(query: &str) -> (String, Duration, bool) {
    let defaults = (String::new(), DEFAULT_TIMEOUT, true);
    let Some(values) = parse_query_values(query) else {
        return defaults;
    };
    let get = |key: &str| {
        values
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    };
    let git_ref = match get("ref") {
        "" => get("version"),
        some => some,
    };
    let timeout = match get("timeout") {
        "" => DEFAULT_TIMEOUT,
        text => match text.parse::<i64>() {
            Ok(seconds) if seconds > 0 => Duration::from_secs(seconds.unsigned_abs()),
            _ => match goduration::parse(text) {
                Some(d) if !d.is_zero() => d,
                _ => DEFAULT_TIMEOUT,
            },
        },
    };
    let submodules = parse_go_bool(get("submodules")).unwrap_or(true);
    (git_ref.to_string(), timeout, submodules)
}

/// Go's `url.ParseQuery`: `&`-separated `key=value` pairs, `+` and `%XX` unescaped, in
/// order; `None` when any pair is invalid.
fn parse_query_values(query: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut valid = true;
    for pair in query.split('&') {
        if pair.contains(';') {
            valid = false;
            continue;
        }
        if pair.is_empty() {
            continue;
        }
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match (query_unescape(key), query_unescape(value)) {
            (Some(key), Some(value)) => out.push((key, value)),
            _ => valid = false,
        }
    }
    valid.then_some(out)
}

/// Go's `url.QueryUnescape`: `+` is a space, `%XX` a byte; a `%` not followed by two hex
/// digits is an error.
fn query_unescape(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let text = std::str::from_utf8(hex).ok()?;
                if !hex.iter().all(u8::is_ascii_hexdigit) {
                    return None;
                }
                out.push(u8::from_str_radix(text, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            other => {
                out.push(other);
                i += 1;
            }
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Strips `prefix` (ASCII, lower case) from `text` ignoring case.
fn strip_prefix_ignore_case<'t>(text: &'t str, prefix: &str) -> Option<&'t str> {
    let head = text.as_bytes().get(..prefix.len())?;
    if head.eq_ignore_ascii_case(prefix.as_bytes()) {
        text.get(prefix.len()..)
    } else {
        None
    }
}

/// The scheme, user and host of a URL (after `git::`), and what follows them.
fn extract_host(url: &str) -> Result<(String, &str), RepoSpecError> {
    // go-getter's `git::` prefix forced the git protocol; kustomize ignores it.
    let url = strip_prefix_ignore_case(url, "git::").unwrap_or(url);
    let (mut scheme, rest) = [SSH_SCHEME, HTTPS_SCHEME, HTTP_SCHEME, FILE_SCHEME]
        .iter()
        .find_map(|s| strip_prefix_ignore_case(url, s).map(|rest| (*s, rest)))
        .unwrap_or(("", url));
    let (mut username, rest) = extract_username(rest);
    let github = is_standard_github_host(rest);
    // scp-style (`user@host:path`) needs no scheme, and a user unless the host is github.com.
    let scp = scheme.is_empty() && (!username.is_empty() || github);
    if scheme.is_empty() && !scp {
        return Err(RepoSpecError::Scheme);
    }
    if scheme == FILE_SCHEME {
        // The rest is a local path, a would-be user included.
        return Ok((scheme.to_string(), &url[scheme.len()..]));
    }
    let (mut host, path) = match find_path_separator(rest, scp) {
        Some(at) => (&rest[..=at], &rest[at + 1..]),
        None => (rest, ""),
    };
    if github {
        // github.com is normalised: ssh (explicit or with a user) to `user@github.com:`,
        // anything else to `https://github.com/`.
        if scheme.starts_with(SSH_SCHEME) || !username.is_empty() {
            scheme = "";
            host = "github.com:";
        } else {
            scheme = HTTPS_SCHEME;
            username = "";
            host = "github.com/";
        }
    }
    if host.is_empty() {
        return Err(RepoSpecError::Host);
    }
    Ok((format!("{scheme}{username}{host}"), path))
}

/// A leading `user@` (a letter, then letters, digits and `-`), and the rest.
fn extract_username(text: &str) -> (&str, &str) {
    let bytes = text.as_bytes();
    if !bytes.first().is_some_and(u8::is_ascii_alphabetic) {
        return ("", text);
    }
    let name_len = bytes
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'-')
        .count();
    if bytes.get(name_len) == Some(&b'@') {
        text.split_at(name_len + 1)
    } else {
        ("", text)
    }
}

/// Whether `text` starts with `github.com/` or `github.com:`, compared as Go lower-cases
/// (which also maps `İ` to `i` and the Kelvin sign to `k`).
fn is_standard_github_host(text: &str) -> bool {
    let lowered: String = text
        .chars()
        .take(11)
        .map(|c| match c {
            '\u{130}' => 'i',
            '\u{212a}' => 'k',
            other => other.to_ascii_lowercase(),
        })
        .collect();
    lowered.starts_with("github.com/") || lowered.starts_with("github.com:")
}

/// Where the host ends: the first `/`, or for scp-style URLs a `:` before it.
fn find_path_separator(text: &str, scp: bool) -> Option<usize> {
    let slash = text.find('/');
    if scp {
        let colon = text.find(':');
        let colon_first = match (colon, slash) {
            (Some(c), None) => Some(c),
            (Some(c), Some(s)) if c > 0 && c < s => Some(c),
            _ => None,
        };
        if colon_first.is_some() {
            return colon_first;
        }
    }
    slash
}

/// Splits the path after the host into the repository and the directory inside it.
fn split_path(path: &str, all_segments: bool) -> Result<(String, String), RepoSpecError> {
    let (repo, root) = explicit_split(path)
        .or_else(|| default_split(path, all_segments))
        .ok_or(RepoSpecError::RepoPath)?;
    if repo.is_empty() {
        return Err(RepoSpecError::RepoPath);
    }
    if exits_repo(&root) {
        return Err(RepoSpecError::ExitsRepo(path.to_string()));
    }
    let root = root.strip_prefix('/').unwrap_or(&root).to_string();
    Ok((repo, root))
}

/// The split marked in the URL: `_git/<repo>`, `//`, or a `.git` suffix.
fn explicit_split(path: &str) -> Option<(String, String)> {
    if let Some(at) = path.find(GIT_ROOT_DELIMITER) {
        let (head, tail) = path.split_at(at + GIT_ROOT_DELIMITER.len());
        let (repo, root) = tail.split_once('/').unwrap_or((tail, ""));
        return Some((format!("{head}{repo}"), root.to_string()));
    }
    if let Some(at) = path.find("//") {
        return Some((path[..at].to_string(), path[at + 2..].to_string()));
    }
    if let Some(at) = path.find(GIT_SUFFIX) {
        let (repo, root) = path.split_at(at + GIT_SUFFIX.len());
        return Some((repo.to_string(), root.to_string()));
    }
    None
}

/// Without a marker: `org/repo` (two segments), or the whole path for `file://`.
fn default_split(path: &str, all_segments: bool) -> Option<(String, String)> {
    if all_segments {
        return Some((path.to_string(), String::new()));
    }
    let segments: Vec<&str> = path.split('/').collect();
    if segments.len() < 2 {
        return None;
    }
    Some((segments[..2].join("/"), segments[2..].join("/")))
}

/// Whether the directory inside the repository climbs out of it.
fn exits_repo(root: &str) -> bool {
    let cleaned = go_clean(root.strip_prefix('/').unwrap_or(root));
    cleaned == ".." || cleaned.starts_with("../")
}

/// Go's `path.Clean`: the shortest equivalent path, lexically (`a/../b` is `b`, `` is `.`).
pub(crate) fn go_clean(path: &str) -> String {
    if path.is_empty() {
        return ".".to_string();
    }
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => match parts.last() {
                Some(last) if *last != ".." => {
                    parts.pop();
                }
                _ if rooted => {}
                _ => parts.push(".."),
            },
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
}

/// Go's `filepath.Join` of two elements: empty elements are ignored, the result cleaned
/// (and empty when both are).
pub(crate) fn go_join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => String::new(),
        (true, false) => go_clean(b),
        (false, true) => go_clean(a),
        (false, false) => go_clean(&format!("{a}/{b}")),
    }
}

/// `url` with the password of its user information replaced by `xxxxx`
/// (`https://user:xxxxx@host/org/repo`), as Go's `URL.Redacted` shows it, for messages.
/// Anything else is returned unchanged.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let authority_start = scheme_end + 3;
    let rest = &url[authority_start..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_len];
    let Some(at) = authority.rfind('@') else {
        return url.to_string();
    };
    let Some(colon) = authority[..at].find(':') else {
        return url.to_string();
    };
    format!(
        "{}xxxxx{}",
        &url[..authority_start + colon + 1],
        &url[authority_start + at..]
    )
}

/// Whether kustomize reads `name` as a file over HTTP: Go's URL parser accepts it and its
/// scheme is `http` or `https` (in any case).
pub fn is_remote_file(name: &str) -> bool {
    go_url_scheme(name).is_some_and(|scheme| scheme == "http" || scheme == "https")
}

/// The scheme (lower case) of `name` when Go's `url.Parse` accepts it and finds one.
fn go_url_scheme(name: &str) -> Option<String> {
    let (url, fragment) = name.split_once('#').unwrap_or((name, ""));
    if !escapes_valid(fragment) || url.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return None;
    }
    // A scheme is a letter, then letters, digits, `+`, `-` or `.`, then `:`.
    let colon = url.find(':')?;
    let scheme = &url[..colon];
    let mut chars = scheme.bytes();
    let first_ok = chars.next().is_some_and(|b| b.is_ascii_alphabetic());
    if !first_ok || !chars.all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)) {
        return None;
    }
    let rest = &url[colon + 1..];
    let rest = match rest.strip_suffix('?') {
        Some(stripped) if rest.matches('?').count() == 1 => stripped,
        _ => rest.split_once('?').map_or(rest, |(before, _)| before),
    };
    let path = if let Some(after) = rest.strip_prefix("//") {
        let (authority, path) = after.find('/').map_or((after, ""), |at| after.split_at(at));
        if !authority_valid(authority) {
            return None;
        }
        path
    } else if rest.starts_with('/') {
        rest
    } else {
        // `scheme:opaque`: Go does not look inside.
        ""
    };
    escapes_valid(path).then(|| scheme.to_ascii_lowercase())
}

/// An ASCII byte Go's URL parser accepts unescaped in a host.
fn host_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:[]<>\"".contains(&b)
}

/// Every `%` is followed by two hex digits.
fn escapes_valid(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.iter().enumerate().all(|(i, b)| {
        *b != b'%'
            || bytes
                .get(i + 1..i + 3)
                .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit))
    })
}

/// `[userinfo@]host[:port]` as Go's URL parser accepts it for http(s).
fn authority_valid(authority: &str) -> bool {
    let (userinfo, host) = match authority.rfind('@') {
        Some(at) => (&authority[..at], &authority[at + 1..]),
        None => ("", authority),
    };
    let userinfo_ok = userinfo
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(&b));
    userinfo_ok && escapes_valid(userinfo) && host_valid(host)
}

fn host_valid(host: &str) -> bool {
    let port_ok = |port: &str| {
        port.is_empty()
            || port
                .strip_prefix(':')
                .is_some_and(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
    };
    match host.rfind('[') {
        Some(0) => {
            // An IPv6 literal.
            let Some(close) = host.rfind(']') else {
                return false;
            };
            let literal = &host[1..close];
            let (address, zone) = literal.split_once("%25").unwrap_or((literal, ""));
            port_ok(&host[close + 1..])
                && address.contains(':')
                && address
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
                && escapes_valid(zone)
                && zone.bytes().all(|b| b >= 0x80 || b == b'%' || host_byte(b))
        }
        Some(_) => false,
        None => {
            // What follows the last colon is the port.
            if let Some(colon) = host.rfind(':')
                && !port_ok(&host[colon..])
            {
                return false;
            }
            let bytes = host.as_bytes();
            let mut i = 0;
            while i < bytes.len() {
                match bytes[i] {
                    b'%' => {
                        let Some(hex) = bytes.get(i + 1..i + 3) else {
                            return false;
                        };
                        let escaped_ok = hex.iter().all(u8::is_ascii_hexdigit)
                            && (hex[0] >= b'8' || hex == b"25");
                        if !escaped_ok {
                            return false;
                        }
                        i += 3;
                    }
                    b if b >= 0x80 || host_byte(b) => i += 1,
                    _ => return false,
                }
            }
            true
        }
    }
}

/// What the embedding program provides to read remote resources. The engine calls it from
/// the thread that builds; an implementation decides which hosts and schemes it serves
/// (`file://` URLs name repositories on the machine that builds) and should apply
/// [`RepoSpec::timeout`] to a clone and bound the bytes it reads.
pub trait RemoteFetcher: Send + Sync {
    /// Clones the repository of `spec` ([`RepoSpec::clone_url`]) and checks out
    /// [`RepoSpec::git_ref`] (the remote's `HEAD` when empty), with submodules when
    /// [`RepoSpec::submodules`]. The checkout lives as long as the returned value.
    fn clone_repo(&self, spec: &RepoSpec) -> Result<ClonedRepo, RemoteError>;

    /// The bytes of an http(s) URL named as a file. A response status outside 200-299 is
    /// [`RemoteError::Http`]. The engine refuses more than [`crate::loader::MAX_FILE_SIZE`]
    /// bytes; an implementation should stop reading soon after that many.
    fn fetch_file(&self, url: &str) -> Result<Vec<u8>, RemoteError>;
}

/// A checkout made by [`RemoteFetcher::clone_repo`]: the directory of the repository's root,
/// and a guard that removes it when dropped (a `tempfile::TempDir`, say).
pub struct ClonedRepo {
    /// The root of the checked-out repository.
    pub dir: PathBuf,
    /// Dropped when the build is done with the checkout (it should delete the directory).
    pub guard: Box<dyn Send + Sync>,
}

impl ClonedRepo {
    /// A checkout at `dir`, kept until `guard` is dropped.
    pub fn new(dir: PathBuf, guard: impl Send + Sync + 'static) -> Self {
        ClonedRepo {
            dir,
            guard: Box::new(guard),
        }
    }
}

impl std::fmt::Debug for ClonedRepo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClonedRepo")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// Why a remote repository or file could not be had.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The server answered a file request with a status outside 200-299 (kustomize then
    /// stops, unless the URL also names a repository).
    #[error("HTTP Error: status code {status} ({})", http_status_text(*status))]
    Http {
        /// The HTTP status code.
        status: u16,
    },
    /// An operation did not finish in time.
    #[error("{operation} timed out after {}", goduration::format(*after))]
    Timeout {
        /// What was running (`git fetch https://github.com/org/repo`).
        operation: String,
        /// The time allowed.
        after: Duration,
    },
    /// The fetcher does not serve this URL (a scheme or host it refuses, or remote bases
    /// disabled): the build stops there, without trying the URL as a repository too.
    #[error("{0}")]
    Refused(String),
    /// The response or checkout is larger than allowed.
    #[error("it holds more than {limit} bytes")]
    TooLarge {
        /// The bound, in bytes.
        limit: u64,
    },
    /// Any other failure, as a sentence (git's own message, a network error).
    #[error("{0}")]
    Failed(String),
}

/// The text Go gives an HTTP status (`Not Found`), or an empty string.
pub fn http_status_text(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        300 => "Multiple Choices",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        407 => "Proxy Authentication Required",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Request Entity Too Large",
        414 => "Request URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Requested Range Not Satisfiable",
        417 => "Expectation Failed",
        418 => "I'm a teapot",
        421 => "Misdirected Request",
        422 => "Unprocessable Entity",
        423 => "Locked",
        424 => "Failed Dependency",
        425 => "Too Early",
        426 => "Upgrade Required",
        428 => "Precondition Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        451 => "Unavailable For Legal Reasons",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        506 => "Variant Also Negotiates",
        507 => "Insufficient Storage",
        508 => "Loop Detected",
        510 => "Not Extended",
        511 => "Network Authentication Required",
        _ => "",
    }
}

#[cfg(test)]
mod tests;
