"""Command lines that start this program again: its Python interpreter (`python_command`) and its `lockgate`
command (`lockgate_command`), from a Python installation or from a frozen bundle (PyInstaller).

In a bundle `sys.executable` is the `lockgate` program itself, which knows no interpreter options. It is the
`lockgate` command as it is, and it stands in for the interpreter when its first argument is `AS_PYTHON`:
`app/__main__.py` hands the rest to `run_as_python`, which reads `python`'s own command line (`-c CODE`,
`-m MODULE` or a script's path, after options). Standard library only: the supervisor and the script launcher
import this.
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Sequence

AS_PYTHON = "--as-python"
IGNORED_OPTIONS = frozenset({"-I", "-S", "-s", "-E", "-B", "-u", "-O", "-OO"})
"""Interpreter options a bundle's interpreter has no use for: it has no site folder, no user folder and no
`PYTHON*` settings of its own, and writes no bytecode."""


def frozen() -> bool:
    """Whether this program runs from a frozen bundle (its `sys.executable` is the `lockgate` program)."""
    return bool(getattr(sys, "frozen", False))


def python_command(*args: str) -> list[str]:
    """The command line running this program's interpreter as `python ARGS`."""
    return [sys.executable, AS_PYTHON, *args] if frozen() else [sys.executable, *args]


def lockgate_command(*args: str) -> list[str]:
    """The command line running `lockgate ARGS` with this program's own code."""
    return [sys.executable, *args] if frozen() else [sys.executable, "-m", "app", *args]


def run_as_python(argv: Sequence[str]) -> int:
    """Run `argv` as `python ARGV` would, in this process; returns its exit status (2 for a command line
    `python` would refuse)."""
    rest = list(argv)
    while rest and rest[0] in IGNORED_OPTIONS:
        rest.pop(0)
    if not rest:
        print(f"{AS_PYTHON}: give -c CODE, -m MODULE or a script's path", file=sys.stderr)
        return 2
    first, *arguments = rest
    try:
        if first in ("-c", "-m"):
            if not arguments:
                print(f"{AS_PYTHON}: {first} needs an argument", file=sys.stderr)
                return 2
            target, *arguments = arguments
            if first == "-c":
                sys.argv = ["-c", *arguments]
                exec(compile(target, "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
            else:
                sys.argv = [target, *arguments]
                runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.argv = [first, *arguments]
            runpy.run_path(first, run_name="__main__")
    except SystemExit as end:
        return _status(end.code)
    return 0


def _status(code: object) -> int:
    """The exit status `sys.exit(code)` gives a process."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
