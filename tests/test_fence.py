"""Fencing: a run publishes a day only while it holds it, under the generation it took it with.

The day locks hand out a generation per day (tokenledger/storage/housekeeping.py, day_locks); the publication carries
it and is refused when the published day holds a newer one, or when the run no longer holds the day
(docs/adr/0109-a-publication-is-fenced-by-its-day-generation.md). The Postgres side (advisory locks, a session
terminated mid-run) is in tests/test_instance_postgres.py; the bucket's manifest in tests/test_remote_home.py.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from tokenledger.publish import bucket
from tokenledger.publish.versions import GENERATIONS, Staging, current_version, publish_files, published_generations
from tokenledger.storage.housekeeping import LostHold, day_locks, verify_hold
from tokenledger.storage.layout import HomeLayout

DAY = date(2026, 11, 16)
ISO = DAY.isoformat()


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HomeLayout:
    monkeypatch.delenv("TOKENLEDGER_DAGSTER_POSTGRES_URL", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    return HomeLayout.of(home)


def test_each_hold_of_a_day_takes_the_next_generation_and_never_one_already_published(layout: HomeLayout) -> None:
    with day_locks(layout, [DAY, date(2026, 11, 17)]) as first:
        assert first == {ISO: 1, "2026-11-17": 1}
    with day_locks(layout, [DAY]) as second:
        assert second == {ISO: 2}
    # A new work folder (its lock files gone) for a day published under generation 5: 6, not 1.
    for path in layout.locks.glob("*.generation"):
        path.unlink()
    with day_locks(layout, [DAY], published={ISO: 5}) as third:
        assert third == {ISO: 6}


def test_a_run_holding_its_day_passes_and_one_that_let_go_or_was_overtaken_is_refused(layout: HomeLayout) -> None:
    with day_locks(layout, [DAY]) as held:
        verify_hold(layout, held)  # the holder itself, through a descriptor of its own (as a step would)
    with pytest.raises(LostHold, match=r"no longer holds 2026-11-16 \(generation 1\): its lock is no longer held"):
        verify_hold(layout, held)
    with day_locks(layout, [DAY]) as newer:
        assert newer == {ISO: 2}
        with pytest.raises(LostHold, match=r"another run has taken the day since \(generation 2\)"):
            verify_hold(layout, held)


def _publish(layout: HomeLayout, text: str, fence: dict[str, int]) -> Path:
    staging = Staging(layout)
    staging.add_text(text, f"exports/t/day={ISO}/data.txt")
    try:
        return publish_files(layout, staging, fence=fence)
    finally:
        staging.discard()


def test_a_local_version_keeps_the_newest_generation_and_refuses_an_older_one(layout: HomeLayout) -> None:
    _publish(layout, "from generation 2", {ISO: 2})
    assert published_generations(layout) == {ISO: 2}
    before = current_version(layout)
    with pytest.raises(LostHold, match=r"2026-11-16 was published by a newer run \(generation 2, in .*current\) "
                                       r"after this run took it \(generation 1\)"):
        _publish(layout, "from generation 1", {ISO: 1})
    assert current_version(layout) == before
    assert (layout.exports / "t" / f"day={ISO}" / "data.txt").read_text() == "from generation 2"
    # Another day's publication carries the generations it did not take along, in the version it switches in.
    _publish(layout, "a later run of the same day", {ISO: 3, "2026-11-17": 1})
    assert json.loads((current_version(layout) / GENERATIONS).read_text()) == {ISO: 3, "2026-11-17": 1}
    assert (layout.exports / "t" / f"day={ISO}" / "data.txt").read_text() == "a later run of the same day"


def test_the_fence_merges_days_and_refuses_only_an_older_generation() -> None:
    assert bucket.fenced({"2026-11-16": 3, "2026-11-17": 1}, {"2026-11-17": 1, "2026-11-18": 4}, "b") == {
        "2026-11-16": 3, "2026-11-17": 1, "2026-11-18": 4}
    with pytest.raises(LostHold, match="2026-11-17 was published by a newer run"):
        bucket.fenced({"2026-11-17": 2}, {"2026-11-16": 9, "2026-11-17": 1}, "b")


def test_a_paused_failpoint_waits_for_its_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from tokenledger.faults import failpoint

    release = tmp_path / "go"
    monkeypatch.setenv("TOKENLEDGER_FAILPOINT", f"publish:staged:wait:{release}")
    waiter = threading.Thread(target=failpoint, args=("publish:staged",))
    waiter.start()
    waiter.join(1.0)
    assert waiter.is_alive() and (tmp_path / "go.reached").exists()
    release.touch()
    waiter.join(5.0)
    assert not waiter.is_alive()


def test_a_folder_that_never_locked_the_day_leaves_the_check_to_the_commit(layout: HomeLayout,
                                                                          tmp_path: Path) -> None:
    # A step on a worker whose work folder is not the orchestrator's (a bucket home): nothing here to check.
    other = HomeLayout.of(tmp_path / "elsewhere")
    with day_locks(layout, [DAY]) as held:
        verify_hold(other, held)
