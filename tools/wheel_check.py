"""The wheel test (`make test-wheel`, a step of .ci/run): tokenledger as a user or an image installs it.

    .venv/bin/python tools/wheel_check.py [--pythons 3.11,3.12,3.13] [--workdir DIR] [--keep]

1. Builds the wheel (`pip wheel --no-deps`) from a copy of the checkout's files (tracked, and untracked but not
   ignored), so that a stale build/ or egg-info cannot slip into it, and reads it: one top-level package,
   `tokenledger`; every module, statement and contract of the checkout's package folders inside it (a folder
   missing from pyproject's package list would be left out silently); no benchmark, tool or test module.
2. Generates one small day and runs it with the checkout's editable install (this interpreter's `tokenledger`),
   from a folder that is not the checkout: the reference.
3. For each Python: a new virtualenv outside the clone, the wheel installed into it (not editable) by
   tools/install.sh with the extras a deployment uses, the script the Dockerfile runs; `pip show -f tokenledger`
   lists one top-level package; the same day generated and run from another folder, exit 0; the code location
   loaded by `dagster definitions validate` through the workspace.yaml the run wrote (as the daemon and the UI load
   it); every published table equal to the reference's (tools/compare_homes.py: `ORDER BY ALL` equal, the home's
   path and the run ids normalised).

Each step prints its time. Everything is written under a temporary folder (or --workdir), removed at the end
unless --keep. Interpreters are found as `pythonX.Y` on PATH, else under pyenv's versions folder.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import compare_homes  # noqa: E402  (a script beside this one, not a package)

EXTRAS = "postgres,s3,celery,k8s"  # what a deployment uses; the Dockerfile installs the same
DAY = "2026-11-16"
REQUESTS_PER_DAY = "20000"
# Folders of the checkout that must never ship, and modules of them that once did.
NOT_SHIPPED = {"benchmarks", "tools", "tests", "docs"}
# The package-data kinds pyproject.toml ships; with the modules, every file of these suffixes must be in the wheel.
SHIPPED_SUFFIXES = (".py", ".sql", ".odcs.yaml")


class Failed(Exception):
    pass


class Steps:
    """Prints each step with its duration, and the total at the end."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.times: list[tuple[str, float]] = []

    def run(self, title: str, fn, *args, **kwargs):
        print(f"==> {title}", flush=True)
        began = time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            took = time.monotonic() - began
            self.times.append((title, took))
            print(f"<== {title}: {took:.0f} s", flush=True)

    def summary(self) -> str:
        width = max(len(t) for t, _ in self.times)
        lines = [f"  {t:<{width}}  {s:6.0f} s" for t, s in self.times]
        lines.append(f"  {'total':<{width}}  {time.monotonic() - self.start:6.0f} s")
        return "\n".join(lines)


def sh(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, log: Path | None = None) -> str:
    """Run `cmd`; its output goes to `log` (printed whole when it fails) and is returned."""
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Lines of the machine's pip configuration about an empty local index are noise here.
    output = "\n".join(line for line in proc.stdout.splitlines() if "' is ignored: it is neither" not in line)
    if log is not None:
        log.write_text(output + "\n")
    if proc.returncode != 0:
        print(output[-8000:])
        raise Failed(f"exit {proc.returncode}: {' '.join(cmd)} (in {cwd})")
    return output


