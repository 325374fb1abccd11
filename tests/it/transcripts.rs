//! Transcript import and export: OpenAI chat messages and Claude Code session logs.

use crate::common;

use common::*;
use forktrail::{Error, NewSession, NewTurn, Role, SessionId, Store, TranscriptOptions};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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
        // The same log again: every line is imported already, so nothing changes.
        let before = quads(&s);
        let again = s
            .import_claude_code(
                &fixture("claude-code-branches.jsonl"),
                &TranscriptOptions::default(),
            )
            .unwrap();
        assert_eq!(
            (again.sessions.len(), again.extended.len(), again.turns),
            (0, 0, 0),
            "{again:?}"
        );
        assert_eq!(before, quads(&s), "{}", s.kind);
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

const PROJECT_MAIN: &str = "5b0c1e7a-2f4d-4c1a-9e8b-6a7d3c2b1f00";

fn project() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude-project")
}

/// The value of `predicate` on the node of session `id`, in its graph.
fn session_fact(s: &Store, id: &str, predicate: &str) -> Option<String> {
    let iri = format!("urn:forktrail:session:{id}");
    let q = format!(
        "SELECT ?v WHERE {{ GRAPH <{iri}> {{ <{iri}> <https://w3id.org/forktrail/ns#{predicate}> ?v }} }}"
    );
    let oxigraph::sparql::QueryResults::Solutions(mut rows) = s.query(&q, &[]).unwrap() else {
        panic!("not a SELECT")
    };
    rows.next().map(|r| match r.unwrap().get("v").unwrap() {
        oxigraph::model::Term::Literal(l) => l.value().to_string(),
        other => other.to_string(),
    })
}

#[test]
fn a_claude_code_project_folder_links_each_sub_agent_to_the_turn_that_launched_it() {
    let explore = format!("{PROJECT_MAIN}:agent-a1b2c3d4");
    let nested = format!("{PROJECT_MAIN}:agent-e5f6a7b8");
    let legacy = format!("{PROJECT_MAIN}:agent-legacy77");
    for s in stores() {
        let report = s
            .import_claude_code_path(&project(), &TranscriptOptions::default())
            .unwrap();
        assert_eq!(
            report.sessions,
            [
                PROJECT_MAIN,
                explore.as_str(),
                legacy.as_str(),
                nested.as_str()
            ],
            "{report:?}"
        );
        assert_eq!(report.turns, 6 + 6 + 2 + 2);
        assert!(report.unresolved_subagents.is_empty(), "{report:?}");
        // The thinking-only line is skipped, and its child hangs on to its parent.
        assert_eq!(
            report.skipped_types.get("assistant (no text or tool use)"),
            Some(&1),
            "{report:?}"
        );
        let main = contents(&s, PROJECT_MAIN);
        assert_eq!(main.len(), 6);
        assert_eq!(
            main[5].2,
            "parse_date used the local offset; it now takes the offset as a parameter."
        );
        // Each sub-agent is a fork at 0 of the session whose turn launched it.
        for (agent, parent, launched_by, turns) in [
            (&explore, PROJECT_MAIN, 1, 6),
            (&legacy, PROJECT_MAIN, 3, 2),
            (&nested, explore.as_str(), 3, 2),
        ] {
            let info = s.info(&sid(agent)).unwrap();
            assert_eq!(info.parent.as_deref(), Some(parent), "{agent}");
            assert_eq!(
                (info.forked_at_index, info.length),
                (Some(0), turns),
                "{agent}"
            );
            assert_eq!(
                session_fact(&s, agent, "spawnedBy"),
                Some(format!(
                    "<urn:forktrail:session:{parent}/turn/{launched_by}>"
                )),
                "{agent}"
            );
            assert_eq!(
                session_fact(&s, agent, "spawnedInSession").as_deref(),
                Some(PROJECT_MAIN)
            );
        }
        assert_eq!(s.info(&sid(&nested)).unwrap().depth, 2);
        let shown = s.info(&sid(&explore)).unwrap().subagent.unwrap();
        assert_eq!(
            (shown.agent_id.as_str(), shown.tool_call_id.as_deref()),
            ("a1b2c3d4", Some("toolu_task1"))
        );
        let launch = shown.spawned_by.unwrap();
        assert_eq!((launch.session.as_str(), launch.index), (PROJECT_MAIN, 1));
        assert_eq!(s.info(&sid(PROJECT_MAIN)).unwrap().subagent, None);
        assert_eq!(
            session_fact(&s, &explore, "spawnToolCallId").as_deref(),
            Some("toolu_task1")
        );
        assert_eq!(contents(&s, &explore)[0].2, "Find where dates are parsed.");
        // The launching turn is the one whose tool calls name the call.
        let launcher = &s.load(&sid(PROJECT_MAIN), None).unwrap()[1];
        assert!(launcher
            .tool_calls
            .as_deref()
            .unwrap()
            .contains("toolu_task1"));
        let labels: Vec<String> = s
            .branches(&sid(PROJECT_MAIN))
            .unwrap()
            .into_iter()
            .map(|b| b.branch)
            .collect();
        assert_eq!(labels, ["agent-a1b2c3d4", "agent-legacy77"]);
        // Importing the folder again changes nothing.
        let before = quads(&s);
        let again = s
            .import_claude_code_path(&project(), &TranscriptOptions::default())
            .unwrap();
        assert_eq!((again.sessions.len(), again.turns), (0, 0), "{again:?}");
        assert_eq!(before, quads(&s));
    }
}

