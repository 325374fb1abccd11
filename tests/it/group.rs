//! Group commit: appends and forks from many threads are committed in batches, and each
//! caller gets what it would have got alone: the same indices, the same errors, the
//! same refusals of contested labels and ids, and nothing of a refused write stored.

use crate::common;

use common::*;
use forktrail::{Error, ForkOptions, NewTurn, Role, SessionId, Store};
use std::collections::HashSet;
use std::sync::Barrier;

/// A store in memory and, with the `rocksdb` feature, one on disk syncing every commit.
fn local_stores() -> Vec<(Store, &'static str, Option<tempfile::TempDir>)> {
    #[allow(unused_mut)]
    let mut out = vec![(Store::in_memory().unwrap(), "memory", None)];
    #[cfg(feature = "rocksdb")]
    {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path())
            .unwrap()
            .with_durability(forktrail::Durability::Sync);
        out.push((store, "rocksdb, synced", Some(dir)));
    }
    out
}

const THREADS: usize = 8;
const PER_THREAD: usize = 40;

#[test]
fn bad_turns_among_concurrent_appends_fail_alone_and_leave_nothing() {
    for (s, kind, _dir) in local_stores() {
        let shared = session_with(&s, "shared", 0);
        let start = Barrier::new(THREADS);
        let outcomes: Vec<Vec<Result<Vec<u64>, Error>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..THREADS)
                .map(|n| {
                    let (s, shared, start) = (&s, &shared, &start);
                    scope.spawn(move || {
                        start.wait();
                        (0..PER_THREAD)
                            .map(|i| {
                                let turn = NewTurn::new(Role::User, format!("{n}/{i}"));
                                match i % 10 {
                                    // Invalid: the tool calls are not JSON.
                                    3 => {
                                        let mut bad = turn;
                                        bad.tool_calls = Some("{not json".into());
                                        s.append(shared, bad).map(|i| vec![i])
                                    }
                                    // All or none, the second one bad.
                                    7 => {
                                        let mut bad = NewTurn::new(Role::Tool, "x");
                                        bad.payload = Some("[".into());
                                        s.append_many(shared, vec![turn, bad])
                                    }
                                    8 => s.append_many(
                                        shared,
                                        vec![
                                            turn,
                                            NewTurn::new(Role::Assistant, format!("{n}/{i}+")),
                                        ],
                                    ),
                                    _ => s.append(shared, turn).map(|i| vec![i]),
                                }
                            })
                            .collect()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut given: Vec<u64> = Vec::new();
        for (n, results) in outcomes.iter().enumerate() {
            for (i, result) in results.iter().enumerate() {
                match (i % 10, result) {
                    (3, Err(Error::InvalidInput(why))) => {
                        assert!(
                            why.contains("tool_calls for session shared"),
                            "{kind}: {why}"
                        )
                    }
                    (7, Err(Error::InvalidInput(why))) => assert!(
                        why.contains("turn 1 of the 2 to append")
                            && why.contains("nothing was appended"),
                        "{kind}: {why}"
                    ),
                    (3 | 7, other) => panic!("{kind}: thread {n} turn {i}: {other:?}"),
                    (8, Ok(indices)) => {
                        assert_eq!(indices.len(), 2);
                        assert_eq!(indices[1], indices[0] + 1, "{kind}: a pair stays together");
                        given.extend(indices.iter().copied());
                    }
                    (_, Ok(indices)) => given.extend(indices.iter().copied()),
                    (_, Err(e)) => panic!("{kind}: thread {n} turn {i}: {e}"),
                }
            }
        }
        // Every index given once, contiguous from 0, and each is the turn stored there.
        given.sort();
        let records = s.replay(&shared, None).unwrap();
        assert_eq!(
            given,
            (0..records.len() as u64).collect::<Vec<_>>(),
            "{kind}"
        );
        assert_eq!(records.len(), THREADS * (PER_THREAD / 10) * 9, "{kind}");
        let contents: HashSet<&str> = records.iter().map(|r| r.content.as_str()).collect();
        assert_eq!(
            contents.len(),
            records.len(),
            "{kind}: nothing stored twice"
        );
        assert!(
            !records
                .iter()
                .any(|r| r.content == "x" || r.content.ends_with("/3")),
            "{kind}: nothing of a refused write"
        );
        assert!(s.verify(None).unwrap().is_clean(), "{kind}");
    }
}

#[test]
fn contested_labels_and_ids_are_won_once_while_appends_go_on() {
    for (s, kind, _dir) in local_stores() {
        let parent = session_with(&s, "parent", 3);
        let others: Vec<SessionId> = (0..THREADS)
            .map(|n| session_with(&s, &format!("other{n}"), 1))
            .collect();
        let start = Barrier::new(THREADS);
        let forks: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..THREADS)
                .map(|n| {
                    let (s, parent, other, start) = (&s, &parent, &others[n], &start);
                    scope.spawn(move || {
                        start.wait();
                        let mut out = Vec::new();
                        for round in 0..5 {
                            s.append(parent, NewTurn::new(Role::User, format!("{n}.{round}")))
                                .unwrap();
                            // The same label on one parent, the same id on different parents.
                            let labelled = s.fork(
                                parent,
                                ForkOptions {
                                    label: Some(format!("contested-{round}")),
                                    ..ForkOptions::default()
                                },
                            );
                            let named = s.fork(
                                other,
                                ForkOptions {
                                    id: Some(format!("taken-{round}")),
                                    ..ForkOptions::default()
                                },
                            );
                            out.push((labelled, named));
                        }
                        out
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let (mut labels_won, mut ids_won) = (0, 0);
        let parent_len = s.replay(&parent, None).unwrap().len() as u64;
        for (labelled, named) in forks.into_iter().flatten() {
            match labelled {
                Ok(plan) => {
                    labels_won += 1;
                    // Forked at the parent's length then: a prefix of what it has now.
                    let fork: SessionId = plan.session.parse().unwrap();
                    let inherited = s.replay(&fork, None).unwrap();
                    assert!(plan.forked_at_index > 3 && plan.forked_at_index <= parent_len);
                    assert_eq!(
                        inherited,
                        s.replay(&parent, Some(plan.forked_at_index - 1)).unwrap(),
                        "{kind}"
                    );
                }
                Err(Error::DuplicateLabel { parent: p, .. }) => assert_eq!(p, "parent"),
                Err(e) => panic!("{kind}: {e}"),
            }
            match named {
                Ok(_) => ids_won += 1,
                Err(Error::Conflict(why)) => assert!(why.contains("already exists"), "{why}"),
                Err(e) => panic!("{kind}: {e}"),
            }
        }
        assert_eq!((labels_won, ids_won), (5, 5), "{kind}");
        assert_eq!(parent_len, 3 + (THREADS * 5) as u64, "{kind}");
        assert!(s.verify(None).unwrap().is_clean(), "{kind}");
    }
}
