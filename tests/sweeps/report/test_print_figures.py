"""The study's figures as a paper prints them: a 200-dpi PNG and a PDF with TrueType fonts, one
colour per trial shared by every figure and by the MLflow UI, trial labels that do not collide,
legends outside the data, one-line titles and axis labels that say what they measure."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.colors
import numpy as np
import pandas as pd
import pytest

from sweeps.record.keys import POINTS_COLUMN, RUN_COLOUR_COLUMN, RUN_ID_COLUMN
from sweeps.report.figure_files import PNG_DPI, figure_files
from sweeps.report.figures import study_figures
from sweeps.report.run_colours import (
    MIN_COLOUR_DISTANCE,
    MLFLOW_RUN_PALETTE,
    colour_distance,
    mlflow_run_colour,
    trial_colours,
)
from sweeps.report.study_fits import fit_study_laws
from sweeps.report.study_info import StudyInfo

RUN_IDS = ("d57752e41682472e939c3fafd82fffb1", "4a2dd878e4b1485ea8b95793c48bb5c4", "8b30fa10f738413a81eb23abd63fc632",
           "3cc1fd547c1141569d13dd68cc21ffbd", "413cf8f65f284031a16b919aa45f4aa3")  # fmt: skip
INFO = StudyInfo(name="mask_ratio-cpu_default", grid="mask_ratio", probe="knn", probe_seeds=5)


def _study_table() -> pd.DataFrame:
    """5 trials, one row each as a study records them, with 6 checkpoint points whose final points
    crowd together, as the default study's do."""
    rng = np.random.default_rng(7)
    rows = []
    for index, (ratio, run_id) in enumerate(zip((0.5, 0.6, 0.7, 0.8, 0.9), RUN_IDS)):
        points = {}
        for step in (0, 21, 43, 86, 129, 300):
            q = 0.56 + 0.02 * step / 300 + rng.normal(0.0, 0.004) + 0.001 * index
            points[step] = {"rankme": 30.0 + 20.0 * step / 300 + rng.normal(0, 1), "q": q, "q_ci_low": q - 0.02,
                            "q_ci_high": q + 0.02, "score/pitch": q, "score/drum_type": q}  # fmt: skip
        final = points[300]
        rows.append({"trial": f"mask{ratio:.2f}", "mask_ratio": ratio, "n_params": 144_672, "hours": 3.0,
                     "flops": 1e12, "train_steps": 300, "rankme_n": 5457, "status": "ok", RUN_ID_COLUMN: run_id,
                     **final, POINTS_COLUMN: points,
                     "rankme_by_step": {step: point["rankme"] for step, point in points.items() if step}})  # fmt: skip
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def figures():
    table = _study_table()
    baselines = {"naive features": 0.568, "random initialisation": 0.550, "positive control": 0.617}
    fits = fit_study_laws(table, n_bootstrap=0, grid="mask_ratio")
    return table, study_figures(table, fits, INFO, baselines=baselines)


def test_each_figure_is_a_200_dpi_png_and_a_pdf_with_truetype_fonts(figures, tmp_path):
    from PIL import Image

    _, drawn = figures
    for name, figure in drawn.items():
        files = figure_files(name, figure, title=f"study: {name}", description=INFO.description())
        assert set(files) == {name, name.replace(".png", ".pdf")}
        (tmp_path / name).write_bytes(files[name])
        with Image.open(tmp_path / name) as image:
            assert min(image.info["dpi"]) == pytest.approx(PNG_DPI, abs=0.1)
            assert image.size[0] == pytest.approx(figure.get_figwidth() * PNG_DPI, abs=2)
        pdf = files[name.replace(".png", ".pdf")]
        # TrueType outlines (a CID font of type 2), no Type 3 bitmaps: editable, and accepted by publishers.
        assert pdf[:5] == b"%PDF-" and b"/CIDFontType2" in pdf and b"/Type3" not in pdf
        assert b"mask_ratio-cpu_default" in pdf  # the study is named in the file, not on the picture


def _line_colours(ax) -> set[str]:
    """The colours of the lines drawn on `ax` (each trial's checkpoints are joined by a line in its colour)."""
    return {matplotlib.colors.to_hex(line.get_color()) for line in ax.lines}


