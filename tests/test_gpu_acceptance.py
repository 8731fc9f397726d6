"""The GPU acceptance script: its CPU mode run end to end (so it cannot rot between GPU leases), what
it imports (no Ray, no MLflow: the GPU machines have neither), and its measuring parts."""

from __future__ import annotations

import functools
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from benchmarks import gpu_acceptance
from benchmarks.acceptance import audio_shards, correctness, measure, speed, training
from benchmarks.acceptance.runner import Run
from benchmarks.acceptance.table import render, speed_line
from benchmarks.acceptance.verdict import problems
from pipeline.shards.crop_stream import StreamPlan
from tests.test_import_graph import import_graph, imported_names, module_files

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPT = REPO_ROOT / "benchmarks" / "gpu_acceptance.py"
FAMILY_DEBUG_MODELS = {
    "mae-debug",
    "audiomae++-debug",
    "axlstm-debug",
    "ssast-debug-patch",
    "hubert-debug",
    "wav2vec2-debug",
}


@pytest.fixture(scope="module")
def cpu_mode(tmp_path_factory):
    """The script as CI runs it: a fresh interpreter, `--device cpu --tiny`."""
    out = tmp_path_factory.mktemp("acceptance")
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--device", "cpu", "--tiny"],
                          capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)  # fmt: skip
    return done, json.loads((out / "results.json").read_text()), out


def test_cpu_mode_passes_and_prints_the_table_last(cpu_mode):
    done, results, out = cpu_mode
    assert done.returncode == 0, done.stdout + done.stderr
    table = done.stdout.strip().splitlines()
    assert table[0].startswith("GPU acceptance: CPU, torch ")
    assert table[-1].strip() == "verdict  0 problem(s)"
    assert results["problems"] == [] and results["imported"] == []  # neither Ray nor MLflow in its process
    # Progress on stderr, one line per finished part.
    assert "correctness: 6/6 wav2vec2-debug ok" in done.stderr and "probes: audiomae++-debug ok" in done.stderr
    # Only the results and the kernel table come back; the audio and shards went with their temporary folder.
    assert sorted(path.name for path in out.iterdir()) == ["profile-audiomae++-debug.txt", "results.json"]


def test_cpu_mode_checks_every_family_on_the_training_step(cpu_mode):
    _, results, _ = cpu_mode
    rows = {row["model"]: row for row in results["correctness"]}
    assert set(rows) == FAMILY_DEBUG_MODELS
    for name, row in rows.items():
        assert row["all_finite"] and row["problems"] == [], name
        # Five settings really trained: the loss moves between steps.
        assert len(row["fp32_losses"]) == 3 and row["fp32_losses"][0] != row["fp32_losses"][-1], name
        assert 0 < row["bf16_step1_gap"] <= correctness.BF16_STEP1_TOLERANCE, name  # bf16 really ran
    assert rows["mae-debug"]["compile_backend"] == "eager" and "compiled_losses" in rows["mae-debug"]
    # Every SDPA family's encoder ran a fused kernel; the mLSTM has no softmax attention.
    assert rows["axlstm-debug"]["attention_kernels"] == {}
    for name in FAMILY_DEBUG_MODELS - {"axlstm-debug"}:
        assert set(rows[name]["attention_kernels"]["encoder"]) == {"flash-cpu"}, name


def test_cpu_mode_measures_speed_reader_rankme_and_probes(cpu_mode):
    _, results, out = cpu_mode
    for row in results["speed"]:
        assert row["samples_per_s"] > 0 and row["mfu_vs_measured_matmul"] > 0
        # FLOPs counted as executed agree with the model's own 6N-per-token estimate (MAE: Kaplan's rule).
        assert row["counted_flops_per_sample"] / row["stated_6n_flops_per_sample"] == pytest.approx(1.0, abs=0.1)
    assert results["compile_speedup"].keys() == {"mae-debug"}
    table = (out / "profile-audiomae++-debug.txt").read_text()
    assert table.startswith("audiomae++-debug, compiled: False, 2 steps of batch 4") and "aten::mm" in table
    (reader,) = results["reader"]
    for key in ("in_memory", "readers_1", "readers_2"):
        assert reader[key]["samples_per_s"] > 0 and 0.0 <= reader[key]["busy_fraction"] <= 1.0
    assert results["rankme"]["agrees"] and 1 < results["rankme"]["device_value"] < 64
    probes = results["probes"]
    assert probes["clips"] == 15 and all(0 <= probes[k] <= 1 for k in ("knn_test_accuracy", "linear_test_accuracy"))


