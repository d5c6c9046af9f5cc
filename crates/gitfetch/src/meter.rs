//! Bounding the bytes a fetch receives: a progress sink that counts the pack bytes gitoxide
//! reads and stops the fetch, through its interrupt flag, once they pass a limit.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use gix::progress::{Id, MessageLevel, Step, StepShared, Unit};

use crate::deadline::Cancel;

/// The progress id gitoxide gives to the bytes of a pack as they are read
/// (`gix_pack::bundle::write::ProgressId::ReadPackBytes`).
const READ_PACK_BYTES: Id = *b"BWRB";

/// Counts the pack bytes of one fetch against a limit.
#[derive(Clone)]
pub(crate) struct PackMeter {
    id: Id,
    shared: Arc<Shared>,
    step: StepShared,
}

struct Shared {
    limit: u64,
    received: AtomicU64,
    exceeded: AtomicBool,
    cancel: Cancel,
}

impl PackMeter {
    /// A meter stopping the fetch watching `cancel` once more than `limit` bytes arrived.
    pub(crate) fn new(limit: u64, cancel: &Cancel) -> Self {
        PackMeter {
            id: gix::progress::UNKNOWN,
            shared: Arc::new(Shared {
                limit,
                received: AtomicU64::new(0),
                exceeded: AtomicBool::new(false),
                cancel: cancel.clone(),
            }),
            step: StepShared::default(),
        }
    }

    /// Whether the limit was passed (and the fetch told to stop).
    pub(crate) fn exceeded(&self) -> bool {
        self.shared.exceeded.load(Ordering::Relaxed)
    }

    fn child(&self, id: Id) -> Self {
        PackMeter {
            id,
            shared: self.shared.clone(),
            step: StepShared::default(),
        }
    }

    fn count(&self, n: Step) {
        if self.id != READ_PACK_BYTES {
            return;
        }
        let total = self.shared.received.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
        if total > self.shared.limit && !self.shared.exceeded.swap(true, Ordering::Relaxed) {
            self.shared.cancel.abort();
        }
    }
}

impl gix::progress::Count for PackMeter {
    fn set(&self, step: Step) {
        let previous = self.step.swap(step, Ordering::Relaxed);
        self.count(step.saturating_sub(previous));
    }

    fn step(&self) -> Step {
        self.step.load(Ordering::Relaxed)
    }

    fn inc_by(&self, step: Step) {
        self.step.fetch_add(step, Ordering::Relaxed);
        self.count(step);
    }

    fn counter(&self) -> StepShared {
        self.step.clone()
    }
}

impl gix::progress::Progress for PackMeter {
    fn init(&mut self, _max: Option<Step>, _unit: Option<Unit>) {}

    fn set_name(&mut self, _name: String) {}

    fn name(&self) -> Option<String> {
        None
    }

    fn id(&self) -> Id {
        self.id
    }

    fn message(&self, _level: MessageLevel, _message: String) {}
}

impl gix::progress::NestedProgress for PackMeter {
    type SubProgress = PackMeter;

    fn add_child(&mut self, _name: impl Into<String>) -> Self::SubProgress {
        self.child(gix::progress::UNKNOWN)
    }

    fn add_child_with_id(&mut self, _name: impl Into<String>, id: Id) -> Self::SubProgress {
        self.child(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gix::progress::{Count, NestedProgress};

    #[test]
    fn pack_bytes_past_the_limit_stop_the_fetch() {
        let cancel = Cancel::default();
        let mut root = PackMeter::new(100, &cancel);
        let other = root.add_child_with_id("other", *b"XXXX");
        other.inc_by(1000);
        assert!(!root.exceeded() && !cancel.is_cancelled());
        let mut fetch = root.add_child("fetch");
        let pack = fetch.add_child_with_id("read pack", READ_PACK_BYTES);
        pack.inc_by(60);
        pack.inc_by(40);
        assert!(!root.exceeded() && !cancel.is_cancelled());
        pack.inc_by(1);
        assert!(root.exceeded() && cancel.is_cancelled());
        assert!(!cancel.timed_out());
    }
}
