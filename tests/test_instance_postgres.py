"""A home whose Dagster instance is PostgreSQL (pipelines/instance.py), against a real server.

The fixture starts a private PostgreSQL cluster (Debian's `postgresql` package: initdb, pg_ctl) on 127.0.0.1 on a
free port, with password logins, and stops it after the session. One day of a handful of requests is run by
`tokenledger run` on a home pointed at it and on a SQLite home: the run, its materializations and its check
evaluations must be in Postgres and nowhere under the home's .dagster, and the published tables the same as the
SQLite home's. Where the server cannot be started the tests are skipped, except under CI=true, where they fail.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
from tokenledger.pipelines.instance import POSTGRES_URL_ENV, POSTGRES_YAML, SQLITE_YAML

from tests.conftest import gateway_dir, make_home, request, write_jsonl
from tests.servers import free_port, unavailable

DAY = "2026-11-16"
USER, PASSWORD, DATABASE = "tokenledger", "s3cret-pg-Pa55", "dagster"


@dataclass(frozen=True)
class Server:
    port: int

    def url(self, password: str = PASSWORD, database: str = DATABASE) -> str:
        return f"postgresql+psycopg2://{USER}:{password}@127.0.0.1:{self.port}/{database}"


def _unavailable(reason: str) -> None:
    unavailable(reason, "the Postgres instance tests", "apt-get install postgresql")


@pytest.fixture(scope="session")
def postgres() -> Iterator[Server]:
    """A PostgreSQL cluster of its own in a temporary folder, on 127.0.0.1, with the database `dagster`."""
    try:
        import psycopg2
    except ImportError:
        _unavailable("psycopg2 (dagster-postgres, in the dev extra) is not installed")
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    bin_dir = found[-1].parent if found else (Path(shutil.which("initdb")).parent if shutil.which("initdb") else None)
    if bin_dir is None:
        _unavailable("no PostgreSQL server binaries (initdb, pg_ctl) on this machine")
    # The server refuses to run as root: as root, it runs as the package's `postgres` user (or nobody).
    as_user: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="tokenledger-pg-"))
    if os.geteuid() == 0:
        user = next((u for u in ("postgres", "nobody") if _user_exists(u)), None)
        if user is None:
            _unavailable("running as root with no postgres or nobody user to run the server as")
        as_user = ["runuser", "-u", user, "--"]
        os.chown(folder, pwd.getpwnam(user).pw_uid, -1)
    pwfile = folder / "password"
    pwfile.write_text(PASSWORD + "\n")
    os.chmod(pwfile, 0o644)
    port, data = free_port(), folder / "data"
    started = False
    try:
        subprocess.run([*as_user, str(bin_dir / "initdb"), "-D", str(data), "-U", USER, "--pwfile", str(pwfile),
                        "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync"],
                       check=True, capture_output=True, cwd=folder)
        # fsync off: a test cluster, thrown away after.
        done = subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(folder / "log"), "-w",
                               "-t", "30", "-o", f"-k {folder} -h 127.0.0.1 -p {port} -F", "start"],
                              capture_output=True, text=True, cwd=folder)
        if done.returncode != 0:
            log = (folder / "log").read_text() if (folder / "log").exists() else ""
            _unavailable(f"the PostgreSQL server did not start: {done.stdout}{done.stderr}{log}"[-2000:])
        started = True
        server = Server(port)
        with contextlib.closing(psycopg2.connect(user=USER, password=PASSWORD, host="127.0.0.1", port=port,
                                                 dbname="postgres")) as conn:
            conn.autocommit = True
            conn.cursor().execute(f"CREATE DATABASE {DATABASE}")
        yield server
    finally:
        if started:
            subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                           capture_output=True, cwd=folder)
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def database(server: Server, prefix: str = "production") -> Iterator[str]:
    """A database of its own on the Postgres cluster (other tests' runs are not this one's), its URL; dropped after
    (its sessions ended) unless the test dropped it."""
    import psycopg2

    name = f"{prefix}_{uuid.uuid4().hex[:8]}"

    def execute(statement: str) -> None:
        with contextlib.closing(psycopg2.connect(user=USER, password=PASSWORD, host="127.0.0.1", port=server.port,
                                                 dbname="postgres")) as conn:
            conn.autocommit = True
            conn.cursor().execute(statement)

    execute(f"CREATE DATABASE {name}")
    try:
        yield server.url(database=name)
    finally:
        execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def drop_database(server: Server, url: str) -> None:
    """Drop the database of `url` at once, ending its sessions: an instance whose storage is gone for good."""
    import psycopg2

    name = url.rsplit("/", 1)[1]
    with contextlib.closing(psycopg2.connect(user=USER, password=PASSWORD, host="127.0.0.1", port=server.port,
                                             dbname="postgres")) as conn:
        conn.autocommit = True
        conn.cursor().execute(f"DROP DATABASE {name} WITH (FORCE)")


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _home(root: Path) -> Path:
    """A home with one day of six requests of m70, its other days idle (as the `home` fixture's)."""
    home = make_home(root)
    write_jsonl(gateway_dir(home, DAY) / "gw.jsonl",
                [request(f"r{i}", received_at=f"{DAY}T{10 + i}:00:00Z", input_tokens=1000 + 100 * i)
                 for i in range(6)])
    return home


def _run(home: Path, monkeypatch: pytest.MonkeyPatch, url: str | None) -> tuple[int, str, str]:
    """`tokenledger run` of DAY on `home` in this process, with the instance `url` selects (SQLite for None)."""
    from tokenledger.cli import main

    if url:
        monkeypatch.setenv(POSTGRES_URL_ENV, url)
    else:
        monkeypatch.delenv(POSTGRES_URL_ENV, raising=False)
    monkeypatch.setenv("TOKENLEDGER_IDLE_DAYS", "all")
    for name in ("TOKENLEDGER_HOME", "DAGSTER_HOME", "PGCONNECT_TIMEOUT"):  # main() sets them: restored after
        monkeypatch.setenv(name, os.environ.get(name, ""))
    monkeypatch.delenv("PGCONNECT_TIMEOUT")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["run", "--home", str(home), "--start", DAY])
    return code, out.getvalue(), err.getvalue()


