"""The README is the front door: short, every link in it reaches a heading or a docs page (and that page's
heading), and the README and the docs pages together show every screenshot. Its examples run in tests/test_docs.py."""

import re

from tests.support.checkout import REPO_ROOT

README = REPO_ROOT / "README.md"
PAGES = [README, *sorted((REPO_ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation but hyphens and underscores dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)  # a `#` line in a code block is no heading
    return {github_anchor(heading) for heading in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def test_the_readme_is_short():
    assert len(README.read_text().splitlines()) < 400


def test_every_link_in_the_readme_reaches_a_heading_or_a_docs_page_and_the_contents_name_every_section():
    text = README.read_text()
    assert github_anchor("Watch the server: `enginetui attach`") == "watch-the-server-enginetui-attach"
    for target in LINK.findall(text):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        page = (README.parent / path) if path else README
        assert page.is_file(), f"the README links to {target}, which does not exist"
        if anchor:
            assert anchor in anchors(page.read_text()), f"the README links to {target}: no such heading"
    contents = text[text.index("**Contents:**") : text.index("\n\n", text.index("**Contents:**"))]
    sections = [github_anchor(h) for h in re.findall(r"^## (.+)$", text, flags=re.M)]
    assert re.findall(r"\]\(#([^)]+)\)", contents) == sections


def test_the_pages_show_every_screenshot_and_each_one_they_show_exists():
    shown = {name for page in PAGES for name in re.findall(r"!\[[^\]]*\]\(screenshots/([^)]+)\)", page.read_text())}
    files = {path.name for path in (REPO_ROOT / "screenshots").iterdir()}
    assert shown == files
