"""Nothing under raw/ is ignored (issue 56, item 1): an entry that is not a source's folder, or in a source's
folder not a day's `dt=YYYY-MM-DD` folder, stops the day in one line naming it and the nearest expected path,
before anything of the day is read. Hidden entries are not data; an entry naming another day is that day's."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from tests.conftest import make_home, materialize, request, write_jsonl
from tokenledger.errors import InputFileError
from tokenledger.ingest.landing import check_layout
from tokenledger.ingest.sources import request_sources
from tokenledger.storage.layout import HomeLayout

DAY = date(2026, 11, 16)
SOURCES = "gateway, litellm, openai, anthropic, otel, gpu, billing, loadtest, traces, provider_costs"


def _home(tmp_path: Path) -> HomeLayout:
    home = make_home(tmp_path / "home")
    write_jsonl(home / "raw" / "gateway" / f"dt={DAY}" / "gw.jsonl", [request("r1")])
    (home / "raw" / "gateway" / ".DS_Store").write_text("")  # hidden: not data
    (home / "raw" / "_tmp").mkdir()
    return HomeLayout.of(home)


def _refusal(layout: HomeLayout, day: date = DAY) -> str | None:
    try:
        check_layout(layout, day, request_sources())
    except InputFileError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize(("entry", "said"), [
    ("openai/2026-11-16/chat.jsonl",
     "{raw}/openai/2026-11-16/: not a day's folder, so its files would be ignored: a source's files go in one folder "
     "a UTC day, named dt=YYYY-MM-DD; did you mean raw/openai/dt=2026-11-16/? Rename it, then re-run the day"),
    ("open_ai/dt=2026-11-16/chat.jsonl",
     "{raw}/open_ai/: not a source tokenledger reads, so its files would be ignored; did you mean raw/openai/? "
     "Rename or move it, then re-run the day"),
    ("Anthropic/dt=2026-11-16/messages.jsonl",
     "{raw}/Anthropic/: not a source tokenledger reads, so its files would be ignored; did you mean "
     "raw/anthropic/? Rename or move it, then re-run the day"),
    ("weblogs/dt=2026-11-16/x.jsonl",
     "{raw}/weblogs/: not a source tokenledger reads, so its files would be ignored (the sources: " + SOURCES
     + "). Rename or move it, then re-run the day"),
    ("gateway.jsonl",
     "{raw}/gateway.jsonl: a file directly in raw/, where only the sources' folders go (" + SOURCES + "): move it "
     "into its source's raw/<source>/dt=YYYY-MM-DD/ (docs/inputs.md), then re-run the day"),
    ("gpu/dcgm-20261116.json",
     "{raw}/gpu/dcgm-20261116.json: a file directly in raw/gpu/, so it would be ignored: move it into the folder of "
     "its UTC day, raw/gpu/dt=2026-11-16/ (one folder a day), then re-run the day"),
    ("litellm/dt=2026-11-31/spend.csv",  # no such day
     "{raw}/litellm/dt=2026-11-31/: not a day's folder, so its files would be ignored: a source's files go in one "
     "folder a UTC day, named dt=YYYY-MM-DD; did you mean raw/litellm/dt=2026-11-16/? Rename it, then re-run the day"),
    ("gateway/latest/gw.jsonl",  # no date: every day is stopped until it is named
     "{raw}/gateway/latest/: not a day's folder, so its files would be ignored: a source's files go in one folder "
     "a UTC day, named dt=YYYY-MM-DD; did you mean raw/gateway/dt=2026-11-16/? Rename it, then re-run the day"),
])
def test_an_entry_raw_does_not_read_stops_the_day_naming_it_and_the_path_meant(tmp_path: Path, entry: str,
                                                                               said: str) -> None:
    layout = _home(tmp_path)
    assert _refusal(layout) is None
    path = layout.raw / entry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}\n")
    assert _refusal(layout) == said.format(raw=layout.raw)


def test_a_misnamed_folder_of_another_day_stops_that_day_not_this_one(tmp_path: Path) -> None:
    layout = _home(tmp_path)
    (layout.raw / "openai" / "2026-11-17").mkdir(parents=True)
    (layout.raw / "openai" / "2026-11-17" / "chat.jsonl").write_text("{}\n")
    assert _refusal(layout, DAY) is None
    assert "openai/2026-11-17/: not a day's folder" in (_refusal(layout, date(2026, 11, 17)) or "")


def test_the_day_stops_before_anything_is_read(home: Path) -> None:
    """Through the day's run: the gateway step fails with the one line, and no table of the day is written."""
    write_jsonl(home / "raw" / "gateway" / f"dt={DAY}" / "gw.jsonl", [request("r1")])
    write_jsonl(home / "raw" / "openai" / str(DAY) / "chat.jsonl", [{"id": "x"}])
    result = materialize(str(DAY), upto=["core/gateway_requests"])
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert failure.step_key == "core__gateway_requests"
    assert (f"{home / 'raw' / 'openai' / str(DAY)}/: not a day's folder, so its files would be ignored"
            in failure.event_specific_data.error.message)
    assert not (HomeLayout.of(home).lake / "core" / "gateway_requests" / f"day={DAY}").exists()
