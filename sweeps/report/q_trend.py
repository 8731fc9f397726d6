"""Is there a trend of Q along a scale variable to fit, or would a fitted law only decorate noise?

A saturating law fitted to five points can converge and print parameters with intervals even when
the points do not differ. A point is a trial (Q(N), Q(D), ...) or a checkpoint (Q(R)). Three checks,
any one of which makes the trend undetectable:

- noise: the points' 95% intervals of Q share a common value (the highest lower bound is at most
  the lowest upper bound), so no two points differ detectably; needs every point's interval
  (`q_ci_low` / `q_ci_high`, from test-clip replicates or two or more probe seeds);
- range: x spans less than `MIN_RELATIVE_X_SPAN` of its smallest value (a law in log x needs x to move);
- rank: Q neither rises nor falls with x (Spearman's rank correlation, p >= 0.05): a saturating
  law fitted to a cloud converges to a flat line with R² near 0 but above it;
- fit: the fitted law's R² is at most 0, it explains Q no better than their mean does.

The CPU default study is the case in point: 5 mask ratios, Q 0.527-0.540 with overlapping
intervals, eval RankMe 24.76-24.80 (a 0.16% span), R² -3.49.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sweeps.laws.result import LawFit
from sweeps.record.keys import Q_METRIC
from sweeps.report.checkpoints import checkpoint_rows
from sweeps.report.intervals import q_intervals
from sweeps.report.rank_trend import no_monotone_trend
from sweeps.report.study_fits import SATURATING_LAWS, StudyFits, usable_trials
from sweeps.report.study_info import StudyInfo, rankme_axis_label

MIN_RELATIVE_X_SPAN = 0.05


@dataclass(frozen=True, kw_only=True)
class TrendCheck:
    """The verdict on one law's data: detectable or not, and the plain reasons."""

    law: str
    detectable: bool
    reasons: list[str]  # why the trend is not detectable; empty when it is
    caveats: list[str]  # checks that could not be run (e.g. no per-trial intervals)

    def verdict(self) -> str:
        if self.detectable:
            text = f"A trend of Q is detectable for {self.law}: none of the no-trend checks fired."
        else:
            text = f"**No detectable trend: the fitted {self.law} law is not informative.** " + " ".join(
                f"{reason[0].upper()}{reason[1:]}." for reason in self.reasons
            )
        return text + "".join(f" Not checked: {caveat}." for caveat in self.caveats)


def _interval_columns(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    missing = pd.Series(np.nan, index=rows.index)
    return rows.get("q_ci_low", missing).to_numpy(float), rows.get("q_ci_high", missing).to_numpy(float)


def check_q_trend(
    trials: pd.DataFrame,
    column: str,
    fit: LawFit | None,
    *,
    law: str,
    label: str | None = None,
    no_interval: str = "one probe seed, or a study logged before intervals were recorded",
) -> TrendCheck:
    """Run the three checks on `trials` (one row per trial: `column`, q, optional q_ci_low/high);
    `no_interval` says why a row has no interval."""
    label = label or column
    finite = np.isfinite(pd.to_numeric(trials[column], errors="coerce")) & np.isfinite(trials[Q_METRIC])
    rows = trials[finite]
    if len(rows) < 2:
        reason = f"only {len(rows)} trial(s) have both {label} and Q"
        return TrendCheck(law=law, detectable=False, reasons=[reason], caveats=[])
    x, q = rows[column].to_numpy(float), rows[Q_METRIC].to_numpy(float)
    low, high = _interval_columns(rows)
    reasons: list[str] = []
    caveats: list[str] = []
    with_interval = np.isfinite(low) & np.isfinite(high)
    if not with_interval.all():
        caveats.append(
            f"{int((~with_interval).sum())} of {len(q)} points have no informative 95% interval of Q ({no_interval}), "
            "so the spread of Q was not compared with the noise"
        )
    elif low.max() <= high.min():
        reasons.append(
            f"Q ranges {q.min():.3f}-{q.max():.3f} across {len(q)} points, within the points' own 95% "
            f"intervals: every interval contains Q = {(low.max() + high.min()) / 2:.3f}, so no two points "
            "differ detectably"
        )
    relative_span = (x.max() - x.min()) / x.min() if x.min() > 0 else np.inf
    if relative_span < MIN_RELATIVE_X_SPAN:
        reasons.append(
            f"{label} spans only {100 * relative_span:.2g}% ({x.min():.4g}-{x.max():.4g}), under the "
            f"{100 * MIN_RELATIVE_X_SPAN:.0f}% needed to see a trend along it"
        )
    monotone = no_monotone_trend(x, q, label)
    if monotone:
        reasons.append(monotone)
    if fit is not None and not np.isfinite(fit.r2):
        reasons.append("the fit's R² is undefined: Q is the same in every trial")
    elif fit is not None and fit.r2 <= 0:
        reasons.append(f"the fit's R² is {fit.r2:.2f}: it explains Q no better than the mean Q does")
    return TrendCheck(law=law, detectable=not reasons, reasons=reasons, caveats=caveats)


def check_q_of_r(table: pd.DataFrame, study: StudyFits, info: StudyInfo | None = None) -> TrendCheck | None:
    """The checks for the study's headline law Q(R) on its points (every evaluated checkpoint of the
    usable trials, as the fit); None without RankMe.

    Only informative intervals (sweeps.report.intervals) enter the noise check: a 2-seed interval
    spans more than Q's range and would make every study look like noise."""
    if "rankme" not in table.columns:
        return None
    trials, _ = usable_trials(table)
    trials = checkpoint_rows(trials)
    info = info or StudyInfo()
    verdicts = q_intervals(trials, info)
    trials = trials.assign(
        q_ci_low=[v.bounds[0] if v.bounds else np.nan for v in verdicts],
        q_ci_high=[v.bounds[1] if v.bounds else np.nan for v in verdicts],
    )
    reasons = sorted({v.reason for v in verdicts if v.bounds is None})
    column, _ = SATURATING_LAWS["Q(R)"]
    return check_q_trend(
        trials, column, study.fits.get("Q(R)"), law="Q(R)", label=rankme_axis_label(trials),
        no_interval=", ".join(reasons) or "none",
    )  # fmt: skip
