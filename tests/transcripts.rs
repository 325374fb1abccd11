//! Transcript import and export: OpenAI chat messages and Claude Code session logs.

mod common;

use common::*;
use forktrail::{Error, NewSession, Role, SessionId, Store, TranscriptOptions};
use serde_json::Value;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn contents(store: &Store, id: &str) -> Vec<(u64, Role, String)> {
    store
        .replay(&sid(id), None)
        .unwrap()
        .into_iter()
        .map(|r| (r.index, r.role, r.content))
        .collect()
}

#[test]
fn openai_json_with_tool_calls_round_trips() {
    let text = fixture("openai-tools.json");
    let original: Value = serde_json::from_str(&text).unwrap();
    for s in stores() {
        let report = s
            .import_openai(&text, NewSession::default(), &TranscriptOptions::default())
            .unwrap();
        assert_eq!((report.sessions.len(), report.turns), (1, 9));
        let id: SessionId = report.sessions[0].parse().unwrap();
        let exported = Value::Array(s.export_openai(&id).unwrap());
        assert_eq!(exported, original, "{}", s.kind);
        let turns = s.load(&id, None).unwrap();
        assert_eq!(turns[2].kind, forktrail::Kind::ToolCall);
        assert_eq!(turns[3].tool_call_id.as_deref(), Some("call_1"));
        assert_eq!(turns[5].name.as_deref(), Some("alice"));
    }
}

#[test]
fn openai_jsonl_imports_line_by_line_and_a_bad_line_is_named() {
    let original: Vec<Value> = serde_json::from_str(&fixture("openai-tools.json")).unwrap();
    let jsonl: String = original.iter().map(|m| format!("{m}\n")).collect();
    let s = Store::in_memory().unwrap();
    let report = s
        .import_openai(
            &jsonl,
            NewSession {
                id: Some("chat".into()),
                ..Default::default()
            },
            &TranscriptOptions::default(),
        )
        .unwrap();
    assert_eq!(report.sessions, ["chat"]);
    assert_eq!(
        Value::Array(s.export_openai(&sid("chat")).unwrap()),
        Value::Array(original)
    );

    let bad = "{\"role\":\"user\",\"content\":\"hi\"}\n{\"role\":\"wizard\",\"content\":\"x\"}\n";
    let err = fails_unchanged(&s, || {
        s.import_openai(bad, NewSession::default(), &TranscriptOptions::default())
    });
    assert!(
        matches!(&err, Error::InvalidInput(m) if m.contains("line 2") && m.contains("wizard")),
        "{err}"
    );
    let broken = "{\"role\":\"user\",\"content\":\"hi\"}\n{not json\n";
    let err = fails_unchanged(&s, || {
        s.import_openai(broken, NewSession::default(), &TranscriptOptions::default())
    });
    assert!(err.to_string().contains("line 2"), "{err}");
    let skipping = TranscriptOptions {
        skip_invalid: true,
        ..Default::default()
    };
    let report = s
        .import_openai(broken, NewSession::default(), &skipping)
        .unwrap();
    assert_eq!((report.turns, report.skipped_invalid.clone()), (1, vec![2]));
}

