"""Publishing to a home on object storage, where there is no rename: one manifest replaced by a conditional put.

A publisher uploads its staged files under keys no one else writes, `.published/objects/<commit>/<path>`, then
commits by replacing one object, `.published/current.json` (the manifest: every published path and the key holding
it), with a conditional put: If-Match the ETag read (If-None-Match: * for the first). Of two publishers that read
the same manifest, one wins and the other re-reads and merges its days into the new one. A publisher killed at any
point before that put changes nothing readers see; its uploads are collected later.

After the commit the published exports and reports are also copied to the plain prefixes `exports/...` and
`reports/...` for readers that list a folder (pandas, DuckDB, Spark on `s3://bucket/prefix/exports/<table>`): each
file there is replaced whole, but a run of several days appears there file by file; the manifest (and the warehouse
views built from it) is what changes in one step. A work folder pulls the version a manifest names
(tokenledger/publish/versions.py, `pull_published`); the bucket itself is spoken to by tokenledger/storage/remote.py.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tokenledger.errors import EnvironmentProblem
from tokenledger.faults import failpoint
from tokenledger.storage import retry
from tokenledger.storage.housekeeping import LostHold
from tokenledger.storage.remote import Conflict, RemoteHome, in_parallel

PUBLISHED = ".published"
CURRENT_KEY = f"{PUBLISHED}/current.json"
OBJECTS = f"{PUBLISHED}/objects"
# An upload no manifest references is removed once this old: a publisher is never this slow between its uploads and
# its commit, and a reader holding a replaced manifest has long finished.
UNREFERENCED_KEEP_S = 24 * 3600
COMMIT_ATTEMPTS = 20


@dataclass(frozen=True)
class Manifest:
    """What a remote home has published: every published path and the object holding it."""

    version: int
    files: dict[str, dict[str, Any]]
    etag: str | None = None
    # The generation each published day was last published with (tokenledger.storage.housekeeping.day_locks).
    generations: dict[str, int] = field(default_factory=dict)

    def keys(self) -> set[str]:
        return {entry["key"] for entry in self.files.values()}


def current_manifest(remote: RemoteHome) -> Manifest:
    got = remote.get(CURRENT_KEY)
    if got is None:
        return Manifest(0, {})
    body, etag = got
    data = json.loads(body)
    return Manifest(int(data["version"]), data["files"], etag, dict(data.get("generations", {})))


def current_etag(remote: RemoteHome) -> str | None:
    """The published manifest's ETag (a HEAD request: nothing downloaded), None before the first commit."""
    return remote.etag(CURRENT_KEY)


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def commit(remote: RemoteHome, staged: dict[str, Path], expect_version: int | None = None,
           fence: Mapping[str, int] | None = None) -> Manifest:
    """Publish `staged` (path in the version -> local file) on top of what the bucket has published.

    The files are uploaded under this commit's own keys, then the manifest is replaced with a conditional put. When
    another publisher committed in between, the manifest is read again and the files merged into it (at most
    COMMIT_ATTEMPTS times); with `expect_version`, the commit instead raises Conflict when the published version is
    no longer that one (a table built from every published day must be built again). With `fence` (day -> the
    generation this run took it with), the commit is refused (LostHold) when the manifest holds a newer generation
    of one of those days, checked in the same conditional put that commits. Returns the new manifest."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    commit_id = f"{stamp}-{uuid.uuid4().hex[:12]}"
    entries: dict[str, dict[str, Any]] = {}

    def upload(item: tuple[str, Path]) -> None:
        relative, path = item
        key = f"{OBJECTS}/{commit_id}/{relative}"
        remote.upload(path, key)
        entries[relative] = {"key": key, "size": path.stat().st_size, "sha256": _sha256(path)}

    items = sorted(staged.items())
    in_parallel(items[: len(items) // 2], upload)
    failpoint("publish:linking")
    in_parallel(items[len(items) // 2:], upload)
    for _ in retry.attempts(COMMIT_ATTEMPTS, pause_s=0.05, most_s=2.0):
        base = current_manifest(remote)
        if expect_version is not None and base.version != expect_version:
            raise Conflict(CURRENT_KEY)
        generations = fenced(base.generations, fence or {}, remote.where(CURRENT_KEY))
        new = Manifest(base.version + 1, {**base.files, **entries}, None, generations)
        body = json.dumps({"version": new.version, "committed_at": datetime.now(UTC).isoformat(timespec="seconds"),
                           "commit": commit_id, "files": new.files, "generations": generations}, indent=1,
                          sort_keys=True).encode()
        failpoint("publish:before-switch")
        try:
            etag = remote.put(CURRENT_KEY, body, if_match=base.etag, if_absent=base.etag is None)
        except Conflict:
            if expect_version is not None:
                raise
            continue
        failpoint("publish:after-switch")
        return Manifest(new.version, new.files, etag, generations)
    raise EnvironmentProblem(f"could not publish to {remote.where(CURRENT_KEY)}: it changed under each of "
                             f"{COMMIT_ATTEMPTS} attempts (many runs publishing at once); re-run the days.")


def fenced(published: Mapping[str, int], fence: Mapping[str, int], where: str) -> dict[str, int]:
    """The generations a commit of `fence`'s days leaves published; LostHold when a day of it was published by a
    run that took the day after this one (this run lost its hold: what it computed must not replace that)."""
    newer = {day: published[day] for day, number in fence.items() if published.get(day, 0) > number}
    if newer:
        day = min(newer)
        raise LostHold(f"{day} was published by a newer run (generation {newer[day]}, in {where}) after this run "
                       f"took it (generation {fence[day]}): this run lost its hold on the day and publishes "
                       "nothing; what is published stays as it was.")
    return {**published, **fence}


def mirror_plain_prefixes(remote: RemoteHome, manifest: Manifest, relatives: Iterable[str]) -> None:
    """Copy the committed files of `relatives` under exports/ and reports/ to their plain keys, for folder readers."""
    wanted = [r for r in relatives if r.split("/", 1)[0] in ("exports", "reports") and r in manifest.files]
    in_parallel(wanted, lambda r: remote.copy(manifest.files[r]["key"], r))


def collect(remote: RemoteHome, manifest: Manifest, now: float | None = None) -> int:
    """Remove uploads no published version references, once UNREFERENCED_KEEP_S old; returns how many."""
    now = time.time() if now is None else now
    referenced = manifest.keys()
    old = [rel for rel, obj in remote.list(f"{OBJECTS}/").items()
           if rel not in referenced and now - obj.mtime > UNREFERENCED_KEEP_S]
    if old:
        remote.delete(old, under=OBJECTS)
    return len(old)
