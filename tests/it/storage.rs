//! The on-disk store: reopening keeps everything, concurrent writers never collide, and
//! a second process is told the store is in use.
#![cfg(feature = "rocksdb")]

use crate::common;

use common::*;
use forktrail::{Error, ForkOptions, NewSession, NewTurn, Role, Store};
use std::collections::HashSet;
use std::sync::Arc;

#[test]
fn write_close_reopen_replays_the_same_and_a_fork_of_a_fork_survives() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let (root, deep, before_root, before_deep) = {
        let s = Store::open(&path).unwrap();
        let root = session_with(&s, "root", 5);
        let mid = fork_at(&s, &root, 3, "mid", "a");
        append_n(&s, &mid, 2);
        let deep = fork_at(&s, &mid, 4, "deep", "b");
        s.append(&deep, NewTurn::new(Role::Assistant, "deep 4").model("m"))
            .unwrap();
        s.flush().unwrap();
        let r = (s.load(&root, None).unwrap(), s.load(&deep, None).unwrap());
        (root, deep, r.0, r.1)
    };
    let s = Store::open(&path).unwrap();
    assert_eq!(s.load(&root, None).unwrap(), before_root);
    assert_eq!(s.load(&deep, None).unwrap(), before_deep);
    assert_eq!(s.info(&deep).unwrap().depth, 2);
    assert_eq!(
        s.append(&deep, NewTurn::new(Role::User, "after reopen"))
            .unwrap(),
        5
    );
}

#[test]
fn a_second_open_of_the_same_directory_is_refused_as_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let _first = Store::open(&path).unwrap();
    match Store::open(&path) {
        Err(err @ Error::StoreLocked { .. }) => {
            assert!(
                err.to_string().contains("in use by another process"),
                "{err}"
            )
        }
        Err(other) => panic!("expected StoreLocked, got {other}"),
        Ok(_) => panic!("a second writer opened the store"),
    }
}

