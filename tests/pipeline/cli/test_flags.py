"""Every CLI's parser is generated from its config dataclass, and `--config FILE.toml` feeds it.

The flags are declared once (pipeline.cli.flags): each parser must carry every field's flag exactly
once, a recipe file must set fields by name with the command line overriding it, and a key the
config does not declare must stop the run with an error naming the key and the file.
"""

from __future__ import annotations

import argparse
import collections
import re

import pytest

from pipeline.cli.flags import flagged_fields, parse_flags
from pipeline.evaluate.__main__ import build_parser as evaluate_parser
from pipeline.evaluate.__main__ import parse_config as parse_evaluate
from pipeline.evaluate.config import EvaluateConfig
from pipeline.prep.__main__ import build_parser as prep_parser
from pipeline.prep.__main__ import parse_args as parse_prep
from pipeline.prep.run import PrepConfig
from pipeline.pretrain.__main__ import build_parser as pretrain_parser
from pipeline.pretrain.config import PretrainConfig

PARSERS = {
    "pretrain": (pretrain_parser, PretrainConfig),
    "prep": (prep_parser, PrepConfig),
    "evaluate": (evaluate_parser, EvaluateConfig),
}


def option_counts(parser: argparse.ArgumentParser) -> collections.Counter:
    return collections.Counter(option for action in parser._actions for option in action.option_strings)


@pytest.mark.parametrize("name", PARSERS)
def test_each_generated_parser_has_every_fields_flag_exactly_once(name):
    build, config_class = PARSERS[name]
    counts = option_counts(build())
    flags = [spec.name for _, spec in flagged_fields(config_class)]
    assert flags and all(counts[flag] == 1 for flag in flags), name
    assert all(count == 1 for count in counts.values()), name
    assert counts["--config"] == 1


def write(tmp_path, text: str):
    path = tmp_path / "recipe.toml"
    path.write_text(text)
    return str(path)


def test_prep_recipe_sets_fields_and_a_flag_overrides_it(tmp_path):
    recipe = write(
        tmp_path,
        f'[prep]\ninput_path = "{tmp_path}/audio"\noutput_dir = "{tmp_path}/out"\nsegment_s = 5\nseed = 7\n'
        "show_progress = false\n",
    )
    config = parse_prep(["--config", recipe, "--seed", "11"])
    assert (config.input_path, config.output_dir) == (tmp_path / "audio", tmp_path / "out")  # required, from the file
    assert config.segment_s == 5.0 and isinstance(config.segment_s, float)  # TOML's 5 is the field's float
    assert config.seed == 11  # the flag wins over the file's 7
    assert config.show_progress is False and config.preset_name == "audiomae"  # from the file; the default


def test_an_unknown_key_is_an_error_naming_the_key_and_the_file(tmp_path):
    """A recipe's error is a ValueError naming the file and key, which the command's edge (run_cli)
    prints as one line: no argparse usage dump before it."""
    recipe = write(tmp_path, '[prep]\ninput_path = "a"\noutput_dir = "b"\nsegmnet_s = 5\n')
    with pytest.raises(ValueError) as refused:
        parse_prep(["--config", recipe])
    assert "'segmnet_s'" in str(refused.value) and recipe in str(refused.value) and "[prep]" in str(refused.value)


@pytest.mark.parametrize(
    "text, message",
    [
        ("[evaluate]\nseeds = 2\n", "unknown table [evaluate]"),
        ('[prep]\nseed = "seven"\n', "seed = 'seven' should be of type int"),
        ('[prep]\npreset_name = "mp3"\n', "preset_name = 'mp3' is not one of"),
        ("[prep\n", "cannot be read as TOML"),
    ],
)
def test_a_bad_recipe_is_refused_before_anything_runs(tmp_path, text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_prep(["--config", write(tmp_path, text), "--input", "a", "--output", "b"])


def test_a_binary_recipe_is_named_with_its_flag(tmp_path):
    """It used to be the codec's own words, naming neither the file nor the flag."""
    recipe = tmp_path / "recipe.toml"
    recipe.write_bytes(b"[prep]\nseed = 1\n# \x80\x81 binary\n")
    with pytest.raises(ValueError, match=rf"--config {re.escape(str(recipe))}: not a TOML text file \(byte 0x80"):
        parse_prep(["--config", str(recipe), "--input", "a", "--output", "b"])


def test_a_required_flag_missing_from_flags_and_file_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        parse_prep(["--config", write(tmp_path, '[prep]\ninput_path = "a"\n')])
    assert "required: --output" in capsys.readouterr().err


def test_evaluate_recipe_with_a_flag_choosing_another_checkpoint_source(tmp_path):
    recipe = write(tmp_path, '[evaluate]\ncheckpoint = "ckpt"\nprobe = "knn"\nseeds = 1\n')
    from_file, _ = parse_evaluate(["--config", recipe])
    assert (from_file.checkpoint, from_file.probe, from_file.seeds) == ("ckpt", "knn", 1)
    overridden, _ = parse_evaluate(["--config", recipe, "--run-id", "abc", "--probe", "linear"])
    assert (overridden.checkpoint, overridden.run_id, overridden.probe) == (None, "abc", "linear")


def test_pretrain_recipe_overrides_merge_with_flag_overrides(tmp_path):
    recipe = write(
        tmp_path, '[pretrain]\nplacement_strategy = "SPREAD"\nrankme_steps = [50, 10]\nmodel_overrides = {depth = 2}\n'
    )
    config, _ = parse_flags(
        pretrain_parser(), PretrainConfig, ["--config", recipe, "--override", "width=8"], table="pretrain"
    )
    assert config.compute.placement_strategy == "SPREAD" and config.rankme.rankme_steps == (50, 10)
    assert config.model.model_overrides == {"depth": 2, "width": 8}


def test_pretrain_recipe_keys_sit_in_its_table_or_in_their_parts_subtable(tmp_path):
    """The `[pretrain]` keys users wrote before the config had parts still work, beside `[pretrain.optim]`."""
    flat_text = "[pretrain]\nsteps = 50\nbase_lr = 0.001\nvalidation_patience = 3\n"
    parts_text = (
        "[pretrain]\nsteps = 50\n[pretrain.optim]\nbase_lr = 0.001\n[pretrain.validation]\nvalidation_patience = 3\n"
    )
    flat, _ = parse_flags(pretrain_parser(), PretrainConfig, ["--config", write(tmp_path, flat_text)], table="pretrain")
    parts, _ = parse_flags(
        pretrain_parser(), PretrainConfig, ["--config", write(tmp_path, parts_text)], table="pretrain"
    )
    assert flat == parts != PretrainConfig()
    assert (parts.training.steps, parts.optim.base_lr, parts.validation.validation_patience) == (50, 0.001, 3)
    misplaced = write(tmp_path, "[pretrain.optim]\nsteps = 50\n")
    with pytest.raises(
        ValueError, match=r"\[pretrain.optim\] has unknown key 'steps'; the keys are optimizer, base_lr"
    ):
        parse_flags(pretrain_parser(), PretrainConfig, ["--config", misplaced], table="pretrain")


def test_a_prep_config_built_in_code_without_its_folders_names_the_flags(tmp_path):
    from pipeline.prep.run import PrepConfig

    with pytest.raises(ValueError, match="prep needs --input .* and --output"):
        PrepConfig(output_dir=tmp_path / "shards")
