"""The storage layer's one way of each: a file replaced whole (atomic), a lock file (locks), trying again (retry), and
a bucket home that talks to no one until it is used (remote)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tokenledger.storage import atomic, locks, retry
from tokenledger.storage.layout import HomeLayout


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_a_file_is_replaced_whole_and_no_temporary_file_stays(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "dagster.yaml"
    atomic.write_text(target, "first")
    atomic.write_text(target, "second")
    assert target.read_text() == "second"
    assert _leftovers(target.parent) == []


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "data.parquet"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic.replacing(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("the writer failed")
    assert target.read_text() == "old"
    assert _leftovers(tmp_path) == []


def test_a_temporary_name_is_hidden_and_names_its_writer(tmp_path: Path) -> None:
    name = atomic.temporary_name(tmp_path / "data.parquet").name
    assert name.startswith(".data.parquet.") and name.endswith(".tmp")
    assert f".pid{os.getpid()}." in name


def test_a_symlink_is_switched_in_one_rename(tmp_path: Path) -> None:
    (tmp_path / "v1").mkdir()
    (tmp_path / "v2").mkdir()
    link = tmp_path / "current"
    atomic.symlink(link, "v1")
    atomic.symlink(link, "v2")
    assert os.readlink(link) == "v2"
    assert _leftovers(tmp_path) == []


def test_a_held_lock_is_refused_without_waiting_and_free_once_released(tmp_path: Path) -> None:
    path = tmp_path / ".locks" / "day=2026-11-16.lock"
    with locks.exclusive(path):
        assert locks.acquire(path, blocking=False) is None
    handle = locks.acquire(path, blocking=False)
    assert handle is not None
    handle.close()


def test_attempts_stop_at_the_count_pausing_twice_as_long_each_time(monkeypatch: pytest.MonkeyPatch) -> None:
    pauses: list[float] = []
    monkeypatch.setattr(retry.time, "sleep", pauses.append)
    assert list(retry.attempts(5, pause_s=0.05, most_s=0.15)) == [0, 1, 2, 3, 4]
    assert pauses == [0.05, 0.1, 0.15, 0.15, 0.15]


def test_attempts_stop_once_their_time_is_up(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(0, 100, 2))
    monkeypatch.setattr(retry.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(retry.time, "sleep", lambda _s: None)
    # Started at 0 with 5 s to go; the clock reads 2, 4, 6 after each attempt: the third is the last.
    assert list(retry.attempts(within_s=5, pause_s=0.1)) == [0, 1, 2]


def test_naming_a_bucket_home_talks_to_no_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    boto3 = pytest.importorskip("boto3")

    def refuse(*_args, **_kwargs):
        raise AssertionError("an S3 client was made while only naming the home")

    monkeypatch.setattr(boto3, "client", refuse)
    monkeypatch.setenv("TOKENLEDGER_WORK_DIR", str(tmp_path))
    layout = HomeLayout.of("s3://bucket-that-does-not-answer/prefix")
    assert (layout.name, layout.home) == ("s3://bucket-that-does-not-answer/prefix", tmp_path)
    with pytest.raises(AssertionError, match="S3 client was made"):
        layout.remote.client  # noqa: B018  (the first use makes it)
