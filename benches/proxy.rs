//! The model proxy against a local upstream on 127.0.0.1, on a RocksDB store: what the
//! proxy adds to a call, and how fast it records calls as the store and the histories
//! grow.
//!
//! - added latency, non-streaming: the same calls (a 50-message history, 10 KB) sent
//!   straight to the upstream and through the proxy, p50 and p99 of each, one client;
//! - added time to first byte, streaming: an upstream that sends its first event at once
//!   and the rest 20 ms apart;
//! - capture throughput: 16 agents at once, each a conversation whose history grows from
//!   50 to 500 messages (two more each call), until every call is recorded;
//! - the lookup against the store's size: the same 16 agents' throughput, and the time
//!   to record one call, with 1k, 10k and 100k other sessions stored.
//!
//! `cargo bench --bench proxy`; `FORKTRAIL_BENCH_QUICK=1` (or `cargo test --benches`)
//! runs a short version; `FORKTRAIL_BENCH_SESSIONS=1000,10000` picks the store sizes.

use forktrail::server::{serve, ServerConfig};
use forktrail::{NewSession, NewTurn, ProxyConfig, Role, Store, UpstreamKind};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

const AGENTS: usize = 16;

/// An Anthropic upstream answering every call at once with a short message, keeping
/// connections alive; `stream` answers with events, the first at once, the rest
/// `pause` apart.
fn upstream(pause: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || serve_connection(stream, pause));
        }
    });
    url
}

fn serve_connection(mut stream: std::net::TcpStream, pause: Duration) {
    stream.set_nodelay(true).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    loop {
        let mut length = 0usize;
        let mut first = true;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() && !first {
                break;
            }
            first = false;
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let n = request["messages"].as_array().map_or(0, Vec::len);
        let text = format!("Answer to {n} messages.");
        if request["stream"] == json!(true) {
            let events = [
                json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "model": "bench-model", "content": [], "usage": {"input_tokens": 100, "output_tokens": 0}}}),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
                json!({"type": "message_stop"}),
            ];
            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
            if stream.write_all(head.as_bytes()).is_err() {
                return;
            }
            for (i, e) in events.iter().enumerate() {
                if i > 0 {
                    std::thread::sleep(pause);
                }
                let data = format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap());
                let chunk = format!("{:x}\r\n{data}\r\n", data.len());
                if stream.write_all(chunk.as_bytes()).is_err() {
                    return;
                }
            }
            if stream.write_all(b"0\r\n\r\n").is_err() {
                return;
            }
        } else {
            let answer = json!({"id": "m", "type": "message", "role": "assistant", "model": "bench-model",
                "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 100, "output_tokens": 5}});
            let body = answer.to_string();
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            if stream.write_all(reply.as_bytes()).is_err() {
                return;
            }
        }
    }
}

/// A conversation of `n` messages (user and assistant by turns), `tag` making it its own.
fn history(tag: &str, n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            if i % 2 == 0 {
                json!({"role": "user", "content": format!("{tag}: question {i}, with some words to weigh it a little more, like a real one would")})
            } else {
                json!({"role": "assistant", "content": [{"type": "text", "text": format!("Answer to {i} messages.")}]})
            }
        })
        .collect()
}

