//! Crash test: a writer process (three threads, so writes are committed in groups) does
//! mixed appends, forks, merges, detaches and imports on a RocksDB store, printing each
//! operation once it is acknowledged, and is killed with SIGKILL at a random moment; the
//! store is then reopened and every acknowledged operation must be there, no fork or
//! merge half-made, Oxigraph's own validation and `verify` clean. Then the next round,
//! on the same store.
//!
//! `FORKTRAIL_CRASH_ROUNDS` sets the number of kills (default 30; `make crash-test`
//! runs 150).
#![cfg(feature = "rocksdb")]

mod common;

use common::Rng;
use forktrail::{
    ForkOptions, MergeOptions, NewSession, NewTurn, Role, SessionId, Store, TranscriptOptions,
};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WRITER: &str = "FORKTRAIL_CRASH_WRITER";
const TEST: &str = "acknowledged_writes_survive_sigkill_and_nothing_is_half_made";

/// The writer: three threads writing at once (so appends and forks are committed in
/// groups) until killed, one acknowledged operation per line.
fn writer(dir: &Path, seed: u64) {
    let s = Store::open(dir).unwrap();
    println!("READY");
    std::thread::scope(|scope| {
        for thread in 0..3 {
            let s = &s;
            scope.spawn(move || write_forever(s, seed * 4 + thread));
        }
    });
}

fn write_forever(s: &Store, seed: u64) {
    let mut rng = Rng(seed | 1);
    for n in 0.. {
        let sessions = s.list().unwrap();
        let pick = |rng: &mut Rng| sessions[rng.below(sessions.len())].clone();
        match (rng.below(20), sessions.is_empty()) {
            (_, true) | (0, _) => {
                let id = s.create_session(NewSession::default()).unwrap();
                println!("ACK new {id}");
            }
            (1..=10, _) => {
                let target = pick(&mut rng);
                let content = format!("s{seed} n{n} \"quoted\" \u{e9}");
                let index = s
                    .append(&target.session, NewTurn::new(Role::User, content.clone()))
                    .unwrap();
                println!("ACK append {} {index} {content}", target.session);
            }
            (11..=14, _) => {
                let parent = pick(&mut rng);
                if parent.depth >= 30 {
                    continue;
                }
                let at = rng.below(parent.length as usize + 1) as u64;
                let options = ForkOptions {
                    at: Some(at),
                    label: Some(format!("s{seed}-n{n}")),
                    ..Default::default()
                };
                let plan = s.fork(&parent.session, options).unwrap();
                println!("ACK fork {} {} {at}", plan.session, parent.session);
            }
            (15..=16, _) => {
                let child = pick(&mut rng);
                if child.parent.is_none() || child.own_turns == 0 {
                    continue;
                }
                // A second merge of the same turns is refused: not an acknowledgement.
                if let Ok(plan) = s.merge(&child.session, MergeOptions::default()) {
                    println!("ACK merge {} {} {}", plan.child, plan.into, plan.index);
                }
            }
            (17, _) => {
                let fork = pick(&mut rng);
                if fork.parent.is_none() {
                    continue;
                }
                // Another thread may have detached it first.
                if s.detach(&fork.session).is_ok() {
                    println!("ACK detach {}", fork.session);
                }
            }
            _ => {
                let transcript = format!(
                    r#"[{{"role":"system","content":"s{seed} n{n}"}},{{"role":"user","content":"hi"}},{{"role":"assistant","content":"hello"}}]"#
                );
                let report = s
                    .import_openai(
                        &transcript,
                        NewSession::default(),
                        &TranscriptOptions::default(),
                    )
                    .unwrap();
                println!("ACK import {} 3", report.sessions[0]);
            }
        }
    }
}

