//! Keys stay secret and go only where their owner sent them, against model endpoints and
//! stores that echo the credentials they receive: the binary and `forktrail serve` are
//! run with the keys, the server's token and a store's credentials in their
//! environment, and every surface that shows what an endpoint or a store said (the
//! CLI's output, `jobs show`, `export`, `/jobs`, `/comparisons`, `/sparql`, the web UI,
//! MCP's `comparison` and `job_status`, the store's own files) is searched for them.
#![cfg(all(feature = "rocksdb", feature = "server"))]

use crate::common;

use common::cli::serving;
use common::stub::{self, Stub};
use common::{free_port, serve_in_process, session_with};
use forktrail::{NewTurn, Role, Store};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Secrets made for one test, so that no other text holds them by chance.
struct Secrets {
    openai: String,
    anthropic: String,
    token: String,
}

impl Secrets {
    fn new() -> Self {
        let fresh = |prefix: &str| format!("{prefix}{}", uuid::Uuid::now_v7().simple());
        Self {
            openai: fresh("sk-test-openai-"),
            anthropic: fresh("sk-ant-test-"),
            token: fresh("server-token-"),
        }
    }

    /// Panics naming the surface if `text` holds any of them.
    fn absent_from(&self, surface: &str, text: &str) {
        for (what, secret) in [
            ("$OPENAI_API_KEY", &self.openai),
            ("$ANTHROPIC_API_KEY", &self.anthropic),
            ("the server token", &self.token),
        ] {
            assert!(
                !text.contains(secret.as_str()),
                "{surface} shows {what}:\n{text}"
            );
        }
    }
}

/// A store directory holding session `trip`: 0 system, 1 user, 2 assistant, 3 user,
/// 4 assistant.
fn store_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let s = Store::open(&path).unwrap();
    let trip = session_with(&s, "trip", 0);
    s.append_many(
        &trip,
        vec![
            NewTurn::new(Role::System, "You are a travel agent."),
            NewTurn::new(Role::User, "Weather in Paris?"),
            NewTurn::new(Role::Assistant, "Sunny.").model("model-a"),
            NewTurn::new(Role::User, "And the train?"),
            NewTurn::new(Role::Assistant, "49 EUR.").model("model-a"),
        ],
    )
    .unwrap();
    (dir, path)
}

/// `forktrail --store STORE ARGS`, with the keys, the token and the stub as the
/// providers' configured endpoints in its environment.
fn forktrail(store: &Path, secrets: &Secrets, stub: &Stub, args: &[&str]) -> Command {
    let mut command = common::cli::forktrail(store, args);
    command
        .env("OPENAI_API_KEY", &secrets.openai)
        .env("ANTHROPIC_API_KEY", &secrets.anthropic)
        .env("FORKTRAIL_TOKEN", &secrets.token)
        .env("OPENAI_BASE_URL", &stub.url)
        .env("ANTHROPIC_BASE_URL", anthropic_endpoint(stub))
        .stdin(Stdio::null());
    command
}

/// The stub as an Anthropic endpoint (requests go to `{endpoint}/v1/messages`).
fn anthropic_endpoint(stub: &Stub) -> String {
    stub.url.trim_end_matches("/v1").to_string()
}

/// Runs a command; returns its stdout and stderr together, and whether it succeeded.
fn run(command: Command) -> (String, bool) {
    let (stdout, stderr, ok) = run_apart(command);
    (format!("{stdout}{stderr}"), ok)
}

/// Runs a command; returns its stdout, its stderr, and whether it succeeded.
fn run_apart(mut command: Command) -> (String, String, bool) {
    let out = command.output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

/// The value of header `name` of every request the stub received.
fn header_values(stub: &Stub, name: &str) -> Vec<Option<String>> {
    stub.heads
        .lock()
        .unwrap()
        .iter()
        .map(|(_, headers)| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        })
        .collect()
}

