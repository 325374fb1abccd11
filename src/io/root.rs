//! A new root session built whole, for the transcript importers: its turns are checked
//! as they come (as `append` checks them), and the quads are made only when the session
//! goes in, straight into the store's bulk loader, with the digest chain computed on the
//! way. Nothing of it is visible before the load commits, and a failed load leaves
//! nothing behind.
//!
//! A new session whose start repeats a session already stored (a copy: an agent that
//! forks by copying its log, a transcript saved per attempt) is stored as a fork of it
//! at the end of the longest such prefix, holding only the turns past it. Every turn's
//! digest chains over the whole history before it, so equal digests at index k mean
//! equal histories up to k: the prefix is found by digest lookups (one for a session
//! that shares nothing), never by comparing texts.

use super::report::{Added, SharedCopy, TranscriptOptions, TranscriptReport};
use crate::engine::write::{check_turn, ANONYMOUS};
use crate::error::{Error, Result};
use crate::model::{
    Agent, Limits, NewSession, NewTurn, Role, SessionId, SizeClass, MAX_FORK_DEPTH,
};
use crate::rdf::{
    self, session_quads, turn_quads, ForkRecord, GraphWriter, SessionNode, SessionRecord,
    TurnRecord,
};
use crate::store::catalog::TurnDoc;
use crate::store::records::{Entry, Run};
use crate::store::{Store, WriteTx};
use crate::Label;
use oxigraph::model::{Literal, NamedNode, Quad};
use std::cell::{Cell, RefCell};
use std::collections::HashSet;

/// The reason a fork made for a copy records (`ft:reason` of its fork activity).
const COPY_REASON: &str = "imported as a copy of the parent's first turns";

/// A root session being built: its facts and its checked turns.
pub(crate) struct RootBuilder {
    limits: Limits,
    id: SessionId,
    principal: Agent,
    title: Option<String>,
    /// Each turn with the agent it is attributed to, if not the principal.
    turns: Vec<(NewTurn, Option<Agent>)>,
    /// The stored session this one's start repeats, once found: it goes in as a fork.
    base: Option<Base>,
    /// The session its source says it was forked from, not in the store: recorded on
    /// the node if it goes in as a root, so that importing that session adopts it.
    awaits: Option<SessionId>,
}

/// Where a new session that repeats a stored one's start hangs: a fork of `parent` at
/// `at`, the first `at` turns shared.
struct Base {
    parent: SessionNode,
    at: u64,
    /// The digest of turn `at - 1`, which the fork's own turns chain on.
    digest: String,
    depth: usize,
    fork_root: NamedNode,
    label: Label,
}

impl RootBuilder {
    /// The turns this session stores itself: past the prefix it shares, if any.
    fn own_turns(&self) -> u64 {
        let shared = self.base.as_ref().map_or(0, |b| b.at);
        self.turns.len() as u64 - shared
    }

    pub(crate) fn new(limits: Limits, session: NewSession) -> Result<Self> {
        let id = match session.id {
            Some(id) => SessionId::new(id)?,
            None => SessionId::generate(),
        };
        let principal = Agent::principal(session.principal.as_deref().unwrap_or(ANONYMOUS))?;
        let title = session.title.as_deref();
        limits.check(id.as_str(), "title", SizeClass::Field, title)?;
        Ok(Self {
            limits,
            id,
            principal,
            title: session.title,
            turns: Vec::new(),
            base: None,
            awaits: None,
        })
    }

    /// The id the session goes in under.
    pub(crate) fn id(&self) -> &SessionId {
        &self.id
    }

    /// The turns added, in order.
    pub(crate) fn into_turns(self) -> Vec<NewTurn> {
        self.turns.into_iter().map(|(turn, _)| turn).collect()
    }

    /// Notes that the session's source forked it from session `parent`, which is not
    /// in the store: when `parent` is imported, this session becomes its fork.
    pub(crate) fn awaits(&mut self, parent: SessionId) {
        self.awaits = Some(parent);
    }

    /// Adds a turn, refused as `append` would refuse it (and then not added).
    pub(crate) fn append(&mut self, turn: NewTurn) -> Result<u64> {
        let software = check_turn(&self.limits, self.id.as_str(), &turn)?;
        self.turns.push((turn, software));
        Ok(self.turns.len() as u64 - 1)
    }
}

