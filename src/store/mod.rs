//! The store handle: a backend behind the storage seam, instance IRIs, the read cache,
//! the derived indexes and the settings a store is built with. Opening a store is
//! `open.rs`'s; writing, `tx.rs`'s (the transaction, its effects, group commit); the
//! leases of a shared store, `lease.rs`'s; its change feed, `feed.rs`'s; its digest version, `version.rs`'s, and the
//! upgrade from an older one, `upgrade.rs`'s.
//!
//! `Store`'s methods are defined across the crate, each beside the code of its feature.
//! Here is every public and crate-visible one, by the file that defines it (a method
//! added, moved or removed changes its line here):
//!
//! - `upgrade_report` — store/mod.rs: what opening the store upgraded, if it did
//! - `with_lease_wait` — store/mod.rs: sets how long a write waits for others' leases
//! - `with_lease_ttl` — store/mod.rs: sets how long a lease on a shared store holds
//! - `remote_requests` — store/mod.rs: HTTP requests sent to a remote store
//! - `location` — store/mod.rs: the store's directory, query URL or `memory`
//! - `with_limits` — store/mod.rs: sets the sizes a write's free-text fields may have
//! - `limits` — store/mod.rs: the sizes a write's free-text fields may have
//! - `with_durability` — store/mod.rs: sets what an acknowledged write on disk survives
//! - `with_base_iri` — store/mod.rs: sets the base of new IRIs
//! - `approx_len` — store/mod.rs: the number of quads, counted at most every 10 s
//! - `path` — store/mod.rs: the directory of a store on disk
//! - `oxigraph` — store/mod.rs: the underlying Oxigraph store, for other reads
//! - `disk_bytes` — store/mod.rs: bytes the store on disk takes
//! - `len` — store/mod.rs: the number of quads
//! - `is_empty` — store/mod.rs: whether the store holds no quad
//! - `flush` — store/mod.rs: forces written data to disk
//! - `session_iri` — store/mod.rs: a session's IRI (the name of its graph)
//! - `clear_caches` — store/mod.rs: drops the read cache, marks the catalog for a rebuild
//! - `derived_bytes` — store/mod.rs: bytes the record index and the catalog take
//! - `with_replay_cache` — store/mod.rs: caps the replay records the read cache keeps
//! - `rdf` — store/mod.rs: the store seen through forktrail's graph shape
//! - `backend` — store/mod.rs: the backend behind the storage seam
//! - `cache` — store/mod.rs: the read cache
//! - `across_network` — store/mod.rs: whether the store is across a network
//! - `caching` — store/mod.rs: whether reads may use the cache
//!
//! - `open` — store/open.rs: opens (or creates) a store on disk, its digests upgraded
//! - `in_memory` — store/open.rs: a fresh in-memory store
//! - `remote` — store/open.rs: a remote SPARQL 1.1 store
//!
//! - `digest_version` — store/version.rs: the digest version of the store's turns
//! - `know_digest_version` — store/version.rs: records the version the store is known at
//! - `check_shared_digests` — store/version.rs: refuses writes to an older shared store
//!
//! - `upgrade_digests` — store/upgrade.rs: brings the digests to the current version
//! - `settle_digest_version` — store/upgrade.rs: at open: states the version, or upgrades
//!
//! - `not_held` — store/lease.rs: `Error::Busy` if a `SessionWriter` holds a session
//! - `writers` — store/lease.rs: the sessions `SessionWriter`s hold
//!
//! - `write` — store/tx.rs: starts a write that may touch anything
//! - `write_on` — store/tx.rs: starts a write on some sessions
//! - `write_unchecked` — store/tx.rs: `write_on` without the digest version check
//! - `write_grouped` — store/tx.rs: starts an append or a fork, group-committed
//! - `hold_writes` — store/tx.rs: holds writes while the catalog is brought up to date
//! - `change_for` — store/feed.rs: a shared store's change-feed entry for a write
//! - `compact_feed` — store/feed.rs: removes a shared store's old change-feed entries
//! - `follow_feed` — store/feed.rs: marks what other processes changed as suspect
//! - `note_feed` — store/feed.rs: notes the feed's heads beside a catalog on disk
//! - `with_catalog_dir` — store/feed.rs: keeps a shared store's catalog on disk
//! - `write_through` — store/tx.rs: commits a change, then applies its effects
//! - `writes_done` — store/tx.rs: writes done so far
//! - `written_since` — store/tx.rs: whether a write was under way since `writes_done`
//! - `settle` — store/tx.rs: waits until no queued change touches some sessions
//! - `must_settle` — store/tx.rs: whether a write must wait for queued changes
//! - `enqueue` — store/tx.rs: queues a prepared change for a group commit
//! - `committed` — store/tx.rs: waits for the batch holding a change
//!
//! - `query` — query/mod.rs: a read-only SPARQL query
//! - `query_with` — query/mod.rs: `query` with a dataset and a cancellation
//! - `query_named_with` — query/mod.rs: `query_named` with a dataset and a cancellation
//! - `update` — query/mod.rs: a SPARQL 1.1 Update under the write lock
//! - `query_named` — query/mod.rs: one of the shipped queries
//! - `select` — query/mod.rs: the rows of a shipped SELECT query
//! - `replay_sparql` — query/mod.rs: replay through the shipped `.rq` files
//!
//! - `facts_of` — engine/read.rs: the facts of the session in a graph, cached
//! - `require` — engine/read.rs: the facts of a session, or `SessionNotFound`
//! - `exists` — engine/read.rs: whether a session exists
//! - `chain` — engine/read.rs: a session's chain, root first
//! - `digest_in_chain` — engine/read.rs: the digest of a turn as a chain's leaf sees it
//! - `load` — engine/read.rs: a session's turns, prefix stitched
//! - `load_range` — engine/read.rs: a range of a session's turns
//! - `replay` — engine/read.rs: a session's plain records, prefix stitched
//! - `info` — engine/read.rs: lineage facts and counts of a session
//! - `info_of` — engine/read.rs: `info` from a session's facts
//! - `list` — engine/read.rs: every session, oldest first
//! - `children_of` — engine/read.rs: the facts of a session's direct children
//! - `subtree_of` — engine/read.rs: a session and every session below it
//! - `tokens_of` — engine/read.rs: a session's token totals
//! - `branches` — engine/read.rs: a session's direct children
//! - `tree` — engine/read.rs: a session and its descendants
//! - `tree_within` — engine/read.rs: `tree`, breadth first, within a limit
//!
//! - `create_session` — engine/write.rs: creates a root session
//! - `create_in` — engine/write.rs: adds a root session to a write
//! - `append` — engine/write.rs: appends a turn
//! - `append_with` — engine/write.rs: `append` with extra quads about the turn
//! - `append_many` — engine/write.rs: appends turns in one transaction
//! - `pop` — engine/write.rs: removes a session's last turn
//! - `append_in` — engine/write.rs: adds a turn to a write
//! - `append_after` — engine/write.rs: `append_in` after a known digest
//! - `digest_before` — engine/write.rs: the digest of the turn before an index
//! - `fork` — engine/write.rs: forks a session
//! - `fork_with` — engine/write.rs: forks and appends turns in one transaction
//! - `fork_in` — engine/write.rs: adds a fork to a write
//! - `detach` — engine/write.rs: copies a fork's inherited prefix into it
//! - `detach_with` — engine/write.rs: `detach`, or its plan
//! - `delete` — engine/write.rs: deletes a session (or its subtree)
//! - `delete_with` — engine/write.rs: `delete` with what it removed, or its plan
//!
//! - `anchor` — engine/anchor.rs: names a session's current length
//! - `anchors` — engine/anchor.rs: the anchors a session sees
//! - `anchor_index` — engine/anchor.rs: the fork point an anchor names
//!
//! - `merge` — engine/merge.rs: merges a fork's new turns back as a `fork_result` turn
//! - `writer` — engine/merge.rs: an exclusive `SessionWriter` on a session
//! - `with_fork` — engine/merge.rs: forks, works on the fork, merges it back
//!
//! - `diff` — engine/diff.rs: how two sessions relate and where they part
//!
//! - `sessions` — engine/listing.rs: a page of sessions
//! - `count_sessions` — engine/listing.rs: how many sessions a query's filters match
//! - `search` — engine/listing.rs: search hits, best first
//! - `settle_catalog` — engine/listing.rs: derives what the catalog holds as suspect
//! - `reindex` — engine/listing.rs: rebuilds the catalog from the RDF
//! - `jobs_page` — engine/listing.rs: a page of regeneration jobs
//! - `branches_page` — engine/listing.rs: a page of a session's forks
//!
//! - `verify` — engine/verify.rs: checks a session and its chain, or every session
//! - `verify_as_either` — engine/verify.rs: `verify` with the digest version unknown
//! - `turn_problems` — engine/verify.rs: the problems of some sessions' turns alone
//! - `digests_of_version_1` — engine/verify.rs: whether problems are only version 1 digests
//! - `turn_problems_as` — engine/verify.rs: `turn_problems` with digests of a version
//!
//! - `export` — io/mod.rs: writes a session, or every session, in a format
//! - `import_with` — io/mod.rs: imports content in a format, all or nothing
//! - `import_path` — io/mod.rs: imports a file or a Claude Code project folder
//! - `import` — io/mod.rs: imports forktrail's own TriG or N-Quads export
//!
//! - `add_root` — io/root.rs: adds a built root session through the bulk loader
//! - `import_sessions` — io/root.rs: adds new root sessions in one bulk load
//! - `import_sessions_with` — io/root.rs: `import_sessions` with options, full report
//! - `add_roots` — io/root.rs: adds built root sessions in one bulk load
//!
//! - `adopt` — io/adopt.rs: makes a root session a fork of another
//! - `adopt_awaiting` — io/adopt.rs: adopts the roots waiting for a parent
//!
//! - `verify_export` — io/graphs.rs: checks an export on its own, in a scratch store
//!
//! - `copy_to` — io/copy.rs: copies every session into another store, checked
//! - `backup` — io/copy.rs: backs the store up into a new directory
//!
//! - `import_claude_code` — io/transcripts/claude_code.rs: imports a Claude Code session log
//! - `import_claude_code_path` — io/transcripts/claude_code.rs: imports Claude Code logs from disk
//!
//! - `import_codex` — io/transcripts/codex.rs: imports an OpenAI Codex CLI rollout
//!
//! - `import_openai` — io/transcripts/openai.rs: imports an OpenAI chat transcript
//! - `export_openai` — io/transcripts/openai.rs: a session's replay as OpenAI chat messages
//!
//! - `import_otlp` — io/transcripts/otlp.rs: imports OpenTelemetry GenAI spans
//! - `import_trace_request` — io/transcripts/otlp.rs: imports the GenAI spans of one OTLP request
//!
//! - `import_pi` — io/transcripts/pi.rs: imports a Pi session file
//!
//! - `plan_regeneration` — whatif/regenerate.rs: a regeneration's request, checked
//! - `begin_regeneration` — whatif/regenerate.rs: records a `running` regeneration job
//! - `regenerate` — whatif/regenerate.rs: begins and runs a regeneration
//! - `run_job` — whatif/regenerate.rs: runs a `running` job
//! - `cancel_job` — whatif/regenerate.rs: asks a running job to stop
//! - `jobs` — whatif/regenerate.rs: every regeneration job
//! - `capture` — proxy/record.rs: records a call of the model proxy
//! - `capture_into` — proxy/record.rs: records a call in a given session (an experiment's sample)
//! - `model_calls` — proxy/record.rs: a session's calls through the model proxy
//! - `chain_calls` — proxy/record.rs: the proxied calls a session's history holds, its ancestors' included
//! - `rebuilt_request` — proxy/record.rs: a proxied call's request, rebuilt from the store
//! - `job` — whatif/regenerate.rs: one job by id
//! - `cancel_file` — whatif/call.rs: the file that asks another process's job to stop
//! - `claim_job` — whatif/call.rs: takes a job (or run) for this process
//! - `release_job` — whatif/call.rs: forgets a job this process ran
//! - `signal_cancel` — whatif/call.rs: raises the flag of a job this process runs
//! - `cancel_requested` — whatif/call.rs: whether a job was asked to stop
//! - `end_run` — whatif/run.rs: ends a running run, its reservation charged or released
//! - `end_in_flight` — whatif/run.rs: charges the reservation a run holds
//! - `hold` — whatif/run.rs: writes a run's reservation before its call
//! - `answer_from_recording` — whatif/recorded.rs: a branch's open tool calls answered from its recording
//!
//! - `plan_comparison` — whatif/compare.rs: what a comparison would cost, arm by arm
//! - `begin_comparison` — whatif/compare.rs: records a comparison
//! - `compare` — whatif/compare.rs: begins and runs a comparison
//! - `run_comparison` — whatif/compare.rs: runs a comparison's `running` runs
//! - `cancel_comparison` — whatif/compare.rs: stops a comparison's running runs
//! - `is_comparison` — whatif/compare.rs: whether an id names a comparison or a run of one
//! - `comparisons` — whatif/compare.rs: every comparison, with its figures
//! - `comparison` — whatif/compare.rs: one comparison, with its figures
//! - `comparisons_page` — whatif/compare.rs: a page of comparisons
//! - `comparison_settings` — whatif/compare.rs: the settings a comparison was stored with
//! - `comparison_node` — whatif/compare.rs: the comparison node an id names
//!
//! - `begin_experiment` — experiment/mod.rs: records a live experiment
//! - `run_experiment` — experiment/mod.rs: runs an experiment's `running` samples
//!
//! - `turn_figures` — whatif/figures.rs: the model-call figures of some turns
//!
//! - `export_html` — html/mod.rs: a session as one self-contained HTML file

