//! Claude Code transcripts in: a session log (JSONL), its sub-agents' logs, a whole
//! project folder, and logs that grew since they were last imported.
//!
//! Claude Code writes one JSONL file per session (the *trunk*) and one per sub-agent
//! (`<session>/subagents/agent-<id>.jsonl`, or `agent-<id>.jsonl` beside the trunk in
//! older versions), each line a message with a `uuid` and a `parentUuid`. The main chain
//! becomes a session named by the log's `sessionId`, an answer Claude Code wrote as a
//! line per content block being one turn followed by its calls' results (see
//! `claude_code/steps.rs`); where a message has several children, each alternative
//! after the first becomes a fork (`alt-N`); sidechains in the trunk become forks at 0
//! (`sidechain-N`); a sub-agent's transcript becomes a fork at 0 (`agent-<id>`, id
//! `<session>:agent-<id>`) of the session whose turn launched it, linked to that turn by
//! `ft:spawnedBy`, or, when that turn is not in the import, a root session whose link
//! stays unresolved (`ft:spawnedInSession` and `ft:spawnToolCallId` without
//! `ft:spawnedBy`).
//!
//! Every imported turn keeps the `uuid` of its line (of each of its lines, for an
//! answer's) as `ft:sourceId`. Importing a log again appends the lines that are new (by
//! uuid) to the sessions that hold their parents, or forks where they branch (also at
//! a turn the same import appends); lines already imported are left as they are.
//! Branches are numbered in the order the log holds them, so a log imported again as it
//! grows ends as an import of it whole (but for an answer caught between its lines,
//! whose later lines make a second turn).
//!
//! Everything is built in a scratch in-memory store with the ordinary write path, then
//! committed in one transaction: all or nothing.

use super::lines::{self, LogLine};
use super::report::{Skipped, TranscriptOptions, TranscriptReport};
use super::root::SharedCopy;
use crate::error::{Error, Result};
use crate::model::{
    Agent, ForkOptions, Kind, Label, NewSession, NewTurn, Role, SessionId, MAX_FORK_DEPTH,
};
use crate::rdf::{source_id_quad, sub_agent_quads, ImportedGraph, SessionNode, SubAgentFacts};
use crate::store::Store;
use oxigraph::model::{NamedNode, Quad};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

mod steps;

/// One JSONL file of a Claude Code project (or a Pi session file).
#[derive(Clone, Debug)]
pub(super) struct SourceFile {
    /// How errors name it: a path, or nothing for a single log given as text.
    pub(super) name: Option<String>,
    pub(super) lines: Vec<LogLine>,
    /// The sub-agent this file is the transcript of (from its name `agent-<id>`).
    pub(super) agent: Option<String>,
    /// The tool call that launched that sub-agent, from its `agent-<id>.meta.json`.
    pub(super) spawned_by: Option<String>,
}

/// A message line and the turns it becomes.
#[derive(Clone, Debug, Default)]
pub(super) struct Node {
    pub(super) file: usize,
    pub(super) line: u64,
    pub(super) uuid: String,
    /// The line's `type`: `user` or `assistant`.
    pub(super) kind: String,
    pub(super) parent: Option<String>,
    pub(super) sidechain: bool,
    /// The sub-agent whose transcript holds this line (`agentId`, or the file's).
    pub(super) agent: Option<String>,
    pub(super) log_session: Option<String>,
    pub(super) turns: Vec<NewTurn>,
    /// `(tool call id, sub-agent id, structured)` of sub-agents this line reports on: a
    /// tool result with `toolUseResult.agentId` (structured), or an `agentId: <id>` line
    /// in its text.
    pub(super) spawned: Vec<(String, String, bool)>,
    /// A line a fork's log copied from its parent's (`forkedFrom`): its `uuid` is the
    /// original's.
    pub(super) copy: bool,
    /// The `message.id` of an assistant line: the lines of one answer share it.
    pub(super) message: Option<String>,
    /// The line's `apiBlockIndex`: which content block of its answer it holds.
    pub(super) block: Option<u64>,
    /// The uuids of the other lines of the same answer this node stands for.
    pub(super) merged: Vec<String>,
}

/// What a line is.
enum Line {
    Message(Node),
    /// A line forktrail does not import; `uuid`/`parent` keep the chain through it.
    Other {
        kind: String,
        uuid: Option<String>,
        parent: Option<String>,
        log_session: Option<String>,
    },
}

/// How a chain of messages gets its session.
#[derive(Clone, Debug)]
enum Origin {
    Root,
    Sidechain,
    SubAgent(String),
    Fork {
        from: SessionId,
        at: u64,
        sidechain: bool,
    },
}

impl Store {
    /// Imports a Claude Code session log (JSONL) given as text: the main chain, its
    /// alternatives and sidechains, or a lone sub-agent transcript (a root session with
    /// its launch recorded as unresolved). A log imported before gets its new lines
    /// appended. Lines of other types are skipped and counted. All or nothing.
    pub fn import_claude_code(
        &self,
        text: &str,
        options: &TranscriptOptions<'_>,
    ) -> Result<TranscriptReport> {
        self.import_claude_lines(lines::lines_of(text.as_bytes(), options), options)
    }

    /// Imports a Claude Code log given as its lines.
    pub(super) fn import_claude_lines(
        &self,
        lines: Vec<LogLine>,
        options: &TranscriptOptions<'_>,
    ) -> Result<TranscriptReport> {
        let file = SourceFile {
            name: None,
            lines,
            agent: None,
            spawned_by: None,
        };
        self.import_claude_files(vec![file], options, Vec::new())
    }

    /// Imports Claude Code logs from disk: a project folder (every session log in it,
    /// each with its sub-agents' transcripts linked to the turns that launched them), or
    /// one log file (with its own `<session>/subagents/` folder when there is one). All
    /// or nothing, in one transaction.
    pub fn import_claude_code_path(
        &self,
        path: &Path,
        options: &TranscriptOptions<'_>,
    ) -> Result<TranscriptReport> {
        let (files, left_out) = discover(path, options)?;
        if files.is_empty() {
            return Err(Error::InvalidInput(format!(
                "{} holds no Claude Code log (*.jsonl); nothing was imported",
                path.display()
            )));
        }
        self.import_claude_files(files, options, left_out)
    }

    /// `left_out`: the files found but not read (see [`TranscriptOptions::within`]).
    fn import_claude_files(
        &self,
        files: Vec<SourceFile>,
        options: &TranscriptOptions<'_>,
        left_out: Vec<Skipped>,
    ) -> Result<TranscriptReport> {
        let mut report = TranscriptReport {
            skipped: left_out,
            ..TranscriptReport::default()
        };
        let families = read_families(self, &files, options, &mut report)?;
        self.import_families(&files, families, "claude-code", options, report)
    }

