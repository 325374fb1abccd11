//! Live what-if experiments: what one stores of its agent and workspace, how a sample
//! ended and what its verify command judged.

use super::names::named;
use crate::error::Error;
use serde::{Deserialize, Serialize};

named! {
    /// What the agent's process runs under.
    pub enum Sandbox {
        /// Nothing: the agent's tools run with the user's rights.
        None = "none",
        /// bubblewrap: the workspace copy (and `writable` paths) the only writable
        /// paths, the rest of the filesystem read-only, its own `/tmp` and process
        /// namespace, ended with forktrail.
        Bwrap = "bwrap",
    }
    unknown(text) => Error::InvalidInput(format!(
        "unknown sandbox {text:?} (expected none or bwrap)"
    ))
}

named! {
    /// What a sample does when its environment diverges from the recording before the
    /// fork point (a tool result differs because a file does).
    pub enum OnDrift {
        /// The sample ends `drifted`: its agent is stopped and nothing is judged.
        Stop = "stop",
        /// The divergence is recorded and the recording's answer at the same place is
        /// given all the same.
        Continue = "continue",
    }
    unknown(text) => Error::InvalidInput(format!(
        "unknown --on-drift {text:?} (expected stop or continue)"
    ))
}

named! {
    /// What a sample's verify command said.
    pub enum Verdict {
        /// It exited 0.
        Pass = "pass",
        /// It exited otherwise, or did not end in time.
        Fail = "fail",
        /// It did not run: the sample drifted, was cancelled, or could not start.
        NotJudged = "not_judged",
    }
    unknown(text) => Error::Corrupt {
        session: "(an experiment sample)".into(),
        detail: format!("unknown verdict {text:?}"),
    }
}

/// An experiment's agent, workspace and judge, as stored with it (a resume reads them
/// back).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentSpec {
    /// The agent's command line, run by `sh -c` in its workspace copy.
    pub agent: String,
    /// The workspace each sample gets a fresh copy of.
    pub workspace: String,
    /// With it, each copy is a `git worktree` of `workspace` at this revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_ref: Option<String>,
    /// The verify command, run by `sh -c` in the copy once the agent ended: exit 0 is a
    /// pass.
    pub verify: String,
    pub on_drift: OnDrift,
    pub sandbox: Sandbox,
    /// More paths the sandboxed agent may write (its configuration directory, say).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable: Vec<String>,
    /// The longest an agent may run, in seconds (then it is stopped `timed_out`).
    pub agent_timeout_secs: u64,
    /// Where the workspace copies are made; `None`: the system's temporary directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_dir: Option<String>,
    /// Keep each copy after its sample ends.
    #[serde(default)]
    pub keep_workspaces: bool,
    /// Replay the whole recording as its own arm, verified the same way.
    #[serde(default)]
    pub verify_baseline: bool,
}

/// Where a sample's environment first diverged from the recording.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Drift {
    /// The sample's model call (1-based) whose conversation diverged.
    pub call: u64,
    /// The first turn index that differs.
    pub index: u64,
    /// What differed: the recorded turn and the one the agent sent, in excerpts.
    pub detail: String,
}

/// How one sample of an experiment ended, and what was judged.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SampleOutcome {
    pub verdict: Verdict,
    /// The agent's exit code (`None`: stopped by a signal, or never started).
    pub agent_exit: Option<i64>,
    /// The verify command's exit code.
    pub verify_exit: Option<i64>,
    /// The end of the verify command's output, secrets taken out.
    pub verify_output: String,
    /// The end of the agent's output, secrets taken out.
    pub agent_output: String,
    /// From the agent's start to the verdict.
    pub wall_ms: u64,
    /// Model calls answered from the recording (or from the sample's committed steps).
    pub replayed_calls: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<Drift>,
}
