"""What the acceptance run concludes: every failed tolerance, missed goal, failed or skipped part, in words."""

from __future__ import annotations

MFU_GOAL = 0.40  # the goal for mae-en768-12 and audiomae++-base, of the datasheet bf16 peak
MFU_GOAL_MODELS = ("mae-en768-12", "audiomae++-base")
BUSY_GOAL = 0.90  # one reader thread should leave the device idle at most a tenth of the time


def _unfinished(section: str, row: dict) -> list[str]:
    where = f"{section} {row['model']}" if "model" in row else section
    if "error" in row:
        return [f"{where}: failed ({row['error']})"]
    return [f"{where}: {row['skipped']}"] if "skipped" in row else []


def problems(results: dict) -> list[str]:
    found = [f"torch.compile failed its preflight: {results['environment']['compile_error']}"] if results.get(
        "environment", {}).get("compile_error") else []  # fmt: skip
    for section in ("correctness", "speed", "reader", "rankme", "probes"):
        rows = results.get(section, [])
        for row in [rows] if isinstance(rows, dict) else rows:
            found += _unfinished(section, row)
    found += [
        f"{row['model']}: {problem}" for row in results.get("correctness", []) for problem in row.get("problems", [])
    ]
    for row in results.get("speed", []):
        mfu = row.get("mfu_vs_datasheet")
        if row["model"] in MFU_GOAL_MODELS and mfu is not None and mfu < MFU_GOAL:
            found.append(f"{row['model']}{' compiled' if row['compiled'] else ''}: MFU {mfu:.1%}, goal {MFU_GOAL:.0%}")
    for row in results.get("reader", []):
        busy = row.get("readers_1", {}).get("busy_fraction")
        if busy is not None and busy < BUSY_GOAL:
            found.append(f"{row['model']}: one reader thread keeps the device {busy:.0%} busy, goal {BUSY_GOAL:.0%}")
    rankme = results.get("rankme", {})
    if "agrees" in rankme and not rankme["agrees"]:
        found.append(f"RankMe on the device differs from the CPU's by {rankme['relative_gap']:.1e}")
    found += [f"{module} was imported: the GPU machines do not have it" for module in results.get("imported", [])]
    return found


def compile_speedups(speed_rows: list[dict]) -> dict[str, float]:
    """Compiled samples/s over eager, per model measured both ways at the same batch."""
    measured = {(row["model"], row["compiled"]): row["samples_per_s"] for row in speed_rows if "samples_per_s" in row}
    return {model: rate / measured[(model, False)] for (model, compiled), rate in measured.items()
            if compiled and (model, False) in measured}  # fmt: skip
