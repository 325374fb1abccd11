//! `verify`: every turn's digest recomputed and the chain followed across fork points,
//! and what the graph shape promises checked, from the graphs as stored (read-only).

use crate::error::Result;
use crate::model::{Kind, Role, SessionId, MAX_FORK_DEPTH};
use crate::rdf::{
    digest_as, DigestFields, DigestVersion, PayloadRef, SessionNode, StoredSession, StoredTurn,
};
use crate::store::Store;
use oxigraph::model::NamedNode;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// What a [`Problem`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Check {
    /// The session node cannot be read (no id or label, a fork without a fork point).
    Node,
    /// A stored digest differs from the one recomputed from the turn and its
    /// predecessor's digest.
    Digest,
    /// An index between the session's first and last turn has no turn.
    MissingTurn,
    /// Two turns share an index, or one turn carries two.
    DuplicateIndex,
    /// A turn lacks what replay and the digest need (index, role, content, digest), or
    /// has a role or kind forktrail does not know.
    TurnFields,
    /// A turn node named as another session's (or another index's) turn.
    TurnIri,
    /// A turn not attributed (`prov:wasAttributedTo`) or not timed
    /// (`prov:generatedAtTime`).
    Attribution,
    /// The parent is missing, the chain has a cycle, or it is deeper than 32.
    Lineage,
    /// The fork point is past the parent's length, or inside a turn index the session
    /// also stores.
    ForkPoint,
    /// `ft:forkRoot` is not the root of the chain.
    ForkRoot,
    /// `ft:forkDepth` is not the number of ancestors.
    Depth,
    /// `ft:baseDigest` is not the parent's digest at the fork point.
    BaseDigest,
    /// Two children of one parent share a branch label.
    Label,
    /// A fork without its `ft:Fork` activity.
    ForkActivity,
    /// A property a turn or session node carries once (content, digest, index, role,
    /// branch, parent, …) has several values.
    SingleValue,
}

/// One thing `verify` found wrong.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The session (its id, or its graph's name when the node has no readable id).
    pub session: String,
    /// The turn index, for problems of one turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
    pub check: Check,
    pub detail: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let check = serde_json::to_value(self.check).unwrap_or_default();
        let check = check.as_str().unwrap_or("?");
        match self.index {
            Some(i) => write!(f, "{} [{i}] {check}: {}", self.session, self.detail),
            None => write!(f, "{} {check}: {}", self.session, self.detail),
        }
    }
}

/// What [`Store::verify`] checked and found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// The digest version the turns were checked against: the store's (see
    /// [`DigestVersion`]), or for an export, the version its digests were made with.
    pub digest_version: DigestVersion,
    /// Sessions checked.
    pub sessions: usize,
    /// Turns whose digest was recomputed.
    pub turns: u64,
    /// Every problem, by session then index.
    pub problems: Vec<Problem>,
}

impl VerifyReport {
    /// Whether nothing is wrong.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

impl Store {
    /// Checks one session and its chain (with `Some`), or every session: recomputes
    /// each turn's digest from what it covers (the store's digest version: see
    /// [`DigestVersion`]) and its predecessor's digest (across fork points), and checks
    /// lineage (parent present, fork point in range,
    /// depth and fork root right, no cycle, ≤ 32 levels), contiguous indices, unique
    /// sibling labels, turns attributed and timed, and each fork's activity.
    ///
    /// Reads only. Problems are returned, not raised: `Err` means the store could not
    /// be read (or the session does not exist).
    pub fn verify(&self, session: Option<&SessionId>) -> Result<VerifyReport> {
        self.verify_with(self.digest_version()?, session)
    }