    /// Builds the sessions of `families` (each a log's lines, chained by uuid) in a
    /// scratch store and commits them in one transaction; `source` names the tool in
    /// the main sessions' titles (`{source} {log}`).
    pub(super) fn import_families(
        &self,
        files: &[SourceFile],
        families: BTreeMap<Option<String>, Family>,
        source: &'static str,
        options: &TranscriptOptions<'_>,
        mut report: TranscriptReport,
    ) -> Result<TranscriptReport> {
        let spawns: HashMap<String, String> = files
            .iter()
            .filter_map(|f| Some((f.agent.clone()?, f.spawned_by.clone()?)))
            .collect();
        let scratch = Store::in_memory()?
            .with_base_iri(&self.iris.base)?
            .with_limits(self.limits);
        let mut written = Written::default();
        for (key, family) in families {
            if family.nodes.is_empty() {
                continue;
            }
            Build {
                store: self,
                scratch: &scratch,
                source,
                files,
                log: key,
                family,
                spawns: &spawns,
                report: &mut report,
                options,
                calls: HashMap::new(),
                stored_spawns: Vec::new(),
                imported: HashMap::new(),
                labels: BTreeSet::new(),
                main: None,
                written: &mut written,
            }
            .run()?;
        }
        if written.created.is_empty() && written.existing.is_empty() {
            return Err(Error::InvalidInput(
                "the input holds no user or assistant message with text or tool use; \
                 nothing was imported"
                    .into(),
            ));
        }
        report.skipped_invalid.sort_unstable();
        self.commit_scratch(&scratch, &written)?;
        report.sessions = written.created.clone();
        report.extended = written
            .extended
            .iter()
            .filter(|s| !written.created.contains(s))
            .cloned()
            .collect();
        Ok(report)
    }

    /// Writes what the scratch store holds for `written`'s sessions: new sessions are
    /// added, existing ones that changed are replaced by their scratch graph (which
    /// started as a copy of them), in one transaction. Refused if a copied session
    /// changed in the store meanwhile.
    fn commit_scratch(&self, scratch: &Store, written: &Written) -> Result<()> {
        let mut tx = self.write()?;
        for (id, copied) in written
            .existing
            .iter()
            .filter(|(id, _)| written.extended.contains(id))
        {
            if self.graph_quads(&self.session_iri(id))? != *copied {
                return Err(Error::Conflict(format!(
                    "session {id} changed while it was being imported into; import again"
                )));
            }
            // A sub-agent linked now hangs on a session that must still be there.
            let facts = scratch.require(id)?;
            if let Some(parent) = &facts.parent {
                self.check_parent(&facts, parent, written)?;
            }
        }
        for id in &written.created {
            if self.exists(id)? {
                return Err(Error::Conflict(format!(
                    "session {id} was created in the store while this import ran; import \
                     again"
                )));
            }
            // A fork of a session already here must still have a label of its own.
            let facts = scratch.require(id)?;
            if let Some(parent) = &facts.parent {
                self.check_parent(&facts, parent, written)?;
                let label = Label::new(facts.branch.clone())?;
                if let Some(existing) = self.rdf().child_with_label(parent, &label)? {
                    return Err(Error::DuplicateLabel {
                        parent: self.iris.name_of(parent.as_ref()),
                        label: label.to_string(),
                        existing: existing.to_string(),
                    });
                }
            }
        }
        for id in written.created.iter().chain(&written.extended) {
            let iri = self.session_iri(id);
            if written.existing.contains_key(id) {
                tx.drop_graph(iri.clone());
            }
            tx.insert(scratch.rdf().graph(iri.as_ref())?);
            tx.forget(&iri);
        }
        // The agents the new turns are attributed to, declared in the scratch store.
        tx.insert(scratch.rdf().graph(self.iris.agents_graph().as_ref())?);
        tx.commit()
    }

    /// The parent a fork of the import hangs on is still in the store (unless the
    /// import creates it too), with the same turns below the fork point. A fork may
    /// hang on turns the import appends to its parent (a log that grew and branched
    /// among its new lines): those are not in the store yet, and the parent, which the
    /// import extends, is checked unchanged since it was copied.
    fn check_parent(
        &self,
        fork: &SessionNode,
        parent: &NamedNode,
        written: &Written,
    ) -> Result<()> {
        let parent_id = self.iris.name_of(parent.as_ref());
        if written.created.iter().any(|c| c.as_str() == parent_id) {
            return Ok(());
        }
        let changed = || {
            Error::Conflict(format!(
                "session {parent_id} changed while this import ran; import again"
            ))
        };
        let Some(here) = self.facts_of(parent.as_ref())? else {
            return Err(changed());
        };
        let k = fork.own_start();
        if k == 0 {
            return Ok(());
        }
        let chain = self.chain(&here.id)?;
        if k > chain.leaf().length {
            // Past what the store holds of the parent: fine only if the import appends
            // the turns it forks at.
            return if written.extended.contains(&here.id) {
                Ok(())
            } else {
                Err(changed())
            };
        }
        let digest = self.digest_in_chain(&chain, k - 1)?;
        if fork.base_digest.as_deref() != Some(digest.as_str()) {
            return Err(changed());
        }
        Ok(())
    }

    /// Every quad of a graph, sorted.
    fn graph_quads(&self, graph: &NamedNode) -> Result<Vec<Quad>> {
        let mut quads = self.rdf().graph(graph.as_ref())?;
        quads.sort_by_cached_key(|q| q.to_string());
        Ok(quads)
    }
}

/// The lines of one session log and its sub-agents.
#[derive(Clone, Default)]
pub(super) struct Family {
    /// The main session's title, when the log names one (else `<tool> <log>`).
    pub(super) title: Option<String>,
    pub(super) nodes: Vec<Node>,
    pub(super) by_uuid: HashMap<String, usize>,
    /// Lines not imported (other types, thinking only): uuid → parent, so children
    /// hang on to the nearest imported ancestor.
    pub(super) passthrough: HashMap<String, Option<String>>,
    /// Whether the log writes an answer as a line per content block (Claude Code's do),
    /// so that its lines are put back together before they are followed.
    pub(super) split_answers: bool,
}

/// What an import writes.
#[derive(Default)]
struct Written {
    /// Sessions the import creates.
    created: Vec<SessionId>,
    /// Sessions already in the store that gain turns (or a parent).
    extended: Vec<SessionId>,
    /// Sessions already in the store that were copied into the scratch store, with
    /// their quads as copied.
    existing: BTreeMap<SessionId, Vec<Quad>>,
}

/// Chains of messages waiting to be followed: roots first (the first is the main
/// session, which sidechains need), then the others by their first line, sub-agents
/// last. So each family's branches are made, and numbered (`alt-N`, `sidechain-N`), in
/// the order the log holds them, whichever chain they hang on: a log imported in parts
/// as it grew gets the labels an import of it whole gives, since its new branches start
/// on lines after all the old ones.
#[derive(Default)]
struct Queue(BTreeMap<(u8, usize), Origin>);

