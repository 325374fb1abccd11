//! The recording model proxy (`serve --upstream`, `forktrail proxy`), driven by clients
//! nobody here wrote: the real Claude Code (npm, pinned) through `/proxy/anthropic` to
//! a scripted Anthropic stub, Codex CLI (npm, pinned) through `/proxy/openai` and the
//! Responses API, the `openai` Python package streaming and not; what is recorded is
//! checked against what the upstream received, request by request, field by field. And
//! what goes wrong: a client gone mid-stream, an upstream cut short, failing, silent,
//! absent or answering garbage.

use crate::claude_code::{self, PROMPT};
use crate::common;

use common::anthropic::{self, AnthropicStub};
use common::installed;
use common::server::Server;
use common::upstream::{self, Answer, Upstream};
use forktrail::server::ServerConfig;
use forktrail::{Kind, ModelCallInfo, ProxyConfig, Role, SessionId, Store, UpstreamKind};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The agent's key: it must reach the upstream and nothing else.
const KEY: &str = "sk-ant-proxy-4c1d9e7f0b2a8e6d5c3b1a0f9e8d7c6b";

/// A server whose proxy forwards `kind` to `upstream`, on an in-memory store.
fn proxy_to(kind: UpstreamKind, upstream: &str) -> Server {
    let mut proxy = ProxyConfig::default();
    proxy.upstreams.insert(kind, upstream.to_string());
    proxy.prices.insert(
        "claude-sonnet-4-5".into(),
        forktrail::Price {
            input: 3.0,
            output: 15.0,
            cached: Some(0.3),
        },
    );
    Server::start(
        Arc::new(Store::in_memory().unwrap()),
        ServerConfig {
            proxy,
            ..ServerConfig::default()
        },
    )
}

/// Every recorded call, by session.
fn calls(store: &Store) -> Vec<ModelCallInfo> {
    let mut out = Vec::new();
    for s in store.list().unwrap() {
        out.extend(store.model_calls(&s.session).unwrap());
    }
    out
}

