//! The process-wide token cache (`--token-cache-max-size`, `--token-cache-max-duration`):
//! credentials obtained with an identity (ServiceAccount tokens, AWS sessions, OAuth access
//! tokens) are reused across reconciles for 80% of their lifetime, at most the maximum
//! duration (one hour at most), as Flux's token cache keeps them. Least recently used
//! items make room for new ones.

use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, Instant};

use aws_credential_types::Credentials as AwsCredentials;
use zeroize::Zeroizing;

/// The object a cache lookup is made for, and what for (`decrypt_with_aws`, ...): the
/// labels of the cache's metrics.
#[derive(Clone, Debug)]
pub struct InvolvedObject {
    /// Its name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Flux's operation name.
    pub operation: &'static str,
}

/// What the cache reports as it is used: Flux's `gotk_token_*` families, kept by the
/// controller's metrics registry. `()` records nothing.
pub trait CacheMetrics: Send + Sync {
    /// One lookup: a hit or a miss for `object`, and whether it ended with a token.
    fn record(&self, object: &InvolvedObject, hit: bool, success: bool);
    /// The number of items held.
    fn set_items(&self, items: usize);
    /// One item evicted to make room.
    fn evicted(&self);
}

impl CacheMetrics for () {
    fn record(&self, _object: &InvolvedObject, _hit: bool, _success: bool) {}
    fn set_items(&self, _items: usize) {}
    fn evicted(&self) {}
}

/// The longest a token is kept, whatever the flag says (Flux's `TokenMaxDuration`).
pub const MAX_DURATION: Duration = Duration::from_secs(3600);

/// A cached credential.
#[derive(Clone)]
pub enum CachedToken {
    /// A bearer token (ServiceAccount JWT, OAuth access token, Vault token).
    Bearer(Zeroizing<String>),
    /// AWS session credentials.
    Aws(AwsCredentials),
}

struct Entry {
    token: CachedToken,
    expires: Instant,
    used: u64,
}

/// The cache. Two lookups of a key missing at once may both fetch; the later one is kept.
pub struct TokenCache {
    capacity: usize,
    max_duration: Duration,
    entries: std::sync::Mutex<(HashMap<String, Entry>, u64)>,
    metrics: Box<dyn CacheMetrics>,
}

impl std::fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCache")
            .field("capacity", &self.capacity)
            .field("max_duration", &self.max_duration)
            .finish_non_exhaustive()
    }
}

impl TokenCache {
    /// A cache of at most `capacity` tokens, each kept at most `max_duration` (capped at
    /// [`MAX_DURATION`]). `None` when `capacity` is 0 (the cache is off, as in Flux).
    pub fn new(
        capacity: usize,
        max_duration: Duration,
        metrics: impl CacheMetrics + 'static,
    ) -> Option<Self> {
        (capacity > 0).then(|| TokenCache {
            capacity,
            max_duration: max_duration.min(MAX_DURATION),
            entries: std::sync::Mutex::new((HashMap::new(), 0)),
            metrics: Box::new(metrics),
        })
    }

