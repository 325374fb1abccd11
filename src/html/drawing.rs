//! The fork tree drawn: server-rendered SVG, no script and no library. One box per
//! branch (its label, fork point, own turns, models and tokens), the current branch
//! marked, each box a link that opens the branch at its fork point.
//!
//! The layout gives each subtree a run of columns of its own: a leaf takes the next
//! column, a parent sits centred over its first and last child. Subtrees never share a
//! column and are laid out in order, so no two edges cross, whatever the tree. Past
//! [`DEPTH_DRAWN`] levels, [`CHILDREN_DRAWN`] children of one branch or
//! [`BRANCHES_DRAWN`] branches in all, the rest under a branch is one "+N more" box
//! linking to the outline, so a family of hundreds of branches stays
//! a picture one can read; the outline below it is the whole tree, and the accessible
//! alternative.

use super::Links;
use crate::model::{SessionId, TreeNode};
use maud::{html, Markup};
use std::collections::{HashSet, VecDeque};

/// The levels drawn below the root; deeper branches are counted in a "+N more" box.
pub(crate) const DEPTH_DRAWN: usize = 6;
/// The children of one branch drawn; the others are counted in a "+N more" box.
pub(crate) const CHILDREN_DRAWN: usize = 8;

const COLUMN: f64 = 168.0;
const ROW: f64 = 92.0;
const BOX_W: f64 = 152.0;
const BOX_H: f64 = 58.0;
const MARGIN: f64 = 8.0;

/// A box of the drawing: a branch, or the branches left out under one.
#[derive(Debug)]
pub(crate) enum Drawn<'t> {
    Branch(&'t TreeNode),
    More { under: &'t TreeNode, count: u64 },
}

/// A placed box: its column (a centre, in columns), its level, and its parent's index.
#[derive(Debug)]
pub(crate) struct Placed<'t> {
    pub(crate) what: Drawn<'t>,
    pub(crate) column: f64,
    pub(crate) level: usize,
    pub(crate) parent: Option<usize>,
}

/// The branches drawn at most; the others are counted in "+N more" boxes.
pub(crate) const BRANCHES_DRAWN: usize = 48;

/// Places the boxes of the tree from `root`, parents before their children.
pub(crate) fn layout(root: &TreeNode) -> Vec<Placed<'_>> {
    let drawn = chosen(root);
    let mut out = Vec::new();
    let mut next = 0.0;
    place(root, 0, None, &drawn, &mut next, &mut out);
    out
}

/// The branches to draw: breadth first from the root (the levels nearest it matter
/// most), up to [`BRANCHES_DRAWN`], [`CHILDREN_DRAWN`] of one branch and
/// [`DEPTH_DRAWN`] levels. Those drawn under a branch are its first children.
fn chosen(root: &TreeNode) -> HashSet<*const TreeNode> {
    let mut drawn = HashSet::from([root as *const TreeNode]);
    let mut queue = VecDeque::from([(root, 0usize)]);
    while let Some((node, level)) = queue.pop_front() {
        if level >= DEPTH_DRAWN {
            continue;
        }
        for child in node.children.iter().take(CHILDREN_DRAWN) {
            if drawn.len() >= BRANCHES_DRAWN {
                return drawn;
            }
            drawn.insert(child as *const TreeNode);
            queue.push_back((child, level + 1));
        }
    }
    drawn
}

/// Places `node` and its subtree, leaves taking columns from `next`; returns its index.
fn place<'t>(
    node: &'t TreeNode,
    level: usize,
    parent: Option<usize>,
    drawn: &HashSet<*const TreeNode>,
    next: &mut f64,
    out: &mut Vec<Placed<'t>>,
) -> usize {
    let at = out.len();
    out.push(Placed {
        what: Drawn::Branch(node),
        column: 0.0,
        level,
        parent,
    });
    // Those drawn are a prefix of the children (see `chosen`).
    let n = node
        .children
        .iter()
        .take_while(|c| drawn.contains(&(*c as *const TreeNode)))
        .count();
    let hidden: u64 = node.children[n..]
        .iter()
        .map(|c| 1 + descendants(c))
        .sum::<u64>()
        + node.more_children;
    let mut columns = Vec::new();
    for child in &node.children[..n] {
        let i = place(child, level + 1, Some(at), drawn, next, out);
        columns.push(out[i].column);
    }
    if hidden > 0 {
        out.push(Placed {
            what: Drawn::More {
                under: node,
                count: hidden,
            },
            column: *next,
            level: level + 1,
            parent: Some(at),
        });
        columns.push(*next);
        *next += 1.0;
    }
    out[at].column = match (columns.first(), columns.last()) {
        (Some(first), Some(last)) => (first + last) / 2.0,
        _ => {
            *next += 1.0;
            *next - 1.0
        }
    };
    at
}

/// The branches below `node` as the tree holds them (those it left out included).
fn descendants(node: &TreeNode) -> u64 {
    node.more_children
        + node
            .children
            .iter()
            .map(|c| 1 + descendants(c))
            .sum::<u64>()
}

/// The box's top-left corner, in pixels.
fn corner(p: &Placed<'_>) -> (f64, f64) {
    (
        MARGIN + p.column * COLUMN + (COLUMN - BOX_W) / 2.0,
        MARGIN + p.level as f64 * ROW,
    )
}

