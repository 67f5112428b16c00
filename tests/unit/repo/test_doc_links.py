"""The README and the docs pages hold together without mkdocs installed: every relative link and image
points at a file that exists (and, from docs/, one the site serves), every anchor names a heading whose id
reads the same on GitHub and in mkdocs, mkdocs.yml's nav lists every page, the docs' home page and commands
page show the README's Quick start and Usage blocks as they are, and the architecture page names every
package and module.

`tests/integration/test_docs.py` builds the site with `mkdocs build --strict` where mkdocs is installed; these checks
run everywhere, so a broken link fails the suite on a machine without the docs extra too.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
FILES = [ROOT / "README.md", *PAGES]
# What the site serves from outside docs/: the screenshots, through docs/hooks.py.
SERVED_FROM_OUTSIDE = (ROOT / "screenshots",)
README_LIMIT = 300  # lines: the README is what a newcomer reads first; the rest lives in docs/

FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


@dataclass(frozen=True)
class Link:
    source: Path
    line: int
    target: str

    def where(self) -> str:
        return f"{self.source.relative_to(ROOT)}:{self.line}: ({self.target})"


def prose_lines(path: Path) -> list[tuple[int, str]]:
    """The lines of a Markdown file outside fenced code, numbered from 1, with code spans blanked."""
    lines, fenced = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, CODE_SPAN.sub("``", line)))
    return lines


def links_in(path: Path) -> list[Link]:
    return [Link(path, n, m.group(1)) for n, line in prose_lines(path) for m in LINK.finditer(line)]


def heading_text(raw: str) -> str:
    """A heading as it reads once rendered: link text kept, code and emphasis marks dropped."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", raw)
    return re.sub(r"[`*]", "", text)


def github_slug(text: str) -> str:
    """GitHub's heading id (github-slugger): lower case, punctuation dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def mkdocs_slug(text: str) -> str:
    """Python-Markdown's toc id (mkdocs' default): ASCII only, punctuation dropped, spaces collapsed."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", ascii_text).strip().lower())


def anchors(path: Path) -> tuple[set[str], set[str]]:
    """The heading ids of a file as GitHub and as mkdocs make them (duplicates numbered each its own way)."""
    github: set[str] = set()
    mkdocs: set[str] = set()
    for _n, line in prose_lines(path):
        match = HEADING.match(line)
        if not match:
            continue
        text = heading_text(match.group(2))
        slug = github_slug(text)
        github.add(_numbered(slug, github, "-"))
        slug = mkdocs_slug(text)
        mkdocs.add(_numbered(slug, mkdocs, "_"))
    return github, mkdocs


def _numbered(slug: str, taken: set[str], sep: str) -> str:
    if slug not in taken:
        return slug
    n = 1
    while f"{slug}{sep}{n}" in taken:
        n += 1
    return f"{slug}{sep}{n}"


def problem(link: Link) -> str | None:
    """What is wrong with one link, or None."""
    target = link.target
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):
        return None  # an address (https:, mailto:): not this test's business
    path_part, _, fragment = target.partition("#")
    dest = (link.source.parent / path_part).resolve() if path_part else link.source
    if not dest.exists():
        return f"{link.where()} points at {path_part}, which does not exist"
    if link.source.parent == DOCS and not _served(dest):
        return f"{link.where()}: the site serves only docs/ and screenshots/; name the file in `code` instead"
    if fragment:
        if dest.suffix != ".md":
            return f"{link.where()}: an anchor on a file that is not a page"
        github, mkdocs = anchors(dest)
        if fragment not in github or fragment not in mkdocs:
            return f"{link.where()}: no heading with the id #{fragment} on GitHub and in mkdocs alike"
    return None


def _served(dest: Path) -> bool:
    return dest.is_relative_to(DOCS) or any(dest.is_relative_to(d) for d in SERVED_FROM_OUTSIDE)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(path: Path) -> None:
    found = links_in(path)
    problems = [p for p in map(problem, found) if p]
    assert not problems, "\n".join(problems)


def test_the_checker_sees_a_broken_link_a_missing_anchor_and_a_link_the_site_cannot_serve(
    tmp_path: Path,
) -> None:
    readme = ROOT / "README.md"
    assert problem(Link(readme, 1, "docs/measurement.md#every-step-is-measured-under-its-own-load")) is None
    assert "does not exist" in (problem(Link(readme, 1, "docs/no-such-page.md")) or "")
    assert "no heading" in (problem(Link(readme, 1, "docs/measurement.md#no-such-heading")) or "")
    assert "serves only" in (problem(Link(DOCS / "index.md", 1, "../pyproject.toml")) or "")
    assert problem(Link(DOCS / "index.md", 1, "../screenshots/console-160x48.png")) is None
    page = tmp_path / "p.md"
    page.write_text(
        "# A — b\n\n```sh\n# not a heading\n```\n[x](y.md) `[not](a-link.md)`\n", encoding="utf-8"
    )
    assert anchors(page) == ({"a--b"}, {"a-b"})  # an em dash reads differently: such an anchor fails
    assert [link.target for link in links_in(page)] == ["y.md"]


def test_the_nav_lists_every_page_and_only_pages_that_exist() -> None:
    nav = re.findall(
        r"^\s*-\s[^:\n]+:\s*(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.M
    )
    assert sorted(nav) == sorted(p.name for p in PAGES)


def first_block(path: Path, heading: str) -> str:
    """The first ```sh block under a heading of a file."""
    text = "\n" + path.read_text(encoding="utf-8")
    section = text.split(f"\n{heading}\n", 1)[1]
    return section.split("```sh\n", 1)[1].split("```", 1)[0]


def quick_start(path: Path) -> str:
    return first_block(path, "## Quick start")


def test_the_docs_home_shows_the_readmes_quick_start_as_it_is() -> None:
    readme_block = quick_start(ROOT / "README.md")
    assert readme_block.count("\n") == 2, readme_block  # two commands, one a line: CI runs them as written
    assert quick_start(DOCS / "index.md") == readme_block
    under = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## Quick start\n", 1)[1]
    assert under.lstrip("\n").startswith("```sh\n"), "the commands come directly under the heading"


def test_the_commands_page_shows_the_readmes_usage_as_it_is() -> None:
    assert first_block(DOCS / "usage.md", "# Commands and flags") == first_block(
        ROOT / "README.md", "## Usage"
    )


def test_the_readme_stays_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines < README_LIMIT, f"README.md has {lines} lines: move detail to a page under docs/"


def test_the_architecture_page_names_every_package_and_module() -> None:
    page = (DOCS / "architecture.md").read_text(encoding="utf-8")
    missing = []
    for top in ("loadgen", "tui"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT / top)
            if "__pycache__" in rel.parts or rel.name == "__init__.py":
                continue
            if f"{rel.name}`" not in page and f"{rel.as_posix()}`" not in page:
                missing.append(f"{top}/{rel.as_posix()}")
            if len(rel.parts) > 1 and f"{rel.parts[0]}/" not in page:
                missing.append(f"{top}/{rel.parts[0]}/")
    assert not missing, f"docs/architecture.md does not name: {sorted(set(missing))}"
