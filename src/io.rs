//! Export and import: forktrail's own TriG/N-Quads (lossless), Turtle for one session,
//! JSONL replay records.

use crate::error::{Error, Result};
use crate::model::{Label, SessionId};
use crate::store::Store;
use crate::vocab::{ft, rdf};
use oxigraph::io::{RdfFormat, RdfParser, RdfSerializer};
use oxigraph::model::{GraphName, NamedNode, Quad, Term};
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
            _ => {
                return Err(Error::InvalidInput(format!(
                    "unknown export format {s:?} (expected trig, nquads, turtle, jsonl or openai)"
                )))
            }
        })
    }
}

/// What `import` reads: forktrail's own exports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportFormat {
    TriG,
    NQuads,
}

impl FromStr for ImportFormat {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "trig" => Self::TriG,
            "nquads" => Self::NQuads,
            _ => {
                return Err(Error::InvalidInput(format!(
                    "unknown import format {s:?} (expected trig or nquads)"
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
                    index: k as i64,
                    valid: format!("0..={parent_len} (fork point of {id})"),
                });
            }
        }
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

    /// Reads forktrail's own TriG/N-Quads export and adds its sessions, all or none.
    /// Refuses sessions that already exist, graphs that are not session graphs under
    /// this store's base IRI, and forks whose parent is neither in the file nor here.
    /// Returns the imported session ids.
    pub fn import(&self, input: impl Read, format: ImportFormat) -> Result<Vec<String>> {
        let format = match format {
            ImportFormat::TriG => RdfFormat::TriG,
            ImportFormat::NQuads => RdfFormat::NQuads,
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
