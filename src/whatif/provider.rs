//! Model providers: the request a context becomes, the HTTP call, and the answer read
//! back as a turn with the usage the endpoint reported. Two wire formats: OpenAI-compatible
//! chat completions (`{endpoint}/chat/completions`) and the Anthropic Messages API
//! (`{endpoint}/v1/messages`). Tool calls are kept in OpenAI's shape on turns whatever
//! the provider, and mapped to `tool_use`/`tool_result` blocks for Anthropic both ways.
//! Keys come from the environment only and are never stored or printed.

use crate::error::{Error, Result};
use crate::io::openai_messages;
use crate::model::{Kind, NewTurn, Role, Turn};
use crate::secrets;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::time::Duration;

/// The wire format of a model endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// OpenAI-compatible chat completions; key from `$OPENAI_API_KEY`.
    #[default]
    Openai,
    /// The Anthropic Messages API; key from `$ANTHROPIC_API_KEY`.
    Anthropic,
}

impl Provider {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
        }
    }

    /// The endpoint used when none is given: `$OPENAI_BASE_URL` else Ollama's, or
    /// `$ANTHROPIC_BASE_URL` else Anthropic's.
    pub fn default_endpoint(self) -> String {
        let (var, default) = match self {
            Self::Openai => ("OPENAI_BASE_URL", DEFAULT_ENDPOINT),
            Self::Anthropic => ("ANTHROPIC_BASE_URL", ANTHROPIC_ENDPOINT),
        };
        std::env::var(var)
            .ok()
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| default.to_string())
    }

    /// The environment variable the API key is read from.
    pub fn key_variable(self) -> &'static str {
        match self {
            Self::Openai => "OPENAI_API_KEY",
            Self::Anthropic => "ANTHROPIC_API_KEY",
        }
    }

    /// The environment variable naming the endpoint the key's owner configured.
    pub fn base_variable(self) -> &'static str {
        match self {
            Self::Openai => "OPENAI_BASE_URL",
            Self::Anthropic => "ANTHROPIC_BASE_URL",
        }
    }

    /// The provider's own API.
    pub fn own_api(self) -> &'static str {
        match self {
            Self::Openai => OPENAI_API,
            Self::Anthropic => ANTHROPIC_ENDPOINT,
        }
    }

    /// Where the API key may go: the provider's own API and the endpoint of
    /// `$OPENAI_BASE_URL` (`$ANTHROPIC_BASE_URL`), the one the key's owner set beside it.
    pub fn key_endpoints(self) -> Vec<String> {
        let mut out = vec![self.own_api().to_string()];
        if let Some(base) = std::env::var(self.base_variable())
            .ok()
            .filter(|e| !e.is_empty())
        {
            out.push(base);
        }
        out
    }

    /// The API key to send to `endpoint`: `$OPENAI_API_KEY` (`$ANTHROPIC_API_KEY`) when
    /// the endpoint has the origin (scheme, host, port) of one of
    /// [`key_endpoints`](Self::key_endpoints), else none. Whoever may choose an endpoint
    /// (a REST or MCP caller, an arm's spec) thus cannot have the key sent to a listener
    /// of its own, on this machine or off it.
    ///
    /// ```
    /// use forktrail::Provider;
    /// std::env::set_var("ANTHROPIC_API_KEY", "sk-ant-example");
    /// std::env::remove_var("ANTHROPIC_BASE_URL");
    /// let p = Provider::Anthropic;
    /// assert_eq!(p.key_for("https://api.anthropic.com").as_deref(), Some("sk-ant-example"));
    /// assert_eq!(p.key_for("http://127.0.0.1:9999"), None);
    /// assert_eq!(p.key_for("https://api.anthropic.com.example.net"), None);
    /// ```
    pub fn key_for(self, endpoint: &str) -> Option<String> {
        let key = std::env::var(self.key_variable())
            .ok()
            .filter(|k| !k.is_empty())?;
        let origin = |e: &str| url::Url::parse(e).ok().map(|u| u.origin());
        let target = origin(endpoint).filter(|o| o.is_tuple())?;
        self.key_endpoints()
            .iter()
            .any(|e| origin(e).as_ref() == Some(&target))
            .then_some(key)
    }

    fn url(self, endpoint: &str) -> String {
        match self {
            Self::Openai => format!("{endpoint}/chat/completions"),
            Self::Anthropic => format!("{endpoint}/v1/messages"),
        }
    }
}

