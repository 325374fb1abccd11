//! Oxigraph in this process: in memory, or a RocksDB directory this process holds.

use super::{evaluation_error, Backend, Change, Graph, Object, Predicate, Quads, Sparql, Subject};
use crate::error::{Error, Result};
use oxigraph::model::{GraphName, NamedNodeRef, NamedOrBlankNode, Quad, QuadRef};
use oxigraph::sparql::{CancellationToken, QueryResults, SparqlEvaluator};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

/// The file in a store directory where `forktrail serve` leaves the SPARQL URL it
/// serves the store at, so that a command refused the store can name it.
pub const SERVER_FILE: &str = "forktrail-serve.url";

/// Oxigraph in this process: in memory, or a RocksDB directory this process holds.
pub(crate) struct Embedded {
    /// The open store; `None` only while a directory is being opened anew after a
    /// full disk. Shared with the flusher, which takes a handle only while it flushes.
    store: Arc<RwLock<Option<oxigraph::store::Store>>>,
    path: Option<PathBuf>,
    /// A write failed for want of disk space. RocksDB then refuses every later write
    /// on that handle, though it still reads: reads go on from it, and the next write
    /// opens the directory anew once the disk has the room that takes
    /// ([`reopen_needs`]), so that writes go on without a restart.
    full: AtomicBool,
    /// Bytes of quads committed since the last flush of RocksDB's memory tables (on
    /// disk only), and whether a flush is under way.
    unflushed: Arc<AtomicU64>,
    flushing: Arc<AtomicBool>,
}

/// How many bytes of quads a store on disk takes in before its memory tables are
/// flushed. Oxigraph sizes them for bulk throughput (128 MiB per column family, up to
/// six each), and the write-ahead log is kept until they are flushed: without this, a
/// long ingest grows the process by gigabytes and leaves a log that the next open
/// replays for many seconds.
const FLUSH_AFTER_BYTES: u64 = 48 << 20;

impl Embedded {
    pub(crate) fn in_memory() -> Result<Self> {
        Ok(Self::holding(oxigraph::store::Store::new()?, None))
    }

    fn holding(store: oxigraph::store::Store, path: Option<PathBuf>) -> Self {
        Self {
            store: Arc::new(RwLock::new(Some(store))),
            path,
            full: AtomicBool::new(false),
            unflushed: Arc::default(),
            flushing: Arc::default(),
        }
    }

    /// Opens (or creates) the RocksDB store in `path`; one process holds it at a time.
    #[cfg(feature = "rocksdb")]
    pub(crate) fn open(path: &Path) -> Result<Self> {
        let store = open_dir(path)?;
        // Only the holder of a store writes bulk files, and each load removes its own:
        // any found now was left by a load that was killed (or failed past cleanup).
        remove_bulk_files(path);
        Ok(Self::holding(store, Some(path.to_path_buf())))
    }

    /// A handle to the store, for one operation: after a full disk, the handle that
    /// failed (or the directory opened read-only), which reads as before.
    fn current(&self) -> Result<oxigraph::store::Store> {
        if let Some(store) = self.slot().as_ref() {
            return Ok(store.clone());
        }
        self.reopen_if_full()?;
        self.slot()
            .clone()
            .ok_or_else(|| self.full_error("it is being opened again"))
    }

    fn slot(&self) -> std::sync::RwLockReadGuard<'_, Option<oxigraph::store::Store>> {
        self.store.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// A handle to write with: after a full disk, the directory opened anew first.
    fn writable(&self) -> Result<oxigraph::store::Store> {
        self.reopen_if_full()?;
        self.current()
    }

