//! Live what-if experiments: would another model have done this, with the agent's own
//! harness running its tools?
//!
//! | file | what |
//! | --- | --- |
//! | `gateway.rs` | the model endpoint the samples' agents call, on an ephemeral loopback port |
//! | `sample.rs` | one sample: its workspace copy, its agent, its calls, its verdict |
//! | `answer.rs` | one call: answered from the recording, or by the arm's model |
//! | `workspace.rs` | the copies, and the agent and verify processes (under bubblewrap) |
//!
//! An experiment is a comparison (`ft:Comparison`) whose settings carry its agent,
//! workspace and verify command, with one run (`ft:Run`, a fork at K of the recorded
//! session) per arm and sample. Each sample starts the agent in a fresh copy of the
//! workspace with its base URL on the experiment's endpoint. A call whose conversation
//! (its turns, as digests) is the recording's and whose answer lies before K is
//! answered from the recording, so the agent's harness runs the recorded tool calls
//! itself and the copy reaches the state it had at K; from K on, calls go to the arm's
//! model under the comparison's money cap and are recorded in the sample's fork, as the
//! model proxy records any call. When the agent ends, the verify command judges the
//! copy. A sample whose process died is taken again from the start in a fresh copy:
//! the steps its fork committed are answered from the fork, so no model call is made
//! (or paid) twice.

mod answer;
mod gateway;
mod sample;
mod workspace;

use crate::error::{Error, Result};
use crate::model::{Api, ExperimentSpec, OnDrift, RunStatus, Sandbox, SessionId};
use crate::store::Store;
use crate::whatif::{Arm, Budget, CompareOptions, Comparison, Provider};
use std::time::Duration;

/// The default time an agent may run, in seconds.
pub const DEFAULT_AGENT_TIMEOUT_SECS: u64 = 600;

/// An experiment as asked for: a comparison's options (fork point, arms, samples,
/// prices, budget, step limit, parallel samples) and the agent, workspace and judge.
#[derive(Clone, Debug)]
pub struct ExperimentOptions {
    pub compare: CompareOptions,
    pub agent: String,
    pub workspace: std::path::PathBuf,
    pub workspace_ref: Option<String>,
    pub verify: String,
    pub verify_baseline: bool,
    pub on_drift: OnDrift,
    pub sandbox: Sandbox,
    pub writable: Vec<std::path::PathBuf>,
    /// The longest an agent may run, in seconds (default 600).
    pub agent_timeout_secs: Option<u64>,
    pub work_dir: Option<std::path::PathBuf>,
    pub keep_workspaces: bool,
}

impl Store {
    /// Records an experiment on session `session` (its forks and `running` samples) and
    /// returns it, or an identical earlier one (`reused`) unless `options.compare.again`.
    /// Run it with [`Store::run_experiment`]. The session must have been recorded
    /// through the model proxy, and each arm must speak its API.
    pub fn begin_experiment(
        &self,
        session: &SessionId,
        options: &ExperimentOptions,
    ) -> Result<Comparison> {
        let spec = self.experiment_spec(session, options)?;
        let mut compare = options.compare.clone();
        compare.experiment = Some(spec);
        self.begin_comparison(session, &compare)
    }