impl std::str::FromStr for Provider {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "openai" => Ok(Self::Openai),
            "anthropic" => Ok(Self::Anthropic),
            other => Err(Error::InvalidInput(format!(
                "unknown provider {other:?} (expected openai or anthropic)"
            ))),
        }
    }
}

/// The endpoint when neither `endpoint` nor `$OPENAI_BASE_URL` is set (Ollama's).
pub const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:11434/v1";
/// OpenAI's own API: where `$OPENAI_API_KEY` may always go.
pub const OPENAI_API: &str = "https://api.openai.com/v1";
/// Anthropic's API, when `$ANTHROPIC_BASE_URL` is not set.
pub const ANTHROPIC_ENDPOINT: &str = "https://api.anthropic.com";
/// The `max_tokens` sent to Anthropic (which requires one) when the arm gives none, and
/// the output assumed by a budget check for either provider.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 4096;

/// What a request carries besides the context.
#[derive(Clone, Debug, Default)]
pub(crate) struct Sampling<'a> {
    pub(crate) model: &'a str,
    pub(crate) system_prompt: Option<&'a str>,
    pub(crate) tools: Option<&'a Value>,
    pub(crate) max_tokens: Option<u32>,
    pub(crate) temperature: Option<f64>,
}

/// The request body for `turns` (the exact context) in `provider`'s format.
pub(crate) fn request(provider: Provider, turns: &[Turn], s: &Sampling<'_>) -> Result<Value> {
    if let Some(tools) = s.tools {
        if !tools.is_array() {
            return Err(Error::InvalidInput(
                "tools must be a JSON array of OpenAI tool definitions".into(),
            ));
        }
    }
    if let Some(t) = s.temperature {
        if !(0.0..=2.0).contains(&t) {
            return Err(Error::InvalidInput(format!(
                "temperature {t} is outside 0..=2"
            )));
        }
    }
    let mut body = match provider {
        Provider::Openai => openai_request(turns, s)?,
        Provider::Anthropic => anthropic_request(turns, s)?,
    };
    if let Some(t) = s.temperature {
        body["temperature"] = json!(t);
    }
    Ok(body)
}

fn openai_request(turns: &[Turn], s: &Sampling<'_>) -> Result<Value> {
    let mut messages = openai_messages(turns)?;
    if let Some(prompt) = s.system_prompt {
        let system = json!({"role": "system", "content": prompt});
        match messages.first_mut() {
            Some(first) if first["role"] == "system" => *first = system,
            _ => messages.insert(0, system),
        }
    }
    let mut body = json!({ "model": s.model, "messages": messages });
    if let Some(tools) = s.tools {
        body["tools"] = tools.clone();
    }
    if let Some(n) = s.max_tokens {
        body["max_tokens"] = json!(n);
    }
    Ok(body)
}

/// Anthropic Messages: system turns become `system`, tool calls `tool_use` blocks, tool
/// results `tool_result` blocks of one user message, OpenAI tool definitions
/// `{name, description, input_schema}`.
fn anthropic_request(turns: &[Turn], s: &Sampling<'_>) -> Result<Value> {
    let mut system: Vec<&str> = Vec::new();
    let mut messages: Vec<Value> = Vec::new();
    for turn in turns {
        let (role, blocks) = match turn.role {
            Role::System => {
                system.push(&turn.content);
                continue;
            }
            Role::User => ("user", vec![json!({"type": "text", "text": turn.content})]),
            Role::Tool => (
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": turn.tool_call_id.clone().unwrap_or_default(),
                    "content": turn.content,
                })],
            ),
            Role::Assistant => {
                let mut blocks = Vec::new();
                if !turn.content.is_empty() {
                    blocks.push(json!({"type": "text", "text": turn.content}));
                }
                for call in tool_calls(turn)? {
                    let input: Value =
                        serde_json::from_str(&call.arguments).unwrap_or_else(|_| json!({}));
                    blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
                }
                ("assistant", blocks)
            }
        };
        if blocks.is_empty() {
            continue;
        }
        // Consecutive messages of one role are one message: tool results of one step
        // answer together, as the API expects.
        match messages.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(content) = last["content"].as_array_mut() {
                    content.extend(blocks);
                }
            }
            _ => messages.push(json!({"role": role, "content": blocks})),
        }
    }
    if let Some(prompt) = s.system_prompt {
        system = vec![prompt];
    }
    let mut body = json!({
        "model": s.model,
        "max_tokens": s.max_tokens.unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS),
        "messages": messages,
    });
    if !system.is_empty() {
        body["system"] = json!(system.join("\n\n"));
    }
    if let Some(tools) = s.tools.and_then(Value::as_array) {
        let tools: Vec<Value> = tools
            .iter()
            .map(|t| {
                let f = t.get("function").unwrap_or(t);
                json!({
                    "name": f["name"],
                    "description": f.get("description").cloned().unwrap_or(json!("")),
                    "input_schema": f.get("parameters").cloned()
                        .unwrap_or(json!({"type": "object"})),
                })
            })
            .collect();
        body["tools"] = json!(tools);
    }
    Ok(body)
}

