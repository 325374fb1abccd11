//! OpenTelemetry GenAI traces in: OTLP requests (protobuf or JSON, as `forktrail serve`
//! receives them at `/v1/traces`) and OTLP JSON Lines files (the OpenTelemetry file
//! exporter's format, one `ExportTraceServiceRequest` per line), decoded with the
//! protocol's own message types (`opentelemetry-proto`).
//!
//! A chat span's input messages are the whole conversation the model saw, and its
//! output messages what it answered: each span is a path of turns from the start of its
//! conversation. Every turn is named by the digest of the history up to it, so the
//! paths of all spans of a conversation make one tree (equal histories meet, a retried
//! answer or an edited prompt branches), which goes in through the Claude Code builder:
//! the conversation is a session, a branch a fork (`alt-N`), a conversation that grew
//! since it was imported gets its new turns, and nothing already stored is written
//! again. A conversation is named by `gen_ai.conversation.id`, else OpenInference's
//! `session.id`, else its trace.
//!
//! Messages are read from, in this order of preference:
//! - `gen_ai.input.messages`, `gen_ai.output.messages` and `gen_ai.system_instructions`
//!   (the GenAI conventions since 1.37: JSON, parts `text`, `tool_call`,
//!   `tool_call_response`, `reasoning`);
//! - `gen_ai.prompt.N.*` and `gen_ai.completion.N.*` attributes (1.36 and earlier, as
//!   OpenLLMetry sends them), and span events `gen_ai.{system,user,assistant,tool}.message`
//!   and `gen_ai.choice`;
//! - OpenInference's `llm.input_messages.N.message.*` and `llm.output_messages.N.message.*`.
//!
//! The answer is attributed to `gen_ai.response.model` (else `gen_ai.request.model`,
//! `llm.model_name`); its payload keeps the span's ids, tokens (`gen_ai.usage.*`,
//! `llm.token_count.*`) and latency. An `execute_tool` span whose result no later chat
//! span carries becomes the tool turn after the call. Spans of no GenAI shape, and
//! message parts of other types, are counted in the report by name.

use super::family::{Family, Node, SourceFile};
use crate::error::{Error, Result};
use crate::io::lines::LogLine;
use crate::io::report::{TranscriptOptions, TranscriptReport};
use crate::model::{Kind, NewTurn, Role, SessionId};
use crate::rdf::history_name;
use crate::store::Store;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};

/// Decodes an OTLP/HTTP request body: protobuf, or JSON when `json`.
pub(crate) fn decode_request(body: &[u8], json: bool) -> Result<ExportTraceServiceRequest> {
    if json {
        serde_json::from_slice(body)
            .map_err(|e| Error::InvalidInput(format!("not an OTLP JSON trace request: {e}")))
    } else {
        prost::Message::decode(body)
            .map_err(|e| Error::InvalidInput(format!("not an OTLP protobuf trace request: {e}")))
    }
}

/// Decodes an OTLP JSON Lines file: one trace request per non-blank line.
pub(crate) fn decode_lines(lines: &[LogLine]) -> Result<Vec<ExportTraceServiceRequest>> {
    lines
        .iter()
        .map(|(n, line)| {
            let line = line.as_deref().map_err(|fault| {
                Error::InvalidInput(format!("line {n}: {fault}; nothing was imported"))
            })?;
            serde_json::from_str(line).map_err(|e| {
                Error::InvalidInput(format!(
                    "line {n}: not an OTLP JSON trace request ({e}); nothing was imported"
                ))
            })
        })
        .collect()
}

/// One span, flattened: where it is in its trace, its times and its attributes.
struct SpanView {
    trace: String,
    span: String,
    name: String,
    start: u64,
    end: u64,
    attrs: BTreeMap<String, Value>,
    events: Vec<(String, BTreeMap<String, Value>)>,
}

impl SpanView {
    fn of(span: &Span) -> Self {
        SpanView {
            trace: hex(&span.trace_id),
            span: hex(&span.span_id),
            name: span.name.clone(),
            start: span.start_time_unix_nano,
            end: span.end_time_unix_nano,
            attrs: attributes(&span.attributes),
            events: span
                .events
                .iter()
                .map(|e| (e.name.clone(), attributes(&e.attributes)))
                .collect(),
        }
    }

