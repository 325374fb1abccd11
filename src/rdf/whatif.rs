//! What-if comparisons: an `ft:Comparison` in the compared session's graph, one `ft:Run`
//! per arm in its fork's graph (`dcterms:isPartOf` the comparison), and one
//! `ft:ModelCall` per step (`dcterms:isPartOf` the run) that generated the step's
//! assistant turn and holds what the endpoint reported about the call.

use super::{literal, text, GraphWriter, Iris, Rdf, SessionNode};
use crate::error::Result;
use crate::model::{Agent, RunStatus};
use crate::vocab::{dcterms, ft, prov, rdf, xsd};
use oxigraph::model::{
    GraphName, Literal, NamedNode, NamedNodeRef, NamedOrBlankNode, Quad, QuadRef, Term,
};

/// A stored activity: its IRI and the graph that holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Node {
    pub(crate) iri: NamedNode,
    pub(crate) graph: NamedNode,
}

pub(super) fn decimal(value: f64) -> Literal {
    Literal::new_typed_literal(format!("{value:.9}"), xsd::DECIMAL)
}

/// A new comparison.
pub(crate) struct ComparisonRecord<'a> {
    pub(crate) id: &'a str,
    pub(crate) session: &'a SessionNode,
    pub(crate) at: u64,
    pub(crate) key: &'a str,
    /// The normalised request (arms, steps, prices, budget): what resumes read back.
    pub(crate) request: &'a str,
    pub(crate) max_steps: u64,
    pub(crate) budget_usd: Option<f64>,
}

impl ComparisonRecord<'_> {
    pub(crate) fn quads(&self, iris: &Iris) -> (Node, Vec<Quad>) {
        let iri = iris.activity(self.session.id.as_str(), &format!("comparison/{}", self.id));
        let mut w = GraphWriter::new(self.session.iri.clone());
        w.add(&iri, rdf::TYPE, ft::COMPARISON);
        w.add(&iri, rdf::TYPE, prov::ACTIVITY);
        w.add(&iri, ft::JOB_ID, literal(self.id));
        w.add(&iri, prov::USED, self.session.iri.clone());
        w.add(&iri, ft::AT_INDEX, Literal::from(self.at));
        w.add(&iri, ft::REQUEST_KEY, literal(self.key));
        w.add(&iri, ft::REQUEST_BODY, literal(self.request));
        w.add(&iri, ft::MAX_STEPS, Literal::from(self.max_steps));
        if let Some(budget) = self.budget_usd {
            w.add(&iri, ft::BUDGET_USD, decimal(budget));
        }
        w.add(&iri, prov::STARTED_AT_TIME, super::now());
        let node = Node {
            iri,
            graph: self.session.iri.clone(),
        };
        (node, w.quads)
    }
}

/// A new run: one arm of a comparison, in its fork's graph.
pub(crate) struct RunRecord<'a> {
    pub(crate) id: &'a str,
    pub(crate) comparison: &'a NamedNode,
    /// The compared session.
    pub(crate) session: &'a NamedNode,
    pub(crate) fork: &'a SessionNode,
    pub(crate) arm_index: u64,
    /// Which sample of the arm, from 1.
    pub(crate) sample: u64,
    pub(crate) name: &'a str,
    pub(crate) spec: &'a str,
    pub(crate) model: &'a Agent,
    pub(crate) provider: &'a str,
    pub(crate) endpoint: &'a str,
}

