"""Tests keep their helpers in one home: a test module imports nothing from another test
module (what two of them share lives in tests/support/ or a conftest.py), and tests/support/
imports only itself, never a test module or a conftest. Read from the syntax trees of every
module under tests/, imports inside functions included."""

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def imported_modules(source: str, module: str) -> set[str]:
    """Every module `source` (the text of `module`) imports, by its full dotted name: for
    `from a import b`, both `a` and `a.b` (b may be a module)."""
    found = set()
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return found


def is_test_module(name: str) -> bool:
    return name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_")


def _sources() -> list[tuple[str, str]]:
    return [
        (_module_name(path), path.read_text())
        for path in sorted(TESTS.rglob("*.py"))
        if "__pycache__" not in path.parts
    ]


def test_the_import_reader_sees_every_form_of_import():
    source = (
        "import tests.rentals.test_a\n"
        "from tests.rentals import test_b\n"
        "from .test_c import helper\n"
        "def f():\n"
        "    import tests.accounts.test_d as key\n"
    )
    found = imported_modules(source, "tests.rentals.test_x")
    assert {n for n in found if is_test_module(n)} == {
        "tests.rentals.test_a",
        "tests.rentals.test_b",
        "tests.rentals.test_c",
        "tests.accounts.test_d",
    }


def test_no_module_under_tests_imports_a_test_module():
    sources = _sources()
    assert len(sources) > 100  # the walk found the suite
    offenders = [
        f"{module} imports {name}"
        for module, source in sources
        for name in sorted(imported_modules(source, module))
        if is_test_module(name) and name != module
    ]
    assert offenders == [], "put what they share in tests/support/:\n" + "\n".join(offenders)


SUPPORT = {m: s for m, s in _sources() if m.startswith("tests.support.")}


@pytest.mark.parametrize("module", sorted(SUPPORT))
def test_support_imports_only_support(module):
    found = imported_modules(SUPPORT[module], module)
    ours = {n for n in found if n == "tests" or n.startswith("tests.")}
    assert {n for n in ours if not n.startswith("tests.support")} == set()