impl Store {
    /// Adds the session `root` built, all or nothing, through the bulk loader;
    /// `progress` is told `(turns written, turns)` as they go in.
    pub(crate) fn add_root(
        &self,
        root: RootBuilder,
        options: &TranscriptOptions<'_>,
    ) -> Result<Added> {
        self.add_roots(vec![root], options.progress, !options.no_dedup)
    }

    /// Adds new root sessions, each with its turns, all or nothing, in one run of the
    /// bulk loader: the fast way in for many sessions at once (a whole folder of logs,
    /// an archive). Each session and turn is checked as `create_session` and `append`
    /// check them; an id that is taken, or given twice, refuses the whole batch.
    ///
    /// ```
    /// use forktrail::{NewSession, NewTurn, Role, Store};
    /// let store = Store::in_memory()?;
    /// let ids = store.import_sessions(vec![
    ///     (NewSession::default(), vec![NewTurn::new(Role::User, "hello")]),
    ///     (NewSession::default(), vec![NewTurn::new(Role::User, "hi"), NewTurn::new(Role::Assistant, "hey")]),
    /// ])?;
    /// assert_eq!(store.replay(&ids[1], None)?.len(), 2);
    /// # Ok::<(), forktrail::Error>(())
    /// ```
    pub fn import_sessions(
        &self,
        sessions: impl IntoIterator<Item = (NewSession, Vec<NewTurn>)>,
    ) -> Result<Vec<SessionId>> {
        Ok(self
            .import_sessions_with(sessions, &TranscriptOptions::default())?
            .sessions)
    }

    /// [`Store::import_sessions`] with options (`no_dedup`, `progress`), answering the
    /// full report: which sessions went in as forks of a stored session they copy.
    pub fn import_sessions_with(
        &self,
        sessions: impl IntoIterator<Item = (NewSession, Vec<NewTurn>)>,
        options: &TranscriptOptions<'_>,
    ) -> Result<TranscriptReport> {
        let mut roots = Vec::new();
        for (session, turns) in sessions {
            let mut root = RootBuilder::new(self.limits, session)?;
            for turn in turns {
                root.append(turn)?;
            }
            roots.push(root);
        }
        let mut report = TranscriptReport {
            turns: roots.iter().map(|r| r.turns.len() as u64).sum(),
            ..Default::default()
        };
        report.added(self.add_roots(roots, options.progress, !options.no_dedup)?);
        Ok(report)
    }

    /// Adds `roots` in one bulk load, all or nothing; `progress` is told `(turns
    /// written, turns)` as they go in. With `dedup`, a session whose start repeats a
    /// stored session goes in as a fork of it (see the module's documentation).
    pub(crate) fn add_roots(
        &self,
        mut roots: Vec<RootBuilder>,
        progress: Option<&dyn Fn(u64, u64)>,
        dedup: bool,
    ) -> Result<Added> {
        let mut tx = self.write()?;
        self.all_new(&roots)?;
        if dedup {
            let mut taken = HashSet::new();
            for root in &mut roots {
                root.base = self.copied_from(root, &mut taken)?;
            }
        }
        // One moment for the whole import: when its turns were recorded.
        let created = rdf::now();
        let at = crate::store::micros(Some(created.value()));
        let total: u64 = roots.iter().map(|r| r.own_turns()).sum();
        let catalog = tx.catalogs();
        let records = tx.indexes_records();
        let declared: RefCell<HashSet<NamedNode>> = RefCell::default();
        let written = Cell::new(0u64);
        // What each session leaves besides its quads: catalog documents, records.
        let side: Vec<RefCell<(Vec<TurnDoc>, Option<Run>)>> = roots
            .iter()
            .map(|_| RefCell::new((Vec::new(), records.then(Run::default))))
            .collect();
        let facts: Vec<SessionNode> = roots.iter().map(|r| self.root_facts(r, &created)).collect();
        let shared = claim(&mut tx, &facts, &roots);
        let quads = roots.into_iter().enumerate().flat_map(|(r, root)| {
            let RootBuilder {
                id,
                principal,
                title,
                turns,
                base,
                awaits,
                ..
            } = root;
            let iri = self.session_iri(&id);
            let (start, mut prev) = match &base {
                Some(base) => (base.at, base.digest.clone()),
                None => (0, String::new()),
            };
            let mut node =
                self.node_quads(&id, &principal, title.as_deref(), base.as_ref(), &created);
            if let (None, Some(parent)) = (&base, &awaits) {
                node.push(rdf::awaited_parent_quad(
                    &self.iris,
                    id.as_str(),
                    parent.as_str(),
                ));
            }
            let principal_iri = self.iris.agent(&principal);
            let (side, declared, written, created) = (&side[r], &declared, &written, &created);
            let turns = turns.into_iter().enumerate().skip(start as usize).flat_map(
                move |(index, (turn, software))| {
                    let index = index as u64;
                    let mut w = GraphWriter::new(iri.clone());
                    let by = match &software {
                        Some(agent) => {
                            let agent_iri = self.iris.agent(agent);
                            if declared.borrow_mut().insert(agent_iri.clone()) {
                                w.agent(&self.iris, agent);
                            }
                            agent_iri
                        }
                        None => principal_iri.clone(),
                    };
                    let digest = rdf::turn_digest(&prev, index, &turn);
                    turn_quads(
                        &self.iris,
                        &mut w,
                        &TurnRecord {
                            session: id.as_str(),
                            index,
                            turn: &turn,
                            by: &by,
                            digest: &digest,
                            created,
                        },
                    );
                    let mut side = side.borrow_mut();
                    if catalog {
                        side.0.push(TurnDoc::of(index, &turn, at));
                    }
                    // The record index gets the session's file once the import is in,
                    // so the first replay after it reads no RDF.
                    if let Some(run) = &mut side.1 {
                        run.push(&Entry::new_turn(index, turn, digest.clone()));
                    }
                    prev = digest;
                    written.set(written.get() + 1);
                    if let Some(progress) = progress {
                        let n = written.get();
                        if n % 256 == 0 || n == total {
                            progress(n, total);
                        }
                    }
                    w.quads
                },
            );
            node.into_iter().chain(turns)
        });
        tx.bulk_load(&mut { quads })?;
        let mut ids = Vec::with_capacity(facts.len());
        for (facts, side) in facts.into_iter().zip(side) {
            let (docs, run) = side.into_inner();
            tx.created(&facts, None);
            tx.indexed_turns(&facts.iri, docs);
            if let Some(run) = run {
                tx.imported(&facts.iri, facts.own_start(), run);
            }
            ids.push(facts.id);
        }
        tx.commit()?;
        Ok(Added { ids, shared })
    }

