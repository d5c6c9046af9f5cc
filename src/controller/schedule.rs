//! When the next reconcile runs.

use std::time::Duration;

use rand::Rng;

/// `interval` moved by a random amount of up to `percentage` percent either way, as Flux
/// spreads reconciles with `--interval-jitter-percentage`.
pub fn with_jitter(interval: Duration, percentage: u8) -> Duration {
    if percentage == 0 {
        return interval;
    }
    let spread = f64::from(percentage) / 100.0;
    let factor = 1.0 + rand::thread_rng().gen_range(-spread..=spread);
    interval.mul_f64(factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_bounds() {
        let interval = Duration::from_secs(100);
        for _ in 0..1000 {
            let next = with_jitter(interval, 5);
            assert!(
                next >= Duration::from_secs(95) && next <= Duration::from_secs(105),
                "{next:?}"
            );
        }
        assert_eq!(with_jitter(interval, 0), interval);
    }
}
