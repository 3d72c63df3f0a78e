"""Where a user's home keeps things: the landing zone, the config, the lake, the published versions."""

from __future__ import annotations

import hashlib
import os
import shlex
import tempfile
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from tokenledger.errors import ConfigError
from tokenledger.storage import atomic
from tokenledger.storage.remote import RemoteHome, is_remote, pull, work_dir


@dataclass(frozen=True)
class HomeLayout:
    """The folders of one tokenledger home (see docs/inputs.md). Each may be overridden on its own.

    A home on object storage (`s3://bucket/prefix`, `remote`) is worked on in a local work folder, `home`, which
    holds the same layout: tokenledger/storage/remote.py says what is pulled into it and pushed from it."""

    home: Path
    raw: Path
    config: Path
    warehouse: Path
    exports: Path
    reports: Path
    remote: RemoteHome | None = field(default=None, compare=False)

    @classmethod
    def of(
        cls,
        home: str | Path,
        *,
        raw: str | Path | None = None,
        config: str | Path | None = None,
        warehouse: str | Path | None = None,
        exports: str | Path | None = None,
        reports: str | Path | None = None,
    ) -> HomeLayout:
        remote = None
        if is_remote(home):
            remote = RemoteHome.parse(str(home))
            given = [name for name, value in (("raw", raw), ("config", config), ("warehouse", warehouse),
                                              ("exports", exports), ("reports", reports)) if value]
            if given:
                raise ConfigError(f"the home {remote.url} is on object storage, where every folder is the home's "
                                  f"own: unset the override of {', '.join(given)} (TOKENLEDGER_*_DIR)")
            root = work_dir(remote)
        else:
            root = Path(home).expanduser()
        return cls(
            home=root,
            raw=Path(raw) if raw else root / "raw",
            config=Path(config) if config else root / "config",
            warehouse=Path(warehouse) if warehouse else root / "warehouse.duckdb",
            exports=Path(exports) if exports else root / "exports",
            reports=Path(reports) if reports else root / "reports",
            remote=remote,
        )

    @property
    def name(self) -> str:
        """The home as a user names it: its folder, or its bucket URL."""
        return self.remote.url if self.remote else str(self.home)

    def shown(self, path: Path) -> str:
        """Where a user finds `path` (a folder of the home): in the bucket for a remote home's published folders."""
        if self.remote is not None and path in (self.exports, self.reports):
            return self.remote.where(path.name)
        return str(path)

    @property
    def lake(self) -> Path:
        """The pipeline's working tables, one Parquet file per table and day; published copies go to exports."""
        return self.home / "lake"

    @property
    def published(self) -> Path:
        """The published versions (tokenledger/publish/versions.py); exports/ is a symlink into the current one."""
        return self.home / ".published"

    @property
    def locks(self) -> Path:
        """Lock files and run records (tokenledger/storage/housekeeping.py)."""
        return self.home / ".locks"

    @property
    def scratch(self) -> Path:
        """Spill space for DuckDB and staging files of a running step; safe to delete between runs."""
        return self.home / "tmp"

    def gateway_day_dir(self, day: date) -> Path:
        return self.source_day_dir("gateway", day)

    def source_day_dir(self, source: str, day: date) -> Path:
        """A request source's folder for a UTC day: raw/<source>/dt=YYYY-MM-DD (gateway, litellm, ...)."""
        return self.raw / source / f"dt={day.isoformat()}"

    @property
    def billing_dir(self) -> Path:
        return self.raw / "billing"

    @property
    def loadtest_dir(self) -> Path:
        return self.raw / "loadtest"

    def check(self) -> None:
        """Fail early, with what to do, when the home or its config folder is missing (for a remote home, after
        pulling its config/)."""
        if self.remote is not None:
            self.home.mkdir(parents=True, exist_ok=True)
            pull(self.remote, self.home, "config/")
            missing = [n for n in ("deployments.yaml", "slo.yaml", "costs.yaml") if not (self.config / n).is_file()]
            if missing:
                raise ConfigError(f"{self.remote.where('config/' + missing[0])} is missing. Every home needs "
                                  "config/deployments.yaml, config/slo.yaml and config/costs.yaml (formats: "
                                  "docs/configuration.md); `tokenledger generate --home s3://...` writes a sample.")
            return
        if not self.home.is_dir():
            raise ConfigError(
                f"tokenledger home {self.home} does not exist. Create a landing zone there "
                f"(`tokenledger generate --home {shlex.quote(str(self.home))} ...` writes a sample one) or point "
                "TOKENLEDGER_HOME at an existing home."
            )
        for name in ("deployments.yaml", "slo.yaml", "costs.yaml"):
            if not (self.config / name).is_file():
                raise ConfigError(
                    f"{self.config / name} is missing. Every home needs config/deployments.yaml, config/slo.yaml "
                    "and config/costs.yaml (formats: docs/configuration.md)."
                )


# Two libraries take a path as a URL without quoting it: Dagster's SQLite storage (DAGSTER_HOME; '?' starts a query
# string and the instance writes a stray database beside the folder, '%' and '#' are decoded) and DuckDB when it
# opens a database file ('?' starts options: the write-ahead log lands at a mangled name and the commit fails).
_URL_UNSAFE = frozenset("?#%")


def url_safe_folder(folder: Path, unsafe: frozenset[str] = _URL_UNSAFE) -> Path:
    """`folder`, or when its path holds a character such a URL (or another reader, `unsafe`) cannot carry, a symlink
    to it with a plain path (under the system's temporary folder, named after a hash of the real path). Files
    opened through the alias live in the real folder, side files (a database's WAL) included."""
    if not unsafe & set(str(folder)):
        return folder
    alias = Path(tempfile.gettempdir()) / "tokenledger" / (
        "link-" + hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16])
    if not (alias.is_symlink() and os.readlink(alias) == str(folder.resolve())):
        atomic.symlink(alias, folder.resolve())
    return alias