#[test]
fn eight_threads_appending_and_forking_keep_indices_contiguous() {
    let t = rocksdb();
    let store = Arc::new(t.store);
    let shared = session_with(&store, "shared", 0);
    const PER_THREAD: usize = 60;
    let handles: Vec<_> = (0..8usize)
        .map(|n| {
            let store = Arc::clone(&store);
            let shared = shared.clone();
            std::thread::spawn(move || {
                let own = store
                    .create_session(NewSession {
                        id: Some(format!("own{n}")),
                        ..Default::default()
                    })
                    .unwrap();
                let mut forks = Vec::new();
                for i in 0..PER_THREAD {
                    let content = format!("thread {n} turn {i}");
                    if n.is_multiple_of(2) {
                        store
                            .append(&shared, NewTurn::new(Role::User, content.clone()))
                            .unwrap();
                    }
                    store
                        .append(&own, NewTurn::new(Role::User, content))
                        .unwrap();
                    if i.is_multiple_of(10) {
                        let target = if n.is_multiple_of(2) { &shared } else { &own };
                        forks.push(store.fork(target, ForkOptions::default()).unwrap());
                    }
                }
                (own, forks)
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let records = store.replay(&shared, None).unwrap();
    assert_eq!(records.len(), 4 * PER_THREAD);
    assert!(records.iter().enumerate().all(|(i, r)| r.index == i as u64));
    let contents: HashSet<&str> = records.iter().map(|r| r.content.as_str()).collect();
    assert_eq!(contents.len(), 4 * PER_THREAD, "nothing duplicated or lost");
    // Each thread's turns on the shared session keep their order.
    for n in [0, 2, 4, 6] {
        let order: Vec<usize> = records
            .iter()
            .filter_map(|r| r.content.strip_prefix(&format!("thread {n} turn ")))
            .map(|i| i.parse().unwrap())
            .collect();
        assert_eq!(order, (0..PER_THREAD).collect::<Vec<_>>());
    }
    let mut labels = HashSet::new();
    for (own, forks) in results {
        let own_records = store.replay(&own, None).unwrap();
        assert_eq!(own_records.len(), PER_THREAD);
        for plan in forks {
            let fork = sid(&plan.session);
            assert!(labels.insert((plan.parent.clone(), plan.branch.clone())));
            let inherited = store.replay(&fork, None).unwrap();
            assert_eq!(inherited.len() as u64, plan.forked_at_index);
            assert!(plan.forked_at_index > 0, "every fork came after an append");
            let parent = store
                .replay(&sid(&plan.parent), Some(plan.forked_at_index - 1))
                .unwrap();
            assert_eq!(parent, inherited);
        }
    }
}

#[test]
fn a_backup_taken_while_a_writer_appends_opens_verifies_and_holds_a_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path().join("store")).unwrap();
    let busy = session_with(&s, "busy", 5);
    let fork = fork_at(&s, &busy, 3, "fork", "alt");
    append_n(&s, &fork, 2);
    let backup = dir.path().join("backups/first");
    let report = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            for i in 0..300 {
                s.append(&busy, NewTurn::new(Role::User, format!("during {i}")))
                    .unwrap();
            }
        });
        // Some appends in, the rest racing the backup.
        while s.info(&busy).unwrap().length < 50 {
            std::thread::yield_now();
        }
        let report = s.backup(&backup).unwrap();
        writer.join().unwrap();
        report
    });
    assert_eq!((report.sessions, report.method), (2, "checkpoint"));
    let copy = Store::open(&backup).unwrap();
    let verified = copy.verify(None).unwrap();
    assert!(verified.is_clean(), "{:?}", verified.problems);
    // A snapshot: each session a prefix of the original, the busy one caught mid-way.
    let now = s.replay(&busy, None).unwrap();
    let then = copy.replay(&busy, None).unwrap();
    assert!((50..=305).contains(&then.len()), "{}", then.len());
    assert_eq!(then[..], now[..then.len()]);
    assert_eq!(
        copy.replay(&fork, None).unwrap(),
        s.replay(&fork, None).unwrap()
    );

    // Into a directory that exists: refused, nothing touched.
    let err = s.backup(&backup).unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
    assert_eq!(copy.replay(&busy, None).unwrap(), then);

    // A store not on disk is copied and checked instead.
    let memory = Store::in_memory().unwrap();
    session_with(&memory, "m", 3);
    let report = memory.backup(&dir.path().join("from-memory")).unwrap();
    assert_eq!((report.sessions, report.method), (1, "copy"));
}

/// The number of RocksDB's newest write-ahead log: a flush starts a new one.
fn newest_log(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .filter_map(|p| p.file_stem()?.to_str()?.parse().ok())
        .max()
        .unwrap_or(0)
}

