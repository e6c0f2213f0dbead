"""Rows of five reward-model benchmarks beside RewardBench, parsed into rewardlab's evaluation items, and told apart
from a row's fields. Their scoring rules live in `rewardlab.evaluate.benchmarks`.

- RM-Bench (Liu et al. 2024; THU-KEG/RM-Bench `data/total_dataset.json`): `{"id", "prompt", "chosen": [3],
  "rejected": [3], "domain"}`, the three responses of each side in the styles concise, detailed plain, detailed
  markdown; domains chat, code, math, safety-refuse, safety-response → a `RewardBench2Row` (subset = domain).
- JudgeBench (Tan et al. 2024; ScalerLab/JudgeBench `data/*.jsonl`): `{"pair_id", "source", "question",
  "response_A", "response_B", "label": "A>B" | "B>A"}` → a `PreferencePair` (subset = source, the label's
  winner as `chosen`).
- RMB (Zhou et al. 2024; Zhou-Zoey/RMB-Reward-Model-Benchmark `RMB_dataset/`): pairwise rows `{"pair_uid",
  "conversation_input": [messages], "chosen": {"llm_name", "answer"}, "reject": {...}, "category_path"}` →
  `PreferencePair`; best-of-N rows `{"bon_uid", "conversation_input", "bon_best": {...}, "loser_list": [{...}],
  "category_path"}` → `RankedResponses` (subset = category_path, e.g. `BoN_set/Helpfulness/Chat/Discussion`).
- ProcessBench (Zheng et al. 2024; Qwen/ProcessBench): `{"id": "gsm8k-0", "generator", "problem", "steps",
  "final_answer_correct", "label"}` → a `StepRow` (subset = the id's prefix: gsm8k, math, olympiadbench, omnimath).
- PRMBench (Song et al. 2025; ssmisya/PRMBench `docs/data_format.md`): `{"idx", "modified_question",
  "modified_process", "error_steps": [1-based], "classification", "original_question"?, "original_process"?}` →
  a `StepRow` of the modified process (label = first error step, 0-based; metadata: the error steps, 0-based).
  Its loader also scores, once per `idx`, the original process of a `redundency` row as a `correct` sample.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rewardlab.data.rewardbench import RewardBench2Row
from rewardlab.types import PreferencePair, RankedResponses, StepRow

BENCHMARK_FORMATS: tuple[str, ...] = ("rmbench", "judgebench", "rmb", "processbench", "prmbench")
"""The benchmark row formats of this module (each also a `--format` of `rewardlab eval`)."""

RMBENCH_STYLES: tuple[str, ...] = ("concise", "detailed_plain", "detailed_markdown")
RMBENCH_DOMAINS: tuple[str, ...] = ("chat", "math", "code", "safety")
"""RM-Bench's four domains; a row's domain is the one it starts with (`safety-refuse` → safety)."""

JUDGEBENCH_SOURCES: tuple[str, ...] = ("mmlu-pro", "livebench-reasoning", "livebench-math", "livecodebench")
"""JudgeBench's categories: a pair belongs to the one its `source` starts with (`run_judge.py`)."""

PROCESSBENCH_SUBSETS: tuple[str, ...] = ("gsm8k", "math", "olympiadbench", "omnimath")
PRMBENCH_CORRECT_FROM = "redundency"  # sic: the benchmark's spelling; its correct samples come from these rows
PRMBENCH_CORRECT = "correct"


class BenchmarkDataError(ValueError):
    """A benchmark row that cannot be used (the message names the row and the field)."""


def _text(row: Mapping[str, Any], name: str, where: str) -> str:
    value = row.get(name)
    if not isinstance(value, str):
        raise BenchmarkDataError(f"{where}: field {name!r} must be a string")
    return value


def _texts(row: Mapping[str, Any], name: str, where: str, length: int | None = None) -> list[str]:
    value = row.get(name)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise BenchmarkDataError(f"{where}: field {name!r} must be a non-empty list of strings")
    if length is not None and len(value) != length:
        raise BenchmarkDataError(f"{where}: field {name!r} must hold {length} responses, got {len(value)}")
    return list(value)


