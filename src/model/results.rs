//! What an operation answers: plans of forks, merges, deletes and detaches, a diff,
//! a session's facts, its branches and tree, anchors, an upgrade's report.

use super::jobs::WhatIfInfo;
use super::names::SessionId;
use super::turn::{DigestVersion, ReplayRecord};
use serde::Serialize;

/// What [`Store::upgrade_digests`](crate::Store::upgrade_digests) did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UpgradeReport {
    /// The version the store's digests were made with.
    pub from: DigestVersion,
    /// The version they are made with now.
    pub to: DigestVersion,
    /// Sessions whose digests were rewritten.
    pub sessions: usize,
    /// Turns whose digest was rewritten.
    pub turns: u64,
}

impl UpgradeReport {
    /// Whether the store was brought from an older version.
    pub fn upgraded(&self) -> bool {
        self.from != self.to
    }
}

/// A named point in a session: its length when the anchor was set.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AnchorInfo {
    pub name: String,
    /// The session that set the anchor (an ancestor, for inherited anchors).
    pub session: SessionId,
    /// The session's length when the anchor was set: a fork point.
    pub at_index: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<serde_json::Value>,
    pub created_at: Option<String>,
}

/// What a merge did (or, for a dry run, would do).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MergePlan {
    pub child: SessionId,
    pub into: SessionId,
    /// The index of the `fork_result` turn in `into` (its length before the merge).
    pub index: u64,
    /// The child's own turns the merge covers, inclusive.
    pub first: u64,
    pub last: u64,
    /// `CHILD@k:turns:a-b`.
    pub reference: String,
    /// The content of the `fork_result` turn.
    pub content: String,
}

/// How two sessions relate and where they part.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SessionDiff {
    pub a: SessionId,
    pub b: SessionId,
    /// The deepest session both chains share, if their lineage meets.
    pub common_ancestor: Option<SessionId>,
    /// The number of leading turns both histories share (equal digests).
    pub common_prefix: u64,
    /// How the shared prefix was found.
    pub found_by: FoundBy,
    /// The turns of `a` from `common_prefix` on.
    pub a_tail: Vec<ReplayRecord>,
    pub b_tail: Vec<ReplayRecord>,
}

/// What a delete did (or, for a dry run, would do). As JSON a dry run names the ids
/// `would_delete`, not `deleted`, and says `"dry_run": true`: nothing was deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeletePlan {
    /// The deleted sessions' ids: the named one first, then its descendants, parents
    /// before children.
    pub deleted: Vec<SessionId>,
    /// The same sessions with what each held.
    pub sessions: Vec<DeletedSession>,
    /// Turns removed, over all of them (inherited turns are not theirs to remove).
    pub own_turns: u64,
    /// Whether this is a plan only and nothing was deleted.
    pub dry_run: bool,
}

impl Serialize for DeletePlan {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut plan = serializer.serialize_struct("DeletePlan", 4)?;
        let ids = if self.dry_run {
            "would_delete"
        } else {
            "deleted"
        };
        plan.serialize_field(ids, &self.deleted)?;
        plan.serialize_field("sessions", &self.sessions)?;
        plan.serialize_field("own_turns", &self.own_turns)?;
        plan.serialize_field("dry_run", &self.dry_run)?;
        plan.end()
    }
}

/// One session a delete removes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeletedSession {
    pub session: SessionId,
    pub branch: String,
    pub parent: Option<SessionId>,
    pub own_turns: u64,
}

/// What a detach did (or, for a dry run, would do).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DetachPlan {
    pub session: SessionId,
    /// The parent whose link is dropped.
    pub parent: SessionId,
    /// Inherited turns copied into the session: indices `0..copied_turns`.
    pub copied_turns: u64,
    /// Where the copies come from, one span per ancestor, in index order.
    pub copied_from: Vec<TurnSpan>,
    /// The session's descendants, whose depth and fork root change with it.
    pub moved_up: Vec<MovedSession>,
}

/// Turns `from..to` (exclusive) stored by one session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TurnSpan {
    pub session: SessionId,
    pub branch: String,
    pub from: u64,
    pub to: u64,
}

/// A descendant of a detached session: its depth before and after.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MovedSession {
    pub session: SessionId,
    pub depth_before: u64,
    pub depth_after: u64,
}

/// How [`SessionDiff`] found what two sessions share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FoundBy {
    /// Their chains meet: a common ancestor.
    Lineage,
    /// No common ancestor, but equal digests (e.g. after a detach).
    Digest,
    /// Nothing is shared.
    None,
}

/// What a fork did (or, for a dry run, would do).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ForkPlan {
    pub session: SessionId,
    pub parent: SessionId,
    pub forked_at_index: u64,
    pub branch: String,
    pub fork_root: SessionId,
    pub depth: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// True when a `request_id` retry returned the fork made the first time.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reused: bool,
}

/// Facts about one session, without its turns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SessionInfo {
    pub session: SessionId,
    pub branch: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub principal: Option<String>,
    pub parent: Option<SessionId>,
    pub forked_at_index: Option<u64>,
    pub fork_root: SessionId,
    pub depth: usize,
    /// Number of turns, inherited ones included (the next index).
    pub length: u64,
    pub own_turns: u64,
    pub created_at: Option<String>,
    /// The digest of the last turn (inherited or own): equal heads, equal histories.
    pub head_digest: Option<String>,
    /// The operational summary of the inherited prefix stored by `fork --summarize`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Turns inherited from ancestors (`length - own_turns`).
    pub inherited_turns: u64,
    /// Bytes of content of own and inherited turns (`Store::info` only; `list` leaves
    /// them out, since they need every turn).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_content_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inherited_content_bytes: Option<u64>,
    /// The models the session's own turns are attributed to (`Store::info` only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    /// Token totals of the regenerations that produced this session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenTotals>,
    /// For a sub-agent's transcript: which agent, and what launched it (`Store::info`
    /// only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subagent: Option<SubAgentInfo>,
    /// For the fork of a what-if run: the run, its comparison and how it ended
    /// (`Store::info` only). A run that is not `complete` did not reach the end of the
    /// recording.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub what_if: Option<WhatIfInfo>,
}

/// The sub-agent whose transcript a session holds, and the launch it records.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SubAgentInfo {
    /// The id the tool gave the sub-agent.
    pub agent_id: String,
    /// The session and index of the turn whose tool call launched it; `None` while the
    /// launch is unresolved (that turn is not in the store).
    pub spawned_by: Option<TurnRef>,
    /// The id of the launching tool call, as the source names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The session the source says launched it, by the source's own id (kept as the
    /// source wrote it: it need not name a session in this store).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawned_in_session: Option<String>,
}

/// A turn, by the session that stores it and its index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TurnRef {
    pub session: SessionId,
    pub index: u64,
}

/// Input and output tokens, as the model endpoints reported them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TokenTotals {
    pub input: u64,
    pub output: u64,
}

/// A direct child of a session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BranchInfo {
    pub session: SessionId,
    pub branch: String,
    pub forked_at_index: u64,
    pub created_at: Option<String>,
    pub own_turns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// A session and its descendants.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TreeNode {
    pub session: SessionId,
    pub branch: String,
    pub forked_at_index: Option<u64>,
    pub length: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenTotals>,
    pub children: Vec<TreeNode>,
    /// How many children are left out ([`crate::Store::tree_within`]'s limit).
    #[serde(skip_serializing_if = "is_zero")]
    pub more_children: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
