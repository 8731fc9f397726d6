"""Point labels that never print over each other, and legends below their axes, placed once the
figure is laid out.

Where a label fits depends on the final size of its axes, which constrained layout decides at draw
time; so a figure is built with labels at their points and legends under the axes, then `settle`
draws it, widens the x axis to make room for labels right of the rightmost points, moves every
label to the free place covering the least of what is drawn, nearest its point (right of it, else
left, nudged up or down, with a thin leader line when it moved away), and fixes the layout, so each later save (PNG at any dpi,
PDF) draws the same picture. Offsets are in points, so they do not depend on the dpi.
"""

from __future__ import annotations

import matplotlib.colors
import numpy as np
from matplotlib.transforms import ScaledTranslation

POINT_LABEL_GID = "point-label"
LEGEND_BELOW_GID = "legend-below"
LABEL_FONT_SIZE = 7.0
LABEL_GAP_PT = 5.0  # between a point's centre and its label
LABEL_PAD_PT = 1.0  # kept free around each label
LEGEND_GAP_PT = 4.0  # between the x label and a legend below it


def add_point_label(ax, text: str, x: float, y: float, *, colour: str = "black", weight: str = "normal"):
    """A label for the point (x, y), right of it until `settle` finds it a free place."""
    return ax.text(
        x, y, text, transform=_offset(ax, LABEL_GAP_PT, 0.0), ha="left", va="center", fontsize=LABEL_FONT_SIZE,
        color=colour, fontweight=weight, gid=POINT_LABEL_GID, zorder=6, in_layout=False,
    )  # fmt: skip


def point_labels(ax) -> list:
    return [text for text in ax.texts if text.get_gid() == POINT_LABEL_GID]


def legend_below(ax, handles=None, labels=None, *, ncol: int = 3):
    """The axes' legend centred under its x label (moved there by `settle`), outside the data."""
    handles, labels = (handles, labels) if handles is not None else ax.get_legend_handles_labels()
    legend = ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=ncol,
                       frameon=False, handlelength=1.8, columnspacing=1.2, borderaxespad=0.0)  # fmt: skip
    legend.set_gid(LEGEND_BELOW_GID)
    return legend


def _offset(ax, dx_pt: float, dy_pt: float):
    return ax.transData + ScaledTranslation(dx_pt / 72.0, dy_pt / 72.0, ax.figure.dpi_scale_trans)


def settle(figure) -> None:
    """Lay the figure out, place its legends and labels, and fix the layout (see the module)."""
    figure.canvas.draw()
    for ax in figure.axes:
        _move_legend_below_xlabel(ax)
        _make_room_right(ax)
    figure.canvas.draw()  # constrained layout again, with the legends and the widened axes
    renderer = figure.canvas.get_renderer()
    for ax in figure.axes:
        _place_labels(ax, renderer)
    figure.set_layout_engine("none")


def _move_legend_below_xlabel(ax) -> None:
    legend = ax.get_legend()
    if legend is None or legend.get_gid() != LEGEND_BELOW_GID:
        return
    renderer = ax.figure.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    below = [ax.xaxis.get_tightbbox(renderer)]
    lowest = min((box.y0 for box in below if box is not None), default=frame.y0)
    drop_pt = (frame.y0 - lowest) * 72.0 / ax.figure.dpi + LEGEND_GAP_PT
    legend.set_bbox_to_anchor(
        (0.5, 0.0), transform=ax.transAxes + ScaledTranslation(0.0, -drop_pt / 72.0, ax.figure.dpi_scale_trans)
    )


def _label_sizes(labels, renderer) -> list[tuple[float, float]]:
    return [(box.width, box.height) for box in (label.get_window_extent(renderer) for label in labels)]


def _make_room_right(ax) -> None:
    """Widen the x axis so that each label fits right of its point inside the axes."""
    labels = point_labels(ax)
    if not labels:
        return
    renderer = ax.figure.canvas.get_renderer()
    sizes = _label_sizes(labels, renderer)
    gap = (LABEL_GAP_PT + LABEL_PAD_PT) * ax.figure.dpi / 72.0
    for _ in range(3):  # widening moves every point left a little; a few rounds settle it
        frame = ax.get_window_extent(renderer)
        needed = max(ax.transData.transform(label.get_position())[0] + gap + width
                     for label, (width, _) in zip(labels, sizes))  # fmt: skip
        if needed <= frame.x1:
            return
        # The data x now drawn at `needed` becomes the right edge (the left edge stays).
        ax.set_xlim(right=float(ax.transData.inverted().transform((needed, frame.y0))[0]))


