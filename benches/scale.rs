//! A store that stays fast at a million sessions: the curve at 10k, 100k and 1M.
//!
//! Builds, on RocksDB, 1,000,000 sessions and about 5,000,000 turns through the bulk
//! path (`Store::import_sessions`, batches of 5,000 roots; a fifth of the sessions are
//! forks, made with `fork` and given their own turns with `append_many`): short and long
//! sessions, 8 models, 50 principals, texts of ~25 words from a 4,000-word vocabulary,
//! one turn in a thousand holding the word "zanzibar". At 10k, 100k and 1M sessions it
//! measures, medians of 5 after a warm-up:
//!
//! - in the library: the first page of sessions, a late page (50,000 sessions in, or
//!   half the store), filtered pages (principal, model, roots, a parent's children, a
//!   family), search (a common word, a rare word, a phrase), replay, tree and show of
//!   one fork (medians of 21 after 0.1 s of warm-up; right after the ingest, and again
//!   two minutes after it, once RocksDB's compactions have caught up: `*_settled_ms`),
//!   and each shipped audit in `queries/` (once; one that took over 6 s is not run
//!   again at the next size, ten times larger);
//! - from `forktrail serve` started on the store (release binary): the time from its
//!   start to its first `/sessions` page, `GET /sessions` first and late pages,
//!   `GET /search`, the web UI's sessions page and a search page, and its RSS idle;
//! - the ingest's RSS (this process: peak and after), and disk per turn with the
//!   record index's and the catalog's share;
//! - at the largest size, a writer killed with SIGKILL mid-ingest, then the time to the
//!   first page of the next open.
//!
//! `make bench-scale` (not in `.ci/run`: the 1M stage takes a while and ~20 GB of disk).
//! `FORKTRAIL_SCALE_SESSIONS` sets the largest size (default 1,000,000);
//! `FORKTRAIL_SCALE_DIR` where the store goes (default: a temp dir); `FORKTRAIL_BENCH_JSON=1`
//! prints one JSON object. `FORKTRAIL_SCALE_WRITER=DIR` only grows a store in DIR until
//! killed (noting its RSS); `FORKTRAIL_SCALE_PROBE=DIR` times tree, show and replay of a
//! depth-3 fork of such a store, three times a minute apart.

use forktrail::{
    ForkOptions, NamedQuery, NewSession, NewTurn, Role, SearchQuery, SessionId, SessionOrder,
    SessionQuery, Store,
};
use oxigraph::model::{Literal, Term};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The allocator the `forktrail` binary runs on (see its `main.rs`).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BATCH: usize = 5000;
/// How long after an ingest the one-session reads are timed again.
const SETTLE: Duration = Duration::from_secs(120);
const MODELS: usize = 8;
const PRINCIPALS: usize = 50;

/// A deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A pseudo-word for vocabulary slot `n`: the same at every run.
fn word(n: usize) -> String {
    const SYLLABLES: [&str; 16] = [
        "ka", "to", "ri", "mo", "sen", "la", "vi", "dor", "pe", "nu", "sha", "gel", "tu", "ba",
        "fi", "ron",
    ];
    let mut out = String::new();
    let mut n = n + 17;
    while n > 0 {
        out.push_str(SYLLABLES[n % 16]);
        n /= 16;
    }
    out
}

struct Corpus {
    words: Vec<String>,
    rng: Rng,
    turns: u64,
}

impl Corpus {
    fn text(&mut self) -> String {
        let n = 18 + self.rng.below(16);
        let mut words: Vec<&str> = (0..n)
            .map(|_| {
                // Zipf-ish: low slots far more often.
                let r = self.rng.below(self.words.len());
                let slot = r * r / self.words.len();
                self.words[slot].as_str()
            })
            .collect();
        self.turns += 1;
        if self.turns.is_multiple_of(1000) {
            words[3] = "zanzibar";
        }
        words.join(" ")
    }

    fn turns(&mut self, n: usize, model: &str) -> Vec<NewTurn> {
        (0..n)
            .map(|i| {
                if i % 2 == 0 {
                    NewTurn::new(Role::User, self.text())
                } else {
                    NewTurn::new(Role::Assistant, self.text()).model(model)
                }
            })
            .collect()
    }
}

