//! A controller subprocess and what /proc says about it (RSS, CPU time).

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A running controller: one process, or one per shard. Killed on drop if not stopped.
pub struct Controller {
    instances: Vec<Instance>,
    /// The first instance's log.
    pub log: PathBuf,
}

/// One controller process.
struct Instance {
    child: Child,
    health_port: u16,
    log: PathBuf,
    sampler: Option<Sampler>,
}

/// What to run and how.
pub struct Launch<'a> {
    pub binary: &'a Path,
    pub kubeconfig: &'a Path,
    pub concurrent: u32,
    pub extra_args: &'a [String],
    pub log: PathBuf,
    pub temp_dir: PathBuf,
    /// 0: one process for every Kustomization. N: N processes, process i (from 1) started
    /// with `--watch-label-selector=sharding.fluxcd.io/key in (shard<i>)`, as Flux shards.
    pub shards: u32,
}

/// The label Flux's sharding keys Kustomizations with.
pub const SHARD_LABEL: &str = "sharding.fluxcd.io/key";

impl Controller {
    /// Starts the binary (once, or once per shard) with the flags both implementations
    /// understand, a private TMPDIR and stdout+stderr into `launch.log` (`-shard<i>` added to
    /// the file name of a shard's).
    pub fn start(launch: &Launch) -> Controller {
        let instances = if launch.shards == 0 {
            vec![Instance::start(launch, &launch.log, &launch.temp_dir, None)]
        } else {
            (1..=launch.shards)
                .map(|shard| {
                    let suffix = format!("shard{shard}");
                    let log = launch.log.with_extension(format!("{suffix}.log"));
                    let temp_dir = launch.temp_dir.with_extension(&suffix);
                    let selector = format!("--watch-label-selector={SHARD_LABEL} in ({suffix})");
                    Instance::start(launch, &log, &temp_dir, Some(selector))
                })
                .collect()
        };
        let log = instances[0].log.clone();
        Controller { instances, log }
    }

    /// The process id (of the first shard).
    pub fn pid(&self) -> u32 {
        self.instances[0].child.id()
    }

    /// Every process id, one per shard.
    pub fn pids(&self) -> Vec<u32> {
        self.instances.iter().map(|i| i.child.id()).collect()
    }

    /// Waits until `/readyz` on every instance's health port answers 200; panics with the log
    /// tail if a process exits or `timeout` passes first.
    pub fn wait_healthy(&mut self, timeout: Duration) {
        for instance in &mut self.instances {
            instance.wait_healthy(timeout);
        }
    }

    /// The highest RSS the samplers saw, summed over the instances, in bytes.
    pub fn sampled_peak_rss(&self) -> u64 {
        self.instances
            .iter()
            .filter_map(|i| i.sampler.as_ref())
            .map(|s| s.peak_rss.load(Ordering::Relaxed))
            .sum()
    }

    /// The last `lines` lines of each instance's log.
    pub fn log_tail(&self, lines: usize) -> String {
        self.instances
            .iter()
            .map(|i| i.log_tail(lines))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Sends SIGTERM to every instance, waits up to 15 s each (then SIGKILL). Returns whether
    /// all exited by themselves.
    pub fn stop(&mut self) -> bool {
        // Every instance is stopped, whatever the others did.
        let stopped: Vec<bool> = self.instances.iter_mut().map(Instance::stop).collect();
        stopped.into_iter().all(|s| s)
    }
}

impl Instance {
    fn start(launch: &Launch, log_path: &Path, temp_dir: &Path, selector: Option<String>) -> Self {
        let (metrics_port, health_port) = (free_port(), free_port());
        std::fs::create_dir_all(temp_dir).expect("create the controller's TMPDIR");
        let log =
            File::create(log_path).unwrap_or_else(|e| panic!("create {}: {e}", log_path.display()));
        let mut cmd = Command::new(launch.binary);
        cmd.args([
            "--watch-all-namespaces=true".to_string(),
            format!("--concurrent={}", launch.concurrent),
            "--log-level=info".to_string(),
            "--log-encoding=json".to_string(),
            format!("--metrics-addr=127.0.0.1:{metrics_port}"),
            format!("--health-addr=127.0.0.1:{health_port}"),
            "--events-addr=".to_string(),
            "--enable-leader-election=false".to_string(),
        ])
        .args(selector)
        .args(launch.extra_args)
        .env("KUBECONFIG", launch.kubeconfig)
        .env("RUNTIME_NAMESPACE", "flux-system")
        .env("TMPDIR", temp_dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("clone the log file handle"))
        .stderr(log);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", launch.binary.display()));
        let sampler = Sampler::start(child.id());
        Instance {
            child,
            health_port,
            log: log_path.to_path_buf(),
            sampler: Some(sampler),
        }
    }

