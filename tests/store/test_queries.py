"""Named queries: each query module's SQL in a file of its own, every query of it used by it, and
parameters by name for the wide statements."""

import re
from pathlib import Path

import pytest

from comfyui_courier.store.db import SQL_DIR, Queries, Sql, parse

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
        defined, used = set(parse(sql)), set(USED.findall(source))
        assert defined, f"{sql.name} holds no query"
        assert sorted(defined - used) == [], f"queries of {sql.name} that {module.name} never runs"
        assert sorted(used - defined) == [], f"queries {module.name} runs that {sql.name} lacks"


def test_a_query_name_appears_in_one_file_only():
    seen: dict[str, str] = {}
    for sql in query_files():
        for name in parse(sql):
            assert name not in seen, f"query {name} in both {seen[name]} and {sql.name}"
            seen[name] = sql.name


def test_an_unknown_name_or_module_is_a_clear_error():
    query = Queries("comfyui_courier.store.jobs")
    with pytest.raises(KeyError, match="no query 'claim_jobs' in jobs.sql"):
        query("claim_jobs")
    with pytest.raises(FileNotFoundError, match="nowhere.sql"):
        Queries("comfyui_courier.store.nowhere")


WIDE = 5
"""More parameters than this: the query names them."""


def test_every_wide_statement_names_its_parameters():
    for sql in query_files():
        for name, query in parse(sql).items():
            numbered = set(re.findall(r"\$(\d+)", re.sub(r"--[^\n]*", "", query.text)))
            assert query.names or len(numbered) <= WIDE, \
                f"{sql.name}: {name} takes {len(numbered)} parameters $n: name them (:name, query.bind)"


def queries_of(tmp_path, text: str) -> dict[str, Sql]:
    (tmp_path / "some.sql").write_text(text, encoding="utf-8")
    return parse(tmp_path / "some.sql")


def test_named_parameters_are_numbered_in_order_of_first_use_outside_strings_comments_and_casts(tmp_path):
    parsed = queries_of(tmp_path, """-- header, not a query: :nothing
-- pick --
-- Picks :ignored_in_a_comment.
SELECT :b::bigint[], ':not_in_a_string', ":not_a_name", x[1:2], :a, /* :nor_here */ :b
FROM t WHERE j->>'k' = :a;
""")
    assert parsed["pick"] == Sql("-- Picks :ignored_in_a_comment.\nSELECT $1::bigint[], ':not_in_a_string', "
                                 "\":not_a_name\", x[1:2], $2, /* :nor_here */ $1\nFROM t WHERE j->>'k' = $2",
                                 ("b", "a"))


def test_a_query_mixing_named_and_numbered_parameters_is_refused_at_load(tmp_path):
    with pytest.raises(ValueError, match="query 'both' in some.sql: both :name and \\$n parameters"):
        queries_of(tmp_path, "-- both --\nSELECT :a, $2;\n")


def test_binding_by_name_checks_every_name():
    query = Queries("comfyui_courier.store.deliveries")
    files = dict(output=[], filename=[], subfolder=[], type=[], via=[], data=[])
    text, *values = query.bind("park_job", job_id=7, worker="w", **files)
    assert values == [7, "w", [], [], [], [], [], []] and "$8::bytea[]" in text
    with pytest.raises(TypeError, match="query 'park_job' in deliveries.sql: missing worker; unknown wroker"):
        query.bind("park_job", job_id=7, wroker="w", **files)
    with pytest.raises(TypeError, match="takes named parameters: use query.bind"):
        query("park_job")
    with pytest.raises(TypeError, match=r"takes \$1, \$2, …: use query\('get_delivery'\)"):
        query.bind("get_delivery", job_id=7, output="1")
