//! `serve`: the SPARQL 1.1 endpoint and the REST API over the store.

use super::{parse_duration, CliResult, Out};
use clap::Args;
use forktrail::Store;
use std::io::Write;

#[derive(Args)]
pub(super) struct ServeArgs {
    /// The address to listen on (loopback by default).
    #[arg(long, default_value = "127.0.0.1:7878")]
    bind: std::net::SocketAddr,
    /// The port to listen on, at --bind's address (`--port 8080` is `--bind
    /// 127.0.0.1:8080`).
    #[arg(long)]
    port: Option<u16>,
    /// A host name clients reach the server by, besides localhost and IP addresses
    /// (repeat for more; `*` for any, behind a proxy that checks it). Requests naming
    /// any other host are refused: a guard against DNS rebinding.
    #[arg(long = "allow-host", value_name = "NAME")]
    allowed_hosts: Vec<String>,
    /// Allow writes (/update, REST writes) to requests with `Authorization: Bearer TOKEN`.
    #[arg(long, env = "FORKTRAIL_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Cancel queries and updates running longer than this (e.g. 30s, 500ms, 2m).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    query_timeout: std::time::Duration,
    /// Requests running at once in each lane (SPARQL queries, reads, writes: anonymous
    /// traffic never takes a write's slot); more wait in line.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    max_concurrent_queries: u16,
    /// How long a request waits in line for a slot before it is answered 503 with
    /// Retry-After.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    queue_wait: std::time::Duration,
    /// How many requests each lane's line holds; more are answered 503 at once.
    #[arg(long, default_value_t = 1024)]
    max_queued: usize,
    /// The largest request body, in bytes (the fields in it have limits of their own:
    /// --max-content-bytes, --max-field-bytes, --max-state-bytes).
    #[arg(long, default_value_t = 64 * 1024 * 1024)]
    max_body_bytes: usize,
    /// Load the demo tree first if the store has no session.
    #[arg(long)]
    demo: bool,
    /// Let regenerations and comparisons (web UI, REST, /mcp) send context to model
    /// endpoints off this machine (each then needs a money cap).
    #[arg(long)]
    allow_remote_models: bool,
    /// A model endpoint (base URL) the server offers; repeat for more. The web UI's
    /// what-if and comparisons choose among them, and REST and /mcp may name no other.
    /// Default: $OPENAI_BASE_URL (else http://127.0.0.1:11434/v1) and
    /// $ANTHROPIC_BASE_URL (else https://api.anthropic.com). An API key goes only to its
    /// provider's API or the endpoint its *_BASE_URL names.
    #[arg(long = "model-endpoint", value_name = "URL")]
    model_endpoints: Vec<String>,
    /// Record agents: forward /proxy/NAME/… to URL and record each model call
    /// (`anthropic=https://api.anthropic.com`, `openai=https://api.openai.com`); repeat
    /// for both. An agent is recorded by pointing its ANTHROPIC_BASE_URL at
    /// http://HOST:PORT/proxy/anthropic or its OPENAI_BASE_URL at
    /// http://HOST:PORT/proxy/openai/v1; its key goes on to URL and is never stored.
    #[arg(long = "upstream", value_name = "NAME=URL", value_parser = parse_upstream)]
    upstreams: Vec<(forktrail::UpstreamKind, String)>,
    /// The price of a model, for the cost of each recorded call: MODEL=IN/OUT or
    /// MODEL=IN/OUT/CACHED, US dollars per million tokens (repeat for more).
    #[arg(long = "price", value_name = "MODEL=IN/OUT", value_parser = parse_price)]
    prices: Vec<(String, forktrail::Price)>,
    /// How long an upstream may stay silent before a proxied call fails (504).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    upstream_timeout: std::time::Duration,
}

fn parse_upstream(text: &str) -> Result<(forktrail::UpstreamKind, String), String> {
    forktrail::ProxyConfig::parse_upstream(text).map_err(|e| e.to_string())
}

fn parse_price(text: &str) -> Result<(String, forktrail::Price), String> {
    forktrail::Price::parse(text).map_err(|e| e.to_string())
}

/// `proxy`: `serve` with its upstreams defaulting to the providers' own APIs.
#[derive(Args)]
pub(super) struct ProxyArgs {
    #[command(flatten)]
    serve: ServeArgs,
}

impl ProxyArgs {
    pub(super) fn run(mut self, out: Out, store: Store) -> CliResult {
        if self.serve.upstreams.is_empty() {
            for kind in [
                forktrail::UpstreamKind::Anthropic,
                forktrail::UpstreamKind::Openai,
            ] {
                self.serve
                    .upstreams
                    .push((kind, kind.default_url().to_string()));
            }
        }
        self.serve.run(out, store)
    }
}

