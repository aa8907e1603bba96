"""Django settings of the feed stack: a small news feed on django-activity-stream and PostgreSQL.

Everything that differs per deployment comes from the environment, as the launcher
(``python -m examples.stacks.feed``) sets it:

* ``FEED_DATABASE_URL``: the PostgreSQL URI (``postgresql://user:@/db?host=/socket/dir``);
* ``FEED_PAGINATION``: ``keyset`` (the default: the correct feed) or ``page-numbers`` (the
  defect: Django's ``Paginator`` with ``?page=N``);
* ``FEED_DESIGN``: ``pull`` (the default: actstream's stream, merged on read) or ``fanout-worker``
  (timelines written by the worker, ``fanout_worker.py``);
* ``FEED_DEFECT``: ``delete-lost-to-fanout`` (fanout-worker only: the worker's fan-out trusts what it
  read of the post at its batch's start, and writes a post deleted meanwhile back);
* ``FEED_SECRET_KEY``: signs the feed's cursors.
"""

from __future__ import annotations

import os
from urllib.parse import parse_qs, unquote, urlsplit


def _database(url: str) -> dict:
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    return {
        "ENGINE": "django.db.backends.postgresql",  # psycopg 3
        "NAME": unquote(parts.path.lstrip("/")) or "postgres",
        "USER": unquote(parts.username or "postgres"),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": query.get("host", [parts.hostname or ""])[0],  # a unix socket's folder, or a host name
        "PORT": str(parts.port or ""),
        "CONN_MAX_AGE": 60,  # one connection per gunicorn worker, kept between requests
        "CONN_HEALTH_CHECKS": True,
    }


SECRET_KEY = os.environ.get("FEED_SECRET_KEY", "feed-stack-example-not-a-secret")
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "examples.stacks.feed.news",
    "actstream",  # after the app whose models it streams (actstream's registry wants them loaded)
]
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]
ROOT_URLCONF = "examples.stacks.feed.urls"
WSGI_APPLICATION = "examples.stacks.feed.wsgi.application"
DATABASES = {"default": _database(os.environ.get("FEED_DATABASE_URL", "postgresql://postgres:@127.0.0.1:5432/postgres"))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
APPEND_SLASH = False
DATA_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024 * 1024  # a bulk follow body: tens of thousands of pairs

FEED_PAGINATION = os.environ.get("FEED_PAGINATION", "keyset")
if FEED_PAGINATION not in ("keyset", "page-numbers"):
    raise ValueError(f"FEED_PAGINATION must be keyset or page-numbers; got {FEED_PAGINATION!r}")

FEED_DESIGN = os.environ.get("FEED_DESIGN", "pull")
if FEED_DESIGN not in ("pull", "fanout-worker"):
    raise ValueError(f"FEED_DESIGN must be pull or fanout-worker; got {FEED_DESIGN!r}")
FEED_DEFECT = os.environ.get("FEED_DEFECT", "")
if FEED_DEFECT not in ("", "delete-lost-to-fanout") or (FEED_DEFECT and FEED_DESIGN != "fanout-worker"):
    raise ValueError(f"FEED_DEFECT must be empty or delete-lost-to-fanout (fanout-worker only); got {FEED_DEFECT!r}")

ACTSTREAM_SETTINGS = {"FETCH_RELATIONS": True, "USE_JSONFIELD": False}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django.request": {"handlers": ["console"], "level": "ERROR"}},
}
