//! How much of what a store on disk acknowledged survives a power loss.

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What an acknowledged write survives, on a store on disk (in memory and remote stores
/// ignore it: the first has no disk, the second its own rules).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// Survives the process dying (a crash, `kill -9`); the last writes may be lost on
    /// a power loss or an OS crash: RocksDB's write-ahead log is written, not synced.
    #[default]
    Process,
    /// Survives a power loss: the store is flushed to disk before each write returns.
    Sync,
    /// A background thread flushes the store this often: a power loss loses at most the
    /// writes of the last interval.
    Interval(Duration),
}

impl std::str::FromStr for Durability {
    type Err = Error;

    /// `process`, `sync`, or an interval: `250ms`, `2s`.
    fn from_str(text: &str) -> Result<Self> {
        let bad = || {
            Error::InvalidInput(format!(
                "durability {text:?}: say process, sync, or an interval such as 100ms or 2s"
            ))
        };
        match text {
            "process" => Ok(Self::Process),
            "sync" => Ok(Self::Sync),
            _ => {
                let (number, unit) = text
                    .find(|c: char| !c.is_ascii_digit())
                    .map(|i| text.split_at(i))
                    .ok_or_else(bad)?;
                let n: u64 = number.parse().map_err(|_| bad())?;
                let interval = match unit {
                    "ms" => Duration::from_millis(n),
                    "s" => Duration::from_secs(n),
                    _ => return Err(bad()),
                };
                if interval.is_zero() {
                    return Err(bad());
                }
                Ok(Self::Interval(interval))
            }
        }
    }
}

impl std::fmt::Display for Durability {
    /// As [`FromStr`](std::str::FromStr) reads it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Process => f.write_str("process"),
            Self::Sync => f.write_str("sync"),
            Self::Interval(every) => write!(f, "{}ms", every.as_millis()),
        }
    }
}

/// The thread of [`Durability::Interval`]: flushes every interval, and once more when
/// stopped (the store is being dropped).
pub(crate) struct Flusher {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Flusher {
    pub(crate) fn start(
        every: Duration,
        flush: Box<dyn Fn() -> Result<()> + Send + 'static>,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Acquire) {
                std::thread::park_timeout(every);
                // A failed flush is tried again at the next interval; the store's own
                // writes report their own errors.
                let _ = flush();
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durability_reads_its_three_forms_and_refuses_the_rest() {
        assert_eq!(
            "process".parse::<Durability>().unwrap(),
            Durability::Process
        );
        assert_eq!("sync".parse::<Durability>().unwrap(), Durability::Sync);
        assert_eq!(
            "250ms".parse::<Durability>().unwrap(),
            Durability::Interval(Duration::from_millis(250))
        );
        assert_eq!(
            "2s".parse::<Durability>().unwrap(),
            Durability::Interval(Duration::from_secs(2))
        );
        for text in ["process", "sync", "250ms"] {
            let d: Durability = text.parse().unwrap();
            assert_eq!(d.to_string(), text);
        }
        for bad in ["", "0ms", "fast", "10", "5m", "-1s", "ms"] {
            let err = bad.parse::<Durability>().unwrap_err();
            assert!(err.to_string().contains("process, sync"), "{bad}: {err}");
        }
    }

    #[test]
    fn the_flusher_flushes_on_its_interval_and_stops_when_dropped() {
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = count.clone();
        let flusher = Flusher::start(
            Duration::from_millis(10),
            Box::new(move || {
                seen.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }),
        );
        while count.load(Ordering::SeqCst) < 3 {
            std::thread::yield_now();
        }
        drop(flusher);
        let after = count.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(
            count.load(Ordering::SeqCst),
            after,
            "no flush after the drop"
        );
    }
}
