//! What a query or update may do here, decided on its algebra before it runs: forktrail
//! never calls other endpoints (`SERVICE`, silent or not) and never fetches (`LOAD`),
//! only variables of a `SELECT` projection can be bound, and a pattern whose parts share
//! no variable (a cross product) must not be too large for the store it runs on.

use crate::error::{Error, Result};
use oxigraph::model::Variable;
use spargebra::algebra::{AggregateExpression, Expression, GraphPattern, OrderExpression};
use spargebra::term::{NamedNodePattern, TermPattern, TriplePattern};
use spargebra::{GraphUpdateOperation, Query, SparqlParser, Update};
use std::collections::BTreeSet;

const NO_SERVICE: &str = "SERVICE is not allowed: forktrail never calls other endpoints";

/// Parses a read-only query and refuses `SERVICE`. An update gets a message saying
/// where updates go.
pub(crate) fn parse_query(sparql: &str) -> Result<Query> {
    let query = SparqlParser::new().parse_query(sparql).map_err(|e| {
        if SparqlParser::new().parse_update(sparql).is_ok() {
            Error::Query(
                "this is a SPARQL update, and queries are read-only: send updates to the \
                 /update endpoint of `forktrail serve --token TOKEN` (or Store::update)"
                    .into(),
            )
        } else {
            Error::Query(e.to_string())
        }
    })?;
    let pattern = match &query {
        Query::Select { pattern, .. }
        | Query::Construct { pattern, .. }
        | Query::Describe { pattern, .. }
        | Query::Ask { pattern, .. } => pattern,
    };
    if calls_service(pattern) {
        return Err(Error::Query(NO_SERVICE.into()));
    }
    Ok(query)
}

/// Parses an update and refuses `LOAD` and `SERVICE`.
pub(crate) fn parse_update(sparql: &str) -> Result<Update> {
    let update = SparqlParser::new()
        .parse_update(sparql)
        .map_err(|e| Error::Query(e.to_string()))?;
    for operation in &update.operations {
        match operation {
            GraphUpdateOperation::Load { .. } => {
                return Err(Error::Query(
                    "LOAD is not allowed: forktrail never fetches; add files with \
                     `forktrail import`"
                        .into(),
                ))
            }
            GraphUpdateOperation::DeleteInsert { pattern, .. } if calls_service(pattern) => {
                return Err(Error::Query(NO_SERVICE.into()))
            }
            _ => {}
        }
    }
    Ok(update)
}

/// The variables of a `SELECT` projection: the only ones a binding may give a value.
pub(crate) fn projection(query: &Query) -> Vec<Variable> {
    let Query::Select { pattern, .. } = query else {
        return Vec::new();
    };
    let mut pattern = pattern;
    loop {
        match pattern {
            GraphPattern::Project { variables, .. } => return variables.clone(),
            GraphPattern::Distinct { inner }
            | GraphPattern::Reduced { inner }
            | GraphPattern::Slice { inner, .. }
            | GraphPattern::OrderBy { inner, .. } => pattern = inner,
            _ => return Vec::new(),
        }
    }
}

/// The most rows a query's evaluation may be estimated to go through before it is
/// refused: 1e7 rows of a cross product take Oxigraph under two seconds (1e8 took 17 s).
/// Oxigraph checks cancellation as it reads the store, not inside a join of rows it
/// already holds, so this bounds how long a query can run on past its time limit.
pub(crate) const MAX_WORK: f64 = 1e7;

/// Refuses `pattern` when its estimated work is past [`MAX_WORK`]. `rows` estimates
/// how many quads one triple pattern matches (the store counts them); `quads` is the
/// store's size, for property paths.
pub(crate) fn check_cost(
    pattern: &GraphPattern,
    quads: &dyn Fn() -> Result<usize>,
    rows: &dyn Fn(&TriplePattern) -> f64,
) -> Result<()> {
    // Weighed only if it has parts that share no variable: with every pattern taken as
    // two rows, such a product shows as work; counting the store's matches is left to
    // the patterns that need it.
    let (_, product, _) = estimate(pattern, 2.0, &|_| 2.0);
    if product == 0.0 {
        return Ok(());
    }
    let quads = quads()?;
    let n = (quads as f64).max(1.0);
    let (_, work, _) = estimate(pattern, n, rows);
    if work > MAX_WORK {
        return Err(Error::Query(format!(
            "refused before running: parts of this pattern share no variable, a cross \
             product of about {work:.1e} rows on this store of {quads} quads (at most \
             {MAX_WORK:.0e}); join the parts on a variable, or filter each part first"
        )));
    }
    Ok(())
}

