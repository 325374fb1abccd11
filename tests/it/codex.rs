//! OpenAI Codex CLI rollouts in: one session per rollout, tool calls in the OpenAI chat
//! shape, lines of other types counted, malformed lines named and nothing written.

use crate::common;

use common::*;
use forktrail::{
    Error, ExportFormat, ImportFormat, Kind, Role, Store, TranscriptOptions, TranscriptReport,
};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

const SESSION: &str = "0199449a-3c2e-7d41-9f6b-5e2c8a1d7b30";

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/codex/{name}"))
}

fn rollout() -> String {
    std::fs::read_to_string(data("rollout.jsonl")).unwrap()
}

fn import(store: &Store, text: &str, skip_invalid: bool) -> Result<TranscriptReport, Error> {
    let options = TranscriptOptions {
        skip_invalid,
        ..Default::default()
    };
    store.import_with(text.as_bytes(), Some(ImportFormat::Codex), &options)
}

/// The rollout with its line `n` (1-based) replaced by `line`.
fn with_line(n: usize, line: &str) -> String {
    let mut lines: Vec<String> = rollout().lines().map(str::to_string).collect();
    lines[n - 1] = line.to_string();
    lines.join("\n") + "\n"
}

fn calls(name: &str, id: &str, arguments: &str) -> Value {
    json!([{"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}])
}

#[test]
fn a_rollout_becomes_one_session_of_its_turns_in_file_order() {
    let s = Store::in_memory().unwrap();
    let report = import(&s, &rollout(), false).unwrap();
    assert_eq!(report.sessions, [SESSION]);
    assert_eq!(report.turns, 10);
    let skipped: BTreeMap<String, u64> = [
        ("event_msg", 3),
        ("turn_context", 1),
        ("response_item/web_search_call", 1),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_string(), n))
    .collect();
    assert_eq!(report.skipped_types, skipped);
    assert!(report.skipped_invalid.is_empty());

    let info = s.info(&sid(SESSION)).unwrap();
    assert_eq!(
        info.title.as_deref(),
        Some(format!("codex {SESSION}").as_str())
    );
    assert_eq!((info.parent, info.length), (None, 10));

    let turns = s.load(&sid(SESSION), None).unwrap();
    let shape: Vec<(Role, Kind)> = turns.iter().map(|t| (t.role, t.kind)).collect();
    use Kind::{Message, Note, ToolCall};
    use Role::{Assistant, System, Tool, User};
    assert_eq!(
        shape,
        [
            (System, Message),
            (User, Message),
            (Assistant, Note),
            (Assistant, ToolCall),
            (Tool, Message),
            (Assistant, ToolCall),
            (Tool, Message),
            (Assistant, ToolCall),
            (Tool, Message),
            (Assistant, Message),
        ]
    );
    assert!(turns[0].content.starts_with("Sandbox: workspace-write."));
    assert_eq!(
        turns[1].content,
        "The test for parse_date fails on Mondays. Find out why and fix it."
    );
    assert_eq!(
        turns[2].content,
        "**Locating the failing test**\n\nI should run the test suite to see the failure first."
    );
    assert!(turns[9]
        .content
        .starts_with("On a Monday `days_ahead` is 7"));

    // Tool calls: empty content, the call in the OpenAI chat shape; outputs answer them.
    let tool_calls = |i: usize| -> Value {
        serde_json::from_str(turns[i].tool_calls.as_deref().unwrap()).unwrap()
    };
    assert_eq!(turns[3].content, "");
    assert_eq!(
        tool_calls(3),
        calls(
            "shell",
            "call_7Qk2",
            r#"{"command":["cargo","test","parse_date"],"workdir":"/home/dev/calendar"}"#
        )
    );
    let shell_action = json!({"type": "exec", "command": ["grep", "-n", "weekday", "src/date.rs"],
        "timeout_ms": 10000, "working_directory": null, "env": null, "user": null});
    let local = tool_calls(5);
    assert_eq!(local[0]["id"], "call_9Zr1");
    assert_eq!(local[0]["function"]["name"], "local_shell");
    let arguments: Value =
        serde_json::from_str(local[0]["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, shell_action);
    assert_eq!(tool_calls(7)[0]["function"]["name"], "apply_patch");
    assert!(tool_calls(7)[0]["function"]["arguments"]
        .as_str()
        .unwrap()
        .starts_with("*** Begin Patch"));
    let answers: Vec<(Option<&str>, Option<&str>)> = [4, 6, 8]
        .iter()
        .map(|&i| (turns[i].tool_call_id.as_deref(), turns[i].name.as_deref()))
        .collect();
    assert_eq!(
        answers,
        [
            (Some("call_7Qk2"), Some("shell")),
            (Some("call_9Zr1"), Some("local_shell")),
            (Some("call_4Hx8"), Some("apply_patch")),
        ]
    );
    assert_eq!(turns[6].content, "42:    let days_ahead = 7 - weekday;");
    assert!(turns[4]
        .content
        .contains("expected 2025-09-15, got 2025-09-22"));

    // The model of turn_context: on the assistant's turns after it, and only on those.
    let models: Vec<Option<&str>> = turns.iter().map(|t| t.model.as_deref()).collect();
    let codex = Some("gpt-5-codex");
    assert_eq!(
        models,
        [None, None, codex, codex, None, codex, None, codex, None, codex]
    );
}

#[test]
fn exported_as_openai_a_rollout_gives_its_tool_calls_back() {
    let s = Store::in_memory().unwrap();
    import(&s, &rollout(), false).unwrap();
    let mut out = Vec::new();
    s.export(Some(&sid(SESSION)), ExportFormat::OpenAi, &mut out)
        .unwrap();
    let messages: Vec<Value> = serde_json::from_slice(&out).unwrap();
    assert_eq!(messages.len(), 10);
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(
        messages[3],
        json!({
            "role": "assistant",
            "content": null,
            "tool_calls": calls(
                "shell",
                "call_7Qk2",
                r#"{"command":["cargo","test","parse_date"],"workdir":"/home/dev/calendar"}"#
            ),
        })
    );
    assert_eq!(messages[4]["role"], "tool");
    assert_eq!(messages[4]["tool_call_id"], "call_7Qk2");
    assert_eq!(messages[4]["name"], "shell");
    let ids: Vec<&str> = messages
        .iter()
        .filter_map(|m| m["tool_calls"][0]["id"].as_str())
        .collect();
    assert_eq!(ids, ["call_7Qk2", "call_9Zr1", "call_4Hx8"]);

    // What was exported reads back as OpenAI messages, with the same tool calls.
    let copy = Store::in_memory().unwrap();
    let report = copy
        .import_with(&out, None, &TranscriptOptions::default())
        .unwrap();
    let again = copy.export_openai(&report.sessions[0]).unwrap();
    assert_eq!(again, messages);
}

#[test]
fn a_rollout_is_told_from_its_content_and_by_the_name_codex() {
    assert_eq!(
        ImportFormat::sniff(rollout().as_bytes()),
        Some(ImportFormat::Codex)
    );
    let early = std::fs::read(data("early-rollout.jsonl")).unwrap();
    assert_eq!(ImportFormat::sniff(&early), Some(ImportFormat::Codex));
    // A first line longer than what sniffing reads is judged by the keys it shows.
    let long = format!(
        "{{\"timestamp\":\"t\",\"type\":\"session_meta\",\"payload\":{{\"id\":\"x\",\"instructions\":\"{}\"}}}}\n",
        "a".repeat(1 << 21)
    );
    assert_eq!(
        ImportFormat::sniff(long.as_bytes()),
        Some(ImportFormat::Codex)
    );
    // Other formats are still told apart from it.
    assert_eq!(
        ImportFormat::sniff(b"{\"role\": \"user\", \"content\": \"hi\"}\n"),
        Some(ImportFormat::OpenAi)
    );
    assert_eq!(
        ImportFormat::sniff(b"{\"type\": \"user\", \"uuid\": \"u1\", \"payload\": 1}\n"),
        Some(ImportFormat::ClaudeCode)
    );
    assert_eq!(
        "codex".parse::<ImportFormat>().unwrap(),
        ImportFormat::Codex
    );
    assert!(ImportFormat::NAMES.contains(&"codex"));

    // import_path and import with no format read the file as a rollout.
    let s = Store::in_memory().unwrap();
    let report = s
        .import_path(&data("rollout.jsonl"), None, &TranscriptOptions::default())
        .unwrap();
    assert_eq!((report.sessions.len(), report.turns), (1, 10));
    let other = Store::in_memory().unwrap();
    let ids = other
        .import(rollout().as_bytes(), ImportFormat::Codex)
        .unwrap();
    assert_eq!(ids, [SESSION]);
}

#[test]
fn an_early_rollout_without_envelopes_is_read_too() {
    let s = Store::in_memory().unwrap();
    let text = std::fs::read_to_string(data("early-rollout.jsonl")).unwrap();
    let report = s
        .import_with(text.as_bytes(), None, &TranscriptOptions::default())
        .unwrap();
    assert_eq!(report.sessions, ["5973b6c0-94b8-487b-a530-2aeb6098ae0e"]);
    assert_eq!(
        report.skipped_types,
        BTreeMap::from([("state".to_string(), 2)])
    );
    let turns = s.load(&report.sessions[0], None).unwrap();
    let shape: Vec<(Role, Kind, Option<&str>)> = turns
        .iter()
        .map(|t| (t.role, t.kind, t.tool_call_id.as_deref()))
        .collect();
    assert_eq!(
        shape,
        [
            (Role::User, Kind::Message, None),
            (Role::Assistant, Kind::ToolCall, None),
            (Role::Tool, Kind::Message, Some("call_a1")),
            (Role::Assistant, Kind::Message, None),
        ]
    );
    assert_eq!(turns[2].name.as_deref(), Some("shell"));
    assert_eq!(turns[3].content, "README.md has 120 lines.");
}

#[test]
fn compactions_images_and_encrypted_reasoning_are_kept_or_counted() {
    let line = |payload: Value| {
        json!({"timestamp": "t", "type": "response_item", "payload": payload}).to_string()
    };
    let text = [
        json!({"timestamp": "t", "type": "session_meta", "payload": {"id": "c1"}}).to_string(),
        line(json!({"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "What is in this picture?"},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
            {"type": "input_text", "text": "Be brief."}]})),
        line(json!({"type": "message", "role": "user", "content": [
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}]})),
        line(json!({"type": "reasoning", "summary": [], "encrypted_content": "gAAAA"})),
        json!({"timestamp": "t", "type": "turn_context", "payload": {"model": "model-a"}}).to_string(),
        line(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "A cat."}]})),
        json!({"timestamp": "t", "type": "compacted", "payload": {"message": "The user asked about a picture of a cat."}}).to_string(),
        json!({"timestamp": "t", "type": "turn_context", "payload": {"model": "model-b"}}).to_string(),
        line(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Still a cat."}]})),
        json!({"timestamp": "t", "type": "session_meta", "payload": {"id": "c2"}}).to_string(),
        json!({"timestamp": "t", "type": "world_state", "payload": {}}).to_string(),
    ]
    .join("\n");
    let s = Store::in_memory().unwrap();
    let report = import(&s, &text, false).unwrap();
    assert_eq!(report.sessions, ["c1"]);
    let counted: Vec<(&str, u64)> = report
        .skipped_types
        .iter()
        .map(|(k, n)| (k.as_str(), *n))
        .collect();
    assert_eq!(
        counted,
        [
            ("response_item/message (no text)", 1),
            ("response_item/reasoning (no summary)", 1),
            ("session_meta", 1),
            ("turn_context", 2),
            ("world_state", 1),
        ]
    );
    let turns = s.load(&sid("c1"), None).unwrap();
    let got: Vec<(Role, Kind, &str, Option<&str>)> = turns
        .iter()
        .map(|t| (t.role, t.kind, t.content.as_str(), t.model.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            (
                Role::User,
                Kind::Message,
                "What is in this picture?\n\nBe brief.",
                None
            ),
            (Role::Assistant, Kind::Message, "A cat.", Some("model-a")),
            (
                Role::Assistant,
                Kind::Compaction,
                "The user asked about a picture of a cat.",
                Some("model-a")
            ),
            (
                Role::Assistant,
                Kind::Message,
                "Still a cat.",
                Some("model-b")
            ),
        ]
    );
}

