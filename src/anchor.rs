//! Anchors: named points in a session, and forks from them.

use crate::error::{Error, Result};
use crate::model::{check_key, AnchorInfo, SessionId};
use crate::prov::{self, GraphWriter};
use crate::replay::Facts;
use crate::store::Store;
use crate::vocab::{ft, prov as p, rdf};
use oxigraph::model::{Literal, NamedOrBlankNode, Term};

impl Store {
    /// Names the current length of `session` as anchor `name`, with optional JSON
    /// `state`. Names are unique per session.
    pub fn anchor(
        &self,
        session: &SessionId,
        name: &str,
        state: Option<&str>,
    ) -> Result<AnchorInfo> {
        check_key("anchor name", name)?;
        let state = state
            .map(|text| {
                serde_json::from_str::<serde_json::Value>(text).map_err(|e| {
                    Error::InvalidInput(format!(
                        "the state of anchor {name:?} on session {session} is not valid JSON: {e}"
                    ))
                })
            })
            .transpose()?;
        let _guard = self.write_guard();
        let facts = self.require(session)?;
        if let Some(existing) = self
            .own_anchors(&facts)?
            .into_iter()
            .find(|a| a.name == name)
        {
            return Err(Error::Conflict(format!(
                "session {session} already has an anchor named {name:?} (at index {})",
                existing.at_index
            )));
        }
        let iri = self
            .iris
            .activity(session.as_str(), &format!("anchor/{name}"));
        let created = prov::now();
        let mut w = GraphWriter::new(facts.iri.clone());
        w.add(&iri, rdf::TYPE, ft::ANCHOR);
        w.add(&iri, rdf::TYPE, p::ENTITY);
        w.add(&iri, ft::ANCHOR_NAME, Literal::new_simple_literal(name));
        w.add(&iri, ft::ANCHOR_OF, facts.iri.clone());
        w.add(&iri, ft::AT_INDEX, Literal::from(facts.length));
        if let Some(state) = &state {
            w.add(
                &iri,
                ft::STATE,
                Literal::new_simple_literal(state.to_string()),
            );
        }
        w.add(&iri, p::GENERATED_AT_TIME, created.clone());
        self.commit(&w.quads, &[])?;
        Ok(AnchorInfo {
            name: name.to_string(),
            session: session.to_string(),
            at_index: facts.length,
            state,
            created_at: Some(created.value().to_string()),
        })
    }

    /// The anchors visible from `session`: its own, and those of its ancestors that
    /// lie within the prefix it inherits. Ordered by index, then name.
    pub fn anchors(&self, session: &SessionId) -> Result<Vec<AnchorInfo>> {
        let chain = self.chain(session)?;
        let mut out = Vec::new();
        for (level, facts) in chain.iter().enumerate() {
            // What the leaf sees of this level: up to the lowest fork point below it.
            let visible = chain[level + 1..]
                .iter()
                .map(Facts::own_start)
                .min()
                .unwrap_or(u64::MAX);
            out.extend(
                self.own_anchors(facts)?
                    .into_iter()
                    .filter(|a| a.at_index <= visible),
            );
        }
        out.sort_by(|a, b| (a.at_index, &a.name).cmp(&(b.at_index, &b.name)));
        Ok(out)
    }

    /// The fork point anchor `name` names, as seen from `parent` (its own anchor first,
    /// then the nearest ancestor's).
    pub(crate) fn anchor_index(
        &self,
        parent: &SessionId,
        chain: &[Facts],
        name: &str,
    ) -> Result<u64> {
        check_key("anchor name", name)?;
        let visible = self.anchors(parent)?;
        for facts in chain.iter().rev() {
            if let Some(a) = visible
                .iter()
                .find(|a| a.name == name && a.session == facts.id)
            {
                return Ok(a.at_index);
            }
        }
        let names: Vec<&str> = visible.iter().map(|a| a.name.as_str()).collect();
        Err(Error::InvalidInput(format!(
            "session {parent} has no anchor named {name:?} (visible anchors: {})",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        )))
    }

    /// The anchors stored in the graph of session `f`.
    fn own_anchors(&self, f: &Facts) -> Result<Vec<AnchorInfo>> {
        let mut out = Vec::new();
        for quad in self.inner.quads_for_pattern(
            None,
            Some(rdf::TYPE),
            Some(ft::ANCHOR.into()),
            Some(f.iri.as_ref().into()),
        ) {
            let NamedOrBlankNode::NamedNode(anchor) = quad?.subject else {
                continue;
            };
            let mut a = AnchorInfo {
                name: String::new(),
                session: f.id.clone(),
                at_index: 0,
                state: None,
                created_at: None,
            };
            for q in self.inner.quads_for_pattern(
                Some(anchor.as_ref().into()),
                None,
                None,
                Some(f.iri.as_ref().into()),
            ) {
                let q = q?;
                let Term::Literal(l) = &q.object else {
                    continue;
                };
                if q.predicate == ft::ANCHOR_NAME {
                    a.name = l.value().to_string();
                } else if q.predicate == ft::AT_INDEX {
                    a.at_index = l.value().parse().map_err(|_| Error::Corrupt {
                        session: f.id.clone(),
                        detail: format!("anchor {anchor} has a bad ft:atIndex"),
                    })?;
                } else if q.predicate == ft::STATE {
                    a.state = serde_json::from_str(l.value()).ok();
                } else if q.predicate == p::GENERATED_AT_TIME {
                    a.created_at = Some(l.value().to_string());
                }
            }
            out.push(a);
        }
        Ok(out)
    }
}
