//! The errors of [`checkout`](crate::checkout) and [`fetch_file`](crate::fetch_file).
//!
//! Every message is a sentence that names the URL (with any `user:password@` removed) and,
//! for a checkout, the ref; none holds a Rust `Debug` rendering.

/// Why [`checkout`](crate::checkout) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GitError {
    /// The URL is not one this crate can fetch from.
    #[error("cannot fetch from {url}: {reason}")]
    InvalidUrl {
        /// The URL, without credentials.
        url: String,
        /// Why it was refused.
        reason: String,
    },
    /// The repository's host is a link-local or cloud metadata address.
    #[error("refusing to fetch from {url}: {reason}")]
    Refused {
        /// The URL, without credentials.
        url: String,
        /// Which host, and what address it is.
        reason: String,
    },
    /// The ref is not a name git accepts.
    #[error("{git_ref} is not a valid git ref for {url}: {reason}")]
    InvalidRef {
        /// The URL, without credentials.
        url: String,
        /// The ref as given, quoted.
        git_ref: String,
        /// Why it was refused.
        reason: crate::refname::RefNameError,
    },
    /// The destination exists and holds something.
    #[error("cannot check out {git_ref} of {url} into {dest}: the directory is not empty")]
    DestinationNotEmpty {
        /// The URL, without credentials.
        url: String,
        /// The ref, quoted.
        git_ref: String,
        /// The destination directory.
        dest: String,
    },
    /// No branch, tag or commit of the repository matches the ref.
    #[error("{git_ref} was not found in {url}")]
    RefNotFound {
        /// The URL, without credentials.
        url: String,
        /// The ref, quoted.
        git_ref: String,
    },
    /// An abbreviated commit id matches more than one commit.
    #[error("{git_ref} is ambiguous in {url}: {count} commits start with it")]
    AmbiguousRef {
        /// The URL, without credentials.
        url: String,
        /// The ref, quoted.
        git_ref: String,
        /// How many commits matched.
        count: usize,
    },
    /// The ref names an object that does not lead to a commit (a tree or a blob).
    #[error("{git_ref} of {url} does not name a commit")]
    NotACommit {
        /// The URL, without credentials.
        url: String,
        /// The ref, quoted.
        git_ref: String,
    },
    /// Talking to the remote failed (connection, protocol, authentication, pack).
    #[error("fetching {git_ref} from {url} failed: {message}")]
    Fetch {
        /// The URL, without credentials.
        url: String,
        /// The ref, quoted.
        git_ref: String,
        /// What went wrong, in the transport's words, without credentials.
        message: String,
    },
    /// A local repository could not be opened, or one of its objects could not be read.
    #[error("reading {git_ref} of {url} failed: {message}")]
    Repository {
        /// The URL, without credentials.
        url: String,
        /// The ref, quoted.
        git_ref: String,
        /// What went wrong.
        message: String,
    },
    /// The whole operation took longer than [`FetchOptions::timeout`](crate::FetchOptions::timeout).
    #[error("checking out {git_ref} of {url} timed out after {timeout}")]
    Timeout {
        /// The URL, without credentials.
        url: String,
        /// The ref, quoted.
        git_ref: String,
        /// The timeout, written as Go writes a duration (`27s`, `1m30s`, `500ms`).
        timeout: String,
    },
    /// The files of the checkout (submodules included) add up to more than
    /// [`FetchOptions::max_bytes`](crate::FetchOptions::max_bytes).
    #[error("checking out {git_ref} of {url} exceeds the limit of {limit} bytes")]
    TooLarge {
        /// The URL, without credentials.
        url: String,
        /// The ref, quoted.
        git_ref: String,
        /// The limit in bytes.
        limit: u64,
    },
    /// The tree holds a path that cannot be written safely (`..`, `.git`, a slash in a name).
    #[error("{git_ref} of {url} holds an unsafe path {path}")]
    UnsafePath {
        /// The URL, without credentials.
        url: String,
        /// The ref, quoted.
        git_ref: String,
        /// The offending path, quoted.
        path: String,
    },
    /// Writing a file, a symlink or a directory of the checkout failed.
    #[error("checking out {git_ref} of {url}: cannot write {path}: {message}")]
    Write {
        /// The URL, without credentials.
        url: String,
        /// The ref, quoted.
        git_ref: String,
        /// The path that could not be written.
        path: String,
        /// The operating system's reason.
        message: String,
    },
    /// `.gitmodules` does not say where a submodule of the tree comes from.
    #[error("checking out {git_ref} of {url}: submodule {path}: {message}")]
    SubmoduleConfig {
        /// The URL, without credentials.
        url: String,
        /// The ref, quoted.
        git_ref: String,
        /// The submodule's path in the tree, quoted.
        path: String,
        /// What is wrong with its configuration.
        message: String,
    },
    /// Checking out a submodule failed; `inner` says how.
    #[error("checking out submodule {path} of {url} failed: {inner}")]
    Submodule {
        /// The URL of the repository holding the submodule, without credentials.
        url: String,
        /// The submodule's path in that repository's tree, quoted.
        path: String,
        /// The error of the submodule's own checkout.
        inner: Box<GitError>,
    },
    /// Submodules nest deeper than this crate follows.
    #[error("submodules of {url} nest more than {max} levels deep")]
    SubmoduleDepth {
        /// The URL of the repository whose submodules are too deep, without credentials.
        url: String,
        /// The most levels followed.
        max: usize,
    },
    /// The worker doing the checkout stopped without an answer (a bug).
    #[error("checking out {git_ref} of {url} failed: the worker stopped unexpectedly")]
    Internal {
        /// The URL, without credentials.
        url: String,
        /// The ref, quoted.
        git_ref: String,
    },
}

