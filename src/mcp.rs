//! `forktrail mcp`: a Model Context Protocol server over standard input and output, so
//! an agent (or its host) can list, replay, fork, diff and regenerate sessions itself.
//!
//! The protocol is JSON-RPC 2.0, one message per line, with the `initialize` handshake
//! (protocol versions 2024-11-05 to 2025-11-25). The server is synchronous and small:
//! each request runs on the same [`Store`] and with the same semantics as the CLI, and
//! a failed operation is a tool result with `isError` and the CLI's message. Writes
//! (`fork_session`, `append_turn`, `regenerate`, `cancel_job`) are refused unless the
//! server was started with writes allowed; a regeneration runs on a thread of its own,
//! and `job_status` follows it.
//!
//! Each session's replay is also a resource, `forktrail://sessions/{id}/replay`.

use crate::error::{Error, Result};
use crate::model::{ForkOptions, JobStatus, NewTurn, SessionId};
use crate::regenerate::RegenerateOptions;
use crate::store::Store;
use oxigraph::sparql::results::{QueryResultsFormat, QueryResultsSerializer};
use oxigraph::sparql::QueryResults;
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};
use std::io::{BufRead, Write};
use std::sync::Arc;

/// The protocol versions this server speaks, oldest first.
const VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// The resource URI of a session's replay: `PREFIX{id}SUFFIX`.
const RESOURCE_PREFIX: &str = "forktrail://sessions/";
const RESOURCE_SUFFIX: &str = "/replay";
/// The most rows (or triples) `query` returns by default, and at all.
const QUERY_ROWS: usize = 200;
const QUERY_ROWS_MAX: usize = 10_000;

/// How the server runs.
#[derive(Clone, Debug, Default)]
pub struct McpConfig {
    /// Allow the tools that write (`fork_session`, `append_turn`, `regenerate`,
    /// `cancel_job`).
    pub allow_writes: bool,
    /// Let `regenerate` send context to model endpoints off this machine.
    pub allow_remote_models: bool,
}

/// One tool: its name, what it does, its arguments' JSON schema, whether it writes.
struct Tool {
    name: &'static str,
    description: &'static str,
    writes: bool,
    schema: fn() -> Value,
}

/// An object schema with these properties, of which `required` must be given, and no
/// others.
fn object(properties: Value, required: &[&str]) -> Value {
    let mut schema =
        json!({ "type": "object", "properties": properties, "additionalProperties": false });
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    schema
}

fn session_arg() -> Value {
    json!({ "type": "string", "description": "A session id." })
}

