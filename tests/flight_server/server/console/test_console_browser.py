"""The web console in a real browser: Debian's Chromium, headless, driven by Playwright (one browser
for the module). Every page loads as a user would see it (basic credentials asked by the
browser's challenge), shows the library's numbers for Spark-written tables (rows, file groups,
sizes, instants, health), draws the timeline over time, shows the live queries, and refuses a
user without a grant exactly as a missing table. ``HUDI_FLIGHT_SCREENSHOTS=DIR`` keeps a
screenshot of every page visited."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

import pyarrow.flight as flight
import pytest

from catalog import HudiTable
from tests.flight_server.server.console.conftest import ALICE, BOB, PASSWORD, SCRATCH
from tests.support.auth import ADMIN, ADMIN_PASSWORD, user_client

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHOTS = os.environ.get("HUDI_FLIGHT_SCREENSHOTS")


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: make system-deps installs Debian's chromium")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def visit(browser, console):
    """``visit(path, user)`` -> (the page, its response status), in a context logged in as ``user``."""
    contexts = {}

    def _visit(path: str, user: str = ADMIN):
        if user not in contexts:
            credentials = {"username": user, "password": ADMIN_PASSWORD if user == ADMIN else PASSWORD}
            contexts[user] = browser.new_context(base_url=console.url, http_credentials=credentials,
                                                 viewport={"width": 1100, "height": 900}).new_page()
        page = contexts[user]
        response = page.goto(path)
        if SHOTS:
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            name = f"{user}{path.replace('/', '_')}.png"
            page.screenshot(path=str(Path(SHOTS) / name), full_page=True)
        return page, response.status

    yield _visit
    for page in contexts.values():
        page.context.close()


def _value(page, selector: str) -> int:
    return int(page.locator(selector).get_attribute("data-value"))


def _column(page, table: str, index: int) -> list[str]:
    return [t.strip() for t in page.locator(f"{table} tbody tr td:nth-child({index})").all_inner_texts()]


def test_namespaces_show_what_the_user_may_read(visit):
    page, status = visit("/", ALICE)
    assert status == 200 and page.locator("#user").inner_text() == ALICE
    assert _column(page, "#namespaces", 1) == ["big", "sales"]
    assert _column(page, "#namespaces", 2) == ["1", "3"]
    page.click("text=sales")
    assert _column(page, "#tables", 1) == ["logs", "mtxns", "txns"]
    page, _ = visit("/", ADMIN)
    assert {"big", "hudi", "sales"} <= set(_column(page, "#namespaces", 1))  # and tests' scratch tables


@pytest.mark.parametrize("identifier", ["sales.txns", "sales.mtxns", "sales.logs"])
def test_a_tables_page_has_the_librarys_numbers(visit, console, identifier):
    library = HudiTable.open(console.paths[identifier])
    ns, name = identifier.split(".")
    page, status = visit(f"/tables/{ns}/{name}", ALICE)
    assert status == 200 and page.locator("#table-name").inner_text() == identifier
    groups = library.metadata_table("file_groups").to_pylist()
    if any(g["log_files"] for g in groups):  # logs to merge: the base files' rows, and the logs, never a guess
        assert page.locator("#rows").count() == 0
        assert _value(page, "#base-rows") == library.read(query_type="read_optimized").num_rows
        assert _value(page, "#log-files") == sum(g["log_files"] for g in groups)
    else:
        assert _value(page, "#rows") == library.read().num_rows
    assert _value(page, "#file-groups") == len(groups)
    assert _value(page, "#partitions") == len({g["partition"] for g in groups})
    assert _value(page, "#bytes") == sum((g["base_file_size"] or 0) + g["log_bytes"] for g in groups)
    assert _value(page, "#instants") == library.metadata_table("timeline").num_rows
    assert page.locator("#table-type").inner_text() == library.table_type
    assert _column(page, "#schema", 2) == library.schema.names
    assert _column(page, "#schema", 3) == [str(f.type) for f in library.schema]


@pytest.mark.parametrize(("identifier", "lanes"), [
    ("hudi.compaction", {"deltacommit": "deltacommit", "commit": "compaction"}),
    ("hudi.clustering", {"commit": "commit", "replacecommit": "clustering"}),
    ("hudi.rollback", {"deltacommit": "deltacommit", "rollback": "rollback"}),
    ("hudi.cleaned", {"commit": "commit", "clean": "clean"}),
    ("hudi.restored", {"commit": "commit", "savepoint": "savepoint", "restore": "restore"}),
])
def test_the_timeline_is_drawn_over_time(visit, console, identifier, lanes):
    """Every instant is a mark in its action's lane, in time order, with its times; a
    merge-on-read table's commits are its compactions, a clustering is a replacecommit."""
    timeline = HudiTable.open(console.paths[identifier]).metadata_table("timeline").to_pylist()
    ns, name = identifier.split(".")
    page, status = visit(f"/tables/{ns}/{name}/timeline", BOB)
    assert status == 200
    assert _column(page, "#instants", 1) == [r["timestamp"] for r in reversed(timeline)]
    assert _column(page, "#instants", 2) == [r["action"] for r in reversed(timeline)]
    expected = Counter(lanes[r["action"]] for r in timeline)
    legend = {e.get_attribute("data-lane"): int(e.get_attribute("data-count"))
              for e in page.locator("figcaption .legend").all()}
    assert legend == expected
    marks = page.locator("#timeline-chart g.mark")
    assert marks.count() == len(timeline)
    titles = [t.strip() for t in page.locator("#timeline-chart g.mark title").all_text_contents()]
    assert [title.split(": ")[0].rsplit(" ", 1)[1] for title in titles] == [r["timestamp"] for r in timeline]
    assert all(f"completed {r['completion_time']}" in t for r, t in zip(timeline, titles))
    xs = [float(c.get_attribute("cx")) for c in page.locator("#timeline-chart g.mark circle").all()]
    assert xs == sorted(xs) and xs[0] < xs[-1]
    for lane, count in expected.items():  # each lane drawn in its own colour class
        assert page.locator(f"#timeline-chart g.mark.lane-{lane}").count() == count
    assert page.locator("#timeline-chart .tick-label").count() >= 2


