//! Export and import: forktrail's own TriG/N-Quads (lossless), Turtle for one session,
//! JSONL replay records, PROV-O for PROV tools; formats told apart by their content.

use crate::error::{Error, Result};
use crate::model::{Label, SessionId};
use crate::store::Store;
use crate::vocab::{ft, prov, rdf, rdfs};
use oxigraph::io::{RdfFormat, RdfParser, RdfSerializer};
use oxigraph::model::{GraphName, NamedNode, Quad, Term, Triple};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::str::FromStr;

/// What `export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// TriG: one graph per session (lossless; `import` reads it back).
    TriG,
    /// N-Quads (lossless; `import` reads it back).
    NQuads,
    /// Turtle: the triples of one session's graph.
    Turtle,
    /// One replay record per line, for one session.
    Jsonl,
    /// The assembled replay of one session as an OpenAI chat messages JSON array.
    OpenAi,
    /// PROV-O for PROV tools, as Turtle: one graph (a session's chain, or everything)
    /// with the PROV types and relations the ontology implies written out (every turn
    /// a `prov:Entity`, every model a `prov:Agent`, `ft:parentSession` as
    /// `prov:wasDerivedFrom`, …), since PROV tools do no inference.
    Prov,
}

impl ExportFormat {
    /// Every export format's name, as `--format` takes it.
    pub const NAMES: &'static [&'static str] =
        &["trig", "nquads", "turtle", "jsonl", "openai", "prov"];
}

impl FromStr for ExportFormat {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "trig" => Self::TriG,
            "nquads" => Self::NQuads,
            "turtle" => Self::Turtle,
            "jsonl" => Self::Jsonl,
            "openai" => Self::OpenAi,
            "prov" => Self::Prov,
            _ => {
                return Err(Error::InvalidInput(format!(
                    "unknown export format {s:?} (expected one of: {})",
                    Self::NAMES.join(", ")
                )))
            }
        })
    }
}

/// What `import` reads: forktrail's own exports and the transcripts of other tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportFormat {
    /// forktrail's TriG export.
    TriG,
    /// forktrail's N-Quads export.
    NQuads,
    /// OpenAI chat messages: a JSON array, or one message per line (JSONL).
    OpenAi,
    /// A Claude Code session log (JSONL), or a Claude Code project folder.
    ClaudeCode,
}

