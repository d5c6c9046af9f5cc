//! Fetching from a remote into a private bare repository in a temporary directory.
//!
//! A branch, a tag or `HEAD` is fetched at depth 1, as `git fetch --depth=1 <url> <ref>`.
//! A full commit id is first asked for directly at depth 1 (servers speaking protocol v2,
//! and GitHub, GitLab and the like, serve any reachable commit); when the server refuses,
//! or for an abbreviated id, all branches and tags are fetched with their history and the
//! commit is looked up among them.

use std::any::Any;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gix::protocol::transport::client::blocking_io::http;
use gix::remote::Direction;
use gix::remote::fetch::{Shallow, Tags};
use gix::remote::ref_map;

use crate::deadline::Cancel;
use crate::meter::PackMeter;
use crate::refname::{self, Wanted};
use crate::resolve::{self, ResolveError, Resolved};

/// A repository filled by a fetch; the directory goes when this is dropped.
pub(crate) struct Fetched {
    pub(crate) repo: gix::Repository,
    pub(crate) resolved: Resolved,
    _dir: tempfile::TempDir,
}

impl Fetched {
    /// `repo` (kept in `dir`) resolved to `commit`, through the ref `reference` if a name led
    /// there.
    fn new(
        repo: gix::Repository,
        dir: tempfile::TempDir,
        commit: gix::ObjectId,
        reference: Option<String>,
    ) -> Fetched {
        Fetched {
            repo,
            resolved: Resolved { commit, reference },
            _dir: dir,
        }
    }
}

/// Why a fetch did not give the wanted commit.
#[derive(Debug)]
pub(crate) enum FetchFailure {
    /// The transport, the protocol or the local repository failed; the message is gix's.
    Transport(String),
    /// The remote has no such ref, or the commit could not be found.
    Resolve(ResolveError),
    /// The pack the remote sent passed the limit.
    TooLarge,
}

/// The refspecs of a fetch of everything a commit id may be reachable from.
const ALL_REFS: [&str; 2] = [
    "+refs/heads/*:refs/remotes/origin/*",
    "+refs/tags/*:refs/tags/*",
];

/// Fetches what `wanted` needs from `url`, giving up when `cancel` is raised.
///
/// The packs received may add up to `pack_limit` bytes; past that the fetch stops.
pub(crate) fn fetch(
    url: &gix::Url,
    wanted: &Wanted,
    timeout: Duration,
    pack_limit: u64,
    cancel: &Cancel,
) -> Result<Fetched, FetchFailure> {
    crate::tls::install_crypto_provider();
    let session = Session {
        url,
        timeout,
        cancel,
        meter: PackMeter::new(pack_limit, cancel),
    };
    match wanted {
        Wanted::Head => session.by_name("HEAD"),
        Wanted::Name(name) => session.by_name(name),
        Wanted::Prefix(prefix, text) => match session.by_name(text) {
            Err(FetchFailure::Resolve(ResolveError::NotFound)) => {
                let (repo, dir) = session.everything()?;
                let commit = resolve::by_prefix(&repo, *prefix).map_err(FetchFailure::Resolve)?;
                Ok(Fetched::new(repo, dir, commit, None))
            }
            other => other,
        },
        Wanted::Id(id) => {
            let direct = session.commit(*id);
            if cancel.is_cancelled() {
                return direct;
            }
            match direct {
                Ok(fetched) => Ok(fetched),
                Err(
                    e @ (FetchFailure::TooLarge | FetchFailure::Resolve(ResolveError::NotACommit)),
                ) => Err(e),
                Err(_) => {
                    let (repo, dir) = session.everything()?;
                    let commit =
                        resolve::peel_to_commit(&repo, *id).map_err(FetchFailure::Resolve)?;
                    Ok(Fetched::new(repo, dir, commit, None))
                }
            }
        }
    }
}

struct Session<'a> {
    url: &'a gix::Url,
    timeout: Duration,
    cancel: &'a Cancel,
    /// Counts the bytes of every pack of this fetch.
    meter: PackMeter,
}

