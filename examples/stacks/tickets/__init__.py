"""A ticket shop on PostgreSQL, built the way a team builds one: a Flask app under gunicorn (worker
processes with threads), psycopg 3, a periodic expiry job as its own process. Its API is its own
(``/shop/api/...``); peakproof drives it through ``driver.py``. See README.md beside this file.

    python -m examples.stacks.tickets [--defect check-then-act] [--folder DIR] [--port N]
"""
