"""The generative objective: a causal LM learns to write a judge's answer (an optional critique, then its verdict line)
for judge-format pairs, with the loss on the answer's tokens only.

A judge-format pair (built by `rewardlab.rewards.verdict.judge_training_pairs`, both orders of every preference
pair) is a `PreferencePair` whose `prompt` is the judge's conversation, `chosen` the answer to learn
(`"…critique…\\nWinner: A"`, or the verdict line alone) and `rejected` the same line with the wrong verdict
(`"Winner: B"`); `metadata["verdict"]` names the right one. For a `pyes` judge (`TrainConfig.judge_mode`) the pairs
are single responses answered `Yes` or `No`, and a source pair's chosen and rejected response are its two examples.
The answer's last word is the verdict: the text before it is tokenized with the rendered conversation (as the
judge's logits mode renders `…Winner: `) and the verdict word after it, so training sees the tokens `judge:PATH`
reads.

The unit of training is a source pair: its two orders, or its two responses (`metadata["pair"]` and
`metadata["order"]`, as `judge_training_pairs` writes them) always sit in the same micro-batch, so a batch never
teaches one order without the other. With `swap_consistency` = c > 0 the loss adds `c · mean(((m₁ − m₂) / 2)²)` over
those pairs, where `mᵢ` is the right verdict's logit minus the wrong one's in order i: `(m₁ − m₂) / 2` is the
judge's position bias on that pair (the part of its verdict logit that follows the slot, not the answer), and a
judge whose verdict flips with the order has it larger than its content margin `(m₁ + m₂) / 2`. Logged and held-out
accuracy: the verdict logit beats the wrong verdict's at the verdict position (teacher-forced: for verdict-only
answers this is the judge's logits mode exactly); held-out loss: the cross-entropy of the two verdicts there. A
pairwise judge's held-out metrics also give its position consistency (the same response named in both orders) and
first-position rate, read from the same verdict logits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rewardlab.train.objectives import BatchLoss
from rewardlab.train.pairs import Autocast
from rewardlab.types import JUDGE_VERDICTS, PreferencePair

if TYPE_CHECKING:
    import torch

    from rewardlab.train.config import TrainConfig
    from rewardlab.train.frozen_cache import FrozenStackCache
    from rewardlab.train.run_data import RunData

__all__ = ["EncodedAnswers", "GenerativeObjective", "encode_answers", "make_generative_objective", "render_prompt",
           "split_verdict", "swap_penalty", "train_generative_judge"]

IGNORE = -100


def split_verdict(answer: str, where: str) -> tuple[str, str]:
    """`(text before the verdict word, the verdict word)`: the verdict is the answer's last whitespace-separated
    word (`"Winner: A"` → `("Winner: ", "A")`, `"Yes"` → `("", "Yes")`)."""
    stripped = answer.rstrip()
    if not stripped:
        raise ValueError(f"{where}: the answer is empty; a judge answer ends with its verdict")
    cut = max(stripped.rfind(" "), stripped.rfind("\n")) + 1
    return stripped[:cut], stripped[cut:]


def render_prompt(tokenizer: Any, conversation: Any) -> str:
    """The conversation as the model's chat template renders it, ready for the assistant's turn (as the local judge
    renders it); a plain string prompt, or a tokenizer without a chat template, joins the texts."""
    if isinstance(conversation, str):
        conversation = [{"role": "user", "content": conversation}]
    if getattr(tokenizer, "chat_template", None):
        return str(tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True))
    return "\n\n".join(str(m["content"]) for m in conversation) + "\n\n"


@dataclass
class EncodedAnswers:
    """Judge-format pairs as token ids: conversation + answer, where the answer starts, where its verdict token is,
    and the right and the wrong verdict's first token."""

    input_ids: list[list[int]] = field(default_factory=list)
    answer_start: list[int] = field(default_factory=list)
    verdict_at: list[int] = field(default_factory=list)
    right: list[int] = field(default_factory=list)
    wrong: list[int] = field(default_factory=list)
    verdict: list[str] = field(default_factory=list)
    """The right verdict's word (`A`, `B`, `Yes`, `No`)."""
    subset: list[str] = field(default_factory=list)
    groups: list[list[int]] = field(default_factory=list)
    """The training units: the examples of one source pair (both orders), or one example alone."""
    truncated_pairs: int = 0

    def __len__(self) -> int:
        return len(self.groups)

    def examples(self, units: Sequence[int]) -> list[int]:
        """The example indices of training units `units`, in order."""
        return [i for unit in units for i in self.groups[unit]]

    def lengths(self) -> list[int]:
        """Tokens per training unit (for length-grouped batches)."""
        return [sum(len(self.input_ids[i]) for i in group) for group in self.groups]

    def forward_rows(self, units: Sequence[int]) -> list[list[int]]:
        """The token rows one forward over `units` runs (for the trainer's token counts)."""
        return [self.input_ids[i] for i in self.examples(units)]

    def token_rows(self) -> list[list[int]]:
        """Every example's token ids plus its verdict tokens (what a resumed run's data fingerprint covers)."""
        return [[*ids, self.right[i], self.wrong[i]] for i, ids in enumerate(self.input_ids)]

    def stats(self) -> dict[str, Any]:
        """Examples, truncated examples and the mean and largest length in tokens."""
        lengths = [len(ids) for ids in self.input_ids]
        return {"examples": len(self.input_ids), "pairs": len(self), "truncated": self.truncated_pairs,
                "mean_tokens": sum(lengths) / len(lengths) if lengths else 0.0, "max_tokens": max(lengths, default=0)}


