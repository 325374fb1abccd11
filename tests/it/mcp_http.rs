//! `/mcp` of `forktrail serve`: the MCP server over Streamable HTTP, spoken as a client
//! speaks it, in the stateless 2026-07-28 protocol and in the handshake protocols.
//! Reads are open; a tool that writes needs the server's token; a wrong token and a
//! foreign `Origin` are refused before the protocol sees the request; `/metrics`
//! counts requests by the version they name.
#![cfg(feature = "server")]

use crate::common;

use common::*;
use forktrail::server::ServerConfig;
use forktrail::Store;
use reqwest::blocking::{Client, RequestBuilder};
use serde_json::{json, Value};
use std::sync::Arc;

const TOKEN: &str = "mcp-token";

fn server(token: Option<&str>) -> (Arc<Store>, String) {
    let store = Arc::new(Store::in_memory().unwrap());
    session_with(&store, "s", 4);
    let config = ServerConfig {
        token: token.map(str::to_string),
        ..ServerConfig::default()
    };
    let addr = serve_in_process(Arc::clone(&store), config);
    (store, format!("http://{addr}"))
}

/// A 2026-07-28 request: the version in `_meta` and in the headers, no handshake.
fn modern(base: &str, id: u64, method: &str, mut params: Value) -> RequestBuilder {
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientCapabilities": {}});
    let mut request = Client::new()
        .post(format!("{base}/mcp"))
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method);
    if let Some(name) = params.get("name").and_then(Value::as_str) {
        request = request.header("Mcp-Name", name);
    }
    request.json(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
}

fn answer(request: RequestBuilder) -> Value {
    let response = request.send().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    response.json().unwrap()
}

fn fork(base: &str, id: u64) -> RequestBuilder {
    modern(
        base,
        id,
        "tools/call",
        json!({"name": "fork_session", "arguments": {"session": "s", "at": 2}}),
    )
}

#[test]
fn the_stateless_protocol_reads_openly_and_writes_with_the_token() {
    let (store, base) = server(Some(TOKEN));
    let discovered = answer(modern(&base, 1, "server/discover", json!({})));
    assert!(discovered["result"]["supportedVersions"]
        .as_array()
        .unwrap()
        .contains(&json!("2026-07-28")));
    let tools = answer(modern(&base, 2, "tools/list", json!({})));
    assert!(tools["result"]["tools"].as_array().unwrap().len() >= 15);
    let replay = answer(modern(
        &base,
        3,
        "tools/call",
        json!({"name": "replay_session", "arguments": {"session": "s"}}),
    ));
    assert_eq!(
        replay["result"]["structuredContent"]["turns"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    // Without the token a write is a tool error naming the way in; nothing written.
    let before = quads(&store);
    let refused = answer(fork(&base, 4));
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let text = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("fork_session writes to the store") && text.contains("Bearer"),
        "{text}"
    );
    assert_eq!(quads(&store), before);
    // With it, the fork is made, sharing its parent's first turns.
    let forked = answer(fork(&base, 5).bearer_auth(TOKEN));
    assert_eq!(forked["result"]["isError"], false, "{forked}");
    let child = forked["result"]["structuredContent"]["session"]
        .as_str()
        .unwrap();
    let info = store.info(&sid(child)).unwrap();
    assert_eq!((info.length, info.own_turns), (2, 0));
    // A wrong token is refused whatever it asks.
    let wrong = modern(&base, 6, "tools/list", json!({}))
        .bearer_auth("not-the-token")
        .send()
        .unwrap();
    assert_eq!(wrong.status().as_u16(), 401);
}

#[test]
fn a_server_without_a_token_is_read_only_and_says_so() {
    let (store, base) = server(None);
    let before = quads(&store);
    let refused = answer(fork(&base, 1).bearer_auth("anything"));
    let text = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("start `forktrail serve` with --token"),
        "{text}"
    );
    assert_eq!(quads(&store), before);
}

#[test]
fn the_handshake_protocols_work_statelessly() {
    let (_, base) = server(Some(TOKEN));
    let post = |version: Option<&str>, body: Value| {
        let mut request = Client::new()
            .post(format!("{base}/mcp"))
            .header("Accept", "application/json, text/event-stream");
        if let Some(version) = version {
            request = request.header("MCP-Protocol-Version", version);
        }
        answer(request.json(&body))
    };
    for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let init = post(
            None,
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": version, "capabilities": {},
                              "clientInfo": {"name": "t", "version": "1"}}}),
        );
        assert_eq!(init["result"]["protocolVersion"], version, "{init}");
        // No session to carry: the next request stands on its own.
        let listed = post(
            Some(version),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        );
        assert!(listed["result"]["tools"].is_array(), "{version}: {listed}");
    }
    let metrics = Client::new()
        .get(format!("{base}/metrics"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    for line in [
        "forktrail_mcp_requests_total{protocol_version=\"none\"} 4",
        "forktrail_mcp_requests_total{protocol_version=\"2025-06-18\"} 1",
        "forktrail_mcp_requests_total{protocol_version=\"2024-11-05\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in:\n{metrics}");
    }
}

#[test]
fn a_foreign_origin_is_refused_whatever_the_method() {
    let (_, base) = server(Some(TOKEN));
    let foreign = modern(&base, 1, "tools/list", json!({}))
        .header("Origin", "http://attacker.test")
        .send()
        .unwrap();
    assert_eq!(foreign.status().as_u16(), 403);
    let get = Client::new()
        .get(format!("{base}/mcp"))
        .header("Origin", "http://attacker.test")
        .header("Accept", "text/event-stream")
        .send()
        .unwrap();
    assert_eq!(get.status().as_u16(), 403);
    // The server's own origin passes.
    let own = base.clone();
    let same = answer(modern(&base, 2, "tools/list", json!({})).header("Origin", own));
    assert!(same["result"]["tools"].is_array());
    // A name that is not this server's, rebound to its address, is refused by Host.
    let rebound = modern(&base, 3, "tools/list", json!({}))
        .header("Host", "attacker.test")
        .send()
        .unwrap();
    assert_eq!(rebound.status().as_u16(), 403);
}