const TOOLS: &[Tool] = &[
    Tool {
        name: "list_sessions",
        description: "List every session: id, branch, parent, fork point, length, title.",
        writes: false,
        schema: || object(json!({}), &[]),
    },
    Tool {
        name: "show_session",
        description: "A session's lineage facts: parent, fork point, branch, length, own \
                      turns, depth, head digest.",
        writes: false,
        schema: || object(json!({ "session": session_arg() }), &["session"]),
    },
    Tool {
        name: "replay_session",
        description: "The turns of a session in order, inherited prefix included: \
                      index, role, content and the branch that wrote each. With full, \
                      every field (kind, name, tool calls, model, payload, digest).",
        writes: false,
        schema: || {
            object(
                json!({
                    "session": session_arg(),
                    "up_to": { "type": "integer", "minimum": 0, "description": "The last index (inclusive)." },
                    "full": { "type": "boolean", "description": "Every field of each turn." }
                }),
                &["session"],
            )
        },
    },
    Tool {
        name: "list_branches",
        description: "The direct children (forks) of a session: id, label, fork point.",
        writes: false,
        schema: || object(json!({ "session": session_arg() }), &["session"]),
    },
    Tool {
        name: "fork_session",
        description: "Fork a session at index `at` (default: its length): the child \
                      shares turns 0..at and stores only what it adds. With swap_model, \
                      the model of that name answers turn `at` on the fork instead (a \
                      what-if regeneration; returns the job). dry_run returns the plan.",
        writes: true,
        schema: || {
            object(
                json!({
                    "session": session_arg(),
                    "at": { "type": "integer", "minimum": 0, "description": "The fork point K: the child shares turns 0..K-1." },
                    "anchor": { "type": "string", "description": "Fork at this anchor's index instead of at." },
                    "label": { "type": "string", "description": "The branch label (unique among the parent's forks)." },
                    "reason": { "type": "string" },
                    "id": { "type": "string", "description": "The new session's id (default: a UUID v7)." },
                    "request_id": { "type": "string", "description": "A retry with the same id returns the first fork." },
                    "principal": { "type": "string", "description": "Who the fork runs for." },
                    "summarize": { "type": "boolean", "description": "Store a summary of the inherited prefix." },
                    "dry_run": { "type": "boolean" },
                    "swap_model": { "type": "string", "description": "Regenerate turn `at` with this model on the fork." },
                    "endpoint": { "type": "string", "description": "With swap_model: the OpenAI-compatible base URL." }
                }),
                &["session"],
            )
        },
    },
    Tool {
        name: "append_turn",
        description: "Append a turn to a session; returns its index.",
        writes: true,
        schema: || {
            object(
                json!({
                    "session": session_arg(),
                    "role": { "type": "string", "enum": ["system", "user", "assistant", "tool"] },
                    "content": { "type": "string" },
                    "kind": { "type": "string", "enum": crate::model::Kind::NAMES },
                    "model": { "type": "string", "description": "The model that wrote the turn." },
                    "name": { "type": "string" },
                    "tool_call_id": { "type": "string" },
                    "tool_calls": { "type": "array", "items": { "type": "object" } },
                    "payload": { "description": "The runtime's own record of the turn, returned as given." }
                }),
                &["session", "role", "content"],
            )
        },
    },
    Tool {
        name: "diff_sessions",
        description: "How two sessions relate (common ancestor, first differing index) \
                      and the turns where they part.",
        writes: false,
        schema: || {
            json!({
                "type": "object",
                "properties": { "a": session_arg(), "b": session_arg() },
                "required": ["a", "b"],
                "additionalProperties": false
            })
        },
    },
    Tool {
        name: "regenerate",
        description: "What-if: fork a session at `at` and let a model (another one, a \
                      new system prompt, other tools) answer turn `at` on the fork. \
                      Returns the job at once; follow it with job_status. dry_run \
                      returns the plan.",
        writes: true,
        schema: || {
            object(
                json!({
                    "session": session_arg(),
                    "at": { "type": "integer", "minimum": 0 },
                    "model": { "type": "string" },
                    "system_prompt": { "type": "string" },
                    "tools": { "type": "array", "items": { "type": "object" }, "description": "OpenAI tool definitions." },
                    "endpoint": { "type": "string", "description": "OpenAI-compatible base URL." },
                    "max_tokens": { "type": "integer", "minimum": 1 },
                    "temperature": { "type": "number", "minimum": 0, "maximum": 2 },
                    "reason": { "type": "string" },
                    "request_id": { "type": "string" },
                    "again": { "type": "boolean" },
                    "max_context_tokens": { "type": "integer", "minimum": 1 },
                    "timeout_secs": { "type": "integer", "minimum": 1 },
                    "dry_run": { "type": "boolean" }
                }),
                &["session", "at"],
            )
        },
    },
    Tool {
        name: "job_status",
        description: "A regeneration job: status, fork, model, tokens, error.",
        writes: false,
        schema: || object(json!({ "job": { "type": "string" } }), &["job"]),
    },
    Tool {
        name: "cancel_job",
        description: "Cancel a running regeneration job.",
        writes: true,
        schema: || object(json!({ "job": { "type": "string" } }), &["job"]),
    },
    Tool {
        name: "query",
        description: "Run a read-only SPARQL 1.1 query (SELECT, ASK, CONSTRUCT, DESCRIBE) \
                      over every session graph; the default graph is their union. \
                      SELECT answers are SPARQL JSON results, at most `limit` rows \
                      (default 200), with truncated set when there were more.",
        writes: false,
        schema: || {
            object(
                json!({
                    "query": { "type": "string" },
                    "limit": { "type": "integer", "minimum": 1, "maximum": QUERY_ROWS_MAX }
                }),
                &["query"],
            )
        },
    },
    Tool {
        name: "verify",
        description: "Check one session (or every session): recompute turn digests \
                      across fork points, check lineage, indices, labels, provenance.",
        writes: false,
        schema: || {
            json!({
                "type": "object",
                "properties": { "session": session_arg() },
                "additionalProperties": false
            })
        },
    },
];

/// A JSON-RPC error.
struct RpcError {
    code: i64,
    message: String,
}

impl RpcError {
    fn invalid_params(message: impl Into<String>) -> Self {
        Self {
            code: -32602,
            message: message.into(),
        }
    }
}