impl Queue {
    fn push(&mut self, start: usize, origin: Origin) {
        let rank = match origin {
            Origin::Root => 0,
            Origin::Sidechain | Origin::Fork { .. } => 1,
            Origin::SubAgent(_) => 2,
        };
        self.0.insert((rank, start), origin);
    }

    fn pop(&mut self) -> Option<(usize, Origin)> {
        self.0
            .pop_first()
            .map(|((_, start), origin)| (start, origin))
    }
}

/// The import of one family into the scratch store.
struct Build<'a, 'o> {
    store: &'a Store,
    scratch: &'a Store,
    /// The tool the logs come from, as titles name it.
    source: &'static str,
    files: &'a [SourceFile],
    log: Option<String>,
    family: Family,
    /// Sub-agent id → the tool call that launched it (from `meta.json` files).
    spawns: &'a HashMap<String, String>,
    report: &'a mut TranscriptReport,
    options: &'a TranscriptOptions<'o>,
    /// Tool call id → the session and index of the turn that made it.
    calls: HashMap<String, (SessionId, u64)>,
    /// `(tool call id, sub-agent id)` that tool results already in the store report.
    stored_spawns: Vec<(String, String)>,
    /// Source uuid → the session holding its turns and the index after its last one.
    imported: HashMap<String, (SessionId, u64)>,
    /// Labels already used in this family.
    labels: BTreeSet<String>,
    main: Option<SessionId>,
    written: &'a mut Written,
}

