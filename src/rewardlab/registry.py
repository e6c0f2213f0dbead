"""Spec strings, dicts and YAML/JSON files → `Reward`.

Spec forms understood by `load`:
- a registered name: `"exact_match"`;
- a family with an argument: `"rm:./my-rm"` (the part after the first `:` goes to the family);
- a name with options: `{"length": {"target": 200, "unit": "chars"}}`;
- a combinator: `{"sum": {"math": 1.0, "length": 0.1}}`, `{"gate": {"if": "format", "then": "math"}}`, ...;
- a path to a `.yaml`, `.yml` or `.json` file holding any of the above, or inline JSON text.

Built-in rewards register themselves when their module in `rewardlab/rewards/` is imported; this module
finds them by scanning that package (a new reward family is one new file), plus the `rewardlab.rewards`
entry-point group for plugins. Nothing is imported until a spec is looked up.
"""

from __future__ import annotations

import difflib
import importlib
import json
import pkgutil
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, TypeVar

import yaml

from rewardlab.bounded_yaml import MAX_YAML_CHARS, YAMLLimitError, load_yaml, load_yaml_file
from rewardlab.types import Reward

F = TypeVar("F", bound=Callable[..., Reward])
Builder = Callable[[Any, Callable[[Any], Reward]], Reward]

_REWARD_PACKAGE = "rewardlab.rewards"
_COMBINATOR_MODULE = "rewardlab.compose"
_FILE_SUFFIXES = (".yaml", ".yml", ".json")


class SpecError(ValueError):
    """A reward spec that cannot be turned into a reward (the message says which part and why)."""


class UnknownRewardError(SpecError, KeyError):
    """A spec names a reward that is not registered."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class RegistryEntry:
    """One registered reward: `factory(**options)` or, for a family, `factory(argument, **options)`."""

    name: str
    factory: Callable[..., Reward]
    description: str
    family: bool
    usage: str


_ENTRIES: dict[str, RegistryEntry] = {}
_COMBINATORS: dict[str, tuple[Builder, str]] = {}
_discovered = False
_discovering = False
_DISCOVERY_LOCK = threading.RLock()


def _first_line(text: str | None) -> str:
    for line in (text or "").strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


def register(
    name: str, description: str | None = None, *, family: bool = False, usage: str | None = None
) -> Callable[[F], F]:
    """Register a reward factory (a `Reward` class or a function returning one) under `name`.

    With `family=True` the spec `"name:ARG"` calls `factory(ARG, **options)`.
    """

    def decorate(factory: F) -> F:
        if name in _ENTRIES and _ENTRIES[name].factory is not factory:
            raise ValueError(f"a reward named {name!r} is already registered ({_ENTRIES[name].factory!r})")
        text = description or _first_line(factory.__doc__) or name
        _ENTRIES[name] = RegistryEntry(name, factory, text, family, usage or (f"{name}:ARG" if family else name))
        return factory

    return decorate


def register_combinator(name: str, description: str) -> Callable[[Builder], Builder]:
    """Register a combinator: `builder(value, load)` builds a reward from the spec value under `name`."""

    def decorate(builder: Builder) -> Builder:
        _COMBINATORS[name] = (builder, description)
        return builder

    return decorate


def _discover() -> None:
    """Import every reward module once. Threads that ask meanwhile wait for the whole registry (OpenRLHF calls a
    reward from many threads of a fresh process); a module that asks again while being imported gets no wait."""
    global _discovered, _discovering
    if _discovered:
        return
    with _DISCOVERY_LOCK:
        if _discovered or _discovering:
            return
        _discovering = True
        try:
            importlib.import_module(_COMBINATOR_MODULE)
            package = importlib.import_module(_REWARD_PACKAGE)
            for module in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
                if not module.name.startswith("_"):
                    importlib.import_module(f"{_REWARD_PACKAGE}.{module.name}")
            for point in entry_points(group="rewardlab.rewards"):
                point.load()
            _discovered = True
        finally:
            _discovering = False


def entries() -> dict[str, RegistryEntry]:
    """Every registered reward, by name."""
    _discover()
    return dict(sorted(_ENTRIES.items()))


def available() -> dict[str, str]:
    """Every registered reward name (families as `name:ARG`) with its one-line description."""
    return {entry.usage: entry.description for entry in entries().values()}


def combinators() -> dict[str, str]:
    """Every combinator usable in a composite spec, with its one-line description."""
    _discover()
    return {name: text for name, (_, text) in sorted(_COMBINATORS.items())}


def _unknown(name: str) -> UnknownRewardError:
    known = sorted(set(_ENTRIES) | set(_COMBINATORS))
    close = difflib.get_close_matches(name, known, n=5, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return UnknownRewardError(
        f"unknown reward {name!r}{hint} (registered: {', '.join(sorted(_ENTRIES))}; "
        f"combinators: {', '.join(sorted(_COMBINATORS))})"
    )


def _build(name: str, options: Any) -> Reward:
    if options is None:
        options = {}
    family_arg: str | None = None
    if name in _COMBINATORS:
        builder, _ = _COMBINATORS[name]
        try:
            return builder(options, load)
        except SpecError:
            raise
        except (TypeError, ValueError, KeyError) as error:
            raise SpecError(f"bad value for combinator {name!r}: {error}") from error
    if name not in _ENTRIES and ":" in name:
        name, family_arg = name.split(":", 1)
    if name not in _ENTRIES:
        raise _unknown(name)
    entry = _ENTRIES[name]
    if not isinstance(options, Mapping):
        raise SpecError(f"options for reward {name!r} must be a mapping, got {type(options).__name__}: {options!r}")
    if entry.family and family_arg is None:
        family_arg = options.get("path") or options.get("arg")
        options = {k: v for k, v in options.items() if k not in ("path", "arg")}
        if family_arg is None:
            raise SpecError(f"reward {name!r} needs an argument: write it as {entry.usage!r}")
    if not entry.family and family_arg is not None:
        raise SpecError(f"reward {name!r} takes no ':' argument (got {name}:{family_arg})")
    try:
        built = entry.factory(family_arg, **options) if entry.family else entry.factory(**options)
    except TypeError as error:
        raise SpecError(f"bad options for reward {name!r}: {error}") from error
    except ValueError as error:
        raise SpecError(f"bad options for reward {name!r}: {error}") from error
    return built


def parse_spec_text(spec: str) -> Any:
    """Inline JSON/YAML or a spec file → data, bounded in size and alias expansion (`rewardlab.bounded_yaml`)."""
    text = spec.strip()
    if text.startswith(("{", "[")):
        if len(text) > MAX_YAML_CHARS:
            raise SpecError(f"inline spec of {len(text):,} characters is over the {MAX_YAML_CHARS:,} limit")
        try:
            return json.loads(text)
        except (json.JSONDecodeError, RecursionError, ValueError):
            try:
                return load_yaml(text, "inline spec")
            except YAMLLimitError as error:
                raise SpecError(str(error)) from None
            except yaml.YAMLError as error:
                raise SpecError(f"spec looks like JSON/YAML but does not parse: {error}") from error
    if text.lower().endswith(_FILE_SUFFIXES) and ":" not in text.split("/")[0]:
        path = Path(text)
        if not path.is_file():
            raise SpecError(f"reward spec file not found: {path}")
        try:
            return load_yaml_file(path)  # YAML is a superset of JSON
        except YAMLLimitError as error:
            raise SpecError(str(error)) from None
        except yaml.YAMLError as error:
            raise SpecError(f"{path}: not valid YAML/JSON: {error}") from error
        except (OSError, UnicodeDecodeError) as error:
            raise SpecError(f"{path}: cannot read the spec file: {error}") from None
    return text


LABEL_LIMIT = 40
"""Labels longer than this fall back to the reward's name."""


