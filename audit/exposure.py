"""The exposure policy: from evidence to `seen` / `unseen` / `unknown`, per (item, language)
and per item, always with the evidence that decided.

`unknown` is its own answer: a variant whose evidence could not be gathered is never `unseen`.
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from audit.evidence import FAILED, OK, Evidence

SEEN, UNSEEN, UNKNOWN = "seen", "unseen", "unknown"
SOURCE_ONLY, TARGET_SEEN, UNSEEN_EVERYWHERE = "seen_in_source_only", "seen_in_target", "unseen_everywhere"


class PolicyError(Exception):
    """The policy file is unusable; the message names the file and key."""


@dataclass(frozen=True)
class Policy:
    name: str
    source: str
    settings: dict[str, Any]

    @property
    def rules(self) -> dict[str, dict[str, float]]:
        return {name: {k: v for k, v in table.items() if v is not False} for name, table in self.settings.get("rules", {}).items()}

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.settings, sort_keys=True).encode()).hexdigest()[:16]

    def section(self, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.settings.get(name, {}))


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        merged[key] = _merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return merged


def _validate_rules(rules: Any, source: str) -> None:
    if not isinstance(rules, dict):
        raise PolicyError(f"{source}: key 'rules' must be a table of fields")
    for field_name, table in rules.items():
        if not isinstance(table, dict):
            raise PolicyError(f"{source}: key 'rules.{field_name}' must be a table of figure = threshold")
        for figure, threshold in table.items():
            if threshold is not False and (isinstance(threshold, bool) or not isinstance(threshold, int | float)):
                raise PolicyError(f"{source}: key 'rules.{field_name}.{figure}' must be a number or false, got {threshold!r}")


def load_policy(path: Path | None = None) -> Policy:
    """The built-in policy, with the user's file (if any) merged over it key by key."""
    defaults = tomllib.loads(resources.files("audit").joinpath("data/policy.toml").read_text(encoding="utf-8"))
    if path is None:
        return Policy(name=defaults["name"], source="built-in", settings=defaults)
    try:
        override = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PolicyError(f"{path}: no such policy file") from None
    except tomllib.TOMLDecodeError as error:
        raise PolicyError(f"{path}: not valid TOML ({error})") from None
    unknown = set(override) - set(defaults)
    if unknown:
        raise PolicyError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}; expected {', '.join(sorted(defaults))}")
    settings = _merge(defaults, override)
    _validate_rules(settings["rules"], str(path))
    return Policy(name=str(settings.get("name", path)), source=str(path), settings=settings)


def build_config(cls: type, section: dict[str, Any], where: str) -> Any:
    """A signal's config dataclass from its policy section, naming any key it does not know."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = set(section) - known
    if unknown:
        raise PolicyError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; expected {', '.join(sorted(known))}")
    return cls(**section)


@dataclass
class Decision:
    exposure: str
    decided_by: list[dict[str, Any]] = field(default_factory=list)


def decide(policy: Policy, evidence: list[Evidence]) -> Decision:
    """Apply every rule to the evidence of one language variant.

    A figure the backend could only bound (`figures.bounds`) fires when its lowest value meets
    the threshold and passes when its highest does not; in between the rule is undecided, and
    an undecided rule makes the variant `unknown`, as a failed check does."""
    by_field = {e.field: e for e in evidence}
    fired, checked, missing = [], [], []
    for field_name, thresholds in policy.rules.items():
        found = by_field.get(field_name)
        if found is None or found.status not in (OK, FAILED):
            continue
        if found.status == FAILED:
            missing.append({"field": field_name, "signal": found.signal, "status": FAILED, "error": found.error})
            continue
        bounds = found.figures.get("bounds", {})
        for figure, threshold in thresholds.items():
            value = found.figures.get(figure)
            if value is None:
                continue
            check = {"field": field_name, "signal": found.signal, "figure": figure, "value": value, "threshold": threshold}
            lowest, highest = bounds.get(figure, (value, value))
            if lowest >= threshold:
                fired.append(check)
            elif highest < threshold:
                checked.append(check)
            else:
                missing.append({**check, "status": "bounded", "bounds": [lowest, highest]})
    if fired:
        return Decision(SEEN, fired)
    if missing:
        return Decision(UNKNOWN, missing)
    if not checked:
        return Decision(UNKNOWN, [{"reason": "no text that any rule applies to"}])
    return Decision(UNSEEN, checked)


def item_exposure(source_lang: str, tags: dict[str, str]) -> str:
    """One word for the item: where its fact was seen, relative to its source language."""
    targets = {lang: tag for lang, tag in tags.items() if lang != source_lang}
    if any(tag == SEEN for tag in targets.values()):
        return TARGET_SEEN
    if any(tag == UNKNOWN for tag in tags.values()):
        return UNKNOWN
    if tags.get(source_lang) == SEEN:
        return SOURCE_ONLY
    return UNSEEN_EVERYWHERE