#[test]
fn a_lone_sub_agent_file_is_a_root_with_an_unresolved_link_resolved_by_the_folder() {
    let explore = format!("{PROJECT_MAIN}:agent-a1b2c3d4");
    let file = project()
        .join(PROJECT_MAIN)
        .join("subagents/agent-a1b2c3d4.jsonl");
    for s in stores() {
        let report = s
            .import_claude_code_path(&file, &TranscriptOptions::default())
            .unwrap();
        assert_eq!(report.sessions, [explore.as_str()]);
        assert_eq!(report.unresolved_subagents, [explore.as_str()]);
        let info = s.info(&sid(&explore)).unwrap();
        assert_eq!((info.parent, info.length), (None, 6));
        assert_eq!(session_fact(&s, &explore, "spawnedBy"), None);
        let shown = s.info(&sid(&explore)).unwrap().subagent.unwrap();
        assert_eq!(
            (shown.spawned_by, shown.spawned_in_session.as_deref()),
            (None, Some(PROJECT_MAIN))
        );
        assert_eq!(
            session_fact(&s, &explore, "spawnToolCallId").as_deref(),
            Some("toolu_task1"),
            "the launch is recorded, from the meta file"
        );
        assert_eq!(
            session_fact(&s, &explore, "spawnedInSession").as_deref(),
            Some(PROJECT_MAIN)
        );
        let digests: Vec<String> = s
            .load(&sid(&explore), None)
            .unwrap()
            .into_iter()
            .map(|t| t.digest)
            .collect();
        // The folder brings the trunk: the sub-agent becomes a fork at 0 of the main
        // session, linked to its launching turn, its turns untouched.
        let report = s
            .import_claude_code_path(&project(), &TranscriptOptions::default())
            .unwrap();
        assert!(report.extended.contains(&sid(&explore)), "{report:?}");
        assert!(!report.sessions.contains(&sid(&explore)), "{report:?}");
        let info = s.info(&sid(&explore)).unwrap();
        assert_eq!(info.parent.as_deref(), Some(PROJECT_MAIN));
        assert_eq!((info.forked_at_index, info.depth), (Some(0), 1));
        assert_eq!(info.branch, "agent-a1b2c3d4");
        assert_eq!(
            session_fact(&s, &explore, "spawnedBy"),
            Some(format!("<urn:forktrail:session:{PROJECT_MAIN}/turn/1>"))
        );
        let after: Vec<String> = s
            .load(&sid(&explore), None)
            .unwrap()
            .into_iter()
            .map(|t| t.digest)
            .collect();
        assert_eq!(digests, after);
        assert_eq!(s.info(&sid(&explore)).unwrap().length, 6);
    }
}

#[test]
fn a_grown_log_imported_again_gains_only_its_new_lines() {
    let log = fixture("claude-code-branches.jsonl");
    let main = "7f3c2a10-5b1e-4c8e-9a61-2d4f0e8b9c01";
    let line = |uuid: &str, parent: &str, role: &str, text: &str| {
        format!(
            "{{\"type\":\"{role}\",\"uuid\":\"{uuid}\",\"parentUuid\":\"{parent}\",\"sessionId\":\"{main}\",\"isSidechain\":false,\"message\":{{\"role\":\"{role}\",\"content\":\"{text}\"}}}}\n"
        )
    };
    for s in stores() {
        s.import_claude_code(&log, &TranscriptOptions::default())
            .unwrap();
        let before = contents(&s, main);
        let branches_before = s.branches(&sid(main)).unwrap().len();
        // The conversation went on after a4, and the user also retried at u4.
        let grown = log.clone()
            + &line("u5", "a4", "user", "Commit it.")
            + &line("a5", "u5", "assistant", "Committed as 3f2a1c.")
            + &line("u4b", "a3", "user", "Run only the date tests.");
        let report = s
            .import_claude_code(&grown, &TranscriptOptions::default())
            .unwrap();
        assert_eq!(report.turns, 3, "{report:?}");
        assert_eq!(report.extended, [main], "{report:?}");
        assert_eq!(report.sessions.len(), 1, "one new fork for u4b: {report:?}");
        let after = contents(&s, main);
        assert_eq!(after[..before.len()], before[..]);
        assert_eq!(after.len(), before.len() + 2);
        assert_eq!(after.last().unwrap().2, "Committed as 3f2a1c.");
        let branches = s.branches(&sid(main)).unwrap();
        assert_eq!(branches.len(), branches_before + 1);
        let retry = branches
            .iter()
            .find(|b| b.session == report.sessions[0])
            .unwrap();
        assert_eq!(retry.branch, "alt-2", "alt-1 is taken");
        assert_eq!(retry.forked_at_index, 6);
        // The first turns keep their digests: they were not rewritten.
        let digests = |s: &Store| -> Vec<String> {
            s.load(&sid(main), None)
                .unwrap()
                .into_iter()
                .map(|t| t.digest)
                .collect()
        };
        let first = digests(&s);
        s.import_claude_code(&grown, &TranscriptOptions::default())
            .unwrap();
        assert_eq!(first, digests(&s));
    }
}

#[test]
fn a_session_not_imported_from_claude_code_is_not_appended_to() {
    let s = Store::in_memory().unwrap();
    let id = s
        .create_session(NewSession {
            id: Some("7f3c2a10-5b1e-4c8e-9a61-2d4f0e8b9c01".into()),
            ..Default::default()
        })
        .unwrap();
    s.append(&id, NewTurn::new(Role::User, "mine")).unwrap();
    let err = fails_unchanged(&s, || {
        s.import_claude_code(
            &fixture("claude-code-branches.jsonl"),
            &TranscriptOptions::default(),
        )
    });
    assert!(
        err.to_string()
            .contains("was not imported from a Claude Code log"),
        "{err}"
    );
}

