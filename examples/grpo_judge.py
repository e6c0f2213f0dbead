"""GRPO with TRL that trains a judge by its own reward: verdict correctness (RM-R1 style), on CPU, with a tiny LM.

The judge reads two answers and must end with `Winner: A` or `Winner: B`. The script
1. makes judge examples with `rewardlab.rewards.verdict.judge_training_pairs`: every preference pair in both
   orders, so the position of the better answer says nothing about the verdict (a short template fits the tiny
   model's 64 positions; a real judge uses the default pairwise template);
2. builds the tiny Llama and character-level tokenizer of `examples/grpo_tiny.py` and warms it up on noisy
   verdicts (right half of the time, the verdict line broken some of the time);
3. runs TRL's `GRPOTrainer` with rewardlab's `verdict` reward (1.0 for the right verdict, 0.1 for a readable wrong
   one, 0 for no verdict) through `rewardlab.integrations.trl.reward_funcs`, the reference being the right letter;
4. prints `step N reward R` per step, then the mean of the first and last tenth of the steps.

    python examples/grpo_judge.py --steps 150
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from grpo_tiny import build_model, build_tokenizer  # the tiny model of the GRPO example

GOOD = ["kind", "calm", "true", "safe", "fair"]
BAD = ["rude", "mean", "fake", "cruel", "vile"]
TEMPLATE = "[user]\nA={response_a} B={response_b}\n"


def judge_examples(tokenizer: Any, count: int, seed: int, template: Path) -> list[tuple[str, str]]:
    """(rendered judge prompt, right verdict letter) for `count` random pairs, each in both orders."""
    from rewardlab import PreferencePair
    from rewardlab.rewards.judge import PairwiseJudge
    from rewardlab.rewards.verdict import judge_training_pairs
    from rewardlab.train.generative import render_prompt

    rng = random.Random(seed)
    pairs = [PreferencePair(prompt="", chosen=rng.choice(GOOD), rejected=rng.choice(BAD)) for _ in range(count)]
    judge = PairwiseJudge(str(template.parent / "model"), mode="pairwise", template=str(template))
    return [(render_prompt(tokenizer, row.prompt), str(row.metadata["verdict"]))
            for row in judge_training_pairs(pairs, judge)]


def warm_up(model: Any, tokenizer: Any, examples: list[tuple[str, str]], *, steps: int, seed: int) -> float:
    """Supervised steps on noisy verdicts (loss on the answer only); returns the last loss."""
    import torch

    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    loss_value = float("nan")
    for _ in range(steps):
        rows = []
        for prompt, _ in rng.sample(examples, 32):
            said = rng.choice("AB")
            answer = f"Winner: {said}" if rng.random() < 0.8 else f"Win {said}"
            prompt_ids = tokenizer(prompt)["input_ids"]
            answer_ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
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
    """Make judge examples, warm up, run GRPO on verdict correctness for `--steps` steps, print the curve."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150, help="GRPO steps (default 150)")
    parser.add_argument("--warmup-steps", type=int, default=60, help="supervised warm-up steps (default 60)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--output-dir", default=None, help="TRL's output folder (default: a temporary one)")
    args = parser.parse_args(argv)

    import torch
    from datasets import Dataset
    from transformers import PrinterCallback, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rewardlab.integrations.trl import reward_funcs

    torch.set_num_threads(max(1, args.threads))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="grpo-judge-") as scratch:
        out_dir = Path(args.output_dir or scratch)
        tokenizer = build_tokenizer(out_dir / "tokenizer")
        model = build_model(tokenizer, args.seed)
        model.save_pretrained(str(out_dir / "model"))  # the folder the judge-format builder names
        tokenizer.save_pretrained(str(out_dir / "model"))
        template = out_dir / "pairwise-toy.txt"
        template.write_text(TEMPLATE, encoding="utf-8")
        examples = judge_examples(tokenizer, 1024, args.seed, template)
        loss = warm_up(model, tokenizer, examples, steps=args.warmup_steps, seed=args.seed)
        print(f"warm-up: {args.warmup_steps} supervised steps, last loss {loss:.3f}", flush=True)

        dataset = Dataset.from_dict({"prompt": [p for p, _ in examples], "reference": [v for _, v in examples]})
        funcs, weights = reward_funcs("verdict")
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

        trainer = GRPOTrainer(model=model, reward_funcs=funcs, args=config, train_dataset=dataset,
                              processing_class=tokenizer, callbacks=[PrintCurve()])
        trainer.remove_callback(PrinterCallback)
        trainer.train()

    if curve:
        tenth = max(1, len(curve) // 10)
        first = sum(r for _, r in curve[:tenth]) / tenth
        last = sum(r for _, r in curve[-tenth:]) / tenth
        print(f"mean reward: first {tenth} steps {first:.4f}, last {tenth} steps {last:.4f} (max 1.0); "
              f"{time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
