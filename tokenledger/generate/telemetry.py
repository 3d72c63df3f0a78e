"""GPU telemetry of the generated fleet (raw/gpu/dt=YYYY-MM-DD/), consistent with the load it served.

Each minute a deployment's GPUs are as busy as the work arriving for them: the same demand and replicas the gateway
generator serves its requests with (``gateway.load_shape``, ``fleet.mean_work_rate``, ``fleet.replicas_per_minute``),
their ratio the utilization. A GPU's power rises from its type's idle draw to its board power (TDP) with that
utilization, with a little noise: an idle hour is at idle power. One sample a minute per GPU keeps the files small.

The Kubernetes deployments (the H100s) are written as the DCGM exporter's series through a Prometheus range query
(``dcgm-<deployment>.json.gz``), their GPUs named by pod (``llm/<deployment>-<replica>``); the on-premises L40S as
the ``nvidia-smi`` log of its host (``<host>.csv``). config/deployments.yaml maps them by ``gpu_pods`` and
``gpu_hosts`` (``mapping_lines``).
"""

from __future__ import annotations

import gzip
import json
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import numpy as np

from .fleet import mean_work_rate, replicas_per_minute
from .gateway import load_shape
from .scenario import DEPLOYMENTS, MINUTES_PER_DAY, Deployment, rng_for

#: Idle draw of each GPU type (W), a model resident in memory and no kernel running: NVIDIA's data sheets give the
#: board power (the inventory's gpu_power_w); the idle draw is what nvidia-smi shows on an idle card of the type.
IDLE_W = {"H100-NVL-94GB": 60.0, "L40S-48GB": 35.0, "H100-SXM-80GB": 75.0}
NAMESPACE = "llm"


def _on_prem(dep: Deployment) -> bool:
    return dep.hosting == "on_prem"


def host_of(dep: Deployment, replica: int) -> str:
    """The host of an on-premises replica (its nvidia-smi log's name)."""
    return f"{dep.deployment_id}-node{replica}"


def mapping_lines(dep: Deployment) -> list[str]:
    """The deployments.yaml lines that claim the deployment's GPUs for its telemetry."""
    if _on_prem(dep):
        return [f'    gpu_hosts: ["{dep.deployment_id}-node*"]']
    return [f'    gpu_pods: ["{NAMESPACE}/{dep.deployment_id}-*"]']


def _utilization(dep: Deployment, start: date, day: date, requests_per_day: int, seed: int) -> tuple[np.ndarray,
                                                                                                   np.ndarray]:
    """Replicas in force and their utilization (0-1) every minute of the day."""
    reps = replicas_per_minute(dep, start, day, requests_per_day)
    demand = mean_work_rate(dep.deployment_id, requests_per_day) * load_shape(seed, day, dep)
    return reps, np.clip(demand / reps, 0.0, 1.0)


def _gpu_samples(dep: Deployment, util: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """One GPU's utilization (%), SM activity, power (W) and memory (MiB) every minute, around the replica's load."""
    busy = np.clip(util + rng.normal(0, 0.03, util.size), 0.0, 1.0)
    idle, tdp = IDLE_W[dep.gpu_type], float(dep.gpu_power_w)
    power = np.clip(idle + (tdp - idle) * busy ** 0.8 + rng.normal(0, 0.01 * tdp, util.size), idle * 0.9, tdp)
    util_pct = np.round(100 * np.clip(busy * 1.15, 0, 1))  # kernels run longer than the work they finish
    memory = np.full(util.size, 0.9 * {"H100-NVL-94GB": 95_830, "L40S-48GB": 46_068}.get(dep.gpu_type, 81_559))
    return util_pct, np.round(0.8 * busy, 3), np.round(power, 2), np.round(memory)


def write_telemetry(home: Path, start: date, day: date, requests_per_day: int, seed: int) -> list[Path]:
    """Write the day's telemetry of every GPU deployment; returns the files."""
    folder = home / "raw" / "gpu" / f"dt={day.isoformat()}"
    folder.mkdir(parents=True, exist_ok=True)
    midnight = datetime.combine(day, time(0), tzinfo=UTC)
    epoch = int(midnight.timestamp()) + 60 * np.arange(MINUTES_PER_DAY)
    files = []
    for index, dep in enumerate(DEPLOYMENTS):
        reps, util = _utilization(dep, start, day, requests_per_day, seed)
        rng = rng_for(seed, day, dep.deployment_id, "telemetry")
        series, lines = [], {}
        for replica in range(int(reps.max())):
            live = reps > replica  # the replica's GPUs are sampled while it is in force
            for g in range(dep.gpus_per_replica):
                util_pct, sm, power, memory = _gpu_samples(dep, util, rng)
                uuid = f"GPU-{index:02d}{replica:02d}{g:02d}-{seed % 10_000:04d}"
                if _on_prem(dep):
                    lines.setdefault(host_of(dep, replica), []).extend(
                        (m, f"{(midnight + timedelta(minutes=int(m))).strftime('%Y/%m/%d %H:%M:%S')}.000, {uuid}, "
                            f"{g}, {power[m]:.2f} W, {util_pct[m]:.0f} %, {memory[m]:.0f} MiB")
                        for m in np.flatnonzero(live))
                    continue
                labels = {"Hostname": f"{dep.deployment_id}-node{replica}", "gpu": str(g), "UUID": uuid,
                          "modelName": f"NVIDIA {dep.gpu_type}", "namespace": NAMESPACE,
                          "pod": f"{dep.deployment_id}-{replica}", "container": "vllm"}
                for name, values in (("DCGM_FI_DEV_POWER_USAGE", power), ("DCGM_FI_DEV_GPU_UTIL", util_pct),
                                     ("DCGM_FI_PROF_SM_ACTIVE", sm), ("DCGM_FI_DEV_FB_USED", memory)):
                    series.append({"metric": {"__name__": name, **labels}, "values": [
                        [int(epoch[m]), f"{values[m]:g}"] for m in np.flatnonzero(live)]})
        if series:
            path = folder / f"dcgm-{dep.deployment_id}.json.gz"
            doc = {"status": "success", "data": {"resultType": "matrix", "result": series}}
            path.write_bytes(gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), mtime=0))
            files.append(path)
        for host, rows in lines.items():
            path = folder / f"{host}.csv"
            body = "".join(text + "\n" for _, text in sorted(rows, key=lambda r: r[0]))
            path.write_text("timestamp, uuid, index, power.draw [W], utilization.gpu [%], memory.used [MiB]\n" + body)
            files.append(path)
    return files
