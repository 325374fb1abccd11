//! The store's write lock, taken in turn, and the count of writes begun and done.
//!
//! Writers and readers both take the write lock: readers to bring the catalog up to
//! date from the RDF before they read (`listing.rs`), which must not interleave with a
//! write. A plain mutex lets whoever is awake first take it, so a stream of readers can
//! keep a writer out for as long as they keep coming; here each taker waits its turn,
//! so a writer waits only for those that asked before it (at most the read lane's
//! slots), never for those that come after.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// A lock served first come, first served.
#[derive(Default)]
pub(crate) struct WriteLock {
    /// The next ticket to hand out, and the ticket whose turn it is.
    tickets: Mutex<Tickets>,
    turn: Condvar,
}

#[derive(Default)]
struct Tickets {
    next: u64,
    serving: u64,
}

/// The lock, held until dropped.
pub(crate) struct WriteGuard<'a>(&'a WriteLock);

impl WriteLock {
    /// Waits for every earlier taker to be done, then holds the lock.
    pub(crate) fn lock(&self) -> WriteGuard<'_> {
        let mut tickets = self.tickets();
        let mine = tickets.next;
        tickets.next += 1;
        while tickets.serving != mine {
            tickets = self
                .turn
                .wait(tickets)
                .unwrap_or_else(PoisonError::into_inner);
        }
        WriteGuard(self)
    }

    /// How many hold the lock or wait for it.
    #[cfg(test)]
    fn queued(&self) -> u64 {
        let tickets = self.tickets();
        tickets.next - tickets.serving
    }

    fn tickets(&self) -> MutexGuard<'_, Tickets> {
        // Nothing is left half done under this mutex: a poisoned one is safe to use.
        self.tickets.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for WriteGuard<'_> {
    /// The next in line goes on (also when the holder panicked: a write that panicked
    /// committed nothing).
    fn drop(&mut self) {
        self.0.tickets().serving += 1;
        self.0.turn.notify_all();
    }
}

/// How many writes have begun and how many are done, so that a reader can tell whether
/// a write went in while it read. A write begins when its transaction starts and is
/// done once its effects (catalog, record index, read cache) are applied, or it gave
/// up. A reader that reads `done` first and `begun` last and finds them equal knew,
/// before it started, of every write that could have changed what it read.
#[derive(Default)]
pub(crate) struct Writes {
    begun: AtomicU64,
    done: AtomicU64,
}

impl Writes {
    /// Writes done so far.
    pub(crate) fn done(&self) -> u64 {
        self.done.load(Ordering::SeqCst)
    }

    /// Whether a write was under way at any moment since [`Writes::done`] gave `done`.
    pub(crate) fn since(&self, done: u64) -> bool {
        self.begun.load(Ordering::SeqCst) != done
    }
}

/// One write, counted as begun when made and as done when dropped.
pub(crate) struct Counted(Arc<Writes>);

impl Counted {
    pub(crate) fn begin(writes: &Arc<Writes>) -> Self {
        writes.begun.fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(writes))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.done.fetch_add(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// Waits until `n` take or hold `lock`.
    fn until_queued(lock: &WriteLock, n: u64) {
        while lock.queued() < n {
            std::thread::yield_now();
        }
    }

    #[test]
    fn takers_go_in_the_order_they_asked_so_later_ones_cannot_pass_a_waiting_one() {
        let lock = Arc::new(WriteLock::default());
        let held = lock.lock();
        let (order, went) = mpsc::channel();
        let mut threads = Vec::new();
        // A writer asks, then a stream of readers behind it.
        for who in ["writer", "reader 1", "reader 2", "reader 3"] {
            let before = lock.queued();
            let (taker, order) = (Arc::clone(&lock), order.clone());
            threads.push(std::thread::spawn(move || {
                let _turn = taker.lock();
                order.send(who).unwrap();
            }));
            until_queued(&lock, before + 1);
        }
        drop(held);
        for t in threads {
            t.join().unwrap();
        }
        let order: Vec<&str> = went.try_iter().collect();
        assert_eq!(order, ["writer", "reader 1", "reader 2", "reader 3"]);
        assert_eq!(lock.queued(), 0);
    }

    #[test]
    fn a_write_under_way_is_seen_by_a_reader_that_read_the_count_before_it() {
        let writes = Arc::new(Writes::default());
        let quiet = writes.done();
        assert!(!writes.since(quiet), "nothing was written");
        let write = Counted::begin(&writes);
        assert!(writes.since(quiet), "begun, not done");
        drop(write);
        assert!(writes.since(quiet), "done after the reader started");
        let later = writes.done();
        assert!(!writes.since(later), "done before the reader started");
    }
}
