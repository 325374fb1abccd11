//! The MCP server's protocol edges through the official Rust SDK's transport, in
//! process: the handshake's version choice, the stateless 2026-07-28 requests
//! (`server/discover`, no handshake), notifications answered with nothing, JSON-RPC
//! errors for what is not a tool call; a session's whole life (fork, append, replay,
//! regenerate refused off-machine) as tool calls; then hostile input on stdio (lines
//! that are not UTF-8, not JSON, too long, of too many values), in process and through
//! the `forktrail mcp` binary. `/mcp` of `forktrail serve` (tokens, Origin, versions
//! counted) is in `mcp_http.rs`; the official Python client drives both transports in
//! `python/tests/test_mcp.py`, the MCP Inspector's CLI in `mcp_inspector.rs`.

use crate::common;

use common::*;
use forktrail::mcp::{McpConfig, McpServer, MAX_JSON_VALUES, MAX_LINE_BYTES};
use forktrail::Store;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

fn server(allow_writes: bool) -> (Arc<Store>, McpServer) {
    let store = Arc::new(Store::in_memory().unwrap());
    session_with(&store, "s", 4);
    let config = McpConfig {
        allow_writes,
        allow_remote_models: false,
        ..McpConfig::default()
    };
    (Arc::clone(&store), McpServer::new(store, config))
}

/// A tool call as a client makes it: whether the result is an error, and its text.
fn call(server: &McpServer, tool: &str, arguments: Value) -> (bool, String) {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object")
    };
    let result = runtime()
        .block_on(server.call(tool, arguments, false))
        .unwrap();
    let text = result.content[0].as_text().unwrap().text.clone();
    (result.is_error == Some(true), text)
}

/// A client on the other end of a pipe the server serves, as `forktrail mcp` serves
/// stdio: it writes lines and reads the server's, one JSON message each.
struct Pipe {
    runtime: tokio::runtime::Runtime,
    to_server: Option<tokio::io::DuplexStream>,
    from_server: BufReader<tokio::io::DuplexStream>,
}

impl Pipe {
    fn open(server: McpServer) -> Self {
        let runtime = runtime();
        let (to_server, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, from_server) = tokio::io::duplex(1 << 16);
        runtime.spawn(server.serve(server_in, server_out));
        Self {
            runtime,
            to_server: Some(to_server),
            from_server: BufReader::new(from_server),
        }
    }

    /// A pipe past the `initialize` handshake of `version`.
    fn initialized(server: McpServer, version: &str) -> Self {
        let mut pipe = Self::open(server);
        pipe.send(initialize(version));
        let reply = pipe.recv();
        assert_eq!(reply["result"]["protocolVersion"], version, "{reply}");
        pipe
    }

    fn send(&mut self, line: impl AsRef<[u8]>) {
        let pipe = self.to_server.as_mut().unwrap();
        self.runtime.block_on(async {
            pipe.write_all(line.as_ref()).await.unwrap();
            pipe.write_all(b"\n").await.unwrap();
        });
    }

    /// The server's next message (within 30 s).
    fn recv(&mut self) -> Value {
        let mut line = String::new();
        let read = self.from_server.read_line(&mut line);
        let n = self
            .runtime
            .block_on(async { tokio::time::timeout(Duration::from_secs(30), read).await })
            .expect("a reply within 30 s")
            .unwrap();
        assert!(n > 0, "the server closed its output");
        serde_json::from_str(&line).unwrap()
    }

    /// Ends the input; the server's output then ends too.
    fn close(&mut self) -> usize {
        self.to_server = None;
        let mut rest = String::new();
        let read = self.from_server.read_line(&mut rest);
        self.runtime
            .block_on(async { tokio::time::timeout(Duration::from_secs(30), read).await })
            .expect("the server ends with its input")
            .unwrap()
    }
}

fn initialize(version: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
           "params": {"protocolVersion": version, "capabilities": {},
                      "clientInfo": {"name": "t", "version": "1"}}})
    .to_string()
}

fn ping(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string()
}

/// The `_meta` a 2026-07-28 request carries in place of the handshake.
fn modern() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": {}})
}

