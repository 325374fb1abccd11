"""ForktrailSession against a real `forktrail serve`: the OpenAI Agents SDK's session
behaviours (items back exactly, limit, pop, clear), all-or-nothing appends, forks that
share their prefix, the provenance of what the SDK stored, and AdvancedSQLiteSession's
branches and usage."""

from __future__ import annotations

import copy
import json
import unittest
from types import SimpleNamespace

from forktrail import ForktrailError, ForktrailSession
from support import ServedTest

USER = {"role": "user", "content": "What's the weather in Paris?"}
REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "Look it up first."}],
}
CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "get_weather",
    "arguments": '{"city": "Paris"}',
    "status": "completed",
}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "18°C, cloudy"}
ANSWER = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "It is 18°C and cloudy.", "annotations": []}],
}
CONVERSATION = [USER, REASONING, CALL, OUTPUT, ANSWER]


class SessionTest(ServedTest):
    def session(self, name: str, **kwargs) -> ForktrailSession:
        return ForktrailSession(name, self.client, **kwargs)

    async def test_items_come_back_exactly_as_added(self) -> None:
        session = self.session("round-trip")
        self.assertEqual(await session.get_items(), [])
        await session.add_items(copy.deepcopy(CONVERSATION[:2]))
        await session.add_items(copy.deepcopy(CONVERSATION[2:]))
        self.assertEqual(await session.get_items(), CONVERSATION)
        # In forktrail each item is a turn an auditor can read without the SDK.
        turns = self.client.turns("round-trip")
        self.assertEqual([t["index"] for t in turns], [0, 1, 2, 3, 4])
        self.assertEqual(
            [(t["role"], t["kind"]) for t in turns],
            [
                ("user", "message"),
                ("assistant", "note"),
                ("assistant", "tool_call"),
                ("tool", "message"),
                ("assistant", "message"),
            ],
        )
        self.assertEqual(turns[1]["content"], "Look it up first.")
        self.assertEqual(
            turns[2]["tool_calls"],
            [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        )
        self.assertEqual((turns[3]["tool_call_id"], turns[3]["content"]), ("call_1", "18°C, cloudy"))
        self.assertEqual(turns[4]["content"], "It is 18°C and cloudy.")
        self.assertEqual([t["payload"] for t in turns], CONVERSATION)
        replay = self.client.replay("round-trip")
        self.assertEqual([r["content"] for r in replay][-1], "It is 18°C and cloudy.")

    async def test_limit_returns_the_latest_items_in_order(self) -> None:
        session = self.session("limited")
        await session.add_items(copy.deepcopy(CONVERSATION))
        self.assertEqual(await session.get_items(limit=2), [OUTPUT, ANSWER])
        self.assertEqual(await session.get_items(limit=1), [ANSWER])
        self.assertEqual(await session.get_items(limit=0), [])
        self.assertEqual(await session.get_items(limit=50), CONVERSATION)
        # The session's settings give the default limit, as the SDK's SessionSettings do.
        from agents.memory import SessionSettings

        settings = self.session("limited", session_settings=SessionSettings(limit=3))
        self.assertEqual(await settings.get_items(), CONVERSATION[2:])
        self.assertEqual(await settings.get_items(limit=4), CONVERSATION[1:])

    async def test_limits_and_settings_read_as_sqlite_session_reads_them(self) -> None:
        from agents import SQLiteSession
        from agents.memory import SessionSettings

        for settings in [None, {"limit": 1}, {"limit": None}, SessionSettings(limit=2)]:
            ours = self.session(f"parity-{id(settings)}", session_settings=settings)
            theirs = SQLiteSession(f"parity-{id(settings)}", session_settings=settings)
            # Coerced alike: a dict becomes the SDK's SessionSettings, None the default.
            self.assertIsInstance(ours.session_settings, SessionSettings)
            self.assertEqual(ours.session_settings, theirs.session_settings)
            for session in (ours, theirs):
                await session.add_items(copy.deepcopy(CONVERSATION))
            for limit in [None, -1, 0, 1, 2, 50]:
                self.assertEqual(
                    await ours.get_items(limit=limit),
                    await theirs.get_items(limit=limit),
                    f"limit {limit} with settings {settings}",
                )

    async def test_pop_item_removes_the_latest(self) -> None:
        session = self.session("popping")
        self.assertIsNone(await session.pop_item())
        await session.add_items(copy.deepcopy(CONVERSATION))
        self.assertEqual(await session.pop_item(), ANSWER)
        self.assertEqual(await session.pop_item(), OUTPUT)
        self.assertEqual(await session.get_items(), CONVERSATION[:3])
        self.assertEqual(self.client.session("popping")["length"], 3)
        # Appending after a pop continues at the freed index, digests chained anew.
        await session.add_items([copy.deepcopy(OUTPUT)])
        self.assertEqual(await session.get_items(), CONVERSATION[:4])
        self.assertEqual(self.client.turns("popping")[-1]["index"], 3)

    async def test_pop_refuses_what_a_fork_shares_or_inherits(self) -> None:
        session = self.session("shared-tail")
        await session.add_items(copy.deepcopy(CONVERSATION[:3]))
        fork = await session.fork(label="keeps-all")
        with self.assertRaises(ForktrailError) as refused:
            await session.pop_item()
        self.assertEqual(refused.exception.status, 409)
        self.assertIn("cannot remove turn 2 of session shared-tail", refused.exception.message)
        self.assertIn(fork.session_id, refused.exception.message)
        self.assertEqual(await session.get_items(), CONVERSATION[:3])
        # The fork inherits every item: it may not remove any of them.
        with self.assertRaises(ForktrailError) as inherited:
            await fork.pop_item()
        self.assertIn("inherited from shared-tail", inherited.exception.message)
        self.assertEqual(await fork.get_items(), CONVERSATION[:3])

    async def test_clear_session(self) -> None:
        session = self.session("cleared")
        await session.add_items(copy.deepcopy(CONVERSATION))
        await session.clear_session()
        self.assertEqual(await session.get_items(), [])
        self.assertFalse(self.client.exists("cleared"))
        await session.clear_session()  # already empty: nothing to do
        await session.add_items([copy.deepcopy(USER)])
        self.assertEqual(await session.get_items(), [USER])
        # Its forks go with it, as AdvancedSQLiteSession's branches go with a clear.
        fork = await session.fork(label="child")
        await fork.add_items([copy.deepcopy(ANSWER)])
        await session.clear_session()
        self.assertFalse(self.client.exists("cleared"))
        self.assertFalse(self.client.exists(fork.session_id))
        self.assertEqual(await session.get_items(), [])

    async def test_add_items_is_all_or_nothing(self) -> None:
        session = self.session("atomic")
        await session.add_items([copy.deepcopy(USER)])
        with self.assertRaises(ForktrailError) as refused:
            self.client.append_many(
                "atomic",
                [
                    {"role": "assistant", "content": "first"},
                    {"role": "assistant", "content": "second", "kind": "bogus"},
                ],
            )
        self.assertEqual(refused.exception.code, "invalid_kind")
        self.assertEqual(await session.get_items(), [USER])
        with self.assertRaises(ValueError):
            await session.add_items([{"role": "robot", "content": "beep"}])
        self.assertEqual(self.client.session("atomic")["length"], 1)

    async def test_fork_shares_the_prefix(self) -> None:
        session = self.session("trunk")
        await session.add_items(copy.deepcopy(CONVERSATION))
        fork = await session.fork(at=2, label="retry")
        self.assertEqual(await fork.get_items(), CONVERSATION[:2])
        other = {"role": "user", "content": "And in Amsterdam?"}
        await fork.add_items([copy.deepcopy(other)])
        self.assertEqual(await fork.get_items(), CONVERSATION[:2] + [other])
        self.assertEqual(await fork.get_items(limit=2), [REASONING, other])
        self.assertEqual(await session.get_items(), CONVERSATION)
        branches = await session.branches()
        self.assertEqual(
            [(b["session"], b["branch"], b["forked_at_index"]) for b in branches],
            [(fork.session_id, "retry", 2)],
        )
        info = await fork.info()
        # Share, don't copy: the fork stores its one item, not the two it inherits.
        self.assertEqual((info["parent"], info["length"], info["own_turns"]), ("trunk", 3, 1))
        turns = self.client.turns(fork.session_id)
        self.assertEqual([t["session"] for t in turns], ["trunk", "trunk", fork.session_id])
        self.assertEqual([t["branch"] for t in turns], ["main", "main", "retry"])

    async def test_turns_are_attributed_to_the_model(self) -> None:
        session = self.session("attributed", model="gpt-test")
        await session.add_items(copy.deepcopy([USER, ANSWER]))
        answer = self.client.turns("attributed")[1]
        self.assertEqual(answer["model"], "gpt-test")
        results = self.client.query(
            """PREFIX ft: <https://w3id.org/forktrail/ns#>
               PREFIX prov: <http://www.w3.org/ns/prov#>
               PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
               SELECT DISTINCT ?role ?by WHERE {
                 GRAPH ?g {
                   ?session ft:sessionId "attributed" .
                   ?turn ft:role ?role ; prov:wasAttributedTo ?agent .
                 }
                 ?agent rdfs:label ?by .
               } ORDER BY ?role"""
        )
        rows = [(b["role"]["value"], b["by"]["value"]) for b in results["results"]["bindings"]]
        self.assertEqual(rows, [("assistant", "gpt-test"), ("user", "anonymous")])

    async def test_a_stored_id_of_its_own_leaves_session_id_as_given(self) -> None:
        # The SDK groups a session's runs by its session_id (sandbox memory's rollout
        # files, prompt-cache keys): storing it under a prefixed id must not change it.
        session = self.session("chat", forktrail_id="tenant-a.chat")
        self.assertEqual((session.session_id, session.forktrail_id), ("chat", "tenant-a.chat"))
        await session.add_items(copy.deepcopy(CONVERSATION[:2]) + _turn(2))
        self.assertEqual([t["payload"] for t in self.client.turns("tenant-a.chat")], CONVERSATION[:2] + _turn(2))
        with self.assertRaises(ForktrailError) as absent:
            self.client.turns("chat")
        self.assertEqual(absent.exception.code, "session_not_found")
        # Another object on the stored id sees the items and branches of this one; the
        # same session_id stored elsewhere is another conversation.
        again = self.session("chat", forktrail_id="tenant-a.chat")
        self.assertEqual(await again.get_items(), CONVERSATION[:2] + _turn(2))
        self.assertEqual(await self.session("chat", forktrail_id="tenant-b.chat").get_items(), [])
        self.assertEqual(await again.create_branch_from_turn(2, "shorter"), "shorter")
        await again.add_items([{"role": "user", "content": "question 2, in short"}])
        self.assertEqual([b["branch"] for b in self.client.branches("tenant-a.chat")], ["shorter"])
        self.assertEqual([b["branch_id"] for b in await session.list_branches()], ["main", "shorter"])
        await session.clear_session()
        with self.assertRaises(ForktrailError):
            self.client.turns("tenant-a.chat")
        self.assertEqual(await again.get_items(), [])

    async def test_a_closed_session_refuses_every_call_even_an_empty_add(self) -> None:
        session = self.session("closed")
        await session.add_items([copy.deepcopy(USER)])
        session.close()
        calls = [session.add_items([]), session.add_items([ANSWER]), session.get_items(), session.pop_item()]
        for call in [*calls, session.clear_session()]:
            with self.assertRaisesRegex(RuntimeError, "ForktrailSession is closed"):
                await call
        self.assertEqual([t["payload"] for t in self.client.turns("closed")], [USER])

    async def test_satisfies_the_sdk_protocol(self) -> None:
        try:
            from agents.memory import Session
        except ImportError:
            self.skipTest("openai-agents is not installed")
        self.assertIsInstance(self.session("protocol"), Session)


def _turn(n: int) -> list:
    """User turn n of a conversation: the question and its answer."""
    return [
        {"role": "user", "content": f"question {n}"},
        {"role": "assistant", "content": f"answer {n}"},
    ]


def _run(**usage: object) -> SimpleNamespace:
    """A run result as store_run_usage reads it (the SDK's RunResult has the same path)."""
    fields = dict(
        requests=1,
        input_tokens=50,
        output_tokens=30,
        total_tokens=80,
        input_tokens_details=SimpleNamespace(cached_tokens=10),
        output_tokens_details=SimpleNamespace(reasoning_tokens=5),
        request_usage_entries=[],
    )
    fields.update(usage)
    return SimpleNamespace(context_wrapper=SimpleNamespace(usage=SimpleNamespace(**fields)))


class BranchTest(ServedTest):
    """AdvancedSQLiteSession's branching and usage API on ForktrailSession: branches are
    forks that share, usage is a usage turn, and all of it is in the store."""

    def session(self, name: str) -> ForktrailSession:
        return ForktrailSession(name, self.client)

    async def test_a_branch_shares_what_comes_before_its_turn(self) -> None:
        main = _turn(1) + _turn(2) + _turn(3)
        session = self.session("branched")
        await session.add_items(copy.deepcopy(main))
        self.assertEqual(await session.create_branch_from_turn(2, "retry"), "retry")
        self.assertEqual(session.current_branch_id, "retry")
        # The branch holds turn 1 only, and stores none of it: it shares main's.
        self.assertEqual(await session.get_items(), main[:2])
        fork = session.current_branch_session
        facts = self.client.session(fork)
        self.assertEqual(
            (facts["parent"], facts["forked_at_index"], facts["own_turns"], facts["branch"]),
            ("branched", 2, 0, "retry"),
        )
        other = _turn(4)
        await session.add_items(copy.deepcopy(other))
        self.assertEqual(await session.get_items(), main[:2] + other)
        self.assertEqual(await session.get_items(limit=1), other[1:])
        self.assertEqual(self.client.session(fork)["own_turns"], 2)
        self.assertEqual([t["session"] for t in self.client.turns(fork)], ["branched"] * 2 + [fork] * 2)
        self.assertEqual(await session.get_items(branch_id="main"), main)
        self.assertEqual(self.client.session("branched")["length"], 6)
        self.assertEqual(await session.get_items(branch_id="nowhere"), [])
        # Turn numbers are the branch's user turns: its second one is the new question.
        turns = await session.get_conversation_turns()
        self.assertEqual([(t["turn"], t["full_content"]) for t in turns], [(1, "question 1"), (2, "question 4")])
        self.assertEqual(
            [(t["turn"], t["content"]) for t in await session.find_turns_by_content("QUESTION 4")],
            [(2, "question 4")],
        )
        self.assertEqual(await session.find_turns_by_content("question 2"), [])
        self.assertEqual(len(await session.find_turns_by_content("question 2", branch_id="main")), 1)
        # A new object on the same session sees both branches, and starts on main.
        again = self.session("branched")
        self.assertEqual(again.current_branch_id, "main")
        self.assertEqual(
            [
                (b["branch_id"], b["message_count"], b["user_turns"], b["is_current"])
                for b in await again.list_branches()
            ],
            [("main", 6, 3, True), ("retry", 4, 2, False)],
        )
        await again.switch_to_branch("retry")
        self.assertEqual(await again.get_items(), main[:2] + other)
        await again.switch_to_branch("main")
        self.assertEqual(await again.get_items(), main)
        with self.assertRaisesRegex(ValueError, "Branch 'nowhere' does not exist"):
            await again.switch_to_branch("nowhere")

    async def test_branch_names_any_text_used_once(self) -> None:
        session = self.session("named")
        await session.add_items(copy.deepcopy(_turn(1) + _turn(2)))
        name = " draft/東京 'x' "
        self.assertEqual(await session.create_branch_from_turn(2, name), name)
        await session.add_items(copy.deepcopy(_turn(3)))
        # In forktrail the label is the name with what a label may not hold escaped.
        label = self.client.session(session.current_branch_session)["branch"]
        self.assertNotEqual(label, name)
        self.assertRegex(label, r"^[A-Za-z0-9._:-]+$")
        self.assertEqual({b["branch_id"] for b in await self.session("named").list_branches()}, {"main", name})
        # A branch of the branch.
        self.assertEqual(await session.create_branch_from_turn(2, "deeper"), "deeper")
        await session.add_items(copy.deepcopy(_turn(5)))
        self.assertEqual(
            [i["content"] for i in await session.get_items()], ["question 1", "answer 1", "question 5", "answer 5"]
        )
        await session.switch_to_branch("main")
        with self.assertRaisesRegex(ValueError, "Cannot delete the 'main' branch"):
            await session.delete_branch("main")
        with self.assertRaisesRegex(ValueError, "'deeper' were made from it"):
            await session.delete_branch(name)
        await session.delete_branch("deeper")
        await session.delete_branch(name)
        self.assertEqual([b["branch_id"] for b in await session.list_branches()], ["main"])
        self.assertEqual([t["branch"] for t in self.client.tree("named")["children"]], [])
        # Deleted, cleared: the names stay used.
        with self.assertRaisesRegex(ValueError, "already been used"):
            await session.create_branch_from_turn(1, name)
        await session.clear_session()
        self.assertFalse(self.client.exists("named"))
        await session.add_items(copy.deepcopy(_turn(1)))
        with self.assertRaisesRegex(ValueError, "already been used"):
            await self.session("named").create_branch_from_turn(1, "deeper")
        self.assertEqual(await session.create_branch_from_turn(1, "fresh"), "fresh")

    async def test_usage_is_a_usage_turn_read_back_by_a_new_object(self) -> None:
        session = self.session("metered")
        await session.store_run_usage(_run())  # no user turn yet: nothing recorded
        self.assertIsNone(await session.get_session_usage())
        await session.add_items(copy.deepcopy(_turn(1)))
        entries = [SimpleNamespace(input_tokens=20, output_tokens=10, total_tokens=30)] * 2
        await session.store_run_usage(_run(requests=2, request_usage_entries=entries))
        await session.add_items(copy.deepcopy(_turn(2)))
        await session.store_run_usage(_run(requests=9))
        await session.store_run_usage(_run(requests=3, total_tokens=90))  # turn 2 again: replaces
        # Stored as usage turns, which are no items of the conversation.
        turns = self.client.turns("metered")
        self.assertEqual([t["kind"] for t in turns], ["message"] * 2 + ["usage"] + ["message"] * 2 + ["usage"] * 2)
        self.assertEqual(turns[2]["payload"]["user_turn_number"], 1)
        self.assertEqual(len(turns[2]["payload"]["request_usage_entries"]), 2)
        self.assertEqual(await session.get_items(), _turn(1) + _turn(2))
        self.assertEqual(await session.get_items(limit=2), _turn(2))
        again = self.session("metered")
        self.assertEqual(
            await again.get_turn_usage(1),
            {
                "requests": 2,
                "input_tokens": 50,
                "output_tokens": 30,
                "total_tokens": 80,
                "input_tokens_details": {"cached_tokens": 10},
                "output_tokens_details": {"reasoning_tokens": 5},
            },
        )
        self.assertEqual(
            [(u["user_turn_number"], u["requests"], u["total_tokens"]) for u in await again.get_turn_usage()],
            [(1, 2, 80), (2, 3, 90)],
        )
        self.assertEqual(await again.get_turn_usage(3), {})
        self.assertEqual(
            await again.get_session_usage(),
            {"requests": 5, "input_tokens": 100, "output_tokens": 60, "total_tokens": 170, "total_turns": 2},
        )
        # Usage belongs to the branch it was recorded on: a branch does not inherit it.
        await again.create_branch_from_turn(2, "cheaper")
        self.assertEqual(await again.get_turn_usage(), [])
        await again.add_items(copy.deepcopy(_turn(3)))
        await again.store_run_usage(_run(requests=1, total_tokens=10))
        self.assertEqual([u["user_turn_number"] for u in await again.get_turn_usage()], [2])
        self.assertEqual((await again.get_session_usage("cheaper"))["total_tokens"], 10)
        self.assertEqual((await again.get_session_usage("main"))["total_tokens"], 170)
        self.assertEqual((await again.get_session_usage())["total_turns"], 3)
        # fork(at=…) counts items, not the usage turns between them.
        fork = await self.session("metered").fork(at=3)
        self.assertEqual(await fork.get_items(), _turn(1) + _turn(2)[:1])

    async def test_pop_on_a_branch_and_what_a_branch_shares(self) -> None:
        session = self.session("popped")
        await session.add_items(copy.deepcopy(_turn(1) + _turn(2)))
        await session.store_run_usage(_run())
        await session.create_branch_from_turn(2, "side")
        await session.add_items(copy.deepcopy(_turn(3)[:1]))
        self.assertEqual(await session.pop_item(), _turn(3)[0])
        # Past its own turns, a branch gives up what it inherits; main keeps it.
        self.assertEqual(await session.pop_item(), _turn(1)[1])
        self.assertEqual(await session.get_items(), _turn(1)[:1])
        self.assertEqual(self.client.session(session.current_branch_session)["forked_at_index"], 1)
        self.assertEqual(await session.get_items(branch_id="main"), _turn(1) + _turn(2))
        await session.switch_to_branch("main")
        self.assertEqual(await session.pop_item(), _turn(2)[1])  # turn 2 goes on: its usage stays
        self.assertEqual((await session.get_turn_usage(2))["requests"], 1)
        self.assertEqual(await session.pop_item(), _turn(2)[0])  # turn 2 is gone, its usage too
        self.assertEqual(await session.get_turn_usage(), [])
        self.assertEqual(self.client.turns("popped")[-1]["kind"], "message")
        self.assertEqual(await session.pop_item(), _turn(1)[1])
        # Main cannot give up what a branch shares.
        with self.assertRaises(ForktrailError) as refused:
            await session.pop_item()
        self.assertEqual(refused.exception.status, 409)
        self.assertEqual(await session.get_items(), _turn(1)[:1])

    async def test_a_branch_cleared_elsewhere_sends_writes_back_to_main(self) -> None:
        stale = self.session("cleared-elsewhere")
        await stale.add_items(copy.deepcopy(_turn(1) + _turn(2)))
        await stale.create_branch_from_turn(2, "gone")
        await self.session("cleared-elsewhere").clear_session()
        await stale.add_items(copy.deepcopy(_turn(3)))
        self.assertEqual(stale.current_branch_id, "main")
        self.assertEqual(await self.session("cleared-elsewhere").get_items(), _turn(3))
        self.assertEqual(await stale.get_items(branch_id="gone"), [])
        # Its own clear takes it back to main too.
        await stale.create_branch_from_turn(1, "again")
        await stale.add_items(copy.deepcopy(_turn(4)))
        self.assertEqual(stale.current_branch_id, "again")
        await stale.clear_session()
        self.assertEqual((stale.current_branch_id, await stale.list_branches()), ("main", []))
        self.assertFalse(self.client.exists("cleared-elsewhere"))




class ListingTest(ServedTest):
    """Client.iter_sessions and Client.search against a real `forktrail serve`."""

    def test_iter_sessions_walks_every_page_once(self) -> None:
        made = {self.client.create_session(principal="pager") for _ in range(7)}
        page = self.client.list_sessions(limit=3, principal="pager")
        self.assertEqual((len(page["sessions"]), page["total"]), (3, 7))
        self.assertIsNotNone(page["next"])
        seen = [s["session"] for s in self.client.iter_sessions(page_size=2, principal="pager", order="created")]
        self.assertEqual(len(seen), 7)
        self.assertEqual(set(seen), made)
        with self.assertRaises(ForktrailError) as refused:
            self.client.list_sessions(cursor="not-a-cursor")
        self.assertEqual((refused.exception.status, refused.exception.code), (400, "invalid_input"))

    def test_search_finds_a_turn_just_appended(self) -> None:
        sid = self.client.create_session(title="night trains")
        index = self.client.append(sid, "user", "Is the Nightjet to Vienna running in December?")
        found = self.client.search('"nightjet to vienna"')
        self.assertEqual([(h["session"], h["index"]) for h in found["hits"]], [(sid, index)])
        hit = found["hits"][0]
        marked = [hit["snippet"][a:b].lower() for a, b in hit["highlights"]]
        self.assertIn("nightjet", marked)
        self.assertEqual(self.client.search("nightjet budapest")["hits"], [])

    def test_a_session_that_repeats_a_stored_one_is_stored_as_a_fork_of_it(self) -> None:
        turns = [
            {"role": "user", "content": "Pack for a week in Lisbon."},
            {"role": "assistant", "content": "Light layers and a rain jacket."},
        ]
        first = self.client.import_session(turns, title="lisbon")
        self.assertEqual((first["turns"], first.get("shared")), (2, None))
        again = self.client.import_session(turns + [{"role": "user", "content": "And shoes?"}])
        self.assertEqual(again["turns"], 1)
        self.assertEqual(
            (again["shared"]["parent"], again["shared"]["shared_turns"]),
            (first["session"], 2),
        )
        facts = self.client.session(again["session"])
        self.assertEqual((facts["parent"], facts["forked_at_index"]), (first["session"], 2))
        whole = self.client.import_session(turns, no_dedup=True)
        self.assertEqual((whole["turns"], self.client.session(whole["session"])["parent"]), (2, None))
        # The same through an imported OpenAI transcript.
        data = json.dumps(turns).encode("utf-8")
        report = self.client.import_transcript(data, format="openai")
        self.assertEqual(report["shared"][0]["parent"], first["session"])
        report = self.client.import_transcript(data, format="openai", no_dedup=True)
        self.assertNotIn("shared", report)

if __name__ == "__main__":
    unittest.main()