def test_file_group_and_partition_sizes(visit, console):
    library = HudiTable.open(console.paths["sales.mtxns"])
    groups = library.metadata_table("file_groups").to_pylist()
    partitions = library.metadata_table("partitions").to_pylist()
    page, status = visit("/tables/sales/mtxns/files", ALICE)
    assert status == 200
    assert _value(page, "#file-groups") == len(groups)
    assert _value(page, "#bytes") == sum((g["base_file_size"] or 0) + g["log_bytes"] for g in groups)
    counts = [int(b.get_attribute("data-count")) for b in page.locator("#group-sizes g.bar").all()]
    assert sum(counts) == len(groups)
    shown = {}
    for row in page.locator("#partitions tbody tr").all():
        cells = row.locator("td")
        shown[cells.nth(0).inner_text()] = (int(cells.nth(1).inner_text()),
                                            int(cells.nth(4).locator("[data-value]").get_attribute("data-value")))
    assert shown == {p["partition"]: (p["file_groups"], p["bytes"]) for p in partitions}
    assert page.locator("#partition-sizes g.hbar").count() == len(partitions)


def test_health_shows_what_to_do(visit, console, tmp_path):
    """A table with an orphaned file: its WARN row says what fixes it; the other rows are the
    library's checks."""
    table = tmp_path / "orphaned"
    shutil.copytree(console.paths["sales.txns"], table)
    region = table / "region=us"
    base = sorted(p for p in region.iterdir() if p.suffix == ".parquet")[0]
    shutil.copy(base, region / f"{base.name.split('_')[0]}_0-0-0_20300101000000001.parquet")
    console.server.app.registry.register_table(f"{SCRATCH}.orphaned", str(table))
    console.server.app.queries.forget()
    library = HudiTable.open(str(table)).metadata_table("health").to_pylist()
    page, status = visit(f"/tables/{SCRATCH}/orphaned/health", ADMIN)
    assert status == 200
    rows = page.locator("#checks tbody tr").all()
    shown = [(r.get_attribute("data-check"), r.get_attribute("data-status"), r.get_attribute("data-value")) for r in rows]
    assert [s[:2] for s in shown] == [(c["check"], c["status"]) for c in library]
    assert [s[2] for s in shown[1:]] == ["" if c["value"] is None else str(c["value"]) for c in library[1:]]
    orphans = page.locator('#checks tr[data-check="orphaned_files"]')
    assert orphans.get_attribute("data-status") == "WARN"
    assert "HoodieRepairTool --mode dry_run" in orphans.locator(".remedy").inner_text()
    assert page.locator("#checks .remedy").count() == sum(c["status"] == "WARN" for c in library)
    assert "1 WARN" in page.locator("#health-summary").inner_text()


def test_live_queries_show_a_running_scan_with_its_cost(visit, console):
    """A scan whose client reads its first batch and waits: the admin sees it with rows and bytes
    so far; alice sees only her own calls (none), then hers."""
    admin = user_client(console.server.port, ADMIN, ADMIN_PASSWORD)
    alice = user_client(console.server.port, ALICE, PASSWORD)
    try:
        info = admin.get_flight_info(flight.FlightDescriptor.for_path("big", "trips"))
        reader = admin.do_get(info.endpoints[0].ticket)
        first = reader.read_chunk().data
        page, status = visit("/queries", ADMIN)
        assert status == 200
        scans = [c for c in page.locator("#calls tbody tr").all() if c.get_attribute("data-kind") == "scan"]
        assert len(scans) == 1
        cells = scans[0].locator("td")
        assert [cells.nth(i).inner_text() for i in (0, 1, 2)] == [ADMIN, "scan", "big.trips"]
        assert int(cells.nth(5).get_attribute("data-value")) >= first.num_rows > 0
        assert int(cells.nth(6).get_attribute("data-value")) >= first.nbytes > 0
        page, _ = visit("/queries", ALICE)
        assert page.locator("#calls tbody tr.call").count() == 0  # not hers
        mine = alice.do_get(alice.get_flight_info(flight.FlightDescriptor.for_path("big", "trips")).endpoints[0].ticket)
        mine.read_chunk()
        page, _ = visit("/queries", ALICE)
        assert [(c.locator("td").nth(0).inner_text(), c.get_attribute("data-kind"))
                for c in page.locator("#calls tbody tr.call").all()] == [(ALICE, "scan")]
        mine.cancel()
        reader.cancel()
    finally:
        admin.close()
        alice.close()


def test_a_user_without_a_grant_is_refused(visit):
    page, status = visit("/tables/sales/txns", BOB)
    assert status == 404
    message = page.locator("#message").inner_text()
    missing, _ = visit("/tables/sales/missing", BOB)
    assert message == missing.locator("#message").inner_text().replace("missing", "txns")
    page, _ = visit("/", BOB)
    assert _column(page, "#namespaces", 1) == ["hudi"]
    _, status = visit("/tables/hudi/compaction/health", ALICE)
    assert status == 404
    anonymous = page.context.browser.new_context(base_url=page.url)  # no credentials
    response = anonymous.request.get("/")
    assert response.status == 401 and response.headers["www-authenticate"].startswith("Basic")
    anonymous.close()