/// The server: the store and what it allows.
pub struct McpServer {
    store: Arc<Store>,
    config: McpConfig,
}

impl McpServer {
    pub fn new(store: Arc<Store>, config: McpConfig) -> Self {
        Self { store, config }
    }

    /// Serves requests read from `input` (one JSON-RPC message per line) until it ends,
    /// writing one response per line to `output`.
    pub fn run(&self, input: impl BufRead, mut output: impl Write) -> Result<()> {
        let write_err = |e: std::io::Error| Error::io("cannot write to the MCP client", e);
        for line in input.lines() {
            let line = line.map_err(|e| Error::io("cannot read from the MCP client", e))?;
            if line.trim().is_empty() {
                continue;
            }
            if let Some(reply) = self.handle_line(&line) {
                writeln!(output, "{reply}").map_err(write_err)?;
                output.flush().map_err(write_err)?;
            }
        }
        Ok(())
    }

    /// The response to one message, or `None` for a notification.
    pub fn handle_line(&self, line: &str) -> Option<Value> {
        let message: Value = match serde_json::from_str(line) {
            Ok(m) => m,
            Err(e) => {
                return Some(error_reply(
                    Value::Null,
                    -32700,
                    format!("parse error: {e}"),
                ))
            }
        };
        if let Value::Array(batch) = message {
            // Batches (2025-03-26 and earlier): each member answered, notifications not.
            let replies: Vec<Value> = batch.into_iter().filter_map(|m| self.handle(m)).collect();
            return (!replies.is_empty()).then_some(Value::Array(replies));
        }
        self.handle(message)
    }

