"""mkdocs hook: the repository's CHANGELOG.md as the site's changelog page.

The changelog lives at the repository root (where packagers and readers expect it), outside
``docs/``; this hook adds it to the build as ``changelog.md`` so there is one copy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

PAGE = "changelog.md"


def on_files(files: Files, config: Any) -> Files:
    source = Path(config["config_file_path"]).resolve().parent / "CHANGELOG.md"
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise PluginError(f"changelog: cannot read {source}: {exc.strerror or exc}") from None
    files.append(File.generated(config, PAGE, content=text))
    return files
