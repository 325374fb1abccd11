//! A bounded load test of `forktrail serve` on 127.0.0.1: 8 concurrent clients send a
//! fixed number of requests mixing replay, fork and SPARQL fork-chain queries. Prints
//! p50/p99 latency per kind, the error count (zero expected) and the process's memory.
//!
//! `cargo bench --bench server`; `FORKTRAIL_BENCH_JSON=1` prints one JSON object;
//! `FORKTRAIL_BENCH_QUICK=1` (or `cargo test --benches`) sends fewer requests.

use forktrail::server::{serve, ServerConfig};
use forktrail::{demo, Store};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const CLIENTS: usize = 8;
const TOKEN: &str = "bench";

fn memory_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

fn main() {
    let quick = std::env::var_os("FORKTRAIL_BENCH_QUICK").is_some()
        || !std::env::args().any(|a| a == "--bench");
    let per_client = if quick { 30 } else { 300 };
    #[cfg(feature = "rocksdb")]
    let dir = tempfile::tempdir().unwrap();
    #[cfg(feature = "rocksdb")]
    let (store, kind) = (Store::open(dir.path().join("store")).unwrap(), "rocksdb");
    #[cfg(not(feature = "rocksdb"))]
    let (store, kind) = (Store::in_memory().unwrap(), "memory");
    let store = Arc::new(store);
    let tree = demo::build(&store).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let served = Arc::clone(&store);
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(serve(
                served,
                ServerConfig {
                    bind: "127.0.0.1:0".parse().unwrap(),
                    token: Some(TOKEN.into()),
                    max_concurrent_queries: CLIENTS,
                    ..ServerConfig::default()
                },
                move |addr| tx.send(addr).unwrap(),
            ))
            .unwrap()
    });
    let base = format!("http://{}", rx.recv().unwrap());
    let rss_before = memory_kib("VmRSS:");
    let chain = format!(
        "PREFIX ft: <https://w3id.org/forktrail/ns#> SELECT ?levelId ?depth WHERE {{ \
         ?s ft:sessionId {} ; ft:parentSession* ?l . ?l ft:sessionId ?levelId ; ft:forkDepth ?depth }}",
        // Over HTTP nothing binds values: the id goes in as an oxrdf term (escaped).
        oxigraph::model::Literal::new_simple_literal(tree.booking.as_str())
    );
    let started = Instant::now();
    let workers: Vec<_> = (0..CLIENTS)
        .map(|n| {
            let (base, chain, leaf) = (base.clone(), chain.clone(), tree.booking.to_string());
            std::thread::spawn(move || {
                let http = reqwest::blocking::Client::new();
                let mut seen: Vec<(&'static str, Duration, bool)> = Vec::new();
                for i in 0..per_client {
                    let start = Instant::now();
                    let (kind, response) = match (i + n) % 3 {
                        0 => (
                            "replay",
                            http.get(format!("{base}/sessions/{leaf}/replay")).send(),
                        ),
                        1 => (
                            "fork",
                            http.post(format!("{base}/sessions/{leaf}/fork"))
                                .bearer_auth(TOKEN)
                                .json(&serde_json::json!({}))
                                .send(),
                        ),
                        _ => (
                            "sparql_chain",
                            http.post(format!("{base}/sparql"))
                                .header("Content-Type", "application/sparql-query")
                                .body(chain.clone())
                                .send(),
                        ),
                    };
                    let ok = response
                        .map(|r| r.status().is_success() && r.bytes().is_ok())
                        .unwrap_or(false);
                    seen.push((kind, start.elapsed(), ok));
                }
                seen
            })
        })
        .collect();
    let mut by_kind: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
    let mut errors = 0;
    for w in workers {
        for (kind, took, ok) in w.join().unwrap() {
            by_kind.entry(kind).or_default().push(took);
            by_kind.entry("all").or_default().push(took);
            errors += usize::from(!ok);
        }
    }
    let wall = started.elapsed().as_secs_f64();
    let mut figures = BTreeMap::new();
    for (kind, mut times) in by_kind {
        times.sort();
        figures.insert(format!("server.{kind}_p50_ms"), percentile(&times, 0.5));
        figures.insert(format!("server.{kind}_p99_ms"), percentile(&times, 0.99));
        if kind == "all" {
            figures.insert("server.requests".into(), times.len() as f64);
            figures.insert("server.requests_per_s".into(), times.len() as f64 / wall);
        }
    }
    figures.insert("server.errors".into(), errors as f64);
    figures.insert("server.clients".into(), CLIENTS as f64);
    figures.insert("server.rss_before_kib".into(), rss_before as f64);
    figures.insert("server.rss_after_kib".into(), memory_kib("VmRSS:") as f64);
    figures.insert("server.rss_peak_kib".into(), memory_kib("VmHWM:") as f64);
    if std::env::var_os("FORKTRAIL_BENCH_JSON").is_some() {
        println!("{}", serde_json::to_string_pretty(&figures).unwrap());
    } else {
        println!("store: {kind}");
        for (name, value) in &figures {
            println!("{name:<32} {value:>12.3}");
        }
    }
}
