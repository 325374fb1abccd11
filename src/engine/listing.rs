//! Pages of sessions and search over what sessions hold.
//!
//! On a store this process owns, both come from the catalog (`crate::store::catalog`): a page
//! costs the same at a thousand sessions and at a million, and search is ranked. Before
//! answering, a read derives from the RDF whatever the catalog holds as suspect, and
//! each listed session's length is checked against the store's: a mismatch with no
//! write under way meanwhile is derived again and the page read anew, one that a write
//! explains is the catalog a moment behind, not wrong. On a store across a network,
//! where other processes write unseen, pages and search are SPARQL queries, as fast as
//! that store makes them.

use crate::error::{Error, Result};
use crate::model::{Role, SessionId, TokenTotals};
use crate::rdf::SessionNode;
use crate::store::catalog::{After, Catalog, Entry, Filter, Hit, Order, TurnDoc};
use crate::store::{micros, Store};
use oxigraph::model::NamedNode;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

/// Sessions a page holds unless asked otherwise.
pub const DEFAULT_PAGE: usize = 50;
/// The most sessions (or hits) one page holds.
pub const MAX_PAGE: usize = 1000;

/// The order of a page of sessions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionOrder {
    /// Newest activity first (a session's activity is its newest turn, or its creation;
    /// with `roots`, a root's is its whole family's). A session that gains a turn while
    /// you page moves to the front: page by `created` to see each exactly once then.
    #[default]
    Activity,
    /// Newest first by creation, which never changes: every session that exists
    /// throughout the paging is listed exactly once.
    Created,
}

impl std::str::FromStr for SessionOrder {
    type Err = Error;
    fn from_str(text: &str) -> Result<Self> {
        match text {
            "activity" => Ok(Self::Activity),
            "created" => Ok(Self::Created),
            _ => Err(Error::InvalidInput(format!(
                "order {text:?}: say activity or created"
            ))),
        }
    }
}

/// Which sessions to list, and where the page starts.
///
/// ```
/// use forktrail::{NewSession, SessionQuery, Store};
/// let store = Store::in_memory()?;
/// for _ in 0..3 {
///     store.create_session(NewSession::default())?;
/// }
/// let first = store.sessions(&SessionQuery { limit: Some(2), ..Default::default() })?;
/// assert_eq!((first.sessions.len(), first.total), (2, 3));
/// let rest = store.sessions(&SessionQuery { cursor: first.next, ..Default::default() })?;
/// assert_eq!((rest.sessions.len(), rest.next), (1, None));
/// # Ok::<(), forktrail::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionQuery {
    /// Sessions per page (default 50, at most 1,000).
    pub limit: Option<usize>,
    /// Where to go on from: the `next` of the page before.
    pub cursor: Option<String>,
    pub order: SessionOrder,
    /// Only sessions of this principal.
    pub principal: Option<String>,
    /// Only sessions with an own turn attributed to this model.
    pub model: Option<String>,
    /// Only roots.
    pub roots: bool,
    /// Only the direct children of this session.
    pub parent: Option<String>,
    /// Only the sessions of this session's family (the root it belongs to, and every
    /// fork below it).
    pub family: Option<String>,
    /// Only sessions active at or after this time (RFC 3339).
    pub since: Option<String>,
}

/// One session as lists show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SessionSummary {
    pub session: SessionId,
    pub branch: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub principal: Option<String>,
    pub parent: Option<SessionId>,
    pub forked_at_index: Option<u64>,
    pub fork_root: SessionId,
    pub depth: u64,
    /// Number of turns, inherited ones included.
    pub length: u64,
    pub own_turns: u64,
    pub inherited_turns: u64,
    pub created_at: Option<String>,
    /// Its newest own turn's time, or its creation's.
    pub last_activity: Option<String>,
    /// Direct children.
    pub forks: u64,
    /// For a root: the sessions below it, all depths.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub family: Option<u64>,
    /// For a root: the newest activity in its family.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub family_activity: Option<String>,
    /// The models its own turns are attributed to.
    pub models: Vec<String>,
    /// Token totals of the regenerations and runs that produced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenTotals>,
    /// The digest of its last turn: equal heads, equal histories.
    pub head_digest: Option<String>,
}

