//! The change feed of a shared store, as this process writes and follows it.
//!
//! Every process serving a shared store keeps a catalog of it (pages of sessions,
//! search), as a store on disk does. Other processes write unseen, so each write adds,
//! in its own update, an `ft:Change` naming the sessions it touched (`rdf/feed.rs`),
//! numbered by its writer: this process draws a writer id when it opens the store and
//! numbers its changes under its write lock, so they reach the store in their order.
//! Before a page or a search, a reader asks for the changes past the highest number it
//! has applied of each writer and makes their sessions suspect, which the catalog then
//! derives from the RDF: what it lists includes every write committed before the read,
//! whoever made it. Its own changes it skips: its catalog took them as it wrote them.
//!
//! Changes older than [`KEEP`] are removed (by any writer, at most once a minute), so
//! a reader that has not followed the feed for nearly that long may have missed some:
//! it rebuilds its catalog from the RDF instead. A new process builds it from the RDF
//! once, having noted the feed's heads first, so that a change committed meanwhile is
//! applied again rather than missed (deriving a session twice is harmless).

use super::catalog::Catalog;
use super::Store;
use crate::error::Result;
use crate::rdf::{change_quads, compaction, Touched};
use oxigraph::model::{NamedNode, Quad};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How long changes stay in the feed.
pub(crate) const KEEP: Duration = Duration::from_secs(600);
/// A reader whose last look at the feed is older than this rebuilds instead of
/// following: what it missed may be compacted away (two minutes spare for the writers'
/// clocks, which compaction goes by).
const FOLLOW_WITHIN: Duration = Duration::from_secs(480);
/// How often one process compacts the feed.
const COMPACT_EVERY: Duration = Duration::from_secs(60);

/// This process's side of a shared store's change feed.
pub(crate) struct Feed {
    /// This process's writer id.
    writer: String,
    /// The number of this process's last change.
    seq: AtomicU64,
    state: Mutex<Following>,
}

#[derive(Default)]
struct Following {
    /// The highest change number applied, per writer.
    heads: BTreeMap<String, u64>,
    /// When the feed was last read whole up to its end.
    synced: Option<Instant>,
    /// When this process last compacted the feed.
    compacted: Option<Instant>,
}

impl Feed {
    pub(crate) fn new() -> Self {
        Self {
            writer: uuid::Uuid::new_v4().simple().to_string(),
            seq: AtomicU64::new(0),
            state: Mutex::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, Following> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Store {
    /// The change a write that touched `sessions` (`None`: anything) adds to its update.
    pub(crate) fn change_for(&self, sessions: Option<Vec<NamedNode>>) -> Vec<Quad> {
        let Some(feed) = &self.feed else {
            return Vec::new();
        };
        let touched = match sessions {
            Some(sessions) if sessions.is_empty() => return Vec::new(),
            Some(sessions) => Touched::Sessions(sessions),
            None => Touched::Everything,
        };
        let seq = feed.seq.fetch_add(1, Ordering::AcqRel) + 1;
        change_quads(&self.iris, &feed.writer, seq, chrono::Utc::now(), &touched)
    }

    /// After a write: removes the changes older than [`KEEP`], if this process has not
    /// done so for a minute. A failure is left for the next time.
    pub(crate) fn compact_feed(&self) {
        let Some(feed) = &self.feed else {
            return;
        };
        {
            let mut state = feed.state();
            if state.compacted.is_some_and(|t| t.elapsed() < COMPACT_EVERY) {
                return;
            }
            state.compacted = Some(Instant::now());
        }
        let keep = chrono::Duration::from_std(KEEP).unwrap_or(chrono::Duration::MAX);
        let text = compaction(&self.iris, chrono::Utc::now() - keep);
        if let Ok(update) = spargebra::SparqlParser::new().parse_update(&text) {
            let _ = self.backend().update(&text, update, None);
        }
    }

    /// Brings `catalog` to the feed's end: the sessions other writers changed since the
    /// last look become suspect (derived before the read), or the whole catalog stale
    /// when a change may have touched anything or the last look is too old.
    pub(crate) fn follow_feed(&self, catalog: &Catalog) -> Result<()> {
        let Some(feed) = &self.feed else {
            return Ok(());
        };
        let mut state = feed.state();
        let asked = Instant::now();
        let lapsed = state.synced.is_none_or(|t| t.elapsed() > FOLLOW_WITHIN);
        if lapsed || catalog.pending().1 {
            // Noted before the rebuild reads the RDF: a change after this is applied
            // again, never missed.
            state.heads = self.rdf().feed_heads()?;
            catalog.stale();
            state.synced = Some(asked);
            return Ok(());
        }
        let mut suspects = Vec::new();
        for change in self.rdf().changes_after(&state.heads)? {
            let head = state.heads.entry(change.writer.clone()).or_default();
            *head = (*head).max(change.seq);
            if change.writer == feed.writer {
                continue;
            }
            match change.touched {
                Touched::Everything => catalog.stale(),
                Touched::Sessions(sessions) => suspects.extend(
                    sessions
                        .iter()
                        .filter_map(|s| self.iris.session_id(s.as_ref()))
                        .map(|id| id.to_string()),
                ),
            }
        }
        catalog.suspect(&suspects);
        state.synced = Some(asked);
        Ok(())
    }
}
