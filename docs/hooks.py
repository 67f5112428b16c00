"""mkdocs hooks (mkdocs.yml, ``hooks:``): the screenshots, kept once in the repository's ``screenshots/``.

The README and these pages link them as ``screenshots/NAME.png`` and ``../screenshots/NAME.png``: paths
GitHub resolves from where each file sits. mkdocs serves only what is under ``docs/``, so this hook adds
each screenshot to the site as ``screenshots/NAME.png`` and points the pages' links there before mkdocs
checks them: a link to a screenshot that does not exist still fails a strict build.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

SHOTS = "screenshots"
SUFFIXES = (".png", ".svg")


def on_files(files: Files, config: MkDocsConfig) -> Files:
    root = Path(config.config_file_path).parent
    for shot in sorted((root / SHOTS).iterdir()):
        if shot.suffix in SUFFIXES:
            files.append(File(f"{SHOTS}/{shot.name}", str(root), config.site_dir, config.use_directory_urls))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    # Every page sits at the top of docs/, so ../screenshots/ from the repository is screenshots/ here.
    return markdown.replace(f"](../{SHOTS}/", f"]({SHOTS}/")