#[test]
fn thinking_only_lines_are_skipped_and_a_log_of_nothing_else_is_refused() {
    let s = Store::in_memory().unwrap();
    let user = r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"t1","message":{"role":"user","content":"Why?"}}"#;
    let thinking = r#"{"type":"assistant","uuid":"a1","parentUuid":"u1","sessionId":"t1","message":{"role":"assistant","model":"m","content":[{"type":"thinking","thinking":"hmm"}]}}"#;
    let answer = r#"{"type":"assistant","uuid":"a2","parentUuid":"a1","sessionId":"t1","message":{"role":"assistant","model":"m","content":"Because."}}"#;
    let report = s
        .import_claude_code(
            &format!("{user}\n{thinking}\n{answer}\n"),
            &TranscriptOptions::default(),
        )
        .unwrap();
    assert_eq!(report.turns, 2);
    assert_eq!(
        report.skipped_types.get("assistant (no text or tool use)"),
        Some(&1)
    );
    assert_eq!(
        contents(&s, "t1")
            .into_iter()
            .map(|(_, _, c)| c)
            .collect::<Vec<_>>(),
        ["Why?", "Because."]
    );
    let only = thinking.replace("\"u1\"", "null").replace("t1", "t2");
    let err = fails_unchanged(&s, || {
        s.import_claude_code(&only, &TranscriptOptions::default())
    });
    assert!(
        err.to_string()
            .contains("no user or assistant message with text"),
        "{err}"
    );
}

#[test]
fn a_line_that_names_no_session_still_links_the_lines_around_it() {
    let s = Store::in_memory().unwrap();
    let user = r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"t3","message":{"role":"user","content":"Why?"}}"#;
    let system = r#"{"type":"system","uuid":"s1","parentUuid":"u1","content":"Compacted"}"#;
    let answer = r#"{"type":"assistant","uuid":"a1","parentUuid":"s1","sessionId":"t3","message":{"role":"assistant","model":"m","content":"Because."}}"#;
    let snapshot = r#"{"type":"file-history-snapshot","messageId":"u1","snapshot":{}}"#;
    let report = s
        .import_claude_code(
            &format!("{snapshot}\n{user}\n{system}\n{answer}\n"),
            &TranscriptOptions::default(),
        )
        .unwrap();
    assert_eq!(
        report.sessions,
        ["t3"],
        "one session, not a second root: {report:?}"
    );
    assert_eq!(contents(&s, "t3").len(), 2);
}

/// A Claude Code message line of log `log`.
fn cc_line(log: &str, uuid: &str, parent: Option<&str>, role: &str, text: &str) -> String {
    let parent = parent.map_or("null".to_string(), |p| format!("\"{p}\""));
    format!(
        "{{\"type\":\"{role}\",\"uuid\":\"{uuid}\",\"parentUuid\":{parent},\"sessionId\":\"{log}\",\"message\":{{\"role\":\"{role}\",\"content\":\"{text}\"}}}}\n"
    )
}

#[test]
fn compacted_and_multi_root_logs_import_again_without_duplicates() {
    for s in stores() {
        // A compaction boundary: a system line with no parentUuid that names the line
        // it continues; and a second root the log holds besides.
        let log = cc_line("c1", "u1", None, "user", "Plan the release.")
            + &cc_line("c1", "a1", Some("u1"), "assistant", "Three steps.")
            + "{\"type\":\"system\",\"subtype\":\"compact_boundary\",\"uuid\":\"b1\",\"parentUuid\":null,\"logicalParentUuid\":\"a1\",\"sessionId\":\"c1\",\"content\":\"Conversation compacted\"}\n"
            + &cc_line("c1", "u2", Some("b1"), "user", "Continue from the summary.")
            + &cc_line("c1", "x1", None, "user", "An orphan question.");
        let first = s
            .import_claude_code(&log, &TranscriptOptions::default())
            .unwrap();
        assert_eq!(
            first.sessions.len(),
            2,
            "the main chain and the orphan: {first:?}"
        );
        assert_eq!(
            contents(&s, "c1")
                .into_iter()
                .map(|(_, _, c)| c)
                .collect::<Vec<_>>(),
            [
                "Plan the release.",
                "Three steps.",
                "Continue from the summary."
            ],
            "the conversation goes on through the compaction"
        );
        let before = quads(&s);
        let again = s
            .import_claude_code(&log, &TranscriptOptions::default())
            .unwrap();
        assert_eq!((again.sessions.len(), again.turns), (0, 0), "{again:?}");
        assert_eq!(before, quads(&s), "{}", s.kind);
        // The orphan's chain grows: appended to its own session.
        let grown = log + &cc_line("c1", "x2", Some("x1"), "assistant", "An answer.");
        let third = s
            .import_claude_code(&grown, &TranscriptOptions::default())
            .unwrap();
        assert_eq!(third.extended, [first.sessions[1].clone()], "{third:?}");
        assert_eq!(contents(&s, &first.sessions[1]).len(), 2);
    }
}

