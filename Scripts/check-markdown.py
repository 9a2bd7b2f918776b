#!/usr/bin/env python3
"""Checks the Markdown of the README, docs/ and the DocC catalog for damage that a renderer
hides: code fences that do not pair, paragraphs that start or stop mid-sentence.

    Scripts/check-markdown.py [FILE.md ...]     (default: every Markdown file the project ships)

The rules, each reported as FILE:LINE: what is wrong:
- every opening fence names its language (```swift, ```sh, ```text, ...), so a bare ``` always
  closes a block: a bare ``` outside a block is a stray fence, an opening fence inside a block
  is a block left open, and a file may not end inside a block;
- no code block is empty;
- a paragraph of prose starts as a sentence does (not with a lowercase word) and ends as one does
  (with . : ! ? or a closing bracket or quote), so a paragraph cut in two shows at both ends.
Exits 1 when anything is wrong.
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r"^\s*```(.*)$")
ENDS_SENTENCE = tuple(".:!?)]\"'*`>|")


def shipped_files():
    files = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "CHANGELOG.md"),
             os.path.join(ROOT, "CONTRIBUTING.md")]
    files += sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    files += sorted(glob.glob(os.path.join(ROOT, "Benchmarks", "*.md")))
    files += sorted(glob.glob(os.path.join(ROOT, "Sources", "*", "*.docc", "*.md")))
    return [f for f in files if os.path.exists(f)]


def is_prose(line):
    """A line that belongs to a paragraph of prose (not a heading, list item, table, quote,
    HTML, DocC directive or link definition)."""
    stripped = line.strip()
    if not stripped:
        return False
    if re.match(r"^(#|[-*+] |\d+[.)] |\||>|<|@|\[[^\]]+\]:|!\[|---|===|\*\*\*)", stripped):
        return False
    return True


def check(path):
    problems = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    inside = None          # line number of the open fence
    block_lines = 0
    paragraph = []         # (number, text) of the current prose paragraph
    in_list_item = False   # a list item's continuation lines are not paragraphs of their own
    # A paragraph may go on in lowercase right after a code block that a colon introduced
    # ("In a directory holding app.sqlite: <block> works as written").
    last_prose_ended_with_colon = False
    block_introduced = False
    right_after_block = False

    def check_fragment(number, text):
        prose = re.sub(r"`[^`]*`", "code", text)
        if re.search(r"\s[.,;]( |$)", prose):
            problems.append(f"{path}:{number}: a fragment: a space before punctuation")

    def end_paragraph():
        nonlocal last_prose_ended_with_colon, right_after_block
        if paragraph and not in_list_item:
            first_number, first = paragraph[0]
            last_number, last = paragraph[-1]
            continues = right_after_block and block_introduced
            if re.match(r"^[a-z]", first.strip()) and not continues:
                problems.append(f"{path}:{first_number}: a paragraph starts mid-sentence: "
                                f"{first.strip()[:60]!r}")
            if not last.rstrip().endswith(ENDS_SENTENCE):
                problems.append(f"{path}:{last_number}: a paragraph stops mid-sentence: "
                                f"{last.strip()[-60:]!r}")
            for number, text in paragraph:
                check_fragment(number, text)
        if paragraph:
            last_prose_ended_with_colon = paragraph[-1][1].rstrip().endswith(":")
            right_after_block = False
        paragraph.clear()

    for number, line in enumerate(lines, start=1):
        fence = FENCE.match(line)
        if inside is not None:
            if fence:
                if fence.group(1).strip():
                    problems.append(f"{path}:{number}: a fence opens inside the block opened at line "
                                    f"{inside} (is that block's closing fence missing?)")
                elif block_lines == 0:
                    problems.append(f"{path}:{inside}: an empty code block")
                inside = None
                right_after_block = True
            else:
                block_lines += 1
            continue
        if fence:
            end_paragraph()
            in_list_item = False
            if not fence.group(1).strip():
                problems.append(f"{path}:{number}: a stray fence (or a block opened without a language; "
                                "write ```swift, ```sh or ```text)")
                continue
            block_introduced = last_prose_ended_with_colon
            inside = number
            block_lines = 0
            continue
        stripped = line.strip()
        if not stripped:
            end_paragraph()
            continue
        if re.match(r"^([-*+] |\d+[.)] )", stripped):
            end_paragraph()
            check_fragment(number, line)
            in_list_item = True
            last_prose_ended_with_colon = stripped.endswith(":")
            right_after_block = False
            continue
        if not is_prose(line):
            end_paragraph()
            in_list_item = False
            last_prose_ended_with_colon = False
            right_after_block = False
            continue
        if in_list_item and line.startswith((" ", "\t")):
            check_fragment(number, line)
            last_prose_ended_with_colon = stripped.endswith(":")
            continue
        in_list_item = False
        paragraph.append((number, line))
    end_paragraph()
    if inside is not None:
        problems.append(f"{path}:{inside}: a code block that is never closed")
    return problems


def main():
    files = sys.argv[1:] or shipped_files()
    problems = [p for f in files for p in check(f)]
    for p in problems:
        print(os.path.relpath(p, ROOT) if p.startswith(ROOT) else p)
    if problems:
        print(f"check-markdown: {len(problems)} problems in {len(files)} files", file=sys.stderr)
        return 1
    print(f"check-markdown: {len(files)} files, fences paired, no paragraph cut")
    return 0


if __name__ == "__main__":
    sys.exit(main())