impl Session<'_> {
    /// Fetches the ref `name` means at depth 1, as `git fetch --depth=1 <url> <name>`.
    fn by_name(&self, name: &str) -> Result<Fetched, FetchFailure> {
        let (repo, dir) = new_repository()?;
        let Some(ref_map) = self.receive(&repo, &[name], true)? else {
            return Err(FetchFailure::Resolve(ResolveError::NotFound));
        };
        let names = ref_map
            .mappings
            .iter()
            .filter_map(|m| m.remote.as_name().map(|n| n.to_string()))
            .collect::<Vec<_>>();
        let full = refname::pick(name, names.iter().map(String::as_str))
            .ok_or(FetchFailure::Resolve(ResolveError::NotFound))?;
        let target = ref_map
            .mappings
            .iter()
            .find(|m| m.remote.as_name().is_some_and(|n| n == full))
            .and_then(|m| m.remote.as_id())
            // An unborn HEAD: the remote has no commits.
            .ok_or(FetchFailure::Resolve(ResolveError::NotFound))?
            .to_owned();
        let commit = resolve::peel_to_commit(&repo, target).map_err(FetchFailure::Resolve)?;
        Ok(Fetched::new(repo, dir, commit, Some(full.to_string())))
    }

    /// Asks for the commit `id` itself at depth 1.
    fn commit(&self, id: gix::ObjectId) -> Result<Fetched, FetchFailure> {
        let (repo, dir) = new_repository()?;
        let spec = id.to_string();
        self.receive(&repo, &[spec.as_str()], true)?;
        let commit = resolve::peel_to_commit(&repo, id).map_err(FetchFailure::Resolve)?;
        Ok(Fetched::new(repo, dir, commit, None))
    }

    /// Fetches every branch and tag with its whole history.
    fn everything(&self) -> Result<(gix::Repository, tempfile::TempDir), FetchFailure> {
        let (repo, dir) = new_repository()?;
        match self.receive(&repo, &ALL_REFS, false)? {
            Some(_) => Ok((repo, dir)),
            None => Err(FetchFailure::Resolve(ResolveError::NotFound)),
        }
    }

    /// Connects, lists the refs `specs` match and receives their objects into `repo`;
    /// `None` when no ref matched (nothing is received then).
    fn receive(
        &self,
        repo: &gix::Repository,
        specs: &[&str],
        shallow: bool,
    ) -> Result<Option<gix::remote::fetch::RefMap>, FetchFailure> {
        let remote = repo
            .remote_at(self.url.clone())
            .map_err(transport)?
            .with_fetch_tags(Tags::None)
            .with_refspecs(specs.iter().copied(), Direction::Fetch)
            .map_err(transport)?;
        let mut connection = remote
            .connect(Direction::Fetch)
            .map_err(transport)?
            // Credentials come from the URL or not at all: never from a prompt or a helper.
            .with_credentials(|_| Ok(None));
        if let Some(options) = http_options(repo, self.url, self.timeout) {
            connection.set_transport_options(options);
        }
        let prepare = connection
            .prepare_fetch(gix::progress::Discard, ref_map::Options::default())
            .map_err(transport)?;
        if prepare.ref_map().mappings.is_empty() || prepare.ref_map().is_missing_required_mapping()
        {
            return Ok(None);
        }
        let prepare = if shallow {
            prepare.with_shallow(Shallow::DepthAtRemote(NonZeroU32::MIN))
        } else {
            prepare
        };
        let outcome = prepare.receive(self.meter.clone(), self.cancel.flag());
        if self.meter.exceeded() {
            return Err(FetchFailure::TooLarge);
        }
        Ok(Some(outcome.map_err(transport)?.ref_map))
    }
}

/// A private bare repository in a new temporary directory, with no configuration but its own.
fn new_repository() -> Result<(gix::Repository, tempfile::TempDir), FetchFailure> {
    let dir = tempfile::Builder::new()
        .prefix("gitfetch-")
        .tempdir()
        .map_err(|e| {
            FetchFailure::Transport(format!("cannot create a temporary directory: {e}"))
        })?;
    let repo = gix::ThreadSafeRepository::init_opts(
        dir.path(),
        gix::create::Kind::Bare,
        gix::create::Options::default(),
        gix::open::Options::isolated(),
    )
    .map_err(transport)?
    .to_thread_local();
    Ok((repo, dir))
}

/// The HTTP options gix derives from configuration, with every request bounded by
/// `timeout` (so that a worker abandoned at the timeout ends too).
fn http_options(repo: &gix::Repository, url: &gix::Url, timeout: Duration) -> Option<Box<dyn Any>> {
    if !matches!(url.scheme, gix::url::Scheme::Http | gix::url::Scheme::Https) {
        return None;
    }
    let text = url.to_bstring();
    let options = repo
        .transport_options(gix::bstr::BStr::new(text.as_slice()), None)
        .ok()
        .flatten()?;
    let mut options = options.downcast::<http::Options>().ok()?;
    options.connect_timeout = Some(timeout);
    let backend = http::reqwest::Options {
        configure_client: Some(Box::new(move |builder| {
            Ok(builder
                .timeout(timeout)
                .dns_resolver(Arc::new(crate::guard::GuardedResolver)))
        })),
        configure_request: None,
    };
    options.backend = Some(Arc::new(Mutex::new(backend)));
    Some(options)
}

fn transport(error: gix::Error) -> FetchFailure {
    FetchFailure::Transport(crate::error::chain(&error))
}
