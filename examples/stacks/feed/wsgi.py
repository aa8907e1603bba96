"""The WSGI entry point gunicorn serves: ``examples.stacks.feed.wsgi:application``."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "examples.stacks.feed.settings")
application = get_wsgi_application()
