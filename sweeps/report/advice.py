"""What to train with a budget: the compute-optimal N and D of a study's Q(N, D), with intervals.

From a size x data-volume study's trial table: fit Q(N, D) (the reference estimator, configurations
as the bootstrap unit), fit the family's training FLOPs per sample against N, and maximise Q along
the budget's iso-compute curve (sweeps.laws.allocation). Every replicate of the fit's bootstrap
gives its own optimum, so N_opt, D_opt, Q_opt and the local allocation exponents carry percentile
intervals.

The advisor refuses, in one line that says why, where its fit cannot carry the answer:
- fewer than MIN_DISTINCT distinct sizes or data volumes (a law through two values of an axis has
  no curvature to place an optimum on);
- a fit with R² at most 0, the report's own no-trend criterion: Q does not follow N and D;
- Q_inf at a bound of App. E's box (0 or 1): the ceiling the optimum trades against is not
  identified;
- a budget more than MAX_EXTRAPOLATION times the study's largest trial: Chinchilla itself was
  trained at 5.76e23 FLOPs from laws fitted up to about 3e21 (Hoffmann et al. Sec. 3, Fig. 3:
  ~190x), and its refits disagree at that distance (Besiroglu et al. 2024); 100x, two decades, is
  as far as this tool goes;
- an optimum at the edge of the searched sizes (a tenth of the smallest to ten times the largest):
  the law keeps asking for a larger (or smaller) model than it has seen.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sweeps.laws.allocation import (
    SAMPLES_PER_HOUR,
    FlopsPerSample,
    QualityOptimum,
    local_exponents,
    quality_optimum,
)
from sweeps.laws.fits import fit_chinchilla, fit_joint
from sweeps.laws.forms import ChinchillaLaw, JointLaw
from sweeps.laws.optimizer import FitNotConvergedError
from sweeps.laws.result import LawFit
from sweeps.record.keys import Q_METRIC, TRAIN_LOSS_COLUMN
from sweeps.report.study_fits import usable_trials

MIN_DISTINCT = 3
MAX_EXTRAPOLATION = 100.0
SEARCH_WIDENING = 10.0  # sizes searched: a tenth of the smallest to ten times the largest
Q_INF_BOUND_TOLERANCE = 1e-6
FLOPS_PER_SAMPLE_COLUMN = "training_flops_per_sample"
FRAME_HOP_SECONDS = 0.01  # the dasheng preset's 160-sample hop at 16 kHz: the size grid's study MAE


class AdviceRefused(ValueError):
    """The study's fit cannot support an answer; the message says why."""


@dataclass(frozen=True, kw_only=True)
class Interval:
    value: float
    low: float
    high: float


@dataclass(frozen=True, kw_only=True)
class LossAdvice:
    """The same budget spent to minimise the study's training-loss law (where its trials logged a loss)."""

    n_params: Interval
    hours: Interval
    loss: Interval
    fit: LawFit


@dataclass(frozen=True, kw_only=True)
class Advice:
    budget_flops: float
    n_params: Interval
    hours: Interval
    q: Interval
    exponent_n: Interval  # N_opt ~ C^a around the budget
    exponent_d: Interval  # D_opt ~ C^b
    extrapolation: float  # budget / the largest trial's compute
    fit: LawFit
    flops: FlopsPerSample
    n_range: tuple[float, float]
    n_bootstrap_used: int
    loss: LossAdvice | None = None
    loss_note: str = ""  # why there is no loss-law answer, when there is none


def _check_grid(trials: pd.DataFrame, budget: float) -> None:
    for column, what in (("n_params", "model sizes"), ("hours", "data volumes")):
        distinct = trials[column].nunique() if column in trials.columns else 0
        if distinct < MIN_DISTINCT:
            raise AdviceRefused(
                f"the study has {distinct} distinct {what}; an optimum needs at least {MIN_DISTINCT} along each "
                "axis (run a size x data_volume grid)"
            )
    largest = float(trials["flops"].max())
    if budget > MAX_EXTRAPOLATION * largest:
        raise AdviceRefused(
            f"the budget {budget:.3g} FLOPs is {budget / largest:.0f}x the study's largest trial ({largest:.3g}); "
            f"the advisor extrapolates at most {MAX_EXTRAPOLATION:.0f}x (two decades): add larger trials first"
        )


