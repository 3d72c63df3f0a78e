"""The Dagster instance of a home: SQLite files beside the data (the default), or a PostgreSQL database.

With `TOKENLEDGER_DAGSTER_POSTGRES_URL` set (postgresql+psycopg2://user:password@host:port/db), the home's dagster.yaml
keeps the runs, the event log (materializations, check evaluations) and the schedules' and sensors' state in that
database through dagster-postgres; it names the variable (Dagster's `env:` form), so the URL and its password
are read from the environment by every Dagster process and never written to disk. Without it, the instance is
SQLite under <home>/.dagster, as it has always been. See docs/operations.md, "A Postgres instance".

dagster.yaml is whichever of the texts below the environment selects; a dagster.yaml reading exactly as one of
them (or as an earlier version wrote it) is replaced when the selection changes, one a user has edited is theirs.
Switching moves no history: the runs of a home's SQLite instance stay in its files, those of Postgres there.
"""

from __future__ import annotations

import os
from pathlib import Path

from tokenledger.errors import ConfigError, EnvironmentProblem
from tokenledger.storage import atomic
from tokenledger.storage.housekeeping import POSTGRES_URL_ENV, postgres_url

# The code location every Dagster process of a home loads: the daemon, the UI, the runs it launches. Its name is
# pyproject.toml's [tool.dagster] code_location_name and the Helm values' (docs/deploying.md).
DEFINITIONS_MODULE = "tokenledger.pipelines.definitions"
CODE_LOCATION = "tokenledger"
WORKSPACE_YAML = f"""\
# The code location of this tokenledger home, as its daemon and UI load it (written by tokenledger).
load_from:
  - python_module:
      module_name: {DEFINITIONS_MODULE}
      location_name: {CODE_LOCATION}
"""
# The driver named: SQLAlchemy 2.1 reads a bare postgresql:// with psycopg 3, whose server-side parameters break
# dagster-postgres's event log (`NOTIFY run_events, $1` is a syntax error); psycopg2 is what dagster-postgres brings.
SCHEME = "postgresql+psycopg2"
# libpq's own variable: without a limit, a server that drops packets holds every Dagster connection for the
# kernel's TCP timeout (minutes) instead of failing.
CONNECT_TIMEOUT_ENV, CONNECT_TIMEOUT_S = "PGCONNECT_TIMEOUT", "10"

SQLITE_YAML = """\
# The Dagster instance of this tokenledger home: run history, event logs and schedules live beside the data.
telemetry:
  enabled: false
# The daemon marks a run whose process died (killed, machine restarted) as failed instead of leaving it started.
run_monitoring:
  enabled: true
# Dagster's SQLite event log in its usual folder (storage/), cheaper per event: see pipelines/event_log.py.
event_log_storage:
  module: tokenledger.pipelines.event_log
  class: LedgerEventLogStorage
"""
# What earlier versions wrote: a home's dagster.yaml still reading exactly so is replaced (the event log's files
# stay where they are).
EARLIER_SQLITE_YAML = SQLITE_YAML.split("# Dagster's SQLite event log")[0]

POSTGRES_YAML = f"""\
# The Dagster instance of this tokenledger home: run history, event logs and schedules in the PostgreSQL database
# that {POSTGRES_URL_ENV} names, read from the environment by each Dagster process (never written here).
telemetry:
  enabled: false
# The daemon marks a run whose process died (killed, machine restarted) as failed instead of leaving it started.
run_monitoring:
  enabled: true
# dagster-postgres: run storage, event log storage and schedule storage in one database.
storage:
  postgres:
    postgres_url:
      env: {POSTGRES_URL_ENV}
"""
# Runs submitted to the instance (`tokenledger run --parallel`, the schedule, the UI) wait in the daemon's queue: it
# looks every second instead of Dagster's 5, which every run paid (docs/performance.md, the fan-out). And the UI opens
# on the page asked for, not on a newsletter prompt.
QUEUE_YAML = """\
# Submitted runs wait in the daemon's queue (tokenledger run --parallel, the schedule, the UI); it looks every second.
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    dequeue_interval_seconds: 1
# The UI's newsletter prompt, which covers the page on a first visit, is not shown (as telemetry is off).
nux:
  enabled: false
"""
# What earlier versions wrote (before the queue's setting, then before the prompt's): replaced as they are.
_QUEUE_ONLY = QUEUE_YAML.split("# The UI's newsletter prompt")[0]
EARLIER_TEXTS = (EARLIER_SQLITE_YAML, SQLITE_YAML, POSTGRES_YAML, SQLITE_YAML + _QUEUE_ONLY,
                 POSTGRES_YAML + _QUEUE_ONLY)
SQLITE_YAML += QUEUE_YAML
POSTGRES_YAML += QUEUE_YAML
_WRITTEN_BY_TOKENLEDGER = (SQLITE_YAML, POSTGRES_YAML, *EARLIER_TEXTS)


