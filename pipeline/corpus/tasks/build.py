"""Build every labeled task into one directory with a `tasks.json` index, attribution and marker."""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path

from pipeline.corpus.sources import build_marker, debian, espeak
from pipeline.corpus.sources.asterisk import PROMPT_SPEAKERS
from pipeline.corpus.sources.fillets import DIALOGUE_PACKAGES
from pipeline.corpus.sources.pretrain_corpus import write_attribution
from pipeline.corpus.sources.soundfonts import SOUNDFONT_FILES
from pipeline.corpus.tasks import (
    drum_type,
    instrument_family,
    language_real,
    language_synthetic,
    pitch,
    speaker_count,
    spoken_digits,
)
from pipeline.corpus.tasks.hear_writer import write_hear_task

TASK_BUILDERS = {
    "language_real": language_real.build,
    "language_synthetic": language_synthetic.build,
    "spoken_digits": spoken_digits.build,
    "pitch": pitch.build,
    "instrument_family": instrument_family.build,
    "drum_type": drum_type.build,
    "speaker_count": speaker_count.build,
}
# 2: task_metadata.json gained `label_kind` (language-ID tasks for the LID probe); older builds are rebuilt.
FORMAT_VERSION = 2


@dataclasses.dataclass(frozen=True, kw_only=True)
class TasksConfig:
    output_dir: Path
    seed: int = 0
    tiny: bool = False

    def settings(self) -> dict:
        return {
            "kind": "tasks",
            "format_version": FORMAT_VERSION,
            "seed": self.seed,
            "tiny": self.tiny,
            "tasks": sorted(TASK_BUILDERS),
        }


def packages_for_tasks() -> list[str]:
    packages = {package for _, _, package in PROMPT_SPEAKERS.values()}
    packages |= {package for _, _, package, _ in espeak.LANGUAGES.values()}
    packages |= {package for _, package in SOUNDFONT_FILES.values()}
    packages |= set(DIALOGUE_PACKAGES.values()) | {
        "hydrogen-drumkits",
        "fluidsynth",
        "espeak-ng",
        "sox",
        "libsox-fmt-all",
    }
    return sorted(packages)


def build_tasks(config: TasksConfig) -> dict:
    """Build (or find already built) all tasks under `config.output_dir`; returns the index."""
    output_dir = Path(config.output_dir).resolve()
    settings = config.settings()
    if build_marker.is_complete(output_dir, settings):
        print(f"[tasks] {output_dir} already holds these tasks ({settings}); nothing to do")
        return json.loads((output_dir / "tasks.json").read_text())
    debian.ensure_packages(packages_for_tasks())
    build_marker.start_build(output_dir)
    mode = "tiny" if config.tiny else "full"
    entries, started = [], time.perf_counter()
    for index, (name, builder) in enumerate(TASK_BUILDERS.items()):
        task_started = time.perf_counter()
        task = builder(seed=config.seed * 1000 + index, tiny=config.tiny, work_dir=output_dir / ".work" / name)
        entries.append(write_hear_task(output_dir, task, mode=mode))
        for skipped in task.skipped:
            print(f"[tasks] {name}: skipped {skipped['path']}: {skipped['reason']}")
        sizes = entries[-1]["split_sizes"]
        print(
            f"[tasks] {name:20s} {task.spec.held_out:32s} train {sizes['train']:5d} valid {sizes['valid']:4d} "
            f"test {sizes['test']:4d}  {time.perf_counter() - task_started:6.1f} s"
        )
    shutil.rmtree(output_dir / ".work", ignore_errors=True)
    index = {"settings": settings, "tasks": entries}
    (output_dir / "tasks.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    write_attribution(output_dir / "ATTRIBUTION.md", packages_for_tasks(), title="Labeled tasks")
    build_marker.finish_build(output_dir, settings)
    print(f"[tasks] built {len(entries)} tasks in {time.perf_counter() - started:.1f} s -> {output_dir}")
    return index
