//! The upstream call, on a blocking thread: the request sent on with the client's
//! headers (less hop-by-hop ones, `Accept-Encoding` and forktrail's own), the answer
//! read as it arrives, each chunk teed into the record before it is passed on.

use super::wire::{self, Events, Reply};
use crate::model::Api;
use std::io::Read;
use std::time::Duration;

/// Headers that are not sent on, either way.
pub(crate) fn passes(name: &str) -> bool {
    !matches!(
        name,
        "host"
            | "content-length"
            | "connection"
            | "keep-alive"
            | "transfer-encoding"
            | "te"
            | "trailer"
            | "upgrade"
            | "proxy-authorization"
            | "proxy-connection"
            | "accept-encoding"
            | "content-encoding"
    ) && !name.starts_with("x-forktrail-")
}

/// The URL a proxied path goes to: the upstream, then the path after the prefix (one
/// `/v1` dropped when both have it).
pub(crate) fn target(upstream: &str, rest: &str, query: Option<&str>) -> String {
    let rest = if upstream.ends_with("/v1") {
        rest.strip_prefix("/v1").unwrap_or(rest)
    } else {
        rest
    };
    match query {
        Some(q) => format!("{upstream}{rest}?{q}"),
        None => format!("{upstream}{rest}"),
    }
}

/// What the upstream answered before its body: status and headers.
pub(crate) struct Head {
    pub(crate) status: u16,
    /// The headers passed on to the client.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) content_type: Option<String>,
    pub(crate) length: Option<usize>,
}

/// Why the upstream gave no answer.
pub(crate) struct Unanswered {
    /// What happened, secrets taken out.
    pub(crate) message: String,
    /// 504 when the upstream did not answer in time, 502 otherwise.
    pub(crate) status: u16,
}

/// The client of every upstream call: one pool of connections, kept alive between
/// calls, so that a call pays no new connection (or TLS handshake).
pub(crate) fn agent(timeout: Duration) -> ureq::Agent {
    crate::tls::agent(ureq::AgentBuilder::new())
        .timeout_connect(Duration::from_secs(10))
        .timeout_read(timeout)
        .redirects(0)
        .max_idle_connections_per_host(64)
        .build()
}

/// Sends the request; the answer's head and a reader of its body.
pub(crate) fn send(
    agent: &ureq::Agent,
    method: &str,
    url: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<(Head, Box<dyn Read + Send>), Unanswered> {
    let mut request = agent.request(method, url);
    for (name, value) in headers {
        request = request.set(name, value);
    }
    let response = match request.send_bytes(body) {
        Ok(r) | Err(ureq::Error::Status(_, r)) => r,
        Err(ureq::Error::Transport(t)) => {
            let timed_out = t.to_string().to_ascii_lowercase().contains("timed out");
            return Err(Unanswered {
                message: crate::secrets::excerpt(&format!(
                    "the upstream {url} gave no answer: {t}"
                )),
                status: if timed_out { 504 } else { 502 },
            });
        }
    };
    let head = Head {
        status: response.status(),
        content_type: response.header("content-type").map(str::to_string),
        length: response
            .header("content-length")
            .and_then(|l| l.trim().parse().ok()),
        headers: response
            .headers_names()
            .into_iter()
            .filter(|n| passes(n))
            .filter_map(|n| response.header(&n).map(|v| (n.clone(), v.to_string())))
            .collect(),
    };
    Ok((head, Box::new(response.into_reader())))
}

/// An answer read as it passes: a stream of events, or one JSON body.
pub(crate) struct Tee {
    api: Api,
    events: Option<Events>,
    body: Vec<u8>,
    expected: Option<usize>,
    anthropic: wire::anthropic::Stream,
    chat: wire::openai::Stream,
    responses: wire::responses::Stream,
}

/// The most of a JSON answer kept to be read (a larger one is passed on, not recorded).
const MAX_BODY: usize = 64 * 1024 * 1024;

impl Tee {
    pub(crate) fn new(api: Api, head: &Head) -> Self {
        let streamed = head
            .content_type
            .as_deref()
            .is_some_and(|t| t.starts_with("text/event-stream"));
        Self {
            api,
            events: streamed.then(Events::default),
            body: Vec::new(),
            expected: head.length,
            anthropic: Default::default(),
            chat: Default::default(),
            responses: Default::default(),
        }
    }

    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        let Some(events) = &mut self.events else {
            if self.body.len() + bytes.len() <= MAX_BODY {
                self.body.extend_from_slice(bytes);
            }
            return;
        };
        let (api, a, c, r) = (
            self.api,
            &mut self.anthropic,
            &mut self.chat,
            &mut self.responses,
        );
        events.feed(bytes, |_, data| match api {
            Api::AnthropicMessages => a.event(data),
            Api::OpenaiChat => c.event(data),
            Api::OpenaiResponses => r.event(data),
        });
    }

    /// Whether the answer is whole (so the call can be queued before its last bytes
    /// reach the client, which may send its next call at once).
    pub(crate) fn complete(&self) -> bool {
        match &self.events {
            Some(_) => match self.api {
                Api::AnthropicMessages => self.anthropic.complete(),
                Api::OpenaiChat => self.chat.complete(),
                Api::OpenaiResponses => self.responses.complete(),
            },
            None => self.expected == Some(self.body.len()),
        }
    }

    /// The answer as far as it came.
    pub(crate) fn finish(self) -> Reply {
        if self.events.is_none() {
            let Ok(value) = serde_json::from_slice::<serde_json::Value>(&self.body) else {
                return Reply::default();
            };
            return match self.api {
                Api::AnthropicMessages => wire::anthropic::read_answer(&value),
                Api::OpenaiChat => wire::openai::read_answer(&value),
                Api::OpenaiResponses => wire::responses::read_answer(&value),
            };
        }
        match self.api {
            Api::AnthropicMessages => self.anthropic.finish(),
            Api::OpenaiChat => self.chat.finish(),
            Api::OpenaiResponses => self.responses.finish(),
        }
    }
}
