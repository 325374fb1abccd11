"""Runs the OpenAI Agents SDK's own session and sandbox test suites against
ForktrailSession.

The SDK's tests ship in its source distribution on PyPI (pinned: openai-agents
0.24.0). This fetches it once with pip into FORKTRAIL_SDK_CACHE (default
~/.cache/forktrail/agents-sdk), starts a real `forktrail serve` (FORKTRAIL_BIN) on a
fresh store with a token, and runs the suites with pytest and the plugin in
sdk/forktrail_sdk.py, which swaps SQLiteSession and AdvancedSQLiteSession for
ForktrailSession and deselects, test by test with a reason, the tests that read
SQLite itself and the few sandbox tests this machine cannot run. It prints what passed, failed and was deselected in each suite, and
exits non-zero unless every selected test passed (a skip counts as a failure).

    cd python/tests && FORKTRAIL_BIN=… python3 sdk_suites.py [pytest options…]

Needs python3 with the packages of NEEDED at those versions (SQLAlchemy, cryptography
and the sandbox providers' clients only because tests skip themselves without them);
the network only for pip's first fetch.

tests/memory/test_compaction_suffix.py is not run: each of its SQLiteSession cases is
the atomic suffix replacement SQLiteSession offers OpenAIResponsesCompactionSession
through its private _get_compaction_snapshot (all 22 fail the same on a plain subclass
of SQLiteSession, to which the SDK does not offer it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Dict, List

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from support import TOKEN, Server  # noqa: E402

VERSION = "0.24.0"
SUITES = [
    "tests/memory/test_session.py",
    "tests/memory/test_session_limit.py",
    "tests/extensions/memory/test_advanced_sqlite_session.py",
    "tests/memory/test_compaction_model_visibility.py",
    "tests/memory/test_openai_responses_compaction_session.py",
    # Sandbox agents: their memory groups a session's runs by its session_id.
    "tests/sandbox",
]
# What of the source distribution the suites read: their tests, the pytest settings,
# the examples the sandbox tests import and the SDK's source, which one of them reads.
UNPACKED = ["pyproject.toml", "tests", "examples", "src"]
# What the suites run with: the SDK, and the versions its own lock file (uv.lock in the
# source distribution) pins for openai and the test tools. openai matters: later ones
# add fields to the token details the usage tests compare.
NEEDED = {
    "openai-agents": VERSION,
    "openai": "3.29.0",
    "pytest": "9.0.3",
    "pytest-asyncio": "1.4.0",
    "sqlalchemy": "2.0.52",
    "cryptography": "50.0.1",
    # What tests/sandbox imports (its hosted providers' clients, test tools), at the
    # versions of the SDK's uv.lock.
    "aiohttp": "3.14.3",
    "httpx": "0.28.1",
    "inline-snapshot": "0.27.2",
    "docker": "7.1.0",
    "modal": "1.4.3",
    "e2b": "2.31.0",
    "e2b-code-interpreter": "2.8.1",
    "daytona": "0.155.0",
    "vercel-sandbox": "0.8.0",
    "runloop-api-client": "1.32.0",
    "blaxel": "0.2.50",
}


def sdk_tests() -> Path:
    """The unpacked source distribution (what of it the tests read: UNPACKED), fetched
    once."""
    cache = Path(os.environ.get("FORKTRAIL_SDK_CACHE", Path.home() / ".cache" / "forktrail" / "agents-sdk"))
    root = cache / f"openai_agents-{VERSION}"
    if all((root / part).exists() for part in [*UNPACKED, *SUITES]):
        return root
    cache.mkdir(parents=True, exist_ok=True)
    sdist = cache / f"openai_agents-{VERSION}.tar.gz"
    if not sdist.is_file():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"openai-agents=={VERSION}",
                "-d",
                str(cache),
            ],
            check=True,
        )
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        with tarfile.open(sdist) as archive:
            members = [
                m
                for m in archive.getmembers()
                if any(m.name == f"{root.name}/{part}" or m.name.startswith(f"{root.name}/{part}/") for part in UNPACKED)
            ]
            if sys.version_info >= (3, 12):
                archive.extractall(scratch, members=members, filter="data")
            else:
                archive.extractall(scratch, members=members)
        # An unpacking of fewer parts, by an earlier version of this runner, goes.
        shutil.rmtree(root, ignore_errors=True)
        os.replace(Path(scratch) / root.name, root)
    return root


def missing() -> List[str]:
    """The pins of NEEDED that are not what is installed."""
    from importlib import metadata

    wrong = []
    for name, version in NEEDED.items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = None
        if installed != version:
            wrong.append(f"{name}=={version}")
    return wrong


def undocumented() -> List[str]:
    """Deselected tests that python/README.md does not list (it lists each, with why)."""
    sys.path[:0] = [str(HERE.parent), str(HERE / "sdk")]
    from forktrail_sdk import DESELECTED

    readme = (HERE.parent / "README.md").read_text(encoding="utf-8")
    return [name for name in DESELECTED if f"`{name.split('::', 1)[1]}`" not in readme]


def main(argv: List[str]) -> int:
    absent = missing()
    if absent:
        print(f"sdk_suites: pip install {' '.join(absent)}", file=sys.stderr)
        return 2
    unlisted = undocumented()
    if unlisted:
        print(f"sdk_suites: python/README.md does not list {', '.join(unlisted)}", file=sys.stderr)
        return 1
    if not os.environ.get("FORKTRAIL_BIN"):
        print("sdk_suites: FORKTRAIL_BIN must name the forktrail binary", file=sys.stderr)
        return 2
    started = time.monotonic()
    root = sdk_tests()
    server = Server()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            report_path = Path(scratch) / "report.json"
            env = dict(os.environ)
            env.update(
                FORKTRAIL_URL=server.url,
                FORKTRAIL_TOKEN=TOKEN,
                FORKTRAIL_SDK_REPORT=str(report_path),
                PYTHONPATH=os.pathsep.join([str(HERE.parent), str(HERE / "sdk"), str(root)]),
                PYTHONDONTWRITEBYTECODE="1",
            )
            command = [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "forktrail_sdk",
                "-p",
                "no:cacheprovider",
                "-q",
                "-rfEs",
                "--no-header",
                *SUITES,
                *argv,
            ]
            limit = float(os.environ.get("FORKTRAIL_SDK_TIMEOUT", "900"))
            with subprocess.Popen(command, cwd=root, env=env) as pytest_run:
                try:
                    code = pytest_run.wait(timeout=limit)
                except subprocess.TimeoutExpired:
                    pytest_run.kill()
                    pytest_run.wait()
                    print(f"sdk_suites: the suites took over {limit:.0f} s (FORKTRAIL_SDK_TIMEOUT)", file=sys.stderr)
                    return 1
            report = json.loads(report_path.read_text()) if report_path.is_file() else None
    finally:
        server.close()
    if report is None:
        print(f"sdk_suites: pytest ended ({code}) without a report", file=sys.stderr)
        return 1
    return summarize(report, code, time.monotonic() - started)


def summarize(report: Dict, code: int, seconds: float) -> int:
    outcomes: Dict[str, str] = report["outcomes"]
    deselected: List[str] = report["deselected"]
    on_forktrail = set(report["on_forktrail"])
    print(f"\nThe Agents SDK {VERSION}'s suites on ForktrailSession ({seconds:.0f} s):")
    totals = {"passed": 0, "failed": 0, "skipped": 0, "deselected": 0}
    for suite in SUITES:
        mine = {n: o for n, o in outcomes.items() if in_suite(n, suite)}
        counts = {k: sum(1 for o in mine.values() if o == k) for k in ("passed", "failed", "skipped")}
        counts["deselected"] = sum(1 for n in deselected if in_suite(n, suite))
        forktrail = sum(1 for n, o in mine.items() if o == "passed" and n in on_forktrail)
        total = len(mine) + counts["deselected"]
        print(
            f"  {suite}: {counts['passed']} passed ({forktrail} of them on a ForktrailSession), "
            f"{counts['failed']} failed, {counts['skipped']} skipped, {counts['deselected']} deselected, "
            f"{total} in all"
        )
        for k in totals:
            totals[k] += counts[k]
    # A skip is a failure here: every selected test must have run and passed.
    failed = totals["failed"] + totals["skipped"]
    print(f"{totals['passed']} passed, {failed} failed, {totals['deselected']} deselected")
    ok = code == 0 and totals["failed"] == 0 and totals["skipped"] == 0 and totals["passed"] > 0
    return 0 if ok else 1


def in_suite(nodeid: str, suite: str) -> bool:
    """Whether the test ``nodeid`` is of ``suite``, a file or a directory of them."""
    path = nodeid.split("::", 1)[0]
    return path == suite or path.startswith(suite + "/")


def stop(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    # Stopped from outside, still stop the server and pytest (the `finally`s run).
    signal.signal(signal.SIGTERM, stop)
    sys.exit(main(sys.argv[1:]))
