//! A Claude Code log's lines put back into the conversation the model saw.
//!
//! Claude Code writes one answer of the model as several lines, a line per content
//! block, that share the answer's `message.id`: each a child of the one before (or, when
//! a call's result came back before the next block was written, a child of that result,
//! the line then naming its `apiBlockIndex`). It hangs each `tool_result` line off the
//! `tool_use` line it answers, in the order the results came back, and the next message
//! off the last result. Read as a tree, every parallel call is a branch point; the model
//! saw one assistant message and then the results, in the order they were written.
//!
//! [`rebuild`] makes that conversation: the lines of one answer become one node (one
//! assistant turn, its text and every call), its results follow in the order of the
//! log, one after the other, and whatever hangs on any of them hangs on the node that
//! now holds its parent (after the whole answer, for a line hanging on one of its
//! lines). A line that hangs elsewhere (a user who went back, an answer regenerated)
//! stays a branch.
//!
//! Lines already in the store are left one node each, where they are: a stored turn is
//! never rewritten. An answer an earlier import caught half-written (its first lines
//! stored, the others written since) goes on as a second assistant turn after what is
//! stored of it, its new results after that; no branch is made.

use super::{resolve, Family, Node};
use crate::model::{Kind, NewTurn, Role};
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// `family` with the lines of each answer made one node and its results chained after
/// it; `held` says whether a line (by uuid) is in the store already.
pub(super) fn rebuild(family: Family, held: impl Fn(&str) -> bool) -> Family {
    let (steps, parents) = steps(&family);
    if steps.iter().all(|s| s.members() < 2) {
        return family;
    }
    let Family {
        title,
        nodes,
        passthrough,
        split_answers,
        ..
    } = family;
    let mut nodes: Vec<Option<Node>> = nodes.into_iter().map(Some).collect();
    // Each step's nodes, in conversation order, go where its first line was.
    let mut placed: HashMap<usize, Vec<Node>> = HashMap::new();
    // A line hanging on any line of an answer hangs after the whole answer.
    let mut after: HashMap<usize, String> = HashMap::new();
    for step in &steps {
        if step.members() < 2 {
            continue;
        }
        let first = step.group[0];
        let before = match parents[first].and_then(|p| after.get(&p)) {
            Some(last) => Some(last.clone()),
            None => nodes[first].as_ref().and_then(|n| n.parent.clone()),
        };
        let mut take = |lines: &[usize], keep: bool| -> Vec<Node> {
            let mut out = Vec::new();
            for &i in lines {
                if nodes[i].as_ref().is_some_and(|n| held(&n.uuid) == keep) {
                    out.extend(nodes[i].take());
                }
            }
            out
        };
        let mut chain = take(&step.group, true);
        let mut last = chain.last().map(|n| n.uuid.clone());
        chain.extend(take(&step.results, true));
        if let Some(fresh) = merge(take(&step.group, false)) {
            last = Some(fresh.uuid.clone());
            chain.push(fresh);
        }
        chain.extend(take(&step.results, false));
        if let Some(last) = last {
            after.extend(step.group.iter().map(|&i| (i, last.clone())));
        }
        let mut parent = before;
        for node in &mut chain {
            node.parent = parent;
            parent = Some(node.uuid.clone());
        }
        placed.insert(first, chain);
    }
    let mut out = Family {
        title,
        passthrough,
        split_answers,
        ..Family::default()
    };
    for (i, mut node) in nodes.into_iter().enumerate() {
        if let (Some(node), Some(last)) = (&mut node, parents[i].and_then(|p| after.get(&p))) {
            node.parent = Some(last.clone());
        }
        let chain = placed.remove(&i).unwrap_or_default();
        for node in chain.into_iter().chain(node) {
            let index = out.nodes.len();
            for uuid in std::iter::once(&node.uuid).chain(&node.merged) {
                out.by_uuid.insert(uuid.clone(), index);
            }
            out.nodes.push(node);
        }
    }
    out
}

/// The lines of one answer of the model and the lines of its calls' results.
struct Step {
    message: Option<String>,
    agent: Option<String>,
    /// The answer's lines, in the log's order.
    group: Vec<usize>,
    /// The lines answering its calls, in the log's order.
    results: Vec<usize>,
    calls: HashSet<String>,
}

