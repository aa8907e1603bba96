"""What makes peakproof installable like the tools it stands beside: the wheel's package map, the
scenarios and properties found from the package, the pytest11 entry point, ``--version``, and
``peakproof init``'s files (the wheel itself is built in tests/served/test_wheel.py)."""

from __future__ import annotations

import importlib
import importlib.metadata
import tomllib
from pathlib import Path

import pytest
import yaml

import peakproof
from peakproof.case import shipped_file
from peakproof.cases import get_case
from peakproof.cli import main
from peakproof.errors import UsageError
from peakproof.scaffold import ci_commands, init

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
MAPPED = {"targets": "peakproof.targets", "loadtests": "peakproof.loadtests", "properties": "peakproof.properties"}


def packages_on_disk() -> set[str]:
    """Every package of the checkout, named as the wheel installs it."""
    names = set()
    for init_file in ROOT.glob("peakproof/**/__init__.py"):
        names.add(".".join(init_file.parent.relative_to(ROOT).parts))
    for folder, name in MAPPED.items():
        for init_file in (ROOT / folder).glob("**/__init__.py"):
            names.add(".".join([name, *init_file.parent.relative_to(ROOT / folder).parts]))
    return names


def test_the_wheel_lists_every_package_and_maps_the_top_level_folders_under_peakproof() -> None:
    setuptools = PYPROJECT["tool"]["setuptools"]
    assert set(setuptools["packages"]) == packages_on_disk()  # a new subpackage left out would be missing
    assert setuptools["package-dir"] == {name: folder for folder, name in MAPPED.items()}
    assert not [p for p in setuptools["packages"] if not p.startswith("peakproof")]  # no top-level "targets"


def test_the_properties_and_scenarios_come_from_the_folder_when_it_has_them_else_from_the_package(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a team's repository: no loadtests/ of its own
    shipped = shipped_file("loadtests", "tickets.py")
    assert shipped.is_file() and shipped.parent == Path(importlib.import_module("peakproof.loadtests").__path__[0])
    assert get_case("feed").properties_file().parent == Path(importlib.import_module("peakproof.properties").__path__[0])
    (tmp_path / "loadtests").mkdir()
    (tmp_path / "loadtests" / "tickets.py").write_text("# the team's own edited scenario\n")
    assert shipped_file("loadtests", "tickets.py") == tmp_path / "loadtests" / "tickets.py"
    assert shipped_file("loadtests", "feed.py") == shipped.with_name("feed.py")  # only the file it has
    with pytest.raises(UsageError, match="in the installed package"):
        shipped_file("loadtests", "no_such_case.py")


def test_the_pytest_plugin_is_registered_by_entry_point_and_version_is_stated_once(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert PYPROJECT["project"]["entry-points"]["pytest11"] == {"peakproof": "peakproof.pytest_plugin"}
    found = [ep for ep in importlib.metadata.entry_points(group="pytest11") if ep.value == "peakproof.pytest_plugin"]
    assert found, "reinstall the checkout (pip install -e .): its entry points are the installed metadata's"
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.strip() == f"peakproof {peakproof.__version__}"
    assert f"## {peakproof.__version__} " in (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")


def workflow_commands(path: Path) -> dict[str, list[str]]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {name: [s["run"] for s in job["steps"] if "run" in s] for name, job in doc["jobs"].items()}


def gitlab_commands(path: Path) -> dict[str, list[str]]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {name: job["script"] for name, job in doc.items() if isinstance(job, dict) and "script" in job}


@pytest.mark.parametrize("case", ["tickets", "notifications", "feed"])
def test_init_writes_a_driver_and_ci_jobs_that_run_the_same_commands_on_both_ci_systems(tmp_path: Path,
                                                                                        case: str) -> None:
    written = init(get_case(case), tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in written) == [
        ".github/workflows/peakproof.yml", ".gitlab-ci.yml", "peakproof.gitlab-ci.yml", "peakproof_driver.py"]
    compile((tmp_path / "peakproof_driver.py").read_text(), "peakproof_driver.py", "exec")
    jobs = {job.name: list(job.commands) for job in ci_commands(get_case(case))}
    assert workflow_commands(tmp_path / ".github" / "workflows" / "peakproof.yml") == jobs
    assert gitlab_commands(tmp_path / "peakproof.gitlab-ci.yml") == jobs
    props, load = jobs["peakproof-properties"], jobs["peakproof-load"]
    assert f"pytest --pyargs peakproof.properties.test_{case}" in props[-1] and '"$STAGING_URL"' in props[-1]
    assert load[-1].startswith(f"peakproof run {case} ") and "--junit reports/peakproof-load.xml" in load[-1]
    assert ("--provider-url" in props[-1]) is (case == "notifications")
    gitlab = yaml.safe_load((tmp_path / "peakproof.gitlab-ci.yml").read_text())
    assert gitlab["peakproof-properties"]["artifacts"]["reports"]["junit"] == "reports/peakproof-properties.xml"
    assert yaml.safe_load((tmp_path / ".gitlab-ci.yml").read_text()) == {
        "include": [{"local": "peakproof.gitlab-ci.yml"}]}


def test_init_overwrites_nothing_and_leaves_a_repository_s_own_gitlab_ci_alone(tmp_path: Path) -> None:
    (tmp_path / ".gitlab-ci.yml").write_text("test:\n  script: [make test]\n")
    written = init(get_case("tickets"), tmp_path)
    assert tmp_path / ".gitlab-ci.yml" not in written
    assert (tmp_path / ".gitlab-ci.yml").read_text() == "test:\n  script: [make test]\n"
    (tmp_path / "peakproof.gitlab-ci.yml").write_text("# edited by the team\n")
    (tmp_path / "peakproof_driver.py").unlink()
    with pytest.raises(UsageError, match="peakproof.gitlab-ci.yml") as refused:
        init(get_case("tickets"), tmp_path)
    assert "Nothing was written" in str(refused.value)
    assert not (tmp_path / "peakproof_driver.py").exists()  # nothing written, not even what was missing
    assert (tmp_path / "peakproof.gitlab-ci.yml").read_text() == "# edited by the team\n"