    /// [`Store::verify`] with digests recomputed as `version` makes them.
    fn verify_with(
        &self,
        version: DigestVersion,
        session: Option<&SessionId>,
    ) -> Result<VerifyReport> {
        let rdf = self.rdf();
        let mut audit = Audit::at(version);
        let targets: Vec<NamedNode> = match session {
            None => {
                for iri in rdf.sessions()? {
                    if let Some(stored) = rdf.stored_session(iri.as_ref())? {
                        audit.add(iri, stored);
                    }
                }
                audit.sessions.keys().cloned().collect()
            }
            Some(id) => {
                let iri = self.require(id)?.iri;
                // The chain, as far as parent links reach (a cycle or a missing parent
                // stops it, and is reported).
                let mut next = Some(iri.clone());
                let mut targets = Vec::new();
                while let Some(g) = next.take() {
                    if audit.sessions.contains_key(&g) || targets.len() > MAX_FORK_DEPTH + 1 {
                        break;
                    }
                    let Some(stored) = rdf.stored_session(g.as_ref())? else {
                        break;
                    };
                    next = stored.node.as_ref().ok().and_then(|n| n.parent.clone());
                    targets.push(g.clone());
                    audit.add(g, stored);
                }
                // The siblings' nodes, for their labels.
                if let Some(parent) = audit.node(&iri).and_then(|n| n.parent.clone()) {
                    for child in rdf.children(&parent)? {
                        if let Some(node) = rdf.session_node(child.as_ref())? {
                            audit.siblings.push(node);
                        }
                    }
                }
                targets
            }
        };
        Ok(audit.check(self, &targets, true))
    }

    /// [`Store::verify`] of a store whose digest version is not recorded (an export
    /// loaded as is): as the current version, and if that finds digests that differ,
    /// as version 1, whose report is kept when it finds none.
    pub(crate) fn verify_as_either(&self, session: Option<&SessionId>) -> Result<VerifyReport> {
        let current = self.verify_with(DigestVersion::CURRENT, session)?;
        if !current.problems.iter().any(|p| p.check == Check::Digest) {
            return Ok(current);
        }
        let old = self.verify_with(DigestVersion::V1, session)?;
        Ok(
            match old.problems.iter().any(|p| p.check == Check::Digest) {
                false => old,
                true => current,
            },
        )
    }

    /// The problems of the turns of `ids` alone (fields, indices, attribution, the
    /// digest chain from the fork's base digest): what an import must not let in.
    pub(crate) fn turn_problems(&self, ids: &[SessionId]) -> Result<Vec<Problem>> {
        self.turn_problems_as(self.digest_version()?, ids)
    }

    /// Whether `problems`, found in the turns of `ids`, are digests that differ and
    /// nothing else, and every digest checks out as version 1 made them: the sessions of
    /// an export written before digests covered tool calls, intact.
    pub(crate) fn digests_of_version_1(
        &self,
        ids: &[SessionId],
        problems: &[Problem],
    ) -> Result<bool> {
        if problems.is_empty() || problems.iter().any(|p| p.check != Check::Digest) {
            return Ok(false);
        }
        Ok(self.turn_problems_as(DigestVersion::V1, ids)?.is_empty())
    }

    /// [`Store::turn_problems`] with digests as `version` makes them.
    pub(crate) fn turn_problems_as(
        &self,
        version: DigestVersion,
        ids: &[SessionId],
    ) -> Result<Vec<Problem>> {
        let rdf = self.rdf();
        let mut audit = Audit::at(version);
        let mut targets = Vec::new();
        for id in ids {
            let iri = self.session_iri(id);
            if let Some(stored) = rdf.stored_session(iri.as_ref())? {
                audit.add(iri.clone(), stored);
                targets.push(iri);
            }
        }
        Ok(audit.check(self, &targets, false).problems)
    }
}

/// The stored sessions a verify reads, and what it found.
#[derive(Default)]
struct Audit {
    sessions: BTreeMap<NamedNode, StoredSession>,
    /// Nodes of sessions not otherwise read, for label checks.
    siblings: Vec<SessionNode>,
    report: VerifyReport,
}

impl Audit {
    /// An audit that recomputes digests as `version` makes them.
    fn at(version: DigestVersion) -> Self {
        let mut audit = Self::default();
        audit.report.digest_version = version;
        audit
    }

