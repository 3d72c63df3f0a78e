"""A home on object storage: `TOKENLEDGER_HOME=s3://bucket/prefix` (any S3 API: AWS, MinIO, Ceph, moto...).

The bucket holds the home: raw/ and config/ as a user lands them, lake/ (each step's tables, per table and day),
and the published versions. Every process that runs a step works in a local copy of the part it needs, its *work
folder* (`TOKENLEDGER_WORK_DIR`, by default under ~/.cache/tokenledger/), so the request-level SQL reads local
files with DuckDB's own readers, as on a local home:

- before a step (the ledger resource's set-up): config/, the run's days of raw/, raw/billing, raw/loadtest and
  raw/traces and the lake files of the run's days are pulled (`pull_for_run`), each file only when the bucket's
  copy differs from the local one (size and modification time: a downloaded file takes the object's time); then
  the published exports and reports (tokenledger/publish/versions.py, `pull_published`);
- after a step: the lake files of the run's days that the step wrote are pushed (`push_for_run`);
- publishing commits a version to the bucket with a conditional put of one manifest (tokenledger/publish/bucket.py).

There is no rename and no lock file on the bucket. Runs of one day on one machine take turns on the work folder's
day locks (tokenledger/storage/housekeeping.py); across machines, on the Postgres instance's advisory locks.
Only the S3 API is spoken (boto3, which reads its credentials, region and AWS_ENDPOINT_URL from the environment).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date
from functools import cached_property
from pathlib import Path
from typing import Any

from tokenledger.errors import ConfigError, EnvironmentProblem
from tokenledger.storage import atomic

SCHEMES = ("s3",)
# S3's rules for a bucket's name (general purpose buckets), and the characters it advises against in a key, with the
# glob characters DuckDB and pyarrow expand in a path.
BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
KEY_UNSAFE = frozenset('\\{}^%`[]"<>~#|*?' + "'")
WORK_DIR_ENV = "TOKENLEDGER_WORK_DIR"
TRANSFER_THREADS = 8
# TOKENLEDGER_S3_TIMEOUT_S: how long one request to the object store may go unanswered, its retries included, before
# the step fails naming the endpoint (default TIMEOUT_S). Each of its ATTEMPTS waits a share of it to connect, and as
# long again for each read of the answer (a large object's transfer is not bounded, only a silence in it); boto3's
# "standard" retries (throttling, 5xx, a connection lost or timed out) are the only ones: a download's own retries of
# a broken transfer are off, or a stalled endpoint would be waited for ATTEMPTS times 5.
TIMEOUT_ENV = "TOKENLEDGER_S3_TIMEOUT_S"
TIMEOUT_S = 30.0
ATTEMPTS = 3


def request_timeout_s(env: Mapping[str, str] = os.environ) -> float:
    """TOKENLEDGER_S3_TIMEOUT_S in seconds (TIMEOUT_S when unset or empty); a ConfigError naming it otherwise."""
    raw = env.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return TIMEOUT_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise ConfigError(f"{TIMEOUT_ENV}={raw!r} is not a number of seconds: set it to how long a request to the "
                          f"object store may go unanswered before the step fails (the default, when unset, is "
                          f"{TIMEOUT_S:g})")
    return seconds


def is_remote(home: str | os.PathLike) -> bool:
    return isinstance(home, str) and bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", home))


class Conflict(Exception):
    """A conditional put lost: the object changed since it was read."""


@dataclass(frozen=True)
class RemoteObject:
    size: int
    mtime: float  # the object's LastModified, seconds since the epoch (whole seconds)
    etag: str


@dataclass(frozen=True)
class RemoteHome:
    """An S3 bucket and prefix holding a home; paths are relative to the prefix (`raw/gateway/dt=.../x.jsonl`)."""

    url: str
    bucket: str
    prefix: str

    @classmethod
    def parse(cls, url: str) -> RemoteHome:
        """The bucket and prefix of `url`, checked as S3 names them (a ConfigError naming the part and the rule
        otherwise): a bucket name of 3-63 lowercase letters, digits, dots and hyphens; a prefix of segments that are
        neither empty, `.` nor `..` (S3 keeps them as they are: `x/../y` would be a folder named `..`, not `y`), with
        none of the characters S3 advises against in keys nor the `*`, `?` and `[` a reader expands as a glob."""
        match = re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://([^/]*)/?(.*)$", url)
        if not match or match.group(1).lower() not in SCHEMES:
            raise ConfigError(f"TOKENLEDGER_HOME={url!r}: a home is a local folder or s3://bucket/prefix (any S3 "
                              "API; set AWS_ENDPOINT_URL for one that is not AWS)")
        bucket, prefix = match.group(2), match.group(3).rstrip("/")
        if not BUCKET_NAME.fullmatch(bucket) or ".." in bucket:
            raise ConfigError(f"TOKENLEDGER_HOME={url!r}: {bucket!r} is not a bucket name (3 to 63 lowercase letters, "
                              "digits, dots and hyphens, starting and ending with a letter or digit): give the "
                              "bucket's name as S3 lists it, s3://bucket/prefix")
        for segment in prefix.split("/") if prefix else []:
            if segment in ("", ".", ".."):
                raise ConfigError(f"TOKENLEDGER_HOME={url!r}: the prefix {prefix!r} has "
                                  + ("an empty segment (//)" if not segment else f"a {segment!r} segment")
                                  + ", which S3 keeps as a folder of that name: write the prefix as the folders it "
                                  "names, e.g. s3://" + bucket + "/" + "/".join(
                                      part for part in prefix.split("/") if part not in ("", ".", "..")))
            if bad := sorted({c for c in segment if c in KEY_UNSAFE or ord(c) < 32 or ord(c) == 127}):
                shown = ", ".join(repr(c) for c in bad)
                raise ConfigError(f"TOKENLEDGER_HOME={url!r}: the prefix {prefix!r} holds {shown}, which S3 keys "
                                  "should not (or a reader would take as a pattern): use letters, digits and "
                                  "- _ . / in the prefix")
        return cls(f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}", bucket, prefix)

    def key(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def where(self, relative: str = "") -> str:
        return f"s3://{self.bucket}/{self.key(relative)}"

    @cached_property
    def client(self) -> Any:
        """boto3's S3 client, made on first use: naming a home (HomeLayout.of, loading the definitions) talks to no
        one. boto3 is imported here too: it is an extra ('tokenledger[s3]'), needed by a bucket home alone."""
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            raise ConfigError(f"the home {self.url} is on object storage, which needs boto3: pip install "
                              "'tokenledger[s3]'") from None
        each = max(request_timeout_s() / ATTEMPTS, 0.5)
        return boto3.client("s3", config=Config(connect_timeout=each, read_timeout=each,
                                                retries={"max_attempts": ATTEMPTS, "mode": "standard"},
                                                max_pool_connections=TRANSFER_THREADS * 2))

    @cached_property
    def transfers(self) -> Any:
        """boto3's transfer settings for download_file/upload_file: no retries of their own over the client's."""
        from boto3.s3.transfer import TransferConfig

        return TransferConfig(num_download_attempts=1)

    @property
    def endpoint(self) -> str:
        """The object store's URL as the client speaks to it (AWS_ENDPOINT_URL, or AWS's for the region); what the
        environment names when there is no client to ask (making it failed: no region, say)."""
        try:
            return self.client.meta.endpoint_url
        except Exception:
            return (os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
                    or "AWS's S3 endpoint")

    @contextlib.contextmanager
    def talking(self, doing: str, relative: str = "") -> Iterator[None]:
        """Turn what the object store or the network answers into one line naming the bucket and what to check."""
        from boto3.exceptions import RetriesExceededError, S3TransferFailedError, S3UploadFailedError
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            yield
        except (ClientError, S3UploadFailedError, S3TransferFailedError, RetriesExceededError, BotoCoreError) as exc:
            if (silent := self._unanswered(exc, doing, relative)) is not None:
                raise silent from None
            if isinstance(exc, BotoCoreError):
                raise EnvironmentProblem(
                    f"cannot reach the object store at {self.endpoint} while {doing} {self.where(relative)} ({exc}): "
                    "check AWS_ENDPOINT_URL, the network and the credentials; nothing half-written was published, "
                    "re-run once it answers.") from None
            # boto3's transfers (upload_file, download_file) wrap the server's answer in an error of their own.
            answer = exc if isinstance(exc, ClientError) else exc.__cause__ or exc.__context__
            if not isinstance(answer, ClientError):
                raise EnvironmentProblem(f"the object store failed {doing} {self.where(relative)} ({exc}): check "
                                         "the bucket, the credentials and AWS_ENDPOINT_URL. Nothing half-written "
                                         "was published; re-run once it is fixed.") from None
            raise self._refused(answer, doing, relative) from None

    def _unanswered(self, exc: BaseException, doing: str, relative: str) -> EnvironmentProblem | None:
        """The one line for a request the object store never answered (connecting or reading timed out on every
        attempt), wherever in `exc`'s chain boto3 or its transfers put the timeout; None for any other error."""
        from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

        seen: list[BaseException] = []
        current: BaseException | None = exc
        while current is not None and current not in seen:
            seen.append(current)
            if isinstance(current, (ConnectTimeoutError, ReadTimeoutError)):
                return EnvironmentProblem(
                    f"the object store at {self.endpoint} did not answer within {request_timeout_s():g} s while "
                    f"{doing} {self.where(relative)}: check that it is up and reachable from this machine "
                    f"(AWS_ENDPOINT_URL), then re-run; nothing half-written was published ({TIMEOUT_ENV} sets how "
                    "long a request may wait)")
            current = getattr(current, "last_exception", None) or current.__cause__ or current.__context__
        return None

    def _refused(self, exc: Any, doing: str, relative: str) -> Exception:
        error = exc.response.get("Error", {})
        code, status = error.get("Code", "?"), exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412):
            return Conflict(relative)
        denied = "the credentials may not do this: check AWS_ACCESS_KEY_ID / AWS_PROFILE and the bucket's policy"
        hint = {"NoSuchBucket": "the bucket does not exist: create it or correct TOKENLEDGER_HOME",
                "AccessDenied": denied, "403": denied,  # a HEAD request's refusal has no body, so no code
                "InvalidAccessKeyId": "the access key is unknown to the server: check AWS_ACCESS_KEY_ID",
                "SignatureDoesNotMatch": "the secret key is wrong: check AWS_SECRET_ACCESS_KEY"}.get(
            code, "check the bucket, the credentials and AWS_ENDPOINT_URL")
        return EnvironmentProblem(f"the object store refused {doing} {self.where(relative)} ({code}"
                                  f"{f', HTTP {status}' if status else ''}: {error.get('Message', '')}): {hint}. "
                                  "Nothing half-written was published; re-run once it is fixed.")

    # --- objects -----------------------------------------------------------------------------------------------

    def list(self, relative_prefix: str) -> dict[str, RemoteObject]:
        """Every object under `relative_prefix` (a folder: give its trailing '/'), by path relative to the home."""
        found = {}
        start = len(self.key(""))
        with self.talking("listing", relative_prefix):
            for page in self.client.get_paginator("list_objects_v2").paginate(
                    Bucket=self.bucket, Prefix=self.key(relative_prefix)):
                for item in page.get("Contents", []):
                    found[item["Key"][start:]] = RemoteObject(item["Size"], item["LastModified"].timestamp(),
                                                              item["ETag"])
        return found

    def folders(self, relative_prefix: str) -> list[str]:
        """The names of the 'folders' right under `relative_prefix` (which ends with '/')."""
        return self.entries(relative_prefix)[0]

    def entries(self, relative_prefix: str) -> tuple[list[str], list[str]]:
        """The names of the 'folders' and of the objects right under `relative_prefix` (which ends with '/')."""
        folders, files = [], []
        start = len(self.key(relative_prefix))
        with self.talking("listing", relative_prefix):
            for page in self.client.get_paginator("list_objects_v2").paginate(
                    Bucket=self.bucket, Prefix=self.key(relative_prefix), Delimiter="/"):
                folders += [p["Prefix"][start:].rstrip("/") for p in page.get("CommonPrefixes", [])]
                files += [item["Key"][start:] for item in page.get("Contents", []) if item["Key"][start:]]
        return folders, files

    def download(self, relative: str, target: Path, known: RemoteObject | None = None) -> None:
        """The object to `target`, replaced whole (tokenledger/storage/atomic.py), with the object's time."""
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic.replacing(target) as tmp:
            with self.talking("reading", relative):
                self.client.download_file(self.bucket, self.key(relative), str(tmp), Config=self.transfers)
                stamp = known.mtime if known else self.client.head_object(
                    Bucket=self.bucket, Key=self.key(relative))["LastModified"].timestamp()
            os.utime(tmp, (stamp, stamp))

    def upload(self, source: Path, relative: str) -> RemoteObject:
        with self.talking("writing", relative):
            self.client.upload_file(str(source), self.bucket, self.key(relative), Config=self.transfers)
            head = self.client.head_object(Bucket=self.bucket, Key=self.key(relative))
        return RemoteObject(head["ContentLength"], head["LastModified"].timestamp(), head["ETag"])

    def get(self, relative: str) -> tuple[bytes, str] | None:
        """The object's bytes and ETag, None when there is none."""
        with self.talking("reading", relative):
            try:
                got = self.client.get_object(Bucket=self.bucket, Key=self.key(relative))
            except self.client.exceptions.NoSuchKey:
                return None
            return got["Body"].read(), got["ETag"]

    def etag(self, relative: str) -> str | None:
        """The object's ETag (a HEAD request: nothing downloaded), None when there is none."""
        from botocore.exceptions import ClientError

        with self.talking("reading", relative):
            try:
                return self.client.head_object(Bucket=self.bucket, Key=self.key(relative))["ETag"]
            except ClientError as exc:
                if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
                    return None
                raise

    def put(self, relative: str, body: bytes, *, if_match: str | None = None, if_absent: bool = False) -> str:
        """Write the object, only if it is still the version `if_match` names (or, `if_absent`, if there is none):
        raises Conflict when it is not. Returns the new ETag."""
        condition = {"IfMatch": if_match} if if_match else {"IfNoneMatch": "*"} if if_absent else {}
        with self.talking("writing", relative):
            return self.client.put_object(Bucket=self.bucket, Key=self.key(relative), Body=body, **condition)["ETag"]

    def copy(self, source: str, relative: str) -> None:
        with self.talking("copying to", relative):
            self.client.copy_object(Bucket=self.bucket, Key=self.key(relative),
                                    CopySource={"Bucket": self.bucket, "Key": self.key(source)})

    def delete(self, relatives: Iterable[str], under: str) -> None:
        """Remove the objects `relatives`, which are all under the folder `under` (named when the store refuses)."""
        keys = [{"Key": self.key(r)} for r in relatives]
        with self.talking("deleting under", under):
            for start in range(0, len(keys), 1000):
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys[start:start + 1000],
                                                                       "Quiet": True})


