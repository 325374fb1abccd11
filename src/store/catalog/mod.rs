//! The catalog: a derived index of a store this process owns, for what must stay fast
//! however many sessions there are: pages of sessions (newest activity first, filtered
//! by principal, model, roots, parent, family or time) and search over turn contents,
//! titles, branch labels and models, words and phrases ranked by BM25.
//!
//! It has the record index's shape: written at commit (by the writes themselves, from
//! what they wrote), rebuildable from the RDF (`Store::reindex`), checked on read,
//! safe to delete, never the source of truth. One tantivy index holds a document per
//! session (its facts as lists show them: length, own turns, models, last activity,
//! fork counts) and a document per stored turn (its content, searchable; inherited
//! turns are their owner's, stored and indexed once).
//!
//! A write notes the sessions it changes in a journal before it commits and hands its
//! effects over after (see `journal.rs`), into a queue: it never waits for the index
//! writer, which readers hold while they commit; whoever takes the index writer next
//! puts what is queued in first (`writer.rs`). What cannot be told from a write alone
//! (a pop, a detach, an update, an import) makes its sessions *suspect*, and so does a
//! session that appears, goes or moves for the parents and roots whose counts it
//! changes; the next read derives them from the RDF (`Store::settle_catalog`) before it
//! answers. The index commits at most every second in the background, and before a
//! read that must see what was just written, so a search finds a turn appended a
//! moment ago. A commit made while the index must be rebuilt says so, and the next
//! open rebuilds it.

mod journal;
mod writer;

pub(crate) use writer::Pending;

use journal::{Journal, Line, Mark};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tantivy::collector::{Count, TopDocs};
use tantivy::query::{BooleanQuery, Occur, Query, QueryParser, RangeQuery, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, Value, FAST, INDEXED, STORED, STRING, TEXT,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

/// The journal's word for a write that may change any session (a SPARQL update).
pub(crate) const EVERYTHING: &str = "*";

/// The directory of the catalog inside a store's directory.
pub(crate) const DIR: &str = "forktrail-index";
/// Bumped when the documents change shape: an index of another version is rebuilt.
const VERSION: u32 = 1;
/// How often pending changes are committed when nothing reads them sooner.
const COMMIT_EVERY: Duration = Duration::from_secs(1);
/// The index writer's memory: it writes a segment whenever this fills.
const WRITER_HEAP: usize = 32 << 20;

/// What the catalog knows of one session: the facts lists show.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) id: String,
    pub(crate) parent: Option<String>,
    /// The root of its family (itself for a root).
    pub(crate) root: String,
    pub(crate) principal: Option<String>,
    pub(crate) title: Option<String>,
    pub(crate) branch: String,
    /// Microseconds since the Unix epoch.
    pub(crate) created: i64,
    /// The newest of its creation and its own turns' times.
    pub(crate) activity: i64,
    /// For a root, the newest activity in its family; for a fork, its own.
    pub(crate) family_activity: i64,
    pub(crate) length: u64,
    /// The index of its first own turn (0 for a root).
    pub(crate) own_start: u64,
    pub(crate) depth: u64,
    /// Direct children.
    pub(crate) forks: u64,
    /// For a root, the sessions below it (all depths).
    pub(crate) family: u64,
    /// The models its own turns are attributed to.
    pub(crate) models: BTreeSet<String>,
}

/// A stored turn as the catalog indexes it.
#[derive(Clone, Debug)]
pub(crate) struct TurnDoc {
    pub(crate) index: u64,
    pub(crate) role: String,
    pub(crate) content: String,
    pub(crate) model: Option<String>,
    /// Microseconds since the Unix epoch; 0 when unknown.
    pub(crate) at: i64,
}

impl TurnDoc {
    /// Turn `index`, about to be stored at `at`.
    pub(crate) fn of(index: u64, turn: &crate::model::NewTurn, at: i64) -> Self {
        Self {
            index,
            role: turn.role.as_str().to_string(),
            content: turn.content.clone(),
            model: turn.model.clone(),
            at,
        }
    }
}

