//! The in-process read cache never shows what the store no longer holds: every way a
//! session can change or disappear is followed by a replay that must see the change.

use crate::common;

use common::*;
use forktrail::{ExportFormat, ImportFormat, NewTurn, ReplayRecord, Role, SessionId, Store};

fn contents(store: &Store, id: &SessionId) -> Vec<String> {
    store
        .replay(id, None)
        .unwrap()
        .into_iter()
        .map(|r| r.content)
        .collect()
}

/// What a store with no cache at all replays.
fn uncached(store: &Store, id: &SessionId) -> Vec<ReplayRecord> {
    store.clear_caches();
    store.replay(id, None).unwrap()
}

#[test]
fn a_deleted_and_recreated_session_replays_its_new_turns() {
    for s in stores() {
        let a = session_with(&s, "a", 3);
        assert_eq!(contents(&s, &a), ["a 0", "a 1", "a 2"]);
        s.delete(&a, false).unwrap();
        assert!(s.replay(&a, None).is_err(), "{}", s.kind);
        let a = session_with(&s, "a", 1);
        assert_eq!(contents(&s, &a), ["a 0"], "{}", s.kind);
        s.append(&a, NewTurn::new(Role::Assistant, "new")).unwrap();
        assert_eq!(contents(&s, &a), ["a 0", "new"], "{}", s.kind);
    }
}

#[test]
fn a_sparql_update_is_seen_by_the_next_replay() {
    for s in stores() {
        let a = session_with(&s, "a", 2);
        assert_eq!(contents(&s, &a), ["a 0", "a 1"]);
        s.update(
            r#"PREFIX ft: <https://w3id.org/forktrail/ns#>
               DELETE { GRAPH ?g { ?t ft:content "a 1" } }
               INSERT { GRAPH ?g { ?t ft:content "edited" } }
               WHERE { GRAPH ?g { ?t ft:content "a 1" } }"#,
            None,
        )
        .unwrap();
        assert_eq!(contents(&s, &a), ["a 0", "edited"], "{}", s.kind);
    }
}

#[test]
fn an_import_over_a_deleted_session_is_seen_by_the_next_replay() {
    let other = Store::in_memory().unwrap();
    let x = session_with(&other, "x", 1);
    other
        .append(&x, NewTurn::new(Role::Assistant, "from elsewhere"))
        .unwrap();
    let mut trig = Vec::new();
    other
        .export(Some(&x), ExportFormat::TriG, &mut trig)
        .unwrap();
    for s in stores() {
        let x = session_with(&s, "x", 3);
        assert_eq!(contents(&s, &x).len(), 3);
        s.delete(&x, false).unwrap();
        s.import(trig.as_slice(), ImportFormat::TriG).unwrap();
        assert_eq!(contents(&s, &x), ["x 0", "from elsewhere"], "{}", s.kind);
    }
}

#[test]
fn a_detached_fork_replays_the_same_after_its_parent_is_gone() {
    for s in stores() {
        let a = session_with(&s, "a", 4);
        let b = fork_at(&s, &a, 2, "b", "x");
        s.append(&b, NewTurn::new(Role::User, "b own")).unwrap();
        let before = s.replay(&b, None).unwrap();
        s.detach(&b).unwrap();
        s.delete(&a, false).unwrap();
        assert_eq!(s.replay(&b, None).unwrap(), before, "{}", s.kind);
        assert_eq!(s.info(&b).unwrap().depth, 0, "{}", s.kind);
        assert_eq!(uncached(&s, &b), before, "{}", s.kind);
    }
}

#[test]
fn appends_after_a_cached_replay_extend_it() {
    for s in stores() {
        let a = session_with(&s, "a", 2);
        let b = fork_at(&s, &a, 1, "b", "x");
        assert_eq!(contents(&s, &b), ["a 0"]);
        s.append(&b, NewTurn::new(Role::Assistant, "b 1")).unwrap();
        s.append(&a, NewTurn::new(Role::User, "a 2")).unwrap();
        assert_eq!(contents(&s, &b), ["a 0", "b 1"], "{}", s.kind);
        assert_eq!(contents(&s, &a), ["a 0", "a 1", "a 2"], "{}", s.kind);
        assert_eq!(s.replay(&b, None).unwrap(), uncached(&s, &b));
        assert_eq!(s.replay(&a, None).unwrap(), uncached(&s, &a));
    }
}

#[test]
fn replays_agree_whatever_the_cache_budget_and_the_read_path() {
    // A fork near the start of a long root reads the root turn by turn; a fork near its
    // end reads it with one query. Budgets: none, smaller than one session, plenty.
    for budget in [0, 2_000, 1 << 20] {
        let s = Store::in_memory().unwrap().with_replay_cache(budget);
        let root = session_with(&s, "root", 40);
        let early = fork_at(&s, &root, 3, "early", "early");
        let late = fork_at(&s, &root, 38, "late", "late");
        s.append(&early, NewTurn::new(Role::User, "e")).unwrap();
        s.append(&late, NewTurn::new(Role::User, "l")).unwrap();
        for _ in 0..2 {
            let e = s.replay(&early, None).unwrap();
            assert_eq!(e.len(), 4);
            assert_eq!(e[2].content, "root 2");
            assert_eq!(
                (e[3].content.as_str(), e[3].branch.as_str()),
                ("e", "early")
            );
            let l = s.replay(&late, None).unwrap();
            assert_eq!(l.len(), 39);
            assert_eq!(l[37].content, "root 37");
            assert_eq!(l[37].branch, "main");
            assert_eq!(
                (l[38].content.as_str(), l[38].branch.as_str()),
                ("l", "late")
            );
            assert_eq!(s.replay(&late, Some(10)).unwrap(), l[..11]);
            assert_eq!(s.replay(&root, None).unwrap().len(), 40);
        }
    }
}

#[test]
fn replays_during_appends_from_another_thread_are_prefixes() {
    for s in stores() {
        let a = session_with(&s, "a", 1);
        std::thread::scope(|scope| {
            let writer = scope.spawn(|| {
                for i in 1..200 {
                    s.append(&a, NewTurn::new(Role::User, format!("a {i}")))
                        .unwrap();
                }
            });
            while !writer.is_finished() {
                let seen = contents(&s, &a);
                let expected: Vec<String> = (0..seen.len()).map(|i| format!("a {i}")).collect();
                assert_eq!(seen, expected, "{}", s.kind);
            }
        });
        assert_eq!(contents(&s, &a).len(), 200);
        assert_eq!(uncached(&s, &a).len(), 200);
    }
}
