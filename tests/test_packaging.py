"""The image and the wheel test cannot drift apart: the Dockerfile builds the wheel from what pyproject.toml maps into
the package and installs it with tools/install.sh, the script tools/wheel_check.py (`make test-wheel`) runs; and
tools/compare_homes.py, which that test and a before/after comparison rely on, tells equal homes from different ones.

Fast: no build, no install (the wheel test itself is `make test-wheel`, a step of .ci/run)."""

from __future__ import annotations

import re
import shlex
import tomllib
import zipfile
from pathlib import Path

import duckdb
import pytest

from tools import compare_homes, wheel_check

ROOT = Path(__file__).resolve().parent.parent


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (KEYWORD, arguments), continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in dockerfile.read_text().splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        whole = pending + stripped
        pending = ""
        keyword, _, args = whole.partition(" ")
        out.append((keyword.upper(), args.strip()))
    return out


def stages(dockerfile: Path) -> list[list[tuple[str, str]]]:
    """The instructions of each build stage (each FROM starts one)."""
    result: list[list[tuple[str, str]]] = []
    for keyword, args in instructions(dockerfile):
        if keyword == "FROM":
            result.append([])
        if result:
            result[-1].append((keyword, args))
    return result


def copied(stage: list[tuple[str, str]]) -> tuple[set[str], set[str]]:
    """What the stage COPYs from the build context (sources, normalised without a trailing /) and to where."""
    sources, destinations = set(), set()
    for keyword, args in stage:
        if keyword != "COPY" or args.startswith("--from"):
            continue
        words = shlex.split(args)
        sources.update(w.rstrip("/") for w in words[:-1])
        destinations.add(words[-1])
    return sources, destinations


PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_wheel_stage_copies_what_the_package_is_built_from():
    build, _install = stages(ROOT / "Dockerfile")
    sources, _ = copied(build)
    package_dirs = set(PYPROJECT["tool"]["setuptools"]["package-dir"].values())
    needed = package_dirs | {"pyproject.toml", PYPROJECT["project"]["readme"]}
    assert needed <= sources, f"the Dockerfile's wheel stage does not copy {sorted(needed - sources)}"
    runs = [args for keyword, args in build if keyword == "RUN"]
    assert any("pip wheel" in r and "--no-deps" in r for r in runs), runs


def test_the_image_installs_the_wheel_with_the_tested_script_extras_and_pins():
    _build, install = stages(ROOT / "Dockerfile")
    sources, _ = copied(install)
    assert {"tools/install.sh", "constraints.txt"} <= sources
    runs = [args for keyword, args in install if keyword == "RUN" and "install.sh" in args]
    assert len(runs) == 1, runs
    words = shlex.split(runs[0])
    at = next(i for i, w in enumerate(words) if w.endswith("/install.sh"))
    _venv, wheel, extras, constraints = words[at + 1:at + 5]
    assert wheel.endswith(".whl")
    # The wheel test installs with the same extras, each one pyproject.toml defines.
    assert extras == wheel_check.EXTRAS
    assert set(extras.split(",")) <= set(PYPROJECT["project"]["optional-dependencies"])
    assert constraints.endswith("constraints.txt")
    assert any(keyword == "COPY" and args.startswith("--from=wheel") for keyword, args in install)


