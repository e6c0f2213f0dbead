"""The search environment's retrievers on the real abstracts corpus: queries per second and recall@k, BM25 vs dense.

Run: `.venv/bin/python benchmarks/env_search.py [--repeat N] [--quiet]`. Reads ../shared/data/reward-abstracts.jsonl.gz
(372 abstracts), generates the questions by the acronym rule (rewardlab.envs.search_tasks), writes
benchmarks/results/env_search.json and prints a table.

Workload: every generated question, as the policy would type it ("What does the acronym SDPO stand for?"), sent to
each retriever (BM25 via bm25s; dense cosine on the embedded all-MiniLM-L6-v2, fp32, corpus embedded once) one query
at a time, `--repeat` times (queries/s is over all of them). recall@k = the fraction of questions whose evidence
abstract is among the top k. Build time = indexing (BM25) or embedding the corpus (dense). Both retrievers run in
this one process, side by side, so their ratio is what to read; absolute figures vary with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from rewardlab.envs.retrieval import build_retriever, read_corpus
from rewardlab.envs.search_tasks import acronym_questions

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _machine import cpu_busy, describe  # noqa: E402

CORPUS = ROOT.parent / "shared" / "data" / "reward-abstracts.jsonl.gz"
RESULT = ROOT / "benchmarks" / "results" / "env_search.json"
KS = (1, 3, 5)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="passes over the questions per retriever")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args()
    if not CORPUS.is_file():
        raise SystemExit(f"the corpus {CORPUS} is absent (it lives in ../shared/data beside the project)")
    documents = read_corpus(CORPUS)
    tasks = acronym_questions(documents)
    rows: list[dict[str, Any]] = []
    with Progress(disable=args.quiet) as progress:
        for kind in ("bm25", "dense"):
            start = time.perf_counter()
            retriever = build_retriever(kind, documents)
            build = time.perf_counter() - start
            found = {k: 0 for k in KS}
            bar = progress.add_task(f"{kind} queries", total=args.repeat * len(tasks))
            wall0, cpu0 = time.perf_counter(), _cpu()
            for rep in range(args.repeat):
                for task in tasks:
                    hits = retriever.search(str(task.prompt), max(KS))
                    if rep == 0:
                        ids = [h.document.id for h in hits]
                        for k in KS:
                            found[k] += int(task.reference["evidence_ids"][0] in ids[:k])
                    progress.advance(bar)
            wall, cpu = time.perf_counter() - wall0, _cpu() - cpu0
            rows.append({"retriever": kind, "build_seconds": round(build, 3),
                         "queries_per_second": round(args.repeat * len(tasks) / wall, 1),
                         "cpu_busy": round(cpu_busy(cpu, wall), 3),
                         **{f"recall@{k}": round(found[k] / len(tasks), 4) for k in KS}})
    ratio = rows[0]["queries_per_second"] / rows[1]["queries_per_second"]
    result = {"machine": describe(), "note": "measured with other work running on the machine; read the ratio",
              "corpus_documents": len(documents), "questions": len(tasks), "repeat": args.repeat,
              "bm25_over_dense_queries_per_second": round(ratio, 1), "rows": rows}
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    table = Table(title=f"search retrievers: {len(tasks)} acronym questions over {len(documents)} abstracts")
    for column in ("retriever", "build s", "queries/s", *(f"recall@{k}" for k in KS)):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(row["retriever"], f"{row['build_seconds']:.2f}", f"{row['queries_per_second']:.0f}",
                      *(f"{row[f'recall@{k}']:.3f}" for k in KS))
    console = Console()
    console.print(table)
    console.print(f"BM25 answers {ratio:.1f}x the queries per second of dense; {describe()}")


if __name__ == "__main__":
    main()
