"""Conformance cases for sql, tool_call, think_format and the search-agent rewards."""

from __future__ import annotations

from typing import Any

from rewardlab import Sample

_DB = {
    "schema": "CREATE TABLE city(id INTEGER PRIMARY KEY, name TEXT, country TEXT, population REAL);",
    "rows": {"city": [[1, "Paris", "FR", 2.1], [2, "Lyon", "FR", 0.5], [3, "Berlin", "DE", 3.6]]},
}
SQL = [
    Sample(prompt="French cities", response="SELECT name FROM city WHERE country = 'FR'",
           reference={**_DB, "gold": "SELECT name FROM city WHERE country = 'FR'"}),
    Sample(prompt="French cities", response="```sql\nSELECT name FROM city WHERE country='FR' ORDER BY id DESC;\n```",
           reference={**_DB, "gold": "SELECT name FROM city WHERE country = 'FR'"}),
    Sample(prompt="Cities by size", response="SELECT name FROM city ORDER BY population",
           reference={**_DB, "gold": "SELECT name FROM city ORDER BY population DESC"}),
    Sample(prompt="Drop it", response="DROP TABLE city", reference={**_DB, "gold": "SELECT count(*) FROM city"}),
    Sample(prompt="Count", response="SELEC count(*) FROM city", reference={**_DB, "gold": "SELECT count(*) FROM city"}),
    Sample(prompt="Count", response="SELECT count(*) * 1.0 FROM city",
           reference={**_DB, "gold": "SELECT count(*) FROM city"}),
]

_WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}
_WEATHER = {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}
TOOLS = [
    Sample(prompt="Weather?", response='{"name": "get_weather", "arguments": {"days": 3, "city": "Paris"}}',
           reference={"calls": [_WEATHER], "schema": _WEATHER_SCHEMA}),
    Sample(prompt="Weather?", response='<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}'
           "</tool_call>", reference={"calls": [_WEATHER], "schema": _WEATHER_SCHEMA}),
    Sample(prompt="Weather?", response='{"function": {"name": "get_time", "arguments": {}}}', reference=_WEATHER),
    Sample(prompt="Two calls", response='[{"name": "b", "arguments": {"x": 1}}, {"name": "a", "arguments": {}}]',
           reference=[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": "1"}}]),
    Sample(prompt="Weather?", response="I cannot call tools.", reference=_WEATHER),
    Sample(prompt="Weather?", response='{"name": "get_weather", "arguments": {"city": "Paris", "days": Infinity}}',
           reference={"calls": [_WEATHER], "schema": _WEATHER_SCHEMA}),  # not JSON (issue 16)
    Sample(prompt="Weather?", response='{"name": "get_weather", "arguments": {"city": "Paris", "days": 1' + "0" * 400
           + "}}", reference={"calls": [_WEATHER], "schema": _WEATHER_SCHEMA}),  # a big int: compared exactly
]

THINK = [
    Sample(prompt="2+2?", response="<think>2 and 2 make 4</think>\n<answer>4</answer>"),
    Sample(prompt="2+2?", response="<think></think><answer>4</answer>"),
    Sample(prompt="2+2?", response="The answer is 4."),
    Sample(prompt="2+2?", response="<think>a</think><answer>4</answer><answer>5</answer>"),
    Sample(prompt="2+2?", response="preamble <think>a</think><answer>4</answer>"),
]

_TRAJECTORY = (
    "<think>find it</think><search>capital of France</search>\n"
    '<information>Doc 1(Title: "Paris") Paris is the capital of France.\n'
    'Doc 2(Title: "Lyon") Lyon is a city in France.</information>\n'
    "<search>french capital</search><information>[doc7] Berlin is in Germany.\n"
    "[doc3] The capital of France is Paris.</information>\n<answer>Paris [doc3] [doc9]</answer>"
)
SEARCH = [
    Sample(prompt="Capital of France?", response=_TRAJECTORY,
           reference={"answer": "Paris", "evidence_ids": ["doc3", "doc5"], "evidence_texts": ["Lyon is a city"]}),
    Sample(prompt="Capital of France?", response="<think>I know it</think><answer>Paris</answer>",
           reference={"answer": "Paris", "evidence_ids": ["doc3"]}),
    Sample(prompt="Capital of Spain?", response="<search>spain</search><information><doc id=\"d1\">Madrid is the "
           "capital of Spain.</doc><doc id=\"d2\">Spain is in Europe.</doc></information><answer>Madrid [d1]</answer>",
           reference={"answers": ["Madrid"], "evidence_ids": ["d1"]}),
    Sample(prompt="Capital of Italy?", response="<answer>Rome</answer>",
           reference={"answer": "Rome", "evidence_texts": ["Rome is the capital"]},
           metadata={"retrieved": [{"id": "w1", "text": "Rome is the capital of Italy."}]}),
]

CASES: dict[str, tuple[Any, list[Sample]]] = {
    "sql": ({"sql": {"time_limit": 1.0, "partial_credit": {"executes": 0.1}}}, SQL),
    "tool_call": ("tool_call", TOOLS),
    "think_format": ("think_format", THINK),
    "retrieval": ({"retrieval": {"k": 3}}, SEARCH),
    "search_budget": ({"search_budget": {"budget": 1, "penalty": 0.1, "bonus": 0.2, "answer_weight": 1.0}}, SEARCH),
    "citation": ("citation", SEARCH),
}