def _row_id(row: Mapping[str, Any], *names: str) -> str | None:
    for name in names:
        if row.get(name) is not None:
            return str(row[name])
    return None


def rmbench_row(row: Mapping[str, Any], where: str) -> RewardBench2Row:
    """An RM-Bench row → its three chosen and three rejected styles (subset = the domain as written)."""
    domain = _text(row, "domain", where)
    if not domain.startswith(RMBENCH_DOMAINS):
        raise BenchmarkDataError(f"{where}: 'domain' must start with one of {', '.join(RMBENCH_DOMAINS)}, "
                                 f"got {domain!r:.40}")
    n = len(RMBENCH_STYLES)
    return RewardBench2Row(prompt=_text(row, "prompt", where), chosen=_texts(row, "chosen", where, n),
                           rejected=_texts(row, "rejected", where, n), subset=domain, id=_row_id(row, "id"))


def rmbench_domain(subset: str) -> str:
    """The RM-Bench domain of a row's `domain` field (`safety-response` → `safety`)."""
    return next(d for d in RMBENCH_DOMAINS if subset.startswith(d))


def judgebench_pair(row: Mapping[str, Any], where: str) -> PreferencePair:
    """A JudgeBench row → a pair with the label's winner as `chosen` (the A/B order kept in metadata)."""
    label = row.get("label")
    if label not in ("A>B", "B>A"):
        raise BenchmarkDataError(f"{where}: field 'label' must be 'A>B' or 'B>A', got {label!r:.40}")
    a, b = _text(row, "response_A", where), _text(row, "response_B", where)
    chosen, rejected = (a, b) if label == "A>B" else (b, a)
    return PreferencePair(prompt=_text(row, "question", where), chosen=chosen, rejected=rejected,
                          subset=_text(row, "source", where), id=_row_id(row, "pair_id"),
                          metadata={"label": label, "response_model": row.get("response_model")})


def judgebench_category(source: str) -> str | None:
    """The JudgeBench category a pair's `source` belongs to (`mmlu-pro-law` → `mmlu-pro`), or None."""
    return next((c for c in JUDGEBENCH_SOURCES if source.startswith(c)), None)