/// Every byte of every file under `dir`, as text (lossy): what the store keeps on disk.
fn files_under(dir: &Path) -> String {
    let mut out = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out += &files_under(&path);
        } else if let Ok(bytes) = std::fs::read(&path) {
            out += &String::from_utf8_lossy(&bytes);
        }
    }
    out
}

/// Polls `GET path` until its `status` is no longer `running`; returns its text.
fn settled(http: &reqwest::blocking::Client, url: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = http.get(url).send().unwrap().text().unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        if value["status"] != "running" {
            return text;
        }
        assert!(Instant::now() < deadline, "{url} still running: {text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An MCP tool call over `/mcp` (the stateless protocol) that must succeed; the
/// answer's text.
fn mcp_call(http: &reqwest::blocking::Client, base: &str, tool: &str, args: Value) -> String {
    let (value, text) = mcp_answer(http, base, None, tool, args);
    assert_eq!(value["result"]["isError"], false, "{text}");
    text
}

/// An MCP tool call over `/mcp` (the stateless protocol), with the bearer `token` if
/// any; the answer, as JSON and as text.
fn mcp_answer(
    http: &reqwest::blocking::Client,
    base: &str,
    token: Option<&str>,
    tool: &str,
    args: Value,
) -> (Value, String) {
    let params = json!({
        "name": tool, "arguments": args,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}
    });
    let mut request = http
        .post(format!("{base}/mcp"))
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", tool)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let text = response.text().unwrap();
    (serde_json::from_str(&text).unwrap(), text)
}

/// Guards against an endpoint (or a gateway before it) that answers an error quoting
/// the request's `Authorization` or `x-api-key` header: the text was stored as the
/// job's or run's error, and anyone who could read the server got the key back.
#[test]
fn an_endpoint_echoing_the_keys_it_received_leaves_no_key_on_any_surface_for_either_provider() {
    let secrets = Secrets::new();
    let (dir, store) = store_dir();
    // The stub also quotes the server's token, as a gateway's log line might.
    let stub = stub::echoing_credentials(&secrets.token);
    let cli = |args: &[&str]| run(forktrail(&store, &secrets, &stub, args));
    let mut surfaces: Vec<(String, String)> = Vec::new();

    // Through the CLI: a regeneration the endpoint refuses, one it answers with the key
    // in its words, and a comparison with an arm of each provider.
    let (refused, ok) = cli(&["regenerate", "trip", "--at", "2", "--model", "m"]);
    assert!(!ok, "{refused}");
    assert!(
        refused.contains("Incorrect API key provided: [redacted]"),
        "the endpoint's words are kept, the key taken out: {refused}"
    );
    surfaces.push(("regenerate's error".into(), refused));
    let (answered, ok) = cli(&["regenerate", "trip", "--at", "2", "--model", "echo-ok"]);
    assert!(ok, "{answered}");
    surfaces.push(("regenerate's answer".into(), answered));
    let (compared, warned, _) = run_apart(forktrail(
        &store,
        &secrets,
        &stub,
        &[
            "compare",
            "trip",
            "--at",
            "2",
            "--arm",
            "name=openai,model=m",
            "--arm",
            "name=anthropic,model=m,provider=anthropic",
            "--arm",
            "name=anthropic-ok,model=echo-ok,provider=anthropic",
            "--json",
        ],
    ));
    let comparison: Value =
        serde_json::from_str(&compared).unwrap_or_else(|e| panic!("{e}: {compared}{warned}"));
    let statuses: Vec<&str> = comparison["arms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["recorded", "failed", "failed", "complete"]);
    let detail = comparison["arms"][2]["detail"].as_str().unwrap();
    assert!(
        detail.contains("HTTP 401") && detail.contains("[redacted]"),
        "{detail}"
    );
    surfaces.push(("compare --json".into(), format!("{compared}{warned}")));
    // The keys reached the endpoints their owner configured: the echo was real.
    assert!(
        header_values(&stub, "authorization").contains(&Some(format!("Bearer {}", secrets.openai)))
    );
    assert!(header_values(&stub, "x-api-key").contains(&Some(secrets.anthropic.clone())));

    let jobs: Value = serde_json::from_str(&cli(&["jobs", "--json"]).0).unwrap();
    let job_ids: Vec<String> = jobs
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job"].as_str().unwrap().to_string())
        .collect();
    let comparison_id = comparison["comparison"].as_str().unwrap().to_string();
    for args in [
        vec!["jobs"],
        vec!["jobs", "--json"],
        vec!["jobs", "show", &job_ids[0]],
        vec!["jobs", "show", &job_ids[0], "--json"],
        vec!["jobs", "show", &comparison_id],
        vec!["comparisons", "--json"],
        vec!["export"],
        vec!["export", "--format", "nquads"],
        vec![
            "query",
            "SELECT ?s ?p ?o WHERE { GRAPH ?g { ?s ?p ?o } }",
            "--format",
            "csv",
        ],
    ] {
        let (text, ok) = cli(&args);
        assert!(ok, "{args:?}: {text}");
        surfaces.push((format!("forktrail {}", args.join(" ")), text));
    }

    // Through the server, on the same store: a regeneration and a comparison begun over
    // REST, then every read surface.
    let port = free_port();
    let mut command = forktrail(
        &store,
        &secrets,
        &stub,
        &["serve", "--port", &port.to_string()],
    );
    command.args([
        "--model-endpoint",
        &stub.url,
        "--model-endpoint",
        &anthropic_endpoint(&stub),
    ]);
    let (server, base) = serving(&mut command);
    let http = reqwest::blocking::Client::new();
    let post = |path: &str, body: Value| -> Value {
        let response = http
            .post(format!("{base}{path}"))
            .bearer_auth(&secrets.token)
            .json(&body)
            .send()
            .unwrap();
        assert!(
            response.status().is_success(),
            "{path}: {}",
            response.status()
        );
        response.json().unwrap()
    };
    let job = post("/sessions/trip/regenerate", json!({"at": 2, "model": "m2"}));
    let job = job["job"].as_str().unwrap().to_string();
    let rest_job = settled(&http, &format!("{base}/jobs/{job}"));
    assert!(rest_job.contains("[redacted]"), "{rest_job}");
    let begun = post(
        "/sessions/trip/compare",
        json!({"at": 2, "max_steps": 1, "arms": [
            {"name": "o", "model": "m2"},
            {"name": "a", "model": "m2", "provider": "anthropic"}]}),
    );
    let rest_comparison = begun["comparison"].as_str().unwrap().to_string();
    settled(&http, &format!("{base}/comparisons/{rest_comparison}"));
    let mut pages = vec![
        "/jobs".to_string(),
        "/comparisons".into(),
        "/".into(),
        "/ui/sessions/trip".into(),
        format!(
            "/sparql?query={}",
            urlencode("SELECT ?s ?p ?o ?g WHERE { GRAPH ?g { ?s ?p ?o } }")
        ),
    ];
    let get_json = |path: &str| -> Value {
        let response = http.get(format!("{base}{path}")).send().unwrap();
        response.json().unwrap()
    };
    let every_job = get_json("/jobs");
    for j in every_job["jobs"].as_array().unwrap() {
        let id = j["job"].as_str().unwrap();
        pages.push(format!("/jobs/{id}"));
        pages.push(format!("/ui/jobs/{id}"));
        surfaces.push((
            format!("MCP job_status {id}"),
            mcp_call(&http, &base, "job_status", json!({"job": id})),
        ));
    }
    for id in [&comparison_id, &rest_comparison] {
        pages.push(format!("/comparisons/{id}"));
        pages.push(format!("/ui/comparisons/{id}"));
        let shown = get_json(&format!("/comparisons/{id}"));
        for arm in shown["arms"].as_array().unwrap() {
            pages.push(format!("/ui/sessions/{}", arm["session"].as_str().unwrap()));
        }
        surfaces.push((
            format!("MCP comparison {id}"),
            mcp_call(&http, &base, "comparison", json!({"id": id})),
        ));
    }
    for page in &pages {
        let response = http.get(format!("{base}{page}")).send().unwrap();
        assert!(
            response.status().is_success(),
            "{page}: {}",
            response.status()
        );
        surfaces.push((format!("GET {page}"), response.text().unwrap()));
    }
    drop(server);
    surfaces.push(("the store's files".into(), files_under(dir.path())));

    for (surface, text) in &surfaces {
        secrets.absent_from(surface, text);
    }
    // What the endpoint said is there, its secrets taken out, on the surfaces that show
    // errors.
    let shown = surfaces
        .iter()
        .filter(|(s, t)| s.starts_with("GET /comparisons/") && t.contains("[redacted]"))
        .count();
    assert_eq!(shown, 2, "both comparisons show the scrubbed error");
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Guards against a key attached to whatever endpoint a request names: it goes to its
/// provider's API or to the endpoint its owner set beside it (`$OPENAI_BASE_URL`,
/// `$ANTHROPIC_BASE_URL`), and nowhere else, loopback included.
#[test]
fn a_key_is_sent_only_to_the_endpoint_its_owner_configured_for_it() {
    let secrets = Secrets::new();
    let (_dir, store) = store_dir();
    let configured = stub::start(stub::Mode::Echo);
    let elsewhere = stub::echoing_credentials("nothing");
    let cli = |args: &[&str]| run(forktrail(&store, &secrets, &configured, args));
    let (said, ok) = cli(&[
        "regenerate",
        "trip",
        "--at",
        "2",
        "--model",
        "m",
        "--endpoint",
        &elsewhere.url,
    ]);
    assert!(!ok);
    assert!(
        said.contains("no key was sent: $OPENAI_API_KEY goes only to https://api.openai.com/v1")
            && said.contains("OPENAI_BASE_URL"),
        "the refusal says why no key went: {said}"
    );
    let _ = cli(&[
        "compare",
        "trip",
        "--at",
        "2",
        "--arm",
        &format!(
            "model=m,provider=anthropic,endpoint={}",
            anthropic_endpoint(&elsewhere)
        ),
    ]);
    assert_eq!(elsewhere.requests().len(), 2);
    assert_eq!(header_values(&elsewhere, "authorization"), [None, None]);
    assert_eq!(header_values(&elsewhere, "x-api-key"), [None, None]);
    // The endpoint the owner configured gets the key.
    let (said, ok) = cli(&["regenerate", "trip", "--at", "2", "--model", "m"]);
    assert!(ok, "{said}");
    assert_eq!(
        header_values(&configured, "authorization"),
        [Some(format!("Bearer {}", secrets.openai))]
    );
}

/// A SPARQL store that answers every request 500, quoting the headers it received; with
/// `basic`, it first asks for Basic credentials.
fn echoing_store(basic: bool) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/sparql", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut head, mut length) = (Vec::new(), 0);
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let line = line.trim_end().to_string();
                if line.is_empty() {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                head.push(line);
            }
            let _ = reader.read_exact(&mut vec![0; length]);
            let authorized = head
                .iter()
                .any(|h| h.to_ascii_lowercase().starts_with("authorization"));
            let reply = if basic && !authorized {
                "HTTP/1.1 401 X\r\nWWW-Authenticate: Basic realm=\"store\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string()
            } else {
                let body = format!("store error; your request was: {}", head.join(" | "));
                format!(
                    "HTTP/1.1 500 X\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
            };
            let _ = stream.write_all(reply.as_bytes());
        }
    });
    url
}