    fn add(&mut self, iri: NamedNode, stored: StoredSession) {
        self.sessions.insert(iri, stored);
    }

    fn node(&self, iri: &NamedNode) -> Option<&SessionNode> {
        self.sessions.get(iri)?.node.as_ref().ok()
    }

    fn problem(&mut self, session: &str, index: Option<u64>, check: Check, detail: String) {
        self.report.problems.push(Problem {
            session: session.to_string(),
            index,
            check,
            detail,
        });
    }

    /// Checks `targets` (their turns; with `lineage`, also their lineage and labels,
    /// looking parents up among the sessions read).
    fn check(mut self, store: &Store, targets: &[NamedNode], lineage: bool) -> VerifyReport {
        for iri in targets {
            let Some(stored) = self.sessions.get(iri) else {
                continue;
            };
            self.report.sessions += 1;
            let node = match &stored.node {
                Ok(node) => node.clone(),
                Err(e) => {
                    let name = store.iris.name_of(iri.as_ref());
                    self.problem(&name, None, Check::Node, e.clone());
                    continue;
                }
            };
            let turns = stored.turns.clone();
            let has_fork_activity = stored.has_fork_activity;
            for (property, n) in stored.doubled.clone() {
                let detail = format!("the session node has {n} values of {property}");
                self.problem(node.id.as_str(), None, Check::SingleValue, detail);
            }
            self.check_turns(store, &node, &turns);
            if lineage {
                self.check_lineage(&node, has_fork_activity);
            }
        }
        if lineage {
            self.check_labels(targets);
        }
        let mut report = self.report;
        report
            .problems
            .sort_by(|a, b| (&a.session, a.index, a.check).cmp(&(&b.session, b.index, b.check)));
        report
    }

    /// Fields, IRIs, attribution, contiguity and the digest chain of a session's own
    /// turns.
    fn check_turns(&mut self, store: &Store, node: &SessionNode, turns: &[StoredTurn]) {
        let id = node.id.as_str();
        let start = node.own_start();
        let mut by_index: BTreeMap<u64, Vec<&StoredTurn>> = BTreeMap::new();
        for turn in turns {
            let name = turn
                .iri
                .as_ref()
                .map_or_else(String::new, |i| i.to_string());
            let index = match turn.indices.as_slice() {
                [i] => *i,
                [] => {
                    self.problem(
                        id,
                        None,
                        Check::TurnFields,
                        format!("turn {name} has no ft:index"),
                    );
                    continue;
                }
                many => {
                    let detail = format!("turn {name} carries the indices {many:?}");
                    self.problem(id, Some(many[0]), Check::DuplicateIndex, detail);
                    continue;
                }
            };
            if turn.iri.as_ref() != Some(&store.iris.turn(id, index)) {
                let detail = format!("turn {index} is stored as {name}, not as this session's");
                self.problem(id, Some(index), Check::TurnIri, detail);
            }
            for detail in &turn.malformed {
                self.problem(id, Some(index), Check::TurnFields, detail.clone());
            }
            for (property, n) in turn.values.iter().filter(|(_, n)| **n > 1) {
                let detail = format!("turn {index} has {n} values of {property}");
                self.problem(id, Some(index), Check::SingleValue, detail);
            }
            if !turn.attributed || !turn.timed {
                let missing = match (turn.attributed, turn.timed) {
                    (false, false) => "prov:wasAttributedTo and prov:generatedAtTime",
                    (false, true) => "prov:wasAttributedTo",
                    _ => "prov:generatedAtTime",
                };
                self.problem(id, Some(index), Check::Attribution, format!("no {missing}"));
            }
            if index < start {
                let detail = format!("turn {index} is below the fork point {start}");
                self.problem(id, Some(index), Check::ForkPoint, detail);
                continue;
            }
            by_index.entry(index).or_default().push(turn);
        }
        let Some(&last) = by_index.keys().next_back() else {
            return;
        };
        // The digest before the first own turn: "" for a root, else the fork's base.
        let mut prev: Option<String> = match (start, &node.base_digest) {
            (0, _) => Some(String::new()),
            (_, Some(base)) => Some(base.clone()),
            (k, None) => {
                let detail = format!("a fork at {k} without ft:baseDigest");
                self.problem(id, None, Check::BaseDigest, detail);
                None
            }
        };
        for index in start..=last {
            let here = by_index.get(&index).map_or(&[][..], Vec::as_slice);
            let turn = match here {
                [turn] => turn,
                [] => {
                    self.problem(id, Some(index), Check::MissingTurn, "no turn".into());
                    prev = None;
                    continue;
                }
                many => {
                    let detail = format!("{} turns at this index", many.len());
                    self.problem(id, Some(index), Check::DuplicateIndex, detail);
                    prev = None;
                    continue;
                }
            };
            self.report.turns += 1;
            prev = self.check_digest(id, index, turn, prev.as_deref());
        }
    }

