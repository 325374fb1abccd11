//! forktrail's integration tests, as one test binary: each file beside this one is a
//! module and tests one surface or concern (its module doc says which). One binary
//! links RocksDB, tantivy and axum once, where a binary per file linked them 41 times.
//!
//! Three tests keep binaries of their own: `tests/https.rs` and `tests/whatif.rs` set
//! process environment variables (`SSL_CERT_FILE`, `ANTHROPIC_*`) that the other tests
//! must not see change under them, and `tests/crash.rs` is also run alone in a release
//! build (`make crash-test`).
//!
//! Run one file's tests with `cargo test --test it cli::`, one test with its name.

#[path = "../common/mod.rs"]
mod common;

mod agent;
mod architecture;
mod browser;
mod cache;
mod catalog;
mod claude_code;
mod cli;
mod codex;
mod compare_cli;
mod compare_surfaces;
mod copies;
mod experiment;
mod forks;
mod group;
mod hostile;
mod io;
mod limits;
mod listing;
mod mcp;
mod mcp_http;
mod mcp_inspector;
mod model;
mod otel;
mod otlp;
mod pi;
mod provenance;
mod proxy;
mod python;
mod queries;
mod readme;
mod real_model;
mod records;
mod regenerate;
mod remote;
mod runtime;
mod secrets;
mod server;
mod sessions;
mod storage;
mod transcripts;
mod ui;
mod verify;
mod watch;