/// Guards against a store whose errors echo the request (Virtuoso echoes it whole):
/// the store's token, password or its Basic form came back in forktrail's error.
#[test]
fn a_store_echoing_its_credentials_leaves_them_out_of_the_error() {
    let token = format!("store-token-{}", uuid::Uuid::now_v7().simple());
    let password = format!("store-password-{}", uuid::Uuid::now_v7().simple());
    let basic = basic_form("alice", &password);
    for (url, env) in [
        (
            echoing_store(false),
            vec![("FORKTRAIL_STORE_TOKEN", token.clone())],
        ),
        (
            echoing_store(true),
            vec![
                ("FORKTRAIL_STORE_USER", "alice".to_string()),
                ("FORKTRAIL_STORE_PASSWORD", password.clone()),
            ],
        ),
    ] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_forktrail"));
        command
            .args(["--store", &url, "list"])
            .env_remove("FORKTRAIL_STORE")
            .env_remove("FORKTRAIL_STORE_TOKEN")
            .envs(env)
            .stdin(Stdio::null());
        let (said, ok) = run(command);
        assert!(!ok);
        assert!(
            said.contains("HTTP 500") && said.contains("[redacted]"),
            "{said}"
        );
        for secret in [&token, &password, &basic] {
            assert!(!said.contains(secret.as_str()), "{said}");
        }
    }
}

