"""A keyspace's ``tablets = {...}`` option (ScyllaDB 6+), read as ScyllaDB reads it.

cqlcdc keeps every table and CDC log on vnodes: its streams are the vnode generations of
``system_distributed.cdc_streams_descriptions_v2``, which ScyllaDB's CDC libraries read for
a keyspace without tablets. ``{'enabled': false}`` asks for exactly that layout (scripts
written for ScyllaDB 6+ say so, since tablets are its default there), so it is accepted; a
keyspace with tablets is refused with a message saying what to write instead.

>>> initial_tablets((("enabled", "false"),)) is None
True
>>> initial_tablets((("initial", "8"),)), initial_tablets((("enabled", "true"),))
(8, 0)
>>> initial_tablets((("enabled", "yes"),))
Traceback (most recent call last):
cqlcdc.errors.ConfigurationError: Tablets enabled value must be true or false; found: yes
"""

from __future__ import annotations

import re

from cqlcdc.errors import ConfigurationError, InvalidRequest

TABLETS_REFUSED = (
    "Tablets are not supported: cqlcdc keeps a keyspace's tables and their CDC logs on "
    "vnodes (tablets-based CDC streams are not implemented); create the keyspace with "
    "tablets = {'enabled': false}"
)
# ks_prop_defs.cc: std::stol, which reads a leading (signed) number and ignores the rest
_NUMBER = re.compile(r"\s*[+-]?\d+")


def initial_tablets(options: tuple[tuple[str, str], ...]) -> int | None:
    """``ks_prop_defs::get_initial_tablets``: None for a vnodes keyspace, else the initial
    tablet count (0: ScyllaDB's default). As ScyllaDB's, ``'enabled': 'false'`` ends the
    reading: other options beside it are not looked at.

    Raises:
        ConfigurationError: a value or an option ScyllaDB refuses (its messages).
    """
    rest = dict(options)
    enabled = rest.pop("enabled", None)
    if enabled == "false":
        return None
    if enabled is not None and enabled != "true":
        raise ConfigurationError(f"Tablets enabled value must be true or false; found: {enabled}")
    count = 0
    if "initial" in rest:
        text = rest.pop("initial")
        number = _NUMBER.match(text)
        if number is None:
            raise ConfigurationError(f"Initial tablets value should be numeric; found {text}")
        count = int(number.group())
    if rest:
        raise ConfigurationError(f"Unrecognized tablets option {min(rest)}")  # a std::map's first
    return count


def check_vnodes(options: tuple[tuple[str, str], ...], altering: bool) -> None:
    """Accept ``tablets = {...}`` only when it asks for vnodes (or is not given).

    Raises:
        ConfigurationError: an option ScyllaDB refuses.
        InvalidRequest: tablets asked for; on ALTER, ScyllaDB's own refusal to switch a
            vnodes keyspace to tablets.
    """
    if not options or initial_tablets(options) is None:
        return
    if altering:
        raise InvalidRequest("Cannot alter replication strategy vnode/tablets flavor")
    raise InvalidRequest(TABLETS_REFUSED)


__all__ = ["TABLETS_REFUSED", "check_vnodes", "initial_tablets"]
