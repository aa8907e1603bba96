"""The URL properties catch an offset pager (Django's ``Paginator`` with ``?page=n``) by themselves: they
write between a reader's page reads, as the load does (``tests/support/cursor_drivers.py:OffsetPages``
over the correct example feed). Without that interleaving they had passed such a service."""

from __future__ import annotations

import os
import subprocess
import sys


from tests.support.runs import ROOT, service




def test_the_url_properties_fail_a_feed_that_pages_by_offset_naming_pages_do_not_skip_or_repeat() -> None:
    with service("feed") as (url, _):
        out = subprocess.run([sys.executable, "-m", "pytest", "properties/test_feed.py", "-q", "-p", "no:cacheprovider",
                              "-k", "over_http", "--target-url", url, "--without", "inbox_size",
                              "--driver", "tests/support/cursor_drivers.py:OffsetPages"],
                             cwd=ROOT, capture_output=True, text=True, timeout=600,
                             env=dict(os.environ, HYPOTHESIS_PROFILE="ci"))
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    assert "pages_do_not_skip_or_repeat: FAIL" in out.stdout, out.stdout[-3000:]
