"""The study report as one self-contained HTML file: MLflow's artifact viewer shows an HTML artifact
as a page, with images that are part of the file (data URIs), where its markdown viewer loads an
image only from an absolute URL. The report's markdown (sweeps.report.markdown) is written by this
project, so this renders exactly the constructs it uses: headings, paragraphs, pipe tables, bullet
lists, images, links, inline code and emphasis. Anything else stays as escaped text.
"""

from __future__ import annotations

import base64
import html
import re

STYLE = (
    "body{font-family:sans-serif;max-width:70em;margin:1em auto;padding:0 1em;line-height:1.4}"
    "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}"
    "img{max-width:100%}code{background:#f3f3f3;padding:0 .2em}"
)
INLINE = [
    (re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)"), r'<img alt="\1" src="\2">'),
    (re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)"), r'<a href="\2">\1</a>'),
    (re.compile(r"`([^`]+)`"), r"<code>\1</code>"),
    (re.compile(r"\*\*([^*]+)\*\*"), r"<strong>\1</strong>"),
    (re.compile(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])"), r"<em>\1</em>"),
]
HEADING = re.compile(r"^(#{1,6}) (.*)$")
TABLE_RULE = re.compile(r"^\|?\s*:?-{3,}")


def png_data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def inline_html(text: str) -> str:
    out = html.escape(text)
    for pattern, replacement in INLINE:
        out = pattern.sub(replacement, out)
    return out


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _table_html(lines: list[str]) -> str:
    head, body = _cells(lines[0]), [_cells(line) for line in lines[1:] if not TABLE_RULE.match(line)]
    rows = ["<tr>" + "".join(f"<th>{inline_html(c)}</th>" for c in head) + "</tr>"]
    rows += ["<tr>" + "".join(f"<td>{inline_html(c)}</td>" for c in row) + "</tr>" for row in body]
    return "<table>" + "".join(rows) + "</table>"


def _blocks(markdown: str) -> list[list[str]]:
    """Runs of lines of one kind: blank lines end a block; a table, a list or a heading is its own."""
    blocks: list[list[str]] = []
    for line in markdown.splitlines():
        kind = "blank" if not line.strip() else _kind([line])
        if kind == "blank":
            blocks.append([])
        elif blocks and blocks[-1] and kind != "heading" and _kind(blocks[-1]) == kind:
            blocks[-1].append(line)
        else:
            blocks.append([line])
    return [block for block in blocks if block]


def _kind(block: list[str]) -> str:
    first = block[0]
    if first.lstrip().startswith("|"):
        return "table"
    if first.startswith("- "):
        return "list"
    return "heading" if HEADING.match(first) else "text"


def markdown_to_html(markdown: str, *, title: str) -> str:
    parts = []
    for block in _blocks(markdown):
        kind = _kind(block)
        if kind == "heading":
            level, text = HEADING.match(block[0]).groups()
            parts.append(f"<h{len(level)}>{inline_html(text)}</h{len(level)}>")
        elif kind == "table":
            parts.append(_table_html(block))
        elif kind == "list":
            parts.append("<ul>" + "".join(f"<li>{inline_html(line[2:])}</li>" for line in block) + "</ul>")
        else:
            parts.append(f"<p>{inline_html(' '.join(block))}</p>")
    head = f'<meta charset="utf-8"><title>{html.escape(title)}</title><style>{STYLE}</style>'
    return f"<!doctype html><html><head>{head}</head><body>{''.join(parts)}</body></html>\n"