    /// The token under `key` while it is fresh, else the one `fetch` gives with its
    /// lifetime (then kept for 80% of it, at most the maximum duration); `fetch`'s error is
    /// returned as it is.
    pub async fn get_or_fetch<F, Fut, E>(
        &self,
        key: &str,
        object: &InvolvedObject,
        fetch: F,
    ) -> Result<CachedToken, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(CachedToken, Duration), E>>,
    {
        let now = Instant::now();
        {
            let mut guard = self.lock();
            let (entries, clock) = &mut *guard;
            *clock += 1;
            if let Some(entry) = entries.get_mut(key) {
                if entry.expires > now {
                    entry.used = *clock;
                    self.metrics.record(object, true, true);
                    return Ok(entry.token.clone());
                }
                entries.remove(key);
            }
        }
        // Not held while fetching: a fetch may itself look up another key (an AWS session
        // needs a ServiceAccount token).
        let fetched = fetch().await;
        self.metrics.record(object, false, fetched.is_ok());
        let (token, lifetime) = fetched?;
        let keep = (lifetime * 8 / 10).min(self.max_duration);
        let mut guard = self.lock();
        let (entries, clock) = &mut *guard;
        if !keep.is_zero() {
            let now = Instant::now();
            if entries.len() >= self.capacity {
                entries.retain(|_, e| e.expires > now);
            }
            if entries.len() >= self.capacity
                && !entries.contains_key(key)
                && let Some(oldest) = entries
                    .iter()
                    .min_by_key(|(_, e)| e.used)
                    .map(|(k, _)| k.clone())
            {
                entries.remove(&oldest);
                self.metrics.evicted();
            }
            *clock += 1;
            entries.insert(
                key.to_owned(),
                Entry {
                    token: token.clone(),
                    expires: now + keep,
                    used: *clock,
                },
            );
        }
        self.metrics.set_items(entries.len());
        Ok(token)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (HashMap<String, Entry>, u64)> {
        // A panic while the lock was held leaves the map consistent: every change is one
        // insert or remove.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object() -> InvolvedObject {
        InvolvedObject {
            name: "app".into(),
            namespace: "apps".into(),
            operation: "decrypt_with_aws",
        }
    }

    fn bearer(text: &str) -> CachedToken {
        CachedToken::Bearer(Zeroizing::new(text.to_owned()))
    }

    fn text(token: &CachedToken) -> String {
        match token {
            CachedToken::Bearer(t) => t.to_string(),
            CachedToken::Aws(c) => c.access_key_id().to_owned(),
        }
    }

    #[tokio::test]
    async fn fresh_tokens_are_reused_and_stale_ones_fetched_again() {
        let cache = TokenCache::new(2, MAX_DURATION, ()).unwrap();
        let first = cache
            .get_or_fetch("k", &object(), || async {
                Ok::<_, String>((bearer("one"), Duration::from_secs(600)))
            })
            .await
            .unwrap();
        let again = cache
            .get_or_fetch("k", &object(), || async { Err("not called".to_owned()) })
            .await
            .unwrap();
        assert_eq!((text(&first), text(&again)), ("one".into(), "one".into()));
        // A lifetime of 0 is not kept.
        cache
            .get_or_fetch("short", &object(), || async {
                Ok::<_, String>((bearer("s"), Duration::ZERO))
            })
            .await
            .unwrap();
        let err = cache
            .get_or_fetch("short", &object(), || async { Err("fetched".to_owned()) })
            .await
            .err();
        assert_eq!(err.as_deref(), Some("fetched"));
    }

    #[tokio::test]
    async fn the_least_recently_used_token_makes_room() {
        let cache = TokenCache::new(2, MAX_DURATION, ()).unwrap();
        for key in ["a", "b"] {
            cache
                .get_or_fetch(key, &object(), || async {
                    Ok::<_, String>((bearer(key), Duration::from_secs(600)))
                })
                .await
                .unwrap();
        }
        // `a` used again: `b` is the least recently used.
        cache
            .get_or_fetch("a", &object(), || async { Err("miss".to_owned()) })
            .await
            .unwrap();
        cache
            .get_or_fetch("c", &object(), || async {
                Ok::<_, String>((bearer("c"), Duration::from_secs(600)))
            })
            .await
            .unwrap();
        assert!(
            cache
                .get_or_fetch("a", &object(), || async { Err("miss".to_owned()) })
                .await
                .is_ok()
        );
        assert_eq!(
            cache
                .get_or_fetch("b", &object(), || async { Err("miss".to_owned()) })
                .await
                .err()
                .as_deref(),
            Some("miss")
        );
        assert!(TokenCache::new(0, MAX_DURATION, ()).is_none());
    }

    #[tokio::test]
    async fn a_fetch_may_look_up_another_key() {
        let cache = TokenCache::new(4, MAX_DURATION, ()).unwrap();
        let outer = tokio::time::timeout(
            Duration::from_secs(5),
            cache.get_or_fetch("session", &object(), || async {
                let inner = cache
                    .get_or_fetch("token", &object(), || async {
                        Ok::<_, String>((bearer("jwt"), Duration::from_secs(600)))
                    })
                    .await?;
                Ok::<_, String>((
                    bearer(&format!("session-for-{}", text(&inner))),
                    Duration::from_secs(600),
                ))
            }),
        )
        .await
        .expect("no deadlock")
        .unwrap();
        assert_eq!(text(&outer), "session-for-jwt");
    }
}
