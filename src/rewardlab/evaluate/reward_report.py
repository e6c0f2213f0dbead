"""A Reward Report for a run: what the run optimised, part by part, and what watched it.

After Gilbert, Lambert, Dean, Zick and Snoswell 2022, "Reward Reports for Reinforcement Learning": a living document
of a deployed reward. The sections a run's files can fill are filled from them:
- system details: the reward's spec, its fingerprint (`Reward.fingerprint()`, code + configuration) and the
  versions of the software that scores it (`provenance.library_versions`);
- implementation: every component of the reward tree (`Reward.components()`, depth first) with its place in the tree,
  family, weight in its parent (a weighted sum's `weights`), objectives, failing value, configuration and
  fingerprint, and for a model-backed component (`rm:`, a local `judge:`) the model card of its folder
  (`rewardlab.json`: backbone, training data, held-out metrics, the rewardlab that wrote it);
- monitoring: the hacking signals of the live monitor's records (`{"monitor": ...}`'s JSONL log, the rows
  `rewardlab monitor` reads): each integrity flag with the steps it was raised on, the shadow verifier's error
  rates, and the offline monitor's trends (`evaluate.monitor.analyse_log`);
- evaluation: the distance to a gold reward over a data set (`evaluate.compare.compare_rewards`: STARC, EPIC,
  Spearman, pairwise agreement), when one is given.
The sections only a person can write (optimisation intent, institutional interface, maintenance plan) are listed
as questions to answer. `write_reward_report` writes `report.md`, `report.html` (the `evaluate.html` kit) and
`report.json`.
"""

from __future__ import annotations

import datetime
import html
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardlab.evaluate.html import cell, embedded_json, page_head
from rewardlab.jsonl import atomic_writer
from rewardlab.provenance import library_versions
from rewardlab.types import Reward

__all__ = [
    "OPEN_QUESTIONS", "REPORT_FILES", "RUN_MONITOR_FILE", "RUN_SPEC_FILES", "build_reward_report",
    "model_card_summary", "monitor_signals", "render_html", "render_markdown", "reward_components", "run_files",
    "write_reward_report",
]

REPORT_FILES = ("report.md", "report.html", "report.json")
RUN_SPEC_FILES = ("reward.yaml", "reward.yml", "reward.json")
"""Where `--run DIR` looks for the run's reward spec, in this order."""
RUN_MONITOR_FILE = "monitor.jsonl"
"""Where `--run DIR` looks for the live monitor's records."""
OPEN_QUESTIONS = (
    ("Optimisation intent", "What behaviour should this reward produce, and what must it never pay for?"),
    ("Institutional interface", "Who is affected by the trained policy, and who answers for the reward?"),
    ("Maintenance", "When is this reward re-evaluated, and what change in the monitor's flags triggers a review?"),
)
"""The report's sections only a person can fill (Gilbert et al. 2022's template), asked as questions."""
_CARD_FILE = "rewardlab.json"


def run_files(run: str | Path) -> tuple[Path, Path | None]:
    """A run folder's reward spec file (the first of `RUN_SPEC_FILES`) and monitor records (or None); a missing
    folder or spec is a ValueError naming what was looked for."""
    folder = Path(run)
    if not folder.is_dir():
        raise ValueError(f"--run {run}: not a folder")
    spec = next((folder / name for name in RUN_SPEC_FILES if (folder / name).is_file()), None)
    if spec is None:
        raise ValueError(f"--run {run}: no reward spec ({', '.join(RUN_SPEC_FILES)}); pass --spec")
    monitor = folder / RUN_MONITOR_FILE
    return spec, monitor if monitor.is_file() else None


def _part_names(reward: Reward, parts: Sequence[Reward]) -> list[str]:
    """Names of a reward's parts: a composite's part names, else each part's own name (made unique)."""
    named = getattr(reward, "parts", None)
    if isinstance(named, list) and len(named) == len(parts) and all(isinstance(p, tuple) for p in named):
        return [str(p[0]) for p in named]
    names: list[str] = []
    for part in parts:
        name = part.name
        names.append(name if name not in names else f"{name}#{len(names)}")
    return names