def test_the_image_runs_the_python_the_pins_were_resolved_on():
    """constraints.txt is resolved by `make constraints` on the Makefile's Python: the image's is the same."""
    makefile_python = re.search(r"^PYTHON \?= python(\d+\.\d+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    image = re.search(r"^ARG PYTHON_IMAGE=python:(\d+\.\d+)-", (ROOT / "Dockerfile").read_text(), re.M).group(1)
    assert image == makefile_python


def test_the_wheel_test_runs_the_same_install_script():
    source = (ROOT / "tools" / "wheel_check.py").read_text()
    assert '"tools" / "install.sh"' in source
    script = (ROOT / "tools" / "install.sh").read_text()
    assert "--only-binary=:all:" in script and '-c "$constraints"' in script


# compare_homes: two small homes in the layout a run publishes.

def _publish(home: Path, table: str, day: str, rows: list[tuple], columns: str) -> None:
    schema, name = table.split(".")
    folder = home / "exports" / schema / name / f"day={day}"
    folder.mkdir(parents=True, exist_ok=True)
    values = ", ".join("(" + ", ".join(repr(v) for v in row) + ")" for row in rows)
    duckdb.execute(f"COPY (SELECT * FROM (VALUES {values}) AS t({columns})) TO '{folder / 'data.parquet'}'")


def _home(tmp: Path, name: str, cost: float = 1.25) -> Path:
    home = tmp / name
    _publish(home, "infra.slo_daily", "2026-11-16", [("m1", 10, cost), ("m2", 20, 2.25)], "model, requests, cost")
    _publish(home, "quality.quarantine", "2026-11-16",
             [(f"{home}/raw/gateway/dt=2026-11-16/a.jsonl", "input_tokens")], "file, reason")
    (home / "reports").mkdir()
    run = f"{name[0] * 8}-1111-2222-3333-444455556666"
    (home / "reports" / "review.md").write_text(f"published by Dagster run {run}\n")
    (home / "reports" / "review.html").write_text(
        f'<td>figures published by Dagster run <span data-table="run" data-column="run_id" data-key="" '
        f'data-format="text">{run}</span></td>\n')
    return home


def test_compare_homes_equal_once_the_home_path_and_run_ids_are_replaced(tmp_path, capsys):
    a, b = _home(tmp_path, "aaa"), _home(tmp_path, "bbb")
    assert compare_homes.main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"same bytes\s+infra\.slo_daily\s+2 rows", out)
    assert re.search(r"same rows\s+quality\.quarantine", out) and "file ($HOME) replaced in 1 rows of A" in out
    assert re.search(r"same rows\s+reports/review\.md", out)
    assert re.search(r"same rows\s+reports/review\.html", out)


def test_compare_homes_names_the_table_that_differs_with_counts_and_a_row(tmp_path, capsys):
    a, b = _home(tmp_path, "aaa"), _home(tmp_path, "bbb", cost=1.75)
    _publish(b, "infra.load_hourly", "2026-11-16", [(1,)], "x")
    assert compare_homes.main([str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert re.search(r"DIFFERENT\s+infra\.slo_daily", out)
    assert "rows: 2 in A, 2 in B; 1 only in A, 1 only in B" in out
    assert "a row only in B: model='m1', requests=10, cost=Decimal('1.75')" in out
    assert re.search(r"MISSING\s+infra\.load_hourly", out) and "only in B" in out
    assert "2 of 5 differ: infra.load_hourly, infra.slo_daily" in out


def test_compare_homes_refuses_a_folder_that_is_not_a_home(tmp_path, capsys):
    assert compare_homes.main([str(tmp_path), str(tmp_path)]) == 2
    assert "no exports/ folder" in capsys.readouterr().err


@pytest.mark.parametrize("name, shipped", [
    ("tokenledger/whatif/lru.py", True),
    ("tokenledger/sql/capacity/vllm_bench_steps.sql", True),
    ("tokenledger/bench.py", False),
    ("benchmarks/bench.py", False),
    ("tokenledger/tools/docs.py", False),
])
def test_the_wheel_inspection_tells_research_from_product(tmp_path, name, shipped):
    wheel = tmp_path / "tokenledger-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path in sorted(wheel_check.expected_in_wheel() | {name, "tokenledger-0.1.0.dist-info/METADATA"}):
            z.writestr(path, "")
    if shipped:
        wheel_check.inspect_wheel(wheel)
    else:
        with pytest.raises(wheel_check.Failed):
            wheel_check.inspect_wheel(wheel)
