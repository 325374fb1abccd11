//! The record index of a store on disk: a cold replay reads each session's records from
//! one file, which is derived. Whatever happens to the files (removed, truncated as by
//! a crash, edited), a replay after reopening the store returns what the RDF holds, and
//! the next one finds the file repaired.
#![cfg(feature = "rocksdb")]

use forktrail::{ForkOptions, NewSession, NewTurn, ReplayRecord, Role, SessionId, Store};
use std::path::{Path, PathBuf};

const DIR: &str = "forktrail-records";

fn files(store: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(store.join(DIR))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
}

/// A root of `n` turns and a fork of it at 2 with two turns of its own.
fn family(store: &Store, n: usize) -> (SessionId, SessionId) {
    let root = store.create_session(NewSession::default()).unwrap();
    for i in 0..n {
        let role = if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        store
            .append(&root, NewTurn::new(role, format!("root turn {i}")))
            .unwrap();
    }
    let fork = store
        .fork(
            &root,
            ForkOptions {
                at: Some(2),
                label: Some("alt".into()),
                ..ForkOptions::default()
            },
        )
        .unwrap()
        .session;
    for i in 0..2 {
        store
            .append(&fork, NewTurn::new(Role::User, format!("fork turn {i}")))
            .unwrap();
    }
    (root, fork)
}

/// What the RDF holds, read through SPARQL (which never reads the index).
fn truth(store: &Store, id: &SessionId) -> Vec<ReplayRecord> {
    store.replay_sparql(id, None).unwrap()
}

/// A replay by a freshly opened store.
fn reopened(path: &Path, id: &SessionId) -> Vec<ReplayRecord> {
    Store::open(path).unwrap().replay(id, None).unwrap()
}

#[test]
fn appends_write_the_files_a_reopened_store_replays_from() {
    let dir = tempfile::tempdir().unwrap();
    let (root, fork, expected) = {
        let s = Store::open(dir.path()).unwrap();
        let (root, fork) = family(&s, 5);
        let expected = truth(&s, &fork);
        (root, fork, expected)
    };
    // One file per session that stores turns, written by the appends.
    assert_eq!(files(dir.path()).len(), 2);
    assert_eq!(expected.len(), 4);
    assert_eq!(expected[3].content, "fork turn 1");
    assert_eq!(expected[1].branch, "main");
    assert_eq!(expected[2].branch, "alt");
    assert_eq!(reopened(dir.path(), &fork), expected);
    // Files are derived: without them the replay is the same, and writes them back.
    std::fs::remove_dir_all(dir.path().join(DIR)).unwrap();
    assert_eq!(reopened(dir.path(), &fork), expected);
    assert_eq!(files(dir.path()).len(), 2);
    let s = Store::open(dir.path()).unwrap();
    assert_eq!(s.replay(&root, Some(3)).unwrap(), truth(&s, &root)[..4]);
}

#[test]
fn an_edited_file_fails_the_digest_check_and_is_rewritten_from_the_rdf() {
    let dir = tempfile::tempdir().unwrap();
    let root = {
        let s = Store::open(dir.path()).unwrap();
        family(&s, 4).0
    };
    let expected = truth(&Store::open(dir.path()).unwrap(), &root);
    let file = files(dir.path())
        .into_iter()
        .find(|f| {
            let bytes = std::fs::read(f).unwrap();
            bytes.windows(11).any(|w| w == b"root turn 3")
        })
        .unwrap();
    // The same length, other words: only the digest check can tell.
    let bytes = std::fs::read(&file).unwrap();
    let at = bytes.windows(11).position(|w| w == b"root turn 3").unwrap();
    let mut edited = bytes.clone();
    edited[at..at + 11].copy_from_slice(b"FORGED tx 3");
    std::fs::write(&file, &edited).unwrap();
    assert_eq!(reopened(dir.path(), &root), expected);
    assert_eq!(
        std::fs::read(&file).unwrap(),
        bytes,
        "the file was repaired"
    );
}

/// The file of `id`'s records: the one that holds `needle`.
fn file_holding(store: &Path, needle: &[u8]) -> PathBuf {
    files(store)
        .into_iter()
        .find(|f| {
            let bytes = std::fs::read(f).unwrap();
            bytes.windows(needle.len()).any(|w| w == needle)
        })
        .unwrap()
}

