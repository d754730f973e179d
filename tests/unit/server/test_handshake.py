"""The handshake's phases: what may come when, what STARTUP gets, when v5 switches."""

from __future__ import annotations

import pytest

from cqlcdc.errors import ProtocolError
from cqlcdc.server.frames import FLAG_COMPRESSED, FLAG_USE_BETA, FrameHeader, Opcode
from cqlcdc.server.framing import Framing
from cqlcdc.server.handshake import Handshake, Phase
from cqlcdc.server.requests import Startup
from cqlcdc.server.responses import Authenticate, Ready

STARTUP = Startup({"CQL_VERSION": "3.4.5", "DRIVER_NAME": "test"})


def _header(opcode: int, version: int = 4, flags: int = 0) -> FrameHeader:
    return FrameHeader(version, flags, 0, opcode, 0)


def test_before_startup_only_options_and_startup() -> None:
    hs = Handshake()
    hs.check(_header(Opcode.OPTIONS, version=5))
    hs.check(_header(Opcode.STARTUP))
    for opcode in (Opcode.QUERY, Opcode.REGISTER, Opcode.AUTH_RESPONSE):
        with pytest.raises(ProtocolError, match="expecting STARTUP or OPTIONS"):
            hs.check(_header(opcode))
    assert hs.phase is Phase.STARTING and hs.version is None


@pytest.mark.parametrize("version", [4, 5])
def test_startup_without_authenticator_is_ready(version: int) -> None:
    hs = Handshake()
    assert hs.startup(STARTUP, version) == Ready()
    assert hs.phase is Phase.READY and hs.version == version
    assert hs.segmented == (version == 5)
    for opcode in (Opcode.QUERY, Opcode.PREPARE, Opcode.EXECUTE, Opcode.BATCH, Opcode.OPTIONS):
        hs.check(_header(opcode, version))
    for opcode in (Opcode.STARTUP, Opcode.AUTH_RESPONSE, Opcode.READY):
        with pytest.raises(ProtocolError, match="Unexpected message"):
            hs.check(_header(opcode, version))
    other = 9 - version
    with pytest.raises(ProtocolError, match=f"Got {other} but previous messages"):
        hs.check(_header(Opcode.QUERY, other))
    assert hs.reply_version(_header(Opcode.QUERY, other)) == version


def test_authentication_phase() -> None:
    hs = Handshake(authenticator="org.apache.cassandra.auth.PasswordAuthenticator")
    answer = hs.startup(STARTUP, 5)
    assert answer == Authenticate("org.apache.cassandra.auth.PasswordAuthenticator")
    assert hs.phase is Phase.AUTHENTICATING and hs.segmented  # v5: segments after AUTHENTICATE
    hs.check(_header(Opcode.AUTH_RESPONSE, 5))
    with pytest.raises(ProtocolError, match="expecting AUTH_RESPONSE"):
        hs.check(_header(Opcode.QUERY, 5))
    hs.authenticated()
    assert hs.phase is Phase.READY
    hs.check(_header(Opcode.QUERY, 5))
    with pytest.raises(ProtocolError):
        hs.authenticated()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"CQL_VERSION": "2.0.0"}, "CQL version 2.0.0 is not supported"),
        ({"CQL_VERSION": "x.y"}, "Invalid CQL version"),
        ({"CQL_VERSION": "3.0.0", "COMPRESSION": "lz4"}, "Unsupported compression algorithm: lz4"),
    ],
)
def test_bad_startups(options: dict[str, str], message: str) -> None:
    hs = Handshake()
    with pytest.raises(ProtocolError, match=message):
        hs.startup(Startup(options), 4)
    assert hs.phase is Phase.STARTING and hs.version is None and not hs.segmented


def test_compression_flag_and_beta_flag() -> None:
    hs = Handshake()
    hs.check(_header(Opcode.OPTIONS, 4, FLAG_COMPRESSED))  # Framing decompresses or refuses
    hs.check(_header(Opcode.OPTIONS, 5, FLAG_COMPRESSED))  # deprecated and ignored in v5
    hs.check(_header(Opcode.OPTIONS, 5, FLAG_USE_BETA))  # v5 is not beta: the flag is harmless
    assert (
        Handshake(compression=["lz4"]).startup(
            Startup({"CQL_VERSION": "3.0.0", "COMPRESSION": "LZ4"}), 5
        )
        == Ready()
    )


def test_switch_framing() -> None:
    for version, segmented in [(4, False), (5, True)]:
        hs, framing = Handshake(), Framing()
        hs.startup(STARTUP, version)
        hs.switch_framing(framing)
        assert framing.segmented is segmented and not framing.held
    failed, framing = Handshake(), Framing()
    failed.switch_framing(framing)  # STARTUP was refused: stay plain
    assert not framing.segmented


def test_where_framing_errors_are_answered() -> None:
    hs = Handshake()
    assert hs.reply_to(None) == (4, 0)
    assert hs.reply_to(FrameHeader(0x42, 0, 5, Opcode.OPTIONS, 0)) == (4, 5)
    assert hs.reply_to(FrameHeader(2, 0, 6, Opcode.OPTIONS, 0)) == (2, 6)
    hs.startup(STARTUP, 5)
    assert hs.reply_to(None) == (5, 0)  # a bad segment: in segments, at the connection's version
    assert hs.reply_to(FrameHeader(5, 0, 7, Opcode.QUERY, 2**30)) == (5, 7)