#[test]
fn a_rollout_imported_again_gains_what_it_grew_and_one_that_differs_is_refused() {
    let s = Store::in_memory().unwrap();
    let first = import(&s, &rollout(), false).unwrap();
    let length = s.info(&first.sessions[0]).unwrap().length;
    // The same rollout: nothing new, nothing written.
    imports_nothing_new(&s, "the same rollout", || {
        import(&s, &rollout(), false).unwrap()
    });
    // Grown (Codex appends as the session goes on): the new turns are appended.
    let line = json!({"timestamp": "2025-09-14T09:20:00.000Z", "type": "response_item",
        "payload": {"type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": "And on Sundays?"}]}});
    let grown = format!("{}{line}\n", rollout());
    let report = import(&s, &grown, false).unwrap();
    assert_eq!(report.extended, first.sessions, "{report:?}");
    assert_eq!(report.turns, 1);
    assert_eq!(s.info(&sid(SESSION)).unwrap().length, length + 1);
    // A rollout of the same id that does not start with the stored turns: refused.
    let edited = grown.replace("fails on Mondays", "fails on Tuesdays");
    let err = fails_unchanged(&s, || import(&s, &edited, false));
    assert!(
        matches!(&err, Error::Conflict(m) if m.contains(SESSION) && m.contains("does not hold the start")),
        "{err}"
    );
}

