"""Debian's Chromium driven by Selenium, with nothing downloaded.

The test command installs ``chromium`` and ``chromium-driver``; Selenium Manager is never
asked to fetch a browser or a driver because both paths are given. Without them the
dashboard tests fail (not skip) and say what to install.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
INSTALL = "apt-get update && apt-get install -y chromium chromium-driver"


@contextlib.contextmanager
def chromium(width: int, height: int) -> Iterator[webdriver.Chrome]:
    """A headless Chromium with a fresh profile and the console log readable."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.access(path, os.X_OK)]
    if missing:
        pytest.fail(
            f"the dashboard tests need Debian's Chromium and its driver ({', '.join(missing)} "
            f"not found); install them with: {INSTALL}",
            pytrace=False,
        )
    with tempfile.TemporaryDirectory(prefix="conveyor-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in (
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
        ):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
        try:
            # Headless windows have a minimum width; the viewport is set exactly instead.
            driver.execute_cdp_cmd(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
            )
            driver.set_page_load_timeout(30)
            yield driver
        finally:
            driver.quit()


def console_errors(driver: webdriver.Chrome) -> list[str]:
    """The page's console messages at SEVERE level (errors, failed loads) since last asked."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
