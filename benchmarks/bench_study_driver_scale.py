"""The study driver at scale: hundreds of synthetic trials, several at once, logged to a tracking server.

    python benchmarks/bench_study_driver_scale.py [--trials 300] [--max-concurrent 4] [--hold-s 0]
        [--auth basic | basic-uncached | none]

A real `mlflow server` on 127.0.0.1 (the cluster rehearsal's; by default with MLflow's basic-auth app
and its credential cache, as a cluster head runs it) and the product's study driver (`sweeps.study.driver.run_study` on a local
Ray Tune) with the closed-form trial runner of the tests (`tests/support/synthetic_trials.py`) in
place of pretraining: the mask_ratio grid (5 points) with `--train-seeds` enough for `--trials`, each
trial held `--hold-s` seconds. What it measures is the driver, not training:

- trials per minute and the time each trial costs beyond its runner: wall time x concurrency /
  trials, the child runs' MLflow start-to-end time against the runner's own time, both over the
  first and the last tenth of the trials, and the driver process's CPU time per trial;
- what every trial's fresh Ray worker pays before the trial function runs: importing the
  trainable's module, timed once in a new interpreter;
- the driver process's resident memory, sampled every second in a thread, at the start, after the
  first 10% of trials, at its peak and at the end, and its slope over the second half of the trials;
- the ledger: one child run per trial, each marked ok, each metric (`rankme` at its two steps, `q`,
  the task score, `eval_rankme_n` at the last step) logged once per step, no run name twice, the
  runner called once per trial. It exits 1 when anything is missing or duplicated.

The closing analysis (reading the study back, the law fits with `--n-bootstrap` resamples, the
report) is timed apart. `--auth basic-uncached` leaves MLflow's credential cache off
(`auth_cache_ttl_seconds = 0`, MLflow's default): the server then checks the password hash on every
request, which shows what the cache saves. `--json FILE` writes the figures
(tests/sweeps/study/test_study_driver_scale.py runs a small study through this script and reads them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import psutil
from mlflow.tracking import MlflowClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cluster.rehearsal import tracking_server  # noqa: E402
from sweeps.record.keys import EVAL_RANKME_N_METRIC, Q_METRIC, RANKME_METRIC, STATUS_OK, STATUS_TAG  # noqa: E402
from sweeps.study import driver  # noqa: E402
from sweeps.study.config import StudyConfig, StudyEvaluation  # noqa: E402
from sweeps.study.grids import TrialSpec, expand_grids  # noqa: E402

SYNTHETIC_RUNNER = "tests.support.synthetic_trials:run_synthetic_trial"
GRID = "mask_ratio"
STUDY = "driver-scale"
RANKME_FIRST_STEP = 10  # the synthetic runner's early RankMe step (its last is the trial's train_steps)
TASK_SCORE = "score/synthetic"  # the synthetic runner's one task


def expected_metric_steps(spec: TrialSpec) -> dict[str, set[int]]:
    """Every metric the synthetic runner's record writes into a child run, with its steps."""
    last = spec.train_steps
    return {
        RANKME_METRIC: {RANKME_FIRST_STEP, last},
        Q_METRIC: {last},
        TASK_SCORE: {last},
        EVAL_RANKME_N_METRIC: {last},
    }


IMPORT_PROBE = (
    "import resource, time; begun = time.perf_counter(); import sweeps.study.driver; "
    "usage = resource.getrusage(resource.RUSAGE_SELF); "
    "print(time.perf_counter() - begun, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)"
)


def driver_import_cost() -> dict[str, float]:
    """What every trial's fresh Ray worker pays before the trial starts: importing the module of the
    trainable (sweeps.study.driver: Ray Tune, MLflow, torch, scikit-learn), in a new interpreter."""
    done = subprocess.run([sys.executable, "-c", IMPORT_PROBE], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[1])  # fmt: skip
    wall, cpu, rss = (float(value) for value in done.stdout.split()[-3:])
    return {"driver_import_s": wall, "driver_import_cpu_s": cpu, "driver_import_rss_mb": rss}