/// What the built store holds, for the measurements.
#[derive(Default)]
struct Built {
    sessions: usize,
    turns: u64,
    roots: Vec<(SessionId, u64)>,
    /// A fork with a parent chain, and a root (with its length) with many children.
    probe_fork: Option<SessionId>,
    /// The root of the probe fork's family, which stays small as the store grows.
    probe_root: Option<SessionId>,
    wide_parent: Option<(SessionId, u64)>,
}

/// Grows the store to `target` sessions: batches of roots through the bulk loader,
/// then a fifth of sessions as forks.
fn grow(store: &Store, built: &mut Built, corpus: &mut Corpus, target: usize) {
    let started = Instant::now();
    let mut last_note = Instant::now();
    while built.sessions < target {
        let roots_now = BATCH.min((target - built.sessions) * 4 / 5).max(1);
        let batch: Vec<(NewSession, Vec<NewTurn>)> = (0..roots_now)
            .map(|_| {
                let long = corpus.rng.below(10) == 0;
                let n = if long { 20 } else { 2 + corpus.rng.below(5) };
                let model = format!("model-{}", corpus.rng.below(MODELS));
                let principal = format!("user-{}", corpus.rng.below(PRINCIPALS));
                let session = NewSession {
                    principal: Some(principal),
                    ..Default::default()
                };
                (session, corpus.turns(n, &model))
            })
            .collect();
        let lengths: Vec<u64> = batch.iter().map(|(_, t)| t.len() as u64).collect();
        built.turns += lengths.iter().sum::<u64>();
        let ids = store.import_sessions(batch).unwrap();
        built.sessions += ids.len();
        built.roots.extend(ids.into_iter().zip(lengths));
        // A fifth of all sessions are forks: one for every four roots.
        let forks = (roots_now / 4).min(target.saturating_sub(built.sessions));
        for f in 0..forks {
            let (parent, length) = match (&built.wide_parent, f % 50) {
                // One root collects many children.
                (Some(wide), 0) => wide.clone(),
                _ => built.roots[corpus.rng.below(built.roots.len())].clone(),
            };
            let at = 1 + corpus.rng.below(length as usize) as u64;
            let fork = store
                .fork(
                    &parent,
                    ForkOptions {
                        at: Some(at.min(length)),
                        ..Default::default()
                    },
                )
                .unwrap()
                .session;
            let model = format!("model-{}", corpus.rng.below(MODELS));
            let own = 1 + corpus.rng.below(4);
            let turns = corpus.turns(own, &model);
            built.turns += own as u64;
            store.append_many(&fork, turns).unwrap();
            built.sessions += 1;
            if built.probe_fork.is_none() {
                built.probe_root = Some(parent.clone());
                // A fork of a fork of a fork: replay walks a chain.
                let mut chain = fork.clone();
                for _ in 0..3 {
                    let next = store.fork(&chain, ForkOptions::default()).unwrap().session;
                    store
                        .append(&next, NewTurn::new(Role::User, corpus.text()))
                        .unwrap();
                    built.turns += 1;
                    built.sessions += 1;
                    chain = next;
                }
                built.probe_fork = Some(chain);
            }
        }
        if built.wide_parent.is_none() {
            built.wide_parent = Some(built.roots[0].clone());
        }
        if last_note.elapsed() > Duration::from_secs(30) {
            last_note = Instant::now();
            let (anon, file) = rss_split(std::process::id());
            eprintln!(
                "  … {} sessions, {} turns, {:.0?} in; RSS {} MB (heap {anon}, files {file})",
                built.sessions,
                built.turns,
                started.elapsed(),
                rss_mb(std::process::id()).0
            );
        }
    }
}