/// Waits until `n` calls are recorded (they are recorded as they end, off the path of
/// the answer).
fn recorded(store: &Store, n: usize) -> Vec<ModelCallInfo> {
    let start = Instant::now();
    loop {
        let all = calls(store);
        if all.len() >= n || start.elapsed() > Duration::from_secs(30) {
            assert_eq!(all.len(), n, "calls recorded: {all:#?}");
            return all;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `claude -p prompt` (with `more` arguments) in `project`, its model endpoint the
/// proxy of `server`.
fn run_claude(
    claude: &Path,
    server: &Server,
    home: &Path,
    project: &Path,
    prompt: &str,
    more: &[&str],
) -> Value {
    let tmp = home.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let out = Command::new(claude)
        .args(["-p", prompt, "--output-format", "json", "--max-turns", "8"])
        .args(more)
        .args(["--allowedTools", "Bash(echo:*)", "Agent"])
        .current_dir(project)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("TMPDIR", &tmp)
        .env("ANTHROPIC_BASE_URL", server.url("/proxy/anthropic"))
        .env("ANTHROPIC_API_KEY", KEY)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "claude failed: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// Every request the stub received is one recorded call, whose request rebuilt from the
/// store equals it field by field.
fn each_request_rebuilds(store: &Store, stub: &AnthropicStub, calls: &[ModelCallInfo]) {
    let rebuilt: Vec<Value> = calls
        .iter()
        .map(|c| store.rebuilt_request(&c.session, &c.id).unwrap())
        .collect();
    for (i, sent) in stub.messages_requests().iter().enumerate() {
        assert!(
            rebuilt.contains(sent),
            "request {i} the stub received is no recorded call's: {sent:#}"
        );
    }
}

/// Everything the store holds, as N-Quads.
fn dump(store: &Store) -> String {
    let mut out = Vec::new();
    store
        .export(None, forktrail::ExportFormat::NQuads, &mut out)
        .unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn the_real_claude_code_through_the_proxy_is_recorded_as_the_model_saw_it() {
    let Some(claude) = claude_code::claude() else {
        return;
    };
    let stub = anthropic::start(claude_code::script);
    let server = proxy_to(UpstreamKind::Anthropic, &stub.url);
    let store = &server.store;
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("project");
    std::fs::create_dir_all(&project).unwrap();

    let result = run_claude(&claude, &server, home.path(), &project, PROMPT, &[]);
    assert_eq!(result["result"], json!("All done."), "{result}");
    let sent = stub.messages_requests();
    let calls = recorded(store, sent.len());
    each_request_rebuilds(store, &stub, &calls);

    // The key reached the stub on every call, and is nowhere in the store; the calls
    // are the key's principal (its fingerprint), priced, and attributed to the model.
    for request in stub.requests().iter().filter(|r| r.is_messages()) {
        let key = request.headers.iter().find(|(n, _)| n == "x-api-key");
        assert_eq!(key.map(|(_, v)| v.as_str()), Some(KEY));
    }
    assert!(!dump(store).contains(KEY), "the key is in the store");
    for call in &calls {
        assert!(
            call.principal
                .as_deref()
                .is_some_and(|p| p.starts_with("key-")),
            "{call:?}"
        );
        assert_eq!(call.model.as_deref(), Some("claude-sonnet-4-5"), "{call:?}");
        assert_eq!(call.outcome, forktrail::CallOutcome::Complete, "{call:?}");
        assert!(call.cost_usd.is_some_and(|c| c > 0.0), "{call:?}");
    }

    // The main conversation is one session, no fork: its parallel tool calls are one
    // step followed by their results, in call order.
    let sessions = store.list().unwrap();
    for s in &sessions {
        if let (Some(parent), Some(at)) = (&s.parent, s.forked_at_index) {
            let theirs = store.load(parent, None).unwrap();
            let ours = store.load(&s.session, None).unwrap();
            panic!(
                "session {} forks {parent} at {at}:\n{:?}\nvs\n{:?}",
                s.session,
                theirs
                    .get(at as usize)
                    .map(|t| (&t.role, &t.content, &t.payload)),
                ours.get(at as usize)
                    .map(|t| (&t.role, &t.content, &t.payload))
            );
        }
    }
    let main = sessions
        .iter()
        .find(|s| {
            let turns = store.load(&s.session, None).unwrap();
            turns.iter().any(|t| t.content.contains(PROMPT))
                && turns.last().is_some_and(|t| t.content == "All done.")
        })
        .expect("a session ends with the main conversation's answer");
    let turns = store.load(&main.session, None).unwrap();
    let last_main = sent
        .iter()
        .rev()
        .find(|r| {
            claude_code::first_prompt(r["messages"].as_array().unwrap()).as_deref() == Some(PROMPT)
        })
        .unwrap();
    let last_calls: Vec<&ModelCallInfo> =
        calls.iter().filter(|c| c.session == main.session).collect();
    let last = last_calls.iter().max_by_key(|c| c.request_turns).unwrap();
    assert_eq!(
        store.rebuilt_request(&main.session, &last.id).unwrap(),
        *last_main
    );
    assert_eq!(last.answer_index, Some(turns.len() as u64 - 1));
    let step = turns
        .iter()
        .position(|t| t.kind == Kind::ToolCall && t.content == "Three things at once.")
        .expect("the three calls are one turn");
    let ids: Vec<Option<&str>> = turns[step + 1..step + 4]
        .iter()
        .map(|t| {
            assert_eq!(t.role, Role::Tool);
            t.tool_call_id.as_deref()
        })
        .collect();
    // In the order Claude Code sent them (as their tools finished).
    let sent_ids: Vec<Option<&str>> = last_main["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .take(3)
        .map(|b| b["tool_use_id"].as_str())
        .collect();
    assert_eq!(ids, sent_ids);
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [Some("toolu_agent"), Some("toolu_one"), Some("toolu_two")]
    );

    // `--resume` sends the stored history again with a new prompt: the same family
    // grows (the session is extended, or forked where the history differs), and no
    // new root repeats the conversation.
    let session_id = result["session_id"].as_str().unwrap().to_string();
    let roots_before: Vec<SessionId> = sessions.iter().map(|s| s.session.clone()).collect();
    let resumed = run_claude(
        &claude,
        &server,
        home.path(),
        &project,
        "And once more.",
        &["--resume", &session_id],
    );
    assert_eq!(resumed["is_error"], json!(false), "{resumed}");
    let sent = stub.messages_requests();
    let calls = recorded(store, sent.len());
    each_request_rebuilds(store, &stub, &calls);
    let newest = calls.iter().max_by_key(|c| c.started_at.clone()).unwrap();
    let info = store.info(&newest.session).unwrap();
    assert_eq!(info.fork_root, main.session, "{info:#?}");
    let new_roots: Vec<_> = store
        .list()
        .unwrap()
        .into_iter()
        .filter(|s| s.parent.is_none() && !roots_before.contains(&s.session))
        .filter(|s| {
            store
                .load(&s.session, None)
                .unwrap()
                .iter()
                .any(|t| t.content.contains(PROMPT))
        })
        .collect();
    assert!(
        new_roots.is_empty(),
        "a new root repeats the conversation: {new_roots:#?}"
    );
    assert!(!dump(store).contains(KEY));
}

/// The events of an Anthropic answer saying `words` (one delta each), whole or not.
fn anthropic_events(words: &[&str], whole: bool) -> Vec<(&'static str, Value)> {
    let mut events = vec![
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "usage": {"input_tokens": 12, "output_tokens": 0}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
    ];
    for w in words {
        events.push(("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}})));
    }
    if whole {
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ));
        events.push(("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}})));
        events.push(("message_stop", json!({"type": "message_stop"})));
    }
    events
}

/// The last user message's text of an Anthropic or OpenAI request.
fn said_last(body: &Value) -> String {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .cloned()
        .unwrap_or_default();
    match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
        _ => String::new(),
    }
}

/// An Anthropic upstream whose answer depends on the last thing the user said: `cut`
/// (a stream that ends half-way), `slow` (a stream of 40 words, 100 ms apart), `fail`
/// (500, echoing the key it was sent), `garbage` (200, not JSON), `silent` (nothing for
/// 3 s); anything else is answered "Fine." as one message.
fn moody_upstream() -> Upstream {
    upstream::start(|_, body| {
        let said = said_last(body);
        match said.as_str() {
            "cut" => Answer {
                cut: true,
                ..Answer::events(&anthropic_events(&["Half ", "an"], false), Duration::ZERO)
            },
            "slow" => {
                let words = vec!["word "; 40];
                let mut answer =
                    Answer::events(&anthropic_events(&words, true), Duration::from_millis(100));
                answer.parts[0].0 = Duration::ZERO;
                answer
            }
            "fail" => Answer::json(
                500,
                &json!({"type": "error", "error": {"type": "api_error", "message": format!("upstream trouble with key {KEY}")}}),
            ),
            "garbage" => Answer {
                parts: vec![(Duration::ZERO, "<html>not an answer</html>".into())],
                ..Answer::json(200, &json!({}))
            },
            "silent" => Answer {
                silence: Duration::from_secs(3),
                ..Answer::json(200, &json!({}))
            },
            _ => Answer::json(
                200,
                &json!({"id": "msg_2", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": "Fine."}], "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 2}}),
            ),
        }
    })
}

/// Sends `said` as a one-message conversation through the proxy of `server`.
fn ask(server: &Server, said: &str, stream: bool) -> reqwest::blocking::Response {
    server
        .http
        .post(server.url("/proxy/anthropic/v1/messages"))
        .header("x-api-key", KEY)
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": "claude-sonnet-4-5", "max_tokens": 100, "stream": stream,
                      "messages": [{"role": "user", "content": [{"type": "text", "text": said, "cache_control": {"type": "ephemeral"}}]}]}))
        .send()
        .unwrap()
}

/// The one recorded call of the session whose first turn says `said`, with its turns.
fn call_for(store: &Store, said: &str) -> (ModelCallInfo, Vec<forktrail::Turn>) {
    for s in store.list().unwrap() {
        let turns = store.load(&s.session, None).unwrap();
        if turns.first().is_some_and(|t| t.content == said) {
            let calls = store.model_calls(&s.session).unwrap();
            assert_eq!(calls.len(), 1, "{calls:#?}");
            return (calls.into_iter().next().unwrap(), turns);
        }
    }
    panic!("no session says {said:?}");
}

/// A store holding a call of each outcome: complete (with a `cache_control` mark, an
/// override), incomplete (a stream cut short), failed (an upstream's 500).
pub(crate) fn proxied_store() -> Arc<Store> {
    let up = moody_upstream();
    let server = proxy_to(UpstreamKind::Anthropic, &up.url);
    assert_eq!(ask(&server, "hello", false).status(), 200);
    let _ = ask(&server, "cut", true).text();
    assert_eq!(ask(&server, "fail", false).status(), 500);
    recorded(&server.store, 3);
    Arc::clone(&server.store)
}

#[test]
fn a_client_gone_mid_stream_and_an_upstream_cut_short_leave_incomplete_turns_and_nothing_half_written(
) {
    let up = moody_upstream();
    let server = proxy_to(UpstreamKind::Anthropic, &up.url);
    let store = &server.store;
    // The upstream ends its stream half-way: the client gets what came.
    let text = ask(&server, "cut", true).text().unwrap();
    assert!(
        text.contains("Half ") && !text.contains("message_stop"),
        "{text}"
    );
    // The client reads the first bytes and goes away.
    let mut response = ask(&server, "slow", true);
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("word") {
        let mut chunk = [0u8; 256];
        let n = std::io::Read::read(&mut response, &mut chunk).unwrap();
        assert!(n > 0, "the stream ended");
        seen.extend_from_slice(&chunk[..n]);
    }
    drop(response);
    recorded(store, 2);
    for (said, begun) in [("cut", "Half an"), ("slow", "word ")] {
        let (call, turns) = call_for(store, said);
        assert_eq!(
            call.outcome,
            forktrail::CallOutcome::Incomplete,
            "{call:#?}"
        );
        assert!(call.error.is_some(), "{call:#?}");
        assert_eq!(turns.len(), 2, "{turns:#?}");
        let answer = &turns[1];
        assert_eq!((answer.role, call.answer_index), (Role::Assistant, Some(1)));
        assert!(answer.content.starts_with(begun), "{answer:#?}");
        if said == "slow" {
            assert!(
                answer.content.len() < 40 * 5,
                "the whole answer was recorded: {answer:?}"
            );
        }
        // The turn says it is incomplete, in the graph.
        let ask = format!(
            "ASK {{ GRAPH ?g {{ ?t <https://w3id.org/forktrail/ns#content> {} ; <https://w3id.org/forktrail/ns#incomplete> true }} }}",
            oxigraph::model::Literal::new_simple_literal(&answer.content)
        );
        assert!(
            matches!(
                store.query(&ask, &[]).unwrap(),
                oxigraph::sparql::QueryResults::Boolean(true)
            ),
            "{ask}"
        );
    }
    assert!(store.verify(None).unwrap().is_clean());
}

#[test]
fn an_upstream_that_fails_answers_garbage_is_silent_or_absent_reaches_the_agent_as_such_and_is_recorded(
) {
    let up = moody_upstream();
    let server = proxy_to(UpstreamKind::Anthropic, &up.url);
    let store = &server.store;
    let failed = ask(&server, "fail", false);
    assert_eq!(failed.status(), 500);
    let body = failed.text().unwrap();
    assert!(
        body.contains("upstream trouble") && !body.contains(KEY),
        "{body}"
    );
    let garbage = ask(&server, "garbage", false);
    assert_eq!(garbage.status(), 200);
    assert_eq!(garbage.text().unwrap(), "<html>not an answer</html>");
    recorded(store, 2);
    for (said, status, why) in [
        ("fail", Some(500), "500"),
        (
            "garbage",
            Some(200),
            "not one of the anthropic-messages API",
        ),
    ] {
        let (call, turns) = call_for(store, said);
        assert_eq!(call.outcome, forktrail::CallOutcome::Failed, "{call:#?}");
        assert_eq!(call.upstream_status, status);
        let error = call.error.unwrap();
        assert!(error.contains(why) && !error.contains(KEY), "{error}");
        // The request is recorded, no answer is.
        assert_eq!((turns.len(), call.answer_index), (1, None), "{turns:#?}");
    }

    // An upstream that never answers in time: 504; one that is not there: 502, in the
    // API's error shape. Both recorded as failed calls.
    let mut config = ProxyConfig::default();
    config
        .upstreams
        .insert(UpstreamKind::Anthropic, up.url.clone());
    config.timeout = Some(Duration::from_secs(1));
    let hasty = Server::start(
        Arc::new(Store::in_memory().unwrap()),
        ServerConfig {
            proxy: config,
            ..ServerConfig::default()
        },
    );
    let silent = ask(&hasty, "silent", false);
    assert_eq!(silent.status(), 504);
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nowhere = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let absent = proxy_to(UpstreamKind::Anthropic, &nowhere);
    let refused = ask(&absent, "anyone?", false);
    assert_eq!(refused.status(), 502);
    let shape: Value = refused.json().unwrap();
    assert_eq!(shape["type"], json!("error"), "{shape}");
    for (server, said) in [(&hasty, "silent"), (&absent, "anyone?")] {
        recorded(&server.store, 1);
        let (call, turns) = call_for(&server.store, said);
        assert_eq!(
            (call.outcome, call.upstream_status, turns.len()),
            (forktrail::CallOutcome::Failed, None, 1)
        );
        assert!(!dump(&server.store).contains(KEY));
    }
}

/// The Responses API's events for a response whose output is `items`.
fn response_events(items: &[Value]) -> Vec<(&'static str, Value)> {
    let response = json!({"id": "resp_1", "object": "response", "created_at": 1, "status": "completed",
        "model": "gpt-5", "output": items,
        "usage": {"input_tokens": 40, "output_tokens": 6, "total_tokens": 46, "input_tokens_details": {"cached_tokens": 8}}});
    let mut events = vec![(
        "response.created",
        json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "model": "gpt-5", "output": []}}),
    )];
    for (n, item) in items.iter().enumerate() {
        events.push((
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": n, "item": item}),
        ));
        events.push((
            "response.output_item.done",
            json!({"type": "response.output_item.done", "output_index": n, "item": item}),
        ));
    }
    events.push((
        "response.completed",
        json!({"type": "response.completed", "response": response}),
    ));
    events
}

