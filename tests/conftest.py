"""Shared fixtures: the real data folder (skip when absent) and tiny random models built from configs."""

from __future__ import annotations

from collections.abc import Iterator
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


@pytest.fixture(autouse=True)
def _process_wide_state_is_restored() -> Iterator[None]:
    """Tests that run third-party trainers (TRL builds an `Accelerator`; some set torch's thread count) must not
    leak that process-wide state into later tests: accelerate's state singletons are reset and torch's thread
    count restored after each test that touched them."""
    import sys

    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    yield
    torch = sys.modules.get("torch")
    if torch is not None and threads is not None and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    state = sys.modules.get("accelerate.state")
    if state is not None:
        state.AcceleratorState._reset_state(reset_partial_state=True)
