//! The store handle: a backend behind the storage seam, instance IRIs, the read cache,
//! and the write lock with the transaction type that holds it.

pub(crate) mod cache;
pub(crate) mod catalog;
mod durability;
pub(crate) mod records;
pub(crate) mod write_lock;

pub use durability::Durability;

use crate::error::{Error, Result};
use crate::model::{DigestVersion, Limits, SessionId, UpgradeReport};
use crate::rdf::{self, lease_quads, Iris, Rdf, SessionNode};
use crate::storage::{Backend, Change, Embedded, Remote, RemoteConfig};
use cache::{Cache, DEFAULT_TURN_BUDGET};
use catalog::{Catalog, Entry as CatalogEntry, Op, Pending, TurnDoc};
use durability::Flusher;
use oxigraph::model::{NamedNode, Quad};
use records::{Entry, Records, Run};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use write_lock::{Counted, WriteGuard, WriteLock, Writes};

/// How long a lease holds if its writer never removes it (a process that died).
const LEASE_TTL: Duration = Duration::from_secs(30);
/// How long the receipt a fenced commit leaves stays before others clear it away.
const RECEIPT_TTL: Duration = Duration::from_secs(10);
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
    /// The thread of `Durability::Interval`, stopped (after a last flush) on drop.
    _flusher: Option<Flusher>,
    /// How large a write's free-text fields may be.
    pub(crate) limits: Limits,
    /// The digest version of the store's turns, once this process knows it (see
    /// the impl block on digest versions below).
    pub(crate) digests: Mutex<Option<DigestVersion>>,
    /// What opening the store upgraded, if it did.
    upgraded: Option<UpgradeReport>,
}

