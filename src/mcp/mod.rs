//! The Model Context Protocol server: an agent (or its host) lists, replays, forks,
//! diffs, regenerates and compares sessions itself, over standard input and output
//! (`forktrail mcp`) or Streamable HTTP (`/mcp` of `forktrail serve`).
//!
//! The protocol is the official Rust SDK's (`rmcp`): JSON-RPC framing, the `initialize`
//! handshake of protocol versions 2024-11-05 to 2025-11-25, and the stateless 2026-07-28
//! (`server/discover`, the version in each request's `_meta`). What this module adds is
//! forktrail's: the tools (`tools.rs`), each run on the same [`Store`] and with the same
//! semantics as the CLI, a failed operation being a tool result with `isError` and the
//! CLI's message; and the replay of each session as a resource,
//! `forktrail://sessions/{id}/replay`.
//!
//! Writes (`fork_session`, `append_turn`, `regenerate`, `compare_models`, `cancel_job`)
//! are refused unless allowed: by `--allow-writes` on stdio, by the server's token on
//! HTTP. A regeneration runs on a thread of its own, and `job_status` follows it; a
//! comparison's runs likewise, followed by `comparison`.
//!
//! What a client's input cannot do: stop or exhaust the server. A line longer than
//! [`MAX_LINE_BYTES`] (64 MiB) is dropped unread; a line of more than [`MAX_JSON_VALUES`]
//! values or [`MAX_JSON_CONTAINERS`] objects and arrays is cut there, before it is parsed
//! (`guard.rs`); a line that is not JSON gets no reply (it has no id to answer, and a peer
//! echoing a reply back would loop), as the official SDKs do; the next line is read
//! either way. Turn contents are checked by the store, the same for every
//! surface.

mod guard;
mod tools;

use crate::error::{Error, Result};
use crate::model::{ForkOptions, JobStatus, NewTurn, SessionId};
use crate::query::QueryOptions;
use crate::store::Store;
use crate::whatif::{CompareOptions, RegenerateOptions};
use oxigraph::sparql::results::{QueryResultsFormat, QueryResultsSerializer};
use oxigraph::sparql::{CancellationToken, QueryResults};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use tools::{QUERY_ROWS, QUERY_ROWS_MAX, TOOLS};

pub use guard::{MAX_JSON_CONTAINERS, MAX_JSON_VALUES};

/// The resource URI of a session's replay: `PREFIX{id}SUFFIX`.
const RESOURCE_PREFIX: &str = "forktrail://sessions/";
const RESOURCE_SUFFIX: &str = "/replay";

/// The longest line (one message) read on stdio, in bytes: 64 MiB. That is twice the
/// largest turn content `forktrail serve` accepts (32 MiB), so such a content fits in a
/// call with room for its JSON escapes, and it is the request body limit of `forktrail
/// serve` (`ServerConfig::max_body_bytes`), which `/mcp` shares, so what REST takes in
/// one request MCP takes in one line. A longer line is read past unanswered: at most
/// this much of it is ever held.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// How the server runs.
#[derive(Clone, Debug)]
pub struct McpConfig {
    /// Allow the tools that write (`fork_session`, `append_turn`, `regenerate`,
    /// `compare_models`, `cancel_job`) to every client. Over HTTP this stays off: a
    /// request carrying the server's token may write ([`WriteGrant`]).
    pub allow_writes: bool,
    /// Let `regenerate` and `compare_models` send context to model endpoints off this
    /// machine.
    pub allow_remote_models: bool,
    /// `query` calls running longer are cancelled (30 s unless told; `forktrail serve`
    /// gives its `--query-timeout`).
    pub query_timeout: std::time::Duration,
    /// The model endpoints `regenerate`, `fork_session` with `swap_model` and
    /// `compare_models` may call: `Some` list (empty: each provider's default, see
    /// [`crate::offered_endpoints`]), as `forktrail serve` gives its `--model-endpoint`s
    /// for `/mcp`, whose clients are not its operator; `None`, any endpoint the CLI
    /// takes, the stdio default, whose client runs as the operator with the operator's
    /// environment. Either way an API key goes only where [`crate::Provider::key_for`]
    /// allows.
    pub model_endpoints: Option<Vec<String>>,
    /// Let `run_experiment` run agent and verify commands on this machine (with the
    /// rights of this process): `forktrail mcp --allow-experiments`, whose client is its
    /// operator. Never over HTTP.
    pub allow_experiments: bool,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            allow_writes: false,
            allow_remote_models: false,
            query_timeout: std::time::Duration::from_secs(30),
            model_endpoints: None,
            allow_experiments: false,
        }
    }
}

