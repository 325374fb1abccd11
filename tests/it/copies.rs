//! Copies become forks: a new session whose first turns repeat a stored session's is
//! stored as a fork of it at the end of the longest shared prefix, holding only its
//! own turns, for every source that goes in whole (OpenAI transcripts, Codex rollouts,
//! `import_sessions`, `POST /sessions` with turns).

use crate::common;

use common::*;
use forktrail::{ImportFormat, NewSession, NewTurn, Role, SessionId, Store, TranscriptOptions};
use oxigraph::sparql::QueryResults;
use serde_json::{json, Value};

/// An OpenAI transcript of `messages` (role, content).
fn transcript(messages: &[(&str, &str)]) -> Vec<u8> {
    let messages: Vec<Value> = messages
        .iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    serde_json::to_vec(&messages).unwrap()
}

fn import(store: &Store, bytes: &[u8], no_dedup: bool) -> forktrail::TranscriptReport {
    let options = TranscriptOptions {
        no_dedup,
        ..Default::default()
    };
    store
        .import_with(bytes, Some(ImportFormat::OpenAi), &options)
        .unwrap()
}

/// The turns stored in session `id`'s own graph (not those it inherits).
fn stored_turns(store: &Store, id: &SessionId) -> usize {
    let iri = format!("{}session:{id}", forktrail::DEFAULT_BASE_IRI);
    let query = format!(
        "SELECT (COUNT(DISTINCT ?t) AS ?n) WHERE {{ GRAPH <{iri}> {{ ?t <{}index> ?i }} }}",
        forktrail::vocab::ft::NS
    );
    let QueryResults::Solutions(mut rows) = store.query(&query, &[]).unwrap() else {
        panic!("not a SELECT")
    };
    let row = rows.next().unwrap().unwrap();
    let Some(oxigraph::model::Term::Literal(n)) = row.get("n") else {
        panic!("no count")
    };
    n.value().parse().unwrap()
}

fn texts(store: &Store, id: &SessionId) -> Vec<(Role, String)> {
    store
        .replay(id, None)
        .unwrap()
        .into_iter()
        .map(|r| (r.role, r.content))
        .collect()
}

const FIRST: [(&str, &str); 6] = [
    ("system", "You answer in one line."),
    ("user", "What is the capital of Peru?"),
    ("assistant", "Lima."),
    ("user", "And of Chile?"),
    ("assistant", "Santiago."),
    ("user", "Thanks."),
];

#[test]
fn a_transcript_that_repeats_a_stored_one_goes_in_as_a_fork_holding_only_its_tail() {
    for store in stores() {
        let kind = store.kind;
        let first = import(&store, &transcript(&FIRST), false).sessions[0].clone();
        // The same conversation, retried from the fourth message on.
        let mut retried: Vec<(&str, &str)> = FIRST[..4].to_vec();
        retried.extend([("assistant", "Santiago de Chile."), ("user", "Bye.")]);
        let report = import(&store, &transcript(&retried), false);
        let copy = report.sessions[0].clone();
        assert_eq!(report.shared.len(), 1, "{kind}");
        let shared = &report.shared[0];
        assert_eq!(
            (&shared.session, &shared.parent, shared.shared_turns),
            (&copy, &first, 4),
            "{kind}"
        );
        assert_eq!(shared.branch, "copy", "{kind}");
        assert_eq!(
            report.turns, 2,
            "{kind}: only the two new turns are written"
        );
        let info = store.info(&copy).unwrap();
        assert_eq!(info.parent.as_ref(), Some(&first), "{kind}");
        assert_eq!(info.forked_at_index, Some(4), "{kind}");
        assert_eq!(info.length, 6, "{kind}");
        let expected: Vec<(Role, String)> = retried
            .iter()
            .map(|(r, c)| (r.parse().unwrap(), c.to_string()))
            .collect();
        assert_eq!(
            texts(&store, &copy),
            expected,
            "{kind}: replay is the whole copy"
        );

        assert_eq!(stored_turns(&store, &copy), 2, "{kind}");
        assert_eq!(stored_turns(&store, &first), 6, "{kind}");

        // The same transcript with dedup off is stored whole, a root of six turns.
        let whole = import(&store, &transcript(&retried), true);
        assert!(whole.shared.is_empty(), "{kind}");
        assert_eq!(whole.turns, 6, "{kind}");
        let whole = &whole.sessions[0];
        assert_eq!(store.info(whole).unwrap().parent, None, "{kind}");
        assert_eq!(texts(&store, whole), expected, "{kind}");
        assert_eq!(stored_turns(&store, whole), 6, "{kind}");
        // Two sessions now store the retried conversation's last turn (the fork and
        // the whole copy): a third copy hangs on the first by id (the older: generated
        // ids are in order of creation), whatever order the store answers in.
        let mut more = retried.clone();
        more.push(("assistant", "Farewell."));
        let third = import(&store, &transcript(&more), false);
        assert_eq!(
            (&third.shared[0].parent, third.shared[0].shared_turns),
            (&copy, 6),
            "{kind}"
        );
    }
}