impl Store {
    /// Opens (or creates) an on-disk store in directory `path`.
    ///
    /// One process owns a store directory: a second one gets [`Error::StoreLocked`].
    #[cfg(feature = "rocksdb")]
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let mut store = Self::wrap(Box::new(Embedded::open(path.as_ref())?));
        store.records = Some(Records::new(path.as_ref()));
        store.catalog = Some(Catalog::open(path.as_ref()).map_err(|e| Error::Io {
            context: format!(
                "opening the catalog in {}",
                path.as_ref().join(crate::store::catalog::DIR).display()
            ),
            source: std::io::Error::other(e),
        })?);
        store.upgraded = store.settle_digest_version()?;
        Ok(store)
    }

    /// A fresh in-memory store, gone when dropped.
    pub fn in_memory() -> Result<Self> {
        let mut store = Self::wrap(Box::new(Embedded::in_memory()?));
        store.catalog = Some(Catalog::in_memory().map_err(|e| Error::Io {
            context: "creating the catalog in memory".into(),
            source: std::io::Error::other(e),
        })?);
        // Made by this code: its digests are the current version's.
        store.know_digest_version(DigestVersion::CURRENT);
        Ok(store)
    }

    /// What opening the store did to bring its digests to the current version, when it
    /// was written by an older forktrail (see [`Store::upgrade_digests`]).
    pub fn upgrade_report(&self) -> Option<&UpgradeReport> {
        self.upgraded.as_ref()
    }

    /// A remote SPARQL 1.1 store (Oxigraph server, Virtuoso, GraphDB, Neptune, another
    /// `forktrail serve`, …), which many processes may share.
    ///
    /// Nothing is sent until the first operation. Its default graph must be the union
    /// of its named graphs (Oxigraph server: `--union-default-graph`); writers of one
    /// store coordinate through leases in the graph `{base}leases` (ARCHITECTURE.md
    /// says what that relies on).
    pub fn remote(config: RemoteConfig) -> Result<Self> {
        Ok(Self::wrap(Box::new(Remote::new(config)?)))
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

    /// Starts a write that may touch anything: takes the store's write lock (and, on a
    /// shared store, a lease on the whole store) until the transaction is committed or
    /// dropped.
    pub(crate) fn write(&self) -> Result<WriteTx<'_>> {
        self.write_on(&[])
    }

    /// Starts a write that touches sessions `keys` only (their graphs, their children):
    /// on a shared store, other processes may write other sessions meanwhile. Empty
    /// `keys` claims the whole store.
    pub(crate) fn write_on(&self, keys: &[NamedNode]) -> Result<WriteTx<'_>> {
        let state = !self.backend.exclusive() && self.check_shared_digests()?;
        let mut tx = self.write_unchecked(keys)?;
        if state {
            tx.version = Some(rdf::version_quads(&self.iris, DigestVersion::CURRENT));
        }
        Ok(tx)
    }

    /// [`Store::write_on`] without the check that a shared store's digests are of the
    /// current version: for the check itself and the upgrade.
    pub(crate) fn write_unchecked(&self, keys: &[NamedNode]) -> Result<WriteTx<'_>> {
        let guard = self.lock_writes();
        let lease = if self.backend.exclusive() {
            // It commits alone: after every queued change.
            self.settle(&[]);
            None
        } else {
            Some(self.acquire(keys)?)
        };
        Ok(self.tx(guard, lease, None))
    }

    /// Starts an append or a fork on sessions `keys`, committed with others waiting at
    /// the same time (see `Group`) on a store this process owns; on a shared
    /// one, as [`Store::write_on`].
    pub(crate) fn write_grouped(&self, keys: &[NamedNode]) -> Result<WriteTx<'_>> {
        if !self.backend.exclusive() {
            return self.write_on(keys);
        }
        loop {
            let guard = self.lock_writes();
            if !self.must_settle(keys) {
                return Ok(self.tx(guard, None, Some(keys.to_vec())));
            }
            drop(guard);
            self.settle(keys);
        }
    }

    /// Holds writes while a reader brings the catalog up to date from the RDF
    /// (`listing.rs`): the write lock, taken once every queued change is committed. It
    /// writes nothing, so it is not counted as a write.
    pub(crate) fn hold_writes(&self) -> WriteGuard<'_> {
        let guard = self.lock_writes();
        self.settle(&[]);
        guard
    }

    fn lock_writes(&self) -> WriteGuard<'_> {
        self.write_lock.lock()
    }

    fn tx<'s>(
        &'s self,
        guard: WriteGuard<'s>,
        lease: Option<Lease>,
        group: Option<Vec<NamedNode>>,
    ) -> WriteTx<'s> {
        WriteTx {
            store: self,
            _guard: Some(guard),
            change: Change::default(),
            effects: Effects {
                counted: Some(Counted::begin(&self.writes)),
                ..Effects::default()
            },
            lease,
            new_nodes: Vec::new(),
            labels: Vec::new(),
            group,
            version: None,
        }
    }

    /// Commits `change` (if not empty), then applies each write's `effects` to the
    /// record index and the read cache, then syncs if the durability asks.
    pub(crate) fn write_through(&self, change: Change, effects: Vec<Effects>) -> Result<()> {
        let wrote = !change.is_empty() || effects.iter().any(|e| e.clear);
        if !change.is_empty() {
            self.backend.commit(change)?;
        }
        // Applied before the sync: what is committed is what later reads must see.
        for e in effects {
            e.apply(self);
        }
        if wrote && self.durability == Durability::Sync {
            self.backend.flush()?;
        }
        Ok(())
    }

    /// Claims `keys` (the whole store if empty) against the other writers of a shared
    /// store: writes a lease, reads every lease back, and goes ahead only if no other
    /// unexpired lease claims the same; otherwise withdraws and tries again after a
    /// random pause. Two writers can never both go ahead: whichever wrote second sees
    /// the first's lease. Both may step back, hence the pauses.
    fn acquire(&self, keys: &[NamedNode]) -> Result<Lease> {
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
    fn receipt(&self) -> MutexGuard<'_, Vec<Quad>> {
        self.receipt.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn writers(&self) -> MutexGuard<'_, HashSet<SessionId>> {
        self.writers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A write in progress: it holds the store's write lock, collects one change, and on
/// commit writes it atomically and brings the read cache up to date. Functions that
/// need the lock take it, so their signature shows the lock is held. Dropped without a
/// commit, it writes nothing.
pub(crate) struct WriteTx<'s> {
    store: &'s Store,
    /// Released once a grouped change is queued.
    _guard: Option<WriteGuard<'s>>,
    change: Change,
    effects: Effects,
    /// On a shared store, the lease this write holds: removed by the commit.
    lease: Option<Lease>,
    /// What the write creates and the labels it takes (see [`WriteTx::claim_node`]).
    new_nodes: Vec<(NamedNode, NamedNode)>,
    labels: Vec<(NamedNode, String)>,
    /// For a group commit, the sessions the write touches.
    group: Option<Vec<NamedNode>>,
    /// The statement of the store's digest version, written with the write's quads on
    /// a shared store that has none yet (see `Store::check_shared_digests`).
    version: Option<Vec<Quad>>,
}

