"""What a landing folder holds.

Every entry of a landing folder is either read or reported: nothing is skipped silently except the markers that
data tools leave on purpose (names starting with `.` or `_`, such as `_SUCCESS`, `.DS_Store` or Spark's
`_temporary/`). A file with a known extension is an input; a folder named `*.parquet` is a Parquet dataset (the
way Spark, Hive, pandas and DuckDB write one): its part files are read in order, `key=value` sub-folders are Hive
partitions whose values fill the columns the files lack. Anything else (a folder of another name, a dangling
symlink, a FIFO, a file of an unknown type) stops the day with a message naming it.

Files are listed by Python, never by a DuckDB glob, and each is handed to DuckDB through `duck.literal_path`, so a
file named `zz-*.jsonl` is read as itself and never as a pattern.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from tokenledger.errors import InputFileError
from tokenledger.storage.layout import HomeLayout
from tokenledger.storage.remote import WHOLE_RAW, RemoteHome


@dataclass(frozen=True)
class LandingFile:
    """One input file: its path, its format, and the dataset (folder) and Hive partition values it comes from."""

    path: Path
    fmt: str
    dataset: Path | None = None
    partitions: tuple[tuple[str, str], ...] = field(default=())


# The GPU telemetry's folder under raw/, beside the request sources' (tokenledger/ingest/gpu.py).
GPU_SOURCE = "gpu"
_DAY_FOLDER = re.compile(r"dt=(\d{4}-\d{2}-\d{2})")
_A_DATE = re.compile(r"(?<!\d)(\d{4})[-_/.]?(\d{2})[-_/.]?(\d{2})(?!\d)")


def check_layout(layout: HomeLayout, day: date, dated: Iterable[str]) -> None:
    """Nothing under raw/ is ignored (docs/inputs.md, "Landing zone"): raw/ holds the folders of the sources by day
    (`dated`, and the GPU telemetry's), each of `dt=YYYY-MM-DD` folders, and the folders read whole (WHOLE_RAW).
    Anything else stops the day in one line naming it and the nearest expected path: an unknown folder or a file in
    raw/, and in a source's folder a file or a folder that is not a day's. Such an entry whose name holds another
    day's date is that day's to stop, not `day`'s; one whose name holds no date stops every day. Names are read from
    the bucket for a home on object storage (its work folder holds only what a step pulled). Hidden entries (`.`,
    `_`) are not data."""
    dated = (*dated, GPU_SOURCE)
    known = (*dated, *WHOLE_RAW)
    folders, files = _entries(layout, "")
    for name in sorted(files):
        if not _hidden(name):
            raise InputFileError(
                f"{_where(layout, name)}: a file directly in raw/, where only the sources' folders go "
                f"({', '.join(known)}): move it into its source's raw/<source>/dt=YYYY-MM-DD/ (docs/inputs.md), "
                "then re-run the day")
    for name in sorted(folders):
        if _hidden(name) or name in known:
            continue
        nearest = difflib.get_close_matches(name.lower().replace("_", "").replace("-", ""), known, n=1, cutoff=0.6)
        raise InputFileError(
            f"{_where(layout, name + '/')}: not a source tokenledger reads, so its files would be ignored"
            + (f"; did you mean raw/{nearest[0]}/?" if nearest else f" (the sources: {', '.join(known)}).")
            + " Rename or move it, then re-run the day")
    for source in (s for s in dated if s in folders):
        inner, loose = _entries(layout, f"{source}/")
        for name in sorted(inner):
            found = _DAY_FOLDER.fullmatch(name)
            if found and _is_date(found.group(1)) or _hidden(name):
                continue
            named = _named_day(name)
            if named is not None and named != day:
                continue  # that day's to stop
            hint = f"raw/{source}/dt={(named or day).isoformat()}/"
            raise InputFileError(
                f"{_where(layout, f'{source}/{name}/')}: not a day's folder, so its files would be ignored: a "
                f"source's files go in one folder a UTC day, named dt=YYYY-MM-DD; did you mean {hint}? Rename it, "
                "then re-run the day")
        for name in sorted(loose):
            named = _named_day(name)
            if _hidden(name) or (named is not None and named != day):
                continue
            raise InputFileError(
                f"{_where(layout, f'{source}/{name}')}: a file directly in raw/{source}/, so it would be ignored: "
                f"move it into the folder of its UTC day, raw/{source}/dt={(named or day).isoformat()}/ (one folder "
                "a day), then re-run the day")


def _entries(layout: HomeLayout, relative: str) -> tuple[list[str], list[str]]:
    """The folders and the files right under raw/`relative`: the bucket's for a remote home, else the disk's."""
    if layout.remote is not None:
        return layout.remote.entries(f"raw/{relative}")
    folder = layout.raw / relative
    try:
        children = list(folder.iterdir())
    except FileNotFoundError:
        return [], []
    return [c.name for c in children if c.is_dir()], [c.name for c in children if not c.is_dir()]


def _where(layout: HomeLayout, relative: str) -> str:
    """raw/`relative` as the user finds it (a folder's name ends with '/')."""
    if layout.remote is not None:
        return layout.remote.where(f"raw/{relative}")
    return str(layout.raw / relative) + ("/" if relative.endswith("/") else "")


def _is_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _named_day(name: str) -> date | None:
    """The date a name holds (2026-11-16, 20261116, 2026_11_16), if any."""
    found = _A_DATE.search(name)
    if found is None:
        return None
    try:
        return date(int(found.group(1)), int(found.group(2)), int(found.group(3)))
    except ValueError:
        return None


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def _not_readable(path: Path, what: str, why: str) -> InputFileError:
    return InputFileError(f"{path}: {why}, so it cannot be read as a {what}. Replace or remove it (tokenledger "
                          "never skips an entry of a landing folder silently), then re-run the day.")


def _kind_of(path: Path) -> str:
    """'file', 'dir', or what else the entry is (following symlinks), 'dangling symlink' when it points nowhere."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "dangling symlink" if path.is_symlink() else "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "special file"


def _dataset_parts(root: Path, what: str) -> list[LandingFile]:
    """The part files of a Parquet dataset folder, in path order, with their Hive partition values."""
    parts: list[LandingFile] = []

    def walk(folder: Path, partitions: tuple[tuple[str, str], ...]) -> None:
        for entry in sorted(folder.iterdir(), key=lambda p: p.name):
            if _hidden(entry.name):
                continue
            kind = _kind_of(entry)
            if kind == "file":
                parts.append(LandingFile(entry, "parquet", root, partitions))
            elif kind == "dir" and "=" in entry.name:
                key, value = entry.name.split("=", 1)
                walk(entry, (*partitions, (key, value)))
            elif kind == "dir":
                raise _not_readable(entry, what, f"is a folder inside the Parquet dataset {root} that is not a Hive "
                                    "partition (key=value)")
            else:
                raise _not_readable(entry, what, f"is a {kind} inside the Parquet dataset {root}")

    walk(root, ())
    return parts


def landing_files(folder: Path, formats: dict[str, str], what: str) -> list[LandingFile]:
    """The input files of a landing folder in read order (by name, a dataset's parts in path order).

    `formats` maps a file-name ending to a format (e.g. {".jsonl.gz": "jsonl"}). An entry that cannot be read is
    an error naming it: a folder is read only as a Parquet dataset named `*.parquet`.
    """
    if not folder.exists() and not folder.is_symlink():
        return []
    if _kind_of(folder) != "dir":
        raise _not_readable(folder, f"landing folder of {what} files", f"is a {_kind_of(folder)}, not a folder")
    files: list[LandingFile] = []
    for path in sorted(folder.iterdir(), key=lambda p: p.name):
        if _hidden(path.name):
            continue
        fmt = next((f for suffix, f in formats.items() if path.name.endswith(suffix)), None)
        kind = _kind_of(path)
        if kind == "file" and fmt:
            files.append(LandingFile(path, fmt))
        elif kind == "file":
            raise InputFileError(
                f"{path}: not a {what} file tokenledger can read (expected {', '.join(formats)}). "
                "Convert it or move it out of the landing folder, then re-run the day.")
        elif kind == "dir" and fmt == "parquet":
            files.extend(_dataset_parts(path, what))
        elif kind == "dir":
            raise _not_readable(path, what, "is a folder; a folder is read only as a Parquet dataset, named "
                                "*.parquet, of part files")
        else:
            raise _not_readable(path, what, f"is a {kind}")
    return files


def newest_mtime(files: list[LandingFile]) -> float | None:
    """The latest modification time among the files (a dataset's parts included), None when there are none."""
    return max((os.stat(f.path).st_mtime for f in files), default=None)


# The first day partitions reach when TOKENLEDGER_START_DATE is unset and no command has read the home.
DEFAULT_START_DATE = "2024-01-01"
START_DATE_ENV = "TOKENLEDGER_START_DATE"


def first_landing_day(raw: Path) -> date | None:
    """The earliest `dt=YYYY-MM-DD` folder of any request source under `raw` (folder names only are read)."""
    days = []
    try:
        for source in raw.iterdir():
            if source.is_dir() and source.name not in ("billing", "loadtest"):
                for folder in source.glob("dt=*"):
                    try:
                        days.append(date.fromisoformat(folder.name.removeprefix("dt=")))
                    except ValueError:
                        continue
    except OSError:
        return None
    return min(days, default=None)


def first_remote_landing_day(url: str) -> date | None:
    """first_landing_day of a home on object storage, from the names its bucket lists under raw/."""
    remote = RemoteHome.parse(url)
    days = []
    for source in remote.folders("raw/"):
        if source not in WHOLE_RAW:
            for name in remote.folders(f"raw/{source}/"):
                try:
                    days.append(date.fromisoformat(name.removeprefix("dt=")))
                except ValueError:
                    continue
    return min(days, default=None)


def home_start_date(layout: HomeLayout) -> str:
    """The home's first landed day, so the UI's partitions start where the data does (and its fill shows real
    gaps), else 2024-01-01. Read when a command starts (`tokenledger run`, `tokenledger ui`), never when the
    definitions load."""
    remote = layout.remote
    first = first_remote_landing_day(remote.url) if remote is not None else first_landing_day(layout.raw)
    return first.isoformat() if first else DEFAULT_START_DATE