def _first_token(tokenizer: Any, text: str, where: str) -> int:
    ids = tokenizer.encode(text, add_special_tokens=False)
    if not ids:
        raise ValueError(f"{where}: the verdict {text!r} has no tokens")
    return int(ids[0])


def encode_answers(tokenizer: Any, pairs: Sequence[PreferencePair], *, max_length: int) -> EncodedAnswers:
    """Token ids of judge-format pairs; an example over `max_length` loses conversation tokens from the left (as the
    local judge truncates), never answer tokens; the answer ends with the EOS token."""
    out = EncodedAnswers()
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    unit_of: dict[str, int] = {}
    for k, pair in enumerate(pairs):
        where = f"pair {pair.id or k}"
        if not isinstance(pair.metadata, dict) or pair.metadata.get("verdict") is None:
            raise ValueError(f"{where}: objective 'generative' trains on judge-format pairs (metadata['verdict'] set "
                             "by rewardlab.rewards.verdict.judge_training_pairs); this one has none")
        head, verdict = split_verdict(pair.chosen, where)
        _, other = split_verdict(pair.rejected, where)
        if verdict == other:
            raise ValueError(f"{where}: the chosen and the rejected answer end with the same verdict {verdict!r}")
        prompt = tokenizer.encode(render_prompt(tokenizer, pair.prompt), add_special_tokens=False)
        with_head = tokenizer.encode(render_prompt(tokenizer, pair.prompt) + head, add_special_tokens=False)
        start = min(len(prompt), len(with_head))
        right = _first_token(tokenizer, verdict, where)
        answer_tail = tokenizer.encode(verdict, add_special_tokens=False) + eos
        ids = with_head + answer_tail
        verdict_at = len(with_head)
        if len(ids) > max_length > 0:
            cut = len(ids) - max_length
            if cut >= start:
                raise ValueError(f"{where}: the answer alone ({len(ids) - start} tokens) exceeds max_length="
                                 f"{max_length}")
            ids, start, verdict_at = ids[cut:], start - cut, verdict_at - cut
            out.truncated_pairs += 1
        out.input_ids.append(ids)
        out.answer_start.append(start)
        out.verdict_at.append(verdict_at)
        out.right.append(right)
        out.verdict.append(verdict)
        out.wrong.append(_first_token(tokenizer, other, where))
        out.subset.append(pair.subset or "all")
        source = pair.metadata.get("pair")
        if source is None or pair.metadata.get("order") is None:  # not one order of a pair: a unit alone
            out.groups.append([len(out.input_ids) - 1])
            continue
        if str(source) not in unit_of:
            unit_of[str(source)] = len(out.groups)
            out.groups.append([])
        group = out.groups[unit_of[str(source)]]
        if len(group) >= 2:
            raise ValueError(f"{where}: a third example of source pair {source!r}; a pair has two orders")
        group.append(len(out.input_ids) - 1)
    return out


def _hits(margin: Any) -> Any:
    """1 where the right verdict's logit is above the wrong one's, ½ where they are equal: under bf16 autocast the
    two logits of an undecided judge often round to the same value, and counting that tie as wrong logged a judge
    with no preference at ~0.42, as if it preferred the wrong verdict."""
    return (margin > 0).float() + 0.5 * (margin == 0).float()


