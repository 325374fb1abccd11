//! Transcript import throughput: an OpenAI chat transcript (JSONL, 500-byte messages) of
//! N messages imported whole into a fresh store, in memory and (with the `rocksdb`
//! feature) on RocksDB in a temp dir, and on RocksDB the same turns' quads, already made,
//! written by Oxigraph's bulk loader alone (the ceiling); turns per second, median of 3.
//!
//! Then many sessions at once (`Store::import_sessions_with`, 2,000 sessions of 10
//! turns, into a RocksDB store already holding 2,000 others): with dedup (the digest
//! lookups that find copies), without it, and with every session a copy of a stored
//! one's first 8 turns (stored as forks holding 2); turns given per second.
//!
//! `cargo bench --bench import` prints a table; `FORKTRAIL_BENCH_JSON=1` one JSON object
//! of named figures; `FORKTRAIL_BENCH_QUICK=1` (or a run without `--bench`) smaller
//! sizes.

use forktrail::{NewSession, NewTurn, Role, Store, TranscriptOptions};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

mod common;

/// `n` deterministic 500-byte texts.
fn contents(n: usize) -> Vec<String> {
    let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
    (0..n)
        .map(|_| {
            let mut content = String::with_capacity(512);
            while content.len() < 500 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                content.push_str(
                    ["fork", "turn", "agent", "replay", "model", "tool"][(seed % 6) as usize],
                );
                content.push(' ');
            }
            content.truncate(500);
            content
        })
        .collect()
}

/// `n` messages of `contents`, user and assistant in turn, as OpenAI JSONL.
fn transcript(n: usize) -> String {
    let mut out = String::with_capacity(n * 560);
    for (i, content) in contents(n).into_iter().enumerate() {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        out.push_str(&serde_json::json!({ "role": role, "content": content }).to_string());
        out.push('\n');
    }
    out
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn rate(n: usize, fresh: &dyn Fn() -> (Store, Option<tempfile::TempDir>)) -> f64 {
    let text = transcript(n);
    let times: Vec<Duration> = (0..3)
        .map(|_| {
            let (store, _dir) = fresh();
            let started = Instant::now();
            let report = store
                .import_openai(&text, Default::default(), &TranscriptOptions::default())
                .unwrap();
            let took = started.elapsed();
            assert_eq!(report.turns, n as u64);
            took
        })
        .collect();
    n as f64 / median(times).as_secs_f64()
}

/// The ceiling for an import on RocksDB: the same turns' quads, already made, written
/// by Oxigraph's bulk loader alone, with the batch size and threads forktrail gives it.
#[cfg(feature = "rocksdb")]
fn loader_alone(n: usize) -> f64 {
    let times: Vec<Duration> = (0..3)
        .map(|_| {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path().join("store")).unwrap();
            let graph = oxigraph::model::NamedNode::new("urn:forktrail:session:bulk").unwrap();
            let quads: Vec<oxigraph::model::Quad> = contents(n)
                .into_iter()
                .enumerate()
                .flat_map(|(i, c)| common::turn_quads(&graph, i, c, None))
                .collect();
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
            let started = Instant::now();
            let oxigraph = store.oxigraph();
            let mut loader = oxigraph
                .bulk_loader()
                .with_num_threads(threads)
                .with_max_memory_size_in_megabytes(50 * threads);
            loader.load_quads(quads).unwrap();
            loader.commit().unwrap();
            started.elapsed()
        })
        .collect();
    n as f64 / median(times).as_secs_f64()
}

/// `count` sessions of `turns` turns, user and assistant in turn, texts from `seed`.
fn sessions(count: usize, turns: usize, seed: usize) -> Vec<(NewSession, Vec<NewTurn>)> {
    let texts = contents(64);
    (0..count)
        .map(|s| {
            let turns = (0..turns)
                .map(|t| {
                    let role = if t % 2 == 0 {
                        Role::User
                    } else {
                        Role::Assistant
                    };
                    let text = &texts[(s + t) % texts.len()];
                    NewTurn::new(role, format!("{seed} {s} {t} {text}"))
                })
                .collect();
            (NewSession::default(), turns)
        })
        .collect()
}

/// Turns per second of importing 2,000 sessions of 10 turns at once into a RocksDB store
/// holding 2,000 others: new ones (`copies` false) or copies of the stored ones' first
/// 8 turns, with dedup on or off.
#[cfg(feature = "rocksdb")]
fn many_sessions(dedup: bool, copies: bool) -> f64 {
    const COUNT: usize = 2_000;
    let times: Vec<Duration> = (0..3)
        .map(|_| {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path().join("store")).unwrap();
            store.import_sessions(sessions(COUNT, 10, 0)).unwrap();
            let batch = if copies {
                let mut batch = sessions(COUNT, 10, 0);
                let other = sessions(COUNT, 10, 1);
                for ((_, turns), (_, new)) in batch.iter_mut().zip(other) {
                    turns.truncate(8);
                    turns.extend(new.into_iter().skip(8));
                }
                batch
            } else {
                sessions(COUNT, 10, 1)
            };
            let options = TranscriptOptions {
                no_dedup: !dedup,
                ..Default::default()
            };
            let started = Instant::now();
            let report = store.import_sessions_with(batch, &options).unwrap();
            let took = started.elapsed();
            assert_eq!(report.shared.len(), if dedup && copies { COUNT } else { 0 });
            took
        })
        .collect();
    (2_000 * 10) as f64 / median(times).as_secs_f64()
}

fn main() {
    let quick = std::env::var_os("FORKTRAIL_BENCH_QUICK").is_some()
        || !std::env::args().any(|a| a == "--bench");
    let sizes: &[usize] = if quick { &[5_000] } else { &[5_000, 100_000] };
    let mut figures = BTreeMap::new();
    for &n in sizes {
        let memory = || (Store::in_memory().unwrap(), None);
        figures.insert(format!("memory.import_{n}_turns_per_s"), rate(n, &memory));
        #[cfg(feature = "rocksdb")]
        {
            let disk = || {
                let dir = tempfile::tempdir().unwrap();
                (Store::open(dir.path().join("store")).unwrap(), Some(dir))
            };
            figures.insert(format!("rocksdb.import_{n}_turns_per_s"), rate(n, &disk));
            figures.insert(
                format!("rocksdb.bulk_loader_alone_{n}_turns_per_s"),
                loader_alone(n),
            );
        }
    }
    #[cfg(feature = "rocksdb")]
    for (name, dedup, copies) in [
        ("no_dedup", false, false),
        ("dedup", true, false),
        ("dedup_copies", true, true),
    ] {
        figures.insert(
            format!("rocksdb.sessions_2000x10_{name}_turns_per_s"),
            many_sessions(dedup, copies),
        );
    }
    if std::env::var_os("FORKTRAIL_BENCH_JSON").is_some() {
        println!("{}", serde_json::to_string_pretty(&figures).unwrap());
    } else {
        for (name, value) in &figures {
            println!("{name:<44} {value:>14.0}");
        }
    }
}
