//! `forktrail mcp`: a Model Context Protocol server over standard input and output, so
//! an agent (or its host) can list, replay, fork, diff, regenerate and compare sessions
//! itself.
//!
//! The protocol is JSON-RPC 2.0, one message per line, with the `initialize` handshake
//! (protocol versions 2024-11-05 to 2025-11-25). The server is synchronous and small:
//! each request runs on the same [`Store`] and with the same semantics as the CLI, and
//! a failed operation is a tool result with `isError` and the CLI's message. Writes
//! (`fork_session`, `append_turn`, `regenerate`, `compare_models`, `cancel_job`) are
//! refused unless the server was started with writes allowed; a regeneration runs on a
//! thread of its own, and `job_status` follows it; a comparison's runs run on a thread
//! of their own, and `comparison` follows them.
//!
//! Each session's replay is also a resource, `forktrail://sessions/{id}/replay`.
//!
//! What a client's input cannot do: stop or exhaust the server. A line that is not UTF-8
//! or not JSON is answered with a parse error (-32700) and the next line read. A line
//! longer than [`MAX_LINE_BYTES`] (64 MiB) is answered with an error and read past in
//! chunks, never held whole; a message of more than [`MAX_JSON_VALUES`] values or
//! [`MAX_JSON_CONTAINERS`] objects and arrays is refused before it is parsed. Batches
//! (JSON-RPC 2.0 § 6, MCP 2025-03-26 and earlier) are answered member by member,
//! notifications left out; an empty batch, or one of more than [`MAX_BATCH`] messages,
//! is one error with nothing run; once a batch's replies pass [`BATCH_REPLY_BUDGET`]
//! (32 MiB), its remaining calls are not run but answered with an error each. Turn
//! contents are checked by the store, the same for every surface.

use crate::error::{Error, Result};
use crate::model::{ForkOptions, JobStatus, NewTurn, SessionId};
use crate::store::Store;
use crate::whatif::{CompareOptions, RegenerateOptions};
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

/// The longest line (one message) read, in bytes: 64 MiB. That is twice the largest turn
/// content `forktrail serve` accepts (32 MiB), so such a content fits in a call with room
/// for its JSON escapes, and it is the request body limit of `forktrail serve`
/// (`ServerConfig::max_body_bytes`), so what REST takes in one request MCP takes in one
/// line. A longer line is answered with an error (-32600, id null) and read past chunk
/// by chunk: at most this much of it is ever held.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// The most JSON values one message may hold (counted, before parsing, as the `[`, `{`,
/// `,` and `:` outside strings: every value but a container's first follows one), and
/// [`MAX_JSON_CONTAINERS`] the most objects and arrays. A message is parsed whole into
/// `serde_json::Value`s, where a value takes 32 bytes and an object or array a node of
/// up to ~640 bytes more, so the 64 MiB of a line filled with `{"":0},` would take some
/// 5 GiB parsed. These two keep a message's parse under ~100 MB besides its strings; the
/// largest legitimate messages stay far below (a turn's content is one value; a batch
/// of [`MAX_BATCH`] calls holds some 150,000 values and 30,000 objects).
pub const MAX_JSON_VALUES: usize = 1_000_000;
/// The most objects and arrays one message may hold: see [`MAX_JSON_VALUES`].
pub const MAX_JSON_CONTAINERS: usize = 100_000;

/// The most messages one batch may hold; a longer batch is refused whole (one error, id
/// null, nothing run). Every member of a batch is owed a reply, and past
/// [`BATCH_REPLY_BUDGET`] each still gets an error of about 200 bytes (and its id), so
/// this keeps those to some 2 MB. MCP clients batch a handful of calls (and protocol
/// 2025-06-18 dropped batches).
pub const MAX_BATCH: usize = 10_000;

/// The reply bytes a batch's calls may run up: a batch's reply is built in memory before
/// it is written, so once its replies pass 32 MiB (the largest turn content the REST API
/// takes) its remaining calls are not run, and each with an id is answered with an error
/// (-32000) saying so instead (JSON-RPC owes every request with an id a response). The
/// first call always runs, so a call that works alone works first in a batch; a batch's
/// reply is at most this, plus its last run call's reply, plus those errors.
pub const BATCH_REPLY_BUDGET: usize = 32 * 1024 * 1024;

