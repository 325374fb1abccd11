//! forktrail on a remote SPARQL 1.1 store (a real Oxigraph server): requests per
//! operation, leases between writers, and many processes writing one store at once.
//! The behaviour suites (sessions, forks, agent, …) also run on this store: see
//! `common::stores`.

use crate::common;

use common::*;
use forktrail::{Error, ForkOptions, NewTurn, RemoteConfig, Role, Store};
use oxigraph::model::{GraphName, Literal, NamedNode, Quad};
use oxigraph::sparql::QueryResults;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::Duration;

const FT: &str = "https://w3id.org/forktrail/ns#";

fn requests(store: &Store, op: impl FnOnce()) -> u64 {
    let before = store.remote_requests().unwrap();
    op();
    store.remote_requests().unwrap() - before
}

#[test]
fn replay_costs_the_session_a_request_per_nine_ancestors_and_one_and_a_write_does_not_grow_with_history(
) {
    let Some(s) = remote() else { return };
    let root = session_with(&s, "root", 3);
    let mut leaf = root.clone();
    let mut depths = BTreeMap::new();
    for d in 1..=32u64 {
        leaf = fork_at(
            &s,
            &leaf,
            s.info(&leaf).unwrap().length,
            &format!("f{d}"),
            "x",
        );
        append_n(&s, &leaf, 1);
        if [1, 8, 32].contains(&d) {
            depths.insert(d, leaf.clone());
        }
    }
    for (d, id) in &depths {
        let mut records = Vec::new();
        s.clear_caches();
        let n = requests(&s, || records = s.replay(id, None).unwrap());
        assert_eq!(records.len() as u64, 3 + d, "depth {d}");
        assert!(n <= d + 2, "replay at depth {d} took {n} requests");
        // The session, its ancestors nine levels a request; then the turns.
        let expected = 1 + d.div_ceil(9) + 1;
        assert_eq!(
            n, expected,
            "replay at depth {d}: the chain, then the turns"
        );
        // Again, from the cache: the chain, then one check of the cached turns.
        let mut warm = Vec::new();
        assert_eq!(
            requests(&s, || warm = s.replay(id, None).unwrap()),
            expected
        );
        assert_eq!(warm, records);
    }
    // The same operations on a short and on a long history cost the same requests.
    let short = session_with(&s, "short", 2);
    let long = session_with(&s, "long", 300);
    let cost = |id: &forktrail::SessionId| {
        let append = requests(&s, || {
            s.append(id, NewTurn::new(Role::User, "more")).unwrap();
        });
        let fork = requests(&s, || {
            s.fork(id, ForkOptions::default()).unwrap();
        });
        (append, fork)
    };
    let (short_cost, long_cost) = (cost(&short), cost(&long));
    assert_eq!(short_cost, long_cost, "requests grow with history");
    assert!(short_cost.0 <= 8 && short_cost.1 <= 8, "{short_cost:?}");
}

/// A lease as a writer that died mid-write would have left it.
fn lease_of(s: &Store, id: &str, expires: chrono::DateTime<chrono::Utc>) -> Vec<Quad> {
    let lease = NamedNode::new(format!("urn:forktrail:lease/dead-{id}")).unwrap();
    let graph = GraphName::NamedNode(NamedNode::new("urn:forktrail:leases").unwrap());
    let term = |local: &str| NamedNode::new(format!("{FT}{local}")).unwrap();
    vec![
        Quad::new(
            lease.clone(),
            NamedNode::new("http://www.w3.org/1999/02/22-rdf-syntax-ns#type").unwrap(),
            term("Lease"),
            graph.clone(),
        ),
        Quad::new(
            lease.clone(),
            term("leaseOf"),
            s.session_iri(&sid(id)),
            graph.clone(),
        ),
        Quad::new(
            lease,
            term("leaseExpires"),
            Literal::new_typed_literal(
                expires.to_rfc3339(),
                NamedNode::new("http://www.w3.org/2001/XMLSchema#dateTime").unwrap(),
            ),
            graph,
        ),
    ]
}

/// Quads of leases (not of the receipts fenced commits leave, which claim nothing).
fn lease_count(s: &Store) -> usize {
    quads(s)
        .iter()
        .filter(|q| q.ends_with("<urn:forktrail:leases> .") && !q.contains(".done>"))
        .count()
}

