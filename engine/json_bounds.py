"""JSON values every part of the engine can encode and decode again: bounded nesting, finite numbers,
64-bit integers, strings (keys too) without lone surrogates.

orjson refuses each of these past its limits (255 levels, 64-bit integers, surrogates) and the stdlib
decoder recurses, so a value outside them fails far from where it came in. `json_problems` names each
such place by its JSON path, without recursion, so a value nested thousands deep is reported, not raised.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Literal

INT_MIN = -(1 << 63)
INT_MAX = (1 << 64) - 1
"""orjson encodes integers in [-2^63, 2^64 - 1]; Python would accept any."""
MAX_PROBLEMS = 5
_DIGITS_PARSED = 40
"""Integer literals longer than this are out of range anyway, so they are never converted (Python's
conversion refuses over 4,300 digits with a ValueError)."""
_SURROGATE = re.compile("[\ud800-\udfff]")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:,]')
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_KEY_SHOWN = 40


ProblemKind = Literal["too_deep", "not_finite", "out_of_range", "lone_surrogate", "not_json"]


@dataclass(frozen=True)
class JsonProblem:
    """One place in a value the engine cannot carry, and why."""

    path: str
    kind: ProblemKind
    message: str


@dataclass(frozen=True)
class OversizedNumber:
    """An integer literal too long to convert, left as its digit count for `json_problems` to report."""

    digits: int


def loads(text: str | bytes) -> Any:
    """Stdlib `json.loads` that never raises a bare ValueError: long integer literals become OversizedNumber,
    NaN / Infinity and overflowing floats become non-finite floats, both left for `json_problems` to name.

    Raises json.JSONDecodeError (not JSON), UnicodeDecodeError (bytes not UTF-8) or RecursionError.
    """
    return json.loads(text, parse_int=_parse_int)


def _parse_int(literal: str) -> int | OversizedNumber:
    if len(literal) > _DIGITS_PARSED:
        return OversizedNumber(len(literal.lstrip("-")))
    return int(literal)


def path_key(path: str, key: str | int) -> str:
    """`path` followed by an array index or object key: `.key` for plain names, else a quoted ASCII `["..."]`."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}"
    shown = key if len(key) <= _KEY_SHOWN else key[:_KEY_SHOWN] + "..."
    return f"{path}[{json.dumps(shown)}]"


_LONE_SURROGATE = ("text holds a lone surrogate (an unpaired \\ud800-\\udfff escape), which is not Unicode text; "
                   "remove it or pair it")
_KEY_SURROGATE = "object key holds a lone surrogate (an unpaired \\ud800-\\udfff escape); rename it"


def _scalar_problem(value: Any) -> tuple[ProblemKind, str] | None:
    """Why a non-container value cannot be carried, or None. Values are not repeated (they may be secrets)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        if INT_MIN <= value <= INT_MAX:
            return None
        return "out_of_range", f"a {value.bit_length()}-bit integer is outside the 64-bit range; send it as a string"
    if isinstance(value, float):
        if math.isfinite(value):
            return None
        return "not_finite", f"{value} is not a finite number (NaN and Infinity are not JSON); use null or a string"
    if isinstance(value, str):
        return ("lone_surrogate", _LONE_SURROGATE) if not value.isascii() and _SURROGATE.search(value) else None
    if isinstance(value, OversizedNumber):
        return "out_of_range", f"a {value.digits}-digit integer is outside the 64-bit range; send it as a string"
    return "not_json", f"a {type(value).__name__} is not a JSON value"


def _path(root: str, parents: list[tuple[int, str | int]], container: int, key: str | int | None) -> str:
    parts: list[str | int] = [] if key is None else [key]
    while container > 0:
        container, part = parents[container]
        parts.append(part)
    path = root
    for part in reversed(parts):
        path = path_key(path, part)
    return path


def json_problems(value: Any, max_depth: int, root: str = "$", *, limit: int = MAX_PROBLEMS) -> list[JsonProblem]:
    """Up to `limit` places in `value` no JSON encoder of the engine can carry, each with its JSON path.

    Depth counts containers: `[]` is 1 deep, `[[1]]` 2; a container deeper than `max_depth` is reported once
    and not entered. Paths are rebuilt only for what is reported, so a clean value costs one pass.
    """
    if not isinstance(value, dict | list | tuple):
        problem = _scalar_problem(value)
        return [JsonProblem(root, *problem)] if problem else []
    found: list[JsonProblem] = []
    parents: list[tuple[int, str | int]] = [(0, "")]
    """Per container entered: (index of the enclosing one, its key or index there); the root is entry 0."""
    stack: list[tuple[Any, int, str | int | None, int]] = [(value, 0, None, 1)]
    while stack and len(found) < limit:
        item, parent, key, depth = stack.pop()
        if depth > max_depth:
            found.append(JsonProblem(_path(root, parents, parent, key), "too_deep",
                                     f"nested deeper than {max_depth} levels; flatten it"))
            continue
        here = parent
        if key is not None:
            here = len(parents)
            parents.append((parent, key))
        is_object = type(item) is dict
        pairs: Any = item.items() if is_object else enumerate(item)
        children = []
        for child_key, child in pairs:
            if is_object and (type(child_key) is not str or not child_key.isascii()):
                if not isinstance(child_key, str):
                    found.append(JsonProblem(_path(root, parents, here, None), "not_json",
                                             f"object key {child_key!r} is not a string"))
                    continue
                if _SURROGATE.search(child_key):
                    found.append(JsonProblem(_path(root, parents, here, child_key), "lone_surrogate", _KEY_SURROGATE))
                    continue
            kind = type(child)
            if kind is dict or kind is list or kind is tuple:
                children.append((child, here, child_key, depth + 1))
            elif kind is str:
                if not child.isascii() and _SURROGATE.search(child):
                    found.append(JsonProblem(_path(root, parents, here, child_key), "lone_surrogate", _LONE_SURROGATE))
            elif child is not None and kind is not bool and not (kind is int and INT_MIN <= child <= INT_MAX):
                problem = _scalar_problem(child)
                if problem:
                    found.append(JsonProblem(_path(root, parents, here, child_key), *problem))
        stack.extend(reversed(children))
    return found[:limit]


def deep_path(text: str, max_depth: int, root: str = "$") -> str | None:
    """The path of the first container nested deeper than `max_depth` in JSON `text`, found by scanning it
    rather than parsing (for text too deep for the parser itself); None when nothing is that deep."""
    open_containers: list[list[Any]] = []
    """Per open container: [is an array, the index or key being read in it]."""
    last_string: Any = None
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token == "[" or token == "{":
            if len(open_containers) >= max_depth:
                path = root
                for _is_array, where in open_containers:
                    path = path_key(path, where if where is not None else "?")
                return path
            open_containers.append([token == "[", 0 if token == "[" else None])
        elif token == "]" or token == "}":
            if open_containers:
                open_containers.pop()
        elif token == ",":
            if open_containers:
                top = open_containers[-1]
                top[1] = top[1] + 1 if top[0] else None
        elif token == ":":
            if open_containers and not open_containers[-1][0]:
                open_containers[-1][1] = last_string
        else:
            try:
                last_string = json.loads(token)
            except ValueError:
                last_string = token[1:-1]
    return None