    fn text(&self, key: &str) -> Option<String> {
        match self.attrs.get(key)? {
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            other => Some(other.to_string()),
        }
    }

    fn number(&self, key: &str) -> Option<u64> {
        match self.attrs.get(key)? {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.parse().ok(),
            _ => None,
        }
    }

    /// The conversation the span belongs to.
    fn conversation(&self) -> String {
        self.text("gen_ai.conversation.id")
            .or_else(|| self.text("session.id"))
            .unwrap_or_else(|| self.trace.clone())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attributes(attrs: &[KeyValue]) -> BTreeMap<String, Value> {
    attrs
        .iter()
        .map(|kv| (kv.key.clone(), kv.value.as_ref().map_or(Value::Null, any)))
        .collect()
}

/// An attribute value as JSON.
fn any(value: &AnyValue) -> Value {
    match &value.value {
        Some(any_value::Value::StringValue(s)) => Value::String(s.clone()),
        Some(any_value::Value::BoolValue(b)) => Value::Bool(*b),
        Some(any_value::Value::IntValue(i)) => json!(i),
        Some(any_value::Value::DoubleValue(d)) => json!(d),
        Some(any_value::Value::ArrayValue(a)) => Value::Array(a.values.iter().map(any).collect()),
        Some(any_value::Value::KvlistValue(kv)) => Value::Object(
            kv.values
                .iter()
                .map(|kv| (kv.key.clone(), kv.value.as_ref().map_or(Value::Null, any)))
                .collect(),
        ),
        Some(any_value::Value::BytesValue(b)) => Value::String(hex(b)),
        _ => Value::Null,
    }
}

/// A message as the conversation holds it: a role and its parts, normalised to the
/// latest conventions' shape.
struct Message {
    role: Role,
    parts: Vec<Value>,
}

impl Store {
    /// Imports OpenTelemetry GenAI spans (see the module's documentation), all or
    /// nothing: each conversation as a session and its branches as forks.
    pub fn import_otlp(
        &self,
        requests: &[ExportTraceServiceRequest],
        options: &TranscriptOptions<'_>,
    ) -> Result<TranscriptReport> {
        let mut report = TranscriptReport::default();
        let conversations = read_conversations(requests, &mut report);
        if conversations.values().all(|c| c.family.nodes.is_empty()) {
            return Err(Error::InvalidInput(
                "the traces hold no GenAI chat span with messages; nothing was imported".into(),
            ));
        }
        self.import_conversations(conversations.into_iter().collect(), options, report)
    }

    /// Imports the GenAI spans of one OTLP request as `/v1/traces` receives it, with
    /// memory bounded whatever the request holds: the request is read into its
    /// conversations and dropped, then the conversations go in by batches of about
    /// [`BATCH_TURNS`] turns, each built and committed on its own (a conversation is
    /// never split). A batch that fails is tried again conversation by conversation, and
    /// the spans of each conversation that still fails are refused, with why; the
    /// others stay imported. A failure of the store rather than of the spans (a full
    /// disk, a lost connection) fails the request, which the client may send again:
    /// what went in is not written twice.
    pub(crate) fn import_trace_request(
        &self,
        request: ExportTraceServiceRequest,
        options: &TranscriptOptions<'_>,
    ) -> Result<TraceOutcome> {
        let mut report = TranscriptReport::default();
        let conversations = read_conversations(std::slice::from_ref(&request), &mut report);
        drop(request);
        let mut outcome = TraceOutcome {
            report,
            rejected_spans: 0,
            refusals: Vec::new(),
        };
        let mut batch = Vec::new();
        let mut turns = 0;
        let mut pending = conversations
            .into_iter()
            .filter(|(_, c)| !c.family.nodes.is_empty())
            .peekable();
        while let Some((key, conversation)) = pending.next() {
            turns += conversation.family.nodes.len();
            batch.push((key, conversation));
            if turns >= BATCH_TURNS || pending.peek().is_none() {
                self.import_batch(std::mem::take(&mut batch), options, &mut outcome)?;
                turns = 0;
            }
        }
        Ok(outcome)
    }

    /// One batch of a request's conversations (see [`Store::import_trace_request`]).
    fn import_batch(
        &self,
        batch: Vec<(String, Conversation)>,
        options: &TranscriptOptions<'_>,
        outcome: &mut TraceOutcome,
    ) -> Result<()> {
        let names: Vec<(String, i64)> = batch.iter().map(|(k, c)| (k.clone(), c.spans)).collect();
        // Kept only in case the batch fails: it is at most a batch's size.
        let each = (batch.len() > 1).then(|| batch.clone());
        let whole = match self.import_conversations(batch, options, Default::default()) {
            Ok(part) => {
                outcome.report.absorb(part);
                return Ok(());
            }
            Err(e) if !about_the_input(&e) => return Err(e),
            Err(e) => e,
        };
        let Some(each) = each else {
            outcome.refuse(&names[0], &whole);
            return Ok(());
        };
        for ((key, conversation), name) in each.into_iter().zip(&names) {
            let one = vec![(key, conversation)];
            match self.import_conversations(one, options, Default::default()) {
                Ok(part) => outcome.report.absorb(part),
                Err(e) if !about_the_input(&e) => return Err(e),
                Err(e) => outcome.refuse(name, &e),
            }
        }
        Ok(())
    }

    /// Builds `conversations` and commits them in one transaction.
    fn import_conversations(
        &self,
        conversations: Vec<(String, Conversation)>,
        options: &TranscriptOptions<'_>,
        report: TranscriptReport,
    ) -> Result<TranscriptReport> {
        let families: BTreeMap<Option<String>, Family> = conversations
            .into_iter()
            .map(|(key, c)| (Some(session_name(&key)), c.into_family(&session_name(&key))))
            .collect();
        let file = SourceFile {
            name: Some("the OTLP traces".into()),
            lines: Vec::new(),
            agent: None,
            spawned_by: None,
        };
        self.import_families(&[file], families, "otel", options, report)
    }
}

/// How many turns a batch of one request's conversations gathers before it is built
/// and committed. An import takes about 15 KB a turn beyond its input while it builds
/// (measured: 60,000 turns of 100 bytes in one import, +872 MB), so a batch stays near
/// 30 MB whatever the request holds.
pub(crate) const BATCH_TURNS: usize = 2_000;

/// What one OTLP request brought (see [`Store::import_trace_request`]).
#[derive(Debug)]
pub(crate) struct TraceOutcome {
    /// What was imported, and what the spans held that was not kept.
    pub(crate) report: TranscriptReport,
    /// Chat spans refused: those of the conversations whose import failed.
    pub(crate) rejected_spans: i64,
    /// Why, one entry per conversation refused.
    pub(crate) refusals: Vec<String>,
}

impl TraceOutcome {
    /// Notes conversation `key` (of `spans` spans) refused, and why.
    fn refuse(&mut self, (key, spans): &(String, i64), why: &Error) {
        self.rejected_spans += spans;
        self.refusals.push(format!("conversation {key}: {why}"));
    }

    /// What the response says (OTLP's `partial_success.error_message`) when spans were
    /// refused, or when the request brought nothing to import: what was imported, the
    /// spans not imported (of no GenAI shape, or with nothing new), and the spans
    /// refused with why. `None` when the request's GenAI spans went in (spans of other
    /// kinds beside them are what a trace sink is sent, not news).
    pub(crate) fn message(&self) -> Option<String> {
        let report = &self.report;
        if self.rejected_spans == 0 && report.turns > 0 {
            return None;
        }
        let not_imported: u64 = report
            .skipped_types
            .iter()
            .filter(|(kind, _)| kind.starts_with("span "))
            .map(|(_, n)| n)
            .sum();
        let mut parts = vec![format!(
            "imported {} turns (sessions new: {}; extended: {})",
            report.turns,
            names(&report.sessions),
            names(&report.extended)
        )];
        if not_imported > 0 {
            let kinds: Vec<String> = report
                .skipped_types
                .iter()
                .filter(|(kind, _)| kind.starts_with("span "))
                .map(|(kind, n)| format!("{n} {kind}"))
                .collect();
            parts.push(format!("not imported: {}", kinds.join(", ")));
        }
        if self.rejected_spans > 0 {
            parts.push(format!(
                "refused {} spans: {}",
                self.rejected_spans,
                self.refusals.join("; ")
            ));
        }
        let mut text = parts.join("; ");
        // A message, not a log: a request of many refusals is summed up.
        if text.len() > MESSAGE_BYTES {
            let mut end = MESSAGE_BYTES;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            text.push_str(" …");
        }
        Some(text)
    }
}

/// The longest `partial_success.error_message` forktrail sends.
const MESSAGE_BYTES: usize = 4096;

fn names(ids: &[SessionId]) -> String {
    if ids.is_empty() {
        return "none".into();
    }
    ids.iter()
        .map(SessionId::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `e` is about what was sent (the same spans would be refused again), rather
/// than about the store just now.
fn about_the_input(e: &Error) -> bool {
    !matches!(
        e,
        Error::StorageFull { .. }
            | Error::StoreLocked { .. }
            | Error::Remote { .. }
            | Error::Contended { .. }
            | Error::Cancelled(_)
            | Error::Store(_)
            | Error::Io { .. }
    )
}

/// The conversations of the chat spans of `requests`, in span order; what the spans
/// hold that is not kept is counted in `report`. Each span is read as it comes, so
/// that nothing but the conversations outlives the loop.
fn read_conversations(
    requests: &[ExportTraceServiceRequest],
    report: &mut TranscriptReport,
) -> BTreeMap<String, Conversation> {
    let mut spans: Vec<&Span> = requests
        .iter()
        .flat_map(|r| &r.resource_spans)
        .flat_map(|r| &r.scope_spans)
        .flat_map(|s| &s.spans)
        .collect();
    spans.sort_by_key(|s| (s.start_time_unix_nano, s.end_time_unix_nano));
    let mut conversations: BTreeMap<String, Conversation> = BTreeMap::new();
    let mut tools = Vec::new();
    for span in spans {
        let span = SpanView::of(span);
        count_unread(&span, report);
        if span.text("gen_ai.operation.name").as_deref() == Some("execute_tool") {
            tools.push(span);
            continue;
        }
        let Some((input, output)) = exchange(&span, report) else {
            let kind = match span.text("gen_ai.operation.name") {
                Some(op) => format!("span {op} (no messages)"),
                None => format!("span {} (not a GenAI call)", span.name),
            };
            *report.skipped_types.entry(kind).or_default() += 1;
            continue;
        };
        let model = span
            .text("gen_ai.response.model")
            .or_else(|| span.text("gen_ai.request.model"))
            .or_else(|| span.text("llm.model_name"));
        let usage = json!({"otel": {
            "trace_id": span.trace,
            "span_id": span.span,
            "input_tokens": span.number("gen_ai.usage.input_tokens")
                .or_else(|| span.number("llm.token_count.prompt")),
            "output_tokens": span.number("gen_ai.usage.output_tokens")
                .or_else(|| span.number("llm.token_count.completion")),
            "latency_ms": span.end.saturating_sub(span.start) / 1_000_000,
        }});
        let mut turns = to_turns(&input, None, None, report);
        let answer = to_turns(&output, model.as_deref(), Some(&usage), report);
        turns.extend(answer);
        let conversation = conversations.entry(span.conversation()).or_default();
        conversation.add(&turns);
        conversation.spans += 1;
    }
    for span in tools {
        let added = conversations
            .get_mut(&span.conversation())
            .is_some_and(|c| c.add_tool_result(&span));
        if !added {
            let kind = "span execute_tool (its result is in a chat's input)".to_string();
            *report.skipped_types.entry(kind).or_default() += 1;
        }
    }
    conversations
}

/// The GenAI attributes forktrail reads; any other `gen_ai.*` or `llm.*` attribute of
/// a span is counted in the report as not kept.
const READ: [&str; 15] = [
    "gen_ai.operation.name",
    "gen_ai.conversation.id",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "gen_ai.tool.call.result",
    "llm.model_name",
    "llm.token_count.prompt",
    "llm.token_count.completion",
];

/// Flattened message attributes forktrail reads, by prefix.
const READ_PREFIXES: [&str; 4] = [
    "gen_ai.prompt.",
    "gen_ai.completion.",
    "llm.input_messages.",
    "llm.output_messages.",
];

/// Counts the span's GenAI attributes forktrail does not keep, by key.
fn count_unread(span: &SpanView, report: &mut TranscriptReport) {
    for key in span.attrs.keys() {
        let genai = key.starts_with("gen_ai.") || key.starts_with("llm.");
        let read = READ.contains(&key.as_str()) || READ_PREFIXES.iter().any(|p| key.starts_with(p));
        if genai && !read {
            *report
                .skipped_types
                .entry(format!("attribute {key} (not kept)"))
                .or_default() += 1;
        }
    }
}

/// The session a conversation key names: the key itself when it is a valid session
/// id, else `otel-` and a digest of it.
fn session_name(key: &str) -> String {
    match SessionId::new(key) {
        Ok(id) => id.to_string(),
        Err(_) => format!("otel-{}", &crate::rdf::sha256_hex(&[key.as_bytes()])[..32]),
    }
}

/// The turns of one conversation as a tree: every turn named by the digest of the
/// history up to it, without what spans report differently (`rdf::history_name`).
#[derive(Clone, Default)]
struct Conversation {
    family: Family,
    /// The spans that brought its turns.
    spans: i64,
    /// Turn digest → its index.
    index: HashMap<String, u64>,
    /// Tool call id → the digest of the turn that made it.
    calls: HashMap<String, String>,
    /// Tool call ids answered by a tool turn.
    answered: std::collections::HashSet<String>,
}

impl Conversation {
    /// Adds a path of turns from the start of the conversation.
    fn add(&mut self, turns: &[NewTurn]) {
        let mut prev: Option<String> = None;
        for (i, turn) in turns.iter().enumerate() {
            let digest = history_name(prev.as_deref().unwrap_or(""), i as u64, &turn.into());
            self.node(&digest, prev.clone(), i as u64, turn);
            prev = Some(digest);
        }
    }

    fn node(&mut self, digest: &str, parent: Option<String>, index: u64, turn: &NewTurn) {
        if let Some(id) = &turn.tool_call_id {
            self.answered.insert(id.clone());
        }
        for id in call_ids(turn) {
            self.calls.entry(id).or_insert_with(|| digest.to_string());
        }
        if self.family.by_uuid.contains_key(digest) {
            return;
        }
        self.index.insert(digest.to_string(), index);
        self.family
            .by_uuid
            .insert(digest.to_string(), self.family.nodes.len());
        self.family.nodes.push(Node {
            uuid: digest.to_string(),
            kind: if turn.role == Role::User {
                "user"
            } else {
                "assistant"
            }
            .into(),
            parent,
            turns: vec![turn.clone()],
            ..Node::default()
        });
    }

    /// The result of an `execute_tool` span, after the turn that made its call, when no
    /// chat span carried it. Whether it was added.
    fn add_tool_result(&mut self, span: &SpanView) -> bool {
        let Some(id) = span.text("gen_ai.tool.call.id") else {
            return false;
        };
        if self.answered.contains(&id) {
            return false;
        }
        let Some(caller) = self.calls.get(&id).cloned() else {
            return false;
        };
        let result = span
            .text("gen_ai.tool.call.result")
            .or_else(|| span.text("output.value"))
            .unwrap_or_default();
        let mut turn = NewTurn::new(Role::Tool, result).tool_call_id(id);
        if let Some(name) = span.text("gen_ai.tool.name") {
            turn = turn.name(name);
        }
        let index = self.index[&caller] + 1;
        let digest = history_name(&caller, index, &(&turn).into());
        self.node(&digest, Some(caller), index, &turn);
        true
    }

    fn into_family(mut self, session: &str) -> Family {
        for node in &mut self.family.nodes {
            node.log_session = Some(session.to_string());
        }
        self.family
    }
}

/// The ids of the tool calls a turn makes.
fn call_ids(turn: &NewTurn) -> Vec<String> {
    turn.tool_calls
        .as_deref()
        .and_then(|c| serde_json::from_str::<Value>(c).ok())
        .and_then(|c| c.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|c| c.get("id")?.as_str().map(str::to_string))
        .collect()
}

/// A chat span's input and output messages, from whichever shape it sends.
fn exchange(
    span: &SpanView,
    report: &mut TranscriptReport,
) -> Option<(Vec<Message>, Vec<Message>)> {
    let json_messages = |key: &str| -> Option<Vec<Message>> {
        let text = span.text(key)?;
        let value: Value = serde_json::from_str(&text).ok()?;
        Some(
            value
                .as_array()?
                .iter()
                .filter_map(latest_message)
                .collect(),
        )
    };
    if let Some(mut input) = json_messages("gen_ai.input.messages") {
        if let Some(system) = span
            .text("gen_ai.system_instructions")
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| v.as_array().cloned())
        {
            input.insert(
                0,
                Message {
                    role: Role::System,
                    parts: system,
                },
            );
        }
        let output = json_messages("gen_ai.output.messages").unwrap_or_default();
        return Some((input, output));
    }
    for (prompt, completion) in [
        ("gen_ai.prompt.", "gen_ai.completion."),
        ("llm.input_messages.", "llm.output_messages."),
    ] {
        let input = indexed(span, prompt);
        if !input.is_empty() {
            return Some((input, indexed(span, completion)));
        }
    }
    let (mut input, mut output) = (Vec::new(), Vec::new());
    for (name, attrs) in &span.events {
        let role = match name.as_str() {
            "gen_ai.system.message" => Role::System,
            "gen_ai.user.message" => Role::User,
            "gen_ai.assistant.message" => Role::Assistant,
            "gen_ai.tool.message" => Role::Tool,
            "gen_ai.choice" => {
                let message = attrs
                    .get("message")
                    .and_then(|m| match m {
                        Value::String(s) => serde_json::from_str(s).ok(),
                        other => Some(other.clone()),
                    })
                    .unwrap_or_else(|| json!({"content": attrs.get("content")}));
                output.push(legacy_message(Role::Assistant, &message));
                continue;
            }
            other => {
                *report
                    .skipped_types
                    .entry(format!("event {other}"))
                    .or_default() += 1;
                continue;
            }
        };
        let fields: Map<String, Value> = attrs.clone().into_iter().collect();
        input.push(legacy_message(role, &Value::Object(fields)));
    }
    (!input.is_empty()).then_some((input, output))
}

/// A message of the latest conventions: `{"role", "parts": [...]}`.
fn latest_message(value: &Value) -> Option<Message> {
    let role = parse_role(value.get("role")?.as_str()?)?;
    let parts = value.get("parts")?.as_array()?.clone();
    Some(Message { role, parts })
}

fn parse_role(role: &str) -> Option<Role> {
    match role {
        "system" | "developer" => Some(Role::System),
        "user" | "human" => Some(Role::User),
        "assistant" | "model" | "ai" => Some(Role::Assistant),
        "tool" | "function" => Some(Role::Tool),
        _ => None,
    }
}

/// A message of the older shapes (`content`, `tool_calls`, `tool_call_id`, as JSON
/// fields or flattened attributes) in the latest shape.
fn legacy_message(role: Role, m: &Value) -> Message {
    let mut parts = Vec::new();
    let content = match m.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    match (role, m.get("tool_call_id").or_else(|| m.get("id"))) {
        (Role::Tool, Some(Value::String(id))) => parts.push(json!({
            "type": "tool_call_response", "id": id, "response": content,
        })),
        _ if !content.is_empty() => parts.push(json!({"type": "text", "content": content})),
        _ => {}
    }
    for call in m
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let function = call.get("function").unwrap_or(call);
        parts.push(json!({
            "type": "tool_call",
            "id": call.get("id"),
            "name": function.get("name"),
            "arguments": function.get("arguments"),
        }));
    }
    Message { role, parts }
}

/// Messages from flattened attributes `{prefix}N.…` (OpenLLMetry's `gen_ai.prompt.N.role`,
/// OpenInference's `llm.input_messages.N.message.role`), in index order.
fn indexed(span: &SpanView, prefix: &str) -> Vec<Message> {
    let mut by_index: BTreeMap<u64, Value> = BTreeMap::new();
    for (key, value) in &span.attrs {
        let Some(rest) = key.strip_prefix(prefix) else {
            continue;
        };
        let Some((n, field)) = rest.split_once('.') else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else { continue };
        // OpenInference nests under `message.` and `tool_call.function.`.
        let field = field.strip_prefix("message.").unwrap_or(field);
        let entry = by_index.entry(n).or_insert_with(|| json!({}));
        if let Some(call) = field.strip_prefix("tool_calls.") {
            let Some((j, what)) = call.split_once('.') else {
                continue;
            };
            let what = what
                .trim_start_matches("tool_call.")
                .trim_start_matches("function.");
            let calls = entry
                .as_object_mut()
                .expect("an object")
                .entry("tool_calls")
                .or_insert_with(|| json!({}));
            calls[j][what] = value.clone();
        } else {
            entry[field] = value.clone();
        }
    }
    by_index
        .into_values()
        .filter_map(|mut m| {
            let role = parse_role(m.get("role")?.as_str()?)?;
            if let Some(Value::Object(calls)) = m.get("tool_calls").cloned() {
                let mut calls: Vec<(u64, Value)> = calls
                    .into_iter()
                    .filter_map(|(j, c)| Some((j.parse().ok()?, c)))
                    .collect();
                calls.sort_by_key(|(j, _)| *j);
                m["tool_calls"] = Value::Array(calls.into_iter().map(|(_, c)| c).collect());
            }
            Some(legacy_message(role, &m))
        })
        .collect()
}

/// The turns of messages: a text turn for a message's text, a `tool_call` turn for its
/// calls, a `tool` turn per call answered, a `note` for reasoning; the answer's model
/// and payload on the turns of an answer.
fn to_turns(
    messages: &[Message],
    model: Option<&str>,
    payload: Option<&Value>,
    report: &mut TranscriptReport,
) -> Vec<NewTurn> {
    let mut turns = Vec::new();
    let mut names: HashMap<String, String> = HashMap::new();
    for message in messages {
        let mut texts = Vec::new();
        let mut calls = Vec::new();
        for part in &message.parts {
            let text = |key: &str| {
                part.get(key)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            match part.get("type").and_then(Value::as_str) {
                Some("text") => texts.push(text("content")),
                Some("reasoning") => {
                    turns.push(NewTurn::new(Role::Assistant, text("content")).kind(Kind::Note))
                }
                Some("tool_call") => {
                    let name = text("name");
                    names.insert(text("id"), name.clone());
                    calls.push(json!({
                        "id": text("id"),
                        "type": "function",
                        "function": {"name": name, "arguments": arguments(part.get("arguments"))},
                    }));
                }
                Some("tool_call_response") => {
                    let response = match part.get("response") {
                        Some(Value::String(s)) => s.clone(),
                        Some(other) => other.to_string(),
                        None => String::new(),
                    };
                    let id = text("id");
                    let mut turn = NewTurn::new(Role::Tool, response).tool_call_id(id.clone());
                    if let Some(name) = names.get(&id) {
                        turn = turn.name(name.clone());
                    }
                    turns.push(turn);
                }
                other => {
                    let kind = format!("message part {}", other.unwrap_or("(no type)"));
                    *report.skipped_types.entry(kind).or_default() += 1;
                }
            }
        }
        let text = texts.join("\n\n");
        if !text.trim().is_empty() {
            turns.push(NewTurn::new(message.role, text));
        }
        if !calls.is_empty() {
            turns.push(
                NewTurn::new(Role::Assistant, "")
                    .kind(Kind::ToolCall)
                    .tool_calls(Value::Array(calls).to_string()),
            );
        }
    }
    for turn in &mut turns {
        if turn.role == Role::Assistant {
            if let Some(model) = model {
                turn.model = Some(model.to_string());
            }
            if let Some(payload) = payload {
                turn.payload = Some(payload.to_string());
            }
        }
    }
    turns
}

/// A tool call's arguments as JSON text, the same whichever way a span gave them (an
/// object, or its text).
fn arguments(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(v) => v.to_string(),
            Err(_) => s.clone(),
        },
        Some(Value::Null) | None => "{}".into(),
        Some(other) => other.to_string(),
    }
}