def _model_folder(reward: Reward) -> str | None:
    """The model folder a component scores with (`rm:`, a local `judge:`), when it has one on disk."""
    for holder in (reward, getattr(reward, "backend", None)):
        path = getattr(holder, "path", None)
        if isinstance(path, str) and Path(path).is_dir():
            return path
    return None


def model_card_summary(folder: str | Path) -> dict[str, Any]:
    """What a model folder's card says: backbone, objectives, training objective and data, held-out metrics, and
    the rewardlab that wrote it (`card: None` for a folder without `rewardlab.json`)."""
    path = Path(folder) / _CARD_FILE
    if not path.is_file():
        return {"folder": str(folder), "card": None}
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: not a readable model card ({error})") from error
    if not isinstance(card, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(card).__name__}")
    data: dict[str, Any] = card["data"] if isinstance(card.get("data"), dict) else {}
    training: dict[str, Any] = card["training_config"] if isinstance(card.get("training_config"), dict) else {}
    metrics = [m for m in card.get("metrics") or [] if isinstance(m, dict)]
    return {"folder": str(folder), "card": _CARD_FILE, "backbone": card.get("backbone"),
            "objectives": card.get("objectives"), "training_objective": training.get("objective"),
            "data": {k: data.get(k) for k in ("source", "name", "pairs", "sha256") if data.get(k) is not None},
            "metrics": [{k: m.get(k) for k in ("name", "value", "measured_on") if k in m} for m in metrics],
            "created_with": card.get("created_with")}


def reward_components(reward: Reward) -> list[dict[str, Any]]:
    """Every reward in the tree, depth first: place (`path`), depth, family, weight in its parent, objectives,
    failing value, configuration, fingerprint, and the model card of a model-backed component."""
    rows: list[dict[str, Any]] = []

    def visit(node: Reward, path: str, weight: float | None, depth: int) -> None:
        contract = node.contract()
        parts = list(node.components())
        folder = _model_folder(node)
        rows.append({"path": path, "depth": depth, "name": node.name, "family": contract.family,
                     "class": f"{type(node).__module__}.{type(node).__qualname__}", "weight": weight,
                     "objectives": list(contract.objectives), "failure_value": contract.failure_value,
                     "leaf": not parts, "fingerprint": contract.fingerprint,
                     "config": json.loads(json.dumps(node.config(), default=repr)),
                     "model": model_card_summary(folder) if folder is not None else None})
        weights = getattr(node, "weights", None)
        if not (isinstance(weights, list) and len(weights) == len(parts)):
            weights = [None] * len(parts)
        for name, part, part_weight in zip(_part_names(node, parts), parts, weights, strict=True):
            visit(part, f"{path}/{name}", None if part_weight is None else float(part_weight), depth + 1)

    visit(reward, reward.name, None, 0)
    return rows


