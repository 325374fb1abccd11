//! The MCP server's protocol edges, in process: the handshake's version choice,
//! notifications answered with nothing, JSON-RPC errors for what is not a tool call, and
//! a session's whole life (fork, append, replay, regenerate refused off-machine) as tool
//! calls. Then hostile input: lines that are not UTF-8 or too long, messages of too many
//! values, the batches JSON-RPC 2.0 § 6 names (empty, of non-objects, nested, of
//! notifications only) and batches too long or whose replies would be too large, in
//! process and through the `forktrail mcp` binary. The official MCP client drives
//! `forktrail mcp` in `python/tests/test_mcp.py`.

mod common;

use common::*;
use forktrail::mcp::{
    McpConfig, McpServer, BATCH_REPLY_BUDGET, MAX_BATCH, MAX_JSON_CONTAINERS, MAX_JSON_VALUES,
    MAX_LINE_BYTES,
};
use forktrail::{NewTurn, Role, Store};
use serde_json::{json, Value};
use std::sync::Arc;

fn server(allow_writes: bool) -> (Arc<Store>, McpServer) {
    let store = Arc::new(Store::in_memory().unwrap());
    session_with(&store, "s", 4);
    let config = McpConfig {
        allow_writes,
        allow_remote_models: false,
    };
    (Arc::clone(&store), McpServer::new(store, config))
}

/// The reply to one line, parsed (a line that is owed one).
fn reply(server: &McpServer, line: impl AsRef<[u8]>) -> Value {
    let text = server.handle_line(line).expect("a reply");
    serde_json::from_str(&text).unwrap()
}

fn call(server: &McpServer, tool: &str, arguments: Value) -> (bool, String) {
    let request = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                         "params": {"name": tool, "arguments": arguments}});
    let reply = reply(server, request.to_string());
    assert_eq!(reply["id"], 7);
    let result = &reply["result"];
    (
        result["isError"].as_bool().unwrap(),
        result["content"][0]["text"].as_str().unwrap().to_string(),
    )
}

#[test]
fn handshake_picks_the_clients_version_when_known() {
    let (_, server) = server(false);
    let init = |version: &str| {
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                             "params": {"protocolVersion": version, "capabilities": {},
                                        "clientInfo": {"name": "t", "version": "1"}}});
        reply(&server, request.to_string())["result"]["protocolVersion"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(init("2025-03-26"), "2025-03-26");
    assert_eq!(init("2024-11-05"), "2024-11-05");
    // A version it does not know gets its newest; the client decides.
    assert_eq!(init("2099-01-01"), "2025-11-25");
    assert!(server
        .handle_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .is_none());
}

#[test]
fn jsonrpc_errors_for_what_is_not_a_tool_result() {
    let (_, server) = server(false);
    let code = |line: &str| reply(&server, line)["error"]["code"].as_i64();
    assert_eq!(code("{not json"), Some(-32700));
    assert_eq!(
        code(r#"{"jsonrpc":"2.0","id":1,"method":"server/discover"}"#),
        Some(-32601)
    );
    assert_eq!(
        code(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rm_rf"}}"#),
        Some(-32602)
    );
    assert_eq!(
        code(
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"forktrail://sessions/zz/replay"}}"#
        ),
        Some(-32002)
    );
    // A batch is answered member by member, notifications left out.
    let replies = reply(
        &server,
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/cancelled"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]"#,
    );
    let replies = replies.as_array().unwrap();
    assert_eq!(replies.len(), 2);
    assert_eq!(replies[0]["result"], json!({}));
    assert_eq!(replies[1]["result"]["tools"].as_array().unwrap().len(), 15);
}

