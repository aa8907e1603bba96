"""The feed stack of a design of its own (``python -m examples.stacks.feed --design fanout-worker``): fan-out on
write by a worker process beside gunicorn, which also applies deletes and unfollows after they answer, a follow
that brings nothing, the reader's own posts in their home timeline. It differs from the seed by choice, and the
harness's design statements (peakproof/cases/feed/case.py DESIGN) say so:

1. stated, it PASSes ``peakproof run`` (the URL properties, then a short load);
2. unstated, every check it FAILs names the statement that would explain it;
3. with its defect (``--defect delete-lost-to-fanout``: the worker writes a post deleted right after it was
   published back into its followers' timelines), unstated, both stages FAIL ``deleted_posts_never_shown``.

One stack of each (module scope); a stack that cannot start fails the tests, never skips them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterator

import pytest

from examples.stacks.feed.fanout_worker import POLL
from peakproof.cases import get_case
from peakproof.cases.feed.case import DESIGN
from peakproof.cases.feed.workload import LOOKS_AFTER_DELETE, FeedWorkload
from tests.support.runs import (ROOT, misses_naming_no_statement, peakproof, skip_when_a_neighbour_left_it_undecided,
                                started, verdict_of)

# the variant's own processes: named as a neighbour, discovery missed a part of the target
COMPONENTS = ("gunicorn", "postgres", "fanout_worker")
DRIVER = "examples/stacks/feed/driver.py:ActivityFeed"
RULES = ["--without", "inbox_size", "--time-precision", "0.001"]  # the stack's own (its README), both designs
# a job waits one poll at most, then its batch runs (a few ms idle; measured 95-126 ms from the answer to the
# timeline changing): three polls bound it, with room for the load's CPU
LAG = f"{round(3 * POLL, 3):g}"
DESIGN_STATED = ["--unfollow-lag", LAG, "--delete-lag", LAG, "--fanout-lag", LAG, "--follow-brings", "nothing",
                 "--own-posts"]
LOAD = ["--scale", "0.001", "--duration", "10", "--calibrated-rate", "1000"]  # as tests/stacks/test_feed_stack.py
REPORTS = str(ROOT / "reports" / "stacks")
CHECK = "deleted_posts_never_shown"


@pytest.fixture(scope="module")
def worker_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("feed-fanout-worker")
    with started("-m", "examples.stacks.feed", "--design", "fanout-worker", "--folder", str(folder)) as url:
        yield url


@pytest.fixture(scope="module")
def defect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("feed-fanout-worker-defect")
    with started("-m", "examples.stacks.feed", "--design", "fanout-worker", "--defect", "delete-lost-to-fanout",
                 "--folder", str(folder)) as url:
        yield url


def failed_checks(verdict: str) -> dict[str, str]:
    """Each check the verdict names FAILed, to its words: from its ``name: FAIL (`` up to the next check's, or
    to the stage's own line (a property's checks, each judged on its own, follow one another so)."""
    out: dict[str, str] = {}
    body = verdict.partition("\n")[2]  # not the verdict's own first line ("for feed: FAIL (35 s; ...")
    for part in re.split(r"(?=\b\w+: FAIL \()|(?=\n  \[)", body):
        found = re.match(r"(\w+): FAIL \(", part)
        if found:
            out.setdefault(found.group(1), part)
    return out


# the URL properties wait out each stated lag before they look (two waits an example at least): about 3 min of
# real time, mostly waiting, so beside the tier's other long runs (early), not alone; past the suite's 300 s default
@pytest.mark.early(80)
@pytest.mark.timeout(600)
def test_with_its_design_stated_the_fanout_worker_passes_the_url_properties(worker_url: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "dev")  # the properties' budget over a URL, as test_feed_stack's
    out = peakproof("run", "feed", "--driver", DRIVER, "--target-url", worker_url, *RULES, *DESIGN_STATED,
                    "--skip-load", "--replay-seconds", "60", "--report-dir", REPORTS)
    verdict = verdict_of(out)
    assert out.returncode == 0 and "peakproof verdict for feed: PASS" in verdict, verdict
    assert "[ok] properties (Hypothesis)" in verdict, verdict
    # judged, not left out: a statement changes what a read must show, it waives no check
    for check in (CHECK, "unfollowed_authors_never_shown", "feed_matches_pull_model", "pages_do_not_skip_or_repeat"):
        assert re.search(rf"\b{check} \d", verdict), (check, verdict)  # among the properties' chances
    assert f"stated: --delete-lag {LAG}" in verdict and "stated: --follow-brings nothing" in verdict, verdict
    assert "witness of" not in out.stdout, verdict  # a PASS sends none


# The worker's lag grows with its load: a poll (0.1 s) at the properties' pace, past the 0.6 s window of the peak
# compressed 100x (a post 0.7 s late, an unfollow applied after the unfollower looked) and 1.3 s at 50x, its first
# fan-outs after the bulk graph the latest. Its team states the lag at its peak, 1 s, and the peak runs at 20x
# (the seed's 60 s window: 3 s) for 30 s, so every check has reads to judge (at 20x for 20 s an unfollow had 1).
LOAD_DESIGN = ["--unfollow-lag", "1", "--delete-lag", "1", "--fanout-lag", "1", "--follow-brings", "nothing",
               "--own-posts"]
LOAD_AT_ITS_PACE = ["--scale", "0.001", "--duration", "30", "--time-scale", "20", "--calibrated-rate", "1000"]


@pytest.mark.alone  # a load that must PASS: its latency and pace read the machine (tests/conftest.py)
@pytest.mark.decides
def test_with_its_design_stated_the_fanout_worker_passes_a_short_load(worker_url: str, tmp_path: Path) -> None:
    out = peakproof("run", "feed", "--driver", DRIVER, "--target-url", worker_url, *RULES, *LOAD_DESIGN,
                    *LOAD_AT_ITS_PACE, "--skip-properties", "--report-dir", REPORTS, "--junit", str(tmp_path / "verdict.xml"),
                    "--replay-seconds", "60")
    verdict = verdict_of(out)
    skip_when_a_neighbour_left_it_undecided(out, COMPONENTS)  # a busy machine: the neighbour named, nothing FAILed
    assert out.returncode == 0 and "peakproof verdict for feed: PASS" in verdict, verdict
    assert "[ok] load scenario feed-peak" in verdict, verdict
    for check in (CHECK, "unfollowed_authors_never_shown", "feed_matches_pull_model", "pages_do_not_skip_or_repeat"):
        assert f"[ok] {check}:" in verdict, (check, verdict)
    assert "fanout_worker" in verdict, verdict  # the worker is the target's: its CPU counted as the target's
    assert "witness of" not in out.stdout, verdict  # a PASS sends none


def test_driver_check_says_which_promise_the_design_does_not_keep_here_and_stated_waits_it_out(worker_url: str) -> None:
    """Every call answers as the contract allows; unstated, a read a poll after the unfollow still shows the author:
    a promise this design does not keep, which a statement explains (not "fix those before a real run"); stated,
    the check waits the lag out and holds."""
    check = peakproof("driver", "check", "feed", "--driver", DRIVER, "--target-url", worker_url, *RULES, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "your service does not keep " in check.stdout and "otherwise this is a finding" in check.stdout, check.stdout
    assert "state --unfollow-lag" in check.stdout or "state --fanout-lag" in check.stdout, check.stdout
    check = peakproof("driver", "check", "feed", "--driver", DRIVER, "--target-url", worker_url, *RULES,
                      *DESIGN_STATED, timeout=120)
    assert check.returncode == 0 and "[NO ]" not in check.stdout, check.stdout + check.stderr
    assert f"design stated: --unfollow-lag {LAG}" in check.stdout, check.stdout


def test_unstated_every_check_the_fanout_worker_fails_names_the_statement_that_explains_it(worker_url: str) -> None:
    # the properties alone: the load adds nothing to what is asked here (each FAIL's words), and costs a minute
    out = peakproof("run", "feed", "--driver", DRIVER, "--target-url", worker_url, *RULES, "--skip-load",
                    "--replay-seconds", "0", "--report-dir", REPORTS)
    verdict = verdict_of(out)
    failed = failed_checks(verdict)
    assert out.returncode == 1 and "peakproof verdict for feed: FAIL" in verdict, verdict
    assert failed, verdict
    for check, words in failed.items():
        explaining = [s.flag for s in DESIGN if check in s.explains + s.leaves_out]
        assert explaining, f"{check} FAILed, and no statement explains it: a finding on a correct stack\n{verdict}"
        assert "otherwise this is a finding" in words and any(f"state {flag}" in words for flag in explaining), \
            f"{check}'s FAIL names none of {explaining}:\n{words}"
    print(f"\nunstated, FAILed with their hints: {', '.join(sorted(failed))}; a deleted post shown at most "
          + ", ".join(re.findall(r"longest_shown_after_delete_s ([\d.]+)", verdict)) + " s after its delete")


# The load aims at the race: each process deletes its first posts with a follower right after their publish (a
# delete must reach the worker within one poll of the publish), and a follower looks three G2 windows on. Alone it
# FAILed 3 runs of 3 here, a deleted post shown 8.5 to 9.9 s after its delete; beside the tier's other runs (68% of
# the machine taken) the load met no young delete in CI (90 chances, 0 violations). Opt-in until the aim holds on a
# busy host (issue 62's interleavings: deletes at growing delays after the publish).
@pytest.mark.skipif(os.environ.get("PEAKPROOF_HELD_OUT") != "1",
                    reason="[opt-in] a race on a worker's poll, missed beside a busy CI tier: PEAKPROOF_HELD_OUT=1 runs it")
def test_its_defect_fails_deleted_posts_never_shown_in_both_stages_with_a_witness(defect_url: str,
                                                                                  tmp_path: Path) -> None:
    """Unstated, as a team would first run it. The properties delete a post right after publishing it and look
    once the fan-out had time; the load deletes posts its followers keep reading."""
    out = peakproof("run", "feed", "--driver", DRIVER, "--target-url", defect_url, *RULES, *LOAD,
                    "--report-dir", REPORTS, "--junit", str(tmp_path / "verdict.xml"), "--replay-seconds", "20")
    verdict = verdict_of(out)
    assert out.returncode == 1 and "peakproof verdict for feed: FAIL" in verdict, verdict
    properties, _, load = verdict.partition("[FAIL] load scenario feed-peak")
    assert load, verdict  # the load ran and FAILed
    assert CHECK in failed_checks(properties), properties  # the properties' stage names it, as a FAIL...
    assert re.search(rf"witness of {CHECK} on reader '[^']+'", properties), properties  # ...with its witness
    assert f"[FAIL] {CHECK}: Actual" in load, load  # and the load's stage
    # Unstated, the correct worker FAILs this check too: its delete lands a poll later (test 2), over a second at
    # its worst under load. What tells the lost delete from the lag is how long a deleted post stays: the load
    # deletes half its posts right after their publish and a follower looks one and three G2 windows on (1.8 s at
    # the default time scale); a lost delete still shows at the last look, and the verdict says how long
    window = FeedWorkload(0.001, time_scale=get_case("feed").default_time_scale).window
    longest = [float(x) for x in re.findall(r"longest_shown_after_delete_s ([\d.]+)", load)]
    assert longest and max(longest) >= max(LOOKS_AFTER_DELETE) * window - 0.05, (window, load)  # 2 decimals
    # the design's differences beside it, unstated: every other check it FAILed names the statement that explains
    # it (on the correct worker, unstated, the same: measured by hand, examples/stacks/feed/README.md)
    for check, words in failed_checks(verdict).items():
        if check == CHECK:
            continue
        explaining = [s.flag for s in DESIGN if check in s.explains + s.leaves_out]
        assert explaining and "otherwise this is a finding" in words and any(f"state {flag}" in words
                                                                            for flag in explaining), (check, words)
    # the load's: "[FAIL] name: Actual ...", its note a line or two below
    assert not misses_naming_no_statement(load, DESIGN, CHECK), (misses_naming_no_statement(load, DESIGN, CHECK), load)
    print(f"\na deleted post shown {max(longest):.2f} s after its delete in the load")