def spec_label(spec: Any, fallback: str) -> str:
    """The one short, human label of a spec, for report columns and trainer logs: `length`, `rm:my-rm` (a folder's
    last name only), `length(unit=chars)` (scalar options inline), `rewards.yaml` (a spec file's name); `fallback`
    (the reward's name) for a `Reward`, a composite with nested options, or a label over `LABEL_LIMIT` characters."""
    if isinstance(spec, str) and spec.strip().startswith("{"):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError:
            return fallback
    if isinstance(spec, str):
        text = spec.strip()
        if text.lower().endswith(_FILE_SUFFIXES) and ":" not in text.split("/")[0]:
            label = Path(text).name
        elif ":" in text:
            family, _, arg = text.partition(":")
            label = f"{family}:{Path(arg.rstrip('/')).name or arg}"
        else:
            label = text
    elif isinstance(spec, Mapping) and len(spec) == 1:
        ((name, options),) = spec.items()
        if isinstance(options, Mapping) and all(isinstance(v, str | int | float | bool) for v in options.values()):
            label = f"{name}(" + ",".join(f"{k}={v}" for k, v in options.items()) + ")"
        else:
            label = str(name)
    else:
        return fallback
    return label if label and len(label) <= LABEL_LIMIT else fallback


def load(spec: Any) -> Reward:
    """Build a `Reward` from a spec (see the module docstring); a `Reward` is returned as is."""
    _discover()
    if isinstance(spec, Reward):
        return spec
    if isinstance(spec, str):
        parsed = parse_spec_text(spec)
        if isinstance(parsed, str):
            if not parsed:
                raise SpecError("empty reward spec")
            return _build(parsed, {})
        try:
            return load(parsed)
        except RecursionError:
            raise SpecError("the reward spec is nested too deeply to build") from None
    if isinstance(spec, Mapping):
        if len(spec) != 1:
            raise SpecError(
                f"a spec mapping must have exactly one key (a reward or combinator name), got {sorted(spec)}"
            )
        ((name, options),) = spec.items()
        return _build(str(name), options)
    raise SpecError(f"a reward spec must be a string, a mapping or a Reward, got {type(spec).__name__}")
