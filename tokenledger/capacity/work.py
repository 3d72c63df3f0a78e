"""The work model of docs/metrics.md, section 6: what a GPU spends on prefill and on decode, and load tests checked
against production's mix.

work = lambda x (E[T_in_recomputed] x C_prefill + E[T_out] x C_decode), in GPU-seconds per second. C_prefill is
GPU-seconds per recomputed input token, C_decode GPU-seconds per output token, fitted by least squares through the
origin to points (recomputed input tokens/s, output tokens/s, busy GPU-seconds/s): a load test's steps below
saturation, else the day's production hours not over capacity (labelled). Per output token a mix costs
w = C_prefill x (recomputed input per output token) + C_decode GPU-seconds; sizing divides the peak's work rate by
the work one GPU sustains at the capacity point (capacity goodput per GPU x w of its mix). Small pure functions over
plain numbers, so that every figure can be checked by hand (tests/test_work_model.py); ADR 0121.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# Fewer points than this give no fit: two coefficients need a third point for the fit to say anything.
MIN_POINTS = 3
# The points' mixes (recomputed input per output token) must spread at least this much (max / min - 1): on one mix
# the prefill and decode shares of the work cannot be told apart.
MIN_MIX_SPREAD = 0.10
# A fit explaining less of the busy time than this (R², about the mean) is published but not used.
MIN_FIT_R2 = 0.8


@dataclass(frozen=True)
class Fit:
    """A fit of the work model: the coefficients (None when there is no usable fit), its points, R² and a note."""

    c_prefill: float | None
    c_decode: float | None
    points: int
    r2: float | None
    note: str

    @property
    def usable(self) -> bool:
        return self.c_prefill is not None and self.c_decode is not None


def _r2(y: np.ndarray, predicted: np.ndarray) -> float | None:
    total = float(((y - y.mean()) ** 2).sum())
    if total == 0:
        return None
    return 1.0 - float(((y - predicted) ** 2).sum()) / total


def fit_work_model(points: Sequence[tuple[float, float, float]], what: str = "points") -> Fit:
    """Least squares through the origin of busy GPU-seconds/s y on recomputed input tokens/s x1 and output
    tokens/s x2 over `points` (x1, x2, y), the coefficients non-negative.

    No fit with fewer than MIN_POINTS points, or when their mixes x1/x2 spread less than MIN_MIX_SPREAD (the design
    is degenerate: every point is the same mix, so C_prefill and C_decode are not identified). A coefficient that
    comes out negative is set to 0 and the other refitted alone (the note says so). A fit whose R² is below
    MIN_FIT_R2 keeps its R² and points but no coefficients."""
    usable = [(x1, x2, y) for x1, x2, y in points if x2 > 0]
    n = len(usable)
    if n < MIN_POINTS:
        return Fit(None, None, n, None, f"no fit: {n} {what} with output and GPU telemetry, {MIN_POINTS} needed")
    x = np.array([(x1, x2) for x1, x2, _ in usable], dtype=float)
    y = np.array([p[2] for p in usable], dtype=float)
    ratios = x[:, 0] / x[:, 1]
    if ratios.min() <= 0 or ratios.max() / ratios.min() - 1 < MIN_MIX_SPREAD:
        return Fit(None, None, n, None,
                   f"no fit: the {n} {what} share one mix (recomputed input per output token {ratios.min():.4g} to "
                   f"{ratios.max():.4g}, less than {MIN_MIX_SPREAD:.0%} apart), so C_prefill and C_decode cannot "
                   "be told apart")
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    c_prefill, c_decode = float(coef[0]), float(coef[1])
    note = f"least squares through the origin over {n} {what}"
    if c_prefill < 0 or c_decode < 0:
        alone = 1 if c_prefill < 0 else 0
        column = x[:, alone]
        value = float(column @ y / (column @ column))
        dropped = "C_prefill" if alone == 1 else "C_decode"
        c_prefill, c_decode = (0.0, value) if alone == 1 else (value, 0.0)
        note += f"; {dropped} came out negative: set to 0 and the other refitted alone"
        if value <= 0:
            return Fit(None, None, n, None, f"no fit: {note}, and it is not positive either")
    r2 = _r2(y, x @ np.array([c_prefill, c_decode]))
    if r2 is None or r2 < MIN_FIT_R2:
        shown = "undefined (every point equally busy)" if r2 is None else f"{r2:.3f}"
        return Fit(None, None, n, r2, f"no usable fit: {note} explains too little of the busy time (R² {shown}, "
                                      f"{MIN_FIT_R2:g} needed)")
    return Fit(c_prefill, c_decode, n, r2, f"{note}, R² {r2:.3f}")


def choose_fit(loadtest: Sequence[tuple[float, float, float]], production: Sequence[tuple[float, float, float]],
               run_id: str | None) -> tuple[Fit, str | None]:
    """The work model of a deployment and its source: the load test's steps below saturation ('loadtest'), else the
    day's production hours not over capacity ('production'); (the last attempt, None) when neither fits."""
    tried = []
    if run_id is not None:
        fit = fit_work_model(loadtest, f"steps of load test {run_id} up to lambda_slo_max")
        if fit.usable:
            return fit, "loadtest"
        tried.append(fit)
    fit = fit_work_model(production, "production hours not over capacity")
    if fit.usable:
        note = f"from production hours (no load test fits: {tried[0].note})" if tried else "from production hours"
        return Fit(fit.c_prefill, fit.c_decode, fit.points, fit.r2, f"{note}; {fit.note}"), "production"
    notes = [f.note for f in tried] + [fit.note]
    last = tried[0] if tried and not fit.points else fit
    return Fit(None, None, last.points, last.r2, "; ".join(notes)), None


