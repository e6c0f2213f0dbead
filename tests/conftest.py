"""Shared fixtures: the real data folder (skip when absent) and tiny random models built from configs."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data` beside the project; tests that need it skip with a clear reason when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data folder {SHARED_DATA} is absent (it lives in ../shared/data beside the project)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def tiny_backbones(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Tiny random BERT, Llama and GPT-2 folders (model + tokenizer), built once per session: name → folder."""
    from tests.tiny_models import build_all

    return build_all(tmp_path_factory.mktemp("tiny-backbones"))