/// What a committed write changes besides the store: the read cache and the record
/// index.
#[derive(Default)]
pub(crate) struct Effects {
    /// Sessions whose cached entries go (by IRI).
    forget: Vec<NamedNode>,
    /// Turns appended.
    appended: Vec<Appended>,
    /// Records of a session's turns an import encoded as it wrote them: the session,
    /// its first own index, the run.
    imported: Vec<(NamedNode, u64, Run)>,
    /// The change may touch anything: drop the whole cache.
    clear: bool,
    /// What the catalog learns from the write (see [`crate::store::catalog`]).
    catalog: Option<Pending>,
    /// Counts the write as done once these effects are applied or given up.
    counted: Option<Counted>,
}

impl Effects {
    /// Applies the effects of a committed write; the turns it appended move into the
    /// read cache after the record index has written them.
    fn apply(mut self, store: &Store) {
        if let Some(catalog) = self.catalog.take() {
            catalog.apply();
        }
        if let Some(records) = &store.records {
            if self.clear {
                records.clear();
            }
            for iri in &self.forget {
                records.forget(iri.as_str());
            }
            for run in self.appended.chunk_by(|a, b| a.session == b.session) {
                let entries = run.iter().map(|a| &a.entry);
                records.appended(run[0].session.as_str(), run[0].own_start, entries);
            }
            for (iri, own_start, run) in &self.imported {
                records.imported(iri.as_str(), *own_start, run);
            }
        }
        let mut cache = store.cache();
        if self.clear {
            cache.clear();
        }
        for iri in &self.forget {
            cache.forget(iri.as_str());
        }
        for a in self.appended {
            let Appended {
                session,
                entry,
                branch,
                ..
            } = a;
            let digest = entry.digest.clone();
            cache.appended(session.as_str(), entry.into_record(&branch), digest);
        }
        drop(cache);
        // Done: whatever reads the store or the catalog from now on sees all of it.
        drop(self.counted);
    }
}

impl Store {
    /// Writes done so far: read before a read that [`Store::written_since`] checks.
    pub(crate) fn writes_done(&self) -> u64 {
        self.writes.done()
    }

    /// Whether a write was under way at any moment since [`Store::writes_done`] gave
    /// `done`: if not, the store and its derived indexes held the same writes
    /// throughout.
    pub(crate) fn written_since(&self, done: u64) -> bool {
        self.writes.since(done)
    }
}

// The digest version of the store's turns (see `rdf::DigestVersion`) and the upgrade
// from an older one. Version 2 digests cover what version 1 left out (names, tool call
// ids, tool calls, payloads) and are version 1's for a turn that has none of them, so
// an upgrade rewrites only the sessions holding such turns and the forks below them.
impl Store {
    /// The digest version of the store's turns (see [`DigestVersion`]): the version the
    /// store states; without a statement, version 1 if any turn has a field that only
    /// version 2 covers, else the current version (the two then agree).
    ///
    /// ```
    /// use forktrail::{DigestVersion, Store};
    /// assert_eq!(Store::in_memory()?.digest_version()?, DigestVersion::V2);
    /// # Ok::<(), forktrail::Error>(())
    /// ```
    pub fn digest_version(&self) -> Result<DigestVersion> {
        if let Some(version) = *self.digests.lock().unwrap_or_else(|p| p.into_inner()) {
            return Ok(version);
        }
        self.stored_digest_version()
    }