def clean_env(venv_bin: Path) -> dict[str, str]:
    """The environment of a user who has just installed it: the venv's bin first on PATH, no tokenledger or Dagster
    settings and no PYTHONPATH inherited from the caller."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TOKENLEDGER_", "DAGSTER_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv_bin}{os.pathsep}{env.get('PATH', '')}"
    return env


def find_python(version: str) -> str:
    """An interpreter of `version` (3.12): pythonX.Y on PATH if it runs (a pyenv shim may not), else pyenv's."""
    want = tuple(int(p) for p in version.split("."))
    candidates = [f"python{version}"]
    pyenv_root = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    candidates += sorted(glob.glob(f"{pyenv_root}/versions/{version}.*/bin/python{version}"), reverse=True)
    for candidate in candidates:
        try:
            out = subprocess.run([candidate, "-c", "import sys; print(*sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and tuple(int(p) for p in out.stdout.split()) == want:
            return candidate
    raise Failed(f"no Python {version} found (tried {', '.join(candidates)})")


def checkout_files() -> list[str]:
    """The files a fresh clone (or a Docker build context) has: tracked, and untracked but not ignored."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, check=True)
    return [f for f in out.stdout.decode().split("\0") if f and (ROOT / f).is_file()]


def build_wheel(work: Path) -> Path:
    src, dist = work / "src", work / "dist"
    for name in checkout_files():
        target = src / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    sh([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(src)], cwd=work,
       log=work / "wheel-build.log")
    wheels = sorted(dist.glob("tokenledger-*.whl"))
    if len(wheels) != 1:
        raise Failed(f"expected one tokenledger wheel in {dist}, found {[w.name for w in wheels]}")
    return wheels[0]


def expected_in_wheel() -> set[str]:
    """The paths the wheel must hold: every module, statement and contract of the folders pyproject.toml maps into
    the package (package-dir), under the package's name."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    package_dir = pyproject["tool"]["setuptools"]["package-dir"]
    expected = set()
    for name in checkout_files():
        if not name.endswith(SHIPPED_SUFFIXES):
            continue
        for package, folder in package_dir.items():
            prefix = folder.rstrip("/") + "/"
            if name.startswith(prefix):
                inner = name[len(prefix):]
                if "__pycache__" in inner.split("/"):
                    continue
                expected.add(package.replace(".", "/") + "/" + inner)
    return expected


def inspect_wheel(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    dist_info = {t for t in top if t.endswith(".dist-info")}
    if top - dist_info != {"tokenledger"} or len(dist_info) != 1:
        raise Failed(f"the wheel's top level is {sorted(top)}: expected tokenledger and its .dist-info alone")
    research = sorted(n for n in names if NOT_SHIPPED & set(n.split("/")[:-1])
                      or (n.endswith(".py") and Path(n).name.startswith("bench")))
    if research:
        raise Failed(f"the wheel ships research or tooling: {research}")
    missing = sorted(expected_in_wheel() - set(names))
    if missing:
        raise Failed(f"{len(missing)} file(s) of the checkout's package folders are not in the wheel "
                     f"(a folder missing from pyproject.toml's packages?): {missing[:20]}")
    counts = {kind: sum(1 for n in names if n.endswith(kind)) for kind in SHIPPED_SUFFIXES}
    print(f"    {wheel.name}: {len(names)} files ({', '.join(f'{v} {k}' for k, v in counts.items())}); "
          f"top level: {', '.join(sorted(top))}; no benchmark, tool or test module")


def check_site_packages(venv: Path, work: Path) -> None:
    """`pip show -f tokenledger`: the distribution's files, relative to site-packages, hold one top-level package."""
    shown = sh([str(venv / "bin" / "python"), "-m", "pip", "show", "-f", "tokenledger"], cwd=work)
    files = shown.split("Files:", 1)[1].split()
    top = {f.split("/")[0] for f in files if not f.startswith("..")}
    packages = {t for t in top if not t.endswith(".dist-info")}
    if packages != {"tokenledger"}:
        raise Failed(f"pip show -f tokenledger: top-level names in site-packages {sorted(packages)}")
    site = Path(shown.split("Location:", 1)[1].split("\n", 1)[0].strip())
    strays = sorted(n for n in ("assets", "pipelines", "sql", "data_contracts", "benchmarks", "tools")
                    if (site / n).exists())
    if strays:
        raise Failed(f"{site} holds {strays} beside tokenledger")
    print(f"    pip show -f tokenledger: {len(files)} files, one top-level package (tokenledger) in {site}")


def run_day(venv_bin: Path, home: Path, cwd: Path, logs: Path, label: str) -> None:
    """`tokenledger generate` then `tokenledger run` for the day, from `cwd`, with `venv_bin`'s tokenledger."""
    cwd.mkdir(parents=True, exist_ok=True)
    env = clean_env(venv_bin)
    tokenledger = str(venv_bin / "tokenledger")
    sh([tokenledger, "generate", "--home", str(home), "--start", DAY, "--days", "1",
        "--requests-per-day", REQUESTS_PER_DAY], cwd=cwd, env=env, log=logs / f"generate-{label}.log")
    out = sh([tokenledger, "run", "--home", str(home), "--start", DAY], cwd=cwd, env=env,
             log=logs / f"run-{label}.log")
    if f"{DAY}  published" not in out:
        raise Failed(f"tokenledger run ({label}) exited 0 without publishing {DAY}: see {logs / f'run-{label}.log'}")
    print(f"    {label}: {DAY} generated and published in {home}")


def validate_code_location(venv_bin: Path, home: Path, cwd: Path, logs: Path, label: str) -> None:
    """The code location as the home's daemon and UI load it: the workspace.yaml tokenledger wrote beside the
    instance's dagster.yaml names the installed module, loaded here from a folder that is not the checkout."""
    workspace = home / ".dagster" / "workspace.yaml"
    if not workspace.is_file():
        raise Failed(f"{label}: tokenledger run wrote no {workspace}")
    env = clean_env(venv_bin) | {"TOKENLEDGER_HOME": str(home), "DAGSTER_HOME": str(home / ".dagster")}
    out = sh([str(venv_bin / "dagster"), "definitions", "validate", "-w", str(workspace)], cwd=cwd, env=env,
             log=logs / f"validate-{label}.log")
    if "All code locations passed validation" not in out:
        raise Failed(f"{label}: dagster definitions validate did not pass: see {logs / f'validate-{label}.log'}")
    print(f"    {label}: dagster definitions validate -w {workspace}: passed")


def compare(reference: Path, home: Path, label: str) -> None:
    outcomes = compare_homes.compare_homes(reference, home)
    text = compare_homes.render(outcomes, reference, home)
    bad = [o for o in outcomes if o.verdict in ("DIFFERENT", "MISSING")]
    if bad:
        print(text)
        raise Failed(f"{label}: {len(bad)} table(s) or report(s) differ from the editable run's")
    normalised = [o.name for o in outcomes if o.verdict == "rows"]
    print(f"    {label}: {text.splitlines()[-1]}; equal once normalised: {', '.join(normalised) or 'none'}")


def install(python: str, venv: Path, wheel: Path, work: Path, label: str) -> None:
    env = dict(os.environ, PYTHON=python)
    sh(["sh", str(ROOT / "tools" / "install.sh"), str(venv), str(wheel), EXTRAS, str(ROOT / "constraints.txt")],
       cwd=work, env=env, log=work / "logs" / f"install-{label}.log")
    version = sh([str(venv / "bin" / "python"), "--version"], cwd=work).strip()
    print(f"    {venv}: {version}, tokenledger[{EXTRAS}] from {wheel.name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pythons", default="3.11,3.12,3.13", help="comma-separated versions (default: %(default)s)")
    parser.add_argument("--workdir", type=Path, help="where to work (default: a new temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (its logs, venvs and homes)")
    args = parser.parse_args(argv)
    versions = [v.strip() for v in args.pythons.split(",") if v.strip()]
    work = args.workdir or Path(tempfile.mkdtemp(prefix="tokenledger-wheel-"))
    work = work.resolve()
    if work.is_relative_to(ROOT):
        print(f"wheel_check: the work folder must be outside the checkout, not {work}", file=sys.stderr)
        return 2
    work.mkdir(parents=True, exist_ok=True)
    (work / "logs").mkdir(exist_ok=True)
    elsewhere = work / "elsewhere"  # the folder every command runs from: neither the checkout nor a home
    steps = Steps()
    ok = False
    print(f"wheel check in {work}: Pythons {', '.join(versions)}, one day of {REQUESTS_PER_DAY} requests", flush=True)
    try:
        pythons = {v: find_python(v) for v in versions}
        wheel = steps.run("build the wheel", build_wheel, work)
        steps.run("inspect the wheel", inspect_wheel, wheel)
        reference = work / "home-editable"
        steps.run("editable checkout: generate and run the day", run_day, Path(sys.prefix) / "bin", reference,
                  elsewhere, work / "logs", "editable")
        for version, python in pythons.items():
            label = f"py{version}"
            venv = work / f"venv-{version}"
            steps.run(f"Python {version}: install the wheel (tools/install.sh)", install, python, venv, wheel, work,
                      label)
            steps.run(f"Python {version}: pip show -f tokenledger", check_site_packages, venv, work)
            home = work / f"home-{version}"
            steps.run(f"Python {version}: generate and run the day", run_day, venv / "bin", home, elsewhere,
                      work / "logs", label)
            steps.run(f"Python {version}: dagster definitions validate", validate_code_location, venv / "bin", home,
                      elsewhere, work / "logs", label)
            steps.run(f"Python {version}: compare with the editable run", compare, reference, home, label)
        ok = True
    except Failed as e:
        print(f"wheel check FAILED: {e}", flush=True)
    finally:
        print("steps:\n" + steps.summary(), flush=True)
        if args.keep or not ok:
            print(f"work folder kept: {work}")
        else:
            began = time.monotonic()
            # Three venvs are about 100k files: shutil.rmtree took 124 s here, rm -rf about 7 s a venv.
            if subprocess.run(["rm", "-rf", str(work)]).returncode != 0:
                shutil.rmtree(work, ignore_errors=True)
            print(f"work folder removed in {time.monotonic() - began:.0f} s")
    if ok:
        print(f"wheel check passed: {len(versions)} Python(s), every published table equal to the editable run's")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