pub(crate) use crate::model::tool_call::{parse_tool_calls, ToolCall};

/// The tool calls an assistant turn makes (none when it makes none).
pub(crate) fn tool_calls(turn: &Turn) -> Result<Vec<ToolCall>> {
    parse_tool_calls(turn.tool_calls.as_deref()).map_err(|why| Error::Corrupt {
        session: turn.session.to_string(),
        detail: format!("turn {} has tool_calls that are {why}", turn.index),
    })
}

/// A model's answer: the turn it becomes and what the endpoint reported about the call.
#[derive(Clone, Debug)]
pub(crate) struct Answer {
    pub(crate) turn: NewTurn,
    /// Every prompt token, cached ones included (OpenAI's `prompt_tokens`; Anthropic's
    /// `input_tokens + cache_creation_input_tokens + cache_read_input_tokens`).
    pub(crate) input_tokens: Option<u64>,
    pub(crate) output_tokens: Option<u64>,
    /// Prompt tokens read from a cache (OpenAI's
    /// `prompt_tokens_details.cached_tokens`; Anthropic's `cache_read_input_tokens`).
    pub(crate) cached_tokens: Option<u64>,
    pub(crate) finish_reason: Option<String>,
}

impl Answer {
    /// Reads an endpoint's answer; the model the endpoint names wins over `asked`.
    pub(crate) fn read(provider: Provider, answer: &str, asked: &str) -> Result<Self> {
        // The answer is outside text like any other: a secret it echoes is not kept.
        let answer = &secrets::scrub(answer);
        let malformed = |why: &str| {
            let what = match provider {
                Provider::Openai => "a chat completion",
                Provider::Anthropic => "an Anthropic message",
            };
            Error::InvalidInput(format!(
                "the endpoint's answer is not {what} ({why}): {}",
                secrets::excerpt(answer)
            ))
        };
        let value: Value = serde_json::from_str(answer).map_err(|e| malformed(&e.to_string()))?;
        let model = value
            .get("model")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
            .unwrap_or(asked);
        let number = |pointer: &str| value.pointer(pointer).and_then(Value::as_u64);
        let (content, calls, finish, input, output, cached) = match provider {
            Provider::Openai => {
                let message = value
                    .pointer("/choices/0/message")
                    .ok_or_else(|| malformed("no choices[0].message"))?;
                let content = match message.get("content") {
                    Some(Value::String(s)) => s.clone(),
                    None | Some(Value::Null) => String::new(),
                    Some(_) => return Err(malformed("content is not text")),
                };
                let calls = match message.get("tool_calls") {
                    Some(calls @ Value::Array(list)) if !list.is_empty() => {
                        parse_tool_calls(Some(&calls.to_string())).map_err(|e| malformed(&e))?;
                        Some(calls.to_string())
                    }
                    None | Some(Value::Null) | Some(Value::Array(_)) => None,
                    Some(_) => return Err(malformed("tool_calls is not an array")),
                };
                let finish = value
                    .pointer("/choices/0/finish_reason")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                (
                    content,
                    calls,
                    finish,
                    number("/usage/prompt_tokens"),
                    number("/usage/completion_tokens"),
                    number("/usage/prompt_tokens_details/cached_tokens"),
                )
            }
            Provider::Anthropic => {
                let blocks = value
                    .get("content")
                    .and_then(Value::as_array)
                    .ok_or_else(|| malformed("no content array"))?;
                let mut texts = Vec::new();
                let mut calls = Vec::new();
                for block in blocks {
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            texts.push(block["text"].as_str().unwrap_or_default().to_string())
                        }
                        Some("tool_use") => calls.push(json!({
                            "id": block["id"],
                            "type": "function",
                            "function": {
                                "name": block["name"],
                                "arguments": block.get("input").cloned().unwrap_or(json!({})).to_string(),
                            }
                        })),
                        _ => {}
                    }
                }
                let calls = (!calls.is_empty()).then(|| Value::Array(calls).to_string());
                let input = number("/usage/input_tokens").map(|n| {
                    n + number("/usage/cache_creation_input_tokens").unwrap_or(0)
                        + number("/usage/cache_read_input_tokens").unwrap_or(0)
                });
                (
                    texts.join("\n\n"),
                    calls,
                    value
                        .get("stop_reason")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    input,
                    number("/usage/output_tokens"),
                    number("/usage/cache_read_input_tokens"),
                )
            }
        };
        let mut turn = NewTurn::new(Role::Assistant, content).model(model);
        if let Some(calls) = calls {
            turn = turn.tool_calls(calls).kind(Kind::ToolCall);
        }
        Ok(Self {
            turn,
            input_tokens: input,
            output_tokens: output,
            cached_tokens: cached,
            finish_reason: finish,
        })
    }
}

