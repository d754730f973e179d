"""The SASL PLAIN token of an AUTH_RESPONSE, decoded as Cassandra's PasswordAuthenticator
decodes it (``[authzid] NUL authcid NUL passwd``), and the login it gives."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cassandra.auth import PlainTextAuthenticator

from cqlcdc.auth import passwords, roles
from cqlcdc.auth.roles import RoleStore
from cqlcdc.errors import AuthenticationFailed
from cqlcdc.server.login import MAX_TOKEN_BYTES, PASSWORD_AUTHENTICATOR, log_in, plain_credentials


def _exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


NO_USER = "Authentication ID must not be null"
NO_PASSWORD = "Password must not be null"


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        (b"\x00alice\x00wonder", ("alice", "wonder")),
        (b"admin\x00alice\x00wonder", ("alice", "wonder")),  # an authzid is ignored
        (b"\x00\x00alice\x00wonder", ("alice", "wonder")),
        (b"\x00Al ice\x00p w d", ("Al ice", "p w d")),
        ("\x00jürgen\x00pässwörd ✓".encode(), ("jürgen", "pässwörd ✓")),
        (b"\x00u\x00" + b"p" * 60_000, ("u", "p" * 60_000)),
    ],
)
def test_credentials(token: bytes, expected: tuple[str, str]) -> None:
    assert plain_credentials(token) == expected


def test_the_driver_s_token() -> None:
    token = PlainTextAuthenticator("cassandra", "cassandra").initial_response()
    assert plain_credentials(token) == ("cassandra", "cassandra")
    assert PASSWORD_AUTHENTICATOR == "org.apache.cassandra.auth.PasswordAuthenticator"


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (None, NO_USER),
        (b"", NO_PASSWORD),
        (b"alice", NO_PASSWORD),  # no NUL at all
        (b"\x00alice\x00", NO_PASSWORD),  # nothing after the last NUL
        (b"\x00\x00", NO_PASSWORD),  # the password is checked first, as in Cassandra
        (b"alice\x00wonder", NO_USER),  # one NUL: Cassandra finds no user before it
        (b"\x00\x00wonder", NO_USER),
        (b"alice\x00\x00wonder", NO_USER),
        (b"\x00u\x00" + b"p" * MAX_TOKEN_BYTES, NO_USER),  # oversized: not a login
    ],
)
def test_malformed_tokens(token: bytes | None, message: str) -> None:
    with pytest.raises(AuthenticationFailed, match=_exactly(message)) as info:
        plain_credentials(token)
    assert info.value.code == 0x0100


@pytest.mark.parametrize(
    "token",
    [b"\x00\xff\xfe\x00secret-pw", b"\x00alice\x00secret-pw\xc3", b"\x00alice\x00\xed\xa0\x80"],
)
def test_non_utf8_credentials_are_refused_without_echo(token: bytes) -> None:
    with pytest.raises(
        AuthenticationFailed, match=_exactly("Credentials must be UTF-8 text")
    ) as info:
        plain_credentials(token)
    assert "secret" not in str(info.value)


def test_log_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cheap = passwords.ScryptParams(4, 8, 1)
    monkeypatch.setattr(roles, "hash_password", lambda p: passwords.hash_password(p, cheap))
    monkeypatch.setattr(roles, "needs_rehash", lambda s: passwords.needs_rehash(s, cheap))
    store = RoleStore(tmp_path / "roles.json")
    store.ensure_default_superuser()
    store.create_role("svc", password="pw")
    assert log_in(store, b"\x00cassandra\x00cassandra") == "cassandra"
    with pytest.raises(
        AuthenticationFailed,
        match=_exactly("Provided username cassandra and/or password are incorrect"),
    ):
        log_in(store, b"\x00cassandra\x00Cassandra")
    with pytest.raises(AuthenticationFailed, match=_exactly("svc is not permitted to log in")):
        log_in(store, b"\x00svc\x00pw")
    with pytest.raises(AuthenticationFailed, match=_exactly(NO_USER)):
        log_in(store, b"cassandra\x00cassandra")
