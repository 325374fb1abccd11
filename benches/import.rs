//! Transcript import throughput: an OpenAI chat transcript (JSONL, 500-byte messages) of
//! N messages imported whole into a fresh store, in memory and (with the `rocksdb`
//! feature) on RocksDB in a temp dir, and on RocksDB the same turns' quads, already made,
//! written by Oxigraph's bulk loader alone (the ceiling); turns per second, median of 3.
//!
//! `cargo bench --bench import` prints a table; `FORKTRAIL_BENCH_JSON=1` one JSON object
//! of named figures; `FORKTRAIL_BENCH_QUICK=1` (or a run without `--bench`) smaller
//! sizes.

use forktrail::{Store, TranscriptOptions};
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
    if std::env::var_os("FORKTRAIL_BENCH_JSON").is_some() {
        println!("{}", serde_json::to_string_pretty(&figures).unwrap());
    } else {
        for (name, value) in &figures {
            println!("{name:<44} {value:>14.0}");
        }
    }
}
