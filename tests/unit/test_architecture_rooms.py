"""docs/architecture.md's table of the adapter's rooms is the tree's (issue 46: docs sentences are
code). The table between ``<!-- rooms:after -->`` and ``<!-- /rooms:after -->`` is generated
here from the adapter's folders and its import graph (``test_import_graph``): each room in its
layer order, its modules, files and lines (``wc -l``), and the rooms it imports.

``python tests/unit/test_architecture_rooms.py`` writes the table into the page; with
``--before COMMIT`` it prints the same table of the adapter's folders at that commit (the
"before" table, history, is not checked).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from test_import_graph import ADAPTER, PACKAGES, ROOM_IMPORTS, import_graph, room_of

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- rooms:after -->", "<!-- /rooms:after -->"


def layer_order() -> list[str]:
    """The rooms bottom first: each after every room it may import (ties by name)."""
    depth: dict[str, int] = {}

    def level(room: str) -> int:
        if room not in depth:
            depth[room] = 1 + max((level(r) for r in ROOM_IMPORTS[room]), default=-1)
        return depth[room]

    return sorted(ROOM_IMPORTS, key=lambda room: (level(room), room))


def _folders(files: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """Room (or ``""`` for the top folder) -> its files (path inside the room -> text)."""
    out: dict[str, dict[str, str]] = {}
    for path, text in files.items():
        room, _, rest = path.partition("/")
        key = room if rest else ""
        out.setdefault(key, {})[rest or room] = text
    return out


def _modules(files: Mapping[str, str]) -> str:
    names = sorted({p.split("/")[0] if "/" in p else p.removesuffix(".py") for p in files}
                   - {"__init__"})
    return ", ".join(f"`{n}/`" if any(p.startswith(n + "/") for p in files) else f"`{n}`"
                     for n in names)


def _lines(files: Mapping[str, str]) -> int:
    return sum(text.count("\n") for text in files.values())


def _rooms(names: set[str] | frozenset[str]) -> str:
    return ", ".join(f"`{r}`" for r in sorted(names)) or "none"


def table(files: Mapping[str, str], imports: Mapping[str, set[str]] | None = None) -> str:
    """The Markdown table of the adapter's folders; ``files``: path in the package -> text."""
    rooms = _folders(files)
    total_files, total_lines = len(files), _lines(files)
    head = "| room | modules | files | lines | share |"
    rule = "| --- | --- | ---: | ---: | ---: |"
    if imports is not None:
        head, rule = head + " imports (the import graph) |", rule + " --- |"
    rows = [head, rule]
    order = [r for r in layer_order() if r in rooms] + sorted(set(rooms) - set(ROOM_IMPORTS))
    for room in order:
        if room == "":
            continue
        mine = rooms[room]
        row = (f"| `{room}/` | {_modules(mine)} | {len(mine)} | {_lines(mine):,} | "
               f"{round(100 * _lines(mine) / total_lines)} % |")
        if imports is not None:
            row += f" {_rooms(imports.get(room, set()))} |"
        rows.append(row)
    top = rooms.get("", {})
    row = (f"| top folder | {', '.join(f'`{p}`' for p in sorted(top))} | {len(top)} | "
           f"{_lines(top):,} | {round(100 * _lines(top) / total_lines)} % |")
    if imports is not None:
        row += (f" `cli.py`: {_rooms(imports.get(f'{ADAPTER}.cli', set()))}; `__init__.py`: "
                f"{_rooms(imports.get(ADAPTER, set()))} |")
    rows.append(row)
    rows.append(f"| **all** | | {total_files} | {total_lines:,} | 100 % |"
                + (" |" if imports is not None else ""))
    return "\n".join(rows)


def tree_files() -> dict[str, str]:
    root = PACKAGES[ADAPTER]
    return {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(root.rglob("*.py"))}


def room_imports() -> dict[str, set[str]]:
    """Room -> the other rooms its modules import, from the import graph."""
    out: dict[str, set[str]] = {}
    for src, edges in import_graph(ADAPTER).items():
        here = room_of(src)
        out.setdefault(here, set()).update(room_of(d) for d in edges if room_of(d) != here)
    return out


def after_table() -> str:
    return table(tree_files(), room_imports())


def _documented() -> str:
    text = PAGE.read_text(encoding="utf-8")
    match = re.search(re.escape(BEGIN) + r"\n(.*?)\n" + re.escape(END), text, re.S)
    assert match, f"{PAGE.relative_to(ROOT)}: no {BEGIN} ... {END} block"
    return match.group(1)


def test_the_architecture_page_shows_the_rooms_as_they_are() -> None:
    expected = after_table()
    assert _documented() == expected, (
        "docs/architecture.md's table of the adapter's rooms is stale; run "
        "`.venv/bin/python tests/unit/test_architecture_rooms.py` to write it:\n" + expected)


def test_every_room_appears_in_layer_order() -> None:
    order = layer_order()
    assert set(order) == set(ROOM_IMPORTS)
    assert all(order.index(dep) < order.index(room)
               for room, deps in ROOM_IMPORTS.items() for dep in deps)


def _files_at(commit: str) -> dict[str, str]:
    prefix = f"reference_adapter/{ADAPTER}/"
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", commit, prefix], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    return {n[len(prefix):]: subprocess.run(["git", "show", f"{commit}:{n}"], cwd=ROOT,
                                            capture_output=True, text=True, check=True).stdout
            for n in names if n.endswith(".py")}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--before"]:
        print(table(_files_at(sys.argv[2])))
    else:
        page = PAGE.read_text(encoding="utf-8")
        PAGE.write_text(page.replace(_documented(), after_table()), encoding="utf-8")
