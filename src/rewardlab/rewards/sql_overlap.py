"""Text-to-SQL partial credit from the query text: schema linking and n-gram overlap with the gold query.

Two of the partial rewards of Reasoning-SQL (Pourreza et al. 2025), which pair them with execution accuracy and a
syntax check (the `sql` reward's `match` and `executes`): `schema_linking` is the Jaccard similarity of the schema
items (table and column names: identifiers outside string literals, SQL keywords, functions and aliases left out,
`t.col` counted as `t` and `col`) of the predicted and the gold query, and `ngram` the Jaccard similarity of their
token bigrams (lower-cased; literals are tokens). `metric` picks the value. Only a prediction that is one SQLite
statement that parses earns either (objective `parses`): pasted fragments, two queries or a runaway text score 0.0
(an attack pasting the right query beside a wrong one collected overlap credit before). Parsing prepares the
statement on an empty in-memory database under an authorizer that denies every action, so nothing runs.

Reference: the `sql` reward's shape; only its `gold` query is read. A response without SQL, or with more than
`MAX_SQL_CHARS` characters of it, scores 0.0.
"""

from __future__ import annotations

import itertools
import re
import sqlite3
from collections.abc import Mapping

from rewardlab.registry import register
from rewardlab.rewards.sql import extract_sql
from rewardlab.rewards.text import response_text
from rewardlab.runtime import PerSampleReward
from rewardlab.types import Sample, Score

_TOKEN = re.compile(r"'(?:[^']|''){0,1000}'|\"(?:[^\"]|\"\"){0,200}\"|`[^`]{0,200}`|\[[^\[\]]{0,200}\]"
                    r"|[A-Za-z_][A-Za-z0-9_$]*|\d+(?:\.\d+)?|\S")
_KEYWORDS = frozenset({
    "select", "from", "where", "group", "by", "order", "having", "limit", "offset", "join", "inner", "left", "right",
    "outer", "full", "cross", "natural", "on", "using", "as", "and", "or", "not", "in", "is", "null", "like", "glob",
    "between", "exists", "case", "when", "then", "else", "end", "distinct", "all", "union", "intersect", "except",
    "asc", "desc", "with", "recursive", "values", "cast", "collate", "escape", "count", "sum", "avg", "min", "max",
    "abs", "round", "length", "lower", "upper", "substr", "instr", "ifnull", "coalesce", "nullif", "strftime",
    "date", "time", "datetime", "julianday", "total", "group_concat", "replace", "trim", "iif", "true", "false",
    "integer", "text", "real", "numeric", "float",
})
MAX_SQL_CHARS = 20_000


def sql_tokens(sql: str) -> list[str]:
    """The query's tokens, lower-cased: string literals and quoted identifiers whole, words, numbers, symbols."""
    return [token.lower() for token in _TOKEN.findall(sql[:MAX_SQL_CHARS])]


def schema_items(sql: str) -> set[str]:
    """Table and column names a query uses: unquoted or quoted identifiers that are not keywords, literals or
    aliases (the name after `AS`, or right after a table in `FROM`/`JOIN`)."""
    tokens = sql_tokens(sql)
    aliases: set[str] = set()
    for k, token in enumerate(tokens[:-1]):
        following = tokens[k + 1]
        declares = token == "as" or (k > 0 and tokens[k - 1] in ("from", "join") and _identifier(token))
        if declares and _identifier(following) and following not in _KEYWORDS:
            aliases.add(following)
    items = set()
    for token in tokens:
        if token.startswith(("\"", "`", "[")):
            token = token[1:-1]
        elif not _identifier(token) or token in _KEYWORDS:
            continue
        if token and token not in aliases:
            items.add(token)
    return items


def parses(sql: str) -> bool:
    """Whether `sql` is one SQLite statement without a syntax error (prepared under a deny-all authorizer: unknown
    tables and the denial itself come after parsing, so they count as parsed; nothing ever runs)."""
    if ";" in sql_tokens(sql):  # a second statement (a `;` inside a literal is part of the literal)
        return False
    connection = sqlite3.connect(":memory:")
    try:
        connection.set_authorizer(lambda *_: sqlite3.SQLITE_DENY)
        connection.execute(sql)
    except (sqlite3.ProgrammingError, UnicodeError, ValueError):  # two statements, lone surrogates, NUL
        return False
    except sqlite3.DatabaseError as error:
        text = str(error)
        return not any(part in text for part in ("syntax error", "incomplete input", "unrecognized token",
                                                 "parser stack overflow", "too many"))
    finally:
        connection.close()
    return True


def _identifier(token: str) -> bool:
    return bool(re.fullmatch(r"[a-z_][a-z0-9_$]*", token))


def jaccard(a: set[object], b: set[object]) -> float:
    """|a ∩ b| / |a ∪ b|; two empty sets are 1.0."""
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def bigrams(sql: str) -> set[object]:
    """The set of adjacent token pairs of a query (a one-token query: its token)."""
    tokens = sql_tokens(sql)
    return set(itertools.pairwise(tokens)) if len(tokens) > 1 else set(tokens)


@register("sql_overlap")
class SQLOverlap(PerSampleReward):
    """Schema-linking and bigram Jaccard similarity of the predicted SQL to the gold query (Reasoning-SQL's
    partial rewards); `metric` ("schema_linking" or "ngram") picks the value, both are objectives."""

    name = "sql_overlap"
    declared_objectives = ("parses", "schema_linking", "ngram")
    failure_value: float | None = 0.0

    def __init__(self, *, metric: str = "schema_linking") -> None:
        if metric not in ("schema_linking", "ngram"):
            raise ValueError(f"sql_overlap: metric must be 'schema_linking' or 'ngram', got {metric!r}")
        self.metric = metric

    def score_sample(self, sample: Sample) -> Score:
        reference = sample.reference
        gold = reference.get("gold") if isinstance(reference, Mapping) else None
        if not isinstance(gold, str) or not gold.strip():
            raise ValueError("sql_overlap: reference field 'gold' must be a non-empty SQL string")
        predicted = extract_sql(response_text(sample, self.name))
        nothing = {"parses": 0.0, "schema_linking": 0.0, "ngram": 0.0}
        if not predicted:
            return Score(value=0.0, objectives=nothing, info={"reason": "no SQL in the response"})
        if len(predicted) > MAX_SQL_CHARS or "\x00" in predicted:
            return Score(value=0.0, objectives=nothing,
                         info={"reason": f"the SQL is over {MAX_SQL_CHARS:,} characters or holds a NUL"})
        if not parses(predicted):
            return Score(value=0.0, objectives=nothing, info={"reason": "the SQL is not one statement that parses"})
        gold = extract_sql(gold)
        predicted_items, gold_items = schema_items(predicted), schema_items(gold)
        objectives = {"parses": 1.0, "schema_linking": jaccard(set(predicted_items), set(gold_items)),
                      "ngram": jaccard(bigrams(predicted), bigrams(gold))}
        info = {"schema_items": sorted(predicted_items)[:50], "gold_schema_items": sorted(gold_items)[:50]}
        return Score(value=objectives[self.metric], objectives=objectives, info=info)