#[test]
fn a_rollout_without_a_usable_id_is_named_the_same_each_time_and_extended_again() {
    for meta_id in ["null", "\"not a valid id: spaces and /slashes/\""] {
        let s = Store::in_memory().unwrap();
        let text = rollout().replacen(&format!("\"{SESSION}\""), meta_id, 1);
        assert!(!text.contains(SESSION));
        let first = import(&s, &text, false).unwrap().sessions;
        assert_eq!(first.len(), 1);
        assert!(first[0].as_str().starts_with("codex-"), "{}", first[0]);
        imports_nothing_new(&s, meta_id, || import(&s, &text, false).unwrap());
        // Grown by a line, it is still the same rollout: the line is appended to it.
        let line = json!({"timestamp": "2025-09-14T09:20:00.000Z", "type": "response_item",
            "payload": {"type": "message", "role": "user",
                        "content": [{"type": "input_text", "text": "Thanks."}]}});
        let grown = format!("{}\n{line}\n", text.trim_end());
        let report = import(&s, &grown, false).unwrap();
        assert_eq!(report.extended, first, "{report:?}");
        assert_eq!(s.list().unwrap().len(), 1);
    }
}

#[test]
fn a_rollout_that_starts_with_a_byte_order_mark_is_read_as_without_one() {
    let s = Store::in_memory().unwrap();
    let text = format!("\u{feff}{}", rollout());
    assert_eq!(
        ImportFormat::sniff(text.as_bytes()),
        Some(ImportFormat::Codex)
    );
    let options = TranscriptOptions::default();
    let report = s.import_with(text.as_bytes(), None, &options).unwrap();
    assert_eq!(report.sessions[0].as_str(), SESSION);
    let plain = Store::in_memory().unwrap();
    import(&plain, &rollout(), false).unwrap();
    let id = report.sessions[0].clone();
    assert_eq!(
        s.replay(&id, None).unwrap(),
        plain.replay(&id, None).unwrap()
    );
}