/// Put in an HTTP request's extensions (by `forktrail serve`, once it has checked the
/// request's token), it lets that request's tool calls write.
#[derive(Clone, Copy, Debug)]
pub struct WriteGrant;

/// Work a tool call gives to [`Lanes`].
pub type Work = Box<dyn FnOnce(&Store) -> Result<()> + Send>;

/// Where an embedding server runs tool calls: `forktrail serve` runs them in its read
/// and write lanes, which anonymous readers cannot take from writers. Without lanes,
/// each call runs on a blocking thread of its own.
pub trait Lanes: Send + Sync {
    /// Runs `work` in the write lane if `writes`, else the read lane; the error is the
    /// message the client reads (a full lane, say).
    fn run(
        &self,
        writes: bool,
        work: Work,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::result::Result<(), String>> + Send>>;
}

/// The server: the store, what it allows, and where its calls run. Cheap to clone (one
/// per HTTP request).
#[derive(Clone)]
pub struct McpServer {
    store: Arc<Store>,
    config: McpConfig,
    /// How to get writes allowed, said when one is refused.
    read_only_hint: Arc<str>,
    lanes: Option<Arc<dyn Lanes>>,
}

impl McpServer {
    /// A server whose every client may write if `config.allow_writes`: the stdio one.
    pub fn new(store: Arc<Store>, config: McpConfig) -> Self {
        Self {
            store,
            config,
            read_only_hint: "start it with `forktrail mcp --allow-writes`".into(),
            lanes: None,
        }
    }

    /// A server for HTTP: writes only with a [`WriteGrant`] (`config.allow_writes` off),
    /// refused with `hint` (how to get one), calls run in `lanes`.
    pub fn behind(store: Arc<Store>, config: McpConfig, hint: &str, lanes: Arc<dyn Lanes>) -> Self {
        Self {
            store,
            config,
            read_only_hint: hint.into(),
            lanes: Some(lanes),
        }
    }

    /// Serves one client over `read` and `write` (one JSON-RPC message per line) until
    /// the input ends. Bad input is skipped and the next line read; only
    /// a failure to read or write ends it early.
    pub async fn serve<R, W>(self, read: R, write: W) -> Result<()>
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let transport =
            rmcp::transport::async_rw::AsyncRwTransport::new(guard::Bounded::new(read), write)
                .with_max_line_length(MAX_LINE_BYTES);
        let running = ServiceExt::serve(self, transport)
            .await
            .map_err(|e| Error::io("the MCP client", std::io::Error::other(e.to_string())))?;
        running
            .waiting()
            .await
            .map_err(|e| Error::io("the MCP server", std::io::Error::other(e.to_string())))?;
        Ok(())
    }