impl Step {
    fn members(&self) -> usize {
        self.group.len() + self.results.len()
    }
}

/// The answers of a family and their results, and each line's parent (by index, through
/// lines not imported). A line joins the answer its parent
/// belongs to when it is an assistant line of the same `message.id` (hanging on one of
/// its lines, or on a result and naming a block index past the first), or a user line
/// answering one of its calls.
fn steps(family: &Family) -> (Vec<Step>, Vec<Option<usize>>) {
    let nodes = &family.nodes;
    let mut steps: Vec<Step> = Vec::new();
    let mut step_of: Vec<Option<usize>> = vec![None; nodes.len()];
    let mut parents = Vec::with_capacity(nodes.len());
    for (i, node) in nodes.iter().enumerate() {
        let parent = resolve(family, node.parent.clone()).filter(|&p| p < i);
        parents.push(parent);
        let owner = parent.and_then(|p| Some((p, step_of[p]?)));
        if node.kind == "assistant" {
            let joins = owner.filter(|&(p, s)| {
                let step = &steps[s];
                node.message.is_some()
                    && step.message == node.message
                    && step.agent == node.agent
                    && (step.group.contains(&p) || node.block.is_some_and(|b| b > 0))
            });
            let s = match joins {
                Some((_, s)) => s,
                None => {
                    steps.push(Step {
                        message: node.message.clone(),
                        agent: node.agent.clone(),
                        group: Vec::new(),
                        results: Vec::new(),
                        calls: HashSet::new(),
                    });
                    steps.len() - 1
                }
            };
            steps[s].group.push(i);
            steps[s].calls.extend(node.turns.iter().flat_map(call_ids));
            step_of[i] = Some(s);
        } else if let Some((_, s)) = owner {
            let answers = node.turns.iter().any(|t| {
                t.role == Role::Tool
                    && t.tool_call_id
                        .as_ref()
                        .is_some_and(|id| steps[s].calls.contains(id))
            });
            if answers {
                steps[s].results.push(i);
                step_of[i] = Some(s);
            }
        }
    }
    (steps, parents)
}

/// The ids of the tool calls a turn makes.
fn call_ids(turn: &NewTurn) -> Vec<String> {
    let Some(Ok(Value::Array(calls))) = turn.tool_calls.as_deref().map(serde_json::from_str) else {
        return Vec::new();
    };
    calls
        .iter()
        .filter_map(|c| c.get("id")?.as_str().map(str::to_string))
        .collect()
}

/// The lines of one answer as one node: one assistant turn with their text (blocks
/// joined by a blank line, as within a line) and all their calls, in order.
fn merge(lines: Vec<Node>) -> Option<Node> {
    let mut lines = lines.into_iter();
    let mut node = lines.next()?;
    for line in lines {
        node.merged.push(line.uuid);
        node.merged.extend(line.merged);
        node.spawned.extend(line.spawned);
        node.copy &= line.copy;
        node.turns.extend(line.turns);
    }
    if node.turns.len() > 1 {
        node.turns = vec![one_turn(std::mem::take(&mut node.turns))];
    }
    Some(node)
}

/// Assistant turns of one answer as one turn.
fn one_turn(turns: Vec<NewTurn>) -> NewTurn {
    let text: Vec<&str> = turns
        .iter()
        .map(|t| t.content.as_str())
        .filter(|c| !c.is_empty())
        .collect();
    let calls: Vec<Value> = turns
        .iter()
        .filter_map(|t| serde_json::from_str::<Value>(t.tool_calls.as_deref()?).ok())
        .flat_map(|c| c.as_array().cloned().unwrap_or_default())
        .collect();
    let mut turn = NewTurn::new(Role::Assistant, text.join("\n\n"));
    if !calls.is_empty() {
        turn = turn.tool_calls(Value::Array(calls).to_string());
        if text.is_empty() {
            turn = turn.kind(Kind::ToolCall);
        }
    }
    if let Some(model) = turns.iter().find_map(|t| t.model.clone()) {
        turn = turn.model(model);
    }
    turn
}