/// Codex's model: two commands at once, then, once their outputs are in, a word.
fn codex_script(_: &str, body: &Value) -> Answer {
    let input = body["input"].as_array().cloned().unwrap_or_default();
    let ran = input.iter().any(|i| i["type"] == "function_call_output");
    let call = |n: &str| {
        json!({"type": "function_call", "id": format!("fc_{n}"), "call_id": format!("call_{n}"),
        "name": "exec_command", "arguments": json!({"cmd": format!("echo {n}")}).to_string(), "status": "completed"})
    };
    let items = if ran {
        vec![
            json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "Printed both.", "annotations": []}]}),
        ]
    } else {
        vec![call("one"), call("two")]
    };
    Answer::events(&response_events(&items), Duration::ZERO)
}

#[test]
fn codex_through_the_responses_api_is_recorded_as_the_model_saw_it() {
    let Some(codex) = installed("FORKTRAIL_CODEX", "Codex CLI (npm)", "codex") else {
        return;
    };
    let up = upstream::start(codex_script);
    let server = proxy_to(UpstreamKind::Openai, &up.url);
    let store = &server.store;
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let base = server.url("/proxy/openai/v1");
    let out = Command::new(&codex)
        .args(["exec", "--skip-git-repo-check", "-m", "gpt-5"])
        // Codex's own sandbox takes bubblewrap when it is installed (the experiments'
        // tests install it), through a helper its npm package does not put on PATH:
        // its commands (two echoes in a temp folder) run without it.
        .args(["--sandbox", "danger-full-access"])
        .args([
            "-c",
            "model_provider=forktrail",
            "-c",
            "model_providers.forktrail.name=\"forktrail\"",
        ])
        .args([
            "-c",
            &format!("model_providers.forktrail.base_url=\"{base}\""),
        ])
        .args(["-c", "model_providers.forktrail.env_key=\"OPENAI_API_KEY\""])
        .args(["-c", "model_providers.forktrail.wire_api=\"responses\""])
        .arg("Print one and two.")
        .current_dir(&project)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("Printed both."),
        "codex failed: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sent = up.bodies();
    assert_eq!(sent.len(), 2, "Codex made other calls: {sent:#?}");
    let calls = recorded(store, 2);
    for (body, call) in sent.iter().zip(&calls) {
        assert_eq!(
            &store.rebuilt_request(&call.session, &call.id).unwrap(),
            body
        );
        assert_eq!(call.api, forktrail::Api::OpenaiResponses);
        assert_eq!((call.input_tokens, call.cached_tokens), (Some(40), Some(8)));
    }
    // One conversation: the second call extended the first's session; the two
    // commands are one step, their outputs (which Codex really ran) two tool turns.
    assert_eq!(calls[0].session, calls[1].session);
    let sessions = store.list().unwrap();
    assert_eq!(sessions.len(), 1, "{sessions:#?}");
    let turns = store.load(&calls[0].session, None).unwrap();
    let n = turns.len();
    assert_eq!(turns[n - 1].content, "Printed both.");
    assert_eq!(
        (turns[n - 2].role, turns[n - 3].role),
        (Role::Tool, Role::Tool)
    );
    // In the order Codex sent them (as its commands finished: either may be first; the
    // rebuilt requests above are equal to what it sent).
    let outputs = [&turns[n - 3].content, &turns[n - 2].content];
    assert!(
        outputs.iter().any(|c| c.contains("one")) && outputs.iter().any(|c| c.contains("two")),
        "{outputs:?}"
    );
    assert_eq!(turns[n - 4].kind, Kind::ToolCall);
    let calls_made: Value =
        serde_json::from_str(turns[n - 4].tool_calls.as_deref().unwrap()).unwrap();
    assert_eq!(calls_made.as_array().unwrap().len(), 2);
    assert!(!dump(store).contains(KEY));
}

