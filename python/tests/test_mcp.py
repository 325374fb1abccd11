"""forktrail's MCP server driven by the official MCP Python SDK's client, over stdio
(`forktrail mcp`) and over Streamable HTTP (`/mcp` of `forktrail serve`), each in the
handshake protocol (`initialize`, 2025-11-25) and in the stateless one
(`server/discover`, 2026-07-28): the tools it lists, a fork made through it that shares
its parent's prefix, writes refused without --allow-writes (stdio) or the token (HTTP),
errors worded as the CLI words them, and the replay resources."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import unittest
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, List

from support import TOKEN, Server, binary

try:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
    from mcp import MCPError
except ImportError:  # pragma: no cover - the Rust wrapper insists on it in CI
    ClientSession = None  # type: ignore[assignment,misc]

TOOLS = {
    "list_sessions",
    "search",
    "show_session",
    "replay_session",
    "list_branches",
    "fork_session",
    "append_turn",
    "diff_sessions",
    "regenerate",
    "job_status",
    "cancel_job",
    "compare_models",
    "comparison",
    "query",
    "verify",
}


def cli(store: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary(), "--store", store, *args], capture_output=True, text=True, timeout=60)


def result(call: Any) -> Any:
    """The JSON a successful tool call answered with."""
    assert not call.is_error, call.content[0].text
    return json.loads(call.content[0].text)


class McpTest(unittest.IsolatedAsyncioTestCase):
    """Over stdio, in the handshake protocol; the subclasses change the transport or the
    protocol and run the same tests."""

    http = False
    stateless = False

    def setUp(self) -> None:
        if ClientSession is None:
            self.skipTest("the mcp package is not installed")
        self.dir = tempfile.TemporaryDirectory()
        self.store = os.path.join(self.dir.name, "store")
        self.assertEqual(cli(self.store, "new", "--id", "trip", "--title", "Paris trip").returncode, 0)
        for role, content in [
            ("user", "Paris to Amsterdam on Friday?"),
            ("assistant", "The 07:25 Eurostar."),
            ("user", "Anything cheaper?"),
            ("assistant", "The 09:10 at 35 euros."),
        ]:
            done = cli(self.store, "append", "trip", "--role", role, "--content", content)
            self.assertEqual(done.returncode, 0, done.stderr)
        self.cli_store = self.store
        if self.http:
            self.server = Server(store=self.store)
            self.url = self.server.url
            # The CLI reaches the store the server holds through the server.
            self.cli_store = f"{self.url}/sparql"

    def tearDown(self) -> None:
        if self.http:
            self.server.close()
        self.dir.cleanup()

    @asynccontextmanager
    async def connect(self, writes: bool = False) -> AsyncIterator[Any]:
        """A client session, allowed to write when `writes` (--allow-writes on stdio,
        the token on HTTP)."""
        if self.http:
            headers = {"Authorization": f"Bearer {TOKEN}"} if writes else None
            async with create_mcp_http_client(headers=headers) as http:
                async with streamable_http_client(f"{self.url}/mcp", http_client=http) as (read, write):
                    async with ClientSession(read, write) as session:
                        yield await self.start(session)
        else:
            flags = ["--allow-writes"] if writes else []
            params = StdioServerParameters(command=binary(), args=["--store", self.store, "mcp", *flags])
            with open(os.devnull, "w") as quiet:
                async with stdio_client(params, errlog=quiet) as (read, write):
                    async with ClientSession(read, write) as session:
                        yield await self.start(session)

    async def start(self, session: Any) -> Any:
        """Negotiates the protocol this class speaks, and checks what was agreed."""
        if self.stateless:
            await session.discover()
            self.assertEqual(session.protocol_version, "2026-07-28")
        else:
            init = await session.initialize()
            self.assertEqual(init.server_info.name, "forktrail")
            self.assertEqual(session.protocol_version, "2025-11-25")
        self.assertIsNotNone(session.server_capabilities.tools)
        return session

    def read_only_hint(self) -> str:
        if self.http:
            return "send the server's token"
        return "start it with `forktrail mcp --allow-writes`"

    async def test_lists_its_tools_with_schemas(self) -> None:
        async with self.connect() as session:
            tools = (await session.list_tools()).tools
        self.assertEqual({t.name for t in tools}, TOOLS)
        by_name = {t.name: t for t in tools}
        fork = by_name["fork_session"].input_schema
        self.assertEqual(fork["type"], "object")
        self.assertEqual(fork["required"], ["session"])
        self.assertTrue({"at", "label", "reason", "dry_run", "swap_model"} <= set(fork["properties"]))
        self.assertEqual(by_name["replay_session"].input_schema["properties"]["up_to"]["type"], "integer")
        self.assertTrue(by_name["replay_session"].annotations.read_only_hint)
        self.assertFalse(by_name["append_turn"].annotations.read_only_hint)

    async def test_forks_through_mcp_and_the_fork_shares_the_prefix(self) -> None:
        async with self.connect(writes=True) as session:
            plan = result(await session.call_tool("fork_session", {"session": "trip", "at": 2, "label": "cheaper", "dry_run": True}))
            self.assertEqual((plan["forked_at_index"], plan["branch"]), (2, "cheaper"))
            self.assertEqual(result(await session.call_tool("list_branches", {"session": "trip"}))["branches"], [])
            plan = result(await session.call_tool("fork_session", {"session": "trip", "at": 2, "label": "cheaper", "reason": "ask for a bus"}))
            fork = plan["session"]
            self.assertEqual((plan["parent"], plan["forked_at_index"]), ("trip", 2))
            added = result(await session.call_tool("append_turn", {"session": fork, "role": "user", "content": "What about the bus?"}))
            self.assertEqual(added["index"], 2)
            parent = result(await session.call_tool("replay_session", {"session": "trip"}))["turns"]
            child = result(await session.call_tool("replay_session", {"session": fork}))["turns"]
            self.assertEqual(child[:2], parent[:2])
            self.assertEqual([t["branch"] for t in child], ["main", "main", "cheaper"])
            self.assertEqual(child[2]["content"], "What about the bus?")
            up_to = result(await session.call_tool("replay_session", {"session": fork, "up_to": 0}))["turns"]
            self.assertEqual(up_to, parent[:1])
            info = result(await session.call_tool("show_session", {"session": fork}))
            # Share, don't copy: the fork stores one turn of its three.
            self.assertEqual((info["length"], info["own_turns"]), (3, 1))
            branches = result(await session.call_tool("list_branches", {"session": "trip"}))["branches"]
            self.assertEqual([(b["session"], b["branch"]) for b in branches], [(fork, "cheaper")])
            diff = result(await session.call_tool("diff_sessions", {"a": "trip", "b": fork}))
            self.assertEqual((diff["common_ancestor"], diff["common_prefix"]), ("trip", 2))
            self.assertEqual([t["content"] for t in diff["b_tail"]], ["What about the bus?"])
            count = result(
                await session.call_tool(
                    "query",
                    {
                        "query": "PREFIX ft: <https://w3id.org/forktrail/ns#> "
                        "SELECT (COUNT(?t) AS ?n) WHERE { GRAPH ?g { ?s ft:sessionId ?id . ?t a ft:Turn } } ",
                    },
                )
            )
            self.assertEqual(count["results"]["bindings"][0]["n"]["value"], "5")
            verified = result(await session.call_tool("verify", {}))
            self.assertEqual(verified["problems"], [])
        # What the MCP server wrote is there for the CLI.
        replay = cli(self.cli_store, "replay", fork, "--json")
        self.assertEqual([t["content"] for t in json.loads(replay.stdout)][2], "What about the bus?")

    async def test_lists_sessions_a_page_at_a_time_and_searches(self) -> None:
        async with self.connect() as session:
            page = result(await session.call_tool("list_sessions", {"limit": 1}))
            self.assertEqual([s["session"] for s in page["sessions"]], ["trip"])
            self.assertEqual((page["total"], page["next"]), (1, None))
            self.assertEqual(page["sessions"][0]["title"], "Paris trip")
            found = result(await session.call_tool("search", {"text": "cheaper"}))
            self.assertEqual([(h["session"], h["index"]) for h in found["hits"]], [("trip", 2)])
            refused = await session.call_tool("list_sessions", {"colour": "red"})
            self.assertTrue(refused.is_error)
            self.assertIn("unknown field", refused.content[0].text)

    async def test_writes_are_refused_without_allow_writes(self) -> None:
        async with self.connect() as session:
            for tool, args in [
                ("fork_session", {"session": "trip", "at": 1}),
                ("append_turn", {"session": "trip", "role": "user", "content": "hi"}),
                ("regenerate", {"session": "trip", "at": 1, "dry_run": True}),
            ]:
                call = await session.call_tool(tool, args)
                self.assertTrue(call.is_error, tool)
                self.assertIn(self.read_only_hint(), call.content[0].text)
            self.assertEqual(result(await session.call_tool("show_session", {"session": "trip"}))["length"], 4)
        self.assertEqual(cli(self.cli_store, "list", "--json").stdout.count('"session"'), 1)

    async def test_errors_read_as_the_cli_reads_them(self) -> None:
        cases: List[Any] = [
            ("show_session", {"session": "missing"}, ["show", "missing"]),
            ("replay_session", {"session": "trip", "up_to": 9}, ["replay", "trip", "--up-to", "9"]),
            ("show_session", {"session": "x> } DROP ALL"}, ["show", "x> } DROP ALL"]),
        ]
        messages = []
        async with self.connect(writes=True) as session:
            for tool, args, _ in cases:
                call = await session.call_tool(tool, args)
                self.assertTrue(call.is_error)
                messages.append(call.content[0].text)
            with self.assertRaises(MCPError):
                await session.call_tool("drop_everything", {})
            bad = await session.call_tool("show_session", {"session": "trip", "verbose": True})
            self.assertTrue(bad.is_error)
            self.assertIn('unknown argument "verbose"', bad.content[0].text)
        for (_, _, command), message in zip(cases, messages):
            run = cli(self.cli_store, *command)
            self.assertNotEqual(run.returncode, 0)
            self.assertIn(message, run.stderr)

    async def test_replays_are_resources(self) -> None:
        async with self.connect() as session:
            resources = (await session.list_resources()).resources
            self.assertEqual([str(r.uri) for r in resources], ["forktrail://sessions/trip/replay"])
            read = await session.read_resource(resources[0].uri)
            records = json.loads(read.contents[0].text)
            self.assertEqual([r["index"] for r in records], [0, 1, 2, 3])
            self.assertEqual(records[3]["content"], "The 09:10 at 35 euros.")
            with self.assertRaises(MCPError):
                await session.read_resource("forktrail://sessions/missing/replay")


class McpStatelessStdioTest(McpTest):
    """`forktrail mcp` in the stateless protocol: server/discover, no handshake."""

    stateless = True


class McpHttpTest(McpTest):
    """`/mcp` of `forktrail serve`, in the handshake protocol."""

    http = True

    async def test_a_wrong_token_is_refused_before_any_call(self) -> None:
        async with create_mcp_http_client(headers={"Authorization": "Bearer wrong"}) as http:
            response = await http.post(
                f"{self.url}/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={"Accept": "application/json, text/event-stream"},
            )
        self.assertEqual(response.status_code, 401)


class McpStatelessHttpTest(McpHttpTest):
    """`/mcp` of `forktrail serve` in the stateless protocol, as hosts that take MCP
    servers by URL speak it now."""

    stateless = True


if __name__ == "__main__":
    unittest.main()