#[test]
fn a_claude_code_log_becomes_a_session_a_fork_per_alternative_and_a_sidechain() {
    let main = "7f3c2a10-5b1e-4c8e-9a61-2d4f0e8b9c01";
    for s in stores() {
        let calls = std::cell::Cell::new(0);
        let progress = |_: u64, _: u64| calls.set(calls.get() + 1);
        let report = s
            .import_claude_code(
                &fixture("claude-code-branches.jsonl"),
                &TranscriptOptions {
                    progress: Some(&progress),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(calls.get(), 15, "one progress call per line");
        assert_eq!(report.sessions.len(), 3, "{report:?}");
        assert_eq!(report.sessions[0], main);
        assert_eq!(report.turns, 12);
        let skipped: Vec<(&str, u64)> = report
            .skipped_types
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        assert_eq!(
            skipped,
            [("file-history-snapshot", 1), ("summary", 1), ("system", 1)]
        );
        let replay = contents(&s, main);
        let expected = [
            (Role::User, "The test for parse_date fails about once a week. Can you find out why?"),
            (Role::Assistant, "Let me read the test first."),
            (Role::Tool, "assert_eq!(parse_date(\"today\"), Local::now().date_naive());"),
            (Role::Assistant, "The test compares against the local date, so it fails when run across midnight. I can freeze the clock."),
            (Role::User, "Freeze the clock with a fixed date."),
            (Role::Assistant, "Done: the test now passes a fixed date to parse_date_at."),
            (Role::User, "Run the whole suite."),
            (Role::Assistant, "All 214 tests pass."),
        ];
        let got: Vec<(Role, &str)> = replay.iter().map(|(_, r, c)| (*r, c.as_str())).collect();
        assert_eq!(got, expected, "{}", s.kind);
        let turns = s.load(&sid(main), None).unwrap();
        assert!(turns[1]
            .tool_calls
            .as_deref()
            .unwrap()
            .contains("\"name\":\"Read\""));
        assert_eq!(turns[1].model.as_deref(), Some("claude-sonnet-4-5"));
        assert_eq!(turns[2].tool_call_id.as_deref(), Some("toolu_01"));

        let branches = s.branches(&sid(main)).unwrap();
        let alt = branches.iter().find(|b| b.branch == "alt-1").unwrap();
        assert_eq!((alt.forked_at_index, alt.own_turns), (4, 2));
        let alt_replay = contents(&s, &alt.session);
        assert_eq!(alt_replay[..4], replay[..4]);
        assert_eq!(
            alt_replay[4].2,
            "Rather make parse_date take the time zone as a parameter."
        );
        assert_eq!(
            alt_replay[5].2,
            "parse_date now takes a Tz; the test passes UTC."
        );
        let side = branches.iter().find(|b| b.branch == "sidechain-1").unwrap();
        assert_eq!((side.forked_at_index, side.own_turns), (0, 2));
        assert_eq!(
            contents(&s, &side.session)[1].2,
            "Found two: src/report.rs line 14 and src/cli.rs line 88."
        );
        // The same log again: its main session id is taken, and nothing is written.
        let err = fails_unchanged(&s, || {
            s.import_claude_code(
                &fixture("claude-code-branches.jsonl"),
                &TranscriptOptions::default(),
            )
        });
        assert!(err.to_string().contains("already exists"), "{err}");
    }
}

#[test]
fn a_malformed_claude_code_line_is_named_and_nothing_is_written_unless_skipped() {
    let mut log = fixture("claude-code-branches.jsonl");
    log = log.replacen("\"uuid\":\"u3\",", "\"uuid\":\"u3\",,", 1);
    let s = Store::in_memory().unwrap();
    let err = fails_unchanged(&s, || {
        s.import_claude_code(&log, &TranscriptOptions::default())
    });
    assert!(err.to_string().starts_with("line 7:"), "{err}");
    let report = s
        .import_claude_code(
            &log,
            &TranscriptOptions {
                skip_invalid: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(report.skipped_invalid, [7]);
    // u3 is gone: u3b is the only continuation after a2, so no alternative fork, and
    // a3 (whose parent is unknown now) starts a root session of its own.
    assert_eq!(report.sessions.len(), 3, "{report:?}");
    let main = &report.sessions[0];
    assert_eq!(
        contents(&s, main)[4].2,
        "Rather make parse_date take the time zone as a parameter."
    );
    let orphan = &report.sessions[1];
    assert_eq!(s.info(&sid(orphan)).unwrap().parent, None);
    assert_eq!(
        contents(&s, orphan)[0].2,
        "Done: the test now passes a fixed date to parse_date_at."
    );
}

#[test]
fn duplicate_uuids_and_parent_loops_are_named_by_line() {
    let s = Store::in_memory().unwrap();
    let line = |uuid: &str, parent: &str, text: &str| {
        format!(
            "{{\"type\":\"user\",\"uuid\":\"{uuid}\",\"parentUuid\":{parent},\"message\":{{\"role\":\"user\",\"content\":\"{text}\"}}}}\n"
        )
    };
    let duplicate = line("a", "null", "one") + &line("a", "null", "two");
    let err = fails_unchanged(&s, || {
        s.import_claude_code(&duplicate, &TranscriptOptions::default())
    });
    assert!(
        err.to_string()
            .starts_with("line 2: uuid a was already used on line 1"),
        "{err}"
    );
    let looped = line("r", "null", "root") + &line("x", "\"y\"", "x") + &line("y", "\"x\"", "y");
    let err = fails_unchanged(&s, || {
        s.import_claude_code(&looped, &TranscriptOptions::default())
    });
    assert!(
        err.to_string().starts_with("line 2:") && err.to_string().contains("loops"),
        "{err}"
    );
    let report = s
        .import_claude_code(
            &looped,
            &TranscriptOptions {
                skip_invalid: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(
        (report.turns, report.skipped_invalid.clone()),
        (1, vec![2, 3])
    );
    // A tool name that cannot be an agent name is a bad line, not a failed import.
    let bad_tool =
        "{\"role\":\"tool\",\"name\":\"has space\",\"tool_call_id\":\"c\",\"content\":\"x\"}\n";
    let err = fails_unchanged(&s, || {
        s.import_openai(
            bad_tool,
            NewSession::default(),
            &TranscriptOptions::default(),
        )
    });
    assert!(err.to_string().starts_with("line 1:"), "{err}");
}
