//! `experiment`: a live what-if. `jobs show`, `jobs cancel` and `jobs resume` take its
//! id too (an experiment is a comparison whose arms run an agent).

use super::compare::{in_background, warn_unsandboxed, ArmFlags};
use super::{emit, figures, CliResult, Out, Target};
use clap::Args;
use forktrail::{ExperimentOptions, OnDrift, Sandbox, SessionId, Store};
use std::path::PathBuf;

#[derive(Args)]
pub(super) struct ExperimentArgs {
    /// The session recorded through the model proxy (`forktrail proxy`) whose run is
    /// replayed.
    session: SessionId,
    /// The fork point K: the agent's calls whose answers lie before turn K are answered
    /// from the recording (its harness runs the recorded tool calls in the copy); from
    /// K on, each arm's model answers.
    #[arg(long, value_name = "K")]
    at: u64,
    /// The agent's command line, run by `sh -c` in each workspace copy with
    /// ANTHROPIC_BASE_URL, OPENAI_BASE_URL and FORKTRAIL_PROXY (the base of both) set to
    /// the experiment's endpoint; FORKTRAIL_ARM, FORKTRAIL_SAMPLE and
    /// FORKTRAIL_WORKSPACE say which sample it is.
    #[arg(long, value_name = "CMD")]
    agent: String,
    /// The workspace each sample gets a fresh copy of (the original is never touched).
    #[arg(long, value_name = "DIR")]
    workspace: PathBuf,
    /// Make each copy a `git worktree` of the workspace at this revision instead of a
    /// copy of the directory.
    #[arg(long, value_name = "REV")]
    workspace_ref: Option<String>,
    /// The judge, run by `sh -c` in the copy once the agent ended: exit 0 is a pass.
    #[arg(long, value_name = "CMD")]
    verify: String,
    /// Also replay the recording to its end as the baseline arm, with the same samples
    /// and the same verify command.
    #[arg(long)]
    verify_baseline: bool,
    /// When a turn before K differs from the recording (a tool result differs because a
    /// file does): stop the sample (`drifted`, not judged), or record it and go on.
    #[arg(long, value_name = "stop|continue", default_value = "stop")]
    on_drift: OnDrift,
    /// Run the agent and the verify command under bubblewrap (`bwrap`): the copy the
    /// only writable path (with --writable ones), the rest read-only, its own /tmp.
    /// Without it the agent's tools run with your rights.
    #[arg(long, value_name = "none|bwrap", default_value = "none")]
    sandbox: Sandbox,
    /// Another path the sandboxed agent may write (its configuration directory, say).
    /// Repeatable.
    #[arg(long, value_name = "PATH")]
    writable: Vec<PathBuf>,
    /// The longest one agent (and then its verify command) may run, in seconds (default
    /// 600); an agent past it is stopped and the sample judged `timed_out`.
    #[arg(long = "timeout", value_name = "SECONDS")]
    timeout_secs: Option<u64>,
    /// Where the copies and the agents' logs are made (default: the system's temporary
    /// directory).
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Keep each workspace copy (and the logs) after its sample ends.
    #[arg(long)]
    keep_workspaces: bool,
    #[command(flatten)]
    arms: ArmFlags,
    /// Print the experiment as JSON.
    #[arg(long)]
    json: bool,
    /// Print the experiment's id at once; a worker process runs the samples. Follow it
    /// with `forktrail jobs show ID`, stop it with `forktrail jobs cancel ID`.
    #[arg(long)]
    background: bool,
}

impl ExperimentArgs {
    pub(super) fn run(self, out: Out, store: Store, path: &Target) -> CliResult {
        let options = ExperimentOptions {
            compare: self.arms.options(self.at)?,
            agent: self.agent.clone(),
            workspace: self.workspace.clone(),
            workspace_ref: self.workspace_ref.clone(),
            verify: self.verify.clone(),
            verify_baseline: self.verify_baseline,
            on_drift: self.on_drift,
            sandbox: self.sandbox,
            writable: self.writable.clone(),
            agent_timeout_secs: self.timeout_secs,
            work_dir: self.work_dir.clone(),
            keep_workspaces: self.keep_workspaces,
        };
        let begun = store.begin_experiment(&self.session, &options)?;
        let id = begun.comparison.clone();
        if begun.reused {
            return emit(out, self.json, &begun, figures::comparison);
        }
        if let Some(spec) = &begun.experiment {
            warn_unsandboxed(spec);
        }
        if !self.json {
            eprintln!(
                "experiment {id} begun (session {} from index {}); if this process stops, \
                 resume it with `forktrail jobs resume {id}`",
                begun.session, begun.at
            );
        }
        let parallel = self.arms.parallel();
        if self.background {
            let runs = format!("{} samples", begun.arms.len() - 1);
            return in_background(out, self.json, store, path, &begun, parallel, &runs);
        }
        let done = store.run_experiment(&id, parallel)?;
        emit(out, self.json, &done, figures::comparison)
    }
}
