"""Per-task Q(R) laws (paper Sec. IV-H, Fig. 8): which HEAR tasks saturate, which still rise.

The paper fits Eq. 3 to each of its 16 tasks and finds the parameters differ by task: some reach
a ceiling Q_inf < 1, others rise towards Q_inf = 1. Each `score/<task>` column is fitted against
RankMe with the reference estimator (paper App. E), and the task is classed

- "saturating" when Q_inf < 1 and the upper end of its 95% bootstrap interval is below 1;
- "still rising" when that interval reaches 1 (the data cannot exclude a law without ceiling);
- "no detectable trend" before either, when the task's score neither rises nor falls with RankMe
  (Spearman's p >= 0.05) or the law explains it no better than its mean (R² <= 0): the checks the
  report makes for the headline Q(R) (sweeps.report.q_trend). The paper's tasks all follow their
  laws; on a small study a task's scores can be a flat cloud, and a law fitted to it converges to a
  flat line whose Q_inf, R_C and alpha describe nothing, so they are not printed or logged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sweeps.laws.fits import fit_saturating
from sweeps.laws.optimizer import FitNotConvergedError
from sweeps.laws.result import LawFit
from sweeps.record.keys import TASK_SCORE_PREFIX
from sweeps.report.rank_trend import no_monotone_trend

SATURATING = "saturating"
STILL_RISING = "still rising"
NO_TREND = "no detectable trend"
# The reference fit reaches Q_inf = 1 as 1 - e^-30 (its log-error floor); anything this close is 1.
Q_INF_ONE_TOLERANCE = 1e-6
# What a Q_inf interval whose every resample sits at the bound reads as: "(1-1)" would look like a
# precise ceiling at 1, when the data identify none (the law is a rising power law over the points).
NO_CEILING = "every resample at the bound 1: no ceiling identified"


def q_inf_pinned_at_one(fit, key: str) -> bool:
    """True when `key` is Q_inf and even the low end of its bootstrap interval is at the bound 1."""
    return key == "q_inf" and key in fit.ci and fit.ci[key][0] >= 1.0 - Q_INF_ONE_TOLERANCE


def q_inf_reaches_one(fit) -> bool:
    """True when the upper end of Q_inf's bootstrap interval is at the bound 1: the data cannot exclude
    a law without a ceiling, so a Q_inf below the best observed Q is no evidence of saturation."""
    return "q_inf" in fit.ci and fit.ci["q_inf"][1] >= 1.0 - Q_INF_ONE_TOLERANCE


@dataclass(frozen=True, kw_only=True)
class TaskLaw:
    task: str
    fit: LawFit
    classification: str  # SATURATING, STILL_RISING or NO_TREND
    basis: str  # what the class rests on: the interval, the point estimate without one, or why no trend

    @property
    def informative(self) -> bool:
        """Whether the fitted parameters describe a trend (and so are printed and logged)."""
        return self.classification != NO_TREND


def classify(fit: LawFit, rankme: np.ndarray | None = None, scores: np.ndarray | None = None) -> tuple[str, str]:
    """(class, basis): no trend first (given the points), else by the upper end of Q_inf's interval,
    or by Q_inf alone without one."""
    no_trend = [no_monotone_trend(rankme, scores, "RankMe", what="the score")] if rankme is not None else []
    if not fit.r2 > 0:  # NaN included: a constant score
        no_trend.append(f"R² {fit.r2:.3f}: the law explains the score no better than its mean")
    if any(no_trend):
        return NO_TREND, "; ".join(reason for reason in no_trend if reason)
    if "q_inf" in fit.ci:
        reaches_one = q_inf_reaches_one(fit)
        basis = f"{100 * fit.ci_level:.0f}% interval upper end {fit.ci['q_inf'][1]:.4f}"
    else:
        reaches_one = fit.params["q_inf"] >= 1.0 - Q_INF_ONE_TOLERANCE
        basis = "Q_inf alone: no bootstrap interval"
    return (STILL_RISING if reaches_one else SATURATING), basis


def task_score_columns(table: pd.DataFrame) -> list[str]:
    return [c for c in table.columns if c.startswith(TASK_SCORE_PREFIX)]


def fit_task_laws(
    trials: pd.DataFrame, *, min_distinct: int, n_bootstrap: int, seed: int = 0
) -> tuple[dict[str, TaskLaw], dict[str, str]]:
    """Q(R) per `score/<task>` column of the usable trials; (laws by task, why a task was not fitted)."""
    laws: dict[str, TaskLaw] = {}
    skipped: dict[str, str] = {}
    if "rankme" not in trials.columns:
        return laws, {column.removeprefix(TASK_SCORE_PREFIX): "the trial table has no rankme column"
                      for column in task_score_columns(trials)}  # fmt: skip
    for column in task_score_columns(trials):
        task = column.removeprefix(TASK_SCORE_PREFIX)
        scores = pd.to_numeric(trials[column], errors="coerce")
        rows = trials[np.isfinite(scores) & np.isfinite(pd.to_numeric(trials["rankme"], errors="coerce"))]
        if rows["rankme"].nunique() < min_distinct:
            skipped[task] = (
                f"only {rows['rankme'].nunique()} distinct RankMe value(s) with a score; need >= {min_distinct}"
            )
            continue
        groups = rows["configuration"].to_numpy() if "configuration" in rows.columns else None
        try:
            fit = fit_saturating(
                rows["rankme"], rows[column].astype(float), groups=groups, n_bootstrap=n_bootstrap, seed=seed
            )
        except (ValueError, FitNotConvergedError) as error:
            skipped[task] = str(error)
            continue
        classification, basis = classify(fit, rows["rankme"].to_numpy(float), rows[column].to_numpy(float))
        laws[task] = TaskLaw(task=task, fit=fit, classification=classification, basis=basis)
    return laws, skipped


def _interval(fit: LawFit, name: str) -> str:
    if name not in fit.ci:
        return " [no interval]"
    low, high = fit.ci[name]
    if q_inf_pinned_at_one(fit, name):
        return f" [{NO_CEILING}]"
    return f" [{low:.3f}, {high:.3f}]"


def task_laws_markdown(laws: dict[str, TaskLaw], skipped: dict[str, str]) -> list[str]:
    """The Sec. IV-H table: task, Q_inf [CI], R_C, alpha, R^2, class."""
    if not laws and not skipped:
        return []
    lines = [
        "",
        "## Per-task Q(R) laws (paper Sec. IV-H)",
        "",
        (
            "Eq. 3 fitted to each task's score against RankMe (reference estimator). A task is *saturating* "
            "when the 95% interval of Q_inf ends below 1, *still rising* when it reaches 1, and shows *no "
            "detectable trend* when its score neither rises nor falls with RankMe (Spearman's p >= 0.05) or "
            "the law explains it no better than its mean (R² <= 0): that law's parameters describe nothing "
            "and are not printed."
        ),
        "",
        "| task | Q_inf [95% CI] | R_C | alpha | R² | class |",
        "|---|---|---|---|---|---|",
    ]
    for task, law in laws.items():
        fit = law.fit
        if not law.informative:
            lines.append(f"| {task} | - | - | - | {fit.r2:.3f} | {law.classification} ({law.basis}) |")
            continue
        lines.append(
            f"| {task} | {fit.params['q_inf']:.3f}{_interval(fit, 'q_inf')} | {fit.params['x_c']:.4g} | "
            f"{fit.params['alpha']:.3f} | {fit.r2:.3f} | {law.classification} ({law.basis}) |"
        )
    lines += [f"- {task} not fitted: {reason}." for task, reason in skipped.items()]
    return lines


def task_law_metrics(laws: dict[str, TaskLaw]) -> tuple[dict[str, float], dict[str, str]]:
    """Metrics `task_law/<task>/<param>` (with `_ci_low`/`_ci_high`, `r2`) and tags `task_law/<task>/class`;
    a task with no detectable trend logs only its R² and class."""
    metrics: dict[str, float] = {}
    tags: dict[str, str] = {}
    for task, law in laws.items():
        prefix = f"task_law/{task}"
        tags[f"{prefix}/class"] = law.classification
        metrics[f"{prefix}/r2"] = law.fit.r2
        if not law.informative:
            continue
        metrics.update({f"{prefix}/{key}": value for key, value in law.fit.params.items()})
        metrics.update({f"{prefix}/{key}_ci_low": low for key, (low, _) in law.fit.ci.items()})
        metrics.update({f"{prefix}/{key}_ci_high": high for key, (_, high) in law.fit.ci.items()})
    return {key: value for key, value in metrics.items() if np.isfinite(value)}, tags
