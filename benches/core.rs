//! Core figures, each on the in-memory store and (with the `rocksdb` feature) on RocksDB
//! in a temp dir: fork cost against history size, replay of fork chains against a JSONL
//! floor, and append throughput. Medians over repeats; ratios come from the same run.
//!
//! `cargo bench --bench core` prints a table; `FORKTRAIL_BENCH_JSON=1` prints one JSON
//! object of named figures instead. `FORKTRAIL_BENCH_QUICK=1` uses smaller sizes;
//! `FORKTRAIL_BENCH_STORE=memory` (or `rocksdb`) runs one store only.
//! Contents are generated from a fixed seed, so runs are reproducible offline.

use forktrail::{ForkOptions, NewSession, NewTurn, ReplayRecord, Role, SessionId, Store};
use oxigraph::model::{NamedNode, Quad};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

mod common;
use common::turn_quads;
#[cfg(feature = "rocksdb")]
use common::TURN_PREDICATES;

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

/// Appends `n` turns to a new session, one transaction each; turns per second.
fn append_rate(store: &Store, n: usize, seed: u64) -> f64 {
    let id = store.create_session(NewSession::default()).unwrap();
    let mut contents = Contents(seed);
    let turns: Vec<String> = (0..n).map(|_| contents.next()).collect();
    let start = Instant::now();
    for c in turns {
        store.append(&id, NewTurn::new(Role::User, c)).unwrap();
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// What Oxigraph itself sustains for the same write: a turn's 7 quads, one atomic
/// write batch each, with nothing read first, from `threads` threads at once. The
/// ceiling for `append_rate` and `concurrent_appends`.
fn oxigraph_floor(store: &Store, n: usize, threads: usize) -> f64 {
    let start = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..threads {
            scope.spawn(move || oxigraph_writes(store, n / threads, t, None));
        }
    });
    n as f64 / start.elapsed().as_secs_f64()
}

/// Writes `n` turns' quads straight into Oxigraph, one write batch each, leaving out the
/// quad with predicate `TURN_PREDICATES[omit]` if given.
fn oxigraph_writes(store: &Store, n: usize, thread: usize, omit: Option<usize>) {
    let g = NamedNode::new(format!("urn:forktrail:session:floor{thread}")).unwrap();
    let mut contents = Contents(5 + thread as u64);
    let turns: Vec<String> = (0..n).map(|_| contents.next()).collect();
    let ox = store.oxigraph();
    for (i, c) in turns.into_iter().enumerate() {
        // One write batch, as forktrail commits a change that only inserts.
        ox.extend(turn_quads(&g, i, c, omit)).unwrap();
    }
}

