"""The report's figures, as PNG data URIs so report.html stays one self-contained file.

Labels come from the input (item ids, languages, source and signal names): they are drawn as
plain text, never as mathtext (`$...$` would be parsed, and crash on an unknown macro), and cut
to one short line so that no label can grow a figure past what can be drawn."""
from __future__ import annotations

import base64
import functools
import io
import math
import warnings
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from audit.records import Json, JsonObject

COLORS = {"seen": "#c0392b", "unseen": "#27ae60", "unknown": "#95a5a6", "known": "#d35400", "not_known": "#2980b9", "undetermined": "#95a5a6",
          "member": "#8e44ad", "non_member": "#16a085"}
EXPOSURE, KNOWLEDGE, MEMBERSHIP = ("seen", "unseen", "unknown"), ("known", "not_known", "undetermined"), ("member", "non_member", "undetermined")
MAX_GRID_ITEMS = 400
# Items up to which the grid labels each row with its id; past it, rows are numbered.
LABELLED_GRID_ITEMS = 60
NUMBERED_ROW_INCHES = 0.025
MAX_LABEL = 40
P = ParamSpec("P")
R = TypeVar("R")


def plain_text(function: Callable[P, R]) -> Callable[P, R]:
    """Draw with mathtext off: text is laid out when the figure is saved, so the setting must
    hold until then.  Missing glyphs (a script no installed font has) draw as boxes, silently."""

    @functools.wraps(function)
    def drawn(*args: P.args, **kwargs: P.kwargs) -> R:
        with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from (current )?font")
            warnings.filterwarnings("ignore", message=r"Matplotlib currently does not support")
            return function(*args, **kwargs)

    return drawn


