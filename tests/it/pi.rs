//! Pi session files in: the tree in one file becomes a root session and a fork at each
//! branch point; a file imported again gains only its new entries; a fork's file (its
//! header naming `parentSession`) shares the entries its parent holds.

use crate::common;

use common::*;
use forktrail::{ImportFormat, Kind, Role, Store, TranscriptOptions};

const SESSION: &str = "0b5c6f1e-8a2d-4c1b-9e3f-7d2a1c4b5e60";
const FORK: &str = "7e1d2c3b-4a5f-4e6d-8c7b-9a0f1e2d3c4b";

fn data(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/data/pi/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn import(store: &Store, text: &str) -> forktrail::TranscriptReport {
    store
        .import_with(text.as_bytes(), None, &TranscriptOptions::default())
        .unwrap()
}

#[test]
fn a_pi_tree_becomes_a_session_and_a_fork_at_its_branch_point() {
    let text = data("session.jsonl");
    assert_eq!(ImportFormat::sniff(text.as_bytes()), Some(ImportFormat::Pi));
    for store in stores() {
        let kind = store.kind;
        let report = import(&store, &text);
        let main = sid(SESSION);
        assert_eq!(report.sessions[0], main, "{kind}: {report:?}");
        assert_eq!(report.sessions.len(), 2, "{kind}: {report:?}");
        assert_eq!(report.turns, 10, "{kind}");
        for skipped in ["model_change", "label", "session_info"] {
            assert_eq!(
                report.skipped_types.get(skipped),
                Some(&1),
                "{kind} {skipped}"
            );
        }
        let sonnet = Some("claude-sonnet-4-5".to_string());
        let main_turns = turns_of(&store, &main);
        assert_eq!(main_turns.len(), 5, "{kind}: {main_turns:?}");
        assert_eq!(
            main_turns[..2],
            [
                (
                    Role::User,
                    Kind::Message,
                    "Add a --verbose flag.".into(),
                    None
                ),
                (
                    Role::Assistant,
                    Kind::Message,
                    "I'll look at the CLI.".into(),
                    sonnet.clone()
                ),
            ],
            "{kind}: thinking left out"
        );
        assert_eq!(
            (main_turns[2].0, main_turns[2].1, &main_turns[2].3),
            (Role::Assistant, Kind::ToolCall, &sonnet)
        );
        let loaded = store.load(&main, None).unwrap();
        let calls: serde_json::Value =
            serde_json::from_str(loaded[2].tool_calls.as_deref().unwrap()).unwrap();
        assert_eq!(calls[0]["id"], "call_1");
        assert_eq!(calls[0]["function"]["name"], "read");
        assert_eq!(
            (
                loaded[3].role,
                loaded[3].tool_call_id.as_deref(),
                loaded[3].name.as_deref()
            ),
            (Role::Tool, Some("call_1"), Some("read"))
        );
        assert_eq!(main_turns[4].2, "Added it to main().");

        // The other child of the tool result: a fork at 4 holding its own five turns.
        let fork = &report.sessions[1];
        let info = store.info(fork).unwrap();
        assert_eq!(
            (info.parent.as_ref(), info.forked_at_index, info.own_turns),
            (Some(&main), Some(4), 5),
            "{kind}"
        );
        let own: Vec<(Role, Kind, String)> = turns_of(&store, fork)[4..]
            .iter()
            .map(|t| (t.0, t.1, t.2.clone()))
            .collect();
        assert_eq!(
            own,
            [
                (
                    Role::Assistant,
                    Kind::Note,
                    "Tried adding it to main(); abandoned.".into()
                ),
                (
                    Role::User,
                    Kind::Message,
                    "Put it in a config instead.".into()
                ),
                (
                    Role::Assistant,
                    Kind::Message,
                    "Done, in config.toml.".into()
                ),
                (
                    Role::Assistant,
                    Kind::Compaction,
                    "The flag lives in config.toml.".into()
                ),
                (
                    Role::User,
                    Kind::Message,
                    "$ cargo test\nok: 3 passed".into()
                ),
            ],
            "{kind}"
        );

        // Again: nothing new, nothing written.
        imports_nothing_new(&store, kind, || import(&store, &text));
    }
}

#[test]
fn a_grown_pi_file_gains_its_new_entries_where_they_hang() {
    let store = Store::in_memory().unwrap();
    let text = data("session.jsonl");
    let first = import(&store, &text);
    // A new answer under the first try's last message, on the main line.
    let grown = text
        + r#"{"type":"message","id":"0a1b2c3d","parentId":"e5f6a7b8","timestamp":"2026-01-24T16:30:00.000Z","message":{"role":"user","content":"Revert that.","timestamp":1769272200000}}"#
        + "\n";
    let report = import(&store, &grown);
    assert_eq!(report.extended[..], first.sessions[..1], "{report:?}");
    assert_eq!(report.turns, 1);
    assert_eq!(store.info(&sid(SESSION)).unwrap().length, 6);
}

#[test]
fn a_pi_fork_file_shares_what_its_parent_holds() {
    let store = Store::in_memory().unwrap();
    import(&store, &data("session.jsonl"));
    let report = import(&store, &data("fork.jsonl"));
    let fork = sid(FORK);
    assert_eq!(report.sessions, std::slice::from_ref(&fork), "{report:?}");
    assert_eq!(report.turns, 1, "only its own entry is written");
    assert_eq!(report.shared.len(), 1);
    let info = store.info(&fork).unwrap();
    assert_eq!(
        (info.parent, info.forked_at_index, info.own_turns),
        (Some(sid(SESSION)), Some(4), 1)
    );
    assert_eq!(
        turns_of(&store, &fork).last().unwrap().2,
        "Use an environment variable."
    );
    // Alone, before its parent, it is a root holding the whole copy.
    let alone = Store::in_memory().unwrap();
    let report = import(&alone, &data("fork.jsonl"));
    assert_eq!((report.sessions.len(), report.turns), (1, 5), "{report:?}");
}

#[test]
fn a_pi_file_without_a_header_or_with_a_bad_entry_changes_nothing() {
    let store = Store::in_memory().unwrap();
    let text = data("session.jsonl");
    let headless: String = text.lines().skip(1).map(|l| format!("{l}\n")).collect();
    let err = fails_unchanged(&store, || {
        store.import_with(
            headless.as_bytes(),
            Some(ImportFormat::Pi),
            &TranscriptOptions::default(),
        )
    });
    assert!(
        err.to_string()
            .contains("line 1: a Pi session file starts with a header"),
        "{err}"
    );
    let mut lines: Vec<&str> = text.lines().collect();
    lines[4] = "{\"type\":\"message\",\"id\":\"d4e5f6a7\"";
    let broken = lines.join("\n");
    let err = fails_unchanged(&store, || {
        store.import_with(broken.as_bytes(), None, &TranscriptOptions::default())
    });
    assert!(err.to_string().starts_with("line 5: not JSON"), "{err}");
}

#[test]
fn a_pi_folder_goes_in_at_once_its_fork_sharing_its_parent_in_either_order() {
    for (parent_name, fork_name) in [("a.jsonl", "b.jsonl"), ("b.jsonl", "a.jsonl")] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(parent_name), data("session.jsonl")).unwrap();
        std::fs::write(dir.path().join(fork_name), data("fork.jsonl")).unwrap();
        let store = Store::in_memory().unwrap();
        let report = store
            .import_path(dir.path(), None, &TranscriptOptions::default())
            .unwrap();
        assert_eq!(report.turns, 11, "{parent_name}: {report:?}");
        let info = store.info(&sid(FORK)).unwrap();
        assert_eq!(
            (info.parent, info.forked_at_index, info.own_turns),
            (Some(sid(SESSION)), Some(4), 1),
            "{parent_name}"
        );
        // The session's name from its session_info entry is its title.
        let main = store.info(&sid(SESSION)).unwrap();
        assert_eq!(main.title.as_deref(), Some("verbose flag"));
        // The same as importing the two files one after the other.
        let one_by_one = Store::in_memory().unwrap();
        import(&one_by_one, &data("session.jsonl"));
        import(&one_by_one, &data("fork.jsonl"));
        assert_eq!(shape(&store), shape(&one_by_one), "{parent_name}");
    }
}

#[test]
fn hostile_pi_entry_ids_stay_values_and_import_again_as_nothing_new() {
    let store = Store::in_memory().unwrap();
    let text = [
        r#"{"type":"session","version":3,"id":"pi-hostile","parentSession":"/x/2026_../../etc.jsonl"}"#,
        r#"{"type":"message","id":"a\" . } DROP ALL","parentId":null,"message":{"role":"user","content":"hello"}}"#,
        r#"{"type":"message","id":"b<>","parentId":"a\" . } DROP ALL","message":{"role":"assistant","content":[{"type":"text","text":"hi"}]}}"#,
    ]
    .join("\n");
    let first = import(&store, &text);
    assert_eq!((first.sessions.len(), first.turns), (1, 2), "{first:?}");
    imports_nothing_new(&store, "hostile ids", || import(&store, &text));
    assert!(store.verify(None).unwrap().problems.is_empty());
}
