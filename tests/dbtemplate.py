"""The test database, migrated once and copied for every test process.

Migrating the whole project takes about a minute, and `make test` starts several test
processes at once (each xdist worker, the serial pass, the engine pass): each of them used to
migrate a database of its own, all at the same moment on the same two cores. Instead the
first process to come migrates one database, keeps it as a PostgreSQL template named by a
digest of every migration file and every installed package's version, and each process then
creates its own test database from it (`CREATE DATABASE … TEMPLATE`, a file copy: about a
second). A changed migration, model package or dependency names a new template; older ones
are dropped. Nothing about the schema is assumed: the template is what `migrate` made.

An advisory lock on the server's `postgres` database makes the processes that start at once
wait for the one that builds the template rather than build it too.

After a transactional test (a live server's, a worker's, a race's), the database is put back
as the template left it in a few milliseconds (`rows_restore`) rather than by Django's flush,
which truncated every table (new files for each table and index: about 0.3 s) and then ran
`post_migrate` again to make the content types and permissions it had just emptied (0.2 s
more), a hundred times a run. Every table's rows are deleted with triggers off (the foreign
keys' and the audit log's, as TRUNCATE passes them), and the rows the migrations seeded
(content types, permissions, glossary terms) are copied back as they were.

Test databases commit without waiting for the WAL to reach the disk (`synchronous_commit =
off`, set on the database, so the servers and commands the tests start get it too): a
commit here cost 1.3–2.5 ms of waiting for the disk against 0.05–0.1 ms, and the suite
commits hundreds of thousands of times (every autocommitted statement of a transactional
test, every migration, every flush). Nothing in it survives a crash of the server, which
no test causes; what a commit makes visible and what constraints hold are unchanged.
"""

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from importlib import metadata
from pathlib import Path

import psycopg
from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.db import connections, transaction
from django.test import TransactionTestCase
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "anchorgpu_tpl_"
KEPT = 4  # templates kept on the server, this one included


@cache
def digest() -> str:
    """Of what decides the migrated schema: our migrations and every package's version
    (allauth's, Django's own and others' migrations come with their package)."""
    h = hashlib.sha256()
    for path in sorted(ROOT.glob("*/migrations/*.py")):
        h.update(str(path.relative_to(ROOT)).encode())
        h.update(path.read_bytes())
    for dist in sorted(f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions()):
        h.update(dist.encode())
    return h.hexdigest()[:16]


def _server(settings_dict, dbname: str = "postgres") -> psycopg.Connection:
    return psycopg.connect(
        dbname=dbname,
        user=settings_dict["USER"] or None,
        password=settings_dict["PASSWORD"] or None,
        host=settings_dict["HOST"] or None,
        port=settings_dict["PORT"] or None,
        autocommit=True,
    )


def _exists(server, name: str) -> bool:
    return bool(server.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone())


def test_database_create(alias: str = "default") -> str:
    """Create this process's test database for `alias` from the template (building the
    template first if nobody has), point Django's settings at it and return its name."""
    connection = connections[alias]
    creation = connection.creation
    test_name = creation._get_test_db_name()
    template = PREFIX + digest()
    with _server(connection.settings_dict) as server:
        server.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", [PREFIX])
        try:
            if not _exists(server, template):
                _template_build(server, creation, template)
                return test_name  # the build left this process's database migrated
            server.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(test_name))
            )
            server.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    sql.Identifier(test_name), sql.Identifier(template)
                )
            )
            _commits_unsynced(server, test_name)
        finally:
            server.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [PREFIX])
    connection.close()
    connection.settings_dict["NAME"] = test_name
    settings.DATABASES[alias]["NAME"] = test_name
    return test_name


def _template_build(server, creation, template: str) -> None:
    """Migrate this process's test database the usual way, then copy it as the template;
    all but the newest few older templates go (other checkouts on this server may still
    use theirs)."""
    options = creation.connection.settings_dict.setdefault("OPTIONS", {})
    options["options"] = f"{options.get('options', '')} -c synchronous_commit=off".strip()
    creation.create_test_db(verbosity=0, autoclobber=True, serialize=False, keepdb=False)
    creation.connection.close()
    _commits_unsynced(server, creation.connection.settings_dict["NAME"])
    stale = server.execute(
        "SELECT datname FROM pg_database WHERE datname LIKE %s AND datname <> %s"
        " ORDER BY oid DESC OFFSET %s",
        [PREFIX + "%", template, KEPT - 1],
    ).fetchall()
    for (name,) in stale:
        server.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
    server.execute(
        sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(template), sql.Identifier(creation.connection.settings_dict["NAME"])
        )
    )


