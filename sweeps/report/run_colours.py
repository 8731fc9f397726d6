"""One colour per trial, the same in every study figure and in the MLflow UI's charts of its run.

How the MLflow UI (3.17) colours a run, read from its bundle (mlflow/server/js/build/static/js/
main.*.js; tests/sweeps/report/test_run_colours.py checks this against the installed bundle):
- the run's tag `mlflow.runColor` when it has one (the UI writes it when someone picks a colour);
- else a stable colour from the run uuid: a Fletcher-16 style checksum of its characters
  (a = (a + code) % 255, b = (b + a) % 255), `(a | b << 8) % 29` indexing the 29-colour palette below.

Matching that alone is not enough for a figure: with 29 colours, two of a study's 5 trials share a
colour about one time in three, and the palette holds ramps of one hue (#facb66 / #f2be88, ΔE 23),
so a trial whose colour is that close to an earlier trial's (table order) takes the palette colour
farthest from those already used. The study analysis then pins every trial's colour on its run
(`mlflow.runColor`, sweeps.study.law_analysis), so the UI shows the figure's colour whatever it would
have picked, and a colour chosen in the UI is the figures' from the next refit on.
"""

from __future__ import annotations

import colorsys
import functools

import numpy as np
import pandas as pd
from matplotlib.colors import to_hex, to_rgb

from sweeps.record.keys import RUN_COLOUR_COLUMN, RUN_ID_COLUMN

# The UI's run palette, in its order (the bundle's module exporting `T`, read by the hash and by
# the colour picker's datalist `mlflow_run_colors_select`).
MLFLOW_RUN_PALETTE = (
    "#a6630c", "#c83243", "#b45091", "#8a63bf", "#434a93", "#137dae", "#04867d", "#308613", "#facb66",
    "#1f272d", "#445461", "#5f7281", "#8396a5", "#93320b", "#be501e", "#de7921", "#f2be88", "#115026",
    "#277c43", "#3ba65e", "#8ddda8", "#9e102c", "#c82d4c", "#e65b77", "#f792a6", "#0e538b", "#2272b4",
    "#4299e0", "#8acaff",
)  # fmt: skip
# CIELAB distance under which two trials' colours read as one on a figure: colours of one hue in the
# palette lie 13-30 apart (a blue and a light blue, 29.9, drew two trials of the default study as
# one). At 40, 8 of its colours can be taken at once; a larger study's later trials get the colour
# farthest from those taken.
MIN_COLOUR_DISTANCE = 40.0
# The lightness (CIELAB L, 0-100) above which a colour is too pale for text on white: labels in a
# pale trial colour are drawn in a darker shade of it.
MAX_TEXT_LIGHTNESS = 55.0
TEXT_HLS_LIGHTNESS = 0.36  # a pale colour's label: its hue and saturation at this HLS lightness


def mlflow_run_colour(run_uuid: str) -> str:
    """The colour the MLflow UI gives a run without a `mlflow.runColor` tag (getStableColorForRun)."""
    a = b = 0
    for character in run_uuid:  # JavaScript's charCodeAt: a UTF-16 unit; a run uuid is ASCII hex
        a = (a + ord(character)) % 255
        b = (b + a) % 255
    return MLFLOW_RUN_PALETTE[(a | (b << 8)) % len(MLFLOW_RUN_PALETTE)]


@functools.lru_cache(maxsize=1024)
def _cielab(colour: str) -> tuple[float, float, float]:
    lab = _to_cielab(colour)
    return (float(lab[0]), float(lab[1]), float(lab[2]))


def cielab(colour: str) -> np.ndarray:
    """sRGB (D65) to CIELAB: distances in it follow how different two colours look (cached: a
    study's colours are compared with the palette many times)."""
    return np.array(_cielab(colour))


def _to_cielab(colour: str) -> np.ndarray:
    rgb = np.array(to_rgb(colour))
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    x, y, z = xyz / np.array([0.95047, 1.0, 1.08883])

    def f(t):
        return np.cbrt(t) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29

    return np.array([116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))])


def colour_distance(first: str, second: str) -> float:
    return float(np.linalg.norm(cielab(first) - cielab(second)))


def _nearest_distances(candidates, taken: list[str]) -> np.ndarray:
    """Per candidate colour, its CIELAB distance to the nearest colour taken."""
    lab = np.array([_cielab(c) for c in candidates])
    used = np.array([_cielab(t) for t in taken])
    return np.linalg.norm(lab[:, None, :] - used[None, :, :], axis=2).min(axis=1)


def _farthest_free(taken: list[str]) -> str:
    """The palette colour farthest from every colour taken (the first such in palette order)."""
    return MLFLOW_RUN_PALETTE[int(np.argmax(_nearest_distances(MLFLOW_RUN_PALETTE, taken)))]


def _named(value) -> str:
    return "" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)


def trial_colours(table: pd.DataFrame) -> dict[str, str]:
    """Trial name -> colour (hex), in the table's trial order: the run's pinned or UI colour, unless
    an earlier trial's colour is within MIN_COLOUR_DISTANCE of it (then the farthest free one). A
    trial without a run id (a table built by hand) starts from the palette in trial order. A colour
    someone pinned is kept even when close to another: it was chosen."""
    if "trial" in table.columns:
        names = table["trial"].astype(str)
    else:
        names = pd.Series(table.index.astype(str), index=table.index)
    run_ids = table[RUN_ID_COLUMN] if RUN_ID_COLUMN in table.columns else pd.Series("", index=table.index)
    pinned = table[RUN_COLOUR_COLUMN] if RUN_COLOUR_COLUMN in table.columns else pd.Series("", index=table.index)
    colours: dict[str, str] = {}
    for name, run_id, chosen in zip(names, run_ids, pinned):
        if name in colours:
            continue
        if _named(chosen):
            colours[name] = to_hex(_named(chosen))
            continue
        run_id = _named(run_id)
        start = mlflow_run_colour(run_id) if run_id else MLFLOW_RUN_PALETTE[len(colours) % len(MLFLOW_RUN_PALETTE)]
        taken = list(colours.values())
        if taken and _nearest_distances([start], taken)[0] < MIN_COLOUR_DISTANCE:
            start = _farthest_free(taken)
        colours[name] = start
    return colours


def text_colour(colour: str) -> str:
    """The colour itself, or where it is too pale to read as text on white, a dark shade of its hue
    at its saturation (scaling RGB down greys a pale blue into the palette's slate)."""
    if cielab(colour)[0] <= MAX_TEXT_LIGHTNESS:
        return colour
    hue, _, saturation = colorsys.rgb_to_hls(*to_rgb(colour))
    return to_hex(colorsys.hls_to_rgb(hue, TEXT_HLS_LIGHTNESS, saturation))