/// The drawing of the tree from `root`, `current` marked; `outline` is where a "+N
/// more" box leads (the outline of the same page).
pub(crate) fn drawing(root: &TreeNode, current: &SessionId, links: Links<'_>) -> Markup {
    let placed = layout(root);
    let columns = placed.iter().map(|p| p.column).fold(0.0, f64::max) + 1.0;
    let levels = placed.iter().map(|p| p.level).max().unwrap_or(0) + 1;
    let width = 2.0 * MARGIN + columns * COLUMN;
    let height = 2.0 * MARGIN + (levels as f64 - 1.0) * ROW + BOX_H;
    html! {
        div.drawing {
            svg xmlns="http://www.w3.org/2000/svg" width=(width) height=(height)
                viewBox=(format!("0 0 {width} {height}")) role="group"
                aria-label="drawn fork tree" {
                @for p in &placed {
                    @if let Some(parent) = p.parent {
                        @let (px, py) = corner(&placed[parent]);
                        @let (cx, cy) = corner(p);
                        line.edge x1=(px + BOX_W / 2.0) y1=(py + BOX_H)
                            x2=(cx + BOX_W / 2.0) y2=(cy) {}
                    }
                }
                @for (n, p) in placed.iter().enumerate() { (node_box(n, p, current, links)) }
            }
        }
    }
}

/// One box: a branch linking to its fork point, or a count of those left out. Texts
/// are whole (a long label is clipped at the box's edge, not cut), so the link's name
/// holds what it shows.
fn node_box(n: usize, p: &Placed<'_>, current: &SessionId, links: Links<'_>) -> Markup {
    let (x, y) = corner(p);
    let clip = format!("clip-{n}");
    let text = |dy: f64, class: &str, s: &str| {
        html! { text class=(class) x=(x + 8.0) y=(y + dy) clip-path=(format!("url(#{clip})")) { (s) } }
    };
    let frame = html! {
        clipPath id=(clip) { rect x=(x + 4.0) y=(y) width=(BOX_W - 8.0) height=(BOX_H) {} }
    };
    match &p.what {
        Drawn::Branch(node) => {
            let here = node.session == *current;
            let own = node.length - node.forked_at_index.unwrap_or(0);
            let point = match node.forked_at_index {
                Some(at) => format!("@{at} · {own} own"),
                None => format!("{own} turns"),
            };
            let mut figures = node.models.join(", ");
            if let Some(t) = node.tokens {
                if !figures.is_empty() {
                    figures.push_str(" · ");
                }
                figures.push_str(&format!("{} tok", t.input + t.output));
            }
            let name = [node.branch.as_str(), &point, &figures]
                .iter()
                .filter(|s| !s.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join(" ");
            let body = html! {
                (frame)
                rect.node.current[here] x=(x) y=(y) width=(BOX_W) height=(BOX_H) rx="6" {}
                (text(18.0, "label", &node.branch))
                (text(34.0, "figures", &point))
                @if !figures.is_empty() { (text(50.0, "figures", &figures)) }
            };
            match links.branch(node) {
                // Named by its `title` (what it shows, whole), as SVG links are.
                Some(href) => html! {
                    a href=(href) aria-current=[here.then_some("page")] {
                        title { (name) } (body)
                    }
                },
                None => html! { g { title { (name) } (body) } },
            }
        }
        Drawn::More { under, count } => {
            let shown = format!("+{count} more");
            html! {
                a href=(format!("#outline-{}", under.session)) {
                    title { (shown) " under " (under.branch) }
                    (frame)
                    rect.more x=(x) y=(y) width=(BOX_W) height=(BOX_H) rx="6" {}
                    (text(34.0, "label", &shown))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: usize, at: Option<u64>, children: Vec<TreeNode>) -> TreeNode {
        TreeNode {
            session: SessionId::new(format!("s{id}")).unwrap(),
            branch: format!("b{id}"),
            forked_at_index: at,
            length: 4,
            summary: None,
            models: Vec::new(),
            tokens: None,
            children,
            more_children: 0,
        }
    }

    #[test]
    fn parents_sit_centred_over_their_children_and_leaves_take_their_own_columns() {
        let tree = node(
            0,
            None,
            vec![
                node(
                    1,
                    Some(1),
                    vec![node(3, Some(2), vec![]), node(4, Some(2), vec![])],
                ),
                node(2, Some(1), vec![]),
            ],
        );
        let placed = layout(&tree);
        let column = |id: &str| {
            placed
                .iter()
                .find(|p| matches!(p.what, Drawn::Branch(n) if n.session.as_str() == id))
                .unwrap()
                .column
        };
        assert_eq!((column("s3"), column("s4"), column("s2")), (0.0, 1.0, 2.0));
        assert_eq!(column("s1"), 0.5);
        assert_eq!(column("s0"), (0.5 + 2.0) / 2.0);
    }

    #[test]
    fn wide_and_deep_families_collapse_into_counted_boxes() {
        let wide = node(
            0,
            None,
            (1..=30).map(|i| node(i, Some(1), vec![])).collect(),
        );
        let placed = layout(&wide);
        assert_eq!(placed.len(), 1 + CHILDREN_DRAWN + 1);
        assert!(
            matches!(placed.last().unwrap().what, Drawn::More { count, .. } if count == 30 - CHILDREN_DRAWN as u64)
        );
        let mut deep = node(99, Some(1), vec![]);
        for i in (0..20).rev() {
            deep = node(i, Some(1), vec![deep]);
        }
        let placed = layout(&deep);
        assert_eq!(placed.iter().map(|p| p.level).max(), Some(DEPTH_DRAWN + 1));
        let more: Vec<u64> = placed
            .iter()
            .filter_map(|p| match p.what {
                Drawn::More { count, .. } => Some(count),
                _ => None,
            })
            .collect();
        assert_eq!(more, vec![21 - DEPTH_DRAWN as u64 - 1]);
    }
}
