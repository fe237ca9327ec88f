"""Model probes: what a model knows, asked of the model itself, beside what its corpus holds.

A probe is a chat request to a model (`generation`), answered by a backend (a local
transformers model, `local`, or any OpenAI-compatible endpoint, `remote`) through a persistent
cache (`cache`), built from localised templates (`prompts`) and scored without a model
(`scoring`) or by a judge model (`judge`).  The probe signal (`audit.signals.probe`) turns the
scores into evidence; the policy turns that evidence into a per-language `knowledge` verdict,
kept apart from corpus exposure.
"""
