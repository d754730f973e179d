"""Salted, deliberately slow password hashes (scrypt), with their parameters in the stored
text so later releases can raise them: ``$scrypt$ln=14,r=8,p=1$<salt>$<hash>`` (base64).

A password is never stored, logged or shown; only this text is kept.

>>> stored = hash_password("cassandra")
>>> stored.startswith("$scrypt$ln=14,r=8,p=1$"), verify_password("cassandra", stored)
(True, True)
>>> verify_password("Cassandra", stored)
False
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from dataclasses import dataclass
from typing import ClassVar

# 16 MiB and 50-100 ms per hash: slow enough to make guessing expensive, fast
# enough for a login. A stored hash keeps the parameters it was made with.
LOG2_N = 14
BLOCK_SIZE = 8
PARALLELISM = 1
SALT_BYTES = 16
HASH_BYTES = 32

_FORMAT = re.compile(
    r"\$scrypt\$ln=(?P<ln>\d{1,2}),r=(?P<r>\d{1,3}),p=(?P<p>\d{1,3})"
    r"\$(?P<salt>[A-Za-z0-9+/]+)\$(?P<hash>[A-Za-z0-9+/]+)\Z"
)


@dataclass(frozen=True, slots=True)
class ScryptParams:
    """The cost parameters of one stored hash."""

    log2_n: int
    r: int
    p: int

    # refused when read back: a stored text asking for more than this is not ours
    MAX_LOG2_N: ClassVar[int] = 20

    @property
    def max_mem(self) -> int:
        """The memory scrypt needs (128 * r * N * p bytes), with room to spare."""
        return 128 * self.r * (1 << self.log2_n) * (self.p + 1) + (1 << 20)

    def text(self) -> str:
        return f"ln={self.log2_n},r={self.r},p={self.p}"


CURRENT = ScryptParams(LOG2_N, BLOCK_SIZE, PARALLELISM)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4))


def _derive(password: str, salt: bytes, params: ScryptParams, size: int) -> bytes:
    return hashlib.scrypt(
        password.encode(),
        salt=salt,
        n=1 << params.log2_n,
        r=params.r,
        p=params.p,
        maxmem=params.max_mem,
        dklen=size,
    )


def hash_password(password: str, params: ScryptParams = CURRENT) -> str:
    """The stored text of ``password``: a fresh random salt each call, so hashing the same
    password twice gives two different texts."""
    salt = os.urandom(SALT_BYTES)
    digest = _derive(password, salt, params, HASH_BYTES)
    return f"$scrypt${params.text()}${_b64(salt)}${_b64(digest)}"


def parse_hash(stored: str) -> tuple[ScryptParams, bytes, bytes]:
    """``(params, salt, digest)`` of a stored text.

    Raises:
        ValueError: not a text ``hash_password`` makes (the message does not repeat it).
    """
    m = _FORMAT.match(stored)
    if m is None:
        raise ValueError("not a scrypt password hash ($scrypt$ln=..,r=..,p=..$salt$hash)")
    params = ScryptParams(int(m["ln"]), int(m["r"]), int(m["p"]))
    if not (1 <= params.log2_n <= ScryptParams.MAX_LOG2_N and params.r >= 1 and params.p >= 1):
        raise ValueError(f"scrypt parameters out of range: {params.text()}")
    salt, digest = _unb64(m["salt"]), _unb64(m["hash"])
    if len(salt) < 8 or len(digest) < 16:
        raise ValueError("scrypt salt or hash too short")
    return params, salt, digest


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` is the one ``stored`` was made from (compared in constant time).

    Raises:
        ValueError: ``stored`` is not a hash this module makes.
    """
    params, salt, digest = parse_hash(stored)
    return hmac.compare_digest(_derive(password, salt, params, len(digest)), digest)


def needs_rehash(stored: str, params: ScryptParams = CURRENT) -> bool:
    """Whether ``stored`` was made with weaker parameters than ``params`` (rehash it at the
    next successful login)."""
    old, _, _ = parse_hash(stored)
    return old.log2_n < params.log2_n or old.r < params.r or old.p < params.p


__all__ = [
    "CURRENT",
    "ScryptParams",
    "hash_password",
    "needs_rehash",
    "parse_hash",
    "verify_password",
]
