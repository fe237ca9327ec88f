"""The probe models audit jobs may name, as the server offers them."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from audit.probes.cache import CachedModel
from audit.probes.prompts import Templates
from audit.signals.probe import Prober


class ModelHealth(BaseModel):
    """For `/health`: what a served model is, and how its prompts were answered since startup."""

    name: str
    model_id: str
    backend: str | None
    offline: bool
    answered: dict[str, int]


def model_health(model: CachedModel) -> ModelHealth:
    backend = model.describe().get("backend")
    return ModelHealth(name=model.name, model_id=model.model_id, backend=str(backend) if backend is not None else None, offline=model.offline, answered=model.answered())


@dataclass(frozen=True)
class ProbeModels:
    """The probe models jobs may name, one judge for all of them (None: each judges itself),
    the prompt templates and one reference model for the membership signal (None: none)."""

    models: dict[str, CachedModel]
    judge: CachedModel | None
    templates: Templates
    prompts_file: Path | None = None
    reference: CachedModel | None = None

    def prober(self, name: str) -> Prober:
        model = self.models[name]
        return Prober(model, self.judge or model, self.templates, self.prompts_file, reference=self.reference)
