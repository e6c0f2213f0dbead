"""A Reward Report is read by people: text from monitor records and specs (which a policy's outputs or a shared
run folder can shape) must not open tags in the HTML page, add rows to the Markdown tables or close its fences."""

from __future__ import annotations

import json
import re
from pathlib import Path

from rewardlab.evaluate.reward_report import build_reward_report, render_html, render_markdown

HOSTILE = ["</script><script>alert(1)</script>", "a | b | c", "line\n| forged | 99 | 1 | 1 |", "<img src=x onerror=1>"]


def hostile_report(tmp_path: Path) -> dict[str, object]:
    records = tmp_path / "m.jsonl"
    records.write_text("".join(json.dumps({"step": s, "reward": 0.1 * s, "flags": HOSTILE}) + "\n"
                               for s in (1, 2, 3)), encoding="utf-8")
    spec = {"regex": {"pattern": "```\n</pre><script>x</script>"}}
    return build_reward_report(spec, monitor=[records])


def test_html_escapes_every_hostile_string(tmp_path: Path) -> None:
    page = render_html(hostile_report(tmp_path))
    assert "<script>alert" not in page and "<script>x" not in page and "<img" not in page
    assert page.count("</script>") == 1  # only the embedded report JSON's own closing tag
    assert "&lt;img src=x onerror=1&gt;" in page


def test_markdown_table_rows_stay_one_per_flag(tmp_path: Path) -> None:
    markdown = render_markdown(hostile_report(tmp_path))
    flag_rows = [line for line in markdown.splitlines() if re.match(r"^\| .* \| 3 \| 1 \| 3 \|$", line)]
    assert len(flag_rows) == len(HOSTILE)  # every flag on its own row, none split or forged
    assert not any(line.startswith("| forged") for line in markdown.splitlines())
    assert "a \\| b \\| c" in markdown


def test_a_spec_with_backticks_cannot_close_its_fence(tmp_path: Path) -> None:
    markdown = render_markdown(hostile_report(tmp_path))
    assert "````json" in markdown  # the fence is longer than the spec's run of three backticks
