//! Live what-if experiments (`forktrail experiment`) with the real Claude Code CLI (npm,
//! pinned) as the agent, offline: a run recorded through the model proxy against a
//! scripted Anthropic stub, then replayed by Claude Code's own harness in copies of a
//! git workspace, its tools run for real, each arm's (stub) model answering from the
//! fork point, a verify command judging; drift, the sandbox, the money cap and a
//! resume after a kill.

use crate::claude_code;
use crate::common;

use common::anthropic::{self, AnthropicStub};
use common::server::Server;
use common::stub::anthropic_message;
use forktrail::server::ServerConfig;
use forktrail::{
    ArmStatus, CompareOptions, Comparison, ExperimentOptions, OnDrift, ProxyConfig, Role,
    RunStatus, Sandbox, SessionId, Store, UpstreamKind, Verdict,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEY: &str = "sk-ant-experiment-77e0c4d2b9a14f3e8d6c5b4a3f2e1d0c";
const PROMPT: &str = "Read notes.txt, then create done.txt.";
/// The arms' models: one that finishes the task, one that does not, one that writes
/// outside its workspace.
const GOOD: &str = "stub-good";
const LAZY: &str = "stub-lazy";
const ESCAPE: &str = "stub-escape";
/// What the stub reports per call.
const USAGE: (u64, u64) = (100, 20);

/// The model's side: read notes.txt (before the fork point), then, by model: create
/// done.txt and say so (the recording, `good`), say it will not (`lazy`), or write
/// outside the workspace (`escape`, to `escape`).
fn script(escape: Option<PathBuf>) -> impl Fn(&Value) -> Value + Send + Sync + 'static {
    move |request| answer(request, escape.as_deref())
}

fn answer(request: &Value, escape: Option<&Path>) -> Value {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let answered = messages.iter().filter(|m| m["role"] == "assistant").count();
    let model = request["model"].as_str().unwrap_or_default();
    let bash = |id: &str, command: &str| {
        vec![(
            id.to_string(),
            json!({"command": command, "description": "Run it"}),
        )]
    };
    let (text, calls, stop) = match (model, answered) {
        (_, 0) => (
            Some("Reading."),
            bash("toolu_read", "cat notes.txt"),
            "tool_use",
        ),
        (LAZY, _) => (Some("I will not create it."), Vec::new(), "end_turn"),
        (ESCAPE, 1) => {
            let target = escape.expect("an escape target").display().to_string();
            (
                None,
                bash(
                    "toolu_escape",
                    &format!("python3 -c \"open('{target}', 'w').write('out')\""),
                ),
                "tool_use",
            )
        }
        (_, 1) => (None, bash("toolu_touch", "touch done.txt"), "tool_use"),
        _ => (Some("Done."), Vec::new(), "end_turn"),
    };
    let calls: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(id, input)| (id.as_str(), "Bash", input.clone()))
        .collect();
    let mut message = anthropic_message(model, text, &calls, (USAGE.0, USAGE.1, 0), stop);
    message["id"] = json!(format!("msg_{model}_{answered}"));
    message
}

/// A temp git repository with notes.txt committed.
fn workspace(dir: &Path) -> PathBuf {
    let ws = dir.join("workspace");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "v1\n").unwrap();
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
            .args(args)
            .current_dir(&ws)
            .output()
            .unwrap();
        assert!(ok.status.success(), "git {args:?}: {ok:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "notes"]);
    ws
}

/// The agent's command line: Claude Code in print mode, its tools limited to the
/// recording's, its home and key given, its base URL the experiment's (set by
/// forktrail).
fn agent_command(claude: &Path, home: &Path) -> String {
    std::fs::create_dir_all(home.join("tmp")).unwrap();
    std::fs::write(home.join("key"), KEY).unwrap();
    format!(
        "env HOME='{home}' TMPDIR='{home}/tmp' ANTHROPIC_API_KEY=\"$(cat '{home}/key')\" \
         CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 '{claude}' -p '{PROMPT}' \
         --output-format json --max-turns 8 --allowedTools 'Bash(cat:*)' 'Bash(touch:*)' 'Bash(python3:*)'",
        home = home.display(),
        claude = claude.display(),
    )
}