pub(crate) mod cache;
pub(crate) mod catalog;
mod durability;
mod feed;
mod lease;
mod open;
pub(crate) mod records;
mod tx;
mod upgrade;
mod version;
pub(crate) mod write_lock;

pub use durability::Durability;
pub(crate) use tx::{AppendedFacts, WriteTx};

use crate::error::{Error, Result};
use crate::model::{DigestVersion, Limits, SessionId, UpgradeReport};
use crate::rdf::{Iris, Rdf};
use crate::storage::Backend;
use cache::{Cache, DEFAULT_TURN_BUDGET};
use catalog::Catalog;
use durability::Flusher;
use oxigraph::model::{NamedNode, Quad};
use records::Records;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tx::Group;
use write_lock::{WriteLock, Writes};

/// How long a lease holds if its writer never removes it (a process that died).
const LEASE_TTL: Duration = Duration::from_secs(30);
/// How long a writer waits for others' leases before giving up.
const LEASE_WAIT: Duration = Duration::from_secs(45);

/// A forktrail store: sessions and turns as RDF, one named graph per session.
///
/// Every write runs under one in-process lock and is committed as one change, so a
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
    backend: Box<dyn Backend>,
    pub(crate) iris: Iris,
    /// Taken in turn by writers and by readers bringing the catalog up to date.
    write_lock: WriteLock,
    /// Writes begun and writes done (see [`Writes`]).
    writes: Arc<Writes>,
    /// Changes queued for a group commit (see `Group`).
    pub(crate) group: Mutex<Group>,
    pub(crate) group_done: Condvar,
    /// Session facts, lengths and decoded turns: derived, see [`crate::store::cache`]. Used only
    /// when this process owns the store alone.
    cache: Mutex<Cache>,
    caching: bool,
    /// Sessions held by a `SessionWriter`.
    writers: Mutex<HashSet<SessionId>>,
    /// How long a write waits for other processes' leases on a shared store.
    lease_wait: Duration,
    /// How long a lease on a shared store holds.
    lease_ttl: Duration,
    /// The receipt this process's last fenced commit left: removed with its next lease.
    receipt: Mutex<Vec<Quad>>,
    /// Cancellation flags of the regeneration jobs this process runs.
    pub(crate) jobs_running: Mutex<HashMap<String, Arc<AtomicBool>>>,
    durability: Durability,
    /// The number of quads, as last counted, and when: query costs are weighed by it.
    counted: Mutex<Option<(Instant, usize)>>,
    /// The record index of a store on disk (see [`crate::store::records`]).
    pub(crate) records: Option<Records>,
    /// Pages of sessions and search, for a store this process owns (see
    /// [`crate::store::catalog`]).
    pub(crate) catalog: Option<Catalog>,
    /// On a shared store, this process's side of its change feed (see
    /// [`crate::store::feed`]).
    pub(crate) feed: Option<feed::Feed>,
    /// The thread of `Durability::Interval`, stopped (after a last flush) on drop.
    _flusher: Option<Flusher>,
    /// How large a write's free-text fields may be.
    pub(crate) limits: Limits,
    /// The digest version of the store's turns, once this process knows it (see
    /// `version.rs`).
    pub(crate) digests: Mutex<Option<DigestVersion>>,
    /// What opening the store upgraded, if it did.
    upgraded: Option<UpgradeReport>,
}

