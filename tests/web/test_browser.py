"""The dashboard page in a real headless Chromium (issue 17 item 5; README.md, "Web dashboard").

Each test starts the real ``teamctl web`` as a subprocess (``tests/web/conftest.py``) and drives
Debian's Chromium through Selenium and the system ``chromedriver`` (no browser is downloaded).
Waits are bounded conditions on the page (``WebDriverWait``), never sleeps.

Without a browser the tests are skipped with a loud reason; ``TEAMCTL_REQUIRE_BROWSER=1`` (set
by ``.ci/run``) turns that into a failure, so CI cannot pass without having run them. Set
``TEAMCTL_SCREENSHOTS=DIR`` to keep screenshots of the main views (``docs/web-*.png`` are made
this way).
"""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.team_support import wait_journal
from tests.web.conftest import TEAMCTL, WebServer, cli_env, teamctl

REQUIRE_BROWSER_ENV = "TEAMCTL_REQUIRE_BROWSER"
SCREENSHOTS_ENV = "TEAMCTL_SCREENSHOTS"
WAIT_S = 30.0
ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "<img src=x onerror=alert(1)>"
HOSTILE_SCRIPT = "<script>window.__pwned = 1</script>"

Driver = Any  # selenium.webdriver.Chrome (selenium is imported only when it is installed)


def find_browser() -> tuple[str, str] | str:
    """``(chromium, chromedriver)`` paths, or why the browser tests cannot run."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if chromium is None or driver is None:
        return (
            "chromium or chromedriver is not installed (apt-get install chromium chromium-driver)"
        )
    return chromium, driver


@pytest.fixture(scope="module")
def browser() -> Iterator[Driver]:
    """One headless Chromium for the module (module scope: it is set up before any team)."""
    found = find_browser()
    if isinstance(found, str):
        if os.environ.get(REQUIRE_BROWSER_ENV) == "1":
            pytest.fail(f"a headless browser is required ({REQUIRE_BROWSER_ENV}=1) but {found}")
        pytest.skip(
            f"BROWSER TESTS SKIPPED: {found}. CI runs them ({REQUIRE_BROWSER_ENV}=1); "
            "install chromium and chromium-driver to run them here."
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = found
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-proxy-server",
        "--window-size=1280,800",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_script_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def page(browser: Driver) -> Iterator[Driver]:
    """The browser with no cookies and a blank page before and after the test."""
    browser.get("about:blank")
    browser.delete_all_cookies()
    yield browser
    browser.get("about:blank")


# --- helpers -------------------------------------------------------------------------------------


def wait_until(driver: Driver, condition: Callable[[], Any], what: str) -> Any:
    """``condition()`` once truthy (re-checked on the page until ``WAIT_S``)."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_S, poll_frequency=0.1).until(lambda _d: condition(), what)


def css(driver: Driver, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, selector))


def subjects(driver: Driver) -> list[str]:
    """The subjects on the board's cards, as the DOM holds them (text content)."""
    return list(
        driver.execute_script(
            "return [...document.querySelectorAll('#board-columns .card .subject')]"
            ".map(e => e.textContent)"
        )
    )


def text(driver: Driver, selector: str) -> str:
    """The text content of the first element matching ``selector`` ("" when there is none)."""
    return str(
        driver.execute_script(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : ''",
            selector,
        )
    )


def click(driver: Driver, selector: str) -> None:
    """Click the element matching ``selector`` (found afresh: the page redraws on events)."""
    from selenium.common.exceptions import StaleElementReferenceException

    def attempt() -> bool:
        try:
            found = css(driver, selector)
            if found:
                found[0].click()
            return bool(found)
        except StaleElementReferenceException:
            return False

    wait_until(driver, attempt, f"{selector} to click")


def open_dashboard(driver: Driver, server: WebServer) -> None:
    """Load the tokened URL and wait until the state is drawn and the event stream is live."""
    driver.get(server.url)
    wait_until(driver, lambda: css(driver, "#conn.live"), "the event stream to open")
    wait_until(driver, lambda: driver.find_element("id", "seq").text, "the state to load")


def tab(driver: Driver, name: str) -> None:
    driver.execute_script("location.hash = arguments[0]", name)
    wait_until(driver, lambda: css(driver, f"#tab-{name}:not([hidden])"), f"the {name} tab")


