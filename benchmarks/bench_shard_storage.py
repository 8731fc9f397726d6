"""Storage per hour of audio of every front-end preset's shards: the waveform preset against the mel ones.

    python benchmarks/bench_shard_storage.py [--input DIR] [--keep DIR]

Preps one corpus (default: the embedded default corpus, built into $AUDIOSCALE_HOME if missing) with
each preset in turn (ensure_shards: a preset already prepared under $AUDIOSCALE_HOME is reused, not
timed) and prints, per preset, the part files' bytes per hour of audio beside the uncompressed size
of what a row stores (frames/s x values per frame x 2 bytes of float16, plus per-row statistics).
Parquet's page compression is what separates the two.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.audio.frontend import PRESETS  # noqa: E402
from pipeline.defaults import ensure_default_data, ensure_shards  # noqa: E402
from pipeline.shards.format import part_files, read_manifest  # noqa: E402

MB = 1e6


def storage_row(shards: Path) -> dict:
    manifest = read_manifest(shards)
    preset = manifest["preset"]
    stored = sum(path.stat().st_size for path in part_files(shards))
    hours = float(manifest["total_hours"])
    frames_per_s = 1000.0 / preset["hop_ms"]
    raw_per_hour = frames_per_s * 3600 * int(manifest["n_mels"]) * 2  # float16 values
    return {
        "preset": preset["name"],
        "values": f"{manifest['n_mels']} x {frames_per_s:g}/s",
        "hours": hours,
        "mb_per_hour": stored / hours / MB,
        "raw_mb_per_hour": raw_per_hour / MB,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", type=Path, help="corpus folder (default: the embedded default corpus)")
    parser.add_argument("--keep", type=Path, help="where to write the shard sets (default: $AUDIOSCALE_HOME/shards)")
    args = parser.parse_args()
    corpus = args.input or ensure_default_data(preset_name="dasheng", with_tasks=False).corpus_dir
    rows = []
    for name in PRESETS:
        print(f"preparing {corpus} with preset {name} ...", flush=True)
        shards = ensure_shards(corpus_dir=corpus, preset_name=name, root=args.keep)
        rows.append(storage_row(shards))
    base = next(row for row in rows if row["preset"] == "dasheng")["mb_per_hour"]
    print(
        f"\n{'preset':<10} {'values per frame x rate':>24} {'hours':>6} {'MB per hour':>12} "
        f"{'uncompressed':>13} {'x dasheng':>10}"
    )
    for row in rows:
        print(
            f"{row['preset']:<10} {row['values']:>24} {row['hours']:>6.2f} {row['mb_per_hour']:>12.1f} "
            f"{row['raw_mb_per_hour']:>13.1f} {row['mb_per_hour'] / base:>10.2f}"
        )


if __name__ == "__main__":
    main()
