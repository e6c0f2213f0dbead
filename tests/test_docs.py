"""Every ```python block in README.md and docs/ runs: the examples match the code.

Blocks in one document run in order in one namespace, in a temporary working directory. Fence a block
```text (or ```pycon) when it is not meant to run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)

# docs whose examples need heavy resources are marked: they still run in CI, after the fast tests
SLOW_DOCS: set[str] = set()


def doc_files() -> list[Path]:
    pages = [DOCS.parent / "README.md", *sorted(DOCS.glob("*.md"))]
    return [p for p in pages if BLOCK.search(p.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: p.name)
def test_doc_examples_run(doc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if doc.name in SLOW_DOCS and os.environ.get("REWARDLAB_SKIP_SLOW_DOCS"):
        pytest.skip("slow doc examples skipped by REWARDLAB_SKIP_SLOW_DOCS")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"doc_{doc.stem}"}
    for number, block in enumerate(BLOCK.findall(doc.read_text(encoding="utf-8")), start=1):
        code = compile(block, f"{doc.name} (python block {number})", "exec")
        exec(code, namespace)