/// A page of sessions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SessionPage {
    pub sessions: Vec<SessionSummary>,
    /// Sessions matching the query, all pages.
    pub total: u64,
    /// The cursor of the next page; `None` on the last.
    pub next: Option<String>,
}

/// A search: words (all required) and `"phrases"` in quotes, over turn contents,
/// titles, branch labels and models.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchQuery {
    pub text: String,
    /// Hits per page (default 50, at most 1,000).
    pub limit: Option<usize>,
    pub cursor: Option<String>,
}

/// One hit: a turn (with `index` and `role`), or a session whose title, branch label
/// or models match.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SearchHit {
    /// The session that stores the turn (forks inherit it: it is indexed once).
    pub session: SessionId,
    pub branch: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub index: Option<u64>,
    pub role: Option<Role>,
    /// The best matching part of the turn's content (of the session's title, branch
    /// and models for a session hit).
    pub snippet: String,
    /// Byte ranges of the matches in `snippet`.
    pub highlights: Vec<(usize, usize)>,
    pub score: f32,
}

/// A page of search hits, best first.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SearchPage {
    pub hits: Vec<SearchHit>,
    /// Hits in all, all pages.
    pub total: u64,
    pub next: Option<String>,
}

/// What `Store::reindex` did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReindexReport {
    pub sessions: u64,
    pub turns: u64,
    pub millis: u64,
}

/// Characters of content a snippet shows.
const SNIPPET_CHARS: usize = 240;

fn limit_of(limit: Option<usize>) -> Result<usize> {
    match limit.unwrap_or(DEFAULT_PAGE) {
        0 => Err(Error::InvalidInput("limit 0: ask for at least one".into())),
        n if n > MAX_PAGE => Err(Error::InvalidInput(format!(
            "limit {n} is above the most a page holds ({MAX_PAGE})"
        ))),
        n => Ok(n),
    }
}

fn bad_cursor(cursor: &str) -> Error {
    Error::InvalidInput(format!(
        "cursor {cursor:?} is not one this query gave: start again without it"
    ))
}

/// A page cursor: which key it continues, the key and the tie-breaker.
fn cursor_text(kind: char, after: After) -> String {
    format!("{kind}{}.{:016x}", after.key, after.tie)
}

fn parse_cursor(text: &str, kind: char) -> Result<After> {
    let rest = text.strip_prefix(kind).ok_or_else(|| bad_cursor(text))?;
    let (key, tie) = rest.split_once('.').ok_or_else(|| bad_cursor(text))?;
    Ok(After {
        key: key.parse().map_err(|_| bad_cursor(text))?,
        tie: u64::from_str_radix(tie, 16).map_err(|_| bad_cursor(text))?,
    })
}