def work_per_output_token(c_prefill: float | None, c_decode: float | None,
                          recomputed_per_output: float | None) -> float | None:
    """w(mix) = C_prefill x recomputed input per output token + C_decode (GPU-seconds per output token)."""
    if c_prefill is None or c_decode is None or recomputed_per_output is None:
        return None
    return c_prefill * recomputed_per_output + c_decode


def work_rate(c_prefill: float, c_decode: float, recomputed_token_rate: float, output_token_rate: float) -> float:
    """GPU-seconds per second of a load: C_prefill x recomputed input tokens/s + C_decode x output tokens/s."""
    return c_prefill * recomputed_token_rate + c_decode * output_token_rate


@dataclass(frozen=True)
class WorkSizing:
    """GPUs needed at the peak by the work model, before headroom: peak work rate / sustainable work per GPU."""

    peak_work_rate: float
    sustainable_work_per_gpu: float
    capped: bool  # the capacity point's work per GPU came out above 1 and was taken as 1

    @property
    def base_gpus(self) -> float:
        return self.peak_work_rate / self.sustainable_work_per_gpu


def work_sizing(c_prefill: float, c_decode: float, peak_output_token_rate: float,
                peak_recomputed_token_rate: float, capacity_goodput_per_gpu: float,
                capacity_recomputed_per_output: float) -> WorkSizing:
    """Sustainable work per GPU = capacity goodput per GPU x w(capacity point's mix), at most 1 (a GPU is busy at
    most all the time); peak work rate = C_prefill x the peak's recomputed input rate + C_decode x its output rate."""
    sustainable = capacity_goodput_per_gpu * (c_prefill * capacity_recomputed_per_output + c_decode)
    capped = sustainable > 1.0
    return WorkSizing(work_rate(c_prefill, c_decode, peak_recomputed_token_rate, peak_output_token_rate),
                      min(sustainable, 1.0), capped)


def _change(test: float, production: float) -> float:
    return test / production - 1.0


def representativeness(production: Mapping[str, Any], test: Mapping[str, Any], recomputed_tolerance_pct: float,
                       isl_p90_tolerance_pct: float) -> tuple[bool | None, str]:
    """Whether the load test's mix stands for production's: its recomputed input per request within
    ±recomputed_tolerance_pct of production's and its P90 ISL within ±isl_p90_tolerance_pct; the rule in words with
    the figures. None (not judged) without a test mix or without production requests."""
    rule = (f"recomputed input per request within ±{recomputed_tolerance_pct:g}% of production's and P90 ISL within "
            f"±{isl_p90_tolerance_pct:g}%")
    keys = ("recomputed_input_per_request", "isl_p90")
    if any(test.get(k) is None for k in keys):
        return None, f"not judged: no load-test mix ({rule})"
    if not production.get("requests") or any(not production.get(k) for k in keys):
        return None, f"not judged: no production requests with input ({rule})"
    recomputed = _change(test["recomputed_input_per_request"], production["recomputed_input_per_request"])
    isl = _change(test["isl_p90"], production["isl_p90"])
    ok_recomputed = abs(recomputed) * 100 <= recomputed_tolerance_pct + 1e-9
    ok_isl = abs(isl) * 100 <= isl_p90_tolerance_pct + 1e-9
    words = (f"recomputed input per request {test['recomputed_input_per_request']:,.0f} vs "
             f"{production['recomputed_input_per_request']:,.0f} in production ({recomputed:+.0%}, "
             f"{'within' if ok_recomputed else 'outside'} ±{recomputed_tolerance_pct:g}%); P90 ISL "
             f"{test['isl_p90']:,.0f} vs {production['isl_p90']:,.0f} ({isl:+.0%}, "
             f"{'within' if ok_isl else 'outside'} ±{isl_p90_tolerance_pct:g}%)")
    return ok_recomputed and ok_isl, words


