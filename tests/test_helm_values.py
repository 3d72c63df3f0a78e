"""deploy/helm/values.yaml, the values for Dagster's Helm chart that docs/deploying.md ("Kubernetes") deploys, is
what the chart accepts and says what tokenledger needs.

No cluster and no helm binary here: the values are checked against the chart's own values.schema.json (kept in
tests/data/helm/, see its README for where it comes from), against Dagster's instance config schema for what the
chart writes into dagster.yaml (run monitoring), and against the Kubernetes API models of the kubernetes client that
dagster-k8s uses (volumes, mounts, environment, resources). Not checked: what `helm template` would render, the
chart's default values (not kept here: Helm merges them before validating), a cluster accepting the objects.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import kubernetes
import pytest
import referencing
import yaml
from dagster._config import validate_config
from dagster._core.instance.config import dagster_instance_config_schema
from dagster_k8s.models import k8s_model_from_dict, k8s_snake_case_dict

from tests.conftest import PROJECT_ROOT

VALUES = PROJECT_ROOT / "deploy" / "helm" / "values.yaml"
SCHEMA_DIR = PROJECT_ROOT / "tests" / "data" / "helm" / "dagster-chart-2bdb239"
# Objects that Helm takes whole from our file, never merged with the chart's defaults: list items (a list in the
# values replaces the default list). Their `required` keys must be in our file; every other object's are supplied by
# the chart's values.yaml when Helm coalesces it under ours, which is what Helm validates.
WHOLE = {"UserDeployment", "Image", "UserDeploymentIncludeConfigInLaunchedRuns"}
# What the chart's configmap-instance.yaml writes into dagster.yaml's run_monitoring from dagsterDaemon.runMonitoring.
RUN_MONITORING_KEYS = {"enabled": "enabled", "startTimeoutSeconds": "start_timeout_seconds",
                       "cancelTimeoutSeconds": "cancel_timeout_seconds",
                       "maxResumeRunAttempts": "max_resume_run_attempts",
                       "pollIntervalSeconds": "poll_interval_seconds",
                       "freeSlotsAfterRunEndSeconds": "free_slots_after_run_end_seconds"}


def _values() -> dict:
    return yaml.safe_load(VALUES.read_text())


def _schema() -> dict:
    """The chart's schema with `required` kept only where our file must hold the whole object (WHOLE) and in the
    conditionals (a K8sRunLauncher needs config.k8sRunLauncher)."""
    schema = json.loads((SCHEMA_DIR / "values.schema.json").read_text())
    schema.pop("required")
    for name, definition in schema["$defs"].items():
        if name not in WHOLE:
            definition.pop("required", None)
    return schema


def _validator(schema: dict) -> tuple[jsonschema.protocols.Validator, list[str]]:
    """A validator whose references to Kubernetes' published definitions (remote, not fetched here) accept anything:
    each definition the schema points at is an empty schema in a stand-in document. Those objects are checked against
    the kubernetes client's models instead (test_kubernetes_objects). Returns the documents it was asked for."""
    documents: dict[str, dict] = {}
    for ref in re.findall(r'"\$ref": "(https?://[^"#]+)#([^"]*)"', json.dumps(schema, indent=1)):
        node = documents.setdefault(ref[0], {})
        for part in ref[1].strip("/").split("/"):
            node = node.setdefault(part, {})
    retrieved: list[str] = []

    def retrieve(uri: str) -> referencing.Resource:
        retrieved.append(uri)
        return referencing.Resource.from_contents(documents[uri],
                                                  default_specification=referencing.jsonschema.DRAFT202012)

    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, registry=referencing.Registry(retrieve=retrieve)), retrieved


def _errors(values: dict) -> list[str]:
    validator, _ = _validator(_schema())
    return sorted(f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(values))


def _deployment(values: dict) -> dict:
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    return deployment


def _env(deployment: dict) -> dict[str, dict]:
    return {item["name"]: item for item in deployment["env"]}


def test_the_values_are_valid_for_the_chart():
    assert _errors(_values()) == []