/// Records Claude Code doing the task in a copy of `ws` through the proxy of a server
/// on `store`; the recorded session.
fn record(
    claude: &Path,
    store: &Arc<Store>,
    stub: &AnthropicStub,
    ws: &Path,
    home: &Path,
) -> SessionId {
    let mut proxy = ProxyConfig::default();
    proxy
        .upstreams
        .insert(UpstreamKind::Anthropic, stub.url.clone());
    let server = Server::start(
        Arc::clone(store),
        ServerConfig {
            proxy,
            ..ServerConfig::default()
        },
    );
    std::fs::create_dir_all(home.join("tmp")).unwrap();
    let run = home.join("recorded-run");
    let copied = Command::new("cp")
        .arg("-a")
        .arg(ws)
        .arg(&run)
        .status()
        .unwrap();
    assert!(copied.success());
    std::fs::create_dir_all(home.join("tmp")).unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(agent_command(claude, home))
        .current_dir(&run)
        .env("ANTHROPIC_BASE_URL", server.url("/proxy/anthropic"))
        .output()
        .unwrap();
    assert!(out.status.success(), "claude: {out:?}");
    assert!(
        run.join("done.txt").exists(),
        "the recorded run did the task"
    );
    // Recorded as they end, off the answer's path: wait for every call.
    let sent = stub.messages_requests().len();
    let start = std::time::Instant::now();
    while store
        .list()
        .unwrap()
        .iter()
        .map(|s| store.model_calls(&s.session).unwrap().len())
        .sum::<usize>()
        < sent
    {
        assert!(start.elapsed().as_secs() < 30, "calls not recorded");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    drop(server);
    let sessions = store.list().unwrap();
    assert_eq!(sessions.len(), 1, "one conversation: {sessions:?}");
    let id = sessions[0].session.clone();
    let turns = store.load(&id, None).unwrap();
    let roles: Vec<Role> = turns.iter().map(|t| t.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Assistant,
            Role::Tool,
            Role::Assistant
        ],
        "{turns:#?}"
    );
    id
}

fn options(ws: &Path, agent: String, arms: &[&str], samples: u64, stub: &str) -> ExperimentOptions {
    let arms = arms
        .iter()
        .map(|m| {
            forktrail::Arm::parse(
                &format!("model={m},provider=anthropic,endpoint={stub}"),
                |_| unreachable!(),
            )
            .unwrap()
        })
        .collect();
    let mut compare = CompareOptions {
        at: 3,
        arms,
        samples: Some(samples),
        parallel: Some(2),
        ..CompareOptions::default()
    };
    for m in [GOOD, LAZY, ESCAPE] {
        compare.prices.insert(m.into(), "3/15".parse().unwrap());
    }
    ExperimentOptions {
        compare,
        agent,
        workspace: ws.to_path_buf(),
        workspace_ref: None,
        verify: "test -f done.txt".into(),
        verify_baseline: false,
        on_drift: OnDrift::Stop,
        sandbox: Sandbox::None,
        writable: Vec::new(),
        agent_timeout_secs: Some(120),
        work_dir: None,
        keep_workspaces: false,
    }
}

fn samples<'c>(c: &'c Comparison, arm: &str) -> Vec<&'c forktrail::ArmReport> {
    c.arms
        .iter()
        .filter(|a| a.name == arm && a.sample.is_some())
        .collect()
}