impl ImportFormat {
    /// Every import format's name, as `--format` takes it.
    pub const NAMES: &'static [&'static str] = &["trig", "nquads", "openai", "claude-code"];

    /// The format `content` is written in, told from its first lines, or `None` when it
    /// looks like none of them.
    ///
    /// ```
    /// use forktrail::ImportFormat;
    /// assert_eq!(ImportFormat::sniff(b"[{\"role\": \"user\", \"content\": \"hi\"}]"), Some(ImportFormat::OpenAi));
    /// assert_eq!(ImportFormat::sniff(b"{\"role\": \"user\", \"content\": \"hi\"}\n"), Some(ImportFormat::OpenAi));
    /// assert_eq!(ImportFormat::sniff(b"{\"type\": \"user\", \"uuid\": \"u1\"}\n"), Some(ImportFormat::ClaudeCode));
    /// assert_eq!(ImportFormat::sniff(b"<urn:s> <urn:p> <urn:o> <urn:g> .\n"), Some(ImportFormat::NQuads));
    /// assert_eq!(ImportFormat::sniff(b"@prefix ft: <https://w3id.org/forktrail/ns#> .\n"), Some(ImportFormat::TriG));
    /// assert_eq!(ImportFormat::sniff(b"Dear diary,"), None);
    /// ```
    pub fn sniff(content: &[u8]) -> Option<Self> {
        const WINDOW: usize = 1 << 20;
        let window = String::from_utf8_lossy(&content[..content.len().min(WINDOW)]);
        // Past the window, the last line read may be cut: keep whole lines only, unless
        // the first line alone is longer than the window.
        let (text, first_is_cut) = match window.rfind('\n') {
            Some(end) if content.len() > WINDOW => (&window[..end], false),
            None if content.len() > WINDOW => (&window[..], true),
            _ => (&window[..], false),
        };
        let mut lines = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'));
        let first = lines.next()?;
        if first.starts_with('[') {
            return Some(Self::OpenAi);
        }
        if first.starts_with('{') {
            // One JSON object per line: a Claude Code line has a "type" and the ids
            // that chain lines (its first lines may be snapshots that have neither);
            // an OpenAI message has a "role".
            let claude_keys = [
                "uuid",
                "parentUuid",
                "sessionId",
                "leafUuid",
                "isSidechain",
                "messageId",
            ];
            if first_is_cut {
                // One line longer than the window: judge by the keys it shows.
                let has = |key: &str| first.contains(&format!("\"{key}\":"));
                if has("type") && claude_keys.iter().any(|k| has(k)) {
                    return Some(Self::ClaudeCode);
                }
                return has("role").then_some(Self::OpenAi);
            }
            for line in std::iter::once(first).chain(lines).take(50) {
                // A line that is not an object says nothing either way.
                let Ok(serde_json::Value::Object(object)) = serde_json::from_str(line) else {
                    continue;
                };
                if object.get("type").is_some_and(serde_json::Value::is_string)
                    && claude_keys.iter().any(|k| object.contains_key(*k))
                {
                    return Some(Self::ClaudeCode);
                }
                if object.contains_key("role") {
                    return Some(Self::OpenAi);
                }
            }
            return None;
        }
        let lower = first.to_ascii_lowercase();
        if ["@prefix", "@base", "prefix ", "base ", "graph "]
            .iter()
            .any(|k| lower.starts_with(k))
        {
            return Some(Self::TriG);
        }
        if first.starts_with('<') || first.starts_with("_:") {
            // A whole N-Quads statement on the line; anything else (a graph block, a
            // Turtle-style statement) is TriG. A line longer than the window is judged
            // by what it shows: a TriG graph block opens with `{` early.
            if first_is_cut {
                return Some(if first.contains('{') {
                    Self::TriG
                } else {
                    Self::NQuads
                });
            }
            let nquads = RdfParser::from_format(RdfFormat::NQuads)
                .for_slice(first.as_bytes())
                .collect::<std::result::Result<Vec<_>, _>>();
            return Some(match nquads {
                Ok(quads) if !quads.is_empty() => Self::NQuads,
                _ => Self::TriG,
            });
        }
        None
    }

    /// The sniffed format of `content`, or an error naming `what` and the choices.
    pub fn sniff_or_explain(content: &[u8], what: &str) -> Result<Self> {
        Self::sniff(content).ok_or_else(|| {
            Error::InvalidInput(format!(
                "cannot tell the format of {what}; pass --format one of {}",
                Self::NAMES.join(", ")
            ))
        })
    }
}

impl FromStr for ImportFormat {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "trig" => Self::TriG,
            "nquads" => Self::NQuads,
            "openai" => Self::OpenAi,
            "claude-code" => Self::ClaudeCode,
            _ => {
                return Err(Error::InvalidInput(format!(
                    "unknown import format {s:?} (expected one of: {})",
                    Self::NAMES.join(", ")
                )))
            }
        })
    }
}

fn serializer(format: RdfFormat) -> RdfSerializer {
    let mut s = RdfSerializer::from_format(format);
    if matches!(format, RdfFormat::TriG | RdfFormat::Turtle) {
        for (prefix, iri) in [
            ("ft", ft::NS),
            ("prov", "http://www.w3.org/ns/prov#"),
            ("dcterms", "http://purl.org/dc/terms/"),
            ("rdfs", "http://www.w3.org/2000/01/rdf-schema#"),
            ("xsd", "http://www.w3.org/2001/XMLSchema#"),
        ] {
            s = s.with_prefix(prefix, iri).expect("valid prefix");
        }
    }
    s
}

/// The PROV-O super-classes and super-properties of every class and property, by
/// transitive `rdfs:subClassOf` / `rdfs:subPropertyOf`: the ontology's own statements
/// plus PROV-O's (`prov:SoftwareAgent` and `prov:Person` are `prov:Agent`s). Only PROV
/// terms are kept: they are what PROV tools read.
type Entailments = BTreeMap<NamedNode, Vec<NamedNode>>;