#[test]
fn handshake_picks_the_clients_version_when_known() {
    let (_, server) = server(false);
    for (asked, given) in [
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        // A version it does not know gets its newest with a handshake; the client
        // decides.
        ("2099-01-01", "2025-11-25"),
    ] {
        let mut pipe = Pipe::open(server.clone());
        pipe.send(initialize(asked));
        let reply = pipe.recv();
        assert_eq!(
            reply["result"]["protocolVersion"], given,
            "{asked}: {reply}"
        );
        assert_eq!(reply["result"]["serverInfo"]["name"], "forktrail");
        // A notification is owed nothing: the next reply is the ping's.
        pipe.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        pipe.send(ping(2));
        assert_eq!(pipe.recv()["id"], 2);
        assert_eq!(pipe.close(), 0);
    }
}

#[test]
fn the_stateless_protocol_needs_no_handshake() {
    let (_, server) = server(true);
    let mut pipe = Pipe::open(server);
    pipe.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
               "params": {"_meta": modern()}})
        .to_string(),
    );
    let discovered = pipe.recv();
    let versions = &discovered["result"]["supportedVersions"];
    assert_eq!(
        versions,
        &json!([
            "2024-11-05",
            "2025-03-26",
            "2025-06-18",
            "2025-11-25",
            "2026-07-28"
        ]),
        "{discovered}"
    );
    assert!(discovered["result"]["capabilities"]["tools"].is_object());
    pipe.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "fork_session", "arguments": {"session": "s", "at": 2, "id": "f"},
                          "_meta": modern()}})
        .to_string(),
    );
    let forked = pipe.recv();
    assert_eq!(forked["result"]["isError"], false, "{forked}");
    assert_eq!(forked["result"]["structuredContent"]["forked_at_index"], 2);
    // A request without the version in its `_meta` is refused, not guessed at.
    pipe.send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}"#);
    let refused = pipe.recv();
    assert_eq!(refused["id"], 3);
    assert!(refused["error"]["code"].is_i64(), "{refused}");
}

#[test]
fn jsonrpc_errors_for_what_is_not_a_tool_result() {
    let (_, server) = server(false);
    let mut pipe = Pipe::initialized(server, "2025-06-18");
    let mut code = |id: u64, method: &str, params: Value| {
        pipe.send(
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        );
        let reply = pipe.recv();
        assert_eq!(reply["id"], id);
        reply["error"]["code"].as_i64()
    };
    assert_eq!(
        code(1, "tools/call", json!({"name": "rm_rf"})),
        Some(-32602)
    );
    let missing = code(
        2,
        "resources/read",
        json!({"uri": "forktrail://sessions/zz/replay"}),
    );
    assert_eq!(missing, Some(-32002));
    assert_eq!(code(3, "no/such/method", json!({})), Some(-32601));
    assert_eq!(code(4, "tools/list", json!({})), None);
}