def study_trials(n_trials: int) -> tuple[int, list[TrialSpec]]:
    """Training seeds enough for at least `n_trials` on the grid, and the trials they give."""
    points = len(expand_grids(GRID, profile="cpu_default", objective="mae", train_seeds=1))
    seeds = max(1, math.ceil(n_trials / points))
    return seeds, expand_grids(GRID, profile="cpu_default", objective="mae", train_seeds=seeds)


class Sample(NamedTuple):
    seconds: float
    rss_mb: float  # the driver process's resident memory
    server_rss_mb: float  # the tracking server's processes together
    cpu_s: float  # the driver process's CPU time so far (user + system)
    done: int  # trials whose runner has returned


class Sampler(threading.Thread):
    """A `Sample` every `every_s` seconds, in a thread of the driver process."""

    def __init__(self, storage: Path, *, every_s: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.storage, self.every_s = storage, every_s
        self.samples: list[Sample] = []
        self._stop_event = threading.Event()
        self._process = psutil.Process()
        self._begun = time.monotonic()

    def _server_rss_mb(self) -> float:
        total = 0
        for child in self._process.children(recursive=True):
            try:
                if "mlflow" in " ".join(child.cmdline()):
                    total += child.memory_info().rss
            except psutil.Error:
                pass
        return total / 1e6

    def _trials_done(self) -> int:
        path = self.storage / "intervals.txt"
        return path.read_text().count("\n") if path.exists() else 0

    def sample(self) -> None:
        cpu = self._process.cpu_times()
        self.samples.append(Sample(time.monotonic() - self._begun, self._process.memory_info().rss / 1e6,
                                   self._server_rss_mb(), cpu.user + cpu.system, self._trials_done()))  # fmt: skip

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.sample()
            self._stop_event.wait(self.every_s)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()
        self.sample()


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of y on x; NaN with fewer than two distinct x."""
    if len({x for x, _ in points}) < 2:
        return math.nan
    mean_x, mean_y = statistics.fmean(x for x, _ in points), statistics.fmean(y for _, y in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)


def _first_at(samples: list[Sample], done: float) -> Sample:
    return next((s for s in samples if s.done >= done), samples[-1])


def memory_figures(samples: list[Sample], n_trials: int) -> dict[str, float]:
    """Driver RSS at the start, after 10% of the trials, peak while trials ran, when the last one
    returned, at the end; its slope over the second half of the trials (least squares, MB per 100
    trials); the driver's CPU seconds per trial over the first and the last tenth of the trials."""
    during = [s for s in samples if s.done < n_trials] or samples
    at_10, at_last = _first_at(samples, 0.1 * n_trials), _first_at(samples, n_trials)
    half = [(s.done, s.rss_mb) for s in samples if n_trials / 2 <= s.done <= n_trials]
    tenth = max(1, n_trials // 10)
    first_tenth = (_first_at(samples, 1), _first_at(samples, tenth))
    last_tenth = (_first_at(samples, n_trials - tenth), at_last)
    first_cpu, last_cpu = (_cpu_per_trial(*pair) for pair in (first_tenth, last_tenth))
    return {
        "rss_start_mb": samples[0].rss_mb, "rss_after_10pct_mb": at_10.rss_mb,
        "rss_peak_trials_mb": max(s.rss_mb for s in during), "rss_at_last_trial_mb": at_last.rss_mb,
        "rss_peak_mb": max(s.rss_mb for s in samples), "rss_end_mb": samples[-1].rss_mb,
        "rss_slope_second_half_mb_per_100_trials": 100 * _slope(half),
        "server_rss_after_10pct_mb": at_10.server_rss_mb, "server_rss_at_last_trial_mb": at_last.server_rss_mb,
        "rss_by_trials_done_mb": {s.done: s.rss_mb for s in _by_decile(samples, n_trials)},
        "driver_cpu_s_per_trial_first_tenth": first_cpu, "driver_cpu_s_per_trial_last_tenth": last_cpu,
    }  # fmt: skip


def _cpu_per_trial(begin: Sample, end: Sample) -> float:
    return (end.cpu_s - begin.cpu_s) / (end.done - begin.done) if end.done > begin.done else math.nan


def _by_decile(samples: list[Sample], n_trials: int) -> list[Sample]:
    """The first sample at or past each tenth of the trials."""
    marks = sorted({math.ceil(n_trials * tenth / 10) for tenth in range(11)})
    return [s for s in (next((s for s in samples if s.done >= mark), None) for mark in marks) if s is not None]


def search_children(client: MlflowClient, parent_run_id: str) -> list:
    """Every child run of the study run, page by page."""
    experiment_id = client.get_run(parent_run_id).info.experiment_id
    runs, token = [], None
    while True:
        page = client.search_runs(
            [experiment_id], f"tags.mlflow.parentRunId = '{parent_run_id}'", max_results=1000, page_token=token
        )
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def check_ledger(uri: str, parent_run_id: str, trials: list[TrialSpec], study: str) -> dict:
    """What MLflow holds against what the study ran: missing, duplicated or unfinished runs, and
    metric steps missing or logged more than once. `problems` lists each in words."""
    client = MlflowClient(uri)
    children = search_children(client, parent_run_id)
    names = Counter(child.info.run_name for child in children)
    expected = {f"{t.name}@{study}": t for t in trials}
    problems = [f"run {name} logged {count} times" for name, count in sorted(names.items()) if count > 1]
    problems += [f"run {name} missing" for name in sorted(set(expected) - set(names))]
    problems += [f"run {name} not a trial of the study" for name in sorted(set(names) - set(expected))]
    points = 0
    for child in children:
        name = child.info.run_name
        if child.info.status != "FINISHED" or child.data.tags.get(STATUS_TAG) != STATUS_OK:
            problems.append(f"run {name}: status {child.info.status}, {STATUS_TAG} {child.data.tags.get(STATUS_TAG)}")
        if name not in expected:
            continue
        for key, steps in expected_metric_steps(expected[name]).items():
            logged = Counter(metric.step for metric in client.get_metric_history(child.info.run_id, key))
            points += sum(logged.values())
            problems += [f"run {name}: {key} at step {step} missing" for step in sorted(steps - set(logged))]
            problems += [f"run {name}: {key} at step {step} logged {n} times" for step, n in logged.items() if n > 1]
            problems += [f"run {name}: {key} at unexpected step {step}" for step in sorted(set(logged) - steps)]
    return {"child_runs": len(children), "distinct_run_names": len(names), "metric_points": points,
            "expected_metric_points": sum(len(s) for t in trials for s in expected_metric_steps(t).values()),
            "problems": problems}  # fmt: skip


def check_executions(storage: Path, trials: list[TrialSpec]) -> list[str]:
    """The runner ran each trial once (the synthetic runner appends each trial it runs to executions.txt)."""
    path = storage / "executions.txt"
    ran = Counter(path.read_text().split() if path.exists() else [])
    problems = [f"trial {name} ran {n} times" for name, n in sorted(ran.items()) if n > 1]
    return problems + [f"trial {t.name} never ran" for t in trials if t.name not in ran]


def child_timings(uri: str, parent_run_id: str, storage: Path) -> dict[str, float]:
    """Per trial: the child run's MLflow start-to-end time and the runner's own (held) time; the span
    from the first child's start to the last child's end; how many child runs were open at once on average."""
    children = search_children(MlflowClient(uri), parent_run_id)
    spans = [(c.info.start_time / 1000, c.info.end_time / 1000) for c in children if c.info.end_time]
    held = [float(end) - float(start) for _, start, end, _ in
            (line.split() for line in (storage / "intervals.txt").read_text().splitlines())]  # fmt: skip
    spans.sort()
    first, last = spans[0][0], max(end for _, end in spans)
    durations = [end - start for start, end in spans]
    tenth = max(2, len(spans) // 10)  # does a trial cost more once the study holds hundreds of runs?
    early, late = spans[:tenth], spans[-tenth:]
    return {
        "child_run_median_s": statistics.median(durations), "child_run_p90_s": _quantile(durations, 0.9),
        "child_run_median_first_tenth_s": statistics.median(end - start for start, end in early),
        "child_run_median_last_tenth_s": statistics.median(end - start for start, end in late),
        "s_between_starts_first_tenth": (early[-1][0] - early[0][0]) / (len(early) - 1),
        "s_between_starts_last_tenth": (late[-1][0] - late[0][0]) / (len(late) - 1),
        "runner_median_s": statistics.median(held), "trials_span_s": last - first,
        "child_runs_open_mean": sum(durations) / (last - first) if last > first else math.nan,
    }  # fmt: skip


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class PhaseTimer:
    """Wall time of the driver's closing read and law fits: wraps the two functions run_study calls."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = {}

    def wrap(self, name: str):
        original = getattr(driver, name)

        def timed(*args, **kwargs):
            begun = time.monotonic()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds.setdefault(name, []).append(time.monotonic() - begun)

        setattr(driver, name, timed)
        return original


@contextlib.contextmanager
def tracking_server_for(auth: str, root: Path):
    """The rehearsal's `mlflow server`: without auth, with basic auth as the cluster's head runs it
    (credential cache on), or with basic auth and no credential cache (MLflow's default)."""
    ttl = 0 if auth == "basic-uncached" else tracking_server.AUTH_CACHE_TTL_S
    with tracking_server.running_tracking_server(root, basic_auth=auth != "none", auth_cache_ttl_s=ttl) as server:
        yield server


def study_config(uri: str, storage: Path, *, seeds: int, max_concurrent: int, cpus_per_trial: float,
                 n_bootstrap: int, quiet: bool) -> StudyConfig:  # fmt: skip
    return StudyConfig(
        grid=GRID, study_name=STUDY, train_seeds=seeds, tracking_uri=uri, storage_path=str(storage),
        runner=SYNTHETIC_RUNNER, prepare_shards=False, max_concurrent=max_concurrent, cpus_per_trial=cpus_per_trial,
        n_bootstrap=n_bootstrap, quiet=quiet, evaluate=StudyEvaluation(baselines="none"),
    )  # fmt: skip


def run_scale_study(work: Path, args: argparse.Namespace) -> dict:
    """Start the tracking server, run the study with memory sampled, then read the ledger back."""
    seeds, trials = study_trials(args.trials)
    import_cost = driver_import_cost()
    storage = work / "ray"
    storage.mkdir(parents=True)
    (storage / "hold-seconds").write_text(str(args.hold_s))  # the runner records its own interval too
    (work / "tracking").mkdir()
    with tracking_server_for(args.auth, work / "tracking") as server:
        os.environ.update(server.client_env())  # the local Ray started by the driver passes it to its workers
        config = study_config(server.uri, storage, seeds=seeds, max_concurrent=args.max_concurrent,
                              cpus_per_trial=args.cpus_per_trial, n_bootstrap=args.n_bootstrap, quiet=args.quiet)  # fmt: skip
        timer, originals = PhaseTimer(), {}
        for name in ("read_study", "log_study_analysis"):
            originals[name] = timer.wrap(name)
        sampler = Sampler(storage)
        sampler.start()
        begun = time.monotonic()
        try:
            outcome = driver.run_study(config)
        finally:
            wall = time.monotonic() - begun
            sampler.stop()
            for name, original in originals.items():
                setattr(driver, name, original)
        ledger = check_ledger(server.uri, outcome.parent_run_id, trials, STUDY)
        ledger["problems"] += check_executions(storage, trials)
        ledger["problems"] += [f"trial {name} failed" for name in outcome.trials_failed]
        timings = child_timings(server.uri, outcome.parent_run_id, storage)
    figures = {
        "trials": len(trials), "train_seeds": seeds, "max_concurrent": args.max_concurrent,
        "cpus_per_trial": args.cpus_per_trial, "hold_s": args.hold_s, "n_bootstrap": args.n_bootstrap,
        "auth": args.auth, "wall_s": wall, "trials_per_min": 60 * len(trials) / wall,
        "slot_s_per_trial": wall * args.max_concurrent / len(trials),
        "slot_s_per_trial_trials_span": timings["trials_span_s"] * args.max_concurrent / len(trials),
        "closing_read_s": timer.seconds.get("read_study", [math.nan])[-1],
        "closing_fits_s": timer.seconds.get("log_study_analysis", [math.nan])[-1],
        **timings, **memory_figures(sampler.samples, len(trials)), **import_cost, "ledger": ledger,
    }  # fmt: skip
    return figures


def report(f: dict) -> str:
    ledger = f["ledger"]
    lines = [
        f"trials run: {f['trials']} (mask_ratio x {f['train_seeds']} seeds), up to {f['max_concurrent']} at once, "
        f"{f['cpus_per_trial']:g} CPU each, runner held {f['hold_s']:g} s; tracking server auth: {f['auth']}",
        f"wall time: {f['wall_s']:.1f} s ({f['trials_per_min']:.1f} trials/min); first child run start to last "
        f"end {f['trials_span_s']:.1f} s, child runs open at once on average {f['child_runs_open_mean']:.2f}",
        f"per trial, driver slot time (wall x concurrency / trials): {f['slot_s_per_trial']:.2f} s "
        f"({f['slot_s_per_trial_trials_span']:.2f} s over the trials' span alone)",
        f"per trial, child run start to end in MLflow: median {f['child_run_median_s']:.2f} s (p90 "
        f"{f['child_run_p90_s']:.2f} s) against the runner's own {f['runner_median_s']:.2f} s; first tenth of the "
        f"trials {f['child_run_median_first_tenth_s']:.2f} s, last tenth {f['child_run_median_last_tenth_s']:.2f} s",
        f"seconds between trial starts: {f['s_between_starts_first_tenth']:.2f} over the first tenth, "
        f"{f['s_between_starts_last_tenth']:.2f} over the last",
        f"a fresh process importing the trainable's module (each trial's Ray worker does): {f['driver_import_s']:.1f} s "
        f"({f['driver_import_cpu_s']:.1f} s of CPU), {f['driver_import_rss_mb']:.0f} MB resident",
        f"closing: reading the study back {f['closing_read_s']:.1f} s, fits and report "
        f"({f['n_bootstrap']} resamples) {f['closing_fits_s']:.1f} s",
        f"driver RSS: start {f['rss_start_mb']:.0f} MB, after 10% {f['rss_after_10pct_mb']:.0f} MB, peak while "
        f"trials ran {f['rss_peak_trials_mb']:.0f} MB, at the last trial {f['rss_at_last_trial_mb']:.0f} MB, peak "
        f"{f['rss_peak_mb']:.0f} MB, end {f['rss_end_mb']:.0f} MB; slope over the second half "
        f"{f['rss_slope_second_half_mb_per_100_trials']:+.2f} MB per 100 trials",
        f"driver CPU per trial: {f['driver_cpu_s_per_trial_first_tenth']:.2f} s over the first tenth of the trials, "
        f"{f['driver_cpu_s_per_trial_last_tenth']:.2f} s over the last",
        "driver RSS (MB) by trials done: "
        + ", ".join(f"{done}: {rss:.0f}" for done, rss in f["rss_by_trials_done_mb"].items()),
        f"tracking server RSS: after 10% {f['server_rss_after_10pct_mb']:.0f} MB, at the last trial "
        f"{f['server_rss_at_last_trial_mb']:.0f} MB",
        f"ledger: {ledger['child_runs']} child runs ({ledger['distinct_run_names']} names) for {f['trials']} trials, "
        f"{ledger['metric_points']} metric points of {ledger['expected_metric_points']} expected: "
        + ("nothing lost or duplicated" if not ledger["problems"] else f"{len(ledger['problems'])} PROBLEMS"),
        *(f"  {problem}" for problem in ledger["problems"][:50]),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=300, help="at least this many (a multiple of the 5 points)")
    parser.add_argument("--max-concurrent", type=int, default=4)
    parser.add_argument("--cpus-per-trial", type=float, default=0.25)
    parser.add_argument("--hold-s", type=float, default=0.0, help="seconds each synthetic trial takes")
    parser.add_argument(
        "--auth", choices=["basic", "basic-uncached", "none"], default="basic",
        help="the server's basic-auth app as on a cluster (credential cache on), the same without the cache, or none",
    )  # fmt: skip
    parser.add_argument("--n-bootstrap", type=int, default=20)
    parser.add_argument("--quiet", action="store_true", help="no per-trial progress lines")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--work", type=Path, default=None, help="kept afterwards (default: a temporary folder)")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="study-driver-scale-"))
    try:
        figures = run_scale_study(work, args)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print(report(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, default=str))
    return 1 if figures["ledger"]["problems"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
