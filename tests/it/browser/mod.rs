//! The web UI in a real browser: Debian's Chromium, headless, driven over WebDriver
//! (chromedriver, from Debian's `chromium-driver`) by fantoccini. `forktrail serve
//! --demo` runs as its own process on 127.0.0.1, and the test acts as a person would:
//! it opens the tree, opens a branch, forks from turn 2, finds the new branch in the
//! tree, runs a diff, checks that a `<script>` turn is shown and never run, that a write
//! without the token is refused, and opens the `export --format html` file from a
//! `file:` URL. A second test runs What-if from here against the test LLM. A third
//! opens a comparison of two models against a scripted stub, side by side, and starts
//! another from a turn's "Compare models from here". A fourth keeps a playback page
//! open while turns are appended through REST: they appear without a reload. A fifth,
//! by keyboard alone (Tab, Enter, typing), edits a turn, has the test model answer it
//! in a new branch, continues that branch in the composer, finds it in the drawn tree
//! and the outline, and forks from a turn into the new branch's composer. A sixth
//! diffs two 1,000-turn branches on a desktop and a phone. A seventh opens every kind
//! of page at 390 and 1400 px, light and dark, and checks that none scrolls sideways
//! and that axe-core (from npm, `FORKTRAIL_AXE`) finds no serious or critical
//! violation.
//!
//! `make test` installs Chromium and chromedriver and sets `FORKTRAIL_CHROMEDRIVER`
//! (and `FORKTRAIL_CHROMIUM`). Screenshots go to `target/tmp/screenshots/`; the README's
//! two are remade with `FORKTRAIL_SCREENSHOTS=docs/screenshots make test`.
#![cfg(all(feature = "server", feature = "rocksdb"))]

use crate::common;

use common::{runtime, travel, Reaped};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod comparison;
mod story;
mod tree;

const TOKEN: &str = "browser-test-token";

/// `forktrail serve --demo` on a fresh store directory and a free port.
struct Serve {
    _child: Reaped,
    base: String,
    /// The URL its banner says to open in a browser.
    open: String,
    _dir: tempfile::TempDir,
}

fn serve(extra: &[String]) -> Serve {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_forktrail"))
        .arg("--store")
        .arg(dir.path().join("store"))
        .args(["serve", "--demo", "--bind", "127.0.0.1:0", "--token", TOKEN])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let child = Reaped(child);
    let base = loop {
        let line = lines
            .next()
            .expect("serve prints where it listens")
            .unwrap();
        if let Some(rest) = line.strip_prefix("forktrail is serving on ") {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    let open = loop {
        let line = lines.next().expect("serve says what to open").unwrap();
        if let Some(rest) = line.strip_prefix("open ") {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    // Whatever else it prints is read, so the server never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    Serve {
        _child: child,
        base,
        open,
        _dir: dir,
    }
}

/// chromedriver on a free port, ready for sessions.
struct Driver {
    _child: Reaped,
    url: String,
}

fn chromedriver() -> Option<Driver> {
    let binary = std::env::var("FORKTRAIL_CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".into());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = match Command::new(&binary)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(child) => Reaped(child),
        Err(_) if std::env::var_os("CI").is_some() => panic!(
            "no chromedriver ({binary}): `make test` installs Debian's chromium and \
             chromium-driver; in CI the browser test fails rather than pass without them"
        ),
        Err(_) => {
            eprintln!("skipped: no chromedriver (install chromium-driver, or run `make test`)");
            return None;
        }
    };
    let url = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let ready = reqwest::blocking::get(format!("{url}/status"))
            .ok()
            .and_then(|r| r.json::<Value>().ok())
            .is_some_and(|v| v["value"]["ready"] == json!(true));
        if ready {
            return Some(Driver { _child: child, url });
        }
        assert!(Instant::now() < deadline, "chromedriver did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
}

async fn browser(driver: &Driver) -> Client {
    browser_with(driver, &[]).await
}

/// A browser with more command-line switches (`--force-dark-mode`, say).
async fn browser_with(driver: &Driver, extra: &[&str]) -> Client {
    let chromium =
        std::env::var("FORKTRAIL_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let args: Vec<&str> = [
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1000,700",
    ]
    .into_iter()
    .chain(extra.iter().copied())
    .collect();
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            // Root in CI containers needs --no-sandbox; /dev/shm is small there.
            "args": args,
        }),
    );
    let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .expect("chromedriver starts Chromium");
    client
}

/// The screenshots the README shows (written to `$FORKTRAIL_SCREENSHOTS` when set).
const README_SHOTS: [&str; 2] = ["tree.png", "playback.png"];

/// Where screenshots go: the test's temp dir, and the README's two to
/// `$FORKTRAIL_SCREENSHOTS` when set.
async fn screenshot(c: &Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), &png).unwrap();
    if let Some(out) = std::env::var_os("FORKTRAIL_SCREENSHOTS") {
        if README_SHOTS.contains(&name) {
            std::fs::write(PathBuf::from(out).join(name), &png).unwrap();
        }
    }
}

async fn click(c: &Client, at: Locator<'_>) {
    c.find(at).await.unwrap().click().await.unwrap();
}

async fn type_into(c: &Client, css: &str, text: &str) {
    c.find(Locator::Css(css))
        .await
        .unwrap()
        .send_keys(text)
        .await
        .unwrap();
}

