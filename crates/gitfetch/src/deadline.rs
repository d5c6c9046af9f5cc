//! Cutting an operation at its timeout, whatever it is blocked on.
//!
//! The work runs on a thread of its own; the caller waits for its answer at most the
//! timeout. When the time is up the caller returns at once and raises the shared
//! interrupt flag, which gitoxide checks while it receives a pack and this crate checks
//! before each file it writes, so the abandoned thread stops soon after; a transport that
//! is blocked in a read ends by its own timeout, set to the same duration.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// The interrupt flag of one operation, shared with the thread doing it, and why it was
/// raised.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cancel {
    /// Raised to stop the work: at the timeout, or by a limit the work passed.
    abort: Arc<AtomicBool>,
    /// Raised with `abort` when the timeout passed.
    timed_out: Arc<AtomicBool>,
}

impl Cancel {
    /// Whether the work was told to stop.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }

    /// Whether the caller gave up waiting.
    pub(crate) fn timed_out(&self) -> bool {
        self.timed_out.load(Ordering::Relaxed)
    }

    /// The flag itself, as gitoxide takes it.
    pub(crate) fn flag(&self) -> &AtomicBool {
        &self.abort
    }

    /// Tells the work to stop because a limit was passed.
    pub(crate) fn abort(&self) {
        self.abort.store(true, Ordering::Relaxed);
    }

    fn time_out(&self) {
        self.timed_out.store(true, Ordering::Relaxed);
        self.abort.store(true, Ordering::Relaxed);
    }
}

/// How an operation run under a timeout ended without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stopped {
    /// The timeout passed first.
    TimedOut,
    /// The worker ended without answering (it panicked, or could not be started).
    Lost,
}

/// Runs `work` on its own thread and returns its answer, or [`Stopped::TimedOut`] once
/// `timeout` has passed (and then raises the flag `work` was given).
pub(crate) fn run<T, F>(timeout: Duration, work: F) -> Result<T, Stopped>
where
    T: Send + 'static,
    F: FnOnce(Cancel) -> T + Send + 'static,
{
    let cancel = Cancel::default();
    let (tx, rx) = mpsc::sync_channel(1);
    let worker_cancel = cancel.clone();
    let spawned = std::thread::Builder::new()
        .name("gitfetch".to_string())
        .spawn(move || {
            // The receiver is gone when the caller timed out: the answer is dropped.
            let _ = tx.send(work(worker_cancel));
        });
    if spawned.is_err() {
        return Err(Stopped::Lost);
    }
    match rx.recv_timeout(timeout) {
        Ok(answer) => Ok(answer),
        Err(mpsc::RecvTimeoutError::Timeout) => {
            cancel.time_out();
            Err(Stopped::TimedOut)
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(Stopped::Lost),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_in_time_are_returned() {
        assert_eq!(run(Duration::from_secs(5), |_| 7), Ok(7));
    }

    #[test]
    fn a_hung_worker_is_cut_and_told_to_stop() {
        let (seen_tx, seen_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let out = run(Duration::from_millis(200), move |cancel| {
            while !cancel.is_cancelled() {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = seen_tx.send(());
            // The worker stays hung until the test lets it go: `run` returning at all shows
            // that it does not wait for its worker.
            let _ = release_rx.recv();
        });
        assert_eq!(out, Err(Stopped::TimedOut));
        // The flag was raised: the worker saw it while still running.
        assert_eq!(seen_rx.recv(), Ok(()));
        drop(release_tx);
    }

    #[test]
    fn a_panicking_worker_is_lost() {
        let out: Result<(), _> = run(Duration::from_secs(5), |_| panic!("boom"));
        assert_eq!(out, Err(Stopped::Lost));
    }
}