def rescaled_goodput_per_gpu(capacity_goodput_per_gpu: float | None, work_capacity: float | None,
                             work_production: float | None) -> float | None:
    """The capacity goodput per GPU at production's mix: capacity goodput per GPU x w(capacity mix) / w(production
    mix), the same GPU-seconds spent on production's tokens."""
    if capacity_goodput_per_gpu is None or not work_capacity or not work_production:
        return None
    return capacity_goodput_per_gpu * work_capacity / work_production


def _g(x: float) -> str:
    return f"{x:.4g}"


def model_figures(inputs: Mapping[str, Any], loadtest_points: Sequence[tuple[float, float, float]],
                  production_points: Sequence[tuple[float, float, float]]) -> dict[str, Any]:
    """The work model and the load test's check of one deployment from its row of
    sql/capacity/capacity_model_inputs.sql and its points (sql/capacity/work_model_*_points.sql).

    The capacity point's mix is the lambda_slo_max step's for a load-test capacity and the day's production mix for
    a demonstrated one (its best window is a part of that day). The test is stale when older than the policy's
    loadtest_max_age_days, unrepresentative when its mix breaks the likeness rule; either asks to re-baseline."""
    run = inputs.get("loadtest_run_id")
    fit, source = choose_fit(loadtest_points, production_points, run)
    out: dict[str, Any] = {
        "deployment_id": inputs["deployment_id"], "c_prefill": fit.c_prefill, "c_decode": fit.c_decode,
        "coefficients_source": source, "coefficients_run_id": run if source == "loadtest" else None,
        "fit_points": fit.points, "fit_r2": fit.r2, "fit_note": fit.note,
        "loadtest_stale": None, "loadtest_representative": None, "representativeness_rule": None,
        "work_per_output_token_production": None, "work_per_output_token_capacity": None,
        "sustainable_work_per_gpu": None, "peak_work_rate": None, "capacity_goodput_per_gpu_rescaled": None}
    notes = []
    production = {k: inputs.get(k) for k in ("requests", "recomputed_input_per_request", "isl_p90")}
    test = {"recomputed_input_per_request": inputs.get("loadtest_recomputed_input_per_request"),
            "isl_p90": inputs.get("loadtest_isl_p90")}
    if run is not None:
        age, limit = inputs["loadtest_age_days"], inputs["loadtest_max_age_days"]
        out["loadtest_stale"] = age > limit
        if out["loadtest_stale"]:
            notes.append(f"load test {run} is {age} days old, older than the {limit} allowed: stale, re-baseline")
        verdict, rule = representativeness(production, test, inputs["loadtest_recomputed_input_tolerance_pct"],
                                           inputs["loadtest_isl_p90_tolerance_pct"])
        out["loadtest_representative"], out["representativeness_rule"] = verdict, rule
    else:
        notes.append("no load test of this configuration to check against production")
    if inputs.get("other_configuration_run_id") is not None:
        notes.append(f"the newest load test, {inputs['other_configuration_run_id']}, measured another configuration "
                     f"({inputs['other_configuration_differences']}): re-baseline this one")
    c_p, c_d = fit.c_prefill, fit.c_decode
    w_production = work_per_output_token(c_p, c_d, inputs.get("recomputed_per_output_token"))
    capacity_source = inputs.get("capacity_source")
    capacity_mix = (inputs.get("loadtest_recomputed_per_output_token") if capacity_source == "loadtest"
                    else inputs.get("recomputed_per_output_token") if capacity_source == "demonstrated" else None)
    w_capacity = work_per_output_token(c_p, c_d, capacity_mix)
    per_gpu = inputs.get("capacity_goodput_per_gpu")
    out["work_per_output_token_production"], out["work_per_output_token_capacity"] = w_production, w_capacity
    rescaled = rescaled_goodput_per_gpu(per_gpu, w_capacity, w_production)
    out["capacity_goodput_per_gpu_rescaled"] = rescaled
    if fit.usable and per_gpu and capacity_mix is not None and inputs.get("peak_output_token_rate") is not None:
        sizing = work_sizing(c_p, c_d, inputs["peak_output_token_rate"], inputs["peak_recomputed_input_token_rate"],
                             per_gpu, capacity_mix)
        out["sustainable_work_per_gpu"], out["peak_work_rate"] = sizing.sustainable_work_per_gpu, sizing.peak_work_rate
        if sizing.capped:
            notes.append("the capacity point's work per GPU came out above 1 GPU-second per second: taken as 1")
    if out["loadtest_representative"] is False and capacity_source == "loadtest":
        if rescaled is not None:
            notes.append(f"the capacity was measured on a mix unlike production's: {_g(per_gpu)} tok/s per GPU is "
                         f"{_g(rescaled)} at production's mix by the work model; re-baseline")
        else:
            notes.append("the capacity was measured on a mix unlike production's and no work model rescales it; "
                         "re-baseline")
    if not fit.usable:
        notes.append("no work model: GPUs needed from output tokens alone")
    out["model_note"] = "; ".join(notes) if notes else "work model in use; the load test stands for production"
    return out