/// What a committed write tells the catalog.
#[derive(Clone, Debug)]
pub(crate) enum Op {
    /// A session created (new, fork, import), with its facts.
    Created(Entry),
    /// Own turns appended to a session, in order.
    Appended {
        session: String,
        turns: Vec<TurnDoc>,
    },
    /// What the catalog knows of the session may be stale: derive it from the RDF.
    Suspect(String),
    /// The session is gone.
    Dropped(String),
    /// Anything may have changed: rebuild from the RDF.
    All,
}

/// The order of a page of sessions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum Order {
    /// Newest activity first (a root listed among roots only: its family's).
    #[default]
    Activity,
    /// Newest first by creation: stable while sessions gain turns.
    Created,
}

/// Which sessions a page lists.
#[derive(Clone, Debug, Default)]
pub(crate) struct Filter {
    pub(crate) principal: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) roots_only: bool,
    pub(crate) parent: Option<String>,
    /// Sessions of this family (its root included).
    pub(crate) family: Option<String>,
    /// Activity at or after this, in microseconds.
    pub(crate) since: Option<i64>,
}

/// Where a page starts: after this key (exclusive), in the page's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct After {
    pub(crate) key: i64,
    pub(crate) tie: u64,
}

/// One search hit.
#[derive(Clone, Debug)]
pub(crate) enum Hit {
    Turn {
        session: String,
        index: u64,
        score: f32,
    },
    Session {
        session: String,
        score: f32,
    },
}

impl Hit {
    /// The session it names, the turn's index (none for a session hit), its score.
    pub(crate) fn parts(&self) -> (String, Option<u64>, f32) {
        match self {
            Hit::Turn {
                session,
                index,
                score,
            } => (session.clone(), Some(*index), *score),
            Hit::Session { session, score } => (session.clone(), None, *score),
        }
    }
}

/// A search's hits (one page), how many there are in all, and the parsed query (for
/// re-checking a hit against the store's current content).
pub(crate) type Found = (Vec<Hit>, usize, Box<dyn Query>);

/// The catalog of one store.
pub(crate) struct Catalog {
    inner: Arc<Inner>,
    stop: Arc<AtomicBool>,
    committer: Option<std::thread::JoinHandle<()>>,
}

struct Inner {
    index: Index,
    reader: IndexReader,
    f: Fields,
    /// The index writer and what goes with it: held by readers for as long as an index
    /// commit takes, so a write never takes it (see [`Applied`]).
    state: Mutex<State>,
    /// Writes' effects, in commit order, waiting to be put in the index writer by the
    /// next reader, commit or derivation (which all take `state` first).
    applied: Mutex<Vec<Applied>>,
    /// Taken after `state` when both are; a write notes its sessions here alone.
    journal: Mutex<Option<Journal>>,
}

/// One committed write's effects, handed over without waiting for the index: its ops,
/// and the journal lines noted for their sessions (open until the ops are in).
struct Applied {
    ops: Vec<Op>,
    lines: Vec<(String, Line)>,
}

struct State {
    writer: IndexWriter,
    /// Entries written (`Some`) or removed (`None`) since the last commit, which the
    /// reader cannot see yet: what the catalog holds of a session is this, else what
    /// is committed.
    recent: HashMap<String, Option<Entry>>,
    /// Every document was deleted since the last commit (a rebuild): what is committed
    /// holds nothing any more.
    cleared: bool,
    dirty: bool,
    /// Sessions to derive from the RDF before the next read, with their journal lines.
    suspects: BTreeMap<String, Vec<Line>>,
    /// The whole index must be rebuilt from the RDF.
    stale: bool,
}

/// Declares `Fields`, the handle of each field of the index's schema, and `schema()`,
/// which builds the schema with them: each field once, its handle named as the field.
macro_rules! schema {
    ($($field:ident: $add:ident($options:expr)),* $(,)?) => {
        #[derive(Clone, Copy)]
        struct Fields {
            $($field: Field),*
        }

        fn schema() -> (Schema, Fields) {
            let mut b = Schema::builder();
            let f = Fields {
                $($field: b.$add(stringify!($field), $options)),*
            };
            (b.build(), f)
        }
    };
}

