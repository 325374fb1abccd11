//! Human-readable output: tables, trees (text, DOT, Mermaid), turns, query results.
//!
//! Everything is written to a caller's writer and every write error is returned, so a
//! reader that goes away (`forktrail list | head -1`) ends the command quietly instead
//! of a panic in `println!`.

use forktrail::demo::{DemoTree, MODEL_A};
use forktrail::{
    queries, AnchorInfo, BranchInfo, DeletePlan, DetachPlan, FoundBy, Job, Kind, NamedQuery, Role,
    SearchPage, SessionDiff, SessionInfo, SessionPage, SessionSummary, Store, TreeNode, Turn,
};
use oxigraph::io::{RdfFormat, RdfSerializer};
use oxigraph::model::Term;
use oxigraph::sparql::results::{QueryResultsFormat, QueryResultsSerializer};
use oxigraph::sparql::QueryResults;
use std::fmt::Write as _;
use std::io::{self, Write};

type CliResult = Result<(), Box<dyn std::error::Error>>;

/// `1 turn`, `2 turns`.
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// At most `max` characters of `text` on one line, with `…` when cut.
fn one_line(text: &str, max: usize) -> String {
    let flat = text.replace(['\n', '\r', '\t'], " ");
    if flat.chars().count() > max {
        format!("{}…", flat.chars().take(max - 1).collect::<String>())
    } else {
        flat
    }
}

/// The tool calls of a turn as `name(arguments)` lines; the raw JSON if it is not a list
/// of OpenAI-style calls.
fn calls(json: &str) -> Vec<String> {
    let parsed: Result<Vec<serde_json::Value>, _> = serde_json::from_str(json);
    let Ok(list) = parsed else {
        return vec![one_line(json, 200)];
    };
    list.iter()
        .map(|call| {
            let name = call
                .pointer("/function/name")
                .and_then(|n| n.as_str())
                .unwrap_or("?");
            let arguments = match call.pointer("/function/arguments") {
                Some(serde_json::Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            format!("{name}({})", one_line(&arguments, 160))
        })
        .collect()
}

/// One turn per block: `[index] role (branch): content`, continuation lines indented,
/// tool calls as `→ name(arguments)`, a tool result's call id after `←`.
pub fn turns(out: &mut dyn Write, turns: &[Turn]) -> io::Result<()> {
    for t in turns {
        let mut head = format!("[{}] {} ({})", t.index, t.role, t.branch);
        if t.role == Role::Tool {
            if let Some(name) = &t.name {
                head += &format!(" {name}");
            }
            if let Some(id) = &t.tool_call_id {
                head += &format!(" ← {id}");
            }
        }
        if !matches!(t.kind, Kind::Message | Kind::ToolCall) {
            head += &format!(" [{}]", t.kind);
        }
        let mut lines: Vec<String> = t.content.lines().map(str::to_string).collect();
        if let Some(json) = &t.tool_calls {
            lines.extend(calls(json).into_iter().map(|c| format!("→ {c}")));
        }
        let mut lines = lines.into_iter();
        match lines.next() {
            Some(first) => writeln!(out, "{head}: {first}")?,
            None => writeln!(out, "{head}:")?,
        }
        for line in lines {
            writeln!(out, "      {line}")?;
        }
    }
    Ok(())
}

pub fn show(out: &mut dyn Write, i: &SessionInfo) -> io::Result<()> {
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    writeln!(out, "session      {}", i.session)?;
    writeln!(out, "branch       {}", i.branch)?;
    if let Some(title) = &i.title {
        writeln!(out, "title        {title}")?;
    }
    writeln!(out, "principal    {}", opt(&i.principal))?;
    writeln!(
        out,
        "parent       {}",
        opt(&i.parent.as_ref().map(ToString::to_string))
    )?;
    writeln!(
        out,
        "forked at    {}",
        i.forked_at_index.map_or("-".into(), |k| k.to_string())
    )?;
    writeln!(out, "fork root    {}", i.fork_root)?;
    writeln!(out, "depth        {}", i.depth)?;
    writeln!(
        out,
        "turns        {} ({} own, {} inherited)",
        i.length, i.own_turns, i.inherited_turns
    )?;
    if let (Some(own), Some(inherited)) = (i.own_content_bytes, i.inherited_content_bytes) {
        writeln!(
            out,
            "content      {} own, {} inherited",
            count(own, "byte", "bytes"),
            count(inherited, "byte", "bytes")
        )?;
    }
    if let Some(summary) = &i.summary {
        writeln!(out, "summary      {summary}")?;
    }
    if !i.models.is_empty() {
        writeln!(out, "models       {}", i.models.join(", "))?;
    }
    if let Some(t) = &i.tokens {
        writeln!(
            out,
            "tokens       {} in, {} out (regeneration)",
            t.input, t.output
        )?;
    }
    if let Some(agent) = &i.subagent {
        let launch = match &agent.spawned_by {
            Some(turn) => format!("turn {} of {}", turn.index, turn.session),
            None => format!(
                "unresolved (in {})",
                agent
                    .spawned_in_session
                    .as_deref()
                    .unwrap_or("an unknown session")
            ),
        };
        let call = agent
            .tool_call_id
            .as_ref()
            .map(|c| format!(", tool call {c}"))
            .unwrap_or_default();
        writeln!(
            out,
            "sub-agent    {} launched by {launch}{call}",
            agent.agent_id
        )?;
    }
    writeln!(out, "created      {}", opt(&i.created_at))?;
    writeln!(out, "head digest  {}", opt(&i.head_digest))
}

pub(super) fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    let line = |text: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        let parts: Vec<String> = cells
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}", w = *w))
            .collect();
        let _ = writeln!(text, "{}", parts.join("  ").trim_end());
    };
    line(&mut text, &mut headers.iter().copied());
    for row in rows {
        line(&mut text, &mut row.iter().map(String::as_str));
    }
    text
}

