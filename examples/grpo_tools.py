"""GRPO with tool calling on CPU: TRL's `GRPOTrainer(environment_factory=...)` on rewardlab's `answer` environment.

The toy task: the prompt `repeat: cat` must be answered by calling the environment's tool `submit(answer="cat")`.
The script
1. builds a tiny Llama (2 layers, hidden 64) and a BPE tokenizer trained here on rendered conversations, with the
   Qwen2.5 chat template TRL knows how to parse tool calls from (nothing downloaded);
2. warms it up with supervised steps on noisy tool-calling demonstrations (the right word only some of the time,
   a broken call some of the time), so it calls the tool in roughly the right shape but mostly wrong;
3. runs `GRPOTrainer` with `environment_factory=AnswerTools`: each rollout opens a rewardlab `Session` on its task,
   the policy's `submit` call runs through the session, and the environment's reward (`task_success`, an episode
   reward) is the rollout's reward through `get_reward`; a rollout that never submits is scored as an empty answer;
4. prints `step N reward R` per step and the mean reward of every 20 steps.

    python examples/grpo_tools.py --steps 120
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WORDS = ["cat", "dog", "sun", "map", "red", "box"]
ENVIRONMENT: Any = None  # the rewardlab environment every AnswerTools instance opens sessions on (set in main)


class AnswerTools:
    """rewardlab's `answer` environment as TRL's environment: `reset` opens a session on the row's task, `submit`
    is the tool, `get_reward` the environment's score of the episode."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._session: Any = None

    def reset(self, **row: Any) -> None:
        """Open a fresh session on the row's task (TRL passes the dataset row)."""
        self._session = ENVIRONMENT.new_session(int(row["task"]))

    def submit(self, answer: str) -> str:
        """Submit your final answer; this ends the episode.

        Args:
            answer: the final answer
        """
        if self._session.done:
            return "error: the episode is over"
        return str(self._loop.run_until_complete(self._session.call("submit", {"answer": answer})).text)

    def get_reward(self) -> float:
        """The environment's score of the episode (an episode that never submitted is scored as an empty answer)."""
        if not self._session.done:
            self._loop.run_until_complete(self._session.finish(""))
        value = self._session.score.trainer_value()
        return 0.0 if value is None else float(value)


def tool_schema() -> dict[str, Any]:
    """`submit`'s JSON schema as TRL derives it from the method."""
    from transformers.utils.chat_template_utils import get_json_schema

    return dict(get_json_schema(AnswerTools.submit))


