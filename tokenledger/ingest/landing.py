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

import os
import stat
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