/// The turns the named graph of session `id` holds itself (a fork holds only its
/// tail).
fn own_turns(store: &Store, id: &SessionId) -> usize {
    let graph = oxigraph::model::Term::from(store.session_iri(id));
    let results = store
        .query(
            "PREFIX ft: <https://w3id.org/forktrail/ns#>
             SELECT ?g (COUNT(?t) AS ?n) WHERE { GRAPH ?g { ?t a ft:Turn } } GROUP BY ?g",
            &[("g", graph)],
        )
        .unwrap();
    let oxigraph::sparql::QueryResults::Solutions(mut rows) = results else {
        panic!("not solutions")
    };
    let row = rows.next().unwrap().unwrap();
    match row.get("n") {
        Some(oxigraph::model::Term::Literal(l)) => l.value().parse().unwrap(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn claude_code_replays_the_recording_and_each_arm_is_judged_over_its_samples() {
    let Some(claude) = claude_code::claude() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let home = dir.path().join("home");
    let stub = anthropic::start(script(None));
    let store = Arc::new(Store::in_memory().unwrap());
    let session = record(&claude, &store, &stub, &ws, &home);
    let recorded_requests = stub.messages_requests().len();
    let recorded_turns = store.load(&session, None).unwrap();
    assert_eq!(own_turns(&store, &session), 6);

    let mut o = options(
        &ws,
        agent_command(&claude, &home),
        &[GOOD, LAZY],
        2,
        &stub.url,
    );
    o.keep_workspaces = true;
    o.work_dir = Some(dir.path().join("copies"));
    let begun = store.begin_experiment(&session, &o).unwrap();
    let c = store.run_experiment(&begun.comparison, 2).unwrap();

    // Pass rates 1.0 and 0.0, with their 95 % Wilson intervals (2 of 2: 0.342–1).
    let stats = |name: &str| c.stats.iter().find(|s| s.name == name).unwrap();
    let (good, lazy) = (stats(GOOD), stats(LAZY));
    assert_eq!(
        (good.samples, good.judged, good.passed),
        (2, 2, 2),
        "{c:#?}"
    );
    assert_eq!(
        (lazy.samples, lazy.judged, lazy.passed),
        (2, 2, 0),
        "{c:#?}"
    );
    assert_eq!(good.pass_rate, Some(1.0));
    assert_eq!(lazy.pass_rate, Some(0.0));
    let (lo, hi) = good.pass_interval.unwrap();
    assert!((lo - 0.3424).abs() < 1e-3 && hi == 1.0, "{lo} {hi}");
    let (lo, hi) = lazy.pass_interval.unwrap();
    assert!(lo == 0.0 && (hi - 0.6576).abs() < 1e-3, "{lo} {hi}");

    for arm in [GOOD, LAZY] {
        let list = samples(&c, arm);
        assert_eq!(list.len(), 2);
        for s in list {
            let o = s.outcome.as_ref().unwrap();
            assert_eq!(s.status, ArmStatus::Run(RunStatus::Exited), "{s:#?}");
            assert_eq!(o.agent_exit, Some(0), "{s:#?}");
            assert!(o.drift.is_none(), "{s:#?}");
            // The recorded answer before K came from the recording, not a model.
            assert_eq!(o.replayed_calls, 1, "{s:#?}");
            // Figures equal the stub's usage: good made 2 calls, lazy 1.
            let calls = if arm == GOOD { 2 } else { 1 };
            assert_eq!(s.figures.steps, calls, "{s:#?}");
            assert_eq!(s.figures.input_tokens, Some(USAGE.0 * calls));
            assert_eq!(s.figures.output_tokens, Some(USAGE.1 * calls));
            let cost = (USAGE.0 as f64 * 3.0 + USAGE.1 as f64 * 15.0) / 1e6 * calls as f64;
            assert!((s.figures.cost_usd.unwrap() - cost).abs() < 1e-12, "{s:#?}");
            assert_eq!(
                o.verdict,
                if arm == GOOD {
                    Verdict::Pass
                } else {
                    Verdict::Fail
                }
            );
            // Each sample a fork at K sharing the recording's prefix: it stores only its
            // own turns (the lazy arm's answer equals nothing recorded: it diverges at K).
            let fork = s.session.clone().unwrap();
            let info = store.info(&fork).unwrap();
            assert_eq!(info.parent.as_ref(), Some(&session));
            assert_eq!(info.forked_at_index, Some(3));
            let turns = store.load(&fork, None).unwrap();
            assert_eq!(turns.len() as u64, 3 + if arm == GOOD { 3 } else { 1 });
            assert!(
                turns[..3].iter().all(|t| t.session == session),
                "prefix shared"
            );
            assert!(turns[3..].iter().all(|t| t.session == fork));
            assert_eq!(own_turns(&store, &fork), turns.len() - 3);
            if arm == LAZY {
                assert_eq!(s.figures.first_divergence, Some(3));
                assert_eq!(turns[3].content, "I will not create it.");
            }
        }
    }
    // Every live request went to the arm's model by name, and none before K did.
    let live = &stub.messages_requests()[recorded_requests..];
    assert_eq!(live.len(), 2 * 2 + 2, "{live:#?}");
    assert!(live
        .iter()
        .all(|r| r["model"] == GOOD || r["model"] == LAZY));
    assert!(live
        .iter()
        .all(|r| r["messages"].as_array().unwrap().len() >= 3));
    // The recording's turns are untouched.
    assert_eq!(store.load(&session, None).unwrap(), recorded_turns);
    // Separate copies: the good ones hold done.txt, the lazy ones not, the original
    // neither.
    assert!(
        !ws.join("done.txt").exists(),
        "the original workspace was touched"
    );
    let copies: Vec<PathBuf> = std::fs::read_dir(
        dir.path()
            .join("copies")
            .join(format!("forktrail-experiment-{}", c.comparison)),
    )
    .unwrap()
    .map(|e| e.unwrap().path())
    .filter(|p| p.is_dir())
    .collect();
    assert_eq!(copies.len(), 4, "{copies:?}");
    for copy in &copies {
        let name = copy.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(
            copy.join("done.txt").exists(),
            name.starts_with(GOOD),
            "{name}"
        );
        assert_eq!(
            std::fs::read_to_string(copy.join("notes.txt")).unwrap(),
            "v1\n"
        );
    }
    // The web UI's comparison page shows the samples, the pass rates and their
    // intervals.
    let server = Server::start(Arc::clone(&store), ServerConfig::default());
    let page = server
        .get(&format!("/ui/comparisons/{}", c.comparison), "text/html")
        .text()
        .unwrap();
    for shown in [
        "Arms over their samples",
        "data-pass-rate=\"1\"",
        "data-pass-rate=\"0\"",
        "0.34–1.00",
        "0.00–0.66",
        "data-verdict=\"pass\"",
        "data-verdict=\"fail\"",
        "the agent's tools ran with the user's rights",
    ] {
        assert!(page.contains(shown), "{shown:?} not on the page:\n{page}");
    }
    assert_eq!(page.matches("data-sample=").count(), 4);
    // The shipped query gives the same samples, verdicts and figures.
    let rows = sample_rows(&store, &c.comparison);
    assert_eq!(rows.len(), 4);
    for (row, s) in rows
        .iter()
        .zip(c.arms.iter().filter(|a| a.sample.is_some()))
    {
        let o = s.outcome.as_ref().unwrap();
        assert_eq!(cell(row, "armName").as_deref(), Some(s.name.as_str()));
        assert_eq!(cell(row, "sample"), s.sample.map(|n| n.to_string()));
        assert_eq!(cell(row, "verdict").as_deref(), Some(o.verdict.as_str()));
        assert_eq!(cell(row, "status").as_deref(), Some("exited"));
        assert_eq!(cell(row, "calls"), Some(s.figures.steps.to_string()));
        assert_eq!(
            cell(row, "inputTokens"),
            s.figures.input_tokens.map(|n| n.to_string())
        );
        assert_eq!(
            cell(row, "replayedCalls"),
            Some(o.replayed_calls.to_string())
        );
        assert_eq!(
            cell(row, "forkId"),
            s.session.as_ref().map(|f| f.to_string())
        );
        let cost: f64 = cell(row, "costUsd").unwrap().parse().unwrap();
        assert!((cost - s.figures.cost_usd.unwrap()).abs() < 1e-9);
    }
    // No key in the store.
    let mut dump = Vec::new();
    store
        .export(None, forktrail::ExportFormat::NQuads, &mut dump)
        .unwrap();
    assert!(!String::from_utf8_lossy(&dump).contains(KEY));
}

/// Records the task and returns what an experiment needs: the temp dir, the
/// workspace, the agent's home, the stub and the store with the recorded session.
struct Recorded {
    dir: tempfile::TempDir,
    ws: PathBuf,
    home: PathBuf,
    stub: AnthropicStub,
    store: Arc<Store>,
    session: SessionId,
    claude: PathBuf,
}

fn recorded(escape: Option<PathBuf>) -> Option<Recorded> {
    let claude = claude_code::claude()?;
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let home = dir.path().join("home");
    let stub = anthropic::start(script(escape));
    let store = Arc::new(Store::in_memory().unwrap());
    let session = record(&claude, &store, &stub, &ws, &home);
    Some(Recorded {
        dir,
        ws,
        home,
        stub,
        store,
        session,
        claude,
    })
}

/// Guards against an environment that drifted being replayed as if it had not: a file
/// the recorded tool read changed, so the tool result the agent sends differs from the
/// recording at the call that carries it.
#[test]
fn a_tool_result_that_no_longer_matches_is_reported_at_its_call() {
    let Some(r) = recorded(None) else { return };
    std::fs::write(r.ws.join("notes.txt"), "v2\n").unwrap();
    let agent = agent_command(&r.claude, &r.home);
    let o = options(&r.ws, agent.clone(), &[GOOD], 1, &r.stub.url);
    let live_before = r.stub.messages_requests().len();
    let begun = r.store.begin_experiment(&r.session, &o).unwrap();
    let c = r.store.run_experiment(&begun.comparison, 1).unwrap();
    let s = samples(&c, GOOD)[0];
    let outcome = s.outcome.as_ref().unwrap();
    assert_eq!(s.status, ArmStatus::Run(RunStatus::Drifted), "{s:#?}");
    assert_eq!(outcome.verdict, Verdict::NotJudged);
    let drift = outcome.drift.as_ref().expect("a drift");
    // The second call carries the tool result (turn 2): v1 recorded, v2 now.
    assert_eq!((drift.call, drift.index), (2, 2), "{drift:?}");
    assert!(
        drift.detail.contains("v1") && drift.detail.contains("v2"),
        "{drift:?}"
    );
    assert!(s.detail.as_deref().unwrap().contains("call 2"), "{s:#?}");
    assert_eq!(
        r.stub.messages_requests().len(),
        live_before,
        "no model was called"
    );
    assert_eq!(c.stats[1].judged, 0);
    assert_eq!(c.stats[1].pass_rate, None);

    // --on-drift continue: recorded, and the arm's model answers all the same.
    let mut o = options(&r.ws, agent, &[GOOD], 1, &r.stub.url);
    o.on_drift = OnDrift::Continue;
    let begun = r.store.begin_experiment(&r.session, &o).unwrap();
    let c = r.store.run_experiment(&begun.comparison, 1).unwrap();
    let s = samples(&c, GOOD)[0];
    let outcome = s.outcome.as_ref().unwrap();
    assert_eq!(s.status, ArmStatus::Run(RunStatus::Exited), "{s:#?}");
    assert_eq!(
        outcome.drift.as_ref().map(|d| (d.call, d.index)),
        Some((2, 2))
    );
    assert_eq!(outcome.verdict, Verdict::Pass, "{s:#?}");
}

fn bwrap() -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("bwrap").is_file()));
    if !found && std::env::var_os("CI").is_some() {
        panic!("no bwrap: .ci/run installs bubblewrap; in CI the test fails rather than skip");
    }
    if !found {
        eprintln!("bwrap is not installed (apt-get install bubblewrap): skipped");
    }
    found
}

