//! Calls recorded by the model proxy: an `ft:ProxiedCall` in the graph of the session its
//! answer extended, associated with the model and the principal, that generated the
//! answer turn; its request context (system prompt, tools, settings) a node named by
//! the context's SHA-256, stored once per session graph.

use super::{literal, text, whatif::decimal, GraphWriter, Iris, Rdf};
use crate::error::Result;
use crate::model::{Api, CallOutcome, ModelCallInfo, SessionId};
use crate::vocab::{ft, prov, rdf, xsd};
use oxigraph::model::{Literal, NamedNode, NamedNodeRef, NamedOrBlankNode, Term};

/// A call to record.
pub(crate) struct ProxiedCallRecord<'a> {
    pub(crate) info: &'a ModelCallInfo,
    /// The session whose graph holds the call.
    pub(crate) session: &'a str,
    /// The answer's turn IRI, when there is one.
    pub(crate) turn: Option<&'a NamedNode>,
    /// Agents: the model that answered, the principal that called.
    pub(crate) model: Option<&'a NamedNode>,
    pub(crate) principal: &'a NamedNode,
    /// The request's context, as JSON text.
    pub(crate) context: &'a str,
    /// Whether the context node is already in the graph.
    pub(crate) context_stored: bool,
    /// The overrides, as JSON text (`None` when there are none).
    pub(crate) overrides: Option<&'a str>,
}

impl Iris {
    /// `{base}session:{id}/proxied-call/{call}`.
    pub(crate) fn proxied_call(&self, session: &str, call: &str) -> NamedNode {
        self.activity(session, &format!("proxied-call/{call}"))
    }

    /// `{base}session:{id}/context/{sha256}`.
    pub(crate) fn request_context(&self, session: &str, context: &str) -> NamedNode {
        let sha = super::sha256_hex(&[context.as_bytes()]);
        self.activity(session, &format!("context/{sha}"))
    }
}

impl ProxiedCallRecord<'_> {
    pub(crate) fn write(&self, iris: &Iris, w: &mut GraphWriter) {
        let c = self.info;
        let iri = iris.proxied_call(self.session, &c.id);
        w.add(&iri, rdf::TYPE, ft::PROXIED_CALL);
        w.add(&iri, rdf::TYPE, prov::ACTIVITY);
        w.add(&iri, ft::CALL_ID, literal(&c.id));
        w.add(&iri, ft::API, literal(c.api.as_str()));
        w.add(&iri, ft::OUTCOME, literal(c.outcome.as_str()));
        w.add(&iri, ft::REQUEST_TURNS, Literal::from(c.request_turns));
        w.add(&iri, prov::WAS_ASSOCIATED_WITH, self.principal.clone());
        if let Some(model) = self.model {
            w.add(&iri, prov::WAS_ASSOCIATED_WITH, model.clone());
        }
        if let Some(model) = &c.model {
            w.add(&iri, ft::NAME, literal(model));
        }
        if let (Some(turn), Some(index)) = (self.turn, c.answer_index) {
            w.add(&iri, ft::AT_INDEX, Literal::from(index));
            w.add(turn, prov::WAS_GENERATED_BY, iri.clone());
            if c.outcome == CallOutcome::Incomplete {
                w.add(turn, ft::INCOMPLETE, Literal::from(true));
            }
        }
        for (p, v) in [
            (ft::INPUT_TOKENS, c.input_tokens),
            (ft::OUTPUT_TOKENS, c.output_tokens),
            (ft::CACHED_TOKENS, c.cached_tokens),
            (ft::FIRST_BYTE_MS, c.first_byte_ms),
            (ft::UPSTREAM_STATUS, c.upstream_status.map(u64::from)),
        ] {
            if let Some(v) = v {
                w.add(&iri, p, Literal::from(v));
            }
        }
        w.add(&iri, ft::LATENCY_MS, Literal::from(c.latency_ms));
        if let Some(reason) = &c.stop_reason {
            w.add(&iri, ft::FINISH_REASON, literal(reason));
        }
        if let Some(cost) = c.cost_usd {
            w.add(&iri, ft::COST_USD, decimal(cost));
        }
        if let Some(error) = &c.error {
            // The one place a call's error is stored: no secret is kept.
            w.add(
                &iri,
                ft::ERROR_MESSAGE,
                literal(&crate::secrets::message(error)),
            );
        }
        if let Some(at) = &c.started_at {
            w.add(
                &iri,
                prov::STARTED_AT_TIME,
                Literal::new_typed_literal(at, xsd::DATE_TIME),
            );
        }
        w.add(&iri, prov::ENDED_AT_TIME, super::now());
        if let Some(overrides) = self.overrides {
            w.add(&iri, ft::MESSAGE_OVERRIDES, literal(overrides));
        }
        let context = iris.request_context(self.session, self.context);
        w.add(&iri, ft::REQUEST_CONTEXT, context.clone());
        if !self.context_stored {
            w.add(&context, ft::CONTEXT_JSON, literal(self.context));
        }
    }
}

