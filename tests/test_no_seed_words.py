"""No design document called a seed in what a reader reads (issue 57 item 3): the user docs (README.md and docs/*.md;
the decision records may cite the seeds), every contract's descriptions and names, and the published plan_note.
The seeds' ideas keep their names (N+1, headroom, goodput, Erlang C, Little's law, the rule of thumb, the goodput
sizing). The generator's random seed (`tokenledger generate --seed 7`) is another word, and stays."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import PROJECT_ROOT
from tests.test_capacity_rules import PLAN_ROWS, plan_table
from tokenledger.packaged import contract_file, contract_ids

# "seed 002", "Seed 000's", "seed_002_sizing_follows", "the seeds give", "as in the seed"; never "--seed 7",
# "the same seed gives" or a published name such as replicas_needed_seed_rule.
SEED_DOCUMENT = re.compile(r"(?<![a-z])seeds?[ _]?0\d\d(?!\d)|\bthe seeds\b|\bin the seed\b", re.IGNORECASE)

USER_DOCS = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]


def test_the_pattern_finds_the_design_documents_and_not_the_random_seed() -> None:
    for text in ("seed 002", "Seed 000's rule", "(seed 003)", "seed_002_sizing_follows", "the seeds give several",
                 "(0.8, as in the seed)"):
        assert SEED_DOCUMENT.search(text), text
    for text in ("--seed 7", "--seed S", "seed=7", "the same seed gives byte-identical files", "a random seed",
                 "replicas_needed_seed_rule", "the seed 7 writes the same files"):
        assert not SEED_DOCUMENT.search(text), text


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: str(p.relative_to(PROJECT_ROOT)))
def test_user_docs_name_the_rules_not_the_seeds(doc: Path) -> None:
    found = [f"{n}: {line.strip()}" for n, line in enumerate(doc.read_text().splitlines(), 1)
             if SEED_DOCUMENT.search(line)]
    assert not found, found


def _strings(node: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """Every string of a contract (descriptions, names, queries) with where it is."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(value, f"{where}.{key}" if where else str(key))
    elif isinstance(node, list):
        for k, value in enumerate(node):
            label = value.get("name", k) if isinstance(value, dict) else k
            yield from _strings(value, f"{where}[{label}]")
    elif isinstance(node, str):
        yield where, node


@pytest.mark.parametrize("contract_id", contract_ids())
def test_contract_descriptions_name_the_rules_not_the_seeds(contract_id: str) -> None:
    doc = yaml.safe_load(contract_file(contract_id).read_text())
    found = [f"{where}: {text}" for where, text in _strings(doc) if SEED_DOCUMENT.search(text)]
    assert not found, found


def test_the_plan_note_names_the_rules_not_the_seeds() -> None:
    # Every branch of the note: Erlang C with and without the goodput sizing, no request, no successful request,
    # slots measured by a load test, no slots.
    notes = {r["deployment_id"]: r["plan_note"] for r in plan_table()}
    assert sorted(notes) == sorted(r["deployment_id"] for r in PLAN_ROWS)
    for dep, note in notes.items():
        assert "seed" not in note.lower(), (dep, note)
    assert "; goodput sizing: 10 output tok/s at the peak / 0.5 tok/s per GPU = 20 GPUs before headroom" \
        in notes["goodput"]
    assert notes["d"].endswith("; the goodput sizing needs a capacity goodput per GPU, and the day has none")
