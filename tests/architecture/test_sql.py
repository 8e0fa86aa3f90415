"""Hand-written SQL has one home per app and one way of being built (docs/architecture.md,
"Where SQL lives"), read from the syntax trees of every app module:

(a) no SQL is built by string formatting: no f-string, no `%`, no `+`, and no `.format(`,
    `.replace(` or `.join(` on a string that holds SQL (`psycopg.sql.SQL(...).format(...)`
    is the one way to fill in a variable part; renaming placeholders with `.replace` is
    formatting too);
(b) no enum word is quoted in SQL text: a `'value'` where value is one of the project's
    `TextChoices` is a parameter instead (`%(active)s`, `= ANY(%(states)s)`);
(c) no SQL text outside the apps' `sql.py` modules (or `sql/` packages), except the
    database's clock in core/db.py and the launcher's psql for the embedded server.

SQL text is a string with an SQL statement in capitals (SELECT …, INSERT INTO, UPDATE … SET,
DELETE FROM, WITH … AS (, DDL, COPY … FROM STDIN), or with an SQL keyword in capitals beside
a parameter or a quoted word (a WHERE fragment); in a `sql.py` module every string is.
Docstrings are prose, not SQL. An ORM expression's `as_sql` (core/lookups.py) puts the
compiler's fragments together as Django's own lookups do. Migrations are history: their SQL
was written once, and test_layers.py and test_enums.py read it.
"""

import ast
import re
from functools import cache
from pathlib import Path

import pytest
from django.apps import apps
from django.db import models

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {
    "core/db.py",  # db_now(): SELECT statement_timestamp()
    "anchorgpu/launcher.py",  # psql for the embedded server, before Django runs
}

_STATEMENT = re.compile(
    r"\bSELECT\s+[\w*(%'\"-]|\bINSERT\s+INTO\b|\bUPDATE\s+\w+(?:\s+(?:AS\s+)?\w+)?\s+SET\b"
    r"|\bDELETE\s+FROM\b|\bWITH\s+(?:RECURSIVE\s+)?\w+\s+AS\s+(?:NOT\s+)?(?:MATERIALIZED\s+)?\("
    r"|\b(?:CREATE|ALTER|DROP|LOCK|TRUNCATE)\s+TABLE\b|\bCOPY\s+\S+.*\bFROM\s+STDIN\b"
    r"|\bSET\s+CONSTRAINTS\b",
    re.S,
)
_KEYWORD = re.compile(
    r"\b(?:SELECT|FROM|WHERE|AND|OR|NOT|IN|IS|EXISTS|ANY|JOIN|UNION|GROUP BY|ORDER BY|LIMIT"
    r"|RETURNING|VALUES)\b"
)
_PARAMETER = re.compile(r"%\(\w+\)s|%s")
_QUOTED = re.compile(r"'([^'\s]+)'")
_FORMATTING_METHODS = {"format", "replace", "join"}


def is_sql(text: str) -> bool:
    """Whether a string holds SQL: a statement, or a keyword beside a parameter or a quoted
    word (a fragment such as `a.state IN ('running') AND …`)."""
    if _STATEMENT.search(text):
        return True
    return bool(_KEYWORD.search(text) and (_PARAMETER.search(text) or _QUOTED.search(text)))


def _looks_sql_ish(text: str) -> bool:
    """Looser, for what is being formatted: any SQL keyword in capitals."""
    return is_sql(text) or bool(_KEYWORD.search(text))


def _packages() -> list[str]:
    """The top-level packages of this project's apps (anchorgpu, core, accounts, …)."""
    return sorted(
        {
            config.name.split(".")[0]
            for config in apps.get_app_configs()
            if Path(config.path).resolve().is_relative_to(ROOT)
        }
    )


def _modules():
    for package in _packages():
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path.relative_to(ROOT).as_posix(), path.read_text()