    /// The stored session whose start `root` repeats, if any, and where `root` would
    /// fork from it: the longest prefix of `root` whose last turn's digest a stored turn
    /// has. A prefix of system turns alone is not shared (two conversations with the
    /// same instructions are not copies of each other), nor one under a parent at the
    /// depth limit. `taken` holds the labels this import gives, by parent.
    fn copied_from(
        &self,
        root: &RootBuilder,
        taken: &mut HashSet<(NamedNode, String)>,
    ) -> Result<Option<Base>> {
        let Some(first) = root.turns.iter().position(|(t, _)| t.role != Role::System) else {
            return Ok(None);
        };
        // The digests up to the first turn that is not a system turn; the rest only if
        // a stored turn has that one (most sessions share nothing: one lookup).
        let digest_chain = |upto: usize| {
            let mut digests = Vec::with_capacity(upto);
            let mut prev = String::new();
            for (index, (turn, _)) in root.turns.iter().enumerate().take(upto) {
                prev = rdf::turn_digest(&prev, index as u64, turn);
                digests.push(prev.clone());
            }
            digests
        };
        let mut digests = digest_chain(first + 1);
        // Of the sessions storing that turn (a copy kept whole, with --no-dedup, stores
        // it too), the first by id (generated ids are in order of creation): the same
        // parent whichever order the store answers in.
        let holder = |digests: &[String], k: usize| -> Result<Option<SessionNode>> {
            let mut first: Option<SessionNode> = None;
            for graph in self.rdf().graphs_with_digest(&digests[k])? {
                // A session waiting for the parent its source names is not a parent:
                // that one, when it comes, adopts it.
                if self.rdf().awaited_parent(graph.as_ref())?.is_some() {
                    continue;
                }
                if let Some(facts) = self.facts_of(graph.as_ref())? {
                    if first.as_ref().is_none_or(|f| facts.id < f.id) {
                        first = Some(facts);
                    }
                }
            }
            Ok(first)
        };
        let Some(mut found) = holder(&digests, first)? else {
            return Ok(None);
        };
        digests = digest_chain(root.turns.len());
        // Held prefixes are prefixes: if turn k's digest is stored, so are all before
        // it (in the same chain), so the longest is found by bisection.
        let (mut lo, mut hi) = (first, digests.len() - 1);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            match holder(&digests, mid)? {
                Some(facts) => {
                    found = facts;
                    lo = mid;
                }
                None => hi = mid - 1,
            }
        }
        let chain = self.chain(&found.id)?;
        let depth = chain.len();
        if depth > MAX_FORK_DEPTH {
            return Ok(None);
        }
        let label = self.copy_label(&found.iri, taken)?;
        Ok(Some(Base {
            at: lo as u64 + 1,
            digest: digests[lo].clone(),
            depth,
            fork_root: chain.root().iri.clone(),
            parent: found,
            label,
        }))
    }

    /// The first of `copy`, `copy-2`, … that no child of `parent` has and this import
    /// has not given (`taken`, by parent).
    pub(super) fn copy_label(
        &self,
        parent: &NamedNode,
        taken: &mut HashSet<(NamedNode, String)>,
    ) -> Result<Label> {
        let mut n = 1;
        loop {
            let label = Label::new(if n == 1 {
                "copy".to_string()
            } else {
                format!("copy-{n}")
            })?;
            if self.rdf().child_with_label(parent, &label)?.is_none()
                && taken.insert((parent.clone(), label.to_string()))
            {
                return Ok(label);
            }
            n += 1;
        }
    }

    /// The quads of a new session's node: a root, or with `base` a fork of the session
    /// it copies.
    fn node_quads(
        &self,
        id: &SessionId,
        principal: &Agent,
        title: Option<&str>,
        base: Option<&Base>,
        created: &Literal,
    ) -> Vec<Quad> {
        let iri = self.session_iri(id);
        session_quads(
            &self.iris,
            &SessionRecord {
                id: id.as_str(),
                branch: base.map_or(Label::MAIN, |b| b.label.as_str()),
                principal,
                title,
                depth: base.map_or(0, |b| b.depth),
                fork_root: base.map_or(&iri, |b| &b.fork_root),
                created,
            },
            base.map(|b| ForkRecord {
                parent: &b.parent.iri,
                at: b.at,
                base_digest: Some(b.digest.as_str()),
                reason: Some(COPY_REASON),
            })
            .as_ref(),
        )
    }

    /// The facts of new root session `root` as the catalog takes them.
    fn root_facts(&self, root: &RootBuilder, created: &oxigraph::model::Literal) -> SessionNode {
        let iri = self.session_iri(&root.id);
        let mut facts = SessionNode::lineage(root.id.clone(), iri.clone(), None, None);
        facts.branch = Label::MAIN.to_string();
        facts.fork_root = Some(iri);
        if let Some(base) = &root.base {
            facts.parent = Some(base.parent.iri.clone());
            facts.forked_at = Some(base.at);
            facts.branch = base.label.to_string();
            facts.depth = base.depth as u64;
            facts.fork_root = Some(base.fork_root.clone());
            facts.base_digest = Some(base.digest.clone());
        }
        facts.principal = Some(self.iris.agent(&root.principal));
        facts.title = root.title.clone();
        facts.created = Some(created.value().to_string());
        facts.length = root.turns.len() as u64;
        facts
    }

    /// Refuses `roots` unless each is new: not in the store, not given twice.
    fn all_new(&self, roots: &[RootBuilder]) -> Result<()> {
        let mut ids = HashSet::new();
        for root in roots {
            if !ids.insert(root.id.clone()) {
                return Err(Error::Conflict(format!(
                    "session {} is given twice in one import",
                    root.id
                )));
            }
            if self.exists(&root.id)? {
                return Err(Error::Conflict(format!(
                    "session {} already exists in the store; delete it first or import into \
                     another store",
                    root.id
                )));
            }
        }
        Ok(())
    }
}

/// Notes in `tx` what each new session claims before the load (so that a crash past it
/// leaves the session to the catalog to derive again, and a copy's fork its label), and
/// returns the copies stored as forks.
fn claim(tx: &mut WriteTx<'_>, facts: &[SessionNode], roots: &[RootBuilder]) -> Vec<SharedCopy> {
    let mut shared = Vec::new();
    for (facts, root) in facts.iter().zip(roots) {
        tx.forget(&facts.iri);
        if let Some(base) = &root.base {
            tx.claim_node(&facts.iri, &facts.iri);
            tx.claim_label(&base.parent.iri, base.label.as_str());
            shared.push(SharedCopy {
                session: facts.id.clone(),
                parent: base.parent.id.clone(),
                shared_turns: base.at,
                branch: base.label.to_string(),
            });
        }
    }
    shared
}
