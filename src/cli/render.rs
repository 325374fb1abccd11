//! Human-readable output: tables, trees (text, DOT, Mermaid), query results.

use forktrail::demo::{DemoTree, MODEL_A};
use forktrail::{
    queries, AnchorInfo, BranchInfo, Job, ReplayRecord, SessionDiff, SessionInfo, Store, TreeNode,
};
use oxigraph::io::{RdfFormat, RdfSerializer};
use oxigraph::model::Term;
use oxigraph::sparql::results::{QueryResultsFormat, QueryResultsSerializer};
use oxigraph::sparql::QueryResults;
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

type CliResult = Result<(), Box<dyn std::error::Error>>;

pub fn replay(records: &[ReplayRecord]) {
    for r in records {
        let mut lines = r.content.lines();
        let first = lines.next().unwrap_or("");
        println!("[{}] {} ({}): {first}", r.index, r.role, r.branch);
        for line in lines {
            println!("      {line}");
        }
    }
}

pub fn show(i: &SessionInfo) {
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    println!("session      {}", i.session);
    println!("branch       {}", i.branch);
    if let Some(title) = &i.title {
        println!("title        {title}");
    }
    println!("principal    {}", opt(&i.principal));
    println!("parent       {}", opt(&i.parent));
    println!(
        "forked at    {}",
        i.forked_at_index.map_or("-".into(), |k| k.to_string())
    );
    println!("fork root    {}", i.fork_root);
    println!("depth        {}", i.depth);
    println!(
        "turns        {} ({} own, {} inherited)",
        i.length, i.own_turns, i.inherited_turns
    );
    if let (Some(own), Some(inherited)) = (i.own_content_bytes, i.inherited_content_bytes) {
        println!("content      {own} bytes own, {inherited} bytes inherited");
    }
    if let Some(summary) = &i.summary {
        println!("summary      {summary}");
    }
    if !i.models.is_empty() {
        println!("models       {}", i.models.join(", "));
    }
    if let Some(t) = &i.tokens {
        println!(
            "tokens       {} in, {} out (regeneration)",
            t.input, t.output
        );
    }
    println!("created      {}", opt(&i.created_at));
    println!("head digest  {}", opt(&i.head_digest));
}

fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        let parts: Vec<String> = cells
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}", w = *w))
            .collect();
        let _ = writeln!(out, "{}", parts.join("  ").trim_end());
    };
    line(&mut out, &mut headers.iter().copied());
    for row in rows {
        line(&mut out, &mut row.iter().map(String::as_str));
    }
    out
}

pub fn branches(branches: &[BranchInfo]) {
    if branches.is_empty() {
        println!("no branches");
        return;
    }
    let rows: Vec<Vec<String>> = branches
        .iter()
        .map(|b| {
            vec![
                b.branch.clone(),
                b.session.clone(),
                b.forked_at_index.to_string(),
                b.own_turns.to_string(),
                b.created_at.clone().unwrap_or_default(),
                b.summary.clone().unwrap_or_default(),
            ]
        })
        .collect();
    print!(
        "{}",
        table(
            &[
                "BRANCH",
                "SESSION",
                "FORKED AT",
                "OWN TURNS",
                "CREATED",
                "SUMMARY"
            ],
            &rows
        )
    );
}

pub fn anchors(anchors: &[AnchorInfo]) {
    if anchors.is_empty() {
        println!("no anchors");
        return;
    }
    let rows: Vec<Vec<String>> = anchors
        .iter()
        .map(|a| {
            vec![
                a.name.clone(),
                a.at_index.to_string(),
                a.session.clone(),
                a.state.as_ref().map(|s| s.to_string()).unwrap_or_default(),
            ]
        })
        .collect();
    print!("{}", table(&["ANCHOR", "AT", "SESSION", "STATE"], &rows));
}

pub fn job(j: &Job) {
    println!("job        {} ({})", j.job, j.status);
    println!("session    {} at index {}", j.session, j.at);
    println!("model      {} via {}", j.model, j.endpoint);
    if let Some(fork) = &j.fork {
        println!("fork       {fork}");
    }
    if let (Some(i), Some(o)) = (j.input_tokens, j.output_tokens) {
        println!("tokens     {i} in, {o} out");
    }
    if let Some(ms) = j.latency_ms {
        println!("latency    {ms} ms");
    }
    if let Some(error) = &j.error {
        println!("error      {error}");
    }
}

pub fn jobs(jobs: &[Job]) {
    if jobs.is_empty() {
        println!("no jobs");
        return;
    }
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|j| {
            vec![
                j.job.clone(),
                j.status.clone(),
                format!("{}@{}", j.session, j.at),
                j.model.clone(),
                j.fork.clone().unwrap_or_default(),
                j.created_at.clone().unwrap_or_default(),
            ]
        })
        .collect();
    print!(
        "{}",
        table(
            &["JOB", "STATUS", "FROM", "MODEL", "FORK", "CREATED"],
            &rows
        )
    );
}

