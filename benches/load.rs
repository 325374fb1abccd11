//! The load test of `forktrail serve` (opt-in: `make load-test`): the real binary on a
//! RocksDB store, at its default settings, on 127.0.0.1 only, for a bounded time.
//!
//! 1. **Mixed traffic**: 32 connections, each sending, in turn, an authenticated append,
//!    a replay, the sessions page, a playback page, a shipped query, the session list
//!    and (every 16th request) an authenticated fork, for 60 s. Expected: no 5xx.
//! 2. **Anonymous flood**: 32 anonymous connections cycle through every read route (web
//!    UI pages, REST reads, shipped queries, SPARQL) as fast as they can, while 4
//!    authenticated writers append, for 30 s. Expected: at least 95 % of the appends
//!    succeed, with p99 under 100 ms.
//! 3. **List flood**: 32 anonymous connections ask for the session list (`GET /`) as
//!    fast as they can while one authenticated writer appends, one append after
//!    another, for 30 s. Expected: no 5xx but the read lane's 503s, every append
//!    answered 2xx, the slowest within the server's queue wait (10 s): readers cannot
//!    hold a writer.
//!
//! Prints a table per phase (requests, statuses, p50/p99 and the slowest by kind); with
//! `FORKTRAIL_BENCH_JSON=1` one JSON object. `FORKTRAIL_LOAD_SECONDS=N` scales the
//! phases down (phases 2 and 3 run half of N); `cargo test --benches` runs 2 s of each.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOKEN: &str = "load-test-token";
const MIXED_CLIENTS: usize = 32;
const FLOOD_CLIENTS: usize = 32;
const WRITERS: usize = 4;
/// The server's queue wait at its defaults: no request is answered later than this.
const QUEUE_WAIT: Duration = Duration::from_secs(10);

/// What one kind of request got: statuses counted, latencies kept.
#[derive(Default)]
struct Tally {
    statuses: BTreeMap<u16, u64>,
    failed: u64,
    latencies: Vec<Duration>,
}

type Tallies = Arc<Mutex<BTreeMap<&'static str, Tally>>>;

