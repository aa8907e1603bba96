"""Benchmark: CPU per request on every side of a run, before and after, in one run (issue 22).

Where the CPU of a run on one machine goes, per request, at a fixed rate that both code
versions sustain (so the same work is compared), each figure beside a bare baseline:

tickets (``tickets-sold-out``: every reservation answered 409 sold out, the opening's
commonest request), generator pinned to core 0, target to core 1:

* generator CPU per arrival, against the reference target, and against nginx answering a
  constant 409 (a C server: the engine's own cost when the target costs nothing);
* the target's CPU per request on the sold-out path (app + lean server), and the lean server
  answering a constant 409 with no app (the floor of a Python server here);
* their sum, the share of two cores it needs at the seed's 20,000/s.

notifications (``notifications-peak``): generator on core 0, target and provider simulator
on core 1; CPU per notification accepted and delivered of the generator, the target and the
simulator, and the share of two cores the sum needs at the seed's 1,736.11/s.

The CPU of each process is read from /proc (all threads) every 50 ms and taken over the
curve's window (from the run's first instant to the end of its constant-rate curve), what
decides whether arrivals leave on time; start-up, set-up, the reads after the curve and the
judgement are not counted. Every process is measured over the same window.

``--before REV`` runs the same measurements on the code of git revision REV (a temporary
worktree) first: the table then shows before, after and after/before.

    python benchmarks/bench_cpu.py [--before REV] [--rate R] [--seconds 10] [--repeat 3] [--cases tickets notifications]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from benchmarks.bench_engine import nginx_standin  # noqa: E402
from peakproof.launch import ServedTarget, free_port, stop_process, wait_until_answering  # noqa: E402
from peakproof.placement import cpu_seconds  # noqa: E402

from peakproof.cases import get_case  # noqa: E402

TICKETS_PEAK = get_case("tickets").peak_rate()  # the seed's peaks, from the ported models
NOTIFICATIONS_PEAK = get_case("notifications").peak_rate()
GEN, TGT = 0, 1

CONSTANT_409 = """
import sys
from peakproof.targets._lean import run
BODY = b'{"error":"sold_out","message":"only 0 available; asked 1","available":0}'
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await receive()
    status = 409 if scope["method"] == "POST" else 200  # reservations sold out; the quota's set-up and reads fine
    body = (b'{"quota_id":"q","capacity":0,"available":0,"held":0,"sold":0,"hold_seconds":120.0}'
            if status == 200 else BODY)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})
run(app, "127.0.0.1", int(sys.argv[1]))
"""


class Sampler:
    """(wall, CPU seconds) of each pid every ``period`` s, in a thread; ``over(pid, a, b)``: CPU in [a, b]."""

    def __init__(self, period: float = 0.05) -> None:
        self.period = period
        self.pids: dict[str, int] = {}
        self.samples: dict[str, list[tuple[float, float]]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def watch(self, name: str, pid: int) -> None:
        self.pids[name] = pid
        self.samples.setdefault(name, [])

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.time()
            for name, pid in list(self.pids.items()):
                c = cpu_seconds(pid, children=False)
                if c is not None:
                    self.samples[name].append((now, c))
            self._stop.wait(self.period)

    def __enter__(self) -> "Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def over(self, name: str, a: float, b: float) -> float:
        s = self.samples.get(name, [])
        return _at(s, b) - _at(s, a) if s else float("nan")


def _at(samples: list[tuple[float, float]], t: float) -> float:
    """CPU at wall time ``t``, interpolated between samples."""
    prev = samples[0]
    for cur in samples:
        if cur[0] >= t:
            if cur[0] == prev[0]:
                return cur[1]
            return prev[1] + (cur[1] - prev[1]) * (t - prev[0]) / (cur[0] - prev[0])
        prev = cur
    return samples[-1][1]


@contextmanager
def code_of(rev: str | None) -> Iterator[Path]:
    """The project's tree at ``rev`` (a temporary worktree), or this one."""
    if rev is None:
        yield HERE
        return
    with tempfile.TemporaryDirectory(prefix="peakproof-before-") as tmp:
        wt = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(HERE), "worktree", "add", "--detach", "--quiet", str(wt), rev], check=True)
        try:
            yield wt
        finally:
            subprocess.run(["git", "-C", str(HERE), "worktree", "remove", "--force", str(wt)], check=False)


def env_for(tree: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(tree), PYTHONUNBUFFERED="1")