schema! {
    doc: add_text_field(STRING),
    ssid: add_text_field(STRING | STORED),
    tsid: add_text_field(STRING | STORED),
    tkey: add_text_field(STRING),
    parent: add_text_field(STRING | STORED),
    root: add_text_field(STRING | STORED),
    is_root: add_text_field(STRING),
    principal: add_text_field(STRING | STORED),
    model: add_text_field(STRING | STORED),
    models: add_text_field(TEXT),
    title: add_text_field(TEXT | STORED),
    branch: add_text_field(TEXT | STORED),
    content: add_text_field(TEXT),
    role: add_text_field(STRING | STORED),
    index: add_u64_field(STORED),
    created: add_i64_field(INDEXED | FAST | STORED),
    activity: add_i64_field(INDEXED | FAST | STORED),
    family_activity: add_i64_field(INDEXED | FAST | STORED),
    tie: add_u64_field(FAST),
    length: add_u64_field(STORED),
    own_start: add_u64_field(STORED),
    depth: add_u64_field(STORED),
    forks: add_u64_field(STORED),
    family: add_u64_field(STORED),
}

/// What an index commit records beside its segments.
#[derive(serde::Serialize, serde::Deserialize)]
struct Payload {
    version: u32,
    journal: Mark,
    /// The index was committed while it had to be rebuilt from the RDF (it was new, or
    /// a write could not say what it changed): it is not whole, and the next open
    /// rebuilds it. Absent in indexes written before it was recorded, which were whole.
    #[serde(default)]
    stale: bool,
}

/// A tie-breaker for sessions with the same time: stable, and unique in practice.
pub(crate) fn tie(id: &str) -> u64 {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(id.as_bytes());
    u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"))
}

fn text_of(doc: &TantivyDocument, field: Field) -> Option<String> {
    doc.get_first(field)
        .and_then(|v| v.as_str())
        .map(str::to_string)
}

fn u64_of(doc: &TantivyDocument, field: Field) -> u64 {
    doc.get_first(field).and_then(|v| v.as_u64()).unwrap_or(0)
}

fn i64_of(doc: &TantivyDocument, field: Field) -> i64 {
    doc.get_first(field).and_then(|v| v.as_i64()).unwrap_or(0)
}

/// The failure of a catalog operation, as text for the store's error.
pub(crate) type Failure = String;

fn failed(e: impl std::fmt::Display) -> Failure {
    e.to_string()
}

impl Catalog {
    /// The catalog of a store in memory.
    pub(crate) fn in_memory() -> Result<Self, Failure> {
        let (schema, f) = schema();
        let index = Index::create_in_ram(schema);
        Self::start(index, f, None)
    }

    /// Opens the catalog under store directory `store`, creating it if missing. An
    /// index that cannot be opened, or of another version, is removed and the new one
    /// marked for a rebuild; sessions in the journal past the last commit are suspect.
    pub(crate) fn open(store: &Path) -> Result<Self, Failure> {
        let dir = store.join(DIR);
        let tantivy_dir = dir.join("tantivy");
        match Self::open_existing(&dir, &tantivy_dir) {
            Ok(catalog) => Ok(catalog),
            Err(_) => {
                // Derived: whatever is there goes, and is rebuilt from the RDF.
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir_all(&tantivy_dir).map_err(failed)?;
                let (schema, f) = schema();
                let index = Index::create_in_dir(&tantivy_dir, schema).map_err(failed)?;
                let (journal, _) = Journal::open(&dir, Mark::default()).map_err(failed)?;
                let catalog = Self::start(index, f, Some(journal))?;
                catalog.state().stale = true;
                Ok(catalog)
            }
        }
    }

    fn open_existing(dir: &Path, tantivy_dir: &Path) -> Result<Self, Failure> {
        let index = Index::open_in_dir(tantivy_dir).map_err(failed)?;
        let metas = index.load_metas().map_err(failed)?;
        let payload: Payload = match &metas.payload {
            Some(text) => serde_json::from_str(text).map_err(failed)?,
            None => return Err("no payload: never committed".into()),
        };
        if payload.version != VERSION {
            return Err(format!("version {}", payload.version));
        }
        let (_, f) = schema();
        if index.schema() != schema().0 {
            return Err("another schema".into());
        }
        let (mut journal, replay) = Journal::open(dir, payload.journal).map_err(failed)?;
        let lines = journal.note_open(&replay).map_err(failed)?;
        let catalog = Self::start(index, f, Some(journal))?;
        // A cheap read proves the segments open.
        catalog.inner.reader.searcher().num_docs();
        {
            let mut state = catalog.state();
            state.stale = payload.stale;
            for (id, line) in replay.into_iter().zip(lines) {
                if id == EVERYTHING {
                    state.stale = true;
                }
                state.suspects.entry(id).or_default().push(line);
            }
        }
        Ok(catalog)
    }