def is_home(name: str) -> bool:
    """An app's SQL module: `<app>/sql.py` or a module of the `<app>/sql/` package."""
    parts = name.split("/")
    return parts[-1] == "sql.py" or "sql" in parts[1:-1]


@cache
def enum_words() -> frozenset[str]:
    """Every value of a `TextChoices` defined in this project's apps."""
    ours = set(_packages())
    found, stack = set(), [models.TextChoices]
    while stack:
        for choices in stack.pop().__subclasses__():
            stack.append(choices)
            if choices.__module__.split(".")[0] in ours:
                found.update(choices.values)
    return frozenset(found)


def _docstrings(tree) -> set[int]:
    """The ids of the string nodes that are docstrings."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                found.add(id(body[0].value))
    return found


def _text(node) -> str | None:
    """A string literal's text; an f-string's with `{}` for each value put in."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            part.value if isinstance(part, ast.Constant) else "{}" for part in node.values
        )
    return None


def violations(source: str, name: str, words: frozenset[str]) -> dict[str, list[str]]:
    """Each rule's findings in one module, as `name:line: text`."""
    tree = ast.parse(source, name)
    docstrings = _docstrings(tree)
    home, allowed = is_home(name), name in ALLOWED
    found = {"formatting": [], "enum_word": [], "outside": []}

    def note(rule, node, text):
        found[rule].append(f"{name}:{node.lineno}: {' '.join(text.split())[:80]}")

    # Names bound to a string that holds SQL, wherever in the module: `Q.format(...)` is as
    # much formatting as `"...".format(...)`.
    sql_names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            text = _text(node.value)
            if text is not None and _looks_sql_ish(text):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                sql_names.update(t.id for t in targets if isinstance(t, ast.Name))

    def sql_receiver(node) -> str | None:
        text = _text(node)
        if text is not None and _looks_sql_ish(text):
            return text
        if isinstance(node, ast.Name) and node.id in sql_names:
            return node.id
        return None

    # An ORM expression's `as_sql` puts the compiler's fragments together as text, as
    # Django's own lookups do: that is the ORM's SQL, not ours.
    in_as_sql = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name == "as_sql"
        for inner in ast.walk(node)
    }

    for node in ast.walk(tree):
        text = _text(node)
        # (a) formatting
        if id(node) in in_as_sql:
            pass
        elif isinstance(node, ast.JoinedStr) and _looks_sql_ish(text):
            note("formatting", node, text)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod | ast.Add):
            sides = (node.left, node.right) if isinstance(node.op, ast.Add) else (node.left,)
            formatted = next((f for side in sides if (f := sql_receiver(side)) is not None), None)
            if formatted is not None:
                note("formatting", node, formatted)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _FORMATTING_METHODS
        ):
            formatted = sql_receiver(node.func.value)
            renames_placeholders = node.func.attr == "replace" and any(
                (arg_text := _text(arg)) is not None and "%(" in arg_text for arg in node.args
            )
            if formatted is not None or renames_placeholders:
                note("formatting", node, formatted or "replace() on placeholders")
        if text is None or id(node) in docstrings:
            continue
        sql_text = home or is_sql(text)
        # (b) enum words quoted in SQL
        if sql_text:
            quoted = sorted({w for w in _QUOTED.findall(text) if w in words})
            if quoted:
                note("enum_word", node, f"{quoted} in {text}")
        # (c) SQL outside its home
        if not home and not allowed and is_sql(text) and isinstance(node, ast.Constant):
            note("outside", node, text)
    return found


@cache
def _all_violations() -> dict[str, list[str]]:
    words = enum_words()
    found = {"formatting": [], "enum_word": [], "outside": []}
    for name, source in _modules():
        for rule, items in violations(source, name, words).items():
            found[rule].extend(items)
    return found


def test_the_check_reads_every_app_and_knows_the_enum_words():
    packages = _packages()
    assert {"core", "accounts", "catalog", "telemetry", "rentals", "webhooks"} <= set(packages)
    assert {"active", "running", "stopped", "charge", "refund", "retired", "healthy"} <= (
        enum_words()
    )


