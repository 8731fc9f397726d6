"""`python -m pipeline.prep`: raw audio -> Parquet log-mel shards, on Ray Data.

    python -m pipeline.prep --input DIR_OR_MANIFEST --output DIR [--preset audiomae|dasheng|ssast|waveform]
        [--segment-s 10] [--max-hours H] [--seed S] [--address RAY_ADDRESS] [--overwrite]

Exit status: 0 when at least one input produced rows (or a finished identical run was reused),
1 when none did, 2 for a usage error (bad input path, output conflict). The flow is in
`pipeline.prep.run`.
"""

from __future__ import annotations

import argparse
from collections import Counter

from pipeline.cli.command import Command
from pipeline.prep.run import PrepConfig, PrepResult, run_prep


def format_summary(result: PrepResult) -> str:
    manifest = result.manifest
    hours = manifest["total_hours"]
    lines = []
    if result.reused:
        lines.append(
            f"prep: {result.output_dir} already holds these inputs with these settings "
            f"(fingerprint {manifest['fingerprint'][:12]}); reusing it. Pass --overwrite to redo."
        )
    speed = f", {hours * 3600 / manifest['elapsed_s']:.0f}x real time" if manifest["elapsed_s"] > 0 else ""
    if result.reused:
        speed += f", made {manifest['created_utc']}"
    lines.append(
        f"prep: {manifest['num_inputs']} inputs -> {manifest['num_rows']} rows, {hours:.3f} h of audio "
        f"({manifest['preset']['name']} preset, {manifest['n_mels']} mel) in {manifest['elapsed_s']:.1f} s{speed}"
    )
    if manifest["num_rejected"]:
        by_kind = ", ".join(f"{count} {kind}" for kind, count in manifest["rejected_by_kind"].items())
        lines.append(f"rejected {manifest['num_rejected']}: {by_kind} (reasons in rejected.jsonl)")
    else:
        lines.append("rejected 0")
    if duplicates := manifest.get("duplicate_inputs"):
        named = ", ".join(f"{d['path']!r} ({d['reason']})" for d in duplicates[:3])
        lines.append(
            f"warning: {len(duplicates)} inputs name a file already listed and count once: {named}"
            + (", ..." if len(duplicates) > 3 else "")
            + " (duplicate_inputs in manifest.json)"
        )
    if manifest.get("silent_hours"):
        silent = manifest["silent_inputs"]
        named = ", ".join(f"{r['path']!r} ({_duration(r['silent_s'])})" for r in silent[:3])
        lines.append(
            f"warning: {manifest['silent_hours']:.3f} h of the {hours:.3f} h is silence (every sample under "
            f"-70 dBFS) and trains nothing: {named}"
            + (", ..." if len(silent) > 3 else "")
            + " (silent_inputs in manifest.json)"
        )
    if manifest["num_partial"]:
        lines.append(f"{manifest['num_partial']} inputs decoded only in part (see partial_inputs in manifest.json)")
    skipped = Counter(
        {
            "non-audio files": manifest["skipped_non_audio_files"],
            "symlink loops": len(manifest["skipped_symlink_loops"]),
        }
    )
    if +skipped:
        lines.append("skipped while listing: " + ", ".join(f"{n} {what}" for what, n in (+skipped).items()))
    lines.append(f"output: {result.output_dir} ({len(manifest['part_files'])} part files, manifest.json)")
    if manifest["num_rows"] == 0:
        lines.append("no input produced rows: check --input and rejected.jsonl")
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 360 else f"{seconds / 3600:.2f} h"


COMMAND = Command("pipeline.prep", __doc__.split("\n\n")[0])


def build_parser() -> argparse.ArgumentParser:
    """One option per PrepConfig field (pipeline.cli.flags), and --config for a recipe of them."""
    return COMMAND.parser(PrepConfig, config_file_tables="[prep]")


def parse_args(argv: list[str] | None) -> PrepConfig:
    config, _ = COMMAND.parse(PrepConfig, argv, parser=build_parser(), table="prep")
    return config


def main(argv: list[str] | None = None) -> int:
    # A conflicting output folder or an input that cannot be listed is a UserError: one line, exit code 2.
    result = run_prep(parse_args(argv))
    print(format_summary(result))
    return result.exit_code


def cli() -> int:
    """`python -m` and the console script: user errors one line, exit code 2 (pipeline.cli.command)."""
    return COMMAND.run(main)


if __name__ == "__main__":
    raise SystemExit(cli())