#[test]
fn tools_resources_and_templates_are_listed() {
    let (_, server) = server(false);
    let mut pipe = Pipe::initialized(server, "2025-11-25");
    pipe.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    let tools = pipe.recv();
    let tools = tools["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for name in [
        "list_sessions",
        "search",
        "replay_session",
        "fork_session",
        "compare_models",
        "comparison",
        "query",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    let fork = tools.iter().find(|t| t["name"] == "fork_session").unwrap();
    assert_eq!(fork["annotations"]["readOnlyHint"], false);
    assert_eq!(fork["inputSchema"]["required"], json!(["session"]));
    let replay = tools
        .iter()
        .find(|t| t["name"] == "replay_session")
        .unwrap();
    assert_eq!(replay["annotations"]["readOnlyHint"], true);
    pipe.send(r#"{"jsonrpc":"2.0","id":3,"method":"resources/list"}"#);
    let resources = pipe.recv();
    assert_eq!(
        resources["result"]["resources"][0]["uri"],
        "forktrail://sessions/s/replay"
    );
    pipe.send(r#"{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"forktrail://sessions/s/replay"}}"#);
    let read = pipe.recv();
    let records: Value =
        serde_json::from_str(read["result"]["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(records.as_array().unwrap().len(), 4);
    pipe.send(r#"{"jsonrpc":"2.0","id":5,"method":"resources/templates/list"}"#);
    let templates = pipe.recv();
    assert_eq!(
        templates["result"]["resourceTemplates"][0]["uriTemplate"],
        "forktrail://sessions/{session}/replay"
    );
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

/// Polls `job_status` until the job is no longer running.
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

#[test]
fn a_query_past_the_time_limit_is_cancelled_and_the_next_one_answers() {
    let store = Arc::new(Store::in_memory().unwrap());
    session_with(&store, "big", 40);
    let config = McpConfig {
        query_timeout: Duration::from_millis(200),
        ..McpConfig::default()
    };
    let server = McpServer::new(store, config);
    // A join of every quad with every quad, a hundred times over: past the check on
    // cost, far past 200 ms.
    let values: Vec<String> = (1..=100).map(|i| i.to_string()).collect();
    let slow = format!(
        "SELECT (COUNT(*) AS ?n) WHERE {{ ?a ?b ?c . ?d ?e ?f . VALUES ?x {{ {} }} }}",
        values.join(" ")
    );
    let (error, text) = call(&server, "query", json!({ "query": slow }));
    assert!(error, "{text}");
    assert_eq!(
        text,
        "the query was cancelled: it ran past the time limit of 200ms"
    );
    let (error, text) = call(&server, "query", json!({ "query": "ASK { ?s ?p ?o }" }));
    assert!(!error, "{text}");
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap()["boolean"],
        true
    );
}

#[test]
fn lines_that_are_not_json_or_not_utf8_are_skipped_and_the_server_reads_on() {
    let (_, server) = server(false);
    let mut pipe = Pipe::initialized(server, "2025-06-18");
    // As the official SDKs do, input that does not parse gets no reply (a reply would
    // have no id to name, and a peer echoing it back would loop).
    pipe.send(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\xff\"}");
    pipe.send(b"\xc3\x28");
    pipe.send("{not json");
    pipe.send(ping(2));
    assert_eq!(pipe.recv()["id"], 2, "the next message is answered");
}

#[test]
fn a_line_past_the_limits_is_dropped_unparsed_and_the_next_is_answered() {
    let (_, server) = server(false);
    let mut pipe = Pipe::initialized(server, "2025-06-18");
    // Longer than the most the server holds: dropped as it is read.
    let mut long = r#"{"jsonrpc":"2.0","id":3,"method":"ping","params":{"pad":""#.to_string();
    long.push_str(&"x".repeat(MAX_LINE_BYTES + 1));
    long.push_str(r#""}}}"#);
    pipe.send(&long);
    drop(long);
    pipe.send(ping(4));
    assert_eq!(pipe.recv()["id"], 4);
    // Of more values than the most one message may hold: cut before it is parsed.
    let zeros = vec!["0"; MAX_JSON_VALUES + 1].join(",");
    pipe.send(format!(
        r#"{{"jsonrpc":"2.0","id":5,"method":"ping","params":{{"v":[{zeros}]}}}}"#
    ));
    pipe.send(ping(6));
    assert_eq!(pipe.recv()["id"], 6);
    // Within the limits, the same message is answered.
    let zeros = vec!["0"; MAX_JSON_VALUES - 10].join(",");
    pipe.send(format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"ping","params":{{"v":[{zeros}]}}}}"#
    ));
    assert_eq!(pipe.recv()["id"], 7);
}

#[cfg(feature = "rocksdb")]
#[test]
fn the_binary_skips_a_line_that_is_not_utf8_then_initializes_and_exits_0() {
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
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"\xff\xfe not UTF-8\n").unwrap();
    writeln!(stdin, "{}", initialize("2025-06-18")).unwrap();
    drop(stdin); // EOF: the server ends
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    let replies: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert_eq!(replies[0]["id"], 1);
    assert_eq!(replies[0]["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(replies[0]["result"]["serverInfo"]["name"], "forktrail");
}
