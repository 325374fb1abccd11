"""The OpenAI Agents SDK runs a real agent loop on ForktrailSession: two turns against
the test model (an OpenAI-compatible endpoint on 127.0.0.1, FORKTRAIL_TEST_LLM_URL),
then a fork at 1 continued on its own; the items the SDK reads back and the branch
structure in forktrail are what they must be."""

from __future__ import annotations

import os
import unittest

from forktrail import Client, ForktrailSession
from support import TOKEN, Server


def _text(item: dict) -> str:
    content = item["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


class AgentsTest(unittest.IsolatedAsyncioTestCase):
    def setUp(self) -> None:
        self.url = os.environ.get("FORKTRAIL_TEST_LLM_URL")
        if not self.url:
            self.skipTest("FORKTRAIL_TEST_LLM_URL is not set (tests/it/python.rs starts the test model)")
        try:
            import agents  # noqa: F401
        except ImportError:
            self.skipTest("openai-agents is not installed")
        self.server = Server()
        self.client = Client(self.server.url, token=TOKEN)

    def tearDown(self) -> None:
        self.server.close()

    async def test_agent_loop_on_forktrail_session(self) -> None:
        from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
        from openai import AsyncOpenAI

        set_tracing_disabled(True)
        model = OpenAIChatCompletionsModel(
            model="gemma3-270m",
            openai_client=AsyncOpenAI(base_url=self.url, api_key="unused", max_retries=0),
        )
        agent = Agent(
            name="Assistant",
            instructions="Answer in one short sentence.",
            model=model,
            model_settings=ModelSettings(max_tokens=24, temperature=0),
        )
        session = ForktrailSession("agent-run", self.client, model="gemma3-270m", title="colours")

        first = await Runner.run(agent, "Name a colour.", session=session)
        second = await Runner.run(agent, "Name another colour.", session=session)
        items = await session.get_items()
        self.assertEqual([item["role"] for item in items], ["user", "assistant", "user", "assistant"])
        self.assertEqual(items[0], {"content": "Name a colour.", "role": "user"})
        self.assertEqual(items[2], {"content": "Name another colour.", "role": "user"})
        self.assertEqual(_text(items[1]), first.final_output)
        self.assertEqual(_text(items[3]), second.final_output)
        self.assertTrue(first.final_output.strip())

        # Fork after the first question and go another way.
        fork = await session.fork(at=1, label="fruit")
        self.assertEqual(await fork.get_items(), items[:1])
        third = await Runner.run(agent, "Name a fruit.", session=fork)
        fork_items = await fork.get_items()
        self.assertEqual(len(fork_items), 3)
        self.assertEqual(fork_items[0], items[0])
        self.assertEqual(fork_items[1], {"content": "Name a fruit.", "role": "user"})
        self.assertEqual(_text(fork_items[2]), third.final_output)
        # The trunk is untouched.
        self.assertEqual(await session.get_items(), items)

        # In forktrail: one fork at 1 that stores only its own two turns.
        branches = self.client.branches("agent-run")
        self.assertEqual(
            [(b["session"], b["branch"], b["forked_at_index"], b["own_turns"]) for b in branches],
            [(fork.session_id, "fruit", 1, 2)],
        )
        replay = self.client.replay(fork.session_id)
        self.assertEqual([r["branch"] for r in replay], ["main", "fruit", "fruit"])
        self.assertEqual([r["role"] for r in replay], ["user", "user", "assistant"])
        turns = self.client.turns(fork.session_id)
        self.assertEqual(turns[2]["model"], "gemma3-270m")
        self.assertEqual(self.client.session("agent-run")["title"], "colours")


if __name__ == "__main__":
    unittest.main()
