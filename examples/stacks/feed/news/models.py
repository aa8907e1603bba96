from django.conf import settings
from django.db import models
from django.utils import timezone


class Post(models.Model):
    """A post; publishing it sends the actstream action ``<author> posted <post>``."""

    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="posts")
    text = models.TextField()
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    def __str__(self) -> str:
        return f"post {self.pk} by {self.author_id}"
