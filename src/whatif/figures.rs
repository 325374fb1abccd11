//! What the store measured of each turn a model wrote: tokens, latency and cost of the
//! call that generated it (a what-if job, a comparison's step, with the comparison),
//! or, for a turn imported from OpenTelemetry, what its span reported.

use crate::error::Result;
use crate::model::{SessionId, Turn};
use crate::store::Store;
use serde::Serialize;

/// The figures of one turn, as far as the store holds them.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TurnFigures {
    pub index: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The what-if comparison whose step wrote the turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comparison: Option<String>,
}

impl Store {
    /// The figures of `turns` (turns of one session, as [`Store::load_range`] reads
    /// them) that have any: one entry per such turn, in order.
    pub fn turn_figures(&self, turns: &[Turn]) -> Result<Vec<TurnFigures>> {
        let rdf = self.rdf();
        let mut out = Vec::new();
        for turn in turns {
            let owner: &SessionId = &turn.session;
            let iri = self.iris.turn(owner.as_str(), turn.index);
            let figures = match rdf.generated(&iri, &self.session_iri(owner))? {
                Some(g) => Some(TurnFigures {
                    index: turn.index,
                    input_tokens: g.input_tokens,
                    output_tokens: g.output_tokens,
                    latency_ms: g.latency_ms,
                    cost_usd: g.cost_usd,
                    comparison: g.comparison,
                }),
                None => otel_figures(turn),
            };
            out.extend(figures);
        }
        Ok(out)
    }
}

/// What an OpenTelemetry span reported of a turn, kept in its payload (`{"otel": …}`).
fn otel_figures(turn: &Turn) -> Option<TurnFigures> {
    let payload: serde_json::Value = serde_json::from_str(turn.payload.as_deref()?).ok()?;
    let otel = payload.get("otel")?;
    let n = |k: &str| otel.get(k).and_then(serde_json::Value::as_u64);
    let f = TurnFigures {
        index: turn.index,
        input_tokens: n("input_tokens"),
        output_tokens: n("output_tokens"),
        latency_ms: n("latency_ms"),
        ..Default::default()
    };
    (f.input_tokens.is_some() || f.output_tokens.is_some() || f.latency_ms.is_some()).then_some(f)
}