/// `user:password` as HTTP Basic sends it.
fn basic_form(user: &str, password: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = format!("{user}:{password}").into_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Guards against REST and MCP regenerations and comparisons that took any endpoint
/// while the web UI offered only the server's: a token holder could point one at a
/// listener of its own and have the session, and once a key, sent there.
#[test]
fn rest_and_mcp_call_only_the_endpoints_the_server_offers() {
    let offered = stub::start(stub::Mode::Echo);
    let elsewhere = stub::start(stub::Mode::Echo);
    let store = std::sync::Arc::new(Store::in_memory().unwrap());
    session_with(&store, "trip", 4);
    for model_endpoints in [vec![offered.url.clone()], Vec::new()] {
        let config = forktrail::server::ServerConfig {
            token: Some("t0ken-for-writes".into()),
            model_endpoints: model_endpoints.clone(),
            ..Default::default()
        };
        let base = format!(
            "http://{}",
            serve_in_process(std::sync::Arc::clone(&store), config)
        );
        let before = common::quads(&store);
        let http = reqwest::blocking::Client::new();
        let refused = |path: &str, body: Value| {
            let r = http
                .post(format!("{base}{path}"))
                .bearer_auth("t0ken-for-writes")
                .json(&body)
                .send()
                .unwrap();
            assert_eq!(r.status().as_u16(), 403, "{path} {body}");
            let answer: Value = r.json().unwrap();
            assert_eq!(answer["error"], "endpoint_not_allowed", "{answer}");
            assert!(
                answer["message"].as_str().unwrap().contains(&format!(
                    "endpoint {} is not one this server offers",
                    elsewhere.url
                )),
                "{answer}"
            );
        };
        refused(
            "/sessions/trip/regenerate",
            json!({"at": 2, "model": "m", "endpoint": elsewhere.url}),
        );
        refused(
            "/sessions/trip/compare",
            json!({"at": 2, "arms": [{"model": "m", "endpoint": elsewhere.url}]}),
        );
        for (tool, args) in [
            (
                "regenerate",
                json!({"session": "trip", "at": 2, "model": "m", "endpoint": elsewhere.url}),
            ),
            (
                "fork_session",
                json!({"session": "trip", "at": 2, "swap_model": "m", "endpoint": elsewhere.url}),
            ),
            (
                "compare_models",
                json!({"session": "trip", "at": 2, "arms": [{"model": "m", "endpoint": elsewhere.url}]}),
            ),
        ] {
            let (answer, _) = mcp_answer(&http, &base, Some("t0ken-for-writes"), tool, args);
            let text = answer["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default();
            assert!(
                answer["result"]["isError"] == true
                    && text.contains("is not one this server offers"),
                "{tool}: {answer}"
            );
        }
        assert_eq!(common::quads(&store), before, "nothing written");
        // The endpoint offered is taken.
        if !model_endpoints.is_empty() {
            let r = http
                .post(format!("{base}/sessions/trip/regenerate"))
                .bearer_auth("t0ken-for-writes")
                .json(&json!({"at": 2, "model": "m", "endpoint": offered.url, "dry_run": true}))
                .send()
                .unwrap();
            assert_eq!(r.status().as_u16(), 200);
        }
    }
    assert!(elsewhere.requests().is_empty());
}
