"""The evaluation report: one self-contained HTML file, every plot an embedded PNG (matplotlib, Agg backend).

Plots: per-subset accuracy bars (all rewards side by side), then one column per reward with the histogram of
chosen vs rejected rewards, the reliability diagram, and the reward-vs-length scatter; robustness flip rates.
No external file, script, font or stylesheet is referenced, so the file opens offline in any browser.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardlab.evaluate.html import COLORS, cell, figure, figure_to_data_uri, page_head, use_headless_backend
from rewardlab.jsonl import atomic_writer


def _present(values: Sequence[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def histogram_plot(chosen: Sequence[float | None], rejected: Sequence[float | None], title: str) -> str:
    """Overlaid histograms of the reward on chosen and on rejected responses."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(4.6, 3.0))
    c, r = _present(chosen), _present(rejected)
    both = c + r
    if both:
        lo, hi = min(both), max(both)
        bins = [float(b) for b in np.linspace(lo, hi if hi > lo else lo + 1.0, 31)]
        ax.hist(c, bins=bins, alpha=0.55, color="#2ca02c", label=f"chosen (n={len(c)})")
        ax.hist(r, bins=bins, alpha=0.55, color="#d62728", label=f"rejected (n={len(r)})")
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no values", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("reward")
    ax.set_ylabel("responses")
    ax.set_title(title, fontsize=10)
    return figure_to_data_uri(fig)


