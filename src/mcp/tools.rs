//! The tools `forktrail mcp` and `/mcp` offer: names, descriptions, argument schemas,
//! and whether each writes.

use serde_json::{json, Value};

/// The most rows (or triples) `query` returns by default, and at all.
pub(super) const QUERY_ROWS: usize = 200;
pub(super) const QUERY_ROWS_MAX: usize = 10_000;

/// One tool: its name, what it does, its arguments' JSON schema, whether it writes.
pub(super) struct Tool {
    pub(super) name: &'static str,
    pub(super) description: &'static str,
    pub(super) writes: bool,
    pub(super) schema: fn() -> Value,
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

pub(super) const TOOLS: &[Tool] = &[
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
                    "allow_remote": { "type": "boolean", "description": "Allow an endpoint off this machine (the server must allow them too); it then needs budget_usd and price." },
                    "budget_usd": { "type": "number", "minimum": 0, "description": "The money cap of the call, in US dollars: made only if its upper bound fits." },
                    "price": {
                        "type": "object",
                        "properties": {
                            "input": { "type": "number", "minimum": 0 },
                            "output": { "type": "number", "minimum": 0 },
                            "cached": { "type": "number", "minimum": 0 }
                        },
                        "required": ["input", "output"],
                        "description": "The model's price, in US dollars per million tokens."
                    },
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
                    "samples": { "type": "integer", "minimum": 1, "description": "Runs per arm, each its own fork (default 1): per-arm statistics over them." },
                    "timeout_secs": { "type": "integer", "minimum": 1 },
                    "max_context_tokens": { "type": "integer", "minimum": 1 },
                    "dry_run": { "type": "boolean" }
                }),
                &["session", "at", "arms"],
            )
        },
    },
    Tool {
        name: "run_experiment",
        description: "Live what-if experiment on a session recorded through the model \
                      proxy: per arm and sample, a fresh copy of `workspace`, the `agent` \
                      command started in it with its base URL on the experiment's \
                      endpoint; calls before `at` are answered from the recording (the \
                      agent's harness runs the recorded tools for real), then the arm's \
                      model answers; `verify` judges the copy (exit 0 passes). Returns \
                      the experiment at once (status running); follow its samples, pass \
                      rates and intervals with `comparison`, stop it with cancel_job. \
                      Runs commands on the server's machine: only a server started with \
                      --allow-experiments takes it.",
        writes: true,
        schema: || {
            object(
                json!({
                    "session": session_arg(),
                    "at": { "type": "integer", "minimum": 1, "description": "The fork point K." },
                    "arms": { "type": "array", "minItems": 1, "items": arm_schema() },
                    "agent": { "type": "string", "description": "The agent's command line (sh -c, in the copy)." },
                    "workspace": { "type": "string", "description": "The directory each sample gets a fresh copy of." },
                    "workspace_ref": { "type": "string", "description": "Make each copy a git worktree at this revision." },
                    "verify": { "type": "string", "description": "The judge (sh -c, in the copy): exit 0 is a pass." },
                    "samples": { "type": "integer", "minimum": 1, "description": "Samples per arm (default 1)." },
                    "verify_baseline": { "type": "boolean", "description": "Also replay the recording to its end as the baseline arm, judged the same way." },
                    "on_drift": { "type": "string", "enum": ["stop", "continue"] },
                    "sandbox": { "type": "string", "enum": ["none", "bwrap"] },
                    "writable": { "type": "array", "items": { "type": "string" }, "description": "More paths a sandboxed agent may write." },
                    "timeout_secs": { "type": "integer", "minimum": 1, "description": "The longest one agent may run (default 600)." },
                    "max_steps": { "type": "integer", "minimum": 1 },
                    "prices": { "type": "object", "additionalProperties": price_schema() },
                    "budget_usd": { "type": "number", "minimum": 0 },
                    "allow_remote": { "type": "boolean" },
                    "parallel": { "type": "integer", "minimum": 1, "description": "How many samples run at once (default 1)." },
                    "again": { "type": "boolean" }
                }),
                &["session", "at", "arms", "agent", "workspace", "verify"],
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

/// The tools as `tools/list` gives them, with hints of what each does to the store.
/// The tools a server lists: `run_experiment` only where it may run (see
/// [`super::McpConfig::allow_experiments`]).
pub(super) fn listed(experiments: bool) -> Vec<rmcp::model::Tool> {
    TOOLS
        .iter()
        .filter(|t| experiments || t.name != "run_experiment")
        .map(|t| {
            let Value::Object(schema) = (t.schema)() else {
                unreachable!("every tool's schema is an object")
            };
            let hints = rmcp::model::ToolAnnotations::new()
                .read_only(!t.writes)
                .destructive(false)
                .idempotent(!t.writes)
                .open_world(matches!(
                    t.name,
                    "regenerate" | "fork_session" | "compare_models" | "run_experiment"
                ));
            rmcp::model::Tool::new(t.name, t.description, std::sync::Arc::new(schema))
                .with_annotations(hints)
        })
        .collect()
}