#[test]
fn a_whole_copy_is_a_fork_with_no_turns_of_its_own_and_copies_of_it_number_their_labels() {
    let store = Store::in_memory().unwrap();
    let first = import(&store, &transcript(&FIRST), false).sessions[0].clone();
    let again = import(&store, &transcript(&FIRST), false);
    let copy = &again.sessions[0];
    assert_eq!(again.turns, 0);
    assert_eq!(again.shared[0].shared_turns, 6);
    let info = store.info(copy).unwrap();
    assert_eq!((info.parent.as_ref(), info.length), (Some(&first), 6));
    assert_eq!(texts(&store, copy), texts(&store, &first));
    // A third copy of the same conversation finds a digest the first holds (the copy
    // holds none of its own), and takes the next label.
    let third = import(&store, &transcript(&FIRST), false);
    assert_eq!(third.shared[0].parent, first);
    assert_eq!(third.shared[0].branch, "copy-2");
}

#[test]
fn shared_system_instructions_alone_do_not_make_a_copy() {
    let store = Store::in_memory().unwrap();
    import(&store, &transcript(&FIRST), false);
    let other = import(
        &store,
        &transcript(&[
            ("system", "You answer in one line."),
            ("user", "What is the capital of Japan?"),
        ]),
        false,
    );
    assert!(other.shared.is_empty());
    assert_eq!(store.info(&other.sessions[0]).unwrap().parent, None);
    // A transcript of system turns only shares nothing either.
    let only = import(&store, &transcript(&FIRST[..1]), false);
    assert!(only.shared.is_empty());
}

#[test]
fn the_longest_prefix_is_found_across_a_chain_and_the_fork_hangs_on_the_turn_owner() {
    let store = Store::in_memory().unwrap();
    // root: r0..r5; fork f at 3 with own turns f3, f4.
    let root = session_with(&store, "root", 6);
    let fork = fork_at(&store, &root, 3, "f", "side");
    store
        .append_many(
            &fork,
            vec![
                NewTurn::new(Role::Assistant, "f 3"),
                NewTurn::new(Role::User, "f 4"),
            ],
        )
        .unwrap();
    let history = |id: &SessionId| -> Vec<NewTurn> {
        store
            .load(id, None)
            .unwrap()
            .into_iter()
            .map(|t| NewTurn::new(t.role, t.content))
            .collect()
    };
    // The fork's whole history and one turn more: a fork of the fork at 5.
    let mut past_fork = history(&fork);
    past_fork.push(NewTurn::new(Role::Assistant, "more"));
    // The root's first two turns, then something else: a fork of the root at 2 (the
    // root owns those turns; the fork only inherits them).
    let mut early = history(&root)[..2].to_vec();
    early.push(NewTurn::new(Role::User, "elsewhere"));
    // Nothing in common.
    let fresh = vec![NewTurn::new(Role::User, "unrelated")];
    let report = store
        .import_sessions_with(
            vec![
                (NewSession::default(), past_fork.clone()),
                (NewSession::default(), early.clone()),
                (NewSession::default(), fresh),
            ],
            &TranscriptOptions::default(),
        )
        .unwrap();
    let [a, b, c] = &report.sessions[..] else {
        panic!("three sessions")
    };
    let forks: Vec<(SessionId, SessionId, u64)> = report
        .shared
        .iter()
        .map(|s| (s.session.clone(), s.parent.clone(), s.shared_turns))
        .collect();
    assert_eq!(
        forks,
        vec![(a.clone(), fork.clone(), 5), (b.clone(), root.clone(), 2)]
    );
    assert_eq!(report.turns, 1 + 1 + 1);
    assert_eq!(store.info(c).unwrap().parent, None);
    for (id, turns) in [(a, &past_fork), (b, &early)] {
        let want: Vec<(Role, String)> = turns.iter().map(|t| (t.role, t.content.clone())).collect();
        assert_eq!(texts(&store, id), want);
    }
    // The fork of the fork sits one level deeper, under the same tree.
    let info = store.info(a).unwrap();
    assert_eq!(info.depth, 2);
    assert_eq!(info.fork_root, root);
    // What the store says about provenance holds: verify finds nothing wrong.
    assert!(store.verify(None).unwrap().problems.is_empty());
}

