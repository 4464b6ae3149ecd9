"""The rules by which README.md's figures come from the results pages and docs links
resolve, shared by tests/test_docs.py (the rules' own tests, every link) and
tests/test_layers.py (every README figure from its table).


**What a figure is.**  In README.md's prose and tables — not in fenced code blocks, not in
`code spans`, not in a link's target — a figure is a number written

* with a decimal point (``0.667``, ``2.87``),
* or followed by ``%`` (``45%``, ``37.2 %``),
* or next to ``×`` (``6.5×``, ``×1.72``),
* or followed by a unit of time, ``s``, ``ms``, ``µs``, ``us`` or ``min`` (``70 s``, ``17.4 ms``),
* or followed by a rate, ``/s`` after at most one word (``44,000 decisions/s``).

A number right after ``§`` is a paper's section (``§7.1``), not a figure.  Settings that
look like figures (a time scale of ``0.05``) go in code spans, where they read as what a
user types.

**Where it must come from.**  A figure's *unit* is its table row, or else its paragraph
(one bullet item counts as a paragraph).  The unit, or for a table row the paragraph
right before the table (its caption), links to ``docs/results*.md#anchor``; and the
figure's number appears verbatim, as a whole number (``77`` does not match ``77.3``), in
the section of a linked page that the anchor names (from its heading to the next heading
of the same or a higher level, code blocks included).

**Links.**  Every relative link in README.md and docs/*.md — ``[text](path)``,
``[text](path#anchor)``, ``[text](#anchor)``, images too — names a file that exists, and
its anchor is the GitHub slug of a heading of that file.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))

NUMBER = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
FIGURE = re.compile(
    rf"(?<![\w.,§])(?:×\s?(?P<after_times>{NUMBER})"
    rf"|(?P<num>{NUMBER})(?P<unit>\s?%|\s?×|\s?(?:s|ms|µs|us|min)\b|(?:\s[a-z]+)?/s\b)?)")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
RESULTS_LINK = re.compile(r"\]\((?:\.\./)?(docs/results[\w-]*\.md)(?:#([\w-]+))?\)")


def figures(text: str) -> list[str]:
    """The figures of one line of prose, by the rule above (the number as written)."""
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\]\([^)]*\)", "] ", text)          # link targets
    text = re.sub(r"\b[a-z]+://\S+", " ", text)          # addresses (http://127.0.0.1:8088/)
    found = []
    for m in FIGURE.finditer(text):
        if m.group("after_times"):
            found.append(m.group("after_times"))
        elif m.group("num") and ("." in m.group("num") or m.group("unit")):
            found.append(m.group("num"))
    return found


def prose_lines(markdown: str) -> list[str]:
    """The lines outside fenced code blocks ('' where a code line was, so blocks stay apart)."""
    out, fenced = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return out


def units(markdown: str) -> list[tuple[str, str]]:
    """(unit text, caption text): each table row with the paragraph before its table, and
    each paragraph or bullet item (caption '')."""
    result, block, caption = [], [], ""

    def close():
        nonlocal caption
        if block:
            result.append(("\n".join(block), ""))
            caption = "\n".join(block)
            block.clear()

    for line in prose_lines(markdown) + [""]:
        if line.startswith("|"):
            if block:
                close()
            result.append((line, caption))
        elif not line.strip() or line.startswith("#"):
            close()
            if line.startswith("#"):
                result.append((line, ""))
            caption = "" if line.startswith("#") else caption
        else:
            if re.match(r"\s*[*-] ", line):
                close()
            block.append(line)
    return result


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lstrip("#").strip().replace("`", "").lower()
    return re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text))


def sections(path: Path) -> dict[str, str]:
    """anchor -> the section's text (its heading to the next heading of the same or a higher level)."""
    lines = path.read_text().splitlines()
    prose = prose_lines(path.read_text())
    heads = [(i, len(m.group(1)), m.group(2)) for i, line in enumerate(prose)
             if (m := re.match(r"(#{1,6})\s+(.*)", line))]
    found, seen = {}, {}
    for k, (i, level, title) in enumerate(heads):
        end = next((j for j, lv, _ in heads[k + 1:] if lv <= level), len(lines))
        base = slug(title)
        anchor = base if base not in seen else f"{base}-{seen[base]}"
        seen[base] = seen.get(base, 0) + 1
        found[anchor] = "\n".join(lines[i:end])
    return found


def appears(number: str, text: str) -> bool:
    return re.search(rf"(?<!\d)(?<!\d[.,]){re.escape(number)}(?!\d|[.,]\d)", text) is not None


def unsourced(readme: str, root: Path) -> list[str]:
    """Every README figure without its source, one line each (empty when all are sourced)."""
    problems, cache = [], {}
    for text, caption in units(readme):
        nums = figures(text)
        if not nums:
            continue
        links = RESULTS_LINK.findall(text) or (RESULTS_LINK.findall(caption) if text.startswith("|") else [])
        where = text.strip().splitlines()[0][:70]
        if not links:
            problems.append(f"{', '.join(nums)}: no link to a docs/results*.md section in {where!r}")
            continue
        texts = []
        for page, anchor in links:
            if not anchor:
                problems.append(f"the link to {page} has no #anchor in {where!r}")
                continue
            cache.setdefault(page, sections(root / page) if (root / page).exists() else {})
            if anchor not in cache[page]:
                problems.append(f"{page}#{anchor} is not a section in {where!r}")
                continue
            texts.append(cache[page][anchor])
        problems += [f"{n} is not in {', '.join(f'{p}#{a}' for p, a in links)} (for {where!r})"
                     for n in nums if texts and not any(appears(n, t) for t in texts)]
    return problems


def broken_links(path: Path) -> list[str]:
    problems = []
    for line in prose_lines(path.read_text()):
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"[a-z]+:", target):
                continue                                # http:, https:, mailto:
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not dest.exists():
                problems.append(f"{path.name}: {target}: no such file")
            elif anchor and anchor not in sections(dest):
                problems.append(f"{path.name}: {target}: no heading with that anchor")
    return problems
