//! The `process_*` family as the Prometheus Go client's process collector reports it on
//! Linux, read from /proc/self on every scrape.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// /proc's clock ticks per second (`USER_HZ`, 100 on every Linux architecture).
const USER_HZ: f64 = 100.0;

/// Reads /proc/self on each scrape.
#[derive(Debug, Default)]
pub struct ProcessCollector;

/// What one scrape read; a file that could not be read leaves its values out.
#[derive(Debug, Default, PartialEq)]
struct Sample {
    cpu_seconds: Option<f64>,
    virtual_memory_bytes: Option<f64>,
    start_time_seconds: Option<f64>,
    resident_memory_bytes: Option<f64>,
    open_fds: Option<f64>,
    max_fds: Option<f64>,
    virtual_memory_max_bytes: Option<f64>,
    network: Option<(f64, f64)>,
}

impl Sample {
    fn read() -> Sample {
        let mut sample = Sample::default();
        if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
            let boot_time = std::fs::read_to_string("/proc/stat")
                .ok()
                .and_then(|s| boot_time(&s));
            sample.apply_stat(&stat, boot_time);
        }
        sample.resident_memory_bytes = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| status_kib(&s, "VmRSS:"))
            .map(|kib| kib * 1024.0);
        sample.open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|entries| entries.count() as f64);
        if let Ok(limits) = std::fs::read_to_string("/proc/self/limits") {
            sample.max_fds = soft_limit(&limits, "Max open files");
            sample.virtual_memory_max_bytes = soft_limit(&limits, "Max address space");
        }
        sample.network = std::fs::read_to_string("/proc/self/net/dev")
            .ok()
            .map(|s| network_bytes(&s));
        sample
    }

    /// Fields of /proc/self/stat: utime and stime (14, 15), starttime (22), vsize (23).
    fn apply_stat(&mut self, stat: &str, boot_time: Option<f64>) {
        let Some((_, after_name)) = stat.rsplit_once(')') else {
            return;
        };
        // After the command name, fields start at the third (state).
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<f64>().ok());
        if let (Some(user), Some(system)) = (field(14), field(15)) {
            self.cpu_seconds = Some((user + system) / USER_HZ);
        }
        self.virtual_memory_bytes = field(23);
        if let (Some(ticks), Some(boot)) = (field(22), boot_time) {
            self.start_time_seconds = Some(boot + ticks / USER_HZ);
        }
    }
}

fn boot_time(proc_stat: &str) -> Option<f64> {
    proc_stat
        .lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|value| value.trim().parse().ok())
}

fn status_kib(status: &str, key: &str) -> Option<f64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}

/// The soft limit of a /proc/PID/limits row; `unlimited` as the Go client reports it (-1
/// becomes the largest value).
fn soft_limit(limits: &str, name: &str) -> Option<f64> {
    let rest = limits.lines().find_map(|line| line.strip_prefix(name))?;
    match rest.split_whitespace().next()? {
        "unlimited" => Some(u64::MAX as f64),
        value => value.parse().ok(),
    }
}

/// Bytes received and sent over every interface of the process's network namespace,
/// loopback included, as the Go client sums them.
fn network_bytes(net_dev: &str) -> (f64, f64) {
    net_dev
        .lines()
        .skip(2)
        .filter_map(|line| line.split_once(':'))
        .filter_map(|(_, counters)| {
            let counters: Vec<f64> = counters
                .split_whitespace()
                .filter_map(|c| c.parse().ok())
                .collect();
            Some((*counters.first()?, *counters.get(8)?))
        })
        .fold((0.0, 0.0), |(rx, tx), (r, t)| (rx + r, tx + t))
}

/// Encodes one sample of `metric` (its type from the metric), when there is a value.
fn encode(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    metric: Option<impl EncodeMetric>,
) -> std::fmt::Result {
    let Some(metric) = metric else {
        return Ok(());
    };
    let sample = encoder.encode_descriptor(name, help, None, metric.metric_type())?;
    metric.encode(sample)
}

fn gauge(value: Option<f64>) -> Option<ConstGauge<f64>> {
    value.map(ConstGauge::new)
}

fn counter(value: Option<f64>) -> Option<ConstCounter<f64>> {
    value.map(ConstCounter::new)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let s = Sample::read();
        let e = &mut encoder;
        encode(
            e,
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            counter(s.cpu_seconds),
        )?;
        encode(
            e,
            "process_max_fds",
            "Maximum number of open file descriptors.",
            gauge(s.max_fds),
        )?;
        encode(
            e,
            "process_network_receive_bytes",
            "Number of bytes received by the process over the network.",
            counter(s.network.map(|n| n.0)),
        )?;
        encode(
            e,
            "process_network_transmit_bytes",
            "Number of bytes sent by the process over the network.",
            counter(s.network.map(|n| n.1)),
        )?;
        encode(
            e,
            "process_open_fds",
            "Number of open file descriptors.",
            gauge(s.open_fds),
        )?;
        encode(
            e,
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            gauge(s.resident_memory_bytes),
        )?;
        encode(
            e,
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            gauge(s.start_time_seconds),
        )?;
        encode(
            e,
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            gauge(s.virtual_memory_bytes),
        )?;
        encode(
            e,
            "process_virtual_memory_max_bytes",
            "Maximum amount of virtual memory available in bytes.",
            gauge(s.virtual_memory_max_bytes),
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_give_cpu_memory_and_start_time() {
        // A command name with spaces and a parenthesis, as /proc allows.
        let stat = "4242 (kustomize (ctl)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 9 0 1000 123456789 5000 18446744073709551615";
        let mut sample = Sample::default();
        sample.apply_stat(stat, Some(1_700_000_000.0));
        assert_eq!(sample.cpu_seconds, Some(3.0));
        assert_eq!(sample.virtual_memory_bytes, Some(123_456_789.0));
        assert_eq!(sample.start_time_seconds, Some(1_700_000_010.0));
    }

    #[test]
    fn limits_and_network_counters_are_read_as_procfs_words_them() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \nMax open files            1048576              1048576              files     \nMax address space         unlimited            unlimited            bytes     \n";
        assert_eq!(soft_limit(limits, "Max open files"), Some(1_048_576.0));
        assert_eq!(
            soft_limit(limits, "Max address space"),
            Some(u64::MAX as f64)
        );
        let net = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo:     100       1    0    0    0     0          0         0      200       2    0    0    0     0       0          0\n  eth0:    1000      10    0    0    0     0          0         0     2000      20    0    0    0     0       0          0\n";
        assert_eq!(network_bytes(net), (1100.0, 2200.0));
    }

    #[test]
    fn a_scrape_of_this_process_has_every_series() {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(ProcessCollector));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_open_fds",
            "process_max_fds",
            "process_start_time_seconds",
            "process_virtual_memory_bytes",
        ] {
            assert!(
                text.lines().any(|l| l.starts_with(name)),
                "{name} in\n{text}"
            );
        }
    }
}
