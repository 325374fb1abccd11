//! One sample of an experiment: a fresh workspace copy, the agent started in it with
//! its base URL on the experiment's endpoint, its calls answered one by one on this
//! thread until it ends (or is stopped), then the verify command, and the outcome
//! written with the run's end in one transaction.

use super::gateway::Gateway;
use super::workspace::{self, Copy, Running};
use crate::error::Result;
use crate::model::{
    Drift, ExperimentSpec, ModelCallInfo, RunStatus, SampleOutcome, SessionId, Turn, Verdict,
};
use crate::rdf::{StoredRun, WhatIfNode};
use crate::store::Store;
use crate::whatif::{Arm, Budget, ComparisonSettings as Settings, InFlight};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

/// What every sample of one experiment shares.
pub(super) struct Experiment<'a> {
    pub(super) store: &'a Store,
    /// The comparison's id.
    pub(super) id: String,
    pub(super) settings: Settings,
    pub(super) spec: ExperimentSpec,
    /// The calls the proxy recorded in the compared session's history: their stop
    /// reasons and usage go with the answers given from it.
    pub(super) recorded: Vec<ModelCallInfo>,
    pub(super) gateway: &'a Gateway,
    pub(super) budget: &'a Budget,
    /// Where the copies and the processes' logs go.
    pub(super) root: PathBuf,
    /// The client of the arms' endpoints.
    pub(super) agent: ureq::Agent,
}

/// A sample being taken: what its calls so far have done.
pub(super) struct Sample<'a> {
    pub(super) run: &'a StoredRun,
    pub(super) fork: SessionId,
    pub(super) arm: Arm,
    /// Whether it replays the whole recording (the baseline's samples).
    pub(super) replay_only: bool,
    /// The fork point: answers before it come from the recording.
    pub(super) at: u64,
    /// The fork's turns: the recording's up to K, then the sample's committed steps.
    pub(super) script: Vec<Turn>,
    /// The agent's model calls so far.
    pub(super) calls: u64,
    pub(super) replayed: u64,
    /// Calls made to the arm's model (those its fork holds included).
    pub(super) live: u64,
    pub(super) drift: Option<Drift>,
    /// Why the sample stops before its agent ends on its own.
    pub(super) stop: Option<(RunStatus, String)>,
    pub(super) flag: &'a AtomicBool,
}

