//! One artifact, many readers: the verified extraction of each artifact digest, shared
//! read-only by every Kustomization that reads it.
//!
//! A monorepo source fanned out to hundreds of Kustomizations has one artifact per revision;
//! without sharing, each of them downloads, verifies and extracts the same tarball. Here the
//! first reconcile that needs a digest downloads it; the others that ask for it meanwhile wait
//! for that one download (single flight) and then read the same directory. Nothing a build
//! does writes into an artifact's tree, so sharing it is safe.
//!
//! An extraction stays while a Kustomization still reads its digest (its last checkout was of
//! it) and the cache holds at most `max_bytes` of extracted content: past that, the extractions
//! used longest ago are let go, those no Kustomization reads first. A directory is deleted when
//! the last reconcile holding it lets go. A download that fails (a digest mismatch included) is
//! never kept: every reconcile that waited for it gets its error, and the next one tries again.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::OnceCell;

use super::fetch::{ArtifactFetcher, FetchError};

/// An artifact extracted into a directory of its own, deleted when the last holder drops it.
#[derive(Debug)]
pub struct Extraction {
    dir: tempfile::TempDir,
    bytes: u64,
}

impl Extraction {
    /// The root of the extracted tree. Read it; never write to it.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Bytes of file content extracted.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// What a waiter receives from the one download of a digest.
type Outcome = Result<Arc<Extraction>, Arc<FetchError>>;

/// A digest's extraction, or the download in flight that will produce it.
struct Slot {
    cell: Arc<OnceCell<Outcome>>,
    /// When it was last checked out, on the cache's own clock (a checkout counter).
    last_used: u64,
}

#[derive(Default)]
struct State {
    slots: HashMap<String, Slot>,
    /// The digest each reader checked out last.
    readers: HashMap<String, String>,
    clock: u64,
}

impl State {
    fn is_read(&self, digest: &str) -> bool {
        self.readers.values().any(|read| read == digest)
    }

    fn bytes(&self) -> u64 {
        self.slots
            .values()
            .filter_map(|slot| match slot.cell.get() {
                Some(Ok(extraction)) => Some(extraction.bytes),
                _ => None,
            })
            .sum()
    }
}

/// Downloads each artifact digest once and shares its extraction (see the module docs).
pub struct ArtifactCache {
    fetcher: ArtifactFetcher,
    max_bytes: u64,
    state: Mutex<State>,
}

impl std::fmt::Debug for ArtifactCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArtifactCache")
            .field("fetcher", &self.fetcher)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl ArtifactCache {
    /// Default for [`ArtifactCache::new`]'s `max_bytes`: 256 MiB of extracted content, a
    /// quarter of the memory limit of Flux's Deployment, on the `/tmp` volume it mounts.
    pub const DEFAULT_MAX_BYTES: u64 = 256 << 20;

    /// A cache downloading with `fetcher` and keeping at most `max_bytes` of extracted
    /// content. With `max_bytes` 0 nothing is kept beyond the reconciles that hold it, but
    /// concurrent checkouts of one digest still share one download.
    pub fn new(fetcher: ArtifactFetcher, max_bytes: u64) -> ArtifactCache {
        ArtifactCache {
            fetcher,
            max_bytes,
            state: Mutex::new(State::default()),
        }
    }

    /// The fetcher that downloads for this cache.
    pub fn fetcher(&self) -> &ArtifactFetcher {
        &self.fetcher
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state is consistent after every statement that changes it: a panic elsewhere
        // while it was held leaves nothing half-done.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The extraction of the artifact `digest` at `url`, for `reader` (a Kustomization's
    /// `namespace/name`): from the cache, from the download in flight, or downloaded,
    /// verified and extracted now. The reader's previous digest, if no one else reads it, is
    /// let go.
    pub async fn checkout(
        &self,
        reader: &str,
        url: &str,
        digest: &str,
    ) -> Result<Arc<Extraction>, Arc<FetchError>> {
        let cell = {
            let mut state = self.state();
            state.clock += 1;
            let now = state.clock;
            let previous = state.readers.insert(reader.to_string(), digest.to_string());
            if let Some(previous) = previous.filter(|previous| previous != digest)
                && !state.is_read(&previous)
            {
                state.slots.remove(&previous);
            }
            let slot = state
                .slots
                .entry(digest.to_string())
                .or_insert_with(|| Slot {
                    cell: Arc::new(OnceCell::new()),
                    last_used: now,
                });
            slot.last_used = now;
            slot.cell.clone()
        };
        let outcome = cell
            .get_or_init(|| async {
                let dir = tempfile::Builder::new()
                    // Flux's prefix: the path shows in messages such as "kustomization path not found".
                    .prefix("kustomization-")
                    .tempdir()
                    .map_err(|source| {
                        Arc::new(FetchError::Io {
                            url: url.to_string(),
                            context: "failed to create a temporary directory",
                            source,
                        })
                    })?;
                let summary = self
                    .fetcher
                    .fetch(url, digest, dir.path())
                    .await
                    .map_err(Arc::new)?;
                Ok(Arc::new(Extraction {
                    dir,
                    bytes: summary.bytes,
                }))
            })
            .await
            .clone();
        let mut state = self.state();
        let this_slot = state
            .slots
            .get(digest)
            .is_some_and(|slot| Arc::ptr_eq(&slot.cell, &cell));
        match &outcome {
            Err(_) if this_slot => {
                // A failed download is not shared with later reconciles.
                state.slots.remove(digest);
            }
            Ok(_) if this_slot => self.evict(&mut state, digest),
            _ => {}
        }
        outcome
    }

    /// Lets go of what `reader` read: its digest leaves the cache when no one else reads it.
    /// Called when a Kustomization is deleted.
    pub fn forget(&self, reader: &str) {
        let mut state = self.state();
        if let Some(digest) = state.readers.remove(reader)
            && !state.is_read(&digest)
        {
            state.slots.remove(&digest);
        }
    }

    /// Lets go of extractions, those used longest ago first and unread ones before read ones,
    /// until what is kept fits in `max_bytes`. `keep` (just checked out) goes last.
    fn evict(&self, state: &mut State, keep: &str) {
        let mut total = state.bytes();
        if total <= self.max_bytes {
            return;
        }
        let mut candidates: Vec<(bool, bool, u64, String, u64)> = state
            .slots
            .iter()
            .filter_map(|(digest, slot)| match slot.cell.get() {
                Some(Ok(extraction)) => Some((
                    digest == keep,
                    state.is_read(digest),
                    slot.last_used,
                    digest.clone(),
                    extraction.bytes,
                )),
                _ => None,
            })
            .collect();
        candidates.sort();
        for (_, _, _, digest, bytes) in candidates {
            if total <= self.max_bytes {
                break;
            }
            state.slots.remove(&digest);
            total = total.saturating_sub(bytes);
        }
    }

    /// Digests whose extraction the cache holds now, and their bytes.
    pub fn held(&self) -> Vec<(String, u64)> {
        let state = self.state();
        let mut held: Vec<(String, u64)> = state
            .slots
            .iter()
            .filter_map(|(digest, slot)| match slot.cell.get() {
                Some(Ok(extraction)) => Some((digest.clone(), extraction.bytes)),
                _ => None,
            })
            .collect();
        held.sort();
        held
    }
}

#[cfg(test)]
mod tests;
