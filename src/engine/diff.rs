//! Where two sessions part: lowest common ancestor and first divergent index.

use crate::error::Result;
use crate::model::{FoundBy, ReplayRecord, SessionDiff, SessionId};
use crate::store::Store;

impl Store {
    /// Compares `a` and `b`: their deepest shared session by lineage, the length of the
    /// history they share (by turn digests, so it holds across a detach and for
    /// identical but unrelated histories), and both tails from there as replay records.
    pub fn diff(&self, a: &SessionId, b: &SessionId) -> Result<SessionDiff> {
        let (chain_a, chain_b) = (self.chain(a)?, self.chain(b)?);
        let common_ancestor = chain_a
            .levels()
            .iter()
            .rev()
            .find(|f| chain_b.levels().iter().any(|g| g.iri == f.iri))
            .map(|f| f.id.clone());
        let (turns_a, turns_b) = (self.load(a, None)?, self.load(b, None)?);
        // Digests chain, so the first difference ends the shared prefix.
        let common_prefix = turns_a
            .iter()
            .zip(&turns_b)
            .take_while(|(x, y)| x.digest == y.digest)
            .count();
        let found_by = match (&common_ancestor, common_prefix) {
            (Some(_), _) => FoundBy::Lineage,
            (None, 0) => FoundBy::None,
            (None, _) => FoundBy::Digest,
        };
        let tail = |turns: &[crate::Turn]| -> Vec<ReplayRecord> {
            turns[common_prefix..]
                .iter()
                .map(ReplayRecord::from)
                .collect()
        };
        Ok(SessionDiff {
            a: a.clone(),
            b: b.clone(),
            common_ancestor,
            common_prefix: common_prefix as u64,
            found_by,
            a_tail: tail(&turns_a),
            b_tail: tail(&turns_b),
        })
    }
}

impl ReplayRecord {
    /// The turn as a diff compares and shows it: its content, then a line per tool
    /// call it makes (`→ name(arguments)`, arguments in canonical form) or the call it
    /// answers (`← id`), so that two turns that differ only in a call's arguments are
    /// told apart.
    ///
    /// ```
    /// use forktrail::{ReplayRecord, Role};
    /// let mut r = ReplayRecord::new(2, Role::Assistant, "", "main");
    /// r.tool_calls = Some(r#"[{"id":"1","function":{"name":"search","arguments":"{\"day\": \"sunday\"}"}}]"#.into());
    /// assert_eq!(r.shown(), r#"→ search({"day":"sunday"})"#);
    /// ```
    pub fn shown(&self) -> String {
        let mut lines: Vec<String> = Vec::new();
        if !self.content.is_empty() {
            lines.push(self.content.clone());
        }
        if let Some(id) = &self.tool_call_id {
            lines.push(format!("← {id}"));
        }
        match crate::model::tool_call::parse_tool_calls(self.tool_calls.as_deref()) {
            Ok(calls) => lines.extend(calls.iter().map(|c| format!("→ {}", c.full_signature()))),
            Err(_) => lines.extend(self.tool_calls.iter().map(|t| format!("→ {t}"))),
        }
        lines.join("\n")
    }
}

/// How a row of an aligned diff relates its two sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum RowKind {
    /// The same role and content on both sides.
    Same,
    /// The same role, other content: one turn rewritten.
    Modified,
    /// Only on the left (`a`).
    LeftOnly,
    /// Only on the right (`b`).
    RightOnly,
}

/// A row of an aligned diff: indices into the two tails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct AlignedRow {
    pub kind: RowKind,
    pub left: Option<usize>,
    pub right: Option<usize>,
}

/// The most cells the alignment's table may have (tails of 2,000 turns each); longer
/// tails are paired by position, role-aware.
const ALIGN_CELLS: usize = 4_000_000;

impl SessionDiff {
    /// The tails aligned: turns equal in role and [`ReplayRecord::shown`] text on both
    /// sides (a longest common subsequence) are `Same` rows; between them, the turns left over pair up
    /// in order as `Modified` while their roles agree, and the rest are `LeftOnly` or
    /// `RightOnly`. So an inserted turn shifts nothing, and a user turn is never
    /// paired with an assistant's.
    pub fn rows(&self) -> Vec<AlignedRow> {
        fn key(r: &ReplayRecord) -> (crate::model::Role, String) {
            (r.role, r.shown())
        }
        let a: Vec<_> = self.a_tail.iter().map(key).collect();
        let b: Vec<_> = self.b_tail.iter().map(key).collect();
        let matches = if a.len().saturating_mul(b.len()) <= ALIGN_CELLS {
            common_subsequence(&a, &b)
        } else {
            Vec::new()
        };
        let mut rows = Vec::new();
        let (mut i, mut j) = (0, 0);
        for (mi, mj) in matches.into_iter().chain([(a.len(), b.len())]) {
            pair_run(&self.a_tail, &self.b_tail, (i, mi), (j, mj), &mut rows);
            if mi < a.len() && mj < b.len() {
                rows.push(AlignedRow {
                    kind: RowKind::Same,
                    left: Some(mi),
                    right: Some(mj),
                });
            }
            (i, j) = (mi + 1, mj + 1);
        }
        rows
    }
}