#[test]
fn a_sub_agent_with_branches_imported_alone_then_linked_keeps_its_branches_below_it() {
    let log = "d1";
    let agent_file = |lines: &[(&str, Option<&str>, &str)]| -> String {
        lines
            .iter()
            .map(|(uuid, parent, text)| {
                cc_line(log, uuid, *parent, "user", text).replacen(
                    "\"sessionId\"",
                    "\"isSidechain\":true,\"agentId\":\"ag1\",\"sessionId\"",
                    1,
                )
            })
            .collect()
    };
    let sub = agent_file(&[
        ("s1", None, "Look around."),
        ("s2", Some("s1"), "First look."),
        ("s3", Some("s1"), "Second look."),
    ]);
    let trunk = cc_line(log, "t1", None, "user", "Go.")
        + "{\"type\":\"assistant\",\"uuid\":\"t2\",\"parentUuid\":\"t1\",\"sessionId\":\"d1\",\"message\":{\"role\":\"assistant\",\"model\":\"m\",\"content\":[{\"type\":\"tool_use\",\"id\":\"call-9\",\"name\":\"Task\",\"input\":{}}]}}\n"
        + "{\"type\":\"user\",\"uuid\":\"t3\",\"parentUuid\":\"t2\",\"sessionId\":\"d1\",\"toolUseResult\":{\"agentId\":\"ag1\"},\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"call-9\",\"content\":\"done\"}]}}\n";
    for s in stores() {
        let dir = tempfile::tempdir().unwrap();
        let alone = dir.path().join("agent-ag1.jsonl");
        std::fs::write(&alone, &sub).unwrap();
        let report = s
            .import_claude_code_path(&alone, &TranscriptOptions::default())
            .unwrap();
        assert_eq!(
            report.sessions.len(),
            2,
            "the agent and its branch: {report:?}"
        );
        let agent = "d1:agent-ag1";
        let branch = s.branches(&sid(agent)).unwrap()[0].session.clone();
        assert_eq!(s.info(&sid(&branch)).unwrap().depth, 1);
        // Now the whole folder: the agent is linked under the trunk's turn 1, and its
        // branch moves down with it rather than being made again.
        std::fs::write(dir.path().join("d1.jsonl"), &trunk).unwrap();
        let report = s
            .import_claude_code_path(dir.path(), &TranscriptOptions::default())
            .unwrap();
        assert_eq!(report.sessions, ["d1"], "{report:?}");
        assert!(report.extended.contains(&sid(&branch)), "{report:?}");
        let info = s.info(&sid(agent)).unwrap();
        assert_eq!((info.parent.as_deref(), info.depth), (Some("d1"), 1));
        let moved = s.info(&sid(&branch)).unwrap();
        assert_eq!((moved.depth, moved.fork_root.as_str()), (2, "d1"));
        assert_eq!(s.branches(&sid(agent)).unwrap().len(), 1);
        assert_eq!(contents(&s, &branch).len(), 2);
    }
}

#[test]
fn a_sub_agent_imported_after_its_trunk_is_linked_to_the_stored_launch() {
    let s = Store::in_memory().unwrap();
    let trunk = std::fs::read_to_string(project().join(format!("{PROJECT_MAIN}.jsonl"))).unwrap();
    s.import_claude_code(&trunk, &TranscriptOptions::default())
        .unwrap();
    let sub = std::fs::read_to_string(
        project()
            .join(PROJECT_MAIN)
            .join("subagents/agent-a1b2c3d4.jsonl"),
    )
    .unwrap();
    // As text, with no meta file: the tool result's agentId names the launch.
    let report = s
        .import_claude_code(&sub, &TranscriptOptions::default())
        .unwrap();
    let explore = format!("{PROJECT_MAIN}:agent-a1b2c3d4");
    assert!(report.unresolved_subagents.is_empty(), "{report:?}");
    let info = s.info(&sid(&explore)).unwrap();
    assert_eq!(info.parent.as_deref(), Some(PROJECT_MAIN));
    let launch = info.subagent.unwrap().spawned_by.unwrap();
    assert_eq!((launch.session.as_str(), launch.index), (PROJECT_MAIN, 1));
}

#[test]
fn skipped_lines_of_a_folder_are_named_by_file() {
    let dir = tempfile::tempdir().unwrap();
    let copy = |from: &Path, to: &Path| {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, to).unwrap();
    };
    let trunk = format!("{PROJECT_MAIN}.jsonl");
    copy(&project().join(&trunk), &dir.path().join(&trunk));
    let sub = format!("{PROJECT_MAIN}/subagents/agent-e5f6a7b8.jsonl");
    let mut text = std::fs::read_to_string(project().join(&sub)).unwrap();
    text.push_str("{not json\n");
    std::fs::create_dir_all(dir.path().join(format!("{PROJECT_MAIN}/subagents"))).unwrap();
    std::fs::write(dir.path().join(&sub), text).unwrap();
    let s = Store::in_memory().unwrap();
    let err = fails_unchanged(&s, || {
        s.import_claude_code_path(dir.path(), &TranscriptOptions::default())
    });
    assert!(
        err.to_string().contains("agent-e5f6a7b8.jsonl line 3:"),
        "{err}"
    );
    let report = s
        .import_claude_code_path(
            dir.path(),
            &TranscriptOptions {
                skip_invalid: true,
                ..Default::default()
            },
        )
        .unwrap();
    let (file, lines) = report.skipped_invalid_in.iter().next().unwrap();
    assert!(file.ends_with("agent-e5f6a7b8.jsonl"), "{file}");
    assert_eq!(lines, &[3]);
}

#[test]
fn a_large_transcript_goes_in_whole_through_the_bulk_path_and_never_over_a_session() {
    // Not on Virtuoso: an import is one INSERT DATA there, and Virtuoso's SPARQL
    // compiler runs out of memory on one of this size (about 24,000 triples).
    for s in stores().into_iter().filter(|s| s.kind != "virtuoso") {
        let lines: Vec<String> = (0..3_000)
            .map(|i| {
                let role = if i % 2 == 0 { "user" } else { "assistant" };
                serde_json::json!({ "role": role, "content": format!("message {i}") }).to_string()
            })
            .collect();
        let text = lines.join("\n");
        let session = || NewSession {
            id: Some("bulk".into()),
            ..Default::default()
        };
        let report = s
            .import_openai(&text, session(), &TranscriptOptions::default())
            .unwrap();
        assert_eq!(report.turns, 3_000, "{}", s.kind);
        let replay = s.replay(&sid("bulk"), None).unwrap();
        assert_eq!(replay.len(), 3_000, "{}", s.kind);
        assert_eq!(replay[2_999].content, "message 2999");
        assert!(
            s.verify(Some(&sid("bulk"))).unwrap().is_clean(),
            "{}",
            s.kind
        );
        // The same id again is refused before anything is written.
        let err = fails_unchanged(&s, || {
            s.import_openai(&text, session(), &TranscriptOptions::default())
        });
        assert!(
            matches!(&err, Error::Conflict(m) if m.contains("session bulk already exists")),
            "{}: {err}",
            s.kind
        );
    }
}

