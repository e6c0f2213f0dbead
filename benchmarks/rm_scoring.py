"""`rm:` scoring on real HH-RLHF dialogues with the MiniLM backbone: length-sorted batches vs input order vs one by one.

Run: `.venv/bin/python benchmarks/rm_scoring.py [--pairs 32] [--max-length 256] [--batch-size 16]`.
Writes benchmarks/results/rm_scoring.json and prints a table. The reward head is random (seeded): the point is
throughput, padding and exactness, not accuracy. "model only" rows time the forward passes on pre-encoded
samples; the end-to-end row adds `encode_sample` (chat rendering + truncation) as `rm:` does. Every mode must
give the same scores (max |diff| is reported).
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

import rewardlab
from rewardlab.data.encoding import encode_sample
from rewardlab.data.preference import load_preferences
from rewardlab.models import RewardModel, pad_sequences

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "hh-rlhf-harmless-1800.jsonl.gz"
RESULTS = ROOT / "benchmarks" / "results" / "rm_scoring.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if not DATA.is_file():
        raise SystemExit(f"real data {DATA} is absent (../shared/data beside the project)")
    samples = [s for pair in load_preferences(DATA, limit=args.pairs) for s in pair.samples()]

    torch.manual_seed(0)
    folder = Path(tempfile.mkdtemp(prefix="rm-bench-")) / "minilm-rm"
    RewardModel.from_backbone("minilm").save_pretrained(folder, metadata={"max_length": args.max_length})
    reward = rewardlab.load({"rm": {"path": str(folder), "batch_size": args.batch_size, "device": "cpu"}})
    model = reward._load()  # type: ignore[attr-defined]
    encoded = [encode_sample(model.tokenizer, s.prompt, s.response, max_length=args.max_length) for s in samples]
    lengths = [len(e.input_ids) for e in encoded]
    segments = model.uses_token_type_ids  # feed BERT segment ids exactly when the model (and so rm:) does

    rows = []
    reward.score(samples[:4])  # warm-up

    start = time.perf_counter()
    end_to_end = [float(s.value) for s in reward.score(samples) if s.value is not None]
    rows.append(("rm: end to end (encode + length-sorted)", time.perf_counter() - start, end_to_end,
                 _padding(sorted(lengths, reverse=True), args.batch_size)))

    start = time.perf_counter()
    sorted_scores = model.score_encoded(encoded, batch_size=args.batch_size).rewards.tolist()
    rows.append(("length-sorted batches (model only)", time.perf_counter() - start, sorted_scores,
                 _padding(sorted(lengths, reverse=True), args.batch_size)))

    start = time.perf_counter()
    in_order: list[float] = []
    with torch.inference_mode():
        for i in range(0, len(encoded), args.batch_size):
            chunk = encoded[i : i + args.batch_size]
            ids, mask = pad_sequences([e.input_ids for e in chunk], model.pad_token_id)
            rows_types = [e.token_type_ids or [0] * len(e.input_ids) for e in chunk]
            types = pad_sequences(rows_types, 0)[0] if segments else None
            in_order.extend(model(ids, mask, types).rewards.tolist())
    rows.append(("input-order batches (model only)", time.perf_counter() - start, in_order,
                 _padding(lengths, args.batch_size)))

    start = time.perf_counter()
    singles: list[float] = []
    with torch.inference_mode():
        for e in encoded:
            types = torch.tensor([e.token_type_ids]) if segments and e.token_type_ids is not None else None
            singles.append(float(model(torch.tensor([e.input_ids]), None, types).rewards[0]))
    rows.append(("one at a time (model only)", time.perf_counter() - start, singles, 0.0))

    table = Table(title=f"rm: scoring, MiniLM-L6 backbone, {len(samples)} HH-RLHF samples, "
                        f"max_length {args.max_length}, batch {args.batch_size}, {args.threads} threads")
    for column in ("mode", "seconds", "samples/s", "padding %", "max |diff| vs one at a time"):
        table.add_column(column)
    results = []
    for name, seconds, scores, padding in rows:
        diff = max(abs(a - b) for a, b in zip(scores, singles, strict=True))
        table.add_row(name, f"{seconds:.2f}", f"{len(samples) / seconds:.1f}", f"{100 * padding:.1f}", f"{diff:.1e}")
        results.append({"mode": name, "seconds": seconds, "samples_per_s": len(samples) / seconds,
                        "padding_fraction": padding, "max_abs_diff_vs_single": diff})
    Console().print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "samples": len(samples), "max_length": args.max_length, "batch_size": args.batch_size,
        "threads": args.threads, "mean_tokens": sum(lengths) / len(lengths), "machine": platform.processor()
        or platform.machine(), "torch": torch.__version__, "results": results,
    }, indent=2) + "\n")
    reward.close()


def _padding(lengths: list[int], batch_size: int) -> float:
    """Fraction of the padded batch cells that are padding when `lengths` are batched in this order."""
    total = pad = 0
    for i in range(0, len(lengths), batch_size):
        chunk = lengths[i : i + batch_size]
        total += max(chunk) * len(chunk)
        pad += max(chunk) * len(chunk) - sum(chunk)
    return pad / total if total else 0.0


if __name__ == "__main__":
    main()