def test_the_schema_is_the_charts_and_reaches_kubernetes_definitions():
    """The kept schema is the chart's whole file (the README's size), and validating our values went through its
    references to Kubernetes' definitions (so the permissive stand-in above was what made them pass, not a miss)."""
    text = (SCHEMA_DIR / "values.schema.json").read_text()
    assert len(text) == 135455 and json.loads(text)["title"] == "DagsterHelmValues"
    assert (SCHEMA_DIR / "LICENSE").read_text().lstrip().startswith("Apache License")
    validator, remote = _validator(_schema())
    assert list(validator.iter_errors(_values())) == []
    assert [uri.rsplit("/", 2)[-2:] for uri in set(remote)] == [["v1.19.0", "_definitions.json"]]


@pytest.mark.parametrize(("path", "wrong", "expected"), [
    (("dagsterDaemon", "runMonitoring"), "yes", "is not of type 'object'"),
    (("dagsterDaemon", "enabled"), "yes", "is not of type 'boolean'"),
    (("runLauncher", "type"), "K8sJobLauncher", "is not one of"),
    (("runLauncher", "config", "k8sRunLauncher", "loadInClusterConfig"), True, "not valid under any"),
    (("serviceAccount", "create"), "yes", "is not of type 'boolean'"),
    (("postgresql", "enabled"), "false", "is not of type 'boolean'"),
    (("dagster-user-deployments", "deployments", 0, "port"), "3030", "is not of type 'integer'"),
    (("dagster-user-deployments", "deployments", 0, "image", "pullPolicy"), "Sometimes", "is not one of"),
    (("dagsterDaemon", "runCoordinator", "type"), "FifoRunCoordinator", "is not one of"),
])
def test_a_wrong_value_is_rejected(path, wrong, expected):
    values = _values()
    node = values
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = wrong
    assert any(expected in error for error in _errors(values)), _errors(values)


def test_an_incomplete_user_deployment_is_rejected():
    """A list item is taken whole by Helm: without its port, the chart's schema refuses it."""
    values = _values()
    del _deployment(values)["port"]
    assert any("'port' is a required property" in error for error in _errors(values))


