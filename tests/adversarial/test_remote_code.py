"""Custom code shipped in a model folder is never run by any loader, even when stdin answers "y".

transformers asks "Do you wish to run the custom code? [y/N]" on stdin when a config's `model_type` is unknown and
its `auto_map` names code in the folder, unless the call says `trust_remote_code=False`; a pipe answering "y" then
runs the folder's Python in the scorer. `rm:` and `prm:` folders are covered in test_model_folders.py; these are
the other doors that load a folder a user names: semantic encoders, implicit rewards, local judges and token
length rewards (each loaded without trust_remote_code=False before).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

EVIL = """
import pathlib
pathlib.Path({marker!r}).write_text("custom code ran")
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer
"""

LOADERS = {
    "semantic": ("bert", "rewardlab.load({'semantic': {'encoder': FOLDER}})"
                         ".score([Sample(prompt='q', response='a b', reference='a c')])"),
    "implicit": ("llama", "rewardlab.load({'implicit': {'policy': FOLDER, 'reference': FOLDER}})"
                          ".score([Sample(prompt='q', response='a b')])"),
    "judge": ("llama", "rewardlab.load({'judge': {'model': FOLDER}}).score([Sample(prompt='q', response='a b')])"),
    "length": ("bert", "rewardlab.load({'length': {'unit': 'tokens', 'tokenizer': FOLDER, 'target': 5}})"
                       ".score([Sample(prompt='q', response='a b')])"),
}


def _plant(folder: Path, marker: Path) -> None:
    (folder / "evil.py").write_text(EVIL.format(marker=str(marker)))
    config = json.loads((folder / "config.json").read_text())
    config["model_type"] = "evil_type"
    config["auto_map"] = {name: "evil.Evil" for name in ("AutoConfig", "AutoModel", "AutoModelForCausalLM")}
    (folder / "config.json").write_text(json.dumps(config))
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    tokenizer_config["auto_map"] = {"AutoTokenizer": [None, "evil.EvilTokenizer"]}
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_no_loader_runs_a_folders_custom_code(tiny_backbones: dict[str, str], tmp_path: Path, loader: str) -> None:
    kind, call = LOADERS[loader]
    folder = tmp_path / "model"
    shutil.copytree(tiny_backbones[kind], folder)
    marker = tmp_path / "PWNED"
    _plant(folder, marker)
    code = ("import sys, rewardlab\nfrom rewardlab import Sample\nFOLDER = sys.argv[1]\n"
            f"try:\n    print([s.error or s.value for s in {call}])\n"
            "except Exception as error:\n    print('refused:', type(error).__name__, str(error)[:200])\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", code, str(folder)], input="y\n" * 8, capture_output=True,
                          text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not marker.exists(), f"{loader}: the folder's custom code ran"
    assert "Do you wish to run the custom code" not in done.stdout + done.stderr
    assert done.stdout.strip(), done.stderr[-2000:]