def work_dir(remote: RemoteHome) -> Path:
    """The local work folder of a remote home: TOKENLEDGER_WORK_DIR, else one per bucket and prefix in the cache."""
    if os.environ.get(WORK_DIR_ENV):
        return Path(os.environ[WORK_DIR_ENV]).expanduser().absolute()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{remote.bucket}/{remote.prefix}".strip("/"))
    digest = hashlib.sha256(remote.url.encode()).hexdigest()[:8]
    return cache / "tokenledger" / f"{name}-{digest}"


# --- mirroring ---------------------------------------------------------------------------------------------------

def _same(local: Path, remote: RemoteObject) -> bool:
    try:
        stat = local.stat()
    except OSError:
        return False
    return stat.st_size == remote.size and stat.st_mtime == remote.mtime


def in_parallel(work: Iterable[Any], do: Callable[[Any], Any]) -> None:
    """`do` of each item of `work`, TRANSFER_THREADS at a time (a request to an object store mostly waits on the
    network, so many at once take little longer than one); the first error is raised."""
    with ThreadPoolExecutor(TRANSFER_THREADS) as pool:
        for _ in pool.map(do, list(work)):
            pass


def pull(remote: RemoteHome, root: Path, relative_prefix: str, exact: bool = True) -> int:
    """Make the local folder `root/relative_prefix` hold what the bucket holds there: files that differ are
    downloaded and, with `exact`, files the bucket no longer has are removed. Returns the files downloaded."""
    objects = remote.list(relative_prefix)
    stale = [(rel, obj) for rel, obj in objects.items() if not rel.endswith("/") and not _same(root / rel, obj)]
    in_parallel(stale, lambda item: remote.download(item[0], root / item[0], item[1]))
    folder = root / relative_prefix
    if exact and folder.is_dir():
        for path in folder.rglob("*"):
            if path.is_file() and not path.name.endswith(".tmp") and str(path.relative_to(root)) not in objects:
                path.unlink(missing_ok=True)
    return len(stale)


