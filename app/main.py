"""The `lockgate` command: no arguments opens the app; subcommands are engine CLI pieces."""

from __future__ import annotations

import argparse
import difflib
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from engine import __version__
from engine.cli.worker import add_log_level

EXIT_BROKEN_PIPE = 141
"""stdout's reader went away (128 + SIGPIPE, what a shell shows for a command a pipe's end stopped)."""
EXIT_INTERRUPTED = 130
PARSER_KEY = "command_parser"
"""Names, in the parsed namespace, the parser of the command typed (for its usage errors)."""

# Each module defines `register(subparsers)`; it adds its parser and sets `handler=fn(args) -> int`.
# Keep imports inside handlers so `lockgate --help` stays fast.
COMMAND_MODULES: list[str] = [
    "engine.cli.validate",
    "engine.cli.run",
    "engine.cli.worker",
    "engine.cli.serve",
    "engine.cli.publish",
    "engine.cli.runs",
    "engine.cli.provider_sim",
    "engine.cli.budgets",
    "engine.cli.keys",
    "engine.cli.approvals",
    "engine.cli.triggers",
    "engine.cli.diff",
    "engine.cli.flows",
    "engine.cli.admin",
    "engine.cli.flowtest",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lockgate",
        description="Lockgate: durable automation flows. With no command, opens the app.",
    )
    parser.add_argument("--version", action="version", version=f"lockgate {__version__}")
    parser.add_argument("--data-dir", help="data folder (default: LOCKGATE_DATA_DIR or the platform's)")
    add_log_level(parser, None)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    _name_each_parser(parser)
    return parser


def _name_each_parser(parser: argparse.ArgumentParser) -> None:
    """Every command's parser puts itself in the namespace as `PARSER_KEY`; a nested command's parses last, so
    the namespace ends up naming the command that was typed (`lockgate runs list`)."""
    parser.set_defaults(**{PARSER_KEY: parser})
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                _name_each_parser(sub)


def parse_command_line(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line read, or a usage error (exit 2) from the command typed: an unknown option is named by
    `lockgate run`'s usage, with the option it may have meant, not by the top level's."""
    _refuse_unknown_names(parser, list(sys.argv[1:] if argv is None else argv))
    args, extras = parser.parse_known_args(argv)
    if extras:
        typed: argparse.ArgumentParser = getattr(args, PARSER_KEY)
        unknown = [extra for extra in extras if extra.startswith("-") and extra != "-"]
        if not unknown:
            typed.error(f"unexpected argument(s): {' '.join(extras)}")
        _unknown_option(typed, unknown)
    return args


def _refuse_unknown_names(parser: argparse.ArgumentParser, argv: list[str], top: bool = True) -> None:
    """An unknown option before the command (`lockgate --dat-dir x runs list`), an unknown command (`lockgate runs
    lsit`) or a missing one (`lockgate runs`) is named as such, with what may have been meant; argparse would say
    "invalid choice: 'x'" of its own argument names (`runs_command`)."""
    takes_value = {option for action in parser._actions if action.nargs != 0 for option in action.option_strings}
    known = {option for action in parser._actions for option in action.option_strings}
    index = 0
    while index < len(argv) and argv[index].startswith("-") and argv[index] not in ("-", "--"):
        typed = argv[index].partition("=")[0]
        meant = [option for option in known if option.startswith(typed)]  # argparse takes a unique prefix
        if top and not meant:
            _unknown_option(parser, [typed])
        index += 2 if len(meant) == 1 and meant[0] in takes_value and "=" not in argv[index] else 1
    commands = next((action for action in parser._actions if isinstance(action, argparse._SubParsersAction)), None)
    if commands is None or "-h" in argv[:index] or "--help" in argv[:index]:
        return
    names = list(commands.choices)
    if index >= len(argv):
        if commands.required:
            parser.error(f"a command is needed: {', '.join(names)}")
        return
    typed = argv[index]
    if typed not in commands.choices:
        close = difflib.get_close_matches(typed, names, n=1, cutoff=0.6)
        parser.error(f"unknown command {typed!r}" + (f"; did you mean {close[0]}?" if close else "")
                     + f" (commands: {', '.join(names)})")
    _refuse_unknown_names(commands.choices[typed], argv[index + 1:], top=False)


def _unknown_option(parser: argparse.ArgumentParser, unknown: list[str]) -> None:
    known = [option for action in parser._actions for option in action.option_strings]
    first = unknown[0].partition("=")[0]
    close = difflib.get_close_matches(first, known, n=1, cutoff=0.6)
    parser.error(f"unknown option {first}" + (f"; did you mean {close[0]}?" if close else "")
                 + (f" (also unknown: {' '.join(unknown[1:])})" if len(unknown) > 1 else ""))


def log_file_name(command: str | None) -> str:
    """`app.log` for the window, `worker.log` for `lockgate worker` (also the app's engine child) and `lockgate
    serve`, else `cli.log`."""
    return "app" if command is None else "worker" if command in ("worker", "serve") else "cli"


def main(argv: Sequence[str] | None = None) -> int:
    """`argv=None` is a process start (`lockgate`, `python -m app`): it configures the process's logging.
    An explicit `argv` (tests, embedding) leaves the caller's logging as it is."""
    from engine.settings import SettingsError, load_settings

    parser = build_parser()
    args = parse_command_line(parser, argv)
    if args.data_dir:
        os.environ["LOCKGATE_DATA_DIR"] = args.data_dir  # the children this process starts read it too
    try:
        # The one read of the LOCKGATE_* settings for this command (or the window); the parts get them from here.
        settings = load_settings()
    except SettingsError as exc:
        parser.exit(2, f"lockgate: error: {exc}\n")
    log_records = None
    if argv is None:
        from engine.logs import LOG_LEVEL_ENV, LogLevelError, RecordBuffer, chosen_level, configure_logging, log_folder

        try:
            level = chosen_level(args.log_level, settings)
        except LogLevelError as exc:
            parser.error(str(exc))
        if args.log_level:
            os.environ[LOG_LEVEL_ENV] = level  # the app's engine child and other children log at it too
        log_records = RecordBuffer() if args.command is None else None
        configure_logging(level, log_folder(settings), console=True, name=log_file_name(args.command),
                          extra_handlers=[log_records] if log_records is not None else [])
        logging.getLogger("lockgate.main").info("started: lockgate %s %s, pid %d", __version__, args.command or "app",
                                                  os.getpid())
    if args.command is None:
        from app.gui import run_app

        return run_app(log_records=log_records, lockgate_settings=settings)
    from engine.cli.settings import DataFolderError, in_force

    try:
        with in_force(settings):
            code = int(args.handler(args) or 0)
            # Piped, stdout is block-buffered: write what is left now, so that a reader that went away makes it
            # raise here rather than at the interpreter's exit.
            sys.stdout.flush()
            return code
    except BrokenPipeError:
        # The reader went away (`lockgate runs list | head`): not an error of ours. Point stdout at devnull so
        # the interpreter's final flush does not raise again. Before `except Exception`: it is one.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        # A command that waits says itself what goes on; any other interrupted one ends without a traceback.
        print(f"lockgate {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except DataFolderError as exc:
        parser.exit(2, f"lockgate: {exc}\n")
    except Exception as exc:
        from engine.cli.session import EXIT_UNAVAILABLE
        from engine.outages import outage, unreachable

        if not outage(exc):
            raise
        parser.exit(EXIT_UNAVAILABLE, f"lockgate: {unreachable(exc, settings.redis_url, settings.db_url)}\n")


if __name__ == "__main__":
    sys.exit(main())