impl ServeArgs {
    pub(super) fn run(self, out: Out, store: Store) -> CliResult {
        // With --demo the banner points at the demo family's tree (the oldest root
        // session, when the demo was loaded on an earlier run).
        let mut first_tree = None;
        if self.demo {
            let sessions = store.list()?;
            if sessions.is_empty() {
                let tree = forktrail::demo::build(&store)?;
                writeln!(out, "loaded the demo tree (root {})", tree.root)?;
                first_tree = Some(tree.root);
            } else {
                first_tree = sessions
                    .into_iter()
                    .find(|s| s.parent.is_none())
                    .map(|s| s.session);
            }
        }
        out.flush()?;
        let mut bind = self.bind;
        if let Some(port) = self.port {
            bind.set_port(port);
        }
        let config = forktrail::server::ServerConfig {
            bind,
            queue_wait: self.queue_wait,
            max_queued: self.max_queued,
            allowed_hosts: self.allowed_hosts,
            token: self.token.filter(|t| !t.is_empty()),
            query_timeout: self.query_timeout,
            max_concurrent_queries: usize::from(self.max_concurrent_queries),
            max_body_bytes: self.max_body_bytes,
            allow_remote_models: self.allow_remote_models,
            model_endpoints: self.model_endpoints,
            proxy: forktrail::ProxyConfig {
                upstreams: self.upstreams.into_iter().collect(),
                prices: self.prices.into_iter().collect(),
                timeout: Some(self.upstream_timeout),
            },
        };
        let proxied: Vec<(forktrail::UpstreamKind, String)> = config
            .proxy
            .upstreams
            .iter()
            .map(|(k, u)| (*k, u.clone()))
            .collect();
        let writable = config.token.is_some();
        // Where a command refused the store (it is held here) learns where to go.
        let url_file = store.path().map(|dir| dir.join(forktrail::SERVER_FILE));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let announce = url_file.clone();
        let store = std::sync::Arc::new(store);
        if store.remote_requests().is_some() {
            // A shared store: its catalog is built (or followed on from the one kept on
            // disk) while the server starts, not by the first page asked for.
            let warm = std::sync::Arc::clone(&store);
            std::thread::spawn(move || {
                if let Err(e) = warm.count_sessions(&forktrail::SessionQuery::default()) {
                    eprintln!("warning: the catalog of {}: {e}", warm.location());
                }
            });
        }
        let served = runtime.block_on(forktrail::server::serve(store, config, move |addr| {
            if let Some(file) = &announce {
                let _ = std::fs::write(file, format!("http://{addr}/sparql\n"));
            }
            banner(addr, writable, first_tree.as_ref(), &proxied)
        }));
        if let Some(file) = url_file {
            let _ = std::fs::remove_file(file);
        }
        // Evaluations still running past the grace period are not waited for.
        runtime.shutdown_timeout(std::time::Duration::from_millis(100));
        served?;
        Ok(())
    }
}

/// What `serve` prints once it listens: where, whether it takes writes, what to try.
fn banner(
    addr: std::net::SocketAddr,
    writable: bool,
    tree: Option<&forktrail::SessionId>,
    proxied: &[(forktrail::UpstreamKind, String)],
) {
    // Written, not println!: nobody reading stdout must not stop the server.
    let mut out = std::io::stdout();
    let mode = if writable {
        "writes need the token"
    } else {
        "read-only"
    };
    let _ = writeln!(out, "forktrail is serving on http://{addr} ({mode})");
    match tree {
        Some(root) => {
            let _ = writeln!(
                out,
                "open http://{addr}/ui/sessions/{root}/tree in a browser for the demo's fork \
                 tree (every session at http://{addr}/)"
            );
        }
        None => {
            let _ = writeln!(
                out,
                "open http://{addr}/ in a browser: sessions, fork trees, playback, diff"
            );
        }
    }
    let _ = writeln!(out, "try: curl -H 'Accept: text/csv' --data-urlencode 'query=SELECT ?id ?branch WHERE {{ ?s <https://w3id.org/forktrail/ns#sessionId> ?id ; <https://w3id.org/forktrail/ns#branch> ?branch }}' http://{addr}/sparql");
    let _ = writeln!(out, "     curl http://{addr}/sessions");
    let _ = writeln!(out, "     curl http://{addr}/queries");
    let _ = writeln!(out, "MCP clients (Streamable HTTP): http://{addr}/mcp");
    for (kind, upstream) in proxied {
        let (variable, path) = match kind {
            forktrail::UpstreamKind::Anthropic => ("ANTHROPIC_BASE_URL", "/proxy/anthropic"),
            forktrail::UpstreamKind::Openai => ("OPENAI_BASE_URL", "/proxy/openai/v1"),
        };
        let _ = writeln!(
            out,
            "record an agent: {variable}=http://{addr}{path} (calls go on to {upstream})"
        );
    }
    let _ = out.flush();
}