#[test]
fn a_forged_branch_label_in_a_file_is_never_served_and_the_file_is_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let (root, fork) = {
        let s = Store::open(dir.path()).unwrap();
        let (root, fork) = family(&s, 4);
        // A detached fork: its copied turns carry the root's label in their records.
        s.detach(&fork).unwrap();
        s.replay(&fork, None).unwrap();
        (root, fork)
    };
    let (labels, root_truth) = {
        let s = Store::open(dir.path()).unwrap();
        let labels: Vec<String> = truth(&s, &fork).into_iter().map(|r| r.branch).collect();
        (labels, truth(&s, &root))
    };
    assert_eq!(labels, ["main", "main", "alt", "alt"]);

    // The label of a copied turn changed in place (the digest does not cover it).
    let file = file_holding(dir.path(), b"fork turn 0");
    let bytes = std::fs::read(&file).unwrap();
    let forged: Vec<u8> = String::from_utf8_lossy(&bytes)
        .replace("main", "evil")
        .into_bytes();
    assert_eq!(forged.len(), bytes.len());
    assert_ne!(forged, bytes);
    std::fs::write(&file, &forged).unwrap();
    let served: Vec<String> = reopened(dir.path(), &fork)
        .into_iter()
        .map(|r| r.branch)
        .collect();
    assert_eq!(served, labels);
    assert_eq!(
        std::fs::read(&file).unwrap(),
        bytes,
        "the file was repaired"
    );

    // A label claimed by a record of a session whose turns carry none: the flag of
    // turn 1 (`index, role and kind lengths, has-label`) set, its length left at 0.
    let file = file_holding(dir.path(), b"root turn 3");
    let bytes = std::fs::read(&file).unwrap();
    let mut head = 1u64.to_le_bytes().to_vec();
    head.extend([9u8, 7u8]); // "assistant", "message"
    let at = bytes.windows(head.len()).position(|w| w == head).unwrap();
    assert_eq!(bytes[at + 10], 0);
    let mut forged = bytes.clone();
    forged[at + 10] = 1;
    std::fs::write(&file, &forged).unwrap();
    assert_eq!(reopened(dir.path(), &root), root_truth);
    assert_eq!(
        std::fs::read(&file).unwrap(),
        bytes,
        "the file was repaired"
    );
}

#[test]
fn a_file_cut_short_by_a_crash_is_completed_from_the_rdf() {
    let dir = tempfile::tempdir().unwrap();
    let fork = {
        let s = Store::open(dir.path()).unwrap();
        family(&s, 6).1
    };
    let expected = truth(&Store::open(dir.path()).unwrap(), &fork);
    for file in files(dir.path()) {
        let len = std::fs::metadata(&file).unwrap().len();
        let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
        f.set_len(len - 7).unwrap();
    }
    assert_eq!(reopened(dir.path(), &fork), expected);
    // Repaired: appends extend the files again, and a reopened store sees them.
    {
        let s = Store::open(dir.path()).unwrap();
        s.append(&fork, NewTurn::new(Role::Assistant, "after the repair"))
            .unwrap();
    }
    let s = Store::open(dir.path()).unwrap();
    let again = s.replay(&fork, None).unwrap();
    assert_eq!(again.last().unwrap().content, "after the repair");
    assert_eq!(again, truth(&s, &fork));
}

#[test]
fn pop_delete_and_detach_leave_no_stale_record_behind() {
    let dir = tempfile::tempdir().unwrap();
    let (root, fork) = {
        let s = Store::open(dir.path()).unwrap();
        let (root, fork) = family(&s, 4);
        // Pop then append other content at the same index.
        s.pop(&fork).unwrap();
        s.append(&fork, NewTurn::new(Role::Assistant, "replaced"))
            .unwrap();
        (root, fork)
    };
    let contents = |path: &Path, id: &SessionId| -> Vec<String> {
        reopened(path, id).into_iter().map(|r| r.content).collect()
    };
    assert_eq!(
        contents(dir.path(), &fork),
        ["root turn 0", "root turn 1", "fork turn 0", "replaced"]
    );
    {
        let s = Store::open(dir.path()).unwrap();
        s.detach(&fork).unwrap();
        s.delete(&root, false).unwrap();
        let other = s
            .create_session(NewSession {
                id: Some(root.to_string()),
                ..NewSession::default()
            })
            .unwrap();
        s.append(&other, NewTurn::new(Role::User, "a new root"))
            .unwrap();
    }
    assert_eq!(contents(dir.path(), &root), ["a new root"]);
    let s = Store::open(dir.path()).unwrap();
    let detached = s.replay(&fork, None).unwrap();
    assert_eq!(detached, truth(&s, &fork));
    assert_eq!(detached[0].branch, "main", "copied turns keep their branch");
    assert_eq!(detached[3].branch, "alt");
}

#[test]
fn an_import_writes_the_file_of_its_session_and_a_failed_one_writes_none() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..300)
        .map(|i| {
            let role = ["system", "user", "assistant"][i % 3];
            format!("{{\"role\":\"{role}\",\"content\":\"message {i}\"}}")
        })
        .collect();
    let s = Store::open(dir.path()).unwrap();
    let report = s
        .import_openai(
            &lines.join("\n"),
            NewSession::default(),
            &Default::default(),
        )
        .unwrap();
    let id = report.sessions[0].clone();
    // Written with the import, before any replay asked for it.
    assert_eq!(files(dir.path()).len(), 1);
    let expected = truth(&s, &id);
    assert_eq!(expected.len(), 300);
    assert_eq!(expected[299].content, "message 299");
    drop(s);
    assert_eq!(reopened(dir.path(), &id), expected);
    // An import refused for a bad line leaves no file behind, as it leaves no quads.
    let s = Store::open(dir.path()).unwrap();
    let bad = format!("{}\n{{\"role\":\"user\"", lines[..10].join("\n"));
    assert!(s
        .import_openai(&bad, NewSession::default(), &Default::default())
        .is_err());
    assert_eq!(files(dir.path()).len(), 1);
}
