//! Whether a shared SPARQL store stays flat as it grows, beside the embedded store: the
//! same sessions imported into RocksDB (`Store::open`), into an Oxigraph server on
//! RocksDB and, when it starts, into Virtuoso 7, in one run, each measured at 3,000,
//! 10,000 and 30,000 sessions.
//!
//! The stores grow through forktrail itself: `Store::import_sessions` (through
//! `import_sessions_with`, whose report says which sessions the dedup stored as forks),
//! 1,000 sessions a batch, 10 turns each (user and assistant in turn, 300-500 bytes
//! drawn from a 40-word vocabulary by a fixed-seed xorshift generator, one turn in a
//! thousand holding the word "zanzibar"), 4 principals, 3 models. About one session in
//! five repeats the first 4 turns of a session stored before its batch, so the import's
//! dedup stores it as a fork of that session and gives it a label (`copy`, `copy-2`, …)
//! no child of that parent has: the path whose label checks once looked at every
//! session of the store. Every batch is timed; the table shows the first (into an
//! empty store, so holding no copies: nothing is stored to copy) and the last before
//! each size, so a slope shows as the second growing from one size to the next.
//! Virtuoso refuses an update past 10 MB, so its batches go in as 10 imports of 100
//! sessions, timed together; it answers at most 10,000 rows a query, as a stock install
//! does (`ResultSetMaxRows`), so the catalog's build is measured as users would meet it.
//!
//! At each size, per store (medians of 5 after one untimed call unless said; on a
//! remote store with the HTTP requests per operation, `Store::remote_requests`):
//!
//! - the first read of a new process, once: a new handle (the embedded store closed and
//!   opened again, for a server a second `Store::remote` on the same URL) and its first
//!   `sessions()` call, which may build the catalog that later pages and searches read;
//! - the first page of 50 sessions (by activity), and a page of 50 at a cursor half way
//!   through the store (reached by untimed pages of 1,000);
//! - search, 50 hits, for the rare word and for the vocabulary's most frequent one;
//! - cold replay: 10 sessions never read before, once each, on the new handle (nothing of
//!   them cached there; an embedded store reads them from its record index, as a new
//!   process does), and warm replay: the same 10 again on that handle;
//! - fork: 10 sessions never used before, one fork each; append: 20 turns to one.
//!
//! `make bench-scale-remote` runs it (release build; installs Oxigraph's server and
//! Virtuoso first). It is not in `.ci/run`: the 30,000-session stage takes a while.
//! `FORKTRAIL_BENCH_SIZES=3000,10000,30000` chooses the sizes (multiples of 1,000 keep
//! every batch whole); `FORKTRAIL_BENCH_JSON=1` prints one JSON object instead of the
//! table; `FORKTRAIL_SCALE_DIR` is where the stores' temp dirs go (default: the system's
//! temp dir). The Oxigraph server is `$FORKTRAIL_OXIGRAPH`, else `oxigraph` on the PATH,
//! else pip's user-scheme `bin/oxigraph`; Virtuoso is `$FORKTRAIL_VIRTUOSO`, else
//! `virtuoso-t` on the PATH, with `isql-vt` beside it. Without Virtuoso, or if it does
//! not start, a note says so and its columns are left out. Remote requests may take up
//! to 10 minutes here (60 s by default), so that a slow read is timed, not failed.

use forktrail::{
    ForkOptions, NewSession, NewTurn, RemoteConfig, Role, SearchQuery, SessionId, SessionQuery,
    Store, TranscriptOptions,
};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The allocator the `forktrail` binary runs on (see its `main.rs`): the embedded store
/// is measured as the binary would run it.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Sessions per import, and the granularity of growth.
const BATCH: usize = 1000;
const TURNS: usize = 10;
/// The turns a copy repeats of the session it copies.
const SHARED: usize = 4;
/// One session in this many is a copy.
const COPY_ONE_IN: usize = 5;
const PRINCIPALS: usize = 4;
const MODELS: usize = 3;
const RARE: &str = "zanzibar";
/// Drawn with a skew toward the first slots, so the first word is in nearly every turn.
const VOCABULARY: [&str; 40] = [
    "agent", "tool", "fork", "replay", "model", "answer", "question", "file", "graph", "session",
    "branch", "token", "prompt", "result", "error", "retry", "search", "store", "query", "turn",
    "context", "budget", "plan", "step", "check", "patch", "test", "build", "commit", "review",
    "latency", "cache", "index", "schema", "digest", "lease", "update", "export", "import",
    "audit",
];
/// Sessions per import into Virtuoso, which refuses an update text past 10 MB (a batch
/// of 1,000 sessions is more): its batch is timed as the sum of its imports.
const VIRTUOSO_CHUNK: usize = 100;
const ROUNDS: usize = 5;
const REPLAYS: usize = 10;
const FORKS: usize = 10;
const APPENDS: usize = 20;
/// How long one remote request may take: a catalog build at 30,000 sessions is timed
/// rather than cut off at the default minute.
const REMOTE_TIMEOUT: Duration = Duration::from_secs(600);