def _ink(figure, ax, renderer) -> np.ndarray:
    """Per pixel of the figure (rows from the bottom, as display y runs): True where something other
    than the labels is drawn inside `ax` (the integral image of that, for box sums in O(1))."""
    labels = point_labels(ax)
    for label in labels:
        label.set_visible(False)
    figure.canvas.draw()
    for label in labels:
        label.set_visible(True)
    pixels = np.asarray(renderer.buffer_rgba())[::-1, :, :3].astype(np.int16)
    drawn = np.abs(pixels - np.array(matplotlib.colors.to_rgb(ax.get_facecolor())) * 255).max(axis=2) > 24
    integral = np.zeros((drawn.shape[0] + 1, drawn.shape[1] + 1), dtype=np.int64)
    integral[1:, 1:] = drawn.cumsum(axis=0).cumsum(axis=1)
    return integral


def _ink_in(integral: np.ndarray, x0, y0, x1, y1) -> np.ndarray:
    """How many drawn pixels each box [x0, x1) x [y0, y1) (display pixels, arrays) covers."""
    height, width = integral.shape[0] - 1, integral.shape[1] - 1
    x0, x1 = (np.clip(np.floor(v).astype(int), 0, width) for v in (x0, x1))
    y0, y1 = (np.clip(np.floor(v).astype(int), 0, height) for v in (y0, y1))
    return integral[y1, x1] - integral[y0, x1] - integral[y1, x0] + integral[y0, x0]


def _place_labels(ax, renderer) -> None:
    """Greedily, bottom label first: among places inside the axes that overlap no label already
    placed, the one covering the least ink (marks, lines, bars), then nearest its point."""
    labels = point_labels(ax)
    if not labels:
        return
    figure, dpi = ax.figure, ax.figure.dpi
    gap, pad = LABEL_GAP_PT * dpi / 72.0, LABEL_PAD_PT * dpi / 72.0
    integral = _ink(figure, ax, renderer)
    frame = ax.get_window_extent(renderer)
    sizes = _label_sizes(labels, renderer)
    anchors = [ax.transData.transform(label.get_position()) for label in labels]
    placed = np.zeros((0, 4))  # x0, y0, x1, y1 of the labels placed so far (with their pad)
    for index in np.argsort([y for _, y in anchors], kind="stable"):
        (x, y), (width, height), label = anchors[index], sizes[index], labels[index]
        step = max(height / 5.0, 1.0)
        dys = np.arange(-frame.height, frame.height + step, step)
        dxs = gap + np.arange(0.0, 6.0) * 2.0 * height  # beside the point, or a little further out
        side, dx, dy = (g.ravel() for g in np.meshgrid([1.0, -1.0], dxs, dys, indexing="ij"))
        x0 = np.where(side > 0, x + dx, x - dx - width) - pad
        x1 = x0 + width + 2 * pad
        y0 = y + dy - height / 2 - pad
        y1 = y0 + height + 2 * pad
        inside = (x0 >= frame.x0) & (x1 <= frame.x1) & (y0 >= frame.y0) & (y1 <= frame.y1)
        clash = ((x0[:, None] < placed[:, 2]) & (placed[:, 0] < x1[:, None])
                 & (y0[:, None] < placed[:, 3]) & (placed[:, 1] < y1[:, None])).any(axis=1)  # fmt: skip
        ink = _ink_in(integral, x0, y0, x1, y1)
        distance = np.hypot(dx - gap, dy)
        # Least ink first (a few pixels of a crossing line count as none), then the nearest place.
        cost = np.where(inside & ~clash, np.maximum(ink - 2, 0) * 1e6 + distance, np.inf)
        best = int(np.argmin(cost))
        if not np.isfinite(cost[best]):  # nowhere free inside the axes: beside its point
            best = int(np.argmin(np.where(side > 0, np.hypot(dx - gap, dy), np.inf)))
        placed = np.vstack([placed, [x0[best], y0[best], x1[best], y1[best]]])
        label.set_transform(_offset(ax, side[best] * dx[best] * 72.0 / dpi, dy[best] * 72.0 / dpi))
        label.set_horizontalalignment("left" if side[best] > 0 else "right")
        if distance[best] > height / 2:  # moved away from its point: a leader line says whose label it is
            near_x = x + side[best] * (dx[best] - pad)
            near_y = np.clip(y, y + dy[best] - height / 2, y + dy[best] + height / 2)
            start = np.array([x, y]) + (np.array([near_x, near_y]) - (x, y)) * (
                0.6 * gap / max(np.hypot(near_x - x, near_y - y), 1e-9)
            )
            (xs, ys) = ax.transData.inverted().transform([start, (near_x, near_y)]).T
            ax.plot(xs, ys, color=label.get_color(), linewidth=0.6, alpha=0.8, zorder=5, solid_capstyle="butt")