impl RunRecord<'_> {
    pub(crate) fn quads(&self, iris: &Iris) -> (Node, Vec<Quad>) {
        let iri = iris.activity(self.fork.id.as_str(), &format!("run/{}", self.id));
        let mut w = GraphWriter::new(self.fork.iri.clone());
        let model = w.agent(iris, self.model);
        w.add(&iri, rdf::TYPE, ft::RUN);
        w.add(&iri, rdf::TYPE, prov::ACTIVITY);
        w.add(&iri, ft::JOB_ID, literal(self.id));
        w.add(&iri, dcterms::IS_PART_OF, self.comparison.clone());
        w.add(&iri, prov::USED, self.session.clone());
        w.add(&iri, ft::ARM_INDEX, Literal::from(self.arm_index));
        w.add(&iri, ft::SAMPLE, Literal::from(self.sample));
        w.add(&iri, ft::ARM_NAME, literal(self.name));
        w.add(&iri, ft::ARM_SPEC, literal(self.spec));
        w.add(&iri, prov::WAS_ASSOCIATED_WITH, model);
        w.add(&iri, ft::PROVIDER, literal(self.provider));
        w.add(&iri, ft::ENDPOINT, literal(self.endpoint));
        w.add(&iri, ft::STATUS, literal(RunStatus::Running.as_str()));
        w.add(&iri, ft::RESULT_SESSION, self.fork.iri.clone());
        w.add(&iri, prov::STARTED_AT_TIME, super::now());
        let node = Node {
            iri,
            graph: self.fork.iri.clone(),
        };
        (node, w.quads)
    }
}

/// One model call of a run: what the endpoint reported, and the turn it generated.
pub(crate) struct CallRecord<'a> {
    pub(crate) run: &'a Node,
    pub(crate) fork_id: &'a str,
    pub(crate) turn: &'a NamedNode,
    pub(crate) index: u64,
    pub(crate) model: &'a NamedNode,
    pub(crate) figures: &'a crate::model::CallFigures,
    pub(crate) request_digest: &'a str,
}

impl CallRecord<'_> {
    pub(crate) fn write(&self, iris: &Iris, w: &mut GraphWriter) {
        let iri = iris.activity(self.fork_id, &format!("call/{}", self.index));
        let f = self.figures;
        w.add(&iri, rdf::TYPE, ft::MODEL_CALL);
        w.add(&iri, rdf::TYPE, prov::ACTIVITY);
        w.add(&iri, dcterms::IS_PART_OF, self.run.iri.clone());
        w.add(&iri, prov::WAS_ASSOCIATED_WITH, self.model.clone());
        w.add(&iri, ft::AT_INDEX, Literal::from(self.index));
        w.add(&iri, ft::REQUEST_DIGEST, literal(self.request_digest));
        w.add(&iri, ft::LATENCY_MS, Literal::from(f.latency_ms));
        for (p, v) in [
            (ft::INPUT_TOKENS, f.input_tokens),
            (ft::OUTPUT_TOKENS, f.output_tokens),
            (ft::CACHED_TOKENS, f.cached_tokens),
        ] {
            if let Some(v) = v {
                w.add(&iri, p, Literal::from(v));
            }
        }
        if let Some(reason) = &f.finish_reason {
            w.add(&iri, ft::FINISH_REASON, literal(reason));
        }
        if let Some(cost) = f.cost_usd {
            w.add(&iri, ft::COST_USD, decimal(cost));
        }
        w.add(&iri, ft::CHARGED_USD, decimal(f.charged_usd));
        w.add(self.turn, prov::WAS_GENERATED_BY, iri);
    }
}

impl Node {
    fn quad(&self, predicate: NamedNodeRef<'_>, object: impl Into<Term>) -> Quad {
        Quad::new(
            self.iri.clone(),
            predicate,
            object.into(),
            GraphName::NamedNode(self.graph.clone()),
        )
    }

    /// A run's end: `(inserts, removes)` replacing `running` by `status`, with the end
    /// time and what stopped it.
    pub(crate) fn end(&self, status: RunStatus, detail: Option<&str>) -> (Vec<Quad>, Vec<Quad>) {
        let mut inserts = vec![
            self.quad(ft::STATUS, literal(status.as_str())),
            self.quad(prov::ENDED_AT_TIME, super::now()),
        ];
        // The one place a run's detail is stored: whatever outside text it carries, no
        // secret is kept.
        if let Some(detail) = detail {
            let detail = crate::secrets::message(detail);
            inserts.push(self.quad(ft::ERROR_MESSAGE, literal(&detail)));
        }
        let running = self.quad(ft::STATUS, literal(RunStatus::Running.as_str()));
        (inserts, vec![running])
    }

