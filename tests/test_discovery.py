"""Live index discovery (`audit corpora --live`) and the shipped registry's names: against
servers on 127.0.0.1 answering listings and unknown names as the public services do
(tests/replay/listing.py), and against a real `audit serve`."""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner
from hostile_http import start
from manual import page
from replay.listing import INFINI_GRAM_INDEXES, MINI_INDEXES, S3_UNDESCRIBED, Flavour, ListingServer
from test_server import Served, start_server

from audit.cli import main
from audit.corpora.discovery import NameState, discover, parse_listing, summary_lines
from audit.corpora.registry import API, BUILTIN, MINI, parse_registry

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = (ROOT / "indexes" / "corpora.toml").read_text(encoding="utf-8")


@pytest.fixture
def listing(request) -> Iterator[ListingServer]:
    server = ListingServer(**request.param).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def served(wiki_index: Path, tmp_path_factory) -> Iterator[Served]:
    server = start_server("--index", f"wiki={wiki_index}", "--jobs-dir", str(tmp_path_factory.mktemp("jobs")))
    yield server
    server.stop()


def entries(url: str, backend: str, **names: str):
    """Registry entries NAME = INDEX at `url`, parsed as a registry file is."""
    text = "".join(f'[corpora.{name}]\nbackend = "{backend}"\nurl = "{url}"\nindex = "{index}"\n' for name, index in names.items())
    return list(parse_registry(text, Path("corpora.toml")).values())


def states(found) -> dict[str, NameState]:
    return {check.name: check.state for check in found.checks()}


def test_shipped_common_crawl_names_are_the_form_the_mini_server_knows():
    """The mini docs' table writes `v2_cc_2025-NN`; its curl example, the server's configuration
    and public clients `v2_cc-2025-NN`, the only form the server answers.  Every shipped crawl
    has the hyphen, those in the mirrored server configuration are among its names, and the
    registry's comment says why."""
    crawls = {name: entry.index for name, entry in BUILTIN.items() if entry.backend == MINI and "cc" in (entry.index or "")}
    assert set(crawls) == {f"cc-2025-{n}" for n in ("05", "08", "13", "18", "21", "26", "30")}
    assert all(re.fullmatch(r"v2_cc-2025-\d\d", index) and index == f"v2_{name}" for name, index in crawls.items())
    assert {index for index in crawls.values() if index <= "v2_cc-2025-21"} <= set(MINI_INDEXES)
    assert "`v2_cc_2025-NN`, with an underscore" in SHIPPED and "HTTP 400 `[Flask] Invalid index`" in SHIPPED


def test_shipped_remote_entries_say_tokenizer_size_and_source():
    remote = {name: entry for name, entry in BUILTIN.items() if entry.backend in (API, MINI)}
    for name, entry in remote.items():
        parts = entry.description.split("; ")
        assert parts[-1].startswith("source: "), name
        assert any(re.fullmatch(r"(Llama-2|OLMo-2|OLMo|GPT-2) tokens( \(.+\))?|raw text", p) for p in parts), name
        assert any(re.search(r"\d[KMBT]? tokens|[TG]B of text|size not published", p) for p in parts), name
    assert {BUILTIN[name].index for name in ("dolmino", "pile-val-gpt2", "dolmino-mini", "olmoe-mix-nodclm-mini")} == {
        "v4_dolmino-mix-1124-minus-olmo-mix-1124_llama", "v4_pileval_gpt2", "v2_dolmino-mix-1124-minus-olmo-mix-1124", "v2_olmoe-mix-0924-nodclm",
    }
    assert "GPT-2 tokens" in BUILTIN["pile-val-gpt2"].description and "OLMo-2 tokens" in BUILTIN["olmo3-7b-think"].description