def _files_of_the_script() -> list[Path]:
    return [SCRIPT, *sorted((REPO_ROOT / "benchmarks" / "acceptance").glob("*.py"))]


def _imports_reached() -> tuple[set[str], set[str]]:
    """(every dotted name imported, every project module reached) from the script, read from the source."""
    modules = module_files()
    graph = import_graph(modules)
    external: set[str] = set()
    seen: set[str] = set()
    pending = []
    for path in _files_of_the_script():
        names = imported_names("benchmarks.acceptance.x", path)
        external |= names
        pending += [name for name in names if name in modules]
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        external |= imported_names(module, modules[module])
        pending += sorted(graph[module])
    return external, seen


def test_the_script_imports_neither_ray_nor_mlflow_from_the_source():
    """Every import of the script and of each project module it reaches, lazy ones included."""
    external, reached = _imports_reached()
    assert "pipeline.rankme.effective_rank" in reached and "pipeline.pretrain.step" in reached  # the walk went deep
    assert not {name for name in external if name.split(".")[0] in ("ray", "mlflow")}


def test_the_script_checks_for_every_package_it_imports():
    """The up-front check (an offline GPU machine lacks soundfile) names every third-party package reached;
    bitsandbytes is imported only when 8-bit AdamW is asked for, which the script never does."""
    external, _ = _imports_reached()
    ours = ("benchmarks", "pipeline", "models", "sweeps", "tests", "__future__")
    third_party = {name.split(".")[0] for name in external} - set(sys.stdlib_module_names) - set(ours)
    assert third_party - {"bitsandbytes"} == set(gpu_acceptance.NEEDED_PACKAGES)


def test_sdpa_kernels_are_named_per_part_and_math_is_caught():
    run = training.build("mae-debug", torch.device("cpu"), global_batch=2)
    batch = training.random_log_mel(run.model, 2, torch.device("cpu"))
    fused = measure.sdpa_kernels(run.model, lambda: run.model(batch).loss)
    assert fused == {"encoder": {"flash-cpu": 2}, "decoder": {"flash-cpu": 1}}  # mae-debug: 2 + 1 blocks
    with sdpa_kernel(SDPBackend.MATH):
        forced = measure.sdpa_kernels(run.model, lambda: run.model(batch).loss)
    assert forced == {"encoder": {"math": 2}, "decoder": {"math": 1}}
    row = {"all_finite": True, "bf16_step1_gap": 0.0, "bf16_max_gap": 0.0, "fused_max_gap": 0.0,
           "attention_kernels": forced}  # fmt: skip
    assert correctness.problems(row, "cuda") == ["the encoder's attention runs SDPA's math kernel"]
    assert correctness.problems(row, "cpu") == []  # the CPU's flash kernel has no dropout: math is expected there


def test_problems_name_each_tolerance_missed():
    row = {"all_finite": False, "bf16_step1_gap": 0.03, "bf16_max_gap": 0.03, "fused_max_gap": 0.002,
           "compiled_max_gap": 0.01, "attention_kernels": {"encoder": {"flash": 12}}}  # fmt: skip
    found = correctness.problems(row, "cuda")
    assert found == ["non-finite loss", "bf16 drifts from fp32 by 3.0%", "fused AdamW drifts by 0.20%"]
    assert correctness.problems(row, "cpu")[-1] == "compiled drifts from eager by 1.00%"  # fp32's 0.1% bound


def test_shards_written_by_prep_code_are_read_by_the_training_reader(tmp_path):
    files = audio_shards.write_audio(tmp_path / "audio", clips_per_kind=2, seconds=7.0)
    shards = audio_shards.write_shards(files, tmp_path / "shards", preset_name="audiomae", segment_s=3.0, threads=2)
    manifest = json.loads((shards / "manifest.json").read_text())
    # 7 s files in 3 s segments: 3, 3 and a 1 s tail kept as its own segment (longer than one window).
    assert manifest["num_rows"] == 6 * 3 and manifest["num_inputs"] == 6
    assert math.isclose(manifest["total_hours"], 6 * 7.0 / 3600, rel_tol=1e-3)
    plan = StreamPlan(str(shards), crop_frames=100, seed=0, rank=0, world_size=1)  # verifies the checksums
    assert plan.rows_per_epoch == 6 * 3  # every segment is at least one 1 s crop long


