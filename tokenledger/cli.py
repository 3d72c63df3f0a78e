"""The `tokenledger` command: generate a sample landing zone, run days through Dagster, open the UI.

    tokenledger generate --home DIR --start YYYY-MM-DD --days N --requests-per-day R --seed S [--with-loadtest]
    tokenledger run --home DIR --start YYYY-MM-DD --end YYYY-MM-DD
    tokenledger sql --home DIR "SELECT ..."
    tokenledger ui --home DIR

`run` materializes every asset of each day, checks included, as Dagster ranged runs of up to a month recorded in
the home's Dagster instance (so the UI shows them). A ranged run that fails is re-run day by day: a day that fails
its checks stops only itself.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from tokenledger.errors import LedgerError, environment_problem
from tokenledger.pipelines.instance import EARLIER_SQLITE_YAML, SQLITE_YAML, prepare_instance, workspace_file
from tokenledger.storage.layout import HomeLayout, url_safe_folder
from tokenledger.storage.locks import exclusive
from tokenledger.storage.remote import is_remote, push

# When this command started: a run of another command that published a day of its range since is not run again.
STARTED_AT = datetime.now(UTC)

# Each command imports the rest of what it runs inside its function: loading the Dagster definitions takes seconds,
# the generator loads numpy, DuckDB and the published tables' modules are the other commands', and `tokenledger
# --help` (or a mistyped option) should answer at once.

# The SQLite instance's dagster.yaml (pipelines/instance.py, which chooses it or Postgres's), under the names
# the tests and the bench write it by.
DAGSTER_YAML, _EARLIER_DAGSTER_YAML = SQLITE_YAML, EARLIER_SQLITE_YAML


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            raise argparse.ArgumentTypeError(f"{text} is not a calendar date") from None
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from None


def _positive(text: str, what: str = "") -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number{what} of at least 1")
    return value


def _days_per_run(text: str) -> int:
    return _positive(text, " of days")


def dagster_home_of(home: Path) -> Path:
    """The Dagster instance folder of a home (`.dagster` inside it), through a plain-named symlink when the home's
    path holds a character Dagster's storage URL cannot carry (`tokenledger.storage.layout.url_safe_folder`)."""
    folder = home / ".dagster"
    folder.mkdir(parents=True, exist_ok=True)
    return url_safe_folder(folder)


def _home(text: str) -> str | Path:
    """--home: a folder, or a home on object storage (s3://bucket/prefix), kept as its URL."""
    return text if is_remote(text) else Path(text)


def home_layout(home: str | Path) -> HomeLayout:
    """The layout of --home: a folder's resolved path, or a remote home's work folder
    (tokenledger/storage/remote.py)."""
    return HomeLayout.of(home if isinstance(home, str) else home.expanduser().resolve())


def use_home(home: str | Path) -> HomeLayout:
    """Point this process (and any Dagster process it starts) at `home` and its own Dagster instance.

    The home must exist with its config; the Dagster instance folder (`.dagster`) is created inside it (inside the
    work folder of a home on object storage, whose config is pulled first)."""
    from tokenledger.ingest.landing import START_DATE_ENV, home_start_date
    from tokenledger.storage.generated import END_DATE_ENV, generated_last_day

    layout = home_layout(home)
    layout.check()
    # Before the definitions load in this process or a Dagster process it starts: they read it, never the home.
    if not os.environ.get(START_DATE_ENV):
        os.environ[START_DATE_ENV] = home_start_date(layout)
    # A generated home's partitions end at its last day (config/generated.yaml, pulled by check() from a bucket);
    # set, even empty, the variable wins.
    if END_DATE_ENV not in os.environ and (last := generated_last_day(layout.config)) is not None:
        os.environ[END_DATE_ENV] = last.isoformat()
    if layout.remote is not None:
        dagster_home = dagster_home_of(layout.home)
        prepare_instance(dagster_home)
        os.environ["TOKENLEDGER_HOME"] = layout.remote.url
        os.environ["DAGSTER_HOME"] = str(dagster_home)
        return layout
    home = layout.home
    try:
        dagster_home = dagster_home_of(home)
        # SQLite beside the data, or Postgres when TOKENLEDGER_DAGSTER_POSTGRES_URL is set (its server checked).
        prepare_instance(dagster_home)
        probe = home / f".write-test.pid{os.getpid()}.tmp"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise environment_problem(exc, f"preparing the home {home}") or LedgerError(
            f"cannot prepare the home {home}: {exc}") from None
    os.environ["TOKENLEDGER_HOME"] = str(home)
    os.environ["DAGSTER_HOME"] = str(dagster_home)
    return HomeLayout.of(home)


