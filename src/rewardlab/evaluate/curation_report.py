"""The curation report: `report.json` (counts, rules, every touched pair with its reason and strength, the
agreement histogram) and a self-contained `report.html` built with the one HTML kit (`rewardlab.evaluate.html`)."""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import asdict
from typing import Any

from rewardlab.data.curation import CurationResult
from rewardlab.evaluate.html import cell, embedded_json, figure, figure_to_data_uri, page_head, use_headless_backend

TOUCHED_SHOWN = 500
"""At most this many touched pairs are listed in the HTML table (report.json lists all)."""


def curation_report(result: CurationResult, sources: dict[str, Any]) -> dict[str, Any]:
    """The report as a JSON-ready dict; `sources` says where the votes came from (fold models, reward specs)."""
    touched = [v.to_dict() for v in result.verdicts if v.action != "keep"]
    agreements = [v.agreement for v in result.verdicts if v.agreement is not None]
    histogram = Counter(round(a, 2) for a in agreements)
    counts = result.counts()
    voted = [v for v in result.verdicts if v.agreement is not None]
    return {
        "counts": counts,
        "touched_fraction": round((counts["drop"] + counts["flip"] + counts["flag"]) / max(1, counts["input"]), 4),
        "voters": result.voters,
        "sources": sources,
        "rules": asdict(result.rules),
        "mean_agreement": round(sum(agreements) / len(agreements), 4) if agreements else None,
        "agreement_histogram": {f"{key:.2f}": histogram[key] for key in sorted(histogram)},
        "voted_pairs": len(voted),
        "added_by_kind": dict(sorted(Counter(str(p.metadata.get("cheap")) for p in result.added).items())),
        "touched": touched,
    }


def _agreement_plot(histogram: dict[str, int]) -> str:
    """Bars of how many pairs had each agreement rate."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.0, 3.0))
    keys = list(histogram)
    ax.bar(range(len(keys)), [histogram[k] for k in keys], color="#1f77b4")
    ax.set_xticks(range(len(keys)), keys, fontsize=7, rotation=45)
    ax.set_xlabel("share of votes agreeing with the label")
    ax.set_ylabel("pairs")
    return figure_to_data_uri(fig)


def curation_html(report: dict[str, Any], title: str = "rewardlab data curate") -> str:
    """The report as one self-contained HTML page: counts, rules, the agreement histogram, the touched pairs."""
    counts = report["counts"]
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{cell(v)}</td></tr>" for k, v in counts.items())
    rules = "".join(f"<tr><td>{html.escape(k)}</td><td>{cell(v)}</td></tr>" for k, v in report["rules"].items())
    parts = [page_head(title), f"<h1>{html.escape(title)}</h1>",
             f"<p class='muted'>{report['voters']} voter(s); {cell(report['touched_fraction'])} of the input "
             f"pairs touched (flagged, dropped or flipped); mean agreement {cell(report['mean_agreement'])}</p>",
             f"<h2>Counts</h2><table><tr><th>what</th><th>pairs</th></tr>{rows}</table>",
             f"<h2>Rules</h2><table><tr><th>rule</th><th>value</th></tr>{rules}</table>"]
    if report["agreement_histogram"]:
        use_headless_backend()
        parts.append("<h2>Agreement</h2>" + figure(_agreement_plot(report["agreement_histogram"]), "agreement",
                                                   "pairs by the share of votes agreeing with their label"))
    shown = report["touched"][:TOUCHED_SHOWN]
    body = "".join(
        f"<tr><td>{cell(t['index'])}</td><td>{cell(t['id'])}</td><td>{cell(t['action'])}</td>"
        f"<td>{cell(t['agreement'])}</td><td>{cell(t['strength'])}</td><td>{cell(t['smoothing'])}</td>"
        f"<td>{cell(t['reason'])}</td></tr>" for t in shown)
    parts.append(f"<h2>Touched pairs ({len(report['touched'])}, first {len(shown)} shown)</h2><table><tr><th>row</th>"
                 "<th>id</th><th>action</th><th>agreement</th><th>strength</th><th>smoothing</th><th>reason</th></tr>"
                 f"{body}</table>")
    parts.append(embedded_json(report, "curation-report") + "</body></html>")
    return "".join(parts)