#[test]
fn a_session_through_tool_calls() {
    let (store, server) = server(true);
    let (error, text) = call(
        &server,
        "fork_session",
        json!({"session": "s", "at": 2, "label": "alt", "id": "f"}),
    );
    assert!(!error, "{text}");
    let (error, _) = call(
        &server,
        "append_turn",
        json!({"session": "f", "role": "assistant", "content": "other", "model": "m-2",
               "payload": {"any": ["json"]}}),
    );
    assert!(!error);
    let (_, text) = call(
        &server,
        "replay_session",
        json!({"session": "f", "full": true}),
    );
    let turns: Value = serde_json::from_str(&text).unwrap();
    let turns = turns["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 3);
    assert_eq!(turns[2]["payload"], json!({"any": ["json"]}));
    assert_eq!(turns[2]["model"], "m-2");
    assert_eq!(store.info(&sid("f")).unwrap().own_turns, 1);
    // The same refusals, worded as the engine words them.
    let (error, text) = call(&server, "fork_session", json!({"session": "s", "at": 9}));
    assert!(error);
    let direct = store
        .fork(
            &sid("s"),
            forktrail::ForkOptions {
                at: Some(9),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert_eq!(text, direct.to_string());
    let (error, text) = call(
        &server,
        "fork_session",
        json!({"session": "s", "colour": 1}),
    );
    assert!(error && text.contains("unknown field `colour`"), "{text}");
    // A model endpoint off this machine is refused unless the server allows it.
    let (error, text) = call(
        &server,
        "regenerate",
        json!({"session": "s", "at": 1, "endpoint": "http://example.com/v1", "allow_remote": true}),
    );
    assert!(error && text.contains("--allow-remote-models"), "{text}");
    let before = quads(&store);
    let (error, text) = call(
        &server,
        "query",
        json!({"query": "SELECT ?s WHERE { ?s ?p ?o }", "limit": 3}),
    );
    assert!(!error);
    let rows: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(rows["results"]["bindings"].as_array().unwrap().len(), 3);
    assert_eq!(rows["truncated"], true);
    let (error, text) = call(
        &server,
        "query",
        json!({"query": "DELETE WHERE { GRAPH ?g { ?s ?p ?o } }"}),
    );
    assert!(error, "an update is not a query: {text}");
    assert_eq!(quads(&store), before);
}

/// Polls `job_status` until the job is no longer running.
#[test]
fn list_branches_pages_a_wide_parent_each_fork_once() {
    let (store, server) = server(false);
    for n in 0..7 {
        fork_at(
            &store,
            &sid("s"),
            1 + n % 4,
            &format!("f{n}"),
            &format!("b{n}"),
        );
    }
    let mut seen = Vec::new();
    let mut cursor = Value::Null;
    loop {
        let mut args = json!({"session": "s", "limit": 3});
        if !cursor.is_null() {
            args["cursor"] = cursor.clone();
        }
        let (error, text) = call(&server, "list_branches", args);
        assert!(!error, "{text}");
        let page: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(page["total"], 7);
        let branches = page["branches"].as_array().unwrap();
        assert!(branches.len() <= 3);
        seen.extend(
            branches
                .iter()
                .map(|b| b["session"].as_str().unwrap().to_string()),
        );
        cursor = page["next"].clone();
        if cursor.is_null() {
            break;
        }
    }
    seen.sort();
    let all: Vec<String> = (0..7).map(|n| format!("f{n}")).collect();
    assert_eq!(seen, all, "every fork once across the pages");
    let (error, text) = call(
        &server,
        "list_branches",
        json!({"session": "s", "limit": 0}),
    );
    assert!(error && text.contains("limit"), "{text}");
}

fn settled(server: &McpServer, job: &str) -> Value {
    for _ in 0..600 {
        let (error, text) = call(server, "job_status", json!({ "job": job }));
        assert!(!error, "{text}");
        let state: Value = serde_json::from_str(&text).unwrap();
        if state["status"] != "running" {
            return state;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("job {job} still running after 30 s");
}

#[test]
fn swap_model_and_regenerate_run_as_jobs_the_agent_follows() {
    let (store, server) = server(true);
    let stub = stub::start(stub::Mode::Echo);
    // The meta-agent's fork_session(id, at, swap_model): a fork answered by that model.
    let (error, text) = call(
        &server,
        "fork_session",
        json!({"session": "s", "at": 3, "swap_model": "model-b", "endpoint": stub.url}),
    );
    assert!(!error, "{text}");
    let job: Value = serde_json::from_str(&text).unwrap();
    let done = settled(&server, job["job"].as_str().unwrap());
    assert_eq!(done["status"], "complete", "{done}");
    let fork = sid(done["fork"].as_str().unwrap());
    let turns = store.load(&fork, None).unwrap();
    assert_eq!(turns.len(), 4);
    assert_eq!(turns[3].model.as_deref(), Some("model-b"));
    assert_eq!(turns[3].content, stub::echo("model-b", "s 2"));
    // A slow one, cancelled through the server.
    let slow = stub::start(stub::Mode::Slow(std::time::Duration::from_secs(20)));
    let (_, text) = call(
        &server,
        "regenerate",
        json!({"session": "s", "at": 1, "model": "model-c", "endpoint": slow.url}),
    );
    let job: Value = serde_json::from_str(&text).unwrap();
    let id = job["job"].as_str().unwrap();
    assert_eq!(job["status"], "running");
    let (error, text) = call(&server, "cancel_job", json!({ "job": id }));
    assert!(!error, "{text}");
    assert_eq!(settled(&server, id)["status"], "cancelled");
    // A plain fork calls no model, so an endpoint there is a mistake.
    let (error, text) = call(
        &server,
        "fork_session",
        json!({"session": "s", "endpoint": stub.url}),
    );
    assert!(
        error && text.contains("endpoint is for swap_model"),
        "{text}"
    );
}

/// Runs `server` over `input` as `forktrail mcp` does, and parses each line it writes.
fn serve(server: &McpServer, input: &[u8]) -> Vec<Value> {
    let mut output = Vec::new();
    server.run(input, &mut output).unwrap();
    String::from_utf8(output)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn ping(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string()
}

#[test]
fn an_invalid_utf8_line_is_a_parse_error_and_the_server_reads_on() {
    let (_, server) = server(false);
    let mut input = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\xff\"}\n".to_vec();
    input.extend_from_slice(b"\xc3\x28\n");
    input.extend_from_slice(ping(2).as_bytes());
    let replies = serve(&server, &input);
    assert_eq!(replies.len(), 3, "{replies:?}");
    for bad in &replies[..2] {
        assert_eq!(bad["error"]["code"], -32700, "{bad}");
        assert_eq!(bad["id"], Value::Null);
        let message = bad["error"]["message"].as_str().unwrap();
        assert!(message.contains("not UTF-8"), "{message}");
    }
    assert!(replies[0]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("offset 38"));
    assert_eq!(replies[2], json!({"jsonrpc": "2.0", "id": 2, "result": {}}));
}

#[test]
fn a_line_past_the_limit_is_refused_and_skipped_and_a_line_at_the_limit_is_answered() {
    let (_, server) = server(false);
    // A ping padded with an unknown member to exactly `len` bytes.
    let padded = |id: u64, len: usize| {
        let head = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","pad":""#);
        let mut line = head.into_bytes();
        line.resize(len - 2, b'x');
        line.extend_from_slice(b"\"}");
        line
    };
    let mut input = padded(1, MAX_LINE_BYTES + 1);
    input.push(b'\n');
    input.extend_from_slice(&padded(2, MAX_LINE_BYTES));
    input.push(b'\n');
    input.extend_from_slice(ping(3).as_bytes());
    let replies = serve(&server, &input);
    assert_eq!(replies.len(), 3);
    assert_eq!(replies[0]["error"]["code"], -32600);
    assert_eq!(replies[0]["id"], Value::Null);
    let message = replies[0]["error"]["message"].as_str().unwrap();
    assert!(message.contains("longer than 64 MiB"), "{message}");
    assert_eq!(replies[1], json!({"jsonrpc": "2.0", "id": 2, "result": {}}));
    assert_eq!(replies[2], json!({"jsonrpc": "2.0", "id": 3, "result": {}}));
}

#[test]
fn a_message_of_too_many_json_values_is_refused_unparsed() {
    let (_, server) = server(false);
    let with_params = |params: String| {
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":{params}}}}}"#)
    };
    let zeros = |n: usize| format!("[{}]", vec!["0"; n].join(","));
    let objects = |n: usize| format!("[{}]", vec!["{}"; n].join(","));
    // Just within both limits: answered.
    let within = with_params(zeros(MAX_JSON_VALUES - 10));
    assert_eq!(reply(&server, within)["result"], json!({}));
    let within = with_params(objects(MAX_JSON_CONTAINERS - 10));
    assert_eq!(reply(&server, within)["result"], json!({}));
    for past in [
        with_params(zeros(MAX_JSON_VALUES)),
        with_params(objects(MAX_JSON_CONTAINERS)),
    ] {
        let refused = reply(&server, past);
        assert_eq!(refused["error"]["code"], -32600, "{refused}");
        assert_eq!(refused["id"], Value::Null);
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains("at most 1000000 JSON values"), "{message}");
    }
}

#[test]
fn an_empty_batch_is_one_invalid_request_error() {
    let (_, server) = server(false);
    for empty in ["[]", " [ ] "] {
        assert_eq!(
            reply(&server, empty),
            json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"},
                   "id": null})
        );
    }
}

#[test]
fn non_objects_and_nested_batches_get_an_invalid_request_error_each() {
    let (_, server) = server(false);
    let invalid = json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"},
               "id": null});
    assert_eq!(
        reply(&server, "[1,2,3]"),
        json!([invalid, invalid, invalid])
    );
    let replies = reply(
        &server,
        r#"[[], {"jsonrpc":"2.0","id":1,"method":"ping"}, [{"jsonrpc":"2.0","id":2,"method":"ping"}], "x", null]"#,
    );
    assert_eq!(
        replies,
        json!([invalid, {"jsonrpc": "2.0", "id": 1, "result": {}}, invalid, invalid, invalid])
    );
    // Alone, too: a message that is not an object, or names no method, is answered.
    assert_eq!(reply(&server, "1"), invalid);
    let no_method = reply(&server, r#"{"jsonrpc":"2.0","method":1,"params":"bar"}"#);
    assert_eq!(no_method["error"]["code"], -32600);
    assert_eq!(no_method["id"], Value::Null);
    let no_method = reply(&server, r#"{"jsonrpc":"2.0","id":"q"}"#);
    assert_eq!(no_method["error"]["code"], -32600);
    assert_eq!(no_method["id"], "q");
}

#[test]
fn a_batch_of_only_notifications_gets_no_reply_at_all() {
    let (_, server) = server(false);
    let batch = r#"[{"jsonrpc":"2.0","method":"notifications/initialized"},
                    {"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}]"#;
    assert_eq!(server.handle_line(batch.replace('\n', "")), None);
    // Nor does `run` write an empty line for it.
    let input = format!("{}\n{}\n", batch.replace('\n', ""), ping(5));
    assert_eq!(
        serve(&server, input.as_bytes()),
        vec![json!({"jsonrpc": "2.0", "id": 5, "result": {}})]
    );
}

#[test]
fn a_batch_of_more_than_the_most_messages_is_refused_whole_and_none_is_run() {
    let (store, server) = server(true);
    let append = |id: usize| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "append_turn",
                          "arguments": {"session": "s", "role": "user", "content": "x"}}})
    };
    let batch: Vec<Value> = (0..=MAX_BATCH).map(append).collect();
    let refused = reply(&server, Value::Array(batch).to_string());
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert_eq!(refused["id"], Value::Null);
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("at most 10000 messages"), "{message}");
    assert_eq!(store.info(&sid("s")).unwrap().length, 4, "nothing was run");
    // Two appends in a batch run.
    let batch = Value::Array(vec![append(1), append(2)]).to_string();
    assert_eq!(reply(&server, batch).as_array().unwrap().len(), 2);
    assert_eq!(store.info(&sid("s")).unwrap().length, 6);
}

