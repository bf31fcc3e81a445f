"""Alias kept for users' imports: `kevin.service` is kevin.evaluator.service (`EvaluationService`)."""

from kevin.evaluator.service import *  # noqa: F403
from kevin.evaluator.service import EvaluationService

__all__ = ["EvaluationService"]
