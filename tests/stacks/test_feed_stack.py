"""The feed's real stack (``examples/stacks/feed``): Django 5.2 + django-activity-stream on PostgreSQL,
served by gunicorn workers, with an API of its own, driven through ``examples/stacks/feed/driver.py``.

Every entry point a team would use, on the correct stack: ``peakproof driver check``, the properties
by ``pytest --pyargs`` and ``peakproof run`` (properties and a short load); Locust's own ``locust -f
"$(peakproof locustfile)"`` with a driver is the tickets stack's test (and every example's, tests/e2e). Then the stack with its defect (``--defect page-numbers``:
Django's ``Paginator`` with ``?page=N``), which must FAIL ``pages_do_not_skip_or_repeat``, through
``peakproof run`` and through the properties alone.

The stack states two rules, as its README says: it merges on read (``--without inbox_size``) and
answers times in Django's JSON, cut to milliseconds, while the stream orders by microseconds
(``--time-precision 0.001``). One stack of each variant per module; a stack that cannot start fails
the tests that need it, never skips them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.runs import ROOT, peakproof, started, skip_when_a_neighbour_left_it_undecided, verdict_of



# the feed's own processes: named as a neighbour, discovery missed a part of the target
COMPONENTS = ("gunicorn", "postgres")
DRIVER = "examples/stacks/feed/driver.py:ActivityFeed"
RULES = ["--without", "inbox_size", "--time-precision", "0.001"]
# 1,000 users (111,090 follows, loaded in bulk), the seed's peak mix at time scale 100: 28 arrivals/s
LOAD = ["--scale", "0.001", "--duration", "10", "--calibrated-rate", "1000"]
REPORTS = str(ROOT / "reports" / "stacks")
CHECK = "pages_do_not_skip_or_repeat"


@pytest.fixture(scope="module")
def feed_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The correct stack: PostgreSQL, migrate, gunicorn (its logs in the folder)."""
    folder = tmp_path_factory.mktemp("feed-stack")
    with started("-m", "examples.stacks.feed", "--folder", str(folder)) as url:
        yield url


@pytest.fixture(scope="module")
def defect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("feed-stack-page-numbers")
    with started("-m", "examples.stacks.feed", "--defect", "page-numbers", "--folder", str(folder)) as url:
        yield url


def properties(url: str, *extra: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The feed properties over the URL, as installed: ``pytest --pyargs peakproof.properties.test_feed``."""
    env = dict(os.environ, HYPOTHESIS_PROFILE="dev")  # the properties' budget over a URL: real time
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pyargs",
                           "peakproof.properties.test_feed", "--target-url", url, "--driver", DRIVER, *RULES, *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


# -- the correct stack -----------------------------------------------------------------------------------

def test_the_driver_answers_every_call_as_the_harness_needs(feed_url: str) -> None:
    out = peakproof("driver", "check", "feed", "--driver", DRIVER, "--target-url", feed_url, *RULES, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "every call answered as the harness needs" in out.stdout, out.stdout
    assert "[NO ]" not in out.stdout, out.stdout
    assert "capability bulk_graph: offered" in out.stdout, out.stdout
    assert "rule: time precision (s): 0.001" in out.stdout, out.stdout


def test_the_properties_pass_over_the_url(feed_url: str) -> None:
    out = properties(feed_url)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-4000:]
    assert "1 passed" in out.stdout and "failed" not in out.stdout, text[-4000:]
    assert "feed: time precision (s): 0.001" in out.stdout, text[-4000:]
    assert f"  {CHECK}: " in out.stdout, text[-4000:]  # it had chances (a page turn), not left undecided


# the load stage only: the properties (real-time waits, 35 s of a machine otherwise idle while a test runs alone)
# pass over the URL above, and peakproof run's properties stage meets this stack in the defect's test below
@pytest.mark.alone  # a load that must PASS: its latency and pace read the machine (tests/conftest.py)
@pytest.mark.decides
def test_peakproof_run_passes_a_short_load(feed_url: str, tmp_path: Path) -> None:
    out = peakproof("run", "feed", "--driver", DRIVER, "--target-url", feed_url, *RULES, *LOAD, "--skip-properties",
                    "--report-dir", REPORTS, "--junit", str(tmp_path / "verdict.xml"), "--replay-seconds", "60")
    verdict = verdict_of(out)
    skip_when_a_neighbour_left_it_undecided(out, COMPONENTS)  # a busy machine: the neighbour named, nothing FAILed
    assert out.returncode == 0, verdict
    assert "peakproof verdict for feed: PASS" in verdict, verdict
    assert "[ok] load scenario feed-peak" in verdict, verdict
    assert f"[ok] {CHECK}:" in verdict and "[ok] feed_matches_pull_model:" in verdict, verdict
    assert "rule: time precision (s): 0.001" in verdict and "waived: inbox_size" in verdict, verdict
    assert "witness of" not in out.stdout and "replaying the witness" not in out.stdout, verdict  # a PASS sends none


# -- the defect: page numbers ----------------------------------------------------------------------------

@pytest.mark.early(205)  # one run of both stages, 140 to 210 s: begun with the tier's other long runs
def test_peakproof_run_fails_the_page_numbers_defect_naming_the_check_with_a_sequential_witness_and_its_curl_lines(
        defect_url: str, tmp_path: Path) -> None:
    """Both stages run: the properties turn pages between writes, and the load's heavy reader pages deep
    while its followees' posts are deleted; either catching it is a FAIL naming the check. The properties'
    witness, a post published between two pages, needs no concurrency (one request after the other, the same
    every time), and its curl lines replay it by hand. (One run: the properties alone, a second run of the same
    stage, cost 119 s of the tier.)"""
    out = peakproof("run", "feed", "--driver", DRIVER, "--target-url", defect_url, *RULES, *LOAD,
                    "--replay-seconds", "60", "--report-dir", str(tmp_path), "--junit", str(tmp_path / "verdict.xml"))
    verdict = verdict_of(out)
    assert out.returncode == 1, verdict
    assert "peakproof verdict for feed: FAIL" in verdict, verdict
    assert f"{CHECK}: FAIL" in verdict, verdict  # the properties' stage
    text = out.stdout + out.stderr
    found = re.search(rf"witness of {CHECK} on reader '[^']+' and the \d+ author\(s\) they follow: (\d+) operations "
                      rf"\(sequential; (\d+) in the window as found; [^\n]*reproduced 10 of 10 tries", text)
    assert found, text[-4000:]
    lines = text[found.start():].splitlines()
    curl = [line.strip() for line in lines if line.strip().startswith("curl ")]
    assert any("page=" in c or "cursor=" in c for c in curl) and any("-X POST" in c for c in curl), "\n".join(lines[:30])
    assert list(tmp_path.glob(f"*{CHECK}.replay.py")), list(tmp_path.iterdir())
    page = next(tmp_path.glob("properties-feed-*.html"))  # and in a report of its own, beside the loads'
    assert "Reproductions" in page.read_text() and f"witness of {CHECK}" in page.read_text()
    print(f"\nwitness of {CHECK}: {found.group(2)} operations as found -> {found.group(1)}, sequential, "
          f"{len(curl)} curl lines")
