"""Fail when a function in ishard/ grows past what a reader holds in mind.

Bounds: a body (docstring aside) of at most 50 lines and a cyclomatic complexity of at most 20,
counting boolean operators as radon does (ruff's C901 does not count `and`/`or`). Nothing is
exempt: a function over a bound is cut into named steps.
"""

from __future__ import annotations

import ast
import pathlib
import sys

MAX_LINES = 50
MAX_COMPLEXITY = 20
BRANCHES = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.ExceptHandler,
    ast.With,
    ast.AsyncWith,
    ast.IfExp,
    ast.Assert,
    ast.comprehension,
    ast.match_case,
)
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def body_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the last."""
    body = fn.body
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        body = body[1:]
    if not body:
        return 0
    return (body[-1].end_lineno or body[-1].lineno) - body[0].lineno + 1


def complexity(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """1 + branches + (operands - 1) of every boolean operation, nested functions included."""
    nodes = list(ast.walk(fn))
    branches = sum(isinstance(node, BRANCHES) for node in nodes)
    bools = sum(len(node.values) - 1 for node in nodes if isinstance(node, ast.BoolOp))
    return 1 + branches + bools


def over_bounds(root: pathlib.Path) -> dict[str, str]:
    """`path::name` (relative to root) -> what is over, for every function in ishard/ past a bound."""
    found: dict[str, str] = {}
    for path in sorted((root / "ishard").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, FUNCTIONS):
                continue
            lines, cc = body_lines(node), complexity(node)
            if lines > MAX_LINES or cc > MAX_COMPLEXITY:
                found[f"{path.relative_to(root).as_posix()}::{node.name}"] = (
                    f"line {node.lineno}: {lines} lines, complexity {cc}"
                )
    return found


def main() -> int:
    """Print each function over the bounds; 1 if any."""
    here = pathlib.Path(__file__).resolve().parent
    found = over_bounds(here.parent)
    for name, what in found.items():
        print(
            f"complexity: {name} ({what}): over {MAX_LINES} lines or complexity "
            f"{MAX_COMPLEXITY} — cut it into named steps",
            file=sys.stderr,
        )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