def test_one_colour_per_trial_in_every_figure_and_no_two_alike(figures):
    table, drawn = figures
    colours = trial_colours(table)
    assert len(colours) == 5
    values = list(colours.values())
    assert all(colour_distance(a, b) >= MIN_COLOUR_DISTANCE for i, a in enumerate(values) for b in values[i + 1 :])
    q_of_r = drawn["quality_vs_rankme.png"].axes[0]
    early = drawn["early_rankme_vs_final_q.png"].axes[0]
    for ax in (q_of_r, early):
        assert set(values) <= _line_colours(ax)
        assert sorted(text.get_text() for text in ax.texts) == sorted(colours)
    # A run without a pinned colour starts from the UI's own pick for it.
    assert colours["mask0.50"] == mlflow_run_colour(RUN_IDS[0])
    # A colour someone pinned in the UI is kept, even next to a similar one.
    pinned = table.assign(**{RUN_COLOUR_COLUMN: np.where(table["trial"] == "mask0.60", "#facb66", "")})
    assert trial_colours(pinned)["mask0.60"] == "#facb66"


def test_trial_labels_do_not_collide_and_legends_sit_outside_the_data(figures):
    _, drawn = figures
    for name, figure in drawn.items():
        renderer = figure.canvas.get_renderer()
        frames = [ax.get_window_extent(renderer) for ax in figure.axes]
        for ax, frame in zip(figure.axes, frames):
            labels = [text.get_window_extent(renderer) for text in ax.texts]
            for i, box in enumerate(labels):
                assert not any(box.overlaps(other) for other in labels[i + 1 :]), (
                    name,
                    [t.get_text() for t in ax.texts],
                )
                assert frame.x0 <= box.x0 and box.x1 <= frame.x1, name
        legends = [ax.get_legend() for ax in figure.axes if ax.get_legend()] + list(figure.legends)
        assert legends, name
        for legend in legends:
            box = legend.get_window_extent(renderer)
            assert not any(box.overlaps(frame) for frame in frames), name


def test_titles_are_one_line_and_axes_say_what_they_measure(figures):
    _, drawn = figures
    q_of_r = drawn["quality_vs_rankme.png"].axes[0]
    assert q_of_r.get_title() == "Q(R): 30 points from 5 trials, knn probe"
    assert q_of_r.get_xlabel() == "RankMe R (pool, N=5457)"
    assert q_of_r.get_ylabel() == "quality Q (mean of 2 task scores)"
    for figure in drawn.values():
        titles = [ax.get_title() for ax in figure.axes] + [figure.get_suptitle()]
        assert all("\n" not in title and len(title) <= 60 for title in titles), titles
    early = drawn["early_rankme_vs_final_q.png"]
    assert re.fullmatch(r"Early RankMe vs final Q: \d+ points from 5 trials, knn probe", early.get_suptitle())


def test_the_palette_and_the_stable_colour_are_the_installed_mlflow_uis():
    import mlflow

    bundles = sorted((Path(mlflow.__file__).parent / "server/js/build/static/js").glob("main.*.js"))
    assert bundles, "the MLflow UI bundle is not installed"
    source = bundles[0].read_text(errors="replace")
    palette = re.search(r'\["#a6630c"(?:,"#[0-9a-f]{6}")*\]', source)
    assert palette is not None and tuple(re.findall(r"#[0-9a-f]{6}", palette.group(0))) == MLFLOW_RUN_PALETTE
    # getStableColorForRun: a Fletcher-16 style sum over the uuid's characters, modulo the palette.
    assert re.search(r"(\w)=\(\1\+e\.charCodeAt\(\w\)\)%255,(\w)=\(\2\+\1\)%255;return \w\.T\[\(\1\|\2<<8\)%\w\.T\.length\]",
                     source)  # fmt: skip
    assert 'T="mlflow.runColor"' in source  # the tag the UI reads a picked colour from
    # The hash, worked by hand for a short uuid: a = (97+98) % 255 = 195, b = (97+195) % 255 = 37;
    # (195 | 37 << 8) % 29 = 9667 % 29 = 10, the palette's 11th colour.
    assert mlflow_run_colour("ab") == MLFLOW_RUN_PALETTE[10] == "#445461"


def test_a_pale_trials_label_keeps_its_hue_and_reads_on_white():
    import colorsys

    from sweeps.report.run_colours import MAX_TEXT_LIGHTNESS, cielab, text_colour

    # The default study drew mask0.90 in light blue; its label, darkened by scaling RGB, read as the
    # slate of mask0.50. Darkened at its own hue and saturation it stays a blue.
    label = text_colour("#8acaff")
    assert cielab(label)[0] <= MAX_TEXT_LIGHTNESS
    assert colorsys.rgb_to_hls(*matplotlib.colors.to_rgb(label))[0] == pytest.approx(
        colorsys.rgb_to_hls(*matplotlib.colors.to_rgb("#8acaff"))[0], abs=0.01
    )
    assert colour_distance(label, "#445461") >= MIN_COLOUR_DISTANCE
    assert text_colour("#445461") == "#445461"  # dark enough already: kept
