//! forktrail's own cost per step of a live experiment, model and tool time excluded: a
//! local Anthropic upstream that answers at once, and an agent (this binary, run again
//! as a process) whose tools do nothing, so what a step costs is forktrail's.
//!
//! For runs of 1 and S steps (S = 40; 10 with `FORKTRAIL_BENCH_QUICK=1` or `cargo test
//! --benches`), the median over 5 samples of a sample's wall time (agent start to
//! verdict):
//!
//! - direct: the agent against the upstream, no forktrail (its own cost per step);
//! - replayed: the experiment's baseline, every call answered from the recording;
//! - live: an arm from K = 1, every call sent to the upstream and recorded in its fork.
//!
//! The slope between 1 and S steps is the cost per step; the direct slope subtracted,
//! what forktrail adds per step. The intercept is the per-sample cost (the workspace
//! copy, starting the agent, the verify command, the outcome's write).

use forktrail::server::{serve, ServerConfig};
use forktrail::{
    Arm, CompareOptions, ExperimentOptions, OnDrift, ProxyConfig, Sandbox, SessionId, Store,
    UpstreamKind,
};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const SAMPLES: u64 = 5;

/// The agent: calls the model at `$ANTHROPIC_BASE_URL` until it answers without a tool
/// call, each tool "run" at once; the first message says how many steps to take.
fn agent(steps: usize) {
    let url = format!(
        "{}/v1/messages",
        std::env::var("ANTHROPIC_BASE_URL").unwrap()
    );
    let client = ureq::AgentBuilder::new().build();
    let mut messages = vec![json!({"role": "user", "content": format!("steps:{steps}")})];
    loop {
        let body = json!({"model": "bench", "max_tokens": 64, "messages": messages});
        let response = client
            .post(&url)
            .set("content-type", "application/json")
            .send_string(&body.to_string())
            .unwrap();
        let answer: Value = serde_json::from_reader(response.into_reader()).unwrap();
        let content = answer["content"].clone();
        messages.push(json!({"role": "assistant", "content": content}));
        let calls: Vec<&Value> = content
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .collect();
        if calls.is_empty() {
            return;
        }
        let results: Vec<Value> = calls
            .iter()
            .map(|c| json!({"type": "tool_result", "tool_use_id": c["id"], "content": "ok"}))
            .collect();
        messages.push(json!({"role": "user", "content": results}));
    }
}

/// An upstream answering a tool call until the conversation holds the steps its first
/// message asks for, then a last word; one request per connection.
fn upstream() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            stream.set_nodelay(true).unwrap();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if line.trim_end().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = line.split_once(':') {
                        if k.eq_ignore_ascii_case("content-length") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                let out = answer(&serde_json::from_slice(&body).unwrap()).to_string();
                // One write: no segment waits on another's acknowledgement.
                let whole = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{out}",
                    out.len()
                );
                let _ = stream.write_all(whole.as_bytes());
            });
        }
    });
    url
}

