//! Progress reporting for long imports.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Steps of an import, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Scanning FILE rows (total = estimated rows of all inputs).
    Reading,
    /// Merging sorted runs into distinct SHA-256 (total = upper bound of distinct values).
    Merging,
    /// Building the SHA-1 and MD5 tables (total = 2 x distinct SHA-256).
    Indexing,
    /// Re-reading the written files to check them.
    Verifying,
}

impl Phase {
    pub fn label(self) -> &'static str {
        match self {
            Phase::Reading => "reading",
            Phase::Merging => "merging",
            Phase::Indexing => "indexing",
            Phase::Verifying => "verifying",
        }
    }
}

/// Receives progress every few tens of thousands of rows. Returning `false` cancels the
/// import: it stops with [`crate::Error::Cancelled`] and leaves nothing behind.
pub trait Progress {
    fn update(&self, phase: Phase, done: u64, total: Option<u64>) -> bool;
}

/// Ignores progress.
pub struct NoProgress;

impl Progress for NoProgress {
    fn update(&self, _: Phase, _: u64, _: Option<u64>) -> bool {
        true
    }
}

impl<F: Fn(Phase, u64, Option<u64>) -> bool> Progress for F {
    fn update(&self, phase: Phase, done: u64, total: Option<u64>) -> bool {
        self(phase, done, total)
    }
}

/// An indicatif bar (rows/s and ETA) on a terminal; otherwise one log line on stderr every
/// ten seconds.
pub struct TerminalProgress {
    state: Mutex<State>,
    terminal: bool,
}

struct State {
    phase: Option<Phase>,
    bar: Option<ProgressBar>,
    last_line: Instant,
    started: Instant,
}

impl Default for TerminalProgress {
    fn default() -> Self {
        Self::new()
    }
}

impl TerminalProgress {
    pub fn new() -> TerminalProgress {
        TerminalProgress {
            state: Mutex::new(State {
                phase: None,
                bar: None,
                last_line: Instant::now(),
                started: Instant::now(),
            }),
            terminal: std::io::stderr().is_terminal(),
        }
    }

    fn new_bar(phase: Phase, total: Option<u64>) -> ProgressBar {
        let bar = match total {
            Some(t) => ProgressBar::with_draw_target(Some(t), ProgressDrawTarget::stderr()),
            None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
        };
        let template =
            "{msg:>9} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} {per_sec} ETA {eta}";
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        bar.set_message(phase.label());
        bar
    }
}

impl Progress for TerminalProgress {
    fn update(&self, phase: Phase, done: u64, total: Option<u64>) -> bool {
        let Ok(mut state) = self.state.lock() else {
            return true;
        };
        if state.phase != Some(phase) {
            if let Some(bar) = state.bar.take() {
                bar.finish();
            }
            state.phase = Some(phase);
            state.started = Instant::now();
            if self.terminal {
                state.bar = Some(Self::new_bar(phase, total));
            }
        }
        if let Some(bar) = &state.bar {
            if let Some(t) = total {
                bar.set_length(t.max(done));
            }
            bar.set_position(done);
        } else if state.last_line.elapsed() >= Duration::from_secs(10) {
            state.last_line = Instant::now();
            let secs = state.started.elapsed().as_secs_f64().max(1e-3);
            let rate = done as f64 / secs;
            let eta = total
                .filter(|&t| t > done && rate > 0.0)
                .map(|t| format!(", ETA {:.0} s", (t - done) as f64 / rate))
                .unwrap_or_default();
            let of = total.map(|t| format!("/{t}")).unwrap_or_default();
            eprintln!("{}: {done}{of} ({rate:.0}/s{eta})", phase.label());
        }
        true
    }
}

impl Drop for TerminalProgress {
    fn drop(&mut self) {
        if let Ok(mut state) = self.state.lock()
            && let Some(bar) = state.bar.take()
        {
            bar.finish();
        }
    }
}
