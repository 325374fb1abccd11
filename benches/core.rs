//! Core figures, each on the in-memory store and (with the `rocksdb` feature) on RocksDB
//! in a temp dir: fork cost against history size, replay of fork chains against a JSONL
//! floor, and append throughput. Medians over repeats; ratios come from the same run.
//!
//! `cargo bench --bench core` prints a table; `FORKTRAIL_BENCH_JSON=1` prints one JSON
//! object of named figures instead. `FORKTRAIL_BENCH_QUICK=1` uses smaller sizes.
//! Contents are generated from a fixed seed, so runs are reproducible offline.

use forktrail::{ForkOptions, NewSession, NewTurn, ReplayRecord, Role, SessionId, Store};
use oxigraph::model::{NamedNode, Quad};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Deterministic 500-byte contents (xorshift, fixed seed).
struct Contents(u64);

impl Contents {
    fn next(&mut self) -> String {
        const WORDS: [&str; 8] = [
            "fork", "turn", "agent", "replay", "model", "tool", "graph", "audit",
        ];
        let mut out = String::with_capacity(512);
        while out.len() < 500 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            out.push_str(WORDS[(self.0 % 8) as usize]);
            out.push(' ');
        }
        out.truncate(500);
        out
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<T>(repeats: usize, mut f: impl FnMut() -> T) -> Duration {
    median(
        (0..repeats)
            .map(|_| {
                let start = Instant::now();
                std::hint::black_box(f());
                start.elapsed()
            })
            .collect(),
    )
}

fn session(store: &Store, turns: usize, seed: u64) -> SessionId {
    let id = store.create_session(NewSession::default()).unwrap();
    let mut contents = Contents(seed);
    for i in 0..turns {
        let role = if i.is_multiple_of(2) {
            Role::User
        } else {
            Role::Assistant
        };
        store
            .append(&id, NewTurn::new(role, contents.next()))
            .unwrap();
    }
    id
}

/// A chain of `depth` forks over a root of `turns` turns; each fork adds 2 turns.
fn chain(store: &Store, turns: usize, depth: usize) -> SessionId {
    let mut leaf = session(store, turns, 7);
    let mut contents = Contents(11);
    for _ in 0..depth {
        let plan = store.fork(&leaf, ForkOptions::default()).unwrap();
        leaf = plan.session.parse().unwrap();
        for role in [Role::User, Role::Assistant] {
            store
                .append(&leaf, NewTurn::new(role, contents.next()))
                .unwrap();
        }
    }
    leaf
}

/// The baseline forktrail avoids: a fork that copies its parent's turns into the child,
/// the way log-backed tools fork. Written straight into the store, in one transaction.
fn copy_fork(store: &Store, parent: &SessionId) -> usize {
    let child = store.create_session(NewSession::default()).unwrap();
    let (from, to) = (store.session_iri(parent), store.session_iri(&child));
    let prefix = format!("{}/turn/", from.as_str());
    let ox = store.oxigraph();
    let mut tx = ox.start_transaction().unwrap();
    let mut copied = 0;
    for quad in ox.quads_for_pattern(None, None, None, Some(from.as_ref().into())) {
        let quad = quad.unwrap();
        let subject = quad.subject.to_string();
        let Some(rest) = subject.trim_matches(['<', '>']).strip_prefix(&prefix) else {
            continue;
        };
        let renamed = NamedNode::new(format!("{}/turn/{rest}", to.as_str())).unwrap();
        tx.insert(&Quad::new(renamed, quad.predicate, quad.object, to.clone()));
        copied += 1;
    }
    tx.commit().unwrap();
    copied
}

fn jsonl_floor(records: &[ReplayRecord]) -> Duration {
    let mut buf = Vec::new();
    for r in records {
        serde_json::to_writer(&mut buf, r).unwrap();
        buf.push(b'\n');
    }
    time(7, || {
        buf.split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice::<ReplayRecord>(l).unwrap())
            .collect::<Vec<_>>()
    })
}