/// xorshift64: the same sequence on every run.
struct Rng(u64);

impl Rng {
    /// A generator for one purpose of one session (or turn): seeds are mixed
    /// (splitmix64) so that neighbouring seeds give unrelated sequences.
    fn seeded(a: u64, b: u64) -> Self {
        let mut z = a.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ b.wrapping_add(0x632b_e59b_d9b4_e019);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Self((z ^ (z >> 31)) | 1)
    }

    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

/// The sessions every store is given, in the same order: each a pure function of its
/// number, so that a copy can repeat an earlier session's turns without keeping them.
struct Workload {
    /// For session `n`, the session whose first [`SHARED`] turns it starts with: itself,
    /// or for a copy the origin of the session it copies (a copy of a copy repeats the
    /// same first turns).
    origin: Vec<usize>,
}

impl Workload {
    fn new(sessions: usize) -> Self {
        let mut origin = Vec::with_capacity(sessions);
        for n in 0..sessions {
            let mut rng = Rng::seeded(n as u64, 1);
            // Only sessions of an earlier batch are stored when this one goes in (growth
            // never splits a batch across a multiple of BATCH).
            let stored = n / BATCH * BATCH;
            let copied = stored > 0 && rng.below(COPY_ONE_IN) == 0;
            origin.push(if copied { origin[rng.below(stored)] } else { n });
        }
        Self { origin }
    }

    fn is_copy(&self, n: usize) -> bool {
        self.origin[n] != n
    }

