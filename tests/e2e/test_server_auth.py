"""``cqlcdc serve --auth`` with the real cassandra-driver and cqlsh: logins (SASL PLAIN as
PasswordAuthenticator), roles and permissions checked on every path a statement takes
(QUERY, prepared EXECUTE through the write combiner, BATCH), and Cassandra's messages."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cassandra import Unauthorized
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import Cluster, NoHostAvailable
from cassandra.policies import RoundRobinPolicy
from cassandra.query import BatchStatement

import cqlcdc
from cqlcdc.server import CqlServer
from tests.e2e.serving import WORKERS, serving, workers_id

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


@pytest.fixture(scope="module", params=WORKERS, ids=workers_id)
def secured(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[CqlServer]:
    """A server requiring logins, over a data directory without roles, alone or behind
    protocol workers."""
    session = cqlcdc.connect(data_dir=tmp_path_factory.mktemp("auth"), master="local[2]")
    with serving(session, auth=True, protocol_workers=request.param) as srv:
        yield srv


def _cluster(srv: CqlServer, user: str | None, password: str | None = None) -> Cluster:
    provider = None if user is None else PlainTextAuthProvider(user, password)
    return Cluster(
        [srv.host],
        port=srv.port,
        load_balancing_policy=RoundRobinPolicy(),
        auth_provider=provider,
        connect_timeout=5,
    )


def _login_error(srv: CqlServer, user: str | None, password: str | None = None) -> str:
    cluster = _cluster(srv, user, password)
    try:
        with pytest.raises(NoHostAvailable) as caught:
            cluster.connect()
    finally:
        cluster.shutdown()
    (error,) = caught.value.errors.values()
    return str(error)


@pytest.fixture(scope="module")
def admin(secured: CqlServer) -> Iterator[Any]:
    cluster = _cluster(secured, "cassandra", "cassandra")  # Cassandra's first superuser
    session = cluster.connect()
    session.execute(KS)
    session.execute("CREATE TABLE ks.t (pk int PRIMARY KEY, v text) WITH cdc = {'enabled': true}")
    session.execute("CREATE ROLE alice WITH PASSWORD = 'wonder-land' AND LOGIN = true")
    yield session
    cluster.shutdown()


@pytest.fixture(scope="module")
def alice(secured: CqlServer, admin: Any) -> Iterator[Any]:
    cluster = _cluster(secured, "alice", "wonder-land")
    yield cluster.connect()
    cluster.shutdown()


def test_a_login_is_required_and_checked(secured: CqlServer, admin: Any) -> None:
    assert "requires authentication" in _login_error(secured, None)
    wrong = _login_error(secured, "cassandra", "nope")
    assert "Provided username cassandra and/or password are incorrect" in wrong
    unknown = _login_error(secured, "mallory", "x")  # no hint that the role does not exist
    assert "Provided username mallory and/or password are incorrect" in unknown
    admin.execute("CREATE ROLE IF NOT EXISTS reader WITH PASSWORD = 'r'")  # LOGIN false
    assert "reader is not permitted to log in" in _login_error(secured, "reader", "r")


def test_the_roles_file_holds_hashes_only(secured: CqlServer, admin: Any) -> None:
    path = secured.coordinator.roles.location.path
    text = path.read_text()
    assert "alice" in text and "wonder-land" not in text
    assert "wonder-land" not in json.dumps(json.loads(text))  # not even escaped
    assert path.stat().st_mode & 0o077 == 0  # the owner's only


def test_permissions_are_checked_on_every_path(admin: Any, alice: Any) -> None:
    with pytest.raises(
        Unauthorized, match=re.escape("User alice has no SELECT permission on <table ks.t>")
    ):
        alice.execute("SELECT * FROM ks.t")
    insert = alice.prepare("INSERT INTO ks.t (pk, v) VALUES (?, ?)")
    with pytest.raises(Unauthorized, match=re.escape("has no MODIFY permission on <table ks.t>")):
        alice.execute(insert, (1, "a"))  # the write combiner's path
    batch = BatchStatement()
    batch.add(insert, (2, "b"))
    with pytest.raises(Unauthorized, match="MODIFY"):
        alice.execute(batch)
    with pytest.raises(Unauthorized):  # the log table is a table like any other
        alice.execute("SELECT * FROM ks.t_scylla_cdc_log")
    with pytest.raises(Unauthorized, match="CREATE permission on <keyspace ks>"):
        alice.execute("CREATE TABLE ks.mine (pk int PRIMARY KEY)")
    # what drivers read on connect stays readable
    assert alice.execute("SELECT cluster_name FROM system.local").one().cluster_name == "cqlcdc"
    assert admin.execute("SELECT * FROM ks.t").all() == []  # nothing was written

    admin.execute("GRANT MODIFY ON TABLE ks.t TO alice")
    admin.execute("GRANT SELECT ON KEYSPACE ks TO alice")
    alice.execute(insert, (1, "a"))
    alice.execute(batch)
    rows = alice.execute("SELECT pk, v FROM ks.t")
    assert sorted(tuple(r) for r in rows) == [(1, "a"), (2, "b")]
    log = alice.execute('SELECT pk, "cdc$operation" FROM ks.t_scylla_cdc_log')
    assert sorted(tuple(r) for r in log) == [(1, 2), (2, 2)]
    listed = admin.execute("LIST ALL PERMISSIONS OF alice")
    assert {(r.resource, r.permission) for r in listed} == {
        ("<table ks.t>", "MODIFY"),
        ("<keyspace ks>", "SELECT"),
    }
    admin.execute("REVOKE MODIFY ON TABLE ks.t FROM alice")
    with pytest.raises(Unauthorized):
        alice.execute(insert, (3, "c"))


def test_role_statements(admin: Any, alice: Any) -> None:
    names = {r.role for r in admin.execute("LIST ROLES")}
    assert {"cassandra", "alice"} <= names
    with pytest.raises(Unauthorized, match="does not have sufficient privileges"):
        alice.execute("CREATE ROLE bob")
    alice.execute("ALTER ROLE alice WITH PASSWORD = 'looking-glass'")  # one's own password
    admin.execute("ALTER ROLE alice WITH PASSWORD = 'wonder-land'")


def test_a_creator_owns_what_it_creates_and_a_drop_forgets_grants(
    secured: CqlServer, admin: Any
) -> None:
    admin.execute("CREATE ROLE maker WITH PASSWORD = 'm' AND LOGIN = true")
    admin.execute("GRANT CREATE ON ALL KEYSPACES TO maker")
    cluster = _cluster(secured, "maker", "m")
    try:
        maker = cluster.connect()
        maker.execute(KS.replace("KEYSPACE ks", "KEYSPACE made"))
        maker.execute("CREATE TABLE made.x (pk int PRIMARY KEY, v int)")
        maker.execute("INSERT INTO made.x (pk, v) VALUES (1, 1)")  # the creator's grants
        assert [tuple(r) for r in maker.execute("SELECT * FROM made.x")] == [(1, 1)]
        admin.execute("DROP KEYSPACE made")
        granted = {r.resource for r in admin.execute("LIST ALL PERMISSIONS OF maker")}
        assert not any("made" in g for g in granted)
    finally:
        cluster.shutdown()


def test_without_auth_clients_are_anonymous(spark: Any, tmp_path: Path) -> None:
    session = cqlcdc.connect(data_dir=tmp_path, master="local[2]")
    srv = CqlServer(session.coordinator, port=0)
    srv.start_in_thread()
    try:
        cluster = _cluster(srv, None)
        try:
            client = cluster.connect()
            with pytest.raises(Unauthorized, match="You have to be logged in and not anonymous"):
                client.execute("CREATE ROLE bob")
            client.execute(KS)  # everything else is allowed
        finally:
            cluster.shutdown()
        # the owner of the data directory may set roles up before serving with --auth
        session.execute("CREATE ROLE ops WITH PASSWORD = 'o' AND LOGIN = true")
        assert session.coordinator.roles.exists("ops")
    finally:
        srv.stop_thread()
        session.close()


def test_cqlsh_logs_in(secured: CqlServer, admin: Any) -> None:
    cqlsh = Path(sys.executable).with_name("cqlsh")

    def run(*login: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(cqlsh), secured.host, str(secured.port), *login, "-e", "LIST ROLES;"],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=120,
            check=False,
        )

    done = run("-u", "cassandra", "-p", "cassandra")
    assert done.returncode == 0, done.stderr
    assert "alice" in done.stdout and "cassandra" in done.stdout
    refused = run("-u", "cassandra", "-p", "wrong")
    assert refused.returncode != 0
    assert "Provided username cassandra and/or password are incorrect" in refused.stderr
