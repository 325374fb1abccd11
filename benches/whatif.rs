//! forktrail's own overhead per step of a what-if run, model time excluded.
//!
//! A recorded agent session (a system turn, then 100 exchanges: a user turn, an
//! assistant turn calling a tool, the tool's result, an assistant answer in text) is
//! compared at K = 2 with one arm whose model is a stub on 127.0.0.1 that replays the
//! recording instantly, in the OpenAI chat-completions format with usage. The arm makes
//! 200 model calls: each commits the answer, then the recorded tool result or the next
//! recorded user turn, and the next step reloads the fork's whole context.
//!
//! Measured per store (in memory, RocksDB in a temp dir, and a real Oxigraph server in
//! memory on 127.0.0.1 when `$FORKTRAIL_OXIGRAPH`, else `oxigraph` on the PATH, starts):
//! the wall time of `Store::compare` minus the `latency_ms` the comparison reports for
//! its calls (model time as forktrail measured it), per step; and, timed by the stub,
//! each step's gap (its answer to call n-1 written → connection n accepted: forktrail
//! committing step n-1, reloading the context and building request n), with the SPARQL
//! requests made in it. `Store::load` of the finished fork is timed too: the reload.
//!
//! `cargo bench --bench whatif` prints figures per store; `FORKTRAIL_BENCH_JSON=1` one JSON object;
//! `FORKTRAIL_BENCH_QUICK=1` (or `cargo test --benches`) runs 20 steps;
//! `FORKTRAIL_BENCH_STORE=memory` (or `rocksdb`, `remote`) runs one store.

use forktrail::{Arm, CompareOptions, Kind, NewSession, NewTurn, RemoteConfig, Role, Store};
use serde_json::json;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MODEL: &str = "model-a";
/// The fork point: the first exchange's user turn is context, its tool call is answered.
const AT: u64 = 2;

/// 500 bytes of text that differ per turn.
fn content(what: &str, i: usize) -> String {
    let mut out = format!("{what} {i}: ");
    while out.len() < 500 {
        out.push_str("the agent forks, replays and audits its graph. ");
    }
    out.truncate(500);
    out
}

/// The tool call of exchange `e`, as the recording and the stub both say it.
fn call(e: usize) -> serde_json::Value {
    json!([{"id": format!("call-{e}"), "type": "function",
            "function": {"name": "lookup", "arguments": json!({"q": e}).to_string()}}])
}

/// The recorded session: turn 0 system, then per exchange `e` (from index 1 + 4e) a
/// user turn, a tool call, its result and an answer in text.
fn record(store: &Store, exchanges: usize) -> forktrail::SessionId {
    let id = store.create_session(NewSession::default()).unwrap();
    let mut turns = vec![NewTurn::new(
        Role::System,
        "You are an agent with a lookup tool.",
    )];
    for e in 0..exchanges {
        turns.push(NewTurn::new(Role::User, content("question", e)));
        turns.push(
            NewTurn::new(Role::Assistant, "")
                .kind(Kind::ToolCall)
                .tool_calls(call(e).to_string())
                .model(MODEL),
        );
        turns.push(
            NewTurn::new(Role::Tool, content("result", e))
                .tool_call_id(format!("call-{e}"))
                .name("lookup"),
        );
        turns.push(NewTurn::new(Role::Assistant, content("answer", e)).model(MODEL));
    }
    store.append_many(&id, turns).unwrap();
    id
}

/// The stub's answer to call `n` (from 0): the recorded assistant turn it replays.
fn reply(n: usize) -> String {
    let e = n / 2;
    let (message, finish) = if n.is_multiple_of(2) {
        (
            json!({"role": "assistant", "content": null, "tool_calls": call(e)}),
            "tool_calls",
        )
    } else {
        (
            json!({"role": "assistant", "content": content("answer", e)}),
            "stop",
        )
    };
    let body = json!({
        "id": format!("chatcmpl-{n}"), "object": "chat.completion", "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100 + n, "completion_tokens": 10, "total_tokens": 110 + n},
    })
    .to_string();
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
}

/// One call as the stub saw it.
#[derive(Clone, Copy)]
struct Seen {
    /// The connection accepted.
    accepted: Instant,
    /// The request read in full.
    arrived: Instant,
    /// The answer written.
    answered: Instant,
    /// The store's SPARQL requests so far, when the request arrived.
    requests: u64,
}

