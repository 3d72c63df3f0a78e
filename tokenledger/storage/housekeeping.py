"""What a run holds while it lives, and what a later run cleans up after one that was killed.

- **Day locks.** A run holds an exclusive lock per UTC day it computes (`.locks/day=YYYY-MM-DD.lock`, or with the
  Postgres instance an advisory lock of the database, shared by every machine) from its start to its end, so two
  runs of one day never interleave their lake files: the second waits, then recomputes the day whole. Days are
  locked in order, so ranged runs that overlap cannot deadlock. The kernel (or the database, when the connection
  drops) releases the locks of a process that dies, so a killed run never blocks the next one.
- **Liveness.** A step's scratch folder (`tmp/step-*`) holds a lock file for as long as the step runs; a run
  records its process in `.locks/runs/<run_id>.json`; temporary files carry their writer's process id in their
  name. Anything whose owner is gone is an orphan.
- **Cleaning.** At the start of every run (and of `tokenledger run`) orphans are removed: scratch folders and
  staging folders of dead processes, temporary files of dead processes in the lake folders of the run's days and
  in the reports folder, and the Dagster runs of dead processes still marked as started are marked failed, with
  a message saying the process was killed (pipelines/resources.py, from `dead_runs`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
from collections.abc import Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from datetime import date
from pathlib import Path
from typing import Any

from tokenledger.errors import LedgerError
from tokenledger.storage import atomic, locks
from tokenledger.storage.layout import HomeLayout

STEP_LOCK = ".in-use.lock"
_PID = re.compile(r"(?:^|[.-])pid(\d+)(?:[.-]|$)")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _pid_in_name(name: str) -> int | None:
    """The writer's process id in a temporary name (`...pid<pid>...`, tokenledger/storage/atomic.py), if any."""
    match = _PID.search(name)
    return int(match.group(1)) if match else None


# --- locks ---------------------------------------------------------------------------------------------------------

# The Postgres instance's URL (docs/operations.md): when set, day locks are the database's advisory locks.
POSTGRES_URL_ENV = "TOKENLEDGER_DAGSTER_POSTGRES_URL"


def postgres_url() -> str | None:
    """The Postgres instance's URL from the environment, or None for the SQLite default."""
    return os.environ.get(POSTGRES_URL_ENV) or None


class LostHold(LedgerError):
    """A run no longer holds a day it computed: it must not publish it."""


@contextmanager
def day_locks(layout: HomeLayout, days: Iterable[date], waiting: Any = None,
              published: Mapping[str, int] | None = None) -> Iterator[dict[str, int]]:
    """Hold the lock of every day in `days` (in date order); `waiting(day)` is called before blocking on one.

    Yields the generation taken for each day (ISO day -> number): one more than any taken before, and than the
    generation `published` says the day was last published with (a lock store reset, or a new work folder, never
    hands out a number already used). The publication of the day carries it, and is refused when it is older than
    the one the published day holds; `verify_hold` tells whether the run still holds the day (fencing: a run that
    lost its lock never publishes, docs/adr/0109-a-publication-is-fenced-by-its-day-generation.md).

    With the Postgres instance (TOKENLEDGER_DAGSTER_POSTGRES_URL), the locks are the database's advisory locks,
    which every machine of a deployment shares, and the generations a table of that database; otherwise lock files
    in the home, which every process of one machine shares, with the generations beside them."""
    floor = dict(published or {})
    if url := postgres_url():
        with _advisory_day_locks(url, layout, days, waiting, floor) as generations:
            yield generations
        return
    with ExitStack() as stack:
        generations: dict[str, int] = {}
        for day in sorted(set(days)):
            path = _lock_file(layout, day)
            handle = locks.acquire(path, blocking=False)
            if handle is None:
                if waiting:
                    waiting(day)
                handle = locks.acquire(path)
            stack.callback(handle.close)
            number = max(_local_generation(layout, day), floor.get(day.isoformat(), 0)) + 1
            atomic.write_text(_generation_file(layout, day), f"{number}\n")
            generations[day.isoformat()] = number
        yield generations


def _lock_file(layout: HomeLayout, day: date) -> Path:
    return layout.locks / f"day={day.isoformat()}.lock"


def _generation_file(layout: HomeLayout, day: date) -> Path:
    return layout.locks / f"day={day.isoformat()}.generation"