    fn stored_digest_version(&self) -> Result<DigestVersion> {
        let rdf = self.rdf();
        match rdf.stated_digest_version()? {
            Some(n) => DigestVersion::from_number(n).ok_or_else(|| {
                Error::InvalidInput(format!(
                    "the store {} states digest version {n}, which this forktrail does not \
                     know: it was written by a newer forktrail",
                    self.location()
                ))
            }),
            None if rdf.any_turn_with_extras()? => Ok(DigestVersion::V1),
            None => Ok(DigestVersion::CURRENT),
        }
    }

    /// Brings the store's digests to the current version in one pass and states the
    /// version: every digest that differs is rewritten (with the base digest of every
    /// fork below it, and an OpenTelemetry import's name for the turn), in one
    /// transaction that holds every other write, and the record index is rebuilt as
    /// sessions are read. A store already at the current version is left as it is, but
    /// for the statement. [`Store::open`] does this by itself; a shared store is
    /// brought up by `forktrail upgrade --store URL`, once.
    pub fn upgrade_digests(&self) -> Result<UpgradeReport> {
        let mut tx = self.write_unchecked(&[])?;
        let from = self.digest_version()?;
        let to = DigestVersion::CURRENT;
        let rdf = self.rdf();
        let stated = rdf.stated_digest_version()?;
        let mut report = UpgradeReport {
            from,
            to,
            ..UpgradeReport::default()
        };
        if stated == Some(u64::from(to.number())) {
            drop(tx);
            self.know_digest_version(to);
            return Ok(report);
        }
        if from != to {
            let redigest = rdf::redigest(&rdf, rdf.graphs_with_extras()?, None)?;
            report.sessions = redigest.sessions.len();
            report.turns = redigest.turns;
            tx.remove(redigest.remove);
            tx.insert(redigest.insert);
            for iri in &redigest.sessions {
                tx.forget(iri);
            }
        }
        tx.remove(rdf.store_statements()?);
        tx.insert(rdf::version_quads(&self.iris, to));
        tx.commit()?;
        if let Some(records) = &self.records {
            // Files of the record index's older format are read as absent: gone now,
            // they are written anew by the replays that need them.
            records.clear();
        }
        self.know_digest_version(to);
        Ok(report)
    }

    /// Records the version this process knows the store to be at.
    pub(crate) fn know_digest_version(&self, version: DigestVersion) {
        *self.digests.lock().unwrap_or_else(|p| p.into_inner()) = Some(version);
    }

    /// At open, for a store this process owns: an empty store states the current
    /// version; a store of an older version is upgraded.
    pub(crate) fn settle_digest_version(&self) -> Result<Option<UpgradeReport>> {
        let rdf = self.rdf();
        if rdf.stated_digest_version()?.is_some() {
            let version = self.stored_digest_version()?;
            if version == DigestVersion::CURRENT {
                self.know_digest_version(version);
                return Ok(None);
            }
        }
        if !rdf.any_session()? {
            let mut tx = self.write_unchecked(&[])?;
            tx.remove(rdf.store_statements()?);
            tx.insert(rdf::version_quads(&self.iris, DigestVersion::CURRENT));
            tx.commit()?;
            self.know_digest_version(DigestVersion::CURRENT);
            return Ok(None);
        }
        self.upgrade_digests().map(Some)
    }

