"""Episodes written by hand for the episode-reward, per-turn credit and rescore tests."""

from __future__ import annotations

from typing import Any

from rewardlab.types import Episode, ToolCall, Turn


def assistant(content: str = "", *calls: tuple[str, dict[str, Any], str | None]) -> Turn:
    """An assistant turn with its calls given as (name, arguments, result)."""
    return Turn(role="assistant", content=content,
                tool_calls=[ToolCall(name=n, arguments=a, id=f"c{i}", result=r) for i, (n, a, r) in enumerate(calls)])


def episode(*turns: Turn, reference: Any = "42", question: str = "What is 6 x 7?") -> Episode:
    """A done episode: a user question, then `turns`."""
    return Episode(turns=[Turn(role="user", content=question), *turns], reference=reference, status="done")


def submitted(answer: str, *earlier: Turn, reference: Any = "42") -> Episode:
    """`earlier` turns, then a turn that submits `answer`."""
    return episode(*earlier, assistant("", ("submit", {"answer": answer}, "submitted")), reference=reference)
