"""The state container of one run: frozen inputs, state, errors and run facts, plus redaction."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from engine.runtime.inputs import REDACTED
from engine.templates import CALLBACK_URL


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, MappingProxyType | dict):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_thaw(v) for v in value]
    return value


@dataclass
class RunContext:
    """What steps read (`inputs` frozen, `state`, `errors`, `run`) and the secrets to hide on the way out."""

    run_id: str
    flow_id: str
    version: int
    trigger: str
    raw_inputs: dict[str, Any]
    secret_inputs: frozenset[str] = frozenset()
    declared_inputs: tuple[str, ...] = ()
    """Every input the flow declares: one not given (and with no default) reads as null, not undefined."""
    state: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, Any] = field(default_factory=dict)
    callback_url: Callable[[str], str] | None = None
    """The run's `callback_url(node)` template function (`engine.parking.callback_links`); None: the
    template's own, which says it has no URL outside a run."""
    inputs: Any = field(init=False)
    _secret_texts: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        given = copy.deepcopy(self.raw_inputs)
        self.inputs = _freeze({**dict.fromkeys(self.declared_inputs), **given})
        texts = []
        for name in self.secret_inputs:
            value = self.raw_inputs.get(name)
            if isinstance(value, str) and value:
                texts.append(value)
            elif value is not None and not isinstance(value, bool):
                texts.append(str(value))
        self._secret_texts = tuple(sorted(texts, key=len, reverse=True))

    @property
    def run_facts(self) -> dict[str, Any]:
        return {"id": self.run_id, "flow": self.flow_id, "version": self.version, "trigger": self.trigger}

    def template_context(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """Names a template may read."""
        names = {"inputs": self.inputs, "state": self.state, "errors": self.errors, "run": self.run_facts}
        if self.callback_url is not None:
            names[CALLBACK_URL] = self.callback_url
        if extra:
            names.update(extra)
        return names

    def redact(self, value: Any) -> Any:
        """`value` with every secret input's text replaced by `***` (for events, rows and logs)."""
        if not self._secret_texts:
            return value
        if isinstance(value, str):
            for secret in self._secret_texts:
                if secret in value:
                    value = value.replace(secret, REDACTED)
            return value
        if isinstance(value, MappingProxyType | dict):
            return {self.redact(k) if isinstance(k, str) else k: self.redact(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.redact(v) for v in value]
        if isinstance(value, int | float) and not isinstance(value, bool) and str(value) in self._secret_texts:
            return REDACTED
        return value

    def plain(self, value: Any) -> Any:
        """A frozen value as plain JSON data."""
        return _thaw(value)
