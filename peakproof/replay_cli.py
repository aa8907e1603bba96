"""The replay's entry point: ``peakproof replay FILE [URL]`` and a witness's own script
(``reports/*.replay.py``). It reads the witness, builds the process's run record from the spec the
witness carries (its case, its driver) and hands both to :mod:`peakproof.replay`.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from .cases import run_of
from .errors import PeakproofError
from .replay import TRIES, Replayer, estimate, hooks_for
from .spec import RunSpec
from .witness import Witness


def main(doc: dict[str, Any], argv: list[str]) -> int:
    """A witness's own script: ``python it.py [URL] [--tries N]`` (:func:`replay_command`)."""
    ap = argparse.ArgumentParser(prog="peakproof replay", description="Replay a FAIL's witness against a target.")
    add_arguments(ap)
    return replay_command(doc, ap.parse_args(argv))


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``peakproof replay FILE`` and of a witness's own script."""
    ap.add_argument("url", nargs="?", help="the target (default: the URL the witness was found on)")
    ap.add_argument("--target-url", dest="target_url", help="the target (same as the positional URL)")
    ap.add_argument("--tries", type=int, default=TRIES, help=f"replays (default {TRIES})")
    ap.add_argument("--driver", help="module:Class or path.py:Class (default: the driver the run used)")


def replay_command(doc: Any, args: argparse.Namespace) -> int:
    """Replay the witness ``doc`` as ``args`` say; 1 when its check failed again, 0 when not, 2 when the
    target answered nothing, 4 for a witness or option that does not fit."""
    try:
        w = Witness.from_json(doc)
        spec = RunSpec.from_json(w.target.get("spec") or {"case": w.case})
        url = args.target_url or args.url or w.target.get("url") or spec.target_url
        spec = spec.with_options(target_url=url, driver=args.driver or spec.driver)
        run = run_of(spec)  # this process's run record, built once
        hooks = hooks_for(run.case)
        if hooks is None:
            print(f"peakproof replay: the case {w.case!r} has no witness support", file=sys.stderr)
            return 2
        rep = Replayer(hooks, run, w.check, w.state)
        started = time.monotonic()
        out = estimate(rep, w, max(1, args.tries))
    except PeakproofError as e:
        print(f"peakproof replay: {e}", file=sys.stderr)
        return 4
    for line in out.lines():
        print(line)
    if out.last_violation:
        print(f"  the check's words this time: {out.last_violation}")
    for line in out.curl:
        print(f"  {line}")
    print(f"peakproof replay: {w.check} failed again in {out.reproduced} of {out.tries} tries against {url} "
          f"({time.monotonic() - started:.1f} s)")
    if out.reproduced:
        return 1
    return 2 if out.replay_note.startswith("the target answered no step") else 0


__all__ = ["add_arguments", "main", "replay_command"]
