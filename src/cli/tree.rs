//! The fork tree: `fork`, `branches`, `tree`, `detach`, `anchor`, `anchors`, `merge`,
//! `diff`.

use super::{emit, print_json, render, CliResult, Out};
use clap::Args;
use forktrail::{DetachOptions, ForkOptions, MergeOptions, SessionId, Store, Turn};

#[derive(Args)]
pub(super) struct ForkArgs {
    /// The parent session.
    session: SessionId,
    #[command(flatten)]
    options: ForkOptions,
    /// Print {"session", "parent", "forked_at_index", "branch", "fork_root", "depth"}.
    #[arg(long)]
    json: bool,
}

impl ForkArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        let dry_run = self.options.dry_run;
        let plan = store.fork(&self.session, self.options)?;
        emit(out, self.json, &plan, |out, plan| {
            let verb = match (dry_run, plan.reused) {
                (true, _) => "would fork",
                (false, true) => "already forked (same request id)",
                (false, false) => "forked",
            };
            writeln!(
                out,
                "{}\n{verb} {} at index {} as branch {} (depth {}, root {})",
                plan.session,
                plan.parent,
                plan.forked_at_index,
                plan.branch,
                plan.depth,
                plan.fork_root
            )?;
            if let Some(summary) = &plan.summary {
                writeln!(out, "summary: {summary}")?;
            }
            Ok(())
        })
    }
}

#[derive(Args)]
pub(super) struct BranchesArgs {
    /// The parent session.
    session: SessionId,
    /// Print a JSON array of {session, branch, forked_at_index, created_at, own_turns}.
    #[arg(long)]
    json: bool,
}

impl BranchesArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        let branches = store.branches(&self.session)?;
        emit(out, self.json, &branches, |out, b| render::branches(out, b))
    }
}

#[derive(Args)]
pub(super) struct TreeArgs {
    /// The session at the top of the tree.
    session: SessionId,
    /// The tree as nested JSON objects.
    #[arg(long, group = "tree_format")]
    json: bool,
    /// Graphviz DOT.
    #[arg(long, group = "tree_format")]
    dot: bool,
    /// A Mermaid flowchart.
    #[arg(long, group = "tree_format")]
    mermaid: bool,
}

impl TreeArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        let tree = store.tree(&self.session)?;
        emit(out, self.json, &tree, |out, tree| {
            let text = if self.dot {
                render::tree_dot(tree)
            } else if self.mermaid {
                render::tree_mermaid(tree)
            } else {
                render::tree_text(tree)
            };
            write!(out, "{text}")
        })
    }
}

#[derive(Args)]
pub(super) struct DetachArgs {
    /// The fork to detach.
    session: SessionId,
    #[command(flatten)]
    options: DetachOptions,
    /// Print {"session", "parent", "copied_turns", "copied_from", "moved_up"}.
    #[arg(long)]
    json: bool,
}

impl DetachArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        let plan = store.detach_with(&self.session, self.options)?;
        emit(out, self.json, &plan, |out, plan| {
            render::detach(out, plan, self.options.dry_run)
        })
    }
}

/// JSON text, checked while the arguments are parsed.
fn json_text(text: &str) -> Result<String, String> {
    serde_json::from_str::<serde_json::Value>(text)
        .map(|_| text.to_string())
        .map_err(|e| format!("--state is not valid JSON: {e}"))
}

#[derive(Args)]
pub(super) struct AnchorArgs {
    /// The session to mark.
    session: SessionId,
    /// The anchor's name (unique in the session).
    name: String,
    /// JSON saved with the anchor.
    #[arg(long, value_parser = json_text)]
    state: Option<String>,
    /// Print the anchor as JSON.
    #[arg(long)]
    json: bool,
}

impl AnchorArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        let made = store.anchor(&self.session, &self.name, self.state.as_deref())?;
        emit(out, self.json, &made, |out, made| {
            writeln!(
                out,
                "anchor {} on {} at index {}",
                made.name, made.session, made.at_index
            )
        })
    }
}

#[derive(Args)]
pub(super) struct AnchorsArgs {
    /// The session whose anchors to list.
    session: SessionId,
    /// Print a JSON array of anchors.
    #[arg(long)]
    json: bool,
}

impl AnchorsArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        let anchors = store.anchors(&self.session)?;
        emit(out, self.json, &anchors, |out, a| render::anchors(out, a))
    }
}

#[derive(Args)]
pub(super) struct MergeArgs {
    /// The fork whose turns to merge.
    child: SessionId,
    #[command(flatten)]
    options: MergeOptions,
    /// Print the merge as JSON.
    #[arg(long)]
    json: bool,
}

impl MergeArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        let dry_run = self.options.dry_run;
        let plan = store.merge(&self.child, self.options)?;
        emit(out, self.json, &plan, |out, plan| {
            let verb = if dry_run { "would merge" } else { "merged" };
            writeln!(
                out,
                "{verb} {} into {} as turn {}",
                plan.reference, plan.into, plan.index
            )
        })
    }
}

#[derive(Args)]
pub(super) struct DiffArgs {
    /// The first session.
    a: SessionId,
    /// The second session.
    b: SessionId,
    /// Print {"common_ancestor", "common_prefix", "found_by", "a_tail", "b_tail"}.
    #[arg(long)]
    json: bool,
}

impl DiffArgs {
    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        let diff = store.diff(&self.a, &self.b)?;
        if self.json {
            return print_json(out, &diff);
        }
        let tail = |s: &SessionId| -> Result<Vec<Turn>, forktrail::Error> {
            let mut turns = store.load(s, None)?;
            turns.drain(..(diff.common_prefix as usize).min(turns.len()));
            Ok(turns)
        };
        Ok(render::diff(out, &diff, &tail(&self.a)?, &tail(&self.b)?)?)
    }
}
