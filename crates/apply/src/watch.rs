//! One resource's objects as a stream of events, from `list` and `watch` requests made
//! directly (kube's client, without its runtime): a list, then a watch from the list's
//! `resourceVersion`, resumed from the last version seen whenever the server ends it, and
//! listed again when that version is too old (`410 Gone`). Errors are delivered as they
//! happen and the next request waits, 0.8 s doubling up to 30 s, as kube-runtime's default
//! backoff does; a delivered object resets the wait.
//!
//! The events follow cli-utils' and kube-runtime's watchers: `Init`, one `InitApply` per
//! listed object and `InitDone` for each (re)list, then `Apply` and `Delete` as changes come.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::api::{Api, ListParams, VersionMatch, WatchEvent, WatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::api_message;

/// The first wait after an error.
const FIRST_BACKOFF: Duration = Duration::from_millis(800);

/// The longest wait after errors in a row.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Objects per list page.
const PAGE_SIZE: u32 = 500;

/// How long the server keeps one watch request open (it closes it sooner at will).
const WATCH_TIMEOUT_SECS: u32 = 290;

/// What a watch reports.
#[derive(Clone, Debug, PartialEq)]
pub enum Event<K> {
    /// A list starts: what was known may be replaced by what follows.
    Init,
    /// An object of the list.
    InitApply(K),
    /// The list is complete: every object that exists was delivered since `Init`.
    InitDone,
    /// An object was created or changed.
    Apply(K),
    /// An object was deleted; the last state the server knew.
    Delete(K),
}

/// Why a request of a watch failed; the watch goes on after a backoff.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// Listing the objects failed.
    #[error("failed to list {resource}: {}", api_message(.source))]
    List {
        /// The resource's URL path.
        resource: String,
        /// The client's error.
        source: kube::Error,
    },
    /// Opening or reading the watch failed.
    #[error("failed to watch {resource}: {}", api_message(.source))]
    Watch {
        /// The resource's URL path.
        resource: String,
        /// The client's error.
        source: kube::Error,
    },
    /// The server ended the watch with an error.
    #[error("watch of {resource} failed: {message} ({code})")]
    Server {
        /// The resource's URL path.
        resource: String,
        /// The HTTP status code the server gave.
        code: u16,
        /// The server's message.
        message: String,
    },
}

/// What to watch.
#[derive(Clone, Debug, Default)]
pub struct WatchConfig {
    /// Only objects matching this label selector.
    pub label_selector: Option<String>,
    /// List from the API server's cache (`resourceVersion=0`): cheaper, possibly a little
    /// behind, which the watch that follows makes up for.
    pub any_semantic: bool,
}

impl WatchConfig {
    /// Only objects with these labels.
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_string());
        self
    }

    /// Lists from the API server's cache.
    pub fn any_semantic(mut self) -> Self {
        self.any_semantic = true;
        self
    }
}

/// Where the watch is.
enum Phase<K> {
    /// The objects must be listed (first, or after `410 Gone`).
    List,
    /// A watch must be opened from `version`.
    Open { version: String },
    /// A watch is open.
    Streaming {
        version: String,
        events: BoxStream<'static, kube::Result<WatchEvent<K>>>,
    },
}

struct State<K: 'static> {
    api: Api<K>,
    config: WatchConfig,
    phase: Phase<K>,
    pending: VecDeque<Result<Event<K>, WatchError>>,
    /// The wait before the next request, after an error.
    backoff: Option<Duration>,
}

/// The events of `api`'s objects, for as long as the stream is polled; it never ends.
pub fn watch<K>(
    api: Api<K>,
    config: WatchConfig,
) -> impl Stream<Item = Result<Event<K>, WatchError>>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let state = State {
        api,
        config,
        phase: Phase::List,
        pending: VecDeque::new(),
        backoff: None,
    };
    futures::stream::unfold(state, |mut state| async move {
        let event = state.next().await;
        Some((event, state))
    })
}