    /// Checks an experiment's agent, workspace and judge, and the recording's API
    /// against its arms.
    fn experiment_spec(
        &self,
        session: &SessionId,
        o: &ExperimentOptions,
    ) -> Result<ExperimentSpec> {
        let bad =
            |why: String| Error::InvalidInput(format!("experiment on session {session}: {why}"));
        if o.agent.trim().is_empty() {
            return Err(bad("the agent command is empty (--agent CMD)".into()));
        }
        if o.verify.trim().is_empty() {
            return Err(bad("the verify command is empty (--verify CMD)".into()));
        }
        for (what, line) in [("agent", &o.agent), ("verify", &o.verify)] {
            if let Some(name) = secret_in(line) {
                return Err(bad(format!(
                    "the {what} command sets {name} to a value written in it: commands are \
                     stored with the experiment (a resume runs them again), so a key in one \
                     would be too; pass it through the environment (export {name}) or read \
                     it there (\"$(cat FILE)\")"
                )));
            }
        }
        let workspace = std::fs::canonicalize(&o.workspace).map_err(|e| {
            bad(format!(
                "the workspace {} cannot be read: {e}",
                o.workspace.display()
            ))
        })?;
        if !workspace.is_dir() {
            return Err(bad(format!(
                "the workspace {} is not a directory",
                workspace.display()
            )));
        }
        let copies = o.work_dir.clone().unwrap_or_else(std::env::temp_dir);
        let copies = std::fs::canonicalize(&copies).unwrap_or(copies);
        if copies.starts_with(&workspace) {
            return Err(bad(format!(
                "the copies would be made in {}, inside the workspace {} they copy: give \
                 --work-dir a directory outside it",
                copies.display(),
                workspace.display()
            )));
        }
        if o.sandbox == Sandbox::Bwrap && which("bwrap").is_none() {
            return Err(bad(
                "--sandbox bwrap needs bubblewrap's `bwrap` on PATH (Debian and Ubuntu: \
                 apt-get install bubblewrap)"
                    .into(),
            ));
        }
        let api = self.recorded_api(session)?;
        for arm in &o.compare.arms {
            if arm.system_prompt.is_some() || arm.tools.is_some() {
                return Err(bad(format!(
                    "arm {}: its agent sends its own system prompt and tools; an experiment \
                     swaps the model (and temperature or max-tokens, if given), so \
                     system-prompt and tools are not taken",
                    arm.name.as_deref().unwrap_or(&arm.model)
                )));
            }
            let speaks = match arm.provider {
                Provider::Anthropic => api == Api::AnthropicMessages,
                Provider::Openai => api != Api::AnthropicMessages,
            };
            if !speaks {
                return Err(bad(format!(
                    "arm {} speaks the {} API, and the agent recorded in session {session} \
                     calls the {api} API: give it provider={}",
                    arm.name.as_deref().unwrap_or(&arm.model),
                    arm.provider.as_str(),
                    match api {
                        Api::AnthropicMessages => "anthropic",
                        _ => "openai",
                    }
                )));
            }
        }
        let absolute = |p: &std::path::Path| -> Result<String> {
            Ok(std::path::absolute(p)
                .map_err(|e| bad(format!("{}: {e}", p.display())))?
                .to_string_lossy()
                .into_owned())
        };
        Ok(ExperimentSpec {
            agent: o.agent.clone(),
            workspace: workspace.to_string_lossy().into_owned(),
            workspace_ref: o.workspace_ref.clone(),
            verify: o.verify.clone(),
            on_drift: o.on_drift,
            sandbox: o.sandbox,
            writable: o
                .writable
                .iter()
                .map(|p| absolute(p))
                .collect::<Result<_>>()?,
            agent_timeout_secs: o.agent_timeout_secs.unwrap_or(DEFAULT_AGENT_TIMEOUT_SECS),
            work_dir: o.work_dir.as_deref().map(absolute).transpose()?,
            keep_workspaces: o.keep_workspaces,
            verify_baseline: o.verify_baseline,
        })
    }