/// The variables of a triple pattern.
fn variables(p: &TriplePattern) -> BTreeSet<Variable> {
    let mut vars = BTreeSet::new();
    for term in [p.subject.clone(), p.object.clone()] {
        if let TermPattern::Variable(v) = term {
            vars.insert(v);
        }
    }
    if let NamedNodePattern::Variable(v) = &p.predicate {
        vars.insert(v.clone());
    }
    vars
}

/// `(rows out, most rows any step goes through, variables in scope)` of a pattern:
/// each triple pattern as many rows as it matches; patterns that share a variable form
/// one part, taken as large as its most selective pattern (the fan-out of a join is not
/// weighed); parts that share none multiply (the graph
/// variable of `GRAPH ?g` does not join them: a product within each graph is still a
/// product). Rough on purpose: it only has to tell a cross product of large parts from
/// a join.
fn estimate(
    pattern: &GraphPattern,
    n: f64,
    rows_of: &dyn Fn(&TriplePattern) -> f64,
) -> (f64, f64, BTreeSet<Variable>) {
    let join = |l: (f64, f64, BTreeSet<Variable>), r: (f64, f64, BTreeSet<Variable>)| {
        let (rows, product) = if l.2.is_disjoint(&r.2) {
            (l.0 * r.0, l.0 * r.0)
        } else {
            (l.0.min(r.0), 0.0)
        };
        let vars = l.2.union(&r.2).cloned().collect();
        (rows, product.max(l.1).max(r.1), vars)
    };
    let est = |p: &GraphPattern| estimate(p, n, rows_of);
    match pattern {
        GraphPattern::Bgp { patterns } => estimate_bgp(patterns, rows_of),
        GraphPattern::Path {
            subject, object, ..
        } => {
            let vars: BTreeSet<Variable> = [subject, object]
                .into_iter()
                .filter_map(|t| match t {
                    TermPattern::Variable(v) => Some(v.clone()),
                    _ => None,
                })
                .collect();
            // A path is one walk, however long: as many rows as the store at most, but
            // no product (it is weighed with what it joins).
            (n, 0.0, vars)
        }
        GraphPattern::Join { left, right } | GraphPattern::Lateral { left, right } => {
            join(est(left), est(right))
        }
        GraphPattern::LeftJoin { left, right, .. } => {
            let l = est(left);
            let rows = l.0;
            let (joined, work, vars) = join(l, est(right));
            (joined.max(rows), work, vars)
        }
        GraphPattern::Union { left, right } => {
            let (l, r) = (est(left), est(right));
            let vars = l.2.union(&r.2).cloned().collect();
            (l.0 + r.0, l.1.max(r.1), vars)
        }
        GraphPattern::Minus { left, right } => {
            let (l, r) = (est(left), est(right));
            (l.0, l.1.max(r.1), l.2)
        }
        GraphPattern::Graph { name, inner } => {
            let (rows, work, mut vars) = est(inner);
            if let NamedNodePattern::Variable(v) = name {
                vars.insert(v.clone());
            }
            (rows, work, vars)
        }
        GraphPattern::Extend {
            inner, variable, ..
        } => {
            let (rows, work, mut vars) = est(inner);
            vars.insert(variable.clone());
            (rows, work, vars)
        }
        GraphPattern::Project { inner, variables } => {
            let (rows, work, _) = est(inner);
            (rows, work, variables.iter().cloned().collect())
        }
        GraphPattern::Group {
            inner,
            variables,
            aggregates,
        } => {
            let (rows, work, _) = est(inner);
            let vars = variables
                .iter()
                .cloned()
                .chain(aggregates.iter().map(|(v, _)| v.clone()))
                .collect();
            (rows, work, vars)
        }
        GraphPattern::Slice {
            inner,
            start,
            length,
        } => {
            let (rows, work, vars) = est(inner);
            let cap = length.map_or(f64::INFINITY, |l| (start + l) as f64);
            (rows.min(cap), work, vars)
        }
        GraphPattern::Filter { inner, .. }
        | GraphPattern::OrderBy { inner, .. }
        | GraphPattern::Distinct { inner }
        | GraphPattern::Reduced { inner }
        | GraphPattern::Service { inner, .. } => est(inner),
        GraphPattern::Values {
            variables,
            bindings,
        } => {
            let rows = bindings.len() as f64;
            (rows, 0.0, variables.iter().cloned().collect())
        }
    }
}

/// [`estimate`] of a basic graph pattern: its connected parts, each as large as its most
/// selective triple pattern, multiplied.
fn estimate_bgp(
    patterns: &[TriplePattern],
    rows_of: &dyn Fn(&TriplePattern) -> f64,
) -> (f64, f64, BTreeSet<Variable>) {
    let mut parts: Vec<(f64, BTreeSet<Variable>)> = Vec::new();
    for p in patterns {
        let (mut rows, mut vars) = (rows_of(p), variables(p));
        parts.retain(|(r, v)| {
            if v.is_disjoint(&vars) {
                return true;
            }
            rows = rows.min(*r);
            vars.extend(v.iter().cloned());
            false
        });
        parts.push((rows, vars));
    }
    let rows = parts.iter().map(|p| p.0).product::<f64>();
    // Only a product is work to weigh: one connected part is a join.
    let work = if parts.len() > 1 { rows } else { 0.0 };
    let vars = parts.into_iter().flat_map(|p| p.1).collect();
    (rows, work, vars)
}