def test_no_sql_is_built_by_string_formatting():
    assert _all_violations()["formatting"] == []


def test_no_enum_word_is_quoted_in_sql():
    assert _all_violations()["enum_word"] == []


def test_sql_lives_in_each_apps_sql_module():
    assert _all_violations()["outside"] == []


# --- The rules fire on the shapes they forbid, and pass the ones they ask for -----------

_WORDS = frozenset({"active", "running"})

BAD = [
    ("formatting", "rentals/x.py", 'q = f"SELECT id FROM t WHERE id = {pk}"'),
    ("formatting", "rentals/sql/capacity.py", 'Q = SQL(f"SELECT id FROM {table}")'),
    ("formatting", "rentals/sql/capacity.py", 'Q = "SELECT id FROM t WHERE id = %s" % pk'),
    ("formatting", "rentals/sql/capacity.py", 'Q = "SELECT id FROM t WHERE {w}".format(w=w)'),
    (
        "formatting",
        "rentals/sql/capacity.py",
        'Q = "SELECT id FROM t WHERE {w}"\nR = Q.format(w=w)',
    ),
    ("formatting", "rentals/sql/capacity.py", 'Q = "SELECT id FROM t WHERE " + where'),
    ("formatting", "telemetry/sql.py", 'part = part.replace("%(start)s", "%(start0)s")'),
    ("formatting", "telemetry/sql.py", 'Q = " UNION ALL ".join(parts)'),
    (
        "enum_word",
        "rentals/sql/capacity.py",
        "Q = \"SELECT 1 FROM catalog_node WHERE state = 'active'\"",
    ),
    (
        "enum_word",
        "reports/selectors.py",
        "W = \"a.state IN ('running') AND a.paid_until <= %(soon)s\"",
    ),
    ("outside", "rentals/views.py", 'Q = "SELECT id FROM rentals_allocation WHERE id = %s"'),
    ("outside", "telemetry/poll.py", 'Q = "UPDATE catalog_node n SET health = %(h)s"'),
    ("outside", "telemetry/partitions.py", 'Q = "DROP TABLE telemetry_gpusample_20250101"'),
]

GOOD = [
    (
        "rentals/sql/capacity.py",
        'Q = SQL("SELECT id FROM {} WHERE id = %(id)s").format(Identifier(t))',
    ),
    (
        "rentals/sql/capacity.py",
        'Q = SQL(" UNION ALL ").join(SQL("({})").format(p) for p in parts)',
    ),
    ("rentals/sql/capacity.py", 'Q = "SELECT 1 FROM catalog_node WHERE state = %(active)s"'),
    (
        "rentals/sql/capacity.py",
        "Q = \"SELECT 1 FROM t WHERE at > now() - interval '1 day' AND x <> ''\"",
    ),
    ("rentals/sql/capacity.py", 'Q = SQL("a.state = ANY(%(states)s) AND {}").format(clause)'),
    ("rentals/views.py", 'def f():\n    """Reads with SELECT … FOR UPDATE, in words."""'),
    ("rentals/views.py", 'm = _("Choose %(n)s GPUs or fewer.") % {"n": 8}'),
    ("reports/selectors.py", 'key = f"fleet-report:{days}:{now:%Y%m%d%H%M}"'),
    (
        "core/lookups.py",
        'def as_sql(self, compiler, connection):\n    return f"{lhs} = ANY({rhs})", p',
    ),
    ("core/db.py", 'cursor.execute("SELECT statement_timestamp()")'),
]


@pytest.mark.parametrize(("rule", "name", "source"), BAD)
def test_each_rule_fires_on_a_bad_snippet(rule, name, source):
    assert violations(source, name, _WORDS)[rule] != []


@pytest.mark.parametrize(("name", "source"), GOOD)
def test_the_rules_pass_a_good_snippet(name, source):
    assert violations(source, name, _WORDS) == {"formatting": [], "enum_word": [], "outside": []}
