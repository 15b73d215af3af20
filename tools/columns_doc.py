"""docs/columns.md's column tables, written from the column catalogue (bench/catalogue.py).

Each table sits between `<!-- catalogue: GROUP [GROUP ...] -->` and `<!-- /catalogue -->`; the
prose around the markers is the page's own. One table row per meaning: a column whose `doc` is
empty shares the row above's, and columns of the same `doc` share one row.

    python tools/columns_doc.py           # rewrite the tables in docs/columns.md
    python tools/columns_doc.py --check   # exit 1, naming the tables, where they differ from the catalogue
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from bench.catalogue import CATALOGUE, GROUPS, Column

DOC = Path(__file__).resolve().parent.parent / "docs" / "columns.md"
BLOCK = re.compile(r"(<!-- catalogue: ([a-z ]+) -->\n)(.*?)(<!-- /catalogue -->)", re.S)


def cell(columns: list[Column]) -> str:
    """The columns' names with their units: once at the end where they share one."""
    units = {c.unit for c in columns}
    if len(units) == 1:
        unit = units.pop()
        return ", ".join(f"`{c.name}`" for c in columns) + (f" ({unit})" if unit else "")
    return ", ".join(f"`{c.name}`" + (f" ({c.unit})" if c.unit else "") for c in columns)


def table(groups: tuple[str, ...]) -> str:
    """The markdown table of these groups' columns, in the row's order."""
    unknown = sorted(set(groups) - set(GROUPS))
    if unknown:
        raise SystemExit(f"columns_doc: unknown group(s) {', '.join(unknown)} in docs/columns.md; known: {GROUPS}")
    rows: dict[str, list[Column]] = {}
    last = ""
    for column in CATALOGUE:
        if column.group in groups:
            last = column.doc or last
            rows.setdefault(last, []).append(column)
    lines = ["| column | meaning |", "|---|---|"]
    lines += [f"| {cell(columns)} | {doc} |" for doc, columns in rows.items()]
    return "\n".join(lines) + "\n"


def rewrite(text: str) -> tuple[str, list[str]]:
    """The page with every table written from the catalogue, and the groups of those that changed."""
    changed: list[str] = []

    def one(match: re.Match[str]) -> str:
        new = table(tuple(match.group(2).split()))
        if new != match.group(3):
            changed.append(match.group(2))
        return match.group(1) + new + match.group(4)

    return BLOCK.sub(one, text), changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 where a table differs from the catalogue")
    parser.add_argument("--doc", type=Path, default=DOC, help="the page (default docs/columns.md)")
    args = parser.parse_args(argv)
    text = args.doc.read_text(encoding="utf-8")
    new, changed = rewrite(text)
    if not BLOCK.search(text):
        print(f"columns_doc: {args.doc} has no <!-- catalogue: GROUP --> table", file=sys.stderr)
        return 1
    if args.check:
        if changed:
            print(
                f"columns_doc: {args.doc}: the table(s) of {'; '.join(changed)} differ from bench/catalogue.py: "
                "run python tools/columns_doc.py",
                file=sys.stderr,
            )
            return 1
        return 0
    if changed:
        tmp = args.doc.with_suffix(".md.tmp")
        tmp.write_text(new, encoding="utf-8")
        tmp.replace(args.doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
