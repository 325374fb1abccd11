//! A workload to run under a profiler, for the figures `benches/core.rs` reports:
//!
//! ```text
//! cargo build --release --example profile
//! perf record -g target/release/examples/profile append rocksdb
//! perf record -g target/release/examples/profile replay memory
//! ```
//!
//! `append` appends 30,000 turns, one transaction each; `replay` appends 5,000 and then
//! replays them 200 times with the read cache dropped before each (cold replays).

use forktrail::{NewSession, NewTurn, Role, Store};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (what, kind) = match args.as_slice() {
        [w, k]
            if ["append", "replay"].contains(&w.as_str())
                && ["memory", "rocksdb"].contains(&k.as_str()) =>
        {
            (w.as_str(), k.as_str())
        }
        _ => {
            eprintln!("usage: profile append|replay memory|rocksdb");
            std::process::exit(2);
        }
    };
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = match kind {
        "rocksdb" => Store::open(dir.path().join("store")),
        _ => Store::in_memory(),
    }
    .expect("a store");
    let id = store
        .create_session(NewSession::default())
        .expect("a session");
    let n = if what == "append" { 30_000 } else { 5_000 };
    let text = "fork turn agent replay model tool graph audit ".repeat(11);
    let start = Instant::now();
    for i in 0..n {
        let role = if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        store
            .append(&id, NewTurn::new(role, format!("{text}{i}")))
            .expect("an append");
    }
    eprintln!(
        "append: {:.0} turns/s",
        n as f64 / start.elapsed().as_secs_f64()
    );
    if what == "replay" {
        let start = Instant::now();
        for _ in 0..200 {
            store.clear_caches();
            std::hint::black_box(store.replay(&id, None).expect("a replay"));
        }
        eprintln!("cold replay of {n} turns: {:?}", start.elapsed() / 200);
    }
}
