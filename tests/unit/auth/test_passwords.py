"""Password hashes: salted scrypt with its parameters in the stored text."""

from __future__ import annotations

import base64

import pytest

from cqlcdc.auth.passwords import (
    CURRENT,
    HASH_BYTES,
    SALT_BYTES,
    ScryptParams,
    hash_password,
    needs_rehash,
    parse_hash,
    verify_password,
)

from .conftest import CHEAP


def test_today_s_parameters_are_the_documented_ones() -> None:
    stored = hash_password("cassandra")
    params, salt, digest = parse_hash(stored)
    assert params == CURRENT == ScryptParams(14, 8, 1)
    assert stored.startswith("$scrypt$ln=14,r=8,p=1$")
    assert (len(salt), len(digest)) == (SALT_BYTES, HASH_BYTES)
    assert verify_password("cassandra", stored)


def test_each_hash_has_its_own_salt() -> None:
    first, second = hash_password("same", CHEAP), hash_password("same", CHEAP)
    assert first != second
    assert parse_hash(first)[1] != parse_hash(second)[1]
    assert verify_password("same", first) and verify_password("same", second)


# (not "secret\x00": scrypt's HMAC pads its key with NULs, so trailing NULs do not count;
# a SASL PLAIN password cannot hold a NUL anyway)
@pytest.mark.parametrize("attempt", ["Secret", "secret ", " secret", "", "secre", "sécret"])
def test_only_the_same_password_verifies(attempt: str) -> None:
    stored = hash_password("secret", CHEAP)
    assert verify_password("secret", stored)
    assert not verify_password(attempt, stored)


def test_non_ascii_and_empty_passwords() -> None:
    for password in ["pässwörd ✓", "", "x" * 10_000]:
        stored = hash_password(password, CHEAP)
        assert verify_password(password, stored)
        assert not verify_password(password + "!", stored)


def test_the_stored_text_never_holds_the_password() -> None:
    stored = hash_password("hunter2-unguessable", CHEAP)
    assert "hunter2" not in stored
    assert b"hunter2" not in base64.b64decode(stored.split("$")[-1] + "==")


def test_parameters_are_read_back_from_the_text() -> None:
    stored = hash_password("pw", ScryptParams(5, 2, 3))
    assert stored.startswith("$scrypt$ln=5,r=2,p=3$")
    params, _, _ = parse_hash(stored)
    assert (params.log2_n, params.r, params.p) == (5, 2, 3)
    # verification uses the stored parameters, not today's
    assert verify_password("pw", stored)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (ScryptParams(13, 8, 1), True),
        (ScryptParams(14, 7, 1), True),
        (ScryptParams(4, 8, 1), True),
        (ScryptParams(14, 8, 1), False),
        (ScryptParams(15, 8, 1), False),
        (ScryptParams(14, 8, 2), False),
    ],
)
def test_needs_rehash_when_weaker_than_today(params: ScryptParams, expected: bool) -> None:
    # a fake digest: needs_rehash reads only the parameters
    stored = f"$scrypt${params.text()}$AAAAAAAAAAAAAAAAAAAAAA$" + "A" * 43
    assert needs_rehash(stored) is expected


def test_needs_rehash_against_given_parameters() -> None:
    stored = hash_password("pw", CHEAP)
    assert not needs_rehash(stored, CHEAP)
    assert needs_rehash(stored, ScryptParams(5, 8, 1))


SALT = "AAAAAAAAAAAAAAAAAAAAAA"  # 16 bytes
DIGEST = "A" * 43  # 32 bytes


@pytest.mark.parametrize(
    ("stored", "message"),
    [
        ("", "not a scrypt password hash"),
        ("cassandra", "not a scrypt password hash"),
        ("$2a$10$abcdefghijklmnopqrstuv", "not a scrypt password hash"),  # Cassandra's bcrypt
        (f"$scrypt$ln=14,r=8$${SALT}${DIGEST}", "not a scrypt password hash"),
        (f"$scrypt$ln=14,r=8,p=1${SALT}${DIGEST}$", "not a scrypt password hash"),
        (f"$scrypt$ln=14,r=8,p=1${SALT}${DIGEST}\n", "not a scrypt password hash"),
        (f"$scrypt$ln=14,r=8,p=1${SALT}$not-base64!", "not a scrypt password hash"),
        (f"$scrypt$ln=0,r=8,p=1${SALT}${DIGEST}", "out of range: ln=0,r=8,p=1"),
        (f"$scrypt$ln=21,r=8,p=1${SALT}${DIGEST}", "out of range: ln=21,r=8,p=1"),
        (f"$scrypt$ln=14,r=0,p=1${SALT}${DIGEST}", "out of range"),
        (f"$scrypt$ln=14,r=8,p=0${SALT}${DIGEST}", "out of range"),
        (f"$scrypt$ln=14,r=8,p=1$AAAA${DIGEST}", "too short"),
        (f"$scrypt$ln=14,r=8,p=1${SALT}$AAAA", "too short"),
    ],
)
def test_a_text_it_did_not_make_is_refused(stored: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_hash(stored)
    with pytest.raises(ValueError):
        verify_password("whatever", stored)


def test_the_refusal_does_not_repeat_the_text() -> None:
    stored = "$scrypt$ln=14,r=8,p=1$c2VjcmV0LXNhbHQ$secret-material!"
    with pytest.raises(ValueError) as info:
        parse_hash(stored)
    assert "secret" not in str(info.value)
