"""The login step of ``cqlcdc serve --auth``: Cassandra's PasswordAuthenticator over SASL PLAIN.

After STARTUP the server answers AUTHENTICATE naming ``PASSWORD_AUTHENTICATOR`` (drivers and
cqlsh pick their SASL mechanism by that class name); the client answers AUTH_RESPONSE with a
PLAIN token (RFC 4616: ``[authzid] NUL authcid NUL passwd``), checked against the data
directory's roles (``cqlcdc.auth.RoleStore``: salted scrypt hashes, never a password). The
messages are Cassandra's (``PlainTextSaslAuthenticator``), so a driver shows what it would
show against Cassandra.

>>> plain_credentials(b"\\x00cassandra\\x00secret")
('cassandra', 'secret')
"""

from __future__ import annotations

from cqlcdc.auth import RoleStore
from cqlcdc.errors import AuthenticationFailed

PASSWORD_AUTHENTICATOR = "org.apache.cassandra.auth.PasswordAuthenticator"

# a PLAIN token is two short names and a password: anything longer is not a login
MAX_TOKEN_BYTES = 64 * 1024


def plain_credentials(token: bytes | None) -> tuple[str, str]:
    """``(username, password)`` of a SASL PLAIN token.

    Raises:
        AuthenticationFailed: a missing or malformed token (Cassandra's messages).
    """
    if token is None or len(token) > MAX_TOKEN_BYTES:
        raise AuthenticationFailed("Authentication ID must not be null")
    # as Cassandra decodes it: the password after the last NUL, the user between it and the
    # NUL before (a token without that one has no user); an authorization id in front, if
    # any, is ignored. The password is checked first, as Cassandra checks it.
    head, sep, password = token.rpartition(b"\x00")
    if not sep or not password:
        raise AuthenticationFailed("Password must not be null")
    _, sep, user = head.rpartition(b"\x00")
    if not sep or not user:
        raise AuthenticationFailed("Authentication ID must not be null")
    try:
        return user.decode("utf-8"), password.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationFailed("Credentials must be UTF-8 text") from None


def log_in(roles: RoleStore, token: bytes | None) -> str:
    """The role an AUTH_RESPONSE token logs in as (slow on purpose: scrypt).

    Raises:
        AuthenticationFailed: "Provided username u and/or password are incorrect", "u is
            not permitted to log in", or a malformed token.
    """
    user, password = plain_credentials(token)
    return roles.authenticate(user, password).name


__all__ = ["MAX_TOKEN_BYTES", "PASSWORD_AUTHENTICATOR", "log_in", "plain_credentials"]