def cmd_generate(args: argparse.Namespace) -> int:
    from tokenledger.generate import MAX_PARTS, generate_landing_zone
    from tokenledger.storage.generated import generated_last_day, write_generated

    wrong = [text for bad, text in (
        (args.days < 1, f"--days {args.days} must be at least 1"),
        (args.requests_per_day < 0, f"--requests-per-day {args.requests_per_day} must be at least 0"),
        (args.bad_rows_per_day < 0, f"--bad-rows-per-day {args.bad_rows_per_day} must be at least 0"),
        (args.parts > MAX_PARTS, f"--parts {args.parts} is more than the {MAX_PARTS} parts a day can have"),
    ) if bad]
    if wrong:
        print("error: " + "; ".join(wrong), file=sys.stderr)
        return 2
    layout = home_layout(args.home)
    home = layout.home
    home.mkdir(parents=True, exist_ok=True)
    summary = generate_landing_zone(home, args.start, args.days, args.requests_per_day, args.seed,
                                    bad_rows_per_day=args.bad_rows_per_day, other_formats=not args.canonical_only,
                                    parts=args.parts, workers=args.workers)
    print(f"Wrote a sample landing zone to {layout.name}:")
    print(f"  {summary.days} day(s) from {summary.start}: {summary.requests:,} requests in "
          f"{len(summary.gateway_files)} gateway files ({summary.rows_written:,} rows: {summary.duplicate_rows:,} "
          f"logged twice, {len(summary.bad_rows)} deliberately invalid)")
    print(f"  billing: {summary.billing_file.relative_to(home)} ({summary.billing_rows:,} FOCUS rows)")
    print(f"  config:  {', '.join(str(p.relative_to(home)) for p in summary.config_files)}")
    if summary.other_format_logs:
        print(f"  hosted-API logs of {summary.start} in the adapters' formats:")
        for source in ("litellm", "openai", "anthropic"):
            logs = [log for log in summary.other_format_logs if log.source == source]
            folder = logs[0].path.parent.relative_to(home)
            print(f"    {str(folder) + '/':<30} {len(logs)} file(s), {sum(log.records for log in logs):,} records, "
                  f"{sum(log.requests for log in logs):,} requests")
    if args.with_loadtest:
        from datetime import UTC, datetime, time

        from tokenledger.generate import (
            DEMO_BENCH_DEPLOYMENT,
            DEMO_BENCH_MODEL,
            DEMO_BENCH_RATES,
            DEMO_BENCH_STEP_MINUTES,
            DEMO_LOADTEST_DEPLOYMENT,
            DEMO_LOADTEST_MODEL,
            generate_loadtest_run,
            generate_vllm_bench_run,
        )

        # At night on the first day, before the 70B deployment's scale-up, long enough per step to be verified.
        run_id = f"lt-{args.start}-llama70b"
        folder = generate_loadtest_run(home, run_id, DEMO_LOADTEST_MODEL, DEMO_LOADTEST_DEPLOYMENT,
                                       datetime.combine(args.start, time(1, 0), tzinfo=UTC), None, 36, args.seed,
                                       requests_per_day=args.requests_per_day)
        print(f"  load test: {folder.relative_to(home)} (six arrival-rate steps of 36 minutes)")
        if not args.canonical_only:  # after it, on the 8B: the two runs measure different deployments
            at = datetime.combine(args.start, time(5, 0), tzinfo=UTC)
            folder = generate_vllm_bench_run(home, f"bench-{args.start}-llama8b", DEMO_BENCH_MODEL,
                                             DEMO_BENCH_DEPLOYMENT, at, list(DEMO_BENCH_RATES),
                                             DEMO_BENCH_STEP_MINUTES, args.seed,
                                             requests_per_day=args.requests_per_day)
            print(f"  load test: {folder.relative_to(home)} (a vllm bench serve sweep: "
                  f"{', '.join(f'{r:g}' for r in DEMO_BENCH_RATES)} req/s, {DEMO_BENCH_STEP_MINUTES} minutes each)")
    # The home says where its data ends: its partitions end there and the schedule is off by default.
    marker = write_generated(layout.config, summary.start + timedelta(days=summary.days - 1))
    print(f"  {marker.relative_to(home)}: partitions end at {generated_last_day(layout.config)} and "
          "daily_pipeline_schedule is stopped by default (delete it once real logs land here daily)")
    if layout.remote is not None:
        written = [p for folder in ("raw", "config") for p in (home / folder).rglob("*") if p.is_file()]
        print(f"  uploaded {push(layout.remote, home, written)} file(s) to {layout.remote.url} (raw/, config/)")
    return 0


