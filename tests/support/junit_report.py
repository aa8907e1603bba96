"""Reading a JUnit XML report the way GitLab does, after validating it against tests/support/junit.xsd
(GitLab's parser's structure: peakproof.junit's docstring says where it comes from)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

SCHEMA_FILE = Path(__file__).with_name("junit.xsd")


def validated(path: str | Path) -> dict[tuple[str, str], tuple[str, str]]:
    """(classname, name) -> (status, the text GitLab shows) of every test case, once ``path`` is valid.
    GitLab takes failure, then error, then skipped; a test case with none of them is a success."""
    import xmlschema  # the test extra

    xmlschema.XMLSchema(str(SCHEMA_FILE)).validate(str(path))
    out = {}
    for tc in ET.parse(path).getroot().iter("testcase"):
        for tag, status in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            el = tc.find(tag)
            if el is not None:
                out[(tc.get("classname", ""), tc.get("name", ""))] = (status, f"{el.get('message', '')}\n"
                                                                              f"{el.text or ''}")
                break
        else:
            out[(tc.get("classname", ""), tc.get("name", ""))] = ("success", "")
    return out


def by_name(path: str | Path) -> dict[str, str]:
    """Test case name -> status (the last of a name wins: names repeat only across stages)."""
    return {name: status for (_, name), (status, _) in validated(path).items()}