    /// After a write that failed for want of space, opens the directory anew (RocksDB
    /// keeps refusing writes on the handle that failed), if the disk has the room a
    /// reopen takes: until then the handle stays, and reads go on from it. It can be
    /// opened again only once every handle to it is closed: this one, and those of
    /// reads still running, which end soon; the flusher holds none between flushes.
    /// Should the reopen fail all the same, the directory is opened read-only (which
    /// writes nothing), so that reads still go on.
    fn reopen_if_full(&self) -> Result<()> {
        #[cfg(feature = "rocksdb")]
        if self.full.load(Ordering::SeqCst) {
            let Some(path) = &self.path else {
                return Ok(());
            };
            let mut slot = self.store.write().unwrap_or_else(PoisonError::into_inner);
            if !self.full.load(Ordering::SeqCst) {
                return Ok(()); // another writer did it meanwhile
            }
            let room = Room::of(path);
            if slot.is_some() && room.short() {
                return Err(self.full_error_with(room, "no write is tried until then"));
            }
            drop(slot.take());
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            loop {
                match open_dir(path) {
                    Ok(store) => {
                        *slot = Some(store);
                        self.full.store(false, Ordering::SeqCst);
                        return Ok(());
                    }
                    Err(Error::StoreLocked { .. }) if std::time::Instant::now() < deadline => {
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                    Err(e) => {
                        *slot = oxigraph::store::Store::open_read_only(path).ok();
                        return Err(self.full_error_with(Room::of(path), &e.to_string()));
                    }
                }
            }
        }
        Ok(())
    }

    /// `e` as [`Error::StorageFull`] when it says the disk is full (and the store is then
    /// opened anew before the next write), else as it is.
    fn checked(&self, e: Error) -> Error {
        let text = e.to_string();
        if text.contains("No space left on device") || text.contains("NoSpace") {
            self.full.store(true, Ordering::SeqCst);
            return self.full_error(&text);
        }
        e
    }

    /// Counts `bytes` committed; past [`FLUSH_AFTER_BYTES`], flushes the memory tables
    /// on a thread of its own (writes go on meanwhile), which also lets RocksDB recycle
    /// its write-ahead log.
    fn took(&self, bytes: u64) {
        if self.path.is_none() {
            return;
        }
        let total = self.unflushed.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if total < FLUSH_AFTER_BYTES || self.flushing.swap(true, Ordering::AcqRel) {
            return;
        }
        self.unflushed.store(0, Ordering::Relaxed);
        let (slot, flushing) = (Arc::clone(&self.store), Arc::clone(&self.flushing));
        let spawned = std::thread::Builder::new()
            .name("forktrail-flush".into())
            .spawn(move || {
                let store = slot.read().unwrap_or_else(PoisonError::into_inner).clone();
                if let Some(store) = store {
                    // A failed flush is tried again after the next few megabytes.
                    let _ = store.flush();
                }
                flushing.store(false, Ordering::Release);
            });
        if spawned.is_err() {
            self.flushing.store(false, Ordering::Release);
        }
    }

    fn full_error(&self, detail: &str) -> Error {
        let room = self.path.as_deref().map(Room::of).unwrap_or_default();
        self.full_error_with(room, detail)
    }

    fn full_error_with(&self, room: Room, detail: &str) -> Error {
        Error::StorageFull {
            path: self.path.clone().unwrap_or_default(),
            needed: room.needed,
            free: room.free,
            detail: detail.to_string(),
        }
    }
}

/// The room a store directory has, and the room opening it anew takes.
#[derive(Clone, Copy, Debug, Default)]
struct Room {
    /// Bytes free on its disk, if the system says.
    free: Option<u64>,
    /// Bytes a reopen needs free ([`reopen_needs`]).
    needed: Option<u64>,
}

impl Room {
    fn of(dir: &Path) -> Self {
        Self {
            free: fs4::available_space(dir).ok(),
            needed: Some(reopen_needs(dir)),
        }
    }

