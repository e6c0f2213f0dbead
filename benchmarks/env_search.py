"""The search environment's retrievers on the real abstracts corpus: queries per second and recall@k, BM25 vs dense.

Run: `.venv/bin/python benchmarks/env_search.py [--repeat N] [--quiet]`. Reads ../shared/data/reward-abstracts.jsonl.gz
(372 abstracts), generates the questions by the acronym rule (rewardlab.envs.search_tasks), writes
benchmarks/results/env_search.json and prints a table.

Workload: every generated question, as the policy would type it ("What does the acronym SDPO stand for?"), sent to
each retriever (BM25 via bm25s; dense cosine on the embedded all-MiniLM-L6-v2, fp32, corpus embedded once) one query
at a time, `--repeat` times. queries/s is the first pass (every query new); `repeat_queries_per_second` the later
passes, which the dense retriever's query cache answers. recall@k = the fraction of questions whose evidence
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
from _machine import (  # noqa: E402
    cpu_busy,
    describe,
    forward_flops,
    load_note,
    matmul_params,
    other_work,
    percent,
    threads_label,
    utilisation,
)

CORPUS = ROOT.parent / "shared" / "data" / "reward-abstracts.jsonl.gz"
RESULT = ROOT / "benchmarks" / "results" / "env_search.json"
KS = (1, 3, 5)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def dense_utilisation(retriever: Any, documents: Any, queries: list[str], build: float, wall: float
                      ) -> dict[str, Any]:
    """The dense retriever's utilisation of the fp32 peak: model FLOPs = 2 x MiniLM's non-embedding parameters x
    the real tokens of the corpus, over the build's wall seconds (queries are a few tokens each and hit the
    query cache on repeats: their figure is queries/s, not a utilisation)."""
    encoder = getattr(retriever, "encoder", None)
    if encoder is None:
        return {}
    import torch

    model, tokenizer = encoder.load()
    params = matmul_params(model)

    def tokens(texts: list[str]) -> int:
        return sum(len(ids) for ids in tokenizer(texts, truncation=True, max_length=encoder.max_length,
                                                 split_special_tokens=True)["input_ids"])

    label = threads_label(torch.get_num_threads())
    corpus = forward_flops(params, tokens([d.full_text() for d in documents]))
    return {"build_utilisation": round(utilisation(corpus, build, "fp32", label), 4),
            "utilisation_against": f"fp32 matmul peak, {label} thread(s)",
            "query_tokens_mean": round(tokens(queries) / len(queries), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="passes over the questions per retriever")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args()
    if not CORPUS.is_file():
        raise SystemExit(f"the corpus {CORPUS} is absent (it lives in ../shared/data beside the project)")
    busy_at_start = other_work()
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
            first_pass = 0.0
            for rep in range(args.repeat):
                if rep == 1:
                    first_pass = time.perf_counter() - wall0
                for task in tasks:
                    hits = retriever.search(str(task.prompt), max(KS))
                    if rep == 0:
                        ids = [h.document.id for h in hits]
                        for k in KS:
                            found[k] += int(task.reference["evidence_ids"][0] in ids[:k])
                    progress.advance(bar)
            wall, cpu = time.perf_counter() - wall0, _cpu() - cpu0
            first_pass = first_pass or wall
            repeats = {} if args.repeat < 2 else {
                "repeat_queries_per_second": round((args.repeat - 1) * len(tasks) / (wall - first_pass), 1)}
            rows.append({"retriever": kind, "build_seconds": round(build, 3),
                         "queries_per_second": round(len(tasks) / first_pass, 1), **repeats,
                         "cpu_busy": round(cpu_busy(cpu, wall), 3),
                         **{f"recall@{k}": round(found[k] / len(tasks), 4) for k in KS},
                         **dense_utilisation(retriever, documents, [str(t.prompt) for t in tasks], build, wall)})
    ratio = rows[0]["queries_per_second"] / rows[1]["queries_per_second"]
    result = {"machine": describe(), "note": load_note(busy_at_start) + "; read the ratio",
              "corpus_documents": len(documents), "questions": len(tasks), "repeat": args.repeat,
              "bm25_over_dense_queries_per_second": round(ratio, 1), "rows": rows}
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    table = Table(title=f"search retrievers: {len(tasks)} acronym questions over {len(documents)} abstracts")
    for column in ("retriever", "build s", "build util (fp32)", "queries/s (new)", "queries/s (repeats)",
                   *(f"recall@{k}" for k in KS)):
        table.add_column(column, justify="right")
    for row in rows:
        util = row.get("build_utilisation")
        table.add_row(row["retriever"], f"{row['build_seconds']:.2f}", "–" if util is None else percent(util),
                      f"{row['queries_per_second']:.0f}", f"{row.get('repeat_queries_per_second', 0):.0f}",
                      *(f"{row[f'recall@{k}']:.3f}" for k in KS))
    console = Console()
    console.print(table)
    console.print(f"BM25 answers {ratio:.1f}x the new queries per second of dense; {describe()}")


if __name__ == "__main__":
    main()
