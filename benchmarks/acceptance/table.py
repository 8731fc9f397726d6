"""The acceptance run's closing table: one line per check, its figures, and what is wrong (if anything)."""

from __future__ import annotations


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.2%}"


def _kernels(parts: dict[str, dict[str, int]]) -> str:
    if not parts:
        return "no SDPA"
    return ", ".join(f"{part} {'+'.join(sorted(kinds))}" for part, kinds in sorted(parts.items()))


def correctness_line(row: dict) -> str:
    compiled = f", compiled {_percent(row['compiled_max_gap'])}" if "compiled_max_gap" in row else ""
    return (f"bf16 vs fp32 {_percent(row['bf16_step1_gap'])} at step 1 (max {_percent(row['bf16_max_gap'])}), "
            f"fused AdamW {row['fused_max_gap']:.1e}{compiled}; attention: {_kernels(row['attention_kernels'])}")  # fmt: skip


def speed_line(row: dict) -> str:
    memory = "" if row["peak_memory_gib"] is None else f", peak {row['peak_memory_gib']:.1f} GiB"
    mfu = ""
    if row.get("mfu_vs_datasheet"):
        peak = row["achieved_tflops"] / row["mfu_vs_datasheet"]  # the card's datasheet peak, TFLOP/s
        of_measured = _percent(row["mfu_vs_measured_matmul"])
        mfu = f", MFU {_percent(row['mfu_vs_datasheet'])} of {peak:.0f} ({of_measured} of the measured matmul rate)"
    elif row.get("mfu_vs_measured_matmul") is not None:
        mfu = f", {_percent(row['mfu_vs_measured_matmul'])} of the measured matmul rate"
    return (f"step {row['step_s'] * 1000:.1f} ms ({row['global_batch']} = {row['accumulation']} x {row['micro_batch']}), "
            f"{row['samples_per_s']:.0f} samples/s, {row['achieved_tflops']:.3g} TFLOP/s{mfu}{memory}; "
            f"first step {row['first_step_s']:.1f} s")  # fmt: skip


def reader_line(row: dict) -> str:
    parts = [f"in memory {row['in_memory']['samples_per_s']:.0f}/s"]
    for key, value in row.items():
        if key.startswith("readers_"):
            parts.append(f"{key.split('_')[1]} reader(s) {value['samples_per_s']:.0f}/s "
                         f"(busy {_percent(value['busy_fraction'])}, {value['vs_in_memory']:.2f}x)")  # fmt: skip
    return "; ".join(parts)


def rankme_line(row: dict) -> str:
    return (f"{row['n']} x {row['dim']}: device {row['device_s'] * 1000:.0f} ms, CPU {row['cpu_s'] * 1000:.0f} ms, "
            f"values {row['device_value']:.4f} / {row['cpu_value']:.4f} (relative gap {row['relative_gap']:.1e})")  # fmt: skip


def probes_line(row: dict) -> str:
    return (f"{row['clips']} clips embedded in {row['embed_s']:.1f} s; test accuracy kNN {row['knn_test_accuracy']:.2f} "
            f"({row['knn_s']:.2f} s), linear {row['linear_test_accuracy']:.2f} ({row['linear_s']:.2f} s, CPU); "
            f"chance {row['chance']:.2f}")  # fmt: skip


def _line(row: dict, describe) -> str:
    if "error" in row:
        return f"FAILED: {row['error']}"
    return row["skipped"] if "skipped" in row else describe(row)


def render(results: dict) -> str:
    """The table of everything in `results` (sections that did not run are left out)."""
    lines = [f"GPU acceptance: {results['environment']['summary']}"]
    for row in results.get("correctness", []):
        lines.append(f"  correct  {row['model']:<20} {_line(row, correctness_line)}")
    for row in results.get("speed", []):
        label = f"{row['model']}{' compiled' if row['compiled'] else ''}"
        speedup = results.get("compile_speedup", {}).get(row["model"]) if row["compiled"] else None
        lines.append(f"  speed    {label:<29} {_line(row, speed_line)}"
                     + (f"; {speedup:.2f}x eager" if speedup else ""))  # fmt: skip
    for row in results.get("reader", []):
        lines.append(f"  reader   {row['model']:<20} {_line(row, reader_line)}")
    if "rankme" in results:
        lines.append(f"  rankme   {'':<20} {_line(results['rankme'], rankme_line)}")
    if "probes" in results:
        lines.append(f"  probes   {results['probes']['model']:<20} {_line(results['probes'], probes_line)}")
    problems = results.get("problems", [])
    lines.append(f"  verdict  {len(problems)} problem(s)" + "".join(f"\n    - {p}" for p in problems))
    return "\n".join(lines)
