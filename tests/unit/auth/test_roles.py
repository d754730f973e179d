"""The RoleStore: roles, memberships, grants, logins and the roles file."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from cqlcdc.auth import passwords, roles
from cqlcdc.auth.resources import Permission, Resource
from cqlcdc.auth.roles import DEFAULT_PASSWORD, DEFAULT_SUPERUSER, Role, RoleStore
from cqlcdc.errors import AuthenticationFailed, InvalidRequest, ServerError, Unauthorized

from .conftest import CHEAP, exactly, starts

KS = Resource.keyspace("ks")
T = Resource.table("ks", "t")
P = Permission


# -- roles ------------------------------------------------------------------------------------


def test_create_role_keeps_its_options(store: RoleStore) -> None:
    store.create_role("alice", password="wonder", login=True, options=(("k", "v"),))
    store.create_role("group")
    alice, group = store.get("alice"), store.get("group")
    assert alice is not None and group is not None
    assert (alice.is_superuser, alice.can_login, alice.options) == (False, True, (("k", "v"),))
    assert (group.is_superuser, group.can_login, group.salted_hash) == (False, False, None)
    assert alice.salted_hash is not None and passwords.verify_password("wonder", alice.salted_hash)
    assert store.names() == ["alice", "group"] and store.exists("alice")
    assert not store.exists("Alice") and store.get("nobody") is None


def test_a_role_s_repr_hides_its_hash(store: RoleStore) -> None:
    store.create_role("alice", password="wonder", login=True)
    role = store.get("alice")
    assert role is not None and role.salted_hash is not None
    assert "salted_hash" not in repr(role) and role.salted_hash not in repr(role)


def test_create_an_existing_role(store: RoleStore) -> None:
    store.create_role("alice")
    with pytest.raises(InvalidRequest, match=exactly("alice already exists")):
        store.create_role("alice", superuser=True)
    role = store.get("alice")
    assert role is not None and not role.is_superuser


def test_alter_changes_only_what_is_given(store: RoleStore) -> None:
    store.create_role("alice", password="old", login=True, options=(("k", "v"),))
    before = store.get("alice")
    store.alter_role("alice", superuser=True)
    after = store.get("alice")
    assert before is not None and after is not None
    assert after == Role("alice", True, True, options=(("k", "v"),), salted_hash=before.salted_hash)
    store.alter_role("alice", password="new", login=False, options=())
    changed = store.get("alice")
    assert changed is not None and changed.salted_hash is not None
    assert (changed.can_login, changed.options, changed.is_superuser) == (False, (), True)
    assert passwords.verify_password("new", changed.salted_hash)
    assert not passwords.verify_password("old", changed.salted_hash)


def test_alter_or_drop_a_missing_role(store: RoleStore) -> None:
    with pytest.raises(InvalidRequest, match=exactly("bob doesn't exist")):
        store.alter_role("bob", login=True)
    with pytest.raises(InvalidRequest, match=exactly("bob doesn't exist")):
        store.drop_role("bob")


def test_drop_removes_memberships_and_grants_of_and_on_the_role(store: RoleStore) -> None:
    for name in ("alice", "dev", "ops"):
        store.create_role(name)
    store.grant_role("dev", "alice")  # alice is a member of dev
    store.grant_role("ops", "dev")  # dev is a member of ops
    store.grant([P.SELECT], T, "dev")
    store.grant([P.ALTER, P.DROP], Resource.role("dev"), "ops")
    store.grant([P.ALTER], Resource.role("alice"), "ops")
    store.drop_role("dev")
    assert store.names() == ["alice", "ops"]
    assert store.roles_of("alice") == {"alice"}
    ops = store.get("ops")
    assert ops is not None and ops.permissions == {"roles/alice": frozenset({P.ALTER})}
    # a new role of the same name starts with nothing
    store.create_role("dev")
    assert store.roles_of("alice") == {"alice"}
    assert store.permissions_on("dev", T) == frozenset()


# -- memberships ------------------------------------------------------------------------------


@pytest.fixture
def chain(store: RoleStore) -> RoleStore:
    """c is a member of b, b of a; x stands alone."""
    for name in ("a", "b", "c", "x"):
        store.create_role(name)
    store.grant_role("a", "b")
    store.grant_role("b", "c")
    return store


def test_roles_of_recursive_and_not(chain: RoleStore) -> None:
    assert chain.roles_of("c") == {"a", "b", "c"}
    assert chain.roles_of("c", recursive=False) == {"b", "c"}
    assert chain.roles_of("a") == {"a"}
    assert chain.roles_of("nobody") == frozenset()


@pytest.mark.parametrize(
    ("role", "grantee", "message"),
    [
        ("a", "a", "a is a member of a"),  # oneself
        ("b", "a", "b is a member of a"),  # the reverse of b -> a
        ("c", "a", "c is a member of a"),  # a longer loop
        ("c", "b", "c is a member of b"),
        ("a", "b", "b is a member of a"),  # already granted
        ("a", "c", "c is a member of a"),  # already held through b
    ],
)
def test_grants_that_would_loop_are_refused_as_cassandra_refuses_them(
    chain: RoleStore, role: str, grantee: str, message: str
) -> None:
    before = {name: chain.get(name) for name in chain.names()}
    with pytest.raises(InvalidRequest, match=f"^{message}$"):
        chain.grant_role(role, grantee)
    assert {name: chain.get(name) for name in chain.names()} == before


def test_grant_and_revoke_of_missing_roles(chain: RoleStore) -> None:
    with pytest.raises(InvalidRequest, match=exactly("nobody doesn't exist")):
        chain.grant_role("nobody", "a")
    with pytest.raises(InvalidRequest, match=exactly("nobody doesn't exist")):
        chain.grant_role("a", "nobody")
    with pytest.raises(InvalidRequest, match=exactly("nobody doesn't exist")):
        chain.revoke_role("a", "nobody")


def test_revoke_only_a_direct_membership(chain: RoleStore) -> None:
    with pytest.raises(InvalidRequest, match=exactly("c is not a member of a")):
        chain.revoke_role("a", "c")  # held through b only
    with pytest.raises(InvalidRequest, match=exactly("x is not a member of a")):
        chain.revoke_role("a", "x")
    chain.revoke_role("b", "c")
    assert chain.roles_of("c") == {"c"}
    chain.grant_role("c", "a")  # no loop any more
    assert chain.roles_of("b") == {"a", "b", "c"}


# -- permissions ------------------------------------------------------------------------------


def test_permissions_are_inherited_through_granted_roles(chain: RoleStore) -> None:
    chain.grant([P.SELECT], T, "a")
    chain.grant([P.MODIFY], T, "b")
    assert chain.permissions_on("c", T) == {P.SELECT, P.MODIFY}
    assert chain.permissions_on("b", T) == {P.SELECT, P.MODIFY}
    assert chain.permissions_on("a", T) == {P.SELECT}
    assert chain.permissions_on("x", T) == frozenset()
    chain.authorize("c", P.SELECT, T)
    chain.revoke_role("a", "b")
    with pytest.raises(Unauthorized):
        chain.authorize("c", P.SELECT, T)


def test_permissions_hold_on_a_resource_s_children(store: RoleStore) -> None:
    store.create_role("r")
    store.grant([P.SELECT], KS, "r")
    store.authorize("r", P.SELECT, T)
    store.authorize("r", P.SELECT, KS)
    with pytest.raises(Unauthorized):
        store.authorize("r", P.SELECT, Resource.all_keyspaces())
    with pytest.raises(Unauthorized):
        store.authorize("r", P.SELECT, Resource.table("other", "t"))
    store.grant([P.MODIFY], Resource.all_keyspaces(), "r")
    store.authorize("r", P.MODIFY, Resource.table("other", "t"))
    # the held permission is on the parent: the resource itself shows none
    assert store.permissions_on("r", T) == frozenset()


def test_the_refusal_is_cassandra_s_message(store: RoleStore) -> None:
    store.create_role("alice")
    with pytest.raises(Unauthorized) as info:
        store.authorize("alice", P.MODIFY, T)
    assert str(info.value) == (
        "User alice has no MODIFY permission on <table ks.t> or any of its parents"
    )
    assert info.value.code == 0x2100
    with pytest.raises(
        Unauthorized, match=starts("User ghost has no SELECT permission on <keyspace ks>")
    ):
        store.authorize("ghost", P.SELECT, KS)


def test_a_superuser_holds_everything_applicable(chain: RoleStore) -> None:
    chain.alter_role("a", superuser=True)
    assert chain.is_superuser("c") and chain.is_superuser("a") and not chain.is_superuser("x")
    assert chain.permissions_on("c", T) == {P.ALTER, P.DROP, P.SELECT, P.MODIFY, P.AUTHORIZE}
    assert P.DESCRIBE in chain.permissions_on("c", Resource.all_roles())
    chain.authorize("c", P.CREATE, Resource.all_keyspaces())
    assert not chain.is_superuser("nobody")


def test_grant_and_revoke_permissions(store: RoleStore) -> None:
    store.create_role("r")
    store.grant([P.SELECT, P.MODIFY], T, "r")
    store.grant([P.SELECT], T, "r")  # again: nothing changes
    assert store.permissions_on("r", T) == {P.SELECT, P.MODIFY}
    store.revoke([P.SELECT, P.ALTER], T, "r")  # ALTER was never granted: ignored
    assert store.permissions_on("r", T) == {P.MODIFY}
    store.revoke([P.MODIFY], T, "r")
    role = store.get("r")
    assert role is not None and role.permissions == {}
    store.revoke([P.MODIFY], T, "r")  # nothing left: no error, as in Cassandra
    with pytest.raises(InvalidRequest, match=exactly("Role nobody doesn't exist")):
        store.grant([P.SELECT], T, "nobody")
    with pytest.raises(InvalidRequest, match=exactly("Role nobody doesn't exist")):
        store.revoke([P.SELECT], T, "nobody")


def test_list_permissions_is_sorted_and_filtered(store: RoleStore) -> None:
    for name in ("b", "a"):
        store.create_role(name)
    store.grant([P.MODIFY, P.SELECT], T, "b")
    store.grant([P.ALTER], KS, "b")
    store.grant([P.AUTHORIZE, P.CREATE], Resource.all_roles(), "a")
    everything = store.list_permissions(None, None, list(P))
    assert [(r, str(res), str(p)) for r, res, p in everything] == [
        ("a", "<all roles>", "CREATE"),
        ("a", "<all roles>", "AUTHORIZE"),
        ("b", "<keyspace ks>", "ALTER"),
        ("b", "<table ks.t>", "SELECT"),
        ("b", "<table ks.t>", "MODIFY"),
    ]
    assert store.list_permissions(["b", "nobody"], [T], [P.MODIFY]) == [("b", T, P.MODIFY)]
    assert store.list_permissions(["a"], [T, KS], list(P)) == []


def test_revoke_all_on_a_keyspace_takes_its_tables_too(store: RoleStore) -> None:
    store.create_role("r")
    store.grant([P.SELECT], T, "r")
    store.grant([P.ALTER], KS, "r")
    store.grant([P.SELECT], Resource.table("ks2", "t"), "r")
    store.grant([P.CREATE], Resource.all_keyspaces(), "r")
    store.revoke_all_on(KS)
    role = store.get("r")
    assert role is not None and sorted(role.permissions) == ["data", "data/ks2/t"]


# -- logging in -------------------------------------------------------------------------------


def test_authenticate(store: RoleStore) -> None:
    store.create_role("alice", password="wonder", login=True)
    role = store.authenticate("alice", "wonder")
    assert role.name == "alice"
    for name, password in [("alice", "Wonder"), ("alice", ""), ("Alice", "wonder")]:
        with pytest.raises(AuthenticationFailed) as info:
            store.authenticate(name, password)
        assert str(info.value) == f"Provided username {name} and/or password are incorrect"
        assert info.value.code == 0x0100


def test_a_role_without_login_cannot_log_in(store: RoleStore) -> None:
    store.create_role("svc", password="pw", login=False)
    with pytest.raises(AuthenticationFailed, match=exactly("svc is not permitted to log in")):
        store.authenticate("svc", "pw")
    # a wrong password says so first, as in Cassandra (no hint that the role exists)
    with pytest.raises(AuthenticationFailed, match=starts("Provided username svc and/or password")):
        store.authenticate("svc", "wrong")
    store.alter_role("svc", login=True)
    assert store.authenticate("svc", "pw").name == "svc"


def test_a_role_without_password_cannot_log_in(store: RoleStore) -> None:
    store.create_role("nopw", login=True)
    with pytest.raises(
        AuthenticationFailed, match=starts("Provided username nopw and/or password")
    ):
        store.authenticate("nopw", "")


def test_unknown_roles_cost_a_hash_check_too(
    store: RoleStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unknown role, or one without a password, is checked against a dummy hash made with
    the same parameters, so the answer takes as long as for a wrong password."""
    checked: list[tuple[str, str]] = []

    def spy(password: str, stored: str) -> bool:
        checked.append((password, stored))
        return passwords.verify_password(password, stored)

    monkeypatch.setattr(roles, "verify_password", spy)
    monkeypatch.setattr(roles, "_dummy_hash", [])
    store.create_role("alice", password="wonder", login=True)
    store.create_role("nopw", login=True)
    for name in ("ghost", "nopw"):
        with pytest.raises(AuthenticationFailed):
            store.authenticate(name, "guess")
    with pytest.raises(AuthenticationFailed):
        store.authenticate("alice", "guess")
    assert [password for password, _ in checked] == ["guess", "guess", "guess"]
    dummy, real = checked[0][1], store.get("alice")
    assert real is not None and real.salted_hash is not None
    assert checked[1][1] == dummy  # made once
    assert passwords.parse_hash(dummy)[0] == passwords.parse_hash(real.salted_hash)[0]