def conversation(word: str, said: str, shape: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(prompt messages, completion messages) of one demonstration; `shape` "call" or "text" (no tool call)."""
    prompt = [{"role": "user", "content": f"repeat: {word}"}]
    if shape == "text":
        return prompt, [{"role": "assistant", "content": said}]
    call = {"type": "function", "function": {"name": "submit", "arguments": {"answer": said}}}
    return prompt, [{"role": "assistant", "content": "", "tool_calls": [call]},
                    {"role": "tool", "name": "submit", "content": "submitted"},
                    {"role": "assistant", "content": "ok"}]


def build_tokenizer(folder: Path) -> Any:
    """A byte-level BPE trained on rendered demonstrations, with the Qwen2.5 chat template TRL parses tool calls of."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen2_5_chat_template

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    scratch = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()),  # type: ignore[no-untyped-call]
                                      eos_token="<|im_end|>")
    scratch.chat_template = qwen2_5_chat_template
    corpus = []
    for word in WORDS:
        prompt, completion = conversation(word, word, "call")
        corpus.append(scratch.apply_chat_template(prompt + completion, tools=[tool_schema()], tokenize=False))
    core.train_from_iterator(corpus * 4, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>", model_max_length=512)
    tokenizer.chat_template = qwen2_5_chat_template
    tokenizer.save_pretrained(str(folder))
    return tokenizer


def build_model(tokenizer: Any, seed: int) -> Any:
    """A tiny random Llama (2 layers, hidden 64) sized to the tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False,
    )
    return LlamaForCausalLM(config)


def demonstration(tokenizer: Any, word: str, rng: random.Random) -> tuple[list[int], list[int]]:
    """(prompt ids, completion ids): the right word 20% of the time, a plain-text answer 15% of the time."""
    said = word if rng.random() < 0.2 else rng.choice(WORDS)
    prompt, completion = conversation(word, said, "text" if rng.random() < 0.15 else "call")
    tools = [tool_schema()]
    head = tokenizer.apply_chat_template(prompt, tools=tools, add_generation_prompt=True, tokenize=False)
    full = tokenizer.apply_chat_template(prompt + completion, tools=tools, tokenize=False)
    if not full.startswith(head):
        raise ValueError("the chat template does not extend the prompt it rendered")
    tail = full[len(head):].rstrip("\n")
    return (tokenizer(head, add_special_tokens=False)["input_ids"],
            tokenizer(tail, add_special_tokens=False)["input_ids"])


def warm_up(model: Any, tokenizer: Any, *, steps: int, seed: int) -> float:
    """Supervised steps on noisy tool-calling demonstrations (loss on the completion only); the last loss."""
    import torch

    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    loss_value = float("nan")
    for _ in range(steps):
        rows = [demonstration(tokenizer, rng.choice(WORDS), rng) for _ in range(16)]
        width = max(len(p) + len(c) for p, c in rows)
        ids = torch.full((len(rows), width), tokenizer.pad_token_id)
        labels = torch.full((len(rows), width), -100)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, (p, c) in enumerate(rows):
            ids[i, : len(p) + len(c)] = torch.tensor(p + c)
            labels[i, len(p): len(p) + len(c)] = torch.tensor(c)
            mask[i, : len(p) + len(c)] = 1
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss_value = float(loss.item())
    return loss_value


def main(argv: list[str] | None = None) -> int:
    """Warm up, run GRPO with the environment for `--steps` steps and print the reward curve."""
    global ENVIRONMENT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120, help="GRPO steps (default 120)")
    parser.add_argument("--warmup-steps", type=int, default=120, help="supervised warm-up steps (default 120)")
    parser.add_argument("--window", type=int, default=20, help="steps per printed mean (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--output-dir", default=None, help="TRL's output folder (default: a temporary one)")
    args = parser.parse_args(argv)

    import torch
    from datasets import Dataset
    from transformers import PrinterCallback, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer  # type: ignore[attr-defined]

    from rewardlab.envs import load_env

    torch.set_num_threads(max(1, args.threads))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="grpo-tools-") as scratch:
        out_dir = Path(args.output_dir or scratch)
        out_dir.mkdir(parents=True, exist_ok=True)
        tasks = out_dir / "tasks.jsonl"
        tasks.write_text("".join(json.dumps({"prompt": f"repeat: {w}", "reference": w}) + "\n" for w in WORDS))
        ENVIRONMENT = load_env({"answer": {"tasks": str(tasks), "reward": "task_success", "max_calls": 2}})
        tokenizer = build_tokenizer(out_dir / "tokenizer")
        model = build_model(tokenizer, args.seed)
        loss = warm_up(model, tokenizer, steps=args.warmup_steps, seed=args.seed)
        print(f"warm-up: {args.warmup_steps} supervised steps, last loss {loss:.3f}", flush=True)

        rng = random.Random(args.seed)
        picks = [rng.randrange(len(WORDS)) for _ in range(4096)]
        dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": f"repeat: {WORDS[i]}"}] for i in picks],
                                     "task": picks})
        config = GRPOConfig(
            output_dir=str(out_dir / "grpo"), max_steps=args.steps, per_device_train_batch_size=32,
            num_generations=8, max_completion_length=64, max_tool_calling_iterations=1, learning_rate=1e-3,
            lr_scheduler_type="constant", warmup_steps=0, temperature=1.0, logging_steps=1, report_to="none",
            save_strategy="no", use_cpu=True, disable_tqdm=True, seed=args.seed, beta=0.0,
        )
        curve: list[tuple[int, float]] = []

        class PrintCurve(TrainerCallback):
            """Print `step N reward R` as TRL logs each step."""

            def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                logs = kwargs.get("logs")
                if logs and "reward" in logs:
                    curve.append((state.global_step, float(logs["reward"])))
                    print(f"step {state.global_step} reward {float(logs['reward']):.4f}", flush=True)

        trainer = GRPOTrainer(model=model, reward_funcs=None, args=config, train_dataset=dataset,
                              processing_class=tokenizer, environment_factory=AnswerTools, callbacks=[PrintCurve()])
        trainer.remove_callback(PrinterCallback)
        trainer.train()

    for start in range(0, len(curve), args.window):
        window = curve[start:start + args.window]
        mean = sum(r for _, r in window) / len(window)
        print(f"steps {window[0][0]}-{window[-1][0]} mean reward {mean:.4f}", flush=True)
    print(f"done in {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
