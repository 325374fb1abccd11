//! forktrail's own RDF in and out: session graphs as TriG, N-Quads or Turtle, the PROV
//! export, and the validated import that every import ends in.

use crate::error::{Error, Result};
use crate::model::{Label, SessionId};
use crate::rdf::prov::{entailed, session_of_graph};
use crate::store::Store;
use crate::vocab::{ft, prov};
use oxigraph::io::{RdfFormat, RdfParser, RdfSerializer};
use oxigraph::model::{GraphName, NamedNode, NamedOrBlankNode, Quad};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};

/// A serializer that writes forktrail's prefixes where the format has them.
pub(super) fn serializer(format: RdfFormat) -> RdfSerializer {
    let mut s = RdfSerializer::from_format(format);
    if matches!(format, RdfFormat::TriG | RdfFormat::Turtle) {
        for (prefix, iri) in [
            ("ft", ft::NS),
            ("prov", prov::NS),
            ("dcterms", "http://purl.org/dc/terms/"),
            ("rdfs", "http://www.w3.org/2000/01/rdf-schema#"),
            ("xsd", "http://www.w3.org/2001/XMLSchema#"),
        ] {
            s = s.with_prefix(prefix, iri).expect("valid prefix");
        }
    }
    s
}

fn write_err(e: std::io::Error) -> Error {
    Error::io("cannot write the export", e)
}

impl Store {
    /// Checks forktrail's own TriG or N-Quads export on its own, as a third party would
    /// check what they were sent: the file's graphs are loaded into a scratch store
    /// (nothing is validated on the way in) and verified whole. Sessions are looked for
    /// under `base` (the default base when `None`). An export states no digest version:
    /// its digests are checked as the current version makes them, and when some differ,
    /// as version 1 made them; the report says which version held.
    pub fn verify_export(
        content: impl std::io::Read,
        format: super::ImportFormat,
        base: Option<&str>,
    ) -> Result<crate::VerifyReport> {
        let format = match format {
            super::ImportFormat::TriG => RdfFormat::TriG,
            super::ImportFormat::NQuads => RdfFormat::NQuads,
            other => {
                return Err(Error::InvalidInput(format!(
                    "verify reads forktrail's own TriG or N-Quads, not {other:?}"
                )))
            }
        };
        let mut scratch = Store::in_memory()?;
        if let Some(base) = base {
            scratch = scratch.with_base_iri(base)?;
        }
        scratch
            .oxigraph()
            .load_from_reader(RdfParser::from_format(format), content)
            .map_err(|e| Error::Parse {
                what: "the export".into(),
                detail: e.to_string(),
            })?;
        scratch.verify_as_either(None)
    }