/// A chat-completions endpoint on 127.0.0.1 answering call `n` with `reply(n)`, one
/// connection at a time, noting when each request arrived and was answered.
struct Stub {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

fn stub(calls: usize, requests: Arc<dyn Fn() -> u64 + Send + Sync>) -> Stub {
    let replies: Vec<String> = (0..calls).map(reply).collect();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let accepted = Instant::now();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some((k, v)) = line.split_once(':') {
                    if k.eq_ignore_ascii_case("content-length") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            let arrived = Instant::now();
            let requests = requests();
            let n = log.lock().unwrap().len();
            let text = replies.get(n).map_or(
                "HTTP/1.1 500 X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                String::as_str,
            );
            let _ = stream.write_all(text.as_bytes());
            log.lock().unwrap().push(Seen {
                accepted,
                arrived,
                answered: Instant::now(),
                requests,
            });
        }
    });
    Stub { url, seen }
}

/// What one store's run gave.
struct Figures {
    steps: usize,
    turns_before: usize,
    wall: Duration,
    latency_ms_sum: u64,
    /// Per step from the second: the gap before its request, and the SPARQL requests in
    /// it (remote store only).
    gaps: Vec<Duration>,
    gap_requests: Vec<u64>,
    /// The stub's time answering, summed.
    stub_time: Duration,
    /// Per call: connection accepted → request read in full.
    transfer: Vec<Duration>,
    /// Compare called → first request; last answer → compare returned.
    setup: Duration,
    report: Duration,
    requests: Option<u64>,
    /// Of those: before the first call (the comparison begun, the recording read), and
    /// after the last answer (its commit, then the comparison's report).
    setup_requests: Option<u64>,
    report_requests: Option<u64>,
    /// `Store::load` of the finished fork (its context), median of 5, and its requests.
    load_fork: Duration,
    load_requests: Option<u64>,
    /// `Store::replay` of the same, warm, median of 5.
    replay_fork: Duration,
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn percentile(v: &[Duration], p: f64) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn mean(v: &[Duration]) -> Duration {
    v.iter().sum::<Duration>() / v.len().max(1) as u32
}

fn measure(store: Arc<Store>, exchanges: usize) -> Figures {
    let root = record(&store, exchanges);
    let steps = 2 * exchanges;
    let counter = Arc::clone(&store);
    let stub = stub(
        steps,
        Arc::new(move || counter.remote_requests().unwrap_or(0)),
    );
    let options = CompareOptions {
        at: AT,
        arms: vec![Arm {
            name: Some("replay".into()),
            model: MODEL.into(),
            endpoint: Some(stub.url.clone()),
            ..Default::default()
        }],
        max_steps: Some(steps as u64 + 50),
        // The last context is 1 + 4 × exchanges turns of 500 bytes.
        max_context_tokens: Some(10_000_000),
        ..Default::default()
    };
    let before = store.remote_requests();
    let start = Instant::now();
    let c = store.compare(&root, &options).unwrap();
    let wall = start.elapsed();
    let ended = Instant::now();
    let after = store.remote_requests();
    let requests = after.zip(before).map(|(a, b)| a - b);
    let arm = &c.arms[1];
    assert_eq!(arm.status, "complete", "{:?}", arm.detail);
    assert_eq!(arm.figures.steps as usize, steps);
    assert_eq!(arm.figures.first_divergence, None, "the stub replays");
    assert_eq!(arm.figures.answered_from_recording, Some(exchanges as u64));
    let seen = stub.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), steps);
    let gaps = seen
        .windows(2)
        .map(|w| w[1].accepted - w[0].answered)
        .collect();
    let gap_requests = seen
        .windows(2)
        .map(|w| w[1].requests - w[0].requests)
        .collect();

    let fork = arm.session.clone().unwrap();
    let r0 = store.remote_requests();
    let mut loads = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let turns = store.load(&fork, None).unwrap();
        loads.push(t.elapsed());
        assert_eq!(turns.len(), 1 + 4 * exchanges);
    }
    let load_requests = store.remote_requests().zip(r0).map(|(a, b)| (a - b) / 5);
    let replays = (0..5)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(store.replay(&fork, None).unwrap());
            t.elapsed()
        })
        .collect();
    Figures {
        steps,
        turns_before: AT as usize,
        wall,
        latency_ms_sum: arm.calls.iter().map(|c| c.figures.latency_ms).sum(),
        gaps,
        gap_requests,
        stub_time: seen.iter().map(|s| s.answered - s.arrived).sum(),
        transfer: seen.iter().map(|s| s.arrived - s.accepted).collect(),
        setup: seen[0].arrived - start,
        report: ended - seen.last().unwrap().answered,
        requests,
        setup_requests: before.map(|b| seen[0].requests - b),
        report_requests: after.map(|a| a - seen.last().unwrap().requests),
        load_fork: median(loads),
        load_requests,
        replay_fork: median(replays),
    }
}

