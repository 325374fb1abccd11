"""``ForktrailSession``: the OpenAI Agents SDK's ``Session`` protocol on forktrail.

Swap ``SQLiteSession("conversation_123")`` for
``ForktrailSession("conversation_123", client)`` and every item the SDK stores
becomes a turn in forktrail, with its provenance; ``fork(at=…)`` branches the
conversation without copying it, and ``branches()`` lists the forks.

Each item is one turn: messages keep their role and text, function calls become
``tool_call`` turns with OpenAI-style ``tool_calls``, function outputs ``tool`` turns
answering their ``call_id``, reasoning a ``note`` with its summary. The item itself
is kept as the turn's ``payload``, so ``get_items`` returns exactly what
``add_items`` was given. Turns written by other means (the CLI, a what-if
regeneration) are read back as the items they correspond to.

The SDK is not needed to import this module: the session satisfies its protocol
structurally (``session_id``, ``session_settings``, ``get_items``, ``add_items``,
``pop_item``, ``clear_session``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any, Dict, List, Optional

from .client import Client, ForktrailError

__all__ = ["ForktrailSession"]

Item = Dict[str, Any]

_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


@dataclasses.dataclass
class SessionSettings:
    """The SDK's ``SessionSettings`` where the SDK is not installed: ``limit`` is the
    default of ``get_items`` (``None``: every item)."""

    limit: Optional[int] = None

    def resolve(self, override: Any) -> "SessionSettings":
        """These settings with the non-``None`` values of ``override`` over them."""
        if override is None:
            return self
        other = coerce_settings(override)
        return SessionSettings(limit=other.limit if other.limit is not None else self.limit)

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


def coerce_settings(value: Any) -> Any:
    """Session settings as ``SQLiteSession`` keeps them: the SDK's ``SessionSettings``
    (a dict of its fields made into one, ``None`` the default), or, without the SDK,
    this module's stand-in."""
    try:
        from agents.memory.session_settings import SessionSettings as Sdk
        from agents.memory.session_settings import coerce_session_settings
    except ImportError:
        if value is None:
            return SessionSettings()
        if isinstance(value, dict):
            unknown = set(value) - {"limit"}
            if unknown:
                raise TypeError(f"unknown session settings: {sorted(unknown)}")
            return SessionSettings(**value)
        return value
    return Sdk() if value is None else coerce_session_settings(value)


class ForktrailSession:
    """A conversation of the OpenAI Agents SDK stored in forktrail.

    ``session_id`` is the forktrail session (created on the first ``add_items``);
    ``client`` the :class:`~forktrail.Client` of a ``forktrail serve`` started with a
    token. ``model`` (optional) is the model assistant turns are attributed to in the
    provenance; ``title`` and ``principal`` describe a session this creates.
    ``session_settings`` is the SDK's ``SessionSettings`` (its ``limit`` is the
    default of ``get_items``), or a dict of its fields, coerced as ``SQLiteSession``
    coerces it; ``None`` gives the default settings.
    """

    def __init__(
        self,
        session_id: str,
        client: Optional[Client] = None,
        *,
        model: Optional[str] = None,
        title: Optional[str] = None,
        principal: Optional[str] = None,
        session_settings: Any = None,
    ) -> None:
        self.session_id = session_id
        self.client = client if client is not None else Client()
        self.model = model
        self.title = title
        self.principal = principal
        self.session_settings = coerce_settings(session_settings)

    # -- the Session protocol -------------------------------------------------------

    async def get_items(self, limit: Optional[int] = None) -> List[Item]:
        """The conversation's items in order, inherited ones (before a fork point)
        included; with ``limit``, the latest ``limit`` of them."""
        if limit is None:
            limit = getattr(self.session_settings, "limit", None)
        return await asyncio.to_thread(self._get_items, limit)

    async def add_items(self, items: List[Item]) -> None:
        """Appends the items as turns, all in one transaction (all or none)."""
        if items:
            await asyncio.to_thread(self._add_items, list(items))

    async def pop_item(self) -> Optional[Item]:
        """Removes and returns the latest item (``None`` when there is none). An item
        this session inherits from the one it forked from cannot be removed: fork
        earlier instead."""
        return await asyncio.to_thread(self._pop_item)

    async def clear_session(self) -> None:
        """Deletes the session; the next ``add_items`` starts it again, empty. Refused
        (:class:`ForktrailError`) while it has forks, which share its items."""
        await asyncio.to_thread(self._clear)

    # -- branches -------------------------------------------------------------------

    async def fork(
        self,
        at: Optional[int] = None,
        label: Optional[str] = None,
        *,
        reason: Optional[str] = None,
        session_id: Optional[str] = None,
    ) -> "ForktrailSession":
        """A new session sharing this one's first ``at`` items (default: all), with
        the branch ``label``; continue the conversation on it with the SDK. Nothing
        is copied: the fork stores only the items added to it."""
        plan = await asyncio.to_thread(
            self.client.fork,
            self.session_id,
            at,
            label=label,
            reason=reason,
            id=session_id,
        )
        return ForktrailSession(
            plan["session"],
            self.client,
            model=self.model,
            principal=self.principal,
            session_settings=self.session_settings,
        )

    async def branches(self) -> List[Dict[str, Any]]:
        """The direct forks of this session: ``session``, ``branch`` (the label),
        ``forked_at_index``, ``own_turns``, ``created_at``."""
        return await asyncio.to_thread(self.client.branches, self.session_id)

    async def info(self) -> Dict[str, Any]:
        """forktrail's facts about this session (parent, fork point, length, head
        digest, …)."""
        return await asyncio.to_thread(self.client.session, self.session_id)

    # -- the work, synchronous ------------------------------------------------------

    def _get_items(self, limit: Optional[int]) -> List[Item]:
        # As SQLiteSession reads its limit (SQL's LIMIT): 0 gives nothing, a negative
        # one everything.
        if limit is not None and limit < 0:
            limit = None
        if limit == 0:
            return []
        try:
            turns = self.client.turns(self.session_id, last=limit)
        except ForktrailError as e:
            if e.code == "session_not_found":
                return []
            raise
        items = [item for turn in turns for item in items_of_turn(turn)]
        if limit is not None and len(items) < limit and len(turns) == limit:
            # Some turns were not items (usage, notes without text): read them all.
            turns = self.client.turns(self.session_id)
            items = [item for turn in turns for item in items_of_turn(turn)]
        return items[-limit:] if limit is not None else items

    def _add_items(self, items: List[Item]) -> None:
        turns = [turn_of_item(item, self.model) for item in items]
        try:
            self.client.append_many(self.session_id, turns)
        except ForktrailError as e:
            if e.code != "session_not_found":
                raise
            try:
                self.client.create_session(self.session_id, self.title, self.principal)
            except ForktrailError as created:
                # Another writer created it meanwhile: append to theirs.
                if created.status != 409:
                    raise
            self.client.append_many(self.session_id, turns)

    def _pop_item(self) -> Optional[Item]:
        try:
            turn = self.client.pop(self.session_id)
        except ForktrailError as e:
            if e.code == "session_not_found":
                return None
            raise
        if turn is None:
            return None
        items = items_of_turn(turn)
        return items[-1] if items else None

    def _clear(self) -> None:
        try:
            self.client.delete(self.session_id)
        except ForktrailError as e:
            if e.code != "session_not_found":
                raise


