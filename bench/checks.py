"""Numbers from outside (the command line, a matrix file, a results.csv, the history database)
checked before use: a real number, finite, on the right side of zero and below a sane bound.

NaN compares false with everything and 1e309 reads as infinity, so a plain `value <= 0` lets
both through; everything here tests what a value *is*, not what it is not.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

from .errors import BadInput

MAX_SECONDS = 7 * 24 * 3600  # --timeout, --time-limit, timeout_s: a week
MAX_REPEATS = 1000
MAX_THRESHOLD_PCT = 1000.0
MAX_COUNT = 1_000_000  # --limit, --last: rows to show


def is_whole(value: Any) -> bool:
    """An int (numpy's too), not a bool."""
    return isinstance(value, Integral) and not isinstance(value, bool)


def is_finite(value: Any) -> bool:
    """A real, finite number (an int of any size, a finite float), not a bool."""
    if isinstance(value, bool) or not isinstance(value, Real):
        return False
    return is_whole(value) or math.isfinite(value)


def bounded(
    value: Any, what: str, low: float, high: float, *, above: bool = False, whole: bool = False, unit: str = ""
) -> Any:
    """`value` if it is a finite number from `low` (excluded with above=True) to `high`; else BadInput
    '{what} must be a positive number of seconds' (NaN, a string, too small) or '... at most 604800
    seconds' (too large, infinity included)."""
    kind = ("whole number" if whole else "number") + (f" of {unit}" if unit else "")
    if above and low == 0:
        low_rule = f"a positive {kind}"
    else:
        low_rule = f"a {kind} {'above' if above else 'of at least'} {_text(low)}"
    number = is_whole(value) if whole else is_finite(value) or value == math.inf
    if not number or (value <= low if above else value < low):
        raise BadInput(f"{what} must be {low_rule}")
    if value > high:
        raise BadInput(f"{what} must be at most {_text(high)}" + (f" {unit}" if unit else ""))
    return value


def _text(bound: float) -> str:
    """1000000.0 -> '1000000' (not '1e+06')."""
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def ascii_digits(text: str) -> bool:
    """Digits 0-9 only: str.isdigit() also takes '²' (which int() refuses) and other scripts'
    digits (which int() reads but torchrun, hosts and file names do not)."""
    return bool(text) and text.isascii() and text.isdigit()


def host_port(value: str) -> bool:
    """HOST:PORT as torchrun's rendezvous takes it: a host name or IPv4 address (ASCII letters,
    digits, '-', '.'), or a bracketed IPv6 address, and a port from 1 to 65535."""
    host, _, port = value.rpartition(":")
    if not ascii_digits(port) or not 1 <= int(port) <= 65535 or not host:
        return False
    if host.startswith("[") and host.endswith("]"):
        inner = host[1:-1]
        return bool(inner) and all(c in "0123456789abcdefABCDEF:." for c in inner)
    return host.isascii() and all(c.isalnum() or c in "-." for c in host) and not host.startswith(("-", "."))
