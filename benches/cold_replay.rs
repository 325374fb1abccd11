//! The first replay of a session in a running process, against the store's size: a
//! store on disk of 1k to 30k sessions (10 turns each, 500-byte contents), its record
//! index deleted and the store opened again, then 25 sessions never read before are
//! replayed once each. Per-session work must stay flat: a replay that names its
//! session's graph reads that graph only, whatever else the store holds.
//!
//! Beside each first replay, the query a replay makes to read a session's turns with no
//! record file, as it was sent before graphs were named in it: `turn-entries.rq` with
//! the session as a `VALUES` row outside `GRAPH ?session`, which Oxigraph does not push
//! in, so it reads every graph's turn indices. Both on the same store, in the same run.
//!
//! `cargo bench --bench cold_replay` prints the medians and the slowest per size;
//! `FORKTRAIL_BENCH_SIZES=1000,30000` chooses the sizes.

use forktrail::{queries, NewSession, NewTurn, Role, SessionId, Store};
use std::time::{Duration, Instant};

const TURNS: usize = 10;
const SAMPLES: usize = 25;
/// The unnamed query reads the whole store: fewer samples of it.
const UNNAMED_SAMPLES: usize = 5;

fn contents(seed: u64) -> String {
    let mut x = seed | 1;
    let mut out = String::with_capacity(512);
    while out.len() < 500 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push_str(["fork ", "turn ", "agent ", "replay ", "model ", "tool "][(x % 6) as usize]);
    }
    out
}

fn build(path: &std::path::Path, sessions: usize) -> Vec<SessionId> {
    let store = Store::open(path).unwrap();
    let mut ids = Vec::with_capacity(sessions);
    for chunk in (0..sessions).collect::<Vec<_>>().chunks(2_000) {
        let batch = chunk.iter().map(|&n| {
            let turns = (0..TURNS)
                .map(|t| {
                    let role = if t % 2 == 0 {
                        Role::User
                    } else {
                        Role::Assistant
                    };
                    NewTurn::new(role, contents((n * TURNS + t) as u64 + 1))
                })
                .collect();
            (NewSession::default(), turns)
        });
        ids.extend(store.import_sessions(batch).unwrap());
    }
    store.flush().unwrap();
    ids
}

fn main() {
    let sizes: Vec<usize> = std::env::var("FORKTRAIL_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 3_000, 10_000, 30_000]);
    println!(
        "| sessions | first replay, median | slowest of {SAMPLES} | its turns by `VALUES` outside `GRAPH`, median |"
    );
    println!("| ---: | ---: | ---: | ---: |");
    for sessions in sizes {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store");
        let ids = build(&path, sessions);
        // Nothing derived about the sessions read below: no record files, a new process.
        std::fs::remove_dir_all(path.join("forktrail-records")).ok();
        let store = Store::open(&path).unwrap();
        let step = (ids.len() / SAMPLES).max(1);
        let mut times: Vec<Duration> = ids
            .iter()
            .step_by(step)
            .take(SAMPLES)
            .map(|id| {
                let start = Instant::now();
                let records = store.replay(id, None).unwrap();
                let took = start.elapsed();
                assert_eq!(records.len(), TURNS);
                took
            })
            .collect();
        times.sort();
        let unnamed = unnamed_query_median(&store, &ids, step);
        println!(
            "| {sessions} | {:.2} ms | {:.2} ms | {:.2} ms |",
            times[times.len() / 2].as_secs_f64() * 1e3,
            times[times.len() - 1].as_secs_f64() * 1e3,
            unnamed.as_secs_f64() * 1e3,
        );
    }
}

/// The median time of reading 5 sampled sessions' turns with `turn-entries.rq` written
/// with its session as a `VALUES` row (the text is the user's, so it goes in unchanged).
fn unnamed_query_median(store: &Store, ids: &[SessionId], step: usize) -> Duration {
    let text = queries::ALL
        .iter()
        .find(|q| q.name == "turn-entries")
        .expect("turn-entries.rq")
        .source;
    let mut times: Vec<Duration> = ids
        .iter()
        .skip(step / 2)
        .step_by(step)
        .take(UNNAMED_SAMPLES)
        .map(|id| {
            let values = format!(
                "WHERE {{ VALUES (?session ?from ?to) {{ ({} 0 {TURNS}) }}",
                store.session_iri(id)
            );
            let sparql = text.replacen("WHERE {", &values, 1);
            let start = Instant::now();
            let rows = match store.query(&sparql, &[]).unwrap() {
                oxigraph::sparql::QueryResults::Solutions(rows) => rows.count(),
                _ => unreachable!("a SELECT"),
            };
            let took = start.elapsed();
            assert_eq!(rows, TURNS);
            took
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}
