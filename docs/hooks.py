"""MkDocs hook: the site serves the repository's screenshots/ folder (one copy, where the screenshot tools
write) as docs/screenshots/, so pages link `screenshots/NAME` as the README does."""

from pathlib import Path

from mkdocs.structure.files import File

SCREENSHOTS = Path(__file__).resolve().parent.parent / "screenshots"


def on_files(files, config):
    for path in sorted(SCREENSHOTS.iterdir()):
        if path.is_file():
            files.append(
                File(
                    f"screenshots/{path.name}",
                    str(SCREENSHOTS.parent),
                    config["site_dir"],
                    config["use_directory_urls"],
                )
            )
    return files
