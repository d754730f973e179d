"""ERROR responses of every code, read by the real driver: the message class it picks, the
exception it raises to the application, and the code's own fields (v4 and v5)."""

from __future__ import annotations

from typing import Any

import cassandra
import pytest
from cassandra import ConsistencyLevel, WriteType
from cassandra import protocol as p

from cqlcdc import errors
from cqlcdc.server.error_responses import (
    AlreadyExistsInfo,
    CasWriteUnknownInfo,
    ErrorResponse,
    FunctionFailureInfo,
    ReadFailureInfo,
    ReadTimeoutInfo,
    UnavailableInfo,
    UnpreparedInfo,
    WriteFailureInfo,
    WriteTimeoutInfo,
    error_response,
)
from cqlcdc.server.responses import encode_response

from .helpers import HANDLERS, VERSIONS, driver_decode

QUORUM = ConsistencyLevel.QUORUM

# code, info, driver message class, exception the driver raises, fields it reads
CASES: list[tuple[int, Any, type, type, dict[str, Any]]] = [
    (0x0000, None, p.ServerError, p.ServerError, {}),
    (0x000A, None, p.ProtocolException, p.ProtocolException, {}),
    (0x0100, None, p.BadCredentials, p.BadCredentials, {}),
    (
        0x1000,
        UnavailableInfo(QUORUM, 3, 1),
        p.UnavailableErrorMessage,
        cassandra.Unavailable,
        {"consistency": QUORUM, "required_replicas": 3, "alive_replicas": 1},
    ),
    (0x1001, None, p.OverloadedErrorMessage, p.OverloadedErrorMessage, {}),
    (0x1002, None, p.IsBootstrappingErrorMessage, p.IsBootstrappingErrorMessage, {}),
    (0x1003, None, p.TruncateError, p.TruncateError, {}),
    (
        0x1100,
        WriteTimeoutInfo(QUORUM, 1, 2, "BATCH_LOG"),
        p.WriteTimeoutErrorMessage,
        cassandra.WriteTimeout,
        {
            "consistency": QUORUM,
            "received_responses": 1,
            "required_responses": 2,
            "write_type": WriteType.BATCH_LOG,
        },
    ),
    (
        0x1200,
        ReadTimeoutInfo(QUORUM, 1, 2, True),
        p.ReadTimeoutErrorMessage,
        cassandra.ReadTimeout,
        {
            "consistency": QUORUM,
            "received_responses": 1,
            "required_responses": 2,
            "data_retrieved": True,
        },
    ),
    (
        0x1300,
        ReadFailureInfo(QUORUM, 1, 3, {"10.0.0.1": 1, "::1": 2}, False),
        p.ReadFailureMessage,
        cassandra.ReadFailure,
        {
            "consistency": QUORUM,
            "received_responses": 1,
            "required_responses": 3,
            "failures": 2,
            "data_retrieved": False,
        },
    ),
    (
        0x1400,
        FunctionFailureInfo("ks", "f", ("int", "text")),
        p.FunctionFailureMessage,
        cassandra.FunctionFailure,
        {"keyspace": "ks", "function": "f", "arg_types": ["int", "text"]},
    ),
    (
        0x1500,
        WriteFailureInfo(QUORUM, 0, 1, {"10.0.0.2": 3}, "COUNTER"),
        p.WriteFailureMessage,
        cassandra.WriteFailure,
        {
            "consistency": QUORUM,
            "received_responses": 0,
            "required_responses": 1,
            "failures": 1,
            "write_type": WriteType.COUNTER,
        },
    ),
    (0x1600, None, p.CDCWriteException, p.CDCWriteException, {}),
    (0x1700, CasWriteUnknownInfo(QUORUM, 1, 2), p.ErrorMessage, p.ErrorMessage, {}),
    (0x2000, None, p.SyntaxException, p.SyntaxException, {}),
    (0x2100, None, p.UnauthorizedErrorMessage, cassandra.Unauthorized, {}),
    (0x2200, None, p.InvalidRequestException, cassandra.InvalidRequest, {}),
    (0x2300, None, p.ConfigurationException, p.ConfigurationException, {}),
    (
        0x2400,
        AlreadyExistsInfo("ks", "t"),
        p.AlreadyExistsException,
        cassandra.AlreadyExists,
        {"keyspace": "ks", "table": "t"},
    ),
]


