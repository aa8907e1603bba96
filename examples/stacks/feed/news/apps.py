from django.apps import AppConfig


class NewsConfig(AppConfig):
    name = "examples.stacks.feed.news"
    label = "news"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from actstream import registry
        from django.contrib.auth import get_user_model

        registry.register(get_user_model(), self.get_model("Post"))