    fn handle(&self, message: Value) -> Option<Value> {
        let id = message.get("id").cloned();
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            // A response (we send no requests) or nonsense: answer only what has an id.
            return id.map(|id| error_reply(id, -32600, "invalid request: no method".into()));
        };
        let params = message.get("params").cloned().unwrap_or(json!({}));
        let result = self.dispatch(method, params);
        let id = id?; // a notification: no response, whatever happened
        Some(match result {
            Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
            Err(e) => error_reply(id, e.code, e.message),
        })
    }

    fn dispatch(&self, method: &str, params: Value) -> std::result::Result<Value, RpcError> {
        match method {
            "initialize" => {
                let asked = params.get("protocolVersion").and_then(Value::as_str);
                let version = asked
                    .filter(|v| VERSIONS.contains(v))
                    .unwrap_or(VERSIONS[VERSIONS.len() - 1]);
                Ok(json!({
                    "protocolVersion": version,
                    "capabilities": {
                        "tools": { "listChanged": false },
                        "resources": { "subscribe": false, "listChanged": false }
                    },
                    "serverInfo": {
                        "name": "forktrail",
                        "title": "forktrail",
                        "version": env!("CARGO_PKG_VERSION")
                    },
                    "instructions": self.instructions()
                }))
            }
            "ping" => Ok(json!({})),
            "tools/list" => Ok(json!({ "tools": self.tools() })),
            "tools/call" => self.call(params),
            "resources/list" => self.resources(),
            "resources/templates/list" => Ok(json!({
                "resourceTemplates": [{
                    "uriTemplate": format!("{RESOURCE_PREFIX}{{session}}{RESOURCE_SUFFIX}"),
                    "name": "session-replay",
                    "title": "A session's replay",
                    "description": "The turns of a session in order (index, role, content, branch), inherited prefix included.",
                    "mimeType": "application/json"
                }]
            })),
            "resources/read" => self.read_resource(params),
            _ if method.starts_with("notifications/") => Ok(Value::Null),
            other => Err(RpcError {
                code: -32601,
                message: format!("method not found: {other}"),
            }),
        }
    }

    fn instructions(&self) -> String {
        let mut text = String::from(
            "forktrail stores agent sessions as RDF with share-don't-copy forks and PROV-O \
             provenance. Replay a session, fork it at a turn to try another continuation \
             (fork_session; swap_model to let another model answer), diff two sessions, \
             and audit with SPARQL (query).",
        );
        if !self.config.allow_writes {
            text.push_str(" This server is read-only: it was started without --allow-writes.");
        }
        text
    }

    fn tools(&self) -> Vec<Value> {
        TOOLS
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "inputSchema": (t.schema)(),
                    "annotations": {
                        "readOnlyHint": !t.writes,
                        "destructiveHint": false,
                        "idempotentHint": !t.writes,
                        "openWorldHint": t.name == "regenerate" || t.name == "fork_session"
                    }
                })
            })
            .collect()
    }

    /// `tools/call`: an unknown tool or arguments that are not an object are protocol
    /// errors; anything the operation refuses is a tool result with `isError`.
    fn call(&self, params: Value) -> std::result::Result<Value, RpcError> {
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("tools/call needs a tool name"))?;
        let tool = TOOLS
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| RpcError::invalid_params(format!("unknown tool: {name}")))?;
        let args = match params.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(args)) => args.clone(),
            Some(_) => return Err(RpcError::invalid_params("arguments must be an object")),
        };
        let outcome = if tool.writes && !self.config.allow_writes {
            Err(Error::InvalidInput(format!(
                "{name} writes to the store, and this MCP server is read-only (start it \
                 with `forktrail mcp --allow-writes`)"
            )))
        } else {
            self.run_tool(name, args)
        };
        Ok(match outcome {
            Ok(value) => {
                let text = serde_json::to_string_pretty(&value).unwrap_or_default();
                let mut result = json!({
                    "content": [{ "type": "text", "text": text }],
                    "isError": false
                });
                if value.is_object() {
                    result["structuredContent"] = value;
                }
                result
            }
            Err(e) => json!({
                "content": [{ "type": "text", "text": e.to_string() }],
                "isError": true
            }),
        })
    }

    fn run_tool(&self, name: &str, mut args: Map<String, Value>) -> Result<Value> {
        let store = &*self.store;
        match name {
            "list_sessions" => {
                no_more(&args)?;
                json_of(json!({ "sessions": store.list()? }))
            }
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
                no_more(&args)?;
                json_of(json!({ "branches": store.branches(&session)? }))
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
                json_of(store.cancel_job(&job)?)
            }
            "query" => {
                let text: String = required(&mut args, "query")?;
                let limit: Option<usize> = optional(&mut args, "limit")?;
                no_more(&args)?;
                let limit = limit.unwrap_or(QUERY_ROWS).clamp(1, QUERY_ROWS_MAX);
                query(store, &text, limit)
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

    /// Starts a regeneration (or returns its plan, or the earlier identical job); the
    /// model call runs on a thread of its own.
    fn regenerate(&self, session: &SessionId, options: RegenerateOptions) -> Result<Value> {
        if options.allow_remote && !self.config.allow_remote_models {
            return Err(Error::InvalidInput(
                "this MCP server does not send sessions to endpoints off its machine \
                 (start it with --allow-remote-models)"
                    .into(),
            ));
        }
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

    fn resources(&self) -> std::result::Result<Value, RpcError> {
        let sessions = self.store.list().map_err(internal)?;
        let resources: Vec<Value> = sessions
            .iter()
            .map(|s| {
                let title = s.title.clone().unwrap_or_else(|| s.session.to_string());
                json!({
                    "uri": format!("{RESOURCE_PREFIX}{}{RESOURCE_SUFFIX}", s.session),
                    "name": s.session,
                    "title": format!("{title} ({}, {} turns)", s.branch, s.length),
                    "mimeType": "application/json"
                })
            })
            .collect();
        Ok(json!({ "resources": resources }))
    }

    fn read_resource(&self, params: Value) -> std::result::Result<Value, RpcError> {
        let uri = params
            .get("uri")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("resources/read needs a uri"))?;
        let not_found = || RpcError {
            code: -32002,
            message: format!("resource not found: {uri}"),
        };
        let id = uri
            .strip_prefix(RESOURCE_PREFIX)
            .and_then(|rest| rest.strip_suffix(RESOURCE_SUFFIX))
            .and_then(|id| SessionId::new(id).ok())
            .ok_or_else(not_found)?;
        let records = match self.store.replay(&id, None) {
            Ok(records) => records,
            Err(Error::SessionNotFound { .. }) => return Err(not_found()),
            Err(e) => return Err(internal(e)),
        };
        let text = serde_json::to_string_pretty(&records).unwrap_or_default();
        Ok(json!({
            "contents": [{ "uri": uri, "mimeType": "application/json", "text": text }]
        }))
    }
}

fn internal(e: Error) -> RpcError {
    RpcError {
        code: -32603,
        message: e.to_string(),
    }
}

fn error_reply(id: Value, code: i64, message: String) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
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

/// A read-only query's answer, capped at `limit` rows or triples.
fn query(store: &Store, text: &str, limit: usize) -> Result<Value> {
    let fail = |e: std::io::Error| Error::io("cannot write the query results", e);
    match store.query(text, &[])? {
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
