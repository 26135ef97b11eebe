//! What the server benchmarks share: summarising latency samples.

use std::time::Duration;

pub struct Summary {
    pub median: Duration,
    pub p90: Duration,
    pub p99: Duration,
}

/// Median (mean of the middle two for an even count) and nearest-rank p90/p99.
pub fn summarize(mut samples: Vec<Duration>) -> Summary {
    samples.sort_unstable();
    let n = samples.len().max(1);
    samples.resize(n, Duration::ZERO);
    let at = |q: f64| samples[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
    let median = if n % 2 == 1 {
        samples[n / 2]
    } else {
        (samples[n / 2 - 1] + samples[n / 2]) / 2
    };
    Summary {
        median,
        p90: at(0.90),
        p99: at(0.99),
    }
}

/// Microseconds, right-aligned for tables.
pub fn us(d: Duration) -> String {
    format!("{:>7.1} µs", d.as_secs_f64() * 1e6)
}