    /// Serves standard input and output, on a runtime of its own, until the input ends.
    pub fn run_stdio(self) -> Result<()> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| Error::io("cannot start the MCP server's runtime", e))?;
        runtime.block_on(self.serve(tokio::io::stdin(), tokio::io::stdout()))
    }

    /// The tools, as `tools/list` lists them.
    pub fn tools(&self) -> Vec<rmcp::model::Tool> {
        tools::listed(self.config.allow_experiments)
    }

    /// Runs tool `name` with `arguments` as a client's `tools/call` would, writes allowed
    /// if the server allows them or `granted`: the result the client gets (an operation
    /// that fails is a result with `is_error` and the CLI's message), or an error for an
    /// unknown tool.
    pub async fn call(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        granted: bool,
    ) -> std::result::Result<CallToolResult, ErrorData> {
        let tool = TOOLS
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| ErrorData::invalid_params(format!("unknown tool: {name}"), None))?;
        let outcome = if tool.writes && !(self.config.allow_writes || granted) {
            Err(format!(
                "{name} writes to the store, and this MCP server is read-only ({})",
                self.read_only_hint
            ))
        } else {
            self.run(tool.writes, name.to_string(), arguments).await
        };
        Ok(match outcome {
            Ok(value) => {
                let text = serde_json::to_string_pretty(&value).unwrap_or_default();
                let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
                if value.is_object() {
                    result.structured_content = Some(value);
                }
                result
            }
            Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
        })
    }

    /// Runs a tool off the async threads: in the server's read or write lane, or on a
    /// blocking thread. The error is the message the client reads.
    async fn run(
        &self,
        writes: bool,
        name: String,
        args: Map<String, Value>,
    ) -> std::result::Result<Value, String> {
        let this = self.clone();
        self.in_lane(writes, move |_| this.run_tool(&name, args))
            .await?
            .map_err(|e| e.to_string())
    }

    /// Runs `f` off the async threads, in the server's lanes if it has them.
    async fn in_lane<T: Send + 'static>(
        &self,
        writes: bool,
        f: impl FnOnce(&Store) -> T + Send + 'static,
    ) -> std::result::Result<T, String> {
        let (tx, rx) = std::sync::mpsc::channel();
        let work: Work = Box::new(move |store| {
            let _ = tx.send(f(store));
            Ok(())
        });
        match &self.lanes {
            None => {
                let store = Arc::clone(&self.store);
                tokio::task::spawn_blocking(move || work(&store))
                    .await
                    .map_err(|e| format!("the call failed: {e}"))?
                    .map_err(|e| e.to_string())?;
            }
            Some(lanes) => lanes.run(writes, work).await?,
        }
        rx.recv().map_err(|e| format!("the call failed: {e}"))
    }

    fn instructions(&self) -> String {
        let mut text = String::from(
            "forktrail stores agent sessions as RDF with share-don't-copy forks and PROV-O \
             provenance. Replay a session, fork it at a turn to try another continuation \
             (fork_session; swap_model to let another model answer), replay the rest of a \
             session against other models and measure each (compare_models), search, diff \
             two sessions, and audit with SPARQL (query).",
        );
        if !self.config.allow_writes {
            text.push_str(&format!(
                " Writes are refused unless allowed: {}.",
                self.read_only_hint
            ));
        }
        text
    }
}

/// The protocol versions this server speaks, oldest first: those with the `initialize`
/// handshake, and the stateless 2026-07-28.
static VERSIONS: [ProtocolVersion; 5] = [
    ProtocolVersion::V_2024_11_05,
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

/// `version` as a `'static` label, if it is one this server speaks ("other" if not).
pub fn version_label(version: &str) -> &'static str {
    VERSIONS
        .iter()
        .map(ProtocolVersion::as_str)
        .find(|v| *v == version)
        .unwrap_or("other")
}

/// Whether an HTTP request's token let it write.
#[cfg(feature = "server")]
fn granted(context: &RequestContext<RoleServer>) -> bool {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .is_some_and(|parts| parts.extensions.get::<WriteGrant>().is_some())
}

#[cfg(not(feature = "server"))]
fn granted(_: &RequestContext<RoleServer>) -> bool {
    false
}