#[test]
fn a_10000_call_batch_replaying_a_1_mib_turn_is_answered_in_under_64_mib() {
    let (store, server) = server(false);
    store
        .append(&sid("s"), NewTurn::new(Role::User, "y".repeat(1 << 20)))
        .unwrap();
    let calls: Vec<Value> = (0..10_000)
        .map(|id| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "replay_session", "arguments": {"session": "s"}}})
        })
        .collect();
    let text = server.handle_line(Value::Array(calls).to_string()).unwrap();
    assert!(text.len() < 64 << 20, "a reply of {} bytes", text.len());
    let replies: Value = serde_json::from_str(&text).unwrap();
    let replies = replies.as_array().unwrap();
    assert_eq!(replies.len(), 10_000);
    // Calls run in order until the replies pass the budget; each later one is answered
    // with an error saying it was not run.
    let ran = replies
        .iter()
        .take_while(|r| r.get("result").is_some())
        .count();
    assert!(ran >= 2, "only {ran} ran");
    // It was the budget that stopped them: the reply had passed it before the first call
    // not run, and not before the last call run.
    let written = |calls: usize| -> usize {
        let replies: usize = replies[..calls].iter().map(|r| r.to_string().len()).sum();
        1 + replies + calls.saturating_sub(1)
    };
    assert!(written(ran - 1) <= BATCH_REPLY_BUDGET && written(ran) > BATCH_REPLY_BUDGET);
    for (n, reply) in replies.iter().enumerate() {
        assert_eq!(reply["id"], n, "in order, one per call");
        if n < ran {
            assert_eq!(reply["result"]["isError"], false);
            let turns = reply["result"]["structuredContent"]["turns"]
                .as_array()
                .unwrap();
            assert_eq!(turns[4]["content"].as_str().unwrap().len(), 1 << 20);
        } else {
            assert_eq!(reply["error"]["code"], -32000, "{reply}");
            let message = reply["error"]["message"].as_str().unwrap();
            assert!(message.contains("passed 32 MiB"), "{message}");
        }
    }
}

#[cfg(feature = "rocksdb")]
#[test]
fn the_binary_answers_invalid_utf8_with_a_parse_error_then_initializes_and_exits_0() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_forktrail"))
        .arg("mcp")
        .arg("--store")
        .arg(dir.path().join("store"))
        .env_remove("FORKTRAIL_STORE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                       "clientInfo": {"name": "t", "version": "1"}}});
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"\xff\xfe not UTF-8\n").unwrap();
    writeln!(stdin, "{initialize}").unwrap();
    drop(stdin); // EOF: the server ends
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    let replies: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert_eq!(replies[0]["error"]["code"], -32700);
    assert_eq!(replies[0]["id"], Value::Null);
    assert_eq!(replies[1]["id"], 1);
    assert_eq!(replies[1]["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(replies[1]["result"]["serverInfo"]["name"], "forktrail");
}