def monitor_signals(*paths: str | Path) -> dict[str, Any]:
    """The hacking signals in monitor records: each flag with how many steps raised it and the first and last of
    them, the shadow verifier's error rates over the run (the latest record that has them), and the offline
    monitor's trends (`analyse_log`)."""
    from rewardlab.evaluate.monitor import analyse_log
    from rewardlab.evaluate.training_log import read_training_log

    log = read_training_log(*paths)
    rows = sorted(log.metrics, key=lambda row: int(row["step"]))
    flags: dict[str, dict[str, Any]] = {}
    for row in rows:
        raised = row.get("flags")
        for flag in raised if isinstance(raised, list) else []:
            entry = flags.setdefault(str(flag), {"flag": str(flag), "steps": 0, "first_step": row["step"]})
            entry["steps"] += 1
            entry["last_step"] = row["step"]
    keys = ("monitor/shadow/fp_rate", "monitor/shadow/fn_rate", "monitor/shadow/disagreement")
    last: dict[str, Any] = next((row for row in reversed(rows) if any(key in row for key in keys)), {})  # run totals
    shadow = {key.rsplit("/", 1)[1]: last[key] for key in keys if key in last}
    out: dict[str, Any] = {"sources": [str(p) for p in paths], "records": len(rows),
                           "steps": [rows[0]["step"], rows[-1]["step"]] if rows else None,
                           "skipped": len(log.skipped), "flags": sorted(flags.values(), key=lambda f: f["first_step"]),
                           "shadow": shadow or None, "offline": None, "notes": []}
    try:
        offline = analyse_log(log).to_dict()
        out["offline"] = {k: offline[k] for k in ("proxy", "proxy_trend", "length_trend", "length_correlation_trend",
                                                  "hacking", "onset_step")}
    except ValueError as error:  # no proxy column: the records say nothing the offline monitor can read
        out["notes"].append(f"offline monitor: {error}")
    return out


def build_reward_report(
    spec: Any,
    *,
    monitor: Sequence[str | Path] = (),
    gold: Any = None,
    data: str | Path | None = None,
    run: str | Path | None = None,
    batch_size: int = 64,
    configure: Callable[[Reward], None] | None = None,
    on_start: Callable[[str, int], Callable[[int], None] | None] | None = None,
) -> dict[str, Any]:
    """The report of the reward `spec` (a spec, a spec file, or a `Reward`): its components, the signals of the
    `monitor` records, and with `gold` and `data` its distance to the gold reward. `configure` is applied to every
    loaded reward (runtime limits); `on_start` reports scoring progress as `compare_rewards` does."""
    from rewardlab.registry import load, parse_spec_text

    if (gold is None) != (data is None):
        raise ValueError("a distance to a gold reward needs both gold and data")
    spec_data = parse_spec_text(spec) if isinstance(spec, str) else spec
    reward = spec if isinstance(spec, Reward) else load(spec_data)
    try:
        if configure is not None:
            configure(reward)
        report: dict[str, Any] = {
            "title": f"Reward Report: {reward.name}",
            "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "run": None if run is None else str(run),
            "spec": spec_data if not isinstance(spec_data, Reward) else repr(spec_data),
            "spec_source": spec if isinstance(spec, str) and Path(spec).is_file() else None,
            "reward": {"name": reward.name, "fingerprint": reward.fingerprint(),
                       "objectives": list(reward.objective_names())},
            "versions": library_versions(),
            "components": reward_components(reward),
            "monitor": monitor_signals(*monitor) if monitor else None,
            "gold": None,
            "open_questions": [{"section": s, "question": q} for s, q in OPEN_QUESTIONS],
        }
        if gold is not None and data is not None:
            report["gold"] = _gold_distance(reward, gold, data, batch_size, configure, on_start)
    finally:
        if not isinstance(spec, Reward):
            reward.close()
    return report


def _gold_distance(reward: Reward, gold: Any, data: str | Path, batch_size: int,
                   configure: Callable[[Reward], None] | None,
                   on_start: Callable[[str, int], Callable[[int], None] | None] | None) -> dict[str, Any]:
    """The distances between the reward and the gold reward over `data` (`compare_rewards`)."""
    from rewardlab.evaluate.compare import compare_rewards
    from rewardlab.registry import load

    gold_reward = gold if isinstance(gold, Reward) else load(gold)
    try:
        if configure is not None:
            configure(gold_reward)
        result = compare_rewards(reward, gold_reward, data, batch_size=batch_size, on_start=on_start)
    finally:
        if not isinstance(gold, Reward):
            gold_reward.close()
    return {"gold": gold if isinstance(gold, str | dict) else repr(gold), "gold_fingerprint": gold_reward.fingerprint(),
            "data": result["data"], "distances": result["compare"]["distances"]}


# ------------------------------------------------------------------------------------------ rendering


