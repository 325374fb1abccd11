"""``ForktrailSession``: the OpenAI Agents SDK's ``Session`` protocol on forktrail.

Swap ``SQLiteSession("conversation_123")`` for
``ForktrailSession("conversation_123", client)`` and every item the SDK stores
becomes a turn in forktrail, with its provenance; ``fork(at=…)`` branches the
conversation without copying it, and ``branches()`` lists the forks.

It also offers the branching and usage API of the SDK's ``AdvancedSQLiteSession``
(``create_branch_from_turn``, ``switch_to_branch``, ``list_branches``,
``store_run_usage``, ``get_turn_usage``, …) with its names, parameters and return
shapes: a branch is a forktrail fork (sharing, not copying, what it branches from),
``main`` is the session itself, and a run's usage is a ``usage`` turn.

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
import concurrent.futures
import dataclasses
import hashlib
import json
import logging
import re
import threading
import time
from typing import Any, Awaitable, Callable, Dict, Iterator, List, Optional, Tuple, TypeVar, Union

from .client import Client, ForktrailError

__all__ = ["ForktrailSession", "MAIN"]

Item = Dict[str, Any]
JSON = Dict[str, Any]
T = TypeVar("T")

MAIN = "main"
"""The name of the branch that is the session itself."""

_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}

# What AdvancedSQLiteSession counts as a tool's use, by item type.
_TOOL_CALL_TYPES = {
    "tool_call",
    "function_call",
    "computer_call",
    "file_search_call",
    "web_search_call",
    "code_interpreter_call",
    "tool_search_call",
    "custom_tool_call",
    "mcp_call",
    "mcp_approval_request",
    "shell_call",
    "apply_patch_call",
}
_TYPE_NAMED_TOOLS = {
    "computer_call",
    "file_search_call",
    "web_search_call",
    "code_interpreter_call",
    "shell_call",
    "apply_patch_call",
    "tool_search_call",
    "tool_search_output",
}


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


def _logs_model_data() -> bool:
    """Whether log lines may carry conversation text: the SDK's own policy
    (``OPENAI_AGENTS_DONT_LOG_MODEL_DATA``) when it is installed, else never."""
    try:
        from agents import _debug
    except ImportError:
        return False
    return not _debug.DONT_LOG_MODEL_DATA


# -- branch names as forktrail labels ---------------------------------------------------

_PLAIN = re.compile(r"[A-Za-z0-9_.-]+")
_KEPT = re.compile(r"[A-Za-z0-9_-]")
_ESCAPE = re.compile(r"(?::[0-9a-f]{2})+")
_LABEL_MAX = 64


def label_of_branch(name: str) -> str:
    """The forktrail label of a branch name: the name itself when it is a valid label
    (``A-Z a-z 0-9 . _ -``, not only dots), else every other character as ``:hh``
    per UTF-8 byte (``" draft "`` → ``:20draft:20``). Raises ``ValueError`` past the
    64 characters a label may have."""
    if _PLAIN.fullmatch(name) and name.strip("."):
        label = name
    else:
        label = "".join(c if _KEPT.fullmatch(c) else "".join(f":{b:02x}" for b in c.encode("utf-8")) for c in name)
    if len(label) > _LABEL_MAX:
        raise ValueError(
            f"branch name {name!r} is too long: as a forktrail label it takes {len(label)} "
            f"characters, {_LABEL_MAX} at most"
        )
    return label


def branch_of_label(label: str) -> str:
    """The branch name a forktrail label stands for (the inverse of
    :func:`label_of_branch`; a label made by other means is its own name)."""

    def decode(match: "re.Match[str]") -> str:
        raw = bytes.fromhex(match.group(0).replace(":", ""))
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return match.group(0)

    return _ESCAPE.sub(decode, label)


# -- what AdvancedSQLiteSession reads off an item ---------------------------------------


def _is_user_message(item: Any) -> bool:
    return isinstance(item, dict) and item.get("role") == "user"


def message_type(item: Any) -> str:
    """An item's type as ``AdvancedSQLiteSession`` classifies it: ``user``,
    ``assistant``, else its ``type`` (``function_call``, …), else ``other``."""
    if isinstance(item, dict):
        if item.get("role") == "user":
            return "user"
        if item.get("role") == "assistant":
            return "assistant"
        if item.get("type"):
            return str(item.get("type"))
    return "other"


def tool_name(item: Any) -> Optional[str]:
    """The tool an item calls or answers, named as ``AdvancedSQLiteSession`` names it:
    ``server.tool`` for MCP, the type for built-in tools, ``namespace.name`` for a
    namespaced function (the bare name when namespace and name are the same)."""
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if kind in {"mcp_call", "mcp_approval_request"} and "server_label" in item:
        server, name = item.get("server_label"), item.get("name")
        if name and server:
            return f"{server}.{name}"
        if server:
            return str(server)
        return str(name) if name else None
    if kind in _TYPE_NAMED_TOOLS:
        return "tool_search" if kind in {"tool_search_call", "tool_search_output"} else str(kind)
    if "name" in item:
        name = item.get("name")
        if name is None:
            return None
        namespace = item.get("namespace")
        text = str(name)
        space = str(namespace) if namespace is not None else None
        if text and space and space != text:
            return f"{space}.{text}"
        return text
    return None


def _preview(content: Any, max_length: Optional[int] = None) -> str:
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    if max_length is not None and len(text) > max_length:
        return text[:max_length] + "..."
    return text


def _texts(content: Any) -> Optional[List[str]]:
    """The texts of a user message's content searched by ``find_turns_by_content``
    (``None`` when the content is not of a searchable shape)."""
    if isinstance(content, str):
        return [content]
    try:
        return [part.get("text", "") for part in content]
    except (AttributeError, TypeError):
        return None


@dataclasses.dataclass
class _Entry:
    """An item as a branch holds it: the turn that stores it and its user turn."""

    item: Item
    index: int
    session: str
    created_at: Optional[str]
    turn: int


def _entries(turns: List[JSON]) -> List[_Entry]:
    out: List[_Entry] = []
    user_turn = 0
    for t in turns:
        for item in items_of_turn(t):
            if _is_user_message(item):
                user_turn += 1
            out.append(_Entry(item, t["index"], t.get("session", ""), t.get("created_at"), user_turn))
    return out


def _usage_of(turn: JSON) -> Optional[JSON]:
    payload = turn.get("payload")
    if turn.get("kind") != "usage" or not isinstance(payload, dict):
        return None
    if not isinstance(payload.get("user_turn_number"), int):
        return None
    return payload


def _details(value: Any) -> Optional[Dict[str, Any]]:
    """Token details (a pydantic model of the OpenAI SDK, or a dict) as plain JSON."""
    if not value:
        return None
    if isinstance(value, dict):
        return dict(value)
    try:
        return json.loads(json.dumps(vars(value)))
    except (TypeError, ValueError):
        return None


def usage_record(usage: Any, user_turn_number: int) -> JSON:
    """The payload of a ``usage`` turn: an SDK ``Usage`` (or any object with its
    fields) for one user turn, with its per-request entries."""
    requests = []
    for entry in getattr(usage, "request_usage_entries", None) or []:
        requests.append(
            {
                "input_tokens": getattr(entry, "input_tokens", 0) or 0,
                "output_tokens": getattr(entry, "output_tokens", 0) or 0,
                "total_tokens": getattr(entry, "total_tokens", 0) or 0,
                "input_tokens_details": _details(getattr(entry, "input_tokens_details", None)),
                "output_tokens_details": _details(getattr(entry, "output_tokens_details", None)),
            }
        )
    return {
        "user_turn_number": user_turn_number,
        "requests": getattr(usage, "requests", 0) or 0,
        "input_tokens": getattr(usage, "input_tokens", 0) or 0,
        "output_tokens": getattr(usage, "output_tokens", 0) or 0,
        "total_tokens": getattr(usage, "total_tokens", 0) or 0,
        "input_tokens_details": _details(getattr(usage, "input_tokens_details", None)),
        "output_tokens_details": _details(getattr(usage, "output_tokens_details", None)),
        "request_usage_entries": requests,
    }


class _BranchGone(Exception):
    """The forktrail session of a branch no longer exists (deleted or cleared)."""


async def _settled(awaitable: Awaitable[T]) -> T:
    """Awaits a write to its end even when the caller is cancelled meanwhile, then
    re-raises the cancellation: the caller never retries a write that happened."""
    task = asyncio.ensure_future(awaitable)
    cancelled: Optional[BaseException] = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as e:
            if cancelled is None:
                cancelled = e
    try:
        result = task.result()
    except BaseException:
        if cancelled is not None:
            raise cancelled from None
        raise
    if cancelled is not None:
        raise cancelled
    return result


class _Queue:
    """Writes of one session object run in the order they were called, whatever the
    event loop or thread each is awaited on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tail: Optional["concurrent.futures.Future[None]"] = None

    def run(self, work: Callable[[], T]) -> Awaitable[T]:
        done: "concurrent.futures.Future[None]" = concurrent.futures.Future()
        with self._lock:
            before, self._tail = self._tail, done

        async def go() -> T:
            try:
                if before is not None:
                    await asyncio.wrap_future(before)
                return await asyncio.to_thread(work)
            finally:
                done.set_result(None)
                with self._lock:
                    if self._tail is done:
                        self._tail = None

        return go()


