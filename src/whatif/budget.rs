//! The money cap of a comparison, shared by the arms this process runs of it.

use crate::error::Result;
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

/// The money cap of one comparison, shared by every arm this process runs of it. A call
/// reserves its upper bound ([`Price::upper_bound`](super::Price::upper_bound)) before it is made and is made only
/// if what is charged, what is reserved and that bound fit under the cap together; its
/// charge then replaces the reservation. An arm whose call does not fit while others
/// hold reservations waits for them to settle (they may charge less than they hold),
/// and stops only when nothing held could free enough.
pub(crate) struct Budget {
    cap: Option<f64>,
    state: Mutex<Held>,
    settled: Condvar,
}

/// What a budget has counted.
struct Held {
    charged: f64,
    reserved: f64,
    /// Reservations not yet settled: a count, so that rounding in `reserved` cannot
    /// make an arm wait for a reservation no one holds.
    in_flight: usize,
}

/// Why no reservation was made.
pub(crate) enum Refused {
    /// Nothing held could free enough: the detail says what is charged and reserved.
    Exhausted(String),
    /// `stop` said so while the arm waited.
    Stopped,
}

/// The budgets of the comparisons this process is running, by comparison id (a UUID
/// v7, unique across stores): a comparison resumed while it runs shares its budget.
static RUNNING: Mutex<BTreeMap<String, Weak<Budget>>> = Mutex::new(BTreeMap::new());

impl Budget {
    /// The budget of comparison `id` this process already runs, else a new one with
    /// `charged()` counted.
    pub(crate) fn shared(
        id: &str,
        cap: Option<f64>,
        charged: impl FnOnce() -> Result<f64>,
    ) -> Result<Arc<Self>> {
        let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        running.retain(|_, b| b.strong_count() > 0);
        if let Some(budget) = running.get(id).and_then(Weak::upgrade) {
            return Ok(budget);
        }
        let budget = Arc::new(Self {
            cap,
            state: Mutex::new(Held {
                charged: charged()?,
                reserved: 0.0,
                in_flight: 0,
            }),
            settled: Condvar::new(),
        });
        running.insert(id.to_string(), Arc::downgrade(&budget));
        Ok(budget)
    }

    /// Reserves `upper` dollars, waiting while others hold reservations that may free
    /// enough; `stop` is asked while it waits.
    pub(crate) fn reserve(
        &self,
        upper: f64,
        stop: impl Fn() -> bool,
    ) -> std::result::Result<(), Refused> {
        let Some(cap) = self.cap else {
            return Ok(());
        };
        let mut held = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if stop() {
                return Err(Refused::Stopped);
            }
            if held.charged + held.reserved + upper <= cap {
                held.reserved += upper;
                held.in_flight += 1;
                return Ok(());
            }
            if held.in_flight == 0 {
                return Err(Refused::Exhausted(format!(
                    "${:.6} charged and ${:.6} reserved of the ${cap} budget (--budget-usd)",
                    held.charged,
                    held.reserved.max(0.0)
                )));
            }
            // Woken by a settle; the timeout is for `stop` (a cancel file).
            held = self
                .settled
                .wait_timeout(held, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Replaces a reservation by what the call was charged.
    pub(crate) fn settle(&self, reserved: Option<f64>, charged: f64) {
        let mut held = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(reserved) = reserved {
            held.reserved -= reserved;
            held.in_flight = held.in_flight.saturating_sub(1);
        }
        held.charged += charged;
        drop(held);
        self.settled.notify_all();
    }
}
