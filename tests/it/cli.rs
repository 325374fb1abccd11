//! The `forktrail` binary: JSON shapes, errors on stderr with a non-zero exit and no
//! change, the demo, audits from the shipped query files, export/import round trips.
#![cfg(feature = "rocksdb")]

use crate::common;

use common::cli::{forktrail, serving, succeeds, Cli};
use common::Reaped;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

#[test]
fn new_append_fork_replay_print_the_documented_json() {
    let cli = Cli::new();
    let new = cli.json(&[
        "new",
        "--id",
        "s1",
        "--title",
        "t",
        "--principal",
        "alice",
        "--json",
    ]);
    assert_eq!(new, serde_json::json!({"session": "s1"}));
    let a = cli.json(&[
        "append",
        "s1",
        "--role",
        "user",
        "--content",
        "hi",
        "--json",
    ]);
    assert_eq!(a, serde_json::json!({"session": "s1", "index": 0}));
    cli.ok(&[
        "append",
        "s1",
        "--role",
        "assistant",
        "--content",
        "hello",
        "--model",
        "m1",
    ]);
    let plan = cli.json(&[
        "fork", "s1", "--at", "1", "--label", "alt", "--reason", "try", "--json",
    ]);
    let child = plan["session"].as_str().unwrap().to_string();
    assert_eq!(plan["parent"], "s1");
    assert_eq!(plan["forked_at_index"], 1);
    assert_eq!(plan["branch"], "alt");
    assert_eq!(plan["fork_root"], "s1");
    assert_eq!(plan["depth"], 1);
    let idx = cli.run_with_stdin(
        &["append", &child, "--role", "assistant"],
        "from stdin\n".as_bytes(),
    );
    assert!(idx.status.success());
    assert_eq!(String::from_utf8(idx.stdout).unwrap().trim(), "1");
    let replay = cli.json(&["replay", &child, "--json"]);
    assert_eq!(
        replay,
        serde_json::json!([
            {"index": 0, "role": "user", "content": "hi", "branch": "main"},
            {"index": 1, "role": "assistant", "content": "from stdin\n", "branch": "alt"},
        ])
    );
    let jsonl = cli.ok(&["replay", &child, "--jsonl", "--up-to", "0"]);
    assert_eq!(
        jsonl,
        "{\"index\":0,\"role\":\"user\",\"content\":\"hi\",\"branch\":\"main\"}\n"
    );
    let branches = cli.json(&["branches", "s1", "--json"]);
    assert_eq!(branches[0]["session"], child.as_str());
    assert_eq!(branches[0]["branch"], "alt");
    assert_eq!(branches[0]["forked_at_index"], 1);
    assert_eq!(branches[0]["own_turns"], 1);
    assert!(branches[0]["created_at"].is_string());
    let page = cli.json(&["list", "--json"]);
    assert_eq!(
        (page["total"].as_u64(), page["next"].is_null()),
        (Some(2), true)
    );
    let list = page["sessions"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    // Newest activity first: the fork took its turn last.
    assert_eq!(list[0]["session"], child.as_str());
    assert_eq!(list[1]["session"], "s1");
    assert_eq!(list[1]["forks"], 1);
    let show = cli.json(&["show", &child, "--json"]);
    assert_eq!(
        (show["length"].as_u64(), show["own_turns"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(show["head_digest"].as_str().unwrap().len(), 64);
    let tree = cli.ok(&["tree", "s1"]);
    assert!(tree.contains("└── alt"), "{tree}");
    assert!(cli.ok(&["tree", "s1", "--dot"]).starts_with("digraph"));
    assert!(cli.ok(&["tree", "s1", "--mermaid"]).contains("-->|at 1|"));
    assert_eq!(
        cli.json(&["tree", "s1", "--json"])["children"][0]["branch"],
        "alt"
    );
}

#[test]
fn dry_run_prints_the_plan_and_writes_nothing() {
    let cli = Cli::new();
    cli.ok(&["new", "--id", "p"]);
    cli.ok(&["append", "p", "--role", "user", "--content", "x"]);
    let before = cli.snapshot();
    let plan = cli.json(&["fork", "p", "--dry-run", "--json", "--label", "l"]);
    assert_eq!(
        (plan["forked_at_index"].as_u64(), plan["branch"].as_str()),
        (Some(1), Some("l"))
    );
    assert_eq!(before, cli.snapshot());
}

#[test]
fn bad_input_fails_on_stderr_with_a_clear_message_and_changes_nothing() {
    let cli = Cli::new();
    cli.ok(&["new", "--id", "s"]);
    cli.ok(&["append", "s", "--role", "user", "--content", "x"]);
    let bad_utf8 = cli.dir().join("bad.txt");
    std::fs::write(&bad_utf8, b"ok\xff\xfe").unwrap();
    let bad = bad_utf8.to_str().unwrap();
    for (args, expected) in [
        (
            vec!["append", "ghost", "--role", "user", "--content", "x"],
            "session ghost not found",
        ),
        (
            vec!["append", "s", "--role", "robot", "--content", "x"],
            "unknown role \"robot\"",
        ),
        (
            vec!["append", "s", "--role", "user", "--file", bad],
            "not valid UTF-8",
        ),
        (
            vec![
                "append",
                "s",
                "--role",
                "user",
                "--kind",
                "chat",
                "--content",
                "x",
            ],
            "unknown turn kind",
        ),
        (
            vec!["fork", "s", "--at", "-1"],
            "\"-1\" is not a turn index",
        ),
        (vec!["fork", "s", "--at", "2"], "valid: 0..=1"),
        (
            vec!["fork", "s", "--label", "x\" } ; DROP ALL ; #"],
            "invalid branch label",
        ),
        (
            vec!["new", "--id", "x> } ; DROP ALL ; #"],
            "invalid session id",
        ),
        (
            vec!["replay", "s", "--up-to", "7"],
            "index 7 is out of range",
        ),
        (vec!["query", "DELETE WHERE { ?s ?p ?o }"], "query failed"),
        (vec!["export", "--format", "turtle"], "name a SESSION"),
    ] {
        let stderr = cli.fails(&args);
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    let stderr = cli.fails_with_stdin(&["append", "s", "--role", "user"], b"\xc3\x28");
    assert!(
        stderr.contains("standard input is not valid UTF-8"),
        "{stderr}"
    );
    cli.ok(&["fork", "s", "--label", "taken"]);
    let stderr = cli.fails(&["fork", "s", "--label", "taken"]);
    assert!(
        stderr.contains("already has a child with branch label \"taken\""),
        "{stderr}"
    );
    let stderr = cli.fails(&["delete", "s"]);
    assert!(stderr.contains("child session"), "{stderr}");
}

#[test]
fn empty_content_and_hostile_content_are_stored_verbatim() {
    let cli = Cli::new();
    cli.ok(&["new", "--id", "s"]);
    cli.ok(&["append", "s", "--role", "user", "--content", ""]);
    let hostile = "x\" } ; DROP ALL ; #";
    cli.ok(&["append", "s", "--role", "user", "--content", hostile]);
    let replay = cli.json(&["replay", "s", "--json"]);
    assert_eq!(replay[0]["content"], "");
    assert_eq!(replay[1]["content"], hostile);
}

#[test]
fn a_store_held_by_another_process_is_reported_as_in_use_and_left_unchanged() {
    let cli = Cli::new();
    cli.ok(&["new", "--id", "s"]);
    let before = cli.snapshot();
    {
        let _held = forktrail::Store::open(&cli.store).unwrap();
        for args in [
            &["list"][..],
            &["append", "s", "--role", "user", "--content", "x"],
        ] {
            let out = cli.run(args);
            assert!(!out.status.success());
            let stderr = String::from_utf8(out.stderr).unwrap();
            assert!(stderr.contains("in use by another process"), "{stderr}");
            assert!(stderr.contains("forktrail serve"), "{stderr}");
            assert!(
                stderr.contains("--store http://HOST:PORT/sparql"),
                "{stderr}"
            );
        }
    }
    assert_eq!(before, cli.snapshot());
}

/// `forktrail serve` on the CLI's store and a free port, once it says it listens: the
/// process (killed when dropped) and its base URL.
fn serve(cli: &Cli, args: &[&str], token: Option<&str>) -> (Reaped, String) {
    let bind = format!("127.0.0.1:{}", common::free_port());
    let mut command = forktrail(&cli.store, &["serve"]);
    command
        .args(args)
        .args(["--bind", &bind])
        .env_remove("FORKTRAIL_TOKEN");
    if let Some(token) = token {
        command.env("FORKTRAIL_TOKEN", token);
    }
    serving(&mut command)
}

#[test]
fn while_serve_holds_the_store_the_refusal_names_it_and_the_cli_works_through_it() {
    let cli = Cli::new();
    cli.ok(&["new", "--id", "s"]);
    let (mut server, base) = serve(&cli, &[], Some("t0ken"));
    let url = format!("{base}/sparql");

    let refused = cli.run(&["list"]);
    assert!(!refused.status.success());
    let refused = String::from_utf8_lossy(&refused.stderr);
    assert!(refused.contains(&format!("--store {url}")), "{refused}");
    let through = |args: &[&str], token: Option<&str>| {
        let mut command = forktrail(&url, args);
        match token {
            Some(t) => command.env("FORKTRAIL_STORE_TOKEN", t),
            None => command.env_remove("FORKTRAIL_STORE_TOKEN"),
        };
        command.output().unwrap()
    };
    let denied = through(&["append", "s", "--role", "user", "--content", "x"], None);
    assert!(!denied.status.success());
    let stderr = String::from_utf8_lossy(&denied.stderr);
    assert!(stderr.contains("FORKTRAIL_STORE_TOKEN"), "{stderr}");
    let appended = through(
        &[
            "append",
            "s",
            "--role",
            "user",
            "--content",
            "through the server",
        ],
        Some("t0ken"),
    );
    assert!(
        appended.status.success(),
        "{}",
        String::from_utf8_lossy(&appended.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&appended.stdout).trim(), "0");
    let replay = through(&["replay", "s"], None);
    assert!(
        String::from_utf8_lossy(&replay.stdout).contains("through the server"),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    server.0.kill().unwrap();
    server.0.wait().unwrap();
    // The server's address file goes with it only on a clean stop; a killed one leaves
    // it, and the store opens all the same.
    assert!(cli.ok(&["replay", "s"]).contains("through the server"));
}

#[test]
fn read_commands_and_bad_arguments_never_create_a_store() {
    let cli = Cli::new();
    for args in [
        &["list"][..],
        &["replay", "s"],
        &["replay", "x y"],
        &["append", "s", "--role", "robot", "--content", "x"],
        &["new", "--id", "bad id"],
    ] {
        let out = cli.run(args);
        assert!(!out.status.success(), "{args:?}");
        assert!(!cli.store.exists(), "{args:?} created the store");
    }
    let stderr = String::from_utf8(cli.run(&["list"]).stderr).unwrap();
    assert!(stderr.contains("no store at"), "{stderr}");
}

#[test]
fn an_all_digit_id_can_be_bound_as_a_string_by_quoting_it() {
    let cli = Cli::new();
    cli.ok(&["new", "--id", "42"]);
    let q = "SELECT ?id ?s WHERE { ?s <https://w3id.org/forktrail/ns#sessionId> ?id }";
    assert!(cli
        .ok(&["query", q, "--bind", "id=\"42\""])
        .contains("(1 row)"));
    assert!(cli
        .ok(&["query", q, "--bind", "id=42"])
        .contains("(0 rows)"));
}

fn ids_by_branch(cli: &Cli) -> std::collections::HashMap<String, String> {
    let list = cli.json(&["list", "--json"]);
    list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["branch"].as_str().unwrap().to_string(),
                s["session"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn demo_prints_a_tree_of_depth_2_a_replay_and_an_audit() {
    let cli = Cli::new();
    let out = cli.ok(&["demo"]);
    assert!(out.contains("Fork tree:"), "{out}");
    assert!(
        out.lines().any(|l| l.contains("    └── booking")),
        "depth 2 in the tree:\n{out}"
    );
    assert!(
        out.contains("[8] assistant (booking): Booked: reference PA-4521"),
        "{out}"
    );
    assert!(
        out.contains("search_trains"),
        "the audit names the tool:\n{out}"
    );
    // The audit is a table a terminal holds: a row per turn, none wider than 80.
    let audit: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("turn  branch"))
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(audit.len(), 10, "{out}");
    assert!(audit.iter().all(|l| l.len() <= 80), "{out}");
    assert!(audit[5].contains("model-swap") && audit[5].contains("llama-3.1-8b-instruct"));
    // Running it twice adds a second tree instead of failing.
    cli.ok(&["demo"]);
    assert_eq!(cli.json(&["list", "--json"])["total"], 8);
}

#[test]
fn each_audit_query_file_answers_on_the_demo_store() {
    let cli = Cli::new();
    cli.ok(&["demo"]);
    let ids = ids_by_branch(&cli);
    let (root, booking) = (&ids["main"], &ids["booking"]);
    let audits: [(&str, Vec<String>, &str); 3] = [
        (
            "audit-turns-by-model",
            vec!["model=llama-3.1-8b-instruct".into()],
            "booking",
        ),
        (
            "audit-descendants",
            vec![format!("id={root}")],
            "book the chosen train",
        ),
        (
            "audit-turn-origin",
            vec![format!("id={booking}"), "at=3".into()],
            "search_trains",
        ),
    ];
    for (name, binds, expected) in audits {
        let file = format!("queries/{name}.rq");
        let mut args = vec!["query", "--file", file.as_str(), "--format", "json"];
        for b in &binds {
            args.extend(["--bind", b.as_str()]);
        }
        let out: Value = serde_json::from_str(&cli.ok(&args)).unwrap();
        let rows = out["results"]["bindings"].as_array().unwrap();
        assert!(!rows.is_empty(), "{name} found nothing");
        assert!(out.to_string().contains(expected), "{name}: {out}");
    }
    let origin = cli.ok(&[
        "query",
        "--file",
        "queries/audit-turn-origin.rq",
        "--bind",
        &format!("id={booking}"),
        "--bind",
        "at=3",
        "--format",
        "csv",
    ]);
    assert_eq!(
        origin.lines().count(),
        2,
        "exactly one owner for one turn:\n{origin}"
    );
    let table = cli.ok(&["query", "--file", "queries/sessions.rq"]);
    assert!(table.contains("(4 rows)"), "{table}");
    let tsv = cli.ok(&[
        "query",
        "SELECT (COUNT(*) AS ?n) WHERE { ?s a <https://w3id.org/forktrail/ns#Fork> }",
        "--format",
        "tsv",
    ]);
    assert_eq!(tsv, "?n\n3\n");
    let ttl = cli.ok(&[
        "query",
        "CONSTRUCT { ?s ?p ?o } WHERE { ?s a <https://w3id.org/forktrail/ns#Fork> ; ?p ?o }",
    ]);
    assert!(ttl.contains("ft:Fork"), "{ttl}");
}

fn digests(cli: &Cli) -> Vec<(String, Value)> {
    let mut ids: Vec<String> = ids_by_branch(cli).into_values().collect();
    ids.sort();
    ids.into_iter()
        .map(|id| {
            let show = cli.json(&["show", &id, "--json"]);
            let replay = cli.json(&["replay", &id, "--json"]);
            (id, serde_json::json!([show["head_digest"], replay]))
        })
        .collect()
}

#[test]
fn export_then_import_is_lossless_in_trig_and_nquads() {
    let source = Cli::new();
    source.ok(&["demo"]);
    for (format, ext) in [("trig", "trig"), ("nquads", "nq")] {
        let file = source.dir().join(format!("all.{ext}"));
        source.ok(&[
            "export",
            "--format",
            format,
            "--output",
            file.to_str().unwrap(),
        ]);
        let target = Cli::new();
        let imported = target.json(&["import", file.to_str().unwrap(), "--json"]);
        assert_eq!(imported["imported"].as_array().unwrap().len(), 4);
        assert_eq!(digests(&source), digests(&target), "{format}");
        assert_eq!(source.snapshot(), target.snapshot(), "{format}: same quads");
        // Importing again would duplicate sessions: refused, nothing changes.
        let stderr = target.fails(&["import", file.to_str().unwrap()]);
        assert!(stderr.contains("already exists"), "{stderr}");
    }
}

#[test]
fn import_of_a_fork_without_its_parent_is_refused_naming_the_parent() {
    let source = Cli::new();
    source.ok(&["demo"]);
    let ids = ids_by_branch(&source);
    let file = source.dir().join("one.trig");
    source.ok(&[
        "export",
        &ids["booking"],
        "--output",
        file.to_str().unwrap(),
    ]);
    let target = Cli::new();
    target.ok(&["new", "--id", "unrelated"]);
    let stderr = target.fails(&["import", file.to_str().unwrap()]);
    assert!(
        stderr.contains(&format!("parent {}", ids["model-swap"])),
        "{stderr}"
    );
    let jsonl = source.ok(&["export", &ids["booking"], "--format", "jsonl"]);
    assert_eq!(jsonl.lines().count(), 9);
    let turtle = source.ok(&["export", &ids["booking"], "--format", "turtle"]);
    assert!(turtle.contains("ft:parentSession"), "{turtle}");
    let _ = Path::new("unused");
}

#[test]
fn anchor_fork_merge_diff_and_request_ids_from_the_command_line() {
    let cli = Cli::new();
    cli.ok(&["new", "--id", "root"]);
    for (role, text) in [("user", "Train or plane?"), ("assistant", "Train.")] {
        cli.ok(&["append", "root", "--role", role, "--content", text]);
    }
    let anchor = cli.json(&["anchor", "root", "asked", "--state", r#"{"k":1}"#, "--json"]);
    assert_eq!(anchor["at_index"], 2);
    let anchors = cli.json(&["anchors", "root", "--json"]);
    assert_eq!(anchors[0]["name"], "asked");
    let err = cli.fails(&["anchor", "root", "bad", "--state", "{oops"]);
    assert!(err.contains("--state is not valid JSON"), "{err}");

    let fork = [
        "fork",
        "root",
        "--anchor",
        "asked",
        "--id",
        "kid",
        "--summarize",
        "--request-id",
        "r1",
        "--json",
    ];
    let plan = cli.json(&fork);
    assert_eq!(plan["forked_at_index"], 2);
    assert!(plan["summary"].as_str().unwrap().starts_with("2 turns"));
    let retry = cli.json(&fork);
    assert_eq!(
        (retry["session"].clone(), retry["reused"].clone()),
        (Value::from("kid"), Value::from(true))
    );
    let err = cli.fails(&["fork", "root", "--at", "1", "--request-id", "r1"]);
    assert!(err.contains("request id \"r1\""), "{err}");

    cli.ok(&[
        "append",
        "kid",
        "--role",
        "assistant",
        "--content",
        "Booked the 07:25.",
    ]);
    let dry = cli.json(&["merge", "kid", "--dry-run", "--json"]);
    assert_eq!(dry["reference"], "kid@2:turns:2-2");
    let merged = cli.json(&["merge", "kid", "--json"]);
    assert_eq!(merged["index"], 2);
    let err = cli.fails(&["merge", "kid"]);
    assert!(err.contains("already merged"), "{err}");

    let diff = cli.json(&["diff", "kid", "root", "--json"]);
    assert_eq!(diff["common_prefix"], 2);
    assert_eq!(
        diff["b_tail"][0]["content"]
            .as_str()
            .unwrap()
            .lines()
            .next(),
        Some("[fork_result kid@2:turns:2-2]")
    );
    let show = cli.json(&["show", "kid", "--json"]);
    assert_eq!(show["inherited_turns"], 2);
    assert_eq!(show["own_content_bytes"], 17);
    let text = cli.ok(&["diff", "kid", "root"]);
    assert!(
        text.contains("common prefix  2 turns (common ancestor root)"),
        "{text}"
    );
}

#[test]
fn diff_shows_the_arguments_of_tool_calls_that_differ_only_in_them() {
    let cli = Cli::new();
    let call = |day: &str| {
        format!(
            r#"[{{"id":"call_1","type":"function","function":{{"name":"search_trains","arguments":"{{\"day\": \"{day}\"}}"}}}}]"#
        )
    };
    for (id, day) in [("fri", "friday"), ("sun", "sunday")] {
        cli.ok(&["new", "--id", id]);
        cli.ok(&[
            "append",
            id,
            "--role",
            "user",
            "--content",
            "Trains to Amsterdam?",
        ]);
        append_calls(&cli, id, &call(day));
    }
    let diff = cli.json(&["diff", "fri", "sun", "--json"]);
    assert_eq!(diff["common_prefix"], 1, "{diff}");
    assert_eq!(
        diff["a_tail"][0]["tool_calls"][0]["function"]["arguments"],
        "{\"day\": \"friday\"}"
    );
    let text = cli.ok(&["diff", "fri", "sun"]);
    assert!(text.contains("common prefix  1 turn"), "{text}");
    assert!(
        text.contains(r#"→ search_trains({"day": "friday"})"#)
            && text.contains(r#"→ search_trains({"day": "sunday"})"#),
        "{text}"
    );
}

#[test]
fn transcripts_import_and_export_from_the_command_line() {
    let cli = Cli::new();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let openai = fixtures.join("openai-tools.json");
    let report = cli.json(&["import", openai.to_str().unwrap(), "--json"]);
    assert_eq!(report["turns"], 9);
    let session = report["imported"][0].as_str().unwrap().to_string();
    let exported: Value =
        serde_json::from_str(&cli.ok(&["export", &session, "--format", "openai"])).unwrap();
    let original: Value = serde_json::from_str(&std::fs::read_to_string(&openai).unwrap()).unwrap();
    assert_eq!(exported, original);

    let log = fixtures.join("claude-code-branches.jsonl");
    let text = cli.ok(&["import", log.to_str().unwrap(), "--format", "claude-code"]);
    assert!(
        text.contains("imported 7f3c2a10-5b1e-4c8e-9a61-2d4f0e8b9c01"),
        "{text}"
    );
    assert!(text.contains("skipped 1 line of type summary"), "{text}");
    assert!(
        !text.contains('\r'),
        "no progress bar when not on a terminal"
    );
    let branches = cli.json(&["branches", "7f3c2a10-5b1e-4c8e-9a61-2d4f0e8b9c01", "--json"]);
    assert_eq!(branches.as_array().unwrap().len(), 2);

    let bad = cli.dir().join("bad.jsonl");
    std::fs::write(&bad, "{\"type\":\"user\"}\n").unwrap();
    let err = cli.fails(&["import", bad.to_str().unwrap(), "--format", "claude-code"]);
    assert!(
        err.contains("line 1: a message line needs a \"uuid\""),
        "{err}"
    );
    let err = cli.fails(&["import", bad.to_str().unwrap(), "--format", "csv"]);
    assert!(
        err.contains("expected one of: trig, nquads, openai, claude-code"),
        "{err}"
    );
}

/// `regenerate SESSION --at 1 --model MODEL --endpoint ENDPOINT`, then `more`.
fn regenerate<'a>(
    session: &'a str,
    model: &'a str,
    endpoint: &'a str,
    more: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        "regenerate",
        session,
        "--at",
        "1",
        "--model",
        model,
        "--endpoint",
        endpoint,
    ];
    args.extend(more);
    args
}

/// Appends to `session` an assistant turn that calls tools: `calls` (a JSON array).
fn append_calls(cli: &Cli, session: &str, calls: &str) {
    cli.ok(&[
        "append",
        session,
        "--role",
        "assistant",
        "--kind",
        "tool_call",
        "--content",
        "",
        "--tool-calls",
        calls,
    ]);
}

#[test]
fn regenerate_dry_run_foreground_background_and_cancel() {
    let cli = Cli::new();
    cli.ok(&["new", "--id", "root"]);
    cli.ok(&[
        "append",
        "root",
        "--role",
        "user",
        "--content",
        "Train or plane?",
    ]);
    cli.ok(&[
        "append",
        "root",
        "--role",
        "assistant",
        "--content",
        "Train.",
        "--model",
        "model-a",
    ]);
    let stub = common::stub::start(common::stub::Mode::Echo);
    let plan = cli.ok(&regenerate("root", "model-b", &stub.url, &["--dry-run"]));
    assert!(plan.contains("would fork root at index 1"), "{plan}");
    assert!(plan.contains("estimated tokens"), "{plan}");
    let err = cli.fails(&regenerate("root", "m", "http://192.0.2.1/v1", &[]));
    assert!(err.contains("--allow-remote"), "{err}");

    let job = cli.json(&regenerate("root", "model-b", &stub.url, &["--json"]));
    assert_eq!(job["status"], "complete");
    let fork = job["fork"].as_str().unwrap().to_string();
    let replay = cli.json(&["replay", &fork, "--json"]);
    assert_eq!(replay[1]["content"], "model-b answers: Train or plane?");
    let tree = cli.ok(&["tree", "root"]);
    assert!(
        tree.contains("[model-b]") && tree.contains("out tokens"),
        "{tree}"
    );

    // In the background, cancelled while the model is slow: no turn is left.
    let slow = common::stub::start(common::stub::Mode::Slow(std::time::Duration::from_secs(5)));
    let in_background = ["--background", "--json"];
    let job = cli.json(&regenerate("root", "model-c", &slow.url, &in_background));
    assert_eq!(job["status"], "running");
    let id = job["job"].as_str().unwrap().to_string();
    while slow.requests().is_empty() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let cancelled = cli.ok(&["jobs", "cancel", &id]);
    assert!(cancelled.contains("(cancelled)"), "{cancelled}");
    let jobs = cli.json(&["jobs", "--json"]);
    assert_eq!(jobs.as_array().unwrap().len(), 2);
    assert_eq!(
        cli.json(&["branches", "root", "--json"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let shown = cli.json(&["jobs", "show", &id, "--json"]);
    assert_eq!(
        (shown["status"].as_str(), shown["fork"].as_str()),
        (Some("cancelled"), None)
    );
}

/// Runs the binary in `dir` (not the checkout), its stdout closed before it writes.
fn closed_pipe(cli: &Cli, args: &[&str]) -> Output {
    let mut child = forktrail(&cli.store, args)
        .current_dir(cli.dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away at once, as `head` does once it has its lines.
    drop(child.stdout.take());
    child.wait_with_output().unwrap()
}

#[test]
fn a_reader_that_goes_away_ends_the_output_quietly() {
    let cli = Cli::new();
    cli.ok(&["demo"]);
    let root = ids_by_branch(&cli)["main"].clone();
    let chat = cli.dir().join("chat.json");
    std::fs::write(&chat, r#"[{"role":"user","content":"hi"}]"#).unwrap();
    for args in [
        vec!["tree", root.as_str(), "--json"],
        vec!["list", "--json"],
        vec!["replay", root.as_str()],
        vec!["import", chat.to_str().unwrap(), "--json"],
        vec!["export"],
        vec!["query", "sessions"],
    ] {
        let out = closed_pipe(&cli, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}

/// A store with session `r` holding one user turn.
fn one_question() -> Cli {
    let cli = Cli::new();
    cli.ok(&["new", "--id", "r"]);
    cli.ok(&[
        "append",
        "r",
        "--role",
        "user",
        "--content",
        "Train or plane?",
    ]);
    cli
}

#[test]
fn a_failed_regeneration_exits_1_with_its_reason_on_stderr_naming_the_endpoint_once() {
    let cli = one_question();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let args = regenerate("r", "m", &endpoint, &[]);
    let out = cli.run(&args);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(stderr.starts_with("error: regeneration job "), "{stderr}");
    assert!(stderr.contains("failed: cannot reach"), "{stderr}");
    assert_eq!(stderr.matches(&endpoint).count(), 1, "{stderr}");
    // With --json the job still goes to stdout, and the exit code still says it failed.
    let mut json_args = args.clone();
    json_args.push("--json");
    let out = cli.run(&json_args);
    assert_eq!(out.status.code(), Some(1));
    let job: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(job["status"], "failed");
    // The failure is on record.
    let jobs = cli.json(&["jobs", "--json"]);
    assert!(jobs
        .as_array()
        .unwrap()
        .iter()
        .all(|j| j["status"] == "failed"));
}

#[test]
fn an_identical_regeneration_reuses_its_job_and_again_asks_anew() {
    let cli = one_question();
    let stub = common::stub::start(common::stub::Mode::Echo);
    let args = regenerate(
        "r",
        "model-b",
        &stub.url,
        &["--temperature", "0.2", "--json"],
    );
    let first = cli.json(&args);
    let second = cli.json(&args);
    assert_eq!(first["job"], second["job"]);
    assert_eq!(second["reused"], true);
    assert_eq!(stub.requests().len(), 1);
    let human = cli.ok(&args[..args.len() - 1]);
    assert!(human.contains("reused"), "{human}");
    let mut again = args.to_vec();
    again.push("--again");
    let third = cli.json(&again);
    assert_ne!(third["job"], first["job"]);
    assert_eq!(stub.requests().len(), 2);
    assert_eq!(
        cli.json(&["branches", "r", "--json"])
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let err = cli.fails(&[
        "regenerate",
        "r",
        "--at",
        "1",
        "--endpoint",
        &stub.url,
        "--again",
        "--request-id",
        "x",
    ]);
    assert!(err.contains("cannot be used with"), "{err}");
}

#[test]
fn shipped_queries_run_by_name_outside_the_checkout_and_list_their_help() {
    let cli = Cli::new();
    let demo = succeeds(
        forktrail(&cli.store, &["demo"]).current_dir(cli.dir()),
        "demo",
    );
    let demo = String::from_utf8(demo.stdout).unwrap();
    // Every hint the demo prints runs as printed from where the user is.
    let hints: Vec<&str> = demo
        .lines()
        .skip_while(|l| !l.starts_with("Try next:"))
        .skip(1)
        .map(str::trim)
        .collect();
    assert!(hints.len() >= 3, "{demo}");
    for hint in hints {
        let words: Vec<&str> = hint.split_whitespace().collect();
        let out = succeeds(
            Command::new(env!("CARGO_BIN_EXE_forktrail"))
                .args(&words[1..])
                .current_dir(cli.dir()),
            hint,
        );
        assert!(!out.stdout.is_empty(), "{hint}");
    }
    let list = cli.ok(&["query", "--list"]);
    for q in forktrail::queries::ALL {
        // The read path's own queries run by name but are not listed as questions.
        let shown = list.contains(&format!("\n{}\n", q.name)) || list.starts_with(q.name);
        assert_eq!(shown, !q.is_internal(), "{}", q.name);
    }
    assert!(!list.contains("turn-entries"), "{list}");
    assert!(list.contains("Inputs"), "{list}");
    let listed = cli.json(&["query", "--list", "--format", "json"]);
    assert_eq!(
        listed.as_array().unwrap().len(),
        forktrail::queries::ALL.len() - 2
    );
    let ids = ids_by_branch(&cli);
    let csv = cli.ok(&[
        "query",
        "audit-turn-origin",
        "--bind",
        &format!("id={}", ids["booking"]),
        "--bind",
        "index=3",
        "--format",
        "csv",
    ]);
    assert_eq!(csv.lines().count(), 2, "{csv}");
    let err = cli.fails(&["query", "audit-turn-orign"]);
    assert!(err.contains("no shipped query is named"), "{err}");
    let err = cli.fails(&["query", "turns-per-model", "--bind", "modle=x"]);
    assert!(err.contains("cannot bind ?modle"), "{err}");
}

#[test]
fn import_tells_formats_from_the_content_or_says_it_cannot() {
    let cli = Cli::new();
    let dir = cli.dir();
    let chat = dir.join("chat.jsonl");
    std::fs::write(
        &chat,
        "{\"role\":\"user\",\"content\":\"hi\"}\n{\"role\":\"assistant\",\"content\":\"hello\"}\n",
    )
    .unwrap();
    let report = cli.json(&["import", chat.to_str().unwrap(), "--json"]);
    assert_eq!(report["turns"], 2);
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let log = dir.join("session.log");
    std::fs::copy(fixtures.join("claude-code-branches.jsonl"), &log).unwrap();
    let report = cli.json(&["import", log.to_str().unwrap(), "--json"]);
    assert_eq!(
        report["imported"][0],
        "7f3c2a10-5b1e-4c8e-9a61-2d4f0e8b9c01"
    );
    // An N-Quads export under a name that says nothing.
    let nq = dir.join("backup.dat");
    cli.ok(&[
        "export",
        "--format",
        "nquads",
        "--output",
        nq.to_str().unwrap(),
    ]);
    let other = Cli::new();
    let report = other.json(&["import", nq.to_str().unwrap(), "--json"]);
    assert_eq!(report["imported"].as_array().unwrap().len(), 4);
    let notes = dir.join("notes.json");
    std::fs::write(&notes, "Dear diary, today I forked a conversation.").unwrap();
    let err = cli.fails(&["import", notes.to_str().unwrap()]);
    assert!(
        err.contains(&format!(
            "cannot tell the format of {}; pass --format one of trig, nquads, openai, claude-code",
            notes.display()
        )),
        "{err}"
    );
    // Broken JSON is named as such, whichever shape it was meant to have.
    let array = dir.join("broken.json");
    std::fs::write(&array, "[{\"role\": \"user\", \"content\": \"hi\"}").unwrap();
    let err = cli.fails(&["import", array.to_str().unwrap()]);
    assert!(
        err.contains("is not valid JSON (EOF while parsing"),
        "{err}"
    );
    let lines = dir.join("broken.jsonl");
    std::fs::write(&lines, "{\"a\":\n").unwrap();
    let err = cli.fails(&["import", lines.to_str().unwrap()]);
    assert!(
        err.contains(&format!("{} is not valid JSON (", lines.display())),
        "{err}"
    );
    // A Claude Code project folder, then the same folder again.
    let project = fixtures.join("claude-project");
    let text = cli.ok(&["import", project.to_str().unwrap()]);
    assert!(
        text.contains("imported 5b0c1e7a-2f4d-4c1a-9e8b-6a7d3c2b1f00:agent-a1b2c3d4"),
        "{text}"
    );
    assert!(text.contains("16 turns"), "{text}");
    let again = cli.ok(&["import", project.to_str().unwrap()]);
    assert!(again.contains("up to date"), "{again}");
}

#[test]
fn updates_are_sent_elsewhere_and_a_deep_store_path_is_created() {
    let cli = Cli::new();
    cli.ok(&["new", "--id", "s"]);
    let err = cli.fails(&[
        "query",
        "INSERT DATA { GRAPH <urn:g> { <urn:a> <urn:b> <urn:c> } }",
    ]);
    assert!(
        err.contains("SPARQL update") && err.contains("/update"),
        "{err}"
    );
    assert!(!err.contains("expected CONSTRUCT"), "{err}");
    let err = cli.fails(&[
        "query",
        "SELECT * WHERE { SERVICE SILENT <http://127.0.0.1:9/> { ?s ?p ?o } }",
    ]);
    assert!(err.contains("SERVICE is not allowed"), "{err}");
    let deep = cli.dir().join("a/b/c");
    succeeds(&mut forktrail(&deep, &["new", "--id", "x"]), "new");
    assert!(deep.is_dir());
    let file = cli.dir().join("plain-file");
    std::fs::write(&file, "x").unwrap();
    let out = forktrail(&file, &["new"]).output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("is a file, not a store directory"),
        "{stderr}"
    );
}

#[test]
fn delete_and_detach_preview_what_they_would_do_and_write_nothing() {
    let cli = Cli::new();
    cli.ok(&["new", "--id", "a"]);
    for text in ["one", "two", "three"] {
        cli.ok(&["append", "a", "--role", "user", "--content", text]);
    }
    cli.ok(&["fork", "a", "--at", "2", "--id", "b", "--label", "b"]);
    cli.ok(&["append", "b", "--role", "assistant", "--content", "b's own"]);
    cli.ok(&["fork", "b", "--at", "1", "--id", "c", "--label", "c"]);
    let before = cli.snapshot();
    let refused = cli.fails(&["delete", "a", "--dry-run"]);
    assert!(refused.contains("has 1 child session: b"), "{refused}");
    let plan = cli.json(&["delete", "a", "--cascade", "--dry-run", "--json"]);
    assert_eq!(plan["would_delete"], serde_json::json!(["a", "b", "c"]));
    assert_eq!(
        plan["deleted"],
        serde_json::Value::Null,
        "nothing was deleted"
    );
    assert_eq!(plan["dry_run"], true);
    assert_eq!(plan["own_turns"], 4);
    let text = cli.ok(&["delete", "a", "--cascade", "--dry-run"]);
    assert!(text.contains("would delete b (b, 1 own turn)"), "{text}");
    let plan = cli.json(&["detach", "b", "--dry-run", "--json"]);
    assert_eq!(plan["copied_turns"], 2);
    assert_eq!(
        plan["copied_from"],
        serde_json::json!([{"session": "a", "branch": "main", "from": 0, "to": 2}])
    );
    assert_eq!(
        plan["moved_up"],
        serde_json::json!([{"session": "c", "depth_before": 2, "depth_after": 1}])
    );
    assert_eq!(before, cli.snapshot(), "previews write nothing");
    let done = cli.json(&["detach", "b", "--json"]);
    assert_eq!(done["copied_turns"], 2);
    assert_eq!(cli.json(&["show", "c", "--json"])["depth"], 1);
    let deleted = cli.json(&["delete", "a", "--json"]);
    assert_eq!(deleted["deleted"], serde_json::json!(["a"]));
    assert_eq!(deleted["dry_run"], false);
}

#[test]
fn replay_shows_tool_calls_and_counts_speak_english() {
    let cli = Cli::new();
    cli.ok(&["new", "--id", "t"]);
    cli.ok(&[
        "append",
        "t",
        "--role",
        "user",
        "--content",
        "Weather in Lisbon?",
    ]);
    append_calls(
        &cli,
        "t",
        r#"[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Lisbon\"}"}}]"#,
    );
    cli.ok(&[
        "append",
        "t",
        "--role",
        "tool",
        "--name",
        "get_weather",
        "--tool-call-id",
        "c1",
        "--content",
        "21°C, sunny",
    ]);
    let text = cli.ok(&["replay", "t"]);
    assert!(
        text.contains("[1] assistant (main): → get_weather({\"city\":\"Lisbon\"})"),
        "{text}"
    );
    assert!(
        text.contains("[2] tool (main) get_weather ← c1: 21°C, sunny"),
        "{text}"
    );
    cli.ok(&["fork", "t", "--at", "1", "--id", "u", "--label", "u"]);
    let tree = cli.ok(&["tree", "t"]);
    assert!(tree.contains("(forked at 1, 1 turn)"), "{tree}");
    let rows = cli.ok(&[
        "query",
        "SELECT ?s WHERE { ?s <https://w3id.org/forktrail/ns#sessionId> \"t\" }",
    ]);
    assert!(rows.contains("(1 row)"), "{rows}");
    let summary = cli.json(&["fork", "t", "--at", "1", "--summarize", "--json"]);
    assert!(
        summary["summary"]
            .as_str()
            .unwrap()
            .starts_with("1 turn (1 user)"),
        "{summary}"
    );
    let err = cli.fails(&["replay", "t", "--up-to", "18446744073709551615"]);
    assert!(
        err.contains("index 18446744073709551615 is out of range"),
        "{err}"
    );
    let err = cli.fails(&["new", "--id", ".."]);
    assert!(err.contains("only of dots"), "{err}");
}

#[test]
fn completions_are_printed_for_each_shell() {
    let cli = Cli::new();
    for shell in ["bash", "zsh", "fish"] {
        let script = cli.ok(&["completions", shell]);
        assert!(
            script.contains("regenerate") && script.contains("forktrail"),
            "{shell}"
        );
    }
    assert!(!cli.store.exists(), "completions need no store");
}

#[test]
fn a_prov_export_is_turtle_that_names_turns_entities() {
    let cli = Cli::new();
    cli.ok(&["demo"]);
    let booking = ids_by_branch(&cli)["booking"].clone();
    let ttl = cli.ok(&["export", &booking, "--format", "prov"]);
    let graph: Vec<oxigraph::model::Triple> =
        oxigraph::io::RdfParser::from_format(oxigraph::io::RdfFormat::Turtle)
            .for_slice(ttl.as_bytes())
            .map(|q| q.unwrap().into())
            .collect();
    let typed = |class: &str| -> std::collections::BTreeSet<String> {
        graph
            .iter()
            .filter(|t| t.object.to_string() == class)
            .map(|t| t.subject.to_string())
            .collect()
    };
    let turns = typed("<https://w3id.org/forktrail/ns#Turn>");
    let entities = typed("<http://www.w3.org/ns/prov#Entity>");
    assert!(
        turns.len() >= 9,
        "the chain's graphs hold the 9 turns booking replays"
    );
    assert!(turns.is_subset(&entities), "every turn is a prov:Entity");
    let agents = typed("<http://www.w3.org/ns/prov#Agent>");
    assert!(typed("<http://www.w3.org/ns/prov#SoftwareAgent>").is_subset(&agents));
}

#[test]
fn verify_is_clean_on_the_demo_names_tampering_in_a_file_and_checks_a_backup() {
    let cli = Cli::new();
    cli.ok(&["demo"]);
    let clean = cli.ok(&["verify"]);
    assert!(clean.starts_with("ok: 4 sessions, 14 turns"), "{clean}");
    let export = cli.store.with_extension("trig");
    cli.ok(&["export", "--output", export.to_str().unwrap()]);
    assert!(cli
        .ok(&["verify", "--file", export.to_str().unwrap()])
        .starts_with("ok: 4"));
    // One content edited in the file: named by session, index and check; exit 1.
    let text = std::fs::read_to_string(&export).unwrap();
    let edited = text.replacen("ft:content \"", "ft:content \"EDITED ", 1);
    assert_ne!(edited, text);
    std::fs::write(&export, edited).unwrap();
    let out = cli.run(&["verify", "--file", export.to_str().unwrap(), "--json"]);
    assert!(!out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["problems"].as_array().unwrap().len(), 1, "{report}");
    assert_eq!(report["problems"][0]["check"], "digest");
    assert!(report["problems"][0]["index"].is_u64());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("verify found 1 problem in 1 session"),
        "{stderr}"
    );
    // A backup is a store of its own, and verifies.
    let backup = cli.store.with_extension("backup");
    let said = cli.ok(&["backup", backup.to_str().unwrap()]);
    assert!(said.starts_with("backed up 4 sessions to"), "{said}");
    let out = succeeds(&mut forktrail(&backup, &["verify"]), "verify");
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .starts_with("ok: 4 sessions"));
    // Backing up onto it again is refused and changes nothing.
    let err = cli.fails(&["backup", backup.to_str().unwrap()]);
    assert!(err.contains("already exists"), "{err}");
}

#[test]
fn serve_stops_on_sigterm_within_its_grace_whatever_queries_are_running() {
    let cli = Cli::new();
    cli.ok(&["demo"]);
    let (mut server, base) = serve(&cli, &["--query-timeout", "200ms"], None);
    // Slow queries (every pair of quads, ten times over: a cross product the server
    // still admits, under 1e7 rows): each keeps a core busy past its time limit.
    let values: Vec<String> = (1..=10).map(|i| i.to_string()).collect();
    let slow = format!(
        "SELECT (COUNT(*) AS ?n) WHERE {{ ?a ?b ?c . ?d ?e ?f . VALUES ?x {{ {} }} }}",
        values.join(" ")
    );
    for _ in 0..4 {
        let url = format!("{base}/sparql");
        let slow = slow.clone();
        std::thread::spawn(move || {
            let _ = reqwest::blocking::Client::new()
                .post(url)
                .form(&[("query", slow)])
                .send();
        });
    }
    // Until they hold their slots (the metrics take none).
    let metrics = format!("{base}/metrics");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !reqwest::blocking::get(&metrics)
        .unwrap()
        .text()
        .unwrap()
        .contains("forktrail_queries_running 4")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the slow queries never ran"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let signalled = std::time::Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &server.0.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    loop {
        if let Some(status) = server.0.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(8),
            "still running 8 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // A clean stop: the store opens again at once.
    assert!(cli.ok(&["list"]).contains("main"));
}

#[test]
fn serve_takes_a_port_on_its_own_and_names_the_web_ui_in_its_help() {
    let cli = Cli::new();
    cli.ok(&["demo"]);
    let port = common::free_port().to_string();
    let (server, base) =
        serving(forktrail(&cli.store, &["serve", "--port", &port]).env_remove("FORKTRAIL_TOKEN"));
    assert_eq!(base, format!("http://127.0.0.1:{port}"));
    let health = reqwest::blocking::get(format!("{base}/health")).unwrap();
    assert_eq!(health.text().unwrap(), "ok\n");
    drop(server);
    let help = cli.ok(&["serve", "--help"]);
    assert!(help.contains("web UI"), "{help}");
    // The options every command shares come after the command's own.
    let (own, shared) = (
        help.find("--allow-host").unwrap(),
        help.find("--store").unwrap(),
    );
    assert!(own < shared, "{help}");
}
