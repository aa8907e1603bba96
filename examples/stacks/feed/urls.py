from django.urls import path

from .news import views

urlpatterns = [
    path("api/health/", views.health),
    path("api/users/<str:username>/following/", views.follow),
    path("api/users/<str:username>/following/<str:followee>/", views.unfollow),
    path("api/users/<str:username>/home/", views.home),
    path("api/posts/", views.create_post),
    path("api/posts/<str:post_id>/", views.delete_post),
    path("api/admin/follows/bulk/", views.bulk_follow),
]
