"""Build the default pretraining corpus: 16 kHz mono wavs, an index, an attribution file, a marker."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import time
from pathlib import Path

import numpy as np

from pipeline.corpus.sources import build_marker, debian
from pipeline.corpus.sources.default_mix import (
    DEFAULT_HOURS_PER_SOURCE,
    DEFAULT_TOTAL_HOURS,
    build_source,
    packages_for_pretraining,
)

TINY_HOURS = 0.05  # three minutes: every source present, built in seconds
FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainCorpusConfig:
    output_dir: Path
    hours: float = DEFAULT_TOTAL_HOURS
    seed: int = 0
    tiny: bool = False

    @property
    def effective_hours(self) -> float:
        return TINY_HOURS if self.tiny else self.hours

    def settings(self) -> dict:
        """What the completion marker records: equal settings mean an identical corpus."""
        return {
            "kind": "pretrain_corpus",
            "format_version": FORMAT_VERSION,
            "hours": self.effective_hours,
            "seed": self.seed,
            "tiny": self.tiny,
        }


def source_rng(seed: int, name: str) -> np.random.Generator:
    """One generator per source, so changing one budget does not reshuffle the others."""
    return np.random.default_rng([seed, int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big")])


def build_pretrain_corpus(config: PretrainCorpusConfig) -> dict:
    """Build (or find already built) the corpus in `config.output_dir`; returns its index."""
    if config.hours <= 0:
        raise ValueError(f"--hours must be positive, got {config.hours}")
    output_dir = Path(config.output_dir).resolve()
    settings = config.settings()
    if build_marker.is_complete(output_dir, settings):
        print(f"[corpus] {output_dir} already holds this corpus ({settings}); nothing to do")
        return json.loads((output_dir / "corpus.json").read_text())
    packages = packages_for_pretraining()
    debian.ensure_packages(packages)
    build_marker.start_build(output_dir)
    work_dir = output_dir / ".work"
    scale = config.effective_hours / DEFAULT_TOTAL_HOURS
    files, hours_per_source = [], {}
    started = time.perf_counter()
    for source, default_hours in DEFAULT_HOURS_PER_SOURCE.items():
        source_started = time.perf_counter()
        source_files = build_source(
            source, default_hours * scale * 3600, source_rng(config.seed, source), output_dir, work_dir
        )
        files += [dataclasses.asdict(item) for item in source_files]
        hours_per_source[source] = round(sum(item.duration_s for item in source_files) / 3600, 4)
        print(
            f"[corpus] {source:22s} {hours_per_source[source]:6.3f} h {len(source_files):5d} files "
            f"{time.perf_counter() - source_started:6.1f} s"
        )
    shutil.rmtree(work_dir, ignore_errors=True)
    index = {
        "settings": settings,
        "total_hours": round(sum(hours_per_source.values()), 4),
        "hours_per_source": hours_per_source,
        "files": files,
    }
    (output_dir / "corpus.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    write_attribution(output_dir / "ATTRIBUTION.md", packages, title="Default pretraining corpus")
    build_marker.finish_build(output_dir, settings)
    print(
        f"[corpus] built {index['total_hours']:.3f} h in {len(files)} files in {time.perf_counter() - started:.1f} s -> {output_dir}"
    )
    return index


def write_attribution(path: Path, packages: list[str], *, title: str) -> None:
    """Every Debian package the audio comes from (or was rendered / converted with) and its license."""
    lines = [
        f"# {title}: sources and licenses",
        "",
        "All audio was read from, or rendered with, these Debian packages. The authoritative license texts",
        "are in `/usr/share/doc/<package>/copyright`; per-sound credits of OpenSFX are in `opensfx.cat`,",
        "per-kit licenses of the Hydrogen drum kits in each kit's `drumkit.xml`.",
        "",
        *debian.attribution_lines(packages),
        "",
    ]
    path.write_text("\n".join(lines))