/// Median of `rounds` timings of `f` after one warm-up, in milliseconds.
fn median_ms<T>(rounds: usize, mut f: impl FnMut() -> T) -> f64 {
    std::hint::black_box(f());
    let mut times: Vec<f64> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Field `name` (`VmRSS:`, …) of process `pid`'s status, in MB.
fn status_mb(pid: u32, name: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

/// (VmRSS, VmHWM) of process `pid`, in MB.
fn rss_mb(pid: u32) -> (u64, u64) {
    (status_mb(pid, "VmRSS:"), status_mb(pid, "VmHWM:"))
}

/// (RssAnon, RssFile) of process `pid`, in MB.
fn rss_split(pid: u32) -> (u64, u64) {
    (status_mb(pid, "RssAnon:"), status_mb(pid, "RssFile:"))
}

/// A cursor `depth` sessions into the store (by creation), for a late page.
fn late_cursor(store: &Store, depth: usize) -> Option<String> {
    let mut cursor = None;
    let mut seen = 0;
    while seen < depth {
        let page = store
            .sessions(&SessionQuery {
                limit: Some(1000),
                cursor: cursor.clone(),
                order: SessionOrder::Created,
                ..Default::default()
            })
            .unwrap();
        seen += page.sessions.len();
        cursor = page.next;
        cursor.as_ref()?;
    }
    cursor
}

/// Each shipped audit with the inputs it expects, bound from the store.
fn audits(built: &Built) -> Vec<(&'static str, Vec<(&'static str, Term)>)> {
    // A family that stays small: the wide parent's grows with the store.
    let root = built.probe_root.clone().unwrap().to_string();
    let fork = built.probe_fork.clone().unwrap().to_string();
    let lit = |s: &str| Term::from(Literal::new_simple_literal(s));
    vec![
        ("fork-chain", vec![("id", lit(&fork))]),
        ("children", vec![("id", lit(&root))]),
        ("subtree", vec![("id", lit(&root))]),
        ("audit-descendants", vec![("id", lit(&root))]),
        (
            "audit-turn-origin",
            vec![("id", lit(&fork)), ("at", Literal::from(1u64).into())],
        ),
        ("family-turns", vec![("root", lit(&root))]),
        ("audit-turns-by-model", vec![("model", lit("model-3"))]),
        ("turns-per-model", vec![]),
        ("session-activity", vec![]),
        ("search-turns", vec![("text", lit("zanzibar"))]),
        ("sessions", vec![]),
    ]
}

fn run_audit(store: &Store, name: &str, bindings: &[(&str, Term)]) -> (f64, usize) {
    let query = NamedQuery::find(name).unwrap_or_else(|| panic!("no query {name}"));
    let t = Instant::now();
    let rows = match store.query_named(&query, bindings).unwrap() {
        oxigraph::sparql::QueryResults::Solutions(rows) => rows.count(),
        _ => 0,
    };
    (t.elapsed().as_secs_f64() * 1e3, rows)
}

/// `forktrail serve` on the store, on a free port; killed when dropped.
struct Server {
    child: Child,
    base: String,
    /// From spawn to its first `/sessions` page answered.
    first_page_ms: f64,
}

impl Server {
    fn start(dir: &Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let started = Instant::now();
        let child = Command::new(env!("CARGO_BIN_EXE_forktrail"))
            .args(["--store"])
            .arg(dir)
            .args(["serve", "--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::blocking::Client::new();
        loop {
            if let Ok(r) = http.get(format!("{base}/sessions")).send() {
                if r.status().is_success() {
                    break;
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "serve did not answer"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Self {
            child,
            base,
            first_page_ms: started.elapsed().as_secs_f64() * 1e3,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGTERM first: the server closes the store (flushing it) on the way out.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_ms(http: &reqwest::blocking::Client, url: &str) -> f64 {
    median_ms(5, || {
        let r = http.get(url).send().unwrap();
        assert!(r.status().is_success(), "{url}: {}", r.status());
        r.bytes().unwrap().len()
    })
}

/// Measures the store at its current size.
fn measure(dir: &Path, store: &Store, built: &Built) -> BTreeMap<String, Value> {
    let mut m = BTreeMap::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_string(), v);
    };
    put("sessions", json!(built.sessions));
    put("turns", json!(built.turns));
    let page = |q: SessionQuery| move || store.sessions(&q).unwrap();
    put(
        "page_first_ms",
        json!(median_ms(5, page(SessionQuery::default()))),
    );
    let late = late_cursor(store, 50_000.min(built.sessions / 2));
    put(
        "page_late_ms",
        json!(median_ms(
            5,
            page(SessionQuery {
                cursor: late.clone(),
                order: SessionOrder::Created,
                ..Default::default()
            })
        )),
    );
    let filters = [
        (
            "principal",
            SessionQuery {
                principal: Some("user-7".into()),
                ..Default::default()
            },
        ),
        (
            "model",
            SessionQuery {
                model: Some("model-3".into()),
                ..Default::default()
            },
        ),
        (
            "roots",
            SessionQuery {
                roots: true,
                ..Default::default()
            },
        ),
        (
            "parent",
            SessionQuery {
                parent: built.wide_parent.as_ref().map(|w| w.0.to_string()),
                ..Default::default()
            },
        ),
        (
            "family",
            SessionQuery {
                family: built.probe_fork.as_ref().map(ToString::to_string),
                ..Default::default()
            },
        ),
    ];
    for (name, q) in filters {
        put(&format!("page_{name}_ms"), json!(median_ms(5, page(q))));
    }
    for (name, text) in [
        ("common", word(0)),
        ("rare", "zanzibar".to_string()),
        ("phrase", format!("\"{} {}\"", word(0), word(1))),
    ] {
        let q = SearchQuery {
            text: text.clone(),
            limit: Some(20),
            ..Default::default()
        };
        put(
            &format!("search_{name}_ms"),
            json!(median_ms(5, || store.search(&q).unwrap())),
        );
        put(
            &format!("search_{name}_hits"),
            json!(store.search(&q).unwrap().total),
        );
    }
    for (k, v) in chain_reads(store, built, "") {
        put(&k, v);
    }
    // The tree of the wide parent's family, which gains a child every 50 forks.
    if let Some((wide, _)) = &built.wide_parent {
        let tree = store.tree(wide).unwrap();
        put("tree_wide_children", json!(tree.children.len()));
        put(
            "tree_wide_ms",
            json!(median_ms(5, || store.tree(wide).unwrap())),
        );
    }
    let (rss, peak) = rss_mb(std::process::id());
    put("ingest_rss_mb", json!(rss));
    put("ingest_peak_rss_mb", json!(peak));
    // What the RSS is: heap (anonymous) or mapped files (the catalog's segments).
    let (anon, file) = rss_split(std::process::id());
    put("ingest_rss_anon_mb", json!(anon));
    put("ingest_rss_file_mb", json!(file));
    store.flush().unwrap();
    let disk = store.disk_bytes().unwrap_or(0);
    let (records, catalog) = store.derived_bytes().unwrap_or((0, 0));
    let per = |b: u64| b as f64 / built.turns as f64;
    put("disk_bytes_per_turn", json!(per(disk)));
    put("rdf_bytes_per_turn", json!(per(disk - records - catalog)));
    put("records_bytes_per_turn", json!(per(records)));
    put("catalog_bytes_per_turn", json!(per(catalog)));
    let _ = dir;
    m
}

/// Replay, tree (of the probe fork's family: a handful of sessions at every size) and
/// show of the depth-3 probe fork, as `replay{suffix}_ms` and so on.
fn chain_reads(store: &Store, built: &Built, suffix: &str) -> BTreeMap<String, Value> {
    let fork = built.probe_fork.clone().unwrap();
    let mut m = BTreeMap::new();
    let mut put = |k: &str, v: f64| m.insert(format!("{k}{suffix}_ms"), json!(v));
    put(
        "replay",
        warm_median_ms(|| store.replay(&fork, None).unwrap()),
    );
    put("tree", warm_median_ms(|| store.tree(&fork).unwrap()));
    put("show", warm_median_ms(|| store.info(&fork).unwrap()));
    m
}

/// The median of 21 runs of `f` after a tenth of a second of it: for reads of
/// microseconds, whose median of a few would be of a cold cache and a core just woken.
fn warm_median_ms<T>(mut f: impl FnMut() -> T) -> f64 {
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(100) {
        std::hint::black_box(f());
    }
    median_ms(21, f)
}

fn audit_figures(
    store: &Store,
    built: &Built,
    skip: &mut BTreeMap<&'static str, f64>,
) -> BTreeMap<String, Value> {
    let mut m = BTreeMap::new();
    for (name, bindings) in audits(built) {
        if let Some(took) = skip.get(name) {
            m.insert(
                format!("audit_{name}"),
                json!(format!("skipped ({took:.0} ms at the size before)")),
            );
            continue;
        }
        let (ms, rows) = run_audit(store, name, &bindings);
        // At ten times the sessions, an audit that grows at least linearly would take
        // over a minute: it is not run again.
        if ms > 6_000.0 {
            skip.insert(name, ms);
        }
        m.insert(format!("audit_{name}"), json!({"ms": ms, "rows": rows}));
    }
    m
}

/// Measures what `forktrail serve` answers on the store (which this process has
/// closed).
fn measure_server(dir: &Path, late: Option<String>) -> BTreeMap<String, Value> {
    let server = Server::start(dir);
    let http = reqwest::blocking::Client::new();
    let base = &server.base;
    let mut m = BTreeMap::new();
    m.insert("serve_first_page_ms".into(), json!(server.first_page_ms));
    m.insert(
        "rest_page_first_ms".into(),
        json!(http_ms(&http, &format!("{base}/sessions"))),
    );
    if let Some(late) = late {
        m.insert(
            "rest_page_late_ms".into(),
            json!(http_ms(
                &http,
                &format!("{base}/sessions?order=created&cursor={late}")
            )),
        );
    }
    m.insert(
        "rest_search_ms".into(),
        json!(http_ms(
            &http,
            &format!("{base}/search?q=zanzibar&limit=20")
        )),
    );
    m.insert(
        "ui_sessions_ms".into(),
        json!(http_ms(&http, &format!("{base}/"))),
    );
    m.insert(
        "ui_search_ms".into(),
        json!(http_ms(&http, &format!("{base}/?q=zanzibar"))),
    );
    std::thread::sleep(Duration::from_secs(3));
    m.insert(
        "server_idle_rss_mb".into(),
        json!(rss_mb(server.child.id()).0),
    );
    m
}

/// The writer a kill interrupts: imports batches into the store until killed.
fn writer(dir: &Path) {
    let store = Store::open(dir).unwrap();
    let mut corpus = Corpus {
        words: (0..4000).map(word).collect(),
        rng: Rng(0x9e37_79b9_7f4a_7c15),
        turns: 0,
    };
    println!("READY");
    // Grows until killed (noting its RSS every 30 s).
    grow(&store, &mut Built::default(), &mut corpus, usize::MAX / 8);
}

/// Times tree, show and replay of a depth-3 fork of an existing store, now and after
/// its background compactions had two minutes.
fn probe(dir: &Path) {
    let store = Store::open(dir).unwrap();
    let rows = store
        .query(
            "SELECT ?id WHERE { ?s <https://w3id.org/forktrail/ns#forkDepth> 3 ; \
             <https://w3id.org/forktrail/ns#sessionId> ?id } LIMIT 1",
            &[],
        )
        .unwrap();
    let oxigraph::sparql::QueryResults::Solutions(mut rows) = rows else {
        panic!("not a SELECT")
    };
    let row = rows.next().unwrap().unwrap();
    let Some(Term::Literal(id)) = row.get("id") else {
        panic!("no depth-3 fork")
    };
    let fork: SessionId = id.value().parse().unwrap();
    for round in 0..3 {
        let tree = median_ms(21, || store.tree(&fork).unwrap());
        let show = median_ms(21, || store.info(&fork).unwrap());
        let replay = median_ms(21, || store.replay(&fork, None).unwrap());
        eprintln!("round {round}: tree {tree:.4} ms, show {show:.4} ms, replay {replay:.4} ms");
        std::thread::sleep(Duration::from_secs(60));
    }
}

/// Kills a writer mid-ingest, then times the next open to its first page.
fn killed_mid_ingest(dir: &Path) -> BTreeMap<String, Value> {
    use std::io::BufRead;
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env("FORKTRAIL_SCALE_WRITER", dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    std::thread::sleep(Duration::from_secs(20));
    child.kill().unwrap();
    child.wait().unwrap();
    let t = Instant::now();
    let store = Store::open(dir).unwrap();
    let opened = t.elapsed().as_secs_f64() * 1e3;
    let page = store.sessions(&SessionQuery::default()).unwrap();
    let first = t.elapsed().as_secs_f64() * 1e3;
    let mut m = BTreeMap::new();
    m.insert("kill9_open_ms".into(), json!(opened));
    m.insert("kill9_first_page_ms".into(), json!(first));
    m.insert("kill9_sessions".into(), json!(page.total));
    m
}

fn main() {
    if let Some(dir) = std::env::var_os("FORKTRAIL_SCALE_WRITER") {
        writer(Path::new(&dir));
        return;
    }
    if let Some(dir) = std::env::var_os("FORKTRAIL_SCALE_PROBE") {
        probe(Path::new(&dir));
        return;
    }
    if !std::env::args().any(|a| a == "--bench") {
        // `cargo test --benches` builds it; the run is `make bench-scale`.
        return;
    }
    let largest: usize = std::env::var("FORKTRAIL_SCALE_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let temp;
    let dir: PathBuf = match std::env::var_os("FORKTRAIL_SCALE_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            temp = tempfile::tempdir().unwrap();
            temp.path().join("store")
        }
    };
    let stages: Vec<usize> = [10_000, 100_000, 1_000_000]
        .into_iter()
        .filter(|&n| n <= largest)
        .chain(
            (largest > 1_000_000 || ![10_000, 100_000, 1_000_000].contains(&largest))
                .then_some(largest),
        )
        .collect();
    let mut corpus = Corpus {
        words: (0..4000).map(word).collect(),
        rng: Rng(0x2545_f491_4f6c_dd1d),
        turns: 0,
    };
    let mut built = Built::default();
    let mut skip = BTreeMap::new();
    let mut results = Vec::new();
    for (i, &size) in stages.iter().enumerate() {
        let store = Store::open(&dir).unwrap();
        // The peak below is this ingest's, not the size before's (its audits, its
        // server): Linux resets a process's peak RSS on a write of 5 to clear_refs.
        let _ = std::fs::write("/proc/self/clear_refs", "5");
        let t = Instant::now();
        grow(&store, &mut built, &mut corpus, size);
        let ingest_s = t.elapsed().as_secs_f64();
        eprintln!(
            "== {} sessions, {} turns (grown in {ingest_s:.0} s)",
            built.sessions, built.turns
        );
        let mut m = measure(&dir, &store, &built);
        m.insert("ingest_s".into(), json!(ingest_s));
        m.extend(audit_figures(&store, &built, &mut skip));
        // Right after a long ingest RocksDB's compactions are behind and a read seeks
        // in many level-0 files: the same reads again once they had two minutes.
        let since = t.elapsed() - Duration::from_secs_f64(ingest_s);
        std::thread::sleep(SETTLE.saturating_sub(since));
        m.extend(chain_reads(&store, &built, "_settled"));
        let late = late_cursor(&store, 50_000.min(built.sessions / 2));
        drop(store);
        // What is left once the store is closed: the process's own (the bench's lists
        // of sessions) and what the allocator has not given back yet.
        m.insert("closed_rss_mb".into(), json!(rss_mb(std::process::id()).0));
        m.extend(measure_server(&dir, late));
        if i + 1 == stages.len() {
            m.extend(killed_mid_ingest(&dir));
        }
        eprintln!("{}", serde_json::to_string_pretty(&m).unwrap());
        results.push(m);
    }
    if std::env::var_os("FORKTRAIL_BENCH_JSON").is_some() {
        println!("{}", serde_json::to_string_pretty(&results).unwrap());
        return;
    }
    print_table(&results);
}

/// The curve: one row per figure, one column per size.
fn print_table(results: &[BTreeMap<String, Value>]) {
    let mut keys: Vec<&String> = results.iter().flat_map(|m| m.keys()).collect();
    keys.sort();
    keys.dedup();
    print!("| figure |");
    for m in results {
        print!(" {} sessions |", m["sessions"]);
    }
    println!();
    print!("| --- |");
    for _ in results {
        print!(" --- |");
    }
    println!();
    for key in keys {
        print!("| {key} |");
        for m in results {
            let cell = match m.get(key) {
                Some(Value::Number(n)) => match n.as_f64() {
                    // Reads of microseconds keep their digits.
                    Some(f) if f.abs() < 1.0 => format!("{f:.4}"),
                    Some(f) if f.fract() != 0.0 => format!("{f:.2}"),
                    _ => n.to_string(),
                },
                Some(Value::Object(o)) => format!(
                    "{:.1} ms ({} rows)",
                    o["ms"].as_f64().unwrap_or(0.0),
                    o["rows"]
                ),
                Some(other) => other.to_string(),
                None => "-".into(),
            };
            print!(" {cell} |");
        }
        println!();
    }
}