    /// Before a write to a shared store, until this process knows the store's version:
    /// a store of an older version is refused (its upgrade holds every writer:
    /// `forktrail upgrade`); `true` when the store states no version (and has no turn
    /// whose digest the versions disagree on): the write then states the current one,
    /// in the same commit, before anything makes the versions disagree.
    pub(crate) fn check_shared_digests(&self) -> Result<bool> {
        if self
            .digests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
        {
            return Ok(false);
        }
        match self.stored_digest_version()? {
            DigestVersion::CURRENT => {}
            old => {
                return Err(Error::Conflict(format!(
                    "the shared store {} holds turn digests of version {old}, which do not \
                     cover tool calls: run `forktrail upgrade --store {}` once to bring it to \
                     version {} (it holds every writer meanwhile), then write again",
                    self.location(),
                    self.location(),
                    DigestVersion::CURRENT
                )))
            }
        }
        if self.rdf().stated_digest_version()?.is_none() {
            return Ok(true);
        }
        self.know_digest_version(DigestVersion::CURRENT);
        Ok(false)
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

/// What an appended turn carries besides its entry in the record index.
pub(crate) struct AppendedFacts<'a> {
    pub(crate) model: Option<String>,
    /// Its `dcterms:created` lexical form.
    pub(crate) at: &'a str,
}

/// A turn a write appends, as the record index and the read cache take it.
pub(crate) struct Appended {
    session: NamedNode,
    own_start: u64,
    /// As the record index keeps it (no branch of its own: the session's).
    entry: Entry,
    /// The session's branch label, for the cache's record.
    branch: String,
}

/// A lease held, and the receipt its fenced commit leaves.
struct Lease {
    node: NamedNode,
    /// Its `ft:leaseExpires`.
    expires: oxigraph::model::Literal,
    quads: Vec<Quad>,
    /// What a fenced commit leaves in its place (see [`crate::storage::Fence`]).
    receipt: Vec<Quad>,
}

impl Drop for WriteTx<'_> {
    /// A write given up (bad input, a failed commit) withdraws its lease at once, so
    /// others need not wait for it to lapse.
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take() {
            let _ = self.store.backend.commit(Change {
                removes: lease.quads,
                ..Change::default()
            });
        }
    }
}

impl<'s> WriteTx<'s> {
    /// Declares that the write creates node `subject` in `graph`: on a shared store,
    /// the commit is applied only if no other writer has created it meanwhile.
    pub(crate) fn claim_node(&mut self, graph: &NamedNode, subject: &NamedNode) {
        self.new_nodes.push((graph.clone(), subject.clone()));
    }

    /// Declares that the write gives a child of `parent` branch label `label`: on a
    /// shared store, the commit is applied only if no child of it has taken the label.
    pub(crate) fn claim_label(&mut self, parent: &NamedNode, label: &str) {
        self.labels.push((parent.clone(), label.to_string()));
    }

    pub(crate) fn insert(&mut self, quads: impl IntoIterator<Item = Quad>) {
        self.change.inserts.extend(quads);
    }

    pub(crate) fn remove(&mut self, quads: impl IntoIterator<Item = Quad>) {
        self.change.removes.extend(quads);
    }

    /// Removes a session's whole graph (and forgets what the cache knew of it).
    pub(crate) fn drop_graph(&mut self, graph: NamedNode) {
        self.catalog_op(&graph, |id| Op::Dropped(id.to_string()));
        self.effects.forget.push(graph.clone());
        self.change.drop_graphs.push(graph);
    }

    /// The cache forgets session `iri` after the commit (and the catalog derives it
    /// again from the RDF before its next read, unless the write says what it is).
    pub(crate) fn forget(&mut self, iri: &NamedNode) {
        self.catalog_op(iri, |id| Op::Suspect(id.to_string()));
        self.effects.forget.push(iri.clone());
    }

    /// The change may touch anything: the cache is dropped after the commit.
    pub(crate) fn forget_all(&mut self) {
        if let Some(catalog) = &self.store.catalog {
            self.effects
                .catalog
                .get_or_insert_with(|| catalog.begin())
                .push(crate::store::catalog::EVERYTHING, Op::All);
        }
        self.effects.clear = true;
    }

    /// The write creates the session `facts` describe (new, a fork, an import) whose
    /// newest turn is from `activity` (microseconds; its creation when `None`).
    pub(crate) fn created(&mut self, facts: &SessionNode, activity: Option<i64>) {
        let iris = &self.store.iris;
        let id_of = |iri: &NamedNode| iris.session_id(iri.as_ref()).map(|s| s.to_string());
        let created = micros(facts.created.as_deref());
        let activity = activity.unwrap_or(created).max(created);
        let entry = CatalogEntry {
            id: facts.id.to_string(),
            parent: facts.parent.as_ref().and_then(id_of),
            root: facts
                .fork_root
                .as_ref()
                .and_then(id_of)
                .unwrap_or_else(|| facts.id.to_string()),
            principal: facts
                .principal
                .as_ref()
                .and_then(|p| iris.parse_agent(p.as_ref()))
                .map(|a| a.name().to_string()),
            title: facts.title.clone(),
            branch: facts.branch.clone(),
            created,
            activity,
            family_activity: activity,
            length: facts.length,
            own_start: facts.own_start(),
            depth: facts.depth,
            ..CatalogEntry::default()
        };
        self.catalog_op(&facts.iri, |_| Op::Created(entry));
    }

