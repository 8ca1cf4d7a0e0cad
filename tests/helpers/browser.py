"""A real browser for the dashboard's tests: Playwright driving Debian's Chromium, headless, offline.

``python3 dev.py test`` installs Debian's ``chromium`` when it can (root and apt-get)
and Playwright is in the test extra; where no browser can be had, :func:`browser_page`
skips the test, saying why, rather than pass it untested.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

__all__ = ["CHROMIUM_ARGS", "browser_page", "find_chromium"]

#: headless, no sandbox (tests may run as root), and none of the background traffic a closed network refuses
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def find_chromium() -> str | None:
    """``$RETAIN_CHROMIUM``, else chromium or chromium-browser on PATH."""
    configured = os.environ.get("RETAIN_CHROMIUM")
    if configured:
        return configured
    return shutil.which("chromium") or shutil.which("chromium-browser")


@contextmanager
def browser_page() -> Iterator[Any]:
    """A fresh page in a headless Chromium with an empty profile; skips (saying why) when there is none."""
    executable = find_chromium()
    if executable is None and os.environ.get("RETAIN_NO_APT"):
        pytest.skip("no Chromium, and RETAIN_NO_APT is set: python3 dev.py test installed none (install the "
                    "chromium package, or set RETAIN_CHROMIUM, to run this test)")
    if executable is None:
        pytest.skip("no Chromium: install Debian's chromium package (python3 dev.py test does, as root), "
                    "or set RETAIN_CHROMIUM")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright is not installed (it is in retain's test extra: python3 dev.py test installs it)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield browser.new_page()
        finally:
            browser.close()