def test_a_weak_hash_is_replaced_at_login(roles_path: Path) -> None:
    weak = passwords.hash_password("wonder", CHEAP)
    document = {
        "format": 1,
        "roles": {
            "alice": {
                "is_superuser": False,
                "can_login": True,
                "salted_hash": weak,
                "member_of": [],
                "options": {},
                "permissions": {},
            }
        },
    }
    roles_path.parent.mkdir(parents=True)
    roles_path.write_text(json.dumps(document))
    store = RoleStore(roles_path)
    store.authenticate("alice", "wonder")
    role = store.get("alice")
    assert role is not None and role.salted_hash is not None and role.salted_hash != weak
    assert passwords.parse_hash(role.salted_hash)[0] == passwords.CURRENT
    assert not passwords.needs_rehash(role.salted_hash)
    reread = RoleStore(roles_path).get("alice")
    assert reread is not None and reread.salted_hash == role.salted_hash
    assert RoleStore(roles_path).authenticate("alice", "wonder").name == "alice"


def test_the_default_superuser_is_made_once(store: RoleStore, roles_path: Path) -> None:
    assert store.ensure_default_superuser()
    assert not store.ensure_default_superuser()
    role = store.authenticate(DEFAULT_SUPERUSER, DEFAULT_PASSWORD)
    assert (role.name, role.is_superuser, role.can_login) == ("cassandra", True, True)
    store.create_role("admin", password="x", login=True, superuser=True)
    store.drop_role("cassandra")
    # a directory with roles does not get cassandra back, even on a reload
    assert not RoleStore(roles_path).ensure_default_superuser()
    assert store.names() == ["admin"]


