//! What-if regeneration and its jobs: `regenerate`, `jobs`. The jobs of a comparison
//! (the comparison and its runs) are shown, cancelled and resumed here too.

use super::{
    compare, emit, figures, is_locked, open, print_json, render, spawn_worker, CliResult, Out,
    Target,
};
use clap::{Args, Subcommand};
use forktrail::{Job, JobStatus, RegenerateOptions, SessionId, Store};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Args)]
pub(super) struct RegenerateArgs {
    /// The session to regenerate from.
    session: SessionId,
    #[command(flatten)]
    options: RegenerateOptions,
    /// A file whose text replaces the system message.
    #[arg(long, value_name = "FILE")]
    system_prompt: Option<PathBuf>,
    /// A JSON file with the tool list (OpenAI tool definitions) to offer instead.
    #[arg(long, value_name = "FILE")]
    tools: Option<PathBuf>,
    /// Return the job id at once; a worker process runs the job (the store is in use
    /// until it ends). Cancel it with `forktrail jobs cancel ID`.
    #[arg(long, conflicts_with = "dry_run")]
    background: bool,
    /// Print the job (or, with --dry-run, the plan) as JSON.
    #[arg(long)]
    json: bool,
}

/// A regeneration job that ended `failed` or `cancelled`: the command fails with it.
#[derive(Debug)]
struct JobEnded(String);

impl std::fmt::Display for JobEnded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for JobEnded {}

/// `Ok` for a job that is complete or still running (in the background); the job's
/// outcome as an error otherwise.
fn job_outcome(job: &Job) -> CliResult {
    match job.status {
        JobStatus::Failed => Err(JobEnded(format!(
            "regeneration job {} failed: {} (see `forktrail jobs show {}`)",
            job.job,
            job.error.as_deref().unwrap_or("no reason recorded"),
            job.job
        ))
        .into()),
        JobStatus::Cancelled => {
            Err(JobEnded(format!("regeneration job {} was cancelled", job.job)).into())
        }
        JobStatus::Running | JobStatus::Complete => Ok(()),
    }
}

fn read(file: &Path) -> Result<String, String> {
    std::fs::read_to_string(file).map_err(|e| format!("cannot read {}: {e}", file.display()))
}

impl RegenerateArgs {
    pub(super) fn run(self, out: Out, store: Store, path: &Target) -> CliResult {
        let mut options = self.options;
        options.system_prompt = self.system_prompt.as_deref().map(read).transpose()?;
        if let Some(file) = &self.tools {
            options.tools = Some(
                serde_json::from_str(&read(file)?)
                    .map_err(|e| format!("{} is not JSON: {e}", file.display()))?,
            );
        }
        if options.dry_run {
            let plan = store.plan_regeneration(&self.session, &options)?;
            return emit(out, self.json, &plan, |out, plan| {
                writeln!(out, "would fork {} at index {}", plan.session, plan.at)?;
                writeln!(out, "messages          {}", plan.messages)?;
                writeln!(
                    out,
                    "estimated tokens  {} ({})",
                    plan.estimated_tokens, plan.estimate_method
                )?;
                writeln!(out, "endpoint          {}", plan.endpoint)?;
                writeln!(out, "model             {}", plan.model)?;
                if !plan.swapped.is_empty() {
                    writeln!(out, "swapped           {}", plan.swapped.join(", "))?;
                }
                Ok(())
            });
        }
        let job = store.begin_regeneration(&self.session, &options)?;
        let job = if job.status != JobStatus::Running {
            job
        } else if self.background {
            // The worker needs the store this process holds.
            drop(store);
            spawn_worker(path, &["jobs", "run", &job.job])?;
            job
        } else {
            store.run_job(&job.job)?
        };
        if self.json {
            print_json(out, &job)?;
        } else if job_outcome(&job).is_ok() {
            render::job(out, &job)?;
        }
        job_outcome(&job)
    }
}

