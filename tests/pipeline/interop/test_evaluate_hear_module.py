"""`python -m pipeline.evaluate --hear-module` / `python -m sweeps.external`: any HEAR module scored on a study's pool and probe.

Two modules: our own (pipeline.interop.hear_api on a debug checkpoint made here, 16 kHz) and a
third-party-style one (tests/support/toy_hear_module.py, 32 kHz, so task audio and the pool's
source files are resampled). R is checked against RankMe of the module's own embeddings of the pool
crops cut here from the source files by hand; the study part checks the MLflow child run and the
data the Q(R) figure places, and that the fits leave the external point out.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import soundfile
import torch
import torchaudio

import models
import pipeline.interop.hear_api as own_hear_api
from pipeline.checkpoint import save_model_checkpoint
from pipeline.cli.errors import UserError
from pipeline.evaluate.__main__ import COMMAND, main
from pipeline.evaluate.probes.linear import LinearProbeConfig
from pipeline.interop.hear_module import load_hear_module
from pipeline.interop.hear_module_run import evaluate_hear_module
from pipeline.rankme.effective_rank import rankme
from pipeline.rankme.pool import select_pool
from pipeline.shards.format import make_clip_id
from pipeline.tracking import runs as tracking
from sweeps.external import COMMAND as EXTERNAL_COMMAND
from sweeps.external import main as external_main
from sweeps.record.keys import EXTERNAL_TAG, HEAR_MODULE_TAG, MODEL_DIGEST_TAG, RANKME_POOL_ARTIFACT, STUDY_EXPERIMENT
from sweeps.record.rankme_pool import RankMePoolRecord
from sweeps.record.study import read_study
from sweeps.record.trial import TrialRecord
from sweeps.report.external_points import EXTERNAL_LEGEND
from sweeps.report.figures import study_figures
from sweeps.report.study_fits import fit_study_laws
from sweeps.study.external_log import study_rankme_pool
from sweeps.study.law_analysis import refit_study
from tests.support import toy_hear_module
from tests.support.hear_task_fixtures import build_tiny_tasks
from tests.support.waveform_pool_fixtures import (
    CROP_FRAMES,
    SEGMENT_S,
    SOURCE_SECONDS,
    SOURCES,
    write_audio_shards,
)

TOY = "tests.support.toy_hear_module"
SOURCE_RATE_HZ = 16_000


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory):
    return build_tiny_tasks(tmp_path_factory.mktemp("tasks"))


@pytest.fixture(scope="module")
def audio_shards(tmp_path_factory):
    return write_audio_shards(tmp_path_factory.mktemp("pool"))


def pool_crops_by_hand(pool, audio_dir, sample_rate_hz: int) -> list[np.ndarray]:
    """Crop k of segment s of a file: seconds [2 s + k, 2 s + k + 1) of it, cut at the segment's end,
    resampled per segment, zero-padded to 1 s (what the waveform pool promises)."""
    where = {make_clip_id(source, index): (source, index) for source in SOURCES for index in range(3)}
    crops = []
    for clip_id, count in pool.rows:
        source, index = where[clip_id]
        wave, rate = soundfile.read(audio_dir / source, dtype="float32")
        start, end = int(index * SEGMENT_S * rate), int(min((index + 1) * SEGMENT_S, SOURCE_SECONDS) * rate)
        segment = torchaudio.functional.resample(torch.from_numpy(wave[start:end]), rate, sample_rate_hz).numpy()
        for k in range(count):
            crop = segment[k * sample_rate_hz : (k + 1) * sample_rate_hz]
            crops.append(np.pad(crop, (0, sample_rate_hz - len(crop))))
    return crops


def test_the_pool_is_every_crop_of_the_sources_and_the_short_tail_is_padded(audio_shards):
    shards, audio_dir = audio_shards
    pool = select_pool(shards, crop_frames=CROP_FRAMES)
    assert pool.n == 4 * (2 + 2 + 1)  # 2 s, 2 s and a 0.7 s tail (>= half a crop) per file
    from pipeline.rankme.waveform_pool import pool_crop_waveforms

    crops = list(pool_crop_waveforms(pool, 16_000))
    by_hand = pool_crops_by_hand(pool, audio_dir, 16_000)
    assert len(crops) == 20 and {len(c) for c in crops} == {16_000}
    for crop, expected in zip(crops, by_hand):
        np.testing.assert_array_equal(crop, expected)
    tails = [c for c in crops if not c[11_200:].any()]  # 0.7 s of audio, then zeros
    assert len(tails) == 4


def test_own_hear_module_r_is_rankme_of_its_embeddings_of_the_pool_audio(tmp_path, audio_shards, tasks_dir):
    shards, audio_dir = audio_shards
    torch.manual_seed(0)
    checkpoint = save_model_checkpoint(tmp_path / "ckpt", models.build_model("audiomae++-debug"), model_name="audiomae++-debug",
                                       overrides={}, step=3, shard_fingerprint="t")  # fmt: skip
    hear = load_hear_module("pipeline.interop.hear_api", str(checkpoint))
    assert (hear.sample_rate_hz, hear.embedding_size) == (16_000, 240)
    pool = select_pool(shards, crop_frames=CROP_FRAMES)
    result = evaluate_hear_module(hear, tasks_dir=str(tasks_dir), pool=pool, task_rankme_n=40, seeds=1,
                                  probe_training=LinearProbeConfig())  # fmt: skip
    audio = torch.from_numpy(np.stack(pool_crops_by_hand(pool, audio_dir, 16_000)))
    direct = rankme(own_hear_api.get_scene_embeddings(audio, hear.model))
    assert result.rankme == pytest.approx(direct, rel=1e-6)
    assert 1.0 <= result.rankme <= min(20, 240)
    assert (result.rankme_n, result.rankme_k, result.rankme_pool) == (20, 240, pool.fingerprint)
    assert result.rankme_capped  # 20 crops < 8 x 240
    assert 0.0 <= result.q <= 1.0 and set(result.task_scores) == {"tones", "mixtures"}
    assert result.task_scores["tones"]["mean"] > 0.6  # three pure tones, chance 1/3
    assert result.q_probe == "linear" and result.model_name == "pipeline.interop.hear_api"
    assert len(hear.model_file_digest) == 64


def _write_study(tracking_uri: str, pool, shards, *, name: str = "toy", record_pool: bool = True) -> str:
    """A linear-probe study whose five trials measured R on `pool` (as pretraining logs it); each trial
    reports its pool as a real study's do, so the first records it on the study run. `record_pool=False`:
    a study logged before the pool was recorded."""
    parent = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name=STUDY_EXPERIMENT, run_name=name)
    parent.log_params({"grid": "mask_ratio", "probe": "linear"})
    for index, ratio in enumerate((0.5, 0.6, 0.7, 0.8, 0.9)):
        child = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name=STUDY_EXPERIMENT,
                                             run_name=f"{name}/mask{ratio}", parent_run_id=parent.run_id)  # fmt: skip
        child.log_params({"shards_dir": str(shards), "rankme_shards_dir": None, "crop_frames": CROP_FRAMES,
                          "rankme_n": None, "rankme_pool": pool.fingerprint})  # fmt: skip
        rankme_value, q = 4.0 + 2.0 * index, 0.55 + 0.04 * index - 0.004 * index**2
        TrialRecord(
            trial=f"mask{ratio}", model_name="mae-debug", arch="mae", n_params=1000, hours=1.0, flops=1e12,
            mask_ratio=ratio, rankme=rankme_value, rankme_by_step={10: rankme_value}, q=q, rankme_n=pool.n,
            rankme_pool=pool.fingerprint, q_ci_low=q - 0.01, q_ci_high=q + 0.01,
            pool=RankMePoolRecord.of(pool) if record_pool else None,
        ).write(child, study_run=parent)  # fmt: skip
        child.finish()
    parent.finish()
    return parent.run_id


@pytest.fixture(scope="module")
def logged_study(tmp_path_factory, audio_shards, tasks_dir):
    """A study, then the toy module scored by the CLI as its external point (once: MLflow is slow)."""
    shards, audio_dir = audio_shards
    root = tmp_path_factory.mktemp("study")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    pool = select_pool(shards, crop_frames=CROP_FRAMES)
    parent_id = _write_study(uri, pool, shards)
    weights = root / "projection.npy"
    np.save(weights, toy_hear_module.random_projection(seed=7))
    argv = ["--hear-module", TOY, "--model-file", str(weights), "--study", "toy", "--tracking-uri", uri,
            "--tasks-dir", str(tasks_dir), "--probe", "linear", "--seeds", "1", "--task-rankme-n", "40",
            "--output", str(root / "out")]  # fmt: skip
    assert external_main(argv) == 0
    return uri, parent_id, pool, weights, audio_dir, root


def test_cli_logs_a_third_party_module_as_an_external_child_of_the_study(logged_study):
    uri, parent_id, pool, weights, audio_dir, _ = logged_study
    runs = tracking.list_child_runs(uri, parent_id)
    external = [run for run in runs if run["tags"].get(EXTERNAL_TAG) == "true"]
    assert len(external) == 1 and len(runs) == 6
    run = external[0]
    assert run["run_name"] == f"external-{TOY}@toy" and run["status"] == "FINISHED"
    assert run["tags"][HEAR_MODULE_TAG] == TOY
    assert run["tags"][MODEL_DIGEST_TAG] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert run["params"]["sample_rate"] == "32000" and run["params"]["probe_schedule"] == "linear"
    assert run["tags"]["eval_rankme_pool"] == pool.fingerprint
    # R: RankMe of the module's own embeddings of the pool crops, cut by hand and resampled to 32 kHz.
    model = toy_hear_module.load_model(str(weights))
    audio = torch.from_numpy(np.stack(pool_crops_by_hand(pool, audio_dir, 32_000)))
    direct = rankme(toy_hear_module.get_scene_embeddings(audio, model))
    logged_r, logged_q = run["metrics"]["rankme"][-1][1], run["metrics"]["q"][-1][1]
    assert logged_r == round(direct, 2)  # logged as a trial's R is, to RANKME_DECIMALS
    assert 1.0 <= logged_r <= toy_hear_module.EMBEDDING_SIZE
    assert 0.0 <= logged_q <= 1.0
    # Q and the task scores are logged to 4 decimals: their mean agrees with Q to that rounding.
    assert logged_q == pytest.approx(
        np.mean([run["metrics"]["score/tones"][-1][1], run["metrics"]["score/mixtures"][-1][1]]), abs=1e-4
    )


def test_the_fits_leave_the_external_point_out_and_the_figure_places_it(logged_study):
    uri, parent_id, *_ = logged_study
    study = read_study(uri, "toy")
    table = study.trial_table
    assert len(table) == 5 and TOY not in set(table["model_name"])
    external = study.external_table
    assert external[["name", "hear_module"]].values.tolist() == [[TOY, TOY]]
    study = fit_study_laws(table, n_bootstrap=0, grid="mask_ratio")
    assert study.fits["Q(R)"].n_points == 5
    axes = study_figures(table, study, external=external)["quality_vs_rankme.png"].axes[0]
    placed = [c for c in axes.collections if c.get_label() == EXTERNAL_LEGEND]
    assert len(placed) == 1
    np.testing.assert_allclose(placed[0].get_offsets(), external[["rankme", "q"]].to_numpy(float))
    assert EXTERNAL_LEGEND in [text.get_text() for text in axes.get_legend().get_texts()]
    assert "not fitted" in EXTERNAL_LEGEND
    assert TOY in [text.get_text() for text in axes.texts]


def test_refit_reports_the_external_point_outside_the_fits(logged_study):
    uri, parent_id, *_ = logged_study
    markdown = refit_study("toy", tracking_uri=uri, n_bootstrap=0)
    assert f"not used in any fit): {TOY} R " in markdown
    assert "over 5 points" in tracking.read_run(uri, parent_id)["tags"][tracking.RUN_DESCRIPTION_TAG]


def test_the_study_records_its_pool_once_and_the_cli_measured_r_on_it(logged_study):
    uri, parent_id, pool, *_ = logged_study
    artifacts = tracking.list_artifacts(uri, parent_id)
    assert artifacts.count(RANKME_POOL_ARTIFACT) == 1  # five trials reported it; the first wrote it
    assert study_rankme_pool(uri, parent_id, "toy") == pool  # the CLI's pool: the trials' own
    external = read_study(uri, "toy").external_points()
    assert [point.rankme_pool for point in external] == [pool.fingerprint]


def test_a_study_without_a_recorded_pool_names_it_and_the_flags_to_pass(logged_study, audio_shards):
    uri, _, pool, *_ = logged_study
    old_study = _write_study(uri, pool, audio_shards[0], name="before-pools", record_pool=False)
    assert RANKME_POOL_ARTIFACT not in tracking.list_artifacts(uri, old_study)
    with pytest.raises(UserError, match=r"--study before-pools: the study run records no RankMe pool") as error:
        study_rankme_pool(uri, old_study, "before-pools")
    assert "--rankme-shards DIR and --rankme-crop-frames N" in str(error.value)


@pytest.mark.parametrize(("module", "missing"), [
    ("tests.pipeline.no_such_module", "no module 'tests.pipeline.no_such_module' can be imported"),
    ("tests.support.toy_not_hear_module", "it has no get_scene_embeddings function"),
    ("pipeline.evaluate.hear_api", "has moved: use --hear-module pipeline.interop.hear_api"),
])  # fmt: skip
def test_a_module_that_is_not_a_hear_module_is_one_line_and_exit_2(module, missing, tasks_dir, capsys):
    code = COMMAND.run(main, ["--hear-module", module, "--tasks-dir", str(tasks_dir), "--no-mlflow"])
    error = capsys.readouterr().err.strip()
    assert code == 2 and len(error.splitlines()) == 1
    assert module in error and missing in error


def test_a_probe_other_than_the_studys_is_refused(logged_study, tasks_dir, capsys):
    uri = logged_study[0]
    argv = [
        "--hear-module",
        TOY,
        "--study",
        "toy",
        "--tracking-uri",
        uri,
        "--tasks-dir",
        str(tasks_dir),
        "--probe",
        "knn",
    ]
    assert EXTERNAL_COMMAND.run(external_main, argv) == 2
    assert "--probe linear" in capsys.readouterr().err


def test_a_model_without_the_hear_attributes_is_named(tmp_path, monkeypatch, tasks_dir, capsys):
    (tmp_path / "rateless_hear.py").write_text(
        "class Model:\n    scene_embedding_size = 8\n\n"
        "def load_model(model_file_path=''):\n    return Model()\n\n"
        "def get_scene_embeddings(audio, model):\n    return audio[:, :8]\n"
    )  # fmt: skip
    monkeypatch.syspath_prepend(str(tmp_path))
    code = COMMAND.run(main, ["--hear-module", "rateless_hear", "--tasks-dir", str(tasks_dir), "--no-mlflow"])
    error = capsys.readouterr().err
    assert code == 2 and "rateless_hear: load_model returned a model without integer sample_rate" in error