    /// Whether the store keeps a catalog (an import then hands it its turns).
    pub(crate) fn catalogs(&self) -> bool {
        self.store.catalog.is_some()
    }

    /// Own turns a write stored for session `iri` outside `append` (an import), for the
    /// catalog's search.
    pub(crate) fn indexed_turns(&mut self, iri: &NamedNode, turns: Vec<TurnDoc>) {
        if !turns.is_empty() {
            self.catalog_op(iri, |id| Op::Appended {
                session: id.to_string(),
                turns,
            });
        }
    }

    /// Adds a catalog op about session `iri` (made from its id), if there is a
    /// catalog.
    fn catalog_op(&mut self, iri: &NamedNode, op: impl FnOnce(&str) -> Op) {
        let Some(catalog) = &self.store.catalog else {
            return;
        };
        let Some(id) = self.store.iris.session_id(iri.as_ref()) else {
            return;
        };
        self.effects
            .catalog
            .get_or_insert_with(|| catalog.begin())
            .push(id.as_str(), op(id.as_str()));
    }

    /// A turn appended to session `iri` (whose own turns start at `own_start`, whose
    /// branch is `branch`), for the cache, the record index and the catalog.
    pub(crate) fn appended(
        &mut self,
        iri: &NamedNode,
        own_start: u64,
        entry: Entry,
        branch: &str,
        facts: AppendedFacts<'_>,
    ) {
        let AppendedFacts { model, at } = facts;
        let turn = TurnDoc {
            index: entry.index,
            role: entry.role.as_str().to_string(),
            content: entry.content.clone(),
            model,
            at: micros(Some(at)),
        };
        self.catalog_op(iri, |id| Op::Appended {
            session: id.to_string(),
            turns: vec![turn],
        });
        self.effects.appended.push(Appended {
            session: iri.clone(),
            own_start,
            entry,
            branch: branch.to_string(),
        });
    }

    /// Whether the store keeps a record index (the import then encodes its records).
    pub(crate) fn indexes_records(&self) -> bool {
        self.store.records.is_some()
    }

    /// The records of turns an import wrote to session `iri` (own turns from
    /// `own_start`), for the record index once committed. The import's caller forgets
    /// the session in the cache.
    pub(crate) fn imported(&mut self, iri: &NamedNode, own_start: u64, run: Run) {
        self.effects.imported.push((iri.clone(), own_start, run));
    }

    /// Writes the change in one atomic commit (with others waiting, for a grouped
    /// write), then updates the cache; on failure nothing is written and the cache is as
    /// it was.
    pub(crate) fn commit(mut self) -> Result<()> {
        let mut change = std::mem::take(&mut self.change);
        let effects = std::mem::take(&mut self.effects);
        let stated = match self.version.take() {
            Some(statement) if !change.is_empty() => {
                change.inserts.extend(statement);
                true
            }
            _ => false,
        };
        let result = self.commit_change(change, effects);
        if stated && result.is_ok() {
            self.store.know_digest_version(DigestVersion::CURRENT);
        }
        result
    }

    /// Writes `quads` through the store's bulk path, atomically, before the write's own
    /// change is committed: what a large import writes. On a shared store that states no
    /// digest version yet, the statement goes in with them.
    pub(crate) fn bulk_load(&mut self, quads: &mut dyn Iterator<Item = Quad>) -> Result<()> {
        let statement = self.version.take().unwrap_or_default();
        let stated = !statement.is_empty();
        self.store
            .backend
            .bulk_load(&mut statement.into_iter().chain(quads))?;
        if stated {
            self.store.know_digest_version(DigestVersion::CURRENT);
        }
        Ok(())
    }

