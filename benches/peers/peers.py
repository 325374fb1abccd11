"""The workloads of forktrail's core bench (benches/core.rs) on two peers, each on a
SQLite file in a temp dir:

- LangGraph with its SQLite checkpointer (`SqliteSaver`): a conversation is a thread
  whose state (`MessagesState`) holds the messages; a fork is `update_state` on a past
  checkpoint, as LangGraph documents time travel; a replay is `get_state(config)`.
- The OpenAI Agents SDK's `AdvancedSQLiteSession`: a fork is
  `create_branch_from_turn(turn)`; a replay is `get_items(branch_id=...)`.

Prints one JSON object of named figures, named as core.rs names them where they mean
the same (`langgraph.fork_5000_us`, `openai_agents.replay_depth32_cold_ms`). Progress
goes to stderr. `--quick` (or FORKTRAIL_BENCH_QUICK=1) runs small sizes, as core.rs
does. benches/peers/README.md says how each workload maps onto each peer.
"""

import argparse
import asyncio
import json
import os
import platform
import shutil
import sqlite3
import sys
import tempfile
import time
from importlib import metadata

WORDS = ("fork", "turn", "agent", "replay", "model", "tool", "graph", "audit")
MASK = (1 << 64) - 1


class Contents:
    """Deterministic 500-byte contents: core.rs's xorshift generator, same seeds."""

    def __init__(self, seed):
        self.state = seed

    def next(self):
        out = []
        length = 0
        while length < 500:
            x = self.state
            x ^= (x << 13) & MASK
            x ^= x >> 7
            x ^= (x << 17) & MASK
            self.state = x
            word = WORDS[x % 8]
            out.append(word)
            length += len(word) + 1
        return (" ".join(out) + " ")[:500]


class Sizes:
    """The sizes of one run: core.rs's, or its quick ones."""

    def __init__(self, quick):
        self.quick = quick
        self.fork = [500, 5_000] if quick else [500, 5_000, 50_000]
        self.root = 1_000 if quick else 5_000
        self.depths = [1, 8] if quick else [1, 8, 32]
        self.append = 2_000 if quick else 10_000
        # Repeats as in core.rs: 21 alternating fork rounds, 5 cold and 7 warm replays.
        # LangGraph writes the whole state on every fork (33 MB at 50,000 messages), so
        # it gets 7 rounds.
        self.fork_rounds = 21
        self.langgraph_fork_rounds = 7
        self.cold = 5
        self.warm = 7
        # LangGraph rewrites the whole state on every append, so appending the n-th
        # message costs O(n) time and bytes (10,000 appends would write about 35 GB):
        # it appends this many.
        self.langgraph_append = 500 if quick else 1_000


def median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def file_bytes(path):
    """A SQLite database's size on disk: the file, its WAL and shared-memory index."""
    return sum(
        os.path.getsize(p) for p in (path, path + "-wal", path + "-shm") if os.path.exists(p)
    )


def log(message):
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------
# LangGraph: SqliteSaver, a MessagesState thread per conversation.