def _local_generation(layout: HomeLayout, day: date) -> int:
    try:
        return int(_generation_file(layout, day).read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def verify_hold(layout: HomeLayout, generations: Mapping[str, int]) -> None:
    """Raise LostHold unless each day of `generations` is still locked under that generation: by this run, from
    whichever process asks (the one holding the locks, or a step of the run executed elsewhere)."""
    if url := postgres_url():
        _verify_advisory(url, layout, generations)
        return
    for iso, number in sorted(generations.items()):
        day = date.fromisoformat(iso)
        if not _generation_file(layout, day).exists():
            # Never locked from this folder: the run is held in another work folder (a worker of a bucket home on
            # another host; more than one host takes the Postgres instance, docs/deploying.md). The commit's own
            # generation check still applies.
            continue
        handle = locks.acquire(_lock_file(layout, day), blocking=False)
        if handle is not None:  # nobody holds the day: the run holding it ended
            handle.close()
            raise LostHold(_lost(iso, number, "its lock is no longer held (the process holding the run's days "
                                              "ended)"))
        if (now := _local_generation(layout, day)) != number:
            raise LostHold(_lost(iso, number, f"another run has taken the day since (generation {now})"))


def _lost(day: str, number: int, why: str) -> str:
    return (f"this run no longer holds {day} (generation {number}): {why}, so it publishes nothing of it. "
            "Re-run the day if no other run is computing it; what was published stays as it was.")


@contextmanager
def instance_lock(name: str, local: Path) -> Iterator[None]:
    """Hold a lock every process of the Dagster instance shares, for the block: with the Postgres instance, an
    advisory lock of its database (every host of a deployment), else the lock file `local` (every process of this
    host, which alone uses a home's SQLite instance). Waits for it."""
    if url := postgres_url():
        key = int.from_bytes(hashlib.sha256(f"tokenledger {name}".encode()).digest()[:8], "big", signed=True)
        connection = _connect(url)
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_lock(%s)", (key,))
            yield
        finally:
            connection.close()  # the server releases the lock with the session
        return
    with locks.exclusive(local):
        yield


def advisory_key(layout: HomeLayout, day: date) -> int:
    """The advisory lock of a home's day: a signed 64-bit number from the home as users name it and the day."""
    digest = hashlib.sha256(f"tokenledger day lock {layout.name} {day.isoformat()}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


# One row per locked day of every home: the last generation handed out and the server process holding the lock.
_LEASES = ("CREATE TABLE IF NOT EXISTS tokenledger_day_leases (lock_key bigint PRIMARY KEY, "
           "generation bigint NOT NULL, holder_pid integer NOT NULL)")
_TAKE = ("INSERT INTO tokenledger_day_leases AS l (lock_key, generation, holder_pid) "
         "VALUES (%(key)s, %(floor)s + 1, pg_backend_pid()) ON CONFLICT (lock_key) DO UPDATE "
         "SET generation = GREATEST(l.generation, %(floor)s) + 1, holder_pid = pg_backend_pid() RETURNING generation")
# The lease and whether its holder's session still holds the advisory lock (a bigint key is classid:objid).
_HELD = ("SELECT l.generation, EXISTS (SELECT 1 FROM pg_locks p WHERE p.locktype = 'advisory' AND p.granted "
         "AND p.pid = l.holder_pid AND p.classid = %(high)s::bigint::oid AND p.objid = %(low)s::bigint::oid "
         "AND p.objsubid = 1) FROM tokenledger_day_leases l WHERE l.lock_key = %(key)s")


def _connect(url: str) -> Any:
    import psycopg2

    connection = psycopg2.connect(url.replace("postgresql+psycopg2://", "postgresql://", 1))
    connection.autocommit = True
    return connection


@contextmanager
def _advisory_day_locks(url: str, layout: HomeLayout, days: Iterable[date], waiting: Any,
                        floor: Mapping[str, int]) -> Iterator[dict[str, int]]:
    """Session advisory locks on a connection of this process's own: released when the block ends, or by the server
    when the process dies and its connection drops."""
    connection = _connect(url)
    try:
        generations: dict[str, int] = {}
        with connection.cursor() as cursor:
            cursor.execute(_LEASES)
            for day in sorted(set(days)):
                key = advisory_key(layout, day)
                cursor.execute("SELECT pg_try_advisory_lock(%s)", (key,))
                if not cursor.fetchone()[0]:
                    if waiting:
                        waiting(day)
                    cursor.execute("SELECT pg_advisory_lock(%s)", (key,))
                cursor.execute(_TAKE, {"key": key, "floor": floor.get(day.isoformat(), 0)})
                generations[day.isoformat()] = cursor.fetchone()[0]
        yield generations
    finally:
        connection.close()


def _verify_advisory(url: str, layout: HomeLayout, generations: Mapping[str, int]) -> None:
    connection = _connect(url)
    try:
        with connection.cursor() as cursor:
            for iso, number in sorted(generations.items()):
                key = advisory_key(layout, date.fromisoformat(iso))
                cursor.execute(_HELD, {"key": key, "high": (key >> 32) & 0xFFFFFFFF, "low": key & 0xFFFFFFFF})
                found = cursor.fetchone()
                if found is None or found[0] != number:
                    raise LostHold(_lost(iso, number, "another run has taken the day since"
                                         + (f" (generation {found[0]})" if found else "")))
                if not found[1]:
                    raise LostHold(_lost(iso, number, "the database session holding its lock ended (the "
                                                      "orchestrating process died or its connection dropped)"))
    finally:
        connection.close()


@contextmanager
def step_scratch(folder: Path) -> Iterator[Path]:
    """A scratch folder marked as in use for as long as the block runs, removed afterwards."""
    folder.mkdir(parents=True, exist_ok=True)
    handle = locks.acquire(folder / STEP_LOCK)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if handle:
            handle.close()


def register_run(layout: HomeLayout, run_id: str) -> Path:
    """Record that this process executes `run_id`, so that a later run can tell if it was killed."""
    path = layout.locks / "runs" / f"{run_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"run_id": run_id, "pid": os.getpid(), "host": socket.gethostname()}))
    return path


# --- cleaning ------------------------------------------------------------------------------------------------------

def _orphan_folders(parent: Path) -> list[Path]:
    """Scratch folders whose step lock is free (their step is gone) and staging folders of dead processes."""
    if not parent.is_dir():
        return []
    orphans = []
    for folder in parent.iterdir():
        if not folder.is_dir():
            continue
        lock = folder / STEP_LOCK
        if lock.exists():
            handle = locks.acquire(lock, blocking=False)
            if handle is not None:
                handle.close()
                orphans.append(folder)
        elif (pid := _pid_in_name(folder.name)) is not None and not _alive(pid):
            orphans.append(folder)
    return orphans


def _orphan_temporary_files(folders: Iterable[Path]) -> list[Path]:
    found = []
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            if path.name.endswith(".tmp") and (pid := _pid_in_name(path.name)) is not None and not _alive(pid):
                found.append(path)
    return found


def _day_folders(layout: HomeLayout, days: Iterable[date]) -> list[Path]:
    """The lake folders of the days: where a killed step of those days left its temporary files."""
    names = {f"day={d.isoformat()}" for d in days}
    if not names or not layout.lake.is_dir():
        return []
    return [table / name for schema in layout.lake.iterdir() if schema.is_dir()
            for table in schema.iterdir() if table.is_dir() for name in names if (table / name).is_dir()]


def clean_orphans(layout: HomeLayout, days: Iterable[date] = ()) -> list[Path]:
    """Remove what killed runs left behind (see the module's docstring); returns what was removed."""
    removed = _orphan_folders(layout.scratch) + _orphan_folders(layout.published / "staging")
    for folder in removed:
        shutil.rmtree(folder, ignore_errors=True)
    files = _orphan_temporary_files([*_day_folders(layout, days), layout.reports, layout.published,
                                     layout.exports.parent])
    for path in files:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return removed + files


def dead_runs(layout: HomeLayout) -> list[dict[str, Any]]:
    """Runs recorded on this host whose process is gone (killed, or the machine restarted)."""
    folder = layout.locks / "runs"
    if not folder.is_dir():
        return []
    host = socket.gethostname()
    found = []
    for path in folder.glob("*.json"):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
            continue
        if record.get("host") == host and not _alive(int(record.get("pid", 0))):
            found.append({**record, "file": path})
    return found
