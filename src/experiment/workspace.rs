//! A sample's workspace copy and the processes run in it: the agent, then the verify
//! command, each by `sh -c` in its own process group (so that stopping it stops what
//! it started), under bubblewrap when the experiment asks for it.

use crate::error::{Error, Result};
use crate::model::{ExperimentSpec, Sandbox};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The most of a process's output kept with its sample.
const KEPT_OUTPUT: usize = 2_000;

fn io(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { context, source }
}

/// A fresh copy of the experiment's workspace.
pub(super) struct Copy {
    pub(super) path: PathBuf,
    /// The repository the copy is a worktree of.
    worktree_of: Option<PathBuf>,
}

impl Copy {
    /// Makes `root/label` a fresh copy of the workspace: a `git worktree` at the
    /// experiment's revision, or the directory copied whole (`cp -a`). One left by an
    /// earlier attempt at the sample is removed first.
    pub(super) fn make(spec: &ExperimentSpec, root: &Path, label: &str) -> Result<Self> {
        let path = root.join(label);
        let source = PathBuf::from(&spec.workspace);
        if path.exists() {
            Copy {
                path: path.clone(),
                worktree_of: spec.workspace_ref.as_ref().map(|_| source.clone()),
            }
            .remove();
        }
        std::fs::create_dir_all(root).map_err(io(format!("creating {}", root.display())))?;
        let (mut command, worktree_of) = match &spec.workspace_ref {
            Some(rev) => {
                let mut c = Command::new("git");
                c.arg("-C")
                    .arg(&source)
                    .args(["worktree", "add", "--detach"]);
                c.arg(&path).arg(rev);
                (c, Some(source.clone()))
            }
            None => {
                let mut c = Command::new("cp");
                c.arg("-a").arg(source.join(".")).arg(&path);
                std::fs::create_dir_all(&path)
                    .map_err(io(format!("creating {}", path.display())))?;
                (c, None)
            }
        };
        let out = command
            .stdin(Stdio::null())
            .output()
            .map_err(io(format!("copying the workspace {}", source.display())))?;
        if !out.status.success() {
            return Err(Error::InvalidInput(format!(
                "the workspace {} could not be copied to {}: {}",
                source.display(),
                path.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(Self { path, worktree_of })
    }

    /// Removes the copy (and its worktree entry).
    pub(super) fn remove(self) {
        if let Some(repo) = &self.worktree_of {
            let _ = Command::new("git")
                .arg("-C")
                .arg(repo)
                .args(["worktree", "remove", "--force"])
                .arg(&self.path)
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The command that runs `line` by `sh -c` in `dir`, under the experiment's sandbox.
pub(super) fn command(spec: &ExperimentSpec, line: &str, dir: &Path) -> Command {
    let mut c = match spec.sandbox {
        Sandbox::None => Command::new("sh"),
        Sandbox::Bwrap => {
            let mut c = Command::new("bwrap");
            c.args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]);
            c.args(["--tmpfs", "/tmp"]);
            // After the tmpfs, so that a copy under /tmp is bound over it.
            for path in std::iter::once(dir).chain(spec.writable.iter().map(Path::new)) {
                c.arg("--bind").arg(path).arg(path);
            }
            c.args(["--unshare-pid", "--die-with-parent", "--chdir"]);
            c.arg(dir).args(["--", "sh"]);
            c
        }
    };
    c.arg("-c").arg(line).current_dir(dir);
    c.stdin(Stdio::null()).process_group(0);
    c
}

/// A process started in a sample, its output going to a log beside the copy.
pub(super) struct Running {
    child: Child,
    log: PathBuf,
    started: Instant,
}

impl Running {
    /// Starts `command`, its output appended to `log`.
    pub(super) fn start(mut command: Command, log: &Path) -> Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(io(format!("opening {}", log.display())))?;
        let err = file
            .try_clone()
            .map_err(io(format!("opening {}", log.display())))?;
        command.stdout(file).stderr(err);
        let program = command.get_program().to_string_lossy().into_owned();
        let child = command.spawn().map_err(io(format!(
            "starting {program} (is it installed and on PATH?)"
        )))?;
        Ok(Self {
            child,
            log: log.to_path_buf(),
            started: Instant::now(),
        })
    }

    /// The exit code once the process ended (`Some(None)`: ended by a signal).
    pub(super) fn ended(&mut self) -> Option<Option<i64>> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.code().map(i64::from)),
            Ok(None) => None,
            Err(_) => Some(None),
        }
    }

    pub(super) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Stops the process and everything it started (its process group).
    pub(super) fn stop(&mut self) -> Option<i64> {
        if let Some(code) = self.ended() {
            return code;
        }
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        self.child.wait().ok().and_then(|s| s.code()).map(i64::from)
    }

    /// Waits for the process for at most `limit`: its exit code, or `Err` when it was
    /// stopped for taking longer.
    pub(super) fn wait(mut self, limit: Duration) -> std::result::Result<Option<i64>, ()> {
        loop {
            if let Some(code) = self.ended() {
                return Ok(code);
            }
            if self.elapsed() >= limit {
                self.stop();
                return Err(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The end of what the process wrote, secrets taken out.
    pub(super) fn output(&self) -> String {
        tail(&self.log)
    }
}

/// The end of file `path`, secrets taken out.
pub(super) fn tail(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let text = crate::secrets::scrub(&text);
    let start = text.len().saturating_sub(KEPT_OUTPUT);
    let start = (start..=text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    text[start..].to_string()
}
