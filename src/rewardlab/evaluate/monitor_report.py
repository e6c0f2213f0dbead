"""The reward-hacking monitor's report: one self-contained HTML page built with `evaluate.html`, as the evaluation
report is."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rewardlab.evaluate.html import (
    COLORS,
    cell,
    embedded_json,
    figure,
    figure_to_data_uri,
    page_head,
    use_headless_backend,
)
from rewardlab.evaluate.monitor import MonitorResult, trend
from rewardlab.jsonl import atomic_writer


def _xy(series: Mapping[int, float]) -> tuple[list[int], list[float]]:
    steps = sorted(series)
    return steps, [series[s] for s in steps]


def proxy_gold_plot(result: MonitorResult) -> str:
    """Proxy and gold reward against the step (two y-axes), flagged windows shaded, the onset marked."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6))
    x, y = _xy(result.proxy)
    ax.plot(x, y, color=COLORS[0], label=f"proxy: {result.proxy_name}")
    ax.set_xlabel("step")
    ax.set_ylabel("proxy reward", color=COLORS[0])
    if result.gold:
        twin = ax.twinx()
        gx, gy = _xy(result.gold)
        twin.plot(gx, gy, color=COLORS[3], label=f"gold: {result.gold_name}")
        twin.set_ylabel("gold reward", color=COLORS[3])
        spans: list[list[int]] = []  # flagged windows merged where they overlap
        for window in (w for w in result.windows if w.flagged):
            if spans and window.start <= spans[-1][1]:
                spans[-1][1] = max(spans[-1][1], window.end)
            else:
                spans.append([window.start, window.end])
        for start, end in spans:
            ax.axvspan(start, end, color=COLORS[3], alpha=0.12, linewidth=0)
        if result.onset is not None:
            ax.axvline(result.onset, color=COLORS[3], linestyle="--", linewidth=1)
        handles = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
        ax.legend(handles=handles, loc="upper left", fontsize=8)
    else:
        ax.legend(loc="upper left", fontsize=8)
    ax.set_title("proxy vs gold reward")
    return figure_to_data_uri(fig)


def length_plot(result: MonitorResult) -> str:
    """Mean completion length per step, and the per-step reward-length Spearman ρ on a second axis."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.2))
    if result.lengths:
        x, y = _xy(result.lengths)
        ax.plot(x, y, color=COLORS[1], label="mean length")
    ax.set_xlabel("step")
    ax.set_ylabel("mean length", color=COLORS[1])
    if result.length_correlation:
        twin = ax.twinx()
        cx, cy = _xy(result.length_correlation)
        twin.plot(cx, cy, color=COLORS[2], marker=".", linewidth=1, label="ρ(reward, length)")
        twin.set_ylim(-1.05, 1.05)
        twin.set_ylabel("Spearman ρ(reward, length)", color=COLORS[2])
    ax.set_title("length and reward-length correlation")
    return figure_to_data_uri(fig)


def disagreement_plot(result: MonitorResult) -> str:
    """Mean ensemble disagreement (std across members) per step."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.0))
    x, y = _xy(result.disagreement)
    ax.plot(x, y, color=COLORS[4])
    ax.set_xlabel("step")
    ax.set_ylabel("mean std across members")
    ax.set_title("ensemble disagreement")
    return figure_to_data_uri(fig)