def push(remote: RemoteHome, root: Path, files: Iterable[Path], listed: dict[str, RemoteObject] | None = None) -> int:
    """Upload the local files under `root` that differ from the bucket's copy (`listed`, when the caller has listed
    their folders already); the local copy then takes the object's time, so the next pull or push knows them equal.
    Returns the files uploaded."""
    files = [f for f in files if f.is_file()]
    if not files:
        return 0
    if listed is None:
        listed = {}
        for folder in {str(f.parent.relative_to(root)) for f in files}:
            listed.update(remote.list(folder + "/"))
    changed = [f for f in files if not ((rel := str(f.relative_to(root))) in listed and _same(f, listed[rel]))]

    def one(path: Path) -> None:
        stamp = remote.upload(path, str(path.relative_to(root))).mtime
        os.utime(path, (stamp, stamp))

    in_parallel(changed, one)
    return len(changed)


# --- a step's work folder ----------------------------------------------------------------------------------------

# raw/ folders that are not sources by day (pulled whole): the bill, the load tests, the traces, the provider cost
# pages.
WHOLE_RAW = ("billing", "loadtest", "traces", "provider_costs")


def pull_for_run(remote: RemoteHome, root: Path, days: Iterable[date]) -> None:
    """What a step of the run's `days` reads, into the work folder `root`: config/, the days' request logs, the
    bill, the load tests and traces, and the days' lake files (the published version is pulled by
    tokenledger.publish.versions.pull_published)."""
    names = [f"dt={day.isoformat()}" for day in days]
    pull(remote, root, "config/")
    for folder in remote.folders("raw/"):
        if folder in WHOLE_RAW:
            pull(remote, root, f"raw/{folder}/")
        else:
            for name in names:
                pull(remote, root, f"raw/{folder}/{name}/")
    # Never exact: a step of this run on this machine may have written a file it has not pushed yet.
    wanted = {f"day={day.isoformat()}" for day in days}
    lake = {rel: obj for rel, obj in remote.list("lake/").items() if _lake_day(rel) in wanted or _lake_day(rel) == ""}
    in_parallel([(rel, obj) for rel, obj in lake.items() if not _same(root / rel, obj)],
                lambda item: remote.download(item[0], root / item[0], item[1]))


