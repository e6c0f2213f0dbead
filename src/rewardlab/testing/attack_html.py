"""The attack report as one self-contained HTML page (stdlib `html` only: testing/ imports nothing heavier)."""

from __future__ import annotations

from html import escape
from typing import Any

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem;max-width:80rem;color:#222}
table{border-collapse:collapse;width:100%;margin:1rem 0}th,td{border:1px solid #ccc;padding:.3rem .5rem;
vertical-align:top;text-align:left}th{background:#f3f3f3}td.n{text-align:right}tr.bad td{background:#fde8e8}
pre{white-space:pre-wrap;word-break:break-all;max-height:12rem;overflow:auto;margin:0;font-size:.85em}
.ok{color:#1a7f37}.fail{color:#b42318}
"""


def _number(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return escape(str(value))


def _example(example: dict[str, Any] | None) -> str:
    if example is None:
        return ""
    head = (f"sample {example['sample']}: scored {_number(example['value'])} (wrong {_number(example['wrong_value'])}"
            f", right {_number(example['right_value'])}) in {_number(example['seconds'])} s, "
            f"{example['response_chars']:,} chars")
    return f"<div>{escape(head)}</div><pre>{escape(example['response'])}</pre>"


def report_html(report: dict[str, Any]) -> str:
    """HTML page for `AttackReport.to_dict()`: the verdict, a table of attacks, examples, unusable samples."""
    paying, stalling = report["paying"], report["stalling"]
    verdict = ('<p class="ok">No attack paid or stalled.</p>' if not paying and not stalling else
               f'<p class="fail">{len(paying)} attack(s) paid, {len(stalling)} stalled: '
               f"{escape(', '.join(sorted(set(paying) | set(stalling))))}</p>")
    rows = []
    for result in report["attacks"]:
        bad = result["paid"] or result["stalled"]
        rows.append(
            f'<tr class="{"bad" if bad else ""}"><td>{escape(result["name"])}</td><td>{escape(result["category"])}</td>'
            f'<td>{escape(result["description"])}</td><td class="n">{result["tried"]}</td>'
            f'<td class="n">{result["paid"]}/{result["informative"]}</td><td class="n">{result["stalled"]}</td>'
            f'<td class="n">{result["errors"]}</td>'
            f"<td>{_example(result['pay_example'])}{_example(result['stall_example'])}</td></tr>")
    unusable = "".join(f"<li>sample {u['sample']}: {escape(u['reason'])}</li>" for u in report["uninformative"])
    categories = "".join(f"<li><b>{escape(k)}</b>: {escape(v)}</li>" for k, v in report["categories"].items())
    return (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>rewardlab attack: {escape(report['reward'])}</title><style>{_STYLE}</style></head><body>"
        f"<h1>rewardlab attack: {escape(report['reward'])}</h1>{verdict}"
        f"<p>{report['samples']} samples ({report['informative_samples']} usable), time budget "
        f"{_number(report['time_budget'])} s per sample, {_number(report['seconds'])} s in all, "
        f"{report['interrupted']} scoring call(s) interrupted at the budget, {report['abandoned_threads']} "
        "scoring thread(s) left stalled.</p>"
        "<table><tr><th>attack</th><th>category</th><th>what it does</th><th>tried</th><th>paid</th>"
        f"<th>stalled</th><th>errors</th><th>examples</th></tr>{''.join(rows)}</table>"
        + (f"<h2>Samples not used for paying</h2><ul>{unusable}</ul>" if unusable else "")
        + f"<h2>Categories</h2><ul>{categories}</ul></body></html>\n"
    )