    /// The quads of `graphs`, as `format` (TriG or N-Quads keep the graphs; Turtle
    /// writes the triples of one).
    pub(super) fn write_graphs(
        &self,
        graphs: &[NamedNode],
        format: RdfFormat,
        out: &mut dyn Write,
    ) -> Result<()> {
        let mut w = serializer(format).for_writer(out);
        // The declarations of the agents the graphs name follow them, as the store
        // keeps them: once, in the agents graph.
        let mut named = Vec::new();
        for graph in graphs {
            let quads = self.rdf().graph(graph.as_ref())?;
            named.extend(self.rdf().agent_declarations(&quads)?);
            for quad in quads {
                if format.supports_datasets() {
                    w.serialize_quad(&quad).map_err(write_err)?;
                } else {
                    w.serialize_triple(quad.as_ref()).map_err(write_err)?;
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        named.retain(|q| seen.insert(q.clone()));
        for quad in named {
            if format.supports_datasets() {
                w.serialize_quad(&quad).map_err(write_err)?;
            } else {
                w.serialize_triple(quad.as_ref()).map_err(write_err)?;
            }
        }
        w.finish().map_err(write_err)?;
        Ok(())
    }

    /// The triples of `graphs` merged into one graph, with what PROV-O and the ontology
    /// entail written out, as Turtle.
    pub(super) fn write_prov(&self, graphs: &[NamedNode], out: &mut dyn Write) -> Result<()> {
        let mut quads = Vec::new();
        for graph in graphs {
            quads.extend(self.rdf().graph(graph.as_ref())?);
        }
        let agents = self.rdf().agent_declarations(&quads)?;
        quads.extend(agents);
        let mut w = serializer(RdfFormat::Turtle).for_writer(out);
        for triple in entailed(quads) {
            w.serialize_triple(&triple).map_err(write_err)?;
        }
        w.finish().map_err(write_err)?;
        Ok(())
    }

    /// Reads forktrail's own TriG or N-Quads and adds its sessions, all or none (see
    /// [`Store::import`]).
    pub(super) fn import_graphs(
        &self,
        input: impl Read,
        format: RdfFormat,
    ) -> Result<Vec<SessionId>> {
        let mut graphs: BTreeMap<NamedNode, Vec<Quad>> = BTreeMap::new();
        // Agent declarations: the agents graph's, and those an older export kept in
        // each session graph, all moved into the store's agents graph.
        let agents_graph = self.iris.agents_graph();
        let mut agents = Vec::new();
        for quad in RdfParser::from_format(format).for_reader(input) {
            let quad = quad.map_err(|e| Error::Parse {
                what: "the import".into(),
                detail: e.to_string(),
            })?;
            let GraphName::NamedNode(g) = &quad.graph_name else {
                return Err(Error::InvalidInput(format!(
                    "import: the triple {quad} is outside any session graph"
                )));
            };
            let about_agent = matches!(&quad.subject, NamedOrBlankNode::NamedNode(s) if self.iris.is_agent(s.as_str()));
            if about_agent {
                agents.push(quad);
            } else if *g == agents_graph {
                return Err(Error::InvalidInput(format!(
                    "import: the agents graph {g} holds {quad}, which is not about an agent"
                )));
            } else {
                graphs.entry(g.clone()).or_default().push(quad);
            }
        }
        let mut tx = self.write()?;
        let mut ids = BTreeSet::new();
        let mut parents = Vec::new();
        for (graph, quads) in &graphs {
            let (id, graph_parents) = session_of_graph(&self.iris, graph, quads);
            let id = id.ok_or_else(|| {
                Error::InvalidInput(format!(
                    "import: graph {graph} is not a forktrail session graph under base {}",
                    self.iris.base
                ))
            })?;
            if self.exists(&id)? {
                return Err(Error::Conflict(format!(
                    "session {id} already exists in the store; delete it first or import \
                     into another store"
                )));
            }
            parents.extend(graph_parents);
            ids.insert(id);
        }
        let all: Vec<Quad> = graphs.into_values().flatten().collect();
        let all = self.validate_import(all, &ids, &parents)?;
        tx.insert(all);
        tx.insert(crate::rdf::regraph(agents, &agents_graph));
        // Imported ids may be ones deleted earlier: drop whatever was known of them.
        for id in &ids {
            tx.forget(&self.session_iri(id));
        }
        tx.commit()?;
        Ok(ids.into_iter().collect())
    }

    /// Checks imported sessions the way `load` and `fork` would, in a scratch store that
    /// holds the file's graphs and the session nodes of their ancestors in this store:
    /// ids match their IRIs, labels are valid and unique among siblings, chains have no
    /// cycle, no missing parent and no more than 32 levels, fork points are in range.
    /// Returns the quads to write: as given, or, for an export whose digests are all
    /// of version 1, with the digests of the current version.
    fn validate_import(
        &self,
        mut quads: Vec<Quad>,
        ids: &BTreeSet<SessionId>,
        parents: &[NamedNode],
    ) -> Result<Vec<Quad>> {
        let mut context = quads.clone();
        let mut copied = BTreeSet::new();
        for parent in parents {
            let mut next = Some(parent.clone());
            while let Some(p) = next.take() {
                let in_file = self
                    .iris
                    .session_id(p.as_ref())
                    .is_some_and(|id| ids.contains(&id));
                if in_file || !copied.insert(p.clone()) {
                    break;
                }
                let Some(f) = self.facts_of(p.as_ref())? else {
                    break;
                };
                context.extend(self.rdf().about(p.as_ref(), p.as_ref())?);
                next = f.parent;
            }
        }
        let scratch = scratch_with(&self.iris.base, context)?;
        // Every turn must have what replay needs, and the digests must chain: a file
        // that would leave a session that cannot be replayed is refused whole.
        let ids_list: Vec<SessionId> = ids.iter().cloned().collect();
        let mut problems = scratch.turn_problems(&ids_list)?;
        if scratch.digests_of_version_1(&ids_list, &problems)? {
            // An export written before digests covered tool calls, intact: it goes in
            // with the current version's digests, chained on this store's.
            let seeds = ids.iter().map(|id| self.session_iri(id)).collect();
            let redigest = crate::rdf::redigest(&scratch.rdf(), seeds, Some(&self.rdf()))?;
            let gone: std::collections::HashSet<Quad> = redigest.remove.into_iter().collect();
            quads.retain(|q| !gone.contains(q));
            quads.extend(redigest.insert);
            let scratch = scratch_with(&self.iris.base, quads.clone())?;
            problems = scratch.turn_problems(&ids_list)?;
        }
        if let Some(first) = problems.first() {
            let more = match problems.len() {
                1 => String::new(),
                n => format!(" (and {} more problems)", n - 1),
            };
            return Err(Error::InvalidInput(format!(
                "import: {first}{more}; nothing imported (`forktrail verify --file` lists \
                 every problem)"
            )));
        }
        let mut sibling_labels = BTreeSet::new();
        for id in ids {
            let facts = scratch.require(id)?;
            if facts.id != *id {
                return Err(Error::InvalidInput(format!(
                    "import: graph of session {id} declares ft:sessionId {:?}",
                    facts.id.as_str()
                )));
            }
            let label = Label::new(facts.branch.clone())?;
            scratch.chain(id)?;
            let Some(parent) = &facts.parent else {
                continue;
            };
            let parent_id = self.iris.name_of(parent.as_ref());
            let parent_len = match self.facts_of(parent.as_ref())? {
                Some(here) => {
                    if let Some(existing) = self.rdf().child_with_label(parent, &label)? {
                        return Err(Error::DuplicateLabel {
                            parent: parent_id,
                            label: label.to_string(),
                            existing: existing.to_string(),
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
        Ok(quads)
    }
}

/// An in-memory store under `base` holding `quads`, to check or build sessions in.
pub(super) fn scratch_with(base: &str, quads: Vec<Quad>) -> Result<Store> {
    let scratch = Store::in_memory()?.with_base_iri(base)?;
    let mut tx = scratch.write()?;
    tx.insert(quads);
    tx.commit()?;
    Ok(scratch)
}