def push_for_run(remote: RemoteHome, root: Path, days: Iterable[date]) -> int:
    """The lake files of the run's days (and the tables kept whole) that this process wrote in `root`, to the
    bucket."""
    wanted = {f"day={day.isoformat()}" for day in days}
    lake = root / "lake"
    if not lake.is_dir():
        return 0
    # Every finished file, not only the tables: a day's capacity review (HTML, Markdown) is read by the publication
    # step, which another worker may execute.
    files = [p for p in lake.rglob("*") if p.is_file() and not p.name.startswith(".") and not p.name.endswith(".tmp")
             and (_lake_day(str(p.relative_to(root))) in wanted or _lake_day(str(p.relative_to(root))) == "")]
    return push(remote, root, files, listed=remote.list("lake/"))


def _lake_day(relative: str) -> str:
    """The `day=...` folder of a lake path (lake/<schema>/<table>/day=.../data.parquet); '' for a table kept whole
    (lake/<schema>/<table>/data.parquet)."""
    parts = relative.split("/")
    return parts[3] if len(parts) == 5 else ""


# --- reading the bucket ------------------------------------------------------------------------------------------

def arrow_filesystem() -> Any:
    """pyarrow's S3 filesystem of this environment, for reading a bucket home's exports as Arrow datasets (which
    DuckDB and pandas query). Its constructor reads the credentials and the region from the environment but not
    AWS_ENDPOINT_URL (which boto3 and pyarrow's FileSystem.from_uri read): passed here. Its requests wait as boto3's
    do (TOKENLEDGER_S3_TIMEOUT_S over its ATTEMPTS)."""
    from urllib.parse import urlparse

    from pyarrow import fs

    each = max(request_timeout_s() / ATTEMPTS, 0.5)
    waits = {"connect_timeout": each, "request_timeout": each,
             "retry_strategy": fs.AwsStandardS3RetryStrategy(max_attempts=ATTEMPTS)}
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if not endpoint:
        return fs.S3FileSystem(**waits)
    parsed = urlparse(endpoint)
    return fs.S3FileSystem(endpoint_override=parsed.netloc or parsed.path, scheme=parsed.scheme or "https", **waits)
