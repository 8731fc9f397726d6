"""How a study figure is written: a PNG for screens (report.html, the README, MLflow's image
viewer) and, beside it under the same name, a PDF for print.

PDF rather than SVG: LaTeX's \\includegraphics takes a PDF as it is (an SVG needs converting
first), and with TrueType fonts embedded (`pdf.fonttype` 42, not matplotlib's default Type 3) it
passes the publishers' font checks (IEEE PDF eXpress refuses Type 3 fonts) and its text stays
editable. MLflow's artifact viewer shows a PDF as well as a PNG.
"""

from __future__ import annotations

import io
from pathlib import PurePosixPath

import matplotlib

PNG_DPI = 200  # a 6.4-inch figure is 1280 pixels wide: sharp on screens, printable at its own size
VECTOR_FORMAT = "pdf"
SAVE_RC = {"pdf.fonttype": 42, "svg.fonttype": "none"}


def vector_name(png_name: str) -> str:
    """`quality_vs_rankme.png` -> `quality_vs_rankme.pdf` (the PNG keeps its name: links to it stay)."""
    return str(PurePosixPath(png_name).with_suffix(f".{VECTOR_FORMAT}"))


def figure_bytes(figure, file_format: str, *, title: str = "", description: str = "") -> bytes:
    """The figure as PNG (PNG_DPI) or PDF bytes, titled in the file's metadata (the study's name
    and grid live there rather than on the picture)."""
    if file_format == "png":
        metadata = {"Title": title, "Description": description}
    else:
        metadata = {"Title": title, "Subject": description}
    buffer = io.BytesIO()
    with matplotlib.rc_context(SAVE_RC):
        figure.savefig(buffer, format=file_format, dpi=PNG_DPI, metadata={k: v for k, v in metadata.items() if v})
    return buffer.getvalue()


def figure_files(png_name: str, figure, *, title: str = "", description: str = "") -> dict[str, bytes]:
    """{file name: bytes} of both files of one figure."""
    return {
        png_name: figure_bytes(figure, "png", title=title, description=description),
        vector_name(png_name): figure_bytes(figure, VECTOR_FORMAT, title=title, description=description),
    }