def langgraph_figures(sizes, tmp):
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, MessagesState, StateGraph

    # The graph of a chat agent; its node is never run: every message goes in through
    # `update_state`, one checkpoint per call, as a node's return value would.
    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {})
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)

    def open_graph(path, synchronous=None):
        conn = sqlite3.connect(path, check_same_thread=False)
        if synchronous is not None:
            conn.execute(f"PRAGMA synchronous={synchronous}")
        saver = SqliteSaver(conn)
        saver.setup()
        return conn, builder.compile(checkpointer=saver)

    def message(i, text):
        return HumanMessage(content=text) if i % 2 == 0 else AIMessage(content=text)

    def history(n, seed):
        contents = Contents(seed)
        return [message(i, contents.next()) for i in range(n)]

    def thread(name):
        return {"configurable": {"thread_id": name}}

    figures = {}
    put = figures.__setitem__

    # 1. Fork: parents built first (each in one update, so their last checkpoint holds
    # n messages), then forks of the sizes alternate on the same file.
    path = os.path.join(tmp, "langgraph-fork.sqlite")
    conn, graph = open_graph(path)
    parents = {n: graph.update_state(thread(f"parent{n}"), {"messages": history(n, n)})
               for n in sizes.fork}
    for n, config in parents.items():
        fork = graph.update_state(config, {"messages": []})
        written = conn.execute(
            "SELECT (SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0)"
            " FROM checkpoints WHERE checkpoint_id = ?1)"
            " + (SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes WHERE checkpoint_id = ?1)",
            (fork["configurable"]["checkpoint_id"],),
        ).fetchone()[0]
        put(f"fork_{n}_bytes", written)
    times = {n: [] for n in sizes.fork}
    for _ in range(sizes.langgraph_fork_rounds):
        for n, config in parents.items():
            start = time.perf_counter()
            graph.update_state(config, {"messages": []})
            times[n].append(time.perf_counter() - start)
    conn.close()
    os.remove(path)
    fork_figures(figures, sizes, times)
    log("langgraph: fork done")

    # 2. Replay along one chain of branches of branches over a root of `root` messages.
    # Each branch forks its parent before the parent's last user/assistant pair (the
    # turn it re-asks) and adds two pairs, one message per update: the branch at depth
    # d holds root + 2d messages, as in core.rs's chain.
    path = os.path.join(tmp, "langgraph-replay.sqlite")
    conn, graph = open_graph(path)
    root = history(sizes.root, 7)
    fork_point = graph.update_state(thread("chain"), {"messages": root[:-2]})
    leaf = fork_point
    for m in root[-2:]:
        leaf = graph.update_state(leaf, {"messages": [m]})
    contents = Contents(11)
    leaves = {}
    for depth in range(1, max(sizes.depths) + 1):
        leaf = graph.update_state(fork_point, {"messages": []})
        for i in range(4):
            leaf = graph.update_state(leaf, {"messages": [message(i, contents.next())]})
            if i == 1:
                fork_point = leaf
        if depth in sizes.depths:
            leaves[depth] = leaf
    conn.close()
    for depth, leaf in leaves.items():
        opens, cold = [], []
        for _ in range(sizes.cold):
            start = time.perf_counter()
            conn, graph = open_graph(path)
            opened = time.perf_counter()
            messages = graph.get_state(leaf).values["messages"]
            cold.append(time.perf_counter() - opened)
            opens.append(opened - start)
            conn.close()
        conn, graph = open_graph(path)
        graph.get_state(leaf)
        warm = []
        for _ in range(sizes.warm):
            start = time.perf_counter()
            graph.get_state(leaf).values["messages"]
            warm.append(time.perf_counter() - start)
        conn.close()
        put(f"replay_depth{depth}_turns", len(messages))
        put(f"replay_depth{depth}_open_ms", median(opens) * 1e3)
        put(f"replay_depth{depth}_cold_ms", median(cold) * 1e3)
        put(f"replay_depth{depth}_warm_ms", median(warm) * 1e3)
    os.remove(path)
    log("langgraph: replay done")

    # 3. Append, one message per update (one checkpoint, one transaction), on a fresh
    # file: as shipped (SQLite's default synchronous=FULL syncs the WAL on each commit)
    # and with synchronous=NORMAL (nothing synced on commit, like forktrail's default).
    n = sizes.langgraph_append
    for label, synchronous in (("", None), ("_nosync", "NORMAL")):
        path = os.path.join(tmp, f"langgraph-append{label}.sqlite")
        conn, graph = open_graph(path, synchronous)
        contents = Contents(sizes.append)
        texts = [contents.next() for _ in range(n)]
        config = thread("append")
        took = []
        start = time.perf_counter()
        for i, text in enumerate(texts):
            before = time.perf_counter()
            config = graph.update_state(config, {"messages": [message(i, text)]})
            took.append(time.perf_counter() - before)
        put(f"append{label}_{n}_turns_per_s", n / (time.perf_counter() - start))
        put(f"append{label}_last_100_ms", median(took[-100:]) * 1e3)
        if not label:
            with_log = file_bytes(path)
            conn.close()
            put("bytes_on_disk_per_turn", file_bytes(path) / n)
            put("bytes_on_disk_per_turn_with_log", with_log / n)
            put("bytes_on_disk_turns", n)
        else:
            conn.close()
        os.remove(path)
    log("langgraph: append done")

    put("versions", ", ".join(
        f"{p} {metadata.version(p)}" for p in ("langgraph", "langgraph-checkpoint-sqlite")))
    return figures