def _check_messages(result, severity: str) -> list[str]:
    """The descriptions of the checks of `severity` ('ERROR' or 'WARN') that did not pass, one message per check: a
    ranged run records each check once per day (assets/checks.py), and their descriptions are joined."""
    by_check: dict[str, list[str]] = {}
    for event in result.all_events:
        if event.event_type_value == "ASSET_CHECK_EVALUATION":
            evaluation = event.event_specific_data
            if not evaluation.passed and evaluation.severity.value == severity:
                key = evaluation.asset_check_key
                texts = by_check.setdefault(f"{key.asset_key.to_user_string()}:{key.name}", [])
                if (text := evaluation.description or "") not in texts:
                    texts.append(text)
    return [f"{check}: {_joined(texts)}" for check, texts in by_check.items()]


def _joined(texts: list[str]) -> str:
    """Per-day descriptions of one check as one: their shared opening (`what: `) and closing advice (after the
    entries' last '. ') said once, the entries joined with '; '."""
    if len(texts) == 1:
        return texts[0]
    head = ""
    first = texts[0]
    if not _DAY_ENTRY.match(first) and ": " in first:
        candidate = first.split(": ", 1)[0] + ": "
        if all(t.startswith(candidate) for t in texts):
            head, texts = candidate, [t[len(candidate):] for t in texts]
    tail = ""
    if ". " in texts[0]:
        candidate = ". " + texts[0].rsplit(". ", 1)[1]
        if all(t.endswith(candidate) for t in texts):
            tail, texts = candidate, [t[:-len(candidate)] for t in texts]
    return head + "; ".join(texts) + tail


def _innermost(error):
    """The exception a Dagster step error wraps (its cause, or the exception it was raised while handling)."""
    while error is not None and (error.cause or error.context) and (
            error.cls_name or "").startswith(("Dagster", "dagster")):
        error = error.cause or error.context
    return error


def _first_lines(text: str, limit: int = 400) -> str:
    """At most two lines of `text`, `limit` characters in all."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()][:2]
    joined = " ".join(lines)
    return joined if len(joined) <= limit else joined[:limit - 3] + "..."


_USERS_ERRORS = ("LedgerError", "ConfigError", "InputFileError", "EnvironmentProblem")  # tokenledger/errors.py


def _failure_messages(result) -> list[str]:
    """One or two lines per failed step and blocking check, named by its asset, without Dagster's stack trace:
    a user's problem by its own message, anything else by its exception (--verbose shows the traceback)."""
    messages = _check_messages(result, "ERROR")
    for event in result.all_events:
        # A run that failed outside its steps for a reason a user can act on (its Celery broker lost): that line.
        error = getattr(event.event_specific_data, "error", None)
        if event.event_type_value == "PIPELINE_FAILURE" and error is not None and error.cls_name in _USERS_ERRORS:
            messages.append(error.message.strip().removeprefix(f"tokenledger.errors.{error.cls_name}: "))
        if event.event_type_value == "STEP_FAILURE":
            data = event.event_specific_data
            error = getattr(data, "error", None)
            if error and error.cls_name == "DagsterAssetCheckFailedError":
                continue  # already said by the check's own message
            step = (event.step_key or "").replace("__", "/")
            described = getattr(getattr(data, "user_failure_data", None), "description", None)
            if described:
                messages.append(f"{step}: {described}")
                continue
            inner = _innermost(error)
            if inner is None:
                messages.append(f"{step}: {event.message}")
                continue
            text = _first_lines(inner.message.replace("dagster._core.definitions.events.Failure: ", ""))
            kind = inner.cls_name or "error"
            if not text.split(":", 1)[0].endswith(kind):  # Python's own message usually names the class
                text = f"{kind}: {text}"
            messages.append(f"{step}: {text}\n  (not a problem in your files: a failure inside "
                            "tokenledger; run the day again with --verbose for the traceback and report it)")
    return _once(messages)


