"""The documentation site (``make docs``: mkdocs with the material theme, ``mkdocs.yml``) builds
from docs/ with no warning (a broken link or anchor, a page left out of the nav) and without
the network, and reads from the disk: no web font, nothing loaded from the network, pages that
link each other as files."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None, reason="mkdocs (the docs extra) missing"
)

#: A proxy that refuses every connection: a build that reaches for the network fails.
NO_NETWORK = {k: "http://127.0.0.1:9" for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")}
#: What ``make docs`` sets too: no notice of the theme's end of life on every build.
QUIET = {"NO_MKDOCS_2_WARNING": "1"}


def nav_pages(nav: list) -> list[str]:
    """The files of a mkdocs ``nav`` (a list of files, ``{title: file}`` and ``{title: [...]}``)."""
    out: list[str] = []
    for item in nav:
        values = item.values() if isinstance(item, dict) else [item]
        for value in values:
            out += nav_pages(value) if isinstance(value, list) else [value]
    return out


def test_every_page_of_docs_is_in_the_nav():
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["docs_dir"] == "docs"
    pages = nav_pages(config["nav"])
    assert sorted(pages) == sorted({*pages}), "a page is twice in the nav"
    docs = ROOT / "docs"
    assert sorted(pages) == sorted(str(p.relative_to(docs)) for p in docs.rglob("*.md"))


def test_site_builds_strictly_offline(tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, **QUIET, **NO_NETWORK, **{k.lower(): v for k, v in NO_NETWORK.items()}}
    for name in ("NO_PROXY", "no_proxy"):
        env.pop(name, None)
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file"]
    cmd += [str(ROOT / "mkdocs.yml"), "--site-dir", str(site)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    said = r.stdout + r.stderr
    assert r.returncode == 0 and not re.search(r"^WARNING", said, re.M), said[-5000:]
    for page in (ROOT / "docs").rglob("*.md"):
        html = site / page.relative_to(ROOT / "docs").with_suffix(".html")
        assert html.exists(), f"{page.name} has no page on the site"
    pages = "".join(p.read_text(encoding="utf-8") for p in site.rglob("*.html"))
    assert "fonts.googleapis.com" not in pages and "fonts.gstatic.com" not in pages
    fetched = re.findall(r'(?:src="|<link[^>]*href=")(https?://[^"]*)', pages)
    assert not fetched, f"the pages load from the network: {sorted(set(fetched))}"
    assert 'href="lfc.html' in pages  # the pages link each other, as files (file://)