/// Imports `grown` into a store that already holds `prefix` (when `prefix` is a valid
/// log) and asserts the store ends as an import of `grown` alone leaves an empty one,
/// and verifies clean. Returns whether `prefix` was a valid log.
fn grows_into_what_a_fresh_import_makes(
    prefix: &dyn Fn(&Store) -> Result<forktrail::TranscriptReport, Error>,
    grown: &dyn Fn(&Store) -> Result<forktrail::TranscriptReport, Error>,
    what: &str,
) -> bool {
    let fresh = Store::in_memory().unwrap();
    grown(&fresh).unwrap();
    let s = Store::in_memory().unwrap();
    match prefix(&s) {
        Ok(_) => {}
        Err(Error::InvalidInput(m)) if m.contains("no user or assistant message") => return false,
        Err(e) => panic!("{what}: the prefix alone fails: {e}"),
    }
    if let Err(e) = grown(&s) {
        panic!("{what}: importing the grown log again fails: {e}");
    }
    let (got, want) = (shape(&s), shape(&fresh));
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{what}: the sessions"
    );
    for (name, want) in &want {
        assert_eq!(&got[name], want, "{what}: session {name}");
    }
    let report = s.verify(None).unwrap();
    assert!(report.is_clean(), "{what}: {:?}", report.problems);
    // And once more: nothing left to add.
    let before = quads(&s);
    let again = grown(&s).unwrap();
    assert_eq!(
        (again.sessions.len(), again.turns),
        (0, 0),
        "{what}: {again:?}"
    );
    assert_eq!(before, quads(&s), "{what}");
    true
}

#[test]
fn a_log_cut_at_any_line_and_imported_again_whole_ends_as_a_fresh_import_of_it() {
    // The second log branches at regenerated answers, an edited prompt, inside a
    // branch, after a compaction, and at an edited first prompt (a second root).
    for name in [
        "claude-code-branches.jsonl",
        "claude-code-regenerated.jsonl",
    ] {
        let log = fixture(name);
        let lines: Vec<&str> = log.lines().collect();
        let whole = |s: &Store| s.import_claude_code(&log, &TranscriptOptions::default());
        let mut valid = 0;
        for n in 0..=lines.len() {
            let cut: String = lines[..n].iter().map(|l| format!("{l}\n")).collect();
            let prefix = |s: &Store| s.import_claude_code(&cut, &TranscriptOptions::default());
            let what = format!("{name} cut at {n} lines");
            if grows_into_what_a_fresh_import_makes(&prefix, &whole, &what) {
                valid += 1;
            }
        }
        // Every cut but the empty log and the lone summary line holds a message.
        assert_eq!(valid, lines.len() - 1, "{name}");
    }
}

#[test]
fn a_project_folder_with_any_file_cut_short_and_imported_again_whole_ends_as_a_fresh_import() {
    let mut files: Vec<PathBuf> = Vec::new();
    let mut dirs = vec![project()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    let whole = |s: &Store| s.import_claude_code_path(&project(), &TranscriptOptions::default());
    let (mut cuts, mut valid) = (0, 0);
    for file in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "jsonl"))
    {
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for n in 0..=lines.len() {
            cuts += 1;
            let dir = tempfile::tempdir().unwrap();
            for other in &files {
                let to = dir.path().join(other.strip_prefix(project()).unwrap());
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                if other == file {
                    let cut: String = lines[..n].iter().map(|l| format!("{l}\n")).collect();
                    std::fs::write(&to, cut).unwrap();
                } else {
                    std::fs::copy(other, &to).unwrap();
                }
            }
            let prefix =
                |s: &Store| s.import_claude_code_path(dir.path(), &TranscriptOptions::default());
            let what = format!("{} cut at {n} lines", file.display());
            if grows_into_what_a_fresh_import_makes(&prefix, &whole, &what) {
                valid += 1;
            }
        }
    }
    // The other files hold messages whatever the cut.
    assert_eq!(valid, cuts);
}

/// Imports the Claude Code log `log` as `first`, then grown to `grown`, into `s`, and
/// checks that the second import writes `turns` turns to one session, and that the log
/// has one branch, `alt-1` forked at index 3, and a clean store; returns that import's
/// report and the branch.
fn import_grown(
    s: &TestStore,
    log: &str,
    first: &str,
    grown: &str,
    turns: u64,
) -> (forktrail::TranscriptReport, SessionId) {
    s.import_claude_code(first, &TranscriptOptions::default())
        .unwrap();
    let report = s
        .import_claude_code(grown, &TranscriptOptions::default())
        .unwrap();
    assert_eq!(
        (report.sessions.len(), report.turns),
        (1, turns),
        "{report:?}"
    );
    let branches = s.branches(&sid(log)).unwrap();
    assert_eq!(branches.len(), 1, "{}", s.kind);
    assert_eq!(
        (branches[0].branch.as_str(), branches[0].forked_at_index),
        ("alt-1", 3),
        "{}",
        s.kind
    );
    assert!(s.verify(None).unwrap().is_clean(), "{}", s.kind);
    (report, branches[0].session.clone())
}

