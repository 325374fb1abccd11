//! The engine on a remote SPARQL store next to the embedded ones, in one run: fork,
//! cold and warm (cached) replay at fork depth 32, and append, each with the HTTP
//! requests it took.
//!
//! The remote store is a real Oxigraph server (`pip install oxigraph`), in memory on
//! 127.0.0.1: `$FORKTRAIL_OXIGRAPH`, else `oxigraph` on the PATH. Run with
//! `cargo bench --bench remote`; `FORKTRAIL_BENCH_JSON=1` prints one JSON object.

use forktrail::{ForkOptions, NewSession, NewTurn, RemoteConfig, Role, SessionId, Store};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const FORKS: usize = 30;
const REPLAYS: usize = 20;
const APPENDS: usize = 300;

/// 500 bytes of text that differ per turn.
fn content(i: usize) -> String {
    let mut out = format!("turn {i}: ");
    while out.len() < 500 {
        out.push_str("the agent forks, replays and audits its graph. ");
    }
    out.truncate(500);
    out
}

fn grow(store: &Store, id: &SessionId, turns: usize) {
    for i in 0..turns {
        let role = if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        store.append(id, NewTurn::new(role, content(i))).unwrap();
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// What one store did: per operation, the median time and the requests it took.
struct Figures {
    fork: (Duration, f64),
    replay32: (Duration, f64),
    warm32: (Duration, f64),
    append: (Duration, f64),
}

fn requests(store: &Store) -> u64 {
    store.remote_requests().unwrap_or(0)
}

fn measure(store: &Store) -> Figures {
    // Fork a 1,000-turn session at its end, FORKS times.
    let big = store.create_session(NewSession::default()).unwrap();
    grow(store, &big, 1_000);
    let before = requests(store);
    let forks: Vec<Duration> = (0..FORKS)
        .map(|_| {
            let start = Instant::now();
            store.fork(&big, ForkOptions::default()).unwrap();
            start.elapsed()
        })
        .collect();
    let fork_requests = (requests(store) - before) as f64 / FORKS as f64;

    // A chain of 32 forks over a 100-turn root, each fork adding 2 turns.
    let mut leaf = store.create_session(NewSession::default()).unwrap();
    grow(store, &leaf, 100);
    for _ in 0..32 {
        leaf = store
            .fork(&leaf, ForkOptions::default())
            .unwrap()
            .session
            .parse()
            .unwrap();
        grow(store, &leaf, 2);
    }
    let before = requests(store);
    let replays: Vec<Duration> = (0..REPLAYS)
        .map(|_| {
            store.clear_caches();
            let start = Instant::now();
            let records = store.replay(&leaf, None).unwrap();
            let took = start.elapsed();
            assert_eq!(records.len(), 164);
            took
        })
        .collect();
    let replay_requests = (requests(store) - before) as f64 / REPLAYS as f64;
    // The same replay with the turns cached (on a remote store: checked by digest).
    let before = requests(store);
    let warm: Vec<Duration> = (0..REPLAYS)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(store.replay(&leaf, None).unwrap());
            start.elapsed()
        })
        .collect();
    let warm_requests = (requests(store) - before) as f64 / REPLAYS as f64;

    // APPENDS appends to one session.
    let id = store.create_session(NewSession::default()).unwrap();
    let before = requests(store);
    let appends: Vec<Duration> = (0..APPENDS)
        .map(|i| {
            let start = Instant::now();
            store
                .append(&id, NewTurn::new(Role::User, content(i)))
                .unwrap();
            start.elapsed()
        })
        .collect();
    let append_requests = (requests(store) - before) as f64 / APPENDS as f64;
    Figures {
        fork: (median(forks), fork_requests),
        replay32: (median(replays), replay_requests),
        warm32: (median(warm), warm_requests),
        append: (median(appends), append_requests),
    }
}

/// An in-memory Oxigraph server on a free port, killed when dropped.
struct Server(std::process::Child, String);

impl Server {
    fn start() -> Self {
        let binary = std::env::var("FORKTRAIL_OXIGRAPH").unwrap_or_else(|_| "oxigraph".into());
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new(&binary)
            .args(["serve", "--union-default-graph", "--bind"])
            .arg(format!("127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {binary} (pip install oxigraph): {e}"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "{binary} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self(child, format!("http://127.0.0.1:{port}/query"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() {
    let mut results: Vec<(&str, Figures)> = vec![("memory", measure(&Store::in_memory().unwrap()))];
    #[cfg(feature = "rocksdb")]
    {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("store")).unwrap();
        results.push(("rocksdb", measure(&store)));
    }
    let server = Server::start();
    let remote = Store::remote(RemoteConfig::new(server.1.clone())).unwrap();
    results.push(("oxigraph-server", measure(&remote)));
    drop(server);

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    if std::env::var_os("FORKTRAIL_BENCH_JSON").is_some() {
        let mut json = BTreeMap::new();
        for (kind, f) in &results {
            for (op, (took, reqs)) in [
                ("fork", f.fork),
                ("cold_replay_depth32", f.replay32),
                ("warm_replay_depth32", f.warm32),
                ("append", f.append),
            ] {
                json.insert(format!("{kind}.{op}_ms"), ms(took));
                json.insert(format!("{kind}.{op}_requests"), reqs);
            }
        }
        println!("{}", serde_json::to_string_pretty(&json).unwrap());
        return;
    }
    println!(
        "{:<18} {:>22} {:>24} {:>24} {:>22}",
        "store", "fork (1,000 turns)", "cold replay, depth 32", "warm replay, depth 32", "append"
    );
    for (kind, f) in &results {
        let cell = |(took, reqs): (Duration, f64)| format!("{:.3} ms, {reqs:.0} req", ms(took));
        println!(
            "{kind:<18} {:>22} {:>24} {:>24} {:>22}",
            cell(f.fork),
            cell(f.replay32),
            cell(f.warm32),
            cell(f.append)
        );
    }
    let base = &results[0].1;
    let remote = &results.last().unwrap().1;
    println!(
        "remote / memory: fork {:.1}x, cold replay {:.1}x, append {:.1}x",
        ms(remote.fork.0) / ms(base.fork.0),
        ms(remote.replay32.0) / ms(base.replay32.0),
        ms(remote.append.0) / ms(base.append.0)
    );
    println!(
        "remote warm / remote cold replay: {:.2} (the digest check against reading the turns)",
        ms(remote.warm32.0) / ms(remote.replay32.0)
    );
}