    /// An experiment sample's outcome, written as it ends (every text in it with no
    /// secret left).
    pub(crate) fn outcome(&self, o: &crate::model::SampleOutcome) -> Vec<Quad> {
        let text = |t: &str| literal(&crate::secrets::scrub(t));
        let mut out = vec![
            self.quad(ft::VERDICT, literal(o.verdict.as_str())),
            self.quad(ft::VERIFY_OUTPUT, text(&o.verify_output)),
            self.quad(ft::AGENT_OUTPUT, text(&o.agent_output)),
            self.quad(ft::WALL_MS, Literal::from(o.wall_ms)),
            self.quad(ft::REPLAYED_CALLS, Literal::from(o.replayed_calls)),
        ];
        if let Some(code) = o.agent_exit {
            out.push(self.quad(ft::AGENT_EXIT_CODE, Literal::from(code)));
        }
        if let Some(code) = o.verify_exit {
            out.push(self.quad(ft::VERIFY_EXIT_CODE, Literal::from(code)));
        }
        if let Some(d) = &o.drift {
            out.push(self.quad(ft::DRIFT_CALL, Literal::from(d.call)));
            out.push(self.quad(ft::DRIFT_INDEX, Literal::from(d.index)));
            out.push(self.quad(ft::DRIFT_DETAIL, text(&d.detail)));
        }
        out
    }

    /// The reservation of a call about to be made: `amount` dollars held by the budget
    /// until the call's charge is recorded (replacing any `held` before).
    pub(crate) fn reserve(&self, amount: f64, held: &[Quad]) -> (Vec<Quad>, Vec<Quad>) {
        (
            vec![self.quad(ft::RESERVED_USD, decimal(amount))],
            held.to_vec(),
        )
    }

    /// The reservation `held` charged as lost calls (the call was made, its answer is
    /// not recorded): `(inserts, removes)` adding its amount to the run's lost calls
    /// (`lost`, the quads stating them now).
    pub(crate) fn charge_held(&self, held: &[Quad], lost: &[Quad]) -> (Vec<Quad>, Vec<Quad>) {
        let sum = |quads: &[Quad]| -> f64 {
            quads
                .iter()
                .filter_map(|q| text(&q.object).and_then(|v| v.parse::<f64>().ok()))
                .sum()
        };
        if held.is_empty() {
            return (Vec::new(), Vec::new());
        }
        let total = sum(held) + sum(lost);
        let mut removes = held.to_vec();
        removes.extend_from_slice(lost);
        (vec![self.quad(ft::LOST_CALLS_USD, decimal(total))], removes)
    }

    /// That turn `turn` was derived from the recorded turn `original`.
    pub(crate) fn derived(w: &mut GraphWriter, turn: &NamedNode, original: &NamedNode) {
        w.add(turn, prov::WAS_DERIVED_FROM, original.clone());
    }
}

/// A stored comparison, as read back.
#[derive(Clone, Debug, Default)]
pub(crate) struct StoredComparison {
    pub(crate) id: String,
    pub(crate) at: u64,
    pub(crate) request: String,
    pub(crate) key: String,
    pub(crate) created_at: Option<String>,
}

/// A stored run, as read back.
#[derive(Clone, Debug)]
pub(crate) struct StoredRun {
    pub(crate) node: Node,
    pub(crate) id: String,
    pub(crate) arm_index: u64,
    /// From 1 (runs stored before samples were: 1).
    pub(crate) sample: u64,
    pub(crate) name: String,
    pub(crate) spec: String,
    pub(crate) status: RunStatus,
    /// An experiment sample's outcome, once it ended.
    pub(crate) outcome: Option<crate::model::SampleOutcome>,
    pub(crate) detail: Option<String>,
    pub(crate) started_at: Option<String>,
    pub(crate) ended_at: Option<String>,
    /// What the budget holds for the call in flight (or one a stopped process left).
    pub(crate) reserved_usd: Option<f64>,
    /// What the budget charged for calls whose answers were lost.
    pub(crate) lost_usd: f64,
}