def _once(messages: list[str]) -> list[str]:
    """The same problem met by several steps (a broken config file is read by each), said once, naming them."""
    steps_of: dict[str, list[str]] = {}
    for message in messages:
        step, _, text = message.partition(": ")
        if " " in step:  # not led by a step: keep as it is
            step, text = "", message
        steps_of.setdefault(_DAY_ENTRY.sub("", text).removeprefix(": "), []).append(step)
    return [f"{', '.join(s for s in steps if s)}: {text}" if any(steps) else text for text, steps in steps_of.items()]


_DAY_ENTRY = re.compile(r"^(\d{4}-\d{2}-\d{2})\b")
_MORE = re.compile(r"\s+and (\d+) more\b\.?\s*")


def summarize_warning(message: str, home: str | Path, limit: int = 200) -> str:
    """One line for a warning check's message (`asset:check: what: entry; entry; ... [and N more.] [advice]`,
    entries led by their day): a short one, or one of a single entry, whole; a long one of several entries as their
    count, the days they fall on and the busiest, the first entry whole, the advice, and where to read all of it.
    Nothing is cut mid-word: what is said is said whole."""
    one_line = " ".join(message.split())
    if len(one_line) <= limit:
        return one_line
    check, _, body = one_line.partition(": ")  # the asset:check key
    what = ""
    if not _DAY_ENTRY.match(body) and ": " in body:
        what, _, body = body.partition(": ")
    entries: list[str] = []
    for part in (e.strip() for e in body.split("; ") if e.strip()):
        # Entries led by their day: a part that is not is the rest of the entry before it ('read as UTC; nvidia-smi
        # writes its host's local time...'), not an entry of its own.
        if entries and _DAY_ENTRY.match(entries[0]) and not _DAY_ENTRY.match(part):
            entries[-1] += "; " + part
        else:
            entries.append(part)
    advice, more = "", 0
    if entries:
        last = entries[-1]
        if found := _MORE.search(last):
            more = int(found.group(1))
            last, advice = last[:found.start()], last[found.end():]
        elif ". " in last:
            last, advice = last.split(". ", 1)
        entries[-1] = last
    if len(entries) + more <= 1:  # nothing repeats: nothing to count
        return one_line
    days: dict[str, int] = {}
    for entry in entries:
        if found := _DAY_ENTRY.match(entry):
            days[found.group(1)] = days.get(found.group(1), 0) + 1
    first = entries[0].rstrip(".")
    spread = ""
    if days and more:  # the check listed only the first entries: their days say where it starts
        spread = f" from {min(days)} on"
    elif days:
        busiest = max(sorted(days), key=days.get)
        spread = (f" from {min(days)} to {max(days)}" if len(days) > 1 else f" on {busiest}") + (
            f", most on {busiest} ({days[busiest]})" if len(days) > 1 and days[busiest] > 1 else "")
    where = (f'tokenledger sql --home {shlex.quote(str(home))} "SELECT * FROM quality.quarantine"'
             if "quarantine" in check
             else "the check in the Dagster UI (tokenledger ui) or tokenledger run --verbose")
    advice = f" {advice.strip()}" if advice.strip() else ""
    return (f"{check}: {what + ': ' if what else ''}{len(entries) + more} entries{spread}; the first: {first}."
            f"{advice} All of it: {where}.")


