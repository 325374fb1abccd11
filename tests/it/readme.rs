//! The README's shell examples run as printed, in an empty directory with only the
//! `forktrail` binary on `PATH` (and the system's tools): every ```` ```sh ```` block but
//! the first (`make`, which runs in the checkout, as CI does) runs in order, in one
//! directory, so later blocks see the store earlier ones built. A block after
//! `<!-- readme-test: server -->` runs while `FORKTRAIL_TOKEN=s3cret forktrail serve`
//! serves that store (on a free port instead of 7878). Blocks in ```` ```text ```` are not run: they need a
//! model server or files of the reader's own.
#![cfg(feature = "rocksdb")]

use crate::common;

use common::cli::serving;
use common::Reaped;
use std::path::Path;
use std::process::Command;

struct Block {
    line: usize,
    text: String,
    server: bool,
}

fn sh_blocks(readme: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut lines = readme.lines().enumerate().peekable();
    let mut previous = "";
    while let Some((n, line)) = lines.next() {
        if line.trim() == "```sh" {
            let mut text = String::new();
            for (_, body) in lines.by_ref() {
                if body.trim() == "```" {
                    break;
                }
                text.push_str(body);
                text.push('\n');
            }
            blocks.push(Block {
                line: n + 1,
                text,
                server: previous.trim() == "<!-- readme-test: server -->",
            });
        }
        previous = line;
    }
    blocks
}

/// `forktrail serve` (the one on `path`) in `dir` on a free port of 127.0.0.1, once it
/// says it is serving: the process (killed when dropped) and its address.
fn serve(dir: &Path, path: &str) -> (Reaped, String) {
    let addr = format!("127.0.0.1:{}", common::free_port());
    let (child, base) = serving(
        Command::new("forktrail")
            .args(["serve", "--bind", &addr])
            .current_dir(dir)
            .env("PATH", path)
            .env_remove("FORKTRAIL_STORE")
            // The token the README's server block says the server was started with.
            .env("FORKTRAIL_TOKEN", "s3cret"),
    );
    assert_eq!(base, format!("http://{addr}"));
    (child, addr)
}

#[test]
fn every_shell_example_of_the_readme_runs_as_printed_outside_the_checkout() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let blocks = sh_blocks(&readme);
    assert!(blocks.len() >= 6, "{} sh blocks", blocks.len());
    assert!(
        blocks[0].text.contains("make serve") && blocks[0].text.contains("make test"),
        "the first block holds the two set-up commands"
    );
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_forktrail"),
        bin.path().join("forktrail"),
    )
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.path().display());
    for block in &blocks[1..] {
        let (server, text) = if block.server {
            let (child, addr) = serve(work.path(), &path);
            (Some(child), block.text.replace("127.0.0.1:7878", &addr))
        } else {
            (None, block.text.clone())
        };
        let out = Command::new("bash")
            .args(["-euo", "pipefail", "-c", &text])
            .current_dir(work.path())
            .env("PATH", &path)
            .env("HOME", work.path())
            .env_remove("FORKTRAIL_STORE")
            .env_remove("FORKTRAIL_TOKEN")
            .output()
            .unwrap();
        drop(server);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "the README block at line {} failed:\n{}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
            block.line,
            block.text
        );
        assert!(
            !stderr.contains("error"),
            "the README block at line {} printed an error:\n{stderr}",
            block.line
        );
    }
}
