//! (c): our library's `build()` called in this process on several threads at once, over the
//! same tree. Builds share nothing, so builds/second should grow with the thread count up to
//! the number of CPUs; a global lock would keep it flat.

use std::path::Path;
use std::sync::Barrier;
use std::time::Instant;

use kustomize::{BuildOptions, Object, build};

/// One measurement: `threads` threads each building the tree `builds_per_thread` times.
pub struct Throughput {
    pub threads: usize,
    pub builds: u64,
    pub seconds: f64,
}

impl Throughput {
    /// Builds per second.
    pub fn rate(&self) -> f64 {
        self.builds as f64 / self.seconds
    }
}

/// Builds `dir` once (the check against kustomize's output and a warm-up); panics with the
/// build error.
pub fn build_once(root: &Path, dir: &Path) -> Vec<Object> {
    build(root, dir, &BuildOptions::default())
        .unwrap_or_else(|e| panic!("the library failed to build {}: {e}", dir.display()))
}

/// Times `threads` threads each building `dir` `builds_per_thread` times, all started together.
pub fn measure(root: &Path, dir: &Path, threads: usize, builds_per_thread: u64) -> Throughput {
    let barrier = Barrier::new(threads + 1);
    let expected = build_once(root, dir).len();
    let seconds = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    for _ in 0..builds_per_thread {
                        let objects = build_once(root, dir);
                        assert_eq!(
                            objects.len(),
                            expected,
                            "a parallel build returned a different number of objects"
                        );
                    }
                })
            })
            .collect();
        barrier.wait();
        let started = Instant::now();
        for worker in workers {
            if let Err(panic) = worker.join() {
                std::panic::resume_unwind(panic);
            }
        }
        started.elapsed().as_secs_f64()
    });
    Throughput {
        threads,
        builds: threads as u64 * builds_per_thread,
        seconds,
    }
}