fn answer(request: &Value) -> Value {
    let messages = request["messages"].as_array().unwrap();
    let steps: usize = messages[0]["content"]
        .as_str()
        .and_then(|t| t.strip_prefix("steps:"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let step = messages.iter().filter(|m| m["role"] == "assistant").count();
    let content = if step + 1 < steps {
        json!([{"type": "tool_use", "id": format!("toolu_{step}"), "name": "noop", "input": {"n": step}}])
    } else {
        json!([{"type": "text", "text": "Done."}])
    };
    json!({"id": format!("msg_{step}"), "type": "message", "role": "assistant",
           "model": request["model"], "content": content,
           "stop_reason": if step + 1 < steps { "tool_use" } else { "end_turn" },
           "usage": {"input_tokens": 10, "output_tokens": 2}})
}

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
    format!("http://{}/proxy/anthropic", rx.recv().unwrap())
}

/// This binary as the agent of `steps` steps.
fn agent_command(steps: usize) -> String {
    let me = std::env::current_exe().unwrap();
    format!("FORKTRAIL_BENCH_AGENT={steps} '{}'", me.display())
}

/// Runs the agent of `steps` steps through the proxy at `base`: the session recorded.
fn record(store: &Store, base: &str, steps: usize) -> SessionId {
    let before: Vec<SessionId> = store
        .list()
        .unwrap()
        .into_iter()
        .map(|s| s.session)
        .collect();
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(agent_command(steps))
        .env("ANTHROPIC_BASE_URL", base)
        .status()
        .unwrap();
    assert!(status.success());
    let start = Instant::now();
    loop {
        let new = store
            .list()
            .unwrap()
            .into_iter()
            .map(|s| s.session)
            .find(|s| !before.contains(s));
        if let Some(id) = new {
            if store.load(&id, None).unwrap().len() == 2 * steps {
                return id;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(60), "not recorded");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The median wall time (ms) of the samples of arm `name` in an experiment on
/// `session` (all replayed with `at` = its length and `verify_baseline`, else live
/// from K = 1).
fn experiment(store: &Store, session: &SessionId, upstream: &str, ws: &Path, live: bool) -> f64 {
    let arm = Arm::parse(
        &format!("model=bench-arm,provider=anthropic,endpoint={upstream}"),
        |_| unreachable!(),
    )
    .unwrap();
    let steps = store.load(session, None).unwrap().len() / 2;
    let options = ExperimentOptions {
        compare: CompareOptions {
            at: 1,
            arms: vec![arm],
            samples: Some(SAMPLES),
            again: true,
            ..CompareOptions::default()
        },
        agent: agent_command(steps),
        workspace: ws.to_path_buf(),
        workspace_ref: None,
        verify: "true".into(),
        verify_baseline: !live,
        on_drift: OnDrift::Stop,
        sandbox: Sandbox::None,
        writable: Vec::new(),
        agent_timeout_secs: Some(120),
        work_dir: None,
        keep_workspaces: false,
    };
    let begun = store.begin_experiment(session, &options).unwrap();
    let c = store.run_experiment(&begun.comparison, 1).unwrap();
    let walls: Vec<f64> = c
        .arms
        .iter()
        .filter(|a| a.sample.is_some() && a.baseline != live)
        .map(|a| {
            let o = a.outcome.as_ref().expect("an outcome");
            assert_eq!(o.verdict, forktrail::Verdict::Pass, "{a:#?}");
            o.wall_ms as f64
        })
        .collect();
    assert_eq!(walls.len() as u64, SAMPLES);
    median(walls)
}

/// The median wall time (ms) of the agent of `steps` steps straight to the upstream,
/// started as the experiment starts it.
fn direct(upstream: &str, steps: usize) -> f64 {
    let walls = (0..SAMPLES)
        .map(|_| {
            let start = Instant::now();
            let status = std::process::Command::new("sh")
                .arg("-c")
                .arg(agent_command(steps))
                .env("ANTHROPIC_BASE_URL", upstream)
                .status()
                .unwrap();
            assert!(status.success());
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    median(walls)
}

fn main() {
    if let Ok(steps) = std::env::var("FORKTRAIL_BENCH_AGENT") {
        agent(steps.parse().unwrap());
        return;
    }
    let quick = std::env::var_os("FORKTRAIL_BENCH_QUICK").is_some()
        || !std::env::args().any(|a| a == "--bench");
    let many = if quick { 10 } else { 40 };
    let dir = tempfile::tempdir().unwrap();
    #[cfg(feature = "rocksdb")]
    let (store, kind) = (Store::open(dir.path().join("store")).unwrap(), "rocksdb");
    #[cfg(not(feature = "rocksdb"))]
    let (store, kind) = (Store::in_memory().unwrap(), "memory");
    let store = Arc::new(store);
    let ws = dir.path().join("workspace");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("README"), "a workspace of one file\n").unwrap();
    let model = upstream();
    let base = proxy(Arc::clone(&store), &model);
    let (one, s) = (record(&store, &base, 1), record(&store, &base, many));
    println!("store: {kind}; medians of {SAMPLES} samples; {many} steps against 1");
    let n = (many - 1) as f64;
    let (d1, ds) = (direct(&model, 1), direct(&model, many));
    let per_direct = (ds - d1) / n;
    println!("direct (no forktrail): 1 step {d1:.1} ms, {many} steps {ds:.1} ms: {per_direct:.3} ms a step");
    for (what, live) in [("replayed", false), ("live", true)] {
        let w1 = experiment(&store, &one, &model, &ws, live);
        let ws_ = experiment(&store, &s, &model, &ws, live);
        let per = (ws_ - w1) / n;
        println!(
            "{what}: 1 step {w1:.1} ms, {many} steps {ws_:.1} ms: {per:.3} ms a step, \
             forktrail's own {:.3} ms a step; per sample (copy, start, verify, write) \
             {:.1} ms",
            per - per_direct,
            w1 - per,
        );
    }
}
