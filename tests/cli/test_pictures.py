"""Pictures of `agpu book` and `agpu ls` as a terminal shows them: the installed command run
in a pseudo-terminal (colours, the question and the typed answer, in the order they came),
its output turned into Rich's SVG and rendered by Debian's Chromium, in test-artifacts/cli/
(look at them), in English and in Polish."""

import fcntl
import io
import os
import pty
import struct
import subprocess
import termios
from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text

from tests.cli.conftest import AGPU

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "cli"
WIDTH = 118


def in_terminal(agpu, *args, answer: str | None = None, env=None) -> tuple[int, str]:
    """(exit status, what the terminal showed) of `agpu args` in a pseudo-terminal
    WIDTH columns wide, typing `answer` at its question."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, WIDTH, 0, 0))
    process = subprocess.Popen(
        [str(AGPU), *args], stdin=slave, stdout=slave, stderr=slave, close_fds=True,
        env={**agpu.env, "TERM": "xterm-256color", "COLUMNS": str(WIDTH), **(env or {})},
    )  # fmt: skip
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        shown += chunk
        if answer and b"[y/N]" in shown:
            os.write(master, answer.encode())
            answer = None
    os.close(master)
    return process.wait(30), shown.decode().replace("\r\n", "\n")


def picture(page, name: str, command: str, shown: str) -> Path:
    """The terminal's text as an SVG and a PNG: the command line, then what it showed."""
    console = Console(record=True, width=WIDTH, file=io.StringIO(), force_terminal=True)
    console.print(Text(f"$ {command}", style="bold"))
    console.print(Text.from_ansi(shown), soft_wrap=True)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    svg = ARTIFACTS / f"{name}.svg"
    svg.write_text(console.export_svg(title="agpu"), encoding="utf-8")
    png = ARTIFACTS / f"{name}.png"
    page.set_content(f'<body style="margin:0;background:#fff">{svg.read_text()}</body>')
    page.locator("svg").screenshot(path=str(png))
    return png


@pytest.mark.parametrize("language", ["en", "pl"])
def test_pictures_of_book_and_ls(agpu, alice, catalog, language, browser):
    agpu.login()
    command = ["book", "h100", "--gpus", "2", "--period", "week", "--option", "nvme-scratch=2"]
    code, booked = in_terminal(agpu, *command, answer="y\n", env={"AGPU_LANG": language})
    assert code == 0, booked
    question = "Zarezerwować i zapłacić" if language == "pl" else "Book and pay"
    assert f"{question} 954" in booked and "\x1b[" in booked  # asked, in colour
    assert agpu("book", "l4", "--gpus", "1", "--period", "day", "--yes").code == 0
    assert agpu("book", "h100", "--nodes", "2", "--period", "day", "--yes").code == 0
    code, listed = in_terminal(agpu, "ls", env={"AGPU_LANG": language})
    assert code == 0 and listed.count("\n") >= 6
    page = browser.new_page(viewport={"width": 1500, "height": 400})
    try:
        for name, words, shown in (
            (f"agpu-book-{language}", " ".join(["agpu", *command]), booked),
            (f"agpu-ls-{language}", "agpu ls", listed),
        ):
            assert picture(page, name, words, shown).stat().st_size > 10_000
    finally:
        page.close()