fn time_text(micros: i64) -> Option<String> {
    (micros > 0)
        .then(|| chrono::DateTime::from_timestamp_micros(micros))
        .flatten()
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

fn since_micros(since: Option<&str>) -> Result<Option<i64>> {
    since
        .map(|text| {
            chrono::DateTime::parse_from_rfc3339(text)
                .map(|t| t.timestamp_micros())
                .map_err(|_| {
                    Error::InvalidInput(format!(
                        "since {text:?} is not a time: say it in RFC 3339, such as \
                         2026-11-01T00:00:00Z"
                    ))
                })
        })
        .transpose()
}

fn catalog_error(e: String) -> Error {
    Error::Io {
        context: "the catalog (pages of sessions and search)".into(),
        source: std::io::Error::other(e),
    }
}

impl Store {
    /// A page of sessions (see [`SessionQuery`]): newest activity first unless asked,
    /// with `next` to continue from.
    pub fn sessions(&self, query: &SessionQuery) -> Result<SessionPage> {
        let limit = limit_of(query.limit)?;
        let catalog = self.the_catalog()?;
        let filter = self.filter_of(query)?;
        let (order, kind) = match (query.order, query.roots) {
            (SessionOrder::Created, _) => (Order::Created, 'c'),
            (SessionOrder::Activity, true) => (Order::Activity, 'f'),
            (SessionOrder::Activity, false) => (Order::Activity, 'a'),
        };
        let after = query
            .cursor
            .as_deref()
            .map(|c| parse_cursor(c, kind))
            .transpose()?;
        // A page whose sessions the store contradicts is read again once they are
        // derived anew; what still disagrees then is damage. A write that went in while
        // the page was read explains any disagreement (the catalog had every write done
        // before the read, the store has that one too): the page is served as the
        // catalog had it, a moment before the write.
        let mut derived = false;
        loop {
            let done = self.writes_done();
            self.settle_catalog()?;
            let (entries, next) = catalog
                .page(&filter, order, after, limit)
                .map_err(catalog_error)?;
            // On a shared store the change feed is what keeps the catalog true (a
            // session read back here would cost a request each).
            let wrong = if self.across_network() {
                Vec::new()
            } else {
                self.disagreeing(&entries)?
            };
            if !wrong.is_empty() && !self.written_since(done) {
                if derived {
                    let what = if wrong.len() == 1 {
                        "session"
                    } else {
                        "sessions"
                    };
                    return Err(catalog_error(format!(
                        "the catalog keeps disagreeing with the store about {what} {}: run \
                         `forktrail reindex`",
                        wrong.join(", ")
                    )));
                }
                catalog.suspect(&wrong);
                derived = true;
                continue;
            }
            let total = catalog.count(&filter).map_err(catalog_error)?;
            let sessions = self.summaries(entries)?;
            return Ok(SessionPage {
                sessions,
                total,
                next: next.map(|a| cursor_text(kind, a)),
            });
        }
    }

    /// How many sessions `query`'s filters match (its page, order and cursor aside):
    /// the `total` of [`Store::sessions`] without reading a page.
    pub fn count_sessions(&self, query: &SessionQuery) -> Result<u64> {
        let catalog = self.the_catalog()?;
        let filter = self.filter_of(query)?;
        self.settle_catalog()?;
        catalog.count(&filter).map_err(catalog_error)
    }

    /// The catalog: every store has one (a shared store's is this process's, in
    /// memory, following the store's change feed).
    fn the_catalog(&self) -> Result<&Catalog> {
        self.catalog
            .as_ref()
            .ok_or_else(|| catalog_error("this store has no catalog".into()))
    }

    /// The catalog's filter of `query`.
    fn filter_of(&self, query: &SessionQuery) -> Result<Filter> {
        Ok(Filter {
            principal: query.principal.clone(),
            model: query.model.clone(),
            roots_only: query.roots,
            parent: query.parent.clone(),
            family: query
                .family
                .as_deref()
                .map(|id| self.family_root(id))
                .transpose()?,
            since: since_micros(query.since.as_deref())?,
        })
    }

    /// The root of the family of session `id`.
    fn family_root(&self, id: &str) -> Result<String> {
        let id = SessionId::new(id.to_string())?;
        let facts = self.require(&id)?;
        Ok(match &facts.fork_root {
            Some(root) => self
                .iris
                .session_id(root.as_ref())
                .map_or_else(|| id.to_string(), |r| r.to_string()),
            None => id.to_string(),
        })
    }

    /// The sessions of `entries` the store says otherwise of (gone, or another length).
    fn disagreeing(&self, entries: &[Entry]) -> Result<Vec<String>> {
        let mut wrong = Vec::new();
        for e in entries {
            let Ok(id) = SessionId::new(e.id.clone()) else {
                wrong.push(e.id.clone());
                continue;
            };
            match self.facts_of(self.session_iri(&id).as_ref())? {
                Some(facts) if facts.length == e.length => {}
                _ => wrong.push(e.id.clone()),
            }
        }
        Ok(wrong)
    }

    /// The summaries of a page's entries: each read from the store on a store this
    /// process owns (cheap there); on a shared one, the heads of the whole page in one
    /// request.
    fn summaries(&self, entries: Vec<Entry>) -> Result<Vec<SessionSummary>> {
        if !self.across_network() {
            return entries
                .into_iter()
                .map(|e| {
                    let iri = self.session_iri(&SessionId::new(e.id.clone())?);
                    let tokens = self.tokens_of(&iri)?;
                    let head_digest = match self.facts_of(iri.as_ref())? {
                        Some(f) if f.length > f.own_start() => {
                            Some(self.rdf().digest(&f, f.length - 1)?)
                        }
                        Some(f) => f.base_digest,
                        None => None,
                    };
                    self.summary(e, tokens, head_digest)
                })
                .collect();
        }
        let mut page = Vec::with_capacity(entries.len());
        for e in &entries {
            let iri = self.session_iri(&SessionId::new(e.id.clone())?);
            page.push((iri, e.length, e.own_start));
        }
        let (mut heads, produced) = self.rdf().page_heads(&page)?;
        entries
            .into_iter()
            .zip(page)
            .map(|(e, (iri, ..))| {
                let tokens = if produced.contains(&iri) {
                    self.tokens_of(&iri)?
                } else {
                    None
                };
                self.summary(e, tokens, heads.remove(&iri))
            })
            .collect()
    }

    fn summary(
        &self,
        e: Entry,
        tokens: Option<TokenTotals>,
        head_digest: Option<String>,
    ) -> Result<SessionSummary> {
        let id = |text: &str| SessionId::new(text.to_string());
        let session = id(&e.id)?;
        let is_root = e.parent.is_none();
        Ok(SessionSummary {
            branch: e.branch,
            title: e.title,
            principal: e.principal,
            parent: e.parent.as_deref().map(id).transpose()?,
            forked_at_index: (!is_root).then_some(e.own_start),
            fork_root: id(&e.root)?,
            depth: e.depth,
            length: e.length,
            own_turns: e.length.saturating_sub(e.own_start),
            inherited_turns: e.length.min(e.own_start),
            created_at: time_text(e.created),
            last_activity: time_text(e.activity),
            forks: e.forks,
            family: is_root.then_some(e.family),
            family_activity: is_root.then(|| time_text(e.family_activity)).flatten(),
            models: e.models.into_iter().collect(),
            tokens,
            head_digest,
            session,
        })
    }

    /// Search hits for `query.text`, best first (see [`SearchQuery`]). Each hit is
    /// checked against the store: a turn the store no longer holds is left out (and
    /// its session derived anew).
    pub fn search(&self, query: &SearchQuery) -> Result<SearchPage> {
        let limit = limit_of(query.limit)?;
        let text = query.text.trim();
        if text.is_empty() {
            return Err(Error::InvalidInput(
                "search for what? give words, or a \"phrase\" in quotes".into(),
            ));
        }
        let offset = match query.cursor.as_deref() {
            Some(c) => c
                .strip_prefix('s')
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| bad_cursor(c))?,
            None => 0,
        };
        let catalog = self.the_catalog()?;
        let done = self.writes_done();
        self.settle_catalog()?;
        let (hits, total, parsed) = catalog.search(text, offset, limit).map_err(catalog_error)?;
        let mut out = Vec::with_capacity(hits.len());
        let mut gone = Vec::new();
        if self.across_network() {
            (out, gone) = self.shared_hits(catalog, &*parsed, hits)?;
        } else {
            for hit in hits {
                match self.checked_hit(catalog, &*parsed, hit)? {
                    Ok(hit) => out.push(hit),
                    Err(session) => gone.push(session),
                }
            }
        }
        // Gone since the catalog was read is a write's doing, which the catalog has by
        // now; gone with no write meanwhile, the catalog was wrong about it.
        if !gone.is_empty() && !self.written_since(done) {
            catalog.suspect(&gone);
        }
        let end = offset + limit;
        Ok(SearchPage {
            hits: out,
            total: total as u64,
            next: (end < total).then(|| format!("s{end}")),
        })
    }

    /// The hits of a search on a shared store: every hit's turn read in one request,
    /// its session's branch, title and models from the catalog (which the change feed
    /// keeps true); a turn the store no longer holds is left out, its session returned.
    fn shared_hits(
        &self,
        catalog: &Catalog,
        query: &dyn tantivy::query::Query,
        hits: Vec<Hit>,
    ) -> Result<(Vec<SearchHit>, Vec<String>)> {
        let iri = |session: &str| -> Option<NamedNode> {
            SessionId::new(session.to_string())
                .ok()
                .map(|id| self.session_iri(&id))
        };
        let points: Vec<(NamedNode, u64)> = hits
            .iter()
            .filter_map(|hit| match hit {
                Hit::Turn { session, index, .. } => Some((iri(session)?, *index)),
                Hit::Session { .. } => None,
            })
            .collect();
        let mut turns = self.rdf().turns_at(&points)?;
        let (mut out, mut gone) = (Vec::with_capacity(hits.len()), Vec::new());
        for hit in hits {
            let (session, index, score) = hit.parts();
            let (Some(entry), Some(g), Ok(id)) = (
                catalog.entry(&session).map_err(catalog_error)?,
                iri(&session),
                SessionId::new(session.clone()),
            ) else {
                gone.push(session);
                continue;
            };
            let (text, role) = match index {
                Some(i) => match turns.remove(&(g, i)) {
                    Some((role, content)) => (content, Some(role.parse()?)),
                    None => {
                        gone.push(session);
                        continue;
                    }
                },
                None => {
                    let mut parts: Vec<String> = entry.title.iter().cloned().collect();
                    parts.push(entry.branch.clone());
                    parts.extend(entry.models.iter().cloned());
                    (parts.join(" · "), None)
                }
            };
            let (snippet, highlights) = snippet_of(catalog, query, &text)?;
            out.push(SearchHit {
                session: id,
                branch: entry.branch,
                title: entry.title,
                index,
                role,
                snippet,
                highlights,
                score,
            });
        }
        Ok((out, gone))
    }

    /// A hit as the store holds it, or the session it names when the store does not.
    fn checked_hit(
        &self,
        catalog: &Catalog,
        query: &dyn tantivy::query::Query,
        hit: Hit,
    ) -> Result<std::result::Result<SearchHit, String>> {
        let (session, index, score) = hit.parts();
        let Ok(id) = SessionId::new(session.clone()) else {
            return Ok(Err(session));
        };
        let Some(facts) = self.facts_of(self.session_iri(&id).as_ref())? else {
            return Ok(Err(session));
        };
        let (text, role) = match index {
            Some(i) if i >= facts.own_start() && i < facts.length => {
                let turn = self.rdf().turn(&facts, i)?;
                (turn.content, Some(turn.role))
            }
            Some(_) => return Ok(Err(session)),
            None => {
                let models = self.rdf().models(&facts.iri)?;
                let mut parts: Vec<String> = facts.title.iter().cloned().collect();
                parts.push(facts.branch.clone());
                parts.extend(models);
                (parts.join(" · "), None)
            }
        };
        let (snippet, highlights) = snippet_of(catalog, query, &text)?;
        Ok(Ok(SearchHit {
            session: id,
            branch: facts.branch,
            title: facts.title,
            index,
            role,
            snippet,
            highlights,
            score,
        }))
    }

    /// Derives from the RDF what the catalog holds as suspect (or rebuilds it whole
    /// when it is stale), then commits, so that a read sees every write before it.
    /// Writes wait meanwhile, so that what is read from the RDF is what is put; the
    /// write lock is taken in turn, so a write waits only for the readers that asked
    /// before it, and only those with something to derive ask.
    pub(crate) fn settle_catalog(&self) -> Result<()> {
        let Some(catalog) = &self.catalog else {
            return Ok(());
        };
        self.follow_feed(catalog)?;
        let (suspects, stale) = catalog.pending();
        if stale || !suspects.is_empty() {
            let _quiet = self.hold_writes();
            // Readers that found the same waited in line: the first settled it.
            let (_, stale) = catalog.pending();
            if stale {
                self.rebuild_held(catalog, None)?;
            }
            // Deriving one session may make others suspect (a detached session's old
            // parent); a few rounds settle any chain of those.
            for _ in 0..8 {
                let (suspects, _) = catalog.pending();
                if suspects.is_empty() {
                    break;
                }
                for id in suspects {
                    let derived = self.derive(&id)?;
                    let (entry, turns) = match derived {
                        Some((entry, turns)) => (Some(entry), Some(turns)),
                        None => (None, Some(Vec::new())),
                    };
                    catalog
                        .put_derived(&id, entry, turns)
                        .map_err(catalog_error)?;
                }
            }
        }
        catalog.refresh().map_err(catalog_error)?;
        self.note_feed(catalog);
        Ok(())
    }

    /// Rebuilds the catalog from the RDF: every session and its own turns. Writes wait
    /// until it is done. `progress` is told `(sessions done, sessions)`.
    pub fn reindex(&self, progress: Option<&dyn Fn(u64, u64)>) -> Result<ReindexReport> {
        let catalog = self.the_catalog()?;
        self.rebuild_catalog(catalog, progress)
    }

    fn rebuild_catalog(
        &self,
        catalog: &Catalog,
        progress: Option<&dyn Fn(u64, u64)>,
    ) -> Result<ReindexReport> {
        let _quiet = self.hold_writes();
        self.rebuild_held(catalog, progress)
    }

    /// [`Store::rebuild_catalog`], writes held by the caller.
    fn rebuild_held(
        &self,
        catalog: &Catalog,
        progress: Option<&dyn Fn(u64, u64)>,
    ) -> Result<ReindexReport> {
        if self.across_network() {
            return self.rebuild_shared(catalog);
        }
        let started = Instant::now();
        catalog.clear().map_err(catalog_error)?;
        let sessions = self.rdf().sessions()?;
        let total = sessions.len() as u64;
        let mut turns = 0;
        for (n, iri) in sessions.iter().enumerate() {
            let Some(id) = self.iris.session_id(iri.as_ref()) else {
                continue;
            };
            if let Some((entry, docs)) = self.derive(id.as_str())? {
                turns += docs.len() as u64;
                catalog
                    .put_derived(id.as_str(), Some(entry), Some(docs))
                    .map_err(catalog_error)?;
            }
            if let Some(progress) = progress {
                if n % 1024 == 1023 || n as u64 + 1 == total {
                    progress(n as u64 + 1, total);
                }
            }
        }
        catalog.rebuilt();
        catalog.refresh().map_err(catalog_error)?;
        Ok(ReindexReport {
            sessions: total,
            turns,
            millis: started.elapsed().as_millis() as u64,
        })
    }

    /// A session's catalog entry and own turns, from the RDF; `None` if it is gone.
    fn derive(&self, id: &str) -> Result<Option<(Entry, Vec<TurnDoc>)>> {
        let Ok(sid) = SessionId::new(id.to_string()) else {
            return Ok(None);
        };
        let iri = self.session_iri(&sid);
        let Some(facts) = self.facts_of(iri.as_ref())? else {
            return Ok(None);
        };
        let rdf = self.rdf();
        let own = self.own_turns(&facts)?;
        let family = if facts.parent.is_none() {
            let mut members = BTreeSet::new();
            let mut newest = i64::MIN;
            for member in rdf.family_members(&iri)? {
                if member == iri || !members.insert(member.clone()) {
                    continue;
                }
                if let Some(f) = self.facts_of(member.as_ref())? {
                    newest = newest.max(self.activity_of(&f)?);
                }
            }
            Some((members.len() as u64, newest))
        } else {
            None
        };
        let forks = rdf.children(&iri)?.len() as u64;
        Ok(Some((self.entry_of(&facts, &own, forks, family), own)))
    }

    /// The catalog entry of the session `facts` describe, whose own turns are `own`,
    /// with `forks` children and, for a root, `family`: how many sessions are below it
    /// and the newest activity among them.
    fn entry_of(
        &self,
        facts: &SessionNode,
        own: &[TurnDoc],
        forks: u64,
        family: Option<(u64, i64)>,
    ) -> Entry {
        let id_of = |n: &NamedNode| self.iris.session_id(n.as_ref()).map(|s| s.to_string());
        let id = facts.id.to_string();
        let created = micros(facts.created.as_deref());
        let activity = own.iter().map(|t| t.at).fold(created, i64::max);
        let (family, family_activity) = match family {
            Some((members, newest)) => (members, newest.max(activity)),
            None => (0, activity),
        };
        Entry {
            parent: facts.parent.as_ref().and_then(id_of),
            root: facts
                .fork_root
                .as_ref()
                .and_then(id_of)
                .unwrap_or_else(|| id.clone()),
            principal: facts
                .principal
                .as_ref()
                .and_then(|p| self.iris.parse_agent(p.as_ref()))
                .map(|a| a.name().to_string()),
            title: facts.title.clone(),
            branch: facts.branch.clone(),
            created,
            activity,
            family_activity,
            length: facts.length,
            own_start: facts.own_start(),
            depth: facts.depth,
            forks,
            family,
            models: own.iter().filter_map(|t| t.model.clone()).collect(),
            id,
        }
    }

    /// [`Store::rebuild_held`] on a store across a network: every session and its own
    /// turns in requests of bounded rows, the counts of children and families from
    /// their facts.
    fn rebuild_shared(&self, catalog: &Catalog) -> Result<ReindexReport> {
        let started = Instant::now();
        let sessions = self.rdf().every_session()?;
        catalog.clear().map_err(catalog_error)?;
        let mut forks: HashMap<&NamedNode, u64> = HashMap::new();
        // Per root: its members (itself aside) and their newest activity, a member's
        // activity being its last own turn's time (or its creation's), as a derivation
        // reads it.
        let mut families: HashMap<&NamedNode, (u64, i64)> = HashMap::new();
        for (facts, own) in &sessions {
            if let Some(parent) = &facts.parent {
                *forks.entry(parent).or_default() += 1;
            }
            match &facts.fork_root {
                Some(root) if *root != facts.iri => {
                    let last = own.last().and_then(|t| t.created_at.as_deref());
                    let activity = micros(last).max(micros(facts.created.as_deref()));
                    let family = families.entry(root).or_insert((0, i64::MIN));
                    family.0 += 1;
                    family.1 = family.1.max(activity);
                }
                _ => {}
            }
        }
        let mut turns = 0;
        for (facts, own) in &sessions {
            let docs: Vec<TurnDoc> = own.iter().map(turn_doc).collect();
            turns += docs.len() as u64;
            let family = facts
                .parent
                .is_none()
                .then(|| families.get(&facts.iri).copied().unwrap_or((0, i64::MIN)));
            let entry = self.entry_of(
                facts,
                &docs,
                forks.get(&facts.iri).copied().unwrap_or(0),
                family,
            );
            catalog
                .put_derived(facts.id.as_str(), Some(entry), Some(docs))
                .map_err(catalog_error)?;
        }
        catalog.rebuilt();
        catalog.refresh().map_err(catalog_error)?;
        Ok(ReindexReport {
            sessions: sessions.len() as u64,
            turns,
            millis: started.elapsed().as_millis() as u64,
        })
    }

    /// The own turns of `facts` as the catalog indexes them.
    fn own_turns(&self, facts: &SessionNode) -> Result<Vec<TurnDoc>> {
        let rdf = self.rdf();
        if self.across_network() {
            let span = [(facts, facts.own_start(), facts.length)];
            return Ok(rdf.span_turns(&span)?.iter().map(turn_doc).collect());
        }
        (facts.own_start()..facts.length)
            .map(|i| Ok(turn_doc(&rdf.turn(facts, i)?)))
            .collect()
    }

    /// A session's activity: its newest own turn's time, or its creation's.
    fn activity_of(&self, facts: &SessionNode) -> Result<i64> {
        let created = micros(facts.created.as_deref());
        if facts.length <= facts.own_start() {
            return Ok(created);
        }
        let last = self.rdf().turn(facts, facts.length - 1)?;
        Ok(micros(last.created_at.as_deref()).max(created))
    }
}

