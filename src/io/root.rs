//! A new root session built whole, for the transcript importers: its turns are checked
//! as they come (as `append` checks them), and the quads are made only when the session
//! goes in, straight into the store's bulk loader, with the digest chain computed on the
//! way. Nothing of it is visible before the load commits, and a failed load leaves
//! nothing behind.

use crate::catalog::TurnDoc;
use crate::error::{Error, Result};
use crate::model::{Agent, Limits, NewSession, NewTurn, SessionId, SizeClass};
use crate::rdf::{
    self, session_quads, turn_quads, GraphWriter, SessionNode, SessionRecord, TurnRecord,
};
use crate::records::{Entry, Run};
use crate::store::Store;
use crate::write::{check_turn, ANONYMOUS};
use crate::Label;
use oxigraph::model::NamedNode;
use std::cell::{Cell, RefCell};
use std::collections::HashSet;

/// A root session being built: its facts and its checked turns.
pub(crate) struct RootBuilder {
    limits: Limits,
    id: SessionId,
    principal: Agent,
    title: Option<String>,
    /// Each turn with the agent it is attributed to, if not the principal.
    turns: Vec<(NewTurn, Option<Agent>)>,
}

impl RootBuilder {
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
        })
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
        progress: Option<&dyn Fn(u64, u64)>,
    ) -> Result<SessionId> {
        Ok(self.add_roots(vec![root], progress)?.remove(0))
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
        let mut roots = Vec::new();
        for (session, turns) in sessions {
            let mut root = RootBuilder::new(self.limits, session)?;
            for turn in turns {
                root.append(turn)?;
            }
            roots.push(root);
        }
        self.add_roots(roots, None)
    }

    /// Adds `roots` in one bulk load, all or nothing; `progress` is told `(turns
    /// written, turns)` as they go in.
    pub(crate) fn add_roots(
        &self,
        roots: Vec<RootBuilder>,
        progress: Option<&dyn Fn(u64, u64)>,
    ) -> Result<Vec<SessionId>> {
        let mut tx = self.write()?;
        self.all_new(&roots)?;
        // One moment for the whole import: when its turns were recorded.
        let created = rdf::now();
        let at = crate::store::micros(Some(created.value()));
        let total: u64 = roots.iter().map(|r| r.turns.len() as u64).sum();
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
        for facts in &facts {
            // Noted before the load, so that a crash past it leaves the session to the
            // catalog to derive again.
            tx.forget(&facts.iri);
        }
        let quads = roots.into_iter().enumerate().flat_map(|(r, root)| {
            let RootBuilder {
                id,
                principal,
                title,
                turns,
                ..
            } = root;
            let iri = self.session_iri(&id);
            let node = session_quads(
                &self.iris,
                &SessionRecord {
                    id: id.as_str(),
                    branch: Label::MAIN,
                    principal: &principal,
                    title: title.as_deref(),
                    depth: 0,
                    fork_root: &iri,
                    created: &created,
                },
                None,
            );
            let principal_iri = self.iris.agent(&principal);
            let (side, declared, written, created) = (&side[r], &declared, &written, &created);
            let mut prev = String::new();
            let turns = turns
                .into_iter()
                .enumerate()
                .flat_map(move |(index, (turn, software))| {
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
                    let digest =
                        rdf::turn_digest(&prev, index, turn.role, turn.kind, &turn.content);
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
                });
            node.into_iter().chain(turns)
        });
        self.backend().bulk_load(&mut { quads })?;
        let mut out = Vec::with_capacity(facts.len());
        for (facts, side) in facts.into_iter().zip(side) {
            let (docs, run) = side.into_inner();
            tx.created(&facts, None);
            tx.indexed_turns(&facts.iri, docs);
            if let Some(run) = run {
                tx.imported(&facts.iri, 0, run);
            }
            out.push(facts.id);
        }
        tx.commit()?;
        Ok(out)
    }

    /// The facts of new root session `root` as the catalog takes them.
    fn root_facts(&self, root: &RootBuilder, created: &oxigraph::model::Literal) -> SessionNode {
        let iri = self.session_iri(&root.id);
        let mut facts = SessionNode::lineage(root.id.clone(), iri.clone(), None, None);
        facts.branch = Label::MAIN.to_string();
        facts.fork_root = Some(iri);
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
