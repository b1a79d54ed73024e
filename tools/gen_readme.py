#!/usr/bin/env python3
"""Writes the list of supported commands into README.md, from the generated command table
(crates/commands/src/table.rs), between the markers <!-- commands:begin --> / <!-- commands:end -->.

    python3 tools/gen_readme.py          # rewrite README.md
    python3 tools/gen_readme.py --check  # exit 1 if README.md is out of date
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
TABLE = ROOT / "crates/commands/src/table.rs"
README = ROOT / "README.md"
BEGIN, END = "<!-- commands:begin -->", "<!-- commands:end -->"


def commands():
    text = TABLE.read_text()
    groups = {}
    for name, arity, group in re.findall(r'full_name: "([^"]+)",.*?arity: (-?\d+),.*?group: "([^"]+)"', text, re.S):
        groups.setdefault(group, []).append((name.upper().replace("|", " "), int(arity)))
    return groups


def render():
    lines = [BEGIN, "", "| group | commands |", "| --- | --- |"]
    for group, names in sorted(commands().items()):
        # A container (CLIENT) is listed through its subcommands (CLIENT LIST, ...).
        # A container that also works alone (COMMAND, arity -1) is listed itself too.
        subs = {n.split(" ")[0] for n, _ in names if " " in n}
        shown = sorted(n for n, a in names if n not in subs or a == -1)
        lines.append(f"| {group} | {', '.join(shown)} |")
    lines += ["", END]
    return "\n".join(lines)


def main():
    readme = README.read_text()
    start, end = readme.index(BEGIN), readme.index(END) + len(END)
    new = readme[:start] + render() + readme[end:]
    if "--check" in sys.argv:
        if new != readme:
            print("README.md command list is out of date: run python3 tools/gen_readme.py")
            return 1
        return 0
    README.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