#[test]
fn sync_durability_flushes_each_write_before_it_returns_and_an_interval_soon_after() {
    use forktrail::Durability;
    let dir = tempfile::tempdir().unwrap();
    // The newest log before and after an append.
    let write = |name: &str, durability: Durability| {
        let path = dir.path().join(name);
        let s = Store::open(&path).unwrap().with_durability(durability);
        let id = session_with(&s, "s", 1);
        let before = newest_log(&path);
        s.append(&id, NewTurn::new(Role::User, "more")).unwrap();
        let after = newest_log(&path);
        (s, path, before, after)
    };
    // (Under `process` RocksDB may still flush on its own, so nothing is asserted of it.)
    let (_s, _, before, after) = write("sync", Durability::Sync);
    assert!(after > before, "sync: flushed (a new log) before returning");
    let (_s, path, _, after) = write(
        "interval",
        Durability::Interval(std::time::Duration::from_millis(50)),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while newest_log(&path) == after {
        assert!(
            std::time::Instant::now() < deadline,
            "interval: never flushed"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The bulk loader's temporary files in store directory `dir`.
fn bulk_files(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("bulk-") && n.ends_with(".sst"))
        .collect()
}

#[test]
fn an_import_killed_while_it_writes_bulk_files_leaves_none_after_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    // An OpenAI transcript large enough that the loader writes files for a while.
    let transcript = dir.path().join("big.jsonl");
    let line = |i: usize| {
        let role = ["user", "assistant"][i % 2];
        format!(
            "{{\"role\":\"{role}\",\"content\":\"message {i} {}\"}}\n",
            "x".repeat(100)
        )
    };
    std::fs::write(&transcript, (0..150_000).map(line).collect::<String>()).unwrap();
    Store::open(&store).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_forktrail"))
        .args(["import", "--format", "openai", "--store"])
        .arg(&store)
        .arg(&transcript)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed as soon as a bulk file is there (the import has not committed).
    let seen = loop {
        if !bulk_files(&store).is_empty() {
            child.kill().unwrap();
            break true;
        }
        if child.try_wait().unwrap().is_some() {
            break false;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    child.wait().unwrap();
    assert!(seen, "the import ended before it wrote a bulk file");
    assert!(!bulk_files(&store).is_empty(), "the kill left bulk files");
    let s = Store::open(&store).unwrap();
    assert_eq!(bulk_files(&store), Vec::<String>::new());
    assert!(
        s.list().unwrap().is_empty(),
        "the killed import wrote nothing"
    );
}

/// A tmpfs of a few MiB mounted at a fresh directory (unmounted when dropped): a disk
/// that fills up. `None` where this process may not mount one, except under CI.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(mib: u32) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI runs as root and must be able to mount a tmpfs"
            );
            eprintln!("note: cannot mount a tmpfs here (not root?): disk-full test skipped");
            return None;
        }
        Some(Self { dir })
    }

    /// Fills what is left of the disk; returns the filler to remove.
    fn fill(&self) -> std::path::PathBuf {
        use std::io::Write;
        let path = self.dir.path().join("filler");
        let mut file = std::fs::File::create(&path).unwrap();
        let chunk = vec![0u8; 1 << 16];
        while file.write_all(&chunk).is_ok() {}
        let _ = file.sync_all();
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazily: a server thread of the test may still hold the store open.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Session `s` of two turns in a store on `disk`, served with the token `t`.
#[cfg(feature = "server")]
fn served_on(disk: &SmallDisk) -> (common::server::Server, forktrail::SessionId) {
    let store = Arc::new(Store::open(disk.dir.path().join("store")).unwrap());
    let id = session_with(&store, "s", 2);
    let config = forktrail::server::ServerConfig {
        token: Some("t".into()),
        ..Default::default()
    };
    (common::server::Server::start(store, config), id)
}

/// A user turn saying `content`, appended to session `s` over HTTP.
#[cfg(feature = "server")]
fn append_over_http(server: &common::server::Server, content: &str) -> reqwest::blocking::Response {
    let turn = serde_json::json!({"role": "user", "content": content});
    server.post_json("/sessions/s/turns", Some("t"), turn)
}

#[cfg(feature = "server")]
#[test]
fn writes_refused_on_a_full_disk_with_507_go_on_once_space_is_freed_without_a_restart() {
    let Some(disk) = SmallDisk::mount(48) else {
        return;
    };
    let (server, id) = served_on(&disk);
    let store = &server.store;
    let append = |content: &str| append_over_http(&server, content);
    let filler = disk.fill();
    // Large enough that the write-ahead log cannot take it.
    let big = "x".repeat(1 << 20);
    let refused = append(&big);
    assert_eq!(refused.status().as_u16(), 507);
    let body: serde_json::Value = refused.json().unwrap();
    assert_eq!(body["error"], "storage_full", "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("free space"),
        "{body}"
    );
    let err = store
        .append(&id, NewTurn::new(Role::User, big.clone()))
        .unwrap_err();
    assert!(matches!(err, Error::StorageFull { .. }), "{err}");
    assert_eq!(
        store.replay(&id, None).unwrap().len(),
        2,
        "nothing was written"
    );
    // Room again: the next write goes in, through the same server.
    std::fs::remove_file(filler).unwrap();
    let taken = append(&big);
    assert_eq!(taken.status().as_u16(), 201, "{:?}", taken.text());
    store
        .append(&id, NewTurn::new(Role::Assistant, "and on"))
        .unwrap();
    let turns = store.replay(&id, None).unwrap();
    assert_eq!(turns.len(), 4);
    assert_eq!(turns[2].content.len(), big.len());
    assert!(store.verify(None).unwrap().is_clean());
}

/// A copy of `tests/data/v1-store`: a store written by forktrail before digests covered
/// tool calls (a demo tree, a Claude Code log with branches and a sub-agent, an OpenAI
/// transcript with tool calls and forks below them, one detached, an OpenTelemetry
/// conversation), every session replayed once, so its record index holds files of the
/// old format. `tests/data/v1-store.json` holds what that forktrail printed of each
/// session: branch, head digest, replay.
fn v1_store() -> (tempfile::TempDir, std::path::PathBuf, serde_json::Value) {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    copy_dir(&data.join("v1-store"), &path);
    let text = std::fs::read_to_string(data.join("v1-store.json")).unwrap();
    (dir, path, serde_json::from_str(&text).unwrap())
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn a_store_written_before_digests_covered_tool_calls_is_upgraded_when_opened() {
    let (_dir, path, before) = v1_store();
    let before = before.as_object().unwrap();
    let s = Store::open(&path).unwrap();
    let report = s.upgrade_report().expect("an upgrade ran").clone();
    assert_eq!(
        (report.from, report.to),
        (forktrail::DigestVersion::V1, forktrail::DigestVersion::V2)
    );
    assert_eq!(s.digest_version().unwrap(), forktrail::DigestVersion::V2);
    // Every chain sound under the new version.
    let verified = s.verify(None).unwrap();
    assert!(verified.is_clean(), "{:?}", verified.problems);
    assert_eq!(verified.digest_version, forktrail::DigestVersion::V2);
    assert_eq!(verified.sessions, before.len());
    let mut changed = 0;
    for (id, old) in before {
        let id: forktrail::SessionId = id.parse().unwrap();
        let turns = s.load(&id, None).unwrap();
        // What each turn says is as it was.
        let plain: Vec<serde_json::Value> = s
            .replay(&id, None)
            .unwrap()
            .iter()
            .map(|r| {
                serde_json::json!({"index": r.index, "role": r.role.as_str(),
                    "content": r.content, "branch": r.branch})
            })
            .collect();
        assert_eq!(serde_json::Value::Array(plain), old["replay"], "{id}");
        // A session whose history has no tool call, name or payload keeps its digest;
        // one that has changes it.
        let extras = turns
            .iter()
            .any(|t| t.tool_calls.is_some() || t.tool_call_id.is_some() || t.name.is_some());
        let head = s.info(&id).unwrap().head_digest;
        assert_eq!(
            head.as_deref() != old["head_digest"].as_str(),
            extras,
            "{id}"
        );
        changed += usize::from(extras);
    }
    assert!(changed >= 6 && changed < before.len(), "{changed}");
    assert!(report.sessions >= 6 && report.turns > 0, "{report:?}");
    // The record index was written anew, in the new format, as sessions were replayed.
    for file in std::fs::read_dir(path.join("forktrail-records")).unwrap() {
        let bytes = std::fs::read(file.unwrap().path()).unwrap();
        assert_eq!(&bytes[..8], b"FTREC02\n");
    }
    // Open again: nothing left to do.
    drop(s);
    let s = Store::open(&path).unwrap();
    assert!(s.upgrade_report().is_none());
    assert!(s.verify(None).unwrap().is_clean());
}

#[test]
fn an_upgraded_opentelemetry_conversation_gains_its_later_spans_without_repeating_itself() {
    // The OpenTelemetry import names each turn by the digest of its history: the
    // upgrade renames them, so the conversation's next spans find their start.
    let (_dir, path, _) = v1_store();
    let s = Store::open(&path).unwrap();
    let id = sid("weather-chat");
    assert_eq!(s.info(&id).unwrap().length, 4);
    let later =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v1-otlp-later.jsonl");
    let report = s
        .import_path(&later, None, &forktrail::TranscriptOptions::default())
        .unwrap();
    assert_eq!(report.extended, vec![id.clone()], "{report:?}");
    let replay = s.replay(&id, None).unwrap();
    assert_eq!(replay.len(), 6);
    assert_eq!(replay[4].content, "And tomorrow?");
    assert_eq!(replay[5].content, "Sunny, 21°C.");
    assert!(s.verify(None).unwrap().is_clean());
}

#[cfg(feature = "server")]
#[test]
fn on_a_full_disk_reads_go_on_and_writes_resume_once_the_room_the_error_names_is_free() {
    let Some(disk) = SmallDisk::mount(64) else {
        return;
    };
    let (server, id) = served_on(&disk);
    let (store, path) = (&server.store, disk.dir.path().join("store"));
    // About 4 MB of turns RocksDB has not flushed yet: a reopen replays and flushes
    // them, so it needs that much room.
    let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
    let mut noise = || -> String {
        (0..100_000)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                char::from(b'!' + (seed % 90) as u8)
            })
            .collect()
    };
    for _ in 0..40 {
        store
            .append(&id, NewTurn::new(Role::User, noise()))
            .unwrap();
    }
    let stored = store.replay(&id, None).unwrap();
    let append = |content: &str| append_over_http(&server, content);
    // Reads that reach the store, not the caches: a replay and a SPARQL count.
    let reads = || {
        store.clear_caches();
        let replay = server
            .http
            .get(server.url("/sessions/s/replay"))
            .send()
            .unwrap();
        assert_eq!(replay.status(), 200, "{:?}", replay.text());
        let records: Vec<forktrail::ReplayRecord> = replay.json().unwrap();
        let count = server
            .http
            .get(server.url("/sparql"))
            .query(&[(
                "query",
                "SELECT (COUNT(*) AS ?n) WHERE { ?t a <https://w3id.org/forktrail/ns#Turn> }",
            )])
            .header("Accept", "text/csv")
            .send()
            .unwrap();
        assert_eq!(count.status(), 200);
        (records, count.text().unwrap())
    };
    let (_, turns_before) = reads();

    let filler = disk.fill();
    let refused = append(&noise());
    assert_eq!(refused.status().as_u16(), 507);
    let err = store
        .append(&id, NewTurn::new(Role::User, noise()))
        .unwrap_err();
    let Error::StorageFull {
        needed: Some(needed),
        ..
    } = err
    else {
        panic!("{err}")
    };
    let log: u64 = std::fs::read_dir(&path)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(needed > log && log > 4_000_000, "{needed} {log}");
    let said = format!(
        "free space until {:.1} MB are free there",
        needed as f64 / 1e6
    );
    assert!(err.to_string().contains(&said), "{err}");

    // Some room, not enough to reopen: writes are refused saying so, reads go on.
    let leave = |free: u64| {
        std::fs::remove_file(&filler).unwrap();
        let avail = fs4::available_space(disk.dir.path()).unwrap();
        let mut file = std::fs::File::create(&filler).unwrap();
        // Whole pages, so that at least `free` bytes stay free.
        let mut left = (avail - free) / 4096 * 4096;
        let chunk = vec![1u8; 1 << 16];
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            std::io::Write::write_all(&mut file, &chunk[..n]).unwrap();
            left -= n as u64;
        }
        file.sync_all().unwrap();
    };
    leave(log / 2);
    for _ in 0..2 {
        let refused = append("short");
        assert_eq!(refused.status().as_u16(), 507);
        let body: serde_json::Value = refused.json().unwrap();
        assert!(body["message"].as_str().unwrap().contains(&said), "{body}");
        let (records, turns) = reads();
        assert_eq!(records, stored);
        assert_eq!(turns, turns_before);
    }

    // The room the error named: the next write reopens the store and goes in.
    leave(needed);
    let taken = append("and on");
    assert_eq!(taken.status().as_u16(), 201, "{:?}", taken.text());
    let (records, _) = reads();
    assert_eq!(records.len(), stored.len() + 1);
    assert_eq!(records.last().unwrap().content, "and on");
    assert!(store.verify(None).unwrap().is_clean());
}