#[test]
fn a_copied_codex_rollout_becomes_a_fork_of_the_stored_one() {
    let store = Store::in_memory().unwrap();
    let path = format!(
        "{}/tests/data/codex/rollout.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path).unwrap();
    let options = TranscriptOptions::default();
    let first = store
        .import_with(text.as_bytes(), Some(ImportFormat::Codex), &options)
        .unwrap();
    let original = &first.sessions[0];
    // `codex fork` writes a new rollout (a new id) that repeats the history, then goes
    // on.
    let forked = goes_on(&text.replace(
        "0199449a-3c2e-7d41-9f6b-5e2c8a1d7b30",
        "0199449a-3c2e-7d41-9f6b-5e2c8a1d7b31",
    ));
    let copy = store
        .import_with(forked.as_bytes(), Some(ImportFormat::Codex), &options)
        .unwrap();
    let length = store.info(original).unwrap().length;
    assert_eq!(copy.turns, 1);
    assert_eq!(copy.shared[0].parent, *original);
    assert_eq!(copy.shared[0].shared_turns, length);
    let info = store.info(&copy.sessions[0]).unwrap();
    assert_eq!(info.forked_at_index, Some(length));
    assert_eq!(info.length, length + 1);
    // The copy keeps its own name and title.
    assert_eq!(
        copy.sessions[0].as_str(),
        "0199449a-3c2e-7d41-9f6b-5e2c8a1d7b31"
    );
    assert_eq!(
        info.title.as_deref(),
        Some("codex 0199449a-3c2e-7d41-9f6b-5e2c8a1d7b31")
    );
}

/// Rollout `text` with one more line: the user goes on.
fn goes_on(text: &str) -> String {
    let line = json!({"timestamp": "2025-09-14T10:00:00.000Z", "type": "response_item",
        "payload": {"type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": "Now the Sunday case."}]}});
    format!("{}\n{line}\n", text.trim_end())
}

