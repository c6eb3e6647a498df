"""Repo-Prompts: a generated checkpoint catalog and requests with oracle ground truth (docs/repo-prompts.md)."""

from personalq.checkin.repo_prompts.generator import DEFAULT_NOW, RepoPromptsSet, generate

__all__ = ["DEFAULT_NOW", "RepoPromptsSet", "generate"]
