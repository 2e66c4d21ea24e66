"""Named queries: each query module's SQL in a file of its own, every query of it used by it."""

import re
from pathlib import Path

import pytest

from comfyui_courier.store.db import SQL_DIR, Queries, parse

STORE = SQL_DIR.parent
USED = re.compile(r"""\bquery(?:\.\w+)?\(\s*["']([a-z0-9_]+)["']""")
"""A query named in a module's source: ``query("name")`` (or a method of ``query`` taking the name)."""


def module_of(sql: Path) -> Path:
    """The query module whose file ``sql`` is: ``sql/<module>.sql``, ``sql/store.sql`` the package's."""
    return STORE / ("__init__.py" if sql.stem == "store" else f"{sql.stem}.py")


def query_files() -> list[Path]:
    return sorted(path for path in SQL_DIR.glob("*.sql") if path.name != "schema.sql")


def test_each_query_module_has_its_own_file_and_uses_all_of_it():
    files = query_files()
    assert files, f"no query files in {SQL_DIR}"
    for sql in files:
        module = module_of(sql)
        assert module.is_file(), f"{sql.name}: no query module {module.name} for it"
        source = module.read_text(encoding="utf-8")
        assert "query = Queries(__name__)" in source, f"{module.name} does not load {sql.name}"
        defined, used = set(parse(sql.read_text(encoding="utf-8"))), set(USED.findall(source))
        assert defined, f"{sql.name} holds no query"
        assert sorted(defined - used) == [], f"queries of {sql.name} that {module.name} never runs"
        assert sorted(used - defined) == [], f"queries {module.name} runs that {sql.name} lacks"


def test_a_query_name_appears_in_one_file_only():
    seen: dict[str, str] = {}
    for sql in query_files():
        for name in parse(sql.read_text(encoding="utf-8")):
            assert name not in seen, f"query {name} in both {seen[name]} and {sql.name}"
            seen[name] = sql.name


def test_an_unknown_name_or_module_is_a_clear_error():
    query = Queries("comfyui_courier.store.jobs")
    with pytest.raises(KeyError, match="no query 'claim_jobs' in jobs.sql"):
        query("claim_jobs")
    with pytest.raises(FileNotFoundError, match="nowhere.sql"):
        Queries("comfyui_courier.store.nowhere")