def _published(home: Path) -> dict[str, list[tuple]]:
    """Every published file's rows, ORDER BY ALL, with the home's own path taken out of the values."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    exports = home / "exports"
    out = {}
    for path in sorted(p for p in exports.rglob("*") if p.suffix in (".parquet", ".csv")):
        reader = "read_parquet" if path.suffix == ".parquet" else "read_csv"
        rows = con.execute(f"SELECT * FROM {reader}($p) ORDER BY ALL", {"p": str(path)}).fetchall()
        out[str(path.relative_to(exports))] = [
            tuple(v.replace(str(home), "$HOME") if isinstance(v, str) else v for v in row) for row in rows]
    return out


def _sqlite_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.is_file() and p.open("rb").read(16) == b"SQLite format 3\x00")


def test_a_day_run_on_a_postgres_instance_is_recorded_there_and_publishes_what_sqlite_does(
        postgres: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dagster as dg
    import psycopg2
    from tokenledger.pipelines.definitions import defs

    pg_home, sqlite_home = _home(tmp_path / "pg" / "home"), _home(tmp_path / "sqlite" / "home")
    code, out, err = _run(pg_home, monkeypatch, postgres.url())
    assert code == 0, out + err
    assert f"{DAY}  published" in out
    instance_yaml = (pg_home / ".dagster" / "dagster.yaml").read_text()
    assert instance_yaml == POSTGRES_YAML and PASSWORD not in instance_yaml
    # Nothing of the instance in SQLite files under the home: no runs.db, no event log, no schedules.db.
    assert _sqlite_files(pg_home / ".dagster") == []

    code, out, err = _run(sqlite_home, monkeypatch, None)
    assert code == 0, out + err
    assert (sqlite_home / ".dagster" / "dagster.yaml").read_text() == SQLITE_YAML
    assert "history/runs.db" in _sqlite_files(sqlite_home / ".dagster")
    published = _published(pg_home)
    assert published == _published(sqlite_home)
    assert "finance/cost_per_mtok_daily/day=2026-11-16/data.parquet" in published

    graph = defs.resolve_asset_graph()
    assets = graph.get_all_asset_keys()
    checks = {}
    for name, home, url in (("pg", pg_home, postgres.url()), ("sqlite", sqlite_home, None)):
        monkeypatch.setenv("DAGSTER_HOME", str(home / ".dagster"))
        if url:
            monkeypatch.setenv(POSTGRES_URL_ENV, url)
        with dg.DagsterInstance.get() as instance:
            storages = {type(s).__name__ for s in (instance.run_storage, instance.event_log_storage,
                                                   instance.schedule_storage)}
            runs = instance.get_runs()
            assert [(r.status, r.tags.get("dagster/partition")) for r in runs] == [(dg.DagsterRunStatus.SUCCESS,
                                                                                    DAY)]
            latest = instance.get_latest_materialization_event(dg.AssetKey(["finance", "cost_per_mtok_daily"]))
            assert (latest.run_id, latest.dagster_event.partition) == (runs[0].run_id, DAY)
            # Every asset of the job (27) materialized once, for the day.
            done = instance.get_event_records(dg.EventRecordsFilter(dg.DagsterEventType.ASSET_MATERIALIZATION),
                                              limit=1000)
            assert sorted(r.event_log_entry.dagster_event.asset_key for r in done) == sorted(assets)
            checks[name] = sorted(
                (key.to_user_string(), r.status.value, r.run_id == runs[0].run_id) for key in graph.asset_check_keys
                for r in instance.event_log_storage.get_asset_check_execution_history(key, limit=10))
            if url:
                assert storages == {"PostgresRunStorage", "PostgresEventLogStorage", "PostgresScheduleStorage"}
            else:
                assert storages == {"SqliteRunStorage", "LedgerEventLogStorage", "SqliteScheduleStorage"}
        monkeypatch.delenv(POSTGRES_URL_ENV, raising=False)
    assert checks["pg"] == checks["sqlite"]
    # Each check evaluated once, in the run (the checks of the unpartitioned tables keep a planned record as well).
    evaluated = [key for key, status, in_run in checks["pg"] if status != "PLANNED" and in_run]
    assert sorted(evaluated) == sorted(key.to_user_string() for key in graph.asset_check_keys)
    # Warnings a day of six m70 requests and no bill raises, the same on both instances; they do not stop the day.
    assert [key for key, status, _ in checks["pg"] if status == "FAILED"] == [
        "core/billing_charges:billing_fresh", "core/gateway_requests:deployments_with_requests"]

    # The rows themselves, in the server's tables.
    with contextlib.closing(psycopg2.connect(user=USER, password=PASSWORD, host="127.0.0.1", port=postgres.port,
                                             dbname=DATABASE)) as conn, conn.cursor() as cur:
        counts = {}
        for table, where in (("runs", "status = 'SUCCESS'"), ("event_logs", "dagster_event_type = "
                                                                            "'ASSET_MATERIALIZATION'"),
                             ("asset_keys", "true"), ("asset_check_executions", "execution_status <> 'PLANNED'")):
            cur.execute(f"SELECT count(*) FROM {table} WHERE {where}")
            counts[table] = cur.fetchone()[0]
        cur.execute("SELECT count(*) FROM information_schema.tables WHERE table_name IN ('jobs', 'job_ticks', "
                    "'instigators')")
        schedule_tables = cur.fetchone()[0]
    assert counts == {"runs": 1, "event_logs": len(assets), "asset_keys": len(assets),
                      "asset_check_executions": len(graph.asset_check_keys)}
    assert schedule_tables == 3


def _said(code_out_err: tuple[int, str, str]) -> tuple[int, list[str]]:
    code, out, err = code_out_err
    return code, [line for line in (out + err).splitlines() if line.strip()]


def test_an_unreachable_server_or_a_wrong_password_fails_the_run_in_one_line(
        postgres: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _home(tmp_path / "home")
    nothing_there = free_port()
    code, lines = _said(_run(home, monkeypatch, Server(nothing_there).url()))
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"error: cannot open the Dagster instance's PostgreSQL database 127.0.0.1:"
                               f"{nothing_there}/dagster (")
    assert "Connection refused" in lines[0] and "check that the server is running" in lines[0]
    assert PASSWORD not in lines[0]

    code, lines = _said(_run(home, monkeypatch, postgres.url(password="not-the-password")))
    assert code == 2 and len(lines) == 1, lines
    assert f"127.0.0.1:{postgres.port}/dagster" in lines[0] and "password authentication failed" in lines[0]
    assert f"check the user ({USER}) and password in {POSTGRES_URL_ENV}" in lines[0]
    assert "not-the-password" not in lines[0] and PASSWORD not in lines[0]
    assert not list((home / "lake").rglob("*.parquet"))  # nothing ran


def test_a_url_dagster_cannot_use_is_refused_without_echoing_the_password(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    home = _home(tmp_path / "home")
    for url, says in ((f"postgresql://{USER}:{PASSWORD}@127.0.0.1:5432/{DATABASE}", "not postgresql://..."),
                      (f"postgres://{USER}:{PASSWORD}@127.0.0.1:5432/{DATABASE}", "not postgres://..."),
                      (f"postgresql+psycopg2://{USER}:{PASSWORD}@127.0.0.1:5432/{DATABASE}?notanoption=1",
                       "not a valid")):
        code, lines = _said(_run(home, monkeypatch, url))
        assert code == 2 and len(lines) == 1 and says in lines[0], lines
        assert PASSWORD not in lines[0]
    # Nothing was run, and the dagster.yaml written is the Postgres one, without the URL.
    assert (home / ".dagster" / "dagster.yaml").read_text() == POSTGRES_YAML


_HOLD_DAY = """
import sys
from datetime import date
from tokenledger.storage.housekeeping import day_locks
from tokenledger.storage.layout import HomeLayout
with day_locks(HomeLayout.of(sys.argv[1]), [date.fromisoformat(sys.argv[2])],
               waiting=lambda day: print(f"waiting for {day}", flush=True)):
    print("holding", sys.argv[2], flush=True)
