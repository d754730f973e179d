"""A connection's handshake: which requests may come when, what STARTUP gets, and when v5
switches to segments.

    STARTING --STARTUP--> READY                      (no authenticator)
    STARTING --STARTUP--> AUTHENTICATING --(engine accepts AUTH_RESPONSE)--> READY

OPTIONS is welcome in every phase. STARTUP fixes the protocol version: a later frame of
another version is a protocol error. In v5 the frames after READY or AUTHENTICATE (both
ways) are in segments: ``switch_framing`` right after writing that answer.

>>> from cqlcdc.server.requests import Startup
>>> hs = Handshake()
>>> hs.startup(Startup({"CQL_VERSION": "3.0.0"}), version=5), hs.phase.name
(Ready(), 'READY')
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from cqlcdc.errors import ProtocolError
from cqlcdc.server.frames import (
    CURRENT_VERSION,
    FrameHeader,
    Opcode,
    opcode_name,
    reply_version,
)
from cqlcdc.server.framing import FIRST_SEGMENTED_VERSION, Framing
from cqlcdc.server.requests import Startup
from cqlcdc.server.responses import CQL_VERSION, Authenticate, Ready

# the largest frame before the client is logged in: STARTUP's few options, or a SASL PLAIN
# token (at most login.MAX_TOKEN_BYTES) with its length
MAX_HANDSHAKE_BODY_BYTES = 128 * 1024


class Phase(enum.Enum):
    STARTING = "starting"  # OPTIONS or STARTUP
    AUTHENTICATING = "authenticating"  # AUTHENTICATE sent: AUTH_RESPONSE (or OPTIONS)
    READY = "ready"  # every request but STARTUP and AUTH_RESPONSE


_ALLOWED = {
    Phase.STARTING: frozenset({Opcode.OPTIONS, Opcode.STARTUP}),
    Phase.AUTHENTICATING: frozenset({Opcode.OPTIONS, Opcode.AUTH_RESPONSE}),
    Phase.READY: frozenset(
        {
            Opcode.OPTIONS,
            Opcode.QUERY,
            Opcode.PREPARE,
            Opcode.EXECUTE,
            Opcode.BATCH,
            Opcode.REGISTER,
        }
    ),
}
_EXPECTED = {
    Phase.STARTING: "STARTUP or OPTIONS",
    Phase.AUTHENTICATING: "AUTH_RESPONSE",
    Phase.READY: "a query, PREPARE, EXECUTE, BATCH, REGISTER or OPTIONS",
}


class Handshake:
    """The handshake state of one connection (not thread-safe: the connection's loop owns it).

    Args:
        authenticator: the Java class name AUTHENTICATE announces; None answers STARTUP
            with READY.
        compression: the compression algorithms STARTUP may choose (``Framing`` does them).
    """

    def __init__(self, *, authenticator: str | None = None, compression: Sequence[str] = ()):
        self.authenticator = authenticator
        self.compression = tuple(compression)
        self.cql_version = CQL_VERSION
        self.version: int | None = None
        self.phase = Phase.STARTING

    def check(self, header: FrameHeader) -> None:
        """Whether a request frame may come now.

        Raises:
            ProtocolError: a version other than STARTUP's, or an opcode out of turn.
        """
        if self.version is not None and header.version != self.version:
            raise ProtocolError(
                f"Invalid message version. Got {header.version} but previous messages on "
                f"this connection had version {self.version}"
            )
        if header.opcode not in _ALLOWED[self.phase]:
            raise ProtocolError(
                f"Unexpected message {opcode_name(header.opcode)}, "
                f"expecting {_EXPECTED[self.phase]}"
            )

    def reply_version(self, header: FrameHeader) -> int:
        """The version to answer ``header``'s frame in (the connection's, once fixed)."""
        return self.version if self.version is not None else header.version

    def reply_to(self, rejected: FrameHeader | None) -> tuple[int, int]:
        """``(version, stream)`` for the ERROR answering a ProtocolError of the framing:
        ``rejected`` is ``Framing.rejected``, None when no header could be read (a bad
        segment checksum)."""
        if self.version is not None:
            version = self.version
        elif rejected is not None:
            version = reply_version(rejected.version)
        else:
            version = CURRENT_VERSION
        return version, rejected.stream if rejected is not None else 0

    def startup(self, startup: Startup, version: int) -> Ready | Authenticate:
        """The answer to STARTUP; fixes the connection's version.

        Raises:
            ProtocolError: a CQL version before 3, or a compression not offered.
        """
        major = startup.cql_version.split(".", 1)[0]
        if not major.isdigit():
            raise ProtocolError(f"Invalid CQL version {startup.cql_version!r}")
        if int(major) < 3:
            raise ProtocolError(
                f"CQL version {startup.cql_version} is not supported by the binary protocol "
                "(supported version are >= 3.0.0)"
            )
        compression = startup.compression
        if compression is not None and compression.lower() not in self.compression:
            offered = ", ".join(self.compression) or "none"
            raise ProtocolError(
                f"Unsupported compression algorithm: {compression} (offered: {offered})"
            )
        self.version = version
        if self.authenticator is None:
            self.phase = Phase.READY
            return Ready()
        self.phase = Phase.AUTHENTICATING
        return Authenticate(self.authenticator)

    def authenticated(self) -> None:
        """The engine accepted the credentials (AUTH_SUCCESS is being sent)."""
        if self.phase is not Phase.AUTHENTICATING:
            raise ProtocolError("Authentication succeeded outside the authentication phase")
        self.phase = Phase.READY

    @property
    def segmented(self) -> bool:
        """Whether frames after the STARTUP answer travel in segments."""
        return (
            self.phase is not Phase.STARTING
            and self.version is not None
            and self.version >= FIRST_SEGMENTED_VERSION
        )

    def switch_framing(self, framing: Framing) -> None:
        """Call right after writing STARTUP's answer (READY, AUTHENTICATE or ERROR)."""
        if self.segmented:
            framing.start_segments()
        else:
            framing.keep_plain()


__all__ = ["MAX_HANDSHAKE_BODY_BYTES", "Handshake", "Phase"]