fn prov_entailments() -> (Entailments, Entailments) {
    let mut sub_class: Vec<(NamedNode, NamedNode)> = vec![
        (prov::SOFTWARE_AGENT.into_owned(), prov::AGENT.into_owned()),
        (prov::PERSON.into_owned(), prov::AGENT.into_owned()),
    ];
    let mut sub_property: Vec<(NamedNode, NamedNode)> = Vec::new();
    for quad in RdfParser::from_format(RdfFormat::Turtle).for_slice(crate::ONTOLOGY.as_bytes()) {
        let Ok(quad) = quad else { continue };
        let (oxigraph::model::NamedOrBlankNode::NamedNode(s), Term::NamedNode(o)) =
            (quad.subject, quad.object)
        else {
            continue;
        };
        if quad.predicate == rdfs::SUB_CLASS_OF {
            sub_class.push((s, o));
        } else if quad.predicate == rdfs::SUB_PROPERTY_OF {
            sub_property.push((s, o));
        }
    }
    let closure = |pairs: &[(NamedNode, NamedNode)]| -> Entailments {
        let mut out = Entailments::new();
        for (start, _) in pairs {
            let mut found: Vec<NamedNode> = Vec::new();
            let mut todo = vec![start.clone()];
            while let Some(term) = todo.pop() {
                for (s, o) in pairs {
                    if *s == term && !found.contains(o) {
                        found.push(o.clone());
                        todo.push(o.clone());
                    }
                }
            }
            found.retain(|t| t.as_str().starts_with(prov::NS));
            out.insert(start.clone(), found);
        }
        out
    };
    (closure(&sub_class), closure(&sub_property))
}

impl Store {
    /// Checks imported sessions the way `load` and `fork` would, in a scratch store that
    /// holds the file's graphs and the session nodes of their ancestors in this store:
    /// ids match their IRIs, labels are valid and unique among siblings, chains have no
    /// cycle, no missing parent and no more than 32 levels, fork points are in range.
    fn validate_import(
        &self,
        quads: &[Quad],
        ids: &BTreeSet<String>,
        parents: &[(String, NamedNode)],
    ) -> Result<()> {
        let scratch = Store::in_memory()?.with_base_iri(&self.iris.base)?;
        scratch.inner.extend(quads.iter().cloned())?;
        let mut copied = BTreeSet::new();
        for (_, parent) in parents {
            let mut next = Some(parent.clone());
            while let Some(p) = next.take() {
                if ids.contains(&self.iris.session_id(p.as_ref()).unwrap_or_default())
                    || !copied.insert(p.clone())
                {
                    break;
                }
                let Some(f) = self.facts_of(p.as_ref())? else {
                    break;
                };
                for quad in self.inner.quads_for_pattern(
                    Some(p.as_ref().into()),
                    None,
                    None,
                    Some(p.as_ref().into()),
                ) {
                    scratch.inner.insert(&quad?)?;
                }
                next = f.parent;
            }
        }
        let mut sibling_labels = BTreeSet::new();
        for id in ids {
            let session = SessionId::new(id.clone())?;
            let facts = scratch.require(&session)?;
            if facts.id != *id {
                return Err(Error::InvalidInput(format!(
                    "import: graph of session {id} declares ft:sessionId {:?}",
                    facts.id
                )));
            }
            let label = Label::new(facts.branch.clone())?;
            scratch.chain(&session)?;
            let Some(parent) = &facts.parent else {
                continue;
            };
            let parent_id = self.iris.session_id(parent.as_ref()).unwrap_or_default();
            let parent_len = match self.facts_of(parent.as_ref())? {
                Some(here) => {
                    if let Some(existing) = self.child_with_label(parent, &label)? {
                        return Err(Error::DuplicateLabel {
                            parent: parent_id,
                            label: label.to_string(),
                            existing,
                        });
                    }
                    here.length
                }
                None => scratch.require(&SessionId::new(parent_id.clone())?)?.length,
            };
            if !sibling_labels.insert((parent_id.clone(), label.to_string())) {
                return Err(Error::DuplicateLabel {
                    parent: parent_id,
                    label: label.to_string(),
                    existing: format!("another session of the import than {id}"),
                });
            }
            let k = facts.own_start();
            if k > parent_len {
                return Err(Error::IndexOutOfRange {
                    session: parent_id,
                    index: k.into(),
                    valid: format!("0..={parent_len} (fork point of {id})"),
                });
            }
        }
        Ok(())
    }