fn body(messages: &[Value], stream: bool) -> Vec<u8> {
    json!({"model": "bench-model", "max_tokens": 256, "stream": stream, "system": "You are a benchmark.", "messages": messages})
        .to_string()
        .into_bytes()
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

/// How many calls the store holds, recorded.
fn recorded(store: &Store) -> u64 {
    let q = "SELECT (COUNT(?c) AS ?n) WHERE { GRAPH ?g { ?c a <https://w3id.org/forktrail/ns#ProxiedCall> } }";
    match store.query(q, &[]).unwrap() {
        oxigraph::sparql::QueryResults::Solutions(mut rows) => {
            let row = rows.next().unwrap().unwrap();
            row.get("n").map_or(0, |n| match n {
                oxigraph::model::Term::Literal(l) => l.value().parse().unwrap_or(0),
                _ => 0,
            })
        }
        _ => 0,
    }
}

fn wait_recorded(store: &Store, n: u64) -> Duration {
    let start = Instant::now();
    while recorded(store) < n {
        assert!(
            start.elapsed() < Duration::from_secs(600),
            "calls not recorded"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    start.elapsed()
}

/// A server whose proxy forwards Anthropic calls to `upstream`, on `store`.
fn proxy(store: Arc<Store>, upstream: &str) -> String {
    let mut config = ProxyConfig::default();
    config
        .upstreams
        .insert(UpstreamKind::Anthropic, upstream.to_string());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(serve(
                store,
                ServerConfig {
                    bind: "127.0.0.1:0".parse().unwrap(),
                    proxy: config,
                    ..ServerConfig::default()
                },
                move |addr| tx.send(addr).unwrap(),
            ))
            .unwrap();
    });
    format!("http://{}", rx.recv().unwrap())
}

fn client() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(60))
        .max_idle_connections_per_host(64)
        .build()
}

/// `n` calls of a 50-message history, each with a new question, to `base`: their
/// latencies, sorted.
fn latencies(agent: &ureq::Agent, base: &str, n: usize, tag: &str) -> Vec<Duration> {
    let mut messages = history(tag, 49);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        messages.push(json!({"role": "user", "content": format!("{tag} call {i}")}));
        let body = body(&messages, false);
        messages.pop();
        let start = Instant::now();
        let r = agent
            .post(&format!("{base}/v1/messages"))
            .set("content-type", "application/json")
            .set("x-api-key", "sk-bench")
            .send_bytes(&body)
            .unwrap();
        let _ = r.into_string().unwrap();
        out.push(start.elapsed());
    }
    out.sort();
    out
}

/// `n` streamed calls to `base`: the time to the first byte of each answer, sorted.
fn first_bytes(agent: &ureq::Agent, base: &str, n: usize, tag: &str) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let mut messages = history(tag, 9);
        messages.push(json!({"role": "user", "content": format!("{tag} stream {i}")}));
        let body = body(&messages, true);
        let start = Instant::now();
        let r = agent
            .post(&format!("{base}/v1/messages"))
            .set("content-type", "application/json")
            .send_bytes(&body)
            .unwrap();
        let mut reader = r.into_reader();
        let mut one = [0u8; 1];
        reader.read_exact(&mut one).unwrap();
        out.push(start.elapsed());
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).unwrap();
    }
    out.sort();
    out
}

/// 16 agents at once, each growing its conversation from 50 messages by two a call for
/// `calls` calls, through the proxy at `base`; calls per second until all are recorded.
fn throughput(store: &Store, base: &str, calls: usize, tag: &str) -> (f64, u64) {
    let before = recorded(store);
    let start = Instant::now();
    let threads: Vec<_> = (0..AGENTS)
        .map(|a| {
            let base = base.to_string();
            let tag = format!("{tag}-agent-{a}");
            std::thread::spawn(move || {
                let agent = client();
                let mut messages = history(&tag, 49);
                for i in 0..calls {
                    messages.push(json!({"role": "user", "content": format!("{tag} step {i}")}));
                    let r = agent
                        .post(&format!("{base}/v1/messages"))
                        .set("content-type", "application/json")
                        .send_bytes(&body(&messages, false))
                        .unwrap();
                    let answer: Value = serde_json::from_str(&r.into_string().unwrap()).unwrap();
                    messages.push(json!({"role": "assistant", "content": answer["content"]}));
                }
                messages.len()
            })
        })
        .collect();
    let longest = threads
        .into_iter()
        .map(|t| t.join().unwrap())
        .max()
        .unwrap();
    let total = (AGENTS * calls) as u64;
    wait_recorded(store, before + total);
    (total as f64 / start.elapsed().as_secs_f64(), longest as u64)
}

/// Adds `n` sessions of four turns to `store`.
fn fill(store: &Store, n: usize, from: usize) {
    for i in from..from + n {
        let id = store.create_session(NewSession::default()).unwrap();
        let turns = (0..4)
            .map(|t| {
                NewTurn::new(
                    if t % 2 == 0 {
                        Role::User
                    } else {
                        Role::Assistant
                    },
                    format!("filler {i} turn {t}"),
                )
            })
            .collect();
        store.append_many(&id, turns).unwrap();
    }
}