#[test]
fn a_live_lease_holds_its_session_only_and_a_lapsed_one_is_cleared() {
    let Some(remote) = remote() else { return };
    let s = Store::remote(RemoteConfig::new(server_url(&remote)))
        .unwrap()
        .with_lease_wait(Duration::from_millis(300));
    let held = session_with(&s, "held", 1);
    let free = session_with(&s, "free", 1);
    let lapses = chrono::Utc::now() + chrono::Duration::seconds(4);
    insert_behind(&s, &lease_of(&s, "held", lapses));
    let err = fails_unchanged(&s, || s.append(&held, NewTurn::new(Role::User, "blocked")));
    assert!(
        matches!(&err, Error::Contended { what, .. } if what == "session held"),
        "{err}"
    );
    // Another session, and reads, go on.
    s.append(&free, NewTurn::new(Role::User, "goes on"))
        .unwrap();
    assert_eq!(s.replay(&held, None).unwrap().len(), 1);
    // A store-wide write (delete) waits for every session's lease.
    let err = fails_unchanged(&s, || s.delete(&free, false));
    assert!(matches!(err, Error::Contended { .. }), "{err}");
    assert_eq!(lease_count(&s), 3, "only the dead writer's lease is left");

    // Once it lapses, the next write on the session goes ahead and clears it away.
    let wait = lapses - chrono::Utc::now() + chrono::Duration::milliseconds(100);
    std::thread::sleep(wait.to_std().unwrap_or_default());
    s.append(&held, NewTurn::new(Role::User, "after")).unwrap();
    assert_eq!(
        count(
            &s,
            &format!("SELECT ?l WHERE {{ GRAPH ?g {{ ?l <{FT}leaseOf> ?k }} }}")
        ),
        0,
        "the write removed its own and the lapsed lease"
    );
    // What it left is its receipt: a lease on nothing, which blocks no one, and which
    // the same writer's next write removes.
    let receipts = |s: &Store| quads(s).iter().filter(|q| q.contains(".done>")).count();
    assert_eq!(receipts(&s), 2, "the receipt's type and expiry");
    s.append(&held, NewTurn::new(Role::User, "not blocked"))
        .unwrap();
    assert_eq!(receipts(&s), 2, "one receipt, the newest");
    assert_eq!(s.replay(&held, None).unwrap().len(), 3);
}

fn server_url(store: &TestStore) -> String {
    store.location()
}

/// What one worker process saw acknowledged.
#[derive(Default)]
struct Acks {
    /// `(session, index, content)` of each append that exited 0.
    appends: Vec<(String, u64, String)>,
    /// `(label, child)` of each contested fork that exited 0.
    forks: Vec<(String, String)>,
    refused_labels: usize,
}

#[test]
fn four_processes_writing_one_store_never_clash_and_lose_nothing() {
    if let Some(server) = remote() {
        four_processes_on(server);
    }
}

#[test]
fn four_processes_writing_one_virtuoso_store_never_clash_and_lose_nothing() {
    if let Some(server) = virtuoso() {
        four_processes_on(server);
    }
}