impl Experiment<'_> {
    /// Takes sample `run` to its end (nothing if another thread or process has it).
    pub(super) fn sample(&self, run: &StoredRun) -> Result<()> {
        let store = self.store;
        let Some(flag) = store.claim_job(&run.id) else {
            return Ok(());
        };
        // Ended meanwhile (cancelled while it waited its turn): nothing to take.
        if !store.rdf().run_is_running(&run.node)? {
            store.release_job(&run.id);
            return Ok(());
        }
        // A reservation left on it is a call a process that stopped made: charged.
        if run.reserved_usd.is_some() {
            store.end_in_flight(&run.node)?;
        }
        let taken = self.take(run, &flag);
        store.release_job(&run.id);
        if let Err(e) = taken {
            let detail = e.to_string();
            store.end_run(
                &run.node,
                RunStatus::Failed,
                Some(&detail),
                InFlight::Charged,
            )?;
        }
        Ok(())
    }

    fn take(&self, run: &StoredRun, flag: &AtomicBool) -> Result<()> {
        let store = self.store;
        let fork = store
            .iris
            .session_id(run.node.graph.as_ref())
            .ok_or_else(|| crate::Error::Corrupt {
                session: run.node.graph.to_string(),
                detail: format!("experiment sample {} is not in a session graph", run.id),
            })?;
        let arm = super::arm_of(&run.spec, &run.id)?;
        let script = store.load(&fork, None)?;
        let facts = store.require(&fork)?;
        let replay_only = run.arm_index == 0;
        let mut sample = Sample {
            run,
            at: if replay_only {
                script.len() as u64
            } else {
                self.settings.at
            },
            live: store.model_calls(&fork)?.len() as u64,
            fork,
            arm,
            replay_only,
            script,
            calls: 0,
            replayed: 0,
            drift: None,
            stop: None,
            flag,
        };
        debug_assert!(facts.length >= sample.at);
        let name: String = run
            .name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let label = format!(
            "{name}-{}-{}",
            run.sample,
            &run.id[run.id.len().saturating_sub(8)..]
        );
        let copy = Copy::make(&self.spec, &self.root, &label)?;
        let started = Instant::now();
        let (status, detail, agent_exit, agent_output) = self.drive(&mut sample, &copy, &label)?;
        let judged = match status {
            RunStatus::Drifted | RunStatus::Cancelled => None,
            _ => Some(self.verify(&copy, &label)?),
        };
        let (verdict, verify_exit, verify_output) =
            judged.unwrap_or((Verdict::NotJudged, None, String::new()));
        let outcome = SampleOutcome {
            verdict,
            agent_exit,
            verify_exit,
            verify_output,
            agent_output,
            wall_ms: started.elapsed().as_millis() as u64,
            replayed_calls: sample.replayed,
            drift: sample.drift.take(),
        };
        self.end(&run.node, status, &detail, &outcome)?;
        if !self.spec.keep_workspaces {
            copy.remove();
        }
        Ok(())
    }

    /// Runs the agent in `copy`, answering its calls, until it ends or is stopped: how
    /// the sample ended, its exit code and the end of its output.
    fn drive(
        &self,
        sample: &mut Sample<'_>,
        copy: &Copy,
        label: &str,
    ) -> Result<(RunStatus, String, Option<i64>, String)> {
        let (base, calls) = self.gateway.open();
        let log = self.root.join(format!("{label}.agent.log"));
        let _ = std::fs::remove_file(&log);
        let mut command = workspace::command(&self.spec, &self.spec.agent, &copy.path);
        command
            .env("ANTHROPIC_BASE_URL", format!("{base}/anthropic"))
            .env("OPENAI_BASE_URL", format!("{base}/openai/v1"))
            .env("FORKTRAIL_PROXY", &base)
            .env("FORKTRAIL_EXPERIMENT", &self.id)
            .env("FORKTRAIL_ARM", &sample.run.name)
            .env("FORKTRAIL_SAMPLE", sample.run.sample.to_string())
            .env("FORKTRAIL_WORKSPACE", &copy.path);
        let started = Running::start(command, &log);
        let mut agent = match started {
            Ok(agent) => agent,
            Err(e) => {
                self.gateway.close(&base);
                return Err(e);
            }
        };
        let limit = Duration::from_secs(self.spec.agent_timeout_secs);
        let ids = [sample.run.id.as_str(), self.id.as_str()];
        loop {
            if self.store.cancel_requested(&ids, sample.flag) {
                sample.stop = Some((RunStatus::Cancelled, "cancelled".into()));
            }
            if sample.stop.is_some() || agent.ended().is_some() {
                break;
            }
            if agent.elapsed() >= limit {
                let why = format!("the agent ran past its {} s (--timeout)", limit.as_secs());
                sample.stop = Some((RunStatus::TimedOut, why));
                break;
            }
            match calls.recv_timeout(Duration::from_millis(20)) {
                Ok(call) => self.answer(sample, call)?,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        self.gateway.close(&base);
        // Calls still waiting are refused as their sender goes.
        drop(calls);
        let code = agent.stop();
        let output = agent.output();
        let (status, detail) = sample.stop.take().unwrap_or_else(|| {
            let how = code.map_or("was ended by a signal".to_string(), |c| {
                format!("exited {c}")
            });
            (RunStatus::Exited, format!("the agent {how}"))
        });
        Ok((status, detail, code, output))
    }

    /// Runs the verify command in `copy`: its verdict, exit code and output's end.
    fn verify(&self, copy: &Copy, label: &str) -> Result<(Verdict, Option<i64>, String)> {
        let log = self.root.join(format!("{label}.verify.log"));
        let _ = std::fs::remove_file(&log);
        let command = workspace::command(&self.spec, &self.spec.verify, &copy.path);
        let running = Running::start(command, &log)?;
        let limit = Duration::from_secs(self.spec.agent_timeout_secs);
        Ok(match running.wait(limit) {
            Ok(Some(0)) => (Verdict::Pass, Some(0), workspace::tail(&log)),
            Ok(code) => (Verdict::Fail, code, workspace::tail(&log)),
            Err(()) => {
                let mut out = workspace::tail(&log);
                out.push_str(&format!(
                    "\n[forktrail: the verify command ran past {} s and was stopped]",
                    limit.as_secs()
                ));
                (Verdict::Fail, None, out)
            }
        })
    }

    /// Ends run `node` with `status`, its outcome and any reservation charged, in one
    /// transaction (nothing if it ended meanwhile).
    fn end(
        &self,
        node: &WhatIfNode,
        status: RunStatus,
        detail: &str,
        o: &SampleOutcome,
    ) -> Result<()> {
        let store = self.store;
        let mut tx = store.write_on(std::slice::from_ref(&node.graph))?;
        if store.rdf().run_is_running(node)? {
            let (inserts, removes) = node.end(status, Some(detail));
            tx.insert(inserts);
            tx.remove(removes);
            tx.insert(node.outcome(o));
            let (inserts, removes) = store.rdf().charge_reservation(node)?;
            tx.insert(inserts);
            tx.remove(removes);
        }
        tx.commit()
    }
}
