"""The history studio in a real browser: headless Chromium driven through Selenium, after a
scripted agent session (literal guesses that get UNKNOWN_VALUE warnings, a denial, the right
answer). It opens the studio, follows the conversation's link, reads the statements in order and
their warnings, finds the retried shape in the retries report, sees the live figures filled in by
the page's script, and checks the browser logged no error (a script a hostile value slipped in
would run, or be blocked by the content policy, and show there). Then the same at a phone's
width (375px): no sideways scrolling. Screenshots of each page go to docs/images/ (the README
and docs/history.md show them), so the pictures stay current."""

import pathlib
import shutil

import pytest

import pgwtest
from studiosupport import DENIED, GUESSES, RIGHT, SCRIPT, XSS_AGENT, recorded_daemon, wait_page

CONV = "conv-browser-1"
IMAGES = pathlib.Path(__file__).resolve().parents[2] / "docs" / "images"

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def studio(pgwarden_bin, pg):
    # A second conversation asks the same questions: the repeats report's rows.
    for d in recorded_daemon(pgwarden_bin, pg, [(CONV, XSS_AGENT), (CONV + "-again", "agent-b")]):
        wait_page(d, "/studio/retries", CONV)
        yield d


def make_driver(width, height):
    for tool in ("chromium", "chromedriver"):
        if shutil.which(tool) is None:
            pgwtest.require_tool(f"{tool} is not installed")
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}", "--force-device-scale-factor=1"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path="/usr/bin/chromedriver")
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(30)
    return driver


@pytest.fixture
def desktop():
    driver = make_driver(1280, 900)
    yield driver
    driver.quit()


@pytest.fixture
def phone():
    driver = make_driver(375, 812)
    # A desktop browser's window has a minimum width; the phone's viewport is emulated instead.
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 375, "height": 812, "deviceScaleFactor": 2, "mobile": True})
    yield driver
    driver.quit()


def errors_logged(driver):
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def shoot(driver, name):
    IMAGES.mkdir(parents=True, exist_ok=True)
    # The whole page: the window as tall as the document.
    height = driver.execute_script("return document.documentElement.scrollHeight")
    width = driver.execute_script("return window.innerWidth")
    driver.set_window_size(width, min(max(height, 600), 2400))
    driver.save_screenshot(str(IMAGES / name))


def live_filled(driver):
    WebDriverWait(driver, 15).until(
        lambda d: d.find_element(By.ID, "live-sessions").text.strip() not in ("", "–"))
    # The rate needs two polls, two seconds apart.
    WebDriverWait(driver, 15).until(
        lambda d: d.find_element(By.ID, "live-rate").text.strip() not in ("", "–"))


def base(studio):
    return f"http://127.0.0.1:{studio.metrics_port}"


def test_a_person_follows_the_conversation(studio, desktop):
    d = desktop
    d.get(base(studio) + "/studio/")
    assert d.title.startswith("Conversations")
    link = WebDriverWait(d, 10).until(ec.element_to_be_clickable((By.LINK_TEXT, CONV)))
    # The hostile agent id is shown as text, not made into an element.
    row = link.find_element(By.XPATH, "./ancestor::tr")
    assert XSS_AGENT in row.text
    assert d.find_elements(By.CSS_SELECTOR, "main img") == []
    live_filled(d)
    shoot(d, "studio-conversations.png")

    link.click()
    WebDriverWait(d, 10).until(ec.presence_of_element_located((By.CSS_SELECTOR, "ol.timeline")))
    statements = [e.text for e in d.find_elements(By.CSS_SELECTOR, "ol.timeline pre.sql")]
    assert [s for s in statements if s in SCRIPT] == SCRIPT, statements
    items = d.find_elements(By.CSS_SELECTOR, "ol.timeline > li")
    by_sql = {i.find_element(By.CSS_SELECTOR, "pre.sql").text: i for i in items}
    for g in GUESSES:
        item = by_sql[f"SELECT count(*) FROM studio_shipments WHERE status = '{g}'"]
        findings = item.find_element(By.CSS_SELECTOR, "ul.findings").text
        assert "UNKNOWN_VALUE" in findings and "DELAYED" in findings, findings
    assert "READ_ONLY" in by_sql[DENIED].text
    assert "denied" in by_sql[DENIED].get_attribute("class")
    assert "UNKNOWN_VALUE" not in by_sql[RIGHT].text
    assert d.find_elements(By.CSS_SELECTOR, "main script, main img") == []
    shoot(d, "studio-timeline.png")

    d.get(base(studio) + "/studio/retries")
    rows = d.find_elements(By.CSS_SELECTOR, "table tbody tr")
    mine = [r for r in rows if r.find_elements(By.LINK_TEXT, CONV)]
    assert mine, [r.text for r in rows]
    cells = mine[0].find_elements(By.TAG_NAME, "td")
    headers = [h.text for h in d.find_elements(By.CSS_SELECTOR, "table thead th")]
    variants = int(cells[headers.index("variants")].text)
    assert variants >= len(GUESSES), variants
    assert d.find_elements(By.CSS_SELECTOR, "figure.chart svg rect")
    shoot(d, "studio-retries.png")
    for page in ("repeats", "denials", "zeros"):
        d.get(base(studio) + f"/studio/{page}")
        assert d.find_elements(By.CSS_SELECTOR, "figure.chart svg")
        shoot(d, f"studio-{page}.png")
    assert errors_logged(d) == []


def test_works_at_a_phone_width(studio, phone):
    d = phone
    for path in ("/studio/", f"/studio/conversation?id={CONV}", "/studio/retries",
                 "/studio/denials"):
        d.get(base(studio) + path)
        WebDriverWait(d, 10).until(ec.presence_of_element_located((By.TAG_NAME, "main")))
        assert d.execute_script("return window.innerWidth") == 375
        # The page itself never scrolls sideways; wide tables scroll inside their box.
        wide = d.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert wide <= 0, (path, wide)
        assert d.find_element(By.TAG_NAME, "nav").is_displayed()
    d.get(base(studio) + f"/studio/conversation?id={CONV}")
    first = d.find_element(By.CSS_SELECTOR, "ol.timeline pre.sql")
    assert first.is_displayed() and first.size["width"] <= 375
    live_filled(d)
    d.save_screenshot(str(IMAGES / "studio-phone.png"))
    assert errors_logged(d) == []