    /// Session `n` as an import takes it.
    fn session(&self, n: usize) -> (NewSession, Vec<NewTurn>) {
        let principal = Rng::seeded(n as u64, 2).below(PRINCIPALS);
        let session = NewSession {
            principal: Some(format!("user-{principal}")),
            ..Default::default()
        };
        let turns = (0..TURNS)
            .map(|t| turn(if t < SHARED { self.origin[n] } else { n }, t))
            .collect();
        (session, turns)
    }
}

/// Turn `t` of session `n`'s own text: the same bytes (and model) at every call.
fn turn(n: usize, t: usize) -> NewTurn {
    let mut rng = Rng::seeded(n as u64, 16 + t as u64);
    let target = 300 + rng.below(200);
    let mut words = Vec::new();
    let mut len = 0;
    while len < target {
        let r = rng.below(VOCABULARY.len());
        let word = VOCABULARY[r * r / VOCABULARY.len()];
        len += word.len() + 1;
        words.push(word);
    }
    if rng.below(1000) == 0 {
        words[3] = RARE;
    }
    let text = words.join(" ");
    if t.is_multiple_of(2) {
        NewTurn::new(Role::User, text)
    } else {
        let model = Rng::seeded(n as u64, 3).below(MODELS);
        NewTurn::new(Role::Assistant, text).model(format!("model-{model}"))
    }
}

/// A child process, killed and reaped when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A port of 127.0.0.1 that was free a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A temp dir under `$FORKTRAIL_SCALE_DIR`, or the system's.
fn temp_dir() -> tempfile::TempDir {
    match std::env::var_os("FORKTRAIL_SCALE_DIR") {
        Some(parent) => {
            std::fs::create_dir_all(&parent).unwrap();
            tempfile::tempdir_in(parent).unwrap()
        }
        None => tempfile::tempdir().unwrap(),
    }
}

/// `name` found in a directory of the PATH.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// What the Makefile's OXIGRAPH_BIN finds: `$FORKTRAIL_OXIGRAPH`, `oxigraph` on the
/// PATH, or where `pip install --user` puts it.
fn oxigraph_binary() -> PathBuf {
    if let Some(binary) = std::env::var_os("FORKTRAIL_OXIGRAPH").filter(|b| !b.is_empty()) {
        return binary.into();
    }
    on_path("oxigraph").unwrap_or_else(|| {
        let base = Command::new("python3")
            .args(["-m", "site", "--user-base"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        Path::new(&base).join("bin").join("oxigraph")
    })
}

/// A store server on loopback, its data in a temp dir; both gone when dropped.
struct Server {
    _child: Reaped,
    url: String,
    _dir: tempfile::TempDir,
}

/// An Oxigraph server on RocksDB (`--location`), with the union default graph
/// forktrail's queries need.
fn start_oxigraph() -> Result<Server, String> {
    let binary = oxigraph_binary();
    let dir = temp_dir();
    for _ in 0..5 {
        let port = free_port();
        let mut child = Reaped(
            Command::new(&binary)
                .arg("serve")
                .arg("--location")
                .arg(dir.path().join("oxigraph"))
                .args(["--union-default-graph", "--bind"])
                .arg(format!("127.0.0.1:{port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot start {} ({e})", binary.display()))?,
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if matches!(child.0.try_wait(), Ok(Some(_))) {
                break; // the port was taken meanwhile: another one
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(Server {
                    _child: child,
                    url: format!("http://127.0.0.1:{port}/query"),
                    _dir: dir,
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Err(format!(
        "{} serve did not start listening",
        binary.display()
    ))
}

/// A Virtuoso 7 server whose SPARQL user may update, started as the tests start one
/// (tests/common/mod.rs): a copy of a template database made once, granted
/// `SPARQL_UPDATE`. `Ok(None)` when there is no `virtuoso-t`.
fn start_virtuoso() -> Result<Option<Server>, String> {
    let Some(binary) = std::env::var_os("FORKTRAIL_VIRTUOSO")
        .filter(|b| !b.is_empty())
        .map(PathBuf::from)
        .or_else(|| on_path("virtuoso-t"))
    else {
        return Ok(None);
    };
    let template = virtuoso_template(&binary)?;
    let dir = temp_dir();
    std::fs::copy(&template, dir.path().join("v.db")).map_err(|e| e.to_string())?;
    let (child, http, _) = spawn_virtuoso(&binary, dir.path())?;
    Ok(Some(Server {
        _child: Reaped(child),
        url: format!("http://127.0.0.1:{http}/sparql"),
        _dir: dir,
    }))
}

/// Starts `virtuoso-t` on the database in `dir` (created if missing) and waits for its
/// SPARQL endpoint: the process, its HTTP port and its SQL port. A port taken between
/// being picked and being bound means another try.
fn spawn_virtuoso(binary: &Path, dir: &Path) -> Result<(Child, u16, u16), String> {
    for _ in 0..4 {
        match try_spawn_virtuoso(binary, dir) {
            Ok(started) => return Ok(started),
            Err(log) if log.contains("Failed HTTP listen") || log.contains("Failed to listen") => {
                let _ = std::fs::remove_file(dir.join("v.lck"));
                let _ = std::fs::remove_file(dir.join("v.log"));
            }
            Err(log) => return Err(format!("virtuoso exited: {log}")),
        }
    }
    Err("virtuoso found no free port in 4 tries".into())
}

/// One start of `virtuoso-t`. Unlike the tests' server it gets 170,000 buffers (1.3 GB,
/// Virtuoso's own advice for 2 GB of memory): with the tests' 10,000 a store of 30,000
/// sessions would be measured on its disk reads. Queries may run as long as forktrail
/// waits for them; their answers stop at 10,000 rows, a stock install's
/// `ResultSetMaxRows`, which Virtuoso applies without an error, so forktrail's reads
/// are measured under the limit users have.
fn try_spawn_virtuoso(binary: &Path, dir: &Path) -> Result<(Child, u16, u16), String> {
    let (sql, http) = (free_port(), free_port());
    let d = dir.display();
    let timeout = REMOTE_TIMEOUT.as_secs();
    let ini = format!(
        "[Database]\nDatabaseFile = {d}/v.db\nErrorLogFile = {d}/v.log\nLockFile = {d}/v.lck\n\
         TransactionFile = {d}/v.trx\nxa_persistent_file = {d}/v.pxa\n\
         [TempDatabase]\nDatabaseFile = {d}/v-temp.db\nTransactionFile = {d}/v-temp.trx\n\
         [Parameters]\nServerPort = 127.0.0.1:{sql}\nDisableUnixSocket = 1\n\
         NumberOfBuffers = 170000\nMaxDirtyBuffers = 130000\nCheckpointInterval = 0\n\
         [HTTPServer]\nServerPort = 127.0.0.1:{http}\nServerThreads = 10\n\
         MaxClientConnections = 10\n\
         [SPARQL]\nResultSetMaxRows = 10000\nMaxQueryExecutionTime = {timeout}\n"
    );
    let config = dir.join("virtuoso.ini");
    std::fs::write(&config, ini).map_err(|e| e.to_string())?;
    let mut child = Command::new(binary)
        .arg("+foreground")
        .arg("+configfile")
        .arg(&config)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            let log = std::fs::read_to_string(dir.join("v.log")).unwrap_or_default();
            return Err(format!("({status}) {log}"));
        }
        // Ready when a form POST gets JSON results back (as forktrail will ask), not
        // only when the port answers.
        let answered = ureq::post(&format!("http://127.0.0.1:{http}/sparql"))
            .set("Accept", "application/sparql-results+json")
            .send_form(&[("query", "SELECT * WHERE { ?s ?p ?o } LIMIT 1")])
            .ok()
            .and_then(|r| r.into_string().ok())
            .is_some_and(|body| body.trim_start().starts_with('{'));
        if answered {
            return Ok((child, http, sql));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    Err(format!(
        "virtuoso did not answer on port {http} within 120 s"
    ))
}

/// A database whose SPARQL user may update, made once per target directory (the same
/// file the tests make: creating one takes seconds, copying it milliseconds).
fn virtuoso_template(binary: &Path) -> Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("virtuoso-template");
    let db = root.join("v.db");
    if db.exists() {
        return Ok(db);
    }
    let scratch = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).map_err(|e| e.to_string())?;
    let (mut child, _, sql) = spawn_virtuoso(binary, scratch.path())?;
    let isql = binary.with_file_name("isql-vt");
    let granted = Command::new(&isql)
        .arg(format!("127.0.0.1:{sql}"))
        .args(["dba", "dba"])
        .arg("exec=GRANT SPARQL_UPDATE TO \"SPARQL\"; checkpoint; shutdown;")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !granted {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("{} could not grant SPARQL_UPDATE", isql.display()));
    }
    child.wait().map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
    let partial = root.join(format!("v.db.{}", std::process::id()));
    std::fs::copy(scratch.path().join("v.db"), &partial).map_err(|e| e.to_string())?;
    std::fs::rename(&partial, &db).map_err(|e| e.to_string())?;
    Ok(db)
}

/// A remote store on `url`, as a process of its own would open it (but waiting longer).
fn remote(url: &str) -> forktrail::Result<Store> {
    let mut config = RemoteConfig::new(url);
    config.timeout = REMOTE_TIMEOUT;
    Store::remote(config)
}

/// One store being grown and measured, with what keeps it alive.
struct Subject {
    name: &'static str,
    /// The embedded store's directory (`None` for a server's).
    path: Option<PathBuf>,
    /// The server's query URL (`None` for the embedded store).
    url: Option<String>,
    store: Option<Store>,
    /// Sessions per import: a batch goes in as one import, except into a store that
    /// refuses an update that large (Virtuoso: 10 MB), where it goes in as several.
    chunk: usize,
    /// The ids its imports gave, by session number.
    ids: Vec<SessionId>,
    /// Session numbers already read, forked or appended to: never sampled again as new.
    used: HashSet<usize>,
    /// Milliseconds per 1,000 sessions of its first batch, into an empty store.
    first_batch: Option<Figure>,
    /// Why it stopped, if it failed: its later sizes are left out.
    failed: Option<String>,
    _dir: Option<tempfile::TempDir>,
    _server: Option<Server>,
}

impl Subject {
    #[cfg(feature = "rocksdb")]
    fn embedded() -> Self {
        let dir = temp_dir();
        let path = dir.path().join("store");
        Self::new(
            "rocksdb",
            Store::open(&path).unwrap(),
            Some(path),
            None,
            Some(dir),
            None,
        )
    }

    fn served(name: &'static str, server: Server) -> Self {
        let store = remote(&server.url).unwrap();
        let url = Some(server.url.clone());
        Self::new(name, store, None, url, None, Some(server))
    }

    fn new(
        name: &'static str,
        store: Store,
        path: Option<PathBuf>,
        url: Option<String>,
        dir: Option<tempfile::TempDir>,
        server: Option<Server>,
    ) -> Self {
        Self {
            name,
            path,
            url,
            store: Some(store),
            chunk: BATCH,
            ids: Vec::new(),
            used: HashSet::new(),
            first_batch: None,
            failed: None,
            _dir: dir,
            _server: server,
        }
    }

    fn store(&self) -> &Store {
        self.store.as_ref().expect("the store is open")
    }

    /// A second handle on the store, as a new process would have: for a server a new
    /// `Store::remote` beside this one; the embedded store cannot be opened twice, so it
    /// is closed and opened again, and the new handle replaces the old.
    fn new_handle(&mut self) -> forktrail::Result<Option<Store>> {
        match (&self.path, &self.url) {
            (Some(path), _) => {
                drop(self.store.take());
                self.store = Some(Store::open(path)?);
                Ok(None)
            }
            (None, Some(url)) => Ok(Some(remote(url)?)),
            (None, None) => unreachable!("a store is on disk or on a server"),
        }
    }

    /// `n` sessions never sampled before, spread over the store, away from the last
    /// batch (the first page lists some of those: they share one moment of activity).
    fn fresh(&mut self, n: usize, salt: u64) -> Vec<SessionId> {
        let len = self.ids.len();
        let span = if len > 2 * BATCH { len - BATCH } else { len };
        let mut rng = Rng::seeded(self.ids.len() as u64, salt);
        let mut out = Vec::with_capacity(n);
        while out.len() < n && self.used.len() < span {
            let k = rng.below(span);
            if self.used.insert(k) {
                out.push(self.ids[k].clone());
            }
        }
        out
    }
}

/// One figure: a time, and on a remote store the requests it took.
#[derive(Clone, Copy, Debug)]
struct Figure {
    ms: f64,
    requests: Option<f64>,
}

/// A store's figures at one size, by operation; an operation that failed holds its
/// error.
type Column = BTreeMap<&'static str, Result<Figure, String>>;

/// The rows of the table, in order: key and what it measures.
const ROWS: [(&str, &str); 11] = [
    (
        "import_first",
        "import 1,000 sessions, the first (0 stored, no copies)",
    ),
    (
        "import_last",
        "import 1,000 sessions, the last to this size",
    ),
    ("first_read", "first read of a new process (first page)"),
    ("page_first", "first page (50, by activity)"),
    ("page_late", "late page (50, half way in)"),
    ("search_rare", "search, rare word (50 hits)"),
    ("search_common", "search, common word (50 hits)"),
    ("replay_cold", "cold replay, 10 turns (never read)"),
    ("replay_warm", "warm replay, the same sessions"),
    ("fork", "fork (10 sessions)"),
    ("append", "append (20 turns)"),
];

/// The median of the given figures; requests averaged.
fn median(mut figures: Vec<Figure>) -> Figure {
    figures.sort_by(|a, b| a.ms.total_cmp(&b.ms));
    let requests = figures
        .iter()
        .map(|f| f.requests)
        .sum::<Option<f64>>()
        .map(|r| r / figures.len() as f64);
    Figure {
        ms: figures[figures.len() / 2].ms,
        requests,
    }
}

/// `f` once on `store`, timed, with the requests it sent.
fn once<T>(
    store: &Store,
    f: impl FnOnce() -> forktrail::Result<T>,
) -> forktrail::Result<(Figure, T)> {
    let before = store.remote_requests();
    let start = Instant::now();
    let out = std::hint::black_box(f()?);
    let ms = start.elapsed().as_secs_f64() * 1e3;
    let requests = store
        .remote_requests()
        .zip(before)
        .map(|(a, b)| (a - b) as f64);
    Ok((Figure { ms, requests }, out))
}

/// The median of [`ROUNDS`] timings of `f`, after one untimed call (which may follow
/// the change feed, or rebuild a catalog a long pause made stale).
fn steady<T>(store: &Store, mut f: impl FnMut() -> forktrail::Result<T>) -> Result<Figure, String> {
    let mut rounds = || -> forktrail::Result<Vec<Figure>> {
        f()?;
        (0..ROUNDS).map(|_| Ok(once(store, &mut f)?.0)).collect()
    };
    rounds().map(median).map_err(|e| e.to_string())
}

/// Grows the subject to `target` sessions, a batch at a time; the figure of the last
/// batch, per 1,000 sessions.
fn grow(subject: &mut Subject, work: &Workload, target: usize) -> Result<Option<Figure>, String> {
    let mut last = None;
    while subject.ids.len() < target {
        let from = subject.ids.len();
        // A batch never spans a multiple of BATCH: a copy's source is stored before it.
        let to = target.min((from / BATCH + 1) * BATCH);
        let figure = import(subject, work, from, to)?;
        let scale = BATCH as f64 / (to - from) as f64;
        let figure = Figure {
            ms: figure.ms * scale,
            requests: figure.requests.map(|r| r * scale),
        };
        eprintln!(
            "  {}: {to} sessions, the last {} in {:.0} ms{}",
            subject.name,
            to - from,
            figure.ms / scale,
            figure
                .requests
                .map_or(String::new(), |r| format!(", {:.0} requests", r / scale))
        );
        if from == 0 {
            subject.first_batch = Some(figure);
        }
        last = Some(figure);
    }
    Ok(last)
}

/// Imports sessions `from..to`, [`Subject::chunk`] at a time, and checks that every
/// copy among them went in as a fork; the time and requests of them all.
fn import(
    subject: &mut Subject,
    work: &Workload,
    from: usize,
    to: usize,
) -> Result<Figure, String> {
    let (mut ms, mut requests, mut shared) = (0.0, None, 0);
    for start in (from..to).step_by(subject.chunk) {
        let end = to.min(start + subject.chunk);
        let sessions: Vec<_> = (start..end).map(|n| work.session(n)).collect();
        let store = subject.store();
        let (figure, report) = once(store, || {
            store.import_sessions_with(sessions, &TranscriptOptions::default())
        })
        .map_err(|e| format!("import of sessions {start}..{end}: {e}"))?;
        ms += figure.ms;
        requests = figure.requests.map(|r| r + requests.unwrap_or(0.0));
        shared += report.shared.len();
        subject.ids.extend(report.sessions);
    }
    let copies = (from..to).filter(|&n| work.is_copy(n)).count();
    if shared != copies {
        eprintln!(
            "  note: {}: {shared} of the {copies} copies in sessions {from}..{to} went in as forks",
            subject.name
        );
    }
    Ok(Figure { ms, requests })
}

/// A cursor `depth` sessions into the default order, reached by pages of 1,000.
fn late_cursor(store: &Store, depth: usize) -> forktrail::Result<Option<String>> {
    let mut cursor = None;
    let mut seen = 0;
    while seen < depth {
        let page = store.sessions(&SessionQuery {
            limit: Some(depth.saturating_sub(seen).min(1000)),
            cursor: cursor.clone(),
            ..Default::default()
        })?;
        seen += page.sessions.len();
        cursor = page.next;
        if cursor.is_none() {
            break;
        }
    }
    Ok(cursor)
}

/// Pages and searches, on the handle that grew the store.
fn reads(store: &Store, sessions: usize, column: &mut Column) {
    let page = |cursor: Option<String>| {
        let query = SessionQuery {
            limit: Some(50),
            cursor,
            ..Default::default()
        };
        move || store.sessions(&query)
    };
    column.insert("page_first", steady(store, page(None)));
    let late = late_cursor(store, sessions / 2).map_err(|e| e.to_string());
    column.insert(
        "page_late",
        late.and_then(|cursor| steady(store, page(cursor))),
    );
    for (key, text) in [("search_rare", RARE), ("search_common", VOCABULARY[0])] {
        let query = SearchQuery {
            text: text.to_string(),
            limit: Some(50),
            ..Default::default()
        };
        column.insert(key, steady(store, || store.search(&query)));
    }
}

/// The first read of a new handle, then cold and warm replays on it.
fn new_process(subject: &mut Subject, column: &mut Column) {
    let second = match subject.new_handle() {
        Ok(second) => second,
        Err(e) => {
            column.insert("first_read", Err(e.to_string()));
            return;
        }
    };
    let picked = subject.fresh(REPLAYS, 7);
    let store = second.as_ref().unwrap_or_else(|| subject.store());
    let query = SessionQuery {
        limit: Some(50),
        ..Default::default()
    };
    let first = once(store, || store.sessions(&query)).map(|(f, _)| f);
    column.insert("first_read", first.map_err(|e| e.to_string()));
    if picked.is_empty() {
        column.insert("replay_cold", Err("no session left to replay".into()));
        return;
    }
    for (key, what) in [("replay_cold", "cold"), ("replay_warm", "warm")] {
        let figures: forktrail::Result<Vec<Figure>> = picked
            .iter()
            .map(|id| {
                let (figure, records) = once(store, || store.replay(id, None))?;
                assert_eq!(records.len(), TURNS, "{what} replay of {id}");
                Ok(figure)
            })
            .collect();
        column.insert(key, figures.map(median).map_err(|e| e.to_string()));
    }
}

/// Forks of sessions never used before, and appends to one.
fn writes(subject: &mut Subject, column: &mut Column) {
    let parents = subject.fresh(FORKS, 11);
    if parents.is_empty() {
        column.insert("fork", Err("no session left to fork".into()));
        return;
    }
    let store = subject.store();
    let forks: forktrail::Result<Vec<Figure>> = parents
        .iter()
        .map(|p| Ok(once(store, || store.fork(p, ForkOptions::default()))?.0))
        .collect();
    column.insert("fork", forks.map(median).map_err(|e| e.to_string()));
    let Some(target) = subject.fresh(1, 13).pop() else {
        column.insert("append", Err("no session left to append to".into()));
        return;
    };
    let store = subject.store();
    let appends: forktrail::Result<Vec<Figure>> = (0..APPENDS)
        .map(|i| {
            let text = turn(usize::MAX - i, 0).content;
            let turn = NewTurn::new(Role::User, text);
            Ok(once(store, || store.append(&target, turn))?.0)
        })
        .collect();
    column.insert("append", appends.map(median).map_err(|e| e.to_string()));
}

/// Grows the subject to `size` and measures it there.
fn stage(subject: &mut Subject, work: &Workload, size: usize) -> Option<Column> {
    if subject.failed.is_some() {
        return None;
    }
    eprintln!("== {} to {size} sessions", subject.name);
    let started = Instant::now();
    let last = match grow(subject, work, size) {
        Ok(last) => last,
        Err(e) => {
            let e = first_line(&e);
            eprintln!("  note: {} stops here: {e}", subject.name);
            subject.failed = Some(e);
            return None;
        }
    };
    eprintln!(
        "  grown in {:.1} s; measuring",
        started.elapsed().as_secs_f64()
    );
    let mut column = Column::new();
    if let Some(first) = subject.first_batch {
        column.insert("import_first", Ok(first));
    }
    if let Some(last) = last {
        column.insert("import_last", Ok(last));
    }
    reads(subject.store(), subject.ids.len(), &mut column);
    new_process(subject, &mut column);
    writes(subject, &mut column);
    for (key, figure) in &column {
        if let Err(e) = figure {
            eprintln!(
                "  note: {} {key} failed at {size}: {}",
                subject.name,
                first_line(e)
            );
        }
    }
    Some(column)
}

/// An error's first line, at most 300 bytes: a store's error may quote a whole update.
fn first_line(error: &str) -> String {
    let line = error.lines().next().unwrap_or_default();
    let mut end = line.len().min(300);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line[..end].to_string()
}

/// The sizes to measure at: `$FORKTRAIL_BENCH_SIZES`, or 3k, 10k and 30k.
fn sizes() -> Vec<usize> {
    let mut sizes: Vec<usize> = std::env::var("FORKTRAIL_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![3_000, 10_000, 30_000]);
    sizes.sort_unstable();
    sizes.dedup();
    sizes.retain(|&n| n > 0);
    sizes
}

/// The stores of this run: RocksDB, an Oxigraph server, Virtuoso if it starts.
fn subjects() -> Vec<Subject> {
    let mut out = Vec::new();
    #[cfg(feature = "rocksdb")]
    out.push(Subject::embedded());
    match start_oxigraph() {
        Ok(server) => out.push(Subject::served("oxigraph-server", server)),
        Err(e) => eprintln!("note: no Oxigraph server ({e}; `make deps` installs it): left out"),
    }
    match start_virtuoso() {
        Ok(Some(server)) => out.push(Subject {
            chunk: VIRTUOSO_CHUNK,
            ..Subject::served("virtuoso", server)
        }),
        Ok(None) => eprintln!(
            "note: no virtuoso-t (FORKTRAIL_VIRTUOSO, or `make virtuoso`): Virtuoso left out"
        ),
        Err(e) => eprintln!("note: Virtuoso did not start ({e}): left out"),
    }
    out
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        // `cargo test --benches` builds it; the run is `make bench-scale-remote`.
        return;
    }
    let sizes = sizes();
    let work = Workload::new(sizes.last().copied().unwrap_or(0));
    let mut subjects = subjects();
    // Every store reaches a size before any goes on to the next: the servers idle
    // meanwhile, and no store is measured while another grows.
    let mut columns: Vec<(String, String, Column)> = Vec::new();
    for &size in &sizes {
        for subject in &mut subjects {
            if let Some(column) = stage(subject, &work, size) {
                columns.push((subject.name.to_string(), size.to_string(), column));
            }
        }
    }
    // Store by store, sizes left to right: a flat row is a store that stays flat.
    let order: Vec<&str> = subjects.iter().map(|s| s.name).collect();
    columns.sort_by_key(|(name, size, _)| {
        let rank = order.iter().position(|n| n == name);
        (rank, size.parse::<usize>().unwrap_or(0))
    });
    for subject in &subjects {
        if let Some(e) = &subject.failed {
            eprintln!("note: {} stopped early: {e}", subject.name);
        }
    }
    drop(subjects);
    if std::env::var_os("FORKTRAIL_BENCH_JSON").is_some() {
        print_json(&columns);
    } else {
        print_table(&columns);
    }
}

/// One JSON object: `{store}@{size}.{operation}_ms` and `…_requests`, as
/// benches/remote.rs names its figures.
fn print_json(columns: &[(String, String, Column)]) {
    let mut json = BTreeMap::new();
    for (name, size, column) in columns {
        for (key, figure) in column {
            let at = format!("{name}@{size}.{key}");
            match figure {
                Ok(f) => {
                    json.insert(format!("{at}_ms"), json!(f.ms));
                    if let Some(r) = f.requests {
                        json.insert(format!("{at}_requests"), json!(r));
                    }
                }
                Err(e) => {
                    json.insert(format!("{at}_error"), Value::String(e.clone()));
                }
            }
        }
    }
    println!("{}", serde_json::to_string_pretty(&json).unwrap());
}

/// Milliseconds with one to three decimals, as many as a small figure needs.
fn ms(ms: f64) -> String {
    match ms {
        m if m < 1.0 => format!("{m:.3}"),
        m if m < 10.0 => format!("{m:.2}"),
        m => format!("{m:.1}"),
    }
}

/// One row per operation, one column per store and size: milliseconds, and on a
/// remote store the requests an operation took.
fn print_table(columns: &[(String, String, Column)]) {
    let cell = |figure: Option<&Result<Figure, String>>| match figure {
        Some(Ok(f)) => match f.requests {
            Some(r) => format!("{} ms, {r:.0} req", ms(f.ms)),
            None => format!("{} ms", ms(f.ms)),
        },
        Some(Err(_)) => "failed".to_string(),
        None => String::new(),
    };
    let mut rows: Vec<Vec<String>> = vec![std::iter::once("operation".to_string())
        .chain(
            columns
                .iter()
                .map(|(name, size, _)| format!("{name}@{size}")),
        )
        .collect()];
    for (key, what) in ROWS {
        let mut row = vec![what.to_string()];
        for (i, (name, _, column)) in columns.iter().enumerate() {
            // The first batch once per store, in its first column.
            let first_of_store = i == 0 || columns[i - 1].0 != *name;
            let shown = key != "import_first" || first_of_store;
            row.push(if shown {
                cell(column.get(key))
            } else {
                String::new()
            });
        }
        rows.push(row);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (text, &w))| match c {
                0 => format!("{text:<w$}"),
                _ => format!("{text:>w$}"),
            })
            .collect();
        println!("| {} |", cells.join(" | "));
        if i == 0 {
            let rule: Vec<String> = widths
                .iter()
                .enumerate()
                .map(|(c, &w)| match c {
                    0 => "-".repeat(w),
                    _ => format!("{}:", "-".repeat(w - 1)),
                })
                .collect();
            println!("| {} |", rule.join(" | "));
        }
    }
}