#[derive(Args)]
pub(super) struct JobsArgs {
    #[command(subcommand)]
    action: Option<JobsAction>,
    /// Print the jobs as a JSON array.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum JobsAction {
    /// Print one job: a regeneration, or a comparison (given its id or one of its runs')
    /// with every arm's figures.
    Show {
        /// The id of a regeneration job, a comparison or a comparison's run.
        job: String,
        /// Print the job (or the comparison) as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Stop a running job. A regeneration ends cancelled and leaves no turn; a
    /// comparison's running arms (or the one run named) end cancelled, keeping the steps
    /// they committed.
    Cancel {
        /// The id of a regeneration job, a comparison or a comparison's run.
        job: String,
    },
    /// Run a job recorded as running whose process stopped (killed, or the machine
    /// restarted): a comparison's running arms go on from their last committed step,
    /// and the comparison is printed; a regeneration asks its model.
    Resume {
        /// The id of a regeneration job, a comparison or a comparison's run (its whole
        /// comparison is resumed).
        job: String,
        /// How many of a comparison's arms run at once.
        #[arg(long, value_name = "N", default_value_t = 1,
              value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
        parallel: usize,
        /// Print the job (or the comparison) as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Internal: the worker process `regenerate --background` starts runs a job
    /// recorded as running.
    #[command(hide = true)]
    Run {
        /// The job id.
        job: String,
    },
}

impl JobsArgs {
    /// `jobs cancel`: runs before the store is opened, since a worker may hold it.
    pub(super) fn is_cancel(&self) -> bool {
        matches!(self.action, Some(JobsAction::Cancel { .. }))
    }

    /// `jobs run` (the background worker) and `jobs resume` (also the worker of
    /// `compare --background`), which wait for the store to be free.
    pub(super) fn is_worker(&self) -> bool {
        matches!(
            self.action,
            Some(JobsAction::Run { .. } | JobsAction::Resume { .. })
        )
    }

    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        match self.action {
            None => emit(out, self.json, &store.jobs()?, |out, j| {
                render::jobs(out, j)
            }),
            Some(JobsAction::Show { job, json }) if store.is_comparison(&job)? => {
                emit(out, json, &store.comparison(&job)?, figures::comparison)
            }
            Some(JobsAction::Show { job, json }) => emit(out, json, &store.job(&job)?, render::job),
            Some(JobsAction::Run { job }) => {
                store.run_job(&job)?;
                Ok(())
            }
            Some(JobsAction::Resume {
                job,
                parallel,
                json,
            }) => {
                if store.is_comparison(&job)? {
                    return compare::resume(out, store, &job, parallel, json);
                }
                let job = store.run_job(&job)?;
                if json {
                    print_json(out, &job)?;
                } else if job_outcome(&job).is_ok() {
                    render::job(out, &job)?;
                }
                job_outcome(&job)
            }
            Some(JobsAction::Cancel { job }) if store.is_comparison(&job)? => {
                Ok(figures::comparison(out, &store.cancel_comparison(&job)?)?)
            }
            Some(JobsAction::Cancel { job }) => Ok(render::job(out, &store.cancel_job(&job)?)?),
        }
    }

    /// Cancels a job. If another process (a background worker, a `compare` in the
    /// foreground) holds the store, a cancel file asks it to stop, and this waits for
    /// the store to report the outcome.
    pub(super) fn cancel(self, out: Out, path: &Target) -> CliResult {
        let Some(JobsAction::Cancel { job }) = &self.action else {
            unreachable!("called for `jobs cancel` only")
        };
        let Some(dir) = path.dir() else {
            // A shared store has no holder to ask: the job is marked cancelled in it.
            return self.run(out, &open(path, false)?);
        };
        let cancel_file = Store::cancel_file(dir, job);
        let store = match open(path, false) {
            Ok(store) => store,
            Err(e) if is_locked(e.as_ref()) => {
                if let Some(dir) = cancel_file.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                std::fs::write(&cancel_file, b"")?;
                match store_after_cancel(path, &cancel_file)? {
                    Some(store) => store,
                    None => {
                        writeln!(
                            out,
                            "{job} has stopped; the process that ran it still holds the store \
                             (see `forktrail jobs show {job}` once that process ends)"
                        )?;
                        return Ok(());
                    }
                }
            }
            Err(e) => return Err(e),
        };
        let result = self.run(out, &store);
        let _ = std::fs::remove_file(cancel_file);
        result
    }
}

/// Waits, up to 30 s, for the store whose holder was asked to stop a job through
/// `cancel_file`. `None`: the holder took the request (a runner removes its cancel file
/// once the job has ended) but goes on holding the store, as a comparison's process does
/// while its other arms run.
fn store_after_cancel(
    path: &Target,
    cancel_file: &Path,
) -> Result<Option<Store>, Box<dyn std::error::Error>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    // A holder that ends once the job has is given a moment to let the store go, so
    // that the outcome is printed.
    let mut taken_at = None;
    loop {
        match open(path, false) {
            Err(e) if is_locked(e.as_ref()) && Instant::now() < deadline => {}
            other => return other.map(Some),
        }
        if !cancel_file.exists() {
            let taken = *taken_at.get_or_insert_with(Instant::now);
            if taken.elapsed() > Duration::from_secs(2) {
                return Ok(None);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
