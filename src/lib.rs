//! forktrail: a provenance engine for LLM-agent conversations.
//!
//! Sessions and turns are RDF in an Oxigraph store, one named graph per session. A fork
//! is a child session that records `ft:parentSession`, `ft:forkedAtIndex` and a branch
//! label and stores only its own turns: it shares its parent's prefix instead of
//! copying it. Loading walks the chain (at most [`MAX_FORK_DEPTH`] levels, cycles
//! detected) and stitches the prefix back. Every session, turn and fork carries PROV-O,
//! so provenance audits are plain SPARQL (`queries/*.rq`, see [`queries`]).
//!
//! ```
//! use forktrail::{ForkOptions, NewSession, NewTurn, Role, Store};
//! let store = Store::in_memory()?;
//! let root = store.create_session(NewSession::default())?;
//! store.append(&root, NewTurn::new(Role::User, "What is 2+2?"))?;
//! store.append(&root, NewTurn::new(Role::Assistant, "4").model("model-a"))?;
//! // Fork after the question and answer differently: the fork stores one turn.
//! let fork = store.fork(&root, ForkOptions { at: Some(1), label: Some("retry".into()), ..Default::default() })?;
//! let fork = fork.session;
//! store.append(&fork, NewTurn::new(Role::Assistant, "Four.").model("model-b"))?;
//! let replay = store.replay(&fork, None)?;
//! assert_eq!(replay[0].content, "What is 2+2?");
//! assert_eq!((replay[1].content.as_str(), replay[1].branch.as_str()), ("Four.", "retry"));
//! # Ok::<(), forktrail::Error>(())
//! ```

mod engine;
mod error;
#[cfg(feature = "server")]
mod experiment;
mod html;
mod io;
#[cfg(feature = "mcp")]
pub mod mcp;
mod model;
mod proxy;
mod query;
mod rdf;
pub mod secrets;
#[cfg(feature = "server")]
pub mod server;
mod storage;
mod store;
mod tls;
pub mod vocab;
mod whatif;
#[cfg(feature = "server")]
pub use experiment::{ExperimentOptions, DEFAULT_AGENT_TIMEOUT_SECS};

pub use engine::demo;
pub use engine::diff::{word_diff, AlignedRow, RowKind, WordRuns};
pub use engine::listing::{
    Page, ReindexReport, SearchHit, SearchPage, SearchQuery, SessionOrder, SessionPage,
    SessionQuery, SessionSummary, DEFAULT_PAGE, MAX_PAGE,
};
pub use engine::merge::SessionWriter;
pub use engine::verify::{Check, Problem, VerifyReport};
pub use error::{Error, Result};
pub use io::{
    BackupReport, CopyReport, ExportFormat, ImportFormat, SharedCopy, Skipped, TranscriptOptions,
    TranscriptReport, MAX_LINE_BYTES,
};
pub use model::{
    Agent, AnchorInfo, Api, ArmStatus, BranchInfo, CallOutcome, ComparisonStatus, DeleteOptions,
    DeletePlan, DeletedSession, DetachOptions, DetachPlan, Drift, ExperimentSpec, ForkOptions,
    ForkPlan, FoundBy, Job, JobStatus, Kind, Label, Limits, MergeOptions, MergePlan, ModelCallInfo,
    MovedSession, NewSession, NewTurn, OnDrift, ReplayRecord, Role, RunStatus, SampleOutcome,
    Sandbox, SessionDiff, SessionId, SessionInfo, SubAgentInfo, TokenTotals, TreeNode, Turn,
    TurnRef, TurnSpan, UpgradeReport, Verdict, WhatIfInfo, MAX_FORK_DEPTH,
};
pub use proxy::{Captured, ProxyConfig, UpstreamKind};
pub use query::{binding_value, queries, NamedQuery, QueryOptions};
pub use rdf::{turn_digest, DigestVersion, DEFAULT_BASE_IRI};
pub use storage::{RemoteAuth, RemoteConfig, SERVER_FILE};
pub use store::Durability;
pub use store::Store;
pub use whatif::{
    check_offered, offered_endpoints, wilson_interval, Arm, ArmPlan, ArmReport, ArmStats,
    CallFigures, CallReport, Cell, CompareOptions, ComparePlan, Comparison, CostStatus, DiffRow,
    Figures, Price, Provider, RegenerateOptions, RegeneratePlan, Summary, TurnFigures,
    ANTHROPIC_ENDPOINT, BASELINE, DEFAULT_ENDPOINT, DEFAULT_MAX_CONTEXT_TOKENS,
    DEFAULT_MAX_OUTPUT_TOKENS, DEFAULT_MAX_STEPS, ESTIMATE_METHOD, OPENAI_API,
};

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The ontology (`ontology/forktrail.ttl`), as Turtle.
pub const ONTOLOGY: &str = include_str!("../ontology/forktrail.ttl");
