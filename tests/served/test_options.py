"""One option, one name, one default, one environment variable, one help text, wherever a user
meets it: the three parsers of a run (``peakproof run``, ``locust -f loadtests/``, ``pytest``)
are compared as built, and the run spec is resolved the same way from each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from peakproof.cases import all_cases, get_case
from peakproof.cli import build_parser, run_spec
from peakproof.errors import UsageError
from peakproof.cases import all_options
from peakproof.options import LOCUST, PYTEST, RUN, add_options, for_surface
from peakproof.pytest_plugin import DRIVER_DEST
from peakproof.spec import RunFacts, RunSpec, StageResult

ROOT = Path(__file__).resolve().parents[2]


def _argparse_view(parser: Any) -> dict[str, dict[str, Any]]:
    out = {}
    for a in parser._actions:
        if a.option_strings and a.dest != "help":
            out[a.dest] = {"flags": sorted(a.option_strings), "default": a.default, "help": a.help}
    return out


def _run_parser() -> dict[str, dict[str, Any]]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return _argparse_view(sub.choices["run"])


def _pytest_parser(config: pytest.Config) -> dict[str, dict[str, Any]]:
    out = {}
    for opt in config._parser.getgroup("peakproof").options:
        attrs = opt.attrs()
        dest, flags, help_ = attrs["dest"], sorted(opt.names()), attrs.get("help")
        if dest == DRIVER_DEST:  # pytest's own spelling beside --driver (pytest-selenium owns --driver where installed)
            assert "--peakproof-driver" in flags and " (also --driver" in help_, (flags, help_)
            dest, flags, help_ = "driver", [f for f in flags if f != "--peakproof-driver"], help_.split(" (also --driver")[0]
        out[dest] = {"flags": flags, "default": attrs.get("default"), "help": help_}
    return out


def _locust_parser() -> dict[str, dict[str, Any]]:
    # Locust's parser in a child: importing locust monkey-patches the process (never in pytest's own)
    code = ("import json, peakproof.load.engine\n"
            "from locust.argument_parser import get_parser\n"
            "p = get_parser()\n"
            "print(json.dumps({a.dest: {'flags': sorted(a.option_strings), 'default': a.default, 'help': a.help}\n"
            "                  for a in p._actions if a.option_strings and a.dest != 'help'}, default=str))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
def test_an_option_on_several_command_lines_has_one_flag_default_and_help_on_each(pytestconfig: pytest.Config) -> None:
    views = {RUN: _run_parser(), PYTEST: _pytest_parser(pytestconfig), LOCUST: _locust_parser()}
    compared = 0
    for o in for_surface(all_options(), RUN) + for_surface(all_options(), PYTEST) + for_surface(all_options(), LOCUST):
        where = [s for s in (RUN, PYTEST, LOCUST) if s in o.surfaces]
        for s in where:
            assert o.name in views[s], f"{o.cli_flag} is declared for {s} but its parser lacks it"
        seen = [views[s][o.name] for s in where]
        for other in seen[1:]:
            assert other["flags"] == seen[0]["flags"], o.name
            # an environment variable is each default's source too, read when each parser was built: pytest's at
            # its start, before tests/conftest.py set PEAKPROOF_REPLAY_SECONDS (the file run alone failed on it)
            if not (o.env_var and o.env_var in os.environ):
                assert json.dumps(other["default"], default=str) == json.dumps(seen[0]["default"], default=str), o.name
            assert other["help"] == seen[0]["help"], o.name
        compared += len(where) > 1
    assert compared >= 20  # the run's options are shared, not redeclared per command line
    for name in ("scale", "time_scale", "duration", "slo", "seed", "admin_token", "target_url", "backoff"):
        assert name in views[RUN] and name in views[LOCUST], name


def test_no_two_options_of_a_command_line_share_a_flag() -> None:
    for surface in (RUN, PYTEST, LOCUST, "serve", "plan"):
        flags = [f for o in for_surface(all_options(), surface) for f in (o.cli_flag, *o.aliases)]
        assert len(flags) == len(set(flags)), surface


def test_an_environment_variable_sets_the_default_and_a_bad_one_says_which() -> None:
    import argparse

    p = argparse.ArgumentParser()
    add_options(p, RUN, all_options(), environ={"PEAKPROOF_SCALE": "0.25", "PEAKPROOF_SEED": "7"})
    ns = p.parse_args([])
    assert ns.scale == 0.25 and ns.seed == 7
    with pytest.raises(UsageError) as e:
        add_options(argparse.ArgumentParser(), RUN, all_options(), environ={"PEAKPROOF_POOL_SIZE": "-3"})
    assert "PEAKPROOF_POOL_SIZE" in str(e.value) and "-3" in str(e.value)


def test_peakproof_run_parses_once_into_a_spec_with_the_case_s_defaults() -> None:
    args = build_parser().parse_args(["run", "notifications", "--scale", "0.1"])
    spec = run_spec(args)
    case = get_case("notifications")
    assert spec.case == "notifications" and spec.scale == 0.1 and spec.target_url is None  # the reference, embedded
    assert spec.time_scale == case.default_time_scale and spec.duration == case.default_duration
    # the seed's 30 s rounds shrink with the time scale, once, for every stage
    assert spec.opt("backoff") == pytest.approx(30.0 / case.default_time_scale)
    feed = run_spec(build_parser().parse_args(["run", "feed"]))
    assert feed.time_scale == "auto" and feed.scale == get_case("feed").default_scale  # fitted by the calibration


def test_locust_alone_resolves_the_same_defaults_as_peakproof_run() -> None:
    for name, case in all_cases().items():
        spec = case.resolved(RunSpec(case=name))
        assert spec.time_scale == case.default_time_scale, name
        assert spec.scale == case.default_scale, name  # no calibration there: the case's default scale
        assert spec.duration == case.default_duration, name


def test_a_spec_survives_its_file_and_a_stage_result_too(tmp_path: Path) -> None:
    spec = run_spec(build_parser().parse_args(["run", "tickets", "--scale", "0.3", "--slo", "reserve:p99<=50ms",
                                               "--target-url", "http://127.0.0.1:9/tickets"]))
    again = RunSpec.load(spec.dump(tmp_path / "spec.json"))
    assert again == spec and again.slo == ("reserve:p99<=50ms",)
    # what a run learned rides beside the request in a stage's file, not in it
    facts = RunFacts(embedded=True, run_pid=7, target_pids=(8, 9), placement="here", shared_cores="", calibrated_by="top")
    path = spec.dump(tmp_path / "stage.json", facts)
    assert RunSpec.load(path) == spec and RunFacts.load(path) == facts
    assert RunFacts.load(tmp_path / "spec.json") == RunFacts()  # a stage run directly: nothing learned
    r = StageResult("tickets-opening", "FAIL", ["why"], [{"name": "no_oversell"}], "detail", None, {"n": 1})
    assert StageResult.load(r.dump(tmp_path / "r.json")) == r


def test_a_spec_file_of_another_shape_is_refused_with_what_was_expected(tmp_path: Path) -> None:
    bad = tmp_path / "spec.json"
    bad.write_text(json.dumps({"case": "tickets", "scael": 1}))
    with pytest.raises(UsageError) as e:
        RunSpec.load(bad)
    assert "scael" in str(e.value) and "RunSpec" in str(e.value)
    with pytest.raises(UsageError):
        RunSpec.load(tmp_path / "missing.json")


def test_the_time_scale_auto_is_refused_for_a_case_whose_rates_do_not_grow_with_it() -> None:
    with pytest.raises(UsageError) as e:
        run_spec(build_parser().parse_args(["run", "tickets", "--time-scale", "auto"]))
    assert "--time-scale" in str(e.value) and "--scale auto" in str(e.value)