#[test]
fn a_rollout_of_nothing_to_import_is_refused() {
    let s = Store::in_memory().unwrap();
    // No response item, and no event that shows a message (those would be turns).
    let text = rollout()
        .lines()
        .filter(|l| !l.contains("\"type\":\"response_item\""))
        .filter(|l| !l.contains("_message\""))
        .collect::<Vec<_>>()
        .join("\n");
    let err = fails_unchanged(&s, || import(&s, &text, false));
    assert!(err.to_string().contains("nothing was imported"), "{err}");
}

/// Each mutation of the fixture: the line it breaks and what the error says of it.
#[test]
fn a_malformed_line_is_named_and_nothing_is_written_unless_skipped() {
    let cases: Vec<(String, u64, &str)> = vec![
        (
            with_line(3, &rollout().lines().nth(2).unwrap()[..60]),
            3,
            "not JSON",
        ),
        (
            with_line(
                11,
                r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"call_nobody","output":"?"}}"#,
            ),
            11,
            "call_nobody",
        ),
        (with_line(4, "[1, 2, 3]"), 4, "must be a JSON object"),
        (
            with_line(6, r#"{"timestamp":"t","type":"response_item"}"#),
            6,
            "needs a \"payload\"",
        ),
        (
            with_line(
                2,
                r#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"wizard","content":[]}}"#,
            ),
            2,
            "wizard",
        ),
        (
            with_line(
                7,
                r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{}"}}"#,
            ),
            7,
            "call_id",
        ),
    ];
    for (text, line, why) in cases {
        let s = Store::in_memory().unwrap();
        session_with(&s, "bystander", 2);
        let err = fails_unchanged(&s, || import(&s, &text, false));
        let message = err.to_string();
        assert!(
            message.starts_with(&format!("line {line}: "))
                && message.contains(why)
                && message.ends_with("nothing was imported"),
            "line {line}: {message}"
        );

        let report = import(&s, &text, true).unwrap();
        // A call that was skipped takes its output with it (line 9 answers line 7).
        let expected = if line == 7 { vec![7, 9] } else { vec![line] };
        assert_eq!(report.skipped_invalid, expected, "{why}");
        assert!(s.exists(&sid(SESSION)).unwrap());
    }
}