    /// The triples of `graphs` merged into one graph (a set: an agent declared in
    /// many graphs appears once), with the PROV-O classes and properties the ontology
    /// and PROV-O imply added, as Turtle.
    fn write_prov(&self, graphs: &[NamedNode], out: &mut impl Write) -> Result<()> {
        let write_err = |e: std::io::Error| Error::io("cannot write the export", e);
        let (classes, properties) = prov_entailments();
        let mut triples: std::collections::HashSet<Triple> = std::collections::HashSet::new();
        for graph in graphs {
            for quad in self
                .inner
                .quads_for_pattern(None, None, None, Some(graph.into()))
            {
                let triple: Triple = quad?.into();
                if triple.predicate == rdf::TYPE {
                    if let Term::NamedNode(class) = &triple.object {
                        for sup in classes.get(class).into_iter().flatten() {
                            triples.insert(Triple::new(
                                triple.subject.clone(),
                                rdf::TYPE,
                                sup.clone(),
                            ));
                        }
                    }
                }
                for sup in properties.get(&triple.predicate).into_iter().flatten() {
                    triples.insert(Triple::new(
                        triple.subject.clone(),
                        sup.clone(),
                        triple.object.clone(),
                    ));
                }
                triples.insert(triple);
            }
        }
        // Sorted, so the same store exports the same text and subjects come together.
        let mut triples: Vec<Triple> = triples.into_iter().collect();
        triples.sort_by_cached_key(|t| t.to_string());
        let mut w = serializer(RdfFormat::Turtle).for_writer(out);
        for triple in &triples {
            w.serialize_triple(triple).map_err(write_err)?;
        }
        w.finish().map_err(write_err)?;
        Ok(())
    }

    /// Writes one session (or, with `None`, every session) in `format`.
    ///
    /// TriG and N-Quads keep each session in its graph and read back losslessly with
    /// [`Store::import`]; exporting one fork exports only its own graph, so import it
    /// where its parent exists (or export everything).
    pub fn export(
        &self,
        session: Option<&SessionId>,
        format: ExportFormat,
        mut out: impl Write,
    ) -> Result<()> {
        let write_err = |e: std::io::Error| Error::io("cannot write the export", e);
        let graphs: Vec<NamedNode> = match session {
            Some(id) => vec![self.require(id)?.iri],
            None => self
                .list()?
                .iter()
                .map(|s| self.iris.session(&s.session))
                .collect(),
        };
        match format {
            ExportFormat::Jsonl => {
                let Some(id) = session else {
                    return Err(Error::InvalidInput(
                        "jsonl export needs a SESSION (replay records of one session)".into(),
                    ));
                };
                for record in self.replay(id, None)? {
                    serde_json::to_writer(&mut out, &record).map_err(|e| write_err(e.into()))?;
                    out.write_all(b"\n").map_err(write_err)?;
                }
                return Ok(());
            }
            ExportFormat::OpenAi => {
                let Some(id) = session else {
                    return Err(Error::InvalidInput(
                        "openai export needs a SESSION (its messages in order)".into(),
                    ));
                };
                let messages = self.export_openai(id)?;
                serde_json::to_writer_pretty(&mut out, &messages)
                    .map_err(|e| write_err(e.into()))?;
                out.write_all(b"\n").map_err(write_err)?;
            }
            ExportFormat::Prov => {
                let graphs: Vec<NamedNode> = match session {
                    // The chain: what the session's turns and lineage point into.
                    Some(id) => self.chain(id)?.into_iter().map(|f| f.iri).collect(),
                    None => graphs,
                };
                self.write_prov(&graphs, &mut out)?;
            }
            ExportFormat::Turtle => {
                let (Some(_), [graph]) = (session, graphs.as_slice()) else {
                    return Err(Error::InvalidInput(
                        "turtle export holds one graph: name a SESSION, or use trig".into(),
                    ));
                };
                let mut w = serializer(RdfFormat::Turtle).for_writer(&mut out);
                for quad in self
                    .inner
                    .quads_for_pattern(None, None, None, Some(graph.into()))
                {
                    w.serialize_triple(quad?.as_ref()).map_err(write_err)?;
                }
                w.finish().map_err(write_err)?;
            }
            ExportFormat::TriG | ExportFormat::NQuads => {
                let format = if format == ExportFormat::TriG {
                    RdfFormat::TriG
                } else {
                    RdfFormat::NQuads
                };
                let mut w = serializer(format).for_writer(&mut out);
                for graph in &graphs {
                    for quad in self
                        .inner
                        .quads_for_pattern(None, None, None, Some(graph.into()))
                    {
                        w.serialize_quad(&quad?).map_err(write_err)?;
                    }
                }
                w.finish().map_err(write_err)?;
            }
        }
        out.flush().map_err(write_err)
    }

