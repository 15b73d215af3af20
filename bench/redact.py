"""A database URL's password, never shown: in errors, `history` output, env.json's command, logs.

A URL is read the way that hides the most, however malformed it is: its user information is
everything from `SCHEME://` to the *last* '@' (a password holding an unencoded '@', '/' or '[' is
hidden whole), and its password is what follows the first ':' in it; a `password=` query parameter
is a password too. Shown, each becomes `***`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

HIDDEN = "***"
SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
QUERY_PASSWORD = re.compile(r"(?i)([?&;]password=)[^&;#\s]*")


def userinfo(url: str) -> tuple[str, str] | None:
    """(user, password) of a URL `SCHEME://USER:PASSWORD@...`, or None when it names no password."""
    found = SCHEME.search(url)
    if found is None:
        return None
    rest = url[found.end() :]
    info = rest[: rest.rfind("@")] if "@" in rest else ""
    if ":" not in info:
        return None
    user, password = info.split(":", 1)
    return user, password


def redact_url(url: str) -> str:
    """`url` with its password (and any password= query parameter) replaced by ***; a path as given."""
    found = SCHEME.search(url)
    if found is None:
        return url
    head, rest = url[: found.end()], url[found.end() :]
    pair = userinfo(url)
    if pair is not None:
        rest = f"{pair[0]}:{HIDDEN}{rest[rest.rfind('@') :]}"
    return head + QUERY_PASSWORD.sub(rf"\g<1>{HIDDEN}", rest)


def redact_arg(arg: str) -> str:
    """A command-line word (`postgresql://...`, `--db=postgresql://...`) with any URL's password hidden:
    the URL runs from its scheme to the end of the word."""
    found = SCHEME.search(arg)
    return arg if found is None else arg[: found.start()] + redact_url(arg[found.start() :])


def redact_argv(argv: Sequence[str]) -> list[str]:
    return [redact_arg(a) for a in argv]


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` (a database driver's message) with every given secret replaced by ***."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, HIDDEN)
    return text
