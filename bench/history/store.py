"""Open the history database, check or create its schema, and write to it.

The store is a SQLite file (a path; WAL journal, a busy timeout and BEGIN IMMEDIATE so that
several writers wait for each other instead of failing) or a PostgreSQL URL (schema creation
under an advisory lock; a run's identity is a unique key, so two writers never store it twice).
Every database error becomes one BadInput naming the store; a database that is not ours, is
corrupt or was written by a newer release is refused before anything in it is touched.
"""

from __future__ import annotations

import getpass
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from sqlalchemy import (
    Connection,
    CursorResult,
    Engine,
    create_engine,
    event,
    insert,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError, SQLAlchemyError

from ..errors import BadInput
from ..redact import redact_url, scrub, userinfo
from . import DEFAULT_DB, queries, schema
from .ingest import RunRecord
from .migrate import MIGRATIONS

URL_FORM = "postgresql://USER:PASSWORD@HOST:PORT/DATABASE"
URL_HINT = "'@' as %40, '/' as %2F, ':' as %3A, '[' as %5B"
SQLITE_BUSY_TIMEOUT_S = 60.0
PG_CONNECT_TIMEOUT_S = 10
PG_LOCK_KEY = 0x6770_7562_656E_6368  # "gpubench": serializes schema creation and migration
WRITE_ATTEMPTS = 5


T = TypeVar("T")


def parse_target(target: str) -> URL:
    """A --db value as a SQLAlchemy URL: a path is a SQLite file, a URL must be SQLite or PostgreSQL."""
    value = str(target).strip()
    if not value:
        raise BadInput("--db is empty", hint="give a SQLite file path or a postgresql:// URL")
    if "://" not in value:
        return URL.create("sqlite", database=str(Path(value).expanduser()))
    named = redact_url(value)  # the password hidden, however malformed the rest (bench/redact.py)
    pair = userinfo(value)
    if pair is not None and "@" in pair[1]:  # else the driver would take part of it for the host
        raise BadInput(f"--db {named}: the password holds an '@'", hint=f"write it percent-encoded: {URL_HINT}")
    try:
        url = make_url(value)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise BadInput(f"--db {named} is not a database URL", hint=f"write {URL_FORM}, {URL_HINT}") from None
    backend = url.get_backend_name()
    if backend in ("postgresql", "postgres"):
        if not url.database:
            raise BadInput(f"--db {shown(url)}: names no database", hint="write postgresql://USER@HOST/DATABASE")
        if url.port is not None and not 0 < url.port < 65536:
            raise BadInput(f"--db {shown(url)}: port {url.port} is not a TCP port (1-65535)")
        return url.set(drivername="postgresql+psycopg")
    if backend == "sqlite":
        if url.database in (None, "", ":memory:"):
            raise BadInput(f"--db {named}: an in-memory database keeps nothing", hint="give a file path")
        return url.set(drivername="sqlite")
    raise BadInput(
        f"--db {shown(url)}: unsupported database '{backend}'",
        hint=f"use a SQLite file path (default {DEFAULT_DB}) or a postgresql:// URL",
    )


def shown(url: URL) -> str:
    """The store's name for messages: the file path, or the URL without its password."""
    if url.get_backend_name() == "sqlite":
        return str(url.database)
    return redact_url(url.render_as_string(hide_password=True))


def secrets(url: URL) -> list[str]:
    """The URL's password and password= parameter, as given and percent-encoded: hidden from any message."""
    values = [url.password, url.query.get("password")]
    words = [str(w) for v in values for w in ([v] if isinstance(v, str) else (v or ()))]
    return [*words, *(quote(w, safe="") for w in words)]


class Store:
    """An open history database. Use open_store(); close it (or use it as a context manager)."""

    def __init__(self, engine: Engine, url: URL) -> None:
        self.engine = engine
        self.url = url
        self.name = shown(url)
        self.is_sqlite = url.get_backend_name() == "sqlite"

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.engine.dispose()

    # -- transactions ----------------------------------------------------------------------------
    @contextmanager
    def errors(self) -> Iterator[None]:
        """Database errors as one BadInput naming the store."""
        try:
            yield
        except SQLAlchemyError as exc:
            raise BadInput(f"history database {self.name}: {scrub(_reason(exc), secrets(self.url))}") from None

    def read(self, fn: Callable[[Connection], T]) -> T:
        with self.errors(), self.engine.connect() as conn:
            return fn(conn)

    def write(self, fn: Callable[[Connection], T]) -> T:
        with self.errors():
            return self._retrying(fn)

    def _retrying(self, fn: Callable[[Connection], T]) -> T:
        """fn in one transaction, retried while another writer holds the database."""
        for attempt in range(WRITE_ATTEMPTS):
            try:
                with self.engine.begin() as conn:
                    return fn(conn)
            except OperationalError as exc:
                if attempt == WRITE_ATTEMPTS - 1 or not _is_busy(exc):
                    raise
                time.sleep(0.2 * 2**attempt)
        raise AssertionError("unreachable")

    # -- writes ----------------------------------------------------------------------------------
    def add_run(self, record: RunRecord) -> tuple[int, bool]:
        """Store a run (its results and repeats); (run id, False) when it was there already."""

        def store(conn: Connection) -> tuple[int, bool]:
            existing = _run_id(conn, record)
            if existing is not None:
                return existing, False
            values = {**record.run, "recorded_at": _now()}
            run_id = _new_id(conn.execute(insert(schema.runs).values(**values)))
            _add_results(conn, run_id, record)
            return run_id, True

        with self.errors():
            try:
                return self._retrying(store)
            except IntegrityError:
                # another writer stored the same run between our look-up and our insert
                with self.engine.connect() as conn:
                    existing = _run_id(conn, record)
                if existing is None:
                    raise
                return existing, False

    def add_accepts(self, rows: list[dict[str, Any]]) -> None:
        """Record accepted steps (series_key, scenario, metric, run_id, note)."""
        stamp = {"accepted_at": _now(), "accepted_by": _user()}
        self.write(lambda conn: conn.execute(insert(schema.accepts), [{**r, **stamp} for r in rows]))


def _add_results(conn: Connection, run_id: int, record: RunRecord) -> None:
    """The run's results, their repeats and both kinds of figure rows: a statement per result, then
    one per table for the whole run."""
    result_ids = [
        _new_id(conn.execute(insert(schema.results).values(run_id=run_id, **result.values)))
        for result in record.results
    ]
    figures = [
        {"result_id": result_id, "metric": metric, "median": f.median, "spread_pct": f.spread_pct, "n": f.n}
        for result_id, result in zip(result_ids, record.results, strict=True)
        for metric, f in result.figures.items()
    ]
    repeats = [
        {"result_id": result_id, **r}
        for result_id, result in zip(result_ids, record.results, strict=True)
        for r in result.repeats
    ]
    for rows, into in ((figures, schema.result_figures), (repeats, schema.repeats)):
        if rows:
            conn.execute(insert(into), rows)
    if not repeats:
        return
    stored = select(schema.repeats.c.result_id, schema.repeats.c.repeat, schema.repeats.c.id).where(
        schema.repeats.c.result_id.in_(result_ids)
    )
    repeat_ids = {(int(res), int(rep)): int(id_) for res, rep, id_ in conn.execute(stored)}
    values = [
        {"repeat_id": repeat_ids[(result_id, int(r["repeat"]))], "metric": metric, "value": value}
        for result_id, result in zip(result_ids, record.results, strict=True)
        for r, found in zip(result.repeats, result.repeat_figures, strict=True)
        for metric, value in found.items()
    ]
    if values:
        conn.execute(insert(schema.repeat_figures), values)


def open_store(target: str, *, write: bool) -> Store:
    """Open (write=True: create if new, migrate if old) the history database at target."""
    url = parse_target(target)
    if url.get_backend_name() == "sqlite":
        engine = _sqlite_engine(url, write)
    else:
        try:
            engine = create_engine(url, connect_args={"connect_timeout": PG_CONNECT_TIMEOUT_S})
        except ImportError as exc:
            if exc.name == "psycopg":  # an optional dependency since gpubench[postgres]
                raise BadInput(
                    f"--db {shown(url)}: PostgreSQL needs the psycopg driver, which is not installed here",
                    hint="install it with: pip install 'gpubench[postgres]'",
                ) from None
            raise BadInput(f"--db {shown(url)}: {scrub(str(exc), secrets(url))}") from None
        except ArgumentError as exc:
            raise BadInput(f"--db {shown(url)}: {scrub(str(exc), secrets(url))}") from None
    store = Store(engine, url)
    try:
        with store.errors(), engine.begin() as conn:
            _prepare(conn, store, write)
        if write and store.is_sqlite:
            _use_wal(store)
    except BaseException:
        store.close()
        raise
    return store


def _sqlite_engine(url: URL, write: bool) -> Engine:
    path = Path(str(url.database))
    if path.is_dir():
        raise BadInput(f"--db {path}: is a directory", hint="give a file, e.g. results/history.sqlite")
    if not path.exists():
        if not write:
            raise BadInput(
                f"{path}: no history database here",
                hint="store a run with `gpubench run --record` or `gpubench history import DIR`",
            )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BadInput(f"--db {path}: cannot create its folder: {exc.strerror or exc}") from None
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # the driver's own BEGINs off: we send ours below
        dbapi_conn.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        dbapi_conn.execute("PRAGMA foreign_keys = ON")

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        # IMMEDIATE takes the write lock up front (waiting for it), so a writer never fails
        # half-way when another one committed since it started reading
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def _prepare(conn: Connection, store: Store, write: bool) -> None:
    """Check the schema; create it in an empty database; migrate an older one."""
    if not store.is_sqlite and write:
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_LOCK_KEY})
    names = set(inspect(conn).get_table_names())
    if "schema_version" not in names:
        if names:
            listing = ", ".join(sorted(names)[:5]) + (", ..." if len(names) > 5 else "")
            raise BadInput(
                f"{store.name}: not a gpubench history database (it holds other tables: {listing})",
                hint="point --db at a new file or an empty database",
            )
        if not write:
            raise BadInput(f"{store.name}: the history database is empty", hint="store a run first")
        schema.metadata.create_all(conn)
        conn.execute(
            insert(schema.schema_version).values(app=schema.APP, version=schema.SCHEMA_VERSION, updated_at=_now())
        )
        return
    table = schema.schema_version
    version = conn.execute(select(table.c.version).where(table.c.app == schema.APP)).scalar()
    if version is None:
        raise BadInput(f"{store.name}: not a gpubench history database (no gpubench schema version)")
    if version > schema.SCHEMA_VERSION:
        raise BadInput(
            f"{store.name}: written by a newer gpubench (schema version {version}; "
            f"this release reads up to {schema.SCHEMA_VERSION})",
            hint="upgrade gpubench",
        )
    if version < schema.SCHEMA_VERSION:
        if not write:
            raise BadInput(
                f"{store.name}: schema version {version} is older than {schema.SCHEMA_VERSION}",
                hint="any writing command (`gpubench history import`) migrates it",
            )
        for step in range(version, schema.SCHEMA_VERSION):
            MIGRATIONS[step](conn)
        conn.execute(
            table.update().where(table.c.app == schema.APP).values(version=schema.SCHEMA_VERSION, updated_at=_now())
        )
        names = set(inspect(conn).get_table_names())  # a step may have made tables
    missing = set(schema.TABLES) - names
    if missing:
        raise BadInput(f"{store.name}: damaged history database (missing tables: {', '.join(sorted(missing))})")


def _use_wal(store: Store) -> None:
    """WAL lets readers go on while one process writes; set once, kept in the file."""
    # busy: another process is switching it; the rollback journal works too, only slower
    with store.engine.connect() as conn, suppress(Exception):
        conn.connection.driver_connection.execute("PRAGMA journal_mode = WAL")  # type: ignore[union-attr]


def _run_id(conn: Connection, record: RunRecord) -> int | None:
    found = queries.stored_run(conn, record)
    return None if found is None else int(found["id"])


def _new_id(result: CursorResult[Any]) -> int:
    key = result.inserted_primary_key
    if key is None:
        raise AssertionError("an insert returned no primary key")
    return int(key[0])


def _is_busy(exc: OperationalError) -> bool:
    text_ = str(exc.orig).lower()
    code = getattr(exc.orig, "sqlstate", None)
    return "locked" in text_ or "busy" in text_ or code in ("40001", "40P01")


def _reason(exc: SQLAlchemyError) -> str:
    orig = getattr(exc, "orig", None)
    message = str(orig if orig is not None else exc).strip()
    return message.splitlines()[0] if message else type(exc).__name__


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _user() -> str | None:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return None