@pytest.mark.parametrize("handler", HANDLERS, ids=["cython", "python"])
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("code", "info", "message_class", "exception", "fields"),
    CASES,
    ids=[f"{c[0]:#06x}" for c in CASES],
)
def test_every_error_code(
    version: int,
    handler: Any,
    code: int,
    info: Any,
    message_class: type,
    exception: type,
    fields: dict[str, Any],
) -> None:
    for given in (info, None):  # with the fields, and with the defaults filled in
        frame = encode_response(version, 5, ErrorResponse(code, "it failed é", given))
        msg = driver_decode(frame, handler=handler)
        assert type(msg) is message_class and msg.stream_id == 5
        assert msg.code == code and msg.message == "it failed é"
        exc = msg.to_exception()
        assert type(exc) is exception
        if given is not None:
            for name, value in fields.items():
                actual = msg.info[name] if name in msg.info else getattr(exc, name)
                assert actual == value, name


@pytest.mark.parametrize("version", VERSIONS)
def test_failure_reasons_map_is_read_in_v5(version: int) -> None:
    info = ReadFailureInfo(QUORUM, 1, 3, {"10.0.0.1": 1, "::1": 2}, True)
    msg = driver_decode(encode_response(version, 1, ErrorResponse(0x1300, "x", info)))
    expected = {"10.0.0.1": 1, "::1": 2} if version >= 5 else None
    assert msg.info["error_code_map"] == expected
    assert msg.info["failures"] == 2 and msg.info["data_retrieved"] is True


@pytest.mark.parametrize("version", VERSIONS)
def test_cas_write_timeout_carries_contentions_in_v5(version: int) -> None:
    info = WriteTimeoutInfo(QUORUM, 0, 2, "CAS", contentions=3)
    frame = encode_response(version, 1, ErrorResponse(0x1100, "cas", info))
    msg = driver_decode(frame)
    assert msg.info["write_type"] == WriteType.CAS
    # the driver ignores the trailing [short]; it is there in v5 only
    simple = encode_response(version, 1, ErrorResponse(0x1100, "cas", WriteTimeoutInfo()))
    assert len(frame) - len(simple) == len("CAS") - len("SIMPLE") + (2 if version >= 5 else 0)


@pytest.mark.parametrize("version", VERSIONS)
def test_unprepared_id_goes_back_to_the_driver(version: int) -> None:
    msg = driver_decode(
        encode_response(version, 1, ErrorResponse(0x2500, "gone", UnpreparedInfo(b"\x01\x02")))
    )
    assert isinstance(msg, p.PreparedQueryNotFound) and msg.info == b"\x01\x02"


def test_error_response_from_cqlcdc_exceptions() -> None:
    assert error_response(errors.InvalidRequest("bad")) == ErrorResponse(0x2200, "bad")
    assert error_response(errors.CqlSyntaxError("no", 1, 2)).message == "line 1:2 no"
    exists = error_response(errors.AlreadyExists("Table ks.t already exists", "ks", "t"))
    assert exists.info == AlreadyExistsInfo("ks", "t")

    unprepared = errors.Unprepared("Prepared query with ID 0102 not found")
    assert error_response(unprepared).info == UnpreparedInfo(b"")
    unprepared.query_id = b"\x01\x02"  # type: ignore[attr-defined]
    assert error_response(unprepared).info == UnpreparedInfo(b"\x01\x02")

    timeout = errors.WriteTimeout("slow")
    timeout.info = WriteTimeoutInfo(QUORUM, 1, 2, "BATCH")  # type: ignore[attr-defined]
    assert error_response(timeout).info == WriteTimeoutInfo(QUORUM, 1, 2, "BATCH")
    timeout.info = UnavailableInfo()  # type: ignore[attr-defined]  # of another code: ignored
    assert error_response(timeout).info is None

    unavailable = driver_decode(encode_response(4, 1, error_response(errors.Unavailable("x"))))
    assert isinstance(unavailable.to_exception(), cassandra.Unavailable)


def test_info_must_match_its_code_and_write_types_are_checked() -> None:
    with pytest.raises(ValueError):
        ErrorResponse(0x1000, "x", WriteTimeoutInfo())
    with pytest.raises(ValueError):
        WriteTimeoutInfo(write_type="SOMETIMES")
    with pytest.raises(ValueError):
        WriteFailureInfo(write_type="")


@pytest.mark.parametrize("handler", HANDLERS, ids=["cython", "python"])
def test_a_message_over_a_string_limit_is_cut_on_a_character_boundary(handler: Any) -> None:
    """A [string] holds 65,535 bytes: a longer message (an error quoting a huge identifier)
    is cut on a UTF-8 boundary, never left unsent."""
    message = "Undefined column name " + "é" * 40_000  # 80,022 bytes of UTF-8
    msg = driver_decode(encode_response(4, 1, ErrorResponse(0x2200, message)), handler=handler)
    assert message.startswith(msg.message)
    assert 65_534 <= len(msg.message.encode("utf-8")) <= 65_535
    short = driver_decode(encode_response(4, 1, ErrorResponse(0x2200, "é" * 10)))
    assert short.message == "é" * 10
