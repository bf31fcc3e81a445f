"""Alias kept for users' imports: `kevin.ray_service` is kevin.evaluator.ray_service (`RayEvaluationService`)."""

from kevin.evaluator.ray_service import *  # noqa: F403
from kevin.evaluator.ray_service import RayEvaluationService

__all__ = ["RayEvaluationService"]