def _md(value: Any) -> str:
    """A Markdown table cell: `–` for None, numbers to 4 places, `|` escaped, one line."""
    if value is None:
        return "–"
    text = f"{value:.4f}" if isinstance(value, float) else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("\r", " ")


def _fenced(text: str, language: str = "json") -> str:
    """`text` in a code fence longer than any run of backticks inside it."""
    longest = run = 0
    for char in text:  # the longest run of consecutive backticks
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def render_markdown(report: Mapping[str, Any]) -> str:
    """The report as Markdown."""
    lines = [f"# {_md(report['title'])}", "",
             f"Written {report['created']} by rewardlab {_md(report['versions'].get('rewardlab'))}"
             + (f" for the run `{_md(report['run'])}`." if report.get("run") else "."), "",
             "## System details", "", f"- reward: `{_md(report['reward']['name'])}`",
             f"- fingerprint: `{report['reward']['fingerprint']}`",
             f"- objectives: {_md(', '.join(report['reward']['objectives']) or None)}",
             "- versions: " + ", ".join(f"{k} {_md(v)}" for k, v in report["versions"].items()), "",
             "Spec:", "", _fenced(_json(report["spec"])), "", "## Components", "",
             "| component | family | weight | objectives | failing value | fingerprint |",
             "| --- | --- | --- | --- | --- | --- |"]
    for row in report["components"]:
        lines.append(f"| {_md(row['path'])} | {_md(row['family'])} | {_md(row['weight'])} | "
                     f"{_md(', '.join(row['objectives']) or None)} | {_md(row['failure_value'])} | "
                     f"`{row['fingerprint']}` |")
    for row in report["components"]:
        lines += ["", f"### {_md(row['path'])}", "", f"Class `{_md(row['class'])}`; configuration:", "",
                  _fenced(_json(row["config"]))]
        if row["model"] is not None:
            lines += ["", "Model card:", "", _fenced(_json(row["model"]))]
    lines += ["", "## Monitoring", ""]
    lines += _monitor_markdown(report.get("monitor"))
    lines += ["", "## Evaluation: distance to a gold reward", ""]
    gold = report.get("gold")
    if gold is None:
        lines.append("No gold reward given (`--gold SPEC --data D`).")
    else:
        lines += [f"Gold `{_md(gold['gold'] if isinstance(gold['gold'], str) else _json(gold['gold']))}` "
                  f"(fingerprint `{gold['gold_fingerprint']}`) on {_md(gold['data'].get('n_responses'))} responses.",
                  "", "| distance | value |", "| --- | --- |"]
        lines += [f"| {name} | {_md(value)} |" for name, value in gold["distances"].items() if name != "counts"]
    lines += ["", "## To be written by the reward's owner", ""]
    lines += [f"- **{_md(q['section'])}**: {_md(q['question'])}" for q in report["open_questions"]]
    return "\n".join(lines) + "\n"


def _monitor_markdown(monitor: Mapping[str, Any] | None) -> list[str]:
    if monitor is None:
        return ["No monitor records given (`--monitor RECORDS`)."]
    lines = [f"{monitor['records']} records from {_md(', '.join(monitor['sources']))}"
             + (f", steps {monitor['steps'][0]}–{monitor['steps'][1]}." if monitor["steps"] else "."), ""]
    if monitor["flags"]:
        lines += ["| flag | steps raised | first step | last step |", "| --- | --- | --- | --- |"]
        lines += [f"| {_md(f['flag'])} | {f['steps']} | {f['first_step']} | {f['last_step']} |"
                  for f in monitor["flags"]]
    else:
        lines.append("No integrity flag was raised.")
    if monitor["shadow"]:
        lines += ["", "Shadow verifier (over the run): "
                  + ", ".join(f"{k} {_md(v)}" for k, v in monitor["shadow"].items())]
    offline = monitor.get("offline")
    if offline:
        lines += ["", "Offline monitor: " + ", ".join(f"{k} {_md(v)}" for k, v in offline.items())]
    lines += [f"- {_md(note)}" for note in monitor["notes"]]
    return lines


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(v, 4)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _pre(value: Any) -> str:
    return f"<pre><code>{html.escape(_json(value))}</code></pre>"


