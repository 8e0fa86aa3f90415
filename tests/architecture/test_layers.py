"""The layers point one way (docs/architecture.md), read from the code's own import graph.

anchorgpu → audit → reports → rentals → telemetry → catalog → core, with accounts and glossary
beside them and sizing beside rentals (its estimator imports nothing of Django at all);
nodeagent, the agent that runs on the nodes, imports nothing of ours and only the standard
library; cli (`agpu`, the customers' command line) imports nothing of ours either, only the
standard library and its own pinned dependencies, and talks to the console through the
public API: a module imports only its own layer and those below it, and never from inside a
function (where an import hides a dependency or dodges a cycle).
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = {
    "anchorgpu", "core", "accounts", "catalog", "telemetry", "rentals", "glossary", "sizing",
    "webhooks", "invoices", "payments", "nodeagent", "audit", "cli", "reports",
}  # fmt: skip
# What each package may import of ours (besides itself).
ALLOWED = {
    "core": set(),
    "accounts": {"core"},
    "catalog": {"core"},
    "telemetry": {"core", "catalog", "nodeagent"},
    "rentals": {"core", "accounts", "catalog", "telemetry", "nodeagent"},
    # The staff's read side (the fleet report): above rentals and telemetry, which it reads.
    "reports": {"core", "accounts", "catalog", "telemetry", "rentals"},
    # The reference agent runs on the nodes: nothing of the console's, not even Django.
    "nodeagent": set(),
    # agpu runs on the customers' machines and knows the console only by its public API.
    "cli": set(),
    "glossary": {"core"},
    "sizing": {"core", "catalog", "telemetry", "glossary"},
    "webhooks": {"core", "accounts", "catalog", "rentals"},
    "invoices": {"core", "accounts", "catalog", "rentals"},
    # Getting paid: above invoices (it applies money to them); rentals reaches it only
    # through rentals.purchase_hooks, which the composition root connects.
    "payments": {"core", "accounts", "catalog", "rentals", "invoices"},
    # The audit log reads every app's changes: at the top, below only the composition root.
    "audit": {
        "core",
        "accounts",
        "catalog",
        "telemetry",
        "rentals",
        "glossary",
        "sizing",
        "webhooks",
        "invoices",
        "payments",
    },
    "anchorgpu": OURS - {"cli"},
}


def _modules():
    for package in sorted(OURS):
        for path in sorted((ROOT / package).rglob("*.py")):
            yield package, path


def _imports(tree):
    """(imported top-level package, line, inside a function?) for every import."""
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                found.extend((a.name.split(".")[0], child.lineno, in_function) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                found.append((child.module.split(".")[0], child.lineno, in_function))
            visit(child, nested)

    visit(tree, False)
    return found


def _violations():
    upward, local = [], []
    for package, path in _modules():
        name = path.relative_to(ROOT)
        for target, line, in_function in _imports(ast.parse(path.read_text(), str(path))):
            if target not in OURS or target == package:
                continue
            if target not in ALLOWED[package]:
                upward.append(f"{name}:{line} imports {target}")
            if in_function:
                local.append(f"{name}:{line} imports {target} inside a function")
    return upward, local


def test_no_module_imports_a_layer_above_its_own():
    upward, _ = _violations()
    assert upward == []


def test_no_function_local_import_of_our_own_modules():
    _, local = _violations()
    assert local == []


def test_the_checker_sees_a_violation():
    """The rules above would fail on the shape they forbid."""
    tree = ast.parse("from rentals.models import Allocation\ndef f():\n    import catalog.models\n")
    assert _imports(tree) == [("rentals", 1, False), ("catalog", 3, True)]


@pytest.mark.parametrize("package", sorted(OURS - {"anchorgpu"}))
def test_migrations_never_name_a_higher_apps_table(package):
    """A migration's SQL may read its own tables and those below, never one above."""
    above = {p for p in OURS if p != package and p not in ALLOWED[package] and p != "anchorgpu"}
    offending = []
    for path in sorted((ROOT / package / "migrations").glob("0*.py")):
        text = path.read_text()
        for name in above:
            for line_no, line in enumerate(text.splitlines(), 1):
                if f"{name}_" in line and ("SELECT" in line or "FROM" in line or "JOIN" in line):
                    offending.append(f"{path.relative_to(ROOT)}:{line_no}")
    assert offending == []


def test_the_node_agent_needs_only_the_standard_library():
    import sys

    outside = []
    for path in sorted((ROOT / "nodeagent").rglob("*.py")):
        for target, line, _in_function in _imports(ast.parse(path.read_text(), str(path))):
            if target != "nodeagent" and target not in sys.stdlib_module_names:
                outside.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert outside == []


def test_the_command_line_needs_only_the_standard_library_and_its_own_dependencies():
    """agpu (cli/agpu) imports itself, the standard library and what cli/pyproject.toml
    pins: click, rich, httpx. Nothing of the console, not even Django."""
    import sys

    pinned = {"click", "rich", "httpx"}
    outside = []
    for path in sorted((ROOT / "cli").rglob("*.py")):
        for target, line, _in_function in _imports(ast.parse(path.read_text(), str(path))):
            if target not in {"agpu", *pinned} and target not in sys.stdlib_module_names:
                outside.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert outside == []
    assert (ROOT / "cli" / "agpu" / "cli.py").exists()  # the check reads the real package