#[test]
fn the_command_line_imports_a_rollout_and_prints_the_report() {
    // Without the rocksdb feature the binary opens remote stores only: a real Oxigraph
    // server serves for both builds.
    let Some(server) = remote() else {
        return;
    };
    let url = server.location();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_forktrail"))
            .arg("--store")
            .arg(&url)
            .args(args)
            .env_remove("FORKTRAIL_STORE")
            .output()
            .unwrap()
    };
    let file = data("rollout.jsonl");
    let out = run(&["import", "--format", "codex", file.to_str().unwrap()]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout,
        format!(
            "imported {SESSION}\n10 turns\nskipped 3 lines of type event_msg\n\
             skipped 1 line of type response_item/web_search_call\n\
             skipped 1 line of type turn_context\n"
        )
    );
    assert_eq!(server.info(&sid(SESSION)).unwrap().length, 10);

    // Again: nothing new, and the store is as it was.
    let before = quads(&server);
    let out = run(&["import", file.to_str().unwrap()]);
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.starts_with("up to date: nothing new in "),
        "{stdout}"
    );
    assert_eq!(quads(&server), before);

    // A broken line under --skip-invalid: imported without it, the line listed.
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.jsonl");
    let text = with_line(6, "{\"timestamp\":").replace(SESSION, "cli-broken");
    std::fs::write(&broken, text).unwrap();
    let out = run(&["import", broken.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("line 6: "), "{stderr}");
    assert_eq!(quads(&server), before);
    // (Stored whole: its start repeats the rollout imported above.)
    let out = run(&[
        "import",
        broken.to_str().unwrap(),
        "--skip-invalid",
        "--no-dedup",
        "--json",
    ]);
    assert!(out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["imported"], json!(["cli-broken"]));
    assert_eq!(report["turns"], 9);
    assert_eq!(report["skipped_invalid"], json!([6]));
}