def render_html(report: Mapping[str, Any]) -> str:
    """The report as one self-contained HTML page (the `evaluate.html` kit), the report's JSON embedded."""
    reward = report["reward"]
    parts = [page_head(report["title"]), f"<h1>{html.escape(report['title'])}</h1>",
             f"<p class='muted'>Written {html.escape(report['created'])}"
             + (f" for the run <code>{html.escape(report['run'])}</code>" if report.get("run") else "") + "</p>",
             "<h2>System details</h2>",
             _table(["field", "value"], [["reward", reward["name"]], ["fingerprint", reward["fingerprint"]],
                                         ["objectives", ", ".join(reward["objectives"])],
                                         *[[k, v] for k, v in report["versions"].items()]]),
             "<h3>Spec</h3>", _pre(report["spec"]), "<h2>Components</h2>",
             _table(["component", "family", "weight", "objectives", "failing value", "fingerprint"],
                    [[r["path"], r["family"], r["weight"], ", ".join(r["objectives"]), r["failure_value"],
                      r["fingerprint"]] for r in report["components"]])]
    for row in report["components"]:
        parts += [f"<h3>{html.escape(row['path'])}</h3>", f"<p class='muted'>{html.escape(row['class'])}</p>",
                  _pre(row["config"])]
        if row["model"] is not None:
            parts += ["<p>Model card:</p>", _pre(row["model"])]
    parts.append("<h2>Monitoring</h2>")
    monitor = report.get("monitor")
    if monitor is None:
        parts.append("<p>No monitor records given.</p>")
    else:
        parts.append(f"<p>{monitor['records']} records from {html.escape(', '.join(monitor['sources']))}</p>")
        parts.append(_table(["flag", "steps raised", "first step", "last step"],
                            [[f["flag"], f["steps"], f["first_step"], f["last_step"]] for f in monitor["flags"]])
                     if monitor["flags"] else "<p>No integrity flag was raised.</p>")
        for name in ("shadow", "offline"):
            if monitor.get(name):
                parts.append(_table([name, "value"], [[k, v] for k, v in monitor[name].items()]))
        parts += [f"<p class='muted'>{html.escape(note)}</p>" for note in monitor["notes"]]
    parts.append("<h2>Evaluation: distance to a gold reward</h2>")
    gold = report.get("gold")
    if gold is None:
        parts.append("<p>No gold reward given.</p>")
    else:
        parts.append(f"<p>Gold <code>{html.escape(str(gold['gold']))}</code> on "
                     f"{cell(gold['data'].get('n_responses'))} responses.</p>")
        parts.append(_table(["distance", "value"], [[k, v] for k, v in gold["distances"].items() if k != "counts"]))
    parts.append("<h2>To be written by the reward's owner</h2><ul>")
    parts += [f"<li><b>{html.escape(q['section'])}</b>: {html.escape(q['question'])}</li>"
              for q in report["open_questions"]]
    parts += ["</ul>", embedded_json(report, "reward-report"), "</body></html>"]
    return "".join(parts)


def write_reward_report(report: Mapping[str, Any], output: str | Path) -> dict[str, Path]:
    """Write `report.md`, `report.html` and `report.json` into the folder `output`; returns their paths."""
    folder = Path(output)
    folder.mkdir(parents=True, exist_ok=True)
    texts = {"report.md": render_markdown(report), "report.html": render_html(report),
             "report.json": json.dumps(report, indent=2, default=str) + "\n"}
    paths: dict[str, Path] = {}
    for name, text in texts.items():
        with atomic_writer(folder / name) as handle:
            handle.write(text)
        paths[name] = folder / name
    return paths