/// Guards against a sandbox that lets an agent's tool write outside its copy: the same
/// step writes the file without the sandbox, and fails under bubblewrap, and the
/// sample's record says why.
#[test]
fn an_agent_step_writing_outside_its_copy_fails_under_bwrap_and_the_sample_says_so() {
    if !bwrap() {
        return;
    }
    // Outside /tmp, which the sandbox replaces by its own: the write meets the
    // read-only filesystem itself.
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let target = outside.path().join("escaped.txt");
    let Some(r) = recorded(Some(target.clone())) else {
        return;
    };
    let agent = agent_command(&r.claude, &r.home);
    let mut o = options(&r.ws, agent.clone(), &[ESCAPE], 1, &r.stub.url);
    o.sandbox = Sandbox::Bwrap;
    o.writable = vec![r.home.clone()];
    let begun = r.store.begin_experiment(&r.session, &o).unwrap();
    let c = r.store.run_experiment(&begun.comparison, 1).unwrap();
    let s = samples(&c, ESCAPE)[0];
    assert!(
        !target.exists(),
        "the sandboxed agent wrote outside its copy"
    );
    assert_eq!(s.status, ArmStatus::Run(RunStatus::Exited), "{s:#?}");
    let fork = s.session.clone().unwrap();
    let turns = r.store.load(&fork, None).unwrap();
    let result = turns
        .iter()
        .find(|t| t.role == Role::Tool && t.index > 3)
        .expect("the escape's result");
    assert!(
        result.content.contains("Read-only file system"),
        "the tool result says the write was refused: {result:#?}"
    );

    // Without the sandbox the very same step writes it.
    let mut o = options(&r.ws, agent, &[ESCAPE], 1, &r.stub.url);
    o.sandbox = Sandbox::None;
    let begun = r.store.begin_experiment(&r.session, &o).unwrap();
    r.store.run_experiment(&begun.comparison, 1).unwrap();
    assert!(
        target.exists(),
        "the unsandboxed step did not write: the test proves nothing"
    );
    let _ = &r.dir;
}

