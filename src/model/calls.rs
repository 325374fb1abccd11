//! Model calls recorded by the proxy: which API they spoke, how they ended, what the
//! upstream reported.

use super::names::{named, SessionId};
use crate::error::Error;
use serde::Serialize;

named! {
    /// The wire API of a proxied call.
    pub enum Api {
        /// Anthropic's Messages API (`/v1/messages`).
        AnthropicMessages = "anthropic-messages",
        /// OpenAI's Chat Completions API (`/v1/chat/completions`).
        OpenaiChat = "openai-chat",
        /// OpenAI's Responses API (`/v1/responses`), what Codex CLI speaks.
        OpenaiResponses = "openai-responses",
    }
    unknown(text) => Error::Corrupt {
        session: "(a proxied call)".into(),
        detail: format!("unknown API {text:?}"),
    }
}

named! {
    /// How a proxied call ended.
    pub enum CallOutcome {
        /// The answer arrived whole and was passed on whole.
        Complete = "complete",
        /// The client went away, or the upstream's stream was cut: what arrived of the
        /// answer is a turn marked incomplete.
        Incomplete = "incomplete",
        /// The upstream answered an error status, or nothing: no answer turn.
        Failed = "failed",
    }
    unknown(text) => Error::Corrupt {
        session: "(a proxied call)".into(),
        detail: format!("unknown call outcome {text:?}"),
    }
}

/// One call an agent made through the proxy, as `forktrail calls` and
/// [`crate::Store::model_calls`] list it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelCallInfo {
    /// The call's id.
    pub id: String,
    /// The session whose graph holds the call (the one its answer extended).
    pub session: SessionId,
    pub api: Api,
    pub outcome: CallOutcome,
    /// The model that answered (or was asked, when none answered).
    pub model: Option<String>,
    /// Who called: the principal the proxy was told, or the key's fingerprint.
    pub principal: Option<String>,
    /// The conversation the request carried: the session's turns `0..request_turns`.
    pub request_turns: u64,
    /// The answer's turn, when there is one.
    pub answer_index: Option<u64>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    pub stop_reason: Option<String>,
    pub latency_ms: u64,
    pub first_byte_ms: Option<u64>,
    pub upstream_status: Option<u16>,
    pub cost_usd: Option<f64>,
    /// What went wrong, secrets taken out.
    pub error: Option<String>,
    pub started_at: Option<String>,
}

impl ModelCallInfo {
    /// A call known by its id, API and session alone; what it did is filled in as it
    /// ends and as it is read.
    pub(crate) fn blank(id: String, api: Api, session: SessionId) -> Self {
        Self {
            id,
            session,
            api,
            outcome: CallOutcome::Incomplete,
            model: None,
            principal: None,
            request_turns: 0,
            answer_index: None,
            input_tokens: None,
            output_tokens: None,
            cached_tokens: None,
            stop_reason: None,
            latency_ms: 0,
            first_byte_ms: None,
            upstream_status: None,
            cost_usd: None,
            error: None,
            started_at: None,
        }
    }
}