class ForktrailSession:
    """A conversation of the OpenAI Agents SDK stored in forktrail.

    ``session_id`` is the conversation's id, and the forktrail session that stores it
    (created on the first ``add_items``) unless ``forktrail_id`` names another: the SDK
    groups a session's runs by ``session_id`` (sandbox memory's rollouts, prompt-cache
    keys), so an application that stores its sessions under ids of its own (a prefix per
    tenant, say) keeps its ``session_id`` and gives the stored id as ``forktrail_id``.
    ``client`` is the :class:`~forktrail.Client` of a ``forktrail serve`` started with a
    token. ``model`` (optional) is the model assistant turns are attributed to in the
    provenance; ``title`` and ``principal`` describe a session this creates.
    ``session_settings`` is the SDK's ``SessionSettings`` (its ``limit`` is the
    default of ``get_items``), or a dict of its fields, coerced as ``SQLiteSession``
    coerces it; ``None`` gives the default settings. ``logger`` receives what
    ``AdvancedSQLiteSession`` logs (branches made and switched to, usage not stored).

    The session starts on its ``main`` branch, the session itself; the branch it is
    on (``current_branch_id``) is this object's, as in ``AdvancedSQLiteSession``;
    branches, their items and usage are all in forktrail, so another object on the
    same ``forktrail_id`` sees them.
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
        logger: Optional[logging.Logger] = None,
        forktrail_id: Optional[str] = None,
    ) -> None:
        self.session_id = session_id
        self.forktrail_id = session_id if forktrail_id is None else forktrail_id
        self.client = client if client is not None else Client()
        self.model = model
        self.title = title
        self.principal = principal
        self.session_settings = coerce_settings(session_settings)
        self._logger = logger if logger is not None else logging.getLogger(__name__)
        # The branch reads and writes go to: (name, forktrail session), set as one value.
        self._branch: Tuple[str, str] = (MAIN, self.forktrail_id)
        self._writes = _Queue()
        self._closed = False

    # -- the Session protocol -------------------------------------------------------

    async def get_items(self, limit: Optional[int] = None, branch_id: Optional[str] = None) -> List[Item]:
        """The conversation's items in order, inherited ones (before a fork point)
        included; with ``limit``, the latest ``limit`` of them. ``branch_id`` reads
        another branch than the current one (none: ``[]``)."""
        self._check_open()
        if limit is None:
            limit = getattr(self.session_settings, "limit", None)
        if branch_id is None:
            return await asyncio.to_thread(self._on_current, lambda b: self._get_items(b, limit))
        return await asyncio.to_thread(self._on_named, branch_id, lambda b: self._get_items(b, limit), [])

    async def add_items(self, items: List[Item]) -> None:
        """Appends the items as turns of the current branch, all in one transaction
        (all or none)."""
        self._check_open()
        if not items:
            return
        branch = self._branch
        batch = list(items)
        await _settled(self._writes.run(lambda: self._on_branch(branch, lambda b: self._add_items(b, batch))))

    async def pop_item(self) -> Optional[Item]:
        """Removes and returns the latest item of the current branch (``None`` when
        there is none). An item a fork shares cannot be removed from the session it
        came from: fork earlier instead."""
        self._check_open()
        branch = self._branch
        return await _settled(self._writes.run(lambda: self._on_branch(branch, self._pop_item)))

    async def clear_session(self) -> None:
        """Deletes the session with all its branches (forks); the next ``add_items``
        starts it again, empty, on ``main``. The names its branches had stay used."""
        self._check_open()
        await _settled(self._writes.run(self._clear))

    def close(self) -> None:
        """Ends this object's use of the session (nothing is held open: the store
        keeps everything); later calls raise ``RuntimeError``."""
        self._closed = True

    # -- forks ----------------------------------------------------------------------

    async def fork(
        self,
        at: Optional[int] = None,
        label: Optional[str] = None,
        *,
        reason: Optional[str] = None,
        session_id: Optional[str] = None,
    ) -> "ForktrailSession":
        """A new session sharing the current branch's first ``at`` items (default:
        all), with the branch ``label``; continue the conversation on it with the SDK.
        Nothing is copied: the fork stores only the items added to it."""
        self._check_open()

        def work(branch: Tuple[str, str]) -> JSON:
            index = None if at is None else self._index_of_item(branch, at)
            return self.client.fork(branch[1], index, label=label, reason=reason, id=session_id)

        plan = await asyncio.to_thread(self._on_current, work)
        return ForktrailSession(
            plan["session"],
            self.client,
            model=self.model,
            principal=self.principal,
            session_settings=self.session_settings,
            logger=self._logger,
        )

    async def branches(self) -> List[Dict[str, Any]]:
        """The direct forks of this session: ``session``, ``branch`` (the label),
        ``forked_at_index``, ``own_turns``, ``created_at``."""
        return await asyncio.to_thread(self.client.branches, self.forktrail_id)

    async def info(self) -> Dict[str, Any]:
        """forktrail's facts about this session (parent, fork point, length, head
        digest, …)."""
        return await asyncio.to_thread(self.client.session, self.forktrail_id)

    # -- AdvancedSQLiteSession's branches ---------------------------------------------

    @property
    def current_branch_id(self) -> str:
        """The branch ``get_items``, ``add_items`` and ``pop_item`` use."""
        return self._branch[0]

    @property
    def current_branch_session(self) -> str:
        """The forktrail session of the current branch."""
        return self._branch[1]

    async def create_branch_from_turn(self, turn_number: int, branch_name: Optional[str] = None) -> str:
        """Forks the current branch just before user turn ``turn_number`` (its user
        message and what follows are left out) and switches to the fork. The fork
        shares the turns before that point instead of copying them.

        ``branch_name`` must be new to this session (a name used before, even by a
        deleted branch, is refused); without one it is ``branch_from_turn_N_<unix
        time>``. Raises ``ValueError`` when the turn has no user message or the name
        is blank or used."""
        self._check_open()
        if branch_name is not None and not branch_name.strip():
            raise ValueError("Branch name cannot be empty")
        branch = self._branch
        name, preview, source = await _settled(
            self._writes.run(
                lambda: self._on_branch(branch, lambda b: self._create_branch(b, turn_number, branch_name))
            )
        )
        if _logs_model_data():
            self._logger.debug("Created branch '%s' from turn %s ('%s') in '%s'", name, turn_number, preview, source)
        else:
            self._logger.debug("Created branch '%s' from turn %s in '%s'", name, turn_number, source)
        return name

    async def create_branch_from_content(self, search_term: str, branch_name: Optional[str] = None) -> str:
        """:meth:`create_branch_from_turn` at the first user turn whose text contains
        ``search_term`` (ASCII letters matched in either case)."""
        matching = await self.find_turns_by_content(search_term)
        if not matching:
            raise ValueError(f"No user turns found containing '{search_term}'")
        return await self.create_branch_from_turn(matching[0]["turn"], branch_name)

    async def switch_to_branch(self, branch_id: str) -> None:
        """Makes ``branch_id`` the current branch. Raises ``ValueError`` unless the
        branch exists and holds an item (as in ``AdvancedSQLiteSession``, a branch
        made at turn 1 is there only once something is added to it)."""
        self._check_open()
        found = await asyncio.to_thread(self._find_with_items, branch_id)
        if found is None:
            raise ValueError(f"Branch '{branch_id}' does not exist")
        old = self._branch[0]
        self._branch = found
        self._logger.info("Switched from branch '%s' to '%s'", old, branch_id)

    async def delete_branch(self, branch_id: str, force: bool = False) -> None:
        """Deletes a branch: its fork and the turns it stores (what it shares stays
        with the branch it came from). ``main`` cannot be deleted, nor the current
        branch without ``force`` (then the session goes back to ``main``), nor a
        branch others were made from (they share its turns: delete them first). The
        name stays used."""
        self._check_open()
        if not branch_id or not branch_id.strip():
            raise ValueError("Branch ID cannot be empty")
        if branch_id == MAIN:
            raise ValueError("Cannot delete the 'main' branch")
        if branch_id == self._branch[0] and not force:
            raise ValueError(f"Cannot delete current branch '{branch_id}'. Use force=True or switch branches first")
        await _settled(self._writes.run(lambda: self._delete_branch(branch_id)))
        self._logger.info("Deleted branch '%s'", branch_id)

    async def list_branches(self) -> List[Dict[str, Any]]:
        """The branches that hold items, oldest first: ``branch_id``,
        ``message_count`` (items, inherited ones included), ``user_turns``,
        ``is_current``, ``created_at``."""
        self._check_open()
        return await asyncio.to_thread(self._list_branches)

    async def get_conversation_turns(self, branch_id: Optional[str] = None) -> List[Dict[str, Any]]:
        """The user turns of a branch (the current one by default): ``turn``,
        ``content`` (a preview of 100 characters), ``full_content``, ``timestamp``,
        ``can_branch``."""
        self._check_open()
        return await self._read(branch_id, lambda b: self._user_turns(b, None, 100), [])

    async def find_turns_by_content(self, search_term: str, branch_id: Optional[str] = None) -> List[Dict[str, Any]]:
        """The user turns whose text contains ``search_term`` (ASCII letters in either
        case, anything else exactly), in the shape of :meth:`get_conversation_turns`."""
        self._check_open()
        pattern = re.compile(re.escape(search_term), re.IGNORECASE | re.ASCII)
        return await self._read(branch_id, lambda b: self._user_turns(b, pattern, None), [])

    async def get_conversation_by_turns(
        self, branch_id: Optional[str] = None
    ) -> Dict[int, List[Dict[str, Optional[str]]]]:
        """The items of a branch grouped by user turn: ``{turn: [{"type",
        "tool_name"}, …]}``."""
        self._check_open()

        def work(branch: Tuple[str, str]) -> Dict[int, List[Dict[str, Optional[str]]]]:
            turns: Dict[int, List[Dict[str, Optional[str]]]] = {}
            for e in _entries(self._turns(branch)):
                turns.setdefault(e.turn, []).append({"type": message_type(e.item), "tool_name": tool_name(e.item)})
            return turns

        return await self._read(branch_id, work, {})

    async def get_tool_usage(self, branch_id: Optional[str] = None) -> List[Tuple[Optional[str], int, int]]:
        """How often each tool was called in each user turn of a branch:
        ``[(tool_name, count, turn), …]`` by turn."""
        self._check_open()

        def work(branch: Tuple[str, str]) -> List[Tuple[Optional[str], int, int]]:
            entries = _entries(self._turns(branch))
            searched = {(e.turn, tool_name(e.item)) for e in entries if message_type(e.item) == "tool_search_call"}
            counts: Dict[Tuple[int, Optional[str]], int] = {}
            for e in entries:
                kind = message_type(e.item)
                name = tool_name(e.item)
                if kind in _TOOL_CALL_TYPES:
                    if name is None and kind in {"shell_call", "apply_patch_call"}:
                        name = kind
                elif not (kind == "tool_search_output" and (e.turn, name) not in searched):
                    continue
                counts[(e.turn, name)] = counts.get((e.turn, name), 0) + 1
            ordered = sorted(counts.items(), key=lambda kv: (kv[0][0], kv[0][1] is not None, kv[0][1] or ""))
            return [(name, count, turn) for (turn, name), count in ordered]

        return await self._read(branch_id, work, [])

    # -- AdvancedSQLiteSession's usage ------------------------------------------------

    async def store_run_usage(self, result: Any) -> None:
        """Records the usage of a run (``result.context_wrapper.usage``: requests,
        tokens, their details, each request's) for the current user turn of the
        current branch, as a ``usage`` turn; a second record for the same turn
        replaces the first. A branch without a user turn records nothing. Failures
        are logged, not raised, as ``AdvancedSQLiteSession`` does."""
        try:
            self._check_open()
            usage = result.context_wrapper.usage
            if usage is None:
                return
            branch = self._branch
            await _settled(self._writes.run(lambda: self._on_branch(branch, lambda b: self._store_usage(b, usage))))
        except Exception:
            self._logger.error("Failed to store session usage", exc_info=_logs_model_data())

    async def get_session_usage(self, branch_id: Optional[str] = None) -> Optional[Dict[str, int]]:
        """The usage recorded on one branch, or on all of them: ``requests``,
        ``input_tokens``, ``output_tokens``, ``total_tokens``, ``total_turns``
        (``None`` when nothing was recorded)."""
        self._check_open()
        return await asyncio.to_thread(self._session_usage, branch_id)

    async def get_turn_usage(
        self,
        user_turn_number: Optional[int] = None,
        branch_id: Optional[str] = None,
    ) -> Union[List[Dict[str, Any]], Dict[str, Any]]:
        """The usage recorded for one user turn of a branch (the current one by
        default) as a dict (``{}`` if none), or for each of its turns as a list with
        ``user_turn_number``. Token details are the SDK's, as JSON."""
        self._check_open()

        def work(branch: Tuple[str, str]) -> Union[List[Dict[str, Any]], Dict[str, Any]]:
            records = self._usage_records(branch)
            if user_turn_number is not None:
                record = records.get(user_turn_number)
                return _turn_usage(record) if record is not None else {}
            return [dict(user_turn_number=n, **_turn_usage(records[n])) for n in sorted(records)]

        return await self._read(branch_id, work, {} if user_turn_number is not None else [])

    # -- the work, synchronous ------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")

    def _turns(self, branch: Tuple[str, str], **window: Any) -> List[JSON]:
        """The turns of a branch; none for a session not made yet, ``_BranchGone`` for
        a branch whose fork was deleted."""
        try:
            return self.client.turns(branch[1], **window)
        except ForktrailError as e:
            if e.code != "session_not_found":
                raise
            if branch[1] == self.forktrail_id:
                return []
            raise _BranchGone(branch[0]) from None

    def _on_branch(self, branch: Tuple[str, str], work: Callable[[Tuple[str, str]], T]) -> T:
        """``work`` on ``branch``; if its fork is gone (the session was cleared, or
        the branch deleted, elsewhere), back on ``main`` as after ``clear_session``."""
        try:
            return work(branch)
        except _BranchGone:
            if self._branch == branch:
                self._branch = (MAIN, self.forktrail_id)
            return work((MAIN, self.forktrail_id))

    def _on_current(self, work: Callable[[Tuple[str, str]], T]) -> T:
        return self._on_branch(self._branch, work)

    def _on_named(self, name: str, work: Callable[[Tuple[str, str]], T], absent: T) -> T:
        branch = self._find(name)
        if branch is None:
            return absent
        try:
            return work(branch)
        except _BranchGone:
            return absent

    async def _read(self, branch_id: Optional[str], work: Callable[[Tuple[str, str]], T], absent: T) -> T:
        if branch_id is None:
            return await asyncio.to_thread(self._on_current, work)
        return await asyncio.to_thread(self._on_named, branch_id, work, absent)

    def _tree(self) -> Optional[JSON]:
        try:
            return self.client.tree(self.forktrail_id)
        except ForktrailError as e:
            if e.code == "session_not_found":
                return None
            raise

    def _forks(self, tree: Optional[JSON]) -> Iterator[JSON]:
        """The sessions under the root, breadth first."""
        level = list(tree["children"]) if tree else []
        while level:
            yield from level
            level = [child for node in level for child in node.get("children", [])]

    def _find(self, name: str) -> Optional[Tuple[str, str]]:
        """The branch called ``name``: ``main``, or a fork anywhere under the session."""
        if name == MAIN:
            return (MAIN, self.forktrail_id)
        for node in self._forks(self._tree()):
            if branch_of_label(node["branch"]) == name:
                return (name, node["session"])
        return None

    def _find_with_items(self, name: str) -> Optional[Tuple[str, str]]:
        branch = self._find(name)
        if branch is None:
            return None
        try:
            return branch if _entries(self._turns(branch)) else None
        except _BranchGone:
            return None

    def _get_items(self, branch: Tuple[str, str], limit: Optional[int]) -> List[Item]:
        # As SQLiteSession reads its limit (SQL's LIMIT): 0 gives nothing, a negative
        # one everything.
        if limit is not None and limit < 0:
            limit = None
        if limit == 0:
            return []
        turns = self._turns(branch, last=limit)
        items = [item for turn in turns for item in items_of_turn(turn)]
        if limit is not None and len(items) < limit and len(turns) == limit:
            # Some turns were not items (usage, notes without text): read them all.
            turns = self._turns(branch)
            items = [item for turn in turns for item in items_of_turn(turn)]
        return items[-limit:] if limit is not None else items

    def _add_items(self, branch: Tuple[str, str], items: List[Item]) -> None:
        turns = [turn_of_item(item, self.model) for item in items]
        self._append(branch, turns)

    def _append(self, branch: Tuple[str, str], turns: List[JSON]) -> None:
        try:
            self.client.append_many(branch[1], turns)
            return
        except ForktrailError as e:
            if e.code != "session_not_found":
                raise
            if branch[1] != self.forktrail_id:
                raise _BranchGone(branch[0]) from None
        try:
            self.client.create_session(self.forktrail_id, self.title, self.principal)
        except ForktrailError as created:
            # Another writer created it meanwhile: append to theirs.
            if created.status != 409:
                raise
        self.client.append_many(self.forktrail_id, turns)

    def _pop_item(self, branch: Tuple[str, str]) -> Optional[Item]:
        session = branch[1]
        # Turns after the last item that are not items (usage records, bare notes) are
        # taken off on the way and put back unless they were the usage of the user turn
        # the popped item was the last of.
        kept: List[JSON] = []
        try:
            while True:
                try:
                    turn = self.client.pop(session)
                except ForktrailError as e:
                    if e.code == "session_not_found":
                        if session == self.forktrail_id:
                            return None
                        raise _BranchGone(branch[0]) from None
                    if e.status == 409 and session != self.forktrail_id:
                        turn = self._pop_inherited(branch)
                        if turn is None:
                            raise
                    else:
                        raise
                if turn is None:
                    return None
                items = items_of_turn(turn)
                if items:
                    break
                kept.insert(0, turn)
            if _is_user_message(items[-1]):
                kept = [t for t in kept if _usage_of(t) is None]
            return items[-1]
        finally:
            if kept:
                self.client.append_many(session, [_rewritten(t) for t in kept])

    def _pop_inherited(self, branch: Tuple[str, str]) -> Optional[JSON]:
        """Pops the last item a fork inherits and stores none of its own: the fork is
        made again, under the same id and label, one item earlier. ``None`` when
        that cannot be (it has forks, or the item is not inherited)."""
        facts = self.client.session(branch[1])
        parent = facts.get("parent")
        if parent is None or facts.get("own_turns") or self.client.branches(branch[1]):
            return None
        shared = self.client.turns(branch[1])
        last = next((t for t in reversed(shared) if items_of_turn(t)), None)
        if last is None:
            return None
        self.client.delete(branch[1])
        self.client.fork(
            parent,
            last["index"],
            label=facts.get("branch"),
            id=branch[1],
            principal=facts.get("principal"),
        )
        return last

    def _clear(self) -> None:
        names = [branch_of_label(node["branch"]) for node in self._forks(self._tree())]
        if names:
            self._use_names(names)
        try:
            self.client.delete(self.forktrail_id, cascade=True)
        except ForktrailError as e:
            if e.code != "session_not_found":
                raise
        self._branch = (MAIN, self.forktrail_id)

    # -- branch names ---------------------------------------------------------------

    def _names_session(self) -> str:
        """The forktrail session that lists the names of this session's deleted
        branches, which cannot be used again (as ``AdvancedSQLiteSession`` keeps
        them in ``branch_reservations``)."""
        suffix = ".branch-names"
        if len(self.forktrail_id) + len(suffix) <= 128:
            return self.forktrail_id + suffix
        digest = hashlib.sha256(self.forktrail_id.encode("utf-8")).hexdigest()[:16]
        return f"{self.forktrail_id[:96]}.{digest}{suffix}"

    def _used_names(self) -> List[str]:
        try:
            turns = self.client.turns(self._names_session())
        except ForktrailError as e:
            if e.code == "session_not_found":
                return []
            raise
        return [t["content"] for t in turns]

    def _use_names(self, names: List[str]) -> None:
        record = [{"role": "system", "kind": "note", "content": n, "payload": {"branch": n}} for n in names]
        session = self._names_session()
        try:
            self.client.append_many(session, record)
            return
        except ForktrailError as e:
            if e.code != "session_not_found":
                raise
        try:
            self.client.create_session(session, f"branch names used in {self.forktrail_id}"[:1024], self.principal)
        except ForktrailError as e:
            if e.status != 409:
                raise
        self.client.append_many(session, record)

    def _create_branch(self, branch: Tuple[str, str], turn_number: int, name: Optional[str]) -> Tuple[str, str, str]:
        entries = _entries(self._turns(branch))
        start = next((e for e in entries if e.turn == turn_number and _is_user_message(e.item)), None)
        if start is None:
            raise ValueError(f"Turn {turn_number} does not contain a user message in branch '{branch[0]}'")
        content = start.item.get("content", "")
        preview = content[:50] + "..." if isinstance(content, str) and len(content) > 50 else content
        taken = {MAIN, *self._used_names()}
        taken.update(branch_of_label(node["branch"]) for node in self._forks(self._tree()))
        if name is not None:
            if name in taken:
                raise ValueError(f"Branch ID '{name}' has already been used. Choose a new branch ID.")
            chosen = name
        else:
            base = f"branch_from_turn_{turn_number}_{int(time.time())}"
            chosen, suffix = base, 1
            while chosen in taken:
                suffix += 1
                chosen = f"{base}_{suffix}"
        try:
            plan = self.client.fork(branch[1], start.index, label=label_of_branch(chosen))
        except ForktrailError as e:
            if e.status == 409 and "label" in e.message:
                raise ValueError(f"Branch ID '{chosen}' has already been used. Choose a new branch ID.") from None
            raise
        self._branch = (chosen, plan["session"])
        return chosen, str(preview), branch[0]

    def _delete_branch(self, name: str) -> None:
        tree = self._tree()
        node = next((n for n in self._forks(tree) if branch_of_label(n["branch"]) == name), None)
        if node is None or not _entries(self._turns((name, node["session"]))):
            raise ValueError(f"Branch '{name}' does not exist")
        if node.get("children"):
            others = ", ".join(f"'{branch_of_label(c['branch'])}'" for c in node["children"])
            raise ValueError(
                f"Branch '{name}' cannot be deleted: branches {others} were made from it and share its turns"
            )
        self._use_names([name])
        if self._branch[1] == node["session"]:
            self._branch = (MAIN, self.forktrail_id)
        try:
            self.client.delete(node["session"])
        except ForktrailError as e:
            if e.code != "session_not_found":
                raise

    def _list_branches(self) -> List[Dict[str, Any]]:
        tree = self._tree()
        if tree is None:
            if self._branch[0] != MAIN:
                self._branch = (MAIN, self.forktrail_id)
            return []
        sessions = {node["session"] for node in self._forks(tree)}
        if self._branch[1] not in sessions:
            self._branch = (MAIN, self.forktrail_id)
        created: Dict[str, Optional[str]] = {
            self.forktrail_id: self.client.session(self.forktrail_id).get("created_at")
        }
        nodes = [tree, *self._forks(tree)]
        for node in nodes:
            if node.get("children"):
                for fork in self.client.branches(node["session"]):
                    created[fork["session"]] = fork.get("created_at")
        out = []
        for node in nodes:
            name = MAIN if node is tree else branch_of_label(node["branch"])
            try:
                entries = _entries(self._turns((name, node["session"])))
            except _BranchGone:
                continue
            if not entries:
                continue
            out.append(
                {
                    "branch_id": name,
                    "message_count": len(entries),
                    "user_turns": sum(1 for e in entries if _is_user_message(e.item)),
                    "is_current": node["session"] == self._branch[1],
                    "created_at": created.get(node["session"]),
                }
            )
        out.sort(key=lambda b: _instant(b["created_at"]))
        return out

    def _user_turns(
        self, branch: Tuple[str, str], pattern: Optional["re.Pattern[str]"], width: Optional[int]
    ) -> List[Dict[str, Any]]:
        out = []
        for e in _entries(self._turns(branch)):
            if not _is_user_message(e.item):
                continue
            content = e.item.get("content", "")
            if pattern is not None:
                texts = _texts(content)
                if texts is None or not any(isinstance(t, str) and pattern.search(t) for t in texts):
                    continue
            out.append(
                {
                    "turn": e.turn,
                    "content": _preview(content, width),
                    "full_content": content,
                    "timestamp": e.created_at,
                    "can_branch": True,
                }
            )
        return out

    def _index_of_item(self, branch: Tuple[str, str], at: int) -> int:
        """The turn index before which the first ``at`` items of a branch lie (past
        its items, an index the server refuses as it refuses ``at``)."""
        turns = self._turns(branch)
        seen = 0
        for t in turns:
            if seen == at:
                return int(t["index"])
            seen += len(items_of_turn(t))
        if seen == at:
            return len(turns)
        return at + len(turns) - seen

    # -- usage ----------------------------------------------------------------------

    def _store_usage(self, branch: Tuple[str, str], usage: Any) -> None:
        entries = _entries(self._turns(branch))
        turn = max((e.turn for e in entries), default=0)
        if turn == 0:
            self._logger.debug("Skipping usage store: no current turn on branch %r", branch[0])
            return
        record = usage_record(usage, turn)
        content = (
            f"usage of user turn {turn}: {record['requests']} requests, {record['total_tokens']} tokens "
            f"({record['input_tokens']} in, {record['output_tokens']} out)"
        )
        self._append(branch, [{"role": "system", "kind": "usage", "content": content, "payload": record}])

    def _usage_records(self, branch: Tuple[str, str]) -> Dict[int, JSON]:
        """The latest usage record of each user turn, among those the branch stores
        (not those it inherits: usage belongs to the branch it was recorded on)."""
        records: Dict[int, JSON] = {}
        for t in self._turns(branch):
            record = _usage_of(t)
            if record is not None and t.get("session") == branch[1]:
                records[record["user_turn_number"]] = record
        return records

    def _session_usage(self, branch_id: Optional[str]) -> Optional[Dict[str, int]]:
        if branch_id:
            branch = self._find(branch_id)
            branches = [branch] if branch is not None else []
        else:
            tree = self._tree()
            branches = [] if tree is None else [(MAIN, self.forktrail_id)]
            branches += [(branch_of_label(n["branch"]), n["session"]) for n in self._forks(tree)]
        records: List[JSON] = []
        for branch in branches:
            try:
                records.extend(self._usage_records(branch).values())
            except _BranchGone:
                continue
        if not records:
            return None
        total = {
            k: sum(int(r.get(k) or 0) for r in records)
            for k in ("requests", "input_tokens", "output_tokens", "total_tokens")
        }
        total["total_turns"] = len(records)
        return total


def _instant(stamp: Optional[str]) -> str:
    """An RFC 3339 time in UTC (``…:38.95Z``) as text that sorts as the times do."""
    if not stamp:
        return ""
    head, _, rest = stamp.rstrip("Z").partition(".")
    return f"{head}.{rest:0<9}"


def _turn_usage(record: JSON) -> Dict[str, Any]:
    return {
        "requests": record.get("requests", 0),
        "input_tokens": record.get("input_tokens", 0),
        "output_tokens": record.get("output_tokens", 0),
        "total_tokens": record.get("total_tokens", 0),
        "input_tokens_details": record.get("input_tokens_details"),
        "output_tokens_details": record.get("output_tokens_details"),
    }


def _rewritten(turn: JSON) -> JSON:
    """A stored turn as ``append_many`` takes it, to put it back after a pop."""
    out: JSON = {"role": turn["role"], "content": turn["content"], "kind": turn.get("kind", "message")}
    for field in ("name", "tool_call_id", "tool_calls", "model", "payload"):
        if turn.get(field) is not None:
            out[field] = turn[field]
    return out


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
    """The SDK items a stored turn stands for: its payload when it has one. Usage
    records are not part of the conversation the model sees: none."""
    if turn.get("kind") == "usage":
        return []
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
