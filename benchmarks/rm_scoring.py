"""`rm:` scoring speed and exactness on real HH-RLHF dialogues, side by side with Hugging Face in one run.

Run: `.venv/bin/python benchmarks/rm_scoring.py [--pairs 200] [--max-length 256] [--threads 2]`.
Writes benchmarks/results/rm_scoring.json and prints a table. One MiniLM-L6 reward model (random head, seeded,
rewards of order 1) is saved in Hugging Face's `BertForSequenceClassification` layout, then every texts/s row
scores the same chosen and rejected responses from the same token ids (`encode_sample`, as `rm:` does; its time is
included in every row):
- `HF fp32`: `AutoModelForSequenceClassification` in float32, batches of 16 in input order, `inference_mode`;
- `HF bf16 autocast`: the same under `torch.autocast(bfloat16)` (the best a peer does here without our batching);
- `rm: fp32` / `rm: bf16`: `rewardlab.load("rm:...")` (length-sorted batches bounded by a token budget), the
  last row with the backbone's weights loaded in bfloat16 too (`torch_dtype="bfloat16"`).
Pairwise verdicts (chosen scored above rejected) are compared with HF fp32's.
Utilisation (beside the ratio to HF fp32): model FLOPs = 2 * non-embedding parameters * real (unpadded) tokens
scored, per second, over this machine's measured matmul peak (benchmarks/_machine.py; bf16 rows against the bf16
peak, fp32 rows against fp32's, at the thread count used).
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

import rewardlab
from _machine import (
    forward_flops,
    load_note,
    machine_record,
    matmul_params,
    other_work,
    percent,
    threads_label,
    utilisation_fields,
)
from rewardlab.data.encoding import collate_token_ids, encode_sample
from rewardlab.data.preference import load_preferences
from rewardlab.models import RewardModel

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "hh-rlhf-harmless-1800.jsonl.gz"
RESULTS = ROOT / "benchmarks" / "results" / "rm_scoring.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (use 1 on a machine shared with others)")
    parser.add_argument("--repeats", type=int, default=2, help="timed passes per row (the best is kept)")
    parser.add_argument("--model", type=Path, default=None,
                        help="a trained BERT-layout reward model folder (e.g. from `rewardlab train`) instead of the "
                             "random head; pairs are then taken from the end of the file")
    args = parser.parse_args()
    busy_at_start = other_work()
    torch.set_num_threads(args.threads)
    if not DATA.is_file():
        raise SystemExit(f"real data {DATA} is absent (../shared/data beside the project)")
    pairs = list(load_preferences(DATA))
    pairs = pairs[-args.pairs :] if args.model is not None else pairs[: args.pairs]
    samples = [s for pair in pairs for s in pair.samples()]

    if args.model is not None:
        folder = args.model
        model = RewardModel.from_pretrained(folder)
    else:
        torch.manual_seed(0)
        folder = Path(tempfile.mkdtemp(prefix="rm-bench-")) / "minilm-rm"
        model = RewardModel.from_backbone("minilm")
        with torch.no_grad():
            model.head.weight.normal_(std=1.0)
        model.save_pretrained(folder, metadata={"max_length": args.max_length})
    tokenizer = model.tokenizer
    segments = model.uses_token_type_ids  # feed BERT segment ids exactly when the model (and so rm:) does

    from transformers import AutoModelForSequenceClassification

    hf = AutoModelForSequenceClassification.from_pretrained(folder).eval()

    def encode() -> list[object]:
        return [encode_sample(tokenizer, s.prompt, s.response, max_length=args.max_length) for s in samples]

    def hf_scores(autocast: bool) -> list[float]:
        encoded = encode()
        out: list[float] = []
        context = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else torch.autocast("cpu", enabled=False)
        with torch.inference_mode(), context:
            for i in range(0, len(encoded), 16):
                chunk = encoded[i : i + 16]
                batch = collate_token_ids([e.input_ids for e in chunk], tokenizer.pad_token_id,  # type: ignore[attr-defined]
                                          token_type_ids=[e.token_type_ids for e in chunk]  # type: ignore[attr-defined]
                                          if segments else None)
                logits = hf(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                            token_type_ids=batch.token_type_ids).logits
                out.extend(logits[:, 0].float().tolist())
        return out

    def rm_scores(precision: str, **options: str) -> Callable[[], list[float]]:
        reward = rewardlab.load({"rm": {"path": str(folder), "device": "cpu", "precision": precision,
                                        "max_length": args.max_length, **options}})

        def run() -> list[float]:
            return [float(s.value) for s in reward.score(samples)]  # type: ignore[arg-type]

        return run

    modes: list[tuple[str, Callable[[], list[float]]]] = [
        ("HF fp32 (input-order batches of 16)", lambda: hf_scores(False)),
        ("HF bf16 autocast (input-order batches of 16)", lambda: hf_scores(True)),
        ("rm: fp32 (length-sorted, token budget)", rm_scores("fp32")),
        ("rm: bf16 (length-sorted, token budget)", rm_scores("bf16")),
        ("rm: bf16 + bf16 weights (torch_dtype)", rm_scores("bf16", torch_dtype="bfloat16")),
    ]
    for _, run in modes:
        run() if len(samples) <= 64 else None  # warm-up on small runs only (large ones warm up in repeat 1)
    timings: dict[str, float] = {name: float("inf") for name, _ in modes}
    scores: dict[str, list[float]] = {}
    for _ in range(args.repeats):  # interleaved, so machine noise hits every row alike
        for name, run in modes:
            start = time.perf_counter()
            scores[name] = run()
            timings[name] = min(timings[name], time.perf_counter() - start)

    base_name = modes[0][0]
    base = scores[base_name]

    def verdicts(values: list[float]) -> list[bool]:
        return [values[2 * i] > values[2 * i + 1] for i in range(len(values) // 2)]

    base_verdicts = verdicts(base)
    lengths = [len(e.input_ids) for e in encode()]  # type: ignore[attr-defined]
    table = Table(title=f"rm: scoring, MiniLM-L6, {len(samples)} HH-RLHF texts ({len(pairs)} pairs), max_length "
                        f"{args.max_length}, {args.threads} threads, best of {args.repeats}")
    flops = forward_flops(matmul_params(hf), sum(lengths))
    for column in ("mode", "seconds", "texts/s", "x HF fp32", "utilisation", "verdicts = HF fp32", "max |diff|"):
        table.add_column(column)
    results = []
    for name, _ in modes:
        seconds = timings[name]
        agree = sum(a == b for a, b in zip(verdicts(scores[name]), base_verdicts, strict=True)) / len(base_verdicts)
        diff = max(abs(a - b) for a, b in zip(scores[name], base, strict=True))
        speed = len(samples) / seconds
        used = utilisation_fields(flops, seconds, "bf16" if "bf16" in name else "fp32", threads_label(args.threads))
        table.add_row(name, f"{seconds:.2f}", f"{speed:.1f}", f"{timings[base_name] / seconds:.2f}",
                      percent(used["utilisation"]), f"{100 * agree:.1f} %", f"{diff:.1e}")
        results.append({"mode": name, "seconds": seconds, "texts_per_s": speed, **used,
                        "speedup_vs_hf_fp32": timings[base_name] / seconds, "verdict_agreement_vs_hf_fp32": agree,
                        "max_abs_diff_vs_hf_fp32": diff})
    Console().print(table)
    Console().print(machine_record()["machine_peak"], highlight=False)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "model": str(args.model) if args.model is not None else "MiniLM-L6 + random head (seed 0, std 1)",
        "texts": len(samples), "pairs": len(pairs), "max_length": args.max_length, "threads": args.threads,
        "repeats": args.repeats, "mean_tokens": sum(lengths) / len(lengths),
        "machine": platform.processor() or platform.machine(), "torch": torch.__version__, "results": results,
        "note": load_note(busy_at_start), **machine_record(),
    }, indent=2) + "\n")


if __name__ == "__main__":
    main()
