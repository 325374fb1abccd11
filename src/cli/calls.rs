//! `calls`: the model calls an agent made through the proxy that a session holds, and a
//! call's request rebuilt from the store.

use super::{emit, print_json, render, CliResult, Out};
use clap::Args;
use forktrail::{SessionId, Store};

#[derive(Args)]
pub(super) struct CallsArgs {
    /// The session whose calls to list (those whose answers extended it).
    session: SessionId,
    /// Print this call's request as the agent sent it, rebuilt from the store (JSON).
    #[arg(long, value_name = "CALL")]
    request: Option<String>,
    /// Print the calls as JSON.
    #[arg(long, conflicts_with = "request")]
    json: bool,
}

impl CallsArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        if let Some(call) = &self.request {
            return print_json(out, &store.rebuilt_request(&self.session, call)?);
        }
        let calls = store.model_calls(&self.session)?;
        emit(out, self.json, &calls, |out, calls| {
            render::model_calls(out, calls)
        })
    }
}
