"""The process objective of the trainer (`TrainConfig.objective = "process"`): step-labelled rows tokenised once,
a per-step binary cross-entropy at each step's last token (hard PRM800K labels or soft Math-Shepherd labels as
targets in [0, 1]), and held-out step accuracy plus ProcessBench first-error F1 counts. The loop, batching,
checkpoints and resume are the pairwise trainer's own (`rewardlab.train.trainer`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rewardlab.types import StepRow

if TYPE_CHECKING:
    import torch


@dataclass
class EncodedStepRows:
    """Step rows tokenised once: ids, step-end positions, per-step targets, first-error labels, subsets."""

    input_ids: list[list[int]] = field(default_factory=list)
    step_ends: list[list[int]] = field(default_factory=list)
    targets: list[list[float]] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    subset: list[str] = field(default_factory=list)
    truncated_pairs: int = 0
    prompt_tokens_dropped: int = 0
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.input_ids)

    def lengths(self) -> list[int]:
        """Tokens per row (for length-grouped batches)."""
        return [len(ids) for ids in self.input_ids]

    def forward_rows(self, indices: Sequence[int]) -> list[list[int]]:
        """The token-id rows one forward over the rows `indices` reads."""
        return [self.input_ids[i] for i in indices]

    def steps_in(self, indices: Sequence[int]) -> int:
        """Labelled steps in the rows `indices`."""
        return sum(len(self.step_ends[i]) for i in indices)

    def stats(self) -> dict[str, int]:
        """Rows, steps, rows whose prompt was cut, tokens cut, rows skipped (steps longer than max_length)."""
        return {"rows": len(self), "steps": self.steps_in(range(len(self))), "truncated_rows": self.truncated_pairs,
                "prompt_tokens_dropped": self.prompt_tokens_dropped, "skipped_too_long": self.skipped}


def encode_step_rows(tokenizer: Any, rows: Sequence[StepRow], *, max_length: int, join: str,
                     after_error: str = "zero") -> EncodedStepRows:
    """Tokenise every row once (`rewardlab.models.prm.encode_steps`); rows whose steps alone exceed `max_length`
    are skipped and counted; steps without a target (`after_error="ignore"`) are not read."""
    from rewardlab.data.steps import step_targets
    from rewardlab.models.prm import StepsTooLong, encode_steps

    out = EncodedStepRows()
    for index, row in enumerate(rows):
        prompt = row.sample().prompt_text()
        try:
            encoded = encode_steps(tokenizer, prompt, row.steps, max_length=max_length, join=join)
        except StepsTooLong:
            out.skipped += 1
            continue
        except ValueError as error:
            raise ValueError(f"step row {index} (id {row.id!r}): cannot encode: {error}") from error
        targets = step_targets(row, after_error=after_error)
        out.input_ids.append(encoded.input_ids)
        out.step_ends.append([e for e, t in zip(encoded.step_ends, targets, strict=True) if t is not None])
        out.targets.append([float(t) for t in targets if t is not None])
        out.labels.append(row.label)
        out.subset.append(row.subset or "all")
        if encoded.prompt_tokens_dropped:
            out.truncated_pairs += 1
            out.prompt_tokens_dropped += encoded.prompt_tokens_dropped
    return out


def _batch_tensors(data: EncodedStepRows, indices: Sequence[int], pad_id: int, device: torch.device
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Padded ids and mask, a [B, L] mask of the read positions and their targets."""
    import torch

    from rewardlab.data.encoding import pad_sequences

    ids, mask = pad_sequences([data.input_ids[i] for i in indices], pad_id)
    read = torch.zeros_like(ids, dtype=torch.bool)
    targets = torch.zeros(ids.shape, dtype=torch.float32)
    for row, i in enumerate(indices):
        for position, target in zip(data.step_ends[i], data.targets[i], strict=True):
            read[row, position] = True
            targets[row, position] = target
    return ids.to(device), mask.to(device), read.to(device), targets.to(device)


