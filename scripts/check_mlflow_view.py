"""Looks at a finished study in the MLflow UI with a real browser, as a person would, and says what it saw.

    python scripts/check_mlflow_view.py --home ~/audioscale --study mask_ratio-cpu_default --out /tmp/view
    python scripts/check_mlflow_view.py --server http://127.0.0.1:5000 --study NAME   (a running tracking
        server, e.g. a cluster's; its basic-auth login from MLFLOW_TRACKING_USERNAME / _PASSWORD)

Starts `mlflow ui` on the study's store as the study's closing lines print it (127.0.0.1:5000), or uses
the `--server` the study logged to, opens headless Chromium (the
Debian package `chromium`) through its DevTools protocol and checks, at every URL the study prints:
1. the runs table of the study's experiment, not the GenAI pages: each trial of the study is a row,
   with the columns q, q_ci_low, q_ci_high, rankme, the grid axis, the best trial's mark, the trial
   status and (with baselines) baseline.q; one trial marked best; no Q printed with more than 4
   decimals; each baseline's Q in its own column (none in q) and its Duration not in ms;
2. the chart view: the study's section with Q over steps and Q against RankMe (`rankme vs. q`);
3. the study run's page in the model-training layout (its Model metrics tab, no Evaluations page),
   with its best point tagged; a trial's params as typed (no 0.000029999999999999997), on its page
   and as stored;
4. `laws/report.html` in the artifact viewer shows its figures: every image inside the viewer's
   frame has loaded (a non-zero natural width);
5. `laws/report.md` in the artifact viewer shows its figures as images, not as literal text.
Screenshots of the pages go to --out. Exits 1 naming what failed. The test suite runs it only inside the
cluster rehearsal and only where Chromium is installed; docs/studies.md says when to run it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import aiohttp

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from pipeline.tracking import runs as tracking  # noqa: E402
from sweeps.record.keys import BASELINE_RUN_PREFIX, REPORT_DIR, STUDY_EXPERIMENT  # noqa: E402
from sweeps.record.view import run_page_url, study_view_url, view_key  # noqa: E402
from sweeps.report.summary import MLFLOW_UI_PORT  # noqa: E402

SETTLE_S = 12.0  # the UI is a single-page app: time for its requests and rendering


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=basic_auth_header()), timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"check_mlflow_view: nothing answered at {url} within {seconds:.0f} s")


class Browser:
    """One Chromium tab driven over the DevTools protocol."""

    def __init__(self, session: aiohttp.ClientSession, socket_url: str) -> None:
        self.session, self.socket_url, self.next_id = session, socket_url, 0

    async def __aenter__(self) -> Browser:
        self.ws = await self.session.ws_connect(self.socket_url, max_msg_size=0)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.ws.close()

    async def call(self, method: str, **params) -> dict:
        self.next_id += 1
        await self.ws.send_str(json.dumps({"id": self.next_id, "method": method, "params": params}))
        async for message in self.ws:
            reply = json.loads(message.data)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
        raise RuntimeError(f"{method}: the browser closed the connection")

    async def open(self, url: str) -> None:
        # A new document each time: a change of the URL's #fragment alone does not make the
        # single-page app show another artifact.
        await self.call("Page.navigate", url="about:blank")
        await self.call("Page.navigate", url=url)
        await asyncio.sleep(SETTLE_S)

    async def evaluate(self, expression: str, context_id: int | None = None):
        extra = {"contextId": context_id} if context_id is not None else {}
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True, **extra)
        return result["result"].get("value")

    async def screenshot(self, path: Path) -> None:
        shot = await self.call("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))

    async def in_child_frames(self, expression: str) -> list:
        """`expression` evaluated in each child frame (the artifact viewer's HTML iframe)."""
        tree = (await self.call("Page.getFrameTree"))["frameTree"]
        values = []
        for child in tree.get("childFrames", []):
            world = await self.call("Page.createIsolatedWorld", frameId=child["frame"]["id"])
            values.append(await self.evaluate(expression, world["executionContextId"]))
        return values


# Cells of one column, by the grid's column id (the UI's id: kind, then the key in backticks).
CELLS_JS = "Array.from(document.querySelectorAll('[role=row]')).map(r => Object.fromEntries(Array.from(r.querySelectorAll('[role=gridcell][col-id]')).map(c => [c.getAttribute('col-id'), c.innerText.trim()])))"
LONG_DECIMALS = re.compile(r"\d\.\d{5,}")  # more decimals than a rounded value has
# The rounded columns: Q-scale to 4 decimals, RankMe (as pretraining and the points log it) to 2.
ROUNDED_COLUMNS = (
    "metrics.`q`",
    "metrics.`q_ci_low`",
    "metrics.`q_ci_high`",
    "metrics.`baseline.q`",
    "metrics.`rankme`",
)
DECIMAL = re.compile(r"\d+\.\d+")


def raw_floats(text: str) -> list[str]:
    """Numbers printed with more than 12 significant digits: a float's binary tail, as
    0.000029999999999999997 (12 digits is what the project logs; 0.0797300217004 is 12)."""
    digits = (number.rstrip("0").replace(".", "").lstrip("0") for number in DECIMAL.findall(text))
    return [number for number, kept in zip(DECIMAL.findall(text), digits) if len(kept) > 12]


async def check_runs_table(browser: Browser, url: str, trials: list[str], grid: list[str], out: Path) -> list[str]:
    await browser.open(url)
    await browser.screenshot(out / "runs_table.png")
    text = await browser.evaluate("document.body.innerText") or ""
    failures = [f"runs table: no row for trial {name}" for name in trials if name not in text]
    # baseline.q only where the study measured baselines: the UI shows no column for a metric no run has.
    baselines = any(name.startswith(BASELINE_RUN_PREFIX) for name in text.splitlines())
    headers = ["q", "q_ci_low", "q_ci_high", "rankme", *(f"grid.{name}" for name in grid), "audioscale.best",
               "audioscale.trial_status", *(["baseline.q"] if baselines else [])]  # fmt: skip
    shown = await browser.evaluate(
        "Array.from(document.querySelectorAll('[role=columnheader], th')).map(h => h.innerText.trim())"
    )
    failures += [f"runs table: no column {h!r} (columns: {shown})" for h in headers if not _shown(h, shown or [])]
    if "Traces" in text and "Cost" in text and not trials:
        failures.append("runs table: the URL opened the GenAI pages")
    rows = [row for row in await browser.evaluate(CELLS_JS) or [] if "metrics.`q`" in row]
    return failures + _row_failures(rows) if rows else failures + ["runs table: no rows read"]


def _row_failures(rows: list[dict]) -> list[str]:
    """Rounded values, one best trial, and baselines told apart (their own Q column, their real duration)."""
    failures = [f"runs table: {value!r} in {key} is not rounded" for row in rows for key, value in row.items()
                if key in ROUNDED_COLUMNS and LONG_DECIMALS.search(value)]  # fmt: skip
    best = [row for row in rows if row.get("tags.`audioscale.best`") == "true"]
    if len(best) != 1:
        failures.append(f"runs table: {len(best)} trials marked best (audioscale.best), not 1")
    for row in rows:
        if not row.get("attributes.`Run Name`", "").startswith(BASELINE_RUN_PREFIX):
            continue
        if row.get("metrics.`q`", "-") not in ("-", ""):
            failures.append(f"runs table: a baseline has a value in the trials' q column ({row})")
        if re.fullmatch(r"\d+ms", row.get("duration", "")):
            failures.append(
                f"runs table: a baseline's Duration is {row['duration']}, the logging's, not its measurement's"
            )
    return failures


async def check_charts(browser: Browser, url: str, out: Path) -> list[str]:
    await browser.open(url)
    await browser.screenshot(out / "charts.png")
    text = await browser.evaluate("document.body.innerText") or ""
    lines = [line.strip() for line in text.splitlines()]
    wanted = {"the study's chart section": "Study", "Q over steps": "q", "Q against RankMe": "rankme vs. q"}
    return [f"chart view: no {what} ({title!r})" for what, title in wanted.items() if title not in lines]


async def check_run_pages(browser: Browser, study_url: str, trial_url: str, out: Path) -> list[str]:
    await browser.open(study_url)
    await browser.screenshot(out / "study_run.png")
    text = await browser.evaluate("document.body.innerText") or ""
    failures = []
    if "Model metrics" not in text.splitlines() or "Evaluations" in text.splitlines():
        failures.append("study run page: not in the model-training layout (no Model metrics tab, or Evaluations)")
    if "audioscale.best_point" not in text:
        failures.append("study run page: no best point tag (audioscale.best_point)")
    await browser.open(trial_url)
    await browser.screenshot(out / "trial_run.png")
    text = await browser.evaluate("document.body.innerText") or ""
    # The model metrics and params tables (the rows in view); MLflow's own system metrics, listed
    # above them, keep their float tails.
    ours = text.split("\nModel metrics (", 1)[-1] if "\nParameters (" in text else ""
    if not ours:
        failures.append("trial run page: no Parameters table")
    failures += [f"trial run page: {value!r} printed with a float's binary tail" for value in raw_floats(ours)]
    return failures


def stored_param_failures(tracking_uri: str, run_id: str) -> list[str]:
    """Every param of the run as stored, which the UI prints as it is (its table shows a few at a time)."""
    params = tracking.read_run(tracking_uri, run_id)["params"]
    return [f"trial run: param {key} = {value!r} has a float's binary tail" for key, value in params.items()
            if raw_floats(value)]  # fmt: skip


def _shown(header: str, shown: list[str]) -> bool:
    """A header the table cuts short ('audioscale.tr…') still counts."""
    return any(cell == header or (len(cell) > 4 and header.startswith(cell.rstrip("…. "))) for cell in shown)


async def check_reports(browser: Browser, root: str, experiment_id: str, run_id: str, out: Path) -> list[str]:
    failures = []
    page = f"{root}/#/experiments/{experiment_id}/runs/{run_id}/artifacts/{REPORT_DIR}"
    await browser.open(run_page_url(root, experiment_id, run_id, f"{REPORT_DIR}/report.html"))  # as printed
    await browser.screenshot(out / "report_html.png")
    widths = await browser.in_child_frames("Array.from(document.images).map(i => i.naturalWidth)")
    loaded = [w for frame in widths for w in (frame or [])]
    if not loaded or not all(loaded):
        failures.append(f"report.html: figures not shown inside the viewer (image widths per frame: {widths})")
    await browser.open(f"{page}/report.md")
    await browser.screenshot(out / "report_md.png")
    images = await browser.evaluate(
        "Array.from(document.images).filter(i => i.src.includes('get-artifact')).map(i => i.naturalWidth)"
    )
    if not images or not all(images):
        failures.append(f"report.md: figures not shown as images (loaded widths: {images})")
    if "](get-artifact" in (await browser.evaluate("document.body.innerText") or ""):
        failures.append("report.md: a figure shows as literal markdown text")
    return failures


def basic_auth_header() -> dict[str, str]:
    """The Authorization header of the MLflow login in the environment (basic-auth servers), else none."""
    user, password = os.environ.get("MLFLOW_TRACKING_USERNAME"), os.environ.get("MLFLOW_TRACKING_PASSWORD")
    if not (user and password):
        return {}
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


async def look(root: str, debug_port: int, checks) -> list[str]:
    async with aiohttp.ClientSession() as session:
        async with session.put(f"http://127.0.0.1:{debug_port}/json/new?about:blank") as reply:
            target = await reply.json(content_type=None)
        async with Browser(session, target["webSocketDebuggerUrl"]) as browser:
            await browser.call("Page.enable")
            if headers := basic_auth_header():  # every request of the page logs in, as a person would
                await browser.call("Network.enable")
                await browser.call("Network.setExtraHTTPHeaders", headers=headers)
            # Wide: the runs table draws only the columns in view, and the view selects eight or more.
            await browser.call("Emulation.setDeviceMetricsOverride", width=2400, height=1000, deviceScaleFactor=1,
                               mobile=False)  # fmt: skip
            failures = []
            for check in checks:
                failures += await check(browser)
            return failures


def stop_process_group(process: subprocess.Popen) -> None:
    """SIGTERM to the process's whole group, SIGKILL to whatever of it is left after 10 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(process.pid, 0)  # any member left?
        except ProcessLookupError:
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)


def study_facts(tracking_uri: str, study: str) -> tuple[str, str, list[str], list[str], str]:
    """(experiment id, study run id, trial run names, grid names, a trial's run id) of a finished study."""
    experiment_id = tracking.get_or_create_experiment(tracking_uri, STUDY_EXPERIMENT)
    run_id = tracking.find_run_id(tracking_uri, STUDY_EXPERIMENT, study)
    if run_id is None:
        raise SystemExit(f"check_mlflow_view: no study {study!r} in {tracking_uri}")
    children = tracking.list_child_runs(tracking_uri, run_id)
    trials = sorted(run["run_name"] for run in children if "trial" in run["params"])
    grid = [name for name in tracking.read_run(tracking_uri, run_id)["params"].get("grid", "").split(",") if name]
    trial_run = next((run["run_id"] for run in children if "trial" in run["params"]), run_id)
    return experiment_id, run_id, trials, grid, trial_run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--home", type=Path, default=None, help="the $AUDIOSCALE_HOME whose mlflow.db holds the study")
    parser.add_argument("--tracking-uri", default=None, help="instead of --home: a sqlite:/// store")
    parser.add_argument("--server", default=None, help="instead of --home: a running tracking server's URL")
    parser.add_argument("--study", default="mask_ratio-cpu_default", help="the study's name")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "audioscale-mlflow-view")
    args = parser.parse_args(argv)
    uri = (
        args.server
        or args.tracking_uri
        or f"sqlite:///{(args.home or Path.home() / 'audioscale').resolve() / 'mlflow.db'}"
    )
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("check_mlflow_view: no chromium on PATH; apt-get install chromium")
    experiment_id, run_id, trials, grid, trial_run = study_facts(uri, args.study)
    args.out.mkdir(parents=True, exist_ok=True)
    # The port the study's printed command uses: report.md's figures point at that address (a server's
    # own address when the study logged to one).
    port, debug_port = MLFLOW_UI_PORT, free_port()
    if args.server is None:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                raise SystemExit(f"check_mlflow_view: port {port} is in use; stop what serves it (the study prints it)")
    root = args.server.rstrip("/") if args.server else f"http://127.0.0.1:{port}"
    mlflow_bin = Path(sys.executable).parent / "mlflow"
    # Chromium's helper processes (renderer, crash handler) outlive the browser by a moment and keep
    # writing to the profile: they share a process group that is stopped as one, then the folder goes.
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        ui = subprocess.Popen(
            ["sleep", "infinity"] if args.server else
            [str(mlflow_bin), "ui", "--backend-store-uri", uri, "--host", "127.0.0.1", "--port", str(port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        browser = subprocess.Popen([chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
                                    "--disable-site-isolation-trials", f"--remote-debugging-port={debug_port}",
                                    f"--user-data-dir={profile}", "about:blank"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True)  # fmt: skip
        try:
            wait_for(root, 90)
            wait_for(f"http://127.0.0.1:{debug_port}/json/version", 30)
            url = study_view_url(root, experiment_id, view_key(args.study))
            charts = study_view_url(root, experiment_id, view_key(args.study), charts=True)
            checks = [
                lambda b: check_runs_table(b, url, trials, grid, args.out),
                lambda b: check_charts(b, charts, args.out),
                lambda b: check_run_pages(
                    b, run_page_url(root, experiment_id, run_id), run_page_url(root, experiment_id, trial_run), args.out
                ),  # fmt: skip
                lambda b: check_reports(b, root, experiment_id, run_id, args.out),
            ]
            failures = asyncio.run(look(root, debug_port, checks)) + stored_param_failures(uri, trial_run)
        finally:
            stop_process_group(browser)
            ui.terminate()
            ui.wait(timeout=30)
    print(f"opened {url}\nscreenshots in {args.out}")
    for failure in failures:
        print(f"FAIL  {failure}")
    if not failures:
        print(f"ok    the runs table shows {len(trials)} trials with q and its interval, rankme, {', '.join(grid)}, "
              "the best mark and status, rounded; baselines in their own column with their real duration")  # fmt: skip
        print("ok    the chart view shows Q over steps and Q against RankMe; the study run opens in the model-training "
              "layout with its best point; params as typed")  # fmt: skip
        print(f"ok    the runs table shows {len(trials)} trials; report.html and report.md show their figures")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