impl Build<'_, '_> {
    fn run(&mut self) -> Result<()> {
        self.copy_existing()?;
        if self.family.split_answers {
            // One answer written as several lines, its results hung off them: the
            // conversation the model saw, not a branch per parallel call.
            let family = std::mem::take(&mut self.family);
            self.family = steps::rebuild(family, |uuid| self.imported.contains_key(uuid));
        }
        let nodes = &self.family.nodes;
        let parents: Vec<Option<usize>> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| resolve(&self.family, n.parent.clone()).filter(|p| *p != i))
            .collect();
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
        for (i, p) in parents.iter().enumerate() {
            if let Some(p) = p {
                children[*p].push(i);
            }
        }
        let mut roots: Vec<(usize, Origin)> = Vec::new();
        for (i, node) in nodes.iter().enumerate() {
            if parents[i].is_none() {
                let origin = match (&node.agent, node.sidechain) {
                    (Some(agent), _) => Origin::SubAgent(agent.clone()),
                    (None, true) => Origin::Sidechain,
                    (None, false) => Origin::Root,
                };
                roots.push((i, origin));
            }
        }
        let (mut agents, chains): (Vec<_>, Vec<_>) = roots
            .into_iter()
            .partition(|(_, o)| matches!(o, Origin::SubAgent(_)));
        let mut work = Queue::default();
        for (start, origin) in chains {
            work.push(start, origin);
        }
        let mut visited = vec![false; self.family.nodes.len()];
        loop {
            while let Some((start, origin)) = work.pop() {
                self.follow(start, origin, &children, &mut visited, &mut work)?;
            }
            // A sub-agent waits for the turn that launched it, which may be in another
            // sub-agent's transcript; one whose launch no pending transcript holds stays
            // unresolved.
            if agents.is_empty() {
                break;
            }
            let pending_calls: BTreeSet<String> = agents
                .iter()
                .filter_map(|(_, o)| match o {
                    Origin::SubAgent(agent) => Some(agent),
                    _ => None,
                })
                .flat_map(|agent| self.calls_in(agent))
                .collect();
            // Of those ready, the one launched first in its conversation.
            let ready = (0..agents.len())
                .filter_map(|i| Some((self.spawn_turn(agents[i].0)?.1, i)))
                .min()
                .map(|(_, i)| i)
                .or_else(|| {
                    agents.iter().position(|(start, _)| {
                        let agent = self.family.nodes[*start].agent.clone().unwrap_or_default();
                        self.spawn_call(&agent)
                            .is_none_or(|call| !pending_calls.contains(&call))
                    })
                })
                .unwrap_or(0);
            let (start, origin) = agents.remove(ready);
            work.push(start, origin);
        }
        for (i, node) in self.family.nodes.iter().enumerate() {
            if !visited[i] {
                if self.options.skip_invalid {
                    let why = "its parentUuid chain loops back on itself";
                    skip(self.report, self.files, node.file, node.line, why);
                } else {
                    return Err(invalid(
                        self.files,
                        node.file,
                        node.line,
                        format!(
                            "the parentUuid chain of message {} loops back on itself",
                            node.uuid
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Copies the sessions an earlier import of this log made into the scratch store:
    /// the main session and its subtree, sub-agent sessions imported alone, any other
    /// session holding one of the log's lines (a second root), and their chains. Notes
    /// which lines they hold, where their tool calls are, and which labels are taken.
    fn copy_existing(&mut self) -> Result<()> {
        let store = self.store;
        let mut roots: Vec<SessionNode> = Vec::new();
        let tool = self.tool();
        let not_imported = |id: &SessionId| {
            Error::Conflict(format!(
                "session {id} already exists and was not imported from a {tool} log; delete \
                 it first or import into another store"
            ))
        };
        let log = self.log.clone().unwrap_or_default();
        let mut named: Vec<SessionId> = SessionId::new(log.clone()).into_iter().collect();
        let agents: BTreeSet<&String> = self
            .family
            .nodes
            .iter()
            .filter_map(|n| n.agent.as_ref())
            .collect();
        named.extend(
            agents
                .into_iter()
                .filter_map(|a| SessionId::new(agent_session_id(&log, a)).ok()),
        );
        for id in named {
            if let Some(facts) = store.facts_of(store.session_iri(&id).as_ref())? {
                if !store.rdf().has_source_ids(&facts.iri)? {
                    return Err(not_imported(&id));
                }
                if self.log.as_deref() == Some(id.as_str()) {
                    self.main = Some(id);
                }
                roots.push(facts);
            }
        }
        for node in &self.family.nodes {
            if let Some(graph) = store.rdf().session_holding(&node.uuid)? {
                roots.extend(store.facts_of(graph.as_ref())?);
            }
        }
        let mut copied: BTreeSet<String> = BTreeSet::new();
        let mut order: Vec<SessionNode> = Vec::new();
        for root in roots {
            let chain = store.chain(&root.id)?.levels().to_vec();
            for f in chain.into_iter().chain(store.subtree_of(root)?) {
                if copied.insert(f.id.to_string()) {
                    order.push(f);
                }
            }
        }
        for facts in order {
            self.copy_session(&facts)?;
        }
        Ok(())
    }

    /// Copies one session of the store into the scratch store and notes what it holds.
    fn copy_session(&mut self, facts: &SessionNode) -> Result<()> {
        let store = self.store;
        let id = facts.id.clone();
        let quads = store.graph_quads(&facts.iri)?;
        let mut tx = self.scratch.write()?;
        tx.insert(quads.iter().cloned());
        tx.commit()?;
        self.labels.insert(facts.branch.clone());
        for child in store.children_of(&facts.iri)? {
            self.labels.insert(child.branch);
        }
        let held = ImportedGraph::read(&store.rdf(), &quads, agent_in_text);
        for (uuid, index) in held.sources {
            let slot = self.imported.entry(uuid).or_insert((id.clone(), index + 1));
            if slot.0 == id {
                slot.1 = slot.1.max(index + 1);
            }
        }
        for (call, index) in held.calls {
            self.calls.entry(call).or_insert((id.clone(), index));
        }
        self.stored_spawns.extend(held.spawns);
        self.written.existing.insert(id, quads);
        Ok(())
    }

    /// Follows a chain of messages from `start`, in the session `origin` makes (or the
    /// one that already holds it), queueing forks where it branches.
    fn follow(
        &mut self,
        start: usize,
        origin: Origin,
        children: &[Vec<usize>],
        visited: &mut [bool],
        work: &mut Queue,
    ) -> Result<()> {
        let held = self.imported.get(&self.family.nodes[start].uuid).cloned();
        let (mut session, mut length) = match held {
            Some((session, end)) => {
                if let Origin::SubAgent(agent) = &origin {
                    self.link_agent(&session, agent, start)?;
                }
                let n = self.family.nodes[start].turns.len() as u64;
                (session, end.saturating_sub(n))
            }
            None => self.open(start, origin)?,
        };
        let mut at = start;
        loop {
            visited[at] = true;
            let node = self.family.nodes[at].clone();
            match self.imported.get(&node.uuid).cloned() {
                Some((held, end)) => {
                    // Already imported: remember where its tool calls are, and go on.
                    let first = end.saturating_sub(node.turns.len() as u64);
                    self.note_calls(&held, first, &node.turns);
                    session = held;
                    length = end;
                }
                None => {
                    if let Some(log) = self.fork_log(&node, &session)? {
                        // The first own line of a fork's log: its session, a fork here.
                        session = self.fork_for_log(&session, length, log, &node)?;
                    } else if self.scratch.require(&session)?.length != length {
                        // The session went on differently: this line starts a branch.
                        let label = self.next_label("alt");
                        session = self.fork(&session, length, label, node.line, node.file)?;
                    }
                    self.append(&session, &node)?;
                    length += node.turns.len() as u64;
                }
            }
            let (same, side): (Vec<usize>, Vec<usize>) = children[at]
                .iter()
                .partition(|&&c| self.family.nodes[c].sidechain == node.sidechain);
            for &c in &side {
                work.push(
                    c,
                    Origin::Fork {
                        from: session.clone(),
                        at: length,
                        sidechain: true,
                    },
                );
            }
            for &c in same.iter().skip(1) {
                work.push(
                    c,
                    Origin::Fork {
                        from: session.clone(),
                        at: length,
                        sidechain: false,
                    },
                );
            }
            match same.first() {
                Some(&next) => at = next,
                None => return Ok(()),
            }
        }
    }

    /// Creates the session a chain starting at `start` goes into.
    fn open(&mut self, start: usize, origin: Origin) -> Result<(SessionId, u64)> {
        let node = self.family.nodes[start].clone();
        match origin {
            Origin::Root => {
                let id = self.scratch.create_session(NewSession {
                    id: if self.main.is_none() {
                        self.log.clone()
                    } else {
                        None
                    },
                    title: match (&self.main, &self.family.title) {
                        (None, Some(title)) => Some(title.clone()),
                        _ => self.log.as_ref().map(|l| format!("{} {l}", self.source)),
                    },
                    principal: None,
                })?;
                self.main.get_or_insert(id.clone());
                self.created(&id);
                Ok((id, 0))
            }
            Origin::Sidechain => {
                let Some(main) = self.main.clone() else {
                    return Err(invalid(
                        self.files,
                        node.file,
                        node.line,
                        "a sidechain with no main conversation to attach it to",
                    ));
                };
                let label = self.next_label("sidechain");
                Ok((self.fork(&main, 0, label, node.line, node.file)?, 0))
            }
            Origin::Fork {
                from,
                at,
                sidechain,
            } => {
                // A fork's log that branches off where the log it copies goes on: its
                // own session, not an alternative.
                if let Some(log) = self.fork_log(&node, &from)? {
                    return Ok((self.fork_for_log(&from, at, log, &node)?, at));
                }
                let label = self.next_label(if sidechain { "sidechain" } else { "alt" });
                Ok((self.fork(&from, at, label, node.line, node.file)?, at))
            }
            Origin::SubAgent(agent) => Ok((self.open_agent(start, &agent)?, 0)),
        }
    }

    /// The session of a sub-agent's transcript: a fork at 0 of the session whose turn
    /// launched it, or a root that records the launch it could not find.
    fn open_agent(&mut self, start: usize, agent: &str) -> Result<SessionId> {
        let node = self.family.nodes[start].clone();
        let log = self.log.clone().unwrap_or_default();
        let id = SessionId::new(agent_session_id(&log, agent))
            .map_err(|e| invalid(self.files, node.file, node.line, e))?;
        if self.scratch.exists(&id)? {
            self.link_agent(&id, agent, start)?;
            return Ok(id);
        }
        let call = self.spawn_call(agent);
        let launch = self.spawn_turn(start);
        match &launch {
            Some((parent, index)) => {
                let label = self.next_label(&agent_label(agent));
                let plan = self.scratch.fork(
                    parent,
                    ForkOptions {
                        at: Some(0),
                        label: Some(label),
                        reason: Some(format!(
                            "sub-agent {agent} launched by turn {index} of {parent}"
                        )),
                        id: Some(id.to_string()),
                        ..Default::default()
                    },
                );
                match plan {
                    Ok(_) => self.created(&id),
                    // Deeper than forks may go: keep it as a root, still linked.
                    Err(Error::ForkTooDeep { .. }) => self.agent_root(&id)?,
                    Err(e) => return Err(invalid(self.files, node.file, node.line, e)),
                }
            }
            None => {
                self.agent_root(&id)?;
                self.report.unresolved_subagents.push(id.clone());
            }
        }
        let turn = launch.map(|(parent, index)| self.scratch.iris.turn(parent.as_str(), index));
        let facts = SubAgentFacts {
            agent_id: agent,
            spawned_in_session: (!log.is_empty()).then_some(log.as_str()),
            tool_call_id: call.as_deref(),
            spawned_by: turn.as_ref(),
        };
        self.add_to_node(&id, &facts)?;
        Ok(id)
    }

    /// A sub-agent session imported before without its launch (a root): if the turn
    /// that launched it is here now, it becomes a fork at 0 of that turn's session.
    fn link_agent(&mut self, id: &SessionId, agent: &str, start: usize) -> Result<()> {
        if self.scratch.require(id)?.parent.is_some() {
            return Ok(());
        }
        let Some((parent, index)) = self.spawn_turn(start) else {
            return Ok(());
        };
        let label = self.next_label(&agent_label(agent));
        let reason = format!("sub-agent {agent} launched by turn {index} of {parent}");
        match self.scratch.adopt(id, &parent, 0, &label, &reason) {
            Ok(moved) => {
                for session in &moved {
                    self.extended(session);
                }
            }
            // Deeper than forks may go: it stays a root, linked to its launch.
            Err(Error::ForkTooDeep { .. }) => {}
            Err(e) => return Err(e),
        }
        let turn = self.scratch.iris.turn(parent.as_str(), index);
        // The call that launched it, unless the node names one already: imported alone,
        // with no meta file, it had no way to know.
        let recorded = self
            .scratch
            .rdf()
            .sub_agent(self.scratch.session_iri(id).as_ref())?
            .and_then(|a| a.tool_call_id);
        let call = match recorded {
            Some(_) => None,
            None => self.spawn_call(agent),
        };
        let facts = SubAgentFacts {
            agent_id: agent,
            spawned_in_session: None,
            tool_call_id: call.as_deref(),
            spawned_by: Some(&turn),
        };
        self.add_to_node(id, &facts)?;
        self.extended(id);
        Ok(())
    }

    /// Adds a sub-agent's links to its session node in the scratch store.
    fn add_to_node(&self, id: &SessionId, facts: &SubAgentFacts<'_>) -> Result<()> {
        let mut tx = self.scratch.write()?;
        tx.insert(sub_agent_quads(&self.scratch.session_iri(id), facts));
        tx.commit()
    }

    fn agent_root(&mut self, id: &SessionId) -> Result<()> {
        self.scratch.create_session(NewSession {
            id: Some(id.to_string()),
            title: self
                .log
                .as_ref()
                .map(|l| format!("claude-code {l} sub-agent")),
            principal: None,
        })?;
        self.created(id);
        Ok(())
    }

    /// The tool call that launched sub-agent `agent`: from its `meta.json`, else from a
    /// tool result that names it.
    fn spawn_call(&self, agent: &str) -> Option<String> {
        let reported = |structured: bool| {
            self.family
                .nodes
                .iter()
                .flat_map(|n| &n.spawned)
                .find(|(_, a, s)| a == agent && *s == structured)
                .map(|(call, _, _)| call.clone())
        };
        // The meta file, then the tool result's own field, then its text, which any
        // tool result could happen to contain.
        let stored = || {
            self.stored_spawns
                .iter()
                .find(|(_, a)| a == agent)
                .map(|(call, _)| call.clone())
        };
        self.spawns
            .get(agent)
            .cloned()
            .or_else(|| reported(true))
            .or_else(|| reported(false))
            .or_else(stored)
    }

    /// The tool call ids made in sub-agent `agent`'s transcript.
    fn calls_in(&self, agent: &str) -> Vec<String> {
        let mut out = Vec::new();
        for node in self
            .family
            .nodes
            .iter()
            .filter(|n| n.agent.as_deref() == Some(agent))
        {
            for turn in &node.turns {
                let Some(Ok(Value::Array(calls))) = turn
                    .tool_calls
                    .as_deref()
                    .map(serde_json::from_str::<Value>)
                else {
                    continue;
                };
                out.extend(
                    calls
                        .iter()
                        .filter_map(|c| c.get("id")?.as_str().map(str::to_string)),
                );
            }
        }
        out
    }

    /// The session and index of the turn that launched the sub-agent whose transcript
    /// starts at `start`, once that turn is in the scratch store.
    fn spawn_turn(&self, start: usize) -> Option<(SessionId, u64)> {
        let agent = self.family.nodes[start].agent.as_ref()?;
        self.calls.get(&self.spawn_call(agent)?).cloned()
    }

    fn fork(
        &mut self,
        from: &SessionId,
        at: u64,
        label: String,
        line: u64,
        file: usize,
    ) -> Result<SessionId> {
        let options = ForkOptions {
            at: Some(at),
            label: Some(label),
            reason: Some(format!("imported from {}", self.tool())),
            ..Default::default()
        };
        self.fork_as(from, options, line, file)
    }

    /// The tool the logs come from, as people name it.
    fn tool(&self) -> &'static str {
        match self.source {
            "pi" => "Pi",
            _ => "Claude Code",
        }
    }

    /// A fork of `from` in the scratch store, as `options` say; a refusal names the line.
    fn fork_as(
        &mut self,
        from: &SessionId,
        options: ForkOptions,
        line: u64,
        file: usize,
    ) -> Result<SessionId> {
        let plan = self
            .scratch
            .fork(from, options)
            .map_err(|e| invalid(self.files, file, line, e))?;
        let id = SessionId::new(plan.session)?;
        self.created(&id);
        Ok(id)
    }

    /// The log `node` starts the session of, if it is the first own line of a log
    /// that goes on from another log's lines: a fork's log (merged into this family by
    /// [`Forks::merge`]), or a copy of a log made with its uuids kept and only its
    /// `sessionId` changed. Its `sessionId` names a log with no session yet.
    fn fork_log(&self, node: &Node, session: &SessionId) -> Result<Option<SessionId>> {
        let Some(log) = &node.log_session else {
            return Ok(None);
        };
        if node.copy || node.agent.is_some() || session.as_str() == log {
            return Ok(None);
        }
        let Ok(id) = SessionId::new(log.clone()) else {
            return Ok(None);
        };
        Ok((!self.scratch.exists(&id)?).then_some(id))
    }

    /// The session of a fork's log: a fork of `from` at `at`, named by the log; the
    /// report names what it shares.
    fn fork_for_log(
        &mut self,
        from: &SessionId,
        at: u64,
        log: SessionId,
        node: &Node,
    ) -> Result<SessionId> {
        let label = self.next_label("fork");
        let options = ForkOptions {
            at: Some(at),
            label: Some(label.clone()),
            id: Some(log.to_string()),
            reason: Some(format!("imported from {}: a fork's log", self.tool())),
            ..Default::default()
        };
        let id = self.fork_as(from, options, node.line, node.file)?;
        self.report.shared.push(SharedCopy {
            session: id.clone(),
            parent: from.clone(),
            shared_turns: at,
            branch: label,
        });
        Ok(id)
    }

    /// Appends a node's turns, each carrying the uuid of every line the node stands for.
    fn append(&mut self, session: &SessionId, node: &Node) -> Result<()> {
        let first = self.scratch.require(session)?.length;
        let uuids: Vec<&String> = std::iter::once(&node.uuid).chain(&node.merged).collect();
        for turn in &node.turns {
            self.scratch
                .append_with(session, turn.clone(), |w, iri, _| {
                    for uuid in &uuids {
                        source_id_quad(w, iri, uuid.as_str());
                    }
                })
                .map_err(|e| invalid(self.files, node.file, node.line, e))?;
            self.report.turns += 1;
        }
        self.note_calls(session, first, &node.turns);
        for uuid in uuids {
            self.imported.insert(
                uuid.clone(),
                (session.clone(), first + node.turns.len() as u64),
            );
        }
        if self.written.existing.contains_key(session) {
            self.extended(session);
        }
        Ok(())
    }

    fn note_calls(&mut self, session: &SessionId, first: u64, turns: &[NewTurn]) {
        for (i, turn) in turns.iter().enumerate() {
            let Some(calls) = turn.tool_calls.as_deref() else {
                continue;
            };
            let Ok(Value::Array(calls)) = serde_json::from_str::<Value>(calls) else {
                continue;
            };
            for call in calls {
                if let Some(id) = call.get("id").and_then(Value::as_str) {
                    self.calls
                        .entry(id.to_string())
                        .or_insert((session.clone(), first + i as u64));
                }
            }
        }
    }

    /// `{prefix}` for a sub-agent's own label, else `{prefix}-N` with the next free N.
    fn next_label(&mut self, prefix: &str) -> String {
        let label = if prefix.starts_with("agent-") && !self.labels.contains(prefix) {
            prefix.to_string()
        } else {
            (1..)
                .map(|n| format!("{prefix}-{n}"))
                .find(|l| !self.labels.contains(l))
                .expect("a free label")
        };
        self.labels.insert(label.clone());
        label
    }

    fn created(&mut self, id: &SessionId) {
        if !self.written.created.contains(id) {
            self.written.created.push(id.clone());
        }
    }

    fn extended(&mut self, id: &SessionId) {
        if !self.written.extended.contains(id) {
            self.written.extended.push(id.clone());
        }
    }
}

/// Reads every line of every file into the families of session logs they belong to
/// (by `sessionId`), counting what is skipped; a bad line fails the import unless
/// `skip_invalid`.
fn read_families(
    store: &Store,
    files: &[SourceFile],
    options: &TranscriptOptions<'_>,
    report: &mut TranscriptReport,
) -> Result<BTreeMap<Option<String>, Family>> {
    let total: u64 = files.iter().map(|f| f.lines.len() as u64).sum();
    let mut done = 0u64;
    let mut families: BTreeMap<Option<String>, Family> = BTreeMap::new();
    let mut forks = Forks::default();
    for (index, file) in files.iter().enumerate() {
        // Lines that name no log (snapshots, summaries) belong to the file's log.
        let file_key = file.lines.iter().find_map(|(_, line)| {
            let value: Value = serde_json::from_str(line.as_ref().ok()?).ok()?;
            value.get("sessionId")?.as_str().map(str::to_string)
        });
        for (n, line) in &file.lines {
            let n = *n;
            done += 1;
            if let Some(progress) = options.progress {
                progress(done, total);
            }
            let value = line
                .as_deref()
                .map_err(ToString::to_string)
                .and_then(|line| serde_json::from_str::<Value>(line).map_err(|e| e.to_string()));
            let forked = value.as_ref().ok().and_then(forked_from);
            let parsed = value.and_then(|v| claude_line(&v));
            let key = match &parsed {
                Ok(Line::Message(node)) => node.log_session.clone(),
                Ok(Line::Other { log_session, .. }) => log_session.clone(),
                Err(_) => None,
            };
            let family = families
                .entry(key.or_else(|| file_key.clone()))
                .or_default();
            match parsed {
                Ok(Line::Message(node)) if node.turns.is_empty() => {
                    // Thinking or images only: nothing to keep, but children hang on.
                    let kind = format!("{} (no text or tool use)", node.kind);
                    *report.skipped_types.entry(kind).or_default() += 1;
                    family.passthrough.insert(node.uuid, node.parent);
                }
                Ok(Line::Message(node)) => {
                    let mut node = Node {
                        file: index,
                        line: n,
                        agent: node.agent.or_else(|| file.agent.clone()),
                        ..node
                    };
                    if let Some((parent_log, original)) = forked {
                        if let Err(e) = SessionId::new(parent_log.clone()) {
                            let why = format!("forkedFrom.sessionId: {e}");
                            if options.skip_invalid {
                                skip(report, files, index, n, why);
                                continue;
                            }
                            return Err(invalid(files, index, n, why));
                        }
                        if let Some(log) = &node.log_session {
                            forks.fork_of.insert(log.clone(), parent_log);
                        }
                        forks.alias.insert(node.uuid.clone(), original);
                        node.copy = true;
                    }
                    if let Some(&first) = family.by_uuid.get(&node.uuid) {
                        let first: &Node = &family.nodes[first];
                        let why = format!(
                            "uuid {} was already used on {}",
                            node.uuid,
                            place(files, first.file, first.line)
                        );
                        if options.skip_invalid {
                            skip(report, files, index, n, why);
                            continue;
                        }
                        return Err(invalid(files, index, n, why));
                    }
                    family.by_uuid.insert(node.uuid.clone(), family.nodes.len());
                    family.nodes.push(node);
                }
                Ok(Line::Other {
                    kind, uuid, parent, ..
                }) => {
                    *report.skipped_types.entry(kind).or_default() += 1;
                    if let Some(uuid) = uuid {
                        family.passthrough.insert(uuid, parent);
                    }
                }
                Err(why) if options.skip_invalid => skip(report, files, index, n, why),
                Err(why) => return Err(invalid(files, index, n, why)),
            }
        }
    }
    forks.resolve_stored(store, &families)?;
    let mut families = forks.merge(families);
    for family in families.values_mut() {
        family.split_answers = true;
    }
    Ok(families)
}

/// `(sessionId, messageUuid)` of a line's `forkedFrom`: the line is a copy, in a fork's
/// log (`/branch`, `--fork-session`, the Agent SDK's `forkSession`), of that message of
/// that session.
fn forked_from(v: &Value) -> Option<(String, String)> {
    let from = v.get("forkedFrom")?;
    let text = |key: &str| from.get(key).and_then(Value::as_str).map(str::to_string);
    Some((text("sessionId")?, text("messageUuid")?))
}

/// Where `key` leads in `links` followed to the end (a chain no longer than the
/// depth limit, and never round a loop).
fn chase(links: &HashMap<String, String>, key: &str) -> String {
    let mut key = key;
    for _ in 0..=MAX_FORK_DEPTH {
        match links.get(key) {
            Some(next) if next != key => key = next,
            _ => break,
        }
    }
    key.to_string()
}

/// The forks' logs an import holds, from their lines' `forkedFrom` (or a Pi file's
/// `parentSession`).
#[derive(Default)]
pub(super) struct Forks {
    /// A fork's log id → the log it was forked from.
    fork_of: HashMap<String, String>,
    /// A copied line's uuid → the uuid of the message it copies.
    alias: HashMap<String, String>,
}

impl Forks {
    /// Forks whose copied lines already carry the uuids of what they copy: `fork_of`
    /// maps a fork's log to the log it was forked from.
    pub(super) fn of(fork_of: HashMap<String, String>) -> Self {
        Forks {
            fork_of,
            alias: HashMap::new(),
        }
    }

    /// What `uuid` is a copy of, through copies of copies (a fork of a fork).
    fn original(&self, uuid: &str) -> String {
        chase(&self.alias, uuid)
    }

    /// The log a fork's log was first forked from (itself when it is no fork).
    fn root_log(&self, log: &str) -> String {
        chase(&self.fork_of, log)
    }

    /// Aliases the copied lines of a fork's log whose originals neither the import nor
    /// the store names: a fork of a fork imported on its own copies lines its parent's
    /// log had copied in turn, and those were stored once, under the session they
    /// copied, with no source id of their own. Such lines are found by position in the
    /// stored session's chain (their turns' digests equal the stored ones there) and
    /// aliased to the source message of the turn at that index.
    fn resolve_stored(
        &mut self,
        store: &Store,
        families: &BTreeMap<Option<String>, Family>,
    ) -> Result<()> {
        for (log, family) in families {
            let Some(from) = log.as_ref().and_then(|l| self.fork_of.get(l)) else {
                continue;
            };
            let Ok(from) = SessionId::new(from.clone()) else {
                continue;
            };
            if families.contains_key(&Some(from.to_string())) || !store.exists(&from)? {
                continue;
            }
            let chain = store.chain(&from)?;
            let (mut digest, mut index) = (String::new(), 0u64);
            // The copies as they were stored: an answer's lines as one turn.
            let family = steps::rebuild(family.clone(), |_| false);
            for node in family.nodes.iter().filter(|n| n.copy) {
                for turn in &node.turns {
                    digest = crate::rdf::turn_digest(&digest, index, turn);
                    index += 1;
                }
                let Some(last) = index.checked_sub(1).filter(|&l| l < chain.leaf().length) else {
                    break;
                };
                if store.digest_in_chain(&chain, last)? != digest {
                    break;
                }
                let original = self.original(&node.uuid);
                if store.rdf().session_holding(&original)?.is_some() {
                    continue;
                }
                let owner = chain.owner_of(last).expect("an index within the chain");
                let turn = store.iris.turn(owner.id.as_str(), last);
                // A turn made of several lines has a source id per line; any pairing of
                // the copies with them names the same turn.
                let mut sources = store.rdf().source_ids(&turn, &owner.iri)?;
                sources.sort_unstable();
                for (line, source) in std::iter::once(&node.uuid).chain(&node.merged).zip(sources) {
                    self.alias.insert(line.clone(), source);
                }
            }
        }
        Ok(())
    }

    /// Moves each fork's lines into the family of the log it was forked from: its copied
    /// lines become the messages they copy (dropped where the import holds those), and
    /// its own lines hang on them. Its own lines keep their `sessionId`, which makes
    /// them a session of their own (a fork named by the fork's log), so the copied
    /// history is stored once.
    pub(super) fn merge(
        &self,
        mut families: BTreeMap<Option<String>, Family>,
    ) -> BTreeMap<Option<String>, Family> {
        if self.fork_of.is_empty() {
            return families;
        }
        let keys: Vec<Option<String>> = families.keys().cloned().collect();
        for key in keys {
            let Some(log) = &key else { continue };
            let root = self.root_log(log);
            if root == *log {
                continue;
            }
            let Some(fork) = families.remove(&key) else {
                continue;
            };
            let into = families.entry(Some(root)).or_default();
            for (uuid, parent) in fork.passthrough {
                let parent = parent.map(|p| self.original(&p));
                into.passthrough.insert(self.original(&uuid), parent);
            }
            for mut node in fork.nodes {
                node.uuid = self.original(&node.uuid);
                node.parent = node.parent.map(|p| self.original(&p));
                if node.copy && into.by_uuid.contains_key(&node.uuid) {
                    continue;
                }
                into.by_uuid.insert(node.uuid.clone(), into.nodes.len());
                into.nodes.push(node);
            }
        }
        families
    }
}

/// The nearest imported ancestor of a line, through lines that are not imported.
fn resolve(family: &Family, mut parent: Option<String>) -> Option<usize> {
    for _ in 0..=family.passthrough.len() {
        let uuid = parent?;
        if let Some(&i) = family.by_uuid.get(&uuid) {
            return Some(i);
        }
        parent = family.passthrough.get(&uuid).cloned().flatten();
    }
    None
}

/// The session id of a sub-agent's transcript: the log's id, `:agent-`, the agent's id.
fn agent_session_id(log: &str, agent: &str) -> String {
    let agent: String = agent
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    if log.is_empty() {
        format!("agent-{agent}")
    } else {
        format!("{log}:agent-{agent}")
    }
}

/// A branch label for a sub-agent: `agent-<id>`, within the label rules.
fn agent_label(agent: &str) -> String {
    let text: String = format!("agent-{agent}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(54)
        .collect();
    if Label::new(text.clone()).is_ok() {
        text
    } else {
        "agent".into()
    }
}

/// Notes a malformed line skipped under `skip_invalid`: its number, and for an import
/// of several files, under its file's name too; and why.
fn skip(
    report: &mut TranscriptReport,
    files: &[SourceFile],
    file: usize,
    line: u64,
    why: impl std::fmt::Display,
) {
    report.skipped.push(Skipped {
        file: files[file].name.clone(),
        line: Some(line),
        why: why.to_string(),
    });
    report.skipped_invalid.push(line);
    if let (true, Some(name)) = (files.len() > 1, &files[file].name) {
        report
            .skipped_invalid_in
            .entry(name.clone())
            .or_default()
            .push(line);
    }
}

/// `line N` for a single log, `FILE line N` for files of a folder.
fn place(files: &[SourceFile], file: usize, line: u64) -> String {
    match files.get(file).and_then(|f| f.name.as_deref()) {
        Some(name) if files.len() > 1 || files[file].agent.is_some() => {
            format!("{name} line {line}")
        }
        _ => format!("line {line}"),
    }
}

fn invalid(files: &[SourceFile], file: usize, line: u64, why: impl std::fmt::Display) -> Error {
    Error::InvalidInput(format!(
        "{}: {why}; nothing was imported",
        place(files, file, line)
    ))
}

/// The files of a Claude Code project folder, or of one log and its sub-agents, and
/// those found but left out because they lead outside the folders the import may read
/// ([`TranscriptOptions::within`]).
fn discover(
    path: &Path,
    options: &TranscriptOptions<'_>,
) -> Result<(Vec<SourceFile>, Vec<Skipped>)> {
    let jsonl = |dir: &Path| -> Result<Vec<PathBuf>> {
        let mut out: Vec<PathBuf> = match std::fs::read_dir(dir) {
            Ok(entries) => entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "jsonl"))
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(Error::io(format!("cannot read {}", dir.display()), e)),
        };
        out.sort();
        Ok(out)
    };
    let mut paths: Vec<PathBuf> = Vec::new();
    let trunks: Vec<PathBuf> = if path.is_dir() {
        let all = jsonl(path)?;
        paths.extend(all.iter().filter(|p| agent_of(p).is_some()).cloned());
        all.into_iter().filter(|p| agent_of(p).is_none()).collect()
    } else {
        vec![path.to_path_buf()]
    };
    for trunk in &trunks {
        paths.push(trunk.clone());
        if let (Some(dir), Some(stem)) = (trunk.parent(), trunk.file_stem()) {
            paths.extend(jsonl(&dir.join(stem).join("subagents"))?);
        }
    }
    // A log given alone, read now: its lines name its legacy sub-agent files beside it.
    let mut alone: Option<Vec<LogLine>> = None;
    if !path.is_dir() && agent_of(path).is_none() {
        let lines = lines::read_log(path, options)?;
        if let Some(dir) = path.parent() {
            for agent in named_agents(&lines) {
                let file = dir.join(format!("agent-{agent}.jsonl"));
                if file.is_file() && !paths.contains(&file) {
                    paths.push(file);
                }
            }
        }
        alone = Some(lines);
    }
    paths.sort_by_key(|p| agent_of(p).is_some());
    paths.dedup();
    let mut files = Vec::new();
    let mut left_out = Vec::new();
    for found in paths {
        // The file named is read (or refused) as it is; what was found beside it only
        // where the import may read.
        if found != path && lines::confined(&found, options)?.is_none() {
            left_out.push(Skipped {
                file: Some(found.display().to_string()),
                line: None,
                why: "it leads outside the folders being read (a link to somewhere else); \
                      not read"
                    .into(),
            });
            continue;
        }
        let agent = agent_of(&found);
        let spawned_by = agent.as_ref().and_then(|a| {
            let meta = found.with_file_name(format!("agent-{a}.meta.json"));
            let text = lines::read_small(&meta, 1 << 20, options)?;
            let value: Value = serde_json::from_str(&text).ok()?;
            value.get("toolUseId")?.as_str().map(str::to_string)
        });
        let lines = match alone.take() {
            Some(lines) if found == path => lines,
            other => {
                alone = other;
                lines::read_log(&found, options)?
            }
        };
        files.push(SourceFile {
            name: Some(found.display().to_string()),
            lines,
            agent,
            spawned_by,
        });
    }
    Ok((files, left_out))
}

/// The sub-agent id of a file named `agent-<id>.jsonl`.
fn agent_of(path: &Path) -> Option<String> {
    let stem = path.file_stem()?.to_str()?;
    stem.strip_prefix("agent-")
        .filter(|id| !id.is_empty())
        .map(str::to_string)
}

/// The sub-agent ids a log's tool results name.
fn named_agents(lines: &[LogLine]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in lines.iter().filter_map(|(_, line)| line.as_ref().ok()) {
        if let Ok(Line::Message(node)) = serde_json::from_str::<Value>(line)
            .map_err(|e| e.to_string())
            .and_then(|v| claude_line(&v))
        {
            out.extend(node.spawned.into_iter().map(|(_, agent, _)| agent));
        }
    }
    out
}

/// `agentId: <id>` in a sub-agent's answer text, as Claude Code appends it.
fn agent_in_text(text: &str) -> Option<String> {
    let rest = text.split("agentId: ").nth(1)?;
    let id: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .collect();
    (!id.is_empty()).then_some(id)
}

/// A `tool_result` block's content: its text, or its text parts joined by a blank line.
fn result_text(block: &Value) -> String {
    match block.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n\n"),
        _ => String::new(),
    }
}

fn claude_line(v: &Value) -> std::result::Result<Line, String> {
    let text = |key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    let kind = text("type").ok_or("a line needs a \"type\"")?;
    if kind != "user" && kind != "assistant" {
        // A compaction boundary starts a fresh chain (no parentUuid) but names the
        // message it continues: the conversation goes on through it.
        return Ok(Line::Other {
            kind,
            uuid: text("uuid"),
            parent: text("parentUuid").or_else(|| text("logicalParentUuid")),
            log_session: text("sessionId"),
        });
    }
    let uuid = text("uuid").ok_or("a message line needs a \"uuid\"")?;
    let message = v
        .get("message")
        .and_then(Value::as_object)
        .ok_or("a message line needs a \"message\" object")?;
    let role = if kind == "user" {
        Role::User
    } else {
        Role::Assistant
    };
    let model = message.get("model").and_then(Value::as_str);
    if let Some(model) = model {
        Agent::model(model).map_err(|e| e.to_string())?;
    }
    let mut turns = Vec::new();
    let mut spawned = Vec::new();
    match message.get("content") {
        Some(Value::String(s)) => turns.push(NewTurn::new(role, s.clone())),
        Some(Value::Array(blocks)) => {
            let mut texts = Vec::new();
            let mut calls = Vec::new();
            let mut results = Vec::new();
            for block in blocks {
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        texts.push(block.get("text").and_then(Value::as_str).unwrap_or(""))
                    }
                    Some("tool_use") => calls.push(json!({
                        "id": block.get("id").cloned().unwrap_or(Value::Null),
                        "type": "function",
                        "function": {
                            "name": block.get("name").cloned().unwrap_or(Value::Null),
                            "arguments": block.get("input").map(Value::to_string)
                                .unwrap_or_else(|| "{}".into()),
                        }
                    })),
                    Some("tool_result") => {
                        let content = result_text(block);
                        let mut t = NewTurn::new(Role::Tool, content.clone());
                        if let Some(id) = block.get("tool_use_id").and_then(Value::as_str) {
                            t = t.tool_call_id(id);
                            let structured = v
                                .pointer("/toolUseResult/agentId")
                                .and_then(Value::as_str)
                                .map(|a| (a.to_string(), true));
                            let agent =
                                structured.or_else(|| agent_in_text(&content).map(|a| (a, false)));
                            if let Some((agent, structured)) = agent {
                                spawned.push((id.to_string(), agent, structured));
                            }
                        }
                        results.push(t);
                    }
                    // Thinking and images are not conversation text.
                    _ => {}
                }
            }
            if !texts.is_empty() || !calls.is_empty() {
                let mut t = NewTurn::new(role, texts.join("\n\n"));
                if !calls.is_empty() {
                    t = t.tool_calls(Value::Array(calls).to_string());
                    if texts.is_empty() {
                        t = t.kind(Kind::ToolCall);
                    }
                }
                turns.push(t);
            }
            turns.extend(results);
        }
        _ => return Err("\"message.content\" must be a string or an array of blocks".into()),
    }
    if let Some(model) = model {
        turns = turns
            .into_iter()
            .map(|t| {
                if t.role == Role::Assistant {
                    t.model(model)
                } else {
                    t
                }
            })
            .collect();
    }
    Ok(Line::Message(Node {
        uuid,
        kind,
        parent: text("parentUuid"),
        sidechain: v
            .get("isSidechain")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        agent: text("agentId"),
        log_session: text("sessionId"),
        turns,
        spawned,
        message: message
            .get("id")
            .and_then(Value::as_str)
            .filter(|_| role == Role::Assistant)
            .map(str::to_string),
        block: v.get("apiBlockIndex").and_then(Value::as_u64),
        ..Default::default()
    }))
}