    /// Checks one turn's digest against `prev` (unknown after a missing turn); returns
    /// the stored digest, which the next turn chains onto.
    fn check_digest(
        &mut self,
        id: &str,
        index: u64,
        turn: &StoredTurn,
        prev: Option<&str>,
    ) -> Option<String> {
        let (Some(role), Some(content), Some(digest)) = (&turn.role, &turn.content, &turn.digest)
        else {
            let missing: Vec<&str> = [
                (turn.role.is_none(), "ft:role"),
                (turn.content.is_none(), "ft:content"),
                (turn.digest.is_none(), "ft:digest"),
            ]
            .iter()
            .filter(|(m, _)| *m)
            .map(|(_, name)| *name)
            .collect();
            let detail = format!("no {}", missing.join(", "));
            self.problem(id, Some(index), Check::TurnFields, detail);
            return turn.digest.clone();
        };
        let parsed = (
            role.parse::<Role>(),
            turn.kind
                .as_deref()
                .map_or(Ok(Kind::Message), str::parse::<Kind>),
        );
        let (Ok(role), Ok(kind)) = parsed else {
            let detail = format!("unknown role {role:?} or kind {:?}", turn.kind);
            self.problem(id, Some(index), Check::TurnFields, detail);
            return Some(digest.clone());
        };
        if let Some(prev) = prev {
            let fields = DigestFields {
                role,
                kind,
                content,
                name: turn.name.as_deref(),
                tool_call_id: turn.tool_call_id.as_deref(),
                tool_calls: turn.tool_calls.as_deref(),
                payload: turn.payload.as_deref().map(PayloadRef::Text),
            };
            let expected = digest_as(self.report.digest_version, prev, index, &fields);
            if *digest != expected {
                let detail = format!("stored {digest}, recomputed {expected}");
                self.problem(id, Some(index), Check::Digest, detail);
            }
        }
        Some(digest.clone())
    }