/// Whether the pattern, or any pattern inside it (`EXISTS` included), is a `SERVICE`.
fn calls_service(pattern: &GraphPattern) -> bool {
    match pattern {
        GraphPattern::Service { .. } => true,
        GraphPattern::Bgp { .. } | GraphPattern::Path { .. } | GraphPattern::Values { .. } => false,
        GraphPattern::Join { left, right }
        | GraphPattern::Union { left, right }
        | GraphPattern::Minus { left, right }
        | GraphPattern::Lateral { left, right } => calls_service(left) || calls_service(right),
        GraphPattern::LeftJoin {
            left,
            right,
            expression,
        } => {
            calls_service(left)
                || calls_service(right)
                || expression.as_ref().is_some_and(expression_calls_service)
        }
        GraphPattern::Filter { expr, inner } => {
            expression_calls_service(expr) || calls_service(inner)
        }
        GraphPattern::Extend {
            inner, expression, ..
        } => calls_service(inner) || expression_calls_service(expression),
        GraphPattern::OrderBy { inner, expression } => {
            calls_service(inner)
                || expression.iter().any(|o| match o {
                    OrderExpression::Asc(e) | OrderExpression::Desc(e) => {
                        expression_calls_service(e)
                    }
                })
        }
        GraphPattern::Group {
            inner, aggregates, ..
        } => {
            calls_service(inner)
                || aggregates.iter().any(|(_, a)| match a {
                    AggregateExpression::CountSolutions { .. } => false,
                    AggregateExpression::FunctionCall { expr, .. } => {
                        expression_calls_service(expr)
                    }
                })
        }
        GraphPattern::Graph { inner, .. }
        | GraphPattern::Project { inner, .. }
        | GraphPattern::Distinct { inner }
        | GraphPattern::Reduced { inner }
        | GraphPattern::Slice { inner, .. } => calls_service(inner),
    }
}

