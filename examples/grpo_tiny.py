"""GRPO with TRL on CPU that learns: a tiny causal LM, a verifiable composite rewardlab reward, a rising curve.

The toy task: the prompt `repeat: cat` asks for `<a>cat</a>`. The script
1. builds a tiny Llama (2 layers, hidden 64) and a character-level tokenizer from a config (nothing downloaded);
2. warms it up briefly with supervised steps on noisy demonstrations (the right word only some of the time, a
   broken tag some of the time), so it answers in roughly the right shape but mostly wrong;
3. runs TRL's `GRPOTrainer` with two rewardlab rewards wired by `rewardlab.integrations.trl.reward_funcs`:
   exact match of the word inside `<a>…</a>` (weight 1.0) and the format `<a>word</a>` (weight 0.5);
4. prints the curve, one line per step: `step N reward R` (R = mean total reward of that step's completions),
   then the mean of the first and last tenth of the steps.

    python examples/grpo_tiny.py --steps 200
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WORDS = ["cat", "dog", "sun", "map", "red", "box"]
REWARD = {
    "sum": {
        "exact": {"reward": {"exact_match": {"answer_tag": "a"}}, "weight": 1.0},
        "format": {"reward": {"format": {"pattern": r"^<a>[a-z]+</a>$", "mode": "match"}}, "weight": 0.5},
    }
}
MAX_REWARD = 1.5


def build_tokenizer(folder: Path) -> Any:
    """A character-level tokenizer (byte-level BPE with no merges) with BOS, EOS and pad tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<unk>", "<s>", "</s>", "<pad>"]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=256 + len(specials), special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator(["repeat: cat <a>dog</a>"], trainer=trainer)
    core.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", bos_token="<s>",
                                        eos_token="</s>", pad_token="<pad>", model_max_length=64)
    tokenizer.save_pretrained(str(folder))
    return tokenizer


def build_model(tokenizer: Any, seed: int) -> Any:
    """A tiny random Llama (2 layers, hidden 64) sized to the tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False,
    )
    return LlamaForCausalLM(config)


def noisy_answer(word: str, rng: random.Random) -> str:
    """A demonstration: the right word 20% of the time, a broken tag 30% of the time."""
    said = word if rng.random() < 0.2 else rng.choice(WORDS)
    roll = rng.random()
    if roll < 0.15:
        return f"{said}</a>"
    if roll < 0.30:
        return f"<a>{said}"
    return f"<a>{said}</a>"


def warm_up(model: Any, tokenizer: Any, *, steps: int, seed: int) -> float:
    """Supervised steps on noisy demonstrations (loss on the answer only); returns the last loss."""
    import torch

    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    loss_value = float("nan")
    for _ in range(steps):
        rows = []
        for _ in range(32):
            word = rng.choice(WORDS)
            prompt_ids = tokenizer(f"repeat: {word} ")["input_ids"]
            answer_ids = tokenizer(noisy_answer(word, rng), add_special_tokens=False)["input_ids"]
            rows.append((prompt_ids, [*answer_ids, tokenizer.eos_token_id]))
        width = max(len(p) + len(a) for p, a in rows)
        ids = torch.full((len(rows), width), tokenizer.pad_token_id)
        labels = torch.full((len(rows), width), -100)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, (p, a) in enumerate(rows):
            ids[i, : len(p) + len(a)] = torch.tensor(p + a)
            labels[i, len(p) : len(p) + len(a)] = torch.tensor(a)
            mask[i, : len(p) + len(a)] = 1
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss_value = float(loss.item())
    return loss_value


def main(argv: list[str] | None = None) -> int:
    """Warm up, run GRPO for `--steps` steps and print the reward curve."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="GRPO steps (default 200)")
    parser.add_argument("--warmup-steps", type=int, default=150, help="supervised warm-up steps (default 150)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--output-dir", default=None, help="TRL's output folder (default: a temporary one)")
    parser.add_argument("--monitor", default=None, metavar="LOG",
                        help="watch the run live: the reward wrapped in `monitor` (an exact-match shadow verifier on "
                             "a quarter of the completions), records appended to LOG, flags in TRL's logs")
    args = parser.parse_args(argv)

    import torch
    from datasets import Dataset
    from transformers import PrinterCallback, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rewardlab.integrations.trl import reward_funcs

    torch.set_num_threads(max(1, args.threads))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="grpo-tiny-") as scratch:
        out_dir = Path(args.output_dir or scratch)
        tokenizer = build_tokenizer(out_dir / "tokenizer")
        model = build_model(tokenizer, args.seed)
        loss = warm_up(model, tokenizer, steps=args.warmup_steps, seed=args.seed)
        print(f"warm-up: {args.warmup_steps} supervised steps, last loss {loss:.3f}", flush=True)

        rng = random.Random(args.seed)
        words = [rng.choice(WORDS) for _ in range(4096)]
        dataset = Dataset.from_dict({"prompt": [f"repeat: {w} " for w in words], "reference": words})
        callbacks: list[Any] = []
        if args.monitor:
            from rewardlab.integrations.monitor import MonitorCallback
            from rewardlab.registry import load

            monitored = load({"monitor": {"reward": REWARD, "shadow": {"exact_match": {"answer_tag": "a"}},
                                          "shadow_rate": 0.25, "log": args.monitor}})
            funcs, weights = reward_funcs(monitored)
            callbacks.append(MonitorCallback(monitored))
        else:
            funcs, weights = reward_funcs(REWARD)
        config = GRPOConfig(
            output_dir=str(out_dir / "grpo"), max_steps=args.steps, per_device_train_batch_size=64,
            num_generations=8, max_completion_length=12, learning_rate=1e-3, lr_scheduler_type="constant",
            warmup_steps=0, temperature=1.0, reward_weights=weights, logging_steps=1, report_to="none",
            save_strategy="no", use_cpu=True, disable_tqdm=True, seed=args.seed, beta=0.0,
        )

        curve: list[tuple[int, float]] = []

        class PrintCurve(TrainerCallback):  # type: ignore[misc]
            """Print `step N reward R` as TRL logs each step."""

            def on_log(self, _args: Any, state: Any, _control: Any, logs: dict[str, Any] | None = None,
                       **_: Any) -> None:
                if logs and "reward" in logs:
                    curve.append((state.global_step, float(logs["reward"])))
                    print(f"step {state.global_step} reward {float(logs['reward']):.4f}", flush=True)
                if logs and "monitor/pass_rate" in logs:  # put there by the MonitorCallback before this one
                    flags = sorted(k.removeprefix("monitor/flag/") for k in logs if k.startswith("monitor/flag/"))
                    print(f"monitor step {state.global_step} pass_rate {logs['monitor/pass_rate']:.3f} "
                          f"flags {','.join(flags) or '-'}", flush=True)

        trainer = GRPOTrainer(model=model, reward_funcs=funcs, args=config, train_dataset=dataset,
                              processing_class=tokenizer, callbacks=[*callbacks, PrintCurve()])
        trainer.remove_callback(PrinterCallback)  # the curve is printed above, not every log dict
        trainer.train()

    if curve:
        tenth = max(1, len(curve) // 10)
        first = sum(r for _, r in curve[:tenth]) / tenth
        last = sum(r for _, r in curve[-tenth:]) / tenth
        print(f"mean reward: first {tenth} steps {first:.4f}, last {tenth} steps {last:.4f} "
              f"(max {MAX_REWARD}); {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