    /// Imports `content` in `format`, or in the format its content shows when `None`
    /// (see [`ImportFormat::sniff`]), all or nothing: forktrail's own TriG or N-Quads,
    /// an OpenAI transcript (one new session) or a Claude Code log.
    pub fn import_with(
        &self,
        content: &[u8],
        format: Option<ImportFormat>,
        options: &crate::TranscriptOptions<'_>,
    ) -> Result<crate::TranscriptReport> {
        let format = match format {
            Some(format) => format,
            None => ImportFormat::sniff_or_explain(content, "the input")?,
        };
        let text = || {
            std::str::from_utf8(content).map_err(|e| {
                Error::InvalidInput(format!(
                    "the input is not valid UTF-8 (invalid byte at offset {})",
                    e.valid_up_to()
                ))
            })
        };
        match format {
            ImportFormat::OpenAi => {
                self.import_openai(text()?, crate::NewSession::default(), options)
            }
            ImportFormat::ClaudeCode => self.import_claude_code(text()?, options),
            rdf => Ok(crate::TranscriptReport {
                sessions: self.import(content, rdf)?,
                ..Default::default()
            }),
        }
    }

    /// Reads forktrail's own TriG/N-Quads export and adds its sessions, all or none.
    /// Refuses sessions that already exist, graphs that are not session graphs under
    /// this store's base IRI, and forks whose parent is neither in the file nor here.
    /// Returns the imported session ids.
    ///
    /// Transcripts (OpenAI, Claude Code) are read whole and imported with default
    /// options; [`Store::import_with`] returns their full report.
    pub fn import(&self, mut input: impl Read, format: ImportFormat) -> Result<Vec<String>> {
        let format = match format {
            ImportFormat::TriG => RdfFormat::TriG,
            ImportFormat::NQuads => RdfFormat::NQuads,
            transcript => {
                let mut bytes = Vec::new();
                input
                    .read_to_end(&mut bytes)
                    .map_err(|e| Error::io("cannot read the import", e))?;
                let options = crate::TranscriptOptions::default();
                return Ok(self
                    .import_with(&bytes, Some(transcript), &options)?
                    .sessions);
            }
        };
        let mut graphs: BTreeMap<NamedNode, Vec<Quad>> = BTreeMap::new();
        for quad in RdfParser::from_format(format).for_reader(input) {
            let quad = quad.map_err(|e| Error::Parse {
                what: "the import".into(),
                detail: e.to_string(),
            })?;
            let GraphName::NamedNode(g) = &quad.graph_name else {
                return Err(Error::InvalidInput(format!(
                    "import: the triple {} is outside any session graph",
                    quad
                )));
            };
            graphs.entry(g.clone()).or_default().push(quad);
        }
        let _guard = self.write_guard();
        let mut ids = BTreeSet::new();
        let mut parents = Vec::new();
        for (graph, quads) in &graphs {
            let here = |q: &&Quad| q.subject.to_string() == graph.to_string();
            let is_session = quads.iter().filter(here).any(|q| {
                q.predicate == rdf::TYPE && q.object == Term::from(ft::SESSION.into_owned())
            });
            let id = self
                .iris
                .session_id(graph.as_ref())
                .filter(|_| is_session)
                .ok_or_else(|| {
                    Error::InvalidInput(format!(
                        "import: graph {graph} is not a forktrail session graph under base {}",
                        self.iris.base
                    ))
                })?;
            if self.exists(&SessionId::new(id.clone())?)? {
                return Err(Error::Conflict(format!(
                    "session {id} already exists in the store; delete it first or import \
                     into another store"
                )));
            }
            for q in quads.iter().filter(here) {
                if q.predicate == ft::PARENT_SESSION {
                    if let Term::NamedNode(p) = &q.object {
                        parents.push((id.clone(), p.clone()));
                    }
                }
            }
            ids.insert(id);
        }
        let all: Vec<Quad> = graphs.into_values().flatten().collect();
        self.validate_import(&all, &ids, &parents)?;
        self.commit(&all, &[])?;
        // Imported ids may be ones deleted earlier: drop whatever was known of them.
        for id in &ids {
            self.cache().forget(self.iris.session(id).as_str());
        }
        Ok(ids.into_iter().collect())
    }
}