def shoot(driver: Driver, name: str) -> None:
    """A screenshot of the page as ``web-NAME.png`` under ``$TEAMCTL_SCREENSHOTS`` (if set)."""
    folder = os.environ.get(SCREENSHOTS_ENV)
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        assert driver.save_screenshot(str(Path(folder) / f"web-{name}.png"))


def journal(repo: Path) -> list[dict[str, Any]]:
    lines = (repo / ".team" / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def fetch_status(driver: Driver, path: str) -> int:
    """The status of ``fetch(path)`` made by the page itself (its cookies, its origin)."""
    return int(
        driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "fetch(arguments[0], {credentials: 'same-origin'}).then(r => done(r.status),"
            " e => done(-1));",
            path,
        )
    )


# --- the board -----------------------------------------------------------------------------------


def test_the_board_shows_every_task_with_its_column_owner_and_dependencies(
    page: Driver, team_repo: Path, start_web: Callable[..., WebServer]
) -> None:
    teamctl(team_repo, "task", "add", "Write the parser", "-d", "Tokens first, then the tree.")
    teamctl(team_repo, "task", "add", "Test the parser", "--blocked-by", "task_1")
    teamctl(team_repo, "task", "add", "Ship it", "--blocked-by", "task_2")
    teamctl(team_repo, "task", "claim", "task_1", "--as", "ada")
    server = start_web(team_repo)
    open_dashboard(page, server)

    wait_until(page, lambda: len(subjects(page)) == 3, "three cards")
    assert sorted(subjects(page)) == ["Ship it", "Test the parser", "Write the parser"]
    column = page.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('#board-columns .card')]"
        ".map(c => [c.dataset.task, c.parentElement.dataset.column]))"
    )
    assert column == {"task_1": "in_progress", "task_2": "blocked", "task_3": "blocked"}
    assert "@ada" in text(page, '.card[data-task="task_1"] .meta')
    deps = page.execute_script(
        "return [...document.querySelectorAll('.card[data-task=\"task_2\"] .deps a')]"
        ".map(a => a.textContent)"
    )
    assert deps == ["task_1", "task_3"]

    # Filter by owner, then by status.
    from selenium.webdriver.support.ui import Select

    Select(page.find_element("id", "filter-owner")).select_by_value("ada")
    wait_until(page, lambda: subjects(page) == ["Write the parser"], "only ada's task")
    Select(page.find_element("id", "filter-owner")).select_by_value("")
    Select(page.find_element("id", "filter-status")).select_by_value("blocked")
    wait_until(page, lambda: sorted(subjects(page)) == ["Ship it", "Test the parser"], "blocked")
    Select(page.find_element("id", "filter-status")).select_by_value("")

    # A card opens the task's detail: description and the journal's history of it.
    click(page, '.card[data-task="task_1"]')
    wait_until(page, lambda: "task.claimed" in text(page, "#task-detail"), "the task's history")
    assert "Tokens first, then the tree." in text(page, "#task-detail")
    assert "task.created" in text(page, "#task-detail")
    shoot(page, "board-detail")


def test_a_task_added_from_the_cli_appears_without_a_reload(page: Driver, web: WebServer) -> None:
    teamctl(web.repo, "task", "add", "Already there")
    open_dashboard(page, web)
    wait_until(page, lambda: subjects(page) == ["Already there"], "the first task")
    page.execute_script("window.__samePage = 'yes'")  # gone if the page reloads

    teamctl(web.repo, "task", "add", "Added while watching", "--blocked-by", "task_1")

    wait_until(page, lambda: "Added while watching" in subjects(page), "the new task, live")
    assert page.execute_script("return window.__samePage") == "yes"
    assert css(page, '[data-column="blocked"] .card[data-task="task_2"]')
    # The event stream got it too, filterable by type and agent.
    tab(page, "events")
    from selenium.webdriver.support.ui import Select

    Select(page.find_element("id", "filter-ev-type")).select_by_value("task.created")
    rows = lambda: page.execute_script(  # noqa: E731
        "return [...document.querySelectorAll('#events-list li')].map(li => li.textContent)"
    )
    wait_until(page, lambda: any("Added while watching" in r for r in rows()), "the event")
    assert all("task.created" in r for r in rows())
    Select(page.find_element("id", "filter-ev-agent")).select_by_value("cli")
    assert rows() and all("@cli" in r for r in rows())


