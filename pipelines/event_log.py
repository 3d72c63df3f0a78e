"""The event log of a home's Dagster instance: Dagster's SQLite event log, made cheaper per event.

A ranged run of a month writes about 2,000 events: each asset's planned and done materialization of every day,
every step's start and end. Dagster's SQLite storage builds a new SQLAlchemy engine for every read and write, so
each statement is compiled again and each event is its own transaction: 11-17 ms a materialization on the 2-core
machine, a tenth of a month's backfill. This storage differs in these ways only, and stores the same rows:

- one engine per database file for the life of the process: statements are compiled once;
- its connections kept open between uses (SQLAlchemy's default pool for a SQLite file, where Dagster's storage
  asks for none; every use holds the storage's lock, so one connection serves). The files are in WAL mode, where
  closing a file's last connection checkpoints the WAL into the database and deletes it: with a connection per
  use, as Dagster's storage opens them, every event paid a checkpoint (a one-day run: 983 closes, 0.4 s, and
  1.2 s in connecting of a 6.6 s profile). An open connection holds no lock between transactions (the pool rolls
  back whatever a use left open), so other processes write the same files as before;
- `synchronous=NORMAL`, SQLite's setting for WAL: a commit is written to the WAL without waiting for the disk
  (884 commits of a one-day run: 0.59 s -> 0.07 s). A process that is killed loses nothing; a power cut can lose
  the last events before it, never the file, and a run whose events stop short is marked failed by run
  monitoring (dagster.yaml);
- whether the index has a table (Dagster asks before storing each check evaluation and each materialization's
  tags, with an engine and a connection made for the question: 2% of a one-day run) is asked once: a table, once
  there, stays (Dagster's migrations only add them);
- the events Dagster hands over as one batch (a run's planned materializations, a step's materializations of its
  days) are written in two transactions, one per database file, instead of two per event.

Dagster batches only when `DAGSTER_EVENT_BATCH_SIZE` is set; a process using this storage sets it (unless the
user has) so that `tokenledger run`, `dagster asset materialize` and the UI's runs all write the same way.
dagster.yaml (tokenledger/cli.py) names this class; the files are those of Dagster's default storage, so an
instance can switch to it and back.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from dagster._config import Field, StringSource
from dagster._core.errors import DagsterInvariantViolationError
from dagster._core.events import ASSET_CHECK_EVENTS, ASSET_EVENTS
from dagster._core.events.log import EventLogEntry
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.sql import create_engine
from dagster._core.storage.sqlalchemy_compat import db_result
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from dagster._serdes import ConfigurableClassData
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import QueuePool

# Events per batch: a month's planned materializations (27 assets x 31 days) fit in one.
BATCH_SIZE = "1000"
# Engines kept per process: a run writes to its own file and the index; the UI reads many runs' files.
MAX_ENGINES = 32
_BATCHED = ASSET_EVENTS | ASSET_CHECK_EVENTS


def _relaxed_sync(dbapi_connection: Any, _record: Any) -> None:
    """SQLite's recommended durability for WAL mode (module docstring), on each connection as it is opened."""
    dbapi_connection.execute("PRAGMA synchronous=NORMAL")


class LedgerEventLogStorage(SqliteEventLogStorage):
    """SqliteEventLogStorage keeping its engines and writing Dagster's event batches whole (module docstring)."""

    def __init__(self, base_dir: str | None = None, inst_data: ConfigurableClassData | None = None):
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._tables_present: set[str] = set()
        os.environ.setdefault("DAGSTER_EVENT_BATCH_SIZE", BATCH_SIZE)
        # Where Dagster's default storage keeps the event log: $DAGSTER_HOME/storage.
        super().__init__(base_dir or os.path.join(os.environ["DAGSTER_HOME"], "storage"), inst_data)

    @classmethod
    def config_type(cls) -> dict[str, Any]:
        return {"base_dir": Field(StringSource, is_required=False)}

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData | None, config_value: dict[str, Any]
                          ) -> LedgerEventLogStorage:
        return cls(inst_data=inst_data, **config_value)

    def _engine(self, shard: str) -> Engine:
        engine = self._engines.pop(shard, None)
        if engine is None:
            engine = create_engine(self.conn_string_for_shard(shard), poolclass=QueuePool,
                                   connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
            event.listen(engine, "connect", _relaxed_sync)
            while len(self._engines) >= MAX_ENGINES:
                self._engines.popitem(last=False)[1].dispose()
        self._engines[shard] = engine  # most recently used last
        return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        # As SqliteEventLogStorage._connect, with the shard's engine kept instead of made and disposed each time.
        with self._db_lock:
            engine = self._engine(shard)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    def has_table(self, table_name: str) -> bool:
        """As Dagster's, asked once per table that is there (module docstring); a missing one is asked again."""
        if table_name not in self._tables_present and super().has_table(table_name):
            self._tables_present.add(table_name)
        return table_name in self._tables_present

    def store_event_batch(self, events: Sequence[EventLogEntry]) -> None:
        """A batch of asset and asset-check events of one run (what Dagster batches: a run's planned
        materializations and checks, a step's materializations of its days), stored exactly as `store_event`
        stores each, in order, in one transaction per database file; any other batch event by event."""
        run_ids = {event.run_id for event in events}
        if len(run_ids) != 1 or not all(e.is_dagster_event and e.dagster_event_type in _BATCHED for e in events):
            for event in events:
                self.store_event(event)
            return
        statements = [self.prepare_insert_event(event) for event in events]
        with self.run_connection(run_ids.pop()) as conn:
            for statement in statements:
                conn.execute(statement)
        # Mirrored in the cross-run index, as store_event mirrors each.
        checks = []
        with self.index_transaction() as conn:
            asset_events, asset_ids = [], []
            for event, statement in zip(events, statements, strict=True):
                with db_result(conn, statement) as result:
                    event_id = result.inserted_primary_key[0]
                if event_id is None:
                    raise DagsterInvariantViolationError("Cannot store asset event tags for null event id.")
                if event.dagster_event_type in ASSET_EVENTS:
                    asset_events.append(event)
                    asset_ids.append(event_id)
                else:
                    checks.append((event, event_id))
            self._store_asset_event_tags(conn, asset_events, asset_ids)
            for event, event_id in zip(asset_events, asset_ids, strict=True):
                self._store_asset_event(conn, event, event_id)
        for event, event_id in checks:  # each opens its own index connection, as after store_event's
            self.store_asset_check_event(event, event_id)

    def dispose(self) -> None:
        super().dispose()
        while self._engines:
            self._engines.popitem()[1].dispose()