@dataclass
class GenerativeObjective:
    """Judge-format pairs → next-token cross-entropy on the answer's tokens (mean per example)."""

    train: EncodedAnswers
    held_out: EncodedAnswers
    pad_id: int
    device: torch.device
    autocast: Autocast
    swap_consistency: float = 0.0
    cache: FrozenStackCache | None = None
    """The hidden states after the model's frozen lower layers, per example (`rewardlab.train.frozen_cache`)."""
    unit: str = "judge pairs"

    def _forward(self, model: Any, data: EncodedAnswers, indices: Sequence[int]) -> tuple[Any, Any]:
        """(per-example answer loss, verdict logit margin right − wrong) for the examples `indices`. Rows are
        left-padded so every answer sits in the last `keep` positions, and the vocabulary projection runs on those
        positions only."""
        import torch

        width = max(len(data.input_ids[i]) for i in indices)
        keep = max(len(data.input_ids[i]) - data.answer_start[i] for i in indices) + 1
        ids = torch.full((len(indices), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(indices), width), dtype=torch.long)
        labels = torch.full((len(indices), keep), IGNORE, dtype=torch.long)
        at = []
        for row, i in enumerate(indices):
            tokens = torch.tensor(data.input_ids[i])
            ids[row, width - len(tokens):] = tokens
            mask[row, width - len(tokens):] = 1
            answer = tokens[data.answer_start[i]:]
            labels[row, keep - len(answer):] = answer
            at.append(keep - (len(tokens) - data.verdict_at[i]) - 1)  # the position whose next token is the verdict
        ids, mask, labels = ids.to(self.device), mask.to(self.device), labels.to(self.device)
        with self.autocast():
            if self.cache is None:
                logits = model(input_ids=ids, attention_mask=mask, keep=keep)
            else:
                which = "train" if data is self.train else "held_out"
                logits = self.cache.forward(model, ids, mask, keep, [(which, i) for i in indices])
        logits = logits[:, :-1].float()
        targets = labels[:, 1:]
        token_loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, ignore_index=IGNORE,
                                                       reduction="none")
        counted = (targets != IGNORE).sum(dim=1).clamp(min=1)
        per_example = token_loss.sum(dim=1) / counted
        rows = torch.arange(len(indices), device=self.device)
        right = torch.tensor([data.right[i] for i in indices], device=self.device)
        wrong = torch.tensor([data.wrong[i] for i in indices], device=self.device)
        verdict_logits = logits[rows, torch.tensor(at, device=self.device)]
        return per_example, verdict_logits[rows, right] - verdict_logits[rows, wrong]

    def batch_loss(self, model: Any, indices: Sequence[int], batch: Sequence[int]) -> BatchLoss:
        examples = self.train.examples(indices)
        per_example, margin = self._forward(model, self.train, examples)
        loss = per_example.mean()
        if self.swap_consistency:
            loss = loss + self.swap_consistency * swap_penalty(margin, self._pair_rows(indices))
        return BatchLoss(loss, len(indices) / len(batch), float(loss.detach()) * len(indices), len(indices),
                         float(_hits(margin).sum()), len(examples))

    def _pair_rows(self, units: Sequence[int]) -> list[tuple[int, int]]:
        """(row of the first order, row of the second) in the micro-batch's rows, for each unit with both orders."""
        rows, at = [], 0
        for unit in units:
            size = len(self.train.groups[unit])
            if size == 2:
                rows.append((at, at + 1))
            at += size
        return rows

    def eval_sums(self, model: Any, indices: Sequence[int], batch_size: int) -> dict[str, Any]:
        """Held-out sums: verdicts ranked right (`correct`), the two-verdict cross-entropy, per subset, margins."""
        import torch

        correct = loss_sum = 0.0
        subsets: dict[str, list[float]] = {}
        margins: list[float] = []
        examples = self.held_out.examples(indices)
        was_training = model.training
        model.eval()
        with torch.no_grad():
            for start in range(0, len(examples), batch_size):
                chunk = examples[start:start + batch_size]
                _, margin = self._forward(model, self.held_out, chunk)
                hits = _hits(margin)
                correct += float(hits.sum())
                loss_sum += float(torch.nn.functional.softplus(-margin).sum())
                for i, hit in zip(chunk, hits.tolist(), strict=True):
                    counts = subsets.setdefault(self.held_out.subset[i], [0.0, 0.0])
                    counts[0] += hit
                    counts[1] += 1
                margins.extend(margin.tolist())
        model.train(was_training)
        return {"correct": correct, "pairs": len(examples), "loss_sum": loss_sum, "subsets": subsets,
                "rewards": margins, "counts": self._order_counts(indices, margins)}

    def _order_counts(self, units: Sequence[int], margins: Sequence[float]) -> list[float]:
        """[pairs shown in both orders, of them those whose verdict names the same response in both, verdicts
        given in those orders, of them those naming the slot shown first, the sum of the pairs' leans] over pairwise
        held-out units (`margins` follows `held_out.examples(units)`). A pair's lean is the mean over its two orders
        of the first slot's verdict logit minus the second's (`rewardlab.evaluate.position_lean`)."""
        counts = [0.0, 0.0, 0.0, 0.0, 0.0]
        at = 0
        for unit in units:
            group = self.held_out.groups[unit]
            if len(group) == 2 and {self.held_out.verdict[i] for i in group} == {"A", "B"}:
                right = [margins[at] > 0, margins[at + 1] > 0]
                counts[0] += 1
                counts[1] += right[0] == right[1]  # right in both, or wrong in both: the same response named
                counts[2] += 2
                counts[3] += sum(hit == (self.held_out.verdict[i] == "A") for hit, i in zip(right, group, strict=True))
                counts[4] += sum(margins[at + k] if self.held_out.verdict[i] == "A" else -margins[at + k]
                                 for k, i in enumerate(group)) / 2
            at += len(group)
        return counts

    def summarise_counts(self, counts: Sequence[float]) -> dict[str, Any]:
        """Position consistency and first-position rate of the held-out verdicts (teacher-forced: the verdict
        logit beats the other one's), as `rewardlab eval` reports them for a judge, and the mean lean to the first
        slot in logits; nothing for a pyes judge."""
        pairs, consistent, verdicts, first, lean = counts
        if not pairs:
            return {}
        return {"eval_position_consistency": consistent / pairs, "eval_first_position_rate": first / verdicts,
                "eval_position_lean": lean / pairs}