    fn commit_change(&mut self, mut change: Change, effects: Effects) -> Result<()> {
        if let Some(keys) = self.group.take() {
            // Only insertions are grouped: their order in a batch does not matter.
            if !change.inserts.is_empty()
                && change.removes.is_empty()
                && change.drop_graphs.is_empty()
            {
                let ticket = self.store.enqueue(keys, change, effects);
                self._guard = None;
                return self.store.committed(ticket);
            }
        }
        // The lease goes in the same request as the write: it is held until the write
        // is in, and never outlives it; and the store applies the write only if the
        // lease still holds then (a fenced commit).
        if let Some(lease) = &self.lease {
            let nothing = change.is_empty();
            change.removes.extend(lease.quads.iter().cloned());
            if nothing {
                // Nothing to write: the lease is only withdrawn, and leaves no receipt.
                self.store.write_through(change, vec![effects])?;
                self.lease = None;
                return Ok(());
            }
            // This process's previous receipt goes with it, and this one takes its place.
            change.removes.extend(self.store.receipt().iter().cloned());
            change.inserts.extend(lease.receipt.iter().cloned());
            change.fence = Some(crate::storage::Fence {
                condition: crate::rdf::fence_condition(
                    &self.store.iris,
                    &lease.node,
                    &lease.expires,
                    &self.new_nodes,
                    &self.labels,
                ),
                receipt: lease.receipt.clone(),
            });
        }
        // On failure the lease stays here and `drop` withdraws it.
        self.store.write_through(change, vec![effects])?;
        if let Some(lease) = self.lease.take() {
            *self.store.receipt() = lease.receipt;
        }
        Ok(())
    }
}

// Group commit.
//
// Group commit: concurrent appends and forks on a store this process owns are written
// in one storage commit per batch, as databases do.
//
// A writer prepares its change under the write lock, exactly as if alone (the same
// checks, the same reads, so the same errors and indices), queues it and releases the
// lock, so the next writer prepares while earlier changes are committed. Whichever
// queued writer finds no commit running becomes the leader: it takes every queued
// change, commits them as one, brings the read cache and the record index up to date,
// and wakes the others. A writer is answered only after the commit holding its change,
// so no acknowledged write can be lost to a failed batch.
//
// Preparing reads only committed state, so a change is never prepared against one that
// is still queued: a writer whose sessions (its keys) have a queued or committing
// change waits for that batch first, and writes with no keys (deletes, detaches,
// imports, updates) wait until nothing is queued and commit alone. Queued changes only
// insert, so their order within a batch cannot matter.
/// What is queued or being committed.
#[derive(Default)]
pub(crate) struct Group {
    queue: Vec<Queued>,
    committing: bool,
    next_ticket: u64,
    /// Results of committed batches, until their writers pick them up.
    done: HashMap<u64, Result<()>>,
    /// Queued or committing changes per session IRI.
    busy: HashMap<String, usize>,
}

struct Queued {
    ticket: u64,
    keys: Vec<NamedNode>,
    change: Change,
    effects: Effects,
}

impl Group {
    fn is_busy(&self, keys: &[NamedNode]) -> bool {
        if keys.is_empty() {
            return self.committing || !self.queue.is_empty();
        }
        keys.iter().any(|k| self.busy.contains_key(k.as_str()))
    }
}