/// Why a model call has no answer.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CallFailure {
    /// What went wrong, every secret taken out, the endpoint's words cut short.
    pub(crate) message: String,
    /// Whether the endpoint may have taken the request and billed it: a wait that ran
    /// out, an answer that could not be read. An HTTP error status, or a connection
    /// never made, is not billed.
    pub(crate) maybe_billed: bool,
}

impl CallFailure {
    fn new(message: String, maybe_billed: bool) -> Self {
        Self {
            message: secrets::excerpt(&message),
            maybe_billed,
        }
    }
}

/// POSTs `body` to the provider's URL under `endpoint` and returns the answer's text, or
/// why there is none. The API key goes only where [`Provider::key_for`] allows.
pub(crate) fn post(
    provider: Provider,
    endpoint: &str,
    body: &str,
    timeout_secs: u64,
) -> std::result::Result<String, CallFailure> {
    let url = provider.url(endpoint);
    let key = provider.key_for(endpoint);
    let withheld =
        key.is_none() && std::env::var(provider.key_variable()).is_ok_and(|k| !k.is_empty());
    let agent = crate::tls::agent(ureq::AgentBuilder::new())
        .timeout_connect(Duration::from_secs(10))
        .timeout(Duration::from_secs(timeout_secs))
        .build();
    let mut request = agent.post(&url).set("Content-Type", "application/json");
    match (provider, key) {
        (Provider::Openai, Some(key)) => {
            request = request.set("Authorization", &format!("Bearer {key}"))
        }
        (Provider::Anthropic, key) => {
            request = request.set("anthropic-version", "2023-06-01");
            if let Some(key) = key {
                request = request.set("x-api-key", &key);
            }
        }
        (Provider::Openai, None) => {}
    }
    match request.send_string(body) {
        Ok(response) => response
            .into_string()
            .map_err(|e| CallFailure::new(format!("cannot read the answer of {url}: {e}"), true)),
        Err(ureq::Error::Status(code, response)) => {
            // Read past the excerpt's length, so that a secret at its end is whole
            // when it is taken out.
            let mut start = Vec::new();
            let _ = std::io::Read::read_to_end(
                &mut std::io::Read::take(response.into_reader(), 64 * 1024),
                &mut start,
            );
            let detail = String::from_utf8_lossy(&start);
            let hint = if withheld && matches!(code, 401 | 403) {
                format!(
                    " (no key was sent: ${} goes only to {}; set ${} to this endpoint to \
                     send it there)",
                    provider.key_variable(),
                    provider.key_endpoints().join(" and "),
                    provider.base_variable()
                )
            } else {
                String::new()
            };
            Err(CallFailure::new(
                format!(
                    "{url} answered HTTP {code}{hint}: {}",
                    secrets::excerpt(detail.trim())
                ),
                false,
            ))
        }
        Err(ureq::Error::Transport(t)) if timed_out(&t) => Err(CallFailure::new(
            format!("no answer from {url} within {timeout_secs} s (--timeout)"),
            true,
        )),
        // ureq's own message starts with the URL: name it once.
        Err(ureq::Error::Transport(t)) => {
            let never_sent = matches!(
                t.kind(),
                ureq::ErrorKind::ConnectionFailed
                    | ureq::ErrorKind::Dns
                    | ureq::ErrorKind::InvalidUrl
                    | ureq::ErrorKind::UnknownScheme
            );
            if let Some(why) = crate::tls::untrusted(&t) {
                // Excerpted already but for the advice, which must stay whole.
                return Err(CallFailure {
                    message: secrets::message(&format!("cannot reach {url}: {why}")),
                    maybe_billed: false,
                });
            }
            let mut why = t.kind().to_string();
            for detail in [
                t.message().map(str::to_string),
                std::error::Error::source(&t).map(|s| s.to_string()),
            ]
            .into_iter()
            .flatten()
            {
                why += &format!(": {detail}");
            }
            Err(CallFailure::new(
                format!("cannot reach {url}: {why}"),
                !never_sent,
            ))
        }
    }
}

