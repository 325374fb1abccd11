//! Copies become forks: a new session whose first turns repeat a stored session's is
//! stored as a fork of it at the end of the longest shared prefix, holding only its
//! own turns, for every source that goes in whole (OpenAI transcripts, Codex rollouts,
//! `import_sessions`, `POST /sessions` with turns).

mod common;

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
    let forked = text
        .replace(
            "0199449a-3c2e-7d41-9f6b-5e2c8a1d7b30",
            "0199449a-3c2e-7d41-9f6b-5e2c8a1d7b31",
        )
        .trim_end()
        .to_string()
        + "\n"
        + &json!({"timestamp": "2025-09-14T10:00:00.000Z", "type": "response_item",
            "payload": {"type": "message", "role": "user",
                        "content": [{"type": "input_text", "text": "Now the Sunday case."}]}})
        .to_string()
        + "\n";
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