"""


def test_with_a_postgres_instance_day_locks_are_its_advisory_locks(postgres: Server, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import date

    from tokenledger.storage.housekeeping import day_locks
    from tokenledger.storage.layout import HomeLayout

    monkeypatch.setenv(POSTGRES_URL_ENV, postgres.url())
    home = tmp_path / "home"

    def take(day: str) -> subprocess.Popen:
        # Another process of another work folder: only the database can make it wait.
        return subprocess.Popen([sys.executable, "-c", _HOLD_DAY, str(home), day], stdout=subprocess.PIPE,
                                text=True, env={**os.environ, "TOKENLEDGER_WORK_DIR": str(tmp_path / "other")})

    with day_locks(HomeLayout.of(home), [date(2026, 11, 16)]):
        same = take("2026-11-16")
        assert same.stdout.readline() == "waiting for 2026-11-16\n"
        other = take("2026-11-17")  # another day of the home is not held
        assert other.communicate(timeout=60)[0] == "holding 2026-11-17\n"
        assert same.poll() is None
    assert same.communicate(timeout=60)[0] == "holding 2026-11-16\n"
    assert not (home / ".locks").exists()  # nothing on disk: the server held them


def test_a_run_whose_lock_is_revoked_mid_run_cannot_publish(postgres: Server, tmp_path: Path) -> None:
    """The day's advisory lock is lost while the run computes (its database session ended, as when the server
    restarts); then a later run takes and publishes the day. The paused run must publish nothing when resumed, and
    say why; the day is the later run's, under generation 2."""
    import time
    from datetime import date

    import psycopg2

    from tokenledger.storage.housekeeping import advisory_key
    from tokenledger.storage.layout import HomeLayout

    home = _home(tmp_path / "home")
    key = advisory_key(HomeLayout.of(home), date.fromisoformat(DAY))  # the session's cluster serves other tests too
    release = tmp_path / "release"
    env = {**os.environ, POSTGRES_URL_ENV: postgres.url(), "TOKENLEDGER_IDLE_DAYS": "all",
           "TOKENLEDGER_HOME": str(home), "DAGSTER_HOME": str(home / ".dagster")}
    command = [sys.executable, "-m", "tokenledger.cli", "run", "--home", str(home), "--start", DAY]
    paused = subprocess.Popen(command, env={**env, "TOKENLEDGER_FAILPOINT": f"publish:staged:wait:{release}"},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 300
        while not (tmp_path / "release.reached").exists():
            assert paused.poll() is None and time.monotonic() < deadline, paused.communicate()[0]
            time.sleep(0.2)
        with contextlib.closing(psycopg2.connect(user=USER, password=PASSWORD, host="127.0.0.1",
                                                 port=postgres.port, dbname=DATABASE)) as conn:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("SELECT generation, pg_terminate_backend(holder_pid) FROM tokenledger_day_leases "
                            "WHERE lock_key = %s", (key,))
                assert cur.fetchall() == [(1, True)]
        later = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        assert later.returncode == 0, later.stdout + later.stderr
        assert f"{DAY}  published" in later.stdout
        published = _published(home)
        release.touch()
        out = paused.communicate(timeout=300)[0]
    finally:
        release.touch()
        if paused.poll() is None:
            paused.kill()
    assert paused.returncode == 1, out
    assert f"this run no longer holds {DAY} (generation 1): another run has taken the day since (generation 2)" \
        in out, out
    assert "Traceback" not in out
    assert _published(home) == published  # the later run's day, untouched
    with contextlib.closing(psycopg2.connect(user=USER, password=PASSWORD, host="127.0.0.1", port=postgres.port,
                                             dbname=DATABASE)) as conn, conn.cursor() as cur:
        cur.execute("SELECT generation FROM tokenledger_day_leases WHERE lock_key = %s", (key,))
        assert cur.fetchall() == [(2,)]
    generations = json.loads(next((home / ".published").glob("v*/.generations.json")).read_text())
    assert generations == {DAY: 2}


def test_a_run_whose_lock_session_ended_cannot_publish_even_if_no_one_took_the_day(
        postgres: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import date

    import psycopg2

    from tokenledger.storage.housekeeping import LostHold, advisory_key, day_locks, verify_hold
    from tokenledger.storage.layout import HomeLayout

    monkeypatch.setenv(POSTGRES_URL_ENV, postgres.url())
    layout = HomeLayout.of(tmp_path / "home")
    with day_locks(layout, [date(2026, 11, 20)], published={"2026-11-20": 4}) as held:
        assert held == {"2026-11-20": 5}  # above what the day was last published with
        verify_hold(layout, held)  # from another session of the database, as a step on a worker asks
        with contextlib.closing(psycopg2.connect(user=USER, password=PASSWORD, host="127.0.0.1",
                                                 port=postgres.port, dbname=DATABASE)) as conn:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("SELECT pg_terminate_backend(holder_pid) FROM tokenledger_day_leases "
                            "WHERE lock_key = %s", (advisory_key(layout, date(2026, 11, 20)),))
        with pytest.raises(LostHold, match="the database session holding its lock ended"):
            verify_hold(layout, held)


@pytest.mark.distributed  # a real Dagster daemon: make test-distributed
def test_a_daemon_whose_instance_database_is_gone_stops_by_itself(postgres: Server, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon a command starts outlives it only while its instance answers: with the instance's database gone
    for good, it stops once its storage has not answered for --unreachable-s, saying why, and its Dagster daemon with
    it (instead of waiting forever for runs it can no longer see)."""
    from dagster import DagsterInstance
    from tokenledger.pipelines.daemon import UNREACHABLE_S
    from tokenledger.pipelines.instance import prepare_instance, workspace_file
    from tokenledger.pipelines.submitted import daemon_alive

    from tests.daemons import daemons

    assert UNREACHABLE_S == 300  # the default: a failover of the server takes less
    with database(postgres, "daemon") as url:
        monkeypatch.setenv(POSTGRES_URL_ENV, url)
        monkeypatch.setenv("PGCONNECT_TIMEOUT", "5")
        dagster_home = tmp_path / "home" / ".dagster"
        dagster_home.mkdir(parents=True)
        prepare_instance(dagster_home)
        env = {**os.environ, "DAGSTER_HOME": str(dagster_home), "TOKENLEDGER_HOME": str(tmp_path / "home")}
        daemon = subprocess.Popen([sys.executable, "-m", "tokenledger.pipelines.daemon", "--workspace",
                                   str(workspace_file(dagster_home)), "--idle-s", "3600", "--unreachable-s", "4"],
                                  stderr=subprocess.PIPE, text=True, env=env)
        try:
            with DagsterInstance.from_config(str(dagster_home)) as instance:
                for _ in range(600):  # its Dagster daemon up, its heartbeats sent (within two minutes)
                    if daemon_alive(instance) or daemon.poll() is not None:
                        break
                    time.sleep(0.2)
                assert daemon_alive(instance) and daemon.poll() is None and daemons(tmp_path) == 1
            drop_database(postgres, url)
            said = daemon.communicate(timeout=120)[1]
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait()
    assert re.search(r"^tokenledger daemon: the instance's storage has not answered for 4 s \(.*database "
                     r"\"daemon_[0-9a-f]{8}\" does not exist.*\): stopping; the next command starts a daemon again$",
                     said, re.M), said[-3000:]
    assert daemons(tmp_path) == 0