#[test]
fn a_log_grown_by_a_regenerated_answer_to_an_imported_prompt_is_imported_again_as_a_fork() {
    let log = "r1";
    let first = cc_line(log, "u1", None, "user", "Name a prime.")
        + &cc_line(log, "a1", Some("u1"), "assistant", "Seven.")
        + &cc_line(log, "u2", Some("a1"), "user", "Another one.")
        + &cc_line(log, "a2", Some("u2"), "assistant", "Eleven.");
    // The user regenerated the answer to u2 (which already has a2), then went on from
    // the new answer.
    let grown = first.clone()
        + &cc_line(log, "a2b", Some("u2"), "assistant", "Thirteen.")
        + &cc_line(log, "u3b", Some("a2b"), "user", "And a larger one?")
        + &cc_line(log, "a3b", Some("u3b"), "assistant", "Ninety-seven.");
    for s in stores() {
        let (_, alt) = import_grown(&s, log, &first, &grown, 3);
        let alt: Vec<String> = contents(&s, &alt).into_iter().map(|(_, _, c)| c).collect();
        assert_eq!(
            alt,
            [
                "Name a prime.",
                "Seven.",
                "Another one.",
                "Thirteen.",
                "And a larger one?",
                "Ninety-seven."
            ],
            "{}",
            s.kind
        );
        assert_eq!(contents(&s, log).len(), 4, "{}", s.kind);
    }
    let prefix = |s: &Store| s.import_claude_code(&first, &TranscriptOptions::default());
    let whole = |s: &Store| s.import_claude_code(&grown, &TranscriptOptions::default());
    assert!(grows_into_what_a_fresh_import_makes(
        &prefix,
        &whole,
        "a regenerated answer"
    ));
}

#[test]
fn a_log_grown_by_a_prompt_and_two_answers_to_it_forks_at_a_turn_the_same_import_appends() {
    // The branch point a2 is itself new: the fork hangs on a turn the stored session
    // gains in the same import.
    let log = "r2";
    let first = cc_line(log, "u1", None, "user", "Hello.");
    let grown = first.clone()
        + &cc_line(log, "a1", Some("u1"), "assistant", "Hi.")
        + &cc_line(log, "u2", Some("a1"), "user", "Tell a joke.")
        + &cc_line(log, "a2", Some("u2"), "assistant", "A pun.")
        + &cc_line(log, "a2b", Some("u2"), "assistant", "A limerick.");
    for s in stores() {
        let (report, alt) = import_grown(&s, log, &first, &grown, 4);
        assert_eq!(report.extended, [log], "{report:?}");
        assert_eq!(
            contents(&s, &alt).last().unwrap().2,
            "A limerick.",
            "{}",
            s.kind
        );
    }
}

/// A transcript whose one tool call searches trains for `day`.
fn train_search(day: &str) -> String {
    serde_json::json!([
        {"role": "system", "content": "You are a travel assistant."},
        {"role": "user", "content": "Which trains go to Amsterdam?"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {
                "name": "search_trains", "arguments": format!("{{\"day\": \"{day}\"}}")}}
        ]},
        {"role": "tool", "tool_call_id": "call_1", "name": "search_trains", "content": "[]"},
    ])
    .to_string()
}

