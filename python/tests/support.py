"""What the Python tests share: the forktrail binary, and `forktrail serve` on a fresh
store for one test class."""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
import unittest
from typing import Optional

TOKEN = "python-test-token"

# IsolatedAsyncioTestCase runs its loop in debug mode, which logs every step slower than
# 0.1 s (an HTTP round trip, a model call) as a warning.
logging.getLogger("asyncio").setLevel(logging.ERROR)


def binary() -> str:
    """The forktrail binary under test (FORKTRAIL_BIN; `cargo test` sets it)."""
    path = os.environ.get("FORKTRAIL_BIN")
    if not path:
        raise unittest.SkipTest("FORKTRAIL_BIN is not set (the Rust test tests/it/python.rs sets it)")
    return path


class Server:
    """`forktrail serve --token` on a free port of 127.0.0.1, of `store` (a fresh one
    when not given, removed at `close`)."""

    def __init__(self, *args: str, store: Optional[str] = None) -> None:
        self.dir = tempfile.TemporaryDirectory() if store is None else None
        self.store = store if self.dir is None else os.path.join(self.dir.name, "store")
        self.process = subprocess.Popen(
            [binary(), "--store", self.store, "serve", "--bind", "127.0.0.1:0", "--token", TOKEN, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if store is not None else None,
            text=True,
        )
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("forktrail is serving on "):
                self.url = line.split()[4]
                break
        else:
            raise RuntimeError("forktrail serve ended before it listened")

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        if self.process.stdout is not None:
            self.process.stdout.close()
        if self.dir is not None:
            self.dir.cleanup()


class ServedTest(unittest.IsolatedAsyncioTestCase):
    """Tests of one class share a `forktrail serve` and a client of it."""

    @classmethod
    def setUpClass(cls) -> None:
        from forktrail import Client

        cls.server = Server()
        cls.client = Client(cls.server.url, token=TOKEN)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.close()