def test_the_code_location_is_the_image_the_dockerfile_builds():
    deployment = _deployment(_values())
    assert deployment["image"]["repository"].rsplit("/", 1)[-1] == "tokenledger"
    version = re.search(r'^version = "([^"]+)"', (PROJECT_ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert deployment["image"]["tag"] == version
    assert deployment["dagsterApiGrpcArgs"] == ["-m", "tokenledger.pipelines.definitions"]
    # The Dockerfile installs the k8s and postgres extras the pods need, and the docs build the same name.
    dockerfile = (PROJECT_ROOT / "Dockerfile").read_text()
    assert "postgres,s3,celery,k8s" in dockerfile
    assert f"{deployment['image']['repository']}:{version}" in (PROJECT_ROOT / "docs" / "deploying.md").read_text()
    assert deployment["includeConfigInLaunchedRuns"] == {"enabled": True}


def test_the_chart_version_is_the_pinned_dagster():
    pinned = re.search(r"^dagster==(\S+)$", (PROJECT_ROOT / "constraints.txt").read_text(), re.M).group(1)
    text = VALUES.read_text()
    assert f"--version {pinned} " in text and f"version {pinned}:" in text
    assert f"--version {pinned} " in (PROJECT_ROOT / "docs" / "deploying.md").read_text()


def test_run_monitoring_is_on_and_dagster_accepts_it():
    """The chart writes dagsterDaemon.runMonitoring into dagster.yaml's run_monitoring (configmap-instance.yaml):
    every key we set is one it writes, and what it writes is valid for the pinned dagster's instance schema."""
    daemon = _values()["dagsterDaemon"]
    assert daemon["enabled"] is True
    monitoring = daemon["runMonitoring"]
    assert monitoring["enabled"] is True
    assert monitoring["startTimeoutSeconds"] > 0 and monitoring["pollIntervalSeconds"] > 0
    assert set(monitoring) <= set(RUN_MONITORING_KEYS), set(monitoring) - set(RUN_MONITORING_KEYS)
    written = {RUN_MONITORING_KEYS[key]: value for key, value in monitoring.items()}
    schema = dagster_instance_config_schema()["run_monitoring"].config_type
    assert validate_config(schema, written).success
    wrong = {**written, "enabled": "yes"}
    assert not validate_config(schema, wrong).success


def test_runs_get_a_pod_each_and_the_work_folder_is_an_empty_dir():
    values = _values()
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    deployment = _deployment(values)
    env = _env(deployment)
    work_dir = env["TOKENLEDGER_WORK_DIR"]["value"]
    (mount,) = [m for m in deployment["volumeMounts"] if m["mountPath"] == work_dir]
    (volume,) = [v for v in deployment["volumes"] if v["name"] == mount["name"]]
    assert set(volume) == {"name", "emptyDir"} and volume["emptyDir"]["sizeLimit"]
    assert env["TOKENLEDGER_HOME"]["value"].startswith("s3://")
    assert env["TOKENLEDGER_EXECUTOR"]["value"] in ("in_process", "k8s")
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", env["TOKENLEDGER_START_DATE"]["value"])


def test_the_work_folder_variable_is_the_one_the_code_reads():
    from tokenledger.storage.remote import WORK_DIR_ENV

    assert WORK_DIR_ENV in _env(_deployment(_values()))


def test_secrets_come_from_kubernetes_secrets_and_a_service_account():
    values = _values()
    deployment = _deployment(values)
    assert values["serviceAccount"]["create"] is True and values["rbacEnabled"] is True
    assert values["serviceAccount"]["name"] == values["global"]["serviceAccountName"] == "tokenledger"
    assert [s["name"] for s in deployment["envSecrets"]] == ["tokenledger-s3"]
    url = _env(deployment)["TOKENLEDGER_DAGSTER_POSTGRES_URL"]
    assert set(url) == {"name", "valueFrom"} and url["valueFrom"]["secretKeyRef"]["name"] == "tokenledger-postgresql"
    # The chart's Postgres password comes from the same secret, never from these values.
    assert values["generatePostgresqlPasswordSecret"] is False
    assert values["global"]["postgresqlSecretName"] == "tokenledger-postgresql"
    postgres = values["postgresql"]
    assert postgres["enabled"] is False and postgres["postgresqlHost"] and "postgresqlPassword" not in postgres
    assert not re.search(r"(?i)(password|secret_access_key)\s*[:=]\s*\S", _without_comments(VALUES.read_text()))


def _without_comments(text: str) -> str:
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


@pytest.mark.parametrize(("model", "where"), [
    (kubernetes.client.V1Volume, ("volumes",)),
    (kubernetes.client.V1VolumeMount, ("volumeMounts",)),
    (kubernetes.client.V1EnvVar, ("env",)),
    (kubernetes.client.V1SecretEnvSource, ("envSecrets",)),
])
def test_kubernetes_objects(model, where):
    """The objects the schema leaves to Kubernetes' definitions are valid for the kubernetes client's models (an
    unknown key, emptyDirr for emptyDir, is refused)."""
    deployment = _deployment(_values())
    for item in deployment[where[0]]:
        k8s_model_from_dict(model, k8s_snake_case_dict(model, item))
    wrong = {**deployment[where[0]][0], "emptyDirr": {}}
    with pytest.raises(Exception, match="Unexpected keys"):
        k8s_model_from_dict(model, k8s_snake_case_dict(model, wrong))


def test_run_pod_resources():
    resources = _values()["runLauncher"]["config"]["k8sRunLauncher"]["resources"]
    model = kubernetes.client.V1ResourceRequirements
    k8s_model_from_dict(model, k8s_snake_case_dict(model, resources))


def test_the_schema_is_not_changed_by_the_relaxation():
    """Only `required` is dropped: the types, enums and closed objects stay the chart's."""
    original = json.loads((SCHEMA_DIR / "values.schema.json").read_text())
    relaxed = _schema()

    def strip(node):
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k != "required"}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    assert strip(copy.deepcopy(original)) == strip(relaxed)


def test_files_named_in_the_values_exist():
    for path in re.findall(r"(?:docs|tests)/[\w./-]+\.(?:md|py)", VALUES.read_text()):
        assert Path(PROJECT_ROOT / path).exists(), path
