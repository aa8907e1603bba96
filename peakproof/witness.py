"""A reproduction for every FAIL: the witness of a violation, as data.

A *witness* is the few operations that bear on one violated check (those on the violating key,
in the window that led to the violation): who sent each, what it asked, when it was meant to
start (seconds after the witness's first step) and how it was answered. ``peakproof.replay``
sends it again on fresh ids, counts how often the check fails again, and shrinks it; this
module holds it, renders it (a numbered table, curl lines when it is sequential) and writes it
as a file ``peakproof replay`` reads and a script that fails again on its own.

Pure but for :func:`write_files`.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from .checks import CheckResult
from .history import Op

from .errors import UsageError

FORMAT = "peakproof-witness/1"


@dataclass
class Step:
    """One operation of a witness. ``setup`` steps rebuild the state the others act on (a quota's
    creation, a follow): sent first, one after the other, and never dropped by the shrink."""

    process: str
    f: str
    args: dict[str, Any]
    at: float = 0.0  # intended start, s after the witness's first step
    outcome: str = ""  # ok / fail / info, as last seen
    answer: Any = None
    took: float | None = None
    setup: bool = False

    def cells(self, n: int) -> tuple[str, str, str, str, str]:
        """(number, who, what, when, answer) for the table."""
        args = ", ".join(f"{k}={_short(v)}" for k, v in self.args.items())
        when = "setup" if self.setup else f"+{self.at * 1000:,.1f} ms"
        took = f" in {self.took * 1000:,.1f} ms" if self.took is not None else ""
        return str(n), str(self.process), f"{self.f}({args})", when, f"{self.outcome} {_short(self.answer, 90)}{took}"


@dataclass
class Witness:
    """The operations that bear on a violated check, and what their replay showed."""

    case: str
    check: str
    violation: str  # the check's own words, from the run that found it
    key: str  # what the steps bear on ("quota 'opening-1'", "event 'e1' to recipient 'u2'")
    steps: list[Step]
    found_size: int  # operations in the window as found, before any shrink
    sequential: bool = False  # each step waits for the one before (no concurrency needed)
    tries: int = 0  # replays of the final witness
    reproduced: int = 0  # ... in which the check failed again
    shrink: str = "not shrunk"  # what the shrink reached, and why it stopped
    replay_note: str = ""  # why it was not replayed, or what a replay could not rebuild
    curl: list[str] = field(default_factory=list)  # the requests of one sequential replay, in order
    context: list[str] = field(default_factory=list)  # what else the run recorded of it (the providers' calls)
    state: dict[str, Any] = field(default_factory=dict)  # what a replay rebuilds beside the steps (CaseWitness.state)
    last_violation: str = ""  # the check's words in the last replay that failed
    target: dict[str, Any] = field(default_factory=dict)  # how to reach it again: url, driver, options

    @property
    def size(self) -> int:
        return len(self.steps)

    def rate(self) -> str:
        if not self.tries:
            return "not replayed" + (f": {self.replay_note}" if self.replay_note else "")
        if not self.reproduced:
            return (f"seen once, not reproduced in {self.tries} tries: a rarer race, or a state the replay did not "
                    f"rebuild" + (f" ({self.replay_note})" if self.replay_note else ""))
        return f"reproduced {self.reproduced} of {self.tries} tries"

    def headline(self) -> str:
        mode = "sequential" if self.sequential else "concurrent"
        return (f"witness of {self.check} on {self.key}: {self.size} operation{'s' * (self.size != 1)} "
                f"({mode}; {self.found_size:,} in the window as found; {self.shrink}); {self.rate()}")

    def lines(self) -> list[str]:
        """The headline, then the numbered table: the verdict's and the terminal's text."""
        rows = [s.cells(n) for n, s in enumerate(self.steps, 1)]
        widths = [max(len(r[i]) for r in rows) for i in range(4)] if rows else [0] * 4
        out = [self.headline()]
        if self.reproduced:
            out.append("  (the calls as found; the answers of a replay that failed again, on fresh ids)")
        out += ["  " + "  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  -> " + r[4] for r in rows]
        return out + [f"  as found: {line}" for line in self.context]

    def verdict_lines(self) -> list[str]:
        """:meth:`lines`, then where its files are and, when sequential, its curl lines."""
        return (self.lines() + [f"  replay: {f}" for f in self.target.get("files", [])]
                + [f"  {line}" for line in self.curl])

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self)}

    @classmethod
    def from_json(cls, doc: Any, source: str = "the witness") -> "Witness":
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise UsageError(source, f"a peakproof witness file ({FORMAT}, written next to a FAIL's report)",
                             repr(doc)[:120], "Give the .replay.json file a FAILed run wrote in reports/.")
        fields = {k: v for k, v in doc.items() if k != "format"}
        try:
            fields["steps"] = [Step(**s) for s in fields.get("steps", [])]
            return cls(**fields)
        except TypeError as e:
            raise UsageError(source, f"a peakproof witness file ({FORMAT})", f"a file that does not fit it ({e})",
                             "Write it again with this version of peakproof, or fix the named field.") from None


class CaseWitness:
    """A case's part in witnesses: which operations bear on a check, and how to send one again.

    ``fresh``: argument names the harness chose (a quota id, a buyer, an idempotency key), renamed
    on every try; ``produced``: answer fields holding ids the target chose (a reservation id, a
    cursor), each with the argument that carries it back (``{"next_cursor": "cursor"}``), mapped to
    this try's (a step whose id was not handed back this time is not sent: it would act on the found
    run's own data); ``actors``: arguments naming who acts, merged by the shrink;
    ``setup``: operations that rebuild state (sent first, never dropped)."""

    fresh: tuple[str, ...] = ()
    produced: dict[str, str] = {}
    actors: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()

    def find(self, history: Sequence[Op], result: CheckResult) -> tuple[Any, ...] | None:
        """(what the violation bears on, its operations in the window that led to it[, lines on what else
        the run recorded of it]), or None."""
        raise NotImplementedError

    def send(self, driver: Any, step: Step, args: dict[str, Any], process: str, intended: float | None) -> Op:
        """One step through the driver: by default its method named ``step.f`` with the step's arguments."""
        import inspect

        method = getattr(driver, step.f)
        if "intended_time" in inspect.signature(method).parameters:
            return method(**args, process=process, intended_time=intended)
        return method(**args, process=process)  # an operation without a start time of its own (a read)

    def checks(self, driver: Any, ops: list[Op], spec: Any) -> list[CheckResult]:
        """The case's checks over operations (a replay's, or a property's run), by the rules the run's
        ``spec`` states (``driver`` was built from it); once the target's later work is done (a delivery's
        rounds), when the case has such work."""
        raise NotImplementedError

    def state(self, spec: Any, ops: list[Op]) -> dict[str, Any]:
        """What the run's side records say a replay must rebuild beside the steps (the providers' answers
        to the found calls), read once when the witness is found; kept in the witness file."""
        return {}

    def rewrite(self, step: Step, args: dict[str, Any], tag: str, state: dict[str, Any]) -> dict[str, Any]:
        """A step's arguments for one try, after the renaming (an address made fresh in its own format)."""
        return args

    def prepare(self, spec: Any, state: dict[str, Any], setup: list[dict[str, Any]]) -> None:
        """Rebuild ``state`` for one try, once its setup steps (``setup``: the arguments they were sent
        with) are done: e.g. the providers told to answer the fresh addresses as they answered the found."""

    def smaller(self, step: Step) -> list[dict[str, Any]]:
        """Smaller arguments for a setup step, smallest first (a quota of 1, 2, ... units)."""
        return []