struct Server {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `forktrail serve --demo` at its defaults (a free port, a token for writes).
fn start() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_forktrail"))
        .arg("--store")
        .arg(dir.path().join("store"))
        .args(["serve", "--demo", "--bind", "127.0.0.1:0", "--token", TOKEN])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(stdout).lines();
    let base = loop {
        let line = lines.next().expect("serve printed its address").unwrap();
        if let Some(rest) = line.strip_prefix("forktrail is serving on ") {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    // Keep reading, so that the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Server {
        child,
        base,
        _dir: dir,
    }
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .pool_max_idle_per_host(1)
        .build()
        .unwrap()
}

/// Sends `request` and tallies it under `kind`.
fn send(tallies: &Tallies, kind: &'static str, request: reqwest::blocking::RequestBuilder) {
    let started = Instant::now();
    let result = request.send().and_then(|r| {
        let status = r.status().as_u16();
        r.bytes().map(|_| status)
    });
    let took = started.elapsed();
    let mut all = tallies.lock().unwrap();
    let tally = all.entry(kind).or_default();
    match result {
        Ok(status) => *tally.statuses.entry(status).or_default() += 1,
        Err(_) => tally.failed += 1,
    }
    tally.latencies.push(took);
}

/// The sessions of the demo tree, the deepest first.
fn sessions(base: &str) -> Vec<String> {
    let page: Value = client()
        .get(format!("{base}/sessions?limit=1000"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let mut sessions: Vec<(u64, String)> = page["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["depth"].as_u64().unwrap_or(0),
                s["session"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    sessions.sort();
    sessions.reverse();
    sessions.into_iter().map(|(_, s)| s).collect()
}

/// Each of `clients` threads runs `step(client, n)` until `stop` is set.
fn run_clients(
    clients: usize,
    stop: &Arc<AtomicBool>,
    step: impl Fn(&reqwest::blocking::Client, usize, u64) + Send + Sync + 'static,
) -> Vec<std::thread::JoinHandle<()>> {
    let step = Arc::new(step);
    (0..clients)
        .map(|c| {
            let (stop, step) = (Arc::clone(stop), Arc::clone(&step));
            std::thread::spawn(move || {
                let http = client();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    step(&http, c, n);
                    n += 1;
                }
            })
        })
        .collect()
}

fn for_seconds(seconds: f64, stop: &AtomicBool, threads: Vec<std::thread::JoinHandle<()>>) {
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
}

/// Phase 1: mixed traffic from 32 connections.
fn mixed(base: &str, seconds: f64) -> Tallies {
    let tallies: Tallies = Arc::default();
    let sessions = Arc::new(sessions(base));
    // Each client appends to a session of its own (a fork of the deepest demo session).
    let http = client();
    let own: Vec<String> = (0..MIXED_CLIENTS)
        .map(|c| {
            let plan: Value = http
                .post(format!("{base}/sessions/{}/fork", sessions[0]))
                .bearer_auth(TOKEN)
                .json(&json!({"label": format!("load-{c}")}))
                .send()
                .unwrap()
                .json()
                .unwrap();
            plan["session"].as_str().unwrap().to_string()
        })
        .collect();
    let own = Arc::new(own);
    let stop = Arc::new(AtomicBool::new(false));
    let (base_s, t) = (base.to_string(), Arc::clone(&tallies));
    let threads = run_clients(MIXED_CLIENTS, &stop, move |http, c, n| {
        let base = &base_s;
        let mine = &own[c];
        let some = &sessions[(c + n as usize) % sessions.len()];
        match n % 16 {
            0 => send(
                &t,
                "fork",
                http.post(format!("{base}/sessions/{some}/fork"))
                    .bearer_auth(TOKEN)
                    .json(&json!({})),
            ),
            k if k % 6 == 1 => send(
                &t,
                "append",
                http.post(format!("{base}/sessions/{mine}/turns"))
                    .bearer_auth(TOKEN)
                    .json(&json!({"role": "user", "content": format!("turn {n} of client {c}")})),
            ),
            k if k % 6 == 2 => send(
                &t,
                "replay",
                http.get(format!("{base}/sessions/{some}/replay")),
            ),
            k if k % 6 == 3 => send(&t, "ui sessions page", http.get(format!("{base}/"))),
            k if k % 6 == 4 => send(
                &t,
                "ui playback",
                http.get(format!("{base}/ui/sessions/{some}")),
            ),
            k if k % 6 == 5 => send(
                &t,
                "shipped query",
                http.get(format!("{base}/queries/fork-chain?id={some}"))
                    .header("Accept", "application/sparql-results+json"),
            ),
            _ => send(&t, "session list", http.get(format!("{base}/sessions"))),
        }
    });
    for_seconds(seconds, &stop, threads);
    tallies
}

/// Phase 2: an anonymous flood of every read route, and authenticated appends.
fn flood(base: &str, seconds: f64) -> Tallies {
    let tallies: Tallies = Arc::default();
    let sessions = sessions(base);
    let (deep, root) = (sessions[0].clone(), sessions.last().unwrap().clone());
    let routes: Arc<Vec<String>> = Arc::new(vec![
        "/".into(),
        "/?q=booking".into(),
        "/sessions".into(),
        format!("/sessions/{deep}"),
        format!("/sessions/{deep}/replay"),
        format!("/sessions/{deep}/turns"),
        format!("/sessions/{root}/branches"),
        format!("/sessions/{root}/tree"),
        format!("/ui/sessions/{deep}"),
        format!("/ui/sessions/{root}/tree"),
        format!("/ui/sessions/{deep}/turns/0"),
        format!("/ui/diff?a={root}&b={deep}"),
        "/ui/sparql".into(),
        "/queries".into(),
        format!("/queries/fork-chain?id={deep}"),
        "/queries/turns-per-model".into(),
        "/sparql?query=SELECT%20(COUNT(*)%20AS%20%3Fn)%20WHERE%20%7B%20%3Fs%20%3Fp%20%3Fo%20%7D"
            .into(),
    ]);
    let stop = Arc::new(AtomicBool::new(false));
    let (base_s, t) = (base.to_string(), Arc::clone(&tallies));
    let mut threads = run_clients(FLOOD_CLIENTS, &stop, move |http, c, n| {
        let route = &routes[(c + n as usize) % routes.len()];
        send(&t, "anonymous read", http.get(format!("{base_s}{route}")));
    });
    let writers_target = {
        let http = client();
        let plan: Value = http
            .post(format!("{base}/sessions/{deep}/fork"))
            .bearer_auth(TOKEN)
            .json(&json!({"label": "flood-writers"}))
            .send()
            .unwrap()
            .json()
            .unwrap();
        plan["session"].as_str().unwrap().to_string()
    };
    let (base_s, t) = (base.to_string(), Arc::clone(&tallies));
    threads.extend(run_clients(WRITERS, &stop, move |http, c, n| {
        send(
            &t,
            "authenticated append",
            http.post(format!("{base_s}/sessions/{writers_target}/turns"))
                .bearer_auth(TOKEN)
                .json(&json!({"role": "user", "content": format!("write {n} of {c}")})),
        );
    }));
    for_seconds(seconds, &stop, threads);
    tallies
}

/// Phase 3: anonymous requests for the session list, and one authenticated writer.
fn list_flood(base: &str, seconds: f64) -> Tallies {
    let tallies: Tallies = Arc::default();
    let deepest = sessions(base)[0].clone();
    let stop = Arc::new(AtomicBool::new(false));
    let (base_s, t) = (base.to_string(), Arc::clone(&tallies));
    let mut threads = run_clients(FLOOD_CLIENTS, &stop, move |http, _, _| {
        send(&t, "anonymous list page", http.get(format!("{base_s}/")));
    });
    let (base_s, t) = (base.to_string(), Arc::clone(&tallies));
    threads.extend(run_clients(1, &stop, move |http, _, n| {
        send(
            &t,
            "authenticated append",
            http.post(format!("{base_s}/sessions/{deepest}/turns"))
                .bearer_auth(TOKEN)
                .json(
                    &json!({"role": "user", "content": format!("write {n} under the list flood")}),
                ),
        );
    }));
    for_seconds(seconds, &stop, threads);
    tallies
}

fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

/// One row per kind: requests, share answered 2xx, 5xx, p50, p99.
fn report(tallies: &Tallies, seconds: f64) -> Value {
    let mut all = tallies.lock().unwrap();
    let mut rows = Vec::new();
    for (kind, tally) in all.iter_mut() {
        tally.latencies.sort();
        let total = tally.latencies.len() as u64;
        let ok: u64 = tally
            .statuses
            .iter()
            .filter(|(s, _)| (200..300).contains(*s))
            .map(|(_, n)| n)
            .sum();
        let server_errors: u64 = tally
            .statuses
            .iter()
            .filter(|(s, _)| **s >= 500)
            .map(|(_, n)| n)
            .sum();
        rows.push(json!({
            "kind": kind,
            "requests": total,
            "per_second": total as f64 / seconds,
            "ok_percent": 100.0 * ok as f64 / total.max(1) as f64,
            "server_errors": server_errors,
            "connection_failures": tally.failed,
            "statuses": tally.statuses.iter().map(|(s, n)| (s.to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
            "p50_ms": percentile_ms(&tally.latencies, 0.50),
            "p99_ms": percentile_ms(&tally.latencies, 0.99),
            "max_ms": percentile_ms(&tally.latencies, 1.0),
        }));
    }
    json!(rows)
}

fn print_table(title: &str, rows: &Value) {
    println!("\n{title}");
    println!(
        "{:<22} {:>9} {:>8} {:>7} {:>5} {:>9} {:>9} {:>9}",
        "kind", "requests", "req/s", "2xx %", "5xx", "p50 ms", "p99 ms", "max ms"
    );
    for row in rows.as_array().unwrap() {
        println!(
            "{:<22} {:>9} {:>8.0} {:>7.2} {:>5} {:>9.2} {:>9.2} {:>9.2}",
            row["kind"].as_str().unwrap(),
            row["requests"],
            row["per_second"].as_f64().unwrap(),
            row["ok_percent"].as_f64().unwrap(),
            row["server_errors"].as_u64().unwrap() + row["connection_failures"].as_u64().unwrap(),
            row["p50_ms"].as_f64().unwrap(),
            row["p99_ms"].as_f64().unwrap(),
            row["max_ms"].as_f64().unwrap(),
        );
    }
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let seconds: f64 = std::env::var("FORKTRAIL_LOAD_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if quick { 2.0 } else { 60.0 });
    let server = start();
    let mixed_rows = report(&mixed(&server.base, seconds), seconds);
    let flood_rows = report(&flood(&server.base, seconds / 2.0), seconds / 2.0);
    let list_rows = report(&list_flood(&server.base, seconds / 2.0), seconds / 2.0);
    let errors = |rows: &Value| -> u64 {
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| {
                r["server_errors"].as_u64().unwrap() + r["connection_failures"].as_u64().unwrap()
            })
            .sum()
    };
    let server_errors = errors(&mixed_rows);
    let list_append = list_rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "authenticated append")
        .cloned()
        .unwrap_or(Value::Null);
    let list_slowest_ms = list_append["max_ms"].as_f64().unwrap_or(f64::MAX);
    // Readers turned away by their lane (503, Retry-After) are its answer to a flood;
    // any other 5xx is a failure.
    let list_failures: u64 = list_rows
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["statuses"].as_object().unwrap().iter())
        .filter(|(status, _)| status.starts_with('5') && status.as_str() != "503")
        .map(|(_, n)| n.as_u64().unwrap())
        .sum();
    let appends = flood_rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "authenticated append")
        .cloned()
        .unwrap_or(Value::Null);
    let verdict = json!({
        "mixed_server_errors": server_errors,
        "flood_append_ok_percent": appends["ok_percent"],
        "flood_append_p99_ms": appends["p99_ms"],
        "list_flood_failures": list_failures,
        "list_flood_append_ok_percent": list_append["ok_percent"],
        "list_flood_slowest_append_ms": list_slowest_ms,
        "holds": server_errors == 0
            && appends["ok_percent"].as_f64().unwrap_or(0.0) >= 95.0
            && appends["p99_ms"].as_f64().unwrap_or(f64::MAX) < 100.0
            && list_failures == 0
            && list_append["ok_percent"].as_f64() == Some(100.0)
            && list_slowest_ms < QUEUE_WAIT.as_secs_f64() * 1e3,
    });
    if std::env::var_os("FORKTRAIL_BENCH_JSON").is_some() {
        println!(
            "{}",
            json!({"seconds": seconds, "mixed": mixed_rows, "flood": flood_rows,
                "list_flood": list_rows, "verdict": verdict})
        );
    } else {
        print_table(
            &format!("1. mixed traffic, {MIXED_CLIENTS} connections, {seconds} s"),
            &mixed_rows,
        );
        print_table(
            &format!(
                "2. anonymous flood ({FLOOD_CLIENTS} connections, every read route) and \
                 {WRITERS} authenticated writers, {} s",
                seconds / 2.0
            ),
            &flood_rows,
        );
        print_table(
            &format!(
                "3. list flood ({FLOOD_CLIENTS} anonymous connections on GET /) and one \
                 authenticated writer, {} s",
                seconds / 2.0
            ),
            &list_rows,
        );
        println!("\n{verdict}");
    }
    if !quick && verdict["holds"] != true {
        std::process::exit(1);
    }
}
