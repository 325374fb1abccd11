//! Shared setup: stores of every kind, small builders, and the "changes nothing" check.
#![allow(dead_code)]

pub mod stub;

use forktrail::{Error, ForkOptions, NewSession, NewTurn, RemoteConfig, Role, SessionId, Store};
use oxigraph::sparql::QueryResults;

/// A store under test, with what keeps it alive: the temp dir of an on-disk one, the
/// server process of a remote one.
pub struct TestStore {
    pub store: Store,
    pub kind: &'static str,
    _dir: Option<tempfile::TempDir>,
    _server: Option<OxigraphServer>,
}

impl std::ops::Deref for TestStore {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.store
    }
}

/// One in-memory store, with the `rocksdb` feature one on-disk store, and one remote
/// store on a real Oxigraph server (see [`OxigraphServer::start`]).
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
    out
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
        _server: Some(server),
    })
}

/// An Oxigraph server (`pip install oxigraph`) in memory on 127.0.0.1 and a free
/// port, with the union default graph forktrail needs; killed when dropped.
pub struct OxigraphServer {
    child: std::process::Child,
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
            let mut server = Self { child, port };
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while std::time::Instant::now() < deadline {
                if matches!(server.child.try_wait(), Ok(Some(_))) {
                    break; // the port was taken meanwhile: try another
                }
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Some(server);
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            let _ = server.child.kill();
        }
        panic!("{binary} serve did not start listening");
    }

    pub fn query_url(&self) -> String {
        format!("http://127.0.0.1:{}/query", self.port)
    }
}

impl Drop for OxigraphServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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

/// Removes a session's graph behind forktrail's back.
pub fn drop_behind(store: &Store, id: &SessionId) {
    store
        .update(&format!("DROP GRAPH {}", store.session_iri(id)), None)
        .unwrap();
}
