"""`lockgate provider-sim`: run the bundled OpenAI-compatible provider simulator."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "provider-sim",
        help="run the provider simulator (OpenAI-compatible chat completions with rate limits)",
        description="Serve a deterministic OpenAI-compatible provider at http://HOST:PORT/v1 for demos and tests.",
    )
    parser.add_argument("--port", type=int, default=8765, help="port to listen on (0 picks a free one; default 8765)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    rate = parser.add_mutually_exclusive_group()
    rate.add_argument("--rpm", type=int, help="requests allowed per minute, per API key; more answer 429")
    rate.add_argument("--rps", type=int, help="requests allowed per second, per API key; more answer 429")
    parser.add_argument("--tpm", type=int, help="tokens (prompt + max_tokens) allowed per window, per API key")
    parser.add_argument("--latency", type=float, default=0.0, metavar="MS", help="delay before each answer, in ms")
    parser.add_argument("--background-seconds", type=float, default=5.0,
                        help="how long a background call stays in progress (default 5)")
    parser.add_argument("--hang-seconds", type=float, default=30.0, help="how long the 'hang' fault hangs")
    parser.add_argument("--api-key", action="append", default=[], dest="api_keys",
                        help="accepted bearer key (repeatable); none given accepts any")
    parser.set_defaults(handler=run_simulator)


def run_simulator(args: argparse.Namespace) -> int:
    from engine.providers.simulator import ProviderSimulator, SimulatorSettings

    for flag in ("rpm", "rps", "tpm"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            print(f"lockgate provider-sim: --{flag} {value} must be 1 or more; leave it out for no limit",
                  file=sys.stderr)
            return 2
    per_second = args.rps is not None
    settings = SimulatorSettings(
        requests_per_window=args.rps if per_second else args.rpm,
        tokens_per_window=args.tpm,
        window_seconds=1.0 if per_second else 60.0,
        latency_ms=args.latency,
        background_seconds=args.background_seconds,
        hang_seconds=args.hang_seconds,
        api_keys=tuple(args.api_keys),
    )
    try:
        simulator = ProviderSimulator(port=args.port, host=args.host, settings=settings)
    except OSError as exc:
        print(f"lockgate provider-sim: cannot listen on {args.host}:{args.port}: {exc}; pick another --port",
              file=sys.stderr)
        return 2
    limit = (f"{settings.requests_per_window} requests per {settings.window_seconds:g}s"
             if settings.requests_per_window else "no request limit")
    print(f"provider simulator at {simulator.url} ({limit}); Ctrl+C stops it", flush=True)
    try:
        simulator.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0