def print_published(layout: HomeLayout, start: date, end: date) -> None:
    """What the range published and where: rows per table, the reconciliation, where to query them; then the
    answer (tokenledger/publish/answer.py): $/MTok and the verdict per model over the range, and each day's review."""
    import duckdb

    from tokenledger.catalog import PUBLISHED_TABLES, TRACES, TREND
    from tokenledger.publish.versions import manifest_name, published_exports
    from tokenledger.storage import lake
    from tokenledger.storage.duck import literal_path

    if layout.remote is not None:
        # What the bucket has published, by this command's runs or any other's (they may have run elsewhere).
        from tokenledger.publish.versions import pull_published

        pull_published(layout)
    con = duckdb.connect()
    exports = published_exports(layout)  # one version for the whole summary
    days = [start + timedelta(days=i) for i in range((end - start).days + 1)]
    if not any((exports / manifest_name(day)).is_file() for day in days):
        print(f"\nNothing of {start}{'' if start == end else '...' + str(end)} is published: what readers see "
              f"in {layout.shown(layout.exports)} is as it was.")
        return
    print(f"\nPublished to {layout.shown(layout.exports)} (a Parquet dataset per table, day=YYYY-MM-DD/ per day; "
          f"finance also as CSV under csv/) and {layout.warehouse} (views):")
    width = max(40, *(len(ref.qualified) + 1 for ref in PUBLISHED_TABLES))
    for ref in PUBLISHED_TABLES:
        files = [lake.day_file(exports, ref.schema, ref.name, start + timedelta(days=i))
                 for i in range((end - start).days + 1)]
        present = [literal_path(f) for f in files if f.is_file()]
        rows = con.execute("SELECT count(*) FROM read_parquet($f, hive_partitioning = false)", {"f": present}
                           ).fetchone()[0] if present else 0
        print(f"  {ref.qualified:<{width}} {len(present):>3} day(s) {rows:>12,} rows")
    for whole, span in ((TREND, "all days"), (TRACES, "  traces")):
        path = exports / whole.schema / whole.name / lake.DATA_FILE
        if path.is_file():
            rows = con.execute("SELECT count(*) FROM read_parquet($f, hive_partitioning = false)",
                               {"f": literal_path(path)}).fetchone()[0]
            print(f"  {whole.qualified:<{width}} {span} {rows:>12,} rows")
    recon = [literal_path(f) for i in range((end - start).days + 1)
             if (f := lake.day_file(exports, "quality", "ingest_reconciliation_daily",
                                    start + timedelta(days=i))).is_file()]
    if recon:
        print("\nIngest reconciliation (rows read = accepted + quarantined + duplicates merged + skipped as not "
              "requests + failed calls that name no model):")
        for source, read, accepted, quarantined, merged, skipped, failures, balanced in con.execute(
                "SELECT source, sum(rows_read), sum(rows_accepted), sum(rows_quarantined), sum(duplicates_merged), "
                "sum(coalesce(skipped_not_request, 0)), sum(coalesce(failures_no_model, 0)), bool_and(balanced) "
                "FROM read_parquet($f, hive_partitioning = false, union_by_name = true) GROUP BY source "
                "ORDER BY source", {"f": recon}).fetchall():
            state = "balanced" if balanced else "NOT BALANCED"
            failed = f" + {failures:>4,} failed, no model" if failures else ""
            print(f"  {source:<12} {read:>12,} read = {accepted:>12,} accepted + {quarantined:>6,} quarantined "
                  f"+ {merged:>6,} merged + {skipped:>6,} skipped{failed}   {state}")
    home = shlex.quote(layout.name)  # pasted into a shell as it is, a space or a quote in it too
    print(f"\nQuery them: tokenledger sql --home {home} \"SELECT * FROM quality.quarantine\" (or in Python, "
          f"tokenledger.publish.warehouse.connect({layout.name!r})). The Dagster UI: tokenledger ui --home {home}")
    # Last, where the eye lands: the answer, from the published tables (the capacity reviews listed there, once each).
    from tokenledger.publish.answer import answer, answer_lines

    print("\n" + "\n".join(answer_lines(answer(layout, start, end))))


def _check_range(start: date, end: date, end_given: bool = True) -> None:
    """One line for a range the partitions cannot hold, instead of Dagster's traceback (naming --start when
    --end was not given)."""
    from tokenledger.pipelines.partitions import FIRST_DAY, LAST_DAY, daily_partitions

    if start < FIRST_DAY:
        raise LedgerError(f"--start {start} is before the first day partitions reach, {FIRST_DAY} "
                          f"(TOKENLEDGER_START_DATE). Set TOKENLEDGER_START_DATE={start} to run it.")
    option = "--end" if end_given else "--start"
    if LAST_DAY is not None and end > LAST_DAY:
        raise LedgerError(f"{option} {end} is after the last day partitions reach, {LAST_DAY} (TOKENLEDGER_END_DATE, "
                          "from a generated home's config/generated.yaml): generate the days, or delete that file "
                          "once real logs land in the home.")
    last = daily_partitions.get_last_partition_key()
    if last is None or end.isoformat() > last:
        raise LedgerError(f"{option} {end} is not a complete UTC day yet (the last one is {last}); a day runs once "
                          "it has ended.")


DAYS_PER_RUN = 31