/// A stored call: what lists show, and what rebuilds its request.
pub(crate) struct StoredCall {
    pub(crate) info: ModelCallInfo,
    pub(crate) context: Option<NamedNode>,
    pub(crate) overrides: Option<String>,
}

impl Rdf<'_> {
    /// Whether graph `graph` holds the context node `context`.
    pub(crate) fn has_context(&self, context: &NamedNode, graph: &NamedNode) -> Result<bool> {
        Ok(!self.about(context.as_ref(), graph.as_ref())?.is_empty())
    }

    /// The JSON of a request context.
    pub(crate) fn context_json(
        &self,
        context: &NamedNode,
        graph: &NamedNode,
    ) -> Result<Option<String>> {
        Ok(self
            .about(context.as_ref(), graph.as_ref())?
            .into_iter()
            .find(|q| q.predicate == ft::CONTEXT_JSON)
            .and_then(|q| text(&q.object).map(str::to_string)))
    }

    /// The proxied calls stored in session `id`'s graph `graph`, oldest first.
    pub(crate) fn proxied_calls(
        &self,
        id: &SessionId,
        graph: &NamedNode,
    ) -> Result<Vec<StoredCall>> {
        let mut out = Vec::new();
        for (subject, g) in self.subjects_typed(ft::PROXIED_CALL)? {
            if &g != graph {
                continue;
            }
            if let Some(call) = self.proxied_call(id, &subject, graph)? {
                out.push(call);
            }
        }
        out.sort_by(|a, b| {
            (a.info.started_at.as_deref(), &a.info.id)
                .cmp(&(b.info.started_at.as_deref(), &b.info.id))
        });
        Ok(out)
    }

    /// The `(subject, graph)` of every node typed `class`.
    fn subjects_typed(&self, class: NamedNodeRef<'_>) -> Result<Vec<(NamedNode, NamedNode)>> {
        let mut out = Vec::new();
        for quad in self
            .backend
            .quads(None, Some(rdf::TYPE), Some(class.into()), None)
        {
            let quad = quad?;
            if let (NamedOrBlankNode::NamedNode(s), oxigraph::model::GraphName::NamedNode(g)) =
                (quad.subject, quad.graph_name)
            {
                out.push((s, g));
            }
        }
        Ok(out)
    }

    /// One proxied call, decoded.
    fn proxied_call(
        &self,
        id: &SessionId,
        iri: &NamedNode,
        graph: &NamedNode,
    ) -> Result<Option<StoredCall>> {
        let quads = self.about(iri.as_ref(), graph.as_ref())?;
        let mut info = ModelCallInfo::blank(String::new(), Api::AnthropicMessages, id.clone());
        let (mut context, mut overrides, mut found) = (None, None, false);
        for q in &quads {
            let p = q.predicate.as_ref();
            let v = text(&q.object);
            let n = || v.and_then(|v| v.parse::<u64>().ok());
            if p == ft::CALL_ID {
                info.id = v.unwrap_or_default().to_string();
                found = true;
            } else if p == ft::API {
                info.api = v.unwrap_or_default().parse()?;
            } else if p == ft::OUTCOME {
                info.outcome = v.unwrap_or_default().parse()?;
            } else if p == ft::NAME {
                info.model = v.map(str::to_string);
            } else if p == ft::REQUEST_TURNS {
                info.request_turns = n().unwrap_or(0);
            } else if p == ft::AT_INDEX {
                info.answer_index = n();
            } else if p == ft::INPUT_TOKENS {
                info.input_tokens = n();
            } else if p == ft::OUTPUT_TOKENS {
                info.output_tokens = n();
            } else if p == ft::CACHED_TOKENS {
                info.cached_tokens = n();
            } else if p == ft::FIRST_BYTE_MS {
                info.first_byte_ms = n();
            } else if p == ft::UPSTREAM_STATUS {
                info.upstream_status = n().and_then(|n| u16::try_from(n).ok());
            } else if p == ft::LATENCY_MS {
                info.latency_ms = n().unwrap_or(0);
            } else if p == ft::FINISH_REASON {
                info.stop_reason = v.map(str::to_string);
            } else if p == ft::COST_USD {
                info.cost_usd = v.and_then(|v| v.parse().ok());
            } else if p == ft::ERROR_MESSAGE {
                info.error = v.map(str::to_string);
            } else if p == prov::STARTED_AT_TIME {
                info.started_at = v.map(str::to_string);
            } else if p == ft::MESSAGE_OVERRIDES {
                overrides = v.map(str::to_string);
            } else if p == ft::REQUEST_CONTEXT {
                if let Term::NamedNode(n) = &q.object {
                    context = Some(n.clone());
                }
            } else if p == prov::WAS_ASSOCIATED_WITH {
                if let Term::NamedNode(agent) = &q.object {
                    if let Some(crate::model::Agent::Principal(name)) =
                        self.iris.parse_agent(agent.as_ref())
                    {
                        info.principal = Some(name);
                    }
                }
            }
        }
        Ok(found.then_some(StoredCall {
            info,
            context,
            overrides,
        }))
    }
}
