//! Regeneration jobs, what-if runs and comparisons: their statuses, a job, a call's
//! figures, the run a fork holds.

use super::names::{named, shown_by_name, SessionId};
use crate::error::Error;
use serde::Serialize;

named! {
    /// Where a regeneration job is.
    pub enum JobStatus {
        /// Recorded, the model called or about to be.
        Running = "running",
        /// The answer is recorded in its fork.
        Complete = "complete",
        /// The call or the answer failed; nothing but the status is written.
        Failed = "failed",
        /// Stopped by a caller; nothing but the status is written.
        Cancelled = "cancelled",
    }
    unknown(text) => Error::Corrupt {
        session: "(a regeneration job)".into(),
        detail: format!("unknown job status {text:?}"),
    }
}

named! {
    /// Where a what-if run is: `running` until it ends, then why it ended. A run that
    /// ended keeps every step it committed; only `complete` reached the end of the
    /// recorded user turns.
    pub enum RunStatus {
        /// Steps are being taken (or the process taking them died: resume it).
        Running = "running",
        /// Every recorded user turn after the fork point was answered.
        Complete = "complete",
        /// The model called a tool the recording holds no answer to.
        UnansweredToolCall = "unanswered_tool_call",
        /// The run took its most steps.
        MaxSteps = "max_steps",
        /// The next call could have passed the comparison's money cap.
        BudgetExhausted = "budget_exhausted",
        /// A call or its answer failed.
        Failed = "failed",
        /// Stopped by a caller.
        Cancelled = "cancelled",
        /// An experiment's agent ran past its time and was stopped.
        TimedOut = "timed_out",
        /// An experiment's environment diverged from the recording before the fork
        /// point (`--on-drift stop`).
        Drifted = "drifted",
        /// An experiment's agent exited on its own.
        Exited = "exited",
    }
    unknown(text) => Error::Corrupt {
        session: "(a what-if run)".into(),
        detail: format!("unknown run status {text:?}"),
    }
}

named! {
    /// Where a comparison is: `running` while any of its runs is, else `ended`.
    pub enum ComparisonStatus {
        /// A run is taking steps (or the process taking them died: resume it).
        Running = "running",
        /// Every run ended.
        Ended = "ended",
    }
    unknown(text) => Error::InvalidInput(format!("unknown comparison status {text:?}"))
}

/// Where an arm of a comparison is: the baseline is the session as recorded, another
/// arm is where its run is. Written as one name: `recorded`, or the run status's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArmStatus {
    /// The baseline: the turns as recorded.
    Recorded,
    /// An arm's run.
    Run(RunStatus),
}

impl ArmStatus {
    /// The name as printed and served.
    pub fn as_str(self) -> &'static str {
        match self {
            ArmStatus::Recorded => "recorded",
            ArmStatus::Run(status) => status.as_str(),
        }
    }
}

impl Serialize for ArmStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

shown_by_name!(ArmStatus);

/// What one model call cost and took, as the endpoint reported it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CallFigures {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    pub latency_ms: u64,
    pub finish_reason: Option<String>,
    /// From the given prices and the reported usage; `None` when unpriced or unmeasured.
    pub cost_usd: Option<f64>,
    /// What the budget counted: the cost, or the call's upper bound when the endpoint
    /// reported no usage.
    pub charged_usd: f64,
}

/// A regeneration job.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Job {
    pub job: String,
    pub status: JobStatus,
    pub session: SessionId,
    pub at: u64,
    pub model: String,
    pub endpoint: String,
    pub reason: String,
    /// The fork holding the answer, once complete.
    pub fork: Option<SessionId>,
    pub created_at: Option<String>,
    pub completed_at: Option<String>,
    pub error: Option<String>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub latency_ms: Option<u64>,
    /// SHA-256 of the exact request body (stored whole as `ft:requestBody`).
    pub request_digest: String,
    /// The money cap the call was held to, in US dollars.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
    /// True when an identical earlier request's job is returned instead of a new call.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reused: bool,
}

/// The what-if run a fork holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WhatIfInfo {
    pub comparison: String,
    pub run: String,
    pub arm: String,
    pub status: RunStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}