def reliability_plot(bins: Sequence[Mapping[str, Any]], temperature: float | None, title: str) -> str:
    """Reliability diagram: accuracy vs confidence per bin, bar widths = bins, the diagonal = calibrated."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.6, 3.0))
    ax.plot([0.5, 1.0], [0.5, 1.0], ls="--", color="#888", lw=1, label="calibrated")
    shown = [b for b in bins if b["count"]]
    if shown:
        ax.bar([(b["lower"] + b["upper"]) / 2 for b in shown], [b["accuracy"] for b in shown],
               width=[b["upper"] - b["lower"] for b in shown], edgecolor="#1f77b4", color="#1f77b488",
               label="accuracy")
        ax.plot([b["confidence"] for b in shown], [b["accuracy"] for b in shown], "o", color="#1f77b4", ms=3)
        for b in shown:  # how many pairs each bar stands on
            ax.text((b["lower"] + b["upper"]) / 2, min(b["accuracy"] + 0.02, 0.93), str(b["count"]), ha="center",
                    fontsize=6, color="#333")
    ax.set_xlim(0.5, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_xlabel("confidence max(p, 1−p)")
    ax.set_ylabel("accuracy")
    t = "∞" if temperature is None else f"{temperature:.3g}"
    ax.set_title(f"{title} (T = {t})", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    return figure_to_data_uri(fig)


def length_scatter_plot(raw: Mapping[str, Any], spearman: float | None, title: str) -> str:
    """Reward against response length (words), chosen and rejected responses coloured apart."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.6, 3.0))
    for key, color in (("chosen", "#2ca02c"), ("rejected", "#d62728")):
        pts = [(length, v) for length, v in zip(raw[f"{key}_length"], raw[key], strict=True) if v is not None]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=6, alpha=0.45, color=color, label=key)
    ax.set_xlabel("response length (words)")
    ax.set_ylabel("reward")
    rho = "–" if spearman is None else f"{spearman:.2f}"
    ax.set_title(f"{title} (Spearman ρ = {rho})", fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    return figure_to_data_uri(fig)


def grouped_bars_plot(
    groups: Sequence[str], series: Mapping[str, Sequence[float | None]], ylabel: str, title: str,
    reference: float | None = None,
) -> str:
    """Bars per group (subset, perturbation, ...) with one bar per reward side by side."""
    import matplotlib.pyplot as plt
    import numpy as np

    width_in = max(4.6, 0.55 * len(groups) * max(1, len(series)) + 1.5)
    fig, ax = plt.subplots(figsize=(min(width_in, 16.0), 3.2))
    x = np.arange(len(groups))
    n = max(1, len(series))
    width = 0.8 / n
    for i, (label, values) in enumerate(series.items()):
        heights = [0.0 if v is None else v for v in values]
        ax.bar(x + (i - (n - 1) / 2) * width, heights, width=width, label=label, color=COLORS[i % len(COLORS)])
    if reference is not None:
        ax.axhline(reference, ls="--", color="#888", lw=1)
    ax.set_xticks(x)
    ax.set_xticklabels(groups, rotation=30 if len(groups) > 4 else 0, ha="right" if len(groups) > 4 else "center",
                       fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    return figure_to_data_uri(fig)


def accuracy_vs_n_plot(curves: Mapping[str, Any], title: str) -> str:
    """Accuracy of each selection method against the number of candidates N (log2 axis), oracle and random
    dashed (see `rewardlab.select.curves.accuracy_vs_n`)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.6, 3.0))
    ns = list(curves.get("n", []))
    for i, (method, values) in enumerate(curves.get("accuracy", {}).items()):
        dashed = method in ("oracle", "random")
        ax.plot(ns, values, marker="o", ms=3, ls="--" if dashed else "-", label=method,
                color="#888" if method == "random" else COLORS[i % len(COLORS)])
    if ns:
        ax.set_xscale("log", base=2)
        ax.set_xticks(ns)
        ax.set_xticklabels([str(n) for n in ns])
    ax.set_xlabel("candidates N")
    ax.set_ylabel("accuracy of the pick")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    return figure_to_data_uri(fig)


def metric_at(metrics: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    """The value at `keys` inside one reward's nested metrics, or None where any level is absent."""
    cur: Any = metrics
    for key in keys:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return cur


def _scored_missing(metrics: Mapping[str, Any]) -> str | None:
    """The pairwise counts as `scored / missing` text."""
    counts = metrics.get("pairwise")
    return f"{counts.get('n_scored')} / {counts.get('n_missing')}" if isinstance(counts, Mapping) else None


#: The headline metrics of `rewardlab eval`, in order: a row's name and its path in one reward's metrics (or how to
#: read it). The one list both the terminal table (`rewardlab.cli.eval.results_table`) and the HTML summary show.
HEADLINE_ROWS: tuple[tuple[str, tuple[str, ...] | Callable[[Mapping[str, Any]], Any]], ...] = (
    ("pairwise accuracy", ("pairwise_accuracy",)),
    ("pairs scored / missing", _scored_missing),
    ("best-of-N accuracy", ("best_of_n", "accuracy")),
    ("ECE (fitted T)", ("calibration", "ece")),
    ("Brier (fitted T)", ("calibration", "brier")),
    ("temperature T", ("calibration", "temperature")),
    ("ECE (T = 1)", ("calibration", "unit_temperature", "ece")),
    ("acc. when chosen is longer", ("length_bias", "chosen_longer", "accuracy")),
    ("acc. when chosen is shorter", ("length_bias", "chosen_shorter", "accuracy")),
    ("Spearman(reward, length)", ("length_bias", "spearman_reward_length")),
    ("position consistency", ("position_consistency", "consistency")),
    ("first-position rate", ("position_consistency", "first_position_rate")),
    ("lean to first slot (log-odds)", ("position_consistency", "lean")),
    ("consistency without the lean", ("position_consistency", "consistency_without_lean")),
    ("robustness: flip rate", ("robustness", "flip_rate")),
    ("robustness: mean |Δr| / std", ("robustness", "mean_abs_change_in_std")),
    ("process: first-error F1", ("process", "f1")),
    ("reward mean", ("statistics", "all", "mean")),
    ("reward std", ("statistics", "all", "std")),
    ("errors", ("errors", "n")),
)


def headline_rows(rewards: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, list[Any]]]:
    """`HEADLINE_ROWS` read from each reward's metrics: one value per reward, None where a metric is absent."""
    return [(name, [read(m) if callable(read) else metric_at(m, read) for m in rewards.values()])
            for name, read in HEADLINE_ROWS]


def _rewardbench_section(rewards: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The RewardBench table (v1 sections or v2 subsets, then the benchmark score), one column per reward; with
    the per-subset accuracies by the benchmark's rule for v1 and the Ties terms for v2."""
    results = [m.get("rewardbench") for m in rewards.values()]
    if not results or any(r is None for r in results):
        return []
    from rewardlab.evaluate.rewardbench import rewardbench_table

    esc = html.escape
    first: Mapping[str, Any] = results[0]  # type: ignore[assignment]
    v1 = first.get("benchmark") == "rewardbench"
    title = "RewardBench" if v1 else "RewardBench 2"
    header = "<tr><th></th>" + "".join(f"<th>{esc(label)}</th>" for label in rewards) + "</tr>"
    tables = [dict(rewardbench_table(r)) for r in results if r is not None]
    parts = [f"<h2 id='rewardbench'>{title}</h2><table data-table='rewardbench'>{header}"]
    for name in tables[0]:
        bold = name.endswith("score") or name.startswith("score")
        open_b, close_b = ("<b>", "</b>") if bold else ("", "")
        parts.append(f"<tr><td>{open_b}{esc(name)}{close_b}</td>"
                     + "".join(f"<td>{open_b}{cell(t.get(name))}{close_b}</td>" for t in tables) + "</tr>")
    parts.append("</table>")
    notes = []
    if v1:
        notes.append("a pair is right when r(chosen) &gt; r(rejected); a tie or a missing value is wrong; sections "
                     "weight their subsets by the benchmark's example counts; the score is the mean of the sections")
        if not first.get("complete"):
            notes.append("incomplete: missing sections " + esc(", ".join(first.get("missing_sections", [])) or "none")
                         + " (the score averages the sections present)")
    else:
        notes.append("best-of-4: a row scores 1 / (number of completions tied at the top) when a correct one is at "
                     "the top; Ties by its own rule; the score is the unweighted mean of the subsets")
        if not first.get("complete"):
            notes.append("incomplete: missing subsets " + esc(", ".join(first.get("missing_subsets", []))))
    parts.append("<p class='muted'>" + "; ".join(notes) + ".</p>")
    subsets = sorted({s for r in results if r is not None for s in r["subsets"]})
    key = "accuracy" if v1 else "score"
    parts.append(f"<h3>{title} subsets</h3><table data-table='rewardbench-subsets'><tr><th>subset</th><th>rows</th>"
                 + "".join(f"<th>{esc(label)}</th>" for label in rewards) + "</tr>")
    for s in subsets:
        n = max(int(r["subsets"].get(s, {}).get("n_pairs" if v1 else "n_rows", 0)) for r in results if r is not None)
        parts.append(f"<tr><td>{esc(s)}</td><td>{n}</td>" + "".join(
            f"<td>{cell(r['subsets'].get(s, {}).get(key))}</td>" for r in results if r is not None) + "</tr>")
    parts.append("</table>")
    ties = [r["subsets"].get(name) for r in results if r is not None for name in r["subsets"]
            if name.lower() == "ties"]
    if ties and not v1:
        terms = ("ref_accuracy", "tied_accuracy", "correctness_preferred", "correctness_preferred_hard",
                 "correctness_margin_score")
        parts.append("<h3>Ties terms</h3><table data-table='rewardbench-ties'><tr><th>term</th>"
                     + "".join(f"<th>{esc(label)}</th>" for label in rewards) + "</tr>")
        for term in terms:
            parts.append(f"<tr><td>{term}</td>" + "".join(f"<td>{cell(t.get(term))}</td>" for t in ties) + "</tr>")
        parts.append("</table>")
    return parts


def render_report(result: Mapping[str, Any], raws: Mapping[str, Mapping[str, Any]]) -> str:
    """The HTML text of the report for `evaluate`'s result and the per-pair values."""
    use_headless_backend()
    rewards: Mapping[str, Mapping[str, Any]] = result["rewards"]
    labels = list(rewards)
    esc = html.escape
    parts: list[str] = [
        page_head("rewardlab evaluation report"),
        "<h1>rewardlab evaluation report</h1>",
    ]
    data = result.get("data", {})
    prov = result.get("provenance", {})
    versions = ", ".join(f"{k} {v}" for k, v in prov.get("versions", {}).items() if v)
    parts.append(
        f"<p class='muted'>data: <code>{esc(str(data.get('path') or data.get('name') or 'in-memory rows'))}</code>"
        f" rows {esc(str(data.get('rows', 'all')))}"
        f" · {data.get('n_pairs', 0)} pairs, {data.get('n_best_of_n_rows', 0)} best-of-N rows,"
        f" {data.get('n_step_rows', 0)} step rows · seed {prov.get('seed')} · batch size {prov.get('batch_size')}"
        f"<br>{esc(versions)}</p>"
    )
    # summary table
    parts.append("<h2>Summary</h2><table><tr><th>metric</th>")
    parts.extend(f"<th>{esc(label)}</th>" for label in labels)
    parts.append("</tr>")
    for name, values in headline_rows(rewards):
        cells = [cell(v) for v in values]
        parts.append(f"<tr><td>{esc(name)}</td>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    parts.append("</table>")
    parts.append("<p class='muted'>" + " · ".join(
        f"<b>{esc(label)}</b>: <code>{esc(json.dumps(m['provenance']['reward']['spec']))}</code>"
        for label, m in rewards.items()) + "</p>")

    # per-subset bars
    subsets = sorted({s for m in rewards.values() for s in m["subsets"]})
    parts.append("<h2>Accuracy per subset</h2>")
    series = {label: [m["subsets"].get(s, {}).get("accuracy") for s in subsets] for label, m in rewards.items()}
    parts.append(figure(grouped_bars_plot(subsets, series, "pairwise accuracy", "accuracy per subset", 0.5),
                      "subset_bars", "pairwise accuracy per subset; dashed line = chance"))
    parts.append("<table><tr><th>subset</th><th>pairs</th>" + "".join(f"<th>{esc(lb)}</th>" for lb in labels)
                 + "</tr>")
    for s in subsets:
        n = max(m["subsets"].get(s, {}).get("n_pairs", 0) for m in rewards.values())
        parts.append(f"<tr><td>{esc(s)}</td><td>{n}</td>"
                     + "".join(f"<td>{cell(m['subsets'].get(s, {}).get('accuracy'))}</td>" for m in rewards.values())
                     + "</tr>")
    parts.append("</table>")
    if any(m.get("sections") for m in rewards.values()):
        names = sorted({sec for m in rewards.values() for sec in (m.get("sections") or {}).get("sections", {})})
        parts.append("<h3>Sections</h3><table><tr><th>section</th>"
                     + "".join(f"<th>{esc(lb)}</th>" for lb in labels) + "</tr>")
        for sec in names:
            parts.append(f"<tr><td>{esc(sec)}</td>" + "".join(
                f"<td>{cell(((m.get('sections') or {}).get('sections', {}).get(sec) or {}).get('accuracy'))}</td>"
                for m in rewards.values()) + "</tr>")
        parts.append("<tr><td><b>weighted score</b></td>" + "".join(
            f"<td>{cell((m.get('sections') or {}).get('score'))}</td>" for m in rewards.values()) + "</tr></table>")

    parts.extend(_rewardbench_section(rewards))

    # per reward, side by side
    parts.append(f"<h2>Per reward</h2><div class='grid' style='--cols:{len(labels)}'>")
    for label, m in rewards.items():
        raw = raws[label]
        cal = m["calibration"]
        parts.append(f"<div class='card'><h3>{esc(label)}</h3>")
        parts.append(figure(histogram_plot(raw["chosen"], raw["rejected"], label), f"histogram:{label}",
                          "reward on chosen vs rejected responses"))
        parts.append(figure(reliability_plot(cal.get("reliability", []), cal.get("temperature"), label),
                          f"reliability:{label}",
                          f"reliability of sigmoid(Δr/T); ECE {cell(cal.get('ece'))}, Brier {cell(cal.get('brier'))}"))
        parts.append(figure(length_scatter_plot(raw, m["length_bias"].get("spearman_reward_length"), label),
                          f"length:{label}",
                          "reward vs length; accuracy when chosen is longer "
                          f"{cell(m['length_bias']['chosen_longer']['accuracy'])}, shorter "
                          f"{cell(m['length_bias']['chosen_shorter']['accuracy'])}"))
        curves = m.get("selection_curves")
        if curves and curves.get("n"):
            parts.append(figure(accuracy_vs_n_plot(curves, label), f"accuracy_vs_n:{label}",
                              f"best-of-N rows: accuracy of the pick vs N ({curves.get('prompts')} prompts, "
                              f"{curves.get('trials')} random subsets each)"))
        errors = m.get("errors", {})
        if errors.get("n"):
            parts.append(f"<p class='muted'>{errors['n']} samples failed; first: "
                         f"{esc(str(errors['examples'][0]['error']))}</p>")
        parts.append("</div>")
    parts.append("</div>")

    # robustness
    perturbations = sorted({p for m in rewards.values() for p in m["robustness"].get("perturbations", {})})
    if perturbations:
        parts.append("<h2>Robustness to meaning-preserving edits</h2>")
        flips = {label: [m["robustness"]["perturbations"].get(p, {}).get("flip_rate") for p in perturbations]
                 for label, m in rewards.items()}
        parts.append(figure(grouped_bars_plot(perturbations, flips, "share of pairs flipped", "ranking flips"),
                          "robustness_bars", "share of probed pairs whose ranking flips under each perturbation"))
        parts.append("<table><tr><th>perturbation</th>" + "".join(
            f"<th>{esc(lb)} flip rate</th><th>{esc(lb)} |Δr|/std</th>" for lb in labels) + "</tr>")
        for p in perturbations:
            cells = []
            for m in rewards.values():
                e = m["robustness"]["perturbations"].get(p, {})
                cells.append(f"<td>{cell(e.get('flip_rate'))}</td><td>{cell(e.get('mean_abs_change_in_std'))}</td>")
            parts.append(f"<tr><td>{esc(p)}</td>{''.join(cells)}</tr>")
        parts.append("</table>")
    parts.extend(_cost_section(rewards))
    parts.append("</body></html>")
    return "\n".join(parts)


COST_COLUMNS = ("requests", "prompt_tokens", "completion_tokens", "cost_usd", "cache_hits", "duplicates", "hit_rate",
                "calibration_gold_accuracy", "calibration_swap_consistency", "calibration_length_bias")


def _cost_section(rewards: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """What each reward component spent (judge requests, tokens, USD, cache) and its online calibration, if any."""
    rows = [(label, part, counters) for label, m in rewards.items() for part, counters in (m.get("cost") or {}).items()]
    if not rows:
        return []
    parts = ["<h2>Cost</h2><table><tr><th>reward</th><th>component</th>"
             + "".join(f"<th>{c.replace('_', ' ')}</th>" for c in COST_COLUMNS) + "</tr>"]
    for label, part, counters in rows:
        parts.append(f"<tr><td>{html.escape(label)}</td><td>{html.escape(part)}</td>"
                     + "".join(f"<td>{cell(counters.get(c), 6 if c == 'cost_usd' else 3)}</td>" for c in COST_COLUMNS)
                     + "</tr>")
    parts.append("</table>")
    return parts


def write_report(path: str | Path, result: Mapping[str, Any], raws: Mapping[str, Mapping[str, Any]]) -> Path:
    """Write the self-contained report to `path` (atomically) and return the path."""
    text = render_report(result, raws)
    with atomic_writer(path) as handle:
        handle.write(text)
    return Path(path)
