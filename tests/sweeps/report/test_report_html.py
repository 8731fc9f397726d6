"""The HTML report: the markdown constructs the study report uses, rendered, and figures inside the file."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from sweeps.report.figure_files import figure_bytes  # noqa: E402
from sweeps.report.html import markdown_to_html, png_data_uri  # noqa: E402

REPORT = """# Scaling study `masks`

5 trials; *saturating* means the **interval** ends below 1.

## Q(R)

| trial | RankMe | Q |
|---|---|---|
| mask0.50 @0 | 45.01 | 0.5745 |
| a <b> & c | 1 | 2 |

- first point
- second, see [the paper](https://arxiv.org/abs/2401.00001)

![Q(R)](SRC)
"""


def test_every_construct_the_report_uses_is_rendered():
    figure, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    source = png_data_uri(figure_bytes(figure, "png"))
    plt.close(figure)
    page = markdown_to_html(REPORT.replace("SRC", source), title="Scaling study masks")
    assert page.startswith("<!doctype html>") and "<title>Scaling study masks</title>" in page
    assert "<h1>Scaling study <code>masks</code></h1>" in page and "<h2>Q(R)</h2>" in page
    assert "<p>5 trials; <em>saturating</em> means the <strong>interval</strong> ends below 1.</p>" in page
    assert "<tr><th>trial</th><th>RankMe</th><th>Q</th></tr>" in page
    assert "<tr><td>mask0.50 @0</td><td>45.01</td><td>0.5745</td></tr>" in page
    assert "<td>a &lt;b&gt; &amp; c</td>" in page  # text is escaped, never markup
    assert "---" not in page  # the table's rule row is not a row
    assert (
        '<ul><li>first point</li><li>second, see <a href="https://arxiv.org/abs/2401.00001">the paper</a></li></ul>'
        in page
    )
    assert f'<img alt="Q(R)" src="{source}">' in page and source.startswith("data:image/png;base64,iVBORw0KGgo")