/// What the writers acknowledged, as later writes leave it.
#[derive(Default)]
struct Acked {
    /// `(session, index) → content`.
    appends: BTreeMap<(String, u64), String>,
    /// `child → (parent, fork point)`, and whether it was detached since.
    forks: BTreeMap<String, (String, u64, bool)>,
    /// `(into, index)` of each merge's result turn.
    merges: Vec<(String, u64)>,
    /// Sessions created or imported, with the turns an import brought.
    created: BTreeMap<String, u64>,
    /// Forks whose detach was printed before the fork itself (by another thread).
    detached_early: std::collections::BTreeSet<String>,
    count: usize,
}

impl Acked {
    fn record(&mut self, line: &str) {
        let parts: Vec<&str> = line.splitn(5, ' ').collect();
        match parts.as_slice() {
            ["ACK", "new", id] => {
                self.created.insert(id.to_string(), 0);
            }
            ["ACK", "import", id, n] => {
                self.created.insert(id.to_string(), n.parse().unwrap());
            }
            ["ACK", "append", id, index, content] => {
                self.appends.insert(
                    (id.to_string(), index.parse().unwrap()),
                    content.to_string(),
                );
            }
            ["ACK", "fork", child, parent, at] => {
                let at = at.parse().unwrap();
                // Another thread may detach a fork before its maker prints the fork.
                let detached = self.detached_early.remove(*child);
                self.forks
                    .insert(child.to_string(), (parent.to_string(), at, detached));
            }
            ["ACK", "merge", _child, into, index] => {
                self.merges.push((into.to_string(), index.parse().unwrap()));
            }
            ["ACK", "detach", id] => match self.forks.get_mut(*id) {
                Some(fork) => fork.2 = true,
                None => {
                    self.detached_early.insert(id.to_string());
                }
            },
            _ => panic!("an unreadable acknowledgement: {line:?}"),
        }
        self.count += 1;
    }

