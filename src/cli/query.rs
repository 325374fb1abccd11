//! `query`: SPARQL text, a shipped query by name, or a file; `--list` for the shipped
//! ones.

use super::{print_json, render, CliResult, Out};
use clap::Args;
use forktrail::{NamedQuery, Store};
use oxigraph::model::Term;
use serde_json::json;
use std::path::PathBuf;

#[derive(Args)]
pub(super) struct QueryArgs {
    /// The SPARQL query text, or the name of a shipped query (see --list).
    #[arg(required_unless_present_any = ["file", "list"], conflicts_with = "file")]
    sparql: Option<String>,
    /// Read the query from a file.
    #[arg(long)]
    file: Option<PathBuf>,
    /// List the shipped queries: what each answers, what it expects, what it returns.
    #[arg(long, conflicts_with_all = ["sparql", "file", "bindings"])]
    pub(super) list: bool,
    /// table, json, csv, tsv or xml for SELECT; table, json or xml for ASK; turtle,
    /// ntriples or rdfxml for CONSTRUCT/DESCRIBE; with --list, table or json.
    #[arg(long, default_value = "table")]
    format: String,
    /// Bind a projected variable: NAME=VALUE, a string literal, an integer if VALUE is
    /// digits, an IRI if written <...>, a string if written "...". Repeatable.
    #[arg(long = "bind", value_name = "NAME=VALUE", value_parser = binding)]
    bindings: Vec<(String, Term)>,
}

/// `NAME=VALUE`, the value read as [`forktrail::binding_value`] reads it.
fn binding(text: &str) -> Result<(String, Term), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("--bind {text:?}: expected NAME=VALUE"))?;
    let name = name.trim_start_matches(['?', '$']).to_string();
    let term = forktrail::binding_value(value).map_err(|e| format!("--bind {name}: {e}"))?;
    Ok((name, term))
}

/// A word like a query's name (`audit-turn-origin`), which no SPARQL query is.
fn is_query_name(text: &str) -> bool {
    !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

impl QueryArgs {
    /// `--list`: the shipped queries, without a store.
    pub(super) fn list(self, out: Out) -> CliResult {
        let all: Vec<&forktrail::NamedQuery> = forktrail::queries::listed().collect();
        match self.format.as_str() {
            "json" => {
                let list: Vec<serde_json::Value> = all
                    .iter()
                    .map(|q| json!({ "name": q.name, "help": q.help(), "inputs": q.inputs() }))
                    .collect();
                print_json(out, &list)
            }
            "table" => Ok(render::query_list(out, &all)?),
            other => Err(format!("--list prints as table or json, not {other:?}").into()),
        }
    }

    pub(super) fn run(self, out: Out, store: &Store) -> CliResult {
        let bindings: Vec<(&str, Term)> = self
            .bindings
            .iter()
            .map(|(n, t)| (n.as_str(), t.clone()))
            .collect();
        let results = match (&self.sparql, &self.file) {
            (Some(text), _) => match NamedQuery::find(text) {
                Some(named) => store.query_named(&named, &bindings)?,
                None if is_query_name(text) => {
                    return Err(format!(
                        "no shipped query is named {text:?}; `forktrail query --list` shows \
                         them (or give SPARQL text)"
                    )
                    .into())
                }
                None => store.query(text, &bindings)?,
            },
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                store.query(&text, &bindings)?
            }
            (None, None) => return Err("give a SPARQL query, a query name or --file".into()),
        };
        render::query_results(results, &self.format, out)
    }
}
