//! Oxigraph in this process: in memory, or a RocksDB directory this process holds.

use super::{evaluation_error, Backend, Change, Quads, Sparql};
use crate::error::{Error, Result};
use oxigraph::model::{
    GraphName, GraphNameRef, NamedNodeRef, NamedOrBlankNode, NamedOrBlankNodeRef, Quad, QuadRef,
    TermRef,
};
use oxigraph::sparql::{CancellationToken, QueryResults, SparqlEvaluator};
use std::path::{Path, PathBuf};

/// The file in a store directory where `forktrail serve` leaves the SPARQL URL it
/// serves the store at, so that a command refused the store can name it.
pub const SERVER_FILE: &str = "forktrail-serve.url";

/// Oxigraph in this process: in memory, or a RocksDB directory this process holds.
pub(crate) struct Embedded {
    store: oxigraph::store::Store,
    path: Option<PathBuf>,
}

impl Embedded {
    pub(crate) fn in_memory() -> Result<Self> {
        Ok(Self {
            store: oxigraph::store::Store::new()?,
            path: None,
        })
    }

    /// Opens (or creates) the RocksDB store in `path`; one process holds it at a time.
    #[cfg(feature = "rocksdb")]
    pub(crate) fn open(path: &Path) -> Result<Self> {
        let store = oxigraph::store::Store::open(path).map_err(|e| {
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
        })?;
        // Only the holder of a store writes bulk files, and each load removes its own:
        // any found now was left by a load that was killed (or failed past cleanup).
        remove_bulk_files(path);
        Ok(Self {
            store,
            path: Some(path.to_path_buf()),
        })
    }
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
    fn quads(
        &self,
        subject: Option<NamedOrBlankNodeRef<'_>>,
        predicate: Option<NamedNodeRef<'_>>,
        object: Option<TermRef<'_>>,
        graph: Option<GraphNameRef<'_>>,
    ) -> Quads {
        Box::new(
            self.store
                .quads_for_pattern(subject, predicate, object, graph)
                .map(|q| q.map_err(Error::from)),
        )
    }

    fn contains(&self, quad: QuadRef<'_>) -> Result<bool> {
        Ok(self.store.contains(quad)?)
    }

    fn has_graph(&self, graph: NamedNodeRef<'_>) -> Result<bool> {
        Ok(self.store.contains_named_graph(graph)?)
    }

    fn commit(&self, change: Change) -> Result<()> {
        if change.drop_graphs.is_empty() && change.removes.is_empty() {
            // Appends and forks only insert: a plain write batch, as atomic as a
            // transaction, without the snapshot and the indexed batch a transaction
            // keeps so that it can read its own writes (which no insert needs).
            self.store.extend(change.inserts)?;
            return Ok(());
        }
        let mut tx = self.store.start_transaction()?;
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
        let mut loader = self
            .store
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
        Ok(loaded?)
    }

    fn query(&self, query: Sparql) -> Result<QueryResults<'static>> {
        let mut evaluator = SparqlEvaluator::new();
        if let Some(token) = query.cancellation {
            evaluator = evaluator.with_cancellation_token(token);
        }
        let mut prepared = evaluator.for_query(query.query);
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
        for (variable, value) in query.bindings {
            prepared = prepared.substitute_variable(variable, value);
        }
        prepared
            .on_store(&self.store)
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
        evaluator
            .for_update(update)
            .on_store(&self.store)
            .execute()
            .map_err(|e| Error::Query(e.to_string()))
    }

    fn exclusive(&self) -> bool {
        // In memory it is this process's; on disk RocksDB's lock keeps others out.
        true
    }

    fn len(&self) -> Result<usize> {
        Ok(self.store.len()?)
    }

    fn flush(&self) -> Result<()> {
        #[cfg(feature = "rocksdb")]
        self.store.flush()?;
        Ok(())
    }

    fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    fn oxigraph(&self) -> Option<&oxigraph::store::Store> {
        Some(&self.store)
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
        let store = self.store.clone();
        Some(Box::new(move || store.flush().map_err(Error::Store)))
    }

    #[cfg(feature = "rocksdb")]
    fn backup(&self, dir: &Path) -> Option<Result<()>> {
        self.path.as_ref()?;
        Some(self.store.backup(dir).map_err(Error::Store))
    }
}
