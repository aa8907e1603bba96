"""Beacon: a notifications service on Flask (gunicorn) + Celery 5 on Redis + PostgreSQL (psycopg 3).

Its API is its own (``/api/v2``); ``driver.py`` turns peakproof's notifications operations into it.
Start it with ``python -m examples.stacks.notifications --provider-url URL``: README.md.
"""