pub fn diff(d: &SessionDiff) {
    println!(
        "common prefix  {} turns ({})",
        d.common_prefix,
        match (&d.common_ancestor, d.found_by) {
            (Some(a), _) => format!("common ancestor {a}"),
            (None, "digest") => "equal digests; no common ancestor by lineage".into(),
            _ => "unrelated".into(),
        }
    );
    for (name, tail) in [(&d.a, &d.a_tail), (&d.b, &d.b_tail)] {
        println!("\n--- {name}: {} turns after the common prefix", tail.len());
        replay(tail);
    }
}

pub fn list(sessions: &[SessionInfo]) {
    if sessions.is_empty() {
        println!("no sessions");
        return;
    }
    let rows: Vec<Vec<String>> = sessions
        .iter()
        .map(|s| {
            vec![
                s.session.clone(),
                s.branch.clone(),
                s.parent.clone().unwrap_or_else(|| "-".into()),
                s.length.to_string(),
                s.title.clone().unwrap_or_default(),
            ]
        })
        .collect();
    print!(
        "{}",
        table(&["SESSION", "BRANCH", "PARENT", "TURNS", "TITLE"], &rows)
    );
}

fn node_line(n: &TreeNode) -> String {
    let line = match n.forked_at_index {
        Some(k) => format!(
            "{} {} (forked at {k}, {} turns)",
            n.branch, n.session, n.length
        ),
        None => format!("{} {} ({} turns)", n.branch, n.session, n.length),
    };
    let mut line = line;
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
            "  n{i} [label=\"{}\\n{}\\n{} turns\"];",
            n.branch, n.session, n.length
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
            "  n{i}[\"{}<br/>{}<br/>{} turns\"]",
            n.branch, n.session, n.length
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
    let flat = text.replace(['\n', '\r', '\t'], " ");
    if flat.chars().count() > 80 {
        format!("{}…", flat.chars().take(79).collect::<String>())
    } else {
        flat
    }
}

pub fn query_results(
    results: QueryResults<'static>,
    format: &str,
    mut out: impl Write,
) -> CliResult {
    let results_format = match format {
        "table" | "turtle" | "ntriples" => None,
        "json" => Some(QueryResultsFormat::Json),
        "xml" => Some(QueryResultsFormat::Xml),
        "csv" => Some(QueryResultsFormat::Csv),
        "tsv" => Some(QueryResultsFormat::Tsv),
        other => {
            return Err(format!(
                "unknown format {other:?} (expected table, json, csv, tsv, xml, turtle or ntriples)"
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
                writeln!(out, "({} rows)", rows.len())?;
            } else {
                return Err(format!("solutions cannot be printed as {format}").into());
            }
        }
        QueryResults::Boolean(value) => match results_format {
            Some(f) => {
                QueryResultsSerializer::from_format(f)
                    .serialize_boolean_to_writer(&mut out, value)?;
            }
            None => writeln!(out, "{value}")?,
        },
        QueryResults::Graph(triples) => {
            let rdf = match format {
                "ntriples" => RdfFormat::NTriples,
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

pub fn demo(store: &Store, tree: &DemoTree, path: &Path) -> CliResult {
    println!(
        "Built a demo conversation and its forks in {}\n",
        path.display()
    );
    println!("Fork tree:");
    print!("{}", tree_text(&store.tree(&tree.root)?));
    println!(
        "\nReplay of the deepest fork ({}, branch booking):",
        tree.booking
    );
    replay(&store.replay(&tree.booking, None)?);
    println!(
        "\nAudit (queries/{}.rq): who produced each turn of {}, following the chain:",
        queries::AUDIT_TURN_ORIGIN.name,
        tree.booking
    );
    let results = store.query_named(
        &queries::AUDIT_TURN_ORIGIN,
        &[(
            "id",
            oxigraph::model::Literal::from(tree.booking.as_str()).into(),
        )],
    )?;
    query_results(results, "table", std::io::stdout().lock())?;
    // Name the binary as it was started (e.g. target/release/forktrail), so the hints run.
    let exe = std::env::args()
        .next()
        .unwrap_or_else(|| "forktrail".into());
    let store_arg = format!("{exe} --store {}", path.display());
    println!("\nTry next:");
    println!("  {store_arg} tree {} --mermaid", tree.root);
    println!(
        "  {store_arg} query --file queries/{}.rq --bind model={MODEL_A}",
        queries::AUDIT_TURNS_BY_MODEL.name
    );
    println!(
        "  {store_arg} query --file queries/{}.rq --bind id={}",
        queries::AUDIT_DESCENDANTS.name,
        tree.root
    );
    Ok(())
}