/// Whether a transport error is a timeout: an I/O error of that kind behind it (ureq
/// reports a deadline passed, connecting or reading, as one).
fn timed_out(t: &ureq::Transport) -> bool {
    let mut source = std::error::Error::source(t);
    while let Some(e) = source {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        source = e.source();
    }
    false
}

/// Whether `endpoint` connects to this machine. Parsed as ureq parses it, and refused
/// with credentials in it (`http://localhost@elsewhere/` connects elsewhere).
pub(crate) fn is_loopback(endpoint: &str) -> Result<bool> {
    let bad = |why: &str| Error::InvalidInput(format!("endpoint {endpoint:?} {why}"));
    let parsed = url::Url::parse(endpoint).map_err(|e| bad(&format!("is not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("must be an http:// or https:// URL"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad(
            "must not carry credentials; API keys come from the environment",
        ));
    }
    Ok(match parsed.host() {
        Some(url::Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    })
}

/// Estimated tokens of a request body: characters / 4, rounded up.
pub(crate) fn estimate_tokens(body: &Value) -> u64 {
    (body.to_string().chars().count() as u64).div_ceil(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_that_never_answers_is_a_timeout_that_may_have_been_billed() {
        // Takes the connection and the request, and says nothing.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}/v1", listener.local_addr().unwrap());
        let held = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            std::thread::sleep(Duration::from_secs(3));
            drop(stream);
        });
        let failure = post(Provider::Openai, &endpoint, "{}", 1).unwrap_err();
        assert!(
            failure.message.contains("within 1 s (--timeout)"),
            "{}",
            failure.message
        );
        assert!(failure.maybe_billed);
        held.join().unwrap();
    }

    #[test]
    fn a_connection_refused_is_not_a_timeout_and_was_not_billed() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let failure = post(
            Provider::Openai,
            &format!("http://127.0.0.1:{port}/v1"),
            "{}",
            1,
        )
        .unwrap_err();
        assert!(
            !failure.message.contains("--timeout"),
            "{}",
            failure.message
        );
        assert!(!failure.maybe_billed);
    }

    #[test]
    fn canonical_arguments_ignore_key_order_and_spacing() {
        let a = ToolCall {
            id: "1".into(),
            name: "f".into(),
            arguments: r#"{"b": 1, "a": {"y": 2, "x": 1}}"#.into(),
        };
        let b = ToolCall {
            arguments: r#"{"a":{"x":1,"y":2},"b":1}"#.into(),
            ..a.clone()
        };
        let c = ToolCall {
            arguments: r#"{"a":{"x":1,"y":3},"b":1}"#.into(),
            ..a.clone()
        };
        assert_eq!(a.canonical_arguments(), b.canonical_arguments());
        assert_ne!(a.canonical_arguments(), c.canonical_arguments());
    }

    #[test]
    fn anthropic_answers_map_tool_use_to_openai_calls_and_count_cache_reads() {
        let answer = json!({
            "type": "message", "model": "claude-x", "stop_reason": "tool_use",
            "content": [{"type": "text", "text": "Looking."},
                        {"type": "tool_use", "id": "tu_1", "name": "lookup", "input": {"q": "x"}}],
            "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 90,
                      "cache_creation_input_tokens": 0}
        });
        let a = Answer::read(Provider::Anthropic, &answer.to_string(), "asked").unwrap();
        assert_eq!(a.turn.content, "Looking.");
        assert_eq!(a.turn.model.as_deref(), Some("claude-x"));
        assert_eq!(
            (a.input_tokens, a.output_tokens, a.cached_tokens),
            (Some(100), Some(5), Some(90))
        );
        let calls = parse_tool_calls(a.turn.tool_calls.as_deref()).unwrap();
        assert_eq!(calls[0].name, "lookup");
        assert_eq!(calls[0].canonical_arguments(), r#"{"q":"x"}"#);
        assert_eq!(a.finish_reason.as_deref(), Some("tool_use"));
    }
}
