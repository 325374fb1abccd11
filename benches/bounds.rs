//! Memory per input, measured on the `forktrail` binary as a user runs it: the peak
//! resident memory (VmHWM) of the process, against the size of what it was given.
//!
//! - `watch`: `forktrail watch --json` over a folder holding a Claude Code log whose
//!   second line is one 200 MB message, then a small log; read once the small log's
//!   import is reported (the big one's is over by then).
//! - `otlp history json`, `otlp history protobuf`: `forktrail serve` on a RocksDB store
//!   taking one OTLP request of ~19 MB at `/v1/traces`: one conversation of 134 chat
//!   spans, each span's input the whole history so far (as agent loops export it), 1 KB
//!   messages; each request to a fresh server. The HTTP status and the response are
//!   printed.
//! - `otlp distinct json`: the same size in 6,000 chat spans of their own
//!   conversations (a system prompt, a question, an answer: every turn new).
//!
//! - `reopen`: the free disk RocksDB needs to open a store again after a full disk (what
//!   forktrail's 507 says to free): a store whose write-ahead log holds 2, 8 and 32 MB
//!   of incompressible literals not yet flushed, reopened on a tmpfs with less and less
//!   room (a binary search to 64 KB); root only (it mounts the tmpfs), else skipped.
//!
//! `cargo bench --bench bounds` prints a table; `FORKTRAIL_BENCH_JSON=1` one JSON
//! object of named figures; `FORKTRAIL_BENCH_QUICK=1` (or a run without `--bench`)
//! a 20 MB line, 40 spans of one conversation and 600 of their own, and no reopen;
//! `FORKTRAIL_BENCH_ONLY=watch|otlp|reopen` one part.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    let quick = std::env::var_os("FORKTRAIL_BENCH_QUICK").is_some()
        || !std::env::args().any(|a| a == "--bench");
    let (line_mb, spans, distinct) = if quick {
        (20, 40, 600)
    } else {
        (200, 134, 6000)
    };
    let only = std::env::var("FORKTRAIL_BENCH_ONLY").ok();
    let part = |name: &str| only.as_deref().is_none_or(|o| o == name);
    let mut figures = Vec::new();
    if part("watch") {
        figures.push(watch_with_a_long_line(line_mb));
    }
    if part("otlp") {
        let body = otlp_history(spans);
        let json = body.to_string().into_bytes();
        figures.push(serve_one_request("otlp history json", &json, true));
        let proto: opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest =
            serde_json::from_value(body).unwrap();
        figures.push(serve_one_request(
            "otlp history protobuf",
            &prost::Message::encode_to_vec(&proto),
            false,
        ));
        let body = otlp_distinct(distinct).to_string().into_bytes();
        figures.push(serve_one_request("otlp distinct json", &body, true));
    }
    let rooms: Vec<(u64, u64, u64)> = if quick || !part("reopen") {
        Vec::new()
    } else {
        [2_000_000, 8_000_000, 32_000_000]
            .into_iter()
            .map_while(reopen_room)
            .collect()
    };
    if std::env::var_os("FORKTRAIL_BENCH_JSON").is_some() {
        let object: serde_json::Map<String, Value> = figures
            .iter()
            .flat_map(|f| {
                [
                    (format!("{} input MB", f.name), json!(f.input_mb)),
                    (format!("{} peak MB", f.name), json!(f.peak_mb)),
                ]
            })
            .collect();
        let mut object = object;
        for (content, log, needed) in &rooms {
            object.insert(
                format!("reopen log MB ({content} bytes)"),
                json!(*log as f64 / 1e6),
            );
            object.insert(
                format!("reopen needs MB ({content} bytes)"),
                json!(*needed as f64 / 1e6),
            );
        }
        println!("{}", Value::Object(object));
        return;
    }
    println!(
        "| input | size | peak RSS | before | peak / size | outcome |\n| --- | --- | --- | --- | --- | --- |"
    );
    for f in &figures {
        println!(
            "| {} | {:.1} MB | {:.0} MB | {:.0} MB | {:.1}x | {} |",
            f.name,
            f.input_mb,
            f.peak_mb,
            f.before_mb,
            (f.peak_mb - f.before_mb) / f.input_mb,
            f.outcome
        );
    }
    if !rooms.is_empty() {
        println!("\n| write-ahead log | free disk a reopen needs | beyond the log |\n| --- | --- | --- |");
        for (_, log, needed) in &rooms {
            println!(
                "| {:.2} MB | {:.2} MB | {:.2} MB |",
                *log as f64 / 1e6,
                *needed as f64 / 1e6,
                (*needed as f64 - *log as f64) / 1e6
            );
        }
    }
}