/// A table, or `empty` when there are no rows.
pub(super) fn table_or(
    out: &mut dyn Write,
    empty: &str,
    headers: &[&str],
    rows: &[Vec<String>],
) -> io::Result<()> {
    if rows.is_empty() {
        writeln!(out, "{empty}")
    } else {
        write!(out, "{}", table(headers, rows))
    }
}

pub fn branches(out: &mut dyn Write, branches: &[BranchInfo]) -> io::Result<()> {
    let rows: Vec<Vec<String>> = branches
        .iter()
        .map(|b| {
            vec![
                b.branch.clone(),
                b.session.to_string(),
                b.forked_at_index.to_string(),
                b.own_turns.to_string(),
                b.created_at.clone().unwrap_or_default(),
                b.summary.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let headers = [
        "BRANCH",
        "SESSION",
        "FORKED AT",
        "OWN TURNS",
        "CREATED",
        "SUMMARY",
    ];
    table_or(out, "no branches", &headers, &rows)
}

pub fn anchors(out: &mut dyn Write, anchors: &[AnchorInfo]) -> io::Result<()> {
    let rows: Vec<Vec<String>> = anchors
        .iter()
        .map(|a| {
            vec![
                a.name.clone(),
                a.at_index.to_string(),
                a.session.to_string(),
                a.state.as_ref().map(|s| s.to_string()).unwrap_or_default(),
            ]
        })
        .collect();
    table_or(
        out,
        "no anchors",
        &["ANCHOR", "AT", "SESSION", "STATE"],
        &rows,
    )
}

pub fn job(out: &mut dyn Write, j: &Job) -> io::Result<()> {
    writeln!(out, "job        {} ({})", j.job, j.status)?;
    writeln!(out, "session    {} at index {}", j.session, j.at)?;
    writeln!(out, "model      {} via {}", j.model, j.endpoint)?;
    if let Some(fork) = &j.fork {
        writeln!(out, "fork       {fork}")?;
    }
    if j.reused {
        writeln!(
            out,
            "reused     an identical earlier request (pass --again for a new sample)"
        )?;
    }
    if let (Some(i), Some(o)) = (j.input_tokens, j.output_tokens) {
        writeln!(out, "tokens     {i} in, {o} out")?;
    }
    if let Some(ms) = j.latency_ms {
        writeln!(out, "latency    {ms} ms")?;
    }
    if let Some(budget) = j.budget_usd {
        writeln!(out, "budget     ${budget:.6}")?;
    }
    if let Some(error) = &j.error {
        writeln!(out, "error      {error}")?;
    }
    Ok(())
}

pub fn jobs(out: &mut dyn Write, jobs: &[Job]) -> io::Result<()> {
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|j| {
            vec![
                j.job.clone(),
                j.status.to_string(),
                format!("{}@{}", j.session, j.at),
                j.model.clone(),
                j.fork.as_ref().map(ToString::to_string).unwrap_or_default(),
                j.created_at.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let headers = ["JOB", "STATUS", "FROM", "MODEL", "FORK", "CREATED"];
    table_or(out, "no jobs", &headers, &rows)
}

/// `diff`: the shared prefix, then both tails as turns (`a_tail`, `b_tail` loaded in full).
pub fn diff(
    out: &mut dyn Write,
    d: &SessionDiff,
    a_tail: &[Turn],
    b_tail: &[Turn],
) -> io::Result<()> {
    let relation = match (&d.common_ancestor, d.found_by) {
        (Some(a), _) => format!("common ancestor {a}"),
        (None, FoundBy::Digest) => "equal digests; no common ancestor by lineage".into(),
        _ => "unrelated".into(),
    };
    writeln!(
        out,
        "common prefix  {} ({relation})",
        count(d.common_prefix, "turn", "turns")
    )?;
    for (name, tail) in [(&d.a, a_tail), (&d.b, b_tail)] {
        writeln!(
            out,
            "\n--- {name}: {} after the common prefix",
            count(tail.len() as u64, "turn", "turns")
        )?;
        turns(out, tail)?;
    }
    Ok(())
}

const SESSION_HEADERS: [&str; 8] = [
    "SESSION", "BRANCH", "PARENT", "TURNS", "OWN", "FORKS", "ACTIVE", "TITLE",
];

fn session_row(s: &SessionSummary) -> Vec<String> {
    vec![
        s.session.to_string(),
        s.branch.clone(),
        s.parent.as_ref().map_or("-".into(), ToString::to_string),
        s.length.to_string(),
        s.own_turns.to_string(),
        s.forks.to_string(),
        s.last_activity.clone().unwrap_or_else(|| "-".into()),
        s.title.clone().unwrap_or_default(),
    ]
}

/// A page of sessions as a table.
pub fn session_page(out: &mut dyn Write, page: &SessionPage) -> io::Result<()> {
    let rows: Vec<Vec<String>> = page.sessions.iter().map(session_row).collect();
    table_or(out, "no sessions", &SESSION_HEADERS, &rows)
}

/// One page of `list --all`: the header before the first.
pub fn session_rows(
    out: &mut dyn Write,
    sessions: &[SessionSummary],
    first: bool,
) -> io::Result<()> {
    let rows: Vec<Vec<String>> = sessions.iter().map(session_row).collect();
    if rows.is_empty() {
        return if first {
            writeln!(out, "no sessions")
        } else {
            Ok(())
        };
    }
    let text = table(&SESSION_HEADERS, &rows);
    let body = if first {
        text.as_str()
    } else {
        text.split_once('\n').map_or("", |(_, rest)| rest)
    };
    write!(out, "{body}")
}

/// Search hits, best first: where each is, and the matching text.
pub fn search_page(out: &mut dyn Write, page: &SearchPage) -> io::Result<()> {
    if page.hits.is_empty() {
        return writeln!(out, "no hits");
    }
    for hit in &page.hits {
        let at = match (hit.index, hit.role) {
            (Some(index), Some(role)) => format!("{}@{index} {role}", hit.session),
            _ => format!("{} (session)", hit.session),
        };
        let snippet = hit.snippet.replace('\n', " ");
        writeln!(out, "{at} [{}]: {snippet}", hit.branch)?;
    }
    Ok(())
}

pub fn delete(out: &mut dyn Write, plan: &DeletePlan, dry_run: bool) -> io::Result<()> {
    let verb = if dry_run { "would delete" } else { "deleted" };
    for s in &plan.sessions {
        writeln!(
            out,
            "{verb} {} ({}, {})",
            s.session,
            s.branch,
            count(s.own_turns, "own turn", "own turns")
        )?;
    }
    Ok(())
}

pub fn detach(out: &mut dyn Write, plan: &DetachPlan, dry_run: bool) -> io::Result<()> {
    let verb = if dry_run { "would detach" } else { "detached" };
    writeln!(
        out,
        "{verb} {} from {}: {} copied in",
        plan.session,
        plan.parent,
        count(plan.copied_turns, "inherited turn", "inherited turns")
    )?;
    for span in &plan.copied_from {
        writeln!(
            out,
            "  turns {}..{} from {} ({})",
            span.from,
            span.to - 1,
            span.session,
            span.branch
        )?;
    }
    for moved in &plan.moved_up {
        writeln!(
            out,
            "  {} moves up: depth {} -> {}",
            moved.session, moved.depth_before, moved.depth_after
        )?;
    }
    Ok(())
}

fn node_line(n: &TreeNode) -> String {
    let turns = count(n.length, "turn", "turns");
    let mut line = match n.forked_at_index {
        Some(k) => format!("{} {} (forked at {k}, {turns})", n.branch, n.session),
        None => format!("{} {} ({turns})", n.branch, n.session),
    };
    if !n.models.is_empty() {
        line += &format!(" [{}]", n.models.join(", "));
    }
    if let Some(t) = &n.tokens {
        line += &format!(" {{{} in, {} out tokens}}", t.input, t.output);
    }
    match &n.summary {
        Some(summary) => format!("{line} — {summary}"),
        None => line,
    }
}

pub fn tree_text(root: &TreeNode) -> String {
    fn walk(n: &TreeNode, prefix: &str, out: &mut String) {
        for (i, child) in n.children.iter().enumerate() {
            let last = i + 1 == n.children.len();
            let _ = writeln!(
                out,
                "{prefix}{}{}",
                if last { "└── " } else { "├── " },
                node_line(child)
            );
            let deeper = format!("{prefix}{}", if last { "    " } else { "│   " });
            walk(child, &deeper, out);
        }
    }
    let mut out = format!("{}\n", node_line(root));
    walk(root, "", &mut out);
    out
}

fn flatten<'a>(
    n: &'a TreeNode,
    parent: Option<usize>,
    out: &mut Vec<(&'a TreeNode, Option<usize>)>,
) {
    let me = out.len();
    out.push((n, parent));
    for c in &n.children {
        flatten(c, Some(me), out);
    }
}

pub fn tree_dot(root: &TreeNode) -> String {
    let mut nodes = Vec::new();
    flatten(root, None, &mut nodes);
    let mut out = String::from("digraph forktrail {\n  rankdir=LR;\n  node [shape=box];\n");
    for (i, (n, parent)) in nodes.iter().enumerate() {
        let _ = writeln!(
            out,
            "  n{i} [label=\"{}\\n{}\\n{}\"];",
            n.branch,
            n.session,
            count(n.length, "turn", "turns")
        );
        if let (Some(p), Some(k)) = (parent, n.forked_at_index) {
            let _ = writeln!(out, "  n{p} -> n{i} [label=\"at {k}\"];");
        }
    }
    out.push_str("}\n");
    out
}

pub fn tree_mermaid(root: &TreeNode) -> String {
    let mut nodes = Vec::new();
    flatten(root, None, &mut nodes);
    let mut out = String::from("flowchart LR\n");
    for (i, (n, parent)) in nodes.iter().enumerate() {
        let _ = writeln!(
            out,
            "  n{i}[\"{}<br/>{}<br/>{}\"]",
            n.branch,
            n.session,
            count(n.length, "turn", "turns")
        );
        if let (Some(p), Some(k)) = (parent, n.forked_at_index) {
            let _ = writeln!(out, "  n{p} -->|at {k}| n{i}");
        }
    }
    out
}

fn cell(term: Option<&Term>) -> String {
    let text = match term {
        None => String::new(),
        Some(Term::Literal(l)) => l.value().to_string(),
        Some(Term::NamedNode(n)) => format!("<{}>", n.as_str()),
        Some(other) => other.to_string(),
    };
    one_line(&text, 80)
}

/// `--list`: each shipped query with its header comment.
pub fn query_list(out: &mut dyn Write, all: &[&NamedQuery]) -> io::Result<()> {
    for (i, q) in all.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        writeln!(out, "{}", q.name)?;
        for line in q.help().lines() {
            writeln!(out, "    {line}")?;
        }
    }
    Ok(())
}

pub fn query_results(
    results: QueryResults<'static>,
    format: &str,
    mut out: impl Write,
) -> CliResult {
    let results_format = match format {
        "table" | "turtle" | "ntriples" | "rdfxml" => None,
        "json" => Some(QueryResultsFormat::Json),
        "xml" => Some(QueryResultsFormat::Xml),
        "csv" => Some(QueryResultsFormat::Csv),
        "tsv" => Some(QueryResultsFormat::Tsv),
        other => {
            return Err(format!(
                "unknown format {other:?} (expected table, json, csv, tsv, xml, turtle, \
                 ntriples or rdfxml)"
            )
            .into())
        }
    };
    match results {
        QueryResults::Solutions(solutions) => {
            let variables = solutions.variables().to_vec();
            if let Some(f) = results_format {
                let mut w = QueryResultsSerializer::from_format(f)
                    .serialize_solutions_to_writer(&mut out, variables)?;
                for s in solutions {
                    w.serialize(&s?)?;
                }
                w.finish()?;
            } else if format == "table" {
                let headers: Vec<String> =
                    variables.iter().map(|v| v.as_str().to_string()).collect();
                let mut rows = Vec::new();
                for s in solutions {
                    let s = s?;
                    rows.push(variables.iter().map(|v| cell(s.get(v))).collect());
                }
                let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
                write!(out, "{}", table(&headers, &rows))?;
                writeln!(out, "({})", count(rows.len() as u64, "row", "rows"))?;
            } else {
                return Err(format!("solutions cannot be printed as {format}").into());
            }
        }
        QueryResults::Boolean(value) => match results_format {
            // The SPARQL 1.1 CSV and TSV results formats define SELECT results only.
            Some(QueryResultsFormat::Csv | QueryResultsFormat::Tsv) => {
                return Err(format!(
                    "an ASK result cannot be printed as {format}: the SPARQL CSV and TSV \
                     results formats cover SELECT only; use json, xml or table"
                )
                .into())
            }
            Some(f) => {
                QueryResultsSerializer::from_format(f)
                    .serialize_boolean_to_writer(&mut out, value)?;
            }
            None => writeln!(out, "{value}")?,
        },
        QueryResults::Graph(triples) => {
            let rdf = match format {
                "ntriples" => RdfFormat::NTriples,
                "rdfxml" => RdfFormat::RdfXml,
                "table" | "turtle" => RdfFormat::Turtle,
                other => return Err(format!("a graph result cannot be printed as {other}").into()),
            };
            let mut w = RdfSerializer::from_format(rdf)
                .with_prefix("ft", forktrail::vocab::ft::NS)?
                .with_prefix("prov", "http://www.w3.org/ns/prov#")?
                .for_writer(&mut out);
            for t in triples {
                w.serialize_triple(&t?)?;
            }
            w.finish()?;
        }
    }
    out.flush()?;
    Ok(())
}

pub fn demo(
    out: &mut dyn Write,
    store: &Store,
    tree: &DemoTree,
    path: &super::Target,
) -> CliResult {
    writeln!(out, "Built a demo conversation and its forks in {}\n", path)?;
    writeln!(out, "Fork tree:")?;
    write!(out, "{}", tree_text(&store.tree(&tree.root)?))?;
    writeln!(
        out,
        "\nReplay of the deepest fork ({}, branch booking):",
        tree.booking
    )?;
    turns(out, &store.load(&tree.booking, None)?)?;
    writeln!(
        out,
        "\nAudit ({}): who produced each turn of {}, following the chain:",
        queries::AUDIT_TURN_ORIGIN.name,
        tree.booking
    )?;
    let results = store.query_named(
        &queries::AUDIT_TURN_ORIGIN,
        &[(
            "id",
            oxigraph::model::Literal::from(tree.booking.as_str()).into(),
        )],
    )?;
    audit_table(results, &mut *out)?;
    // Name the binary as it was started (e.g. target/release/forktrail), so the hints run.
    let exe = std::env::args()
        .next()
        .unwrap_or_else(|| "forktrail".into());
    let store_arg = format!("{exe} --store {path}");
    writeln!(out, "\nTry next:")?;
    writeln!(out, "  {store_arg} tree {} --mermaid", tree.root)?;
    writeln!(out, "  {store_arg} query --list")?;
    writeln!(
        out,
        "  {store_arg} query {} --bind model={MODEL_A}",
        queries::AUDIT_TURNS_BY_MODEL.name
    )?;
    writeln!(
        out,
        "  {store_arg} query {} --bind id={}",
        queries::AUDIT_DESCENDANTS.name,
        tree.root
    )?;
    Ok(())
}

/// The demo's audit as a table that fits a terminal: per turn its index, the branch
/// that owns it, its role, who or what produced it and when (to the second); the
/// session's id and the agents' IRIs are the query's to give (`query … --format json`).
fn audit_table(results: QueryResults<'static>, out: &mut dyn Write) -> CliResult {
    let QueryResults::Solutions(solutions) = results else {
        return Err("the audit query did not answer with rows".into());
    };
    let mut rows = Vec::new();
    for solution in solutions {
        let solution = solution?;
        let text = |var: &str| cell(solution.get(var));
        let at = text("generatedAt");
        let at = chrono::DateTime::parse_from_rfc3339(&at)
            .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
            .unwrap_or(at);
        rows.push(vec![
            text("index"),
            text("ownerBranch"),
            text("role"),
            text("agentName"),
            at,
        ]);
    }
    let headers = ["turn", "branch", "role", "produced by", "at"];
    write!(out, "{}", table(&headers, &rows))?;
    Ok(())
}

/// A session's proxied calls: one row each.
pub(super) fn model_calls(
    out: &mut dyn Write,
    calls: &[forktrail::ModelCallInfo],
) -> io::Result<()> {
    let rows: Vec<Vec<String>> = calls
        .iter()
        .map(|c| {
            let number = |n: Option<u64>| n.map_or("-".into(), |n| n.to_string());
            vec![
                c.id.clone(),
                c.started_at.clone().unwrap_or_default(),
                c.api.to_string(),
                c.outcome.to_string(),
                c.model.clone().unwrap_or_else(|| "-".into()),
                format!("0..{}", c.request_turns),
                number(c.answer_index),
                format!("{}/{}", number(c.input_tokens), number(c.output_tokens)),
                format!("{} ms", c.latency_ms),
                c.cost_usd.map_or("-".into(), |d| format!("${d:.4}")),
                c.principal.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    table_or(
        out,
        "no model calls recorded in this session (agents are recorded through `forktrail proxy`)",
        &[
            "CALL",
            "STARTED",
            "API",
            "OUTCOME",
            "MODEL",
            "SENT",
            "ANSWER",
            "TOKENS IN/OUT",
            "LATENCY",
            "COST",
            "PRINCIPAL",
        ],
        &rows,
    )
}
