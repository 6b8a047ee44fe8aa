"""The engine a CLI command talks to: `EngineApi` over client `EngineServices` of this environment's data folder,
Redis and database (no workers, projector, due waker, scheduler, reaper or concurrency control: the running engine
does that work)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.facade import EngineApi

EXIT_UNAVAILABLE = 3
"""The engine's store or Redis cannot be used now: the schema is not current, or one of them does not answer."""
CLIENT_ROLE = "client"


class EngineUnavailable(Exception):
    """The store's schema is not current; the message names `lockgate admin migrate`."""


@contextmanager
def engine_api(command: str) -> Iterator[EngineApi]:
    """The facade, its waits woken by the live channel; stopped afterwards. `command` names the command in
    messages (`lockgate runs list`)."""
    from engine.cli.settings import command_config, command_settings
    from engine.cli.worker import auto_migrate
    from engine.facade import EngineApi
    from engine.host import EngineServices
    from engine.store.schema_check import SchemaMismatch

    config = command_config()
    services = EngineServices(
        config,
        workers=0,
        projector=False,
        due_waker=False,
        scheduler=False,
        reaper=False,
        concurrency_control=False,
        migrate=auto_migrate(config),
        role=CLIENT_ROLE,
        settings=command_settings(),
    )
    try:
        services.start()
    except SchemaMismatch as exc:
        services.stop()
        raise EngineUnavailable(f"{command}: {exc}") from None
    api = EngineApi.on_live_channel(services)
    try:
        yield api
    finally:
        api.close()
        services.stop()


def report_unavailable(exc: EngineUnavailable) -> int:
    print(str(exc), file=sys.stderr)
    return EXIT_UNAVAILABLE
