//! The store handle: opening, instance IRIs, and the write lock.

use crate::cache::{Cache, DEFAULT_TURN_BUDGET};
use crate::error::{Error, Result};
use crate::model::{Agent, SessionId};
use oxigraph::model::{NamedNode, NamedNodeRef};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// The default base of instance IRIs.
pub const DEFAULT_BASE_IRI: &str = "urn:forktrail:";

/// A forktrail store: sessions and turns as RDF in an Oxigraph store.
///
/// Every write runs under one in-process lock and in one Oxigraph transaction, so a
/// failed operation leaves no triple behind and two appends can never get the same
/// index (Oxigraph 0.5 on RocksDB does not detect write-write conflicts itself).
///
/// ```
/// use forktrail::{NewSession, NewTurn, Role, Store};
/// let store = Store::in_memory()?;
/// let root = store.create_session(NewSession::default())?;
/// store.append(&root, NewTurn::new(Role::User, "hello"))?;
/// assert_eq!(store.replay(&root, None)?.len(), 1);
/// # Ok::<(), forktrail::Error>(())
/// ```
pub struct Store {
    pub(crate) inner: oxigraph::store::Store,
    pub(crate) iris: Iris,
    write_lock: Mutex<()>,
    /// Session facts, lengths and decoded turns: derived, see [`crate::cache`].
    cache: Mutex<Cache>,
    /// Sessions held by a `SessionWriter`.
    writers: Mutex<HashSet<String>>,
    /// Cancellation flags of the regeneration jobs this process runs.
    pub(crate) jobs_running:
        Mutex<std::collections::HashMap<String, std::sync::Arc<std::sync::atomic::AtomicBool>>>,
    path: Option<PathBuf>,
}

impl Store {
    /// Opens (or creates) an on-disk store in directory `path`.
    ///
    /// One process owns a store directory: a second one gets [`Error::StoreLocked`].
    #[cfg(feature = "rocksdb")]
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let inner = oxigraph::store::Store::open(path).map_err(|e| {
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
        Ok(Self::wrap(inner, Some(path.to_path_buf())))
    }

    /// A fresh in-memory store, gone when dropped.
    pub fn in_memory() -> Result<Self> {
        Ok(Self::wrap(oxigraph::store::Store::new()?, None))
    }

    /// Uses `base` instead of `urn:forktrail:` for the IRIs of new sessions, turns and
    /// agents. A store should keep one base for its whole life.
    pub fn with_base_iri(mut self, base: &str) -> Result<Self> {
        NamedNode::new(format!("{base}session:x"))
            .map_err(|e| Error::InvalidInput(format!("invalid base IRI {base:?}: {e}")))?;
        self.iris = Iris {
            base: base.to_string(),
        };
        Ok(self)
    }

    /// The directory of an on-disk store.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The underlying Oxigraph store, for reads the API does not cover.
    ///
    /// Writing through it bypasses forktrail's invariants, write lock and read cache:
    /// call [`Store::clear_caches`] after such a write.
    pub fn oxigraph(&self) -> &oxigraph::store::Store {
        &self.inner
    }

    /// Bytes the on-disk store takes (RocksDB files and write-ahead log); `None` in memory.
    pub fn disk_bytes(&self) -> Option<u64> {
        fn dir_size(path: &Path) -> u64 {
            std::fs::read_dir(path)
                .map(|entries| {
                    entries
                        .flatten()
                        .map(|e| match e.metadata() {
                            Ok(m) if m.is_dir() => dir_size(&e.path()),
                            Ok(m) => m.len(),
                            Err(_) => 0,
                        })
                        .sum()
                })
                .unwrap_or(0)
        }
        self.path.as_deref().map(dir_size)
    }

    /// The number of quads in the store.
    pub fn len(&self) -> Result<usize> {
        Ok(self.inner.len()?)
    }

    /// Whether the store holds no quad.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.inner.is_empty()?)
    }

    /// Forces written data to disk (commits survive a killed process, not a power cut).
    pub fn flush(&self) -> Result<()> {
        #[cfg(feature = "rocksdb")]
        self.inner.flush()?;
        Ok(())
    }

    /// The IRI of a session (also the name of its graph).
    pub fn session_iri(&self, id: &SessionId) -> NamedNode {
        self.iris.session(id.as_str())
    }

    fn wrap(inner: oxigraph::store::Store, path: Option<PathBuf>) -> Self {
        Self {
            inner,
            iris: Iris {
                base: DEFAULT_BASE_IRI.to_string(),
            },
            write_lock: Mutex::new(()),
            cache: Mutex::new(Cache::new(DEFAULT_TURN_BUDGET)),
            writers: Mutex::new(HashSet::new()),
            jobs_running: Mutex::new(std::collections::HashMap::new()),
            path,
        }
    }

    pub(crate) fn writers(&self) -> MutexGuard<'_, HashSet<String>> {
        self.writers.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn cache(&self) -> MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drops the in-process read cache (session facts, lengths, replay records).
    ///
    /// forktrail keeps it current through its own writes, SPARQL updates and imports;
    /// call this after writing through [`Store::oxigraph`], which bypasses it.
    pub fn clear_caches(&self) {
        self.cache().clear();
    }

