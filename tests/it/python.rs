//! The Python side, run by Python: `python/tests` drives the real `forktrail` binary
//! with the official MCP client (PyPI `mcp`) and the OpenAI Agents SDK (PyPI
//! `openai-agents`) on `ForktrailSession`, against the test model for the agent loop.
//! `make test` installs both packages; without them the tests are skipped with a note,
//! except under `CI`, where a skipped Python test fails.
#![cfg(all(feature = "server", feature = "rocksdb"))]

use crate::common;

use std::path::Path;
use std::process::Command;

/// Runs `python3 -m unittest MODULE` in `python/tests` on the source of `python/`, and
/// fails with its output unless every test passed (and, in CI, none was skipped).
fn unittest(module: &str, env: &[(&str, String)]) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    let out = Command::new("python3")
        .args(["-m", "unittest", "-v", module])
        .current_dir(root.join("tests"))
        .env("PYTHONPATH", &root)
        .env("FORKTRAIL_BIN", env!("CARGO_BIN_EXE_forktrail"))
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("python3 runs");
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "python tests {module} failed:\n{report}"
    );
    let skipped = report.lines().any(|l| l.contains("... skipped"));
    if skipped && std::env::var_os("CI").is_some() {
        panic!("python tests {module} were skipped; in CI they must run (`make test` installs what they need):\n{report}");
    }
    if skipped {
        eprintln!("some python tests of {module} were skipped:\n{report}");
    }
    // unittest's summary: the tests really ran.
    assert!(report.contains("\nRan "), "no test ran:\n{report}");
}

#[test]
fn forktrail_session_behaves_as_the_sdk_expects() {
    unittest("test_session", &[]);
}

#[test]
fn mcp_client_lists_tools_and_forks_through_forktrail_mcp() {
    unittest("test_mcp", &[]);
}

#[test]
fn agents_sdk_runs_an_agent_loop_on_forktrail_session() {
    let Some(llm) = common::Llm::start() else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/v1", llm.port);
    unittest("test_agents", &[("FORKTRAIL_TEST_LLM_URL", url)]);
}

/// The OpenAI Agents SDK's own session and sandbox suites (from its source distribution,
/// fetched once with pip) run against `ForktrailSession`: `python/tests/sdk_suites.py`
/// serves this binary and runs them with a plugin that swaps `SQLiteSession` and
/// `AdvancedSQLiteSession` for `ForktrailSession`, leaving out only the tests that read
/// SQLite itself and the sandbox tests of another platform or with a deadline on a child
/// process (listed, each with its reason, in `python/tests/sdk/forktrail_sdk.py`).
/// Every other test must pass. Without the pinned packages (`make test` installs them)
/// the runner exits 2 and the test is skipped with a note, except under `CI`.
#[test]
fn agents_sdk_own_suites_pass_on_forktrail_session() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    let out = Command::new("python3")
        .arg("sdk_suites.py")
        .current_dir(root.join("tests"))
        .env("PYTHONPATH", &root)
        .env("FORKTRAIL_BIN", env!("CARGO_BIN_EXE_forktrail"))
        .output()
        .expect("python3 runs");
    let report = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.code() == Some(2) {
        if std::env::var_os("CI").is_some() {
            panic!("the Agents SDK's suites were skipped; in CI they must run (`make test` installs what they need):\n{report}");
        }
        eprintln!("the Agents SDK's suites were skipped:\n{report}");
        return;
    }
    assert!(
        out.status.success(),
        "the Agents SDK's suites failed on ForktrailSession:\n{report}"
    );
    // The runner's closing line: tests ran, none failed or was skipped.
    let closing = report
        .lines()
        .rev()
        .find(|l| l.ends_with(" deselected") && l.contains(" passed, "))
        .unwrap_or_else(|| panic!("no summary from the runner:\n{report}"));
    assert!(
        closing.contains(" passed, 0 failed, "),
        "{closing}\n{report}"
    );
    assert!(!closing.starts_with("0 passed"), "no test ran:\n{report}");
}