def step_batch_loss(model: Any, data: EncodedStepRows, indices: Sequence[int], pad_id: int, device: torch.device,
                    autocast: Callable[[], contextlib.AbstractContextManager[Any]]
                    ) -> tuple[torch.Tensor, float, int]:
    """(mean per-step BCE over the rows `indices`, steps predicted on the right side of 0.5, steps counted)."""
    import torch

    from rewardlab.models.prm import step_bce_loss
    from rewardlab.train.engine import phase

    with phase("data"):
        ids, mask, read, targets = _batch_tensors(data, indices, pad_id, device)
    with autocast():
        logits = model(ids, mask).float()
    loss = step_bce_loss(logits, targets, read)
    with torch.no_grad():
        hits = float(((logits[read] > 0) == (targets[read] >= 0.5)).sum())
    return loss, hits, int(read.sum())


def held_out_step_sums(model: Any, data: EncodedStepRows, *, pad_id: int, device: torch.device, batch_size: int = 64,
                       autocast: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
                       indices: Sequence[int] | None = None, threshold: float = 0.5) -> dict[str, Any]:
    """Held-out sums that processes can add: step accuracy (`correct`/`pairs` = steps), `loss_sum`, per-subset
    step counts, the step probabilities (`rewards`) and ProcessBench first-error counts (`counts`)
    = [erroneous hit, erroneous, correct hit, correct] (prediction: first step below `threshold`)."""
    import torch

    from rewardlab.evaluate.process import first_error_prediction
    from rewardlab.models.prm import step_bce_loss

    autocast = autocast or contextlib.nullcontext
    chosen = list(range(len(data))) if indices is None else list(indices)
    correct = loss_sum = 0.0
    counted = 0
    subsets: dict[str, list[float]] = {}
    probabilities: list[float] = []
    first_error = [0.0, 0.0, 0.0, 0.0]
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for start in range(0, len(chosen), batch_size):
            chunk = chosen[start : start + batch_size]
            ids, mask, read, targets = _batch_tensors(data, chunk, pad_id, device)
            with autocast():
                logits = model(ids, mask).float()
            n = int(read.sum())
            loss_sum += float(step_bce_loss(logits, targets, read)) * n
            probs = torch.sigmoid(logits)
            for row, i in enumerate(chunk):
                p = [float(probs[row, pos]) for pos in data.step_ends[i]]
                probabilities.extend(p)
                hits = sum((pi >= threshold) == (t >= 0.5) for pi, t in zip(p, data.targets[i], strict=True))
                correct += hits
                counted += len(p)
                bucket = subsets.setdefault(data.subset[i], [0.0, 0.0])
                bucket[0] += hits
                bucket[1] += len(p)
                prediction = first_error_prediction(p, threshold)
                if data.labels[i] == -1:
                    first_error[3] += 1
                    first_error[2] += prediction == -1
                else:
                    first_error[1] += 1
                    first_error[0] += prediction == data.labels[i]
    if was_training:
        model.train()
    return {"correct": correct, "pairs": counted, "loss_sum": loss_sum, "subsets": subsets,
            "rewards": probabilities, "counts": first_error}


def first_error_summary(counts: Sequence[float]) -> dict[str, float | None]:
    """ProcessBench F1 from summed [erroneous hit, erroneous, correct hit, correct] counts."""
    err_hit, err_total, ok_hit, ok_total = counts
    acc_err = err_hit / err_total if err_total else None
    acc_ok = ok_hit / ok_total if ok_total else None
    f1 = None
    if acc_err is not None and acc_ok is not None:
        f1 = 0.0 if acc_err + acc_ok == 0 else 2 * acc_err * acc_ok / (acc_err + acc_ok)
    return {"eval_first_error_f1": f1, "eval_accuracy_erroneous": acc_err, "eval_accuracy_correct": acc_ok}


def read_step_rows(source: str, *, limit: int | None) -> tuple[list[StepRow], dict[str, Any]]:
    """Step rows from a JSONL file with a small report (rows read)."""
    from rewardlab.data.steps import load_step_rows

    rows = load_step_rows(source, limit=limit)
    if not rows:
        raise ValueError(f"{source}: no step-labelled rows")
    return rows, {"rows": len(rows)}