def _samples_per_hour(trials: pd.DataFrame) -> float:
    """Crops of the study's models per hour of audio: 3600 s / (crop_frames x the 10 ms hop of the study
    MAE's dasheng front end); 10 s clips (App. B) where the trials do not say."""
    crops = trials["crop_frames"].dropna().unique() if "crop_frames" in trials.columns else []
    if len(crops) > 1:
        raise AdviceRefused(f"the trials train on crops of different lengths ({sorted(crops)} frames); one per study")
    return 3600.0 / (float(crops[0]) * FRAME_HOP_SECONDS) if len(crops) else SAMPLES_PER_HOUR


def _fit_quality(trials: pd.DataFrame, groups, *, n_bootstrap: int, seed: int) -> LawFit:
    """Q(N, D) with the reference estimator, or a refusal saying why it could not be fitted."""
    try:
        return fit_joint(
            trials["n_params"], trials["hours"], trials[Q_METRIC], groups=groups, n_bootstrap=n_bootstrap, seed=seed
        )
    except (ValueError, FitNotConvergedError) as error:
        raise AdviceRefused(f"Q(N,D) could not be fitted to this study: {error}") from error


def _check_fit(fit: LawFit) -> None:
    if not fit.r2 > 0.0:  # the report's own no-trend criterion (sweeps.report.q_trend): R² at most 0
        raise AdviceRefused(
            f"Q(N,D) explains none of the variation in Q (R² {fit.r2:.3g} over {fit.n_points} trials): Q does not "
            "follow N and D here, so no optimum along a budget means anything"
        )
    q_inf = fit.params["q_inf"]
    if q_inf < Q_INF_BOUND_TOLERANCE or q_inf > 1.0 - Q_INF_BOUND_TOLERANCE:
        raise AdviceRefused(
            f"Q(N,D)'s Q_inf sits at its bound ({q_inf:.6g}): the ceiling an optimum trades against is not "
            "identified by this study"
        )


def _optimum(params: dict, flops: FlopsPerSample, budget: float, n_range: tuple[float, float]) -> QualityOptimum:
    return quality_optimum(lambda n, d: JointLaw().predict(params, n, d), flops, budget, n_range)


def _exponents(params: dict, flops: FlopsPerSample, budget: float, n_range) -> tuple[float, float]:
    def at(compute: float) -> tuple[float, float]:
        best = _optimum(params, flops, compute, n_range)
        return best.n_params, best.hours

    return local_exponents(at, budget)


def _loss_advice(trials: pd.DataFrame, flops: FlopsPerSample, budget: float, n_range, *, n_bootstrap: int, seed: int):
    """(LossAdvice or None, why not): L(N, D) = E + A/N^alpha + B/D^beta (Hoffmann et al.'s form, Huber
    on log L) fitted to the trials' last training loss, minimised along the same iso-compute curve."""
    if TRAIN_LOSS_COLUMN not in trials.columns or not np.isfinite(trials[TRAIN_LOSS_COLUMN].astype(float)).all():
        return None, "the trials logged no training loss"
    groups = trials["configuration"].to_numpy() if "configuration" in trials.columns else None
    try:
        fit = fit_chinchilla(trials["n_params"], trials["hours"], trials[TRAIN_LOSS_COLUMN], groups=groups,
                             n_bootstrap=n_bootstrap, seed=seed)  # fmt: skip
    except (ValueError, FitNotConvergedError) as error:
        return None, f"the loss law did not fit: {error}"

    def lowest(params: dict) -> QualityOptimum:
        return quality_optimum(lambda n, d: -ChinchillaLaw().predict(params, n, d), flops, budget, n_range)

    best = lowest(fit.params)
    if best.at_edge:
        return None, "the loss law is lowest at the edge of the sizes searched"
    draws = [lowest(params) for params in fit.replicates.to_dict("records")]
    return LossAdvice(
        n_params=_interval(best.n_params, [d.n_params for d in draws]), hours=_interval(best.hours, [d.hours for d in draws]),
        loss=_interval(-best.q, [-d.q for d in draws]), fit=fit,
    ), ""  # fmt: skip


def _interval(value: float, draws: list[float]) -> Interval:
    if len(draws) < 2:
        return Interval(value=value, low=np.nan, high=np.nan)
    low, high = np.percentile(draws, [2.5, 97.5])
    return Interval(value=value, low=float(low), high=float(high))