impl Store {
    fn group(&self) -> MutexGuard<'_, Group> {
        self.group.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until no queued or committing change touches `keys` (any change, when
    /// `keys` is empty), leading batch commits meanwhile if no one else does. Called
    /// holding nothing but, for an empty `keys`, the write lock (no change can be
    /// queued then, so the wait ends).
    pub(crate) fn settle(&self, keys: &[NamedNode]) {
        let mut group = self.group();
        while group.is_busy(keys) {
            group = self.lead_or_wait(group);
        }
    }

    /// Leads a commit of what is queued if no one is committing; else waits for the
    /// running one to end.
    fn lead_or_wait<'g>(&'g self, group: MutexGuard<'g, Group>) -> MutexGuard<'g, Group> {
        if !group.committing && !group.queue.is_empty() {
            self.lead(group)
        } else {
            self.group_done
                .wait(group)
                .unwrap_or_else(|p| p.into_inner())
        }
    }

    /// Whether a write on `keys` must wait for queued changes before it prepares.
    pub(crate) fn must_settle(&self, keys: &[NamedNode]) -> bool {
        self.group().is_busy(keys)
    }

    /// Queues a prepared change (the write lock is held) and returns its ticket.
    pub(crate) fn enqueue(&self, keys: Vec<NamedNode>, change: Change, effects: Effects) -> u64 {
        debug_assert!(change.drop_graphs.is_empty() && change.removes.is_empty());
        let mut group = self.group();
        let ticket = group.next_ticket;
        group.next_ticket += 1;
        for key in &keys {
            *group.busy.entry(key.as_str().to_string()).or_default() += 1;
        }
        group.queue.push(Queued {
            ticket,
            keys,
            change,
            effects,
        });
        ticket
    }

    /// Waits for the batch holding `ticket` to be committed (leading it, if no one
    /// else is committing) and returns its outcome.
    pub(crate) fn committed(&self, ticket: u64) -> Result<()> {
        let mut group = self.group();
        loop {
            if let Some(result) = group.done.remove(&ticket) {
                return result;
            }
            group = self.lead_or_wait(group);
        }
    }

    /// Commits every queued change as one, then answers their writers.
    fn lead<'g>(&'g self, mut group: MutexGuard<'g, Group>) -> MutexGuard<'g, Group> {
        let batch = std::mem::take(&mut group.queue);
        group.committing = true;
        drop(group);
        let tickets: Vec<u64> = batch.iter().map(|q| q.ticket).collect();
        let mut keys = Vec::with_capacity(batch.len());
        let mut effects = Vec::with_capacity(batch.len());
        let mut change = Change::default();
        for q in batch {
            change.inserts.extend(q.change.inserts);
            effects.push(q.effects);
            keys.push(q.keys);
        }
        // If the commit panics, `finish` still answers the batch's writers (an error).
        let finish = Finish {
            store: self,
            tickets,
            keys,
        };
        let outcome = self.write_through(change, effects);
        finish.answer(outcome)
    }
}

/// Answers a batch's writers and frees its sessions, even on a panic.
struct Finish<'a> {
    store: &'a Store,
    tickets: Vec<u64>,
    keys: Vec<Vec<NamedNode>>,
}

impl<'a> Finish<'a> {
    fn answer(mut self, outcome: Result<()>) -> MutexGuard<'a, Group> {
        let group = self.release(outcome);
        // Answered: nothing left for `drop` to do.
        self.tickets.clear();
        group
    }

    fn release(&self, outcome: Result<()>) -> MutexGuard<'a, Group> {
        let mut group = self.store.group();
        let mut outcome = Some(outcome);
        for (i, ticket) in self.tickets.iter().enumerate() {
            let result = match (&outcome, self.tickets.len()) {
                // Alone in its batch, a writer gets the error itself.
                (_, 1) => outcome.take().expect("one writer"),
                (Some(Ok(())), _) => Ok(()),
                (Some(Err(e)), n) => Err(Error::Io {
                    context: format!("the group commit of {n} writes failed"),
                    source: std::io::Error::other(e.to_string()),
                }),
                (None, _) => unreachable!("taken only when alone"),
            };
            group.done.insert(*ticket, result);
            for key in &self.keys[i] {
                if let Some(n) = group.busy.get_mut(key.as_str()) {
                    *n -= 1;
                    if *n == 0 {
                        group.busy.remove(key.as_str());
                    }
                }
            }
        }
        group.committing = false;
        self.store.group_done.notify_all();
        group
    }
}

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        if self.tickets.is_empty() {
            return;
        }
        drop(self.release(Err(Error::Io {
            context: "the group commit stopped".into(),
            source: std::io::Error::other("a panic while committing"),
        })));
    }
}
