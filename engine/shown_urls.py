"""Service URLs as messages and log lines may show them: without their passwords.

Standard library only: the light supervisor process (`engine.cli.supervisor_process`) prints URLs too."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

_PASSWORD_PARAMETER = re.compile(r"((?:^|&)password=)[^&]*", re.IGNORECASE)


def shown_url(url: str | None) -> str:
    """`url` with its password (in the user part, or a `password` query parameter) replaced by `***`."""
    if not url:
        return ""
    try:
        parsed = urlsplit(url)
    except ValueError:  # e.g. a broken IPv6 host: still show where, never the user part
        scheme, sep, rest = url.partition("://")
        return f"{scheme}{sep}***@{rest.rpartition('@')[2]}" if "@" in rest else url
    netloc = parsed.netloc
    if parsed.password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}:***@{host}"
    query = _PASSWORD_PARAMETER.sub(r"\1***", parsed.query)
    if (netloc, query) == (parsed.netloc, parsed.query):
        return url
    return urlunsplit(parsed._replace(netloc=netloc, query=query))
