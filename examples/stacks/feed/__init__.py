"""A news feed on django-activity-stream and PostgreSQL, served by gunicorn: ``python -m examples.stacks.feed``."""
