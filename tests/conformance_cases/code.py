"""Conformance cases for rewards/code.py: assert-style, call-based and stdin/stdout tests, passing and failing
(hostile samples add crashing programs)."""

from __future__ import annotations

from typing import Any

from rewardlab import Sample

DOUBLE_TESTS = {"tests": ["assert double(2) == 4", "assert double(-1) == -2", "assert double(0) == 0"]}
SUM_IO = {"io": [{"stdin": "1 2\n", "stdout": "3\n"}, {"stdin": "10 -4\n", "stdout": "6"}]}
# LiveCodeBench-style call tests: the expected values stay in the scorer
PAIR_CALLS = {"calls": [{"fn": "Solution().pair", "args": [[1, 2]], "expected": [2, 1]},
                        {"fn": "Solution().pair", "args": [[3, 4]], "kwargs": {}, "expected": [4, 3]}]}

PROGRAMS = [
    Sample(prompt="Write double(x).", response="```python\ndef double(x):\n    return 2 * x\n```",
           reference=DOUBLE_TESTS),
    Sample(prompt="Write double(x).", response="def double(x):\n    return x + 2\n", reference=DOUBLE_TESTS),
    Sample(prompt="Add two numbers from stdin.", response="a, b = map(int, input().split())\nprint(a + b)\n",
           reference=SUM_IO),
    Sample(prompt="Add two numbers from stdin.", response="print(3)", reference=SUM_IO),
    Sample(prompt="Swap a pair.", response="class Solution:\n    def pair(self, p):\n        return (p[1], p[0])\n",
           reference=PAIR_CALLS),
    Sample(prompt="Swap a pair.", response="class Solution:\n    def pair(self, p):\n        return p\n",
           reference=PAIR_CALLS),
]

CASES: dict[str, tuple[Any, list[Sample]]] = {
    "code": ({"code": {"timeout": 5, "cpu_seconds": 2, "workers": 2}}, PROGRAMS),
}