/// The fixture rollout, and a `codex fork` of it: a new id, `forked_from_id` naming the
/// original, the history repeated, then a turn of its own.
fn codex_parent_and_fork() -> (String, String) {
    let path = format!(
        "{}/tests/data/codex/rollout.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let parent = std::fs::read_to_string(path).unwrap();
    let forked = goes_on(&parent.replacen(
        r#"{"id":"0199449a-3c2e-7d41-9f6b-5e2c8a1d7b30","#,
        r#"{"id":"0199449a-3c2e-7d41-9f6b-5e2c8a1d7b31","forked_from_id":"0199449a-3c2e-7d41-9f6b-5e2c8a1d7b30","#,
        1,
    ));
    assert!(forked.contains("forked_from_id"));
    (parent, forked)
}

#[cfg(feature = "rocksdb")]
#[test]
fn a_codex_fork_imported_before_its_parent_becomes_its_fork_when_the_parent_comes() {
    let (parent_text, fork_text) = codex_parent_and_fork();
    let codex = |store: &Store, text: &str| {
        store
            .import_with(
                text.as_bytes(),
                Some(ImportFormat::Codex),
                &TranscriptOptions::default(),
            )
            .unwrap()
    };
    // The order Codex writes them in: the parent, then the fork.
    let in_order = rocksdb();
    codex(&in_order.store, &parent_text);
    codex(&in_order.store, &fork_text);

    // The other order, on a store with a catalog, the fork forked again meanwhile.
    let late = rocksdb();
    let store = &late.store;
    let fork = sid("0199449a-3c2e-7d41-9f6b-5e2c8a1d7b31");
    let first = codex(store, &fork_text);
    assert!(first.shared.is_empty());
    let whole = store.info(&fork).unwrap().length;
    assert_eq!(stored_turns(store, &fork), whole as usize);
    let grandchild = fork_at(store, &fork, 3, "g", "retry");
    let before = store.replay(&grandchild, None).unwrap();
    let parent_report = codex(store, &parent_text);
    let parent = sid("0199449a-3c2e-7d41-9f6b-5e2c8a1d7b30");
    let shared = whole - 1;
    assert_eq!(parent_report.sessions, vec![parent.clone()]);
    assert_eq!(
        parent_report.shared,
        vec![forktrail::SharedCopy {
            session: fork.clone(),
            parent: parent.clone(),
            shared_turns: shared,
            branch: "copy".into(),
        }]
    );
    // The fork keeps only its own turn; the parent holds the history once.
    assert_eq!(stored_turns(store, &fork), 1);
    assert_eq!(stored_turns(store, &parent), shared as usize);
    let info = store.info(&fork).unwrap();
    assert_eq!(
        (info.parent.as_ref(), info.forked_at_index, info.depth),
        (Some(&parent), Some(shared), 1)
    );
    // Its own fork moved down with it and reads as before.
    let moved = store.info(&grandchild).unwrap();
    assert_eq!((moved.depth, moved.fork_root.clone()), (2, parent.clone()));
    assert_eq!(store.replay(&grandchild, None).unwrap(), before);
    // The same store as in the order Codex writes them, the extra fork aside.
    store.delete(&grandchild, false).unwrap();
    assert_eq!(shape(store), shape(&in_order.store));
    // Nothing waits any more, and search finds the history once, in the parent.
    let ask = format!(
        "ASK {{ GRAPH ?g {{ ?s <{}forkedFromId> ?p }} }}",
        forktrail::vocab::ft::NS
    );
    assert!(matches!(
        store.query(&ask, &[]).unwrap(),
        QueryResults::Boolean(false)
    ));
    let hits = store
        .search(&forktrail::SearchQuery {
            text: "Mondays".into(),
            limit: None,
            cursor: None,
        })
        .unwrap()
        .hits;
    let sessions: Vec<&SessionId> = hits.iter().map(|h| &h.session).collect();
    assert_eq!(sessions, vec![&parent]);
    assert!(store.verify(None).unwrap().problems.is_empty());
    // Importing either again changes nothing.
    imports_nothing_new(store, "the parent again", || codex(store, &parent_text));
    imports_nothing_new(store, "the fork again", || codex(store, &fork_text));
}

/// A Claude Code message line of log `log`; with `from`, a copy (as a fork's log holds
/// it) of message `from.1` of log `from.0`.
fn cc(
    log: &str,
    uuid: &str,
    parent: Option<&str>,
    text: &str,
    from: Option<(&str, &str)>,
) -> String {
    // A fork of a fork's copies and lines start with `g`.
    let own = uuid.trim_start_matches('g');
    let role = if own.starts_with('u') || own.starts_with("cu") || own.starts_with("fu") {
        "user"
    } else {
        "assistant"
    };
    let mut line = json!({
        "type": role, "uuid": uuid, "parentUuid": parent, "sessionId": log,
        "message": {"role": role, "content": text},
    });
    if let Some((session, message)) = from {
        line["forkedFrom"] = json!({"sessionId": session, "messageUuid": message});
    }
    line.to_string() + "\n"
}

const PARENT: &str = "5f0c2a1e-0000-4000-8000-00000000000p";
const FORK: &str = "5f0c2a1e-0000-4000-8000-00000000000f";

/// The parent's log: four messages.
fn parent_log() -> String {
    cc(PARENT, "u1", None, "Rename the module.", None)
        + &cc(PARENT, "a1", Some("u1"), "Renamed it.", None)
        + &cc(PARENT, "u2", Some("a1"), "Now fix the imports.", None)
        + &cc(PARENT, "a2", Some("u2"), "Fixed.", None)
}

/// A fork's log made at the parent's message `upto` (its first `upto` lines copied
/// with new uuids), then two lines of its own.
fn fork_log(upto: usize) -> String {
    let originals = ["u1", "a1", "u2", "a2"];
    let texts = [
        "Rename the module.",
        "Renamed it.",
        "Now fix the imports.",
        "Fixed.",
    ];
    let mut log = String::new();
    let mut parent: Option<String> = None;
    for i in 0..upto {
        let uuid = format!("c{}", originals[i]);
        log += &cc(
            FORK,
            &uuid,
            parent.as_deref(),
            texts[i],
            Some((PARENT, originals[i])),
        );
        parent = Some(uuid);
    }
    log += &cc(
        FORK,
        "fu1",
        parent.as_deref(),
        "Instead, split it in two.",
        None,
    );
    log += &cc(FORK, "fa1", Some("fu1"), "Split.", None);
    log
}

fn claude(store: &Store, log: &str) -> forktrail::TranscriptReport {
    store
        .import_claude_code(log, &TranscriptOptions::default())
        .unwrap()
}

#[test]
fn a_claude_code_fork_log_is_a_fork_of_the_session_it_copies_at_each_fork_point() {
    for store in stores() {
        let kind = store.kind;
        claude(&store, &parent_log());
        let parent = SessionId::new(PARENT).unwrap();
        let fork = SessionId::new(FORK).unwrap();
        for (upto, n) in [(4, 0), (2, 1)] {
            if n == 1 {
                store.delete(&fork, Default::default()).unwrap();
            }
            let report = claude(&store, &fork_log(upto));
            assert_eq!(
                report.sessions,
                std::slice::from_ref(&fork),
                "{kind} at {upto}: {report:?}"
            );
            assert_eq!(report.turns, 2, "{kind} at {upto}: only its own lines");
            assert_eq!(report.shared.len(), 1, "{kind}");
            assert_eq!(
                (&report.shared[0].parent, report.shared[0].shared_turns),
                (&parent, upto as u64),
                "{kind}"
            );
            let info = store.info(&fork).unwrap();
            assert_eq!(info.parent.as_ref(), Some(&parent), "{kind}");
            assert_eq!(info.forked_at_index, Some(upto as u64), "{kind}");
            assert_eq!(stored_turns(&store, &fork), 2, "{kind}");
            assert_eq!(
                stored_turns(&store, &parent),
                4,
                "{kind}: the parent unchanged"
            );
            let replay: Vec<String> = texts(&store, &fork).into_iter().map(|t| t.1).collect();
            let mut want: Vec<&str> = [
                "Rename the module.",
                "Renamed it.",
                "Now fix the imports.",
                "Fixed.",
            ][..upto]
                .to_vec();
            want.extend(["Instead, split it in two.", "Split."]);
            assert_eq!(replay, want, "{kind} at {upto}");
        }
        // The fork's log grown and imported again: its new line goes to the fork.
        let grown = fork_log(2) + &cc(FORK, "fu2", Some("fa1"), "Thanks.", None);
        let again = claude(&store, &grown);
        assert_eq!(
            again.extended,
            std::slice::from_ref(&fork),
            "{kind}: {again:?}"
        );
        assert_eq!((again.turns, stored_turns(&store, &fork)), (1, 3), "{kind}");
    }
}

#[test]
fn a_fork_log_before_its_parent_shares_the_history_and_the_parent_log_extends_it() {
    let store = Store::in_memory().unwrap();
    let parent = SessionId::new(PARENT).unwrap();
    let fork = SessionId::new(FORK).unwrap();
    // The fork arrives first: the history it copied is stored once, as the session of
    // the log it names, and the fork hangs on it.
    let first = claude(&store, &fork_log(2));
    assert_eq!(first.sessions, [parent.clone(), fork.clone()], "{first:?}");
    assert_eq!(stored_turns(&store, &parent), 2);
    assert_eq!(stored_turns(&store, &fork), 2);
    // The parent's own log, later: what it holds past the copy is appended.
    let later = claude(&store, &parent_log());
    assert_eq!(later.extended, std::slice::from_ref(&parent), "{later:?}");
    assert_eq!(later.turns, 2);
    assert_eq!(stored_turns(&store, &parent), 4);
    assert_eq!(store.info(&fork).unwrap().forked_at_index, Some(2));
}

#[test]
fn a_folder_holding_a_fork_log_and_its_parent_stores_the_copied_lines_once() {
    // Forked at the parent's end, and at its middle (the parent going on past it).
    for upto in [4, 2] {
        let dir = tempfile::tempdir().unwrap();
        // Read in name order: the fork's log first.
        std::fs::write(dir.path().join("a-fork.jsonl"), fork_log(upto)).unwrap();
        std::fs::write(dir.path().join("b-parent.jsonl"), parent_log()).unwrap();
        let store = Store::in_memory().unwrap();
        let report = store
            .import_path(dir.path(), None, &TranscriptOptions::default())
            .unwrap();
        let (parent, fork) = (
            SessionId::new(PARENT).unwrap(),
            SessionId::new(FORK).unwrap(),
        );
        assert_eq!(report.turns, 6, "{upto}: {report:?}");
        assert_eq!(
            report.sessions.len(),
            2,
            "{upto}: no alternative besides the fork"
        );
        assert_eq!(stored_turns(&store, &parent), 4);
        assert_eq!(stored_turns(&store, &fork), 2);
        let info = store.info(&fork).unwrap();
        assert_eq!(
            (info.parent, info.forked_at_index, info.branch.as_str()),
            (Some(parent), Some(upto as u64), "fork-1"),
            "{upto}"
        );
    }
}

/// A fork of the fork's log (`fork_log(2)`), made at its message `upto`: every line
/// before it copied with new uuids, `forkedFrom` naming the fork's log and line (as
/// Claude Code writes a fork of a fork), then a line of its own.
fn fork_of_fork_log(upto: usize) -> String {
    let lines = [
        ("cu1", "Rename the module."),
        ("ca1", "Renamed it."),
        ("fu1", "Instead, split it in two."),
        ("fa1", "Split."),
    ];
    let mut log = String::new();
    let mut parent: Option<String> = None;
    for (uuid, text) in &lines[..upto] {
        let copy = format!("g{uuid}");
        log += &cc(
            GRANDCHILD,
            &copy,
            parent.as_deref(),
            text,
            Some((FORK, uuid)),
        );
        parent = Some(copy);
    }
    log + &cc(
        GRANDCHILD,
        "gu9",
        parent.as_deref(),
        "Or keep it whole after all.",
        None,
    )
}

const GRANDCHILD: &str = "5f0c2a1e-0000-4000-8000-00000000000g";

#[test]
fn a_fork_of_a_fork_imported_on_its_own_stores_only_its_own_lines() {
    // Each log imported on its own, in the order they were written; then all three in
    // one folder.
    let grandchild = SessionId::new(GRANDCHILD).unwrap();
    let fork = SessionId::new(FORK).unwrap();
    let parent = SessionId::new(PARENT).unwrap();
    for upto in [4, 3, 1] {
        let store = Store::in_memory().unwrap();
        claude(&store, &parent_log());
        claude(&store, &fork_log(2));
        let report = claude(&store, &fork_of_fork_log(upto));
        assert_eq!(report.turns, 1, "{upto}: {report:?}");
        assert_eq!(stored_turns(&store, &grandchild), 1, "{upto}");
        let info = store.info(&grandchild).unwrap();
        // Forked past the fork point, it hangs on the fork; before it, on the parent.
        let on = if upto > 2 { &fork } else { &parent };
        assert_eq!(
            (info.parent.as_ref(), info.forked_at_index),
            (Some(on), Some(upto as u64)),
            "{upto}"
        );
        assert_eq!(
            (stored_turns(&store, &parent), stored_turns(&store, &fork)),
            (4, 2),
            "{upto}"
        );

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.jsonl"), fork_of_fork_log(upto)).unwrap();
        std::fs::write(dir.path().join("b.jsonl"), fork_log(2)).unwrap();
        std::fs::write(dir.path().join("c.jsonl"), parent_log()).unwrap();
        let together = Store::in_memory().unwrap();
        together
            .import_path(dir.path(), None, &TranscriptOptions::default())
            .unwrap();
        assert_eq!(shape(&together), shape(&store), "{upto}");
    }
}

#[test]
fn a_log_copied_with_its_uuids_and_a_new_session_id_is_a_fork_of_the_original() {
    let store = Store::in_memory().unwrap();
    claude(&store, &parent_log());
    // Some tools fork a Claude Code log by copying it whole and rewriting only its
    // `sessionId`; the conversation then goes on in the copy.
    let copy =
        parent_log().replace(PARENT, FORK) + &cc(FORK, "fu1", Some("a2"), "One more thing.", None);
    let report = claude(&store, &copy);
    let (parent, fork) = (
        SessionId::new(PARENT).unwrap(),
        SessionId::new(FORK).unwrap(),
    );
    assert_eq!(report.sessions, std::slice::from_ref(&fork), "{report:?}");
    assert_eq!(report.turns, 1);
    let info = store.info(&fork).unwrap();
    assert_eq!(
        (info.parent, info.forked_at_index),
        (Some(parent.clone()), Some(4))
    );
    assert_eq!(stored_turns(&store, &parent), 4);
}

#[test]
fn hostile_fork_fields_are_named_by_line_and_change_nothing() {
    let store = Store::in_memory().unwrap();
    claude(&store, &parent_log());
    let hostile = "x> } ; DROP ALL ; <y";
    let log = cc(
        FORK,
        "c1",
        None,
        "Rename the module.",
        Some((hostile, "u1")),
    ) + &cc(FORK, "fu1", Some("c1"), "Mine.", None);
    let err = fails_unchanged(&store, || {
        store.import_claude_code(&log, &TranscriptOptions::default())
    });
    let text = err.to_string();
    assert!(
        text.starts_with("line 1: forkedFrom.sessionId: invalid session id"),
        "{text}"
    );
    // A message uuid of any text is only ever a value: the copy is simply not found.
    let log = cc(
        FORK,
        "c1",
        None,
        "Rename the module.",
        Some((PARENT, "u1\" } DROP ALL")),
    ) + &cc(FORK, "fu1", Some("c1"), "Mine.", None);
    let report = claude(&store, &log);
    assert_eq!(report.turns, 2, "{report:?}");
    assert_eq!(stored_turns(&store, &SessionId::new(PARENT).unwrap()), 4);
}

const PARALLEL_PARENT: &str = "5f0c2a1e-0000-4000-8000-0000000000pp";
const PARALLEL_FORK: &str = "5f0c2a1e-0000-4000-8000-0000000000pf";
const PARALLEL_GRANDCHILD: &str = "5f0c2a1e-0000-4000-8000-0000000000pg";

/// The lines of a log whose answer makes two calls at once, as Claude Code writes them
/// (a line per block sharing `message.id`, each result hung on its call), then its own
/// `(uuid, parent, text)` lines; each line copied (new uuid `{prefix}{uuid}`, and
/// `forkedFrom` naming `from`'s line) up to `upto` lines when `from` is given.
fn parallel_log(
    log: &str,
    from: Option<(&str, &str)>,
    upto: usize,
    own: &[(&str, Option<&str>, &str)],
) -> String {
    let call = |id: &str, command: &str| json!([{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": command}}]);
    let result =
        |id: &str, out: &str| json!([{"type": "tool_result", "tool_use_id": id, "content": out}]);
    let lines = [
        (
            "u1",
            None,
            "user",
            json!("List the files and run the tests."),
            None,
        ),
        (
            "a1x",
            Some("u1"),
            "assistant",
            call("toolu_ls", "ls"),
            Some(0),
        ),
        (
            "a1y",
            Some("a1x"),
            "assistant",
            call("toolu_test", "cargo test"),
            Some(1),
        ),
        (
            "r1x",
            Some("a1x"),
            "user",
            result("toolu_ls", "src tests"),
            None,
        ),
        ("r1y", Some("a1y"), "user", result("toolu_test", "ok"), None),
        ("a2", Some("r1y"), "assistant", json!("Both done."), None),
    ];
    let (prefix, from_log) = from.unwrap_or(("", ""));
    let mut out = String::new();
    for (uuid, parent, role, content, block) in lines.iter().take(upto) {
        let mut line = json!({
            "type": role, "uuid": format!("{prefix}{uuid}"),
            "parentUuid": parent.map(|p| format!("{prefix}{p}")), "sessionId": log,
            "message": {"role": role, "content": content},
        });
        if let Some(block) = block {
            line["message"]["id"] = json!("msg_both");
            line["apiBlockIndex"] = json!(block);
        }
        if from.is_some() {
            let copied = format!("{}{uuid}", &prefix[1..]);
            line["forkedFrom"] = json!({"sessionId": from_log, "messageUuid": copied});
        }
        out += &(line.to_string() + "\n");
    }
    for (uuid, parent, text) in own {
        let role = if uuid.contains('u') {
            "user"
        } else {
            "assistant"
        };
        out += &(json!({"type": role, "uuid": uuid, "parentUuid": parent, "sessionId": log,
                        "message": {"role": role, "content": text}})
        .to_string()
            + "\n");
    }
    out
}

#[test]
fn a_fork_of_a_fork_of_a_log_with_parallel_calls_imported_on_its_own_stores_only_its_own_lines() {
    let parent = SessionId::new(PARALLEL_PARENT).unwrap();
    let fork = SessionId::new(PARALLEL_FORK).unwrap();
    let grandchild = SessionId::new(PARALLEL_GRANDCHILD).unwrap();
    // The fork's log copies the whole answer and its results (uuids `c…`), then goes on.
    let fork_log = parallel_log(
        PARALLEL_FORK,
        Some(("c", PARALLEL_PARENT)),
        6,
        &[
            ("fu1", Some("ca2"), "Now only the tests."),
            ("fa1", Some("fu1"), "ok"),
        ],
    );
    for (upto, on, at) in [(6, &parent, 5), (4, &parent, 3)] {
        let store = Store::in_memory().unwrap();
        claude(&store, &parallel_log(PARALLEL_PARENT, None, 6, &[]));
        claude(&store, &fork_log);
        assert_eq!(
            (stored_turns(&store, &parent), stored_turns(&store, &fork)),
            (5, 2),
            "{upto}"
        );
        // Its copies name the fork's copies (`gc…` of `c…`), which the store knows only
        // by position: the answer's two lines are one turn there.
        let last = if upto == 6 { "gca2" } else { "gcr1x" };
        let grandchild_log = parallel_log(
            PARALLEL_GRANDCHILD,
            Some(("gc", PARALLEL_FORK)),
            upto,
            &[("gu9", Some(last), "Or run nothing.")],
        );
        let report = claude(&store, &grandchild_log);
        assert_eq!(report.turns, 1, "{upto}: {report:?}");
        assert_eq!(stored_turns(&store, &grandchild), 1, "{upto}");
        let info = store.info(&grandchild).unwrap();
        assert_eq!(
            (info.parent.as_ref(), info.forked_at_index),
            (Some(on), Some(at)),
            "{upto}"
        );
        imports_nothing_new(&store, "the grandchild again", || {
            claude(&store, &grandchild_log)
        });
    }
}