def test_the_default_superuser_is_not_made_beside_other_roles(store: RoleStore) -> None:
    store.create_role("alice")
    assert not store.ensure_default_superuser()
    assert not store.exists("cassandra")


# -- the file ---------------------------------------------------------------------------------


def test_the_file_is_private_and_holds_no_password(store: RoleStore, roles_path: Path) -> None:
    store.create_role("alice", password="sekrit-Wonder-42", login=True)
    store.alter_role("alice", password="sekrit-Other-43")
    assert stat.S_IMODE(roles_path.stat().st_mode) == 0o600
    text = roles_path.read_text()
    assert "sekrit" not in text
    document = json.loads(text)
    assert document["format"] == 1
    assert document["roles"]["alice"]["salted_hash"].startswith("$scrypt$")
    assert [p.name for p in roles_path.parent.iterdir()] == ["roles.json"]  # no temporary left


def test_no_file_until_the_first_change(store: RoleStore, roles_path: Path) -> None:
    assert not roles_path.exists() and store.names() == []
    store.create_role("r")
    assert roles_path.exists()


def test_a_reload_reads_back_every_field(store: RoleStore, roles_path: Path) -> None:
    store.create_role("alice", password="wonder", login=True, options=(("k", "v"),))
    store.create_role("dev", superuser=True)
    store.grant_role("dev", "alice")
    store.grant([P.SELECT, P.MODIFY], T, "alice")
    store.grant([P.DESCRIBE], Resource.all_roles(), "dev")
    reloaded = RoleStore(roles_path)
    assert reloaded.names() == store.names()
    for name in store.names():
        assert reloaded.get(name) == store.get(name)
        assert reloaded.get(name).permissions == store.get(name).permissions  # type: ignore[union-attr]
    assert reloaded.authenticate("alice", "wonder").name == "alice"
    assert reloaded.is_superuser("alice")


