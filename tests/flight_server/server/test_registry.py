"""The SQLAlchemy registry, run against embedded SQLite and a real PostgreSQL server.

PostgreSQL: when the Debian binaries exist (``/usr/lib/postgresql/*/bin``) a throw-away cluster
is created with ``initdb`` in a temp dir and started with ``pg_ctl`` on loopback (as the
``postgres`` user when running as root, since ``initdb`` refuses root).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from catalog.errors import InvalidQueryError, TableAlreadyExistsError, UnknownTableError
from flight_server.server.registry import Registry, find_hudi_tables, parse_identifier
from tests.support.servers import free_port


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


@pytest.fixture(scope="session")
def postgres_url():
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip("PostgreSQL binaries not installed (apt-get install -y postgresql)")
    # Not under pytest's tmp dir: that one is private to the current user (mode 0700).
    data = Path(tempfile.mkdtemp(prefix="hudi-flight-pg-")) / "data"
    prefix: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        shutil.chown(data.parent, "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    subprocess.run(prefix + [str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"],
                   check=True, capture_output=True)
    subprocess.run(
        prefix + [str(bindir / "pg_ctl"), "-D", str(data), "-w", "-l", str(data.parent / "log"),
                  "-o", f"-c listen_addresses=127.0.0.1 -p {port} -k {data.parent}", "start"],
        check=True, capture_output=True,
    )
    try:
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(prefix + [str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"], capture_output=True)
        shutil.rmtree(data.parent, ignore_errors=True)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def registry(request, tmp_path):
    if request.param == "sqlite":
        reg = Registry(f"sqlite:///{tmp_path / 'catalog.db'}")
    else:
        import sqlalchemy as sa

        url = request.getfixturevalue("postgres_url")
        reg = Registry(url)
        with reg.engine.begin() as conn:  # a clean catalog per test
            conn.execute(sa.text("DELETE FROM hudi_flight_tables"))
            conn.execute(sa.text("DELETE FROM hudi_flight_namespaces"))
    yield reg
    reg.close()


def _make_table(root: Path, *parts: str) -> Path:
    path = root.joinpath(*parts)
    (path / ".hoodie").mkdir(parents=True)
    (path / ".hoodie" / "hoodie.properties").write_text("hoodie.table.name=x\n")
    return path


def test_register_load_list_unregister(registry):
    entry = registry.register_table("ns.t1", "/data/t1", {"anon": True}, {"owner": "me"})
    assert (entry.namespace, entry.name, entry.base_uri) == ("ns", "t1", "/data/t1")
    assert entry.storage_options == {"anon": True} and entry.properties == {"owner": "me"}
    assert entry.registered_at is not None and entry.registered_at.tzinfo is not None
    registry.register_table("other.t2", "/data/t2")
    assert registry.list_namespaces() == ["ns", "other"]
    assert [e.identifier for e in registry.list_tables()] == ["ns.t1", "other.t2"]
    assert [e.identifier for e in registry.list_tables("ns")] == ["ns.t1"]
    registry.unregister_table("ns.t1")
    with pytest.raises(UnknownTableError, match="ns.t1 is not registered"):
        registry.load_table("ns.t1")
    with pytest.raises(UnknownTableError):
        registry.unregister_table("ns.t1")


def test_same_uri_is_idempotent_other_uri_needs_replace(registry):
    registry.register_table("ns.t", "/a")
    registry.register_table("ns.t", "/a")
    with pytest.raises(TableAlreadyExistsError, match="already registered at /a"):
        registry.register_table("ns.t", "/b")
    assert registry.register_table("ns.t", "/b", replace=True).base_uri == "/b"
    assert len(registry.list_tables()) == 1


def test_persisted_across_instances(tmp_path):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    Registry(url).register_table("ns.t", "/a")
    assert Registry(url).load_table("ns.t").base_uri == "/a"


@pytest.mark.parametrize("bad", ["nodot", "a.b.c", ".t", "ns.", "a b.c"])
def test_bad_identifier(bad):
    with pytest.raises(InvalidQueryError, match="namespace.table"):
        parse_identifier(bad)


def test_bad_url():
    with pytest.raises(ValueError, match="cannot open catalog"):
        Registry("nosuchdialect://x")


def test_discovery_registers_and_forgets(registry, tmp_path):
    wh = tmp_path / "wh"
    _make_table(wh, "sales", "orders")
    _make_table(wh, "sales", "nested", "deep", "items")
    _make_table(wh, "top")  # directly under the warehouse: namespace = warehouse folder name
    (wh / "sales" / "orders" / "part=1").mkdir()
    _make_table(wh, "sales", "orders", "part=1", "inner")  # inside a table: not descended into
    (wh / ".hidden" / "x" / ".hoodie").mkdir(parents=True)
    assert sorted(find_hudi_tables(str(wh))) == [
        ("deep.items", f"{wh}/sales/nested/deep/items"),
        ("sales.orders", f"{wh}/sales/orders"),
        ("wh.top", f"{wh}/top"),
    ]
    registry.register_table("sales.manual", "/elsewhere")
    found = registry.discover(str(wh))
    assert sorted(e.identifier for e in found) == ["deep.items", "sales.orders", "wh.top"]
    assert all(e.warehouse == str(wh) for e in found)
    shutil.rmtree(wh / "top")
    registry.discover(str(wh))
    assert sorted(e.identifier for e in registry.list_tables()) == ["deep.items", "sales.manual", "sales.orders"]


def test_discovery_never_steals_a_manual_name(registry, tmp_path):
    wh = tmp_path / "wh"
    _make_table(wh, "sales", "orders")
    registry.register_table("sales.orders", "/manual")
    assert registry.discover(str(wh)) == []
    assert registry.load_table("sales.orders").base_uri == "/manual"


def test_discovery_skips_a_name_it_cannot_serve(registry, tmp_path):
    wh = tmp_path / "wh"
    _make_table(wh, "1.2.0", "orders")  # a dotted folder name is no namespace
    _make_table(wh, "sales\u202e", "orders")  # nor a name that reads as another
    _make_table(wh, "sales", "orders")
    assert [e.identifier for e in registry.discover(str(wh))] == ["sales.orders"]


def test_discovery_of_missing_warehouse(registry, tmp_path):
    with pytest.raises(FileNotFoundError):
        registry.discover(str(tmp_path / "nope"))


def test_discovery_follows_a_moved_table(registry, tmp_path):
    wh = tmp_path / "wh"
    _make_table(wh, "a", "sales", "orders")
    registry.discover(str(wh))
    assert registry.load_table("sales.orders").base_uri == f"{wh}/a/sales/orders"
    (wh / "b").mkdir()
    (wh / "a" / "sales").rename(wh / "b" / "sales")
    registry.discover(str(wh))
    assert registry.load_table("sales.orders").base_uri == f"{wh}/b/sales/orders"


def test_users_and_grants_in_the_catalog_database(registry):
    """Users and grants live beside the tables (SQLite and PostgreSQL), through the CLI too."""
    import io

    import sqlalchemy as sa

    from flight_server.cli.main import main
    from flight_server.server.security.users import Grant, UnknownUserError, UserExistsError, UserStore

    users = UserStore(registry.engine)
    with registry.engine.begin() as conn:  # a clean slate on the shared PostgreSQL server
        conn.execute(sa.text("DELETE FROM hudi_flight_grants"))
        conn.execute(sa.text("DELETE FROM hudi_flight_users"))
    assert not users.has_users()
    users.add_user("alice", "alice-password", admin=True)
    with pytest.raises(UserExistsError):
        users.add_user("alice", "another-password")
    assert users.check_password("alice", "alice-password").admin
    assert users.check_password("alice", "wrong-password") is None
    assert users.grant("bob", Grant.parse("read", "ns.t")) and not users.grant("bob", Grant.parse("read", "ns.t"))
    assert users.grants_of("bob") == {Grant("read", "ns", "t")}
    users.revoke("bob", Grant.parse("read", "ns.t"))
    with pytest.raises(UnknownUserError):
        users.revoke("bob", Grant.parse("read", "ns.t"))

    url = registry.engine.url.render_as_string(hide_password=False)
    stdin = io.StringIO("carol-password\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("sys.stdin", stdin)
        assert main(["users", "add", "carol", "--password-stdin", "--catalog-url", url]) == 0
    assert main(["grant", "read", "ns", "--to", "carol", "--catalog-url", url]) == 0
    assert users.grants_of("carol") == {Grant("read", "ns")}
    assert main(["revoke", "read", "ns", "--from", "carol", "--catalog-url", url]) == 0
    assert main(["users", "remove", "carol", "--catalog-url", url]) == 0
    assert users.user("carol") is None and users.check_password("carol", "carol-password") is None
    with registry.engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT password_hash FROM hudi_flight_users")).scalars().all()
    assert stored and not any("password" in h for h in stored)