@contextmanager
def served(tree: Path, case: str, core: int | None, **options: Any) -> Iterator[ServedTarget]:
    saved, cwd = os.environ.get("PYTHONPATH"), os.getcwd()
    # the served process (python -m peakproof serve, started here) imports this tree's peakproof and targets:
    # -m puts the working directory first on its path, so it starts from the tree
    os.environ["PYTHONPATH"] = str(tree)
    os.chdir(tree)
    try:
        with ServedTarget(get_case(case), **options) as t:
            os.chdir(cwd)
            if core is not None:
                _pin_all(t.proc.pid, core)  # type: ignore[union-attr]
            yield t
    finally:
        os.chdir(cwd)
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def _pin_all(pid: int, core: int) -> None:
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), {core})
        except OSError:
            pass


@contextmanager
def constant_409(tree: Path) -> Iterator[tuple[str, int]]:
    port = free_port()
    proc = subprocess.Popen(["taskset", "-c", str(TGT), sys.executable, "-c", CONSTANT_409, str(port)], cwd=tree,
                            env=env_for(tree), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/tickets"
        wait_until_answering(f"{url}/quotas/q", 10.0, proc=proc)
        yield url, proc.pid
    finally:
        stop_process(proc)


def locust_run(tree: Path, url: str, scenario: str, scale: float, seconds: float, sampler: Sampler,
               extra: list[str] = ()) -> dict[str, Any]:
    """One Locust run of ``tree``'s loadtests on core GEN; its report's window and counts."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["taskset", "-c", str(GEN), sys.executable, "-m", "locust", "-f", str(tree / "loadtests"),
               "--headless", "--host", url, "--scenario", scenario, "--scale", str(scale), "--duration", str(seconds),
               "--report-dir", tmp, "--result", f"{tmp}/result.json", "--only-summary", "--loglevel", "ERROR",
               *extra]
        proc = subprocess.Popen(cmd, cwd=tree, env=env_for(tree), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        sampler.watch("generator", proc.pid)
        out, err = proc.communicate(timeout=600)
        result = Path(tmp) / "result.json"
        if not result.exists():
            raise SystemExit(f"the run wrote no result: {err.decode()[-1500:]}")
        doc = json.loads(Path(json.loads(result.read_text())["report"]).with_suffix(".json").read_text())
    return doc


def tickets_side(tree: Path, target: str, rate: float, seconds: float) -> dict[str, float]:
    """Generator and target CPU per request at ``rate`` against ``target`` (reference, nginx, lean-409)."""
    with Sampler() as s:
        if target == "nginx":
            cm: Any = nginx_standin()
        elif target == "lean-409":
            cm = constant_409(tree)
        else:
            cm = served(tree, "tickets", TGT)
        with cm as got:
            if target == "reference":
                url, pid = got.url, got.proc.pid
            elif target == "lean-409":
                url, pid = got
            else:
                url, pid = got, None
            if pid:
                s.watch("target", pid)
            doc = locust_run(tree, url, "tickets-sold-out", rate / TICKETS_PEAK, seconds, s)
            time.sleep(0.2)
    a, b = doc["started"], doc["started"] + seconds
    load = doc["load"][0]["counts"]
    if "sent" not in load:
        raise SystemExit(f"the run against {target} sent nothing: {doc['verdict']} {doc['checks'][:1]}")
    n = load["sent"]
    out = {"requests": n, "on_time": (load["sent"] - load["late"]) / max(1, load["due"]),
           "generator": s.over("generator", a, b) / n * 1e6}
    if "target" in s.samples:
        out["target"] = s.over("target", a, b) / n * 1e6
    return out


def notifications_side(tree: Path, scale: float, seconds: float) -> dict[str, float]:
    with Sampler() as s:
        with served(tree, "providers", TGT) as providers, \
                served(tree, "notifications", TGT, provider_url=providers.base) as target:
            s.watch("target", target.proc.pid)  # type: ignore[union-attr]
            s.watch("simulator", providers.proc.pid)  # type: ignore[union-attr]
            doc = locust_run(tree, target.url, "notifications-peak", scale, seconds, s,
                             ["--provider-url", providers.base])
            time.sleep(0.2)
    a, b = doc["started"], doc["started"] + seconds
    n = doc["params"].get("notifications") or 0
    verdict = doc["verdict"]["outcome"]
    return {"notifications": n, "verdict": verdict,
            **{k: s.over(k, a, b) / max(1, n) * 1e6 for k in ("generator", "target", "simulator")}}


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the runs (this host's speed drifts from minute to minute)."""
    import statistics

    return {k: statistics.median(r[k] for r in runs) if isinstance(runs[0][k], (int, float)) else runs[0][k]
            for k in runs[0]}


def measure_once(tree: Path, args: argparse.Namespace, label: str) -> dict[str, dict[str, Any]]:
    got: dict[str, dict[str, Any]] = {}
    if "tickets" in args.cases:
        for target in ("nginx", "reference", "lean-409"):
            got[f"tickets/{target}"] = r = tickets_side(tree, target, args.rate, args.seconds)
            print(f"    {label}: tickets-sold-out at {args.rate:,.0f}/s vs {target}: " +
                  ", ".join(f"{k} {v:,.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in r.items()), flush=True)
    if "notifications" in args.cases:
        got["notifications"] = r = notifications_side(tree, args.notifications_scale, args.notifications_seconds)
        print(f"    {label}: notifications-peak: " +
              ", ".join(f"{k} {v:,.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in r.items()), flush=True)
    return got


def rows(m: dict[str, dict[str, float]]) -> dict[str, float]:
    """The table's figures (us of CPU per request) from one version's measurements."""
    out: dict[str, float] = {}
    if "tickets/reference" in m:
        out["tickets: generator per arrival (vs reference)"] = m["tickets/reference"]["generator"]
        out["tickets: generator per arrival (vs nginx, bare)"] = m["tickets/nginx"]["generator"]
        out["tickets: target sold-out path per request"] = m["tickets/reference"]["target"]
        out["tickets: lean server, constant 409 (bare)"] = m["tickets/lean-409"]["target"]
        total = m["tickets/reference"]["generator"] + m["tickets/reference"]["target"]
        out["tickets: sum per request (generator + target)"] = total
        out[f"tickets: share of 2 cores at {TICKETS_PEAK:,.0f}/s"] = total * TICKETS_PEAK / 1e6 / 2
    if "notifications" in m:
        n = m["notifications"]
        for k in ("generator", "target", "simulator"):
            out[f"notifications: {k} per notification"] = n[k]
        total = n["generator"] + n["target"] + n["simulator"]
        out["notifications: sum per notification"] = total
        out[f"notifications: share of 2 cores at {NOTIFICATIONS_PEAK:,.2f}/s"] = total * NOTIFICATIONS_PEAK / 1e6 / 2
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", metavar="REV", help="also measure git revision REV, first")
    p.add_argument("--rate", type=float, default=TICKETS_PEAK,
                   help="tickets arrivals/s (default: the seed's peak; both versions must sustain it on one core)")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--repeat", type=int, default=3, help="runs of each measurement; the median is printed")
    p.add_argument("--notifications-scale", type=float, default=1.0, help="of the seed's peak rate")
    p.add_argument("--notifications-seconds", type=float, default=20.0)
    p.add_argument("--cases", nargs="+", choices=["tickets", "notifications"], default=["tickets", "notifications"])
    args = p.parse_args()
    from contextlib import ExitStack

    with ExitStack() as stack:
        trees = ([("before", stack.enter_context(code_of(args.before)))] if args.before else []) + [("after", HERE)]
        for label, tree in trees:
            head = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True,
                                  text=True).stdout.strip()
            print(f"{label}: {args.before if label == 'before' else 'the working tree'} ({head})", flush=True)
        # before and after in turn, each repeat: a drift of the host's speed falls on both alike
        runs: dict[str, list[dict[str, dict[str, Any]]]] = {label: [] for label, _ in trees}
        for k in range(args.repeat):
            for label, tree in trees:
                runs[label].append(measure_once(tree, args, f"{label} #{k + 1}"))
    versions = [(label, rows({name: median_of([r[name] for r in runs[label]]) for name in runs[label][0]}))
                for label, _ in trees]
    print("\nCPU per request, microseconds (shares: of two cores, at the seed's rate)")
    names = list(versions[-1][1])
    width = max(len(n) for n in names)
    print("  " + " " * width + "".join(f"{label:>12}" for label, _ in versions) +
          ("     after/before" if len(versions) == 2 else ""))
    for name in names:
        vals = [v.get(name, float("nan")) for _, v in versions]
        fmt = (lambda x: f"{x:>12.1%}") if "share" in name else (lambda x: f"{x:>12,.1f}")
        line = "  " + name.ljust(width) + "".join(fmt(x) for x in vals)
        if len(vals) == 2 and vals[0]:
            line += f"     {vals[1] / vals[0]:.2f}x"
        print(line)


if __name__ == "__main__":
    main()
