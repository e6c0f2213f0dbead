"""The one HTML kit of rewardlab's reports (`rewardlab eval`, `rewardlab monitor`): one stylesheet, one palette,
matplotlib figures as embedded PNG data URIs, escaped cells, and JSON embedded in a page without any way for the
data to close or open a tag. A page built with it references no external file, so it opens offline."""

from __future__ import annotations

import base64
import html
import io
import json
from typing import Any

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#1b1f24;
background:#fff;max-width:1800px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:15px;margin:8px 0}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:right}th:first-child,td:first-child{text-align:left}
th{background:#f6f8fa}.muted{color:#57606a;font-size:12px}
.grid{display:grid;grid-template-columns:repeat(var(--cols),minmax(320px,1fr));gap:16px}
.card{border:1px solid #d0d7de;border-radius:6px;padding:8px}
figure{margin:6px 0}figure img{max-width:100%;height:auto;display:block}figcaption{font-size:12px;color:#57606a}
code{background:#f6f8fa;padding:1px 4px;border-radius:3px}
"""
"""The stylesheet every report embeds."""

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
"""The palette of every plot (matplotlib's tab10, first eight)."""


def use_headless_backend() -> None:
    """Select matplotlib's Agg backend (no display needed); call before the first plot of a report."""
    import matplotlib

    matplotlib.use("Agg")


def figure_to_data_uri(fig: Any) -> str:
    """A matplotlib figure as a `data:image/png;base64,...` URI (the figure is closed)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight", facecolor="white")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def figure(uri: str, name: str, caption: str) -> str:
    """A `<figure>` showing the image `uri`, tagged `data-plot=name` (tests find plots by it), with a caption."""
    return (
        f'<figure><img src="{uri}" alt="{html.escape(caption)}" data-plot="{html.escape(name)}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def cell(value: Any, digits: int = 3) -> str:
    """A table cell's text: `–` for None, a float to `digits` places, anything else escaped."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return html.escape(str(value))


def page_head(title: str) -> str:
    """The start of a report page, up to and including `<body>`: charset, escaped title, the stylesheet."""
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body>")


def embedded_json(data: Any, element_id: str) -> str:
    """`data` as a `<script type="application/json">`: <, > and & as \\u escapes, so no text in the data can close
    or open a tag."""
    text = json.dumps(data, default=str).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{html.escape(element_id)}">{text}</script>'