def _text(content: Any) -> str:
    """The text of a message's content: a string, or the text of its parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for part in content:
        if isinstance(part, dict):
            text = part.get("text", part.get("refusal"))
            if isinstance(text, str):
                texts.append(text)
    return "\n\n".join(texts)


def turn_of_item(item: Item, model: Optional[str] = None) -> Dict[str, Any]:
    """The forktrail turn an SDK item is stored as (the item itself as payload)."""
    kind = item.get("type")
    turn: Dict[str, Any]
    if kind in (None, "message") and "role" in item:
        role = _ROLES.get(item["role"])
        if role is None:
            raise ValueError(f"an item with role {item['role']!r}: forktrail knows user, assistant, system, developer")
        turn = {"role": role, "content": _text(item.get("content"))}
    elif kind == "function_call":
        call = {
            "id": item.get("call_id"),
            "type": "function",
            "function": {"name": item.get("name"), "arguments": item.get("arguments", "")},
        }
        turn = {"role": "assistant", "content": "", "kind": "tool_call", "tool_calls": [call]}
    elif kind == "function_call_output":
        output = item.get("output")
        text = output if isinstance(output, str) else json.dumps(output)
        turn = {"role": "tool", "content": text, "tool_call_id": item.get("call_id")}
    elif kind == "reasoning":
        summary = [s.get("text", "") for s in item.get("summary") or [] if isinstance(s, dict)]
        turn = {"role": "assistant", "content": "\n\n".join(summary), "kind": "note"}
    else:
        # Hosted tools, computer use, references: kept whole, shown by their type.
        turn = {"role": "assistant", "content": str(kind), "kind": "note"}
    if model is not None and turn["role"] == "assistant":
        turn["model"] = model
    turn["payload"] = item
    return turn


def items_of_turn(turn: Dict[str, Any]) -> List[Item]:
    """The SDK items a stored turn stands for: its payload when it has one."""
    if turn.get("payload") is not None:
        return [turn["payload"]]
    role, kind, content = turn["role"], turn.get("kind", "message"), turn["content"]
    if kind == "tool_call" and turn.get("tool_calls"):
        return [
            {
                "type": "function_call",
                "call_id": call.get("id"),
                "name": call.get("function", {}).get("name"),
                "arguments": call.get("function", {}).get("arguments", ""),
            }
            for call in turn["tool_calls"]
        ]
    if role == "tool":
        return [{"type": "function_call_output", "call_id": turn.get("tool_call_id"), "output": content}]
    if kind in ("message", "fork_result", "compaction"):
        return [{"role": role, "content": content}]
    # Usage records and notes are not part of the conversation the model sees.
    return []
