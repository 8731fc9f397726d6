"""Where a finished study's time went, per trial, from its MLflow timestamps (nothing is re-run).

    python benchmarks/bench_study_timeline.py --study mask_ratio-cpu_default [--tracking-uri URI]

For each trial's child run: start -> first RankMe (Ray Train controller and worker start, model
build, RankMe sample), first RankMe -> last training step (the steps, the stream's first batch
included), last step -> end (checkpoint, Train teardown, evaluation, logging); then the study's
wall time and the gaps between trials. The per-trial overhead #7 asks for is everything but the
steps themselves.
"""

from __future__ import annotations

import argparse
import statistics

from mlflow.tracking import MlflowClient

from pipeline.tracking import runs as tracking
from sweeps.record.keys import STUDY_EXPERIMENT


def trial_timelines(client: MlflowClient, parent_run_id: str, experiment_id: str) -> list[dict]:
    children = client.search_runs([experiment_id], f"tags.mlflow.parentRunId = '{parent_run_id}'")
    rows = []
    for child in sorted(children, key=lambda run: run.info.start_time):
        start_s = child.info.start_time / 1000
        rankme = sorted((m.step, m.timestamp / 1000) for m in client.get_metric_history(child.info.run_id, "rankme"))
        if not rankme or child.info.end_time is None:
            continue  # failed or stopped before its first RankMe: no timeline to split
        first_s, last_s = rankme[0][1], rankme[-1][1]
        rows.append({
            "trial": child.data.tags.get("mlflow.runName", child.info.run_id),
            "start_s": start_s, "end_s": child.info.end_time / 1000,
            "to_first_rankme_s": first_s - start_s, "training_s": last_s - first_s,
            "after_training_s": child.info.end_time / 1000 - last_s, "last_step": rankme[-1][0],
        })  # fmt: skip
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", default="mask_ratio-cpu_default", help="the study's name (its parent run)")
    parser.add_argument("--tracking-uri", default=None, help="None: $MLFLOW_TRACKING_URI or the embedded store")
    args = parser.parse_args()
    client = MlflowClient(tracking.resolve_tracking_uri(args.tracking_uri))
    experiment = client.get_experiment_by_name(STUDY_EXPERIMENT)
    parents = (
        []
        if experiment is None
        else client.search_runs([experiment.experiment_id], f"tags.mlflow.runName = '{args.study}'")
    )
    if not parents:
        raise SystemExit(f"no study named {args.study!r} in {client.tracking_uri}; list them in the MLflow UI")
    parent = parents[0]
    rows = trial_timelines(client, parent.info.run_id, experiment.experiment_id)
    if not rows:
        raise SystemExit(f"study {args.study!r} has no finished trial with a RankMe history")
    print(f"{'trial':<40}{'start+ s':>9}{'to RankMe0':>11}{'training':>9}{'after':>8}{'total':>8}")
    study_start = parent.info.start_time / 1000
    for row in rows:
        print(
            f"{row['trial']:<40}{row['start_s'] - study_start:>9.1f}{row['to_first_rankme_s']:>11.1f}"
            f"{row['training_s']:>9.1f}{row['after_training_s']:>8.1f}{row['end_s'] - row['start_s']:>8.1f}"
        )
    totals = [row["end_s"] - row["start_s"] for row in rows]
    overheads = [row["to_first_rankme_s"] + row["after_training_s"] for row in rows]
    gaps = [later["start_s"] - earlier["end_s"] for earlier, later in zip(rows, rows[1:])]
    print(
        f"median per trial: {statistics.median(totals):.1f} s, of which outside the training steps "
        f"{statistics.median(overheads):.1f} s (start {statistics.median(r['to_first_rankme_s'] for r in rows):.1f} s, "
        f"checkpoint + evaluation + teardown {statistics.median(r['after_training_s'] for r in rows):.1f} s)"
    )
    if gaps:
        print(f"median gap between trials: {statistics.median(gaps):.1f} s")
    if parent.info.end_time:
        print(f"study wall time (parent run): {(parent.info.end_time - parent.info.start_time) / 1000:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
