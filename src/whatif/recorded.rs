//! A branch's open tool calls answered from the recording it was forked from: the
//! branch an edit or a model's answer made goes on past a tool call without running any
//! tool. Each call gets the recorded result a comparison's arm would get (the same
//! name and arguments, the first unused one made at or after the fork point, else the
//! latest before it), appended as a tool turn derived from that result, in one write.

use super::provider::{tool_calls, ToolCall};
use super::run::Recording;
use crate::error::{Error, Result};
use crate::model::{NewTurn, Role, SessionId, Turn};
use crate::rdf::WhatIfNode;
use crate::store::Store;

impl Store {
    /// Answers every tool call of `session`'s last turn from the recording it was forked
    /// from; returns the indices of the tool turns appended. Nothing is written when a
    /// call has no recorded result, the last turn makes no call, or the session is no
    /// fork; the error names the session, the turn and the call.
    pub fn answer_from_recording(&self, session: &SessionId) -> Result<Vec<u64>> {
        self.not_held(session)?;
        let info = self.info(session)?;
        let (Some(parent), Some(at)) = (info.parent.clone(), info.forked_at_index) else {
            return Err(Error::InvalidInput(format!(
                "session {session} is not a fork: there is no recording to answer its tool \
                 calls from"
            )));
        };
        let turns = self.load(session, None)?;
        let (caller, open) = open_calls(&turns)?;
        let Some(last) = caller.filter(|_| !open.is_empty()) else {
            return Err(Error::InvalidInput(format!(
                "the last turn of session {session} makes no tool call that is still open: \
                 there is nothing to answer"
            )));
        };
        let rec = Recording::new(self, &parent, at)?;
        let mut used = self.progress(session, &turns, &rec)?.used;
        let mut answers = Vec::new();
        for call in &open {
            let Some(result) = rec.answer(call, &used) else {
                return Err(Error::InvalidInput(format!(
                    "no recorded result answers {}({}) of turn {} of session {session}: \
                     the recording never made that call; answer it by hand",
                    call.name,
                    call.canonical_arguments(),
                    last.index
                )));
            };
            used.insert(result);
            answers.push((call, result));
        }
        let mut tx = self.write_on(&[self.session_iri(session)])?;
        let mut facts = self.require(session)?;
        let head = turns.last().map(|t| t.digest.as_str()).unwrap_or_default();
        if facts.length != turns.len() as u64 || self.digest_before(&facts, facts.length)? != head {
            return Err(Error::Conflict(format!(
                "session {session} changed while its tool calls were being answered: \
                 nothing was written; try again"
            )));
        }
        let (mut appended, mut prev) = (Vec::new(), None);
        for (call, result) in answers {
            let recorded = &rec.turns[result as usize];
            let mut turn =
                NewTurn::new(Role::Tool, recorded.content.clone()).tool_call_id(&call.id);
            if let Some(name) = &recorded.name {
                turn = turn.name(name);
            }
            let from = rec.iris[result as usize].clone();
            // Each after the one before, within this write (not yet in the store).
            let (index, digest) = self.append_after(&mut tx, &facts, turn, prev, |w, iri, _| {
                WhatIfNode::derived(w, iri, &from)
            })?;
            facts.length += 1;
            prev = Some(digest);
            appended.push(index);
        }
        tx.commit()?;
        Ok(appended)
    }
}

/// The last assistant turn of `turns` that only tool turns follow, and those of its
/// tool calls no tool turn after it answers yet (calls answered one by one by hand
/// leave the others open).
pub(crate) fn open_calls(turns: &[Turn]) -> Result<(Option<&Turn>, Vec<ToolCall>)> {
    let Some(caller) = turns.iter().rev().find(|t| t.role != Role::Tool) else {
        return Ok((None, Vec::new()));
    };
    if caller.role != Role::Assistant {
        return Ok((None, Vec::new()));
    }
    let answered: Vec<&str> = turns[caller.index as usize + 1 - turns[0].index as usize..]
        .iter()
        .filter_map(|t| t.tool_call_id.as_deref())
        .collect();
    let open = tool_calls(caller)?
        .into_iter()
        .filter(|c| !answered.contains(&c.id.as_str()))
        .collect();
    Ok((Some(caller), open))
}
