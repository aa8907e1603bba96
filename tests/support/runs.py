"""Running the harness and services as a user does, for the tests of every tier: a process that says where it
listens (``started``), the provider simulator (``providers``), an example service (``service``),
``python -m peakproof`` (``peakproof``, a run undecided by a neighbour run again: ``decided``), and the verdict's
lines read back (``verdict_of``, ``locust_verdict``); a test a neighbour left undecided skips, saying so
(``skip_when_a_neighbour_left_it_undecided``); the properties and a load
against a URL (``properties_against``, ``load_against``), a run's result and the excerpt a failure shows."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Sequence

from tests.support.locust_run import run_locust
from tests.support.skips import skip

ROOT = Path(__file__).resolve().parents[2]
BACKOFF = "1.25"  # the Courier's rounds, stated to the harness as a user states theirs


@contextmanager
def started(*argv: str) -> Iterator[str]:
    """A process that prints ``listening on URL`` once it serves; its URL, then it is stopped."""
    proc = subprocess.Popen([sys.executable, *argv], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        deadline = time.monotonic() + 30
        line = ""
        while time.monotonic() < deadline:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            if "listening on" in line or "serving providers" in line or not line:
                break
        assert "listening on" in line or "serving" in line, f"{argv} did not start: {line!r}"
        yield line.split()[-1].strip() if "listening on" in line else ""
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextmanager
def providers(*flags: str) -> Iterator[str]:
    """``peakproof serve providers`` on a free port (``flags``: its options, e.g. ``--latency``); its URL."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = ROOT / ".peakproof" / f"providers-{port}.sqlite3"
    proc = subprocess.Popen([sys.executable, "-m", "peakproof", "serve", "providers", "--port", str(port),
                             "--db", str(db), *flags], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        import requests

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                requests.get(f"{url}/calls", timeout=1)
                break
            except requests.RequestException:
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@contextmanager
def service(case: str, *flags: str) -> Iterator[tuple[str, list[str]]]:
    """The example service of ``case`` (``flags``: its broken variant), and the options that reach it."""
    if case == "notifications":
        with providers() as prov, started(f"examples/{case}/service.py", "--port", "0", "--providers", prov,
                                          "--backoff", BACKOFF, *flags) as url:
            yield url, ["--provider-url", prov, "--backoff", BACKOFF, "--breaker-cool-down", "10"]
        return
    extra = ["--api-key", "key"] if case == "tickets" else []
    with started(f"examples/{case}/service.py", "--port", "0", *extra, *flags) as url:
        yield url, (["--admin-token", "key"] if case == "tickets" else [])


def peakproof(*args: str, timeout: float = 420, again: bool = True) -> subprocess.CompletedProcess[str]:
    """``python -m peakproof ARGS``; a ``run`` not decided because this machine's CPU was taken (the suite's
    other tests are its neighbours) is run again, as its verdict advises (:func:`decided`), unless ``again``
    is False (a test whose neighbour is its own)."""
    env = dict(os.environ, HYPOTHESIS_PROFILE="dev")  # the properties' budget over a URL: real time

    def once() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "peakproof", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=timeout, env=env)

    return decided(once) if again and args[:1] == ("run",) else once()


# the harness's own words for "not decided: this machine's CPU was taken" (peakproof/tenants.py)
CONTENTION = ("a neighbour took CPU the run needed", "the harness took CPU the target needed")


def misses_naming_no_statement(verdict: str, statements: Iterable[Any], *defects: str) -> list[str]:
    """The check lines of a verdict that did not pass (``[FAIL] name:`` or ``[??] name:``), the ``defects``' aside,
    whose words (the line and the two after) name no statement to make (``state --``): a product's design left
    unstated must say so on every miss it explains. A check no statement concerns (the offered load, a latency)
    may be left undecided by a busy host (its note names the neighbour), never FAILed without one."""
    concerned = {check for s in statements for check in (*s.explains, *s.leaves_out)}
    lines = verdict.splitlines()
    out = []
    for i, line in enumerate(lines):
        found = re.match(r"\s*\[(FAIL|\?\?)\] (\w+):", line)
        if not found or found.group(2) in defects or (found.group(1) == "??" and found.group(2) not in concerned):
            continue
        if "state --" not in " ".join(lines[i:i + 3]):
            out.append(line.strip())
    return out