/// `writers` threads, each appending `per_writer` turns to its own session (one append
/// per call, as agents do) on a fresh store: turns per second over all of them, and the
/// median and 99th percentile of one append's latency.
fn concurrent_appends(
    store: &Store,
    writers: usize,
    per_writer: usize,
) -> (f64, Duration, Duration) {
    let sessions: Vec<SessionId> = (0..writers)
        .map(|_| store.create_session(NewSession::default()).unwrap())
        .collect();
    let start = Instant::now();
    let mut latencies: Vec<Duration> = std::thread::scope(|scope| {
        let handles: Vec<_> = sessions
            .iter()
            .enumerate()
            .map(|(n, id)| {
                scope.spawn(move || {
                    let mut contents = Contents(100 + n as u64);
                    let turns: Vec<String> = (0..per_writer).map(|_| contents.next()).collect();
                    turns
                        .into_iter()
                        .map(|c| {
                            let t = Instant::now();
                            store.append(id, NewTurn::new(Role::User, c)).unwrap();
                            t.elapsed()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let rate = (writers * per_writer) as f64 / start.elapsed().as_secs_f64();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    (rate, at(0.5), at(0.99))
}

/// A store of one kind, and the temp dir that holds it if it is on disk.
type Fresh = fn() -> (Store, Option<tempfile::TempDir>);

fn run(kind: &str, fresh: Fresh, quick: bool, figures: &mut BTreeMap<String, f64>) {
    let (store, _dir) = fresh();
    let store = &store;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut put = |name: String, value: f64| {
        figures.insert(format!("{kind}.{name}"), value);
    };

    // 1. Fork cost against history: all parents exist before any fork is timed, and
    // forks of the sizes alternate, so every size sees the same store.
    let sizes: &[usize] = if quick {
        &[500, 5_000]
    } else {
        &[500, 5_000, 50_000]
    };
    let parents: Vec<SessionId> = sizes.iter().map(|&n| session(store, n, n as u64)).collect();
    // Quads written by one fork of each parent (counted apart: `len` scans the store).
    let quads: Vec<usize> = parents
        .iter()
        .map(|parent| {
            let before = store.len().unwrap();
            store.fork(parent, ForkOptions::default()).unwrap();
            store.len().unwrap() - before
        })
        .collect();
    let rounds = 21;
    let mut times = vec![Vec::new(); sizes.len()];
    for _ in 0..rounds {
        for (i, parent) in parents.iter().enumerate() {
            let start = Instant::now();
            std::hint::black_box(store.fork(parent, ForkOptions::default()).unwrap());
            times[i].push(start.elapsed());
        }
    }
    let medians: Vec<Duration> = times.into_iter().map(median).collect();
    for (i, &n) in sizes.iter().enumerate() {
        put(format!("fork_{n}_us"), medians[i].as_secs_f64() * 1e6);
        put(format!("fork_{n}_quads"), quads[i] as f64);
    }
    let last = *sizes.last().unwrap();
    put(
        format!("fork_ratio_{}k_over_500", last / 1000),
        medians.last().unwrap().as_secs_f64() / medians[0].as_secs_f64(),
    );
    let copy = time(3, || copy_fork(store, &parents[1]));
    put("copy_fork_5000_ms".into(), ms(copy));
    put(
        "copy_over_share_5k".into(),
        copy.as_secs_f64() / medians[1].as_secs_f64(),
    );

    // 2. Replay of fork chains: cold (the read cache dropped first, as in a freshly
    // opened store) and warm, against reading the same records back from JSONL.
    let root_turns = if quick { 1_000 } else { 5_000 };
    for depth in [1, 8, 32] {
        let leaf = chain(store, root_turns, depth);
        let records = store.replay(&leaf, None).unwrap();
        let cold = time(5, || {
            store.clear_caches();
            store.replay(&leaf, None).unwrap()
        });
        store.replay(&leaf, None).unwrap();
        let warm = time(7, || store.replay(&leaf, None).unwrap());
        let sparql = time(3, || store.replay_sparql(&leaf, None).unwrap());
        let floor = jsonl_floor(&records);
        put(format!("replay_depth{depth}_turns"), records.len() as f64);
        put(format!("replay_depth{depth}_cold_ms"), ms(cold));
        put(format!("replay_depth{depth}_warm_ms"), ms(warm));
        put(format!("replay_sparql_depth{depth}_ms"), ms(sparql));
        put(format!("jsonl_read_depth{depth}_ms"), ms(floor));
        let over = |d: Duration| d.as_secs_f64() / floor.as_secs_f64();
        put(format!("replay_depth{depth}_cold_over_jsonl"), over(cold));
        put(format!("replay_depth{depth}_warm_over_jsonl"), over(warm));
        put(
            format!("replay_sparql_depth{depth}_over_jsonl"),
            over(sparql),
        );
    }

    // 4. Listing the branches of a session with many forks.
    let forks = if quick { 1_000 } else { 10_000 };
    let parent = session(store, 4, 5);
    for _ in 0..forks {
        store.fork(&parent, ForkOptions::default()).unwrap();
    }
    let listed = time(5, || store.branches(&parent).unwrap());
    put(format!("branches_{forks}_ms"), ms(listed));

    // 3. Append throughput, one transaction per turn, and Oxigraph's own ceiling.
    let sizes: &[usize] = if quick { &[2_000] } else { &[10_000, 100_000] };
    for &n in sizes {
        put(
            format!("append_{n}_turns_per_s"),
            append_rate(store, n, n as u64),
        );
    }
    put(
        "oxigraph_7_quad_tx_per_s".into(),
        oxigraph_floor(store, sizes[0], 1),
    );

    // 5. Concurrent appends: 8 writers on their own sessions, on a fresh store, with
    // Oxigraph's own ceiling for 8 threads writing a turn's quads per transaction.
    let per_writer = if quick { 250 } else { 2_500 };
    let (concurrent, _dir) = fresh();
    let (rate, p50, p99) = concurrent_appends(&concurrent, 8, per_writer);
    put("append_8_writers_turns_per_s".into(), rate);
    put("append_8_writers_p50_ms".into(), ms(p50));
    put("append_8_writers_p99_ms".into(), ms(p99));
    put(
        "oxigraph_7_quad_tx_8_threads_per_s".into(),
        oxigraph_floor(&concurrent, 8 * per_writer, 8),
    );
    if kind == "rocksdb" {
        // Each commit synced to disk: what group commit saves most.
        let (synced, _dir) = fresh();
        let synced = synced.with_durability(forktrail::Durability::Sync);
        let (rate, p50, p99) = concurrent_appends(&synced, 8, per_writer / 5);
        put("append_8_writers_synced_turns_per_s".into(), rate);
        put("append_8_writers_synced_p50_ms".into(), ms(p50));
        put("append_8_writers_synced_p99_ms".into(), ms(p99));
    }
}

/// Bytes a RocksDB store takes per turn: N turns appended, flushed, and the store
/// reopened (RocksDB deletes the write-ahead log of flushed data on open).
#[cfg(feature = "rocksdb")]
fn disk_per_turn(turns: usize, figures: &mut BTreeMap<String, f64>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let store = Store::open(&path).unwrap();
    session(&store, turns, 13);
    store.flush().unwrap();
    let with_log = store.disk_bytes().unwrap_or(0);
    drop(store);
    let store = Store::open(&path).unwrap();
    let settled = store.disk_bytes().unwrap_or(0);
    figures.insert(
        "rocksdb.bytes_on_disk_per_turn".into(),
        settled as f64 / turns as f64,
    );
    figures.insert(
        "rocksdb.bytes_on_disk_per_turn_with_log".into(),
        with_log as f64 / turns as f64,
    );
    let index = dir_bytes(&path.join("forktrail-records"));
    figures.insert(
        "rocksdb.record_index_bytes_per_turn".into(),
        index as f64 / turns as f64,
    );
    // What each quad of a turn costs: the same turns written without it, settled.
    let settled_without = |omit: Option<usize>| {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        oxigraph_writes(&store, turns, 0, omit);
        store.flush().unwrap();
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        store.disk_bytes().unwrap_or(0) as f64 / turns as f64
    };
    let all = settled_without(None);
    figures.insert("rocksdb.bytes_per_turn_7_quads_raw".into(), all);
    for (k, name) in TURN_PREDICATES.iter().enumerate() {
        figures.insert(
            format!("rocksdb.bytes_per_turn_saved_without_{name}"),
            all - settled_without(Some(k)),
        );
    }
}

#[cfg(feature = "rocksdb")]
fn dir_bytes(path: &std::path::Path) -> u64 {
    std::fs::read_dir(path)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: then run quick.
    let quick = std::env::var_os("FORKTRAIL_BENCH_QUICK").is_some()
        || !std::env::args().any(|a| a == "--bench");
    let only = std::env::var("FORKTRAIL_BENCH_STORE").ok();
    let wanted = |kind: &str| only.as_deref().is_none_or(|o| o == kind);
    let mut figures = BTreeMap::new();
    if wanted("memory") {
        run(
            "memory",
            || (Store::in_memory().unwrap(), None),
            quick,
            &mut figures,
        );
    }
    #[cfg(feature = "rocksdb")]
    if wanted("rocksdb") {
        disk_per_turn(if quick { 2_000 } else { 10_000 }, &mut figures);
        let on_disk = || {
            let dir = tempfile::tempdir().unwrap();
            (Store::open(dir.path().join("store")).unwrap(), Some(dir))
        };
        run("rocksdb", on_disk, quick, &mut figures);
    }
    if std::env::var_os("FORKTRAIL_BENCH_JSON").is_some() {
        println!("{}", serde_json::to_string_pretty(&figures).unwrap());
    } else {
        for (name, value) in &figures {
            println!("{name:<44} {value:>14.3}");
        }
    }
}