impl ServerHandler for McpServer {
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(&VERSIONS)
    }

    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("forktrail", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.instructions())
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::listed(
            self.config.allow_experiments,
        )))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let result = self
            .call(&request.name, arguments, granted(&context))
            .await?;
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> std::result::Result<ListResourcesResult, ErrorData> {
        let cursor = request.and_then(|r| r.cursor);
        let this = self.clone();
        let page = self.run_read(move |_| this.resources(cursor)).await?;
        Ok(page)
    }

    async fn list_resource_templates(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> std::result::Result<ListResourceTemplatesResult, ErrorData> {
        let template = ResourceTemplate::new(
            format!("{RESOURCE_PREFIX}{{session}}{RESOURCE_SUFFIX}"),
            "session-replay",
        )
        .with_title("A session's replay")
        .with_description(
            "The turns of a session in order (index, role, content, branch), inherited \
             prefix included.",
        )
        .with_mime_type("application/json");
        Ok(ListResourceTemplatesResult::with_all_items(vec![template]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _: RequestContext<RoleServer>,
    ) -> std::result::Result<ReadResourceResponse, ErrorData> {
        let this = self.clone();
        let read = self
            .run_read(move |_| this.read_resource_now(&request.uri))
            .await?;
        Ok(read.into())
    }
}

impl McpServer {
    /// Runs read `f` as [`run`](Self::run) runs a tool, its error a protocol error.
    async fn run_read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> std::result::Result<T, ErrorData> + Send + 'static,
    ) -> std::result::Result<T, ErrorData> {
        self.in_lane(false, f)
            .await
            .map_err(|e| ErrorData::internal_error(e, None))?
    }

    /// One page of replay resources (newest sessions first), with `nextCursor`.
    fn resources(
        &self,
        cursor: Option<String>,
    ) -> std::result::Result<ListResourcesResult, ErrorData> {
        let page = self
            .store
            .sessions(&crate::SessionQuery {
                cursor,
                order: crate::SessionOrder::Created,
                limit: Some(crate::DEFAULT_PAGE),
                ..Default::default()
            })
            .map_err(|e| match e {
                Error::InvalidInput(m) => ErrorData::invalid_params(m, None),
                other => ErrorData::internal_error(other.to_string(), None),
            })?;
        let resources = page
            .sessions
            .iter()
            .map(|s| {
                let title = s.title.clone().unwrap_or_else(|| s.session.to_string());
                Resource::new(
                    format!("{RESOURCE_PREFIX}{}{RESOURCE_SUFFIX}", s.session),
                    s.session.to_string(),
                )
                .with_title(format!("{title} ({}, {} turns)", s.branch, s.length))
                .with_mime_type("application/json")
            })
            .collect();
        let mut result = ListResourcesResult::with_all_items(resources);
        result.next_cursor = page.next;
        Ok(result)
    }

    fn read_resource_now(&self, uri: &str) -> std::result::Result<ReadResourceResult, ErrorData> {
        let not_found =
            || ErrorData::resource_not_found(format!("resource not found: {uri}"), None);
        let id = uri
            .strip_prefix(RESOURCE_PREFIX)
            .and_then(|rest| rest.strip_suffix(RESOURCE_SUFFIX))
            .and_then(|id| SessionId::new(id).ok())
            .ok_or_else(not_found)?;
        let records = match self.store.replay(&id, None) {
            Ok(records) => records,
            Err(Error::SessionNotFound { .. }) => return Err(not_found()),
            Err(e) => return Err(ErrorData::internal_error(e.to_string(), None)),
        };
        let text = serde_json::to_string_pretty(&records).unwrap_or_default();
        Ok(ReadResourceResult::new(vec![ResourceContents::text(
            text, uri,
        )
        .with_mime_type("application/json")]))
    }

    fn run_tool(&self, name: &str, mut args: Map<String, Value>) -> Result<Value> {
        let store = &*self.store;
        match name {
            "list_sessions" => json_of(store.sessions(&rest(args)?)?),
            "search" => json_of(store.search(&rest(args)?)?),
            "show_session" => {
                let session = session(&mut args, "session")?;
                no_more(&args)?;
                json_of(store.info(&session)?)
            }
            "replay_session" => {
                let session = session(&mut args, "session")?;
                let up_to: Option<u64> = optional(&mut args, "up_to")?;
                let full: bool = optional(&mut args, "full")?.unwrap_or(false);
                no_more(&args)?;
                if full {
                    json_of(json!({ "turns": store.load(&session, up_to)? }))
                } else {
                    json_of(json!({ "turns": store.replay(&session, up_to)? }))
                }
            }
            "list_branches" => {
                let session = session(&mut args, "session")?;
                let limit: Option<usize> = optional(&mut args, "limit")?;
                let cursor: Option<String> = optional(&mut args, "cursor")?;
                no_more(&args)?;
                let page = store.branches_page(&session, limit, cursor.as_deref())?;
                json_of(json!({"branches": page.items, "total": page.total, "next": page.next}))
            }
            "fork_session" => {
                let parent = session(&mut args, "session")?;
                let swap: Option<String> = optional(&mut args, "swap_model")?;
                let endpoint: Option<String> = optional(&mut args, "endpoint")?;
                match swap {
                    Some(model) => {
                        let mut options: RegenerateOptions = rest(args)?;
                        options.model = Some(model);
                        options.endpoint = endpoint;
                        self.regenerate(&parent, options)
                    }
                    None if endpoint.is_some() => Err(Error::InvalidInput(
                        "endpoint is for swap_model: a plain fork calls no model".into(),
                    )),
                    None => json_of(store.fork(&parent, rest::<ForkOptions>(args)?)?),
                }
            }
            "append_turn" => {
                let session = session(&mut args, "session")?;
                let role: String = required(&mut args, "role")?;
                let content: String = required(&mut args, "content")?;
                let kind: Option<String> = optional(&mut args, "kind")?;
                let tool_calls: Option<Value> = optional(&mut args, "tool_calls")?;
                let payload: Option<Value> = optional(&mut args, "payload")?;
                let turn = NewTurn {
                    model: optional(&mut args, "model")?,
                    name: optional(&mut args, "name")?,
                    tool_call_id: optional(&mut args, "tool_call_id")?,
                    tool_calls: tool_calls.map(|v| v.to_string()),
                    payload: payload.map(|v| v.to_string()),
                    ..NewTurn::parse(&role, kind.as_deref().unwrap_or("message"), content)?
                };
                no_more(&args)?;
                let index = store.append(&session, turn)?;
                json_of(json!({ "session": session, "index": index }))
            }
            "diff_sessions" => {
                let a = session(&mut args, "a")?;
                let b = session(&mut args, "b")?;
                no_more(&args)?;
                json_of(store.diff(&a, &b)?)
            }
            "regenerate" => {
                let session = session(&mut args, "session")?;
                self.regenerate(&session, rest(args)?)
            }
            "job_status" => {
                let job: String = required(&mut args, "job")?;
                no_more(&args)?;
                json_of(store.job(&job)?)
            }
            "cancel_job" => {
                let job: String = required(&mut args, "job")?;
                no_more(&args)?;
                if store.is_comparison(&job)? {
                    json_of(store.cancel_comparison(&job)?)
                } else {
                    json_of(store.cancel_job(&job)?)
                }
            }
            "compare_models" => {
                let session = session(&mut args, "session")?;
                self.compare(&session, rest(args)?)
            }
            "run_experiment" => {
                let session = session(&mut args, "session")?;
                self.experiment(&session, args)
            }
            "comparison" => {
                let id: String = required(&mut args, "id")?;
                no_more(&args)?;
                json_of(store.comparison(&id)?)
            }
            "query" => {
                let text: String = required(&mut args, "query")?;
                let limit: Option<usize> = optional(&mut args, "limit")?;
                no_more(&args)?;
                let limit = limit.unwrap_or(QUERY_ROWS).clamp(1, QUERY_ROWS_MAX);
                query(store, &text, limit, self.config.query_timeout)
            }
            "verify" => {
                let session = match args.contains_key("session") {
                    true => Some(session(&mut args, "session")?),
                    false => None,
                };
                no_more(&args)?;
                json_of(store.verify(session.as_ref())?)
            }
            other => Err(Error::InvalidInput(format!("unknown tool: {other}"))),
        }
    }

    /// A call asking for model endpoints off this machine, refused unless the server
    /// was started allowing them.
    fn refuse_remote_unless_allowed(&self, allow_remote: bool) -> Result<()> {
        if allow_remote && !self.config.allow_remote_models {
            return Err(Error::InvalidInput(
                "this MCP server does not send sessions to endpoints off its machine \
                 (start it with --allow-remote-models)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// A call naming an endpoint the server does not offer, refused when it offers a
    /// list.
    fn refuse_unless_offered(&self, endpoints: &[String]) -> Result<()> {
        match &self.config.model_endpoints {
            Some(configured) => {
                crate::check_offered(endpoints, &crate::offered_endpoints(configured))
            }
            None => Ok(()),
        }
    }

    /// Starts a regeneration (or returns its plan, or the earlier identical job); the
    /// model call runs on a thread of its own.
    fn regenerate(&self, session: &SessionId, options: RegenerateOptions) -> Result<Value> {
        self.refuse_remote_unless_allowed(options.allow_remote)?;
        self.refuse_unless_offered(&[options.resolved_endpoint()])?;
        if options.dry_run {
            return json_of(self.store.plan_regeneration(session, &options)?);
        }
        let job = self.store.begin_regeneration(session, &options)?;
        if job.status == JobStatus::Running {
            let store = Arc::clone(&self.store);
            let id = job.job.clone();
            std::thread::spawn(move || store.run_job(&id));
        }
        json_of(job)
    }

    /// Begins a comparison (or returns its plan, or the earlier identical one); its runs
    /// go on on a thread of their own, `parallel` arms at once.
    fn compare(&self, session: &SessionId, options: CompareOptions) -> Result<Value> {
        self.refuse_remote_unless_allowed(options.allow_remote)?;
        self.refuse_unless_offered(&options.endpoints())?;
        if options.dry_run {
            return json_of(self.store.plan_comparison(session, &options)?);
        }
        let comparison = self.store.begin_comparison(session, &options)?;
        if !comparison.reused {
            // At most one thread per run, however large `parallel` is.
            let runs = comparison.arms.iter().filter(|a| !a.baseline).count();
            let parallel = options.parallel.unwrap_or(1).clamp(1, runs.max(1));
            let store = Arc::clone(&self.store);
            let id = comparison.comparison.clone();
            std::thread::spawn(move || store.run_comparison(&id, parallel));
        }
        json_of(comparison)
    }
}

/// `run_experiment`'s arguments: the comparison's and the experiment's.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ExperimentArgs {
    at: u64,
    arms: Vec<crate::whatif::Arm>,
    agent: String,
    workspace: std::path::PathBuf,
    verify: String,
    #[serde(default)]
    samples: Option<u64>,
    #[serde(default)]
    workspace_ref: Option<String>,
    #[serde(default)]
    verify_baseline: bool,
    #[serde(default)]
    on_drift: Option<crate::model::OnDrift>,
    #[serde(default)]
    sandbox: Option<crate::model::Sandbox>,
    #[serde(default)]
    writable: Vec<std::path::PathBuf>,
    #[serde(default)]
    timeout_secs: Option<u64>,
    #[serde(default)]
    max_steps: Option<u64>,
    #[serde(default)]
    prices: std::collections::BTreeMap<String, crate::whatif::Price>,
    #[serde(default)]
    budget_usd: Option<f64>,
    #[serde(default)]
    allow_remote: bool,
    #[serde(default)]
    parallel: Option<usize>,
    #[serde(default)]
    again: bool,
}

impl McpServer {
    /// Begins a live experiment and runs it on a thread of its own; returns it at once
    /// (follow it with `comparison`, stop it with `cancel_job`). Only a server started
    /// allowing experiments runs one: its commands run on this machine.
    #[cfg(feature = "server")]
    fn experiment(&self, session: &SessionId, args: Map<String, Value>) -> Result<Value> {
        if !self.config.allow_experiments {
            return Err(Error::InvalidInput(
                "this MCP server runs no agent commands: start it with `forktrail mcp \
                 --allow-writes --allow-experiments` (an experiment runs its agent and \
                 verify commands on this machine with the server's rights)"
                    .into(),
            ));
        }
        let a: ExperimentArgs = serde_json::from_value(Value::Object(args))
            .map_err(|e| Error::InvalidInput(format!("run_experiment: {e}")))?;
        let compare = CompareOptions {
            at: a.at,
            arms: a.arms,
            samples: a.samples,
            max_steps: a.max_steps,
            prices: a.prices,
            budget_usd: a.budget_usd,
            allow_remote: a.allow_remote,
            parallel: a.parallel,
            again: a.again,
            ..CompareOptions::default()
        };
        self.refuse_remote_unless_allowed(compare.allow_remote)?;
        self.refuse_unless_offered(&compare.endpoints())?;
        let options = crate::experiment::ExperimentOptions {
            compare,
            agent: a.agent,
            workspace: a.workspace,
            workspace_ref: a.workspace_ref,
            verify: a.verify,
            verify_baseline: a.verify_baseline,
            on_drift: a.on_drift.unwrap_or(crate::model::OnDrift::Stop),
            sandbox: a.sandbox.unwrap_or(crate::model::Sandbox::None),
            writable: a.writable,
            agent_timeout_secs: a.timeout_secs,
            work_dir: None,
            keep_workspaces: false,
        };
        let begun = self.store.begin_experiment(session, &options)?;
        if !begun.reused {
            let store = Arc::clone(&self.store);
            let id = begun.comparison.clone();
            let parallel = a.parallel.unwrap_or(1);
            std::thread::spawn(move || store.run_experiment(&id, parallel));
        }
        json_of(begun)
    }

    #[cfg(not(feature = "server"))]
    fn experiment(&self, _: &SessionId, _: Map<String, Value>) -> Result<Value> {
        Err(Error::InvalidInput(
            "this build has no experiments (the `server` feature)".into(),
        ))
    }
}

fn json_of(value: impl serde::Serialize) -> Result<Value> {
    serde_json::to_value(value).map_err(|e| Error::InvalidInput(e.to_string()))
}

/// Takes argument `name`, if given, as a `T`.
fn optional<T: DeserializeOwned>(args: &mut Map<String, Value>, name: &str) -> Result<Option<T>> {
    match args.remove(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => serde_json::from_value(value)
            .map(Some)
            .map_err(|e| Error::InvalidInput(format!("argument {name}: {e}"))),
    }
}

fn required<T: DeserializeOwned>(args: &mut Map<String, Value>, name: &str) -> Result<T> {
    optional(args, name)?.ok_or_else(|| Error::InvalidInput(format!("argument {name} is required")))
}

fn session(args: &mut Map<String, Value>, name: &str) -> Result<SessionId> {
    SessionId::new(required::<String>(args, name)?)
}

/// No argument is left over: a misspelt one is an error, not ignored.
fn no_more(args: &Map<String, Value>) -> Result<()> {
    match args.keys().next() {
        Some(extra) => Err(Error::InvalidInput(format!("unknown argument {extra:?}"))),
        None => Ok(()),
    }
}

/// The remaining arguments as an options struct (which refuses unknown fields).
fn rest<T: DeserializeOwned>(args: Map<String, Value>) -> Result<T> {
    serde_json::from_value(Value::Object(args))
        .map_err(|e| Error::InvalidInput(format!("invalid arguments: {e}")))
}

/// A read-only query's answer, capped at `limit` rows or triples, cancelled past
/// `timeout` (as the SPARQL endpoint of `forktrail serve` cancels its queries).
fn query(store: &Store, text: &str, limit: usize, timeout: std::time::Duration) -> Result<Value> {
    let cancel = CancellationToken::new();
    let (finished, watch) = std::sync::mpsc::channel::<()>();
    let watchdog = cancel.clone();
    std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = watch.recv_timeout(timeout) {
            watchdog.cancel();
        }
    });
    let options = QueryOptions {
        cancellation: Some(cancel),
        ..QueryOptions::default()
    };
    let answer = answer(store, text, limit, &options).map_err(|e| match e {
        Error::Cancelled(_) => {
            Error::Cancelled(format!("it ran past the time limit of {timeout:?}"))
        }
        other => other,
    });
    drop(finished);
    answer
}

fn answer(store: &Store, text: &str, limit: usize, options: &QueryOptions) -> Result<Value> {
    let fail = |e: std::io::Error| Error::io("cannot write the query results", e);
    match store.query_with(text, &[], options)? {
        QueryResults::Boolean(answer) => json_of(json!({ "head": {}, "boolean": answer })),
        QueryResults::Solutions(solutions) => {
            let mut out = Vec::new();
            let mut writer = QueryResultsSerializer::from_format(QueryResultsFormat::Json)
                .serialize_solutions_to_writer(&mut out, solutions.variables().to_vec())
                .map_err(fail)?;
            let mut truncated = false;
            for (n, solution) in solutions.enumerate() {
                if n == limit {
                    truncated = true;
                    break;
                }
                writer
                    .serialize(&solution.map_err(crate::storage::evaluation_error)?)
                    .map_err(fail)?;
            }
            writer.finish().map_err(fail)?;
            let mut value: Value =
                serde_json::from_slice(&out).map_err(|e| Error::InvalidInput(e.to_string()))?;
            value["truncated"] = json!(truncated);
            Ok(value)
        }
        QueryResults::Graph(triples) => {
            let mut lines = Vec::new();
            let mut truncated = false;
            for (n, triple) in triples.enumerate() {
                if n == limit {
                    truncated = true;
                    break;
                }
                lines.push(format!(
                    "{} .",
                    triple.map_err(crate::storage::evaluation_error)?
                ));
            }
            json_of(json!({ "ntriples": lines.join("\n"), "truncated": truncated }))
        }
    }
}
