"""The RankMe pool a study measured R on, written once as an artifact of the study run.

R compares only on one pool (pipeline.rankme.pool: same clips, offsets, crop length and N), so an
outside model scored as an external point (`python -m sweeps.external`) must be measured on the
study's. The first trial that reports its pool writes it here, `rankme_pool.json` on the study
run (shards dir, crop_frames, N, seed, fingerprint); the pool is then re-selected from it, and the
fingerprint must come out the same. Studies logged before this record have no artifact: the
caller says so and asks for an explicit pool (`--rankme-shards`, `--rankme-crop-frames`).
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pipeline.rankme.pool import POOL_SEED, RankMePool, select_pool
from pipeline.tracking import runs as tracking
from sweeps.record.keys import RANKME_POOL_ARTIFACT


@dataclass(frozen=True, kw_only=True)
class RankMePoolRecord:
    shards_dir: str
    crop_frames: int
    n: int
    fingerprint: str
    seed: int = POOL_SEED

    @classmethod
    def of(cls, pool: RankMePool) -> RankMePoolRecord:
        return cls(shards_dir=pool.shards_dir, crop_frames=pool.crop_frames, n=pool.n,
                   fingerprint=pool.fingerprint, seed=pool.seed)  # fmt: skip

    def write_once(self, study_run: tracking.TrackedRun) -> bool:
        """Write the artifact unless the study run has one already (the first trial's pool stays the
        study's); True when this call wrote it."""
        if RANKME_POOL_ARTIFACT in tracking.list_artifacts(study_run.tracking_uri, study_run.run_id):
            return False
        study_run.log_dict(dataclasses.asdict(self), RANKME_POOL_ARTIFACT)
        return True

    def select(self) -> RankMePool:
        """The pool, selected again from the shards (pure in shards, crop length, N and seed); its
        fingerprint equals the record's unless the shards changed since (the caller checks)."""
        return select_pool(self.shards_dir, crop_frames=self.crop_frames, n=self.n, seed=self.seed)


def read_rankme_pool(tracking_uri: str, study_run_id: str) -> RankMePoolRecord | None:
    """The study run's pool record; None for a study logged before the record existed."""
    if RANKME_POOL_ARTIFACT not in tracking.list_artifacts(tracking_uri, study_run_id):
        return None
    with tempfile.TemporaryDirectory(prefix="audioscale-pool-") as directory:
        path = tracking.download_artifacts(tracking_uri, study_run_id, RANKME_POOL_ARTIFACT, Path(directory))
        fields = json.loads(Path(path).read_text())
    known = {f.name for f in dataclasses.fields(RankMePoolRecord)}
    return RankMePoolRecord(**{key: value for key, value in fields.items() if key in known})