def test_the_shipped_registry_against_servers_configured_as_the_latest_known_configurations():
    """Every shipped name, asked of replay servers holding what the newest mirrored server
    configurations hold (infini-gram branch s3, infini-gram mini main): only the names the
    registry's comments say have left, or postdate, those configurations are gone."""
    newest, mini = ListingServer(Flavour.INFINI_GRAM_S3).start(), ListingServer(Flavour.MINI).start()
    try:
        moved = [replace(e, url=newest.url if e.backend == API else mini.url) for e in BUILTIN.values() if e.backend in (API, MINI)]
        found = discover(moved)
    finally:
        newest.stop()
        mini.stop()
    gone = {check.name for check in found.in_state(NameState.GONE)}
    assert gone == {"pile-val-gpt2", "dolma-sample-olmo", "cc-2025-26", "cc-2025-30"}
    assert not found.in_state(NameState.UNCHECKED) and found.unregistered() == {}


@pytest.mark.parametrize("listing", [{"flavour": Flavour.INFINI_GRAM}], indirect=True)
def test_an_infini_gram_listing_settles_names_without_a_count_each(listing: ListingServer):
    found = discover(entries(listing.url, API, olmo="v4_olmo-2-0325-32b-instruct_llama", gpt2="v4_pileval_gpt2", pile="v4_piletrain_llama"))
    assert states(found) == {"olmo": NameState.LISTED, "pile": NameState.LISTED, "gpt2": NameState.GONE}
    assert listing.log == [("GET", None), ("POST", "v4_pileval_gpt2")]
    gone = found.in_state(NameState.GONE)[0]
    assert gone.detail == "HTTP 400: [Flask] Invalid index: v4_pileval_gpt2" and found.exit_code == 1
    offered = found.unregistered()[listing.url]
    assert set(offered) == set(INFINI_GRAM_INDEXES) - {"v4_olmo-2-0325-32b-instruct_llama", "v4_piletrain_llama"}
    assert "v4_dolmino-mix-1124-minus-olmo-mix-1124_llama" in offered


@pytest.mark.parametrize("listing", [{"flavour": Flavour.INFINI_GRAM_S3}], indirect=True)
def test_a_listing_of_described_indexes_only_is_not_read_as_absence(listing: ListingServer):
    found = discover(entries(listing.url, API, olmo3="v4_olmo-3-7b-think_olmo2", dolmino=S3_UNDESCRIBED[0], gone="v4_pileval_gpt2"))
    assert states(found) == {"olmo3": NameState.LISTED, "dolmino": NameState.ANSWERS, "gone": NameState.GONE}
    assert [check.detail for check in found.checks() if check.name == "dolmino"] == ["answered a count (1,000,000)"]
    assert "those it describes" in found.endpoints[0].listing_note and S3_UNDESCRIBED[1] not in found.unregistered()[listing.url]


@pytest.mark.parametrize("listing", [{"flavour": Flavour.FORWARDING}], indirect=True)
def test_an_empty_listing_of_a_forwarding_server_marks_nothing_gone(listing: ListingServer):
    found = discover(entries(listing.url, API, olmo="v4_olmo-2-0325-32b-instruct_llama", dolma="v4_dolma-v1_7_llama"))
    assert states(found) == {"olmo": NameState.ANSWERS, "dolma": NameState.ANSWERS} and found.exit_code == 0
    assert found.endpoints[0].listing == () and found.unregistered() == {}


@pytest.mark.parametrize("listing", [{"flavour": Flavour.MINI}], indirect=True)
def test_infini_gram_mini_has_no_listing_so_each_name_is_counted(listing: ListingServer):
    found = discover(entries(listing.url, MINI, hyphen="v2_cc-2025-05", underscore="v2_cc_2025-05", dclm="v2_dclm_all"))
    assert states(found) == {"hyphen": NameState.ANSWERS, "underscore": NameState.GONE, "dclm": NameState.ANSWERS}
    assert found.endpoints[0].listing is None and "GET / answers HTTP 405" in found.endpoints[0].listing_note
    assert found.in_state(NameState.GONE)[0].detail == "HTTP 400: [Flask] Invalid index: v2_cc_2025-05"
    assert [method for method, _ in listing.log] == ["GET", "POST", "POST", "POST"] and found.exit_code == 1