impl Store {
    /// What opening the store did to bring its digests to the current version, when it
    /// was written by an older forktrail (see [`Store::upgrade_digests`]).
    pub fn upgrade_report(&self) -> Option<&UpgradeReport> {
        self.upgraded.as_ref()
    }

    /// How long a write to a shared store waits while other processes hold leases on
    /// its sessions before failing with [`Error::Contended`] (default 45 s; a lease
    /// whose writer died lapses after 30 s).
    pub fn with_lease_wait(mut self, wait: Duration) -> Self {
        self.lease_wait = wait;
        self
    }

    /// How long a lease taken on a shared store holds (default 30 s): past it, other
    /// writers take it for the lease of a writer that died, and this writer's commit,
    /// fenced by the store, writes nothing. Shorter suits tests; longer, a writer
    /// whose commits may take that long.
    pub fn with_lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }

    /// HTTP requests sent so far to a remote store; `None` for an embedded one.
    pub fn remote_requests(&self) -> Option<u64> {
        self.backend.requests()
    }

    /// Where the store is: its directory, its query URL, or `memory`.
    pub fn location(&self) -> String {
        self.backend.location()
    }

    fn wrap(backend: Box<dyn Backend>) -> Self {
        Self {
            caching: backend.exclusive(),
            backend,
            iris: Iris::default(),
            write_lock: WriteLock::default(),
            writes: Arc::default(),
            group: Mutex::default(),
            group_done: Condvar::new(),
            cache: Mutex::new(Cache::new(DEFAULT_TURN_BUDGET)),
            writers: Mutex::new(HashSet::new()),
            lease_wait: LEASE_WAIT,
            lease_ttl: LEASE_TTL,
            receipt: Mutex::new(Vec::new()),
            jobs_running: Mutex::new(HashMap::new()),
            durability: Durability::Process,
            counted: Mutex::new(None),
            records: None,
            catalog: None,
            feed: None,
            _flusher: None,
            limits: Limits::default(),
            digests: Mutex::new(None),
            upgraded: None,
        }
    }

    /// The sizes a write's free-text fields may have (see [`Limits`]); every surface
    /// writes through the store, so this is their one policy.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The sizes a write's free-text fields may have.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// What an acknowledged write survives on a store on disk (see [`Durability`];
    /// in memory and remote stores are unaffected). Default: [`Durability::Process`].
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self._flusher = match durability {
            Durability::Interval(every) => self
                .backend
                .flusher()
                .map(|flush| Flusher::start(every, flush)),
            _ => None,
        };
        self.durability = durability;
        self
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

    /// The number of quads, counted again when the last count is 10 s old (counting
    /// reads the whole store).
    pub(crate) fn approx_len(&self) -> Result<usize> {
        // Counting a store on disk reads every quad (seconds at a million sessions): the
        // catalog's documents give the size closely enough, a turn being about eight
        // quads and a session about twenty.
        if let (Some(catalog), Some(_)) = (&self.catalog, self.path()) {
            let (sessions, turns) = catalog.sizes();
            return Ok((sessions * 20 + turns * 8) as usize);
        }
        let mut counted = self.counted.lock().unwrap_or_else(|p| p.into_inner());
        match *counted {
            Some((at, n)) if at.elapsed() < Duration::from_secs(10) => Ok(n),
            _ => {
                let n = self.backend.len()?;
                *counted = Some((Instant::now(), n));
                Ok(n)
            }
        }
    }

    /// The directory of an on-disk store.
    pub fn path(&self) -> Option<&Path> {
        self.backend.path()
    }

    /// The underlying Oxigraph store (a handle to it), for reads the API does not cover.
    /// Hold it only for as long as the read: after a full disk the store is opened
    /// anew, which waits for every handle to be dropped.
    ///
    /// Writing through it bypasses forktrail's invariants, write lock and read cache:
    /// call [`Store::clear_caches`] after such a write. Every store `open` and
    /// `in_memory` make is an embedded Oxigraph store.
    pub fn oxigraph(&self) -> oxigraph::store::Store {
        self.backend
            .oxigraph()
            .expect("open and in_memory make embedded stores")
    }

    /// Bytes the on-disk store takes (RocksDB files and write-ahead log); `None` in memory.
    pub fn disk_bytes(&self) -> Option<u64> {
        self.path().map(dir_size)
    }

    /// The number of quads in the store.
    pub fn len(&self) -> Result<usize> {
        self.backend.len()
    }

    /// Whether the store holds no quad.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.backend.len()? == 0)
    }

    /// Forces written data to disk (commits survive a killed process, not a power cut).
    pub fn flush(&self) -> Result<()> {
        self.backend.flush()
    }

    /// The IRI of a session (also the name of its graph).
    pub fn session_iri(&self, id: &SessionId) -> NamedNode {
        self.iris.session(id.as_str())
    }

    /// Drops the in-process read cache (session facts, lengths, replay records) and
    /// marks the catalog (pages of sessions, search) for a rebuild before its next read.
    ///
    /// forktrail keeps both current through its own writes, SPARQL updates and imports;
    /// call this after writing through [`Store::oxigraph`], which bypasses them.
    pub fn clear_caches(&self) {
        self.cache().clear();
        if let Some(catalog) = &self.catalog {
            catalog.stale();
        }
    }

    /// Bytes each derived index of an on-disk store takes: the record index and the
    /// catalog (both inside [`Store::disk_bytes`]); `None` in memory.
    pub fn derived_bytes(&self) -> Option<(u64, u64)> {
        let path = self.path()?;
        Some((
            dir_size(&path.join(crate::store::records::DIR)),
            dir_size(&path.join(crate::store::catalog::DIR)),
        ))
    }

    /// Caps the replay records the read cache keeps, in bytes of their text (default
    /// 64 MiB; 0 turns record caching off). Sessions are evicted oldest-cached first.
    pub fn with_replay_cache(self, bytes: usize) -> Self {
        *self.cache() = Cache::new(bytes);
        self
    }

    /// The store seen through forktrail's graph shape.
    pub(crate) fn rdf(&self) -> Rdf<'_> {
        Rdf {
            backend: self.backend.as_ref(),
            iris: &self.iris,
        }
    }

    pub(crate) fn backend(&self) -> &dyn Backend {
        self.backend.as_ref()
    }

    /// The read cache, when this process may keep one.
    pub(crate) fn cache(&self) -> MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the store is across a network: reads then ask for much per request
    /// rather than making many point lookups.
    pub(crate) fn across_network(&self) -> bool {
        self.backend.requests().is_some()
    }

    /// Whether reads may use the cache (this process owns the store alone).
    pub(crate) fn caching(&self) -> bool {
        self.caching
    }
}

/// The bytes of the files under `path`.
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

/// A stored `xsd:dateTime` in microseconds since the Unix epoch (0 if unreadable).
pub(crate) fn micros(text: Option<&str>) -> i64 {
    crate::rdf::instant(text).map_or(0, |t| t.timestamp_micros())
}