def _chunks(start: date, end: date, size: int) -> list[tuple[date, date]]:
    """[start, end] cut into consecutive ranges of at most `size` days."""
    out, first = [], start
    while first <= end:
        last = min(end, first + timedelta(days=size - 1))
        out.append((first, last))
        first = last + timedelta(days=1)
    return out


def run_days(home: Path, start: date, end: date, verbose: bool = False, days_per_run: int | None = None,
             end_given: bool = True, parallel: int | None = None, idle: bool = False) -> int:
    """Materialize every asset of each day in [start, end] through Dagster; returns a process exit code.

    The range is run as Dagster ranged runs of at most `days_per_run` days (each asset's step walks its days in
    order), so a step's fixed cost is paid once per run, not once per day. When a ranged run fails, nothing of
    it was published (its publication step did not run): its days are run again one Dagster run each, so the
    good days are published and each failed day is named with its own messages.

    `parallel`: the runs are submitted to the home's Dagster instance instead (pipelines/submitted.py), at most
    that many of them unfinished at once, and `days_per_run` defaults to the range cut into that many runs."""
    layout = use_home(home)
    from dagster import DagsterInstance

    from tokenledger.pipelines.definitions import defs

    _check_range(start, end, end_given)
    if parallel and os.environ.get("TOKENLEDGER_EXECUTOR", "").strip() == "celery":
        from tokenledger.pipelines.executors import BROKER_ENV, check_broker

        check_broker(os.environ.get(BROKER_ENV, ""))  # one line and exit 2 before anything is submitted
    if days_per_run is None:
        days = (end - start).days + 1
        days_per_run = min(DAYS_PER_RUN, -(-days // parallel)) if parallel else DAYS_PER_RUN
    idle_days = ",".join((start + timedelta(days=i)).isoformat() for i in range((end - start).days + 1))
    if idle and not parallel:
        os.environ["TOKENLEDGER_IDLE_DAYS"] = idle_days

    job = defs.resolve_job_def("daily_pipeline")
    run_config = {"loggers": {"console": {"config": {"log_level": "INFO" if verbose else "CRITICAL"}},
                              **({} if verbose else {"progress": {}})}}
    failed: dict[date, list[str]] = {}
    warned: list[str] = []

    def execute(first: date, last: date):
        span = first.isoformat() if first == last else f"{first}...{last}"
        if not verbose:
            print(f"{span}  running" + ("" if first == last else f" ({(last - first).days + 1} days, one run)"),
                  flush=True)
        if first == last:
            options = {"partition_key": first.isoformat()}
        else:
            options = {"tags": {"dagster/asset_partition_range_start": first.isoformat(),
                                "dagster/asset_partition_range_end": last.isoformat()}}
        try:
            return job.execute_in_process(instance=instance, raise_on_error=False, run_config=run_config,
                                          **options)
        except Exception as exc:  # outside any step: Dagster's own storage, resource set-up
            problem = environment_problem(exc, f"running {span}")
            if problem is None:
                raise
            raise problem from None

    def published(first: date, last: date, result, by: str | None = None) -> None:
        day = first
        while day <= last:
            print(f"{day}  published" + ("" if by is None else f" (by run {by[:8]}, another command's)"))
            day += timedelta(days=1)
        for message in _check_messages(result, "WARN"):
            print("    warning: " + (message.replace("\n", "\n    ") if verbose
                                      else summarize_warning(message, layout.name)))
            warned.append(message)

    # The first process to open a new instance creates its SQLite storage; runs started together must not race.
    with exclusive(Path(os.environ["DAGSTER_HOME"]) / ".init.lock"):
        instance = DagsterInstance.get()
    with instance:
        if parallel:
            from tokenledger.pipelines.submitted import run_submitted

            # The run worker's console log goes to the daemon's log file; the lines printed here come from the
            # instance's event log (pipelines/submitted.py).
            submitted_config = {"loggers": {"console": {"config": {"log_level": "INFO" if verbose else "WARNING"}}}}
            if idle:
                from tokenledger.pipelines.resources import ledger_run_config

                submitted_config["resources"] = ledger_run_config(idle_days=idle_days)
            run_submitted(instance, _chunks(start, end, days_per_run), parallel, submitted_config, published, failed,
                          _failure_messages, since=STARTED_AT)
        for first, last in ([] if parallel else _chunks(start, end, days_per_run)):
            result = execute(first, last)
            if result.success:
                published(first, last, result)
                continue
            days = [first + timedelta(days=i) for i in range((last - first).days + 1)]
            if len(days) > 1:
                print(f"{first}...{last}  a day failed in the ranged run, so none of it was published: running "
                      "its days one by one to publish the good ones and name the failed ones", flush=True)
            for day in days:
                result = execute(day, day) if len(days) > 1 else result
                if result.success:
                    published(day, day, result)
                    continue
                failed[day] = _failure_messages(result) or ["the run failed; open the Dagster UI for details"]
                print(f"{day}  FAILED")
                for message in failed[day]:
                    print("    " + message.replace("\n", "\n    "))
    if failed:
        # A failed day's messages point at quality.quarantine_pending, which reads the lake: give it a view even when
        # nothing was ever published (a held warehouse is said by the publication's own check).
        from tokenledger.publish.warehouse import refresh_views

        refresh_views(layout)
    print_published(layout, start, end)
    if failed:
        print(f"\n{len(failed)} day(s) failed: {', '.join(str(d) for d in failed)}. Fix what the messages say and "
              "re-run those days; published days were left as they were.")
        return 1
    views_problem = next((m.split(":", 2)[2].strip() for m in warned
                          if m.startswith("publish/exports:warehouse_views:")), None)
    if views_problem:
        print(f"\nerror: {views_problem}", file=sys.stderr)
        return 3
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    end = args.end or args.start
    if end < args.start:
        print(f"error: --end {end} is before --start {args.start}", file=sys.stderr)
        return 2
    return run_days(args.home, args.start, end, verbose=args.verbose, days_per_run=args.days_per_run,
                    end_given=args.end is not None, parallel=args.parallel, idle=args.idle)


def cmd_sql(args: argparse.Namespace) -> int:
    """Run one query against the home's warehouse (read-only) and print its result as a table."""
    import duckdb

    from tokenledger.publish.warehouse import connect

    layout = home_layout(args.home)
    if layout.remote is not None:
        from tokenledger.publish.versions import pull_published

        layout.home.mkdir(parents=True, exist_ok=True)
        if not pull_published(layout):  # connect() pulls the core tables too
            raise LedgerError(f"{layout.remote.url} has published nothing yet: run a day first (tokenledger run "
                              f"--home {shlex.quote(layout.remote.url)} --start YYYY-MM-DD).")
    elif not layout.warehouse.exists():
        raise LedgerError(f"{layout.warehouse} does not exist yet: run a day first (tokenledger run --home "
                          f"{shlex.quote(str(layout.home))} --start YYYY-MM-DD).")
    with connect(layout) as con:
        try:
            relation = con.sql(args.query)
        except duckdb.Error as exc:
            raise LedgerError(f"the query failed: {str(exc).splitlines()[0]} (the views: SHOW ALL TABLES)") from None
        if relation is None:
            return 0
        relation.show(max_rows=args.max_rows, max_width=10_000)
    return 0


def cmd_ui(args: argparse.Namespace) -> int:
    """`dagster dev` on the home, in a process group of its own: Ctrl-C or a SIGTERM to this process ends the
    webserver, the daemon and the code servers with it, so the port is free afterwards."""
    import signal

    layout = use_home(args.home)
    print(f"Dagster UI for {layout.home} on http://{args.host}:{args.port} (Ctrl-C to stop)", flush=True)
    # The instance's workspace file names the code location by module, `tokenledger` (pipelines/instance.py).
    command = [sys.executable, "-m", "dagster", "dev", "-h", args.host, "-p", str(args.port),
               "-w", str(workspace_file(Path(os.environ["DAGSTER_HOME"])))]
    child = subprocess.Popen(command, start_new_session=True)

    def forward(signum, _frame) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _end_group(child.pid)
    return 0 if code in (0, -signal.SIGINT, -signal.SIGTERM) else code


def _end_group(pgid: int, grace_s: float = 10.0) -> None:
    """Whatever is left of a process group: SIGTERM, then SIGKILL after `grace_s`."""
    import signal
    import time

    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)


def _home_option(parser: argparse.ArgumentParser, what: str) -> None:
    """--home, defaulting to TOKENLEDGER_HOME (one of the two is needed: main() says so, naming both)."""
    default = os.getenv("TOKENLEDGER_HOME")
    parser.add_argument("--home", type=_home, default=_home(default) if default else None,
                        help=f"{what} (default: $TOKENLEDGER_HOME{', now ' + default if default else ', unset'})")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tokenledger")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tokenledger", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"tokenledger {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    gen = sub.add_parser("generate", help="write a deterministic, realistic sample landing zone")
    _home_option(gen, "the home to write raw/ and config/ into (created if missing)")
    gen.add_argument("--start", type=_day, required=True, help="the first UTC day to generate (YYYY-MM-DD)")
    gen.add_argument("--days", type=int, default=7, help="how many days from --start (default: 7)")
    gen.add_argument("--requests-per-day", type=int, default=200_000,
                     help="requests on a weekday; weekends carry about 60%% (default: 200,000)")
    gen.add_argument("--seed", type=int, default=7, help="the same seed gives byte-identical files (default: 7)")
    gen.add_argument("--bad-rows-per-day", type=int, default=8,
                     help="deliberately invalid rows per day, one of each kind, to show the quarantine")
    gen.add_argument("--with-loadtest", action="store_true",
                     help="also write a load-test run of the 70B deployment on the first day, with a known knee, "
                          "and a vllm bench serve sweep of the 8B")
    gen.add_argument("--canonical-only", action="store_true",
                     help="leave out the hosted-API models, their first-day logs in the LiteLLM, OpenAI and "
                          "Anthropic formats, and the vllm bench sweep")
    gen.add_argument("--parts", type=_positive, default=1,
                     help="write each day as this many slices of its requests, each with files of its own, so that "
                          "a day larger than memory can be written (about 2.3 GB per million requests of a part) "
                          "(default: 1)")
    gen.add_argument("--workers", type=_positive, default=1,
                     help="parts written at once, each in a process of its own (default: 1)")
    gen.set_defaults(func=cmd_generate)

    run = sub.add_parser("run", help="materialize every asset of a range of days, checks included")
    _home_option(run, "the home whose days to run")
    run.add_argument("--start", type=_day, help="the first UTC day to run (YYYY-MM-DD; required)")
    run.add_argument("--end", type=_day, help="last day, inclusive (default: --start)")
    run.add_argument("--idle", action="store_true",
                     help="the range's days may have no request logs at all (known idle days); without it such a "
                          "day fails, so a missing upload is never published as a day without traffic")
    run.add_argument("--days-per-run", type=_days_per_run, default=None, metavar="N",
                     help=f"days per Dagster run (default: {DAYS_PER_RUN}, or the range cut into --parallel runs): a "
                          "ranged run pays each step's fixed cost once; a failed ranged run is re-run day by day, so "
                          "a bad day stops only itself")
    run.add_argument("--parallel", type=_positive, default=None, metavar="N",
                     help="submit the runs to the home's Dagster instance, at most N at once, instead of running them "
                          "in this process: its run queue, launcher and TOKENLEDGER_EXECUTOR decide where they run "
                          "(docs/deploying.md)")
    run.add_argument("--verbose", action="store_true", help="show Dagster's event log while running")
    run.set_defaults(func=cmd_run)

    sql = sub.add_parser("sql", help="query a home's published tables (its warehouse views), read-only")
    _home_option(sql, "the home whose warehouse to query")
    sql.add_argument("query", help='one SQL statement, e.g. "SELECT * FROM finance.cost_per_mtok_daily"')
    sql.add_argument("--max-rows", type=_positive, default=40, help="rows to print at most (default: 40)")
    sql.set_defaults(func=cmd_sql)

    ui = sub.add_parser("ui", help="open the Dagster UI on a home")
    _home_option(ui, "the home whose Dagster instance and assets to show")
    ui.add_argument("--host", default="127.0.0.1",
                    help="the address to listen on (default: 127.0.0.1; 0.0.0.0 to reach it from elsewhere)")
    ui.add_argument("--port", type=int, default=3000, help="the port to listen on (default: 3000)")
    ui.set_defaults(func=cmd_ui)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    missing = [text for needed, text in (
        (getattr(args, "home", "") is None, "a home (--home DIR, or TOKENLEDGER_HOME=DIR in the environment)"),
        (args.command == "run" and args.start is None, "a first day (--start YYYY-MM-DD)")) if needed]
    if missing:
        parser.error(f"tokenledger {args.command} needs {' and '.join(missing)}")
    try:
        return args.func(args)
    except LedgerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the machine (a full disk, an unwritable folder) gets one line too; a bug does not
        problem = environment_problem(exc, f"running tokenledger {args.command}")
        if problem is None:
            raise
        print(f"error: {problem}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