@pytest.mark.parametrize("listing", [{"flavour": Flavour.MINI, "forbidden": True}], indirect=True)
def test_a_throttling_gateway_is_not_asked_further_and_is_no_verdict(listing: ListingServer):
    found = discover(entries(listing.url, MINI, a="v2_cc-2025-05", b="v2_pileval"))
    assert states(found) == {"a": NameState.UNCHECKED, "b": NameState.UNCHECKED} and found.exit_code == 0
    assert listing.log == [("GET", None), ("POST", "v2_cc-2025-05")], "a refused GET / alone stops nothing; a refused count does"
    details = {check.name: check.detail for check in found.checks()}
    assert details["a"].startswith('throttled (HTTP 403 {"message": "Forbidden"}); try again in a minute')
    assert details["b"] == f"not asked: {details['a']}"
    assert f"not checked at {listing.url} (1 name(s): b): not asked: throttled" in " ".join(summary_lines(found))


@pytest.mark.parametrize("listing", [{"flavour": Flavour.ATTRIBUTION}], indirect=True)
def test_the_attribution_service_is_recognised_and_not_asked_name_by_name(listing: ListingServer):
    found = discover(entries(listing.url, API, a="olmo-2-0325-32b", b="v4_olmo-2-0325-32b-instruct_llama"))
    assert states(found) == {"a": NameState.UNCHECKED, "b": NameState.UNCHECKED} and found.exit_code == 0
    assert listing.log == [("GET", None), ("POST", "olmo-2-0325-32b"), ("GET", "/indexes")]
    detail = found.checks()[0].detail
    assert "no infini-gram query route at this URL (POST answers HTTP 404" in detail
    assert "GET /indexes lists olmo-2-0325-32b, olmo-3-0625-32b-instruct, as Ai2's attribution service does" in detail


def test_an_unreachable_endpoint_leaves_its_names_unchecked():
    found = discover(entries("http://127.0.0.1:9/", API, a="x", b="y"), timeout=2.0)
    assert states(found) == {"a": NameState.UNCHECKED, "b": NameState.UNCHECKED} and found.exit_code == 0
    assert found.endpoints[0].requests == 1 and "unreachable" in found.endpoints[0].listing_note
    assert summary_lines(found)[-1] == "live: 0 of 2 registry name(s) answer, 0 gone, 2 not checked; 0 index(es) offered that the registry lacks"


@pytest.mark.parametrize(
    ("status", "body", "names"),
    [
        (200, b'["a", "b"]', ("a", "b")),
        (200, b'[{"index": "a", "desc": "A"}]', ("a",)),
        (405, b"<!doctype html>", None),
        (404, b'{"detail": "Not Found"}', None),
        (200, b'{"indexes": ["a"]}', None),
        (200, b"[1, 2]", None),
    ],
)
def test_what_counts_as_a_listing(status: int, body: bytes, names):
    found, note = parse_listing(status, body)
    assert found == names and (found is not None or f"HTTP {status}" in note)


def test_audit_serve_lists_its_indexes_at_get_root_as_the_public_server_does(served: Served):
    answer = requests.get(served.url, timeout=10)
    assert answer.status_code == 200 and answer.json() == ["wiki"] == requests.get(served.url + "health", timeout=10).json()["indexes"]
    found = discover([*entries(served.url, API, wiki="wiki", nope="nope"), *entries(served.url + "mini/", MINI, mini="wiki", gone="nope")])
    assert states(found) == {"wiki": NameState.LISTED, "nope": NameState.GONE, "mini": NameState.ANSWERS, "gone": NameState.GONE}
    assert found.unregistered() == {}