impl<K> State<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    async fn next(&mut self) -> Result<Event<K>, WatchError> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return event;
            }
            if let Some(wait) = self.backoff
                && !matches!(self.phase, Phase::Streaming { .. })
            {
                tokio::time::sleep(wait).await;
            }
            match std::mem::replace(&mut self.phase, Phase::List) {
                Phase::List => match list(&self.api, &self.config).await {
                    Ok((objects, version)) => {
                        self.pending.push_back(Ok(Event::Init));
                        self.pending
                            .extend(objects.into_iter().map(|o| Ok(Event::InitApply(o))));
                        self.pending.push_back(Ok(Event::InitDone));
                        self.phase = Phase::Open { version };
                        self.backoff = None;
                    }
                    Err(error) => return self.failed(Phase::List, error),
                },
                Phase::Open { version } => {
                    let mut params = WatchParams::default().timeout(WATCH_TIMEOUT_SECS);
                    if let Some(selector) = &self.config.label_selector {
                        params = params.labels(selector);
                    }
                    match self.api.watch(&params, &version).await {
                        Ok(events) => {
                            self.phase = Phase::Streaming {
                                version,
                                events: events.boxed(),
                            }
                        }
                        Err(kube::Error::Api(status)) if status.code == 410 => {
                            self.phase = Phase::List;
                        }
                        Err(source) => {
                            let error = WatchError::Watch {
                                resource: self.api.resource_url().to_string(),
                                source,
                            };
                            return self.failed(Phase::Open { version }, error);
                        }
                    }
                }
                Phase::Streaming {
                    mut version,
                    mut events,
                } => {
                    let resource = || self.api.resource_url().to_string();
                    let event = match events.next().await {
                        // The server closed the watch: open it again where it ended.
                        None => {
                            self.phase = Phase::Open { version };
                            continue;
                        }
                        Some(Err(source)) => {
                            let error = WatchError::Watch {
                                resource: resource(),
                                source,
                            };
                            return self.failed(Phase::Open { version }, error);
                        }
                        Some(Ok(WatchEvent::Error(status))) if status.code == 410 => {
                            self.phase = Phase::List;
                            continue;
                        }
                        Some(Ok(WatchEvent::Error(status))) => {
                            let error = WatchError::Server {
                                resource: resource(),
                                code: status.code,
                                message: status.message,
                            };
                            return self.failed(Phase::Open { version }, error);
                        }
                        Some(Ok(WatchEvent::Bookmark(bookmark))) => {
                            version = bookmark.metadata.resource_version;
                            None
                        }
                        Some(Ok(WatchEvent::Added(object) | WatchEvent::Modified(object))) => {
                            if let Some(seen) = object.resource_version() {
                                version = seen;
                            }
                            Some(Event::Apply(object))
                        }
                        Some(Ok(WatchEvent::Deleted(object))) => {
                            if let Some(seen) = object.resource_version() {
                                version = seen;
                            }
                            Some(Event::Delete(object))
                        }
                    };
                    self.phase = Phase::Streaming { version, events };
                    if let Some(event) = event {
                        self.backoff = None;
                        return Ok(event);
                    }
                }
            }
        }
    }

    /// Records an error: the next request, from `phase`, waits longer.
    fn failed(&mut self, phase: Phase<K>, error: WatchError) -> Result<Event<K>, WatchError> {
        self.phase = phase;
        self.backoff = Some(next_backoff(self.backoff));
        Err(error)
    }
}

/// Every object, page by page, and the version to watch from.
async fn list<K>(api: &Api<K>, config: &WatchConfig) -> Result<(Vec<K>, String), WatchError>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let mut objects = Vec::new();
    let mut continue_token: Option<String> = None;
    loop {
        let mut params = ListParams {
            label_selector: config.label_selector.clone(),
            limit: Some(PAGE_SIZE),
            continue_token: continue_token.take(),
            ..ListParams::default()
        };
        if config.any_semantic && params.continue_token.is_none() {
            params.resource_version = Some("0".into());
            params.version_match = Some(VersionMatch::NotOlderThan);
        }
        let page = api.list(&params).await.map_err(|source| WatchError::List {
            resource: api.resource_url().to_string(),
            source,
        })?;
        objects.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => continue_token = Some(token),
            _ => {
                let version = page.metadata.resource_version.unwrap_or_default();
                return Ok((objects, version));
            }
        }
    }
}

/// The wait after one more error in a row.
fn next_backoff(previous: Option<Duration>) -> Duration {
    match previous {
        None => FIRST_BACKOFF,
        Some(wait) => (wait * 2).min(MAX_BACKOFF),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_thirty_seconds() {
        let mut wait = None;
        let mut waits = Vec::new();
        for _ in 0..8 {
            let next = next_backoff(wait);
            waits.push(next.as_millis());
            wait = Some(next);
        }
        assert_eq!(waits, [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
    }
}