/// The least free disk (to 64 KB) on which a RocksDB store holding `content` bytes of
/// unflushed literals opens again, with the size of its write-ahead log: `(content,
/// log, needed)`. `None` where no tmpfs can be mounted.
fn reopen_room(content: u64) -> Option<(u64, u64, u64)> {
    let (mut lo, mut hi) = (0u64, 2 * content + (4 << 20));
    let mut log = 0;
    while hi - lo > 64 << 10 {
        let mid = (lo + hi) / 2;
        let (opened, size) = reopen_with(content, mid)?;
        log = size;
        if opened {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some((content, log, hi))
}

/// One trial: a fresh tmpfs, a store with `content` bytes of literals left in its
/// write-ahead log, the disk filled but for `free` bytes, and an open. Whether it
/// opened, and the log's size.
fn reopen_with(content: u64, free: u64) -> Option<(bool, u64)> {
    use oxigraph::model::{GraphName, Literal, NamedNode, Quad};
    let dir = tempfile::tempdir().unwrap();
    let size = format!("size={}", 3 * content + (32 << 20));
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &size, "tmpfs"])
        .arg(dir.path())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("note: cannot mount a tmpfs here (not root?): reopen figures skipped");
        return None;
    }
    let path = dir.path().join("store");
    let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
    {
        let store = oxigraph::store::Store::open(&path).unwrap();
        let graph = NamedNode::new("urn:forktrail:session:s").unwrap();
        let predicate = NamedNode::new("https://w3id.org/forktrail/ns#content").unwrap();
        for i in 0..content / 100_000 {
            let text: String = (0..100_000)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    char::from(b'!' + (seed % 90) as u8)
                })
                .collect();
            let subject = NamedNode::new(format!("urn:forktrail:session:s/turn/{i}")).unwrap();
            store
                .extend([Quad::new(
                    subject,
                    predicate.clone(),
                    Literal::new_simple_literal(text),
                    GraphName::NamedNode(graph.clone()),
                )])
                .unwrap();
        }
        // Dropped without a flush: what it took stays in the log, as after a write
        // that failed on a full disk.
    }
    let log: u64 = std::fs::read_dir(&path)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    let avail = fs4::available_space(dir.path()).unwrap();
    let filler = std::fs::File::create(dir.path().join("filler")).unwrap();
    let mut writer = std::io::BufWriter::new(filler);
    let chunk = vec![1u8; 1 << 16];
    // Whole pages, so that at least `free` bytes stay free.
    let mut left = avail.saturating_sub(free) / 4096 * 4096;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        writer.write_all(&chunk[..n]).unwrap();
        left -= n as u64;
    }
    writer.into_inner().unwrap().sync_all().unwrap();
    let opened = oxigraph::store::Store::open(&path).is_ok();
    let _ = Command::new("umount").arg("-l").arg(dir.path()).status();
    Some((opened, log))
}

struct Figure {
    name: &'static str,
    input_mb: f64,
    /// The process's resident memory before the input, and at its peak (MB).
    before_mb: f64,
    peak_mb: f64,
    outcome: String,
}