/// The code of the error answering a batch's call that was not run.
const NOT_RUN: i64 = -32000;
/// The line buffer kept between messages; a longer line's is given back.
const LINE_BUFFER_KEPT: usize = 64 * 1024;

/// How the server runs.
#[derive(Clone, Debug, Default)]
pub struct McpConfig {
    /// Allow the tools that write (`fork_session`, `append_turn`, `regenerate`,
    /// `compare_models`, `cancel_job`).
    pub allow_writes: bool,
    /// Let `regenerate` and `compare_models` send context to model endpoints off this
    /// machine.
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

/// One arm of `compare_models`: [`crate::Arm`].
fn arm_schema() -> Value {
    object(
        json!({
            "model": { "type": "string" },
            "name": { "type": "string", "description": "The arm's name (default: the model, made unique)." },
            "provider": { "type": "string", "enum": ["openai", "anthropic"], "description": "The wire format (default openai)." },
            "endpoint": { "type": "string", "description": "The base URL (default: the provider's)." },
            "system_prompt": { "type": "string", "description": "Replaces the system message." },
            "tools": { "type": "array", "items": { "type": "object" }, "description": "OpenAI tool definitions offered (default: none)." },
            "temperature": { "type": "number", "minimum": 0, "maximum": 2 },
            "max_tokens": { "type": "integer", "minimum": 1 }
        }),
        &["model"],
    )
}

/// A model's price: [`crate::Price`].
fn price_schema() -> Value {
    object(
        json!({
            "input": { "type": "number", "minimum": 0 },
            "output": { "type": "number", "minimum": 0 },
            "cached": { "type": "number", "minimum": 0, "description": "Cached input (default: the input price)." }
        }),
        &["input", "output"],
    )
}

const TOOLS: &[Tool] = &[
    Tool {
        name: "list_sessions",
        description: "A page of sessions, newest activity first: id, branch, parent, fork \
                      point, length, own turns, forks, models, last activity, title; and \
                      `next`, the cursor of the next page (null on the last). Filters: \
                      principal, model, roots, parent (children of a session), family \
                      (a session's whole tree), since (RFC 3339).",
        writes: false,
        schema: || {
            object(
                json!({
                    "limit": { "type": "integer", "minimum": 1, "maximum": 1000, "description": "Sessions per page (default 50)." },
                    "cursor": { "type": "string", "description": "The `next` of the page before." },
                    "order": { "type": "string", "enum": ["activity", "created"], "description": "activity (default): newest activity first; created: newest first, each session once while they grow." },
                    "principal": { "type": "string" },
                    "model": { "type": "string" },
                    "roots": { "type": "boolean" },
                    "parent": session_arg(),
                    "family": session_arg(),
                    "since": { "type": "string", "description": "Only sessions active at or after this time (RFC 3339)." }
                }),
                &[],
            )
        },
    },
    Tool {
        name: "search",
        description: "Search turn contents, titles, branch labels and models: words (all \
                      required) and \"phrases\" in quotes, best first. Each hit names the \
                      session that stores the turn, its index and role, and a snippet with \
                      the matches' byte ranges; `next` pages on.",
        writes: false,
        schema: || {
            object(
                json!({
                    "text": { "type": "string" },
                    "limit": { "type": "integer", "minimum": 1, "maximum": 1000 },
                    "cursor": { "type": "string" }
                }),
                &["text"],
            )
        },
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
        description: "A page of the direct children (forks) of a session, newest first: \
                      id, label, fork point; `total`, and `next`, the cursor of the next \
                      page (null on the last).",
        writes: false,
        schema: || {
            object(
                json!({
                    "session": session_arg(),
                    "limit": { "type": "integer", "minimum": 1, "maximum": 1000, "description": "Forks per page (default 50)." },
                    "cursor": { "type": "string", "description": "The `next` of the page before." }
                }),
                &["session"],
            )
        },
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
        description: "Cancel a running regeneration job, or a comparison's running \
                      runs (by the comparison's id) or one run (by its id).",
        writes: true,
        schema: || object(json!({ "job": { "type": "string" } }), &["job"]),
    },
    Tool {
        name: "compare_models",
        description: "What-if comparison: fork a session at `at` once per arm and let \
                      each arm's model carry on from there; its tool calls are answered \
                      from the recording (never executed), the recorded user turns fed \
                      in turn. Returns the comparison at once (status running, its runs \
                      going on); follow it with `comparison`, stop it with cancel_job. \
                      An identical earlier comparison is returned instead (reused) \
                      unless `again`. dry_run returns each arm's estimated cost.",
        writes: true,
        schema: || {
            object(
                json!({
                    "session": session_arg(),
                    "at": { "type": "integer", "minimum": 1, "description": "The fork point K: every arm sees turns 0..K-1 and answers turn K." },
                    "arms": { "type": "array", "minItems": 1, "items": arm_schema() },
                    "max_steps": { "type": "integer", "minimum": 1, "description": "The most model calls per arm (default 50)." },
                    "prices": {
                        "type": "object",
                        "description": "Prices by model, in US dollars per million tokens.",
                        "additionalProperties": price_schema()
                    },
                    "budget_usd": { "type": "number", "minimum": 0, "description": "The money cap of the whole comparison, in US dollars (required with an endpoint off this machine)." },
                    "allow_remote": { "type": "boolean", "description": "Allow endpoints off this machine (the server must allow them too)." },
                    "again": { "type": "boolean", "description": "Run anew even if an identical comparison exists." },
                    "parallel": { "type": "integer", "minimum": 1, "description": "How many arms run at once (default 1)." },
                    "timeout_secs": { "type": "integer", "minimum": 1 },
                    "max_context_tokens": { "type": "integer", "minimum": 1 },
                    "dry_run": { "type": "boolean" }
                }),
                &["session", "at", "arms"],
            )
        },
    },
    Tool {
        name: "comparison",
        description: "A comparison (by its id, or the id of one of its runs): status, and \
                      per arm (the recording's own continuation, the baseline, first) \
                      its run status, steps, tool calls, tokens, latency, cost, where it \
                      first diverges from the baseline, and the turns side by side.",
        writes: false,
        schema: || object(json!({ "id": { "type": "string" } }), &["id"]),
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
    /// writing one response per line to `output`. Bad input (not UTF-8, not JSON, too
    /// long) is answered with an error and the next line read; only a failure to read or
    /// write ends it early.
    pub fn run(&self, mut input: impl BufRead, mut output: impl Write) -> Result<()> {
        let write_err = |e: std::io::Error| Error::io("cannot write to the MCP client", e);
        let mut line = Vec::new();
        loop {
            let fits = match read_line(&mut input, &mut line, MAX_LINE_BYTES) {
                Ok(Some(fits)) => fits,
                Ok(None) => return Ok(()),
                Err(e) => return Err(Error::io("cannot read from the MCP client", e)),
            };
            let reply = if !fits {
                Some(error_text(
                    Value::Null,
                    -32600,
                    format!(
                        "Invalid Request: a line is longer than {} MiB ({MAX_LINE_BYTES} \
                         bytes), the most this server reads; it was skipped",
                        MAX_LINE_BYTES >> 20
                    ),
                ))
            } else if line.trim_ascii().is_empty() {
                None
            } else {
                self.handle_line(&line)
            };
            if let Some(reply) = reply {
                output
                    .write_all(reply.as_bytes())
                    .and_then(|()| output.write_all(b"\n"))
                    .and_then(|()| output.flush())
                    .map_err(write_err)?;
            }
            line.clear();
            line.shrink_to(LINE_BUFFER_KEPT);
        }
    }

    /// The reply to one line (one message, or a batch of them) as the text [`run`]
    /// writes for it, without the newline; `None` when nothing is owed (a notification,
    /// or a batch of only notifications).
    ///
    /// [`run`]: Self::run
    pub fn handle_line(&self, line: impl AsRef<[u8]>) -> Option<String> {
        let text = match std::str::from_utf8(line.as_ref()) {
            Ok(text) => text,
            Err(e) => {
                let at = e.valid_up_to();
                return Some(error_text(
                    Value::Null,
                    -32700,
                    format!("parse error: the line is not UTF-8 (invalid byte at offset {at})"),
                ));
            }
        };
        if let Some(why) = too_many_values(text.as_bytes()) {
            return Some(error_text(Value::Null, -32600, why));
        }
        match serde_json::from_str(text) {
            Err(e) => Some(error_text(Value::Null, -32700, format!("parse error: {e}"))),
            Ok(Value::Array(batch)) => self.batch(batch),
            Ok(message) => self.handle(message, true).map(|reply| reply.to_string()),
        }
    }

    /// A batch's reply (JSON-RPC 2.0 § 6): one response per member that is not a
    /// notification, in order; calls are run while the replies so far are within
    /// [`BATCH_REPLY_BUDGET`], and the rest answered with an error.
    fn batch(&self, batch: Vec<Value>) -> Option<String> {
        if batch.is_empty() {
            return Some(error_text(Value::Null, -32600, "Invalid Request".into()));
        }
        if batch.len() > MAX_BATCH {
            return Some(error_text(
                Value::Null,
                -32600,
                format!(
                    "Invalid Request: a batch holds at most {MAX_BATCH} messages, and this \
                     one holds {}; none was run",
                    batch.len()
                ),
            ));
        }
        let mut out = vec![b'['];
        for message in batch {
            let run = out.len() <= BATCH_REPLY_BUDGET;
            if let Some(reply) = self.handle(message, run) {
                if out.len() > 1 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut out, &reply).expect("JSON goes into memory");
            }
        }
        if out.len() == 1 {
            return None; // only notifications
        }
        out.push(b']');
        Some(String::from_utf8(out).expect("serde_json writes UTF-8"))
    }

    /// The response to one message, or `None` for a notification. With `run` false (a
    /// batch past its budget) the call is not run, and answered with an error.
    fn handle(&self, message: Value, run: bool) -> Option<Value> {
        let Value::Object(message) = message else {
            // A number, a string, a nested batch...: not a request, and no id to answer.
            return Some(error_reply(Value::Null, -32600, "Invalid Request".into()));
        };
        let id = message.get("id").cloned();
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            // A response (we send no requests) or nonsense.
            let id = id.unwrap_or(Value::Null);
            return Some(error_reply(id, -32600, "Invalid Request: no method".into()));
        };
        if !run {
            return id.map(|id| {
                let message = format!(
                    "not run: the replies to this batch passed {} MiB, the most one batch \
                     may run up; send this call again on its own or in a smaller batch",
                    BATCH_REPLY_BUDGET >> 20
                );
                error_reply(id, NOT_RUN, message)
            });
        }
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
            "resources/list" => self.resources(&params),
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
             (fork_session; swap_model to let another model answer), replay the rest of a \
             session against other models and measure each (compare_models), diff two \
             sessions, and audit with SPARQL (query).",
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
                        "openWorldHint": matches!(t.name, "regenerate" | "fork_session" | "compare_models")
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

    /// Starts a regeneration (or returns its plan, or the earlier identical job); the
    /// model call runs on a thread of its own.
    fn regenerate(&self, session: &SessionId, options: RegenerateOptions) -> Result<Value> {
        self.refuse_remote_unless_allowed(options.allow_remote)?;
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

    /// One page of replay resources (newest sessions first), with `nextCursor`.
    fn resources(&self, params: &Value) -> std::result::Result<Value, RpcError> {
        let cursor = params
            .get("cursor")
            .and_then(Value::as_str)
            .map(str::to_string);
        let page = self
            .store
            .sessions(&crate::SessionQuery {
                cursor,
                order: crate::SessionOrder::Created,
                limit: Some(crate::DEFAULT_PAGE),
                ..Default::default()
            })
            .map_err(|e| match e {
                Error::InvalidInput(m) => RpcError::invalid_params(m),
                other => internal(other),
            })?;
        let resources: Vec<Value> = page
            .sessions
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
        let mut reply = json!({ "resources": resources });
        if let Some(next) = page.next {
            reply["nextCursor"] = json!(next);
        }
        Ok(reply)
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

fn error_text(id: Value, code: i64, message: String) -> String {
    error_reply(id, code, message).to_string()
}

/// Reads one line into `line`, its newline dropped, holding at most `max` bytes of it:
/// `Some(true)` for a line that fits, `Some(false)` for a longer one (read to its end
/// chunk by chunk and dropped, `line` left empty), `None` at the end of the input.
fn read_line(
    input: &mut impl BufRead,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Option<bool>> {
    line.clear();
    let (mut read, mut fits) = (false, true);
    loop {
        let chunk = match input.fill_buf() {
            Ok(chunk) => chunk,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(read.then_some(fits));
        }
        read = true;
        let newline = chunk.iter().position(|&b| b == b'\n');
        let part = &chunk[..newline.unwrap_or(chunk.len())];
        if fits && line.len() + part.len() <= max {
            // Grown by doubling, but never past `max`.
            let wanted = (line.len() + part.len())
                .max(line.capacity().saturating_mul(2))
                .min(max);
            line.reserve_exact(wanted - line.len());
            line.extend_from_slice(part);
        } else if fits {
            fits = false;
            line.clear();
        }
        let used = newline.map_or(chunk.len(), |n| n + 1);
        input.consume(used);
        if newline.is_some() {
            return Ok(Some(fits));
        }
    }
}

/// Why a JSON text would parse into more than [`MAX_JSON_VALUES`] values or
/// [`MAX_JSON_CONTAINERS`] objects and arrays, if it would: counted without parsing, as
/// the `[`, `{`, `,` and `:` outside strings.
fn too_many_values(text: &[u8]) -> Option<String> {
    let (mut values, mut containers) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &b in text {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                values += 1;
                containers += 1;
            }
            b',' | b':' => values += 1,
            _ => {}
        }
    }
    (values > MAX_JSON_VALUES || containers > MAX_JSON_CONTAINERS).then(|| {
        format!(
            "Invalid Request: a message may hold at most {MAX_JSON_VALUES} JSON values and \
             {MAX_JSON_CONTAINERS} objects and arrays, and this one holds about {values} \
             and {containers}; it was not read"
        )
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufReader, Read};

    #[test]
    fn a_line_past_the_limit_is_read_past_without_being_held() {
        // 10 MiB of one line, made as it is read: the test holds none of it either.
        let long = std::io::repeat(b'x').take(10 << 20);
        let mut input = BufReader::new(long.chain(&b"\nnext\n"[..]));
        let mut line = Vec::new();
        assert_eq!(read_line(&mut input, &mut line, 1024).unwrap(), Some(false));
        assert!(line.is_empty());
        assert!(line.capacity() <= 1024, "held {} bytes", line.capacity());
        assert_eq!(read_line(&mut input, &mut line, 1024).unwrap(), Some(true));
        assert_eq!(line, b"next");
        assert_eq!(read_line(&mut input, &mut line, 1024).unwrap(), None);
    }

    #[test]
    fn a_line_of_exactly_the_limit_fits_and_the_last_line_needs_no_newline() {
        let mut input = &b"abcd\nabcde\n\nab"[..];
        let mut line = Vec::new();
        let mut next = || {
            let fits = read_line(&mut input, &mut line, 4).unwrap();
            (fits, String::from_utf8(line.clone()).unwrap())
        };
        assert_eq!(next(), (Some(true), "abcd".into()));
        assert_eq!(next(), (Some(false), "".into()));
        assert_eq!(next(), (Some(true), "".into()));
        assert_eq!(next(), (Some(true), "ab".into()));
        assert_eq!(next(), (None, "".into()));
    }

    #[test]
    fn values_are_counted_outside_strings_only() {
        let zeros = |n: usize| format!("[{}]", vec!["0"; n].join(","));
        assert!(too_many_values(zeros(MAX_JSON_VALUES).as_bytes()).is_none());
        let refused = too_many_values(zeros(MAX_JSON_VALUES + 1).as_bytes()).unwrap();
        assert!(refused.contains("1000000 JSON values"), "{refused}");
        // Commas, colons and brackets inside a string (an escaped quote included) are
        // content, not values.
        let content = format!(r#"{{"content": "\"{}"}}"#, "[{,:".repeat(MAX_JSON_VALUES));
        assert!(too_many_values(content.as_bytes()).is_none());
        let objects = format!("[{}]", vec!["{}"; MAX_JSON_CONTAINERS].join(","));
        assert!(too_many_values(objects.as_bytes()).is_some());
    }
}