def _answer(value: Any, name: str, where: str) -> str:
    """RMB's `{"llm_name", "answer"}` response (or a plain string) → its text."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("answer"), str):
        return str(value["answer"])
    raise BenchmarkDataError(f"{where}: field {name!r} must be a {{llm_name, answer}} object or a string")


def _messages(row: Mapping[str, Any], where: str) -> list[dict[str, str]]:
    turns = row.get("conversation_input", row.get("conversation"))
    if not isinstance(turns, list) or not turns or not all(
            isinstance(t, Mapping) and isinstance(t.get("role"), str) and isinstance(t.get("content"), str)
            for t in turns):
        raise BenchmarkDataError(f"{where}: field 'conversation_input' must be a non-empty list of "
                                 "{role, content} messages")
    return [{"role": str(t["role"]), "content": str(t["content"])} for t in turns]


def rmb_item(row: Mapping[str, Any], where: str) -> PreferencePair | RankedResponses:
    """An RMB row → a pair (Pairwise_set) or a best-of-N row, best first (BoN_set); subset = category_path."""
    path = _text(row, "category_path", where)
    prompt = _messages(row, where)
    if "bon_best" in row:
        losers = row.get("loser_list")
        if not isinstance(losers, list) or not losers:
            raise BenchmarkDataError(f"{where}: field 'loser_list' must be a non-empty list")
        responses = [_answer(row["bon_best"], "bon_best", where)]
        responses += [_answer(loser, f"loser_list[{i}]", where) for i, loser in enumerate(losers)]
        return RankedResponses(prompt=prompt, responses=responses, subset=path, id=_row_id(row, "bon_uid"))
    return PreferencePair(prompt=prompt, chosen=_answer(row.get("chosen"), "chosen", where),
                          rejected=_answer(row.get("reject", row.get("rejected")), "reject", where),
                          subset=path, id=_row_id(row, "pair_uid"))


def rmb_split(subset: str) -> tuple[str, str]:
    """(`Pairwise` or `BoN`, `Helpfulness` or `Harmlessness`) of an RMB `category_path`."""
    parts = subset.split("/")
    kind = "BoN" if parts[0].lower().startswith("bon") else "Pairwise"
    return kind, parts[1] if len(parts) > 1 else "?"


def processbench_row(row: Mapping[str, Any], where: str) -> StepRow:
    """A ProcessBench row → a step row (subset = the id's prefix, `gsm8k-0` → gsm8k)."""
    steps = _texts(row, "steps", where)
    label = row.get("label")
    if isinstance(label, bool) or not isinstance(label, int) or not -1 <= label < len(steps):
        raise BenchmarkDataError(f"{where}: field 'label' must be -1 or a step index below {len(steps)}, "
                                 f"got {label!r:.40}")
    row_id = _row_id(row, "id")
    subset = row_id.rsplit("-", 1)[0] if row_id and "-" in row_id else None
    return StepRow(prompt=_text(row, "problem", where), steps=steps, label=label, subset=subset, id=row_id,
                   metadata={"generator": row.get("generator"),
                             "final_answer_correct": row.get("final_answer_correct")})


def prmbench_rows(row: Mapping[str, Any], where: str) -> list[StepRow]:
    """A PRMBench row → its modified process as a step row (metadata `error_steps`, 0-based), and for a
    `redundency` row also its original process as a `correct` row (no error steps)."""
    steps = _texts(row, "modified_process", where)
    classification = _text(row, "classification", where)
    errors = row.get("error_steps")
    if not isinstance(errors, list) or not all(isinstance(e, int) and not isinstance(e, bool) and e >= 1
                                               for e in errors):
        raise BenchmarkDataError(f"{where}: field 'error_steps' must list 1-based step numbers")
    # a number past the last step is ignored, as the benchmark's step loop never reaches it (its data has some)
    zero_based = sorted({e - 1 for e in errors if e <= len(steps)})
    idx = _row_id(row, "idx")
    out = [StepRow(prompt=_text(row, "modified_question", where), steps=steps,
                   label=zero_based[0] if zero_based else -1, subset=classification, id=f"{classification}_{idx}",
                   metadata={"error_steps": zero_based,
                             "error_steps_past_the_end": len(set(errors)) - len(zero_based)})]
    if classification == PRMBENCH_CORRECT_FROM and "original_process" in row:
        original = _texts(row, "original_process", where)
        out.append(StepRow(prompt=_text(row, "original_question", where), steps=original, label=-1,
                           subset=PRMBENCH_CORRECT, id=f"{PRMBENCH_CORRECT}_{idx}", metadata={"error_steps": []}))
    return out


def benchmark_items(kind: str, row: Mapping[str, Any], where: str) -> list[Any]:
    """The evaluation items of one row of benchmark `kind` (one of `BENCHMARK_FORMATS`)."""
    if kind == "rmbench":
        return [rmbench_row(row, where)]
    if kind == "judgebench":
        return [judgebench_pair(row, where)]
    if kind == "rmb":
        return [rmb_item(row, where)]
    if kind == "processbench":
        return [processbench_row(row, where)]
    if kind == "prmbench":
        return prmbench_rows(row, where)
    raise BenchmarkDataError(f"{where}: unknown benchmark format {kind!r}")


def dedupe_prmbench(items: Sequence[Any]) -> list[Any]:
    """PRMBench items with each `id` kept once (its loader keeps the first of `classification_idx`)."""
    seen: set[str | None] = set()
    out = []
    for item in items:
        if item.id in seen:
            continue
        seen.add(item.id)
        out.append(item)
    return out


def detect_benchmark_row(row: Mapping[str, Any]) -> str | None:
    """The benchmark format of one row from its fields, or None for rows of no benchmark here."""
    if "response_A" in row and "response_B" in row and "label" in row:
        return "judgebench"
    if "category_path" in row and ("bon_best" in row or "conversation_input" in row or "conversation" in row):
        return "rmb"
    if "modified_process" in row and "error_steps" in row:
        return "prmbench"
    if "problem" in row and "steps" in row and "label" in row:
        return "processbench"
    domain = row.get("domain")
    if isinstance(domain, str) and domain.startswith(RMBENCH_DOMAINS) and isinstance(row.get("chosen"), list):
        return "rmbench"
    return None