def test_a_failed_write_changes_nothing(
    store: RoleStore, roles_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create_role("alice")
    before = roles_path.read_bytes()

    def fail(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        store.create_role("bob")
    assert roles_path.read_bytes() == before
    assert store.names() == ["alice"]  # memory unchanged too
    assert [p.name for p in roles_path.parent.iterdir()] == ["roles.json"]
    monkeypatch.undo()
    assert RoleStore(roles_path).names() == ["alice"]


def test_a_refused_change_writes_nothing(store: RoleStore, roles_path: Path) -> None:
    store.create_role("a")
    store.create_role("b")
    store.grant_role("a", "b")
    before = roles_path.read_bytes()
    with pytest.raises(InvalidRequest):
        store.grant_role("b", "a")
    assert roles_path.read_bytes() == before


def _entry(**changes: object) -> dict[str, object]:
    entry: dict[str, object] = {
        "is_superuser": False,
        "can_login": False,
        "salted_hash": None,
        "member_of": [],
        "options": {},
        "permissions": {},
    }
    entry.update(changes)
    return entry


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "Expecting value"),
        ("{not json", "Expecting property name"),
        ("[]", "not a roles file of format 1"),
        ('{"format": 2, "roles": {}}', "not a roles file of format 1"),
        ('{"roles": {}}', "not a roles file of format 1"),
        ('{"format": 1}', "'roles'"),
        ('{"format": 1, "roles": []}', "'roles' is not an object"),
        (json.dumps({"format": 1, "roles": {"r": 1}}), "role 'r' is not an object"),
        (json.dumps({"format": 1, "roles": {"r": {}}}), "'is_superuser'"),
        (
            json.dumps({"format": 1, "roles": {"r": _entry(can_login="yes")}}),
            "role 'r': is_superuser and can_login must be booleans",
        ),
        (
            json.dumps({"format": 1, "roles": {"r": _entry(salted_hash=7)}}),
            "role 'r': salted_hash is not a string",
        ),
        (
            json.dumps({"format": 1, "roles": {"r": _entry(salted_hash="plain-Secret-pw")}}),
            "not a scrypt password hash",
        ),
        (
            json.dumps({"format": 1, "roles": {"r": _entry(member_of="a")}}),
            "member_of is not a list of names",
        ),
        (
            json.dumps({"format": 1, "roles": {"r": _entry(options={"k": 1})}}),
            "options is not a map of text",
        ),
        (
            json.dumps({"format": 1, "roles": {"r": _entry(permissions=[])}}),
            "permissions is not an object",
        ),
        (
            json.dumps({"format": 1, "roles": {"r": _entry(permissions={"mbean/x": []})}}),
            "not a resource name: 'mbean/x'",
        ),
        (
            json.dumps({"format": 1, "roles": {"r": _entry(permissions={"data": ["READ"]})}}),
            "'READ' is not a valid Permission",
        ),
    ],
)
def test_a_damaged_file_is_a_clear_server_error(roles_path: Path, text: str, reason: str) -> None:
    roles_path.parent.mkdir(parents=True)
    roles_path.write_text(text)
    with pytest.raises(ServerError) as info:
        RoleStore(roles_path)
    message = str(info.value)
    assert message.startswith(f"roles file {roles_path} is damaged: ")
    assert reason in message
    assert "Secret" not in message
    assert info.value.code == 0x0000
