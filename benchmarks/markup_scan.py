"""Lazy regex vs one-pass scanner on responses full of unclosed tags, side by side.

Run: `.venv/bin/python benchmarks/markup_scan.py [--sizes 1000 2000 4000 8000] [--quiet]`. Writes
benchmarks/results/markup_scan.json and prints a table. Input: N copies of `<search>` with no closer (what a
degenerate policy emits when it loops); both sides extract every `<search>…</search>` block:
- `re.findall(r"<search>(.*?)</search>", text, re.DOTALL)`, the usual way (quadratic on this input);
- `rewardlab.rewards._markup.tag_blocks(text, "search")`, the scanner the search-agent, format and tool-call
  rewards use (one pass). Both must return the same blocks.
No model FLOPs: beside the ratio (regex seconds / scanner seconds) the table shows how busy the scanner kept the
machine (`cpu_busy`: its CPU seconds / (wall seconds * cores); one Python thread is at most 1 / cores).
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import time
from pathlib import Path

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from _machine import Stopwatch, machine_record, percent
from rewardlab.rewards._markup import tag_blocks

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "markup_scan.json"
LAZY = re.compile(r"<search>(.*?)</search>", re.DOTALL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000, 8000])
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args()
    rows = []
    with Progress(console=Console(stderr=True, quiet=args.quiet), transient=True) as progress:
        task = progress.add_task("unclosed tags", total=len(args.sizes))
        for size in args.sizes:
            text = "<search>" * size
            started = time.perf_counter()
            regex_blocks = LAZY.findall(text)
            regex_s = time.perf_counter() - started
            watch = Stopwatch()
            scanner_blocks = tag_blocks(text, "search")
            scanner_s = watch.stop()
            rows.append({"unclosed_tags": size, "characters": len(text), "lazy_regex_s": round(regex_s, 4),
                         "scanner_s": round(scanner_s, 6), "x_regex": regex_s / scanner_s,
                         "scanner_cpu_busy": watch.busy, "same_result": regex_blocks == scanner_blocks})
            progress.advance(task)
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps({"benchmark": "markup_scan", "python": platform.python_version(), "rows": rows,
                                  **machine_record()}, indent=2) + "\n", encoding="utf-8")
    table = Table(title="extracting <search> blocks from N unclosed tags")
    for column in ("N", "characters", "lazy regex s", "scanner s", "x regex", "scanner CPU busy", "same result"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(str(row["unclosed_tags"]), str(row["characters"]), f"{row['lazy_regex_s']:.3f}",
                      f"{row['scanner_s']:.6f}", f"{row['x_regex']:.0f}", percent(row["scanner_cpu_busy"]),
                      str(row["same_result"]))
    Console().print(table)
    Console().print(machine_record()["machine_peak"], highlight=False)
    Console().print(f"wrote {RESULT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