fn main() {
    let quick = std::env::var_os("FORKTRAIL_BENCH_QUICK").is_some()
        || !std::env::args().any(|a| a == "--bench");
    let dir = tempfile::tempdir().unwrap();
    #[cfg(feature = "rocksdb")]
    let (store, kind) = (Store::open(dir.path().join("store")).unwrap(), "rocksdb");
    #[cfg(not(feature = "rocksdb"))]
    let (store, kind) = (Store::in_memory().unwrap(), "memory");
    let store = Arc::new(store);
    let direct = upstream(Duration::from_millis(20));
    let proxied = format!("{}/proxy/anthropic", proxy(Arc::clone(&store), &direct));
    let agent = client();
    let n = if quick { 50 } else { 1000 };
    // Warm both paths (connections, the store's first writes).
    latencies(&agent, &direct, 20, "warm");
    latencies(&agent, &proxied, 20, "warm");
    let straight = latencies(&agent, &direct, n, "direct");
    let through = latencies(&agent, &proxied, n, "proxied");
    println!("store: {kind}");
    println!(
        "non-streaming, {n} calls of a 50-message history: direct p50 {:.3} ms p99 {:.3} ms; \
         through the proxy p50 {:.3} ms p99 {:.3} ms; added p50 {:.3} ms p99 {:.3} ms",
        percentile(&straight, 0.5),
        percentile(&straight, 0.99),
        percentile(&through, 0.5),
        percentile(&through, 0.99),
        percentile(&through, 0.5) - percentile(&straight, 0.5),
        percentile(&through, 0.99) - percentile(&straight, 0.99),
    );
    let m = if quick { 20 } else { 300 };
    let straight = first_bytes(&agent, &direct, m, "direct");
    let through = first_bytes(&agent, &proxied, m, "proxied");
    println!(
        "streaming, {m} calls: time to first byte direct p50 {:.3} ms, through the proxy p50 {:.3} ms \
         p99 {:.3} ms; added p50 {:.3} ms",
        percentile(&straight, 0.5),
        percentile(&through, 0.5),
        percentile(&through, 0.99),
        percentile(&through, 0.5) - percentile(&straight, 0.5),
    );
    let sizes: Vec<usize> = std::env::var("FORKTRAIL_BENCH_SESSIONS")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| {
            if quick {
                vec![100]
            } else {
                vec![1_000, 10_000, 100_000]
            }
        });
    let calls = if quick { 5 } else { 225 };
    let mut stored = store.list().unwrap().len();
    for size in sizes {
        if stored < size {
            fill(&store, size - stored, stored);
        }
        let stored_now = store.list().unwrap().len();
        let (rate, longest) = throughput(&store, &proxied, calls, &format!("at-{size}"));
        // A 500-message conversation stored, then one more call of it, alone: the time
        // from its answer to its record (the lookup of its 500 turns and an append).
        let mut messages = history(&format!("single-{size}"), 499);
        let send = |messages: &[Value]| -> Value {
            let r = agent
                .post(&format!("{proxied}/v1/messages"))
                .set("content-type", "application/json")
                .send_bytes(&body(messages, false))
                .unwrap();
            serde_json::from_str(&r.into_string().unwrap()).unwrap()
        };
        let before = recorded(&store);
        let answer = send(&messages);
        wait_recorded(&store, before + 1);
        messages.push(json!({"role": "assistant", "content": answer["content"]}));
        messages.push(json!({"role": "user", "content": "one more"}));
        send(&messages);
        let record = wait_recorded(&store, before + 2);
        println!(
            "{stored_now} sessions stored: {AGENTS} agents x {calls} calls (histories 50 to {longest} messages): \
             {rate:.0} calls/s recorded; one more call of a stored 500-message conversation recorded {:.1} ms after its answer",
            record.as_secs_f64() * 1e3
        );
        stored = store.list().unwrap().len();
    }
}