# ---------------------------------------------------------------------------------
# OpenAI Agents SDK: AdvancedSQLiteSession, user/assistant pairs (a turn is a user
# message), branches in one session.


async def openai_agents_figures(sizes, tmp):
    from agents.extensions.memory import AdvancedSQLiteSession

    class UnsyncedSession(AdvancedSQLiteSession):
        """The same session with synchronous=NORMAL on each connection it opens."""

        @staticmethod
        def _configure_connection(conn):
            AdvancedSQLiteSession._configure_connection(conn)
            conn.execute("PRAGMA synchronous=NORMAL")

    def item(i, text):
        if i % 2 == 0:
            return {"role": "user", "content": text}
        # An assistant message as a run leaves it in the session.
        return {
            "id": f"msg_{i}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }

    def history(n, seed):
        contents = Contents(seed)
        return [item(i, contents.next()) for i in range(n)]

    def session(name, path, create=True, kind=AdvancedSQLiteSession):
        return kind(session_id=name, db_path=path, create_tables=create)

    figures = {}
    put = figures.__setitem__

    # 1. Fork: each parent a session of n messages (n/2 turns); a fork is a branch from
    # its last turn, which copies the structure rows of the n - 2 messages before it.
    # The branch becomes the session's current one, so each fork is followed (untimed)
    # by a switch back to main.
    path = os.path.join(tmp, "openai-agents-fork.sqlite")
    parents = {}
    for n in sizes.fork:
        parents[n] = session(f"parent{n}", path)
        await parents[n].add_items(history(n, n))
    for n, parent in parents.items():
        before = rows(path)
        await parent.create_branch_from_turn(n // 2, branch_name="count")
        put(f"fork_{n}_rows", rows(path) - before)
        await parent.switch_to_branch("main")
    times = {n: [] for n in sizes.fork}
    for r in range(sizes.fork_rounds):
        for n, parent in parents.items():
            start = time.perf_counter()
            await parent.create_branch_from_turn(n // 2, branch_name=f"fork{r}")
            times[n].append(time.perf_counter() - start)
            await parent.switch_to_branch("main")
    for parent in parents.values():
        parent.close()
    os.remove(path)
    fork_figures(figures, sizes, times)
    log("openai_agents: fork done")

    # 2. Replay along one chain of branches of branches: each branch is made from its
    # parent's last turn (copying the messages before it) and gets two pairs, one
    # message per call; the branch at depth d holds root + 2d messages.
    path = os.path.join(tmp, "openai-agents-replay.sqlite")
    chain = session("chain", path)
    await chain.add_items(history(sizes.root, 7))
    last_turn = sizes.root // 2
    contents = Contents(11)
    for depth in range(1, max(sizes.depths) + 1):
        await chain.create_branch_from_turn(last_turn, branch_name=f"depth{depth}")
        for i in range(4):
            await chain.add_items([item(i, contents.next())])
        last_turn += 1
    chain.close()
    for depth in sizes.depths:
        branch = f"depth{depth}"
        opens, cold = [], []
        for _ in range(sizes.cold):
            start = time.perf_counter()
            reader = session("chain", path, create=False)
            opened = time.perf_counter()
            items = await reader.get_items(branch_id=branch)
            cold.append(time.perf_counter() - opened)
            opens.append(opened - start)
            reader.close()
        reader = session("chain", path, create=False)
        await reader.get_items(branch_id=branch)
        warm = []
        for _ in range(sizes.warm):
            start = time.perf_counter()
            await reader.get_items(branch_id=branch)
            warm.append(time.perf_counter() - start)
        reader.close()
        put(f"replay_depth{depth}_turns", len(items))
        put(f"replay_depth{depth}_open_ms", median(opens) * 1e3)
        put(f"replay_depth{depth}_cold_ms", median(cold) * 1e3)
        put(f"replay_depth{depth}_warm_ms", median(warm) * 1e3)
    os.remove(path)
    log("openai_agents: replay done")

    # 3. Append, one message per add_items call (one transaction), on a fresh file: as
    # shipped (synchronous=FULL) and with synchronous=NORMAL.
    for label, kind in (("", AdvancedSQLiteSession), ("_nosync", UnsyncedSession)):
        path = os.path.join(tmp, f"openai-agents-append{label}.sqlite")
        appender = session("append", path, kind=kind)
        contents = Contents(sizes.append)
        items = [item(i, contents.next()) for i in range(sizes.append)]
        took = []
        start = time.perf_counter()
        for one in items:
            before = time.perf_counter()
            await appender.add_items([one])
            took.append(time.perf_counter() - before)
        elapsed = time.perf_counter() - start
        put(f"append{label}_{sizes.append}_turns_per_s", sizes.append / elapsed)
        put(f"append{label}_first_100_ms", median(took[:100]) * 1e3)
        put(f"append{label}_last_100_ms", median(took[-100:]) * 1e3)
        if not label:
            with_log = file_bytes(path)
            appender.close()
            put("bytes_on_disk_per_turn", file_bytes(path) / sizes.append)
            put("bytes_on_disk_per_turn_with_log", with_log / sizes.append)
            put("bytes_on_disk_turns", sizes.append)
        else:
            appender.close()
        os.remove(path)
    log("openai_agents: append done")

    put("versions", f"openai-agents {metadata.version('openai-agents')}")
    return figures


def rows(path):
    """Rows in AdvancedSQLiteSession's message_structure table (a branch copies them)."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT COUNT(*) FROM message_structure").fetchone()[0]
    finally:
        conn.close()


def fork_figures(figures, sizes, times):
    medians = {n: median(t) for n, t in times.items()}
    for n, m in medians.items():
        figures[f"fork_{n}_us"] = m * 1e6
    last = sizes.fork[-1]
    figures[f"fork_ratio_{last // 1000}k_over_500"] = medians[last] / medians[500]


def rounded(value):
    if isinstance(value, float):
        return float(f"{value:.4g}")
    return value


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, as core.rs's quick run")
    parser.add_argument("--only", choices=["langgraph", "openai_agents"], help="run one peer")
    args = parser.parse_args()
    sizes = Sizes(args.quick or bool(os.environ.get("FORKTRAIL_BENCH_QUICK")))
    figures = {
        "peers.python": platform.python_version(),
        "peers.sqlite": sqlite3.sqlite_version,
        "peers.quick": int(sizes.quick),
    }
    tmp = tempfile.mkdtemp(prefix="forktrail-peers-")
    try:
        if args.only in (None, "langgraph"):
            for name, value in langgraph_figures(sizes, tmp).items():
                figures[f"langgraph.{name}"] = value
        if args.only in (None, "openai_agents"):
            for name, value in asyncio.run(openai_agents_figures(sizes, tmp)).items():
                figures[f"openai_agents.{name}"] = value
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps({k: rounded(v) for k, v in sorted(figures.items())}, indent=1))


if __name__ == "__main__":
    main()