/// Waits (up to `seconds`) until the page's path starts with `prefix` and differs from
/// `not`, and returns it.
async fn wait_for_path(c: &Client, prefix: &str, not: &str, seconds: u64) -> String {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        let url = c.current_url().await.unwrap();
        let path = url.path().to_string();
        if path.starts_with(prefix) && path != not {
            return path;
        }
        assert!(
            Instant::now() < deadline,
            "still at {url} after {seconds} s, waiting for {prefix}…"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the page source contains `text`.
async fn wait_for_text(c: &Client, text: &str, seconds: u64) -> String {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        let source = c.source().await.unwrap();
        if source.contains(text) {
            return source;
        }
        assert!(
            Instant::now() < deadline,
            "no {text:?} after {seconds} s in {source}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn rest(base: &str, path: &str) -> Value {
    reqwest::get(format!("{base}{path}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The browser's driver, the test model, its endpoint, `serve --demo` offering it, and
/// the demo's root; `None` without a driver or a model.
struct TestModelDemo {
    driver: Driver,
    _llm: common::Llm,
    endpoint: String,
    server: Serve,
    root: String,
}

fn demo_with_test_model() -> Option<TestModelDemo> {
    let driver = chromedriver()?;
    let llm = common::Llm::start()?;
    let endpoint = format!("http://127.0.0.1:{}/v1", llm.port);
    let server = serve(&["--model-endpoint".into(), endpoint.clone()]);
    let sessions: Value = reqwest::blocking::get(format!("{}/sessions", server.base))
        .unwrap()
        .json()
        .unwrap();
    let root = session_on(&sessions, "main");
    Some(TestModelDemo {
        driver,
        _llm: llm,
        endpoint,
        server,
        root,
    })
}

impl TestModelDemo {
    /// A browser on the root's page.
    async fn on_the_root(&self) -> Client {
        let c = browser(&self.driver).await;
        let page = format!("{}/ui/sessions/{}", self.server.base, self.root);
        c.goto(&page).await.unwrap();
        c
    }
}

/// The demo session on `branch`.
fn session_on(sessions: &Value, branch: &str) -> String {
    sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["branch"] == branch)
        .unwrap_or_else(|| panic!("no {branch} session in {sessions}"))["session"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn an_open_playback_page_shows_turns_appended_while_it_is_open() {
    let Some(driver) = chromedriver() else { return };
    let server = serve(&[]);
    let base = server.base.clone();
    let sessions: Value = reqwest::blocking::get(format!("{base}/sessions"))
        .unwrap()
        .json()
        .unwrap();
    let budget = session_on(&sessions, "budget");
    runtime().block_on(async {
        let c = browser(&driver).await;
        let path = format!("/ui/sessions/{budget}");
        c.goto(&format!("{base}{path}")).await.unwrap();
        wait_for_text(&c, "Fork tree", 10).await;
        let items = || async {
            c.find_all(Locator::Css("ol.turns > li"))
                .await
                .unwrap()
                .len()
        };
        let before = items().await;
        // A mark that a reload would wipe.
        c.execute("window.stillHere = 7; return 1", vec![])
            .await
            .unwrap();
        let http = reqwest::Client::new();
        for (n, text) in [
            "A live answer, appended while the page is open.",
            "And one more.",
        ]
        .into_iter()
        .enumerate()
        {
            // Appended as an agent would, through REST.
            let appended = http
                .post(format!("{base}/sessions/{budget}/turns"))
                .bearer_auth(TOKEN)
                .json(&json!({ "role": "assistant", "content": text }))
                .send()
                .await
                .unwrap();
            assert_eq!(appended.status(), 201);
            wait_for_text(&c, text, 10).await;
            assert_eq!(items().await, before + n + 1, "each turn shown once");
        }
        let kept = c.execute("return window.stillHere", vec![]).await.unwrap();
        assert_eq!(kept, json!(7), "the page was not reloaded");
        assert_eq!(c.current_url().await.unwrap().path(), path);
        screenshot(&c, "playback-follow.png").await;
        c.close().await.unwrap();
    });
}

#[test]
fn a_person_forks_from_turn_2_diffs_and_shares_an_offline_page() {
    let Some(driver) = chromedriver() else { return };
    let server = serve(&[]);
    let base = server.base.clone();
    // A turn that would run script if it were ever inserted as markup.
    let hostile = "<script>window.pwned = 1</script><img src=x onerror=\"window.pwned = 2\">\n\
                   ```rust\nfn main() {}\n```\nafter the code";
    let sessions: Value = reqwest::blocking::get(format!("{base}/sessions"))
        .unwrap()
        .json()
        .unwrap();
    let booking = session_on(&sessions, "booking");
    let appended = reqwest::blocking::Client::new()
        .post(format!("{base}/sessions/{booking}/turns"))
        .bearer_auth(TOKEN)
        .json(&json!({ "role": "user", "content": hostile }))
        .send()
        .unwrap();
    assert_eq!(appended.status(), 201);
    let hostile_index = appended.json::<Value>().unwrap()["index"].as_u64().unwrap();

    runtime().block_on(async {
        let c = browser(&driver).await;
        let root = session_on(&sessions, "main");
        let budget = session_on(&sessions, "budget");

        // The URL `serve --demo` prints shows the demo's fork tree.
        c.goto(&server.open).await.unwrap();
        wait_for_path(&c, &format!("/ui/sessions/{root}/tree"), "", 10).await;
        let tree = c.source().await.unwrap();
        for label in ["main", "budget", "model-swap", "booking"] {
            assert!(tree.contains(&format!(">{label}<")), "{label} in the tree");
        }
        screenshot(&c, "tree.png").await;
        // The sessions page lists the tree, its forks under its root; search finds a
        // turn through the index, marked, and leads to it.
        click(&c, Locator::LinkText("Sessions")).await;
        wait_for_text(&c, "4 sessions in 1 tree,", 10).await;
        let rows = c.find_all(Locator::Css("tbody tr")).await.unwrap();
        assert_eq!(rows.len(), 4, "the demo's root and its three forks");
        let forks = c.find_all(Locator::Css("tbody tr.fork")).await.unwrap();
        assert_eq!(forks.len(), 3);
        type_into(&c, "#q", "cheaper").await;
        click(&c, Locator::Css("form[role=search] button")).await;
        let hits = wait_for_text(&c, "1 hit<", 10).await;
        assert!(!hits.contains("1 hits"), "{hits}");
        let mark = c.find(Locator::Css("ol.hits mark")).await.unwrap();
        assert_eq!(mark.text().await.unwrap().to_lowercase(), "cheaper");
        click(&c, Locator::Css("ol.hits li a")).await;
        wait_for_path(&c, &format!("/ui/sessions/{budget}"), "", 10).await;
        let url = c.current_url().await.unwrap();
        assert!(
            url.fragment().is_some_and(|f| f.starts_with("turn-")),
            "{url}: the hit's turn"
        );
        click(&c, Locator::LinkText("Sessions")).await;
        wait_for_text(&c, "4 sessions in 1 tree,", 10).await;
        click(
            &c,
            Locator::Css(&format!("a[href='/ui/sessions/{root}/tree']")),
        )
        .await;
        wait_for_path(&c, &format!("/ui/sessions/{root}/tree"), "", 10).await;

        // Open a branch: its playback.
        click(&c, Locator::LinkText("budget")).await;
        let budget_path = format!("/ui/sessions/{budget}");
        wait_for_path(&c, &budget_path, "", 10).await;
        let turns = c.find_all(Locator::Css("li.turn")).await.unwrap();
        let info = rest(&base, &format!("/sessions/{budget}")).await;
        assert_eq!(turns.len() as u64, info["length"].as_u64().unwrap());
        assert_eq!(
            c.find_all(Locator::Css("li.turn.inherited"))
                .await
                .unwrap()
                .len() as u64,
            info["inherited_turns"].as_u64().unwrap(),
            "inherited turns are marked"
        );
        // The screenshot shows the fork point: the sibling pagers at turns 4 and 5.
        c.execute("document.getElementById('turn-3').scrollIntoView()", vec![])
            .await
            .unwrap();
        screenshot(&c, "playback.png").await;

        // A write without the token is refused, and nothing is written.
        click(&c, Locator::Css("#turn-1 details.fork summary")).await;
        type_into(&c, "#turn-1 details.fork input[name=label]", "no-token").await;
        click(&c, Locator::Css("#turn-1 details.fork button[type=submit]")).await;
        // The error stays with its form, on the same page, what was typed kept.
        wait_for_text(&c, "Token needed", 10).await;
        let note = text_at(&c, "#turn-1 details.fork p.error[role=alert]").await;
        assert!(
            note.starts_with("Token needed: ") && note.ends_with("Nothing was changed."),
            "{note}"
        );
        assert_eq!(c.current_url().await.unwrap().path(), budget_path);
        let typed = prop_at(&c, "#turn-1 details.fork input[name=label]", "value").await;
        assert_eq!(typed.as_deref(), Some("no-token"));
        let after = rest(&base, "/sessions").await;
        assert_eq!(after["total"], 4, "no fork was made");
        // A wrong token, kept, can be forgotten: the forms ask for one again.
        type_into(&c, "#token-input", "wrong-token").await;
        click(&c, Locator::Css("#token-form button[type=submit]")).await;
        wait_for_text(&c, "kept for this tab", 5).await;
        click(&c, Locator::Css("#token-forget")).await;
        let status = text_at(&c, "#token-status").await;
        assert_eq!(status, "");
        let field = c
            .find(Locator::Css("#turn-1 details.fork input.token-field"))
            .await
            .unwrap();
        assert_eq!(
            field.attr("hidden").await.unwrap(),
            None,
            "the form asks for the token again"
        );

        // The token, typed once, kept for the tab; then Fork from here on turn 2.
        c.goto(&format!("{base}{budget_path}")).await.unwrap();
        type_into(&c, "#token-input", TOKEN).await;
        click(&c, Locator::Css("#token-form button")).await;
        wait_for_text(&c, "kept for this tab", 5).await;
        click(&c, Locator::Css("#turn-2 details.fork summary")).await;
        let token_field = c
            .find(Locator::Css("#turn-2 details.fork input[name=token]"))
            .await
            .unwrap();
        assert!(
            !token_field.is_displayed().await.unwrap(),
            "the kept token is not asked again"
        );
        type_into(&c, "#turn-2 details.fork input[name=label]", "from-browser").await;
        type_into(
            &c,
            "#turn-2 details.fork input[name=reason]",
            "try another answer",
        )
        .await;
        click(&c, Locator::Css("#turn-2 details.fork button[type=submit]")).await;
        let fork_path = wait_for_path(&c, "/ui/sessions/", &budget_path, 10).await;
        let fork = fork_path.trim_start_matches("/ui/sessions/").to_string();
        let made = rest(&base, &format!("/sessions/{fork}")).await;
        assert_eq!(made["parent"], json!(budget));
        assert_eq!(made["branch"], json!("from-browser"));
        assert_eq!(made["forked_at_index"], json!(3), "forked after turn 2");
        assert_eq!(
            c.find_all(Locator::Css("li.turn")).await.unwrap().len(),
            3,
            "the fork shows the three turns it inherits"
        );

        // The new branch is in the tree, marked as the one it was opened from.
        click(&c, Locator::LinkText("Fork tree")).await;
        wait_for_path(&c, &format!("{fork_path}/tree"), "", 10).await;
        let current = c
            .find(Locator::Css("ul.tree a[aria-current=page]"))
            .await
            .unwrap();
        assert_eq!(current.text().await.unwrap(), "from-browser");

        // Diff against the parent: the parent's later turns are LeftOnly.
        c.goto(&format!("{base}{fork_path}")).await.unwrap();
        click(&c, Locator::LinkText("Diff against parent")).await;
        wait_for_path(&c, "/ui/diff", "", 10).await;
        let diff = rest(&base, &format!("/sessions/{budget}/diff/{fork}")).await;
        let left = diff["a_tail"].as_array().unwrap().len();
        assert!(left > 0);
        assert_eq!(
            c.find_all(Locator::Css("tr.left-only"))
                .await
                .unwrap()
                .len(),
            left
        );
        let shared = c
            .find(Locator::Css("details.prefix summary"))
            .await
            .unwrap();
        assert_eq!(shared.text().await.unwrap(), "The shared history (3 turns)");

        // The hostile turn is shown as text and never runs.
        c.goto(&format!("{base}/ui/sessions/{booking}"))
            .await
            .unwrap();
        let shown = text_at(&c, &format!("#turn-{hostile_index} .content")).await;
        assert!(
            shown.contains("<script>window.pwned = 1</script>"),
            "{shown}"
        );
        let code = c
            .find(Locator::Css(&format!("#turn-{hostile_index} pre.code")))
            .await
            .unwrap();
        assert_eq!(code.text().await.unwrap().trim(), "fn main() {}");
        let pwned = c
            .execute("return typeof window.pwned;", vec![])
            .await
            .unwrap();
        assert_eq!(pwned, json!("undefined"), "no stored script ran");
        assert!(c
            .find_all(Locator::Css(".content img"))
            .await
            .unwrap()
            .is_empty());

        // The shared file: `export --format html` through the running server, opened
        // from a file: URL.
        let file = tempfile::Builder::new().suffix(".html").tempfile().unwrap();
        let export = Command::new(env!("CARGO_BIN_EXE_forktrail"))
            .arg("--store")
            .arg(format!("{base}/sparql"))
            .args(["export", &booking, "--format", "html", "-o"])
            .arg(file.path())
            .output()
            .unwrap();
        assert!(
            export.status.success(),
            "{}",
            String::from_utf8_lossy(&export.stderr)
        );
        let html = std::fs::read_to_string(file.path()).unwrap();
        assert!(
            !html.contains("<script"),
            "no script, and the stored one escaped"
        );
        assert!(!html.contains("<link"), "nothing fetched");
        c.goto(&format!("file://{}", file.path().display()))
            .await
            .unwrap();
        let title = c.title().await.unwrap();
        assert!(title.contains(&booking), "{title}");
        let offline = c.find_all(Locator::Css("li.turn")).await.unwrap();
        assert_eq!(
            offline.len() as u64,
            hostile_index + 1,
            "every turn of the branch"
        );
        let pwned = c
            .execute("return typeof window.pwned;", vec![])
            .await
            .unwrap();
        assert_eq!(pwned, json!("undefined"), "no stored script ran offline");
        let tree_labels = c.find_all(Locator::Css("ul.tree li.node")).await.unwrap();
        assert_eq!(tree_labels.len(), 5, "the family's five branches");
        screenshot(&c, "export.png").await;
        c.close().await.unwrap();
    });
}

#[test]
fn what_if_from_here_runs_against_the_test_model_and_completes() {
    let Some(demo) = demo_with_test_model() else {
        return;
    };
    let (base, endpoint) = (demo.server.base.clone(), &demo.endpoint);
    runtime().block_on(async {
        let c = demo.on_the_root().await;
        type_into(&c, "#token-input", TOKEN).await;
        click(&c, Locator::Css("#token-form button")).await;
        wait_for_text(&c, "kept for this tab", 5).await;
        // Turn 1 is the user's question: the what-if answers it (turn 2) anew.
        click(&c, Locator::Css("#turn-1 details.what-if summary")).await;
        type_into(
            &c,
            "#turn-1 details.what-if input[name=model]",
            "gemma-3-270m",
        )
        .await;
        type_into(&c, "#turn-1 details.what-if input[name=max_tokens]", "16").await;
        let offered = prop_at(&c, "#turn-1 details.what-if select[name=endpoint]", "value").await;
        assert_eq!(offered.as_deref(), Some(endpoint.as_str()));
        click(
            &c,
            Locator::Css("#turn-1 details.what-if button[type=submit]"),
        )
        .await;
        // The dry run's estimate comes first; nothing has run yet.
        let estimate = wait_for_text(&c, "Estimated tokens", 10).await;
        assert!(estimate.contains(endpoint.as_str()));
        let tokens: u64 = text_at(&c, "dd.tokens")
            .await
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(tokens > 0);
        assert_eq!(
            rest(&base, "/jobs").await["jobs"],
            json!([]),
            "the estimate ran nothing"
        );
        click(&c, Locator::Css("button[name=confirm]")).await;
        let job_path = wait_for_path(&c, "/ui/jobs/", "", 10).await;
        // The page follows the job until it ends.
        let status = job_end(&c, 300).await;
        assert_eq!(status, "complete", "{}", c.source().await.unwrap());
        assert_eq!(
            c.current_url().await.unwrap().path(),
            job_path,
            "the page reloaded itself"
        );
        click(&c, Locator::Css("#job-fork")).await;
        wait_for_path(&c, "/ui/sessions/", "", 10).await;
        let answer = text_at(&c, "#turn-2 .model").await;
        assert_eq!(answer, "gemma-3-270m-q4_k_m", "the model's own id");
        c.close().await.unwrap();
    });
}

/// Waits (up to `seconds`) until an element matches `css`.
async fn wait_for_css(c: &Client, css: &str, seconds: u64) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while c.find(Locator::Css(css)).await.is_err() {
        assert!(
            Instant::now() < deadline,
            "nothing matches {css} after {seconds} s: {}",
            c.source().await.unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Types `keys` (text, or WebDriver key codes such as Tab `\u{e004}`) into whatever has
/// the focus, as a keyboard does.
async fn keys(c: &Client, keys: &str) {
    use fantoccini::actions::{InputSource, KeyAction, KeyActions};
    let mut actions = KeyActions::new("keyboard".into());
    for key in keys.chars() {
        actions = actions
            .then(KeyAction::Down { value: key })
            .then(KeyAction::Up { value: key });
    }
    c.perform_actions(actions).await.unwrap();
}

/// Ctrl+`key` (a WebDriver key code), as one chord.
async fn ctrl(c: &Client, key: char) {
    use fantoccini::actions::{InputSource, KeyAction, KeyActions};
    let control = '\u{e009}';
    let chord = KeyActions::new("keyboard".into())
        .then(KeyAction::Down { value: control })
        .then(KeyAction::Down { value: key })
        .then(KeyAction::Up { value: key })
        .then(KeyAction::Up { value: control });
    c.perform_actions(chord).await.unwrap();
}

const TAB: &str = "\u{e004}";
const ENTER: &str = "\u{e007}";

/// Presses Tab until the focus is on an element matching `css` (within `limit`
/// presses); how many it took.
async fn tab_to(c: &Client, css: &str, limit: usize) -> usize {
    for n in 0..limit {
        let here = c
            .execute(
                "return document.activeElement.matches(arguments[0])",
                vec![json!(css)],
            )
            .await
            .unwrap();
        if here == json!(true) {
            return n;
        }
        keys(c, TAB).await;
    }
    panic!("{css} not reached in {limit} presses of Tab");
}

/// The `data-status` of the element `css` names ("" while there is none). A page that
/// follows a running job reloads itself: an element found just before a reload is stale
/// by the time it is read, and reads as "" too, so callers poll on.
async fn data_status(c: &Client, css: &str) -> String {
    match c.find(Locator::Css(css)).await {
        Ok(e) => e
            .attr("data-status")
            .await
            .ok()
            .flatten()
            .unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// Waits until the job page shows the job ended; its status.
async fn job_end(c: &Client, seconds: u64) -> String {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        let status = data_status(c, "#job-status").await;
        if !status.is_empty() && status != "running" {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "the job still runs after {seconds} s"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[test]
fn by_keyboard_alone_a_person_edits_a_turn_the_model_answers_and_the_branch_goes_on() {
    let Some(demo) = demo_with_test_model() else {
        return;
    };
    let (base, root) = (demo.server.base.clone(), &demo.root);
    runtime().block_on(async {
        let c = demo.on_the_root().await;
        // The token, typed once and kept for the tab.
        tab_to(&c, "#token-input", 20).await;
        keys(&c, &format!("{TOKEN}{ENTER}")).await;
        wait_for_text(&c, "kept for this tab", 5).await;
        // Edit turn 1 (the user's question) and send it, the model to answer: the
        // turns are one stop, j moves to the next.
        tab_to(&c, "ol.turns > li.turn", 40).await;
        keys(&c, "j").await;
        tab_to(&c, "#turn-1 details.edit summary", 10).await;
        keys(&c, ENTER).await;
        tab_to(&c, "#turn-1 details.edit textarea", 5).await;
        // To the end of the text (Ctrl+End), where the edit goes.
        ctrl(&c, '\u{e010}').await;
        keys(&c, " Answer in one word.").await;
        tab_to(&c, "#turn-1 details.edit details.answer summary", 5).await;
        keys(&c, ENTER).await;
        tab_to(&c, "#turn-1 details.edit input[name=model]", 5).await;
        keys(&c, "gemma-3-270m").await;
        tab_to(&c, "#turn-1 details.edit input[name=max_tokens]", 5).await;
        keys(&c, "16").await;
        tab_to(&c, "#turn-1 details.edit button.send-answer", 10).await;
        screenshot(&c, "edit.png").await;
        keys(&c, ENTER).await;
        // Back in the thread, the new branch's, where the answer shows once written.
        let path = wait_for_path(&c, "/ui/sessions/", &format!("/ui/sessions/{root}"), 10).await;
        wait_for_css(&c, "ol.turns > li.turn:not(.pending)#turn-2 .model", 300).await;
        let fork = path.trim_start_matches("/ui/sessions/").to_string();
        assert_ne!(&fork, root);
        let info = rest(&base, &format!("/sessions/{fork}")).await;
        assert_eq!(
            (info["parent"].as_str(), info["forked_at_index"].as_u64()),
            (Some(root.as_str()), Some(1))
        );
        let turns = rest(&base, &format!("/sessions/{fork}/replay")).await;
        let text = |i: usize| turns[i]["content"].as_str().unwrap().to_string();
        assert!(text(1).ends_with("Answer in one word."), "{turns}");
        let model = text_at(&c, "#turn-2 .model").await;
        assert_eq!(
            model, "gemma-3-270m-q4_k_m",
            "the model answered the edited turn"
        );
        // The composer goes on with the new branch.
        tab_to(&c, "#composer-content", 60).await;
        keys(&c, "Thanks, that settles it.").await;
        tab_to(&c, "#composer button.send", 10).await;
        keys(&c, ENTER).await;
        wait_for_text(&c, "Thanks, that settles it.</div>", 10).await;
        let turns = rest(&base, &format!("/sessions/{fork}/replay")).await;
        assert_eq!(turns.as_array().unwrap().len(), 4);
        assert_eq!(turns[3]["role"], "user");
        // The new branch is in the drawn tree and in the outline.
        c.goto(&format!("{base}/ui/sessions/{fork}/tree"))
            .await
            .unwrap();
        let branch = info["branch"].as_str().unwrap();
        let drawn = prop_at(&c, "svg a[aria-current=page] title", "textContent")
            .await
            .unwrap();
        assert!(
            drawn.starts_with(&format!("{branch} @1 · 3 own")),
            "{drawn}"
        );
        let outline = text_at(&c, &format!("#outline-{fork} a")).await;
        assert_eq!(outline, branch);
        screenshot(&c, "drawn-tree.png").await;
        // Fork from here, by keyboard too: it lands in the new branch's composer.
        c.goto(&format!("{base}/ui/sessions/{root}")).await.unwrap();
        tab_to(&c, "#turn-0 details.fork summary", 40).await;
        keys(&c, ENTER).await;
        tab_to(&c, "#turn-0 details.fork button[type=submit]", 10).await;
        keys(&c, ENTER).await;
        let path = wait_for_path(&c, "/ui/sessions/", &format!("/ui/sessions/{root}"), 10).await;
        let url = c.current_url().await.unwrap();
        assert_eq!(url.fragment(), Some("composer"), "{url}");
        c.find(Locator::Css("#composer-content")).await.unwrap();
        assert_ne!(path, format!("/ui/sessions/{root}"));
        c.close().await.unwrap();
    });
}

/// Posts `body` as JSON with the test token; the answer's JSON.
async fn post_json(base: &str, path: &str, body: Value) -> Value {
    let r = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{path}: {}", r.status());
    r.json().await.unwrap()
}

/// The width of the first element matching `css`, and the page's scroll and window
/// widths.
async fn widths(c: &Client, css: &str) -> (f64, f64, f64) {
    let v = c
        .execute(
            "const e = document.querySelector(arguments[0]);
             return [e.getBoundingClientRect().width,
                     document.documentElement.scrollWidth, window.innerWidth];",
            vec![json!(css)],
        )
        .await
        .unwrap();
    let n = |i: usize| v[i].as_f64().unwrap();
    (n(0), n(1), n(2))
}

#[test]
fn the_diff_of_two_1000_turn_branches_reads_in_pages_with_wide_columns_on_any_screen() {
    let Some(driver) = chromedriver() else { return };
    let server = serve(&[]);
    let base = server.base.clone();
    runtime().block_on(async {
        // A root of 10 turns, and two branches of 1,000 turns each from its end: every
        // fifth turn the same on both, the rest rewritten.
        let turns = |side: &str| -> Vec<Value> {
            (0..1000)
                .map(|i| {
                    let role = if i % 2 == 0 { "user" } else { "assistant" };
                    let text = if i % 5 == 4 {
                        format!("Turn {i} says the same on both sides.")
                    } else {
                        format!("Turn {i} on the {side} side, with a few words in common.")
                    };
                    json!({"role": role, "content": text})
                })
                .collect()
        };
        let root = post_json(&base, "/sessions", json!({"title": "long", "turns":
            (0..10).map(|i| json!({"role": "user", "content": format!("root {i}")})).collect::<Vec<_>>()})).await;
        let root = root["session"].as_str().unwrap().to_string();
        let mut sides = Vec::new();
        for side in ["left", "right"] {
            let fork = post_json(&base, &format!("/sessions/{root}/fork"), json!({"label": side})).await;
            let fork = fork["session"].as_str().unwrap().to_string();
            post_json(&base, &format!("/sessions/{fork}/turns"), Value::Array(turns(side))).await;
            sides.push(fork);
        }
        let c = browser(&driver).await;
        for (w, h) in [(1400, 900), (390, 844)] {
            c.set_window_size(w, h).await.unwrap();
            c.goto(&format!("{base}/ui/diff?a={}&b={}", sides[0], sides[1]))
                .await
                .unwrap();
            let rows = c.find_all(Locator::Css("table.diff tbody tr")).await.unwrap();
            assert_eq!(rows.len(), 100, "a page of rows at {w}");
            let pages = c.find(Locator::Css("nav.pages span")).await.unwrap().text().await.unwrap();
            assert_eq!(pages, "rows 1–100 of 1000", "{w}");
            assert_eq!(c.find_all(Locator::Css("tr.same")).await.unwrap().len(), 20);
            assert!(!c.find_all(Locator::Css("tr.modified span.added")).await.unwrap().is_empty());
            let (table, scroll, inner) = widths(&c, "table.diff").await;
            assert!(scroll <= inner, "no sideways scrolling at {w}: {scroll} > {inner}");
            for side in [2, 3] {
                let (cell, _, _) =
                    widths(&c, &format!("table.diff tbody tr td:nth-child({side})")).await;
                assert!(cell >= 0.4 * table, "column {side} is {cell} of {table} at {w}");
            }
            screenshot(&c, &format!("diff-{w}.png")).await;
            click(&c, Locator::LinkText("later rows ›")).await;
            let pages = wait_for_text(&c, "rows 101–200 of 1000", 10).await;
            assert!(pages.contains("‹ earlier rows"));
        }
        c.close().await.unwrap();
    });
}

/// axe-core (from npm: `make test` installs it and sets `FORKTRAIL_AXE` to its
/// `axe.min.js`), or `None` (with a note) outside CI.
fn axe_source() -> Option<String> {
    match std::env::var("FORKTRAIL_AXE")
        .ok()
        .map(std::fs::read_to_string)
    {
        Some(Ok(source)) => Some(source),
        _ if std::env::var_os("CI").is_some() => {
            panic!("no axe-core (FORKTRAIL_AXE): `make test` installs it from npm")
        }
        _ => {
            eprintln!("skipped: no axe-core (run `make test`, or set FORKTRAIL_AXE)");
            None
        }
    }
}

/// The serious and critical axe-core violations of the page shown: rule, impact,
/// and the first elements it names.
async fn serious_violations(c: &Client, axe: &str) -> Vec<String> {
    c.execute(axe, vec![]).await.unwrap();
    let result = c
        .execute_async(
            "const done = arguments[arguments.length - 1];
             axe.run(document, {resultTypes: ['violations']})
                .then(r => done(r.violations), e => done([{id: 'axe failed: ' + e, impact: 'critical', nodes: []}]));",
            vec![],
        )
        .await
        .unwrap();
    result
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| matches!(v["impact"].as_str(), Some("serious" | "critical")))
        .map(|v| {
            let nodes: Vec<String> = v["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .take(3)
                .map(|n| {
                    format!(
                        "{} {}",
                        n["target"],
                        n["failureSummary"].as_str().unwrap_or("")
                    )
                })
                .collect();
            format!(
                "{} ({}): {}",
                v["id"].as_str().unwrap_or("?"),
                v["impact"],
                nodes.join(" | ")
            )
        })
        .collect()
}

/// The two colour schemes a page is looked at in (each a browser of its own), and the
/// two window sizes: a desktop and a phone.
const SCHEMES: [(&str, &[&str]); 2] = [("light", &[]), ("dark", &["--force-dark-mode"])];
const WIDTHS: [(u32, u32); 2] = [(1400, 900), (390, 844)];

/// How the page shown is wider than its window, naming the innermost elements that
/// stick out; `None` when it fits.
async fn past_the_edge(c: &Client) -> Option<String> {
    let fit = c
        .execute(
            "const w = window.innerWidth, out = [];
             for (const e of document.body.querySelectorAll('*:not(svg *)')) {
               const r = e.getBoundingClientRect();
               if (r.right > w + 1 && ![...e.children].some(c => c.getBoundingClientRect().right > w + 1))
                 out.push(e.tagName.toLowerCase() + (e.className ? '.' + e.className : '') + ' ' + Math.round(r.right));
             }
             return [document.documentElement.scrollWidth, w, out.slice(0, 5)];",
            vec![],
        )
        .await
        .unwrap();
    (fit[0].as_f64() > fit[1].as_f64())
        .then(|| format!("{} wide in {}, past the edge: {}", fit[0], fit[1], fit[2]))
}

/// `serve --demo` offering one model endpoint nothing listens on, and that endpoint.
fn serve_offering_nothing() -> (Serve, String) {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    (
        serve(&["--model-endpoint".into(), endpoint.clone()]),
        endpoint,
    )
}

#[test]
fn every_page_fits_a_phone_and_a_desktop_and_axe_finds_nothing_serious_light_or_dark() {
    let Some(driver) = chromedriver() else { return };
    let Some(axe) = axe_source() else { return };
    // The job and the comparison end failed, and their pages still have to read well.
    let (server, endpoint) = serve_offering_nothing();
    let base = server.base.clone();
    let pages = runtime().block_on(async {
        let sessions = rest(&base, "/sessions").await;
        let root = session_on(&sessions, "main");
        let fork = session_on(&sessions, "budget");
        let job = post_json(&base, &format!("/sessions/{root}/regenerate"),
            json!({"at": 2, "model": "m", "endpoint": endpoint})).await;
        let comparison = post_json(&base, &format!("/sessions/{root}/compare"),
            json!({"at": 2, "arms": [{"model": "m", "endpoint": endpoint}, {"model": "n", "endpoint": endpoint}]})).await;
        vec![
            "/".to_string(),
            "/?q=train".into(),
            format!("/ui/sessions/{root}"),
            format!("/ui/sessions/{fork}"),
            format!("/ui/sessions/{root}/tree"),
            format!("/ui/sessions/{root}/tree?turns=all&q=train"),
            format!("/ui/diff?a={root}&b={fork}"),
            format!("/ui/sessions/{root}/turns/1"),
            "/ui/sparql?name=audit-turn-origin".into(),
            format!("/ui/jobs/{}", job["job"].as_str().unwrap()),
            // The answer that failed, shown in the thread at its turn.
            format!("/ui/sessions/{root}?job={}", job["job"].as_str().unwrap()),
            format!("/ui/sessions/{root}/compare?at=2"),
            format!("/ui/comparisons/{}", comparison["comparison"].as_str().unwrap()),
            format!("/ui/sessions/{root}/turns/999"),
        ]
    });
    let mut problems = Vec::new();
    runtime().block_on(async {
        for (scheme, switches) in SCHEMES {
            let c = browser_with(&driver, switches).await;
            for (w, h) in WIDTHS {
                c.set_window_size(w, h).await.unwrap();
                for path in &pages {
                    c.goto(&format!("{base}{path}")).await.unwrap();
                    let dark = c
                        .execute(
                            "return matchMedia('(prefers-color-scheme: dark)').matches",
                            vec![],
                        )
                        .await
                        .unwrap();
                    assert_eq!(
                        dark,
                        json!(scheme == "dark"),
                        "{scheme} mode is what the page sees"
                    );
                    if let Some(out) = past_the_edge(&c).await {
                        problems.push(format!("{path} at {w} px: {out}"));
                    }
                    for v in serious_violations(&c, &axe).await {
                        problems.push(format!("{path} at {w} px, {scheme}: {v}"));
                    }
                }
            }
            c.close().await.unwrap();
        }
    });
    none_of(&problems);
}

/// Fails naming every problem found, if any.
fn none_of(problems: &[String]) {
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The text of the element `css` finds.
async fn text_at(c: &Client, css: &str) -> String {
    c.find(Locator::Css(css))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The property `name` of the element `css` finds.
async fn prop_at(c: &Client, css: &str, name: &str) -> Option<String> {
    c.find(Locator::Css(css))
        .await
        .unwrap()
        .prop(name)
        .await
        .unwrap()
}

/// The text of the figure `key` in arm `arm`'s column.
async fn figure(c: &Client, arm: &str, key: &str) -> String {
    c.find(Locator::Css(&format!(
        "#figures td[data-arm='{arm}'][data-figure='{key}']"
    )))
    .await
    .unwrap()
    .text()
    .await
    .unwrap()
}

/// Which arms' cells are marked as diverging, and at which turn.
async fn divergences(c: &Client) -> Value {
    c.execute(
        "return [...document.querySelectorAll('#turns td.diverges')].map(td => \
         [td.dataset.arm, td.parentElement.dataset.index, td.innerText]);",
        vec![],
    )
    .await
    .unwrap()
}

#[test]
fn a_comparison_shows_its_arms_side_by_side_and_another_starts_from_a_turn() {
    let Some(driver) = chromedriver() else { return };
    let models = travel::two_models("unused");
    let store = Arc::new(forktrail::Store::in_memory().unwrap());
    let root = travel::session(&store, "trip");
    let arm = |name: &str, model: &str| forktrail::Arm {
        name: Some(name.into()),
        model: model.into(),
        endpoint: Some(models.url.clone()),
        ..Default::default()
    };
    let options = forktrail::CompareOptions {
        at: 2,
        arms: vec![arm("same", "model-a"), arm("other", "model-b")],
        ..Default::default()
    };
    let made = store.compare(&root, &options).unwrap();
    let addr = common::serve_in_process(
        Arc::clone(&store),
        forktrail::server::ServerConfig {
            token: Some(TOKEN.into()),
            model_endpoints: vec![models.url.clone()],
            ..Default::default()
        },
    );
    let base = format!("http://{addr}");
    runtime().block_on(async {
        let c = browser(&driver).await;
        c.goto(&format!("{base}/ui/comparisons/{}", made.comparison))
            .await
            .unwrap();
        let mut columns = Vec::new();
        for th in c.find_all(Locator::Css("#figures thead th")).await.unwrap() {
            columns.push(th.attr("data-arm").await.unwrap());
        }
        let names = [None, Some("baseline"), Some("same"), Some("other")];
        assert_eq!(columns, names.map(|n| n.map(String::from)));
        assert_eq!(figure(&c, "same", "input_tokens").await, "520");
        assert_eq!(figure(&c, "other", "input_tokens").await, "180");
        assert_eq!(figure(&c, "baseline", "input_tokens").await, "not measured");

        // Side by side: turn 4's row holds every arm's turn, at one height, in order.
        let cells = c
            .execute(
                "return [...document.querySelectorAll('#turns tr[data-index=\"4\"] td')].map(td => \
                 { const r = td.getBoundingClientRect(); return [td.dataset.arm, r.top, r.left, td.innerText]; });",
                vec![],
            )
            .await
            .unwrap();
        let cells = cells.as_array().unwrap();
        assert_eq!(cells.len(), 3, "{cells:?}");
        let arms: Vec<&str> = cells.iter().map(|c| c[0].as_str().unwrap()).collect();
        assert_eq!(arms, ["baseline", "same", "other"]);
        let top = cells[0][1].as_f64().unwrap();
        let mut left = f64::MIN;
        for cell in cells {
            assert_eq!(cell[1].as_f64().unwrap(), top, "{cells:?}");
            assert!(cell[2].as_f64().unwrap() > left, "{cells:?}");
            left = cell[2].as_f64().unwrap();
        }
        assert!(cells[1][3].as_str().unwrap().contains("It is 18C and sunny."));
        assert!(cells[2][3].as_str().unwrap().contains("Sunny, 18C."));
        // The divergence: on the diverging arm only, in words, and in its heading.
        let marked = divergences(&c).await;
        assert_eq!(marked.as_array().unwrap().len(), 1, "{marked}");
        assert_eq!(marked[0][0], "other");
        assert_eq!(marked[0][1], "4");
        assert!(marked[0][2].as_str().unwrap().contains("diverges here"));
        let heading = |arm: &'static str| {
            let c = &c;
            async move {
                c.find(Locator::Css(&format!("#turns th[data-arm='{arm}']")))
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap()
            }
        };
        assert!(heading("other").await.contains("diverges at 4"));
        assert!(heading("same").await.contains("as recorded throughout"));
        // The shared prefix is folded.
        let prefix = c.find(Locator::Css("details.prefix")).await.unwrap();
        assert_eq!(prefix.prop("open").await.unwrap().as_deref(), Some("false"));
        let hidden = c
            .find(Locator::Css("details.prefix #turn-1"))
            .await
            .unwrap();
        assert!(!hidden.is_displayed().await.unwrap());
        screenshot(&c, "comparison.png").await;
        c.execute("document.querySelector('#turns').scrollIntoView()", vec![])
            .await
            .unwrap();
        screenshot(&c, "comparison-turns.png").await;

        // From a turn of the session: the form, its estimate, then the comparison.
        c.goto(&format!("{base}/ui/sessions/{root}")).await.unwrap();
        type_into(&c, "#token-input", TOKEN).await;
        click(&c, Locator::Css("#token-form button")).await;
        wait_for_text(&c, "kept for this tab", 5).await;
        click(&c, Locator::Css("#turn-1 a.compare")).await;
        wait_for_path(&c, &format!("/ui/sessions/{root}/compare"), "", 10).await;
        let first = c.find(Locator::Css("#compare-arm-1")).await.unwrap();
        assert!(first.is_selected().await.unwrap(), "the session's model is ticked");
        let model = c.find(Locator::Css("#compare-model-1")).await.unwrap();
        assert_eq!(model.prop("value").await.unwrap().as_deref(), Some("model-a"));
        click(&c, Locator::Css("#compare-arm-2")).await;
        type_into(&c, "#compare-model-2", "model-b").await;
        let endpoint = c.find(Locator::Css("#compare-endpoint-2")).await.unwrap();
        assert_eq!(
            endpoint.prop("value").await.unwrap().as_deref(),
            Some(models.url.as_str())
        );
        screenshot(&c, "compare-form.png").await;
        let asked = models.requests().len();
        click(&c, Locator::Css("form.compare button[type=submit]")).await;
        wait_for_text(&c, "Nothing has been sent or written yet", 10).await;
        assert_eq!(models.requests().len(), asked, "the estimate sent nothing");
        click(&c, Locator::Css("button[name=confirm]")).await;
        let path = wait_for_path(&c, "/ui/comparisons/", "", 10).await;
        // The page follows the comparison until its arms have ended.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let status = data_status(&c, "#comparison-status").await;
            if status == "ended" {
                break;
            }
            assert!(Instant::now() < deadline, "still {status:?} after 60 s");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        assert_eq!(c.current_url().await.unwrap().path(), path);
        assert_eq!(figure(&c, "model-a", "input_tokens").await, "520");
        assert_eq!(figure(&c, "model-b", "output_tokens").await, "15");
        assert_eq!(figure(&c, "model-a", "reached_end").await, "yes");
        let marked = divergences(&c).await;
        assert_eq!(marked.as_array().unwrap().len(), 1, "{marked}");
        assert_eq!(marked[0][0], "model-b");
        assert_eq!(store.comparisons().unwrap().len(), 2);
        c.close().await.unwrap();
    });
}
