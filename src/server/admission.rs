//! Which requests run now, which wait their turn, and which are turned away.
//!
//! Work on the store runs in three lanes, each with its own slots: SPARQL queries,
//! reads (REST reads and web UI pages) and writes (REST writes, SPARQL updates, the web
//! UI's forms). A write is admitted only after its token is checked, so anonymous
//! traffic, however much of it, can fill the query and read lanes but never take a
//! write's slot. A request that finds its lane full waits in line (first come, first
//! served) for up to the configured wait; a lane whose line is already at its bound,
//! or a wait that runs out, is answered 503 with `Retry-After`.

use super::ApiError;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A kind of work, with slots of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lane {
    /// SPARQL queries, the shipped queries.
    Query,
    /// REST reads and web UI pages.
    Read,
    /// Writes, after their token was checked.
    Write,
}

impl Lane {
    fn name(self) -> &'static str {
        match self {
            Lane::Query => "query",
            Lane::Read => "read",
            Lane::Write => "write",
        }
    }
}

/// The lanes of one server.
pub(crate) struct Admission {
    query: Gate,
    read: Gate,
    write: Gate,
    /// How long a request may wait for a slot.
    wait: Duration,
}

/// One lane: its slots and its line.
struct Gate {
    slots: Arc<Semaphore>,
    size: usize,
    waiting: AtomicUsize,
    max_waiting: usize,
}

impl Gate {
    fn new(size: usize, max_waiting: usize) -> Self {
        let size = size.max(1);
        Self {
            slots: Arc::new(Semaphore::new(size)),
            size,
            waiting: AtomicUsize::new(0),
            max_waiting,
        }
    }
}

/// Leaves the line when dropped: on admission, on timeout, or when the client goes
/// away while waiting.
struct InLine<'a>(&'a AtomicUsize);

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Admission {
    /// Lanes of `slots` slots each, whose lines hold at most `max_waiting` requests
    /// that wait at most `wait`.
    pub(crate) fn new(slots: usize, max_waiting: usize, wait: Duration) -> Self {
        Self {
            query: Gate::new(slots, max_waiting),
            read: Gate::new(slots, max_waiting),
            write: Gate::new(slots, max_waiting),
            wait,
        }
    }

    fn gate(&self, lane: Lane) -> &Gate {
        match lane {
            Lane::Query => &self.query,
            Lane::Read => &self.read,
            Lane::Write => &self.write,
        }
    }

    /// A slot of `lane`, at once if one is free, else after waiting in line; 503 with
    /// `Retry-After` when the line is full or the wait runs out.
    pub(crate) async fn enter(&self, lane: Lane) -> Result<OwnedSemaphorePermit, ApiError> {
        let gate = self.gate(lane);
        if let Ok(permit) = Arc::clone(&gate.slots).try_acquire_owned() {
            return Ok(permit);
        }
        if gate.waiting.fetch_add(1, Ordering::SeqCst) >= gate.max_waiting {
            gate.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(busy(lane, "its line is full"));
        }
        let _in_line = InLine(&gate.waiting);
        match tokio::time::timeout(self.wait, Arc::clone(&gate.slots).acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) => Err(ApiError::internal("the server is shutting down")),
            Err(_) => Err(busy(lane, "no slot came free in time")),
        }
    }

    /// How many requests of `lane` run now, and wait.
    pub(crate) fn load(&self, lane: Lane) -> (usize, usize) {
        let gate = self.gate(lane);
        (
            gate.size.saturating_sub(gate.slots.available_permits()),
            gate.waiting.load(Ordering::SeqCst),
        )
    }
}

fn busy(lane: Lane, why: &str) -> ApiError {
    ApiError::busy(format!(
        "the server is busy: every {} slot is taken and {why}; retry shortly",
        lane.name()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_full_lane_queues_in_order_then_refuses_past_its_line_or_its_wait() {
        let admission = Arc::new(Admission::new(1, 1, Duration::from_secs(5)));
        let first = admission.enter(Lane::Read).await.unwrap();
        // The second waits in line; the third finds the line full.
        let waiting = {
            let admission = Arc::clone(&admission);
            tokio::spawn(async move { admission.enter(Lane::Read).await.map(|_| ()) })
        };
        tokio::task::yield_now().await;
        assert_eq!(admission.load(Lane::Read), (1, 1));
        let refused = admission.enter(Lane::Read).await.unwrap_err();
        assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            refused.message.contains("line is full"),
            "{}",
            refused.message
        );
        // Other lanes are not affected.
        let write = admission.enter(Lane::Write).await.unwrap();
        drop(first);
        waiting.await.unwrap().unwrap();
        assert_eq!(admission.load(Lane::Read), (0, 0));
        drop(write);
        // A wait that runs out (the paused clock moves on when all tasks wait).
        let _a = admission.enter(Lane::Query).await.unwrap();
        let late = admission.enter(Lane::Query).await.unwrap_err();
        assert!(late.message.contains("in time"), "{}", late.message);
        assert_eq!(admission.load(Lane::Query), (1, 0));
    }
}