/// `VmRSS` and `VmHWM` of process `pid`, in MB.
fn memory(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> f64 {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap();
        let kb: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kb / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn watch_with_a_long_line(line_mb: usize) -> Figure {
    let temp = tempfile::tempdir().unwrap();
    let logs = temp.path().join("projects");
    std::fs::create_dir_all(&logs).unwrap();
    let line = |uuid: &str, parent: Option<&str>, text: &str| {
        let role = if uuid.starts_with('u') {
            "user"
        } else {
            "assistant"
        };
        json!({"type": role, "uuid": uuid, "parentUuid": parent, "sessionId": uuid,
               "message": {"role": role, "content": text}})
        .to_string()
            + "\n"
    };
    {
        let mut big = std::fs::File::create(logs.join("a-big.jsonl")).unwrap();
        big.write_all(line("u1", None, "Read the dump.").as_bytes())
            .unwrap();
        big.write_all(line("a1", Some("u1"), &"x".repeat(line_mb << 20)).as_bytes())
            .unwrap();
        big.write_all(line("u2", Some("a1"), "Thanks.").as_bytes())
            .unwrap();
    }
    std::fs::write(logs.join("b-small.jsonl"), line("u9", None, "Hello.")).unwrap();
    let size = std::fs::metadata(logs.join("a-big.jsonl")).unwrap().len();
    let mut child = Command::new(env!("CARGO_BIN_EXE_forktrail"))
        .arg("--store")
        .arg(temp.path().join("store"))
        .args(["watch", "--json"])
        .arg(&logs)
        .env_remove("FORKTRAIL_STORE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let before = memory(child.id()).0;
    let mut outcome = Vec::new();
    for report in BufReader::new(child.stdout.take().unwrap()).lines() {
        let report: Value = serde_json::from_str(&report.unwrap()).unwrap();
        let file = report["file"].as_str().unwrap_or_default().to_string();
        outcome.push(format!(
            "{}: {} turns",
            Path::new(&file).file_name().unwrap().to_string_lossy(),
            report["turns"]
        ));
        if file.ends_with("b-small.jsonl") {
            break;
        }
    }
    let peak = memory(child.id()).1;
    stop(child);
    Figure {
        name: "watch",
        input_mb: size as f64 / 1e6,
        before_mb: before,
        peak_mb: peak,
        outcome: outcome.join(", "),
    }
}

/// A message of about 1 KB, numbered `i`, of the user (even) or the assistant (odd).
fn message(i: usize) -> Value {
    let role = if i.is_multiple_of(2) {
        "user"
    } else {
        "assistant"
    };
    let text = format!("message {i} ") + &"lorem ipsum ".repeat(85);
    json!({"role": role, "parts": [{"type": "text", "content": text}]})
}

/// A chat span numbered `s` of `conversation`, with `input` and `output` messages.
fn chat_span(s: usize, conversation: &str, input: Vec<Value>, output: Vec<Value>) -> Value {
    let start = (s as u64 + 1) * 1_000_000_000;
    let attr = |k: &str, v: String| json!({"key": k, "value": {"stringValue": v}});
    json!({
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": format!("{:016x}", s + 1),
        "name": "chat m", "kind": 3,
        "startTimeUnixNano": start.to_string(),
        "endTimeUnixNano": (start + 500_000_000).to_string(),
        "attributes": [
            attr("gen_ai.operation.name", "chat".into()),
            attr("gen_ai.conversation.id", conversation.into()),
            attr("gen_ai.response.model", "m".into()),
            attr("gen_ai.input.messages", Value::Array(input).to_string()),
            attr("gen_ai.output.messages", Value::Array(output).to_string()),
        ],
        "status": {}
    })
}

fn trace_request(spans: Vec<Value>) -> Value {
    json!({"resourceSpans": [{
        "resource": {"attributes": []},
        "scopeSpans": [{"scope": {"name": "bench"}, "spans": spans}]
    }]})
}

/// One conversation of `spans` chat spans: span `i`'s input is the whole history so
/// far (2i + 1 messages), its output one answer.
fn otlp_history(spans: usize) -> Value {
    trace_request(
        (0..spans)
            .map(|s| {
                let input = (0..=2 * s).map(message).collect();
                chat_span(s, "bench-conversation", input, vec![message(2 * s + 1)])
            })
            .collect(),
    )
}

/// `spans` chat spans, each of a conversation of its own: a system prompt and a
/// question in, an answer out.
fn otlp_distinct(spans: usize) -> Value {
    trace_request(
        (0..spans)
            .map(|s| {
                let system = json!({"role": "system", "parts": [{"type": "text",
                    "content": format!("You are assistant {s}.")}]});
                let input = vec![system, message(3 * s)];
                chat_span(s, &format!("c{s}"), input, vec![message(3 * s + 1)])
            })
            .collect(),
    )
}

fn serve_one_request(name: &'static str, body: &[u8], json: bool) -> Figure {
    let temp = tempfile::tempdir().unwrap();
    let store = temp.path().join("store");
    let child = Command::new(env!("CARGO_BIN_EXE_forktrail"))
        .arg("--store")
        .arg(&store)
        .args(["serve", "--bind", "127.0.0.1:0", "--token", "t"])
        .env_remove("FORKTRAIL_STORE")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url_file = store.join("forktrail-serve.url");
    let started = Instant::now();
    let url = loop {
        if let Ok(url) = std::fs::read_to_string(&url_file) {
            break url.trim().replace("/sparql", "/v1/traces");
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "serve did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let before = memory(child.id()).0;
    let response = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()
        .unwrap()
        .post(&url)
        .bearer_auth("t")
        .header(
            "Content-Type",
            if json {
                "application/json"
            } else {
                "application/x-protobuf"
            },
        )
        .body(body.to_vec())
        .send();
    let peak = memory(child.id()).1;
    let outcome = match response {
        Ok(r) => {
            let status = r.status().as_u16();
            let bytes = r.bytes().unwrap_or_default();
            let text = if json {
                String::from_utf8_lossy(&bytes).to_string()
            } else {
                match <opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse
                    as prost::Message>::decode(&bytes[..]) {
                    Ok(decoded) => format!("{:?}", decoded.partial_success),
                    Err(_) => String::from_utf8_lossy(&bytes).to_string(),
                }
            };
            format!("{status} {}", text.chars().take(160).collect::<String>())
        }
        Err(e) => format!("failed: {e}"),
    };
    stop(child);
    Figure {
        name,
        input_mb: body.len() as f64 / 1e6,
        before_mb: before,
        peak_mb: peak,
        outcome,
    }
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}
