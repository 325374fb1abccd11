//! What a query or update may do here, decided on its algebra before it runs: forktrail
//! never calls other endpoints (`SERVICE`, silent or not) and never fetches (`LOAD`), and
//! only variables of a `SELECT` projection can be bound.

use crate::error::{Error, Result};
use oxigraph::model::Variable;
use spargebra::algebra::{AggregateExpression, Expression, GraphPattern, OrderExpression};
use spargebra::{GraphUpdateOperation, Query, SparqlParser, Update};

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