def test_the_work_tab_shows_a_background_job_and_its_output(
    page: Driver, tmp_path: Path, start_web: Callable[..., WebServer]
) -> None:
    # The cron-and-jobs scenario runs `python -m pytest -q` as a background job of the lead.
    done = subprocess.run(
        [TEAMCTL, "scenario", "run", "cron-and-jobs", "--keep"],
        env=cli_env() | {"TMPDIR": str(tmp_path)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (repo,) = tmp_path.glob("teamctl-cron-and-jobs-*/repo")
    server = start_web(repo)
    open_dashboard(page, server)
    tab(page, "work")
    wait_until(page, lambda: "python -m pytest -q" in text(page, "#jobs-table"), "the job")
    click(page, "#jobs-table button")
    wait_until(page, lambda: "2 passed" in text(page, "#job-output"), "the job's output")
    shoot(page, "jobs")


# --- safety ----------------------------------------------------------------------------------------


def test_a_hostile_subject_is_shown_as_text_and_runs_nothing(page: Driver, web: WebServer) -> None:
    teamctl(web.repo, "task", "add", HOSTILE, "-d", HOSTILE_SCRIPT)
    teamctl(web.repo, "task", "add", HOSTILE_SCRIPT, "--blocked-by", "task_1")
    open_dashboard(page, web)

    wait_until(page, lambda: sorted(subjects(page)) == sorted([HOSTILE, HOSTILE_SCRIPT]), "cards")
    click(page, '.card[data-task="task_1"]')  # the detail shows both texts again
    wait_until(page, lambda: "task.created" in text(page, "#task-detail"), "the history")
    assert HOSTILE in text(page, "#task-detail") and HOSTILE_SCRIPT in text(page, "#task-detail")
    tab(page, "events")
    wait_until(page, lambda: HOSTILE in text(page, "#events-list"), "the event stream")

    # No element came from the text: no <img> at all, no inline <script>, nothing ran.
    assert page.execute_script("return document.querySelectorAll('img').length") == 0
    assert page.execute_script("return document.querySelectorAll('script:not([src])').length") == 0
    assert page.execute_script("return window.__pwned") is None
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        page.switch_to.alert.text  # noqa: B018 -- reading it is what raises
    assert "&lt;img src=x onerror=alert(1)&gt;" in page.page_source


def test_without_the_token_the_server_answers_401_and_the_page_shows_nothing(
    page: Driver, web: WebServer
) -> None:
    teamctl(web.repo, "task", "add", "Secret plan")

    def refused() -> None:
        page.get(web.base + "/")
        assert "Secret plan" not in page.page_source
        assert not css(page, "#board-columns")  # not even the empty page
        assert "HTTP ERROR 401" in page.find_element("tag name", "body").text  # Chromium's own

    refused()
    # The same browser with the tokened URL: the page loads and its requests succeed.
    open_dashboard(page, web)
    wait_until(page, lambda: subjects(page) == ["Secret plan"], "the task")
    assert fetch_status(page, "/api/state") == 200
    # Without the cookie the token set, the page's own requests are refused, then the page.
    page.delete_all_cookies()
    for path in ("/api/state", "/api/events", "/api/tasks/task_1", "/static/app.js", "/"):
        assert fetch_status(page, path) == 401, path
    refused()


# --- approving a plan in the page ----------------------------------------------------------------


def _plan_team(tmp_path: Path) -> tuple[Path, Path, str]:
    """The plan-approval scenario's repository and scripted model, with plans reviewed by a
    person (``approvals.plans: human``) instead of the lead. Returns repo, script, prompt."""
    scenario = yaml.safe_load((ROOT / "scenarios/plan-approval/scenario.yaml").read_text())
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "scenarios/plan-approval/repo", repo)
    for args in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "config", "user.email", "t@example.com"],
        ["git", "config", "user.name", "T"],
        ["git", "add", "-A"],
        ["git", "commit", "-q", "-m", "init"],
    ):
        subprocess.run(args, cwd=repo, check=True, capture_output=True)
    teamctl(repo, "init")
    settings_path = repo / ".team" / "settings.json"
    settings = json.loads(settings_path.read_text())
    settings.setdefault("approvals", {})["plans"] = "human"
    settings.setdefault("permissions", {})["defaultMode"] = "acceptEdits"
    settings_path.write_text(json.dumps(settings, indent=2))
    script = scenario["script"]
    lead = script["agents"]["lead"]
    lead["rules"] = [r for r in lead["rules"] if "review_plan" not in json.dumps(r)]
    script_path = tmp_path / "script.yaml"
    script_path.write_text(yaml.safe_dump(script), encoding="utf-8")
    return repo, script_path, str(scenario["prompt"])