/// A stub that answers as [`script`] does, counting the arms' requests in flight (the
/// most at once kept), and holding one `Done.` answer of `GOOD` until `hold` is
/// cleared, if it is set.
struct Gauged {
    stub: AnthropicStub,
    most: Arc<AtomicUsize>,
    /// Set: the next `Done.` request of GOOD waits while it stays set.
    hold: Arc<AtomicBool>,
    held: Arc<AtomicBool>,
}

fn gauged() -> Gauged {
    let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (hold, held) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (n, m, h, d) = (now.clone(), most.clone(), hold.clone(), held.clone());
    let stub = anthropic::start(move |request: &Value| {
        let live = request["model"] == GOOD;
        if live {
            m.fetch_max(n.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
            // A moment in flight, so that calls the cap would let overlap do.
            std::thread::sleep(Duration::from_millis(300));
        }
        let done = answered(request) == 2;
        if live && done && h.load(Ordering::SeqCst) && !d.swap(true, Ordering::SeqCst) {
            while h.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if live {
            n.fetch_sub(1, Ordering::SeqCst);
        }
        answer(request, None)
    });
    Gauged {
        stub,
        most,
        hold,
        held,
    }
}

/// How many answers a request's conversation holds.
fn answered(request: &Value) -> usize {
    let messages = request["messages"].as_array().unwrap();
    messages.iter().filter(|m| m["role"] == "assistant").count()
}

/// The price per million output tokens that makes one call's upper bound $1 (input
/// free): the bound is then `max_tokens` × that price, whatever the request's size.
fn dollar_a_call(stub: &AnthropicStub) -> f64 {
    let max_tokens = stub.messages_requests()[0]["max_tokens"].as_u64().unwrap();
    1e6 / max_tokens as f64
}

/// Guards against concurrent samples passing the money cap: each call reserves its
/// upper bound ($1 here) before it is made, and a cap of $1.50 lets one call be in
/// flight at a time, however many samples run at once.
#[test]
fn concurrent_samples_never_pass_the_money_cap() {
    let Some(claude) = claude_code::claude() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (ws, home) = (workspace(dir.path()), dir.path().join("home"));
    let g = gauged();
    let store = Arc::new(Store::in_memory().unwrap());
    let session = record(&claude, &store, &g.stub, &ws, &home);
    let out = dollar_a_call(&g.stub);
    let mut o = options(&ws, agent_command(&claude, &home), &[GOOD], 3, &g.stub.url);
    o.compare
        .prices
        .insert(GOOD.into(), format!("0/{out}").parse().unwrap());
    o.compare.budget_usd = Some(1.5);
    o.compare.parallel = Some(3);
    let begun = store.begin_experiment(&session, &o).unwrap();
    let c = store.run_experiment(&begun.comparison, 3).unwrap();
    let stats = &c.stats[1];
    assert_eq!((stats.samples, stats.passed), (3, 3), "{c:#?}");
    assert_eq!(
        g.most.load(Ordering::SeqCst),
        1,
        "two calls were in flight at once"
    );
    let cost: f64 = samples(&c, GOOD)
        .iter()
        .map(|s| s.figures.cost_usd.unwrap())
        .sum();
    assert!(
        (cost - 6.0 * USAGE.1 as f64 * out / 1e6).abs() < 1e-9,
        "{cost}"
    );
    assert!(
        (c.charged_usd - cost).abs() < 1e-9 && c.charged_usd <= 1.5,
        "{c:#?}"
    );
}

/// Guards against a resume that asks the model again for a step a killed process had
/// committed, or counts a sample twice: the killed sample's agent is started anew, its
/// committed step answered from its fork, and the call in flight at the kill charged.
#[test]
fn a_killed_experiment_resumes_from_its_last_committed_step_and_counts_each_sample_once() {
    let Some(claude) = claude_code::claude() else {
        return;
    };
    let cli = common::cli::Cli::new();
    let (ws, home) = (workspace(cli.dir()), cli.dir().join("home"));
    let g = gauged();
    let memory = Arc::new(Store::in_memory().unwrap());
    let session = record(&claude, &memory, &g.stub, &ws, &home);
    memory.copy_to(&cli.open()).unwrap();
    let out = dollar_a_call(&g.stub);
    let agent = agent_command(&claude, &home);
    let (arm, price) = (
        format!("model={GOOD},provider=anthropic,endpoint={}", g.stub.url),
        format!("{GOOD}=0/{out}"),
    );
    let args = [
        "experiment",
        session.as_str(),
        "--at",
        "3",
        "--agent",
        &agent,
        "--workspace",
        ws.to_str().unwrap(),
        "--arm",
        &arm,
        "--samples",
        "2",
        "--parallel",
        "2",
        "--verify",
        "test -f done.txt",
        "--price",
        &price,
        "--budget-usd",
        "10",
        "--json",
    ];
    g.hold.store(true, Ordering::SeqCst);
    let mut child = cli
        .command(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !g.held.load(Ordering::SeqCst) {
        assert!(start.elapsed() < Duration::from_secs(60), "no held call");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL, a call in flight
    child.wait().unwrap();
    g.hold.store(false, Ordering::SeqCst);
    let shown = cli.json(&["comparisons", "--json"]);
    assert_eq!(shown[0]["status"], "running", "{shown:#}");
    let id = shown[0]["comparison"].as_str().unwrap().to_string();
    let before = g.stub.messages_requests().len();

    let c = cli.json(&["jobs", "resume", &id, "--json"]);
    let stats = &c["stats"][1];
    assert_eq!(
        (stats["samples"].as_u64(), stats["passed"].as_u64()),
        (Some(2), Some(2)),
        "{c:#}"
    );
    let runs: Vec<&Value> = c["arms"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["sample"].is_u64())
        .collect();
    assert_eq!(runs.len(), 2, "each sample once: {c:#}");
    for s in &runs {
        assert_eq!(s["status"], "exited", "{s:#}");
        assert_eq!(
            s["figures"]["steps"], 2,
            "two calls each, none twice: {s:#}"
        );
    }
    // After the kill, the resume asked only for what was not committed: the killed
    // sample's last step (its first was answered from its fork), and whatever the other
    // sample had left.
    let asked: Vec<Value> = g.stub.messages_requests();
    let touch = |r: &Value| r["model"] == GOOD && answered(r) == 1;
    assert_eq!(
        asked.iter().filter(|r| touch(r)).count(),
        2,
        "a committed step asked again"
    );
    let done = asked[before..]
        .iter()
        .filter(|r| r["model"] == GOOD && !touch(r))
        .count();
    assert!((1..=2).contains(&done), "{done}");
    // Every call sent is either one of the four committed or was in flight at the kill
    // (the held one, and the other sample's if it had one): those are charged their
    // upper bound ($1 each), every answer its cost.
    let sent = asked.iter().filter(|r| r["model"] == GOOD).count();
    let lost = sent - 4;
    assert!((1..=2).contains(&lost), "{sent} calls sent");
    let costs: f64 = runs
        .iter()
        .map(|s| s["figures"]["cost_usd"].as_f64().unwrap())
        .sum();
    let charged = c["charged_usd"].as_f64().unwrap();
    assert!(
        (charged - (lost as f64 + costs)).abs() < 1e-6,
        "{charged} vs {lost} + {costs}"
    );
}

/// The store the model proxy's tests record (`proxy::proxied_store`), with an
/// experiment on its "hello" conversation run by a small agent of a few lines: one call
/// whose conversation drifted at turn 0 ("hallo"), `--on-drift continue`, the recording
/// replayed to its end as the baseline, an arm whose endpoint refuses. Every term a
/// sample's outcome writes is in it.
pub(crate) fn experimented_store() -> (Arc<Store>, Comparison) {
    let store = crate::proxy::proxied_store();
    let session = hello(&store);
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("workspace");
    std::fs::create_dir_all(&ws).unwrap();
    let mut options = at_one(ws, PYTHON_AGENT, "echo judged", dir.path());
    options.verify_baseline = true;
    options.on_drift = OnDrift::Continue;
    let begun = store.begin_experiment(&session, &options).unwrap();
    let c = store.run_experiment(&begun.comparison, 1).unwrap();
    (store, c)
}

/// An experiment from K = 1 on the "hello" conversation: `agent` in copies of `ws`
/// (made under `dir`), judged by `verify`, its one arm's endpoint refusing.
fn at_one(ws: PathBuf, agent: &str, verify: &str, dir: &Path) -> ExperimentOptions {
    let arm = forktrail::Arm::parse(
        "model=elsewhere,provider=anthropic,endpoint=http://127.0.0.1:9",
        |_| unreachable!(),
    )
    .unwrap();
    ExperimentOptions {
        compare: CompareOptions {
            at: 1,
            arms: vec![arm],
            ..CompareOptions::default()
        },
        agent: agent.into(),
        workspace: ws,
        workspace_ref: None,
        verify: verify.into(),
        verify_baseline: false,
        on_drift: OnDrift::Stop,
        sandbox: Sandbox::None,
        writable: Vec::new(),
        agent_timeout_secs: Some(60),
        work_dir: Some(dir.join("copies")),
        keep_workspaces: false,
    }
}

/// The proxy's recorded "hello" conversation (user, assistant).
fn hello(store: &Store) -> SessionId {
    store
        .list()
        .unwrap()
        .into_iter()
        .find(|s| store.load(&s.session, None).unwrap()[0].content == "hello")
        .unwrap()
        .session
}

/// An agent of a few lines: one Anthropic call saying "hallo", its answer printed.
const PYTHON_AGENT: &str = "python3 -c \"import json, os, urllib.request as u
body = {'model': 'm', 'max_tokens': 10, 'messages': [{'role': 'user', 'content': 'hallo'}]}
r = u.Request(os.environ['ANTHROPIC_BASE_URL'] + '/v1/messages', data=json.dumps(body).encode(),
              headers={'content-type': 'application/json', 'anthropic-version': '2023-06-01'})
try:
    print(u.urlopen(r).read().decode())
except Exception as e:
    print('refused:', e)
\"";

/// Guards against a replay that answers a drifted call from the wrong place, or a
/// baseline that is not the recording: without any agent CLI, the baseline's sample
/// is answered the recorded turn, the arm's goes to its (refusing) endpoint, and both
/// are judged.
#[test]
fn a_drifted_call_goes_on_from_the_recording_and_the_baseline_replays_it_to_its_end() {
    let (store, c) = experimented_store();
    let baseline = c
        .arms
        .iter()
        .find(|a| a.baseline && a.sample.is_some())
        .unwrap();
    let arm = c.arms.iter().find(|a| a.name == "elsewhere").unwrap();
    for s in [baseline, arm] {
        let o = s.outcome.as_ref().unwrap_or_else(|| panic!("{s:#?}"));
        assert_eq!(s.status, ArmStatus::Run(RunStatus::Exited), "{s:#?}");
        assert_eq!((o.verdict, o.verify_exit), (Verdict::Pass, Some(0)));
        assert!(o.verify_output.contains("judged"));
        let d = o.drift.as_ref().unwrap();
        assert_eq!((d.call, d.index), (1, 0));
        assert!(
            d.detail.contains("hello") && d.detail.contains("hallo"),
            "{d:?}"
        );
    }
    // The baseline's call was given the recorded answer ("Fine."), the arm's refused.
    let o = baseline.outcome.as_ref().unwrap();
    assert_eq!(o.replayed_calls, 1);
    assert!(o.agent_output.contains("Fine."), "{o:#?}");
    let o = arm.outcome.as_ref().unwrap();
    assert_eq!(o.replayed_calls, 0);
    assert!(o.agent_output.contains("refused"), "{o:#?}");
    let fork = arm.session.clone().unwrap();
    let calls = store.model_calls(&fork).unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].outcome, forktrail::CallOutcome::Failed);
    assert_eq!(c.stats[0].passed, 1);
}

/// The rows of `experiment-samples.rq` for comparison `id`.
fn sample_rows(store: &Store, id: &str) -> Vec<oxigraph::sparql::QuerySolution> {
    let bound = oxigraph::model::Term::from(oxigraph::model::Literal::from(id));
    match store
        .query_named(
            &forktrail::queries::EXPERIMENT_SAMPLES,
            &[("comparison", bound)],
        )
        .unwrap()
    {
        oxigraph::sparql::QueryResults::Solutions(rows) => rows.map(Result::unwrap).collect(),
        _ => panic!("experiment-samples is a SELECT"),
    }
}

fn cell(row: &oxigraph::sparql::QuerySolution, var: &str) -> Option<String> {
    match row.get(var) {
        Some(oxigraph::model::Term::Literal(l)) => Some(l.value().to_string()),
        Some(other) => Some(other.to_string()),
        None => None,
    }
}

fn tool_json(result: &Value) -> Value {
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// Guards against an MCP client running commands on a server that did not allow it,
/// and against an experiment that cannot be followed or stopped: `run_experiment`
/// returns at once, `comparison` follows its samples, `cancel_job` stops a running
/// agent within seconds.
#[test]
fn mcp_runs_an_experiment_only_when_allowed_follows_it_and_cancels_it() {
    use forktrail::mcp::{McpConfig, McpServer};
    let store = crate::proxy::proxied_store();
    let session = hello(&store);
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("workspace");
    std::fs::create_dir_all(&ws).unwrap();
    let args = |agent: &str| {
        json!({"session": session.as_str(), "at": 1, "agent": agent,
               "workspace": ws.to_str().unwrap(), "verify": "true", "on_drift": "continue",
               "arms": [{"model": "elsewhere", "provider": "anthropic", "endpoint": "http://127.0.0.1:9"}],
               "samples": 2})
    };
    let server = |allow_experiments| {
        McpServer::new(
            Arc::clone(&store),
            McpConfig {
                allow_writes: true,
                allow_experiments,
                ..McpConfig::default()
            },
        )
    };
    let listed = |allowed| {
        let names: Vec<String> = server(allowed)
            .tools()
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        names.contains(&"run_experiment".to_string())
    };
    assert!(
        !listed(false) && listed(true),
        "run_experiment listed where it cannot run"
    );
    // An arm that would swap the agent's own system prompt or tools is refused: the
    // experiment swaps only the model (and its sampling).
    let mut swapped = args(PYTHON_AGENT);
    swapped["arms"][0]["system_prompt"] = json!("Be brief.");
    let refused = common::mcp_result(&server(true), "run_experiment", swapped);
    assert!(
        refused
            .to_string()
            .contains("system-prompt and tools are not taken"),
        "{refused}"
    );
    let refused = common::mcp_result(&server(false), "run_experiment", args(PYTHON_AGENT));
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        refused.to_string().contains("--allow-experiments"),
        "{refused}"
    );
    assert!(
        store.comparisons().unwrap().is_empty(),
        "a refused call wrote"
    );

    let mcp = server(true);
    let begun = tool_json(&common::mcp_result(
        &mcp,
        "run_experiment",
        args(PYTHON_AGENT),
    ));
    assert_eq!(begun["status"], "running", "{begun:#}");
    let id = begun["comparison"].as_str().unwrap().to_string();
    let follow = |id: &str| tool_json(&common::mcp_result(&mcp, "comparison", json!({"id": id})));
    let start = Instant::now();
    let ended = loop {
        let c = follow(&id);
        if c["status"] == "ended" {
            break c;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{c:#}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(ended["stats"][1]["samples"], 2, "{ended:#}");
    assert_eq!(ended["stats"][1]["passed"], 2, "{ended:#}");

    // An agent that would run a minute is stopped by cancel_job.
    let begun = tool_json(&common::mcp_result(
        &mcp,
        "run_experiment",
        args("sleep 60"),
    ));
    let id = begun["comparison"].as_str().unwrap().to_string();
    std::thread::sleep(Duration::from_millis(500));
    let cancelled = common::mcp_result(&mcp, "cancel_job", json!({"job": id}));
    assert_ne!(cancelled["isError"], true, "{cancelled}");
    let start = Instant::now();
    let c = loop {
        let c = follow(&id);
        if c["status"] == "ended" {
            break c;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "not stopped: {c:#}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    for arm in c["arms"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["sample"].is_u64())
    {
        assert_eq!(arm["status"], "cancelled", "{arm:#}");
    }
}

/// Guards against `--workspace-ref` copying the working tree instead of the revision,
/// or leaving its worktrees behind: the agent sees the committed file, not the edit
/// made since, and the repository lists no worktree afterwards.
#[test]
fn a_workspace_ref_gives_each_sample_a_worktree_at_that_revision() {
    let store = crate::proxy::proxied_store();
    let session = hello(&store);
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    std::fs::write(ws.join("notes.txt"), "an edit not committed\n").unwrap();
    let mut options = at_one(
        ws.clone(),
        "cat notes.txt > seen.txt",
        "grep -qx v1 seen.txt",
        dir.path(),
    );
    options.workspace_ref = Some("HEAD".into());
    options.compare.samples = Some(2);
    let begun = store.begin_experiment(&session, &options).unwrap();
    let c = store.run_experiment(&begun.comparison, 2).unwrap();
    assert_eq!((c.stats[1].judged, c.stats[1].passed), (2, 2), "{c:#?}");
    let list = Command::new("git")
        .args(["worktree", "list"])
        .current_dir(&ws)
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    assert_eq!(list.lines().count(), 1, "worktrees left behind: {list}");
    assert!(!ws.join("seen.txt").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "an edit not committed\n"
    );
}
