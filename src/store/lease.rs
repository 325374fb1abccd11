//! Leases: how the writers of a shared store claim sessions (or the whole store) from
//! each other, and the writers (`SessionWriter`s) this process holds.

use super::Store;
use crate::error::{Error, Result};
use crate::model::SessionId;
use crate::rdf::lease_quads;
use crate::storage::Change;
use oxigraph::model::{NamedNode, Quad};
use std::collections::HashSet;
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

/// How long the receipt a fenced commit leaves stays before others clear it away.
const RECEIPT_TTL: Duration = Duration::from_secs(10);

/// A lease held, and the receipt its fenced commit leaves.
pub(super) struct Lease {
    pub(super) node: NamedNode,
    /// Its `ft:leaseExpires`.
    pub(super) expires: oxigraph::model::Literal,
    pub(super) quads: Vec<Quad>,
    /// What a fenced commit leaves in its place (see [`crate::storage::Fence`]).
    pub(super) receipt: Vec<Quad>,
}

impl Store {
    /// Claims `keys` (the whole store if empty) against the other writers of a shared
    /// store: writes a lease, reads every lease back, and goes ahead only if no other
    /// unexpired lease claims the same; otherwise withdraws and tries again after a
    /// random pause. Two writers can never both go ahead: whichever wrote second sees
    /// the first's lease. Both may step back, hence the pauses.
    pub(super) fn acquire(&self, keys: &[NamedNode]) -> Result<Lease> {
        let store_key = self.iris.lease_graph();
        let keys: Vec<NamedNode> = if keys.is_empty() {
            vec![store_key.clone()]
        } else {
            keys.to_vec()
        };
        let claims = |other: &[NamedNode]| {
            other
                .iter()
                .any(|k| *k == store_key || keys.contains(k) || keys.contains(&store_key))
        };
        let started = Instant::now();
        let mut pause = Duration::from_millis(2);
        loop {
            let id = uuid::Uuid::now_v7();
            let node = self.iris.lease(&id.to_string());
            let expires = chrono::Utc::now()
                + chrono::Duration::from_std(self.lease_ttl).expect("a lease of sane length");
            let quads = lease_quads(&self.iris, &node, &keys, expires);
            self.backend.commit(Change {
                inserts: quads.clone(),
                ..Change::default()
            })?;
            let now = chrono::Utc::now();
            let mut stale = Vec::new();
            let mut blocked = false;
            for other in self.rdf().leases()? {
                // A receipt (no keys) blocks nothing; it is cleared once lapsed.
                if other.node == node || !(other.keys.is_empty() || claims(&other.keys)) {
                    continue;
                }
                match other.expires {
                    Some(t) if t > now => blocked |= !other.keys.is_empty(),
                    _ => stale.extend(other.quads),
                }
            }
            if !blocked {
                // A lapsed lease is cleared before anything is read: its writer, if it
                // only stalled, then finds its lease gone when its commit arrives, and
                // the fence refuses that commit.
                if !stale.is_empty() {
                    self.backend.commit(Change {
                        removes: stale,
                        ..Change::default()
                    })?;
                }
                let receipt_expires = chrono::Utc::now()
                    + chrono::Duration::from_std(RECEIPT_TTL).expect("a small duration");
                let receipt_node = self.iris.lease(&format!("{id}.done"));
                let receipt = lease_quads(&self.iris, &receipt_node, &[], receipt_expires);
                return Ok(Lease {
                    node,
                    expires: crate::rdf::lease_expiry(expires),
                    quads,
                    receipt,
                });
            }
            self.backend.commit(Change {
                removes: quads,
                ..Change::default()
            })?;
            if started.elapsed() > self.lease_wait {
                let what = match keys.as_slice() {
                    [k] if *k == store_key => format!("store {}", self.location()),
                    [k] => format!("session {}", self.iris.name_of(k.as_ref())),
                    _ => format!("one of {} sessions", keys.len()),
                };
                return Err(Error::Contended {
                    what,
                    seconds: started.elapsed().as_secs_f64().round() as u64,
                });
            }
            // Up to twice the pause, from the random bits of the lease id.
            let jitter = (id.as_u128() & 0xffff) as u32;
            std::thread::sleep(pause + pause * jitter / 0xffff);
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }

    /// [`Error::Busy`] if a `SessionWriter` holds `session`.
    pub(crate) fn not_held(&self, session: &SessionId) -> Result<()> {
        if self.writers().contains(session) {
            return Err(Error::Busy {
                session: session.to_string(),
            });
        }
        Ok(())
    }

    /// The receipt this process's last fenced commit left.
    pub(super) fn receipt(&self) -> MutexGuard<'_, Vec<Quad>> {
        self.receipt.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn writers(&self) -> MutexGuard<'_, HashSet<SessionId>> {
        self.writers.lock().unwrap_or_else(|p| p.into_inner())
    }
}
