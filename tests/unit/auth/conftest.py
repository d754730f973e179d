"""A RoleStore in a fresh directory, with cheap scrypt parameters so a test can make many
roles (the real ones cost ~50-100 ms a hash; tests of them are in test_passwords.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cqlcdc.auth import passwords, roles
from cqlcdc.auth.roles import RoleStore

CHEAP = passwords.ScryptParams(log2_n=4, r=8, p=1)


def cheap_hash(password: str) -> str:
    return passwords.hash_password(password, CHEAP)


@pytest.fixture
def cheap_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hash with ``CHEAP`` and treat it as today's parameters (no rehash at login)."""
    monkeypatch.setattr(roles, "hash_password", cheap_hash)
    monkeypatch.setattr(roles, "needs_rehash", lambda stored: passwords.needs_rehash(stored, CHEAP))


@pytest.fixture
def roles_path(tmp_path: Path) -> Path:
    return tmp_path / "auth" / "roles.json"


@pytest.fixture
def store(cheap_hashes: None, roles_path: Path) -> RoleStore:
    return RoleStore(roles_path)


def exactly(message: str) -> str:
    """A ``pytest.raises(match=...)`` pattern for exactly ``message``."""
    return f"^{re.escape(message)}$"


def starts(message: str) -> str:
    """A ``pytest.raises(match=...)`` pattern for a message starting with ``message``."""
    return f"^{re.escape(message)}"