/// The fragment of `text` that best matches `query`, with its matches (its start when
/// nothing matches, such as a hit on a model name).
fn snippet_of(
    catalog: &Catalog,
    query: &dyn tantivy::query::Query,
    text: &str,
) -> Result<(String, Vec<(usize, usize)>)> {
    let (snippet, highlights) = catalog
        .snippet(query, text, SNIPPET_CHARS)
        .map_err(catalog_error)?;
    if snippet.is_empty() {
        return Ok((text.chars().take(SNIPPET_CHARS).collect(), highlights));
    }
    Ok((snippet, highlights))
}

/// A stored turn as the catalog indexes it.
fn turn_doc(t: &crate::model::Turn) -> TurnDoc {
    TurnDoc {
        index: t.index,
        role: t.role.as_str().to_string(),
        content: t.content.clone(),
        model: t.model.clone(),
        at: micros(t.created_at.as_deref()),
    }
}

/// A page of jobs or comparisons, newest first.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Items in all, all pages.
    pub total: u64,
    pub next: Option<String>,
}

/// The page of `keyed` (time in microseconds, id, item) after `cursor`, newest first.
pub(crate) fn keyset<T>(
    mut keyed: Vec<(i64, String, T)>,
    limit: Option<usize>,
    cursor: Option<&str>,
) -> Result<Page<T>> {
    let limit = limit_of(limit)?;
    keyed.sort_by(|a, b| (b.0, &b.1).cmp(&(a.0, &a.1)));
    let after = cursor
        .map(|c| {
            let (time, id) = c.split_once('.').ok_or_else(|| bad_cursor(c))?;
            let time: i64 = time.parse().map_err(|_| bad_cursor(c))?;
            Ok::<_, Error>((time, id.to_string()))
        })
        .transpose()?;
    let total = keyed.len() as u64;
    let start = after.map_or(0, |(time, id)| {
        keyed
            .iter()
            .position(|(t, i, _)| (*t, i) < (time, &id))
            .unwrap_or(keyed.len())
    });
    let mut items: Vec<(i64, String, T)> = keyed.into_iter().skip(start).take(limit + 1).collect();
    let next = (items.len() > limit).then(|| {
        items.truncate(limit);
        let (time, id, _) = &items[limit - 1];
        format!("{time}.{id}")
    });
    Ok(Page {
        items: items.into_iter().map(|(_, _, item)| item).collect(),
        total,
        next,
    })
}

impl Store {
    /// A page of regeneration jobs, newest first (`limit` default 50, at most 1,000).
    pub fn jobs_page(
        &self,
        limit: Option<usize>,
        cursor: Option<&str>,
    ) -> Result<Page<crate::model::Job>> {
        let keyed = self
            .jobs()?
            .into_iter()
            .map(|j| (micros(j.created_at.as_deref()), j.job.clone(), j))
            .collect();
        keyset(keyed, limit, cursor)
    }

    /// A page of the forks of session `id` ([`Store::branches`]), newest first (`limit`
    /// default 50, at most 1,000).
    pub fn branches_page(
        &self,
        id: &SessionId,
        limit: Option<usize>,
        cursor: Option<&str>,
    ) -> Result<Page<crate::model::BranchInfo>> {
        let keyed = self
            .branches(id)?
            .into_iter()
            .map(|b| (micros(b.created_at.as_deref()), b.session.to_string(), b))
            .collect();
        keyset(keyed, limit, cursor)
    }
}
