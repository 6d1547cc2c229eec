"""The Markdown files' relative links resolve: every ``[text](path#anchor)`` of a tracked
``*.md`` file at the repository root or under ``docs/`` names a file or folder that exists,
and an anchor into a Markdown file names one of its headings under GitHub's slug rule; and
the results pages under ``docs/results/`` are the ones ``figures --only results`` rewrites."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import urllib.parse

ROOT = pathlib.Path(__file__).resolve().parents[2]

# an inline link or image: [text](target) or [text](target "title"); the text may hold
# one level of brackets ([a [b] c](x))
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")


def markdown_files() -> list[pathlib.Path]:
    """The tracked ``*.md`` files at the root and under ``docs/`` (git's list; outside a
    git checkout, the files there)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--", "*.md"],
            cwd=ROOT, capture_output=True, check=True, text=True,
        ).stdout  # fmt: skip
        names = [n for n in out.split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        names = [p.relative_to(ROOT).as_posix() for p in ROOT.glob("*.md")]
        names += [p.relative_to(ROOT).as_posix() for p in ROOT.glob("docs/**/*.md")]
    keep = [n for n in names if "/" not in n or n.startswith("docs/")]
    return [ROOT / n for n in sorted(keep) if (ROOT / n).is_file()]


def prose_lines(text: str, spans: bool = False):
    """``(line number, line)`` outside code fences, code spans blanked unless ``spans``."""
    fenced = False
    for no, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield no, line if spans else CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text: links reduced to their text, lowercased,
    every character but letters, digits, spaces, hyphens and underscores dropped, spaces
    made hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path: pathlib.Path) -> set[str]:
    """Every heading anchor of a Markdown file; a repeated slug gets -1, -2, ..."""
    seen: dict[str, int] = {}
    out = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8"), spans=True):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        k = seen.get(base, 0)
        seen[base] = k + 1
        out.add(base if k == 0 else f"{base}-{k}")
    return out


def broken_links(path: pathlib.Path) -> list[str]:
    """Each relative link of ``path`` that does not resolve, as ``FILE:LINE: TARGET (why)``."""
    bad = []
    rel = path.relative_to(ROOT).as_posix()
    for no, line in prose_lines(path.read_text(encoding="utf-8")):
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http(s), mailto, ...
                continue
            name, _, anchor = target.partition("#")
            dest = (path.parent / urllib.parse.unquote(name)).resolve() if name else path
            if not dest.exists():
                bad.append(f"{rel}:{no}: {target} (no such file)")
            elif anchor and dest.suffix == ".md":
                if urllib.parse.unquote(anchor) not in anchors(dest):
                    bad.append(f"{rel}:{no}: {target} (no such heading)")
    return bad


def test_every_relative_link_of_the_markdown_files_resolves():
    files = markdown_files()
    assert ROOT / "RESULTS.md" in files and ROOT / "ARCHITECTURE.md" in files
    bad = [b for f in files for b in broken_links(f)]
    assert not bad, "broken links:\n" + "\n".join(bad)


def test_the_slug_rule_is_githubs():
    assert slug("What is decided: the fourth confirmatory run (protocol confirm-v4)") == (
        "what-is-decided-the-fourth-confirmatory-run-protocol-confirm-v4"
    )
    assert slug("ASVI's optimiser against its own objective (exploratory)") == (
        "asvis-optimiser-against-its-own-objective-exploratory"
    )
    assert slug("alpha = 0.5: the `objective`?") == "alpha--05-the-objective"
    assert slug("Table 1, MNIST-1D and [UCI](x.md)") == "table-1-mnist-1d-and-uci"


def test_a_broken_link_or_anchor_is_found(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "B.md").write_text("# One\n\n## Two: a `b`\n\n## One\n", encoding="utf-8")
    doc = tmp_path / "A.md"
    doc.write_text(
        "[ok](B.md) [ok](B.md#two-a-b) [ok](B.md#one-1) [ok](#top) [web](https://x.org/y.md)\n"
        "`[code](missing.md)`\n\n```\n[fenced](missing.md)\n```\n\n# Top\n"
        "[gone](C.md) [no heading](B.md#three) [no second](B.md#two-a-b-1)\n",
        encoding="utf-8",
    )
    assert broken_links(doc) == [
        "A.md:9: C.md (no such file)",
        "A.md:9: B.md#three (no such heading)",
        "A.md:9: B.md#two-a-b-1 (no such heading)",
    ]


def test_the_results_pages_are_the_results_files():
    """Every page under docs/results/ is one ``python -m figures --only results`` rewrites
    (and its test checks), and every results file it names exists; RESULTS.md first."""
    from figures.__main__ import RESULTS_FILES

    pages = {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs" / "results").glob("*.md")}
    assert RESULTS_FILES[0] == "RESULTS.md"
    assert pages and pages <= set(RESULTS_FILES)
    assert all((ROOT / f).is_file() for f in RESULTS_FILES)