    /// Whether a reopen would fail for want of room (not when the room is unknown).
    fn short(self) -> bool {
        matches!((self.free, self.needed), (Some(free), Some(needed)) if free < needed)
    }
}

/// The bytes of free disk opening store directory `dir` anew takes, with the write that
/// follows: RocksDB replays its write-ahead log (`*.log`) and flushes what it held to a
/// table file about as large, beside a new manifest, options file and info log.
/// Measured on a tmpfs (`cargo bench --bench bounds`, incompressible literals): logs of
/// 2.01, 8.05 and 32.22 MB reopened with 2.24, 8.28 and 32.40 MB free, the log and
/// about 0.2 MB more.
fn reopen_needs(dir: &Path) -> u64 {
    let log: u64 = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum();
    log + REOPEN_OVERHEAD
}

/// What a reopen needs besides the room of its log (see [`reopen_needs`]): the 0.2 MB
/// RocksDB was measured to write, and room for the write that follows (its log record,
/// its record file, the catalog's journal).
const REOPEN_OVERHEAD: u64 = 1 << 20;

/// Opens the RocksDB store in `path`, naming the process that holds it if one does.
#[cfg(feature = "rocksdb")]
fn open_dir(path: &Path) -> Result<oxigraph::store::Store> {
    oxigraph::store::Store::open(path).map_err(|e| {
        let text = e.to_string();
        // RocksDB: "While lock file: …/LOCK: Resource temporarily unavailable", or
        // "lock hold by current process" for a second open in the same process.
        if text.contains("While lock file") || text.contains("lock hold by current process") {
            Error::StoreLocked {
                path: path.to_path_buf(),
                server: std::fs::read_to_string(path.join(SERVER_FILE))
                    .ok()
                    .map(|url| url.trim().to_string())
                    .filter(|url| url.starts_with("http")),
            }
        } else {
            Error::Store(e)
        }
    })
}

/// Removes the bulk loader's temporary files (`bulk-*.sst`) from store directory `dir`.
/// Called only while this process holds the store and no load runs.
fn remove_bulk_files(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("bulk-") && name.ends_with(".sst") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

impl Backend for Embedded {
    fn quads(&self, subject: Subject, predicate: Predicate, object: Object, graph: Graph) -> Quads {
        match self.current() {
            Ok(store) => Box::new(
                store
                    .quads_for_pattern(subject, predicate, object, graph)
                    .map(|q| q.map_err(Error::from)),
            ),
            Err(e) => Box::new(std::iter::once(Err(e))),
        }
    }

    fn contains(&self, quad: QuadRef<'_>) -> Result<bool> {
        Ok(self.current()?.contains(quad)?)
    }

    fn has_graph(&self, graph: NamedNodeRef<'_>) -> Result<bool> {
        Ok(self.current()?.contains_named_graph(graph)?)
    }

    fn commit(&self, change: Change) -> Result<()> {
        let store = self.writable()?;
        let bytes = change_bytes(&change);
        write_change(&store, change).map_err(|e| self.checked(e))?;
        self.took(bytes);
        Ok(())
    }

    /// Oxigraph's bulk loader: sorted files written beside the store and added in one
    /// ingestion at `commit` (atomic: before it, nothing is visible; a failure removes
    /// the files). On RocksDB it is many times faster than a transaction of the same
    /// quads, which holds every index entry in one write batch.
    fn bulk_load(&self, quads: &mut dyn Iterator<Item = Quad>) -> Result<()> {
        // The loader sorts each batch on a thread of its own: batches of ~50,000 quads
        // keep every core busy on an import of a few hundred thousand (its default, a
        // million, would put such an import on one thread); smaller ones cost more
        // files to ingest. Measured on 2 cores: 20k 46k, 40k 49k, 100k 41k, 1M 19k
        // turns/s.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let store = self.writable()?;
        let mut loader = store
            .bulk_loader()
            .with_num_threads(threads)
            .with_max_memory_size_in_megabytes(50 * threads);
        let loaded = loader.load_quads(quads).and_then(|()| loader.commit());
        if loaded.is_err() {
            // Oxigraph removes the files it finished, not one a full disk cut short.
            // Bulk loads run one at a time, under the write lock.
            if let Some(dir) = &self.path {
                remove_bulk_files(dir);
            }
        }
        loaded.map_err(|e| self.checked(e.into()))
    }

    fn query(&self, query: Sparql) -> Result<QueryResults<'static>> {
        let mut evaluator = SparqlEvaluator::new();
        if let Some(token) = query.cancellation {
            evaluator = evaluator.with_cancellation_token(token);
        }
        let (bound, blank) = super::bind_naming_graphs(query.query, query.bindings);
        let mut prepared = evaluator.for_query(bound);
        let dataset = prepared.dataset_mut();
        if !query.default_graphs.is_empty() {
            dataset.set_default_graph(
                query
                    .default_graphs
                    .into_iter()
                    .map(GraphName::from)
                    .collect(),
            );
        }
        if !query.named_graphs.is_empty() {
            dataset.set_available_named_graphs(
                query
                    .named_graphs
                    .into_iter()
                    .map(NamedOrBlankNode::from)
                    .collect(),
            );
        }
        if prepared.dataset().is_default_dataset() {
            prepared.dataset_mut().set_default_graph_as_union();
        }
        for (variable, value) in blank {
            prepared = prepared.substitute_variable(variable, value);
        }
        prepared
            .on_store(&self.current()?)
            .execute()
            .map_err(evaluation_error)
    }

    fn update(
        &self,
        _text: &str,
        update: spargebra::Update,
        cancel: Option<CancellationToken>,
    ) -> Result<()> {
        let mut evaluator = SparqlEvaluator::new();
        if let Some(token) = cancel {
            evaluator = evaluator.with_cancellation_token(token);
        }
        let store = self.writable()?;
        evaluator
            .for_update(update)
            .on_store(&store)
            .execute()
            .map_err(|e| self.checked(Error::Query(e.to_string())))
    }

    fn exclusive(&self) -> bool {
        // In memory it is this process's; on disk RocksDB's lock keeps others out.
        true
    }

    fn len(&self) -> Result<usize> {
        Ok(self.current()?.len()?)
    }

    fn flush(&self) -> Result<()> {
        #[cfg(feature = "rocksdb")]
        self.current()?
            .flush()
            .map_err(|e| self.checked(e.into()))?;
        Ok(())
    }

    fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    fn oxigraph(&self) -> Option<oxigraph::store::Store> {
        self.current().ok()
    }

    fn location(&self) -> String {
        match &self.path {
            Some(path) => path.display().to_string(),
            None => "memory".into(),
        }
    }

    #[cfg(feature = "rocksdb")]
    fn flusher(&self) -> Option<Box<dyn Fn() -> Result<()> + Send + 'static>> {
        self.path.as_ref()?;
        let slot = Arc::clone(&self.store);
        Some(Box::new(move || {
            let store = slot.read().unwrap_or_else(PoisonError::into_inner).clone();
            match store {
                Some(store) => store.flush().map_err(Error::Store),
                None => Ok(()),
            }
        }))
    }

