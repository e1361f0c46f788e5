"""Apply the code blocks of docs/embedding.md to a new project, exactly as written.

A block is applied when its first line is a comment naming a file, `# <project>/celery.py`,
optionally qualified, `# <project>/settings.py (PostgreSQL)`. `<project>` becomes the
project's name. Blocks for settings.py are appended to it; others replace the file.
Without --only, the unqualified blocks are applied; --only MARKER applies that one block.

usage: embedding_blocks.py DOC PROJECT APP DEST [--only MARKER]
"""

import argparse
import re
import sys
from pathlib import Path

MARKER = re.compile(r"^# (?P<path>[\w<>./-]+\.py)(?P<qualifier> \(.+\))?$")


def blocks(text: str, project: str) -> list[tuple[str, str, str]]:
    """(marker, path, code) of each python block whose first line names a file."""
    found = []
    for code in re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL):
        code = code.replace("<project>", project)
        first = code.splitlines()[0]
        match = MARKER.match(first)
        if match:
            found.append((first[2:], match["path"], code))
    return found


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("doc", type=Path)
    parser.add_argument("project")
    parser.add_argument("app")
    parser.add_argument("dest", type=Path)
    parser.add_argument("--only")
    args = parser.parse_args()
    chosen = [
        (marker, path, code)
        for marker, path, code in blocks(args.doc.read_text(), args.project)
        if (marker == args.only if args.only else "(" not in marker)
    ]
    if not chosen:
        print(f"no block in {args.doc} matches {args.only or 'an unqualified file name'}")
        return 1
    for marker, path, code in chosen:
        target = args.dest / path
        if not target.parent.is_dir():
            print(f"{args.doc}: block {marker!r} names {path}, whose directory does not exist")
            return 1
        if target.name == "settings.py":
            with target.open("a") as settings:
                settings.write("\n" + code)
        else:
            target.write_text(code)
        print(f"applied {marker}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
