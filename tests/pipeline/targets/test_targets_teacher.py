"""HuBERT iteration 2: k-means on a trained HuBERT's layer output, the teacher's layers stored in the
codebook folder, and students that label with a frozen copy of them."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

import models
from models.wave.hubert_codebook import read_codebook
from models.wave.hubert_labels import nearest_centroid
from models.wave.hubert_teacher import TEACHER_WEIGHTS_NAME
from pipeline.checkpoint import save_model_checkpoint
from pipeline.shards.crops import read_crops
from pipeline.targets import ensure_codebook
from pipeline.targets.__main__ import main
from pipeline.targets.settings import TargetSettings
from tests.support.speech_waveform_shards import write_speech_waveform_shards

SMALL = {"clusters": 8, "crop_frames": 100, "sample_fraction": 1.0}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """(shards, an MFCC codebook, a hubert-debug teacher checkpoint trained on it for 5 steps)."""
    root = tmp_path_factory.mktemp("iteration2")
    shards = write_speech_waveform_shards(root)
    mfcc = ensure_codebook(shards, log=lambda line: None, **SMALL)
    torch.manual_seed(0)
    teacher = models.build_model("hubert-debug", codebook=str(mfcc))
    optimizer = torch.optim.AdamW(teacher.parameters(), lr=1e-3)
    crops = torch.from_numpy(read_crops(shards, crop_frames=100, seed=0, limit=6))
    for _ in range(5):
        optimizer.zero_grad()
        teacher(crops).loss.backward()
        optimizer.step()
    checkpoint = save_model_checkpoint(
        root / "teacher",
        teacher,
        model_name="hubert-debug",
        overrides={"codebook": str(mfcc)},
        step=5,
        shard_fingerprint="speech",
    )
    return shards, mfcc, checkpoint, teacher.eval()


@pytest.fixture(scope="module")
def layer_codebook(setup):
    shards, _, checkpoint, _ = setup
    return ensure_codebook(
        shards, features="hubert", teacher_checkpoint=checkpoint, teacher_layer=1, log=lambda line: None, **SMALL
    )


def test_the_codebook_folder_holds_the_teachers_layers_and_describes_them(setup, layer_codebook):
    _, _, checkpoint, _ = setup
    codebook = read_codebook(layer_codebook)
    features = codebook.manifest["features"]
    assert codebook.centroids.shape == (8, 64)  # hubert-debug is 64 wide
    assert (features["kind"], features["layer"], features["teacher_model"], features["teacher_step"]) == (
        "hubert",
        1,
        "hubert-debug",
        5,
    )
    recorded = json.loads((checkpoint / "model.json").read_text())["sha256"]["model.safetensors"]
    assert features["teacher_weights_sha256"] == recorded
    assert features["teacher_config"]["encoder_depth"] == 1 and features["teacher_config"]["codebook"] is None
    assert (layer_codebook / TEACHER_WEIGHTS_NAME).is_file()
    assert codebook.manifest["sample"]["frames"] == 6 * 100  # one 50 Hz frame per stored frame


def test_student_labels_are_the_nearest_centroid_of_the_teachers_layer(setup, layer_codebook):
    shards, _, _, teacher = setup
    student = models.build_model("hubert-debug", codebook=str(layer_codebook))
    crops = torch.from_numpy(read_crops(shards, crop_frames=100, seed=7, limit=6))
    with torch.no_grad():
        layer_one = teacher.encoder(crops)[1].layers[0]  # the trained teacher's block-1 output
    centroids = torch.from_numpy(read_codebook(layer_codebook).centroids)
    expected = nearest_centroid(layer_one.reshape(-1, 64), centroids).reshape(6, 100)
    labels = student.label_frames(crops)
    assert torch.equal(labels, expected)
    assert len(labels.unique()) > 2


def test_the_teacher_is_frozen_uncounted_in_eval_mode_and_saved(setup, layer_codebook):
    _, mfcc, _, _ = setup
    student = models.build_model("hubert-debug", codebook=str(layer_codebook)).train()
    plain = models.build_model("hubert-debug", codebook=str(mfcc))  # same k = 8, no teacher
    assert models.count_parameters(student) == models.count_parameters(plain)
    assert not student.labeller.teacher.training
    assert any(name.startswith("labeller.teacher.encoder.context.layers.0.") for name in student.state_dict())
    before = {name: value.clone() for name, value in student.labeller.teacher.state_dict().items()}
    optimizer = torch.optim.AdamW(student.parameters(), lr=1e-2)
    student(torch.randn(2, 100, 320)).loss.backward()
    optimizer.step()
    assert all(torch.equal(value, before[name]) for name, value in student.labeller.teacher.state_dict().items())


def test_a_weightless_build_with_a_layer_codebook_loads_nothing(layer_codebook):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # copying weights into meta tensors warns once per tensor
        with torch.device("meta"):
            model = models.build_model("hubert-debug", codebook=str(layer_codebook))
    assert model.labeller.teacher.encoder.context.layers[0].fc1.weight.is_meta


def test_the_cache_key_follows_the_teachers_weights(setup, layer_codebook, tmp_path):
    shards, mfcc, checkpoint, teacher = setup
    again = ensure_codebook(
        shards, features="hubert", teacher_checkpoint=checkpoint, teacher_layer=1, log=lambda line: None, **SMALL
    )
    assert again == layer_codebook
    with torch.no_grad():
        teacher.final_proj.weight.add_(1.0)  # other weights, same folder name elsewhere
    other = save_model_checkpoint(
        tmp_path / "teacher",
        teacher,
        model_name="hubert-debug",
        overrides={"codebook": str(mfcc)},
        step=5,
        shard_fingerprint="speech",
    )
    copy = ensure_codebook(
        shards,
        features="hubert",
        teacher_checkpoint=other,
        teacher_layer=1,
        cache_dir=tmp_path / "cache",
        log=lambda line: None,
        **SMALL,
    )
    assert copy.name != layer_codebook.name


def test_cli_fits_layer_features_with_a_teacher(setup, tmp_path, capsys):
    shards, _, checkpoint, _ = setup
    assert (
        main(
            [
                "--shards",
                str(shards),
                "--features",
                "hubert",
                "--teacher",
                str(checkpoint),
                "--teacher-layer",
                "2",
                "--clusters",
                "4",
                "--crop-frames",
                "100",
                "--sample-fraction",
                "1",
                "--output",
                str(tmp_path),
            ]
        )
        == 0
    )
    directory = tmp_path / capsys.readouterr().out.strip().rsplit("/", 1)[-1]
    features = read_codebook(directory).manifest["features"]
    assert (features["kind"], features["layer"], read_codebook(directory).clusters) == ("hubert", 2, 4)


def test_hubert_features_need_a_teacher_and_mfcc_takes_none():
    with pytest.raises(ValueError, match="--features hubert needs --teacher CHECKPOINT_DIR and --teacher-layer"):
        TargetSettings(features="hubert", clusters=500)
    assert TargetSettings.for_features("hubert", teacher_checkpoint="ckpt").teacher_layer == 6  # HuBERT BASE's layer
    assert TargetSettings.for_features("hubert", teacher_checkpoint="ckpt").clusters == 500


def test_a_teacher_that_is_not_a_hubert_is_refused(setup, tmp_path):
    shards = setup[0]
    mae = save_model_checkpoint(
        tmp_path / "mae",
        models.build_model("mae-debug"),
        model_name="mae-debug",
        overrides={},
        step=0,
        shard_fingerprint="x",
    )
    with pytest.raises(ValueError, match="holds a 'mae-debug' checkpoint; iteration-2 targets are a HuBERT's"):
        ensure_codebook(
            shards,
            features="hubert",
            teacher_checkpoint=mae,
            teacher_layer=1,
            cache_dir=tmp_path / "cache",
            log=lambda line: None,
            **SMALL,
        )


def test_teacher_layer_beyond_its_depth_is_refused(setup, tmp_path):
    shards, _, checkpoint, _ = setup
    with pytest.raises(ValueError, match="teacher layer 3: hubert-debug has blocks 1 to 2"):
        ensure_codebook(
            shards,
            features="hubert",
            teacher_checkpoint=checkpoint,
            teacher_layer=3,
            cache_dir=tmp_path,
            log=lambda line: None,
            **SMALL,
        )
    assert list(tmp_path.iterdir()) == [], "a refused teacher leaves no codebook behind"


def test_labelling_flops_match_the_counted_teacher_matmuls_and_convolutions(layer_codebook):
    from torch.utils.flop_counter import FlopCounterMode

    student = models.build_model("hubert-debug", codebook=str(layer_codebook))
    counter = FlopCounterMode(display=False)
    with counter:
        student.label_frames(torch.randn(4, 100, 320))
    counted = sum(counter.get_flop_counts()["Global"].values()) / 4
    # 2 N counts biases and norms too; the position conv computes one extra output step
    assert 0.9 < counted / student.labelling_flops_per_sample() < 1.05
    assert student.labelling_flops_per_sample() < student.training_flops_per_sample()


def test_a_student_checkpoint_reloads_with_its_frozen_teacher(setup, layer_codebook, tmp_path):
    from pipeline.checkpoint import load_model_from_checkpoint

    shards = setup[0]
    torch.manual_seed(0)
    student = models.build_model("hubert-debug", codebook=str(layer_codebook))
    saved = save_model_checkpoint(
        tmp_path / "student",
        student,
        model_name="hubert-debug",
        overrides={"codebook": str(layer_codebook)},
        step=1,
        shard_fingerprint="speech",
    )
    reloaded, _ = load_model_from_checkpoint(saved)
    crops = torch.from_numpy(read_crops(shards, crop_frames=100, seed=1, limit=3))
    assert torch.equal(reloaded.label_frames(crops), student.label_frames(crops))
    torch.testing.assert_close(reloaded.embed(crops), student.eval().embed(crops))
