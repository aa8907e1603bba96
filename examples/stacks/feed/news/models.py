from django.conf import settings
from django.db import models
from django.utils import timezone


class Post(models.Model):
    """A post; publishing it sends the actstream action ``<author> posted <post>`` (the pull design), or queues
    its fan-out (the fanout-worker design, where a delete only marks it: the worker takes it out of timelines)."""

    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="posts")
    text = models.TextField()
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    deleted = models.BooleanField(default=False)  # fanout-worker design: set by the worker's delete job

    def __str__(self) -> str:
        return f"post {self.pk} by {self.author_id}"


class TimelineEntry(models.Model):
    """fanout-worker design: a copy of a post in one home timeline (its followers' and its author's), written
    by the worker; the home timeline reads these and nothing else."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    post = models.ForeignKey(Post, on_delete=models.CASCADE, related_name="+")
    # the post's author, copied: an unfollow removes the author's entries from one timeline
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    ts = models.DateTimeField()  # the post's created_at: the timeline's order

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "post"], name="one_entry_a_post_a_timeline")]
        indexes = [models.Index(fields=["owner", "-ts", "-post"], name="timeline_keyset")]


class Job(models.Model):
    """fanout-worker design: work the web process leaves to the worker (``fanout_worker.py``), which claims
    it with ``SELECT ... FOR UPDATE SKIP LOCKED`` and deletes it in the same transaction once done."""

    FANOUT, DELETE, UNFOLLOW = "fanout", "delete", "unfollow"
    kind = models.CharField(max_length=16, choices=[(k, k) for k in (FANOUT, DELETE, UNFOLLOW)])
    post = models.ForeignKey(Post, null=True, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.CASCADE, related_name="+")
    other = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.CASCADE, related_name="+")
    at = models.DateTimeField(default=timezone.now)  # an unfollow's moment: what it removes was before it
