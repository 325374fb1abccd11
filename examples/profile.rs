//! A workload to run under a profiler, for the figures `benches/core.rs` and
//! `benches/import.rs` report:
//!
//! ```text
//! cargo build --release --example profile
//! perf record -g target/release/examples/profile append rocksdb
//! perf record -g target/release/examples/profile replay memory
//! ```
//!
//! `append` appends 30,000 turns, one transaction each; `writers` has 8 threads append
//! 2,500 turns each to sessions of their own (the group commit); `replay` appends 5,000,
//! forks a chain of 32 levels over them (2 turns each), and replays its leaf 200 times
//! with the read cache dropped before each (cold replays); `import` imports an OpenAI transcript of 100,000 messages.

use forktrail::{NewSession, NewTurn, Role, SessionId, Store};
use std::time::{Duration, Instant};

const WORKLOADS: [&str; 4] = ["append", "writers", "replay", "import"];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (what, kind) = match args.as_slice() {
        [w, k]
            if WORKLOADS.contains(&w.as_str()) && ["memory", "rocksdb"].contains(&k.as_str()) =>
        {
            (w.as_str(), k.as_str())
        }
        _ => {
            eprintln!("usage: profile {} memory|rocksdb", WORKLOADS.join("|"));
            std::process::exit(2);
        }
    };
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = match kind {
        "rocksdb" => Store::open(dir.path().join("store")),
        _ => Store::in_memory(),
    }
    .expect("a store");
    match what {
        "writers" => writers(&store),
        "import" => import(&store),
        _ => append_and_replay(&store, what == "replay"),
    }
}

/// A 500-byte text, different for each `i`.
fn text(i: usize) -> String {
    format!(
        "{}{i}",
        "fork turn agent replay model tool graph audit ".repeat(11)
    )
}

fn new_session(store: &Store) -> SessionId {
    store
        .create_session(NewSession::default())
        .expect("a session")
}

fn append_and_replay(store: &Store, replay: bool) {
    let id = new_session(store);
    let n = if replay { 5_000 } else { 30_000 };
    let start = Instant::now();
    for i in 0..n {
        let role = if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        store
            .append(&id, NewTurn::new(role, text(i)))
            .expect("an append");
    }
    eprintln!(
        "append: {:.0} turns/s",
        n as f64 / start.elapsed().as_secs_f64()
    );
    if replay {
        // A chain of 32 forks over it, 2 own turns each, as `benches/core.rs` replays.
        let mut leaf = id;
        for depth in 0..32 {
            let plan = store
                .fork(&leaf, forktrail::ForkOptions::default())
                .expect("a fork");
            leaf = plan.session.parse().expect("an id");
            for i in 0..2 {
                store
                    .append(&leaf, NewTurn::new(Role::User, text(n + 2 * depth + i)))
                    .expect("an append");
            }
        }
        let start = Instant::now();
        for _ in 0..200 {
            store.clear_caches();
            std::hint::black_box(store.replay(&leaf, None).expect("a replay"));
        }
        eprintln!(
            "cold replay of {n} turns at depth 32: {:?}",
            start.elapsed() / 200
        );
    }
}

fn writers(store: &Store) {
    let (writers, each) = (8, 2_500);
    let ids: Vec<SessionId> = (0..writers).map(|_| new_session(store)).collect();
    let start = Instant::now();
    let mut latencies: Vec<Duration> = std::thread::scope(|scope| {
        let handles: Vec<_> = ids
            .iter()
            .map(|id| {
                scope.spawn(move || {
                    (0..each)
                        .map(|i| {
                            let t = Instant::now();
                            store
                                .append(id, NewTurn::new(Role::User, text(i)))
                                .expect("an append");
                            t.elapsed()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a writer"))
            .collect()
    });
    let took = start.elapsed();
    latencies.sort();
    eprintln!(
        "{writers} writers: {:.0} turns/s, p50 {:?}, p99 {:?}",
        (writers * each) as f64 / took.as_secs_f64(),
        latencies[latencies.len() / 2],
        latencies[latencies.len() * 99 / 100]
    );
}

fn import(store: &Store) {
    let n = 100_000;
    let transcript: String = (0..n)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            serde_json::json!({ "role": role, "content": text(i) }).to_string() + "\n"
        })
        .collect();
    let start = Instant::now();
    store
        .import_openai(&transcript, Default::default(), &Default::default())
        .expect("an import");
    eprintln!(
        "import: {:.0} turns/s",
        n as f64 / start.elapsed().as_secs_f64()
    );
}
