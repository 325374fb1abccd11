//! Where an arm's turns part from the baseline's: the turn-aligned diff, and three
//! points of divergence read off it. The first is where anything differs (role, kind,
//! text or tool calls); the other two keep the text and the tool calls apart, so that a
//! model rewording what it says around the very call the recording made is not taken
//! for a model that calls something else.

use super::provider::tool_calls;
use super::{Cell, DiffRow};
use crate::error::Result;
use crate::model::Turn;

/// Where an arm first differs from the baseline, each `None` when it does not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Divergence {
    /// The first index whose turns differ in any way, or where one side has ended.
    pub(crate) first: Option<u64>,
    /// The first index whose turns differ in role or text, or where one side has ended.
    pub(crate) text: Option<u64>,
    /// The turn holding the first tool call (names and canonical arguments, in call
    /// order over the whole run) that is not the baseline's: the arm's turn, or the
    /// baseline's where the arm made no such call.
    pub(crate) tool_call: Option<u64>,
}

/// The arm's turns against the baseline's, index by index from `at`: the same while
/// every turn so far has the same role, kind, content and tool calls (names, canonical
/// arguments). Not the digests: they cover the calls' ids, which a model makes anew, and
/// the tool results that answer them by those ids.
pub(crate) fn diff(baseline: &[Turn], arm: &[Turn], at: u64) -> Result<Vec<DiffRow>> {
    let mut rows = Vec::new();
    let mut same_so_far = true;
    for i in 0..baseline.len().max(arm.len()) {
        let (b, a) = (baseline.get(i), arm.get(i));
        same_so_far &= match (b, a) {
            (Some(b), Some(a)) => {
                (b.role, b.kind, &b.content) == (a.role, a.kind, &a.content)
                    && calls_of(b)? == calls_of(a)?
            }
            _ => false,
        };
        rows.push(DiffRow {
            index: at + i as u64,
            same: same_so_far,
            baseline: b.map(cell).transpose()?,
            arm: a.map(cell).transpose()?,
        });
    }
    Ok(rows)
}

/// Where the arm's turns (`arm`) part from the baseline's (`baseline`), both from `at`.
pub(crate) fn divergence(baseline: &[Turn], arm: &[Turn], at: u64) -> Result<Divergence> {
    let first = diff(baseline, arm, at)?
        .iter()
        .find(|r| !r.same)
        .map(|r| r.index);
    let text = (0..baseline.len().max(arm.len()))
        .find(|&i| match (baseline.get(i), arm.get(i)) {
            (Some(b), Some(a)) => (b.role, &b.content) != (a.role, &a.content),
            _ => true,
        })
        .map(|i| at + i as u64);
    let (ours, theirs) = (call_sequence(baseline, at)?, call_sequence(arm, at)?);
    let tool_call =
        (0..ours.len().max(theirs.len())).find_map(|k| match (ours.get(k), theirs.get(k)) {
            (Some(b), Some(a)) if b.1 == a.1 => None,
            (_, Some(a)) => Some(a.0),
            (Some(b), None) => Some(b.0),
            (None, None) => None,
        });
    Ok(Divergence {
        first,
        text,
        tool_call,
    })
}

/// A turn as a diff shows it.
fn cell(turn: &Turn) -> Result<Cell> {
    Ok(Cell {
        role: turn.role.as_str().into(),
        kind: turn.kind.as_str().into(),
        content: turn.content.clone(),
        tool_calls: tool_calls(turn)?.iter().map(|c| c.signature()).collect(),
    })
}

fn calls_of(turn: &Turn) -> Result<Vec<(String, String)>> {
    Ok(tool_calls(turn)?
        .into_iter()
        .map(|c| {
            let args = c.canonical_arguments();
            (c.name, args)
        })
        .collect())
}

