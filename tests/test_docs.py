"""The docs cannot drift: every ``console`` and every ``python`` example in README.md and
docs/*.md is run, a page's in a fresh folder holding a copy of ``fixtures/`` and in the page's
order (so ``out`` holds what the page's earlier examples left there, as for a reader who follows
along), and what it prints must be what the page shows. A console block shows each command's
output after it; a python block runs as one program (``python -c``, or through ``doctest`` when
it holds ``>>>`` examples) and must print, stdout and stderr together, what the plain ```` ``` ````
block right after it shows, or nothing when no such block follows (a traceback is never what a
page shows). Times, speeds, digests and dates are masked on both sides; a line ``…`` in the
shown output stands for any lines. A block of either kind that cannot run as shown — it needs a
server or a package the tests do not install, or it is a fragment — is preceded by
``<!-- not run: REASON -->`` (a reason of three words at least); no other block is left out.
Every option of every command must be named in the user guide.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from ishard.cli import cli

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->")
ANY_LINES = "…"
MARK = "@@@ end of a docs example @@@"
# What a run may print differently: durations and speeds, digests, dates, temp paths
MASKS = [
    (re.compile(r"\b\d+(\.\d+)? ?(s|ms)\b"), "<time>"),
    (re.compile(r"\b\d+(\.\d+)? ?[KMGT]i?B/s\b"), "<speed>"),
    (re.compile(r"\b[0-9a-f]{32,64}\b"), "<hex>"),
    (re.compile(r"\b\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d)?\b"), "<date>"),
    (re.compile(r"\b[A-Z][a-z]{2} +\d{1,2} +(\d\d:\d\d|\d{4})\b"), "<date>"),
    (re.compile(r'"mtime": \d+'), '"mtime": <time>'),
    (re.compile(r'"(seconds|bytes_per_second)": [0-9.]+'), r'"\1": <time>'),
    (re.compile(r"shuffle( seed: |:)\d+"), r"shuffle\1<seed>"),
]


@dataclass
class Command:
    text: str
    shown: list[str]


@dataclass
class Block:
    page: Path
    line: int
    commands: list[Command]
    not_run: str | None
    language: str = "console"  # or python: one command, the program

    @property
    def id(self) -> str:
        return f"{self.page.name}:{self.line}"


def _complete(text: str) -> bool:
    """Is ``text`` a whole shell command (no open quote, no trailing backslash)?"""
    if text.endswith("\\"):
        return False
    try:
        shlex.split(text, comments=False)
    except ValueError:
        return False
    return True


def console_blocks(page: Path) -> list[Block]:
    """Each ```console block of ``page`` with its commands and the output shown for each."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    at = 0
    while at < len(lines):
        if lines[at].strip() != "```console":
            at += 1
            continue
        before = next((lines[i] for i in range(at - 1, -1, -1) if lines[i].strip()), "")
        reason = NOT_RUN.search(before)
        indent = len(lines[at]) - len(lines[at].lstrip())  # a block inside a list item
        start, at = at + 1, at + 1
        commands: list[Command] = []
        while at < len(lines) and lines[at].strip() != "```":
            line = lines[at][indent:]
            at += 1
            if line.startswith("$ "):
                text = line[2:]
                while not _complete(text) and at < len(lines) and lines[at].strip() != "```":
                    text += "\n" + lines[at][indent:]
                    at += 1
                commands.append(Command(text, []))
            elif commands:
                commands[-1].shown.append(line)
        blocks.append(Block(page, start, commands, reason.group(1) if reason else None))
        at += 1
    return blocks


def python_blocks(page: Path) -> list[Block]:
    """Each ```python block of ``page``: its program and what the plain block after it shows
    it prints (nothing when no plain block follows)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    for at, line in enumerate(lines):
        if line.strip() != "```python":
            continue
        before = next((lines[i] for i in range(at - 1, -1, -1) if lines[i].strip()), "")
        reason = NOT_RUN.search(before)
        code, end = _fenced(lines, at)
        after = next((i for i in range(end + 1, len(lines)) if lines[i].strip()), None)
        shown = _fenced(lines, after)[0] if after and lines[after].strip() == "```" else []
        program = Command("\n".join(code) + "\n", shown)
        blocks.append(Block(page, at + 1, [program], reason and reason.group(1), "python"))
    return blocks


def _fenced(lines: list[str], at: int) -> tuple[list[str], int]:
    """The lines of the fenced block opening at ``lines[at]`` (its indent taken off) and the
    index of its closing fence."""
    indent = len(lines[at]) - len(lines[at].lstrip())
    end = next(i for i in range(at + 1, len(lines)) if lines[i].strip() == "```")
    return [line[indent:] for line in lines[at + 1 : end]], end


def page_blocks(page: Path) -> list[Block]:
    """Every example of ``page``, console and python, in the page's order."""
    return sorted([*console_blocks(page), *python_blocks(page)], key=lambda b: b.line)


# A python block of >>> examples runs through doctest, which prints only what differs
DOCTEST = (
    "import doctest, sys; "
    "doctest.DocTestRunner().run(doctest.DocTestParser().get_doctest(sys.argv[1], {}, "
    "'the block', None, 0))"
)


