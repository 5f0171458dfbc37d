"""Every Python and shell example in the README and on every docs page runs verbatim, as a plain script outside the
checkout, with the installed package (as the README's setup installs it); the site builds with `mkdocs build --strict`.

A shell block that cannot run here (it installs, needs a terminal, a GPU or vLLM, starts a server that runs until
stopped, or benchmarks for minutes) says so on the line before it: `<!-- not run: REASON -->`. An example that talks
to the server the docs start (`enginetui serve`, port 8000) runs with that server up."""

import argparse
import contextlib
import importlib.util
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from enginetui.serve.process import ServeProcess
from tests.support.checkout import REPO_ROOT, installed_env

PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
SERVER_PORT = 8000  # where the docs' `enginetui serve` listens
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->\n$")
BLOCK = re.compile(r"^```(python|bash|sh|shell)[^\n]*\n(.*?)^```", flags=re.S | re.M)


class Example(NamedTuple):
    where: str  # page:line
    lang: str
    code: str
    not_run: str | None  # why, when it is not run


def examples(text: str, name: str) -> list[Example]:
    """The fenced Python and shell blocks of a page's text."""
    found = []
    for match in BLOCK.finditer(text):
        reason = NOT_RUN.search(text, 0, match.start())
        not_run = reason.group(1) if reason and reason.end() == match.start() else None
        found.append(
            Example(f"{name}:{text.count(chr(10), 0, match.start()) + 1}", match.group(1), match.group(2), not_run)
        )
    return found


def distinct(all_examples: list[Example]) -> list[Example]:
    """Each example once (the README repeats a few of the pages')."""
    seen: dict[str, Example] = {}
    for example in all_examples:
        seen.setdefault(example.code, example)
    return list(seen.values())


def uses_server(code: str) -> bool:
    return f"127.0.0.1:{SERVER_PORT}" in code


ALL = [example for page in PAGES for example in examples(page.read_text(), str(page.relative_to(REPO_ROOT)))]
RUN = distinct([example for example in ALL if example.not_run is None])


def test_the_pages_have_examples_and_every_one_skipped_says_why():
    assert sum(example.lang == "python" for example in RUN) >= 5
    assert any(example.lang != "python" for example in RUN)
    for example in ALL:
        assert example.not_run is None or example.not_run.strip(), example.where


def test_a_mark_skips_only_the_block_right_after_it():
    text = "<!-- not run: needs a GPU -->\n```bash\ngpu\n```\n\n<!-- not run: x -->\n\n```bash\necho hi\n```\n"
    assert [(example.code, example.not_run) for example in examples(text, "page.md")] == [
        ("gpu\n", "needs a GPU"),
        ("echo hi\n", None),
    ]


@pytest.mark.slow  # each example a fresh interpreter that imports torch and starts an engine: 10-40 s
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "example",
    [  # the server's clients on one xdist worker: one port 8000 at a time
        pytest.param(
            example, id=example.where, marks=[pytest.mark.xdist_group("docs-server")] * uses_server(example.code)
        )
        for example in RUN
    ],
)
def test_example_runs_verbatim(example, tmp_path):
    script = tmp_path / ("example.py" if example.lang == "python" else "example.sh")
    script.write_text(example.code)
    command = [sys.executable, str(script)] if example.lang == "python" else ["bash", "-euo", "pipefail", str(script)]
    env = installed_env()
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # `enginetui`, as installed
    with served(example.code):
        proc = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, f"{example.where} failed:\n{example.code}\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}"
    assert proc.stdout.strip(), f"{example.where} printed nothing"
    if uses_server(example.code):
        assert '"error"' not in proc.stdout, f"{example.where}: the server answered an error:\n{proc.stdout[-2000:]}"


@contextlib.contextmanager
def served(example: str):
    """`enginetui serve` on port 8000 while inside, if the example is a client of it (allowing control, if it uses it)."""
    if not uses_server(example):
        yield
        return
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", SERVER_PORT)) == 0:
            pytest.skip(f"port {SERVER_PORT}, which the docs' server examples use, is taken on this machine")
    control = ["--allow-control"] if "/v1/enginetui/control" in example else []
    server = ServeProcess(
        "--port", str(SERVER_PORT), "--num-gpu-blocks-override", "64", *control, port_arg=False, cwd=REPO_ROOT
    )
    try:
        yield
    finally:
        assert server.stop() == 0


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
    reason="the docs extra is not installed (pip install -e '.[docs]')",
)
def test_the_site_builds_strictly(tmp_path):
    """No broken link or anchor and no page left out of the nav (mkdocs.yml makes those warnings, so errors
    under --strict); every screenshot a page shows is served."""
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    shown = {name for page in PAGES[1:] for name in re.findall(r"\]\(screenshots/([^)]+)\)", page.read_text())}
    assert shown and all((tmp_path / "site" / "screenshots" / name).is_file() for name in shown)


def commands(parser: argparse.ArgumentParser, name: str = "enginetui") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """The command and every subcommand, at any depth, with its parser."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from commands(sub, f"{name} {sub_name}")


def test_every_flag_of_every_command_is_in_the_docs():
    from enginetui.cli import build_parser

    docs = "\n".join(page.read_text() for page in PAGES[1:])
    missing = {}
    for name, parser in commands(build_parser()):
        flags = {flag for action in parser._actions for flag in action.option_strings if flag.startswith("--")}
        undocumented = {
            flag
            for flag in flags - {"--help"}
            if not re.search(re.escape(flag) + r"(?![\w-])", docs)
            and not (
                flag.startswith("--no-") and f"--{flag[5:]}" in flags and re.search(f"--{flag[5:]}(?![\\w-])", docs)
            )
        }
        if undocumented:
            missing[name] = sorted(undocumented)
    assert not missing, f"flags in --help that no docs page names: {missing}"
