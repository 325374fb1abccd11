"""A pytest plugin that runs the OpenAI Agents SDK's own session tests on forktrail.

It swaps two classes and nothing else: ``SQLiteSession`` becomes
:class:`ForktrailSQLiteSession` and ``AdvancedSQLiteSession``
:class:`ForktrailAdvancedSQLiteSession`, ``ForktrailSession`` with the constructor each
SDK class has, on the ``forktrail serve`` named by ``FORKTRAIL_URL`` and
``FORKTRAIL_TOKEN``. The SDK's tests and their assertions run as they are, except the
ones in :data:`DESELECTED`, which read SQLite itself (its connections, file, tables,
private methods) and so have nothing to test on forktrail, or are sandbox tests this
machine cannot run (another platform's, or root's); each says why.

A ``db_path`` is a namespace of session ids, as a SQLite file is: two objects on the
same ``db_path`` (and tables) and ``session_id`` share one forktrail session, and
``":memory:"``, a database of its own for each object in SQLite, is a namespace of
its own for each object. The forktrail id (``forktrail_id``) is
``<namespace>.<session_id>``, the session id written as branch names are (``:hh`` for
what an id may not hold); ``session_id`` stays the one given, as the SDK reads it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

import pytest

from forktrail import Client, ForktrailSession
from forktrail.agents import label_of_branch

# -- the classes swapped in --------------------------------------------------------------

_ID_MAX = 128


def _client() -> Client:
    return Client(os.environ["FORKTRAIL_URL"], token=os.environ["FORKTRAIL_TOKEN"])


def _table(name: str) -> str:
    """A table name as SQLite resolves it: quotes off, ASCII letters in one case."""
    if len(name) > 1 and (name[0], name[-1]) in {('"', '"'), ("[", "]"), ("`", "`")}:
        name = name[1:-1]
    return "".join(c.lower() if c.isascii() else c for c in name)


def _namespace(db_path: Union[str, Path], sessions_table: str, messages_table: str) -> str:
    if str(db_path) == ":memory:":
        return "mem-" + uuid.uuid4().hex[:16]
    where = str(Path(db_path).expanduser().resolve())
    key = "\0".join([where, _table(sessions_table), _table(messages_table)])
    return "db-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def forktrail_id(namespace: str, session_id: str) -> str:
    """The forktrail session that stands for ``session_id`` in ``namespace``."""
    try:
        tail = label_of_branch(session_id)
    except ValueError:
        tail = ""
    whole = f"{namespace}.{tail}"
    if tail and len(whole) <= _ID_MAX:
        return whole
    digest = hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:24]
    return f"{namespace}.{digest}"


class ForktrailSQLiteSession(ForktrailSession):
    """``SQLiteSession(session_id, db_path, sessions_table, messages_table,
    session_settings)`` on forktrail."""

    def __init__(
        self,
        session_id: str,
        db_path: Union[str, Path] = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
        *,
        logger: Optional[logging.Logger] = None,
    ) -> None:
        namespace = _namespace(db_path, sessions_table, messages_table)
        super().__init__(
            session_id,
            _client(),
            session_settings=session_settings,
            logger=logger,
            forktrail_id=forktrail_id(namespace, session_id),
        )
        self.db_path = db_path
        self.sessions_table = sessions_table
        self.messages_table = messages_table
        _record_construction()


class ForktrailAdvancedSQLiteSession(ForktrailSQLiteSession):
    """``AdvancedSQLiteSession(session_id=…, db_path=…, create_tables=…, logger=…,
    session_settings=…, **kwargs)`` on forktrail (there are no tables to create)."""

    def __init__(
        self,
        *,
        session_id: str,
        db_path: Union[str, Path] = ":memory:",
        create_tables: bool = False,
        logger: Optional[logging.Logger] = None,
        session_settings: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(session_id, db_path, session_settings=session_settings, logger=logger, **kwargs)

    @property
    def _current_branch_id(self) -> str:
        """AdvancedSQLiteSession's name for the current branch, which its tests read."""
        return self.current_branch_id


# -- tests with nothing to test on forktrail ----------------------------------------------

