//! The crate's value types, by kind: validated names and the `named!` enums
//! (`names.rs`), turns and their records (`turn.rs`), what a caller asks for
//! (`options.rs`), what an operation answers (`results.rs`), regeneration jobs, what-if
//! runs and comparisons (`jobs.rs`), model calls recorded by the proxy (`calls.rs`), live experiments' samples
//! (`experiment.rs`), and tool calls as turns store them
//! (`tool_call.rs`). Every type is re-exported here, so `crate::model::X` names it
//! wherever it is defined.

mod calls;
mod experiment;
mod jobs;
mod names;
mod options;
mod results;
pub(crate) mod tool_call;
mod turn;

pub use calls::{Api, CallOutcome, ModelCallInfo};
pub use experiment::{Drift, ExperimentSpec, OnDrift, SampleOutcome, Sandbox, Verdict};
pub use jobs::{ArmStatus, CallFigures, ComparisonStatus, Job, JobStatus, RunStatus, WhatIfInfo};
pub use names::{Agent, Label, SessionId};
pub use options::{
    DeleteOptions, DetachOptions, ForkOptions, Limits, MergeOptions, NewSession, MAX_FORK_DEPTH,
};
pub use results::{
    AnchorInfo, BranchInfo, DeletePlan, DeletedSession, DetachPlan, ForkPlan, FoundBy, MergePlan,
    MovedSession, SessionDiff, SessionInfo, SubAgentInfo, TokenTotals, TreeNode, TurnRef, TurnSpan,
    UpgradeReport,
};
pub use turn::{DigestVersion, Kind, NewTurn, ReplayRecord, Role, Turn};

pub(crate) use names::check_key;
pub(crate) use options::SizeClass;