def swap_penalty(margin: Any, pairs: Sequence[tuple[int, int]]) -> Any:
    """`mean(((m₁ − m₂) / 2)²)` over `pairs` (rows of one source pair's two orders in `margin`, the right verdict's
    logit minus the wrong one's): the mean squared position bias; 0.0 without pairs."""
    if not pairs:
        return 0.0
    first = margin[[a for a, _ in pairs]]
    second = margin[[b for _, b in pairs]]
    return (((first - second) / 2) ** 2).mean()


def make_generative_objective(tokenizer: Any, data: RunData, max_length: int, pad_id: int, device: torch.device,
                              autocast: Autocast, swap_consistency: float = 0.0,
                              judge_mode: str = "pairwise",
                              cache: FrozenStackCache | None = None) -> GenerativeObjective:
    """The generative objective over a run's judge-format pairs (training and held-out), whose verdicts must be
    `judge_mode`'s (the model card says which mode the judge answers in); `cache` keeps the frozen layers' output."""
    for pair in [*data.train, *data.held_out]:
        verdict = pair.metadata.get("verdict") if isinstance(pair.metadata, dict) else None
        if verdict is not None and verdict not in JUDGE_VERDICTS[judge_mode]:
            raise ValueError(f"pair {pair.id}: verdict {verdict!r} is not a {judge_mode} judge's "
                             f"({' or '.join(JUDGE_VERDICTS[judge_mode])}); set judge_mode to the mode the "
                             "judge-format pairs were built for")
    train = encode_answers(tokenizer, data.train, max_length=max_length)
    if not len(train):
        raise ValueError("objective 'generative': no training pairs")
    return GenerativeObjective(train, encode_answers(tokenizer, data.held_out, max_length=max_length), pad_id,
                               device, autocast, swap_consistency, cache)


def train_generative_judge(config: TrainConfig,
                           judge_format: Callable[[Sequence[PreferencePair]], list[PreferencePair]], *,
                           callbacks: Sequence[Any] = (), quiet: bool = False) -> Any:
    """Train a judge on `config.data` (preference pairs; held-out pairs from `eval_data` or `eval_split`), each set
    turned into judge-format pairs by `judge_format` (e.g. `rewardlab.rewards.verdict.judge_formatter(...)`); returns
    `train_reward_model`'s `TrainResult`."""
    import dataclasses

    from rewardlab.train.run_data import load_run_data
    from rewardlab.train.trainer import train_reward_model

    if config.objective != "generative":
        raise ValueError(f"train_generative_judge needs objective 'generative', got {config.objective!r}")
    # read as preference pairs: the generative-only settings go with the objective (they would not validate)
    as_pairs = dataclasses.replace(config, objective="pairwise", swap_consistency=0.0, judge_mode="pairwise")
    data = load_run_data(as_pairs, None, None, None, None, None, None)
    return train_reward_model(config, pairs=judge_format(data.train), eval_pairs=judge_format(data.held_out),
                              callbacks=callbacks, quiet=quiet)