# Each file, each test in it (a name without [parameters] covers every case), and why
# it cannot run on forktrail: an indented line continues the reason.
_DESELECTED = """
tests/memory/test_session.py
  test_sqlite_session_close_closes_worker_thread_connections
    reads SQLiteSession._connections and expects sqlite3.ProgrammingError from a closed
    connection
  test_sqlite_session_reaps_connections_from_exited_worker_threads
    counts SQLiteSession._connections, one SQLite connection per worker thread
  test_sqlite_session_closes_retired_connections_before_the_next_allocation
    patches sqlite3.connect and counts SQLiteSession._connections
  test_sqlite_session_keeps_connections_of_live_worker_threads
    reads SQLiteSession._connections and runs SQL on one
  test_sqlite_session_pop_item_skips_corrupt_most_recent
    writes a row of invalid JSON with SQL through the private _locked_connection
  test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows
    writes a row of invalid JSON with SQL through the private _locked_connection
  test_sqlite_session_get_items_limit_skips_corrupt_newest_rows
    writes a row of invalid JSON with SQL through the private _locked_connection
  test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows
    writes a row of invalid JSON with SQL through the private _locked_connection
  test_sqlite_session_file_lock_is_shared_across_instances
    reads the private per-file lock (_lock, _file_lock_counts, _file_locks)
  test_sqlite_session_failed_add_items_releases_write_lock
    probes the SQLite file's write lock and tables with sqlite3
  test_sqlite_session_failed_clear_session_rolls_back
    drops a SQLite table and checks the connections' transactions and the file's write
    lock
  test_sqlite_session_failed_pop_item_releases_write_lock
    drops a SQLite table and checks the connections' transactions and the file's write
    lock
  test_sqlite_session_rollback_failure_evicts_connection
    injects a sqlite3.Connection subclass through the private _get_connection and
    _connections
  test_sqlite_session_close_retries_quarantined_connection
    injects a sqlite3.Connection subclass and reads _quarantined_connections and _closed
  test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome
    pauses a sqlite3.Connection's commit injected through the private _get_connection
tests/extensions/memory/test_advanced_sqlite_session.py
  test_advanced_session_respects_custom_table_names
    reads PRAGMA foreign_key_list of the structure tables through the private
    _get_connection
  test_add_items_rolls_back_messages_when_structure_metadata_fails
    overrides the private _insert_structure_metadata and counts rows with SQL
  test_add_items_can_retry_after_structure_metadata_failure
    overrides the private _insert_structure_metadata and counts rows with SQL
  test_add_items_failure_preserves_existing_history
    overrides the private _insert_structure_metadata and counts rows with SQL
  test_add_items_rolls_back_partial_structure_metadata_write
    overrides the private _insert_structure_metadata with SQL and counts rows with SQL
  test_add_items_rollback_failure_invalidates_connection
    injects a sqlite3.Connection subclass through the private _get_connection and
    _connections
  test_structure_initialization_failure_invalidates_connection
    alters the SQLite schema and patches sqlite3.connect
  test_post_commit_cancellation_propagates_after_known_mutation_outcome
    pauses a sqlite3.Connection's commit injected through the private _get_connection
  test_auxiliary_mutation_cancellation_waits_for_commit
    pauses a sqlite3.Connection's commit injected through the private _get_connection,
    calls the private _insert_items and _cleanup_orphaned_messages
  test_tool_usage_reads_legacy_shell_and_patch_names
    rewrites message_structure rows with SQL (rows of older SDK versions)
  test_failed_branch_reservation_rolls_back_and_allows_retry
    overrides the private _reserve_branch_id and reads branch_reservations with SQL
  test_branch_reservations_migrate_existing_populated_branches
    drops the branch_reservations table (a migration of older SQLite files)
  test_legacy_branch_ids_are_backfilled_before_destructive_operations
    drops the branch_reservations table (a migration of older SQLite files)
  test_legacy_destructive_noops_leave_database_unlocked
    drops the branch_reservations table and checks the connections' transactions
  test_branch_allocation_is_serialized_across_processes
    runs the SDK class in child processes (the swap does not reach them) and instruments
    its private _locked_connection and _reserve_branch_id
  test_delete_branch_removes_branch_only_messages
    reads the messages table with SQL
  test_delete_branch_keeps_messages_still_referenced_by_another_branch
    reads the messages table with SQL
  test_orphan_cleanup_uses_set_based_delete_for_many_messages
    calls the private _insert_items and _cleanup_orphaned_messages_sync on a recording
    SQLite connection
  test_failed_usage_write_rolls_back_cached_connection
    creates a SQLite trigger through the private _get_connection and probes the write
    lock
  test_usage_tracking_failure_identity_follows_model_data_policy
    patches the private _update_turn_usage_internal
  test_get_items_limit_skips_corrupt_newest_rows
    writes a row of invalid JSON and its structure row with SQL through the private
    _get_connection
  test_concurrent_add_items_preserves_message_structure_for_file_db
    reads the messages and message_structure tables with SQL
  test_clear_session_removes_structure_and_usage_metadata
    counts message_structure and turn_usage rows with SQL
  test_pop_item_removes_its_structure_row
    reads the messages and message_structure tables with SQL
  test_pop_item_removes_turn_usage_only_when_turn_emptied
    counts turn_usage rows with SQL
  test_pop_item_respects_current_branch_and_keeps_shared_messages
    reads the messages and message_structure tables with SQL
  test_pop_item_deletes_shared_copied_message_only_when_unreferenced
    counts the messages table's rows with SQL
  test_pop_item_uses_branch_snapshot_when_branch_switches_concurrently
    holds the SDK's private worker _pop_item_sync (by name) to force an interleaving
  test_pop_item_claim_is_unique_across_processes
    runs the SDK class in child processes, where the swap does not reach, on the SQLite
    file
  test_stale_switch_after_clear_does_not_repoint_to_deleted_branch
    holds the SDK's private worker _commit_branch_pointer (by name)
  test_stale_create_branch_after_clear_does_not_repoint
    holds the SDK's private worker _commit_branch_pointer (by name)
  test_clear_before_branch_transaction_prevents_stale_reservation
    holds the SDK's private worker _copy_sync (by name) and reads branch_reservations
    with SQL
  test_store_run_usage_waits_for_database_lock_off_event_loop
    holds and replaces the private per-file lock _lock
  test_store_run_usage_cancellation_during_capture_waits_for_commit
    holds the SDK's private worker _capture_current_turn (by name)
  test_store_run_usage_keeps_target_while_capture_is_waiting
    holds the SDK's private worker _capture_current_turn (by name)
  test_store_run_usage_keeps_turn_when_history_changes_during_capture
    holds the SDK's private workers _capture_current_turn, _add_items_sync,
    _pop_item_sync (by name)
  test_add_captures_coherent_branch_after_clear_publication
    pauses assignments to the private _branch_state and _generation
  test_queued_add_keeps_selected_branch
    holds the SDK's private worker _capture_current_turn (by name)
  test_queued_append_cannot_resurrect_deleted_branch
    holds the private _capture_current_turn and _delete_sync, wraps
    _run_ordered_turn_operation, counts rows with SQL
  test_queued_turn_mutation_releases_later_usage_capture
    overrides the private _insert_structure_metadata and holds the private worker
    _pop_item_sync
  test_turn_ordering_survives_reuse_on_another_event_loop
    holds the SDK's private worker _capture_current_turn (by name)
  test_stale_store_run_usage_skipped_when_turn_removed_by_pop
    holds the SDK's private worker _update_sync (by name) and counts turn_usage rows
    with SQL
  test_stale_store_run_usage_not_recorded_against_reused_turn_number
    holds the SDK's private worker _update_sync (by name) and counts turn_usage rows
    with SQL
  test_store_run_usage_survives_unrelated_branch_deletion
    holds the SDK's private worker _update_sync (by name) and counts turn_usage rows
    with SQL
  test_store_run_usage_skips_when_current_branch_has_no_turn
    counts turn_usage rows with SQL
  test_clear_session_resets_current_branch_to_main
    counts branch_reservations rows with SQL
  test_default_read_does_not_initialize_clear_generation_table
    drops session_clear_generations and reads sqlite_master
  test_switch_validation_cancellation_waits_for_generation_commit
    drops session_clear_generations and pauses a sqlite3.Connection's commit
  test_pop_item_rolls_back_on_failure_after_earlier_delete
    patches the private _cleanup_orphaned_messages_sync and counts rows with SQL
  test_clear_session_rolls_back_on_failure_after_earlier_delete
    replaces the private _shared_connection and counts rows with SQL
  test_structure_tables_reject_a_second_base_table_pair
    SQLite's structure-table ownership per file; reads sqlite_master
  test_structure_tables_reject_changed_sessions_with_shared_messages
    SQLite's structure-table ownership per file; reads sqlite_master
  test_structure_tables_reject_changed_messages_with_shared_sessions
    SQLite's structure-table ownership per file; reads sqlite_master
  test_identifier_resolution_leaves_connection_authorized
    calls the private _resolve_table_identifier on a sqlite3 connection
  test_structure_tables_reject_distinct_non_ascii_identifiers
    SQLite's structure-table ownership per file (table names folded as SQLite folds
    them)
  test_no_create_session_rejects_a_database_without_an_owner
    SQLite's structure tables: create_tables=False on a file without them; uses sqlite3
  test_no_create_session_rejects_owner_metadata_without_base_tables
    builds SQLite structure tables by hand with sqlite3
  test_structure_tables_reject_an_ownerless_layout
    builds SQLite structure tables by hand with sqlite3
  test_structure_tables_reject_malformed_owner_layouts
    builds SQLite structure tables by hand with sqlite3
  test_structure_tables_accept_equivalent_child_column_casing
    builds SQLite structure tables by hand with sqlite3
  test_concurrent_structure_table_claims_leave_one_coherent_owner
    claims SQLite structure tables from child processes and reads PRAGMA
    foreign_key_list
tests/memory/test_compaction_model_visibility.py
  test_backend_read_limit_cannot_hide_retained_history_from_compaction
    needs SQLiteSession's private compaction snapshot (_get_compaction_snapshot), which
    the SDK gives only SQLiteSession itself: a plain subclass of SQLiteSession fails it
    too
  test_automatic_compaction_does_not_reload_unbounded_hidden_history
    wraps SQLiteSession's private _get_compaction_snapshot
  test_expired_read_overhead_does_not_authorize_hidden_history
    needs SQLiteSession's private compaction snapshot (_get_compaction_snapshot), which
    the SDK gives only SQLiteSession itself: a plain subclass of SQLiteSession fails it
    too
tests/memory/test_openai_responses_compaction_session.py
  TestOpenAIResponsesCompactionSession::test_automatic_compaction_rollback_budget[True]
    needs SQLiteSession's private compaction snapshot (_get_compaction_snapshot), which
    the SDK gives only SQLiteSession itself: a plain subclass of SQLiteSession fails it
    too
  TestOpenAIResponsesCompactionSession::test_settled_pop_failure_invalidates_response_chain
    pauses a sqlite3.Connection's commit injected through the private _get_connection
  TestOpenAIResponsesCompactionSession::test_settled_clear_failure_invalidates_response_chain
    pauses a sqlite3.Connection's commit injected through the private _get_connection
tests/sandbox/integration_tests/test_runner_pause_resume.py
  test_runner_preserves_unix_local_lifecycle_state_across_pause_and_resume
    looks for its stand-in rclone in a login shell (sh -lc), whose PATH Debian's
    /etc/profile sets anew, so the stand-in is not found (the SDK marks the test
    requires_native_macos_sandbox)
tests/sandbox/test_unix_local_special_files.py
  test_public_file_operations_reject_peerless_fifo
    gives a child python3 15 s to import the SDK and meet a FIFO, which a machine busy
    with the rest of cargo test does not always leave it
  test_fifo_replacement_is_rejected_before_io
    gives a child python3 15 s to import the SDK and meet a FIFO, which a machine busy
    with the rest of cargo test does not always leave it
  test_regular_file_lease_rejected
    gives a child python3 10 s to import the SDK and meet a leased file, which a machine
    busy with the rest of cargo test does not always leave it
tests/sandbox/test_dependencies.py
  test_dependencies_eager_factory_failure_allows_retry
    needs Python 3.12's eager task factory (the SDK skips it before 3.12)
tests/sandbox/test_runtime.py
  test_unix_local_exec_confines_commands_to_workspace_root
    needs macOS's sandbox-exec (the SDK skips it elsewhere)
  test_unix_local_exec_denies_launch_services
    needs macOS's sandbox-exec (the SDK skips it elsewhere)
tests/sandbox/test_unix_local.py
  TestUnixLocalApplyPatchRename::test_case_only_move_to_keeps_the_file
    needs a file system that folds case, as macOS's does (the SDK skips it elsewhere)
  test_apply_patch_create_reports_collision_inside_a_read_only_parent
    needs a user that directory permissions hold (the SDK skips it as root)
tests/sandbox/test_unix_local_file_io.py
  test_apply_patch_can_write_existing_destination_in_protected_directory
    needs a user that directory permissions hold (the SDK skips it as root)
  test_apply_patch_case_alias_on_real_filesystem
    needs a file system that folds case, as macOS's does (the SDK skips it elsewhere)
tests/sandbox/test_workspace_paths.py
  test_extra_path_grant_accepts_native_windows_drive_absolute_path
    needs Windows drive paths (the SDK skips it elsewhere)
  test_split_path_grant_rejects_native_windows_sandbox_path
    needs Windows drive paths (the SDK skips it elsewhere)
"""


