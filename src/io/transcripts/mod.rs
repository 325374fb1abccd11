//! Other tools' logs in (and OpenAI chat messages out): each read into forktrail
//! sessions, told apart by their content (see `formats.rs` above).
//!
//! | file | what |
//! | --- | --- |
//! | `family.rs` | the transcript builder Claude Code, Pi and OTLP imports share |
//! | `claude_code.rs` | Claude Code logs, sub-agents and project folders in |
//! | `codex.rs` | OpenAI Codex CLI rollouts in |
//! | `openai.rs` | OpenAI chat messages in and out |
//! | `pi.rs` | Pi session files (a tree in one file) in |
//! | `otlp.rs` | OpenTelemetry GenAI traces in (OTLP requests and JSON Lines files) |

mod claude_code;
pub(super) mod codex;
mod family;
pub(super) mod openai;
pub(super) mod otlp;
pub(super) mod pi;