    fn wait_healthy(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "the controller exited with {status} during startup; log tail:\n{}",
                    self.log_tail(30)
                );
            }
            if http_status(self.health_port, "/readyz") == Some(200) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the controller was not ready after {timeout:?}; log tail:\n{}",
                self.log_tail(30)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    fn stop(&mut self) -> bool {
        if let Some(sampler) = self.sampler.take() {
            sampler.stop();
        }
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return true;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        false
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Samples VmRSS every 100 ms (VmHWM already holds the peak, but only while the process lives).
struct Sampler {
    stop: Arc<AtomicBool>,
    peak_rss: Arc<AtomicU64>,
    thread: JoinHandle<()>,
}

impl Sampler {
    fn start(pid: u32) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peak_rss = Arc::new(AtomicU64::new(0));
        let (stop2, peak2) = (stop.clone(), peak_rss.clone());
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                if let Some(mem) = memory(pid) {
                    peak2.fetch_max(mem.rss.max(mem.hwm), Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Sampler {
            stop,
            peak_rss,
            thread,
        }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
    }
}

/// Resident memory of a process, in bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    /// VmRSS: resident now.
    pub rss: u64,
    /// VmHWM: the peak resident set so far.
    pub hwm: u64,
}

/// VmRSS and VmHWM summed over `pids` (the instances of one sharded controller).
pub fn memory_of(pids: &[u32]) -> Option<Memory> {
    pids.iter().try_fold(Memory::default(), |sum, pid| {
        let one = memory(*pid)?;
        Some(Memory {
            rss: sum.rss + one.rss,
            hwm: sum.hwm + one.hwm,
        })
    })
}

/// CPU seconds summed over `pids`.
pub fn cpu_seconds_of(pids: &[u32]) -> Option<f64> {
    pids.iter().map(|pid| cpu_seconds(*pid)).sum()
}

/// Open file descriptors summed over `pids`.
pub fn open_fds_of(pids: &[u32]) -> Option<usize> {
    pids.iter().map(|pid| open_fds(*pid)).sum()
}

/// VmRSS and VmHWM from /proc/PID/status.
pub fn memory(pid: u32) -> Option<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    };
    Some(Memory {
        rss: field("VmRSS:")?,
        hwm: field("VmHWM:")?,
    })
}

/// How many file descriptors a process holds open (entries of /proc/PID/fd).
pub fn open_fds(pid: u32) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// How many lines of the JSON log at `path`, from byte `from` on, are at level error
/// (`"level":"error"`, in any case). Returns the count and the log's length.
pub fn error_lines_since(path: &Path, from: u64) -> (usize, u64) {
    let Ok(text) = std::fs::read(path) else {
        return (0, from);
    };
    let start = usize::try_from(from).unwrap_or(usize::MAX).min(text.len());
    let errors = String::from_utf8_lossy(&text[start..])
        .lines()
        .filter(|line| line.to_ascii_lowercase().contains("\"level\":\"error\""))
        .count();
    (errors, text.len() as u64)
}

/// CPU time (user + system, including waited-for children) of a process, in seconds.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at field 3 (state).
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields
        .get(11..15)?
        .iter()
        .map(|f| f.parse::<u64>().unwrap_or(0))
        .sum();
    Some(ticks as f64 / clock_ticks_per_second())
}

/// `getconf CLK_TCK`, 100 if that fails.
fn clock_ticks_per_second() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// A loopback port that was free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("find a free port")
        .port()
}

/// The status code of `GET path` on 127.0.0.1:port, if it answers.
fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}
