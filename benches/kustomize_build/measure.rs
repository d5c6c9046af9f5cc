//! Running one build command as a child process: wall time, peak RSS and its stdout.
//!
//! Peak RSS comes from GNU time (`/usr/bin/time -f %M`, the child's `ru_maxrss` as the kernel
//! reports it to the waiting parent: exact, no sampling). Without GNU time the bench samples
//! `VmHWM` in `/proc/<pid>/status` every millisecond, which misses growth in the child's last
//! millisecond; the report says which probe was used.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How peak RSS is measured.
pub enum RssProbe {
    /// GNU time at this path, asked for `%M` (KiB) into a file.
    GnuTime(PathBuf),
    /// Polling `/proc/<pid>/status` `VmHWM`.
    Sampled,
}

impl RssProbe {
    /// GNU time at /usr/bin/time if it understands `-f %M -o FILE`, else sampling.
    pub fn detect() -> RssProbe {
        let time = PathBuf::from("/usr/bin/time");
        let works = Command::new(&time)
            .args(["-f", "%M", "-o", "/dev/null", "true"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if works {
            RssProbe::GnuTime(time)
        } else {
            RssProbe::Sampled
        }
    }

    /// How the report names this probe.
    pub fn describe(&self) -> String {
        match self {
            RssProbe::GnuTime(path) => format!("`{} -f %M` (ru_maxrss)", path.display()),
            RssProbe::Sampled => {
                "VmHWM sampled every 1 ms from /proc (no GNU time; may miss the last ms)"
                    .to_string()
            }
        }
    }
}

/// One finished build.
pub struct Sample {
    /// From spawn to exit, seconds.
    pub seconds: f64,
    /// Peak resident set, KiB (None if it could not be read).
    pub peak_rss_kib: Option<u64>,
    /// What the build printed.
    pub stdout: Vec<u8>,
}

/// Runs `command` (program and arguments) with `dir` appended, in `cwd`; panics with its
/// stderr if it fails.
pub fn run(command: &[String], dir: &Path, cwd: &Path, probe: &RssProbe) -> Sample {
    let (program, args) = command
        .split_first()
        .expect("a build command needs a program");
    let rss_file = tempfile::NamedTempFile::new().expect("create a temporary file for GNU time");
    let mut cmd = match probe {
        RssProbe::GnuTime(time) => {
            let mut cmd = Command::new(time);
            cmd.arg("-f")
                .arg("%M")
                .arg("-o")
                .arg(rss_file.path())
                .arg(program);
            cmd
        }
        RssProbe::Sampled => Command::new(program),
    };
    cmd.args(args)
        .arg(dir)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", command.join(" ")));
    let sampler = matches!(probe, RssProbe::Sampled).then(|| HwmSampler::start(child.id()));
    let output = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("wait for {}: {e}", command.join(" ")));
    let seconds = started.elapsed().as_secs_f64();
    assert!(
        output.status.success(),
        "`{} {}` failed ({}):\n{}",
        command.join(" "),
        dir.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let peak_rss_kib = match probe {
        RssProbe::GnuTime(_) => std::fs::read_to_string(rss_file.path())
            .ok()
            .and_then(|text| text.lines().last()?.trim().parse().ok()),
        RssProbe::Sampled => sampler.map(HwmSampler::stop).filter(|kib| *kib > 0),
    };
    Sample {
        seconds,
        peak_rss_kib,
        stdout: output.stdout,
    }
}

/// Polls VmHWM of a process until it is gone.
struct HwmSampler {
    stop: Arc<AtomicBool>,
    peak_kib: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

impl HwmSampler {
    fn start(pid: u32) -> HwmSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peak_kib = Arc::new(AtomicU64::new(0));
        let (stop2, peak2) = (stop.clone(), peak_kib.clone());
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                match vm_hwm_kib(pid) {
                    Some(kib) => {
                        peak2.fetch_max(kib, Ordering::Relaxed);
                    }
                    // Exited (a zombie has no VmHWM line) or not yet exec'd.
                    None if peak2.load(Ordering::Relaxed) > 0 => return,
                    None => {}
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        HwmSampler {
            stop,
            peak_kib,
            thread,
        }
    }

    /// The highest VmHWM seen, KiB.
    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        self.peak_kib.load(Ordering::Relaxed)
    }
}

/// `VmHWM` of a live process, KiB.
fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The median (mean of the middle two for an even count); None for no values.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    })
}