/// Every tool call of `turns` (which start at index `at`) in call order, each with the
/// index of the turn that makes it.
fn call_sequence(turns: &[Turn], at: u64) -> Result<Vec<(u64, (String, String))>> {
    let mut out = Vec::new();
    for (i, turn) in turns.iter().enumerate() {
        out.extend(
            calls_of(turn)?
                .into_iter()
                .map(|call| (at + i as u64, call)),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Kind, Role, SessionId};
    use serde_json::json;

    fn turn(index: u64, role: Role, content: &str, call: Option<(&str, &str, &str)>) -> Turn {
        Turn {
            index,
            role,
            kind: if call.is_some() {
                Kind::ToolCall
            } else {
                Kind::Message
            },
            content: content.into(),
            name: None,
            tool_call_id: None,
            tool_calls: call.map(|(id, name, args)| {
                json!([{"id": id, "type": "function",
                        "function": {"name": name, "arguments": args}}])
                .to_string()
            }),
            model: None,
            payload: None,
            session: SessionId::new("s").unwrap(),
            branch: "main".into(),
            created_at: None,
            digest: String::new(),
        }
    }

    /// The recording from index 2: a call, its result, an answer, a second call.
    fn recording() -> Vec<Turn> {
        vec![
            turn(
                2,
                Role::Assistant,
                "",
                Some(("c1", "get_weather", r#"{"city":"Paris"}"#)),
            ),
            turn(3, Role::Tool, "18C, sunny", None),
            turn(4, Role::Assistant, "It is 18C and sunny.", None),
            turn(5, Role::User, "And the train price?", None),
            turn(
                6,
                Role::Assistant,
                "",
                Some(("c2", "get_price", r#"{"mode":"train"}"#)),
            ),
        ]
    }

    #[test]
    fn a_rewording_around_the_recorded_call_diverges_in_text_only() {
        let mut arm = recording();
        // Other words beside the same call (its id the model's own, its arguments
        // spelled otherwise), then other words for the answer.
        arm[0] = turn(
            2,
            Role::Assistant,
            "Let me look that up.",
            Some(("x1", "get_weather", r#"{ "city": "Paris" }"#)),
        );
        arm[2].content = "Sunny, 18C.".into();
        let d = divergence(&recording(), &arm, 2).unwrap();
        assert_eq!(d.first, Some(2));
        assert_eq!(d.text, Some(2));
        assert_eq!(d.tool_call, None, "the calls are the recording's");
    }

    #[test]
    fn another_call_marks_the_turn_that_makes_it_even_after_a_rewording() {
        let mut arm = recording();
        arm[2].content = "Sunny, 18C.".into();
        arm[4] = turn(6, Role::Assistant, "", Some(("y2", "book_flight", "{}")));
        let d = divergence(&recording(), &arm, 2).unwrap();
        assert_eq!((d.first, d.text, d.tool_call), (Some(4), Some(4), Some(6)));
        // The same call with other arguments is another call.
        let mut arm = recording();
        arm[4] = turn(
            6,
            Role::Assistant,
            "",
            Some(("y2", "get_price", r#"{"mode":"bus"}"#)),
        );
        let d = divergence(&recording(), &arm, 2).unwrap();
        assert_eq!((d.first, d.text, d.tool_call), (Some(6), None, Some(6)));
    }

    #[test]
    fn a_call_made_a_turn_later_is_the_same_call_and_a_missing_one_is_the_recordings() {
        // The arm says a word first, then makes the recorded call one turn later.
        let recorded = recording();
        let mut arm = vec![turn(2, Role::Assistant, "One moment.", None)];
        arm.extend(recorded[..4].iter().cloned().map(|mut t| {
            t.index += 1;
            t
        }));
        let d = divergence(&recorded, &arm, 2).unwrap();
        assert_eq!(d.text, Some(2));
        // Its first call is the recording's; it stopped before the second, which the
        // recording made at 6.
        assert_eq!(d.tool_call, Some(6));
        // An arm that replays the recording does not diverge at all.
        let d = divergence(&recorded, &recorded, 2).unwrap();
        assert_eq!(d, Divergence::default());
    }
}
