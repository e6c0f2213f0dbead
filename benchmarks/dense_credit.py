"""Dense credit: throughput of each source, and a GRPO-shaped simulation of per-token advantages.

Run: `nice -n 10 .venv/bin/python benchmarks/dense_credit.py [--samples 16] [--groups 400]` (~2-3 min on 2 busy
CPU cores). Writes benchmarks/results/dense_credit.json and prints two tables.

1. Throughput (samples/s, CPU, fp32, one thread pool shared with whatever else runs) of every dense source on
   tiny random models (2-layer BERT RM / PRM, 2-layer Llama policy and reference) and of `redistribute` on the
   embedded all-MiniLM-L6-v2 with a random reward head (22 M parameters; the speed of a real backbone, not its
   quality). Responses are GSM8K-like solutions of ~60-100 tokens cut into 3-5 steps.
2. GRPO simulation (as the monitor's calibration: synthetic, so the truth is known): groups of G completions of
   T tokens; each token is wrong with probability p; a completion is right (reward 1) when it has no wrong token,
   else 0. A dense source gives each token the sequence reward's share plus a noisy quality signal
   (+s for a right token, −s for a wrong one, Gaussian noise σ), made to sum exactly to the sequence reward
   (`rewardlab.dense.residual_split`). Per-token advantages: sequence GRPO broadcast to the tokens, token-level
   GRPO (DeepSeekMath process supervision, with return-to-go and per token) and token-level REINFORCE++ on the
   dense rewards. Reported: the mean and the variance of the advantage on wrong and on right tokens, the share of
   wrong tokens pushed down (advantage < 0), and the share of the right tokens of wrong answers pushed down (what
   sequence credit cannot avoid).
3. First-error localisation (`--localise SPEC ...`, off by default: it needs trained models; `--train-localisers DIR
   --only-localise` first trains an outcome RM on gold ≻ corrupted GSM8K *train* solutions and a PRM on their step
   labels, then localises with the PRM and with the RM's three redistributions): GSM8K problems from
   ../shared/data/gsm8k-test.jsonl.gz as gold and corrupted step rows (`data.steps.gsm8k_step_rows`, the PRM
   benchmark's labels); each dense SPEC (e.g. `{"redistribute": {"reward": "rm:MY-RM", "method": "gradient"}}`)
   scores them, its `Score.steps` credit (centred per solution) predicts the first step below −τ (τ chosen on
   validation problems), and ProcessBench's first-error F1 is reported beside a uniformly random predictor.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _machine import cpu_busy, describe  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "dense_credit.json"

STEPS = [
    "Natalia sold 48 clips in April.",
    "In May she sold half as many, 48 / 2 = 24 clips.",
    "Altogether she sold 48 + 24 = 72 clips in April and May.",
    "Each clip costs 3 dollars, so she earned 72 * 3 = 216 dollars.",
    "The answer is 216.",
]


def _samples(n: int) -> list[Any]:
    from rewardlab import Sample

    out = []
    for i in range(n):
        steps = STEPS[: 3 + i % 3]
        out.append(Sample(prompt="Natalia sold clips to 48 of her friends in April, and then she sold half as many "
                                 "clips in May. How many clips did she sell altogether in April and May?",
                          response="\n\n".join(steps), reference="72"))
    return out


def _rate(reward: Any, samples: list[Any], repeats: int = 1) -> dict[str, float]:
    reward.score(samples[:2])  # warm-up: loads the model
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(repeats):
        scores = reward.score(samples)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    errors = sum(s.error is not None for s in scores)
    worst = max((abs(math.fsum(v for *_, v in s.spans) - s.value) for s in scores
                 if s.spans is not None and s.value is not None), default=0.0)
    return {"samples_per_s": len(samples) * repeats / seconds, "errors": errors, "max_sum_error": worst,
            "cpu_busy": cpu_busy(cpu, seconds)}


def throughput(n: int) -> dict[str, dict[str, float]]:
    """Samples per second of each dense source."""
    import torch
    from tests.conformance_cases.model import build_tiny_rm
    from tests.conformance_cases.prm import build_tiny_prm
    from tests.tiny_models import tiny_llama

    import rewardlab
    from rewardlab.models import RewardModel
    from rewardlab.rewards.shaping import EntropySegmenter

    torch.manual_seed(0)
    samples = _samples(n)
    tiny_rm, tiny_prm = build_tiny_rm(), build_tiny_prm()
    root = Path(tempfile.mkdtemp(prefix="dense-bench-"))
    minilm = RewardModel.from_backbone("minilm")
    minilm.save_pretrained(root / "minilm-rm", metadata={"max_length": 256})
    policy = tiny_llama(root / "policy")
    out: dict[str, dict[str, float]] = {}
    plans: list[tuple[str, Any]] = []
    for label, rm in (("tiny-bert", tiny_rm), ("minilm", f"rm:{root / 'minilm-rm'}")):
        plans.append((f"rm (sequence only) [{label}]", rm))
        for method in ("attention", "gradient", "occlusion"):
            plans.append((f"redistribute {method} [{label}]",
                          {"redistribute": {"reward": rm, "method": method, "ig_steps": 16}}))
    plans += [
        ("implicit (sequence only) [tiny-llama]", {f"implicit:{policy}": {"reference": policy}}),
        ("redistribute log_ratio [tiny-llama]",
         {"redistribute": {"reward": {f"implicit:{policy}": {"reference": policy}}, "method": "log_ratio"}}),
        ("shaping, PRM potential [tiny-bert]", {"shaping": {"potential": tiny_prm, "outcome": "math"}}),
        ("bounded_steps delta [tiny-bert]", {"bounded_steps": {"reward": tiny_prm, "mode": "delta"}}),
        ("bounded_steps renorm [tiny-bert]", {"bounded_steps": {"reward": tiny_prm, "mode": "renorm",
                                                                 "outcome": "math"}}),
    ]
    for label, spec in plans:
        reward = rewardlab.load(spec)
        out[label] = _rate(reward, samples)
        reward.close()
        print(f"  {label:<44} {out[label]['samples_per_s']:8.1f} samples/s", flush=True)
    segmenter = EntropySegmenter(policy, quantile=0.9, min_tokens=8)
    segmenter.split(samples[:2])
    start, cpu_start = time.perf_counter(), time.process_time()
    segmenter.split(samples)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    out["entropy segmentation [tiny-llama]"] = {"samples_per_s": len(samples) / seconds, "errors": 0,
                                                "max_sum_error": 0.0, "cpu_busy": cpu_busy(cpu, seconds)}
    return out


def simulate(groups: int, *, size: int = 8, tokens: int = 40, p_wrong: float = 0.02, signal: float = 0.05,
             noise: float = 0.05, seed: int = 0) -> dict[str, dict[str, float]]:
    """Per-token advantage statistics on wrong vs right tokens, sequence vs dense credit (see the module doc)."""
    from rewardlab.dense import residual_split
    from rewardlab.integrations.advantages import grpo_advantages
    from rewardlab.integrations.dense import token_grpo_advantages, token_reinforce_pp_advantages

    rng = np.random.default_rng(seed)
    wrong = rng.random((groups * size, tokens)) < p_wrong
    rewards = (~wrong.any(axis=1)).astype(float)
    mask = np.ones_like(wrong, dtype=float)
    dense = np.zeros_like(mask)
    for i in range(len(rewards)):
        quality = np.where(wrong[i], -signal, signal) + rng.normal(scale=noise, size=tokens)
        dense[i] = residual_split(rewards[i], list(quality))
    ids = [i // size for i in range(len(rewards))]
    variants = {
        "sequence GRPO": np.repeat(np.asarray(grpo_advantages(list(rewards), ids))[:, None], tokens, axis=1),
        "token GRPO (dense, return-to-go)": np.asarray(token_grpo_advantages(dense, mask, ids)),
        "token GRPO (dense, per token)": np.asarray(token_grpo_advantages(dense, mask, ids, return_to_go=False)),
        "token REINFORCE++ (dense)": np.asarray(token_reinforce_pp_advantages(dense, mask)),
    }
    out = {}
    right_in_wrong = ~wrong & wrong.any(axis=1, keepdims=True)
    for name, adv in variants.items():
        out[name] = {"mean_wrong": float(adv[wrong].mean()), "mean_right": float(adv[~wrong].mean()),
                     "var_wrong": float(adv[wrong].var()), "var_right": float(adv[~wrong].var()),
                     "wrong_pushed_down": float((adv[wrong] < 0).mean()),
                     "right_pushed_down": float((adv[~wrong] < 0).mean()),
                     "right_in_wrong_pushed_down": float((adv[right_in_wrong] < 0).mean())}
    return out


def localise(specs: list[str], problems: int, seed: int = 0) -> dict[str, dict[str, float]]:
    """First-error F1 of each dense spec on GSM8K-derived step rows (see the module doc), with chance."""
    import gzip
    import random

    import rewardlab
    from rewardlab.data.steps import gsm8k_step_rows
    from rewardlab.evaluate.process import first_error_f1

    with gzip.open(ROOT.parent / "shared" / "data" / "gsm8k-test.jsonl.gz", "rt", encoding="utf-8") as handle:
        source = [json.loads(line) for line, _ in zip(handle, range(2 * problems), strict=False)]
    val_rows = gsm8k_step_rows(source[:problems // 2], seed=seed, corrupt_fraction=1.0)
    test_rows = gsm8k_step_rows(source[problems // 2:], seed=seed + 1, corrupt_fraction=1.0)

    def predict(steps: list[float] | None, tau: float) -> int | None:
        if not steps:
            return None
        mean = sum(steps) / len(steps)
        return next((k for k, v in enumerate(steps) if v - mean < -tau), -1)

    rng = random.Random(seed)
    labels = [r.label for r in test_rows]
    chance = sum(first_error_f1([rng.randrange(-1, len(r.steps)) for r in test_rows], labels)["f1"] or 0.0
                 for _ in range(50)) / 50
    out: dict[str, dict[str, float]] = {}
    for spec in specs:
        reward = rewardlab.load(json.loads(spec) if spec.strip().startswith("{") else spec)
        val = reward.score([r.sample() for r in val_rows])
        spread = sorted(abs(v - sum(s.steps) / len(s.steps)) for s in val if s.steps for v in s.steps) or [0.0]
        grid = [spread[int(q * (len(spread) - 1))] for q in (0.1, 0.25, 0.5, 0.75, 0.9)]
        tau = max(grid, key=lambda t: first_error_f1([predict(s.steps, t) for s in val],
                                                     [r.label for r in val_rows])["f1"] or 0.0)
        test = reward.score([r.sample() for r in test_rows])
        measured = first_error_f1([predict(s.steps, tau) for s in test], labels)
        out[spec] = {"first_error_f1": measured["f1"] or 0.0, "chance_f1": chance, "tau": tau,
                     "rows": len(test_rows)}
        print(f"  {spec[:70]:<70} F1 {out[spec]['first_error_f1']:.3f} (chance {chance:.3f})", flush=True)
        reward.close()
    return out


def train_localisers(folder: Path, problems: int, steps: int, seed: int = 0) -> list[str]:
    """Train the two models the localisation table needs on GSM8K *train* problems (the table is on test): an
    outcome RM on (gold ≻ one-step-corrupted) solution pairs, and a PRM on the same rows' step labels; both
    all-MiniLM-L6-v2 with the lowest 3 of its 6 layers frozen, `steps` optimizer steps, length 256. Returns the specs
    to localise with."""
    import gzip
    import random

    from rewardlab.data.steps import gsm8k_step_rows
    from rewardlab.train import TrainConfig, train_reward_model
    from rewardlab.types import PreferencePair

    with gzip.open(ROOT.parent / "shared" / "data" / "gsm8k-train.jsonl.gz", "rt", encoding="utf-8") as handle:
        source = [json.loads(line) for line in handle]
    random.Random(seed).shuffle(source)
    rows = gsm8k_step_rows(source[:problems], seed=seed, corrupt_fraction=1.0)
    gold = {r.id: r for r in rows if r.label == -1}
    pairs = [PreferencePair(prompt=r.prompt, chosen="\n\n".join(gold[r.id.removesuffix("-bad")].steps),
                            rejected="\n\n".join(r.steps))
             for r in rows if r.label >= 0 and r.id and r.id.removesuffix("-bad") in gold]
    common: dict[str, Any] = {"backbone": "minilm", "max_steps": steps, "batch_size": 16, "max_length": 256,
                              "freeze_layers": 3, "eval_split": 0.0, "seed": seed, "log_every": 10, "save_every": 0,
                              "warmup_ratio": 0.05}
    runs: tuple[tuple[str, TrainConfig, dict[str, Any]], ...] = (
        ("orm", TrainConfig(objective="pairwise", output=str(folder / "orm"), **common), {"pairs": pairs}),
        ("prm", TrainConfig(objective="process", output=str(folder / "prm"), after_first_error="ignore", **common),
         {"steps": rows}),
    )
    for name, config, data in runs:
        started = time.perf_counter()
        train_reward_model(config, quiet=True, **data)
        print(f"  trained {name} in {time.perf_counter() - started:.0f} s ({len(pairs)} pairs / {len(rows)} rows)",
              flush=True)
    orm = str(folder / "orm")
    return [f"prm:{folder / 'prm'}"] + [json.dumps({"redistribute": {"reward": f"rm:{orm}", "method": method}})
                                         for method in ("attention", "gradient", "occlusion")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--groups", type=int, default=400)
    parser.add_argument("--localise", nargs="*", default=[], help="dense reward specs to localise first errors with")
    parser.add_argument("--localise-problems", type=int, default=100)
    parser.add_argument("--only-localise", action="store_true", help="skip throughput and the simulation")
    parser.add_argument("--train-localisers", metavar="DIR", default=None,
                        help="first train an outcome RM and a PRM on GSM8K train into DIR and localise with them")
    parser.add_argument("--train-problems", type=int, default=600)
    parser.add_argument("--train-steps", type=int, default=100)
    args = parser.parse_args()
    results: dict[str, Any] = json.loads(RESULTS.read_text(encoding="utf-8")) if RESULTS.is_file() else {}
    if args.train_localisers:
        print("training the localisers:", flush=True)
        args.localise = list(args.localise) + train_localisers(Path(args.train_localisers), args.train_problems,
                                                               args.train_steps)
    if args.localise:
        print("first-error localisation:", flush=True)
        results["localisation"] = localise(args.localise, args.localise_problems)
    if args.only_localise:
        RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        return
    print("throughput:", flush=True)
    rates = throughput(args.samples)
    print("GRPO simulation:", flush=True)
    sim = simulate(args.groups)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({**results, "throughput": rates, "simulation": sim,
                                   "machine": describe(),
                                   "settings": {"samples": args.samples, "groups": args.groups, "group_size": 8,
                                                "tokens": 40, "p_wrong": 0.02, "signal": 0.05, "noise": 0.05}},
                                  indent=2) + "\n", encoding="utf-8")
    print(f"\n{describe()}\n| source | samples/s | cores busy | max abs(Σ spans − value) |")
    print("| --- | ---: | ---: | ---: |")
    for label, row in rates.items():
        print(f"| {label} | {row['samples_per_s']:.1f} | {row['cpu_busy']:.0%} | {row['max_sum_error']:.1e} |")
    print("\n| credit | mean A wrong | mean A right | var A wrong | var A right | wrong pushed down "
          "| right pushed down | right tokens of wrong answers pushed down |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, row in sim.items():
        print(f"| {name} | {row['mean_wrong']:+.3f} | {row['mean_right']:+.3f} | {row['var_wrong']:.3f} | "
              f"{row['var_right']:.3f} | {row['wrong_pushed_down']:.1%} | {row['right_pushed_down']:.1%} | "
              f"{row['right_in_wrong_pushed_down']:.1%} |")
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
