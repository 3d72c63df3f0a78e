"""Files replaced whole: a reader sees the old file or the new one, never a part of either.

Every file (or symlink) tokenledger replaces is written under a temporary name in its own folder, then renamed
over its target (`os.replace`, atomic on one file system). The temporary name is hidden (a leading dot), ends in
`.tmp` (readers glob for data.parquet, data.csv, *.json: never for it) and carries its writer's process id, so a
later run can remove what a killed process left (tokenledger/storage/housekeeping.py).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def owner_tag() -> str:
    """The part of a temporary name that says which process writes it (housekeeping reads it back)."""
    return f"pid{os.getpid()}"


def temporary_name(target: Path) -> Path:
    """A hidden sibling of `target`, unique to this process and call."""
    return target.with_name(f".{target.name}.{owner_tag()}.{uuid.uuid4().hex}.tmp")


@contextmanager
def replacing(target: Path) -> Iterator[Path]:
    """A temporary name beside `target` to write (a file or a symlink): renamed over `target` when the block ends,
    removed when it raises."""
    tmp = temporary_name(target)
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(target: Path, text: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with replacing(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def symlink(link: Path, pointer: str | Path) -> None:
    """Make `link` a symlink to `pointer`, replacing what `link` was in one rename."""
    link.parent.mkdir(parents=True, exist_ok=True)
    with replacing(link) as tmp:
        tmp.symlink_to(pointer)