def advise(table: pd.DataFrame, budget_flops: float, *, n_bootstrap: int = 200, seed: int = 0) -> Advice:
    """The compute-optimal N, D and Q at `budget_flops` from a study's trial table (see the module doc)."""
    trials, _ = usable_trials(table)
    if FLOPS_PER_SAMPLE_COLUMN not in trials.columns or trials[FLOPS_PER_SAMPLE_COLUMN].isna().any():
        raise AdviceRefused(
            f"the trials carry no {FLOPS_PER_SAMPLE_COLUMN} (written by pretraining since the advisor exists): "
            "rerun or refit a study whose trials logged it"
        )
    _check_grid(trials, budget_flops)
    groups = trials["configuration"].to_numpy() if "configuration" in trials.columns else None
    fit = _fit_quality(trials, groups, n_bootstrap=n_bootstrap, seed=seed)
    _check_fit(fit)
    flops = FlopsPerSample.fit(
        trials["n_params"], trials[FLOPS_PER_SAMPLE_COLUMN], samples_per_hour=_samples_per_hour(trials)
    )
    n_range = (float(trials["n_params"].min()) / SEARCH_WIDENING, float(trials["n_params"].max()) * SEARCH_WIDENING)
    best = _optimum(fit.params, flops, budget_flops, n_range)
    if best.at_edge:
        raise AdviceRefused(
            f"Q(N,D) is best at the edge of the sizes searched ({n_range[0]:.3g}-{n_range[1]:.3g} parameters, "
            f"optimum {best.n_params:.3g}): the law keeps asking for sizes the study has not seen"
        )
    a, b = _exponents(fit.params, flops, budget_flops, n_range)
    draws: dict[str, list[float]] = {"n": [], "d": [], "q": [], "a": [], "b": []}
    for params in fit.replicates.to_dict("records"):
        replicate = _optimum(params, flops, budget_flops, n_range)
        replicate_a, replicate_b = _exponents(params, flops, budget_flops, n_range)
        for key, value in zip(draws, (replicate.n_params, replicate.hours, replicate.q, replicate_a, replicate_b)):
            draws[key].append(value)
    loss, loss_note = _loss_advice(trials, flops, budget_flops, n_range, n_bootstrap=n_bootstrap, seed=seed)
    return Advice(
        loss=loss, loss_note=loss_note, budget_flops=budget_flops, n_params=_interval(best.n_params, draws["n"]),
        hours=_interval(best.hours, draws["d"]), q=_interval(best.q, draws["q"]),
        exponent_n=_interval(a, draws["a"]), exponent_d=_interval(b, draws["b"]),
        extrapolation=budget_flops / float(trials["flops"].max()), fit=fit, flops=flops, n_range=n_range,
        n_bootstrap_used=len(draws["n"]),
    )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class HoldoutCheck:
    held_out: tuple[str, ...]  # trial names
    observed: tuple[float, ...]
    predicted: tuple[Interval, ...]

    @property
    def mean_abs_error(self) -> float:
        return float(np.mean([abs(p.value - q) for p, q in zip(self.predicted, self.observed)]))

    @property
    def inside(self) -> int:
        """Held-out trials inside an informative interval (one wider than Q's range [0, 1] is not)."""
        return sum(informative(p) and p.low <= q <= p.high for p, q in zip(self.predicted, self.observed))

    @property
    def n_informative(self) -> int:
        return sum(informative(p) for p in self.predicted)


def informative(interval: Interval) -> bool:
    """An interval of Q that says something: finite and narrower than Q's whole range."""
    return bool(np.isfinite(interval.low) and np.isfinite(interval.high) and interval.high - interval.low < 1.0)


HOLDOUT_FACTOR = 2.0  # held out: the trials within a factor 2 of the study's largest compute