def undecided_by_a_neighbour(out: subprocess.CompletedProcess[str] | tuple[int, str],
                             components: Sequence[str] = ()) -> str:
    """Why the run was INCONCLUSIVE because this machine's CPU was taken (a busy host, ``busy-neighbour``),
    naming what took it, with no promise FAILed ("" when it was not): besides the outcome a test expects, the
    one that is true on such a machine. ``out``: a finished process, or (exit code, its output).
    ``components``: the target's own process names (postgres, celery...): named as the neighbour, they make it
    the harness's error (the target's parts counted outside it), never accepted."""
    code, text = (out.returncode, out.stdout + out.stderr) if isinstance(out, subprocess.CompletedProcess) else out
    named = re.findall(r"the busiest over the stage: ([^)]*)\)", text)
    if any(c in n for n in named for c in components):
        return ""
    if code != 2 or "[FAIL]" in text or not any(c in text for c in CONTENTION):
        return ""
    return next((line.strip() for line in text.splitlines() if any(c in line for c in CONTENTION)), "")


def skip_when_a_neighbour_left_it_undecided(out: subprocess.CompletedProcess[str] | tuple[int, str],
                                            components: Sequence[str] = ()) -> None:
    """Skip the test, saying why, when its run (after :func:`decided`'s reruns, where the test asks for them)
    came out INCONCLUSIVE because a neighbour took this machine's CPU: the test could not be decided here,
    which is neither its pass nor its failure (a quiet machine's run skips none). Its class is ``undecided``
    (tests/support/skips.py): the test is marked ``decides``, and CI fails on any such skip."""
    __tracebackhide__ = True  # the skip's line is the test's
    why = undecided_by_a_neighbour(out, components)
    if why:
        skip("undecided", f"not decided on this machine: the run was INCONCLUSIVE naming a neighbour ({why[:300]})")


def decided(run: Callable[[], subprocess.CompletedProcess[str]], tries: int = 3) -> subprocess.CompletedProcess[str]:
    """A load's outcome; run again (``tries`` in all) while the harness could not decide because this
    machine's CPU was taken (INCONCLUSIVE naming a neighbour: its own advice is to run again on a quiet
    machine). A PASS is still what the tests ask for: a machine busy every time fails them, saying so."""
    out = run()
    for attempt in range(2, tries + 1):
        if out.returncode != 2 or not any(c in out.stdout + out.stderr for c in CONTENTION):
            break
        # shown with the test's output (on a failure, or -rP): why the attempt before was not decided
        print(f"attempt {attempt - 1} not decided, run again:",
              *[line for line in out.stdout.splitlines() if "not decided" in line or line.startswith("peakproof verdict")],
              sep="\n  ")
        time.sleep(5)  # let a neighbour's burst pass
        out = run()
    return out


def verdict_of(out: subprocess.CompletedProcess[str]) -> str:
    text = out.stdout
    return text[text.index("peakproof verdict"):] if "peakproof verdict" in text else text[-3000:] + out.stderr


def locust_verdict(out: subprocess.CompletedProcess[str]) -> str:
    """A Locust run's verdict lines (why, each check) and then its tail: Locust's tables, printed after the
    verdict, push it out of any tail a failing assertion shows."""
    text = out.stdout + out.stderr
    lines = [line for line in text.splitlines()
             if line.lstrip().startswith(("[", "why", "not decided", "peakproof verdict"))]
    return "\n".join(lines)[-5000:] + "\n...\n" + text[-2000:]


# -- the properties and a load against a served target, as the quality tier runs them ----------------------------


TICKETS_LOAD = ("--scale", "0.01", "--time-scale", "24")
FEED_LOAD = ("--scale", "0.002", "--time-scale", "100", "--duration", "6")


class PropertiesRun(NamedTuple):
    """A URL property run: its exit code, what it printed, and the stage result it wrote (``--result``:
    the outcome, the reasons, the witnesses of the checks its first violating runs broke)."""
    code: int
    out: str
    record: dict[str, Any]