fn expression_calls_service(expression: &Expression) -> bool {
    match expression {
        Expression::Exists(pattern) => calls_service(pattern),
        Expression::NamedNode(_)
        | Expression::Literal(_)
        | Expression::Variable(_)
        | Expression::Bound(_) => false,
        Expression::Or(a, b)
        | Expression::And(a, b)
        | Expression::Equal(a, b)
        | Expression::SameTerm(a, b)
        | Expression::Greater(a, b)
        | Expression::GreaterOrEqual(a, b)
        | Expression::Less(a, b)
        | Expression::LessOrEqual(a, b)
        | Expression::Add(a, b)
        | Expression::Subtract(a, b)
        | Expression::Multiply(a, b)
        | Expression::Divide(a, b) => expression_calls_service(a) || expression_calls_service(b),
        Expression::UnaryPlus(a) | Expression::UnaryMinus(a) | Expression::Not(a) => {
            expression_calls_service(a)
        }
        Expression::In(a, list) => {
            expression_calls_service(a) || list.iter().any(expression_calls_service)
        }
        Expression::If(a, b, c) => {
            expression_calls_service(a)
                || expression_calls_service(b)
                || expression_calls_service(c)
        }
        Expression::Coalesce(list) | Expression::FunctionCall(_, list) => {
            list.iter().any(expression_calls_service)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(sparql: &str) -> GraphPattern {
        match parse_query(sparql).unwrap() {
            Query::Select { pattern, .. } | Query::Ask { pattern, .. } => pattern,
            _ => unreachable!(),
        }
    }

    #[test]
    fn cross_products_past_the_budget_are_refused_and_joins_are_not() {
        let attack = "SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?a {?s1 ?p1 ?o1} GRAPH ?b {?s2 ?p2 ?o2} GRAPH ?c {?s3 ?p3 ?o3} GRAPH ?d {?s4 ?p4 ?o4} }";
        let err = check_cost(&pattern(attack), &|| Ok(803), &all(803)).unwrap_err();
        assert!(
            err.to_string()
                .contains("cross product of about 4.2e11 rows"),
            "{err}"
        );
        // Hidden in a union branch, an OPTIONAL or a subquery: still found.
        for hidden in [
            "SELECT * { { ?a ?b ?c } UNION { ?d ?e ?f . ?g ?h ?i . ?j ?k ?l } }",
            "SELECT * { ?a ?b ?c OPTIONAL { ?d ?e ?f . ?g ?h ?i } }",
            "SELECT * { { SELECT ?a ?d ?g { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i } } }",
        ] {
            assert!(
                check_cost(&pattern(hidden), &|| Ok(1_000), &all(1_000)).is_err(),
                "{hidden}"
            );
        }
        // Joined on a variable, however many patterns: fine on a large store.
        let joined = "SELECT * { ?s ?p ?o . ?s ?q ?x . ?x ?r ?y . ?y ?t ?z }";
        assert!(check_cost(&pattern(joined), &|| Ok(10_000_000), &all(10_000_000)).is_ok());
        // Two small parts of a small store: fine; the same on a large one: refused.
        let pair = "SELECT * { ?a ?b ?c . ?d ?e ?f }";
        assert!(check_cost(&pattern(pair), &|| Ok(3_000), &all(3_000)).is_ok());
        assert!(check_cost(&pattern(pair), &|| Ok(4_000), &all(4_000)).is_err());
        // A selective part (one session node) times the turns: the turns of a session,
        // fine on a large store, though the graph variable does not join them.
        let turns =
            "SELECT ?c { GRAPH ?g { ?g <urn:ft:sessionId> \"x\" . ?t <urn:ft:content> ?c } }";
        let counts = |p: &TriplePattern| match &p.object {
            TermPattern::Literal(_) => 1.0,
            _ => 1e6,
        };
        assert!(check_cost(&pattern(turns), &|| Ok(8_000_000), &counts).is_ok());
        // The same two parts, each matching the whole store: refused.
        assert!(check_cost(&pattern(turns), &|| Ok(8_000_000), &all(8_000_000)).is_err());
        // One part, however large, is a scan, not a product: the time limit is for it,
        // and the store is not even counted.
        let unused = || -> crate::error::Result<usize> { panic!("counted") };
        for scan in [
            "SELECT * { ?s ?p ?o }",
            "SELECT * { ?s <urn:ft:sessionId> ?id . ?s <urn:ft:parentSession>* ?l . ?l <urn:ft:forkDepth> ?d }",
        ] {
            assert!(check_cost(&pattern(scan), &unused, &all(100_000_000)).is_ok(), "{scan}");
        }
    }

    /// Every triple pattern matches `n` quads.
    fn all(n: usize) -> impl Fn(&TriplePattern) -> f64 {
        move |_| n as f64
    }

    #[test]
    fn service_is_found_wherever_it_hides() {
        for sparql in [
            "SELECT * WHERE { SERVICE <http://example.com/sparql> { ?s ?p ?o } }",
            "SELECT * WHERE { SERVICE SILENT <http://example.com/sparql> { ?s ?p ?o } }",
            "SELECT * WHERE { ?s ?p ?o FILTER EXISTS { SERVICE <http://e.com/> { ?s ?p ?o } } }",
            "SELECT * WHERE { ?s ?p ?o OPTIONAL { SERVICE SILENT <http://e.com/> { ?s ?q ?x } } }",
            "ASK { GRAPH ?g { { ?s ?p ?o } UNION { SERVICE ?x { ?s ?p ?o } } } }",
            "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o FILTER(NOT EXISTS { SERVICE <http://e.com/> {} }) }",
        ] {
            let err = parse_query(sparql).unwrap_err();
            assert!(err.to_string().contains("SERVICE is not allowed"), "{sparql}: {err}");
        }
        assert!(parse_query("SELECT * WHERE { ?s <http://e.com/SERVICE> \"SERVICE\" }").is_ok());
    }

    #[test]
    fn load_and_service_in_updates_are_refused_and_updates_in_queries_are_explained() {
        for sparql in [
            "LOAD <http://example.com/data.ttl>",
            "LOAD SILENT <http://example.com/data.ttl> INTO GRAPH <urn:g>",
            "DELETE { ?s ?p ?o } WHERE { SERVICE SILENT <http://e.com/> { ?s ?p ?o } }",
        ] {
            assert!(parse_update(sparql).is_err(), "{sparql}");
        }
        assert!(parse_update("INSERT DATA { GRAPH <urn:g> { <urn:a> <urn:b> <urn:c> } }").is_ok());
        let err = parse_query("INSERT DATA { GRAPH <urn:g> { <urn:a> <urn:b> <urn:c> } }")
            .unwrap_err()
            .to_string();
        assert!(err.contains("update") && err.contains("/update"), "{err}");
    }

    #[test]
    fn the_projection_is_what_can_be_bound() {
        let q =
            parse_query("SELECT DISTINCT ?a ?b WHERE { ?a ?p ?b } ORDER BY ?a LIMIT 3").unwrap();
        let names: Vec<String> = projection(&q).iter().map(|v| v.as_str().into()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(projection(&parse_query("ASK { ?a ?p ?b }").unwrap()).is_empty());
    }
}