    fn start(index: Index, f: Fields, journal: Option<Journal>) -> Result<Self, Failure> {
        let writer = index
            .writer_with_num_threads(1, WRITER_HEAP)
            .map_err(failed)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(failed)?;
        let inner = Arc::new(Inner {
            index,
            reader,
            f,
            state: Mutex::new(State {
                writer,
                recent: HashMap::new(),
                cleared: false,
                dirty: false,
                suspects: BTreeMap::new(),
                stale: false,
            }),
            applied: Mutex::default(),
            journal: Mutex::new(journal),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let committer = {
            let (inner, stop) = (Arc::clone(&inner), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("forktrail-catalog".into())
                .spawn(move || {
                    while !stop.load(Ordering::Acquire) {
                        std::thread::park_timeout(COMMIT_EVERY);
                        let mut state = inner.lock();
                        if state.dirty {
                            // A failed commit is tried again at the next interval or
                            // read, which reports it.
                            let _ = inner.commit(&mut state);
                        }
                    }
                })
                .map_err(failed)?
        };
        Ok(Self {
            inner,
            stop,
            committer: Some(committer),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.lock()
    }

    /// The sessions to derive from the RDF before the next read, and whether the whole
    /// index must be rebuilt.
    pub(crate) fn pending(&self) -> (Vec<String>, bool) {
        let state = self.state();
        (state.suspects.keys().cloned().collect(), state.stale)
    }

    /// Puts a session's entry as derived from the RDF, and its own turns when given
    /// (replacing those indexed); `None` removes the session. Clears it as a suspect, and
    /// makes suspect the sessions whose entries it changes: the parents and roots it
    /// left or joined, its root when its activity went back.
    pub(crate) fn put_derived(
        &self,
        id: &str,
        entry: Option<Entry>,
        turns: Option<Vec<TurnDoc>>,
    ) -> Result<(), Failure> {
        let inner = &self.inner;
        let mut state = inner.lock();
        let before = inner.entry(&state, id)?;
        // A session that appeared, went or moved (a detach) changes the counts of the
        // parents and roots it left and joined, which no write told: derived too.
        let placement = |e: &Entry| [e.parent.clone(), Some(e.root.clone())];
        let moved = match (&before, &entry) {
            (Some(old), Some(new)) => placement(old) != placement(new),
            (None, None) => false,
            _ => true,
        };
        if let (false, Some(old), Some(new)) = (moved, &before, &entry) {
            // Its activity went back (a pop): its family's newest may be another's now.
            if new.activity < old.activity && new.root != id {
                inner.hold(&mut state, &new.root);
            }
            // It went on (another process appended to it): so did its family.
            if new.activity > old.activity && new.root != id {
                let activity = new.activity;
                inner.patch(&mut state, &new.root, |r| {
                    r.family_activity = r.family_activity.max(activity)
                })?;
            }
        }
        // A rebuild puts every session anyway.
        if moved && !state.cleared {
            let touched: BTreeSet<String> = before
                .iter()
                .chain(&entry)
                .flat_map(placement)
                .flatten()
                .filter(|other| other != id)
                .collect();
            for other in touched {
                inner.hold(&mut state, &other);
            }
        }
        match entry {
            Some(entry) => inner.write_entry(&mut state, entry),
            None => {
                state
                    .writer
                    .delete_term(Term::from_field_text(inner.f.ssid, id));
                state.recent.insert(id.to_string(), None);
                state.dirty = true;
            }
        }
        if let Some(turns) = turns {
            state
                .writer
                .delete_term(Term::from_field_text(inner.f.tsid, id));
            for turn in turns {
                inner.add_turn(&mut state, id, &turn)?;
            }
            state.dirty = true;
        }
        if let Some(lines) = state.suspects.remove(id) {
            inner.done(lines);
        }
        Ok(())
    }

    /// What the catalog holds of session `id`.
    pub(crate) fn entry(&self, id: &str) -> Result<Option<Entry>, Failure> {
        let state = self.state();
        self.inner.entry(&state, id)
    }

    /// About how many sessions and turns the committed index holds (deleted documents
    /// not yet merged away included).
    pub(crate) fn sizes(&self) -> (u64, u64) {
        let searcher = self.inner.reader.searcher();
        let f = self.inner.f;
        let count = |value: &str| {
            searcher
                .doc_freq(&Term::from_field_text(f.doc, value))
                .unwrap_or(0)
        };
        (count("session"), count("turn"))
    }

    /// Marks `ids` suspect: derived from the RDF before the next read.
    pub(crate) fn suspect(&self, ids: &[String]) {
        let mut state = self.state();
        for id in ids {
            self.inner.hold(&mut state, id);
        }
    }

    /// Marks the whole index for a rebuild from the RDF before the next read (the
    /// store was written behind forktrail's back).
    pub(crate) fn stale(&self) {
        self.state().stale = true;
    }

    /// Empties the index before a rebuild (the rebuild then puts every session).
    pub(crate) fn clear(&self) -> Result<(), Failure> {
        let mut state = self.state();
        // What is not committed yet is dropped first: deleting all documents removes
        // the committed ones only.
        state.writer.rollback().map_err(failed)?;
        state.writer.delete_all_documents().map_err(failed)?;
        state.recent.clear();
        state.cleared = true;
        state.dirty = true;
        Ok(())
    }

    /// Marks the rebuild done: what was suspect before it is covered.
    pub(crate) fn rebuilt(&self) {
        let mut state = self.state();
        state.stale = false;
        let suspects = std::mem::take(&mut state.suspects);
        self.inner.done(suspects.into_values().flatten());
    }

    /// Commits what is pending (if anything) so that reads see it.
    pub(crate) fn refresh(&self) -> Result<(), Failure> {
        let mut state = self.state();
        if state.dirty {
            self.inner.commit(&mut state)?;
        }
        Ok(())
    }

    /// A page of sessions matching `filter` in `order`, after `after`: up to `limit`
    /// entries, and the key to continue after when there are more. Reads what is
    /// committed ([`Catalog::refresh`] first).
    pub(crate) fn page(
        &self,
        filter: &Filter,
        order: Order,
        after: Option<After>,
        limit: usize,
    ) -> Result<(Vec<Entry>, Option<After>), Failure> {
        let f = self.inner.f;
        let key_field = match (order, filter.roots_only) {
            (Order::Created, _) => "created",
            (Order::Activity, true) => "family_activity",
            (Order::Activity, false) => "activity",
        };
        let mut must = self.filter_clauses(filter);
        let key = match key_field {
            "created" => f.created,
            "family_activity" => f.family_activity,
            _ => f.activity,
        };
        if let Some(after) = after {
            must.push(Box::new(RangeQuery::new(
                Bound::Unbounded,
                Bound::Included(Term::from_field_i64(key, after.key)),
            )));
        }
        let query = BooleanQuery::new(must.into_iter().map(|q| (Occur::Must, q)).collect());
        let searcher = self.inner.reader.searcher();
        let field_name = key_field.to_string();
        let collector =
            TopDocs::with_limit(limit + 1).order_by(move |segment: &tantivy::SegmentReader| {
                let fast = segment.fast_fields();
                let keys = fast
                    .i64(&field_name)
                    .map(|c| c.first_or_default_col(i64::MIN));
                let ties = fast.u64("tie").map(|c| c.first_or_default_col(0));
                move |doc: tantivy::DocId| {
                    let (Ok(keys), Ok(ties)) = (&keys, &ties) else {
                        return (i64::MIN, 0u64);
                    };
                    let k = (keys.get_val(doc), ties.get_val(doc));
                    match after {
                        // At the cursor's time only what sorts after it (below it).
                        Some(a) if k.0 == a.key && k.1 >= a.tie => (i64::MIN, 0),
                        _ => k,
                    }
                }
            });
        let found = searcher.search(&query, &collector).map_err(failed)?;
        // Excluded documents sort last, so more than `limit` valid ones means more.
        let valid: Vec<_> = found
            .into_iter()
            .filter(|((k, _), _)| *k != i64::MIN)
            .collect();
        let more = valid.len() > limit;
        let mut out = Vec::with_capacity(limit.min(valid.len()));
        let mut next = None;
        for ((key, tie), address) in valid.into_iter().take(limit) {
            let doc: TantivyDocument = searcher.doc(address).map_err(failed)?;
            out.push(self.inner.decode(&doc));
            next = Some(After { key, tie });
        }
        Ok((out, if more { next } else { None }))
    }

    /// The clauses a session matching `filter` meets.
    fn filter_clauses(&self, filter: &Filter) -> Vec<Box<dyn Query>> {
        let f = self.inner.f;
        let mut must: Vec<Box<dyn Query>> = vec![term(f.doc, "session")];
        for (field, value) in [
            (f.principal, &filter.principal),
            (f.model, &filter.model),
            (f.parent, &filter.parent),
            (f.root, &filter.family),
        ] {
            if let Some(v) = value {
                must.push(term(field, v));
            }
        }
        if filter.roots_only {
            must.push(term(f.is_root, "yes"));
        }
        if let Some(since) = filter.since {
            let activity = if filter.roots_only {
                f.family_activity
            } else {
                f.activity
            };
            must.push(Box::new(RangeQuery::new(
                Bound::Included(Term::from_field_i64(activity, since)),
                Bound::Unbounded,
            )));
        }
        must
    }

    /// How many sessions match `filter`.
    pub(crate) fn count(&self, filter: &Filter) -> Result<u64, Failure> {
        let must = self.filter_clauses(filter);
        let query = BooleanQuery::new(must.into_iter().map(|q| (Occur::Must, q)).collect());
        let searcher = self.inner.reader.searcher();
        Ok(searcher.search(&query, &Count).map_err(failed)? as u64)
    }

    /// Search hits for `text` (words all required, `"phrases"` in quotes), best first,
    /// from `offset`, up to `limit`; and how many there are.
    pub(crate) fn search(&self, text: &str, offset: usize, limit: usize) -> Result<Found, Failure> {
        let f = self.inner.f;
        let mut parser = QueryParser::for_index(
            &self.inner.index,
            vec![f.content, f.title, f.branch, f.models],
        );
        parser.set_conjunction_by_default();
        let (query, _) = parser.parse_query_lenient(text);
        let searcher = self.inner.reader.searcher();
        let (found, total) = searcher
            .search(
                &query,
                &(
                    TopDocs::with_limit(limit.max(1))
                        .and_offset(offset)
                        .order_by_score(),
                    Count,
                ),
            )
            .map_err(failed)?;
        let mut hits = Vec::with_capacity(found.len());
        for (score, address) in found.into_iter().take(limit) {
            let doc: TantivyDocument = searcher.doc(address).map_err(failed)?;
            if let Some(session) = text_of(&doc, f.tsid) {
                hits.push(Hit::Turn {
                    session,
                    index: u64_of(&doc, f.index),
                    score,
                });
            } else if let Some(session) = text_of(&doc, f.ssid) {
                hits.push(Hit::Session { session, score });
            }
        }
        Ok((hits, total, query))
    }

    /// The highlighted fragment of `text` that best matches `query` (from
    /// [`Catalog::search`]): the fragment and the byte ranges of its matches.
    pub(crate) fn snippet(
        &self,
        query: &dyn Query,
        text: &str,
        chars: usize,
    ) -> Result<(String, Vec<(usize, usize)>), Failure> {
        let searcher = self.inner.reader.searcher();
        let mut generator =
            tantivy::snippet::SnippetGenerator::create(&searcher, query, self.inner.f.content)
                .map_err(failed)?;
        generator.set_max_num_chars(chars);
        let snippet = generator.snippet(text);
        let ranges = snippet
            .highlighted()
            .iter()
            .map(|r| (r.start, r.end))
            .collect();
        Ok((snippet.fragment().to_string(), ranges))
    }
}

impl Drop for Catalog {
    /// Commits what is pending, so that the next open has nothing to replay.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.committer.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
        let mut state = self.inner.lock();
        if state.dirty {
            let _ = self.inner.commit(&mut state);
        }
    }
}

fn term(field: Field, value: &str) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_text(field, value),
        IndexRecordOption::Basic,
    ))
}