/// A stored model call.
#[derive(Clone, Debug)]
pub(crate) struct StoredCall {
    pub(crate) index: u64,
    pub(crate) figures: crate::model::CallFigures,
}

impl Rdf<'_> {
    /// The node of the job `id` if it is a comparison or a run: `(node, is_run)`.
    pub(crate) fn whatif_node(&self, id: &str) -> Result<Option<(Node, bool)>> {
        for (iri, graph) in self.subjects_with(ft::JOB_ID, id)? {
            let node = Node { iri, graph };
            for class in [ft::COMPARISON, ft::RUN] {
                let typed = QuadRef::new(
                    node.iri.as_ref(),
                    rdf::TYPE,
                    class,
                    oxigraph::model::GraphNameRef::NamedNode(node.graph.as_ref()),
                );
                if self.backend.contains(typed)? {
                    return Ok(Some((node, class == ft::RUN)));
                }
            }
        }
        Ok(None)
    }

    /// The comparisons whose request key is `key`.
    pub(crate) fn comparisons_with_key(&self, key: &str) -> Result<Vec<Node>> {
        Ok(self
            .subjects_with(ft::REQUEST_KEY, key)?
            .into_iter()
            .map(|(iri, graph)| Node { iri, graph })
            .filter(|n| n.iri.as_str().contains("/comparison/"))
            .collect())
    }

    /// Every comparison of the store.
    pub(crate) fn comparisons(&self) -> Result<Vec<Node>> {
        self.typed(ft::COMPARISON)
    }

    fn typed(&self, class: NamedNodeRef<'_>) -> Result<Vec<Node>> {
        let mut out = Vec::new();
        for quad in self
            .backend
            .quads(None, Some(rdf::TYPE), Some(class.into()), None)
        {
            let quad = quad?;
            if let (NamedOrBlankNode::NamedNode(iri), GraphName::NamedNode(graph)) =
                (quad.subject, quad.graph_name)
            {
                out.push(Node { iri, graph });
            }
        }
        Ok(out)
    }

    /// The activities that are `dcterms:isPartOf` `whole`.
    fn parts(&self, whole: &NamedNode) -> Result<Vec<Node>> {
        let mut out = Vec::new();
        for quad in self.backend.quads(
            None,
            Some(dcterms::IS_PART_OF),
            Some(whole.as_ref().into()),
            None,
        ) {
            let quad = quad?;
            if let (NamedOrBlankNode::NamedNode(iri), GraphName::NamedNode(graph)) =
                (quad.subject, quad.graph_name)
            {
                out.push(Node { iri, graph });
            }
        }
        Ok(out)
    }

    pub(crate) fn comparison(&self, node: &Node) -> Result<StoredComparison> {
        let mut out = StoredComparison::default();
        for quad in self.about(node.iri.as_ref(), node.graph.as_ref())? {
            let v = text(&quad.object).unwrap_or_default().to_string();
            let p = quad.predicate.as_ref();
            if p == ft::JOB_ID {
                out.id = v;
            } else if p == ft::AT_INDEX {
                out.at = v.parse().unwrap_or(0);
            } else if p == ft::REQUEST_BODY {
                out.request = v;
            } else if p == ft::REQUEST_KEY {
                out.key = v;
            } else if p == prov::STARTED_AT_TIME {
                out.created_at = Some(v);
            }
        }
        Ok(out)
    }

    /// The runs of comparison `node`, in arm order.
    pub(crate) fn runs(&self, node: &Node) -> Result<Vec<StoredRun>> {
        let mut out = Vec::new();
        for part in self.parts(&node.iri)? {
            out.push(self.run(&part)?);
        }
        out.sort_by_key(|r| (r.arm_index, r.sample));
        Ok(out)
    }

    /// The comparison a run is part of.
    pub(crate) fn comparison_of(&self, run: &Node) -> Result<Option<Node>> {
        for quad in self.about(run.iri.as_ref(), run.graph.as_ref())? {
            if quad.predicate == dcterms::IS_PART_OF {
                if let Term::NamedNode(iri) = quad.object {
                    // The comparison lives in the compared session's graph.
                    let graph = self.graph_of(&iri)?;
                    return Ok(graph.map(|graph| Node { iri, graph }));
                }
            }
        }
        Ok(None)
    }

    /// The graph that types `iri` (a forktrail activity is typed in one graph).
    fn graph_of(&self, iri: &NamedNode) -> Result<Option<NamedNode>> {
        for quad in self
            .backend
            .quads(Some(iri.as_ref().into()), Some(rdf::TYPE), None, None)
        {
            if let GraphName::NamedNode(graph) = quad?.graph_name {
                return Ok(Some(graph));
            }
        }
        Ok(None)
    }

    pub(crate) fn run(&self, node: &Node) -> Result<StoredRun> {
        let mut out = StoredRun {
            node: node.clone(),
            id: String::new(),
            arm_index: 0,
            sample: 1,
            name: String::new(),
            spec: String::new(),
            status: RunStatus::Running,
            outcome: None,
            detail: None,
            started_at: None,
            ended_at: None,
            reserved_usd: None,
            lost_usd: 0.0,
        };
        let mut outcome = OutcomeFields::default();
        for quad in self.about(node.iri.as_ref(), node.graph.as_ref())? {
            let v = text(&quad.object).unwrap_or_default().to_string();
            let p = quad.predicate.as_ref();
            if outcome.take(p, &v)? {
                continue;
            }
            if p == ft::JOB_ID {
                out.id = v;
            } else if p == ft::SAMPLE {
                out.sample = v.parse().unwrap_or(1);
            } else if p == ft::ARM_INDEX {
                out.arm_index = v.parse().unwrap_or(0);
            } else if p == ft::ARM_NAME {
                out.name = v;
            } else if p == ft::ARM_SPEC {
                out.spec = v;
            } else if p == ft::STATUS {
                out.status = v.parse()?;
            } else if p == ft::ERROR_MESSAGE {
                out.detail = Some(v);
            } else if p == prov::STARTED_AT_TIME {
                out.started_at = Some(v);
            } else if p == prov::ENDED_AT_TIME {
                out.ended_at = Some(v);
            } else if p == ft::RESERVED_USD {
                out.reserved_usd = Some(out.reserved_usd.unwrap_or(0.0) + v.parse().unwrap_or(0.0));
            } else if p == ft::LOST_CALLS_USD {
                out.lost_usd += v.parse::<f64>().unwrap_or(0.0);
            }
        }
        out.outcome = outcome.finish();
        Ok(out)
    }

    /// The change reserving `amount` dollars for run `node`'s next call: written before
    /// the call, so that a process that dies during it leaves the reservation behind.
    pub(crate) fn reservation(&self, node: &Node, amount: f64) -> Result<(Vec<Quad>, Vec<Quad>)> {
        let held = self.run_money(node, ft::RESERVED_USD)?;
        Ok(node.reserve(amount, &held))
    }

    /// The change charging run `node`'s reservation, if it holds one, as lost calls.
    pub(crate) fn charge_reservation(&self, node: &Node) -> Result<(Vec<Quad>, Vec<Quad>)> {
        let held = self.run_money(node, ft::RESERVED_USD)?;
        let lost = self.run_money(node, ft::LOST_CALLS_USD)?;
        Ok(node.charge_held(&held, &lost))
    }

    /// The quads releasing run `node`'s reservation uncharged: its call's charge is
    /// recorded with it, or the call was not billed.
    pub(crate) fn release_reservation(&self, node: &Node) -> Result<Vec<Quad>> {
        self.run_money(node, ft::RESERVED_USD)
    }

    fn run_money(&self, node: &Node, predicate: NamedNodeRef<'_>) -> Result<Vec<Quad>> {
        self.backend
            .quads(
                Some(node.iri.as_ref().into()),
                Some(predicate),
                None,
                Some(oxigraph::model::GraphNameRef::NamedNode(
                    node.graph.as_ref(),
                )),
            )
            .collect()
    }

    /// The what-if run whose fork is session `fork`, if any.
    pub(crate) fn what_if_of(&self, fork: &NamedNode) -> Result<Option<crate::model::WhatIfInfo>> {
        let graph = oxigraph::model::GraphNameRef::NamedNode(fork.as_ref());
        for quad in self.backend.quads(
            None,
            Some(ft::RESULT_SESSION),
            Some(fork.as_ref().into()),
            Some(graph),
        ) {
            let NamedOrBlankNode::NamedNode(iri) = quad?.subject else {
                continue;
            };
            let node = Node {
                iri,
                graph: fork.clone(),
            };
            if !self
                .backend
                .contains(QuadRef::new(node.iri.as_ref(), rdf::TYPE, ft::RUN, graph))?
            {
                continue;
            }
            let run = self.run(&node)?;
            let comparison = match self.comparison_of(&node)? {
                Some(c) => self.comparison(&c)?.id,
                None => String::new(),
            };
            return Ok(Some(crate::model::WhatIfInfo {
                comparison,
                run: run.id,
                arm: run.name,
                status: run.status,
                detail: run.detail,
            }));
        }
        Ok(None)
    }

    /// What turn `turn` (in graph `graph`) was derived from.
    pub(crate) fn derived_from(
        &self,
        turn: &NamedNode,
        graph: &NamedNode,
    ) -> Result<Vec<NamedNode>> {
        let mut out = Vec::new();
        for quad in self.backend.quads(
            Some(turn.as_ref().into()),
            Some(prov::WAS_DERIVED_FROM),
            None,
            Some(oxigraph::model::GraphNameRef::NamedNode(graph.as_ref())),
        ) {
            if let Term::NamedNode(original) = quad?.object {
                out.push(original);
            }
        }
        Ok(out)
    }

    /// Whether run `node` is still `running`.
    pub(crate) fn run_is_running(&self, node: &Node) -> Result<bool> {
        let running = node.quad(ft::STATUS, literal(RunStatus::Running.as_str()));
        self.backend.contains(QuadRef::from(&running))
    }

    /// The model calls of run `node`, by the index of the turn each generated.
    pub(crate) fn calls(&self, node: &Node) -> Result<Vec<StoredCall>> {
        let mut out = Vec::new();
        for part in self.parts(&node.iri)? {
            let mut call = StoredCall {
                index: 0,
                figures: Default::default(),
            };
            for quad in self.about(part.iri.as_ref(), part.graph.as_ref())? {
                let v = text(&quad.object).unwrap_or_default();
                let n = || v.parse::<u64>().ok();
                let f = &mut call.figures;
                let p = quad.predicate.as_ref();
                if p == ft::AT_INDEX {
                    call.index = n().unwrap_or(0);
                } else if p == ft::INPUT_TOKENS {
                    f.input_tokens = n();
                } else if p == ft::OUTPUT_TOKENS {
                    f.output_tokens = n();
                } else if p == ft::CACHED_TOKENS {
                    f.cached_tokens = n();
                } else if p == ft::LATENCY_MS {
                    f.latency_ms = n().unwrap_or(0);
                } else if p == ft::FINISH_REASON {
                    f.finish_reason = Some(v.to_string());
                } else if p == ft::COST_USD {
                    f.cost_usd = v.parse().ok();
                } else if p == ft::CHARGED_USD {
                    f.charged_usd = v.parse().unwrap_or(0.0);
                }
            }
            out.push(call);
        }
        out.sort_by_key(|c| c.index);
        Ok(out)
    }
}

