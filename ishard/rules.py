"""A rule both planners state, the row reader in Python and the column engine in SQL, as one
record holding both forms (``Rule``); every record made is listed in ``RULES``, and a
differential test per record holds its two forms to one answer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Rule:
    """One rule in its two forms. ``python``: a callable over the rule's inputs. ``sql``: a
    DuckDB expression of the same value, each input written ``{input}`` (doubled braces are
    braces), filled in with a column or an SQL value by ``over``. ``where``: SQL over the same
    inputs saying which of them the SQL form answers ("true": all); the engine gives the
    others to the Python form, or hands the listing back to the row reader."""

    name: str
    python: Callable[..., Any]
    sql: str
    where: str = "true"

    def __post_init__(self) -> None:
        RULES.append(self)

    def over(self, **inputs: str) -> str:
        """The SQL form over ``inputs`` (each input's column or SQL value), in parentheses."""
        return f"({self.sql.format(**inputs)})"

    def answered(self, **inputs: str) -> str:
        """``where`` over ``inputs``, in parentheses."""
        return f"({self.where.format(**inputs)})"


RULES: list[Rule] = []  # every rule record made, in the order their modules made them
