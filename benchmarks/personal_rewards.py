"""Personalised rewards on a simulated population: per-user accuracy against one-size-fits-all as pairs per user grow.

Run: `.venv/bin/python benchmarks/personal_rewards.py [--users 40] [--seeds 5]` (~1 min). Writes
benchmarks/results/personal_rewards.json and prints a table.

Responses are real: the 1,800 HH-RLHF harmless pairs in ../shared/data (each pair's two final assistant turns).
Features are real rewards scored on them: `length` (the response's length), `refusal` (a regex for apologies and
refusals) and `directive` (a regex for advice and instructions). Users are simulated, as the issue asks: each
user's true weights over the standardised features are the population mean (+1 length, −1 refusal, +0.5
directive) plus Gaussian noise (σ = 1.5), so users weight the same features differently, some with opposite signs;
each labels pairs by Bradley-Terry on its own weights (the label is a coin with P = σ(w·Δz), so even the true
weights do not reach 100 %). For each number n of labelled pairs per user: `fit_personal_weights` on the n pairs of
every user (population and per-user weights, empirical-Bayes prior), then per-user accuracy on 100 held-out pairs
per user, for the personal weights, the population weights (one size fits all, fitted on the same pairs) and the
oracle (the user's true weights). Mean ± std over seeds (each seed: new users, new splits).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data" / "hh-rlhf-harmless-1800.jsonl.gz"
RESULTS = ROOT / "benchmarks" / "results" / "personal_rewards.json"
FEATURES = {
    "length": "length",
    "refusal": {"regex": {"pattern": r"(?i)\b(sorry|I can(no|')t|I won't|unable to|not able to|I don't think)"}},
    "directive": {"regex": {"pattern": r"(?i)\b(you (can|should|could|might)|try |here are|first,|step)"}},
}
MEAN = np.array([1.0, -1.0, 0.5])
SPREAD = 1.5


def last_turn(dialogue: str) -> str:
    """The final assistant turn of an HH dialogue."""
    return dialogue.rsplit("\n\nAssistant:", 1)[-1].strip()


def feature_matrix() -> tuple[np.ndarray, np.ndarray]:
    """(chosen, rejected) feature rows for every HH pair, scored by the real feature rewards."""
    import rewardlab
    from rewardlab import Sample

    with gzip.open(DATA, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    sides: list[list[float]] = []
    for name, spec in FEATURES.items():
        reward = rewardlab.load(spec)
        samples = [Sample(prompt="", response=last_turn(r[k])) for r in rows for k in ("chosen", "rejected")]
        values = [s.trainer_value() for s in reward.score(samples)]
        if any(v is None for v in values):
            raise RuntimeError(f"feature {name} failed on some responses")
        sides.append([float(v) for v in values])  # type: ignore[arg-type]
        reward.close()
    matrix = np.array(sides).T  # (2 * pairs, features)
    return matrix[0::2], matrix[1::2]


def _accuracy(weights: list[np.ndarray], tests: list[tuple[int, np.ndarray, np.ndarray]]) -> float:
    """Share of held-out pairs each user's weights order as the user labelled them (a tie counts one half)."""
    margins = [weights[u] @ (win - lose) for u, win, lose in tests]
    return float(np.mean([1.0 if m > 0 else 0.5 if m == 0 else 0.0 for m in margins]))


def run(users: int, seeds: int, sizes: list[int], held_out: int) -> dict[str, Any]:
    """Accuracy per (n pairs per user, weights) over seeds."""
    from rewardlab.rewards.personal import fit_personal_weights

    a, b = feature_matrix()
    both = np.vstack([a, b])
    z_scale = both.std(axis=0)
    out: dict[str, Any] = {}
    for n in sizes:
        runs: dict[str, list[float]] = {"personal": [], "one_size": [], "oracle": []}
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            truth = MEAN + SPREAD * rng.normal(size=(users, len(FEATURES)))
            chosen, rejected, who = [], [], []
            tests: list[tuple[int, np.ndarray, np.ndarray]] = []
            for u in range(users):
                picks = rng.choice(len(a), size=n + held_out, replace=False)
                diffs = (a[picks] - b[picks]) / z_scale
                first = rng.random(len(picks)) < 1 / (1 + np.exp(-(diffs @ truth[u])))
                for k, i in enumerate(picks):  # the user's label decides which side is "chosen"
                    win, lose = (a[i], b[i]) if first[k] else (b[i], a[i])
                    if k < n:
                        chosen.append(win), rejected.append(lose), who.append(f"u{u}")
                    else:
                        tests.append((u, win, lose))
            if n:
                doc = fit_personal_weights(chosen, rejected, who, list(FEATURES))
                scale = np.array(doc["scale"])
                personal = {int(k[1:]): np.array(w) / scale for k, w in doc["users"].items()}
                population = np.array(doc["population"]) / scale
            else:  # no labels at all: nothing to learn, every user gets a coin (0.5)
                personal, population = {}, np.zeros(len(FEATURES))


            per_user = {"personal": [personal.get(u, population) for u in range(users)],
                        "one_size": [population] * users, "oracle": [truth[u] / z_scale for u in range(users)]}
            for name, weights in per_user.items():
                runs[name].append(_accuracy(weights, tests))
        out[str(n)] = {k: {"mean": float(np.mean(v)), "std": float(np.std(v))} for k, v in runs.items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--held-out", type=int, default=100)
    parser.add_argument("--sizes", default="0,2,4,8,16,32,64")
    args = parser.parse_args()
    if not DATA.is_file():
        print(f"skipped: {DATA} is absent", file=sys.stderr)
        return
    started = time.perf_counter()
    sizes = [int(x) for x in args.sizes.split(",")]
    curve = run(args.users, args.seeds, sizes, args.held_out)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"curve": curve, "settings": {
        "users": args.users, "seeds": args.seeds, "held_out_per_user": args.held_out, "features": list(FEATURES),
        "population_mean": MEAN.tolist(), "user_spread": SPREAD, "seconds": round(time.perf_counter() - started, 1)}},
        indent=2) + "\n", encoding="utf-8")
    print(f"\nper-user held-out accuracy ({args.users} simulated users, {args.seeds} seeds, mean ± std)\n")
    print("| pairs per user | personal | one size fits all | oracle (true weights) |\n| ---: | ---: | ---: | ---: |")
    for n, row in curve.items():
        cells = " | ".join(f"{row[k]['mean']:.3f} ± {row[k]['std']:.3f}" for k in ("personal", "one_size", "oracle"))
        print(f"| {n} | {cells} |")
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
