//! A family followed into the scratch store: its chains of messages in the order the
//! log holds them, each opened as the main session, a fork, a sidechain or a
//! sub-agent's session, its turns appended.

use super::commit::Written;
use super::{
    agent_in_text, agent_label, agent_session_id, invalid, resolve, skip, steps, Family, Node,
    SourceFile,
};
use crate::error::{Error, Result};
use crate::io::report::{SharedCopy, TranscriptOptions, TranscriptReport};
use crate::model::{ForkOptions, NewSession, NewTurn, SessionId};
use crate::rdf::{source_id_quad, sub_agent_quads, ImportedGraph, SessionNode, SubAgentFacts};
use crate::store::Store;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};

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
    /// Builds the sessions of `families` (each a log's lines, chained by uuid) in a
    /// scratch store and commits them in one transaction; `source` names the tool in
    /// the main sessions' titles (`{source} {log}`).
    pub(in crate::io::transcripts) fn import_families(
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