/// What the store measured of the model call that generated a turn.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Generated {
    pub(crate) input_tokens: Option<u64>,
    pub(crate) output_tokens: Option<u64>,
    pub(crate) latency_ms: Option<u64>,
    pub(crate) cost_usd: Option<f64>,
    /// The comparison the call was a step of, by its id.
    pub(crate) comparison: Option<String>,
}

impl Rdf<'_> {
    /// The figures of the activity that generated turn `turn` (stored in `graph`): a
    /// what-if job, or a comparison's model call. `None` for a turn no model call
    /// recorded generating.
    pub(crate) fn generated(
        &self,
        turn: &NamedNode,
        graph: &NamedNode,
    ) -> Result<Option<Generated>> {
        let mut activity = None;
        for quad in self.backend.quads(
            Some(turn.as_ref().into()),
            Some(prov::WAS_GENERATED_BY),
            None,
            Some(oxigraph::model::GraphNameRef::NamedNode(graph.as_ref())),
        ) {
            if let Term::NamedNode(a) = quad?.object {
                activity = Some(a);
            }
        }
        let Some(activity) = activity else {
            return Ok(None);
        };
        let mut out = Generated::default();
        let mut run = None;
        for quad in self
            .backend
            .quads(Some(activity.as_ref().into()), None, None, None)
        {
            let quad = quad?;
            let p = quad.predicate.as_ref();
            let v = text(&quad.object).unwrap_or_default();
            if p == ft::INPUT_TOKENS {
                out.input_tokens = v.parse().ok();
            } else if p == ft::OUTPUT_TOKENS {
                out.output_tokens = v.parse().ok();
            } else if p == ft::LATENCY_MS {
                out.latency_ms = v.parse().ok();
            } else if p == ft::COST_USD {
                out.cost_usd = v.parse().ok();
            } else if p == dcterms::IS_PART_OF {
                if let Term::NamedNode(r) = quad.object {
                    run = Some(r);
                }
            }
        }
        // A call is part of a run, which is part of a comparison with a job id.
        if let Some(run) = run {
            for quad in self.backend.quads(
                Some(run.as_ref().into()),
                Some(dcterms::IS_PART_OF),
                None,
                None,
            ) {
                if let Term::NamedNode(comparison) = quad?.object {
                    for q in self.backend.quads(
                        Some(comparison.as_ref().into()),
                        Some(ft::JOB_ID),
                        None,
                        None,
                    ) {
                        out.comparison = text(&q?.object).map(str::to_string);
                    }
                }
            }
        }
        Ok(Some(out))
    }
}