def properties_against(url: str, case: str, *extra: str) -> PropertiesRun:
    with tempfile.TemporaryDirectory(prefix="peakproof-props-") as work:
        result = Path(work) / "result.json"
        # --stop-at-first: a mutant's test needs its first broken promise (test_design_statements.py shows a run
        # that goes on); extra may ask otherwise with --every-promise
        go_on = "--every-promise" in extra
        extra = tuple(e for e in extra if e != "--every-promise")
        cmd = [sys.executable, "-m", "pytest", str(ROOT / "properties" / f"test_{case}.py"), "-q",
               *(() if go_on else ("-x", "--stop-at-first")),
               "-p", "no:cacheprovider", "--target-url", url, "--result", str(result), *extra]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT,
                              env=dict(os.environ, HYPOTHESIS_PROFILE="ci"))
        record = json.loads(result.read_text(encoding="utf-8")) if result.exists() else {}
    return PropertiesRun(proc.returncode, proc.stdout + proc.stderr, record)


def failed_checks(record: dict[str, Any]) -> set[str]:
    """The checks a property run's record says were broken: the one its reason names (the property's first
    failure) and each its first violating runs' witnesses were cut for."""
    named = set(re.findall(r"(\w+): FAIL", " ".join(record.get("reasons", []))))
    return (named | {w["check"] for w in record.get("data", {}).get("witnesses", [])}) - {"property"}


def witnessed(record: dict[str, Any], *checks: str) -> None:
    """A FAIL carries its witness (peakproof.shrink; the suite's runs find it and replay nothing:
    tests/conftest.py), with its steps and its two files: a witness of one of ``checks``, or of another check
    the same violating run broke, or of the property's own assertion."""
    witnesses = record.get("data", {}).get("witnesses", [])
    assert record.get("outcome") == "FAIL" and any(
        w["steps"] and sorted(Path(f).suffix for f in w["target"]["files"]) == [".json", ".py"]
        for w in witnesses), (checks, [(w["check"], len(w["steps"]), w["target"].get("files")) for w in witnesses])


def load_against(url: str, scenario: str, tmp_path: Path, *extra: str,
                 locustfile: Path = ROOT / "loadtests") -> tuple[int, dict[str, Any], str]:
    return run_locust(url, scenario, tmp_path, *extra, locustfile=locustfile, timeout=600)


def load_decided(url: str, scenario: str, tmp_path: Path, *extra: str, tries: int = 3) -> tuple[int, dict[str, Any], str]:
    """:func:`load_against`, run again (``tries`` in all) while it came out INCONCLUSIVE because this machine's
    CPU was taken, as its verdict advises (:func:`decided` for a Locust run); a FAIL is never run again."""
    for attempt in range(1, tries + 1):
        (tmp_path / f"try-{attempt}").mkdir(parents=True, exist_ok=True)
        code, doc, out = load_against(url, scenario, tmp_path / f"try-{attempt}", *extra)
        if code != 2 or not any(c in out for c in CONTENTION):
            break
        print(f"attempt {attempt} not decided (a neighbour took CPU), run again")
        time.sleep(5)  # let a neighbour's burst pass
    return code, doc, out


def result(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(r for group in ("load", "checks", "slos") for r in doc[group] if r["name"] == name)


def excerpt(out: str) -> str:
    """What a failed assertion shows of a run's output: the lines that name an outcome (a long
    violating history pushes them out of any tail), then the tail."""
    lines = out.splitlines()
    named = [line for line in lines if any(w in line for w in (": FAIL", "broken promise", "UNDECIDED",
                                                               "INCONCLUSIVE", "Error"))]
    # the first broken promise's whole message (its first violation and the evidence the check gives), up to
    # the history that follows it: a false FAIL seen once in CI is only understood from these words
    start = next((i for i, line in enumerate(lines) if ": FAIL" in line), None)
    message = []
    if start is not None:
        for line in lines[start:start + 60]:
            if "the violating run's history" in line:
                break
            message.append(line)
    return "\n".join(named[:20] + ["", "the first broken promise, whole:", *message]) + "\n...\n" + out[-2500:]