/// Every line cut short, dropped, doubled, swapped with the next or with a quote
/// broken: the import never panics, and either refuses leaving the store empty or
/// writes sessions that replay and verify clean.
#[test]
fn mutated_rollouts_are_imported_whole_or_not_at_all() {
    let original: Vec<String> = rollout().lines().map(str::to_string).collect();
    let mut outcomes = [0usize; 2];
    for i in 0..original.len() {
        for op in 0..5 {
            let mut lines = original.clone();
            match op {
                0 => lines[i].truncate(original[i].len() / 2),
                1 => {
                    lines.remove(i);
                }
                2 => lines.insert(i, original[i].clone()),
                3 if i + 1 < lines.len() => lines.swap(i, i + 1),
                3 => continue,
                _ => lines[i] = original[i].replacen('"', "'", 1),
            }
            let text = lines.join("\n");
            let s = Store::in_memory().unwrap();
            match import(&s, &text, false) {
                Err(_) => {
                    outcomes[0] += 1;
                    assert!(s.is_empty().unwrap(), "line {} op {op}: left quads", i + 1);
                }
                Ok(report) => {
                    outcomes[1] += 1;
                    for id in &report.sessions {
                        s.replay(id, None).unwrap();
                    }
                    let verified = s.verify(None).unwrap();
                    assert!(verified.is_clean(), "{:?}", verified.problems);
                }
            }
        }
    }
    assert!(outcomes[0] > 20 && outcomes[1] > 20, "{outcomes:?}");
}

#[test]
fn a_turn_the_write_path_refuses_is_a_malformed_line_too() {
    let item = |payload: Value| {
        json!({"timestamp": "t", "type": "response_item", "payload": payload}).to_string()
    };
    let text = [
        json!({"timestamp": "t", "type": "session_meta", "payload": {"id": "spaced"}}).to_string(),
        item(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Run the tests."}]})),
        item(json!({"type": "function_call", "name": "run tests", "arguments": "{}", "call_id": "c1"})),
        item(json!({"type": "function_call_output", "call_id": "c1", "output": "ok"})),
    ]
    .join("\n");
    let s = Store::in_memory().unwrap();
    let err = fails_unchanged(&s, || import(&s, &text, false));
    assert!(
        err.to_string().starts_with("line 4: ") && err.to_string().contains("run tests"),
        "{err}"
    );
    let report = import(&s, &text, true).unwrap();
    assert_eq!((report.turns, report.skipped_invalid), (2, vec![4]));
}

#[test]
fn a_rollout_of_events_only_keeps_its_prompts_and_answers() {
    // Some Codex versions recorded the conversation only as what the UI was shown.
    let line = |kind: &str, payload: Value| {
        json!({"timestamp": "2025-05-02T10:00:00.000Z", "type": kind, "payload": payload})
            .to_string()
    };
    let text = [
        line("session_meta", json!({"id": "0196905c-1111-7000-8000-000000000001", "timestamp": "2025-05-02T10:00:00.000Z"})),
        line("event_msg", json!({"type": "user_message", "message": "List the files."})),
        line("turn_context", json!({"model": "codex-mini"})),
        line("event_msg", json!({"type": "agent_message", "message": "There are three."})),
        line("event_msg", json!({"type": "token_count", "info": null})),
        line("response_item", json!({"type": "function_call", "name": "shell", "call_id": "k1", "arguments": "{}"})),
    ]
    .join("\n");
    let store = Store::in_memory().unwrap();
    let report = import(&store, &text, false).unwrap();
    assert_eq!(report.turns, 3, "{report:?}");
    assert_eq!(report.skipped_types.get("event_msg"), Some(&1));
    let turns = store.load(&report.sessions[0], None).unwrap();
    let seen: Vec<(Role, &str, Option<&str>)> = turns
        .iter()
        .map(|t| (t.role, t.content.as_str(), t.model.as_deref()))
        .collect();
    assert_eq!(
        seen,
        [
            (Role::User, "List the files.", None),
            (Role::Assistant, "There are three.", Some("codex-mini")),
            (Role::Assistant, "", Some("codex-mini")),
        ]
    );
    // Where response items carry the messages, the events that repeat them stay
    // skipped: the fixture's prompt is imported once.
    let store = Store::in_memory().unwrap();
    let report = import(&store, &rollout(), false).unwrap();
    let prompts = store
        .load(&report.sessions[0], None)
        .unwrap()
        .into_iter()
        .filter(|t| t.content.starts_with("The test for parse_date fails"))
        .count();
    assert_eq!(prompts, 1);
}
