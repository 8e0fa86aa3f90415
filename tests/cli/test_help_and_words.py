"""Every `agpu` command explains itself (`--help`), and every message of agpu's own has its
Polish translation in agpu's catalog (extracted afresh from the code, as the console's
messages are), with the same placeholders; the installed agpu is this repository's."""

import gettext
import re
import subprocess
from pathlib import Path

import agpu
import click
import pytest
from agpu import cli as agpu_cli
from click.testing import CliRunner

from tests.cli.conftest import AGPU

SOURCE = Path(__file__).resolve().parents[2] / "cli" / "agpu"
PO = SOURCE / "locale" / "pl" / "LC_MESSAGES" / "agpu.po"
PLACEHOLDER = re.compile(r"%\(\w+\)s|\{\w*[!:]?\w*\}")


def _commands(group=agpu_cli.cli, path=()):
    for name, command in sorted(group.commands.items()):
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))


COMMANDS = list(_commands())


def test_the_installed_agpu_is_this_repositorys():
    installed = Path(agpu.__file__).resolve().parent
    for source in sorted(SOURCE.rglob("*.py")) + [PO, PO.with_suffix(".mo")]:
        copy = installed / source.relative_to(SOURCE)
        assert copy.exists() and copy.read_bytes() == source.read_bytes(), (
            f"{copy} differs from {source}: reinstall the CLI (make venv: pip install -e ./cli)"
        )
    assert AGPU.exists()


def test_the_command_list_is_whole():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert names == {
        "availability", "book", "cancel", "cp", "extend", "invoices", "invoices get",
        "invoices ls", "keys", "keys add", "keys ls", "keys rm", "login", "logout", "ls",
        "models", "quote", "show", "ssh", "start", "stop", "team", "team ls", "team use",
        "usage", "wait", "whoami",
    }  # fmt: skip


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=" ".join)
def test_every_command_has_help(path):
    command = dict(COMMANDS)[path]
    ran = CliRunner().invoke(agpu_cli.cli, [*path, "--help"], prog_name="agpu")
    assert ran.exit_code == 0, ran.output
    assert ran.output.startswith(f"Usage: agpu {' '.join(path)} ")
    summary = command.get_short_help_str(limit=70)
    assert summary and not summary.endswith("...") and summary in ran.output
    for parameter in command.params:
        if isinstance(parameter, click.Option) and parameter.name != "help":
            assert parameter.help, f"agpu {' '.join(path)} {parameter.opts[0]} has no help"


def test_the_whole_help_lists_every_command_with_its_summary():
    ran = subprocess.run([str(AGPU), "--help"], capture_output=True, text=True, timeout=30)
    assert ran.returncode == 0
    listed = ran.stdout.split("\nCommands:\n")[1].splitlines()
    assert sorted(line.split()[0] for line in listed) == sorted(
        path[0] for path, _ in COMMANDS if len(path) == 1
    )
    assert [line for line in listed if line.endswith("...")] == []  # no summary cut short


def _entries(text: str) -> dict[str, str]:
    """{msgid: msgstr} of a .po text (plural entries by their singular, first form; an
    entry with a context as "context|msgid")."""
    entries = {}
    for block in text.split("\n\n"):
        msgid = re.search(r'^msgid "(.*)"$', block, re.M)
        msgstr = re.search(r'^msgstr(?:\[0\])? "(.*)"$', block, re.M)
        context = re.search(r'^msgctxt "(.*)"$', block, re.M)
        if msgid and msgstr and msgid.group(1):
            key = (f"{context.group(1)}|" if context else "") + msgid.group(1)
            entries[key.replace('\\"', '"')] = msgstr.group(1).replace('\\"', '"')
    return entries


def test_every_message_in_the_code_has_a_polish_translation_with_its_placeholders(tmp_path):
    pot = tmp_path / "agpu.pot"
    subprocess.run(
        ["xgettext", "-L", "Python", "--keyword=", "--keyword=tr", "--keyword=trn:1,2",
         "--keyword=trc:1c,2",
         "--from-code=UTF-8", "--no-wrap", "-o", pot, *sorted(SOURCE.glob("*.py"))],
        check=True,
    )  # fmt: skip
    extracted = _entries(pot.read_text(encoding="utf-8"))
    catalog = _entries(PO.read_text(encoding="utf-8"))
    assert len(extracted) > 150
    assert [m for m in extracted if not catalog.get(m)] == []
    assert [m for m, pl in catalog.items() if sorted(PLACEHOLDER.findall(m))
            != sorted(PLACEHOLDER.findall(pl))] == []  # fmt: skip
    # A message inside an f-string is invisible to xgettext: none may hide there.
    assert [p.name for p in SOURCE.glob("*.py") if re.search(r"\{tr\(", p.read_text())] == []


def test_the_compiled_catalog_is_the_po_file(tmp_path):
    compiled = tmp_path / "agpu.mo"
    subprocess.run(["msgfmt", "-o", compiled, PO], check=True)
    with compiled.open("rb") as fresh, PO.with_suffix(".mo").open("rb") as kept:
        assert gettext.GNUTranslations(fresh)._catalog == gettext.GNUTranslations(kept)._catalog