/// An experiment sample's outcome as its quads are read.
#[derive(Default)]
struct OutcomeFields {
    verdict: Option<crate::model::Verdict>,
    agent_exit: Option<i64>,
    verify_exit: Option<i64>,
    verify_output: String,
    agent_output: String,
    wall_ms: u64,
    replayed_calls: u64,
    drift: (Option<u64>, Option<u64>, Option<String>),
}

impl OutcomeFields {
    /// Takes the value `v` of `p` if `p` is an outcome's; whether it was.
    fn take(&mut self, p: NamedNodeRef<'_>, v: &str) -> Result<bool> {
        let n = || v.parse::<u64>().ok();
        if p == ft::VERDICT {
            self.verdict = Some(v.parse()?);
        } else if p == ft::AGENT_EXIT_CODE {
            self.agent_exit = v.parse().ok();
        } else if p == ft::VERIFY_EXIT_CODE {
            self.verify_exit = v.parse().ok();
        } else if p == ft::VERIFY_OUTPUT {
            self.verify_output = v.to_string();
        } else if p == ft::AGENT_OUTPUT {
            self.agent_output = v.to_string();
        } else if p == ft::WALL_MS {
            self.wall_ms = n().unwrap_or(0);
        } else if p == ft::REPLAYED_CALLS {
            self.replayed_calls = n().unwrap_or(0);
        } else if p == ft::DRIFT_CALL {
            self.drift.0 = n();
        } else if p == ft::DRIFT_INDEX {
            self.drift.1 = n();
        } else if p == ft::DRIFT_DETAIL {
            self.drift.2 = Some(v.to_string());
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    fn finish(self) -> Option<crate::model::SampleOutcome> {
        let drift = match self.drift {
            (Some(call), Some(index), detail) => Some(crate::model::Drift {
                call,
                index,
                detail: detail.unwrap_or_default(),
            }),
            _ => None,
        };
        Some(crate::model::SampleOutcome {
            verdict: self.verdict?,
            agent_exit: self.agent_exit,
            verify_exit: self.verify_exit,
            verify_output: self.verify_output,
            agent_output: self.agent_output,
            wall_ms: self.wall_ms,
            replayed_calls: self.replayed_calls,
            drift,
        })
    }
}
