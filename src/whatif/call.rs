//! The model call and the job registry: a call made on a helper thread while the caller
//! watches for cancellation, and the jobs and runs this process runs, each with the flag
//! that stops it (or, for a runner in another process, a cancel file beside the store).

use super::provider::{post, CallFailure, Provider};
use crate::error::{Error, Result};
use crate::model::SessionId;
use crate::store::Store;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a model call ended: its answer and latency in milliseconds, a failure, or a
/// cancellation noticed while it waited.
pub(super) enum Call {
    Answered(String, u64),
    Failed(CallFailure),
    Cancelled,
}

impl Store {
    /// Checks that a model can answer session `session` at index `at` (at least one
    /// turn of context, at most the whole session) and returns the session's length.
    pub(super) fn answer_point(&self, session: &SessionId, at: u64) -> Result<u64> {
        let length = self.require(session)?.length;
        if at == 0 || at > length {
            return Err(Error::IndexOutOfRange {
                session: session.to_string(),
                index: at.into(),
                valid: format!("1..={length} (the model needs at least one turn of context)"),
            });
        }
        Ok(length)
    }

    /// Registers job (or run) `id` as run by this process and returns the flag that
    /// stops it; `None` if this process already runs it.
    pub(crate) fn claim_job(&self, id: &str) -> Option<Arc<AtomicBool>> {
        let mut running = self.running_jobs();
        if running.contains_key(id) {
            return None;
        }
        let flag = Arc::new(AtomicBool::new(false));
        running.insert(id.to_string(), Arc::clone(&flag));
        Some(flag)
    }

    /// Forgets job (or run) `id` as run by this process, and the cancel file asking it
    /// to stop.
    pub(crate) fn release_job(&self, id: &str) {
        self.running_jobs().remove(id);
        if let Some(path) = self.path() {
            let _ = std::fs::remove_file(Store::cancel_file(path, id));
        }
    }

    /// Raises the flag of job (or run) `id`, if this process runs it.
    pub(crate) fn signal_cancel(&self, id: &str) {
        let flag = self.running_jobs().get(id).cloned();
        if let Some(flag) = flag {
            flag.store(true, Ordering::SeqCst);
        }
    }

    /// Whether a job was asked to stop, in this process or through the cancel file of
    /// one of `ids` (a run's own, or its comparison's).
    pub(crate) fn cancel_requested(&self, ids: &[&str], flag: &AtomicBool) -> bool {
        flag.load(Ordering::SeqCst)
            || self
                .path()
                .is_some_and(|path| ids.iter().any(|id| Store::cancel_file(path, id).exists()))
    }

    /// The file whose existence asks the runner of job `id` in another process to stop
    /// (for a store on disk).
    pub fn cancel_file(store_path: &std::path::Path, id: &str) -> PathBuf {
        let mut dir = store_path.as_os_str().to_owned();
        dir.push(".jobs");
        PathBuf::from(dir).join(format!("{id}.cancel"))
    }

    fn running_jobs(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Arc<AtomicBool>>> {
        self.jobs_running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Calls the endpoint on a helper thread and waits, watching for cancellation.
    pub(super) fn call_model(
        &self,
        provider: Provider,
        endpoint: &str,
        body: String,
        timeout_secs: u64,
        ids: &[&str],
        flag: &AtomicBool,
    ) -> Call {
        let endpoint = endpoint.to_string();
        let (tx, rx) = std::sync::mpsc::channel();
        let started = Instant::now();
        std::thread::spawn(move || {
            let _ = tx.send(post(provider, &endpoint, &body, timeout_secs));
        });
        loop {
            if self.cancel_requested(ids, flag) {
                return Call::Cancelled;
            }
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(Ok(text)) => return Call::Answered(text, started.elapsed().as_millis() as u64),
                Ok(Err(failure)) => return Call::Failed(failure),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Call::Failed(CallFailure {
                        message: "the model call ended without an answer".into(),
                        maybe_billed: true,
                    })
                }
            }
        }
    }
}
