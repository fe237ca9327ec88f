"""The results as Markdown tables, as they go into bench/README.md."""
from __future__ import annotations

from typing import Any

SHOWN = 12  # exceptions listed per table


def _cost(run: dict[str, Any] | None) -> str:
    if not run:
        return "| – | – | – "
    return f"| {run['seconds']} s | {run['cpu_seconds']} s | {run['peak_pss_mib']:,.0f} MiB "


def corpora(rows: list[dict[str, Any]]) -> list[str]:
    out = ["| corpus | files | languages | build (wall) | CPU | peak PSS |", "|---|---|---|---|---|---|"]
    out += [f"| {r['name']} | {len(r['files'])} | {', '.join(r['languages'])} {_cost(r['build'])}|" for r in rows]
    return out


def _absent(row: dict[str, Any]) -> str:
    langs = row["absent"]["by_language"]
    seen = [f"{lang} {v['seen']}/{v['variants']}" for lang, v in langs.items() if v["seen"]]
    return ", ".join(seen) or "none"


def real(rows: list[dict[str, Any]]) -> list[str]:
    out = [
        "| benchmark | corpus | variants | of languages the corpus lacks | of those `seen` | `seen` by language (seen/variants) | `seen` in all | deciding evidence in a document of the variant's language | check (wall) | CPU | peak PSS |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.get("refused"):
            out.append(f"| {r['case']} | {r['corpus']} | refused: {r['refused']} | | | | | {_cost(r['run'])}|")
            continue
        d = r["deciding"]
        share = f"{d['own_language']}/{d['seen']} ({100 * d['share']:.1f}%)" if d["seen"] else "–"
        out.append(
            f"| {r['case']} | {r['corpus']} | {r['variants']} | {r['absent']['variants']} | **{r['absent']['seen']}** | {_absent(r)} | {d['seen']} | {share} {_cost(r['run'])}|"
        )
    return out


def exceptions(rows: list[dict[str, Any]]) -> list[str]:
    out = []
    for r in rows:
        listed = r.get("deciding", {}).get("exceptions", [])
        for e in listed[:SHOWN]:
            checks = "; ".join(
                f"{c['signal']} {c['field']} {c['figure']}={c['value']} in {c['documents'] or 'no document named'}" + (f" (tool: {', '.join(c['tool_says'])})" if c["tool_says"] else "")
                for c in e["checks"]
            )
            out.append(f"- {r['case']} / {r['corpus']}: item {e['item']} {e['lang']} ({e['role']}): {checks}")
        if len(listed) > SHOWN:
            out.append(f"- {r['case']} / {r['corpus']}: … and {len(listed) - SHOWN} more (in the JSON)")
    return out or ["- none"]


def short(rows: list[dict[str, Any]]) -> list[str]:
    out = [
        "| benchmark | corpus | questions under 40 characters | near-duplicate rule fired on one | of those no copy of the question (false) | of those a hash collision | n-gram rule fired on one |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        s = r.get("short")
        if s:
            out.append(f"| {r['case']} | {r['corpus']} | {s['short_questions']} | {s['near_duplicate_fired']} | **{s['near_duplicate_false']}** | {s.get('hash_collisions', '–')} | {s['ngram_fired']} |")
    listed = [(r, f) for r in rows if r.get("short") for f in r["short"]["false"] + r["short"]["ngram"]]
    out += [""] + [f"- {r['case']} / {r['corpus']}: {f['item']} {f['lang']} “{f['question']}” {f['figure']}={f['value']}" + (f", as text {f['text_containment']} ({f['shared_as_text']} shingles)" if "text_containment" in f else "") for r, f in listed[:SHOWN * 2]]
    return out


def elsewhere(rows: list[dict[str, Any]]) -> list[str]:
    out = ["| benchmark | corpus | variants not `seen` but seen in other languages | those languages (variants) |", "|---|---|---|---|"]
    for r in rows:
        e = r.get("elsewhere")
        if "absent" in r:
            shown = f"{e['variants']} | {', '.join(f'{lang} {n}' for lang, n in e['languages'].items()) or '–'}" if e else "not recorded | –"
            out.append(f"| {r['case']} | {r['corpus']} | {shown} |")
    return out


def planted(result: dict[str, Any]) -> list[str]:
    out = ["| kind | planted | `seen` | recall | through its own planted copy |", "|---|---|---|---|---|"]
    for kind, k in result["kinds"].items():
        recall = f"{k['recall']:.2f}" if k["recall"] is not None else "–"
        out.append(f"| {kind} | {k['planted']} | {k['seen']} | **{recall}** | {k['through_own_copy']} |")
    run = result["run"]
    out.append(f"\nUnplanted variants `seen`: **{result['false_seen']}** of {result['unplanted']} (the check: {run['seconds']} s wall, {run['cpu_seconds']} s CPU, peak PSS {run['peak_pss_mib']:,.0f} MiB)")
    out += [f"- item {f['item']} {f['lang']} ({f['role']}): {', '.join(f['documents'][:4])}" for f in result["false"][:SHOWN]]
    d = result.get("deciding")
    if d and d["seen"]:
        out.append(f"\n`seen` variants whose every deciding check points to a document of their language: {d['own_language']}/{d['seen']} ({100 * d['share']:.1f}%)")
    return out


def document(results: dict[str, Any]) -> str:
    parts = [["### Corpora", "", *corpora(results["corpora"])]]
    if results.get("real"):
        parts.append(["### Real benchmarks", "", *real(results["real"]), "", "Exceptions (a `seen` variant decided by a check whose documents are not in its language):", "", *exceptions(results["real"])])
        parts.append(["### Short questions", "", *short(results["real"])])
        parts.append(["### Seen only in other languages (the tool's `seen_in_languages`)", "", *elsewhere(results["real"])])
    if results.get("planted"):
        parts.append(["### Planted truth", "", *planted(results["planted"])])
    return "\n\n".join("\n".join(p) for p in parts) + "\n"
