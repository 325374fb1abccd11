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
use crate::error::{Error, Result};
use crate::rdf::{change_quads, compaction, Touched};
use oxigraph::model::{NamedNode, Quad};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How long changes stay in the feed.
pub(crate) const KEEP: Duration = Duration::from_secs(600);
/// A reader whose last look at the feed is older than this rebuilds instead of
/// following: what it missed may be compacted away (two minutes spare for the writers'
/// clocks, which compaction goes by).
const FOLLOW_WITHIN: Duration = Duration::from_secs(480);
/// How often the heads are noted beside a catalog on disk when they have not changed.
const NOTE_EVERY: Duration = Duration::from_secs(60);
/// How often one process compacts the feed.
const COMPACT_EVERY: Duration = Duration::from_secs(60);

/// This process's side of a shared store's change feed.
pub(crate) struct Feed {
    /// This process's writer id.
    writer: String,
    /// The number of this process's last change.
    seq: AtomicU64,
    state: Mutex<Following>,
    /// With a catalog on disk: where the heads it holds are noted, and the lock that
    /// keeps it this process's alone.
    kept: Option<Kept>,
}

#[derive(Default)]
struct Following {
    /// The highest change number applied, per writer.
    heads: BTreeMap<String, u64>,
    /// When the feed was last read whole up to its end.
    synced: Option<Instant>,
    /// When this process last compacted the feed.
    compacted: Option<Instant>,
    /// The heads last noted beside a catalog on disk, and when.
    noted: Option<(BTreeMap<String, u64>, Instant)>,
}

/// A catalog kept on disk between processes: the feed's heads it holds, in
/// `feed.json` beside it, and the lock file held while a process uses it.
struct Kept {
    heads_file: PathBuf,
    _lock: std::fs::File,
}

/// What `feed.json` holds.
#[derive(serde::Serialize, serde::Deserialize)]
struct Noted {
    heads: BTreeMap<String, u64>,
    /// When the feed was read up to those heads, in milliseconds since the Unix epoch.
    synced_ms: i64,
}

impl Feed {
    pub(crate) fn new() -> Self {
        Self {
            writer: uuid::Uuid::new_v4().simple().to_string(),
            seq: AtomicU64::new(0),
            state: Mutex::default(),
            kept: None,
        }
    }

    fn state(&self) -> MutexGuard<'_, Following> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Store {
    /// Keeps a shared store's catalog in directory `dir` between processes (the CLI
    /// uses one per store under the user's cache directory): a process that finds it
    /// there, noted less than eight minutes ago, follows the change feed from where
    /// it was left instead of building the catalog from the whole store. A directory
    /// another process is using is left to it (this one keeps its catalog in memory);
    /// a catalog found damaged or of another version is rebuilt. No effect on a store
    /// this process owns.
    pub fn with_catalog_dir(mut self, dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let Some(feed) = &mut self.feed else {
            return Ok(self);
        };
        let io = |context: String| move |source: std::io::Error| Error::Io { context, source };
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        let lock_path = dir.join("lock");
        let lock = std::fs::File::create(&lock_path)
            .map_err(io(format!("opening {}", lock_path.display())))?;
        if lock.try_lock().is_err() {
            return Ok(self);
        }
        let catalog = Catalog::open(dir).map_err(|e| Error::Io {
            context: format!("opening the catalog in {}", dir.display()),
            source: std::io::Error::other(e),
        })?;
        let heads_file = dir.join("feed.json");
        let noted: Option<Noted> = std::fs::read(&heads_file)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok());
        {
            let mut state = feed.state();
            match noted {
                Some(noted) => {
                    let age = chrono::Utc::now().timestamp_millis() - noted.synced_ms;
                    let age = Duration::from_millis(age.max(0) as u64);
                    state.heads = noted.heads;
                    state.synced = Instant::now().checked_sub(age);
                }
                // Heads unknown: what the catalog holds cannot be followed on from.
                None => catalog.stale(),
            }
        }
        feed.kept = Some(Kept {
            heads_file,
            _lock: lock,
        });
        self.catalog = Some(catalog);
        Ok(self)
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

    /// With a catalog on disk, notes the heads it has applied and when (in `feed.json`,
    /// replaced whole), for the next process to follow on from: when they changed, or
    /// a minute after the last note. Not while a rebuild is due: the index on disk does
    /// not hold what those heads promise until it is done. Suspects are safe to promise,
    /// being in the catalog's journal (a process that ends first leaves them to the next).
    pub(crate) fn note_feed(&self, catalog: &Catalog) {
        let Some(feed) = &self.feed else {
            return;
        };
        let Some(kept) = &feed.kept else {
            return;
        };
        let mut state = feed.state();
        if catalog.pending().1 {
            return;
        }
        let fresh = state
            .noted
            .as_ref()
            .is_some_and(|(heads, at)| *heads == state.heads && at.elapsed() < NOTE_EVERY);
        if fresh {
            return;
        }
        let noted = Noted {
            heads: state.heads.clone(),
            synced_ms: chrono::Utc::now().timestamp_millis()
                - state.synced.map_or(0, |t| t.elapsed().as_millis() as i64),
        };
        let Ok(bytes) = serde_json::to_vec(&noted) else {
            return;
        };
        let scratch = kept.heads_file.with_extension("json.new");
        // A failure leaves the last note, which the next process may rebuild from.
        if std::fs::write(&scratch, bytes).is_ok()
            && std::fs::rename(&scratch, &kept.heads_file).is_ok()
        {
            state.noted = Some((noted.heads, Instant::now()));
        }
    }
}