/// Why [`fetch_file`](crate::fetch_file) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// The URL is not an `http://` or `https://` URL.
    #[error("cannot fetch {url}: {reason}")]
    InvalidUrl {
        /// The URL, without credentials.
        url: String,
        /// Why it was refused.
        reason: String,
    },
    /// The host is, resolves to, or redirected to a link-local or cloud metadata address.
    #[error("refusing to fetch {url}: {reason}")]
    Refused {
        /// The URL, without credentials.
        url: String,
        /// Which host, and what address it is or resolves to.
        reason: String,
    },
    /// The server answered with a status outside 200–299.
    #[error("fetching {url} failed: the server answered {status}")]
    Status {
        /// The URL, without credentials.
        url: String,
        /// The status code and its reason phrase, like `404 Not Found`.
        status: String,
    },
    /// The body is longer than the limit.
    #[error("fetching {url} failed: the response exceeds the limit of {limit} bytes")]
    TooLarge {
        /// The URL, without credentials.
        url: String,
        /// The limit in bytes.
        limit: u64,
    },
    /// The request (connection, redirects and body) took longer than the timeout.
    #[error("fetching {url} timed out after {timeout}")]
    Timeout {
        /// The URL, without credentials.
        url: String,
        /// The timeout, written as Go writes a duration.
        timeout: String,
    },
    /// The request failed (DNS, connection, TLS, too many redirects, a broken body).
    #[error("fetching {url} failed: {message}")]
    Request {
        /// The URL, without credentials.
        url: String,
        /// What went wrong, without credentials.
        message: String,
    },
    /// The worker doing the request stopped without an answer (a bug).
    #[error("fetching {url} failed: the worker stopped unexpectedly")]
    Internal {
        /// The URL, without credentials.
        url: String,
    },
}

/// The message of `error` and of each of its sources, joined by `: `, skipping a source
/// whose text its parent already ends with.
pub(crate) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !part.is_empty() && !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_joins_sources_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        let e = Outer(std::io::Error::other("inner"));
        assert_eq!(chain(&e), "outer: inner");
    }
}