def kl_plot(result: MonitorResult) -> str:
    """Reward against KL: best-of-n (analytic KL, first step's samples) beside the RL run (logged `kl`)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    if result.best_of_n:
        ax.plot([r["kl"] for r in result.best_of_n], [r["reward"] for r in result.best_of_n], marker="o",
                color=COLORS[5], label="best-of-n (log n − (n−1)/n)")
    common = sorted(set(result.kl) & set(result.proxy))
    if common:
        ax.plot([result.kl[s] for s in common], [result.proxy[s] for s in common], marker=".", linewidth=1,
                color=COLORS[0], label="policy (logged kl)")
    ax.set_xlabel("KL (nats)")
    ax.set_ylabel("proxy reward")
    ax.legend(fontsize=8)
    ax.set_title("reward vs KL")
    return figure_to_data_uri(fig)


def render_monitor_report(result: MonitorResult, *, source: str = "") -> str:
    """The HTML page: verdict, trends table, flagged windows, plots."""
    use_headless_backend()
    data = result.to_dict()
    if result.hacking:
        verdict = (f'<p style="color:#b42318;font-weight:600">Reward hacking suspected from step {result.onset}: '
                   f"{html.escape(result.proxy_name)} rises while {html.escape(str(result.gold_name))} falls.</p>")
    elif result.gold:
        verdict = '<p style="color:#067647;font-weight:600">No window with the proxy rising while the gold falls.</p>'
    else:
        verdict = "<p class=muted>No gold reward given: divergence not measured.</p>"
    rows = [
        ("proxy", result.proxy_name, trend(result.proxy)),
        ("gold", result.gold_name or "–", trend(result.gold)),
        ("mean length", "", trend(result.lengths)),
        ("ρ(reward, length)", "", trend(result.length_correlation)),
        ("ensemble disagreement", "", trend(result.disagreement)),
        ("kl", "", trend(result.kl)),
    ]
    table = "".join(f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td><td>{cell(c)}</td></tr>"
                    for a, b, c in rows)
    flagged = [w for w in result.windows if w.flagged]
    windows = "".join(f"<tr><td>{w.start}–{w.end}</td><td>{cell(w.proxy_rho)}</td><td>{cell(w.gold_rho)}</td></tr>"
                      for w in flagged[:30])
    plots = [figure(proxy_gold_plot(result), "proxy_gold", "proxy (left axis) and gold (right axis) per step")]
    if result.lengths or result.length_correlation:
        plots.append(figure(length_plot(result), "length", "mean length and per-step Spearman ρ(reward, length)"))
    if result.disagreement:
        plots.append(figure(disagreement_plot(result), "disagreement", "std across ensemble members, mean per step"))
    if result.best_of_n or result.kl:
        plots.append(figure(kl_plot(result), "kl", "reward vs KL: best-of-n's analytic KL beside the policy's"))
    bon = "".join(f"<tr><td>{int(r['n'])}</td><td>{cell(r['kl'])}</td><td>{cell(r['reward'])}</td></tr>"
                  for r in result.best_of_n)
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in result.notes)
    return f"""{page_head("rewardlab monitor")}
<h1>Reward-hacking monitor</h1>
<p class=muted>{html.escape(source)} · window {result.window} steps · threshold ρ ≥ {result.threshold}
(proxy rising) and ρ ≤ −{result.threshold} (gold falling), Spearman against the step · reported after
{result.persist} consecutive flagged windows</p>
{verdict}
<h2>Trends over the run (Spearman ρ against the step)</h2>
<table><tr><th>series</th><th>column</th><th>ρ</th></tr>{table}</table>
<h2>Flagged windows ({len(flagged)})</h2>
<table><tr><th>steps</th><th>proxy ρ</th><th>gold ρ</th></tr>{windows}</table>
<h2>Plots</h2>{''.join(plots)}
<h2>Best-of-n at the first logged step</h2>
<table><tr><th>n</th><th>KL = log n − (n−1)/n</th><th>expected best reward</th></tr>{bon}</table>
{f'<h2>Notes</h2><ul>{notes}</ul>' if notes else ''}
{embedded_json(data, "monitor-data")}
</body></html>
"""


def write_monitor_report(result: MonitorResult, output_dir: str | Path, *, source: str = "") -> dict[str, Any]:
    """Write `report.html` and `monitor.json` into `output_dir`; returns the summary dict."""
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    data = result.to_dict()
    with atomic_writer(folder / "report.html") as handle:
        handle.write(render_monitor_report(result, source=source))
    with atomic_writer(folder / "monitor.json") as handle:
        handle.write(json.dumps(data, indent=2, default=str) + "\n")
    return data