/// The `openai` Python package (what the Agents SDK and most apps call through): a
/// tool call answered without streaming, its result sent back, the answer streamed.
const OPENAI_CLIENT: &str = r#"
import json, sys, openai
client = openai.OpenAI(base_url=sys.argv[1], api_key=sys.argv[2])
messages = [{"role": "system", "content": "You add numbers."}, {"role": "user", "content": "What is 2 + 3?"}]
tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}}]
first = client.chat.completions.create(model="gpt-x", messages=messages, tools=tools)
call = first.choices[0].message.tool_calls[0]
messages.append(first.choices[0].message.model_dump(exclude_none=True))
messages.append({"role": "tool", "tool_call_id": call.id, "content": "5"})
text = ""
for chunk in client.chat.completions.create(model="gpt-x", messages=messages, tools=tools, stream=True, stream_options={"include_usage": True}):
    if chunk.choices and chunk.choices[0].delta.content:
        text += chunk.choices[0].delta.content
print(json.dumps({"answer": text}))
"#;

/// The model of the OpenAI client's conversation: a call of `add`, then "2 + 3 = 5."
/// streamed a word at a time.
fn chat_script(_: &str, body: &Value) -> Answer {
    let answered = body["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
    if !answered {
        return Answer::json(
            200,
            &common::stub::completion(
                "gpt-x",
                None,
                &[("call_add", "add", json!({"a": 2, "b": 3}))],
                (30, 9, 0),
                "tool_calls",
            ),
        );
    }
    let mut chunks: Vec<(&str, Value)> = ["2 + 3", " = ", "5."]
        .iter()
        .map(|w| ("", json!({"id": "c", "object": "chat.completion.chunk", "model": "gpt-x", "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": null}]})))
        .collect();
    chunks.push(("", json!({"id": "c", "object": "chat.completion.chunk", "model": "gpt-x", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})));
    chunks.push(("", json!({"id": "c", "object": "chat.completion.chunk", "model": "gpt-x", "choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 4, "total_tokens": 54}})));
    chunks.push(("", json!("[DONE]")));
    Answer::events(&chunks, Duration::from_millis(5))
}

#[test]
fn the_openai_python_client_streaming_and_not_is_recorded_as_one_conversation() {
    let python = "python3";
    let has_openai = Command::new(python)
        .args(["-c", "import openai"])
        .status()
        .is_ok_and(|s| s.success());
    if !has_openai {
        assert!(
            std::env::var_os("CI").is_none(),
            "no openai package for {python} (`make python`)"
        );
        eprintln!("the openai Python package is not installed (`make python`): skipped");
        return;
    }
    let up = upstream::start(chat_script);
    let server = proxy_to(UpstreamKind::Openai, &up.url);
    let store = &server.store;
    let out = Command::new(python)
        .args(["-c", OPENAI_CLIENT, &server.url("/proxy/openai/v1"), KEY])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        serde_json::from_str::<Value>(stdout.trim()).unwrap()["answer"],
        json!("2 + 3 = 5.")
    );
    let sent = up.bodies();
    let calls = recorded(store, 2);
    for (body, call) in sent.iter().zip(&calls) {
        assert_eq!(
            &store.rebuilt_request(&call.session, &call.id).unwrap(),
            body
        );
        assert_eq!(call.outcome, forktrail::CallOutcome::Complete);
    }
    assert_eq!(
        (calls[1].input_tokens, calls[1].output_tokens),
        (Some(50), Some(4))
    );
    assert_eq!(calls[0].session, calls[1].session, "{calls:#?}");
    let records = store.replay(&calls[0].session, None).unwrap();
    let shape: Vec<(Role, &str)> = records
        .iter()
        .map(|r| (r.role, r.content.as_str()))
        .collect();
    // The system message is the calls' instructions, not a turn.
    assert_eq!(
        shape,
        [
            (Role::User, "What is 2 + 3?"),
            (Role::Assistant, ""),
            (Role::Tool, "5"),
            (Role::Assistant, "2 + 3 = 5.")
        ]
    );
    assert!(records[1]
        .tool_calls
        .as_deref()
        .is_some_and(|c| c.contains("call_add")));
    assert!(!dump(store).contains(KEY));
}

/// Sends `messages` through the proxy of `server`, with `headers`; the answer's text.
fn converse(server: &Server, messages: &Value, headers: &[(&str, &str)]) -> String {
    let mut request = server
        .http
        .post(server.url("/proxy/anthropic/v1/messages"))
        .header("x-api-key", KEY);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let answer: Value = request
        .json(&json!({"model": "claude-sonnet-4-5", "max_tokens": 50, "messages": messages}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    answer["content"][0]["text"].as_str().unwrap().to_string()
}

#[test]
fn an_edited_message_and_a_retried_step_fork_where_they_diverge_and_headers_name_and_link_sessions()
{
    // The upstream says "answer N" for its Nth call: a retry is answered otherwise.
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = Arc::clone(&count);
    let up = upstream::start(move |_, _| {
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Answer::json(
            200,
            &json!({"type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": format!("answer {n}")}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 5, "output_tokens": 2}}),
        )
    });
    let server = proxy_to(UpstreamKind::Anthropic, &up.url);
    let store = &server.store;
    let user = |text: &str| json!({"role": "user", "content": text});
    let said =
        |text: &str| json!({"role": "assistant", "content": [{"type": "text", "text": text}]});
    let first = converse(
        &server,
        &json!([user("plan a trip")]),
        &[("x-forktrail-session", "trip")],
    );
    let second = converse(
        &server,
        &json!([user("plan a trip"), said(&first), user("to Lisbon")]),
        &[],
    );
    // The same history goes on: one session, named by the header.
    recorded(store, 2);
    let trip = SessionId::new("trip").unwrap();
    assert_eq!(store.load(&trip, None).unwrap().len(), 4);
    // The playback page shows the calls as they are recorded, each with its answer.
    let page = server.get("/ui/sessions/trip", "text/html").text().unwrap();
    assert!(page.contains("Model calls (2)"), "{page}");
    assert!(page.contains("/ui/sessions/trip?turn=3"), "{page}");
    // The user edits their second message: a fork at 2, sharing the first two turns.
    converse(
        &server,
        &json!([user("plan a trip"), said(&first), user("to Porto")]),
        &[],
    );
    // The step is retried and answered otherwise: a fork at 3.
    converse(
        &server,
        &json!([user("plan a trip"), said(&first), user("to Lisbon")]),
        &[],
    );
    // Retried again... and the upstream's answer is new each time; and a sub-agent
    // starts a root linked to the session that spawned it.
    converse(
        &server,
        &json!([user("find flights")]),
        &[("x-forktrail-parent", "trip")],
    );
    let calls = recorded(store, 5);
    let forks: Vec<(u64, String)> = store
        .branches(&trip)
        .unwrap()
        .into_iter()
        .map(|b| {
            let turns = store.load(&b.session, None).unwrap();
            (
                b.forked_at_index,
                turns[b.forked_at_index as usize].content.clone(),
            )
        })
        .collect();
    assert_eq!(forks.len(), 2, "{forks:?}");
    assert!(forks.contains(&(2, "to Porto".into())), "{forks:?}");
    assert!(forks.contains(&(3, "answer 3".into())), "{forks:?}");
    assert_eq!(store.load(&trip, None).unwrap()[3].content, second);
    let sub = calls
        .iter()
        .find(|c| c.session != trip && store.info(&c.session).unwrap().parent.is_none())
        .unwrap();
    let info = store.info(&sub.session).unwrap();
    let link = info.subagent.expect("a sub-agent link");
    assert_eq!(link.spawned_in_session.as_deref(), Some("trip"));
    // Derived from the turn the spawning session had reached.
    assert_eq!(
        link.spawned_by.map(|t| (t.session, t.index)),
        Some((trip.clone(), 3))
    );
    assert!(store.verify(None).unwrap().is_clean());
}