def instance_yaml() -> str:
    """The dagster.yaml the environment selects."""
    return POSTGRES_YAML if postgres_url() else SQLITE_YAML


def prepare_instance(dagster_home: Path) -> None:
    """Write the instance's dagster.yaml into `dagster_home` (unless a user edited it) and, when it is the Postgres
    instance, check that its server accepts the URL's user, so a run fails in one line before Dagster retries.

    Raises ConfigError for a URL that is not one, EnvironmentProblem for a server that cannot be reached or refuses
    the login; OSError as the file system raises it."""
    path = dagster_home / "dagster.yaml"
    wanted = instance_yaml()
    current = path.read_text() if path.exists() else None
    # Each file replaced whole: a process starting beside this one may be reading it.
    if current != wanted and (current is None or current in _WRITTEN_BY_TOKENLEDGER):
        atomic.write_text(path, wanted)
        current = wanted
    if not workspace_file(dagster_home).is_file() or workspace_file(dagster_home).read_text() != WORKSPACE_YAML:
        atomic.write_text(workspace_file(dagster_home), WORKSPACE_YAML)
    url = postgres_url()
    if url and current == POSTGRES_YAML:
        os.environ.setdefault(CONNECT_TIMEOUT_ENV, CONNECT_TIMEOUT_S)
        check_postgres(url)


def workspace_file(dagster_home: Path) -> Path:
    """The workspace file beside the instance's dagster.yaml: the code location by module, so an installed package
    runs it from any folder (`dagster dev -w`, `dagster-daemon run -w`)."""
    return dagster_home / "workspace.yaml"


def server_of(url: str) -> str:
    """host:port/db of a PostgreSQL URL, without the user and the password, for messages."""
    parts = _parts(url)
    return f"{parts.get('host') or 'localhost'}:{parts.get('port') or 5432}/{parts.get('dbname') or parts.get('user')}"


def _parts(url: str) -> dict[str, str]:
    from psycopg2.extensions import parse_dsn

    scheme, _, rest = url.partition("://")
    if scheme != SCHEME or not rest:
        raise ConfigError(f"{POSTGRES_URL_ENV} must read {SCHEME}://USER:PASSWORD@HOST:PORT/DATABASE, not "
                          f"{scheme + '://...' if rest else 'what it has'}: Dagster's SQLAlchemy 2.1 reads a plain "
                          "postgresql:// with psycopg 3, which dagster-postgres's event log cannot use; fix it, or "
                          "unset it for the SQLite instance")
    try:
        return parse_dsn("postgresql://" + rest)
    except Exception:  # psycopg2.ProgrammingError, whose text may quote the password
        raise ConfigError(f"{POSTGRES_URL_ENV} is not a valid PostgreSQL URL ({SCHEME}://USER:PASSWORD@HOST:PORT/"
                          "DATABASE, special characters in the password percent-encoded); fix it, or unset it for "
                          "the SQLite instance") from None


def check_postgres(url: str) -> None:
    """Connect once to the instance's database as its URL says; an EnvironmentProblem naming the server (never the
    password) and what to check when that fails."""
    try:
        import psycopg2
    except ImportError:
        raise ConfigError(f"{POSTGRES_URL_ENV} is set but dagster-postgres is not installed: "
                          "pip install 'tokenledger[postgres]', or unset it for the SQLite instance") from None
    parts = _parts(url)
    server, user = server_of(url), parts.get("user") or "(the login's own name)"
    try:
        psycopg2.connect(**parts, connect_timeout=int(os.environ.get(CONNECT_TIMEOUT_ENV, CONNECT_TIMEOUT_S))
                         ).close()
    except psycopg2.OperationalError as exc:
        cause = " ".join(str(exc).split())
        if parts.get("password"):
            cause = cause.replace(parts["password"], "***")
        lowered = cause.lower()
        if "password authentication failed" in lowered or "no password supplied" in lowered or \
                "no pg_hba.conf entry" in lowered or ("role" in lowered and "does not exist" in lowered):
            what = (f"check the user ({user}) and password in {POSTGRES_URL_ENV}, and that the server's "
                    "pg_hba.conf lets that user in from this machine")
        elif "database" in lowered and "does not exist" in lowered:
            what = f"create the database (createdb), or name one that exists in {POSTGRES_URL_ENV}"
        else:
            what = (f"check that the server is running and accepts TCP connections on that host and port (pg_isready "
                    f"-h HOST -p PORT), and the host and port in {POSTGRES_URL_ENV}")
        raise EnvironmentProblem(f"cannot open the Dagster instance's PostgreSQL database {server} ({cause}): "
                                 f"{what}; or unset {POSTGRES_URL_ENV} for the SQLite instance") from None