fn four_processes_on(server: TestStore) {
    let url = server_url(&server);
    let root = session_with(&server, "root", 1);
    let bin = env!("CARGO_BIN_EXE_forktrail");
    let run = |args: &[&str]| {
        Command::new(bin)
            .arg("--store")
            .arg(&url)
            .args(args)
            .output()
            .unwrap()
    };
    let workers: Vec<Acks> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|w| {
                let (run, root) = (&run, &root);
                scope.spawn(move || {
                    let mut acks = Acks::default();
                    let mut mine: Vec<String> = Vec::new();
                    for i in 0..200 {
                        if i % 5 == 4 {
                            // All four race for the same label: one may win.
                            let label = format!("c{i}");
                            let out = run(&["fork", "root", "--label", &label]);
                            let stdout = String::from_utf8(out.stdout).unwrap();
                            if out.status.success() {
                                let child = stdout.lines().next().unwrap().to_string();
                                mine.push(child.clone());
                                acks.forks.push((label, child));
                            } else {
                                let stderr = String::from_utf8_lossy(&out.stderr);
                                assert!(stderr.contains("already has a child"), "{stderr}");
                                acks.refused_labels += 1;
                            }
                            continue;
                        }
                        // Mostly the shared root; sometimes a fork this worker made.
                        let session = match mine.get(i % 7) {
                            Some(fork) if i % 3 == 0 => fork.clone(),
                            _ => root.to_string(),
                        };
                        let content = format!("w{w} i{i}");
                        let out =
                            run(&["append", &session, "--role", "user", "--content", &content]);
                        assert!(
                            out.status.success(),
                            "append failed: {}",
                            String::from_utf8_lossy(&out.stderr)
                        );
                        let index = String::from_utf8(out.stdout)
                            .unwrap()
                            .trim()
                            .parse()
                            .unwrap();
                        acks.appends.push((session, index, content));
                    }
                    acks
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    // Every acknowledged append is there, at its index, once.
    let mut by_session: BTreeMap<String, Vec<(u64, String)>> = BTreeMap::new();
    for acks in &workers {
        for (session, index, content) in &acks.appends {
            by_session
                .entry(session.clone())
                .or_default()
                .push((*index, content.clone()));
        }
    }
    for (session, acked) in &by_session {
        let records = server.replay(&sid(session), None).unwrap();
        for (i, r) in records.iter().enumerate() {
            assert_eq!(r.index, i as u64, "{session}: indices are not contiguous");
        }
        let mut seen = BTreeSet::new();
        for (index, content) in acked {
            assert!(
                seen.insert(*index),
                "{session}: two appends acknowledged at {index}"
            );
            assert_eq!(
                records.get(*index as usize).map(|r| &r.content),
                Some(content),
                "{session}: the acknowledged turn {index} is not there"
            );
        }
    }
    // No index holds two turns anywhere, and no parent has two children of one label.
    let doubled = format!(
        "SELECT ?g ?i WHERE {{ GRAPH ?g {{ ?a <{FT}index> ?i . ?b <{FT}index> ?i }} FILTER(?a != ?b) }}"
    );
    assert_eq!(count(&server, &doubled), 0, "two turns share an index");
    let twins = format!(
        "SELECT ?p ?l WHERE {{ ?a <{FT}parentSession> ?p ; <{FT}branch> ?l . \
         ?b <{FT}parentSession> ?p ; <{FT}branch> ?l FILTER(?a != ?b) }}"
    );
    assert_eq!(count(&server, &twins), 0, "two siblings share a label");
    // Each contested label went to exactly one worker, and that worker's child is it.
    let won: Vec<&(String, String)> = workers.iter().flat_map(|a| &a.forks).collect();
    let refused: usize = workers.iter().map(|a| a.refused_labels).sum();
    assert_eq!(won.len(), 40, "one fork per contested label");
    assert_eq!(refused, 120);
    let tree = server.tree(&root).unwrap();
    for (label, child) in won {
        let node = tree.children.iter().find(|c| &c.branch == label).unwrap();
        assert_eq!(node.session.as_str(), child);
    }
    assert_eq!(
        lease_count(&server),
        0,
        "{}: a lease outlived its write",
        server.kind
    );
}

fn count(store: &Store, sparql: &str) -> usize {
    match store.query(sparql, &[]).unwrap() {
        QueryResults::Solutions(rows) => rows.count(),
        _ => panic!("not a SELECT"),
    }
}

/// `(session, length, head digest)` of every session.
fn heads(store: &Store) -> Vec<(String, u64, Option<String>)> {
    let mut all: Vec<_> = store
        .list()
        .unwrap()
        .into_iter()
        .map(|s| (s.session.to_string(), s.length, s.head_digest))
        .collect();
    all.sort();
    all
}

#[test]
fn a_store_copied_to_a_remote_one_and_back_is_the_same_store() {
    let Some(remote) = remote() else { return };
    let source = Store::in_memory().unwrap();
    let demo = forktrail::demo::build(&source).unwrap();
    let hostile = session_with(&source, "hostile", 0);
    source
        .append(
            &hostile,
            NewTurn::new(
                Role::User,
                "\"} ; DROP ALL ; INSERT DATA { <a> <b> \"c\" } #\n\u{0}é",
            ),
        )
        .unwrap();
    let standalone = fork_at(&source, &demo.root, 2, "alone", "alone");
    source.detach(&standalone).unwrap();

    let there = source.copy_to(&remote).unwrap();
    assert_eq!(there.sessions.len(), source.list().unwrap().len());
    assert_eq!(there.verified, there.sessions.len());
    assert_eq!(there.quads as usize, quads(&source).len());
    assert_eq!(heads(&remote), heads(&source));

    let back = Store::in_memory().unwrap();
    let report = remote.copy_to(&back).unwrap();
    assert_eq!(report.sessions, there.sessions);
    assert_eq!(heads(&back), heads(&source));
    // Not just the heads: every quad came back, and replays read the same.
    assert_eq!(quads(&back), quads(&source));
    let leaf = &demo.booking;
    assert_eq!(
        back.replay(leaf, None).unwrap(),
        source.replay(leaf, None).unwrap()
    );

    // A second copy into the same remote store is refused and writes nothing.
    let err = fails_unchanged(&remote, || source.copy_to(&remote));
    assert!(
        matches!(&err, Error::Conflict(m) if m.contains("already exists")),
        "{err}"
    );
}

#[test]
fn a_copy_too_big_for_one_request_goes_in_batches_parents_first_and_loses_nothing() {
    let source = Store::in_memory().unwrap();
    for r in 0..30 {
        let root = session_with(&source, &format!("r{r}"), 6);
        let fork = fork_at(&source, &root, 3, &format!("f{r}"), "f");
        append_n(&source, &fork, 2);
        if r % 5 == 0 {
            let deeper = fork_at(&source, &fork, 4, &format!("g{r}"), "g");
            append_n(&source, &deeper, 1);
        }
    }
    let all = quads(&source);
    assert!(all.len() > 5 * 500, "{} quads: several imports", all.len());
    // Virtuoso refuses a fenced update of this many quads in one request.
    for remote in [common::remote(), common::virtuoso()].into_iter().flatten() {
        let report = source.copy_to(&remote).unwrap();
        assert_eq!(report.sessions.len(), 66, "{}", remote.kind);
        assert_eq!(report.verified, 66);
        assert_eq!(report.quads as usize, all.len(), "each quad counted once");
        assert_eq!(heads(&remote), heads(&source), "{}", remote.kind);
        let back = Store::in_memory().unwrap();
        remote.copy_to(&back).unwrap();
        assert_eq!(quads(&back), all, "{}: every quad came back", remote.kind);
        assert_eq!(
            back.replay(&sid("g25"), None).unwrap(),
            source.replay(&sid("g25"), None).unwrap()
        );
    }
}

#[test]
fn a_copy_refused_part_way_says_what_the_destination_holds() {
    // Virtuoso compiles a fenced update into SQL and refuses one past 10,000 lines:
    // a 500-turn session in one import is past it, a 100-turn one is not.
    let Some(virtuoso) = common::virtuoso() else {
        return;
    };
    let source = Store::in_memory().unwrap();
    session_with(&source, "short", 100);
    session_with(&source, "long", 500);
    let err = source.copy_to(&virtuoso).unwrap_err().to_string();
    assert!(
        err.contains("the copy stopped after 1 of 2 sessions, which the destination now holds"),
        "{}",
        &err[..err.len().min(400)]
    );
    let there: Vec<_> = heads(&virtuoso).into_iter().map(|h| (h.0, h.1)).collect();
    assert_eq!(there, vec![("short".to_string(), 100)]);
}

#[cfg(feature = "rocksdb")]
#[test]
fn the_copy_command_moves_a_directory_store_to_a_server_and_back() {
    let Some(remote) = remote() else { return };
    let url = server_url(&remote);
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let forktrail = |args: &[&std::ffi::OsStr]| {
        let out = Command::new(env!("CARGO_BIN_EXE_forktrail"))
            .args(args)
            .env_remove("FORKTRAIL_STORE")
            .output()
            .unwrap();
        let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
        (out.status.success(), text(out.stdout), text(out.stderr))
    };
    let os = |s: &str| std::ffi::OsString::from(s);
    let (ok, _, err) = forktrail(&[&os("--store"), a.as_os_str(), &os("demo")]);
    assert!(ok, "{err}");
    let (ok, out, err) = forktrail(&[
        &os("copy"),
        &os("--from"),
        a.as_os_str(),
        &os("--to"),
        &os(&url),
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("checked: 4 of 4 sessions"), "{out}");
    let (ok, out, err) = forktrail(&[
        &os("copy"),
        &os("--from"),
        &os(&url),
        &os("--to"),
        b.as_os_str(),
        &os("--json"),
    ]);
    assert!(ok, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["verified"], 4);
    let listing = |store: &std::path::Path| {
        let (ok, out, err) = forktrail(&[
            &os("--store"),
            store.as_os_str(),
            &os("list"),
            &os("--json"),
        ]);
        assert!(ok, "{err}");
        let page: serde_json::Value = serde_json::from_str(&out).unwrap();
        let all = page["sessions"].as_array().unwrap();
        let mut heads: Vec<String> = all
            .iter()
            .map(|s| format!("{} {} {}", s["session"], s["length"], s["head_digest"]))
            .collect();
        heads.sort();
        heads
    };
    let (before, after) = (listing(&a), listing(&b));
    assert_eq!(before.len(), 4);
    assert_eq!(before, after);
    // Copying onto itself, or again into a store that has the sessions, is refused.
    let (ok, _, err) = forktrail(&[
        &os("copy"),
        &os("--from"),
        a.as_os_str(),
        &os("--to"),
        a.as_os_str(),
    ]);
    assert!(!ok && err.contains("the same store"), "{err}");
    let (ok, _, err) = forktrail(&[
        &os("copy"),
        &os("--from"),
        a.as_os_str(),
        &os("--to"),
        b.as_os_str(),
    ]);
    assert!(!ok && err.contains("already exists"), "{err}");
    assert_eq!(listing(&b), before);
}

#[test]
fn a_process_never_replays_what_another_process_appended_deleted_or_replaced() {
    let Some(a) = remote() else { return };
    let b = Store::remote(RemoteConfig::new(a.location())).unwrap();
    let texts = |store: &Store, id: &str| -> Vec<String> {
        let records = store.replay(&sid(id), None).unwrap();
        records.into_iter().map(|r| r.content).collect()
    };
    let s = session_with(&b, "s", 3);
    let first = texts(&a, "s");
    assert_eq!(first.len(), 3);
    // Cached, and checked: the chain, then one request for the digest at its end.
    let mut again = Vec::new();
    assert_eq!(requests(&a, || again = texts(&a, "s")), 2);
    assert_eq!(again, first);

    // Another process appends: the new turn is read, the cached ones are not.
    b.append(&s, NewTurn::new(Role::User, "from b")).unwrap();
    let mut grown = Vec::new();
    assert_eq!(requests(&a, || grown = texts(&a, "s")), 3);
    assert_eq!(grown[..3], first[..]);
    assert_eq!(grown[3], "from b");

    // Another process deletes it and makes a new "s" of the same length.
    b.delete(&s, false).unwrap();
    let s = session_with(&b, "s", 0);
    for i in 0..4 {
        b.append(&s, NewTurn::new(Role::User, format!("new {i}")))
            .unwrap();
    }
    assert_eq!(texts(&a, "s"), ["new 0", "new 1", "new 2", "new 3"]);

    // And deletes it for good.
    b.delete(&s, false).unwrap();
    let err = a.replay(&s, None).unwrap_err();
    assert!(matches!(err, Error::SessionNotFound { .. }), "{err}");
}

#[test]
fn virtuoso_takes_writes_through_sparql_auth_with_digest_credentials() {
    let Some(v) = virtuoso() else { return };
    let auth_url = v.location().replace("/sparql", "/sparql-auth");
    let login = |password: &str| {
        let auth = forktrail::RemoteAuth::Password("dba".into(), password.into());
        Store::remote(RemoteConfig::new(auth_url.clone()).with_auth(auth)).unwrap()
    };
    // A wrong password: refused, named as credentials, nothing written.
    let err = login("wrong").create_session(forktrail::NewSession {
        id: Some("x".into()),
        ..Default::default()
    });
    let err = err.unwrap_err();
    assert!(err.to_string().contains("credentials"), "{err}");
    assert!(!v.exists(&sid("x")).unwrap());
    // The right one: Digest, learnt from the first 401 and then sent with every request.
    let s = login("dba");
    let id = session_with(&s, "d", 2);
    assert_eq!(v.replay(&id, None).unwrap().len(), 2);
    let n = requests(&s, || {
        s.append(&id, NewTurn::new(Role::User, "more")).unwrap();
    });
    // Lease 2, facts 1, previous digest 1, fenced commit 1, its receipt 1.
    assert_eq!(n, 6, "no further challenges once the nonce is known");
}

/// A TCP relay on 127.0.0.1 to `port` that holds the first request carrying `marker`
/// until `release` is sent, and says on `held` when it holds it: a commit delayed by a
/// stalled writer or a slow network, past its lease.
struct HoldingRelay {
    port: u16,
    held: std::sync::mpsc::Receiver<()>,
    release: std::sync::mpsc::Sender<()>,
}

impl HoldingRelay {
    fn start(target: u16, marker: &'static [u8]) -> Self {
        use std::io::{Read, Write};
        use std::sync::{Arc, Mutex};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (held_tx, held) = std::sync::mpsc::channel();
        let (release, release_rx) = std::sync::mpsc::channel::<()>();
        // Taken by the connection that meets the marker first.
        let gate = Arc::new(Mutex::new(Some((held_tx, release_rx))));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(mut client) = client else { return };
                let Ok(mut server) = std::net::TcpStream::connect(("127.0.0.1", target)) else {
                    return;
                };
                let (mut client_out, mut server_in) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || std::io::copy(&mut server_in, &mut client_out));
                let gate = Arc::clone(&gate);
                std::thread::spawn(move || {
                    let mut seen: Vec<u8> = Vec::new();
                    let mut buf = [0u8; 65536];
                    loop {
                        let n = match client.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        seen.extend_from_slice(&buf[..n]);
                        if seen.windows(marker.len()).any(|w| w == marker) {
                            if let Some((held_tx, release_rx)) = gate.lock().unwrap().take() {
                                held_tx.send(()).unwrap();
                                let _ = release_rx.recv();
                            }
                            seen.clear();
                        }
                        let keep = seen.len().saturating_sub(marker.len());
                        seen.drain(..keep);
                        if server.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Self {
            port,
            held,
            release,
        }
    }
}

#[test]
fn a_writer_whose_lease_lapsed_before_its_commit_arrived_commits_nothing() {
    let Some(server) = remote() else { return };
    let url = server_url(&server);
    let target: u16 = url
        .trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let ttl = Duration::from_secs(1);
    let b = Store::remote(RemoteConfig::new(url.clone()))
        .unwrap()
        .with_lease_ttl(ttl);
    let root = session_with(&b, "s", 1);
    // Each write of the stalled writer A: an append, and a fork taking label "x".
    type Write = fn(&Store, &forktrail::SessionId, &str) -> Result<String, Error>;
    let append: Write = |s, id, text| {
        s.append(id, NewTurn::new(Role::User, text))
            .map(|i| i.to_string())
    };
    let fork: Write = |s, id, text| {
        let options = ForkOptions {
            label: Some("x".into()),
            reason: Some(text.into()),
            ..ForkOptions::default()
        };
        s.fork(id, options).map(|p| p.branch.to_string())
    };
    for (what, write) in [("append", append), ("fork", fork)] {
        let relay = HoldingRelay::start(target, b"stalled-writer-marker");
        let a = Store::remote(RemoteConfig::new(
            url.replace(&format!(":{target}/"), &format!(":{}/", relay.port)),
        ))
        .unwrap()
        .with_lease_ttl(ttl);
        let id = root.clone();
        let writer_a = std::thread::spawn(move || write(&a, &id, "stalled-writer-marker"));
        // A's commit is on its way, held past A's lease.
        relay.held.recv_timeout(Duration::from_secs(60)).unwrap();
        // B waits for A's lease to lapse, then writes the same index or label.
        let by_b = write(&b, &root, "the other writer").unwrap();
        relay.release.send(()).unwrap();
        let err = writer_a.join().unwrap().unwrap_err();
        assert!(
            matches!(&err, Error::Conflict(m) if m.contains("lease lapsed")),
            "{what}: {err}"
        );
        let marker = count(
            &b,
            "SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o FILTER(CONTAINS(STR(?o), \"stalled-writer\")) } }",
        );
        assert_eq!(marker, 0, "{what}: nothing of A's write is in the store");
        match what {
            "append" => {
                assert_eq!(by_b, "1");
                let turns = b.replay(&root, None).unwrap();
                assert_eq!(turns.len(), 2);
                assert_eq!(turns[1].content, "the other writer");
            }
            _ => {
                assert_eq!(by_b, "x");
                let labels: Vec<String> = b
                    .branches(&root)
                    .unwrap()
                    .into_iter()
                    .map(|c| c.branch.to_string())
                    .collect();
                assert_eq!(labels, ["x"], "one child labelled x");
            }
        }
        let report = b.verify(None).unwrap();
        assert!(report.is_clean(), "{what}: {:?}", report.problems);
    }
}

/// Two `forktrail serve` on one shared store, each with its own catalog: a session
/// created, appended to and forked through one is listed, found and replayed through the
/// other on its very next request (the other follows the store's change feed).
#[cfg(feature = "server")]
#[test]
fn a_write_through_one_server_is_listed_found_and_replayed_through_the_other() {
    use forktrail::server::ServerConfig;
    use serde_json::{json, Value};
    use std::sync::Arc;
    let token = "two-servers-token";
    for (writer, reader) in shared_pairs() {
        let config = || ServerConfig {
            token: Some(token.into()),
            ..ServerConfig::default()
        };
        let reader = common::server::Server::start(Arc::new(reader), config());
        let writer_store = Arc::new(Store::remote(RemoteConfig::new(writer.location())).unwrap());
        let writer_http = common::server::Server::start(writer_store, config());
        let json = |r: reqwest::blocking::Response| -> Value {
            assert!(r.status().is_success(), "{}", r.status());
            r.json().unwrap()
        };
        // The reader's catalog exists before the writes.
        let before = json(reader.get("/sessions", "application/json"));
        assert_eq!(before["total"], 0, "{}", writer.kind);
        let created = json(writer_http.post_json("/sessions", Some(token), json!({})));
        let id = created["session"].as_str().unwrap().to_string();
        for text in ["the tamarillo question", "the tamarillo answer"] {
            json(writer_http.post_json(
                &format!("/sessions/{id}/turns"),
                Some(token),
                json!({"role": "user", "content": text}),
            ));
        }
        let fork = json(writer_http.post_json(
            &format!("/sessions/{id}/fork"),
            Some(token),
            json!({"at": 1, "label": "elsewhere"}),
        ));
        let fork_id = fork["session"].as_str().unwrap().to_string();
        json(writer_http.post_json(
            &format!("/sessions/{fork_id}/turns"),
            Some(token),
            json!({"role": "assistant", "content": "a feijoa instead"}),
        ));
        let listed = json(reader.get("/sessions", "application/json"));
        let ids: Vec<&str> = listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["session"].as_str().unwrap())
            .collect();
        assert_eq!(
            ids,
            [fork_id.as_str(), id.as_str()],
            "{}: newest first",
            writer.kind
        );
        assert_eq!(listed["sessions"][1]["forks"], 1, "{}", writer.kind);
        let found = json(reader.get("/search?q=feijoa", "application/json"));
        assert_eq!(
            found["hits"][0]["session"],
            fork_id.as_str(),
            "{}",
            writer.kind
        );
        let replay = json(reader.get(&format!("/sessions/{fork_id}/replay"), "application/json"));
        let contents: Vec<&str> = replay
            .as_array()
            .or_else(|| replay["records"].as_array())
            .unwrap()
            .iter()
            .map(|r| r["content"].as_str().unwrap())
            .collect();
        assert_eq!(
            contents,
            ["the tamarillo question", "a feijoa instead"],
            "{}",
            writer.kind
        );
    }
}

/// A shared store's catalog kept on disk between processes (as the CLI keeps it): the
/// next process follows the change feed from where the last one left it, seeing what
/// others wrote meanwhile, instead of reading the whole store; one whose notes are too
/// old or unreadable rebuilds; a directory in use is left to its process.
#[test]
fn a_catalog_kept_on_disk_is_followed_on_by_the_next_process_or_rebuilt_when_too_old() {
    use forktrail::{NewSession, SessionQuery};
    let Some(server) = OxigraphServer::start() else {
        return;
    };
    let url = server.query_url();
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        Store::remote(RemoteConfig::new(url.clone()))
            .unwrap()
            .with_catalog_dir(dir.path())
            .unwrap()
    };
    let other = Store::remote(RemoteConfig::new(url.clone())).unwrap();
    for _ in 0..30 {
        let id = other.create_session(NewSession::default()).unwrap();
        other
            .append(&id, NewTurn::new(Role::User, "a turn"))
            .unwrap();
    }
    let listed = |s: &Store| s.sessions(&SessionQuery::default()).unwrap();
    assert_eq!(listed(&open()).total, 30);
    // Meanwhile another process writes, and a session is written behind forktrail's
    // back (no change feed entry): followed on, the catalog lists the first only.
    let late = other.create_session(NewSession::default()).unwrap();
    let behind = "urn:forktrail:session:written-behind";
    let update = format!(
        "PREFIX ft: <https://w3id.org/forktrail/ns#> PREFIX prov: <http://www.w3.org/ns/prov#> \
         INSERT DATA {{ GRAPH <{behind}> {{ <{behind}> a ft:Session, prov:Entity ; \
         ft:sessionId \"written-behind\" ; ft:branch \"main\" ; ft:forkDepth 0 ; \
         ft:forkRoot <{behind}> ; prov:wasAttributedTo <urn:forktrail:agent:anonymous> ; \
         <http://purl.org/dc/terms/created> \"2026-01-01T00:00:00.000Z\"^^<http://www.w3.org/2001/XMLSchema#dateTime> }} }}"
    );
    ureq::post(&url.replace("/query", "/update"))
        .send_form(&[("update", update.as_str())])
        .unwrap();
    let s = open();
    // Busy: a second process on the same directory keeps its catalog in memory (built
    // from the store, so it lists both).
    let busy = open();
    assert_eq!(listed(&busy).total, 32);
    drop(busy);
    let page = listed(&s);
    assert_eq!(
        page.total, 31,
        "followed on: the feed's session, not the other"
    );
    assert_eq!(page.sessions[0].session, late);
    drop(s);
    // Notes older than the feed keeps: rebuilt from the store, which lists both.
    let notes = dir.path().join("feed.json");
    let mut noted: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&notes).unwrap()).unwrap();
    noted["synced_ms"] = (noted["synced_ms"].as_i64().unwrap() - 3_600_000).into();
    std::fs::write(&notes, noted.to_string()).unwrap();
    assert_eq!(listed(&open()).total, 32, "too old: rebuilt from the store");
    // Unreadable notes: rebuilt too (a session written behind again shows it).
    let again = update.replace("written-behind", "written-behind-again");
    ureq::post(&url.replace("/query", "/update"))
        .send_form(&[("update", again.as_str())])
        .unwrap();
    std::fs::write(&notes, "{").unwrap();
    assert_eq!(
        listed(&open()).total,
        33,
        "unreadable: rebuilt from the store"
    );
}

/// A store that cuts every answer at 1,000 rows without a word (Virtuoso's
/// `ResultSetMaxRows`): a new process's catalog of 1,100 sessions, built from it in
/// requests of bounded rows, lists every session at its length and finds every turn.
#[test]
fn a_catalog_is_built_whole_from_a_store_that_cuts_answers_at_a_thousand_rows() {
    use forktrail::{NewSession, SearchQuery, SessionQuery};
    let Some(server) = Virtuoso::start_answering(1_000) else {
        return;
    };
    let writer = Store::remote(RemoteConfig::new(server.query_url())).unwrap();
    // Six turns each: 24 rows of turns a session, so 50 sessions' turns are cut.
    let sessions = (0..1_100).map(|n| {
        let turns = (0..6)
            .map(|i| NewTurn::new(Role::User, format!("session{n} turn{i} quokka{n}x{i}")))
            .collect();
        (NewSession::default(), turns)
    });
    let ids = writer.import_sessions(sessions).unwrap();
    let reader = Store::remote(RemoteConfig::new(server.query_url())).unwrap();
    let page = reader
        .sessions(&SessionQuery {
            limit: Some(1_000),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(page.total, 1_100, "every session listed");
    assert!(page.sessions.iter().all(|s| s.length == 6), "at its length");
    for n in [0, 549, 1_099] {
        let hits = reader
            .search(&SearchQuery {
                text: format!("quokka{n}x5"),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(hits.hits.len(), 1, "the last turn of session {n} found");
        assert_eq!(hits.hits[0].session, ids[n]);
    }
}
