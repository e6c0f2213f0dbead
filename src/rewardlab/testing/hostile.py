"""Hostile inputs for the conformance check: samples built to break rewards, and responses a policy can write."""

from __future__ import annotations

from typing import Any

from rewardlab.types import Sample


def hostile_samples(template: Sample | None = None) -> list[Sample]:
    """Samples built to break rewards: empty, 1 MB, lone surrogates, `None` fields and wrong types."""
    base = template or Sample(prompt="What is 2 + 2?", response="4", reference="4")
    megabyte = "a" * (1 << 20)

    def variant(**changes: Any) -> Sample:
        fields = {"prompt": base.prompt, "response": base.response, "reference": base.reference,
                  "steps": base.steps, "group": base.group, "metadata": dict(base.metadata)}
        fields.update(changes)
        return Sample(**fields)

    return [
        variant(response=""),
        variant(prompt=""),
        variant(prompt="", response="", reference=""),
        variant(response=megabyte),
        variant(response="\ud800 broken \udfff surrogate"),
        variant(prompt="\udcff", response="\x00\x01\x02 control"),
        variant(response=None),
        variant(prompt=None),
        variant(reference=None),
        variant(response=12345),
        variant(response=["not", "a", "string"]),
        variant(prompt={"role": "user"}),
        variant(prompt=[{"role": "user"}, 7]),
        variant(reference={"unexpected": object.__name__}),
        variant(reference=[1, None, "x"]),
        variant(steps=[None, 3]),
        variant(group=float("nan")),
        variant(response="{" * 10_000 + "}" * 10_000),
        variant(response="\\frac{" * 2_000),
    ]


def policy_responses() -> list[str]:
    """Responses a policy can write to dodge a reward: empty, blank, huge, garbage, markup and number floods."""
    return [
        "",
        " \n\t ",
        "a" * (1 << 18),
        "\x00\x01\x02 \ufffd garbage \U0010ffff \u202e",
        "\ud800 lone surrogates \udfff",
        "<think>" * 1_000 + "</answer>" * 1_000,
        "{" * 5_000,
        "\\boxed{" * 500,
        "9" * 5_000,
        "NaN inf -inf 1e999999",
        "null",
        "```python\nimport os\nos._exit(0)\n```",
    ]


def with_response(sample: Sample, response: Any) -> Sample:
    """A copy of `sample` with another response (prompt, reference, steps, group and metadata kept)."""
    return Sample(prompt=sample.prompt, response=response, reference=sample.reference, steps=sample.steps,
                  group=sample.group, metadata=dict(sample.metadata))
