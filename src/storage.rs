//! The storage seam: what the engine needs from a store, and the embedded Oxigraph store
//! (in memory, or on RocksDB) that provides it.
//!
//! The engine reads quads by pattern, runs SPARQL queries with values bound as terms,
//! commits a change (graphs dropped, quads removed, quads inserted) atomically, and
//! needs to know whether this process owns the store alone (the read cache is only safe
//! then). The engine never names `oxigraph::store::Store`: outside this module only
//! `Store::oxigraph`, the public escape hatch to an embedded store, does.

use crate::error::{Error, Result};
use oxigraph::model::{
    GraphName, GraphNameRef, NamedNode, NamedNodeRef, NamedOrBlankNode, NamedOrBlankNodeRef, Quad,
    QuadRef, Term, TermRef, Variable,
};
use oxigraph::sparql::{CancellationToken, QueryEvaluationError, QueryResults, SparqlEvaluator};
use std::path::{Path, PathBuf};

/// Quads read by pattern.
pub(crate) type Quads = Box<dyn Iterator<Item = Result<Quad>>>;

/// What one commit writes: all of it, or nothing.
#[derive(Debug, Default)]
pub(crate) struct Change {
    /// Graphs removed whole, first.
    pub(crate) drop_graphs: Vec<NamedNode>,
    /// Then these quads removed.
    pub(crate) removes: Vec<Quad>,
    /// Then these inserted.
    pub(crate) inserts: Vec<Quad>,
}

impl Change {
    pub(crate) fn is_empty(&self) -> bool {
        self.drop_graphs.is_empty() && self.removes.is_empty() && self.inserts.is_empty()
    }
}

/// A read-only query, its dataset, the terms bound to its variables and a way to stop
/// it.
pub(crate) struct Sparql {
    pub(crate) query: spargebra::Query,
    pub(crate) bindings: Vec<(Variable, Term)>,
    /// The graphs merged into the default graph; empty means the union of all graphs
    /// unless the query says `FROM`.
    pub(crate) default_graphs: Vec<NamedNode>,
    /// The graphs `GRAPH` may match; empty means all of them unless the query says
    /// `FROM NAMED`.
    pub(crate) named_graphs: Vec<NamedNode>,
    pub(crate) cancellation: Option<CancellationToken>,
}

/// What the engine needs from a store.
pub(crate) trait Backend: Send + Sync {
    /// The quads matching a pattern (`None` matches anything).
    fn quads(
        &self,
        subject: Option<NamedOrBlankNodeRef<'_>>,
        predicate: Option<NamedNodeRef<'_>>,
        object: Option<TermRef<'_>>,
        graph: Option<GraphNameRef<'_>>,
    ) -> Quads;

    fn contains(&self, quad: QuadRef<'_>) -> Result<bool>;

    /// Whether a named graph holds anything.
    fn has_graph(&self, graph: NamedNodeRef<'_>) -> Result<bool>;

    /// Writes `change` atomically.
    fn commit(&self, change: Change) -> Result<()>;

    fn query(&self, query: Sparql) -> Result<QueryResults<'static>>;

    /// Runs a SPARQL update in one transaction.
    fn update(&self, update: spargebra::Update, cancel: Option<CancellationToken>) -> Result<()>;

    /// Whether this process is the only writer of the store: derived state (the read
    /// cache) is safe only then.
    fn exclusive(&self) -> bool;

    fn len(&self) -> Result<usize>;

    fn flush(&self) -> Result<()>;

    /// The directory of an on-disk store.
    fn path(&self) -> Option<&Path>;

    /// The Oxigraph store behind an embedded backend; `None` for one that is not.
    fn oxigraph(&self) -> Option<&oxigraph::store::Store>;
}

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
                }
            } else {
                Error::Store(e)
            }
        })?;
        Ok(Self {
            store,
            path: Some(path.to_path_buf()),
        })
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

    fn update(&self, update: spargebra::Update, cancel: Option<CancellationToken>) -> Result<()> {
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
}

/// Maps evaluation errors to forktrail's: SERVICE is never followed, cancellation is
/// its own error.
pub(crate) fn evaluation_error(e: QueryEvaluationError) -> Error {
    match e {
        QueryEvaluationError::Cancelled => Error::Cancelled("time limit or caller".into()),
        QueryEvaluationError::UnsupportedService(_)
        | QueryEvaluationError::UnboundService
        | QueryEvaluationError::InvalidServiceName(_)
        | QueryEvaluationError::Service(_) => {
            Error::Query("SERVICE is not allowed: forktrail never calls other endpoints".into())
        }
        other => Error::Query(other.to_string()),
    }
}