def _deselected(table: str) -> Dict[str, str]:
    out: Dict[str, str] = {}
    suite = name = ""
    for line in table.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            suite = line.strip()
        elif not line.startswith("    "):
            name = f"{suite}::{line.strip()}"
            out[name] = ""
        else:
            out[name] = (out[name] + " " + line.strip()).strip()
    return out


DESELECTED: Dict[str, str] = _deselected(_DESELECTED)


# -- swapping, deselecting, counting -------------------------------------------------------

_current: Dict[str, Any] = {"nodeid": None, "forktrail": set()}
_lock = threading.Lock()


def _record_construction() -> None:
    with _lock:
        if _current["nodeid"] is not None:
            _current["forktrail"].add(_current["nodeid"])


def pytest_configure(config: pytest.Config) -> None:
    import agents
    import agents.extensions.memory
    import agents.extensions.memory.advanced_sqlite_session  # noqa: F401  (the real one, first)
    import agents.memory

    agents.SQLiteSession = ForktrailSQLiteSession  # type: ignore[attr-defined]
    agents.memory.SQLiteSession = ForktrailSQLiteSession  # type: ignore[attr-defined]
    agents.extensions.memory.AdvancedSQLiteSession = ForktrailAdvancedSQLiteSession  # type: ignore[attr-defined]
    config.addinivalue_line("markers", "forktrail: run on ForktrailSession")


