"""The command line fits habits (issue 13, item 7) and the catalog names its code location `tokenledger`
(item 5): argparse and logging only, no pipeline run."""

from __future__ import annotations

import argparse
import io
import logging
import re
import tomllib
from pathlib import Path

import pytest

from tokenledger import cli

ROOT = Path(__file__).parents[1]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_every_option_has_help_and_home_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:
    monkeypatch.setenv("TOKENLEDGER_HOME", str(tmp_path))
    parser = cli.build_parser()
    commands = _subparsers(parser)
    assert set(commands) == {"generate", "run", "sql", "ui"}
    for name, sub in commands.items():
        for action in sub._actions:
            if not isinstance(action, argparse._HelpAction):
                assert (action.help or "").strip(), f"tokenledger {name} {action.option_strings} has no help"
    args = parser.parse_args(["run", "--start", "2026-11-16"])
    assert (args.home, args.end) == (tmp_path, None)
    assert parser.parse_args(["ui", "--host", "0.0.0.0"]).host == "0.0.0.0"


def test_home_is_required_only_without_the_environment(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.delenv("TOKENLEDGER_HOME", raising=False)
    with pytest.raises(SystemExit):
        cli.main(["run", "--start", "2026-11-16"])
    err = capsys.readouterr().err
    assert "--home" in err and "TOKENLEDGER_HOME" in err


def test_version(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.build_parser().parse_args(["--version"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("tokenledger ") and out.split()[1][0].isdigit(), out


def test_each_finished_step_prints_a_line_as_it_finishes() -> None:
    from tokenledger.pipelines.progress import _StepLines

    class Event:
        def __init__(self, kind: str) -> None:
            self.event_type_value = kind

    stream = io.StringIO()
    handler = _StepLines(stream)
    for kind, step in (("STEP_START", "core__gateway_requests"), ("STEP_SUCCESS", "core__gateway_requests"),
                       ("STEP_FAILURE", "infra__slo_daily")):
        record = logging.LogRecord("x", logging.INFO, "", 0, "", None, None)
        record.dagster_meta = {"dagster_event": Event(kind), "step_key": step}
        handler.emit(record)
    lines = stream.getvalue().splitlines()
    # one line per finished step (not per start), with the seconds since the run began
    assert [re.sub(r"^\s*[0-9.]+ s\s+", "", line) for line in lines] == ["core/gateway_requests done",
                                                                          "infra/slo_daily FAILED"]


def test_the_code_location_is_named_tokenledger() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["dagster"]
    assert config["code_location_name"] == "tokenledger"
    assert config["module_name"] == "tokenledger.pipelines.definitions"


def test_generate_refuses_what_it_cannot_write_in_one_line(tmp_path: Path, capsys) -> None:
    """A day in more parts than request keys can number, or no day at all, is one line and exit code 2 before anything
    is written; a part count below 1 is argparse's own error."""
    args = ["generate", "--home", str(tmp_path / "home"), "--start", "2026-11-16", "--requests-per-day", "100"]
    assert cli.main([*args, "--days", "0", "--parts", "5000"]) == 2
    err = capsys.readouterr().err
    assert err == "error: --days 0 must be at least 1; --parts 5000 is more than the 2048 parts a day can have\n"
    assert not (tmp_path / "home").exists()
    with pytest.raises(SystemExit):
        cli.main([*args, "--parts", "0"])
    assert "--parts: '0' is not a whole number of at least 1" in capsys.readouterr().err