    /// Checks that the catalog's pages list `listed` (every session, with its length)
    /// and that search finds the last acknowledged appends where they are.
    fn check_catalog(&self, s: &Store, listed: &[forktrail::SessionInfo], round: u64) {
        let mut paged = BTreeMap::new();
        let mut cursor = None;
        loop {
            let page = s
                .sessions(&forktrail::SessionQuery {
                    limit: Some(200),
                    cursor,
                    order: forktrail::SessionOrder::Created,
                    ..Default::default()
                })
                .unwrap();
            for x in page.sessions {
                assert!(paged.insert(x.session.to_string(), x.length).is_none());
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        let stored: BTreeMap<String, u64> = listed
            .iter()
            .map(|i| (i.session.to_string(), i.length))
            .collect();
        assert_eq!(paged, stored, "round {round}: the catalog's pages");
        for ((id, index), content) in self.appends.iter().rev().take(10) {
            let phrase: Vec<&str> = content.split(' ').take(2).collect();
            let hits = s
                .search(&forktrail::SearchQuery {
                    text: format!("\"{}\"", phrase.join(" ")),
                    limit: Some(100),
                    ..Default::default()
                })
                .unwrap();
            assert!(
                hits.hits
                    .iter()
                    .any(|h| h.session.as_str() == id && h.index == Some(*index)),
                "round {round}: search misses {id} {index} ({content:?})"
            );
        }
    }

    /// Checks every acknowledged operation against the reopened store.
    fn check(&self, s: &Store) {
        let sid = |id: &str| SessionId::new(id.to_string()).unwrap();
        let mut replays: BTreeMap<String, Vec<forktrail::ReplayRecord>> = BTreeMap::new();
        let mut replay = |id: &str| -> Vec<forktrail::ReplayRecord> {
            replays
                .entry(id.to_string())
                .or_insert_with(|| s.replay(&sid(id), None).unwrap())
                .clone()
        };
        for ((id, index), content) in &self.appends {
            let records = replay(id);
            assert_eq!(
                records.get(*index as usize).map(|r| &r.content),
                Some(content),
                "acknowledged append {id}[{index}] lost"
            );
        }
        for (child, (parent, at, detached)) in &self.forks {
            let info = s.info(&sid(child)).unwrap();
            if *detached {
                assert_eq!(info.parent, None, "{child} was detached");
            } else if info.parent.is_none() {
                // Detached without an acknowledgement: a writer thread preempted between
                // the commit and its line when the kill came (three threads share two
                // cores here). An unacknowledged write may be in or not; the fork
                // itself, acknowledged, must be there, and it is.
            } else {
                assert_eq!(
                    info.parent.as_ref().map(|p| p.as_str()),
                    Some(parent.as_str())
                );
                assert_eq!(info.forked_at_index, Some(*at), "{child}");
            }
        }
        for (into, index) in &self.merges {
            let records = replay(into);
            assert!(
                records.get(*index as usize).is_some(),
                "acknowledged merge into {into} at {index} lost"
            );
        }
        for (id, turns) in &self.created {
            assert!(s.info(&sid(id)).unwrap().length >= *turns, "{id}");
        }
    }
}

#[test]
fn acknowledged_writes_survive_sigkill_and_nothing_is_half_made() {
    if let Some(dir) = std::env::var_os(WRITER) {
        let seed = std::env::var("FORKTRAIL_CRASH_SEED")
            .unwrap()
            .parse()
            .unwrap();
        writer(Path::new(&dir), seed);
        return;
    }
    let rounds: u64 = std::env::var("FORKTRAIL_CRASH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(30);
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut acked = Acked::default();
    let mut rng = Rng(0x00c0_ffee);
    let mut killed_mid_line = 0;
    for round in 0..rounds {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
            .env(WRITER, &store)
            .env("FORKTRAIL_CRASH_SEED", (round + 1).to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        // Lines arrive on a thread; the kill comes a random time after READY.
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            let mut out = BufReader::new(stdout);
            loop {
                let mut line = String::new();
                match out.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        // libtest prints its own lines first.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let line = rx.recv_timeout(deadline.saturating_duration_since(Instant::now()));
            match line {
                Ok(line) if line.trim_end().ends_with("READY") => break,
                Ok(_) => {}
                Err(e) => panic!("round {round}: the writer did not start ({e})"),
            }
        }
        let delay = Duration::from_millis(20 + rng.below(400) as u64);
        let start = Instant::now();
        let mut lines = Vec::new();
        while start.elapsed() < delay {
            if let Ok(line) = rx.recv_timeout(delay.saturating_sub(start.elapsed())) {
                lines.push(line);
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            panic!("round {round}: the writer stopped before the kill ({status}): {err}");
        }
        child.kill().unwrap();
        child.wait().unwrap();
        reader.join().unwrap();
        lines.extend(rx.try_iter());
        for line in &lines {
            if !line.ends_with('\n') {
                killed_mid_line += 1; // cut by the kill: not an acknowledgement
                continue;
            }
            let line = line.trim_end();
            if line.starts_with("ACK ") {
                acked.record(line);
            }
        }
        let s = Store::open(&store).unwrap();
        s.oxigraph().validate().unwrap();
        acked.check(&s);
        let report = s.verify(None).unwrap();
        assert!(report.is_clean(), "round {round}: {:?}", report.problems);
        // Replays read the record index, which a kill may leave short or torn: they
        // must still be what the RDF holds.
        let listed = s.list().unwrap();
        for info in &listed {
            assert_eq!(
                s.replay(&info.session, None).unwrap(),
                s.replay_sparql(&info.session, None).unwrap(),
                "round {round}: session {}",
                info.session
            );
        }
        // The catalog, which a kill leaves behind its journal, pages exactly the
        // sessions the store holds, with their lengths, and finds the last appends.
        acked.check_catalog(&s, &listed, round);
    }
    // The rounds wrote something worth checking.
    assert!(
        acked.count > rounds as usize * 5,
        "{} acknowledged",
        acked.count
    );
    eprintln!(
        "crash test: {rounds} kills, {} acknowledged operations checked, {killed_mid_line} lines cut",
        acked.count
    );
}