@pytest.mark.parametrize("listing", [{"flavour": Flavour.MINI}], indirect=True)
def test_corpora_live_prints_what_it_found_and_exits_1_on_a_gone_name(listing: ListingServer, tmp_path: Path):
    registry = tmp_path / "corpora.toml"
    registry.write_text(
        f'[corpora.good]\nbackend = "infini-gram-mini"\nurl = "{listing.url}"\nindex = "v2_cc-2025-05"\n'
        f'[corpora.bad]\nbackend = "infini-gram-mini"\nurl = "{listing.url}"\nindex = "v2_cc_2025-05"\n',
        encoding="utf-8",
    )
    env = {"AUDIT_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "200"}
    base = ["corpora", "--live", "--registry", str(registry)]
    result = CliRunner().invoke(main, [*base, "--corpus", "good", "--corpus", "bad"], env=env)
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert "gone: bad (index v2_cc_2025-05): HTTP 400: [Flask] Invalid index: v2_cc_2025-05; fix or remove the entry" in lines
    assert any(line.startswith(f"{listing.url} (infini-gram-mini): no listing (GET / answers HTTP 405") and "2 registry name(s): 1 answers, 1 gone" in line for line in lines)
    assert lines[-1] == "live: 1 of 2 registry name(s) answer, 1 gone, 0 not checked; 0 index(es) offered that the registry lacks"
    good = CliRunner().invoke(main, [*base, "--corpus", "good"], env=env)
    assert good.exit_code == 0 and "answers: answered a count" in good.output
    unknown = CliRunner().invoke(main, [*base, "--corpus", "nothing"], env=env)
    assert unknown.exit_code == 2 and "unknown corpus 'nothing'" in unknown.output


def test_the_manual_example_of_corpora_live_is_what_it_prints(wiki_index: Path, tmp_path: Path):
    """The manual's `audit corpora --live` example, run against a real `audit serve` holding
    `wiki` and `news`: the lines below the table are those the manual shows, its port aside."""
    text = page("corpora.md")
    start = text.index("$ audit corpora --live --corpus team --corpus old\n")
    shown = text[start : text.index("```", start)].splitlines()[2:]
    assert len(shown) == 4 and shown[-1].startswith("live: ")
    server = start_server("--index", f"wiki={wiki_index}", "--index", f"news={wiki_index}", "--jobs-dir", str(tmp_path / "jobs"))
    try:
        registry = tmp_path / "corpora.toml"
        registry.write_text(
            f'[corpora.team]\nbackend = "infini-gram-api"\nurl = "{server.url}"\nindex = "wiki"\n'
            f'[corpora.old]\nbackend = "infini-gram-api"\nurl = "{server.url}"\nindex = "wiki-2024"\n',
            encoding="utf-8",
        )
        env = {"AUDIT_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "200"}
        result = CliRunner().invoke(main, ["corpora", "--live", "--registry", str(registry), "--corpus", "team", "--corpus", "old"], env=env)
    finally:
        server.stop()
    assert result.exit_code == 1, result.output
    printed = result.output.splitlines()[-len(shown) :]
    assert printed == [line.replace("http://127.0.0.1:8000/", server.url) for line in shown]
    table = result.output.splitlines()[: -len(shown)]
    assert any("team" in row and " yes " in row for row in table) and any("old" in row and " no " in row for row in table)


def test_a_server_with_a_token_is_asked_with_the_entry_s_token(wiki_index: Path, tmp_path: Path, monkeypatch):
    token = "t0ken-for-discovery-tests-0123456789"
    server = start(tmp_path, "--index", f"wiki={wiki_index}", env={"AUDIT_SERVE_TOKEN": token}, headers={"Authorization": f"Bearer {token}"})
    try:
        text = f'[corpora.team]\nbackend = "infini-gram-api"\nurl = "{server.url}"\nindex = "wiki"\ntoken_env = "TEAM_TOKEN"\n'
        team = list(parse_registry(text, tmp_path / "corpora.toml").values())
        monkeypatch.delenv("TEAM_TOKEN", raising=False)
        without = discover(team)
        monkeypatch.setenv("TEAM_TOKEN", token)
        found = discover(team)
    finally:
        server.stop()
    assert states(without) == {"team": NameState.UNCHECKED} and "TEAM_TOKEN is not set" in without.checks()[0].detail
    assert "GET / answers HTTP 401" in without.endpoints[0].listing_note and without.exit_code == 0
    assert states(found) == {"team": NameState.LISTED} and found.endpoints[0].requests == 1
