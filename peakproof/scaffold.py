"""``peakproof init CASE``: what a team adds to its own repository to run peakproof in its CI.

Three files and nothing else: a driver skeleton (for a service whose API is not the case's
contract), a GitHub Actions workflow and a GitLab CI file. Each CI runs the case's properties on
every push and the load on a schedule, against ``$STAGING_URL``; both run the same commands
(:func:`ci_commands`), and each job's JUnit XML goes to the CI's test report. Nothing existing is
overwritten: a file already there is a usage error naming it, and nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import __version__
from .case import Case
from .errors import UsageError


@dataclass(frozen=True)
class CiJob:
    """One CI job: when it runs, and its shell commands, in order."""

    name: str
    trigger: str  # "push" or "schedule"
    commands: tuple[str, ...]
    junit: str  # the JUnit XML it leaves for the CI's test report


def skeleton_class(case: Case) -> str:
    return "My" + case.name.title().replace("_", "")


def ci_commands(case: Case) -> tuple[CiJob, CiJob]:
    """The properties job (every push) and the load job (on a schedule): POSIX shell, the same on every CI.

    Variables: ``STAGING_URL`` (required), ``STAGING_ADMIN_TOKEN`` (the admin calls' token, if your
    service asks for one), ``PEAKPROOF_DRIVER`` (``peakproof_driver.py:MyTickets`` once the skeleton is
    filled in; unset while the service speaks the case's own contract), ``PROVIDER_URL`` (notifications:
    the providers' base URL your service delivers through), ``PEAKPROOF_PIP`` (what pip installs)."""
    def target(driver_flag: str) -> str:
        return ('--target-url "$STAGING_URL"'
                ' ${STAGING_ADMIN_TOKEN:+--admin-token "$STAGING_ADMIN_TOKEN"}'
                ' ${PEAKPROOF_DRIVER:+' + driver_flag + ' "$PEAKPROOF_DRIVER"}'
                + (' --provider-url "$PROVIDER_URL"' if case.needs_providers else ""))
    need = 'test -n "$STAGING_URL" || { echo "set STAGING_URL to your staging service\'s base URL"; exit 4; }'
    install = 'python -m pip install "${PEAKPROOF_PIP:-peakproof==' + __version__ + '}"'
    props_xml, load_xml = "reports/peakproof-properties.xml", "reports/peakproof-load.xml"
    properties = CiJob("peakproof-properties", "push", (
        need, install, "peakproof --version",
        f"HYPOTHESIS_PROFILE=ci pytest --pyargs peakproof.properties.test_{case.name} -p no:cacheprovider "
        f"{target('--peakproof-driver')} --junitxml={props_xml}"), props_xml)  # pytest-selenium owns --driver
    load = CiJob("peakproof-load", "schedule", (
        need, install, "peakproof --version",
        f"peakproof run {case.name} {target('--driver')} --skip-properties --report-dir reports --junit {load_xml}"), load_xml)
    return properties, load


def _yaml_str(s: str) -> str:
    """A YAML scalar that keeps the command as written (single-quoted: only ' itself is escaped)."""
    return "'" + s.replace("'", "''") + "'"


def github_workflow(case: Case) -> str:
    jobs = ci_commands(case)
    out = [f"# peakproof {__version__}: the {case.name} case's properties on every push, its load on a schedule,",
           "# against your staging service. Settings > Secrets and variables > Actions: the variable STAGING_URL;",
           "# STAGING_ADMIN_TOKEN (a secret) if your service asks for one; PEAKPROOF_DRIVER once the driver fits.",
           "name: peakproof", "on:", "  push:", "  schedule:", '    - cron: "17 3 * * *"  # the load: nightly',
           "  workflow_dispatch:", "env:", "  STAGING_URL: ${{ vars.STAGING_URL }}",
           "  STAGING_ADMIN_TOKEN: ${{ secrets.STAGING_ADMIN_TOKEN }}", "  PEAKPROOF_DRIVER: ${{ vars.PEAKPROOF_DRIVER }}",
           "  PEAKPROOF_PIP: ${{ vars.PEAKPROOF_PIP }}"]
    if case.needs_providers:
        out.append("  PROVIDER_URL: ${{ vars.PROVIDER_URL }}")
    out.append("jobs:")
    for job in jobs:
        when = ("github.event_name == 'push'" if job.trigger == "push" else
                "github.event_name == 'schedule' || github.event_name == 'workflow_dispatch'")
        out += [f"  {job.name}:", f"    if: {when}", "    runs-on: ubuntu-latest", "    steps:",
                "      - uses: actions/checkout@v4", "      - uses: actions/setup-python@v5",
                "        with:", '          python-version: "3.11"']
        out += [f"      - run: {_yaml_str(c)}" for c in job.commands]
        out += ["      - uses: actions/upload-artifact@v4", "        if: always()", "        with:",
                f"          name: {job.name}", "          path: reports/"]
    return "\n".join(out) + "\n"


def gitlab_ci(case: Case) -> str:
    jobs = ci_commands(case)
    out = [f"# peakproof {__version__}: the {case.name} case's properties on every push, its load on a schedule",
           "# (CI/CD > Schedules), against your staging service. Settings > CI/CD > Variables: STAGING_URL;",
           "# STAGING_ADMIN_TOKEN (masked) if your service asks for one; PEAKPROOF_DRIVER once the driver fits."]
    for job in jobs:
        rule = ('$CI_PIPELINE_SOURCE == "push"' if job.trigger == "push" else '$CI_PIPELINE_SOURCE == "schedule"')
        out += [f"{job.name}:", '  image: python:3.11', "  rules:", f"    - if: '{rule}'", "  script:"]
        out += [f"    - {_yaml_str(c)}" for c in job.commands]
        out += ["  artifacts:", "    when: always", "    paths:", "      - reports/", "    reports:",
                f"      junit: {job.junit}"]
    return "\n".join(out) + "\n"


def init(case: Case, where: Path) -> list[Path]:
    """Write the driver skeleton and the two CI files into ``where``; the paths written, in order."""
    from .drivertool import skeleton

    files = {where / "peakproof_driver.py": skeleton(case),
             where / ".github" / "workflows" / "peakproof.yml": github_workflow(case),
             where / "peakproof.gitlab-ci.yml": gitlab_ci(case)}
    gitlab_root = where / ".gitlab-ci.yml"
    if not gitlab_root.exists():  # a repository with its own GitLab CI includes ours (said below)
        files[gitlab_root] = "include:\n  - local: peakproof.gitlab-ci.yml\n"
    there = [str(p) for p in files if p.exists()]
    if there:
        raise UsageError("peakproof init", "a repository without peakproof's files yet", ", ".join(there),
                         "Nothing was written. Move them aside (or delete them) and run it again.")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(files)