def test_a_plan_approved_in_the_page_is_journaled_as_the_humans_and_the_teammate_goes_on(
    page: Driver, tmp_path: Path, start_web: Callable[..., WebServer]
) -> None:
    from selenium.webdriver.support.ui import Select

    repo, script, prompt = _plan_team(tmp_path)
    # `teamctl run` at a terminal (its console keeps the team running while a plan waits).
    master, slave = pty.openpty()
    env = cli_env() | {"TEAMCTL_SCRIPT": str(script)}
    log = (tmp_path / "run.log").open("w")
    run = subprocess.Popen(
        [TEAMCTL, "run", prompt],
        cwd=repo,
        env=env,
        stdin=slave,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    os.close(slave)
    try:
        submitted = wait_journal(repo, lambda es: any(e.type == "plan.submitted" for e in es), 60)
        assert submitted, (tmp_path / "run.log").read_text()
        server = start_web(repo)
        open_dashboard(page, server)

        # The plan waits on the board, with its text, for the person to decide.
        strip = "#approvals-strip .approval"
        wait_until(page, lambda: css(page, strip), "the plan waiting for a decision")
        assert "Plan v1: add netutil/retry.py" in text(page, strip)
        assert "@rae" in text(page, strip)
        assert text(page, "#approval-count") == "1"
        wait_until(
            page, lambda: "waiting for plan approval" in text(page, "#members-table"), "rae waits"
        )
        shoot(page, "board")
        tab(page, "members")
        shoot(page, "members")
        tab(page, "transcripts")
        Select(page.find_element("id", "transcript-agent")).select_by_value("rae")
        wait_until(page, lambda: "submit_plan" in text(page, "#transcript"), "rae's transcript")
        tab(page, "board")

        click(page, f"{strip} button.approve")

        # The teammate goes on: it implements the plan and completes the task, live.
        wait_until(
            page, lambda: css(page, '[data-column="completed"] .card[data-task="task_1"]'), "done"
        )
        assert not css(page, strip)
        assert text(page, "#approval-count") == ""
        assert wait_journal(repo, lambda es: any(e.type == "task.completed" for e in es), 60)
        tab(page, "transcripts")
        wait_until(page, lambda: "complete_task" in text(page, "#transcript"), "the transcript")
        shoot(page, "transcript")
        tab(page, "events")
        shoot(page, "events")
    finally:
        if run.poll() is None:
            os.write(master, b"/quit\r")
            try:
                run.wait(60)
            except subprocess.TimeoutExpired:
                run.kill()
                run.wait()
        os.close(master)
        log.close()

    events = journal(repo)
    (review,) = [e for e in events if e["type"] == "plan.reviewed"]
    assert review["data"]["approve"] is True
    assert review["data"]["reviewer"] == "user" and review["actor"] == "user"  # the human
    completed = [e for e in events if e["type"] == "task.completed"]
    assert [e["actor"] for e in completed] == ["rae"]
    assert review["seq"] < completed[0]["seq"]
    assert "def retry(" in (repo / "netutil" / "retry.py").read_text()
    tasks = teamctl(repo, "tasks", "--json")
    assert '"completed"' in tasks.stdout


# --- members, work, hostile text everywhere ---------------------------------------------------------


def table_rows(driver: Driver, selector: str) -> dict[str, list[str]]:
    """The body rows of a table, by their first cell's text, as their cells' text."""
    rows = driver.execute_script(
        "return [...document.querySelectorAll(arguments[0] + ' tbody tr')]"
        ".map(tr => [...tr.cells].map(td => td.textContent))",
        selector,
    )
    return {row[0]: row for row in rows}


def no_injection(driver: Driver) -> None:
    """Nothing agent-written became an element or ran."""
    from selenium.common.exceptions import NoAlertPresentException

    assert driver.execute_script("return document.querySelectorAll('img, b img').length") == 0
    assert (
        driver.execute_script("return document.querySelectorAll('script:not([src])').length") == 0
    )
    assert driver.execute_script("return window.__pwned") is None
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018 -- reading it is what raises


def test_members_worktrees_cron_workflows_jobs_transcripts_and_approvals_are_shown_as_text(
    page: Driver, tmp_path: Path, start_web: Callable[..., WebServer]
) -> None:
    from tests.web.busy_team import HOSTILE as BUSY_HOSTILE
    from tests.web.busy_team import build_busy_team

    busy = build_busy_team(tmp_path / "repo")
    server = start_web(busy.root)
    open_dashboard(page, server)

    tab(page, "members")
    wait_until(page, lambda: "ann" in table_rows(page, "#members-table"), "the members")
    rows = table_rows(page, "#members-table")
    # No runtime hosts these agents here, so the active ones are also marked gone.
    assert rows["ann"] == [
        "ann",
        "ann-role",
        "working (gone)",
        "task_1 build the parser",
        "w1",
        "2",
        "1234",
        "$0.0123",
    ]
    assert rows["bob"][2] == "waiting for permission (gone)"
    assert rows["cy"][2] == "stalled (gone) why cy"
    assert rows["dee"][2] == "stopped done"
    assert rows["eve"][2] == "idle (gone)"
    assert rows["max"][2] == "active"

    tab(page, "work")
    wait_until(page, lambda: "w1" in table_rows(page, "#worktrees-table"), "the worktrees")
    trees = table_rows(page, "#worktrees-table")
    assert trees["w1"][1:] == ["wt/w1", "task_1 in_progress @ann", "+2 / -1", "no"]
    assert trees["w2"][3:] == ["+0 / -1", "merged"]  # main gained a commit since
    [cron] = table_rows(page, "#crons-table").values()
    assert cron[:4] == ["cron_1", "*/15 * * * *", "lead", f"check CI {BUSY_HOSTILE}"]
    flows = text(page, "#workflows-list")
    assert "release" in flows and "phase: build" in flows and "done 1" in flows
    assert "workflow wf_1 step compile: done" in flows
    assert f"workflow wf_1 log: note {BUSY_HOSTILE}" in flows
    click(page, "#jobs-table button")
    wait_until(page, lambda: busy.job_log.strip() in text(page, "#job-output"), "the job output")
    shoot(page, "work")

    tab(page, "approvals")
    wait_until(page, lambda: css(page, '#approvals-list [data-request="perm-1"]'), "perm-1")
    request = text(page, '#approvals-list [data-request="perm-1"]')
    assert f"rm -rf {BUSY_HOSTILE}" in request and f"why {BUSY_HOSTILE}" in request

    tab(page, "transcripts")
    from selenium.webdriver.support.ui import Select

    Select(page.find_element("id", "transcript-agent")).select_by_value("ann")
    wait_until(page, lambda: "← bash" in text(page, "#transcript"), "ann's transcript")
    shown = text(page, "#transcript")
    for part in (
        f"message from lead: {BUSY_HOSTILE}",
        f"reading {BUSY_HOSTILE}",
        f"cat {BUSY_HOSTILE}",
        f"result <b>{BUSY_HOSTILE}</b>",
    ):
        assert part in shown.replace('\\"', '"'), part
    assert not css(page, "#transcript b b")  # the tool output's <b> is text, not an element
    no_injection(page)


def test_an_open_task_detail_is_read_again_only_when_its_task_changes(
    page: Driver, web: WebServer
) -> None:
    teamctl(web.repo, "task", "add", "Watched", "-d", "first")
    open_dashboard(page, web)
    click(page, '.card[data-task="task_1"]')
    wait_until(page, lambda: "first" in text(page, "#task-detail"), "the detail")
    page.execute_script(
        "window.__details = 0; const real = window.fetch;"
        "window.fetch = (url, opts) => {"
        "  if (String(url).startsWith('/api/tasks/')) window.__details += 1;"
        "  return real(url, opts); };"
    )
    teamctl(web.repo, "task", "add", "Unrelated")
    wait_until(page, lambda: "Unrelated" in subjects(page), "the other task, live")
    seq = json.loads(teamctl(web.repo, "events", "--json").stdout.splitlines()[-1])["seq"]
    wait_until(page, lambda: text(page, "#seq") == f"journal seq {seq}", "the state drawn")
    assert page.execute_script("return window.__details") == 0

    teamctl(web.repo, "task", "edit", "task_1", "--description", "second")
    wait_until(page, lambda: "second" in text(page, "#task-detail"), "the detail, live")
    assert page.execute_script("return window.__details") >= 1