fn run(kind: &str, store: &Store, quick: bool, figures: &mut BTreeMap<String, f64>) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let sizes: &[usize] = if quick {
        &[500, 5_000]
    } else {
        &[500, 5_000, 50_000]
    };
    let mut fork_times = Vec::new();
    for &n in sizes {
        let parent = session(store, n, n as u64);
        let before = store.len().unwrap();
        let t = time(15, || store.fork(&parent, ForkOptions::default()).unwrap());
        let quads = (store.len().unwrap() - before) / 15;
        if n == 5_000 {
            let copy = time(3, || copy_fork(store, &parent));
            figures.insert(format!("{kind}.copy_fork_5000_ms"), ms(copy));
            figures.insert(
                format!("{kind}.copy_over_share_5k"),
                copy.as_secs_f64() / t.as_secs_f64(),
            );
        }
        figures.insert(format!("{kind}.fork_{n}_us"), t.as_secs_f64() * 1e6);
        figures.insert(format!("{kind}.fork_{n}_quads"), quads as f64);
        fork_times.push(t);
    }
    let last = *sizes.last().unwrap();
    figures.insert(
        format!("{kind}.fork_ratio_{}k_over_500", last / 1000),
        fork_times.last().unwrap().as_secs_f64() / fork_times[0].as_secs_f64(),
    );
    let root_turns = if quick { 1_000 } else { 5_000 };
    for depth in [1, 8, 32] {
        let leaf = chain(store, root_turns, depth);
        let records = store.replay(&leaf, None).unwrap();
        let hot = time(5, || store.replay(&leaf, None).unwrap());
        let sparql = time(3, || store.replay_sparql(&leaf, None).unwrap());
        let floor = jsonl_floor(&records);
        figures.insert(format!("{kind}.replay_depth{depth}_ms"), ms(hot));
        figures.insert(format!("{kind}.replay_sparql_depth{depth}_ms"), ms(sparql));
        figures.insert(format!("{kind}.jsonl_read_depth{depth}_ms"), ms(floor));
        figures.insert(
            format!("{kind}.replay_depth{depth}_over_jsonl"),
            hot.as_secs_f64() / floor.as_secs_f64(),
        );
    }
    let forks = if quick { 1_000 } else { 10_000 };
    let parent = session(store, 4, 5);
    for _ in 0..forks {
        store.fork(&parent, ForkOptions::default()).unwrap();
    }
    let listed = time(5, || store.branches(&parent).unwrap());
    figures.insert(format!("{kind}.branches_{forks}_ms"), ms(listed));
    let n = if quick { 2_000 } else { 10_000 };
    let id = store.create_session(NewSession::default()).unwrap();
    let mut contents = Contents(3);
    let turns: Vec<String> = (0..n).map(|_| contents.next()).collect();
    let start = Instant::now();
    for c in turns {
        store.append(&id, NewTurn::new(Role::User, c)).unwrap();
    }
    figures.insert(
        format!("{kind}.append_turns_per_s"),
        n as f64 / start.elapsed().as_secs_f64(),
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: then run quick.
    let quick = std::env::var_os("FORKTRAIL_BENCH_QUICK").is_some()
        || !std::env::args().any(|a| a == "--bench");
    let mut figures = BTreeMap::new();
    run("memory", &Store::in_memory().unwrap(), quick, &mut figures);
    #[cfg(feature = "rocksdb")]
    {
        let dir = tempfile::tempdir().unwrap();
        // Bytes on disk per turn: a fresh store, N turns, flushed.
        let disk = tempfile::tempdir().unwrap();
        let path = disk.path().join("store");
        let turns = if quick { 2_000 } else { 10_000 };
        let store = Store::open(&path).unwrap();
        session(&store, turns, 13);
        store.flush().unwrap();
        figures.insert(
            "rocksdb.bytes_on_disk_per_turn".into(),
            store.disk_bytes().unwrap_or(0) as f64 / turns as f64,
        );
        drop(store);
        run(
            "rocksdb",
            &Store::open(dir.path().join("store")).unwrap(),
            quick,
            &mut figures,
        );
    }
    if std::env::var_os("FORKTRAIL_BENCH_JSON").is_some() {
        println!("{}", serde_json::to_string_pretty(&figures).unwrap());
    } else {
        for (name, value) in &figures {
            println!("{name:<40} {value:>14.3}");
        }
    }
}