/// Rows for the turns between two matches: `a[ai.0..ai.1]` against `b[bj.0..bj.1]`,
/// paired in order while their roles agree.
fn pair_run(
    a: &[ReplayRecord],
    b: &[ReplayRecord],
    (mut i, i_end): (usize, usize),
    (mut j, j_end): (usize, usize),
    rows: &mut Vec<AlignedRow>,
) {
    let row = |kind, left, right| AlignedRow { kind, left, right };
    while i < i_end || j < j_end {
        match (i < i_end, j < j_end) {
            (true, true) if a[i].role == b[j].role => {
                rows.push(row(RowKind::Modified, Some(i), Some(j)));
                i += 1;
                j += 1;
            }
            // Roles differ: whichever side's role comes again sooner on the other
            // side waits; the other goes alone.
            (true, true) => {
                let b_has = b[j..j_end].iter().any(|t| t.role == a[i].role);
                if b_has {
                    rows.push(row(RowKind::RightOnly, None, Some(j)));
                    j += 1;
                } else {
                    rows.push(row(RowKind::LeftOnly, Some(i), None));
                    i += 1;
                }
            }
            (true, false) => {
                rows.push(row(RowKind::LeftOnly, Some(i), None));
                i += 1;
            }
            (false, _) => {
                rows.push(row(RowKind::RightOnly, None, Some(j)));
                j += 1;
            }
        }
    }
}

/// The index pairs of a longest common subsequence of `a` and `b`, in order.
pub(crate) fn common_subsequence<T: PartialEq>(a: &[T], b: &[T]) -> Vec<(usize, usize)> {
    let (n, m) = (a.len(), b.len());
    // lengths[i][j]: the LCS of a[i..] and b[j..], row-major.
    let mut lengths = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lengths[at(i, j)] = if a[i] == b[j] {
                lengths[at(i + 1, j + 1)] + 1
            } else {
                lengths[at(i + 1, j)].max(lengths[at(i, j + 1)])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < n && j < m {
        if a[i] == b[j] {
            out.push((i, j));
            i += 1;
            j += 1;
        } else if lengths[at(i + 1, j)] >= lengths[at(i, j + 1)] {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// A text as runs of `(changed, text)`.
pub type WordRuns = Vec<(bool, String)>;

/// A word-level diff of two texts: each side as runs of `(changed, text)`, whitespace
/// kept with the word before it. `None` when the texts are too long to compare word by
/// word (over 2,000 words each).
pub fn word_diff(a: &str, b: &str) -> Option<(WordRuns, WordRuns)> {
    let words = |t: &str| -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for piece in t.split_inclusive(char::is_whitespace) {
            match out.last_mut() {
                Some(last) if piece.trim().is_empty() => last.push_str(piece),
                _ => out.push(piece.to_string()),
            }
        }
        out
    };
    let (wa, wb) = (words(a), words(b));
    if wa.len() > 2000 || wb.len() > 2000 {
        return None;
    }
    let trimmed = |w: &[String]| {
        w.iter()
            .map(|s| s.trim_end().to_string())
            .collect::<Vec<_>>()
    };
    let pairs = common_subsequence(&trimmed(&wa), &trimmed(&wb));
    let runs = |words: &[String], kept: &std::collections::HashSet<usize>| {
        let mut out: Vec<(bool, String)> = Vec::new();
        for (i, w) in words.iter().enumerate() {
            let changed = !kept.contains(&i);
            match out.last_mut() {
                Some((c, text)) if *c == changed => text.push_str(w),
                _ => out.push((changed, w.clone())),
            }
        }
        out
    };
    let left: std::collections::HashSet<usize> = pairs.iter().map(|p| p.0).collect();
    let right: std::collections::HashSet<usize> = pairs.iter().map(|p| p.1).collect();
    Some((runs(&wa, &left), runs(&wb, &right)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Role;

    fn tail(turns: &[(Role, &str)]) -> Vec<ReplayRecord> {
        turns
            .iter()
            .enumerate()
            .map(|(index, (role, content))| ReplayRecord::new(index as u64, *role, *content, "b"))
            .collect()
    }

    fn kinds(
        a: &[(Role, &str)],
        b: &[(Role, &str)],
    ) -> Vec<(RowKind, Option<usize>, Option<usize>)> {
        let d = SessionDiff {
            a: SessionId::new("a").unwrap(),
            b: SessionId::new("b").unwrap(),
            common_ancestor: None,
            common_prefix: 0,
            found_by: FoundBy::None,
            a_tail: tail(a),
            b_tail: tail(b),
        };
        d.rows()
            .into_iter()
            .map(|r| (r.kind, r.left, r.right))
            .collect()
    }

    #[test]
    fn an_inserted_turn_shifts_nothing_and_roles_never_pair_across() {
        use Role::*;
        use RowKind::*;
        let a = [(User, "hi"), (Assistant, "hello"), (User, "bye")];
        let b = [
            (User, "hi"),
            (Tool, "{}"),
            (Assistant, "hello!"),
            (User, "bye"),
        ];
        assert_eq!(
            kinds(&a, &b),
            vec![
                (Same, Some(0), Some(0)),
                (RightOnly, None, Some(1)),
                (Modified, Some(1), Some(2)),
                (Same, Some(2), Some(3)),
            ]
        );
        assert_eq!(
            kinds(&[(User, "x")], &[(Assistant, "y")]),
            vec![(LeftOnly, Some(0), None), (RightOnly, None, Some(0))]
        );
    }

    #[test]
    fn a_word_diff_marks_only_the_words_that_changed() {
        let (left, right) = word_diff("take the 07:25 train", "take the 10:25 train").unwrap();
        assert_eq!(
            left,
            vec![
                (false, "take the ".into()),
                (true, "07:25 ".into()),
                (false, "train".into())
            ]
        );
        assert_eq!(right[1], (true, "10:25 ".into()));
    }
}
