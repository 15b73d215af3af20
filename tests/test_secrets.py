"""A database URL's password is never shown (docs/running.md, "What gpubench guarantees"): not in
an error however malformed the URL (from --db or GPUBENCH_DB), not in `history` output, not in a
run's env.json, report or logs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from harness import SHORT, error_lines, gpubench, gpubench_in_process, write_matrix
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.history import DB_ENV, library
from bench.redact import redact_arg, redact_url

MARK = "Zq7"  # every password starts with it, so that no other text contains it by chance
password = st.text(alphabet=st.sampled_from("abcXYZ019@[]:/?#%& !$'\"éあ"), min_size=3, max_size=16).map(
    lambda s: MARK + s
)
malformed_url = st.tuples(
    st.sampled_from(["postgresql", "postgres", "PostgreSQL", "postgresql+psycopg", "mysql", "sqlite", "x y"]),
    st.sampled_from(["u", "", "user.name", "a b"]),
    password,
    st.sampled_from(["127.0.0.1", "[::1", "[::1]", "", "127.0.0.1]"]),
    st.sampled_from(["", ":1", ":abc", ":99999", ":-1", ":", ":1:2"]),
    st.sampled_from(["/db", "", "/", "/d@b", "/:memory:"]),
    st.sampled_from(["", "?sslmode=disable", "?password=", "&x", "?connect_timeout=x"]),
)


def build(parts: tuple[str, ...]) -> tuple[str, str]:
    scheme, user, secret, host, port, db, query = parts
    query = query + secret if query.endswith("password=") else query
    return f"{scheme}://{user}:{secret}@{host}{port}{db}{query}", secret


@settings(max_examples=60, deadline=None)
@given(malformed_url, st.booleans())
def test_no_malformed_url_shows_its_password(parts: tuple[str, ...], from_env: bool) -> None:
    url, secret = build(parts)
    if from_env:
        os.environ[DB_ENV] = url
        try:
            done = gpubench_in_process("history", "list")
        finally:
            del os.environ[DB_ENV]
    else:
        done = gpubench_in_process("history", "list", "--db", url)
    assert done.code == 2, done
    assert secret not in done.out + done.err
    assert len(error_lines(done.err)) == 1


@given(malformed_url)
def test_redaction_hides_the_password_of_any_url_or_word(parts: tuple[str, ...]) -> None:
    url, secret = build(parts)
    assert secret not in redact_url(url)
    assert secret not in redact_arg(f"--db={url}")
    assert redact_url("results/history.sqlite") == "results/history.sqlite"


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:Zq7secret@127.0.0.1:abc/db",  # a port that is not a number
        "postgresql://u:Zq7secret@[::1/db",  # an unbalanced [
        "postgresql://u:Zq7se@cret@127.0.0.1/db",  # an unencoded @: the driver took 'cret@...' for the host
        "postgresql://u@127.0.0.1:1/db?password=Zq7secret",  # a password parameter
    ],
)
def test_the_urls_that_showed_their_password(url: str) -> None:
    for args in (["history", "list", "--db", url], ["history", "show", "--db", url, "-s", "baseline"]):
        done = gpubench_in_process(*args)
        assert done.code == 2 and "Zq7" not in done.err and "cret" not in done.err, done.err


def test_a_recorded_run_keeps_no_password_in_env_json_report_or_logs(tmp_path: Path) -> None:
    url = "postgresql://u:Zq7secret@127.0.0.1:1/db"
    matrix = write_matrix(tmp_path / "m.toml", {"baseline": {}}, base=SHORT)
    out = tmp_path / "run"
    done = gpubench("run", "--matrix", matrix, "--device", "cpu", "--out", out, "--record", "--db", url, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "not recorded in the history" in done.stderr  # nothing listens on port 1: only a warning
    assert "Zq7secret" not in done.stdout + done.stderr
    env = json.loads((out / "env.json").read_text())
    assert "--db" in env["command"] and "postgresql://u:***@127.0.0.1:1/db" in env["command"]
    for path in out.rglob("*"):
        if path.is_file():
            assert b"Zq7secret" not in path.read_bytes(), path


def test_the_recorded_line_names_the_store_without_its_password(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(library, "import_dirs", lambda *_a, **_k: [library.Imported(tmp_path, 3, True, 1)])
    said: list[str] = []
    library.record_after_run("postgresql://u:Zq7secret@h/db", tmp_path, unfinished=False, warn=said.append,
                         info=said.append)  # fmt: skip
    assert said == ["history: recorded run 3 in postgresql://u:***@h/db"]