    /// The API the agent recorded in `session` spoke (through the model proxy).
    fn recorded_api(&self, session: &SessionId) -> Result<Api> {
        self.chain_calls(session)?
            .first()
            .map(|c| c.api)
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "session {session} was not recorded through forktrail's model proxy: an \
                     experiment replays an agent's calls as the proxy recorded them (record \
                     the agent with `forktrail proxy`, then experiment on its session)"
                ))
            })
    }

    /// Runs every `running` sample of experiment `id` (or of the experiment sample `id`
    /// is), `parallel` at a time, and returns the experiment with its figures. A sample
    /// whose process died is taken again from its start (see the module docs).
    pub fn run_experiment(&self, id: &str, parallel: usize) -> Result<Comparison> {
        let begun = self.comparison(id)?;
        let spec = begun.experiment.clone().ok_or_else(|| {
            Error::InvalidInput(format!(
                "comparison {} is not an experiment: run it with `jobs resume`",
                begun.comparison
            ))
        })?;
        let settings = self.comparison_settings(&begun.comparison)?;
        let node = self.comparison_node(&begun.comparison)?;
        let runs = self.rdf().runs(&node)?;
        let budget = Budget::shared(&begun.comparison, settings.budget_usd, || {
            let mut charged = 0.0;
            for run in &runs {
                charged += run.lost_usd + run.reserved_usd.unwrap_or(0.0);
                if let Some(fork) = self.iris.session_id(run.node.graph.as_ref()) {
                    charged += self
                        .model_calls(&fork)?
                        .iter()
                        .filter_map(|c| c.cost_usd)
                        .sum::<f64>();
                }
            }
            Ok(charged)
        })?;
        let root = match &spec.work_dir {
            Some(dir) => std::path::PathBuf::from(dir),
            None => std::env::temp_dir(),
        }
        .join(format!("forktrail-experiment-{}", begun.comparison));
        let gateway = gateway::Gateway::start()?;
        let experiment = sample::Experiment {
            store: self,
            id: begun.comparison.clone(),
            recorded: self.chain_calls(&begun.session)?,
            settings,
            spec,
            gateway: &gateway,
            budget: &budget,
            root,
            agent: crate::proxy::forward::agent(Duration::from_secs(600)),
        };
        let todo = std::sync::Mutex::new(
            runs.iter()
                .rev()
                .filter(|r| r.status == RunStatus::Running)
                .collect::<Vec<_>>(),
        );
        let failure = std::sync::Mutex::new(None);
        std::thread::scope(|scope| {
            for _ in 0..parallel.clamp(1, runs.len().max(1)) {
                scope.spawn(|| loop {
                    let next = todo.lock().unwrap_or_else(|e| e.into_inner()).pop();
                    let Some(run) = next else { break };
                    if let Err(e) = experiment.sample(run) {
                        failure
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert(e);
                    }
                });
            }
        });
        if !experiment.spec.keep_workspaces {
            let _ = std::fs::remove_dir_all(&experiment.root);
        }
        drop(experiment);
        drop(gateway);
        if let Some(e) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(e);
        }
        self.comparison(&begun.comparison)
    }
}

/// The name of a variable `line` sets to a secret written in it (`…_API_KEY=sk-…`,
/// `TOKEN=…`), or any secret this process holds, if it does.
fn secret_in(line: &str) -> Option<String> {
    if crate::secrets::scrub(line) != *line {
        return Some("a secret this process holds".into());
    }
    line.split_whitespace().find_map(|word| {
        let (name, value) = word.split_once('=')?;
        let named = ["KEY", "TOKEN", "SECRET", "PASSWORD"]
            .iter()
            .any(|w| name.contains(w));
        // An environment variable's name, as they are written: upper case.
        let plain = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        let literal = !value.trim_start_matches(['"', '\'']).starts_with('$');
        (named && plain && !value.is_empty() && literal).then(|| name.to_string())
    })
}

/// Where `program` is on PATH.
fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    })
}

/// The arm a stored run spec names (the replayed baseline's is the recording).
fn arm_of(spec: &str, run: &str) -> Result<Arm> {
    serde_json::from_str(spec).map_err(|e| Error::Corrupt {
        session: format!("(experiment sample {run})"),
        detail: format!("its arm is not JSON: {e}"),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_key_written_in_a_command_is_found_and_one_read_from_elsewhere_is_not() {
        let found = |line: &str| super::secret_in(line);
        assert_eq!(
            found("env ANTHROPIC_API_KEY=sk-1234 claude -p hi").as_deref(),
            Some("ANTHROPIC_API_KEY")
        );
        assert_eq!(
            found("GH_TOKEN='abc' gh pr list").as_deref(),
            Some("GH_TOKEN")
        );
        assert_eq!(found("ANTHROPIC_API_KEY=\"$(cat key)\" claude"), None);
        assert_eq!(found("OPENAI_API_KEY=$KEY codex exec hi"), None);
        assert_eq!(found("claude -p 'the key=value pairs'"), None);
    }
}