/// An in-memory Oxigraph server on a free port, killed when dropped; `None` (with a
/// note) when the binary cannot start.
struct Server(std::process::Child, String);

impl Server {
    fn start() -> Option<Self> {
        let binary = std::env::var("FORKTRAIL_OXIGRAPH").unwrap_or_else(|_| "oxigraph".into());
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = match std::process::Command::new(&binary)
            .args(["serve", "--union-default-graph", "--bind"])
            .arg(format!("127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
        {
            Ok(child) => child,
            Err(e) => {
                eprintln!("note: no Oxigraph server ({binary}: {e}); remote store skipped");
                return None;
            }
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "{binary} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(Self(child, format!("http://127.0.0.1:{port}/query")))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: then run quick.
    let quick = std::env::var_os("FORKTRAIL_BENCH_QUICK").is_some()
        || !std::env::args().any(|a| a == "--bench");
    let exchanges = if quick { 10 } else { 100 };
    let only = std::env::var("FORKTRAIL_BENCH_STORE").ok();
    let wanted = |kind: &str| only.as_deref().is_none_or(|o| o == kind);
    let mut results: Vec<(&str, Figures)> = Vec::new();
    if wanted("memory") {
        let store = Arc::new(Store::in_memory().unwrap());
        results.push(("memory", measure(store, exchanges)));
    }
    #[cfg(feature = "rocksdb")]
    if wanted("rocksdb") {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path().join("store")).unwrap());
        results.push(("rocksdb", measure(store, exchanges)));
    }
    if wanted("remote") {
        if let Some(server) = Server::start() {
            let store = Arc::new(Store::remote(RemoteConfig::new(server.1.clone())).unwrap());
            results.push(("oxigraph-server", measure(store, exchanges)));
        }
    }

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut json = BTreeMap::new();
    for (kind, f) in &results {
        let n = f.steps as f64;
        let window = 20.min(f.gaps.len() / 2).max(1);
        let (first, last) = (&f.gaps[..window], &f.gaps[f.gaps.len() - window..]);
        // Context turns when step s (from 1) is asked: K, plus 2 per step taken before.
        let context = |s: usize| (f.turns_before + 2 * (s - 1)) as f64;
        // Least squares of gap (ms) on context turns, over steps 2..=steps.
        let points: Vec<(f64, f64)> = f
            .gaps
            .iter()
            .enumerate()
            .map(|(i, g)| (context(i + 2), ms(*g)))
            .collect();
        let (mx, my) = (
            points.iter().map(|p| p.0).sum::<f64>() / points.len() as f64,
            points.iter().map(|p| p.1).sum::<f64>() / points.len() as f64,
        );
        let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
        let syy: f64 = points.iter().map(|p| (p.1 - my).powi(2)).sum();
        let slope = sxy / sxx;
        let r2 = sxy * sxy / (sxx * syy);
        let mut put = |name: &str, v: f64| {
            json.insert(format!("{kind}.{name}"), v);
        };
        put("steps", n);
        put("wall_ms", ms(f.wall));
        put("latency_ms_sum", f.latency_ms_sum as f64);
        put(
            "overhead_per_step_ms",
            (ms(f.wall) - f.latency_ms_sum as f64) / n,
        );
        put("stub_time_ms_sum", ms(f.stub_time));
        put("setup_ms", ms(f.setup));
        put("transfer_mean_ms", ms(mean(&f.transfer)));
        put("transfer_p95_ms", ms(percentile(&f.transfer, 0.95)));
        put("report_ms", ms(f.report));
        put("gap_mean_ms", ms(mean(&f.gaps)));
        put("gap_p50_ms", ms(percentile(&f.gaps, 0.5)));
        put("gap_p95_ms", ms(percentile(&f.gaps, 0.95)));
        put("gap_first20_mean_ms", ms(mean(first)));
        put("gap_last20_mean_ms", ms(mean(last)));
        put("gap_last20_over_first20", ms(mean(last)) / ms(mean(first)));
        put("gap_slope_us_per_context_turn", slope * 1e3);
        put("gap_slope_r2", r2);
        put("load_fork_ms", ms(f.load_fork));
        put("replay_fork_warm_ms", ms(f.replay_fork));
        if let Some(r) = f.requests {
            put("requests_per_step", r as f64 / n);
            let reqs = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len() as f64;
            put("gap_requests_mean", reqs(&f.gap_requests));
            put("setup_requests", f.setup_requests.unwrap_or(0) as f64);
            put("report_requests", f.report_requests.unwrap_or(0) as f64);
            let w = window.min(f.gap_requests.len());
            put("gap_requests_first20", reqs(&f.gap_requests[..w]));
            put(
                "gap_requests_last20",
                reqs(&f.gap_requests[f.gap_requests.len() - w..]),
            );
        }
        if let Some(r) = f.load_requests {
            put("load_fork_requests", r as f64);
        }
    }
    if std::env::var_os("FORKTRAIL_BENCH_JSON").is_some() {
        println!("{}", serde_json::to_string_pretty(&json).unwrap());
        return;
    }
    for (kind, f) in &results {
        let get = |name: &str| json[&format!("{kind}.{name}")];
        let w = 20.min(f.gaps.len() / 2).max(1);
        println!(
            "== {kind}: {} steps, K = {}, context {} → {} turns",
            f.steps,
            AT,
            AT,
            AT as usize + 2 * f.steps - 1
        );
        println!(
            "  compare wall {:.1} ms, Σ latency_ms {} ms (stub answering {:.1} ms) → \
             overhead {:.3} ms/step (mean)",
            get("wall_ms"),
            f.latency_ms_sum,
            get("stub_time_ms_sum"),
            get("overhead_per_step_ms")
        );
        println!(
            "  gap per step (answer n-1 sent → connection n accepted): mean {:.3}, p50 {:.3}, \
             p95 {:.3} ms; request transfer (accepted → read) mean {:.3}, p95 {:.3} ms",
            get("gap_mean_ms"),
            get("gap_p50_ms"),
            get("gap_p95_ms"),
            get("transfer_mean_ms"),
            get("transfer_p95_ms")
        );
        println!(
            "  steps 2-{} {:.3} ms, last {w} {:.3} ms ({:.1}x); slope {:.2} µs per context \
             turn (r² {:.2}); setup {:.1} ms, report {:.1} ms",
            w + 1,
            get("gap_first20_mean_ms"),
            get("gap_last20_mean_ms"),
            get("gap_last20_over_first20"),
            get("gap_slope_us_per_context_turn"),
            get("gap_slope_r2"),
            get("setup_ms"),
            get("report_ms")
        );
        if get("gap_slope_r2") > 0.8 && get("gap_last20_over_first20") > 2.0 {
            // Some growth is the request itself: built, serialised and hashed whole at
            // every step, as the model needs it; a store read per context turn would
            // show as tens of µs per turn.
            println!(
                "  note: the gap grows with the context (+{:.1} µs per turn of context, \
                 r² {:.2})",
                get("gap_slope_us_per_context_turn"),
                get("gap_slope_r2")
            );
        }
        if f.requests.is_some() {
            println!(
                "  SPARQL requests: {:.1} per step over the whole compare; between calls {:.1} \
                 (steps 2-{} {:.1}, last {w} {:.1}); before the first call {}, after the last {}",
                get("requests_per_step"),
                get("gap_requests_mean"),
                w + 1,
                get("gap_requests_first20"),
                get("gap_requests_last20"),
                get("setup_requests"),
                get("report_requests")
            );
        }
        println!(
            "  the finished fork's context ({} turns): Store::load {:.2} ms{}, warm replay {:.3} ms",
            1 + 4 * (f.steps / 2),
            get("load_fork_ms"),
            f.load_requests
                .map(|r| format!(" ({r} requests)"))
                .unwrap_or_default(),
            get("replay_fork_warm_ms")
        );
    }
}