def run_python(block: Block, workspace: Path, env: dict[str, str]) -> list[str]:
    """What the program of a python block prints, run in ``workspace``."""
    code = block.commands[0].text
    argv = ["-c", DOCTEST, code] if re.search(r"^>>> ", code, re.MULTILINE) else ["-c", code]
    return printed_by([sys.executable, *argv], workspace, env).splitlines()


def printed_by(argv: list[str], workspace: Path, env: dict[str, str]) -> str:
    """What ``argv`` prints, run in ``workspace``: stdout and stderr as a terminal shows them."""
    done = subprocess.run(
        argv,
        check=False,
        cwd=workspace,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    return done.stdout


def masked(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        for pattern, replacement in MASKS:
            line = pattern.sub(replacement, line)
        out.append(line.rstrip())
    return out


def matches(shown: list[str], printed: list[str]) -> bool:
    """Does ``printed`` match ``shown``, where a line ``…`` in ``shown`` stands for any lines?"""
    if ANY_LINES not in shown:
        return len(shown) == len(printed) and all(map(_same_line, shown, printed))
    at = shown.index(ANY_LINES)
    head, tail = shown[:at], shown[at + 1 :]
    if len(printed) < len(head) or not all(map(_same_line, head, printed)):
        return False
    rest = printed[len(head) :]
    return any(matches(tail, rest[i:]) for i in range(len(rest) + 1))


def _same_line(shown: str, printed: str) -> bool:
    """A shown line that ends in ``…`` (cut short on the page) matches what it begins."""
    if shown.endswith(ANY_LINES) and shown != ANY_LINES:
        return printed.startswith(shown[: -len(ANY_LINES)].rstrip())
    return shown == printed


def _environment(bin_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ISHARD_", "AIS_", "AWS_"))}
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        TZ="UTC",
        LC_ALL="C.UTF-8",
        COLUMNS="80",
        NO_COLOR="1",
        PYTHONWARNINGS="ignore",
    )
    env.pop("FORCE_COLOR", None)
    return env


FIXTURES_MTIME = 1_700_000_000  # the pages' outputs were made with the fixtures at this time


def _fixtures_copied(workspace: Path) -> None:
    """A copy of ``fixtures/`` in ``workspace``, every file and folder at one fixed time: what a
    page shows holds the files' times (the sample index's ``mtime`` column, hence its size), and
    a clone's checkout gives each file the moment it was written."""
    copied = Path(shutil.copytree(ROOT / "fixtures", workspace / "fixtures"))
    for path in [copied, *copied.rglob("*")]:
        os.utime(path, (FIXTURES_MTIME, FIXTURES_MTIME), follow_symlinks=False)


def run_page(page: Path, workspace: Path) -> list[tuple[Block, Command, list[str]]]:
    """Run every block of ``page`` that can run, in order, in ``workspace``; return each
    command with what it printed (stdout and stderr as a terminal shows them)."""
    _fixtures_copied(workspace)
    env = _environment(Path(sys.executable).parent)
    results = []
    for block in page_blocks(page):
        if block.not_run:
            continue
        if block.language == "python":
            results.append((block, block.commands[0], run_python(block, workspace, env)))
            continue
        # one shell per block, as in a terminal: `echo $?` sees the command before it
        script = "".join(
            f"{c.text}\n__status=$?; printf '\\n{MARK}\\n'; (exit $__status)\n"
            for c in block.commands
        )
        stdout = printed_by(["bash", "-c", script], workspace, env)
        outputs = re.split(rf"\n?\n{MARK}\n", "\n" + stdout)
        assert len(outputs) == len(block.commands) + 1, f"{block.id}: {stdout}"
        outputs[0] = outputs[0][1:]
        for command, printed in zip(block.commands, outputs):
            results.append((block, command, printed.splitlines()))
    return results


def _pages_with_examples() -> list[Path]:
    return [p for p in PAGES if page_blocks(p)]


@pytest.mark.parametrize("page", _pages_with_examples(), ids=lambda p: p.name)
def test_every_example_prints_what_the_page_shows(page, tmp_path):
    if shutil.which("ishard", path=str(Path(sys.executable).parent)) is None:
        pytest.fail("the ishard command is not installed beside this Python (pip install .)")
    differ = []
    for block, command, printed in run_page(page, tmp_path):
        if not matches(masked(command.shown), masked(printed)):
            differ.append(
                f"{block.id}: $ {command.text}\n--- shown\n"
                + "\n".join(command.shown)
                + "\n--- printed\n"
                + "\n".join(printed)
            )
    assert not differ, f"{len(differ)} examples differ:\n\n" + "\n\n".join(differ)


def test_every_skipped_example_says_why():
    """A block left unrun names its reason; it still shows commands (else it is no example)."""
    for page in PAGES:
        for block in page_blocks(page):
            assert block.commands, f"{block.id}: a console block without a '$ ' command"
            if block.not_run is not None:
                assert len(block.not_run.split()) >= 3, f"{block.id}: say why it is not run"


def test_most_examples_run():
    blocks = [b for p in PAGES for b in console_blocks(p)]
    assert len(blocks) >= 40
    assert sum(b.not_run is None for b in blocks) >= 0.85 * len(blocks)


def _options(command: click.Command) -> list[str]:
    names = []
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            names += [o for o in param.opts + param.secondary_opts if o.startswith("--")]
    return names


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_every_option_is_in_the_user_guide(name):
    guide = (ROOT / "docs" / "user-guide.md").read_text(encoding="utf-8")
    missing = [
        o for o in _options(cli.commands[name]) if not re.search(rf"{re.escape(o)}\b", guide)
    ]
    missing = [o for o in missing if o != "--help"]
    assert not missing, f"ishard {name}: options the user guide never names: {missing}"


def test_python_blocks_run_and_what_they_print_is_compared(tmp_path):
    """A python block's output is held to the plain block after it (or to nothing), a
    ``>>>`` block is run by doctest, a marked block is left out — and a failure shows."""
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nimport os\nprint(os.path.isdir('fixtures/imagenet'))\n```\n\n```\nTrue\n```\n"
        "```python\nprint(6 * 7)\n```\n\n```\n41\n```\n"
        "```python\n>>> 6 * 7\n41\n```\n"
        "```python\nimport no_such_module\n```\n"
        "<!-- not run: a made-up module here -->\n```python\nimport no_such_module\n```\n",
        encoding="utf-8",
    )
    results = run_page(page, tmp_path / "work")  # a folder holding a copy of the fixtures
    assert [block.line for block, _, _ in results] == [1, 9, 16, 20]
    held = [matches(masked(c.shown), masked(printed)) for _, c, printed in results]
    assert held == [True, False, False, False]
    assert results[1][2] == ["42"] and "Expected:" in results[2][2]
    assert "ModuleNotFoundError" in results[3][2][-1]


def test_the_matcher_sees_differences():
    """The comparison itself: equal, masked, ``…`` for lines, and a real difference."""
    assert matches(masked(["took 0.04s (61.97MiB/s)"]), masked(["took 1.2s (3MiB/s)"]))
    assert not matches(["wrote 6 shards"], ["wrote 7 shards"])
    assert matches(["a", ANY_LINES, "d"], ["a", "b", "c", "d"])
    assert not matches(["a", ANY_LINES, "d"], ["a", "b", "c"])
    assert matches(["a", ANY_LINES], ["a"])
    assert matches(["2 warnings: …"], ["2 warnings: x, y"])
    assert not matches(["2 warnings: …"], ["3 warnings: x, y"])


if __name__ == "__main__":  # print what each example of a page prints now: tests/test_docs.py PAGE
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        for block, command, printed in run_page(Path(sys.argv[1]).resolve(), Path(folder)):
            print(f"## {block.id}\n$ {command.text}")
            print("\n".join(printed))


def _quick_look() -> tuple[list[str], str]:
    """The README's "Quick look": its shell commands (continuations joined, comments cut) and
    its Python."""
    text = (ROOT / "README.md").read_text(encoding="utf-8").split("## Quick look", 1)[1]
    shell = text.split("```sh\n", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    commands = [re.sub(r"\s+#.*$", "", line).strip() for line in shell.splitlines()]
    python = text.split("```python\n", 1)[1].split("```", 1)[0]
    return [c for c in commands if c and not c.startswith("#")], python


def test_the_readme_quick_look_runs(tmp_path):
    """A newcomer's first commands: each exits 0 in a folder holding the fixture."""
    shutil.copytree(ROOT / "fixtures", tmp_path / "fixtures")
    env = _environment(Path(sys.executable).parent)
    commands, python = _quick_look()
    assert len(commands) >= 4 and all(c.startswith("ishard") for c in commands)
    for command in [*commands, f"python -c {shlex.quote(python)}"]:
        done = subprocess.run(["bash", "-c", command], check=False, cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, f"$ {command}\n{done.stdout}{done.stderr}"


def test_the_design_module_table_names_every_module():
    """docs/design.md's module table and the tree agree: every module (or package) of
    ``ishard/`` has a row or is named in its package's row, and no row names a module that is
    gone."""
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([\w/.]+)` \|(.*)$", design, flags=re.MULTILINE)
    named = {name for name, _ in rows}
    package = ROOT / "ishard"
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        if relative.name == "__init__.py" and len(relative.parts) == 1:
            continue
        if len(relative.parts) == 1:
            assert relative.name in named, f"docs/design.md has no row for ishard/{relative}"
        else:
            folder = f"{relative.parts[0]}/"
            text = dict(rows).get(folder, "")
            assert folder in named, f"docs/design.md has no row for ishard/{folder}"
            if relative.name != "__init__.py":
                assert f"`{relative.name}`" in text, (
                    f"the {folder} row does not name {relative.name}"
                )
    for name in named:
        if name.endswith(".py") and "/" not in name:
            assert (package / name).is_file(), f"docs/design.md names ishard/{name}, which is gone"