def _short(v: Any, limit: int = 48) -> str:
    text = v if isinstance(v, str) else json.dumps(v, default=str, separators=(",", ":"))
    return text if len(text) <= limit else text[:limit - 3] + "..."


def curl_line(method: str, url: str, headers: dict[str, str], body: bytes | None) -> str:
    """One request as a curl command line (headers the transport adds by itself left out)."""
    parts = ["curl", "-sS", "-X", method, shlex.quote(url)]
    for k, v in headers.items():
        if k.lower() not in ("content-length", "accept-encoding", "connection", "user-agent"):
            parts += ["-H", shlex.quote(f"{k}: {v}")]
    if body:
        parts += ["--data-raw", shlex.quote(body.decode("utf-8", "replace"))]
    return " ".join(parts)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:80] or "witness"


SCRIPT = '''#!/usr/bin/env python3
"""{title}

Replays the shrunk witness below against a target of the same kind, on fresh ids, keeping its
timing; exit 1 when {check} fails again (the bug, in your hands), 0 when it did not in {tries}
tries, 2 when the target could not be reached. Needs peakproof installed (pip install peakproof).

    python {name} [URL]            (default: {url})
"""
import json
import sys

from peakproof.replay_cli import main

WITNESS = json.loads({doc!r})

if __name__ == "__main__":
    sys.exit(main(WITNESS, sys.argv[1:]))
'''


def write_files(witness: Witness, directory: str | Path, stem: str) -> tuple[Path, Path]:
    """The witness as ``<stem>.replay.json`` (for ``peakproof replay``) and ``<stem>.replay.py`` (a script
    that replays it on its own) in ``directory``; both paths."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    data = out / f"{slug(stem)}.replay.json"
    data.write_text(json.dumps(witness.to_json(), indent=1, default=str), encoding="utf-8")
    script = data.with_suffix("").with_suffix(".replay.py")
    script.write_text(SCRIPT.format(title=witness.headline().replace('"""', "'''"), check=witness.check,
                                    tries=witness.tries or 10, name=script.name,
                                    url=witness.target.get("url", "the URL it was found on"),
                                    doc=json.dumps(witness.to_json(), default=str)), encoding="utf-8")
    script.chmod(0o755)
    return data, script


__all__ = ["CaseWitness", "FORMAT", "Step", "Witness", "curl_line", "slug", "write_files"]