@contextmanager
def empty_database(alias: str = "default") -> Iterator[str]:
    """`alias` on a database of its own with nothing in it while the block runs (a migration
    test migrates it forward from nothing), then back on this process's test database, which
    nobody touched meanwhile; the empty one goes. Cheaper than emptying the test database and
    copying the template back: each DROP DATABASE waits for a checkpoint of the whole server
    (seconds while other tests write), and this makes one instead of two."""
    connection = connections[alias]
    test_name = connection.settings_dict["NAME"]
    name = f"{test_name}_empty"
    connection.close()
    with _server(connection.settings_dict) as server:
        server.execute(  # only an interrupted run leaves one; none there costs no checkpoint
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        server.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        _commits_unsynced(server, name)
    _point(alias, name)
    try:
        yield name
    finally:
        _point(alias, test_name)
        test_database_destroy(alias, name)


def _point(alias: str, name: str) -> None:
    connection = connections[alias]
    connection.close()
    connection.settings_dict["NAME"] = name
    settings.DATABASES[alias]["NAME"] = name
    ContentType.objects.clear_cache()  # its ids are the other database's


def _commits_unsynced(server, name: str) -> None:
    server.execute(
        sql.SQL("ALTER DATABASE {} SET synchronous_commit = off").format(sql.Identifier(name))
    )


def test_database_destroy(alias: str, name: str) -> None:
    connection = connections[alias]
    connection.close()
    with _server(connection.settings_dict) as server:
        server.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


# --- The clean slate after a transactional test ------------------------------------------

Rows = dict[str, bytes]  # a table's rows as COPY writes them (binary), by table
_tables: dict[str, list[str]] = {}  # by alias: the tables a flush empties
_seeded: dict[str, Rows] = {}  # by alias: the rows the migrations left in them


def rows_capture(alias: str = "default") -> bool:
    """Remember the tables a flush empties and the rows the migrations left in them, from
    this process's fresh copy of the template. False where triggers cannot be turned off
    (a role that is not a superuser): Django's flush then stays."""
    connection = connections[alias]
    tables = sorted(connection.introspection.django_table_names(only_existing=True))
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        if not cursor.fetchone()[0]:
            return False
    _tables[alias] = tables
    _seeded[alias] = rows_snapshot(alias)
    return True


def rows_captured(alias: str = "default") -> bool:
    """Whether `rows_capture` ran for `alias`: snapshots and restores work there."""
    return alias in _seeded


def rows_snapshot(alias: str = "default") -> Rows:
    """Every row of the tables a flush empties, for `rows_restore` to put back: a world that
    several transactional tests share is built once and restored for each of them."""
    connection = connections[alias]
    found = sql.SQL(" UNION ALL ").join(
        sql.SQL("SELECT {} WHERE EXISTS (SELECT FROM {})").format(
            sql.Literal(table), sql.Identifier(table)
        )
        for table in _tables[alias]
    )
    rows = {}
    with connection.cursor() as cursor:
        cursor.execute(found.as_string(connection.connection))
        for (table,) in cursor.fetchall():
            with cursor.copy(  # a partitioned table is read as a query
                sql.SQL("COPY (SELECT * FROM {}) TO STDOUT (FORMAT BINARY)").format(
                    sql.Identifier(table)
                )
            ) as copy:
                rows[table] = b"".join(bytes(block) for block in copy)
    return rows


def rows_restore(alias: str = "default", rows: Rows | None = None) -> bool:
    """Put the database back as the template left it, or as `rows_snapshot` found it: every
    table emptied with triggers off (session_replication_role = replica), the rows copied
    back, in one transaction. False when `rows_capture` did not run for `alias`."""
    if not rows_captured(alias):
        return False
    connection = connections[alias]
    deletes = sql.SQL("; ").join(
        sql.SQL("DELETE FROM {}").format(sql.Identifier(table)) for table in _tables[alias]
    )
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute(deletes.as_string(connection.connection))
        for table, data in (_seeded[alias] if rows is None else rows).items():
            with cursor.copy(
                sql.SQL("COPY {} FROM STDIN (FORMAT BINARY)").format(sql.Identifier(table))
            ) as copy:
                copy.write(data)
    return True


def transactional_teardown(test_case) -> None:
    """`TransactionTestCase._fixture_teardown` (which pytest-django's transactional tests
    run) by `rows_restore`; Django's own flush where the test narrows the apps or rolls back
    by serializing, or where no rows were captured."""
    aliases = test_case._databases_names(include_mirrors=False)
    plain = test_case.available_apps is None and not test_case.serialized_rollback
    if not (plain and all(rows_restore(alias) for alias in aliases)):
        _django_teardown(test_case)


_django_teardown = TransactionTestCase._fixture_teardown