def holdout_check(table: pd.DataFrame, *, n_bootstrap: int = 200, seed: int = 0) -> HoldoutCheck:
    """Refit Q(N, D) without the largest-compute trials and predict their Q with 95% prediction intervals."""
    trials, _ = usable_trials(table)
    held = trials["flops"] >= trials["flops"].max() / HOLDOUT_FACTOR
    kept = trials[~held]
    for column in ("n_params", "hours"):
        if kept[column].nunique() < MIN_DISTINCT:
            raise AdviceRefused(
                f"without its {int(held.sum())} largest-compute trial(s) the study keeps {kept[column].nunique()} "
                f"distinct {column}: too few to refit Q(N,D) for a held-out check"
            )
    groups = kept["configuration"].to_numpy() if "configuration" in kept.columns else None
    fit = _fit_quality(kept, groups, n_bootstrap=n_bootstrap, seed=seed)
    n, d = trials.loc[held, "n_params"].to_numpy(float), trials.loc[held, "hours"].to_numpy(float)
    values = fit.predict(n, d)
    # A held-out trial's Q carries its own noise, so the band is a prediction interval: the bootstrap
    # band of the law and the trials' scatter about it (residual SD of the refit), in quadrature.
    band_low, band_high = fit.predict_interval(n, d)
    residuals = kept[Q_METRIC].to_numpy(float) - fit.predict(
        kept["n_params"].to_numpy(float), kept["hours"].to_numpy(float)
    )
    scatter = 1.96 * float(np.sqrt(np.sum(residuals**2) / max(len(residuals) - len(fit.params), 1)))
    low = values - np.hypot(values - band_low, scatter)
    high = values + np.hypot(band_high - values, scatter)
    return HoldoutCheck(
        held_out=tuple(trials.loc[held, "trial"].astype(str)),
        observed=tuple(trials.loc[held, Q_METRIC].astype(float)),
        predicted=tuple(
            Interval(value=float(v), low=float(lo), high=float(hi)) for v, lo, hi in zip(values, low, high)
        ),
    )


def _cell(interval: Interval, fmt: str) -> str:
    if not np.isfinite(interval.low):
        return f"{interval.value:{fmt}} (no interval: no bootstrap)"
    return f"{interval.value:{fmt}} (95% {interval.low:{fmt}} to {interval.high:{fmt}})"


def advice_lines(advice: Advice, holdout: HoldoutCheck | None = None) -> list[str]:
    """The answer in plain lines: what to train, how good, how far it extrapolates, the held-out check."""
    lines = [
        f"budget {advice.budget_flops:.3g} training FLOPs ({advice.extrapolation:.3g}x the study's largest trial), "
        f"each sample seen once ({advice.flops.samples_per_hour:,.0f} samples an hour):",
        f"  model size N: {_cell(advice.n_params, '.3g')} parameters",
        f"  data D: {_cell(advice.hours, ',.4g')} hours",
        f"  predicted Q: {_cell(advice.q, '.4f')}",
        f"  allocation around this budget: N_opt ~ C^{_cell(advice.exponent_n, '.3f')}, "
        f"D_opt ~ C^{_cell(advice.exponent_d, '.3f')}",
        f"  from Q(N,D) over {advice.fit.n_points} trials (R² {advice.fit.r2:.3f}, {advice.n_bootstrap_used} "
        f"bootstrap refits) and FLOPs per sample ~ N^{advice.flops.gamma:.3f}",
    ]
    if advice.loss is not None:
        lines.append(
            f"  the training-loss law L(N,D) at the same budget: N {_cell(advice.loss.n_params, '.3g')}, "
            f"D {_cell(advice.loss.hours, ',.4g')} h, loss {_cell(advice.loss.loss, '.4g')}"
        )
    elif advice.loss_note:
        lines.append(f"  no training-loss answer: {advice.loss_note}")
    return lines + holdout_lines(holdout)


def holdout_lines(holdout: HoldoutCheck | None) -> list[str]:
    """The held-out check in plain lines (none without one)."""
    lines = []
    if holdout is not None:
        lines.append(
            f"held-out check: refitted without the {len(holdout.held_out)} largest-compute trial(s), Q(N,D) predicts "
            f"them within {holdout.mean_abs_error:.4f} in Q on average; {holdout.inside} of {len(holdout.held_out)} "
            f"inside their 95% prediction interval ({holdout.n_informative} of those intervals informative)"
        )
        for name, q, p in zip(holdout.held_out, holdout.observed, holdout.predicted):
            shown = (
                _cell(p, ".4f")
                if informative(p)
                else f"{p.value:.4f} (95% interval wider than Q's range: not informative)"
            )
            lines.append(f"  {name}: observed {q:.4f}, predicted {shown}")
    return lines