    /// Caps the replay records the read cache keeps, in bytes of their text (default
    /// 256 MiB; 0 turns record caching off). Sessions are evicted oldest-cached first.
    pub fn with_replay_cache(self, bytes: usize) -> Self {
        *self.cache() = Cache::new(bytes);
        self
    }

    /// The `(subject, graph)` of every quad `?s predicate "value" GRAPH ?g` whose subject
    /// and graph are IRIs: how a job, a request or an imported line is found by its key.
    pub(crate) fn subjects_with(
        &self,
        predicate: oxigraph::model::NamedNodeRef<'_>,
        value: &str,
    ) -> Result<Vec<(NamedNode, NamedNode)>> {
        let literal = oxigraph::model::Literal::new_simple_literal(value);
        let mut out = Vec::new();
        for quad in
            self.inner
                .quads_for_pattern(None, Some(predicate), Some(literal.as_ref().into()), None)
        {
            let quad = quad?;
            if let (
                oxigraph::model::NamedOrBlankNode::NamedNode(subject),
                oxigraph::model::GraphName::NamedNode(graph),
            ) = (quad.subject, quad.graph_name)
            {
                out.push((subject, graph));
            }
        }
        Ok(out)
    }

    /// Serialises writers: read-then-write sequences run under this guard.
    pub(crate) fn write_guard(&self) -> MutexGuard<'_, ()> {
        // A panic while holding the lock left no partial write (the transaction was
        // dropped, i.e. rolled back), so a poisoned lock is safe to take over.
        self.write_lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Builds and parses instance IRIs under a base.
#[derive(Clone, Debug)]
pub(crate) struct Iris {
    pub(crate) base: String,
}

impl Iris {
    pub(crate) fn session(&self, id: &str) -> NamedNode {
        NamedNode::new_unchecked(format!("{}session:{id}", self.base))
    }

    pub(crate) fn turn(&self, id: &str, index: u64) -> NamedNode {
        NamedNode::new_unchecked(format!("{}session:{id}/turn/{index}", self.base))
    }

    pub(crate) fn activity(&self, id: &str, what: &str) -> NamedNode {
        NamedNode::new_unchecked(format!("{}session:{id}/{what}", self.base))
    }

    pub(crate) fn agent(&self, agent: &Agent) -> NamedNode {
        match agent {
            Agent::Principal(name) => {
                NamedNode::new_unchecked(format!("{}agent:{name}", self.base))
            }
            Agent::Model(name) => NamedNode::new_unchecked(format!(
                "{}agent:model/{}",
                self.base,
                percent_encode(name)
            )),
            Agent::Tool(name) => NamedNode::new_unchecked(format!(
                "{}agent:tool/{}",
                self.base,
                percent_encode(name)
            )),
        }
    }

    /// The session id of a session IRI, if it is one under this base.
    pub(crate) fn session_id(&self, iri: NamedNodeRef<'_>) -> Option<String> {
        let rest = iri.as_str().strip_prefix(&self.base)?;
        let id = rest.strip_prefix("session:")?;
        SessionId::new(id).ok().map(|_| id.to_string())
    }

    /// The session id and index of a turn IRI under this base.
    pub(crate) fn turn_index(&self, iri: NamedNodeRef<'_>) -> Option<(String, u64)> {
        let rest = iri
            .as_str()
            .strip_prefix(&self.base)?
            .strip_prefix("session:")?;
        let (id, index) = rest.rsplit_once("/turn/")?;
        SessionId::new(id).ok()?;
        Some((id.to_string(), index.parse().ok()?))
    }

    /// The agent named by an agent IRI under this base.
    pub(crate) fn parse_agent(&self, iri: NamedNodeRef<'_>) -> Option<Agent> {
        let rest = iri.as_str().strip_prefix(&self.base)?;
        let name = rest.strip_prefix("agent:")?;
        if let Some(model) = name.strip_prefix("model/") {
            percent_decode(model).map(Agent::Model)
        } else if let Some(tool) = name.strip_prefix("tool/") {
            percent_decode(tool).map(Agent::Tool)
        } else {
            Some(Agent::Principal(name.to_string()))
        }
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters, so that any model
/// name makes a valid IRI and decodes back exactly.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_round_trip_through_agent_iris() {
        let iris = Iris {
            base: DEFAULT_BASE_IRI.into(),
        };
        for name in [
            "qwen2.5-7b",
            "meta-llama/Llama-3 8B",
            "x> } ; DROP ALL ; #",
            "é%",
        ] {
            let iri = iris.agent(&Agent::Model(name.into()));
            assert!(
                NamedNode::new(iri.as_str()).is_ok(),
                "{iri} is not a valid IRI"
            );
            assert_eq!(
                iris.parse_agent(iri.as_ref()),
                Some(Agent::Model(name.into()))
            );
        }
    }
}
