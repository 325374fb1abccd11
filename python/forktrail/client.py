"""A client for forktrail's REST API (``forktrail serve``), standard library only."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterator, List, Optional

__all__ = ["Client", "ForktrailError"]

JSON = Dict[str, Any]


def _query(params: Dict[str, Any]) -> str:
    """A query string of the parameters that are set."""
    given = {k: v for k, v in params.items() if v is not None}
    return "?" + urllib.parse.urlencode(given) if given else ""


class ForktrailError(Exception):
    """An operation forktrail refused, with the server's message.

    ``status`` is the HTTP status (0 when the server could not be reached), ``code``
    forktrail's error code (``session_not_found``, ``conflict``, ``invalid_input``, …).
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"ForktrailError({self.status}, {self.code!r}, {self.message!r})"


class Client:
    """forktrail's REST API, one method per operation, with the CLI's semantics.

    ``url`` is where ``forktrail serve`` listens; ``token`` its ``--token`` (needed for
    writes). Every method returns the JSON the server answers with, as Python values,
    and raises :class:`ForktrailError` with the server's message when it refuses.

    >>> client = Client("http://127.0.0.1:7878", token="secret")  # doctest: +SKIP
    >>> sid = client.create_session(title="trip planning")  # doctest: +SKIP
    >>> client.append(sid, "user", "Paris to Amsterdam on Friday?")  # doctest: +SKIP
    0
    """

    def __init__(
        self,
        url: str = "http://127.0.0.1:7878",
        token: Optional[str] = None,
        timeout: float = 60.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    # -- transport ------------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Optional[Dict[str, Any]] = None,
        raw: Optional[bytes] = None,
    ) -> Any:
        query = {k: _param(v) for k, v in (params or {}).items() if v is not None}
        url = self.url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        headers = {"Accept": "application/json"}
        data = raw
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                text = response.read().decode("utf-8")
        except urllib.error.HTTPError as e:
            raise _error_of(e) from None
        except urllib.error.URLError as e:
            raise ForktrailError(0, "unreachable", f"cannot reach {self.url}: {e.reason}") from None
        return json.loads(text) if text else None

    @staticmethod
    def _session(session: str) -> str:
        return "/sessions/" + urllib.parse.quote(session, safe="")

    # -- sessions -------------------------------------------------------------------

    def list_sessions(
        self,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        order: Optional[str] = None,
        principal: Optional[str] = None,
        model: Optional[str] = None,
        roots: bool = False,
        parent: Optional[str] = None,
        family: Optional[str] = None,
        since: Optional[str] = None,
    ) -> JSON:
        """A page of sessions, newest activity first: ``{"sessions", "total", "next"}``.

        Pass ``next`` back as ``cursor`` for the following page, or use
        :meth:`iter_sessions`. ``order`` is ``activity`` (default) or ``created``;
        the filters are those of ``forktrail list``.
        """
        params = {
            "limit": limit,
            "cursor": cursor,
            "order": order,
            "principal": principal,
            "model": model,
            "roots": "true" if roots else None,
            "parent": parent,
            "family": family,
            "since": since,
        }
        return self._request("GET", "/sessions" + _query(params))

    def iter_sessions(self, page_size: int = 200, **filters: Any) -> Iterator[JSON]:
        """Every session matching ``filters`` (those of :meth:`list_sessions`), a page
        at a time."""
        cursor: Optional[str] = None
        while True:
            page = self.list_sessions(limit=page_size, cursor=cursor, **filters)
            yield from page["sessions"]
            cursor = page["next"]
            if cursor is None:
                return

    def search(self, text: str, limit: Optional[int] = None, cursor: Optional[str] = None) -> JSON:
        """Hits over turn contents, titles, branch labels and models, best first:
        ``{"hits": [{"session", "index", "role", "snippet", "highlights", "score", …}],
        "total", "next"}``. Words are all required; ``"phrases"`` go in quotes."""
        return self._request("GET", "/search" + _query({"q": text, "limit": limit, "cursor": cursor}))

    def create_session(
        self,
        id: Optional[str] = None,
        title: Optional[str] = None,
        principal: Optional[str] = None,
    ) -> str:
        """Creates a root session and returns its id (a UUID v7 unless given)."""
        body = {"id": id, "title": title, "principal": principal}
        reply = self._request("POST", "/sessions", {k: v for k, v in body.items() if v is not None})
        return reply["session"]

    def import_session(
        self,
        turns: List[Dict[str, Any]],
        id: Optional[str] = None,
        title: Optional[str] = None,
        principal: Optional[str] = None,
        no_dedup: bool = False,
    ) -> JSON:
        """Creates a session with its turns (objects as ``append_many`` takes them), all
        or none. If its first turns repeat a stored session's, it is stored as a fork
        of that session holding only the rest (unless ``no_dedup``): ``{"session",
        "turns", "shared": {"parent", "shared_turns", "branch", …}}``."""
        body: Dict[str, Any] = {"id": id, "title": title, "principal": principal}
        body = {k: v for k, v in body.items() if v is not None}
        body["turns"] = turns
        if no_dedup:
            body["no_dedup"] = True
        return self._request("POST", "/sessions", body)

    def session(self, session: str) -> JSON:
        """A session's lineage facts, counts and head digest."""
        return self._request("GET", self._session(session))

    def exists(self, session: str) -> bool:
        try:
            self.session(session)
            return True
        except ForktrailError as e:
            if e.status == 404:
                return False
            raise

    def delete(self, session: str, cascade: bool = False, dry_run: bool = False) -> JSON:
        """Deletes a session (refused if it has forks, unless ``cascade``)."""
        params = {"cascade": cascade, "dry_run": dry_run}
        return self._request("DELETE", self._session(session), params=params)

    # -- turns ----------------------------------------------------------------------

    def append(self, session: str, role: str, content: str, **fields: Any) -> int:
        """Appends one turn and returns its index. ``fields``: kind, model, name,
        tool_call_id, tool_calls (a list), payload (any JSON)."""
        body = {"role": role, "content": content, **fields}
        return self._request("POST", self._session(session) + "/turns", body)["index"]

    def append_many(self, session: str, turns: List[JSON]) -> List[int]:
        """Appends turns (dicts with role, content and the fields of :meth:`append`) in
        one transaction, all or none; returns their indices."""
        return self._request("POST", self._session(session) + "/turns", turns)["indices"]

    def turns(
        self,
        session: str,
        start: Optional[int] = None,
        up_to: Optional[int] = None,
        last: Optional[int] = None,
    ) -> List[JSON]:
        """The turns in full (kind, name, tool calls, model, payload, owner session,
        branch, digest, time), inherited ones included: ``start`` to ``up_to``
        (inclusive), or only the ``last`` ones of that range."""
        params = {"from": start, "up_to": up_to, "last": last}
        return self._request("GET", self._session(session) + "/turns", params=params)

    def replay(self, session: str, up_to: Optional[int] = None) -> List[JSON]:
        """The plain ``index/role/content/branch`` records, in order."""
        return self._request("GET", self._session(session) + "/replay", params={"up_to": up_to})

    def pop(self, session: str) -> Optional[JSON]:
        """Removes the session's last turn and returns it (``None`` if it had none).
        Refused for a turn the session inherits, or one a fork or anchor points at."""
        return self._request("POST", self._session(session) + "/pop")["popped"]

    # -- forks ----------------------------------------------------------------------

    def fork(self, session: str, at: Optional[int] = None, **options: Any) -> JSON:
        """Forks ``session`` at ``at`` (default: its length); the fork shares turns
        ``0..at`` and stores only what it adds. ``options``: label, reason, id,
        anchor, request_id, summarize, dry_run. Returns the plan (``session`` is the
        fork's id)."""
        body = {"at": at, **options}
        return self._request("POST", self._session(session) + "/fork", {k: v for k, v in body.items() if v is not None})

    def branches(self, session: str, page_size: int = 200) -> List[JSON]:
        """The direct forks of a session, newest first: id, label, fork point, own
        turns (read a page at a time)."""
        out: List[JSON] = []
        cursor: Optional[str] = None
        while True:
            page = self._request(
                "GET",
                self._session(session) + "/branches" + _query({"limit": page_size, "cursor": cursor}),
            )
            out.extend(page["branches"])
            cursor = page["next"]
            if cursor is None:
                return out

    def tree(self, session: str, limit: Optional[int] = None) -> JSON:
        """A session and its descendants, nested, breadth first up to ``limit``
        sessions (the server's default 1,000): a session whose children did not all fit
        has ``more_children``."""
        return self._request("GET", self._session(session) + "/tree" + _query({"limit": limit}))

    def diff(self, a: str, b: str) -> JSON:
        """How two sessions relate and the turns where they part."""
        return self._request("GET", self._session(a) + "/diff/" + urllib.parse.quote(b, safe=""))

    def export(self, session: str, format: str = "trig") -> str:
        """One session exported: trig, nquads, turtle, jsonl, openai, prov or html."""
        url = self._session(session) + "/export"
        request = urllib.request.Request(
            self.url + url + "?" + urllib.parse.urlencode({"format": format}),
            headers={"Authorization": f"Bearer {self.token}"} if self.token else {},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.read().decode("utf-8")
        except urllib.error.HTTPError as e:
            raise _error_of(e) from None

    def import_transcript(self, data: bytes, format: Optional[str] = None, no_dedup: bool = False) -> JSON:
        """Imports a file's bytes (forktrail's TriG/N-Quads, an OpenAI transcript, a
        Claude Code log, a Codex rollout, a Pi session file), all or nothing; a session
        that repeats a stored one's start becomes a fork of it unless ``no_dedup``."""
        params = {"format": format, "no_dedup": "true" if no_dedup else None}
        return self._request("POST", "/import", params=params, raw=data)

    # -- what-if regeneration -------------------------------------------------------

    def regenerate(self, session: str, at: int, **options: Any) -> JSON:
        """Forks ``session`` at ``at`` and lets a model answer turn ``at`` on the fork.
        ``options``: model, system_prompt, tools, endpoint, max_tokens, temperature,
        request_id, dry_run, … Returns the job (or the plan, for a dry run)."""
        body = {"at": at, **options}
        return self._request("POST", self._session(session) + "/regenerate", body)

    def job(self, job: str) -> JSON:
        return self._request("GET", "/jobs/" + urllib.parse.quote(job, safe=""))

    def cancel_job(self, job: str) -> JSON:
        return self._request("POST", "/jobs/" + urllib.parse.quote(job, safe="") + "/cancel")

    def wait_for_job(self, job: str, timeout: float = 300.0, interval: float = 0.2) -> JSON:
        """Polls a job until it is no longer running; raises ``TimeoutError`` past
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.job(job)
            if state["status"] != "running":
                return state
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job} still running after {timeout} s")
            time.sleep(interval)

    # -- SPARQL ---------------------------------------------------------------------

    def query(self, sparql: str) -> JSON:
        """A read-only SPARQL query over every session graph, as SPARQL JSON results."""
        request = urllib.request.Request(
            self.url + "/sparql",
            data=sparql.encode("utf-8"),
            headers={
                "Content-Type": "application/sparql-query",
                "Accept": "application/sparql-results+json",
            },
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            raise _error_of(e) from None


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _error_of(e: urllib.error.HTTPError) -> ForktrailError:
    text = e.read().decode("utf-8", "replace")
    try:
        body = json.loads(text)
        return ForktrailError(e.code, str(body.get("error", "")), str(body.get("message", text)))
    except (ValueError, AttributeError):
        return ForktrailError(e.code, "http", text.strip() or str(e))