def label(value: Json, limit: int = MAX_LABEL) -> str:
    """A string from the input as one short line of plain text for a tick, legend or title."""
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _data_uri(figure: plt.Figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


@plain_text
def exposure_bars(per_language: dict[str, dict[str, int]], tags: tuple[str, ...] = EXPOSURE) -> str:
    """Share of seen / unseen / unknown variants per language (or of known / not_known /
    undetermined ones, or of member / non_member / undetermined), as stacked bars."""
    languages = list(per_language)
    figure, axis = plt.subplots(figsize=(max(5, 0.55 * len(languages) + 2), 3.2))
    bottom = np.zeros(len(languages))
    for tag in tags:
        shares = np.array([per_language[lang][tag] / max(per_language[lang]["total"], 1) for lang in languages])
        axis.bar(range(len(languages)), shares, bottom=bottom, color=COLORS[tag], label=tag)
        bottom += shares
    axis.set_xticks(range(len(languages)), [label(lang) for lang in languages])
    axis.set_ylim(0, 1)
    axis.set_ylabel("share of items")
    axis.legend(loc="upper center", fontsize=8, frameon=False, ncols=3, bbox_to_anchor=(0.5, 1.14))
    return _data_uri(figure)


@plain_text
def exposure_grid(rows: list[JsonObject], languages: list[str]) -> str | None:
    """Item x language exposure, one cell per variant; too many items make it unreadable.  Up
    to `LABELLED_GRID_ITEMS` items each row is labelled with its item id; past that the rows are
    numbered in the items table's order (which holds the ids and links), since laying out a
    label per row took about 7 ms an item (2.5 s of a 384-item report) and drew a picture
    taller than a screen, no overview."""
    if not rows or len(rows) > MAX_GRID_ITEMS:
        return None
    codes = {"seen": 0, "unseen": 1, "unknown": 2}
    grid = np.full((len(rows), len(languages)), np.nan)
    for i, row in enumerate(rows):
        for j, lang in enumerate(languages):
            if lang in row["tags"]:
                grid[i, j] = codes[row["tags"][lang]]
    colormap = matplotlib.colors.ListedColormap([COLORS["seen"], COLORS["unseen"], COLORS["unknown"]]).with_extremes(bad="white")
    labelled = len(rows) <= LABELLED_GRID_ITEMS
    height = 0.16 * len(rows) + 1 if labelled else NUMBERED_ROW_INCHES * len(rows) + 1
    figure, axis = plt.subplots(figsize=(max(4, 0.45 * len(languages) + 1.5), max(2.5, height)))
    # Numbered rows sit at 1..n: a reader counts items from one.
    extent = None if labelled else (-0.5, len(languages) - 0.5, len(rows) + 0.5, 0.5)
    axis.imshow(np.ma.masked_invalid(grid), cmap=colormap, vmin=0, vmax=2, aspect="auto", interpolation="nearest", extent=extent)
    axis.set_xticks(range(len(languages)), [label(lang) for lang in languages])
    axis.xaxis.tick_top()
    if labelled:
        axis.set_yticks(range(len(rows)), [label(r["item_id"]) for r in rows], fontsize=6)
        axis.set_ylabel("item")
    else:
        axis.set_ylabel("item, in the items table's order")
    return _data_uri(figure)


@plain_text
def transfer_heatmap(pairs: list[JsonObject], metric: str) -> str | None:
    """Source x target matrix of a metric, annotated, like ECLeKTic's Figure 5."""
    values = [p for p in pairs if p[metric]["value"] is not None]
    if not values:
        return None
    sources = sorted({p["source"] for p in pairs})
    targets = sorted({p["target"] for p in pairs})
    matrix = np.full((len(sources), len(targets)), np.nan)
    for pair in values:
        matrix[sources.index(pair["source"]), targets.index(pair["target"])] = pair[metric]["value"]
    figure, axis = plt.subplots(figsize=(max(4, 0.6 * len(targets) + 2), max(1.8, 0.55 * len(sources) + 1.2)))
    image = axis.imshow(matrix, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    for (i, j), value in np.ndenumerate(matrix):
        if not math.isnan(value):
            axis.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7, color="white" if value < 0.6 else "black")
    axis.set_xticks(range(len(targets)), [label(t) for t in targets])
    axis.set_yticks(range(len(sources)), [label(t) for t in sources])
    axis.set_xlabel("target language")
    axis.set_ylabel("source language")
    axis.set_title(metric.replace("_", " "))
    figure.colorbar(image, ax=axis, fraction=0.03)
    return _data_uri(figure)


def combination_colors(split: dict[str, JsonObject]) -> dict[str, str]:
    """A colour per set of signals that saw a target (the seen colour for all of them), and the
    unseen and unknown colours for none and `unknown`, the last two strata."""
    *seen, nothing, unknown = split
    palette = [matplotlib.colors.to_hex(matplotlib.colormaps["tab10"](i)) for i in (1, 4, 0, 5, 6, 8, 9)]
    colors = {name: palette[k % len(palette)] for k, name in enumerate(seen[:-1])}
    return colors | {seen[-1]: COLORS["seen"], nothing: COLORS["unseen"], unknown: COLORS["unknown"]}


@plain_text
def strata_bars(split: dict[str, JsonObject], title: str, colors: dict[str, str] | None = None) -> str | None:
    """Overall success and transfer score per stratum, with bootstrap intervals."""
    strata = [name for name, stats in split.items() if stats["overall_success"]["n"]]
    if not strata:
        return None
    metrics = ("overall_success", "transfer_score")
    figure, axis = plt.subplots(figsize=(5.5, 3.2))
    width = 0.8 / len(strata)
    for k, stratum in enumerate(strata):
        values, lower, upper = [], [], []
        for metric in metrics:
            stat = split[stratum][metric]
            value = stat["value"] if stat["value"] is not None else np.nan
            interval = stat.get("ci_bootstrap") or [value, value]
            values.append(value)
            lower.append(max(0.0, value - interval[0]) if not math.isnan(value) else 0)
            upper.append(max(0.0, interval[1] - value) if not math.isnan(value) else 0)
        positions = np.arange(len(metrics)) + (k - (len(strata) - 1) / 2) * width
        axis.bar(positions, values, width, yerr=[lower, upper], capsize=3, label=f"{label(stratum)} (n={split[stratum]['overall_success']['n']})", color=(colors or COLORS).get(stratum))
    axis.set_xticks(range(len(metrics)), [m.replace("_", " ") for m in metrics])
    axis.set_ylim(0, 1)
    axis.set_title(label(title, 2 * MAX_LABEL))
    axis.legend(fontsize=8, frameon=False)
    return _data_uri(figure)


def auroc_uri(per_group: dict[str, dict[str, float]], title: str) -> str:
    """`auroc_bars` as a data URI, for the report."""
    return "data:image/png;base64," + base64.b64encode(auroc_bars(per_group, title)).decode("ascii")


@plain_text
def auroc_bars(per_group: dict[str, dict[str, float]], title: str) -> bytes:
    """AUROC of each membership score per group (language or script), as grouped bars, PNG: 0.5
    is chance, 1 a perfect split of members from the rest."""
    groups = list(per_group)
    scores = list(dict.fromkeys(score for figures in per_group.values() for score in figures))
    width = 0.8 / max(len(scores), 1)
    figure, axis = plt.subplots(figsize=(max(5, 0.7 * len(groups) + 2), 3.4))
    for k, score in enumerate(scores):
        values = [per_group[group].get(score, math.nan) for group in groups]
        axis.bar(np.arange(len(groups)) + (k - (len(scores) - 1) / 2) * width, values, width, label=label(score))
    axis.axhline(0.5, color="#888888", linewidth=0.8, linestyle="--")
    axis.set_xticks(range(len(groups)), [label(group) for group in groups])
    axis.set_ylim(0, 1)
    axis.set_ylabel("AUROC")
    axis.set_title(label(title, 80), fontsize=9)
    if scores:
        axis.legend(loc="lower center", fontsize=7, frameon=False, ncols=min(len(scores), 5))
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()