def _base(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    # A name that matches nothing in a suite that ran (a test renamed in another SDK
    # version) is an error, not a silent pass.
    files = {item.nodeid.split("::", 1)[0] for item in items}
    names = {item.nodeid for item in items} | {_base(item.nodeid) for item in items}
    stale = [n for n in DESELECTED if n.split("::", 1)[0] in files and n not in names]
    if stale:
        raise pytest.UsageError("deselected tests not found: " + ", ".join(stale))
    keep, drop = [], []
    for item in items:
        (drop if item.nodeid in DESELECTED or _base(item.nodeid) in DESELECTED else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    _summary["deselected"] = [i.nodeid for i in drop]


_summary: Dict[str, Any] = {"outcomes": {}, "deselected": []}


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    with _lock:
        _current["nodeid"] = nodeid


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    outcomes = _summary["outcomes"]
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        outcomes[report.nodeid] = report.outcome
    elif report.when == "teardown" and report.outcome == "failed":
        outcomes[report.nodeid] = "failed"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = os.environ.get("FORKTRAIL_SDK_REPORT")
    if not path:
        return
    report = {
        "outcomes": _summary["outcomes"],
        "deselected": _summary["deselected"],
        "on_forktrail": sorted(_current["forktrail"]),
        "reasons": {n: DESELECTED.get(n, DESELECTED.get(_base(n), "")) for n in _summary["deselected"]},
    }
    Path(path).write_text(json.dumps(report, indent=1))