def test_a_failing_measurement_is_reported_saved_and_does_not_stop_the_run(tmp_path, capsys):
    """A lease is short: a model that fails is a row naming its error, saved at once; the rest still runs."""
    run = Run(tmp_path, budget_minutes=8)
    run.results["environment"] = {"summary": "CPU", "compile_error": None}
    broken = functools.partial(speed.measure_model, "mae-nonexistent", torch.device("cpu"), global_batch=2,
                               compile_backend=None, warmup=1, timed=1, peaks={})  # fmt: skip
    row = run.part("speed", "1/1 mae-nonexistent", broken, keys={"model": "mae-nonexistent", "compiled": False})
    assert row["error"].startswith("KeyError: ") and "unknown model 'mae-nonexistent'" in row["error"]
    assert "speed: 1/1 mae-nonexistent KeyError" in capsys.readouterr().err
    assert json.loads((tmp_path / "results.json").read_text())["speed"][0]["error"] == row["error"]
    assert problems(run.results) == [f"speed mae-nonexistent: failed ({row['error']})"]
    assert f"mae-nonexistent               FAILED: {row['error']}" in render(run.results)


def test_peaks_follow_the_card_variant_and_a_broken_compile_is_named(monkeypatch):
    for name, peak in (("NVIDIA H100 80GB HBM3", 989.0), ("NVIDIA H100 PCIe", 756.0), ("NVIDIA H100 NVL", 835.0),
                       ("NVIDIA H200", 989.0), ("NVIDIA H200 NVL", 835.0), ("NVIDIA A100-SXM4-80GB", None)):  # fmt: skip
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda _device=None, name=name: name)
        assert measure.datasheet_peak_tflops(torch.device("cuda")) == peak, name
    assert measure.compile_error(torch.device("cpu"), "eager") is None
    assert measure.compile_error(torch.device("cpu"), "no-such-backend").startswith("InvalidBackend")


def test_dropout_is_switched_off_for_the_comparisons_only_where_the_model_has_it():
    assert correctness.without_dropout("wav2vec2-base", {}) == {
        "dropout": 0.0, "attention_dropout": 0.0, "input_dropout": 0.0, "feature_dropout": 0.0}  # fmt: skip
    assert correctness.without_dropout("hubert-base", {"codebook": "dir"}) == {"dropout": 0.0, "codebook": "dir"}
    assert correctness.without_dropout("mae-en768-12", {}) == {}


def test_a_spent_budget_starts_nothing_new_and_says_so(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path), "--device", "cpu", "--tiny",
                           "--sections", "rankme", "--budget-minutes", "0"],
                          capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)  # fmt: skip
    assert done.returncode == 1
    assert "rankme: 3000 x 64 not run: the 0-minute budget was spent before it" in done.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["problems"] == ["rankme: not run: the 0-minute budget was spent before it"]
    assert "not run: the 0-minute budget was spent before it" in done.stdout.splitlines()[-3]


def test_the_comparisons_run_without_dropout_but_the_kernels_are_the_trained_models():
    """With attention dropout, PyTorch's CPU flash kernel steps aside for math: the kernel check must see the
    model as it trains (dropout on), while the loss comparisons run without dropout's random draws."""
    row = correctness.check_model("wav2vec2-debug", torch.device("cpu"), batch_size=2, steps=2,
                                  compile_backend=None, overrides={"attention_dropout": 0.1})  # fmt: skip
    assert row["overrides"] == {"attention_dropout": 0.0}
    assert row["attention_kernels"] == {"encoder": {"math": 2}}
    assert row["problems"] == []  # math on a CPU is PyTorch's design, not a finding


def test_a_gpu_speed_row_reads_with_its_cards_peak():
    """The table line a GPU run prints (no GPU here: the row as speed.measure_model fills it on one)."""
    row = {"step_s": 0.05, "global_batch": 1024, "accumulation": 2, "micro_batch": 512, "samples_per_s": 20480.0,
           "achieved_tflops": 378.0, "mfu_vs_datasheet": 378.0 / 756.0, "mfu_vs_measured_matmul": 378.0 / 600.0,
           "peak_memory_gib": 47.5, "first_step_s": 61.2}  # fmt: skip
    assert speed_line(row) == (
        "step 50.0 ms (1024 = 2 x 512), 20480 samples/s, 378 TFLOP/s, MFU 50.00% of 756 (63.00% of the measured "
        "matmul rate), peak 47.5 GiB; first step 61.2 s"
    )