    #[cfg(feature = "rocksdb")]
    fn backup(&self, dir: &Path) -> Option<Result<()>> {
        self.path.as_ref()?;
        Some(
            self.current()
                .and_then(|s| s.backup(dir).map_err(Error::Store)),
        )
    }
}

/// About what a change puts in the memory tables: each quad's index entries (six,
/// of four encoded terms) and its literal's text.
fn change_bytes(change: &Change) -> u64 {
    change
        .inserts
        .iter()
        .chain(&change.removes)
        .map(|q| {
            let text = match &q.object {
                oxigraph::model::Term::Literal(l) => l.value().len(),
                _ => 0,
            };
            (400 + text) as u64
        })
        .sum()
}

impl Drop for Embedded {
    /// A store on disk is flushed when closed, so that the next open replays no log.
    fn drop(&mut self) {
        if self.path.is_some() {
            if let Some(store) = self.slot().as_ref() {
                let _ = store.flush();
            }
        }
    }
}

/// Writes `change` to `store` in one commit.
fn write_change(store: &oxigraph::store::Store, change: Change) -> Result<()> {
    if change.drop_graphs.is_empty() && change.removes.is_empty() {
        // Appends and forks only insert: a plain write batch, as atomic as a
        // transaction, without the snapshot and the indexed batch a transaction keeps
        // so that it can read its own writes (which no insert needs).
        store.extend(change.inserts)?;
        return Ok(());
    }
    let mut tx = store.start_transaction()?;
    for graph in &change.drop_graphs {
        tx.remove_named_graph(graph.as_ref())?;
    }
    for quad in &change.removes {
        tx.remove(quad);
    }
    for quad in &change.inserts {
        tx.insert(quad);
    }
    tx.commit()?;
    Ok(())
}
