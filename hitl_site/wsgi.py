"""WSGI config for the hitl_site project."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_site.settings")

application = get_wsgi_application()
