"""Pytest plugin: drive Debian's Chromium through Playwright's Python package.

Load it from conftest.py with ``pytest_plugins = ["support.browser"]``.

Playwright's own browser download is not available here, so the browser is the system ``chromium``
package, passed to Playwright as its executable path (``CHROMIUM_PATH`` overrides
``/usr/bin/chromium``). Without Chromium or the ``playwright`` package the browser tests are skipped
with a message saying how to enable them, except in CI (env ``CI`` set), where they must run and
therefore fail.

Fixtures: ``browser`` (one headless Chromium per session), ``page`` (a fresh context and page per
test), ``screenshot`` (saves PNGs under ``tests/artifacts/``). Tests using ``page`` are marked
``browser`` (deselect with ``-m "not browser"``). When such a test fails, every page it had open is
saved as ``tests/artifacts/FAILED-<test>[-<n>].png`` before its context closes.
"""

import os
import re
import shutil
from pathlib import Path

import pytest

from support.helpers import unavailable

DEFAULT_CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SKIP_MESSAGE = ("browser tests need Debian's chromium: apt-get install chromium"
                " (then re-run make test)")
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
PAGE_TIMEOUT_MS = 10_000


def chromium_path():
    """The Chromium executable to use, or None when there is none."""
    override = os.environ.get("CHROMIUM_PATH")
    if override:
        return override if os.access(override, os.X_OK) else None
    if os.access(DEFAULT_CHROMIUM, os.X_OK):
        return DEFAULT_CHROMIUM
    return shutil.which("chromium")


def _unavailable(reason):
    unavailable(SKIP_MESSAGE, f"{reason}; CI must run the browser tests. {SKIP_MESSAGE}")


def pytest_configure(config):
    config.addinivalue_line("markers", "browser: drives Chromium through Playwright")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    browser_page = getattr(item, "funcargs", {}).get("page")
    if report.failed and browser_page is not None:
        for n, open_page in enumerate(browser_page.context.pages):
            name = f"FAILED-{item.name}" + (f"-{n}" if n else "")
            try:
                path = save_screenshot(open_page, name, full_page=True)
                report.sections.append(("screenshot", str(path)))
            except Exception as e:  # a crashed page: the failure itself is what matters
                report.sections.append(("screenshot", f"not saved: {e}"))
    return report


def pytest_collection_modifyitems(items):
    for item in items:
        if "page" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def browser():
    executable = chromium_path()
    if executable is None:
        where = os.environ.get("CHROMIUM_PATH") or DEFAULT_CHROMIUM
        _unavailable(f"no Chromium executable at {where}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright Python package is not installed (pip install -e '.[test]')")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    browser_page = context.new_page()
    yield browser_page
    context.close()


def expect_ready(locator):
    """Wait until a control is shown and enabled. Enabled alone passes at once for a control that
    sits hidden in the page until the first answer renders it."""
    from playwright.sync_api import expect

    expect(locator).to_be_visible()
    expect(locator).to_be_enabled()


def tab_from(page, selector):
    """Start keyboard navigation at `selector` (an element that takes no focus, e.g. the page's
    heading), as a person clicking there does: the next Tab focuses the next focusable element
    after it. A new headless page may lack window focus, which made a first Tab land nowhere."""
    page.bring_to_front()
    page.locator(selector).click()
    page.wait_for_function("document.hasFocus()")


def save_screenshot(target, name, **options):
    """Save a screenshot of a Page or Locator as tests/artifacts/<name>.png; returns the path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)}.png"
    target.screenshot(path=str(path), **options)
    return path


@pytest.fixture
def screenshot():
    """``screenshot(page_or_locator, "name")`` saves tests/artifacts/name.png and returns its
    path."""
    return save_screenshot
