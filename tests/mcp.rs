//! The MCP server's protocol edges, in process: the handshake's version choice,
//! notifications answered with nothing, JSON-RPC errors for what is not a tool call, and
//! a session's whole life (fork, append, replay, regenerate refused off-machine) as tool
//! calls. The official MCP client drives `forktrail mcp` in `python/tests/test_mcp.py`.

mod common;

use common::*;
use forktrail::mcp::{McpConfig, McpServer};
use forktrail::Store;
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

fn call(server: &McpServer, tool: &str, arguments: Value) -> (bool, String) {
    let request = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                         "params": {"name": tool, "arguments": arguments}});
    let reply = server.handle_line(&request.to_string()).unwrap();
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
        server.handle_line(&request.to_string()).unwrap()["result"]["protocolVersion"]
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
    let code = |line: &str| server.handle_line(line).unwrap()["error"]["code"].as_i64();
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
    let replies = server
        .handle_line(
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/cancelled"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]"#,
        )
        .unwrap();
    let replies = replies.as_array().unwrap();
    assert_eq!(replies.len(), 2);
    assert_eq!(replies[0]["result"], json!({}));
    assert_eq!(replies[1]["result"]["tools"].as_array().unwrap().len(), 12);
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
