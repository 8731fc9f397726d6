"""`python -m sweeps.scaling --config FILE.toml`: a study recipe, with the flags overriding it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.cli.flags import flagged_fields
from sweeps.scaling import build_parser, main, parse_study_args
from sweeps.study.config import StudyConfig

EXAMPLE_RECIPE = Path(__file__).resolve().parents[3] / "sweeps" / "recipes" / "cpu_default.toml"


def test_the_study_parser_has_every_fields_flag_exactly_once():
    options = [option for action in build_parser()._actions for option in action.option_strings]
    flags = [spec.name for _, spec in flagged_fields(StudyConfig)]
    assert {"--grid", "--probe", "--batch-size", "--seeds"} <= set(flags)  # the sections' flags too
    assert all(options.count(flag) == 1 for flag in flags) and len(options) == len(set(options))


def test_the_shipped_recipe_is_exactly_the_default_study():
    from_file, _ = parse_study_args(["--config", str(EXAMPLE_RECIPE)])
    default, _ = parse_study_args(["--grid", "mask_ratio"])
    assert from_file == default == StudyConfig(grid="mask_ratio")
    resolved = ("resolved_probe", "resolved_eval_checkpoints", "resolved_eval_seeds", "resolved_study_name")
    assert [getattr(from_file, name) for name in resolved] == ["knn", "all", 1, "mask_ratio-cpu_default"]


def test_recipe_sets_every_section_and_flags_override_it(tmp_path):
    recipe = tmp_path / "study.toml"
    recipe.write_text(
        '[study]\ngrid = "size"\nprofile = "paper"\nn_bootstrap = 50\nrankme_early_stop = true\n'
        '[pretrain]\nglobal_batch_size = 16\n[evaluate]\nprobe = "linear"\neval_checkpoints = "all"\nseeds = 4\n'
    )
    from_file, _ = parse_study_args(["--config", str(recipe)])
    assert (from_file.grid, from_file.profile, from_file.n_bootstrap, from_file.rankme_early_stop) == (
        "size", "paper", 50, True
    )  # fmt: skip
    assert from_file.pretrain.global_batch_size == 16
    assert (from_file.resolved_probe, from_file.resolved_eval_checkpoints, from_file.resolved_eval_seeds) == (
        "linear", "all", 4
    )  # fmt: skip
    config, _ = parse_study_args(["--config", str(recipe), "--grid", "mask_ratio", "--probe", "hear", "--seeds", "2"])
    assert (config.grid, config.resolved_probe, config.resolved_eval_seeds) == ("mask_ratio", "hear", 2)
    assert (config.profile, config.n_bootstrap, config.pretrain.global_batch_size) == ("paper", 50, 16)


def test_an_unknown_key_stops_the_study_naming_it_and_the_file(tmp_path, capsys):
    recipe = tmp_path / "study.toml"
    recipe.write_text('[study]\ngrid = "mask_ratio"\n[evaluate]\nprobes = "knn"\n')
    assert main(["--config", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert "[evaluate] has unknown key 'probes'" in err and str(recipe) in err
    # one line with the program's name, not argparse's usage first (it was 48 lines)
    assert err.strip().count("\n") == 0 and err.startswith("python -m sweeps.scaling: error: --config ")


def test_the_grid_is_required_from_the_flags_or_the_file(capsys):
    with pytest.raises(SystemExit):
        main([])
    assert "required: --grid" in capsys.readouterr().err


def test_a_config_built_in_code_without_a_grid_names_the_flag():
    with pytest.raises(ValueError, match="a study needs a grid: --grid NAME"):
        StudyConfig()
