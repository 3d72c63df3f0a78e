"""docs/deploying.md stays in step with the code and the deploy/ files: every TOKENLEDGER_* variable the code
reads is in its table of environment variables, and the files it tells a user to install exist and run what it
says."""

from __future__ import annotations

import re

import kubernetes
import yaml
from dagster_k8s.models import k8s_model_from_dict, k8s_snake_case_dict

from tests.conftest import PROJECT_ROOT

DOC = PROJECT_ROOT / "docs" / "deploying.md"
CODE_DIRS = ("tokenledger", "pipelines", "assets")
NAME = re.compile(r"\bTOKENLEDGER_[A-Z][A-Z0-9_]*[A-Z0-9]\b")
WORKER = ["-A", "tokenledger.pipelines.celery_app", "worker"]


def _code_variables() -> dict[str, str]:
    """Every TOKENLEDGER_* name in the code (module constants, os.environ and os.getenv calls, messages), with a
    file that names it."""
    found: dict[str, str] = {}
    for folder in CODE_DIRS:
        for path in sorted((PROJECT_ROOT / folder).rglob("*.py")):
            for name in NAME.findall(path.read_text()):
                found.setdefault(name, str(path.relative_to(PROJECT_ROOT)))
    return found


def _table_variables() -> set[str]:
    """The names in the first column of the table under "## Environment variables"."""
    section = DOC.read_text().split("\n## Environment variables\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", row.split(" | ")[0])}


def test_the_code_reads_the_variables_this_test_expects():
    """The scan finds what the code reads: a few known names from their modules' constants."""
    found = _code_variables()
    for name in ("TOKENLEDGER_HOME", "TOKENLEDGER_WORK_DIR", "TOKENLEDGER_EXECUTOR",
                 "TOKENLEDGER_CELERY_VISIBILITY_TIMEOUT", "TOKENLEDGER_DAGSTER_POSTGRES_URL"):
        assert name in found, name
    from tokenledger.pipelines.executors import EXECUTORS
    assert "k8s" in EXECUTORS


def test_every_variable_the_code_reads_is_in_the_table():
    missing = {name: where for name, where in _code_variables().items() if name not in _table_variables()}
    assert not missing, f"add these to docs/deploying.md's table of environment variables: {missing}"


def test_the_table_names_no_variable_the_code_does_not_read():
    stale = {name for name in _table_variables() if name.startswith("TOKENLEDGER_")} - set(_code_variables())
    assert not stale, f"docs/deploying.md's table names variables no code reads: {sorted(stale)}"


def test_the_visibility_timeout_default_is_the_codes():
    from tokenledger.pipelines.executors import VISIBILITY_ENV, VISIBILITY_TIMEOUT_S

    row = next(line for line in DOC.read_text().split("\n## Environment variables\n", 1)[1].splitlines()
               if line.startswith(f"| `{VISIBILITY_ENV}`"))
    assert f"`{VISIBILITY_TIMEOUT_S}`" in row
    assert "### The visibility timeout" in DOC.read_text()


def test_no_bucket_home_is_given_a_dagster_home_inside_it():
    """DAGSTER_HOME is a local folder: the doc never derives it from TOKENLEDGER_HOME (meaningless for s3://)."""
    assert "$TOKENLEDGER_HOME/.dagster" not in DOC.read_text()


def test_the_systemd_unit_runs_the_documented_worker():
    unit = (PROJECT_ROOT / "deploy" / "systemd" / "tokenledger-celery-worker.service").read_text()
    assert "deploy/systemd/tokenledger-celery-worker.service" in DOC.read_text()
    sections = re.findall(r"^\[(\w+)\]$", unit, re.M)
    assert sections == ["Unit", "Service", "Install"]
    (exec_start,) = re.findall(r"^ExecStart=(.+)$", unit, re.M)
    argv = exec_start.split()
    assert argv[0] == "/opt/tokenledger/bin/celery" and argv[1:4] == WORKER
    assert "--pool solo --concurrency 1" in exec_start and "%%h" in exec_start
    assert re.search(r"^Restart=always$", unit, re.M) and re.search(r"^EnvironmentFile=", unit, re.M)


def test_the_kubernetes_worker_deployment_is_a_valid_deployment():
    path = PROJECT_ROOT / "deploy" / "k8s" / "celery-worker.yaml"
    assert "deploy/k8s/celery-worker.yaml" in DOC.read_text()
    manifest = yaml.safe_load(path.read_text())
    assert manifest["kind"] == "Deployment" and manifest["apiVersion"] == "apps/v1"
    model = kubernetes.client.V1Deployment
    deployment = k8s_model_from_dict(model, k8s_snake_case_dict(model, manifest))
    (container,) = deployment.spec.template.spec.containers
    assert container.command[0] == "celery" and container.command[1:4] == WORKER
    env = {e.name: e for e in container.env}
    assert env["TOKENLEDGER_EXECUTOR"].value == "celery"
    assert env["TOKENLEDGER_CELERY_BROKER"].value_from.secret_key_ref.name == "tokenledger-celery"
    work = env["TOKENLEDGER_WORK_DIR"].value
    (mount,) = [m for m in container.volume_mounts if m.mount_path == work]
    (volume,) = [v for v in deployment.spec.template.spec.volumes if v.name == mount.name]
    assert volume.empty_dir is not None
    # The same image as the Helm values' code location.
    values = yaml.safe_load((PROJECT_ROOT / "deploy" / "helm" / "values.yaml").read_text())
    image = values["dagster-user-deployments"]["deployments"][0]["image"]
    assert container.image == f"{image['repository']}:{image['tag']}"