#[test]
fn transcripts_that_differ_only_in_a_tool_calls_arguments_stay_two_sessions() {
    for s in stores() {
        let opts = TranscriptOptions::default();
        let friday = s
            .import_openai(&train_search("friday"), NewSession::default(), &opts)
            .unwrap();
        let sunday = s
            .import_openai(&train_search("sunday"), NewSession::default(), &opts)
            .unwrap();
        let (a, b) = (&friday.sessions[0], &sunday.sessions[0]);
        // Its start repeats the first transcript's up to the call, not past it: a fork
        // at 2 that stores the call and its result.
        assert_eq!(sunday.turns, 2, "{}", s.kind);
        let shared: Vec<_> = sunday
            .shared
            .iter()
            .map(|c| (&c.parent, c.shared_turns))
            .collect();
        assert_eq!(shared, vec![(a, 2)], "{}", s.kind);
        let (ra, rb) = (s.replay(a, None).unwrap(), s.replay(b, None).unwrap());
        assert_ne!(ra, rb, "{}", s.kind);
        assert!(
            rb[2].tool_calls.as_deref().unwrap().contains("sunday"),
            "{}",
            s.kind
        );
        assert!(
            ra[2].tool_calls.as_deref().unwrap().contains("friday"),
            "{}",
            s.kind
        );
        assert_ne!(
            s.info(a).unwrap().head_digest,
            s.info(b).unwrap().head_digest,
            "{}",
            s.kind
        );
        // The sunday call is in the store: its export holds it.
        let exported = serde_json::to_string(&s.export_openai(b).unwrap()).unwrap();
        assert!(
            exported.contains("sunday") && !exported.contains("friday"),
            "{}",
            s.kind
        );
        let diff = s.diff(a, b).unwrap();
        assert_eq!(diff.common_prefix, 2, "{}", s.kind);
        assert!(diff.b_tail[0]
            .shown()
            .contains(r#"search_trains({"day":"sunday"})"#));
    }
}

#[test]
fn the_same_call_spelled_two_ways_is_one_history() {
    // Claude Code's `input` object and OpenAI's `arguments` text, keys in another order
    // and other spacing: the digests agree, so the second import shares the first.
    let s = Store::in_memory().unwrap();
    let call = |calls: &str| {
        vec![
            NewTurn::new(Role::User, "find a train"),
            NewTurn::new(Role::Assistant, "")
                .kind(forktrail::Kind::ToolCall)
                .tool_calls(calls),
        ]
    };
    let openai = r#"[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"b\": 1, \"a\": 2}"}}]"#;
    let input = r#"[{"id":"c1","name":"f","input":{"a":2,"b":1}}]"#;
    let ids = s
        .import_sessions(vec![
            (NewSession::default(), call(openai)),
            (NewSession::default(), call(input)),
        ])
        .unwrap();
    let (a, b) = (s.info(&ids[0]).unwrap(), s.info(&ids[1]).unwrap());
    assert_eq!(a.head_digest, b.head_digest);
    let other = s
        .import_sessions(vec![(
            NewSession::default(),
            call(&input.replace("\"c1\"", "\"c2\"")),
        )])
        .unwrap();
    assert_ne!(s.info(&other[0]).unwrap().head_digest, a.head_digest);
}

/// A turn as (role, content, the ids of the calls it makes, the call it answers).
type Said = (Role, String, Vec<String>, Option<String>);

/// A stored session's turns.
fn calls_and_results(s: &Store, id: &str) -> Vec<Said> {
    s.load(&sid(id), None)
        .unwrap()
        .into_iter()
        .map(|t| {
            let calls: Vec<String> = calls_of(t.tool_calls.as_deref())
                .iter()
                .map(|c| c["id"].as_str().unwrap().to_string())
                .collect();
            (t.role, t.content, calls, t.tool_call_id)
        })
        .collect()
}

fn turn(role: Role, content: &str, calls: &[&str], answers: Option<&str>) -> Said {
    (
        role,
        content.to_string(),
        calls.iter().map(|c| c.to_string()).collect(),
        answers.map(str::to_string),
    )
}

const PARALLEL: &str = "c41d7e52-8a3b-4f6e-b1d9-0e2a7c5f3b18";

#[test]
fn parallel_tool_calls_are_one_turn_and_their_results_and_real_branches_stay_forks() {
    // Claude Code's shape: an answer's blocks as lines sharing message.id, each a child
    // of the one before, each result a child of the call it answers; a user who went
    // back to one of the parallel calls, and a regenerated last answer.
    let text = fixture("claude-code-parallel.jsonl");
    for s in stores() {
        let report = s
            .import_claude_code(&text, &TranscriptOptions::default())
            .unwrap();
        assert_eq!((report.sessions.len(), report.turns), (3, 12), "{report:?}");
        assert_eq!(report.sessions[0], PARALLEL);
        let main = [
            turn(Role::User, "Why do the Friday trains not show?", &[], None),
            turn(
                Role::Assistant,
                "Let me read the schedule code and its test.",
                &["toolu_01Read", "toolu_01Test"],
                None,
            ),
            turn(
                Role::Tool,
                "fn days() -> [Day; 6] { [Mon, Tue, Wed, Thu, Sat, Sun] }",
                &[],
                Some("toolu_01Read"),
            ),
            turn(
                Role::Tool,
                "test schedule::friday ... FAILED",
                &[],
                Some("toolu_01Test"),
            ),
            turn(
                Role::Assistant,
                "",
                &["toolu_02Edit", "toolu_02Grep", "toolu_02Log"],
                None,
            ),
            // The results as they came back (and as Claude Code sent them), not in the
            // order of the calls.
            turn(Role::Tool, "src/schedule.rs:3", &[], Some("toolu_02Grep")),
            turn(
                Role::Tool,
                "Drop Friday from the weekend list",
                &[],
                Some("toolu_02Log"),
            ),
            turn(
                Role::Tool,
                "The file src/schedule.rs has been updated.",
                &[],
                Some("toolu_02Edit"),
            ),
            turn(
                Role::Assistant,
                "Friday was dropped from the list of days by the last change; it is back, and \
                 the test passes.",
                &[],
                None,
            ),
        ];
        assert_eq!(calls_and_results(&s, PARALLEL), main, "{}", s.kind);
        let turns = s.load(&sid(PARALLEL), None).unwrap();
        assert_eq!(turns[4].kind, forktrail::Kind::ToolCall, "{}", s.kind);
        assert_eq!(turns[1].model.as_deref(), Some("claude-opus-4-5"));

        // Two forks, both real: the user's at the parallel calls (after the answer that
        // made them), the regenerated answer's after the results.
        let branches = s.branches(&sid(PARALLEL)).unwrap();
        let found: Vec<(&str, u64, u64)> = branches
            .iter()
            .map(|b| (b.branch.as_str(), b.forked_at_index, b.own_turns))
            .collect();
        assert_eq!(found, [("alt-1", 5, 2), ("alt-2", 8, 1)], "{}", s.kind);
        let back = calls_and_results(&s, &branches[0].session);
        assert_eq!(back[..5], main[..5], "{}", s.kind);
        assert_eq!(
            back[5..],
            [
                turn(
                    Role::User,
                    "Do not edit yet: only tell me which commit dropped it.",
                    &[],
                    None
                ),
                turn(
                    Role::Assistant,
                    "The commit \"Drop Friday from the weekend list\" did.",
                    &[],
                    None
                ),
            ],
            "{}",
            s.kind
        );
        let again = calls_and_results(&s, &branches[1].session);
        assert_eq!(again[..8], main[..8], "{}", s.kind);
        assert_eq!(
            again[8].1, "Fixed: Friday is in the list again.",
            "{}",
            s.kind
        );
        assert!(s.verify(None).unwrap().is_clean(), "{}", s.kind);

        // Every line is known by its uuid: importing the log again adds nothing.
        let before = quads(&s);
        let report = s
            .import_claude_code(&text, &TranscriptOptions::default())
            .unwrap();
        assert_eq!((report.sessions.len(), report.turns), (0, 0), "{report:?}");
        assert_eq!(before, quads(&s), "{}", s.kind);
    }
}

fn parallel_project() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude-project-parallel")
}

#[test]
fn parallel_tool_calls_in_a_sub_agent_and_beside_its_launch_make_no_fork() {
    let main = "e8a14c2b-7d3f-4b90-a6e1-59c0d2f7b3a4";
    let agent = format!("{main}:agent-a3f9c1e07b2d45e18");
    for s in stores() {
        let report = s
            .import_claude_code_path(&parallel_project(), &TranscriptOptions::default())
            .unwrap();
        assert_eq!(report.sessions, [main, agent.as_str()], "{report:?}");
        // The launch came back before the answer's last block was written, and that
        // block hangs on it: still one answer, its two results after it.
        assert_eq!(
            calls_and_results(&s, main),
            [
                turn(
                    Role::User,
                    "Find every caller of parse_date while you run the date tests.",
                    &[],
                    None
                ),
                turn(
                    Role::Assistant,
                    "An agent looks for the callers; I run the tests meanwhile.",
                    &["toolu_11Agent", "toolu_11Test"],
                    None
                ),
                turn(
                    Role::Tool,
                    "Async agent launched successfully.\nagentId: a3f9c1e07b2d45e18 (internal \
                     ID - do not mention to user. Use SendMessage with to: \
                     'a3f9c1e07b2d45e18' to continue this agent.)",
                    &[],
                    Some("toolu_11Agent")
                ),
                turn(
                    Role::Tool,
                    "test result: ok. 12 passed; 0 failed",
                    &[],
                    Some("toolu_11Test")
                ),
                turn(
                    Role::Assistant,
                    "The date tests pass; the agent's list follows when it is done.",
                    &[],
                    None
                ),
            ],
            "{}",
            s.kind
        );
        let branches = s.branches(&sid(main)).unwrap();
        assert_eq!(branches.len(), 1, "{}: {branches:?}", s.kind);
        assert_eq!(
            (branches[0].session.as_str(), branches[0].forked_at_index),
            (agent.as_str(), 0),
            "{}",
            s.kind
        );
        let info = s.info(&sid(&agent)).unwrap();
        let launch = info.subagent.unwrap().spawned_by.unwrap();
        assert_eq!(
            (launch.session.as_str(), launch.index),
            (main, 1),
            "{}",
            s.kind
        );
        assert_eq!(
            calls_and_results(&s, &agent),
            [
                turn(Role::User, "List every caller of parse_date.", &[], None),
                turn(
                    Role::Assistant,
                    "",
                    &["toolu_21Src", "toolu_21Tests", "toolu_21Bench"],
                    None
                ),
                turn(Role::Tool, "No matches found", &[], Some("toolu_21Bench")),
                turn(
                    Role::Tool,
                    "src/import.rs:40\nsrc/cli.rs:88",
                    &[],
                    Some("toolu_21Src")
                ),
                turn(Role::Tool, "tests/dates.rs:12", &[], Some("toolu_21Tests")),
                turn(
                    Role::Assistant,
                    "Callers: src/import.rs:40, src/cli.rs:88 and tests/dates.rs:12.",
                    &[],
                    None
                ),
            ],
            "{}",
            s.kind
        );
        assert!(s.branches(&sid(&agent)).unwrap().is_empty(), "{}", s.kind);
        assert!(s.verify(None).unwrap().is_clean(), "{}", s.kind);
    }
}

/// A log's turns with each run of assistant turns as one (texts joined by a blank line,
/// calls in order): the messages a model is sent.
fn as_messages(turns: Vec<Said>) -> Vec<Said> {
    let mut out: Vec<Said> = Vec::new();
    for t in turns {
        match out.last_mut() {
            Some(last) if last.0 == Role::Assistant && t.0 == Role::Assistant => {
                if !t.1.is_empty() {
                    last.1 = [last.1.as_str(), t.1.as_str()]
                        .into_iter()
                        .filter(|s| !s.is_empty())
                        .collect::<Vec<_>>()
                        .join("\n\n");
                }
                last.2.extend(t.2);
            }
            _ => out.push(t),
        }
    }
    out
}

#[test]
fn a_log_with_parallel_calls_cut_at_any_line_and_imported_again_whole_makes_no_other_fork() {
    let log = fixture("claude-code-parallel.jsonl");
    let lines: Vec<&str> = log.lines().collect();
    let whole = |s: &Store| s.import_claude_code(&log, &TranscriptOptions::default());
    let fresh = Store::in_memory().unwrap();
    whole(&fresh).unwrap();
    // A cut between two lines of one answer (its first blocks imported, the rest written
    // since): the rest goes on as a turn of its own after what is stored, so the
    // messages a model is sent are the same, and no fork is made.
    let inside = |n: usize| {
        let uuid = |l: &str| serde_json::from_str::<Value>(l).unwrap()["uuid"].clone();
        ["p-a1", "p-a2", "p-b1", "p-b2"].contains(&uuid(lines[n - 1]).as_str().unwrap_or(""))
    };
    let mut valid = 0;
    for n in 0..=lines.len() {
        let cut: String = lines[..n].iter().map(|l| format!("{l}\n")).collect();
        let what = format!("cut at {n} lines");
        if n == 0 || !inside(n) {
            let prefix = |s: &Store| s.import_claude_code(&cut, &TranscriptOptions::default());
            if grows_into_what_a_fresh_import_makes(&prefix, &whole, &what) {
                valid += 1;
            }
            continue;
        }
        let s = Store::in_memory().unwrap();
        s.import_claude_code(&cut, &TranscriptOptions::default())
            .unwrap();
        whole(&s).unwrap();
        // Each session, by its branch label (the forks all hang on the main session).
        let labelled = |s: &Store| -> BTreeMap<String, String> {
            s.list()
                .unwrap()
                .into_iter()
                .map(|i| (s.info(&i.session).unwrap().branch, i.session.to_string()))
                .collect()
        };
        let (got, want) = (labelled(&s), labelled(&fresh));
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{what}"
        );
        for (label, id) in &want {
            assert_eq!(
                as_messages(calls_and_results(&s, &got[label])),
                as_messages(calls_and_results(&fresh, id)),
                "{what}: {label}"
            );
        }
        assert!(s.verify(None).unwrap().is_clean(), "{what}");
        let again = whole(&s).unwrap();
        assert_eq!((again.sessions.len(), again.turns), (0, 0), "{what}");
        valid += 1;
    }
    // Every cut but the empty log and the queue line alone holds a message.
    assert_eq!(valid, lines.len() - 1);
}
