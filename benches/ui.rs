//! Render times of the web UI on the embedded store (RocksDB; in memory without the
//! `rocksdb` feature): the tree of a 1,000-branch family (folded, searched, with user
//! turns listed) and of a 300-branch one (each drawn as SVG above its outline), the playback of a 5,000-turn session (first and last page), and the
//! whole 5,000-turn session as one `export --format html` file. Each page is asked for
//! over loopback HTTP from `forktrail serve` in this process; the figure is the median
//! (and slowest) of the timed requests after one warm-up, body read in full.
//!
//! `cargo bench --bench ui`; `FORKTRAIL_BENCH_QUICK=1` (or `cargo test --benches`) times
//! fewer requests.

use forktrail::server::{serve, ServerConfig};
use forktrail::{ForkOptions, NewSession, NewTurn, Role, SessionId, Store};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BRANCHES: usize = 1000;
const LONG: usize = 5000;

fn turn(i: usize) -> NewTurn {
    let role = if i.is_multiple_of(2) {
        Role::User
    } else {
        Role::Assistant
    };
    let text = format!(
        "Turn {i}: a paragraph of ordinary length, as agents write them, with a few \
         words more so the page has some weight. ```\nlet x = {i};\n```"
    );
    let t = NewTurn::new(role, text);
    if role == Role::Assistant {
        t.model(if i.is_multiple_of(3) {
            "model-a"
        } else {
            "model-b"
        })
    } else {
        t
    }
}

/// A root of 20 turns and `branches` forks below it, each of 2 own turns: every fork's
/// parent is one of the sessions made before it, so the tree is wide and deep.
fn family(store: &Store, branches: usize) -> SessionId {
    let root = store
        .create_session(NewSession {
            title: Some(format!("a {branches}-branch family")),
            ..Default::default()
        })
        .unwrap();
    for i in 0..20 {
        store.append(&root, turn(i)).unwrap();
    }
    let mut sessions = vec![(root.clone(), 20u64, 0usize)];
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for b in 0..branches {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        // Parents are picked among sessions not too deep (the depth limit is 32).
        let (parent, length, depth) = loop {
            let pick = &sessions[(seed as usize) % sessions.len()];
            if pick.2 < 12 {
                break pick.clone();
            }
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        };
        let at = 1 + seed % length;
        let fork = store
            .fork(
                &parent,
                ForkOptions {
                    at: Some(at),
                    label: Some(format!("branch-{b}")),
                    ..Default::default()
                },
            )
            .unwrap()
            .session;
        store.append(&fork, turn(at as usize)).unwrap();
        store.append(&fork, turn(at as usize + 1)).unwrap();
        sessions.push((fork, at + 2, depth + 1));
    }
    root
}

fn timed(http: &reqwest::blocking::Client, url: &str, rounds: usize) -> (f64, f64, usize) {
    let fetch = || {
        let r = http.get(url).send().unwrap();
        assert_eq!(r.status(), 200, "{url}");
        r.bytes().unwrap().len()
    };
    let bytes = fetch(); // warm-up
    let mut times: Vec<Duration> = (0..rounds)
        .map(|_| {
            let started = Instant::now();
            fetch();
            started.elapsed()
        })
        .collect();
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (
        ms(times[times.len() / 2]),
        ms(times[times.len() - 1]),
        bytes,
    )
}

fn main() {
    let quick = std::env::var_os("FORKTRAIL_BENCH_QUICK").is_some()
        || !std::env::args().any(|a| a == "--bench");
    let rounds = if quick { 3 } else { 15 };
    #[cfg(feature = "rocksdb")]
    let dir = tempfile::tempdir().unwrap();
    #[cfg(feature = "rocksdb")]
    let (store, kind) = (Store::open(dir.path().join("store")).unwrap(), "rocksdb");
    #[cfg(not(feature = "rocksdb"))]
    let (store, kind) = (Store::in_memory().unwrap(), "memory");
    let built = Instant::now();
    let root = family(&store, BRANCHES);
    let small = family(&store, 300);
    let long = store.create_session(NewSession::default()).unwrap();
    for i in 0..LONG {
        store.append(&long, turn(i)).unwrap();
    }
    eprintln!(
        "built {BRANCHES} branches and a {LONG}-turn session on {kind} in {:.1?}",
        built.elapsed()
    );
    let store = Arc::new(store);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(serve(
                store,
                ServerConfig {
                    bind: "127.0.0.1:0".parse().unwrap(),
                    ..ServerConfig::default()
                },
                move |addr| tx.send(addr).unwrap(),
            ))
            .unwrap()
    });
    let base = format!("http://{}", rx.recv().unwrap());
    let http = reqwest::blocking::Client::new();
    let pages = [
        ("tree, 1,001 sessions", format!("/ui/sessions/{root}/tree")),
        (
            "tree, 301 sessions (drawn and outlined)",
            format!("/ui/sessions/{small}/tree"),
        ),
        (
            "tree, searched (unfolds matches)",
            format!("/ui/sessions/{root}/tree?q=branch-99"),
        ),
        (
            "tree, user turns only",
            format!("/ui/sessions/{root}/tree?turns=user"),
        ),
        (
            "playback of the root (fork pagers)",
            format!("/ui/sessions/{root}"),
        ),
        (
            "playback, 5,000 turns: first page",
            format!("/ui/sessions/{long}"),
        ),
        (
            "playback, 5,000 turns: last page",
            format!("/ui/sessions/{long}?from=4800"),
        ),
        (
            "export --format html, 5,000 turns",
            format!("/sessions/{long}/export?format=html"),
        ),
    ];
    println!("| page ({kind}) | median | slowest | size |");
    println!("| --- | --- | --- | --- |");
    for (name, path) in pages {
        let (median, slowest, bytes) = timed(&http, &format!("{base}{path}"), rounds);
        println!(
            "| {name} | {median:.1} ms | {slowest:.1} ms | {:.0} KiB |",
            bytes as f64 / 1024.0
        );
    }
}