    /// Parent, cycle, depth, fork root, fork point, base digest and fork activity.
    fn check_lineage(&mut self, node: &SessionNode, has_fork_activity: bool) {
        let id = node.id.as_str();
        if node.forked_at.is_some() && !has_fork_activity {
            let detail = "a fork without its ft:Fork activity (prov:wasGeneratedBy)".into();
            self.problem(id, None, Check::ForkActivity, detail);
        }
        // Walk up: the ancestors, root last.
        let mut ancestors: Vec<&SessionNode> = Vec::new();
        let mut seen = BTreeSet::from([node.iri.clone()]);
        let mut at = node;
        let mut problem = None;
        while let Some(parent) = &at.parent {
            if !seen.insert(parent.clone()) {
                problem = Some(format!("the chain loops back to {parent}"));
                break;
            }
            match self.node(parent) {
                Some(p) => {
                    ancestors.push(p);
                    at = p;
                }
                None => {
                    problem = Some(format!("the parent {parent} is missing"));
                    break;
                }
            }
            if ancestors.len() > MAX_FORK_DEPTH {
                problem = Some(format!("more than {MAX_FORK_DEPTH} levels"));
                break;
            }
        }
        let root = ancestors.last().map_or(&node.iri, |a| &a.iri).clone();
        let depth = ancestors.len() as u64;
        let parent = ancestors.first().map(|p| (*p).clone());
        if let Some(detail) = problem {
            self.problem(id, None, Check::Lineage, detail);
            return;
        }
        if node.depth != depth {
            let detail = format!(
                "ft:forkDepth is {}, the chain has {depth} ancestors",
                node.depth
            );
            self.problem(id, None, Check::Depth, detail);
        }
        if node.fork_root.as_ref().is_some_and(|r| *r != root) {
            let detail = format!(
                "ft:forkRoot is {}, the chain's root is {root}",
                node.fork_root
                    .as_ref()
                    .map(|r| r.to_string())
                    .unwrap_or_default()
            );
            self.problem(id, None, Check::ForkRoot, detail);
        }
        let Some(parent) = parent else {
            return;
        };
        let k = node.own_start();
        let parent_length = self.length(&parent);
        if k > parent_length {
            let detail = format!("forked at {k}, past the parent's length {parent_length}");
            self.problem(id, None, Check::ForkPoint, detail);
            return;
        }
        if k > 0 {
            let theirs = self.digest_at(&parent, k - 1);
            if theirs.is_some() && theirs != node.base_digest {
                let detail = format!(
                    "ft:baseDigest {} is not the parent's digest at {}: {}",
                    node.base_digest.as_deref().unwrap_or("(none)"),
                    k - 1,
                    theirs.unwrap_or_default()
                );
                self.problem(id, None, Check::BaseDigest, detail);
            }
        }
    }

    /// The length of a session read here: one past its largest own index.
    fn length(&self, node: &SessionNode) -> u64 {
        let largest = self.sessions.get(&node.iri).and_then(|s| {
            s.turns
                .iter()
                .filter_map(|t| t.indices.first().copied())
                .max()
        });
        largest.map_or(node.own_start(), |i| (i + 1).max(node.own_start()))
    }

    /// The stored digest of turn `index` as `node` sees it (its own, or an ancestor's).
    fn digest_at(&self, node: &SessionNode, index: u64) -> Option<String> {
        let mut at = node;
        for _ in 0..=MAX_FORK_DEPTH {
            if index >= at.own_start() {
                return self.sessions.get(&at.iri)?.turns.iter().find_map(|t| {
                    (t.indices.first() == Some(&index))
                        .then(|| t.digest.clone())
                        .flatten()
                });
            }
            if index + 1 == at.own_start() {
                return at.base_digest.clone();
            }
            at = self.node(at.parent.as_ref()?)?;
        }
        None
    }

    /// Sibling labels: among `targets`' parents' children read here (and the sibling
    /// nodes read for a one-session verify).
    fn check_labels(&mut self, targets: &[NamedNode]) {
        let mut by_parent: BTreeMap<(NamedNode, String), BTreeMap<SessionId, NamedNode>> =
            BTreeMap::new();
        let nodes = self
            .sessions
            .values()
            .filter_map(|s| s.node.as_ref().ok())
            .chain(&self.siblings);
        for n in nodes {
            if let Some(parent) = &n.parent {
                by_parent
                    .entry((parent.clone(), n.branch.clone()))
                    .or_default()
                    .insert(n.id.clone(), n.iri.clone());
            }
        }
        let mut problems = Vec::new();
        for ((parent, label), ids) in by_parent {
            if ids.len() < 2 {
                continue;
            }
            for (id, iri) in &ids {
                if targets.contains(iri) {
                    let others: Vec<&str> = ids
                        .keys()
                        .filter(|o| *o != id)
                        .map(SessionId::as_str)
                        .collect();
                    let detail = format!(
                        "label {label:?} under {parent} is also the label of {}",
                        others.join(", ")
                    );
                    problems.push((id.to_string(), detail));
                }
            }
        }
        for (id, detail) in problems {
            self.problem(&id, None, Check::Label, detail);
        }
    }
}
