"""Prints forktrail's core figures (RocksDB) next to the peers' as one markdown table.

    python3 compare.py FORKTRAIL_JSON PEERS_JSON

FORKTRAIL_JSON is the output of `FORKTRAIL_BENCH_JSON=1 cargo bench --bench core`
(with FORKTRAIL_BENCH_STORE=rocksdb); PEERS_JSON is peers.py's. A ratio column is the
peer's figure over forktrail's: for a time, above 1 means the peer is slower; for
messages per second, below 1 means the peer is slower. A cell with no figure is "—".
"""

import json
import re
import sys

PEERS = (("langgraph", "LangGraph"), ("openai_agents", "OpenAI Agents SDK"))


def load(path):
    """The one JSON object in a file (cargo's own lines, if any, around it)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        sys.exit(f"no JSON object in {path}: did the run before it fail?")
    return json.loads(text[start : end + 1])


def number(value):
    """Three significant digits, thousands separated."""
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def duration(seconds):
    if seconds >= 1:
        return f"{number(seconds)} s"
    if seconds >= 1e-3:
        return f"{number(seconds * 1e3)} ms"
    return f"{number(seconds * 1e6)} µs"


def size(n):
    if n >= 1e6:
        return f"{number(n / 1e6)} MB"
    if n >= 1e3:
        return f"{number(n / 1e3)} kB"
    return f"{number(n)} B"


def ratio(peer, ours):
    if peer is None or ours is None or ours == 0:
        return "—"
    r = peer / ours
    return f"{r:,.0f}×" if r >= 100 else f"{number(r)}×"


class Table:
    def __init__(self, ours, peers):
        self.ours, self.peers = ours, peers
        self.rows = []
        self.notes = []

    def ours_get(self, name):
        return self.ours.get(f"rocksdb.{name}")

    def peer_get(self, peer, name):
        return self.peers.get(f"{peer}.{name}")

    def row(self, label, name, show, peer_names=None, compare=True, marks=None):
        """One workload: forktrail's figure `name`, each peer's `peer_names[peer]`
        (default the same name), shown by `show`; `marks[peer]` flags a cell."""
        ours = self.ours_get(name)
        cells, ratios = [], []
        for peer, _ in PEERS:
            value = self.peer_get(peer, (peer_names or {}).get(peer, name))
            mark = (marks or {}).get(peer, "")
            cells.append("—" if value is None else show(value) + mark)
            ratios.append((ratio(value, ours) + mark) if compare and value is not None else "—")
        self.rows.append([label, "—" if ours is None else show(ours), *cells, *ratios])

    def text(self):
        head = ["workload", "forktrail (RocksDB)", *(n for _, n in PEERS)]
        head += [f"{n} ÷ forktrail" for _, n in PEERS]
        lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in self.rows]
        return "\n".join(lines + [""] + self.notes)


def sizes(figures, pattern):
    """The numbers n for which some key matches `pattern` (a regex with one group)."""
    found = {int(m.group(1)) for k in figures for m in [re.fullmatch(pattern, k)] if m}
    return sorted(found)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ours, peers = load(sys.argv[1]), load(sys.argv[2])
    t = Table(ours, peers)
    us = lambda v: duration(v / 1e6)
    ms = lambda v: duration(v / 1e3)
    per_s = lambda v: f"{number(v)}/s"

    forks = sizes(ours, r"rocksdb\.fork_(\d+)_us")
    for n in forks:
        t.row(f"fork of a {n:,}-message session", f"fork_{n}_us", us)
    if forks:
        last = forks[-1]
        name = f"fork_ratio_{last // 1000}k_over_500"
        t.row(f"fork time at {last:,} over at 500 messages", name, number, compare=False)
        ours_w = t.ours_get(f"fork_{last}_quads")
        lg_w = t.peer_get("langgraph", f"fork_{last}_bytes")
        oa_w = t.peer_get("openai_agents", f"fork_{last}_rows")
        t.rows.append([
            f"what one fork of {last:,} messages writes",
            "—" if ours_w is None else f"{ours_w:,.0f} quads",
            "—" if lg_w is None else f"{size(lg_w)} (a checkpoint)",
            "—" if oa_w is None else f"{oa_w:,.0f} rows",
            "—", "—",
        ])

    depths = sizes(ours, r"rocksdb\.replay_depth(\d+)_cold_ms")
    for kind in ("cold", "warm"):
        for d in depths:
            t.row(f"replay at fork depth {d}, {kind}", f"replay_depth{d}_{kind}_ms", ms)
    if depths:
        d = depths[-1]
        t.row(f"messages replayed at depth {d}", f"replay_depth{d}_turns",
              lambda v: f"{v:,.0f}", compare=False)

    appends = sizes(ours, r"rocksdb\.append_(\d+)_turns_per_s")
    marks = {}
    if appends:
        n = appends[0]
        # A peer that appends fewer than n messages (LangGraph: each append rewrites the
        # whole state) is shown at its own count, marked.
        for peer, peer_name in PEERS:
            counts = sizes(peers, rf"{peer}\.append_(\d+)_turns_per_s")
            if counts and n not in counts:
                marks[peer] = counts[0]
                last = t.peer_get(peer, "append_last_100_ms")
                t.notes.append(
                    f"† {peer_name} appends {counts[0]:,} messages, not {n:,}: each append "
                    f"rewrites the whole state, so the time and bytes of the n-th grow with "
                    f"n (its last 100 appends took {ms(last)} each, median)."
                )
        for label, what in (("", "as each ships"), ("_nosync", "nothing synced on commit")):
            names = {p: f"append{label}_{marks.get(p, n)}_turns_per_s" for p, _ in PEERS}
            t.row(f"append {n:,} messages, one per transaction, {what}",
                  f"append_{n}_turns_per_s", per_s, peer_names=names,
                  marks=dict.fromkeys(marks, "†"))
    t.row("bytes on disk per message", "bytes_on_disk_per_turn", size,
          marks=dict.fromkeys(marks, "†"))

    t.notes.insert(0, "A ratio is the peer's figure over forktrail's: for a time, above 1 means "
                      "the peer is slower; for messages/s, below 1 does.")
    versions = [t.peer_get(p, "versions") for p, _ in PEERS]
    env = f"Python {peers.get('peers.python')}, SQLite {peers.get('peers.sqlite')}"
    t.notes.append(f"Peers: {'; '.join(v for v in versions if v)}; {env}.")
    if peers.get("peers.quick") or ours.get("rocksdb.append_2000_turns_per_s"):
        t.notes.append("Quick sizes (FORKTRAIL_BENCH_QUICK): not the figures to quote.")
    print(t.text())


if __name__ == "__main__":
    main()
