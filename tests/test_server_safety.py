"""`audit serve` against hostile clients, as a real uvicorn process on 127.0.0.1: parameters
that try to be paths, DNS rebinding and cross-site requests, and the bearer token.  Limits,
slow clients and retention are in test_server_limits.py."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from hostile import TALLY
from hostile_http import BENCH, SECRET, TOKEN, Server, counted, query, raw, start, wait_for


@pytest.fixture(scope="module")
def secrets(tmp_path_factory) -> Path:
    """A folder beside the server's holding TOML files it must never read for a client: a
    registry and settings with a token, and a valid policy outside the policies folder."""
    root = tmp_path_factory.mktemp("secrets")
    (root / "registry.toml").write_text(f'api_token = "{SECRET}"\n[corpora.x]\nbackend = "local"\npath = "x"\n', encoding="utf-8")
    (root / "settings.toml").write_text(f'[auth]\napi_token = "{SECRET}"\n', encoding="utf-8")
    (root / "outside.toml").write_text("[rules.ngram.question]\ncoverage = 1\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def server(wiki_index: Path, secrets: Path, tmp_path_factory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("safety")
    served = start(tmp, "--index", f"wiki={wiki_index}", "--registry", str(secrets / "registry.toml"))
    (served.jobs / "policies" / "linked.toml").symlink_to(secrets / "outside.toml")
    yield served
    served.stop()
    log = served.log.read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in log, log


# Parameters that try to be paths --------------------------------------------------------------

POLICY_NAMES = [
    ("dotdot-registry", "../../registry", 400, "a policy is named, never a path"),
    ("dotdot-one", "../registry", 400, "a policy is named, never a path"),
    ("through-policies", "policies/../../registry", 400, "a policy is named, never a path"),
    ("absolute", "{secrets}/settings", 400, "a policy is named, never a path"),
    ("absolute-toml", "{secrets}/settings.toml", 400, "a policy is named, never a path"),
    ("absolute-valid-outside", "{secrets}/outside", 400, "a policy is named, never a path"),
    ("dots-only", "..", 400, "a policy is named, never a path"),
    ("one-dot", ".", 400, "a policy is named, never a path"),
    ("three-dots", "...", 400, "a policy is named, never a path"),
    ("separator", "a/b", 400, "a policy is named, never a path"),
    ("backslash", "..\\..\\registry", 400, "a policy is named, never a path"),
    ("nul", "registry\x00", 400, "a policy is named, never a path"),
    ("over-long", "a" * 300, 400, "a policy is named, never a path"),
    ("home", "~/registry", 400, "a policy is named, never a path"),
    ("with-extension", "registry.toml", 400, "a policy is named, never a path"),
    ("drive", "C:\\registry", 400, "a policy is named, never a path"),
    ("double-encoded", "%2e%2e%2fregistry", 400, "a policy is named, never a path"),
    ("link-out-of-the-folder", "linked", 400, "not a file of the server's policies folder"),
    ("unregistered-name", "outside", 404, "no policy 'outside'"),
]


@pytest.mark.parametrize(("name", "policy", "status", "fragment"), POLICY_NAMES, ids=[case[0] for case in POLICY_NAMES])
def test_a_policy_is_named_never_a_path(server: Server, secrets: Path, name: str, policy: str, status: int, fragment: str):
    params = {"index": "wiki", "policy": policy.format(secrets=secrets), "filename": "b.jsonl"}
    response = requests.post(server.url + "jobs", params=params, data=BENCH, timeout=30)
    counted(response, status, fragment, server)
    assert sorted(p.name for p in server.jobs.iterdir()) == ["policies"]


def test_an_uploaded_policy_never_echoes_a_value(server: Server):
    response = requests.post(server.url + "policies", data=f'api_token = "{SECRET}"\n'.encode(), timeout=30)
    counted(response, 400, "api_token", server)


PARAMETERS = [
    ("upload-dotdot", {"filename": "../../x.jsonl"}, 400, "give a plain file name"),
    ("upload-absolute", {"filename": "/etc/passwd"}, 400, "give a plain file name"),
    ("upload-nul", {"filename": "b\x00.jsonl"}, 400, "give a plain file name"),
    ("upload-dots", {"filename": ".."}, 400, "give a plain file name"),
    ("upload-hidden", {"filename": ".bashrc"}, 400, "give a plain file name"),
    ("upload-long", {"filename": "b" * 300 + ".jsonl"}, 400, "give a plain file name"),
    ("index-path", {"index": "../wiki"}, 404, "unknown index '../wiki'"),
    ("index-absolute", {"index": "/etc"}, 404, "unknown index '/etc'"),
    ("model-path", {"probe_model": "/etc/passwd"}, 400, "a path: a job names one of the server's probe models"),
    ("links-path", {"links": "../links"}, 400, "is not a link source of this server"),
    ("format-path", {"format": "../jsonl"}, 400, "is not one of"),
    ("map-file", {"map": "/etc/passwd"}, 400, "map"),
]


@pytest.mark.parametrize(("name", "params", "status", "fragment"), PARAMETERS, ids=[case[0] for case in PARAMETERS])
def test_every_parameter_names_a_thing(server: Server, name: str, params: dict, status: int, fragment: str):
    response = requests.post(server.url + "jobs", params={"index": "wiki", "filename": "b.jsonl", **params}, data=BENCH, timeout=30)
    counted(response, status, fragment, server)
    assert sorted(p.name for p in server.jobs.iterdir()) == ["policies"]


JOB_IDS = [
    ("short", "GET", "jobs/0000", 400, "is not a job id"),
    ("upper-case", "GET", "jobs/FEEDFACEFEEDFACE", 400, "is not a job id"),
    ("dots", "GET", "jobs/%2e%2e", 400, "is not a job id"),
    ("encoded-traversal", "GET", "jobs/..%2F..%2Fregistry", 404, "Not Found"),
    ("result-of-a-name", "GET", "jobs/policies/result", 400, "is not a job id"),
    ("delete-a-name", "DELETE", "jobs/policies", 400, "is not a job id"),
    ("delete-unknown", "DELETE", "jobs/0123456789abcdef", 404, "no job '0123456789abcdef'"),
]


@pytest.mark.parametrize(("name", "method", "path", "status", "fragment"), JOB_IDS, ids=[case[0] for case in JOB_IDS])
def test_job_ids_are_ids(server: Server, name: str, method: str, path: str, status: int, fragment: str):
    counted(requests.request(method, server.url + path, timeout=30), status, fragment, server)
    assert (server.jobs / "policies" / "linked.toml").is_symlink()


# Host, Origin, content type, CORS ----------------------------------------------------------

HOSTS = [
    ("rebinding", "evil.example", 421),
    ("rebinding-with-port", "evil.example:{port}", 421),
    ("another-port", "127.0.0.1:1", 421),
    ("no-port", "127.0.0.1", 421),
    ("lookalike", "localhost.evil.example:{port}", 421),
    ("empty", "", 421),
    ("loopback-v6", "[::1]:{port}", 200),
    ("localhost", "localhost:{port}", 200),
    ("upper-case", "LOCALHOST:{port}", 200),
]


@pytest.mark.parametrize(("name", "host", "status"), HOSTS, ids=[case[0] for case in HOSTS])
def test_the_host_header_must_be_the_servers(server: Server, name: str, host: str, status: int):
    response = query(server, headers={"Host": host.format(port=server.port)})
    counted(response, status, "is not an address of this server" if status == 421 else "count", server)


MALFORMED = [
    ("repeated-host", "GET /health HTTP/1.1\r\nHost: {host}\r\nHost: evil.example\r\n\r\n", 400, "invalid HTTP request"),
    ("endless-headers", "GET /health HTTP/1.1\r\nHost: {host}\r\nX-Pad: " + "a" * 40000, 400, "invalid HTTP request"),
    ("garbage-request-line", "\x16\x03\x01 not http at all\r\n\r\n", 400, "invalid HTTP request"),
    ("two-lengths", "POST / HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello", 400, "invalid HTTP request"),
    ("length-and-chunked", "POST / HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "not valid JSON"),
]


@pytest.mark.parametrize(("name", "request_text", "status", "fragment"), MALFORMED, ids=[case[0] for case in MALFORMED])
def test_a_malformed_request_gets_a_json_400(server: Server, name: str, request_text: str, status: int, fragment: str):
    answered, answer = raw(server, request_text.format(host=f"127.0.0.1:{server.port}").encode("latin-1"))
    TALLY["cases"] += 1
    TALLY["tracebacks"] += "Traceback" in server.log.read_text()
    assert answered == status and fragment.encode() in answer and b"nosniff" in answer and b"default-src 'none'" in answer, answer
    TALLY["clear_errors"] += 1


ORIGINS = [
    ("foreign-site", "POST", "https://evil.example", 403),
    ("null-origin", "POST", "null", 403),
    ("same-host-other-port", "POST", "http://127.0.0.1:1", 403),
    ("foreign-read", "GET", "https://evil.example", 403),
    ("own-origin", "POST", "http://127.0.0.1:{port}", 200),
]


@pytest.mark.parametrize(("name", "method", "origin", "status"), ORIGINS, ids=[case[0] for case in ORIGINS])
def test_cross_origin_requests_are_refused(server: Server, name: str, method: str, origin: str, status: int):
    headers = {"Origin": origin.format(port=server.port)}
    response = query(server, headers=headers) if method == "POST" else requests.get(server.url + "health", headers=headers, timeout=30)
    counted(response, status, "cross-origin request" if status == 403 else "count", server)


def test_a_preflight_is_never_granted(server: Server):
    preflight = {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    counted(requests.options(server.url, headers=preflight, timeout=30), 403, "cross-origin request", server)
    counted(requests.options(server.url, timeout=30), 405, "Method Not Allowed", server)


CONTENT_TYPES = [
    ("query-text-plain", "", "text/plain", 415, "Content-Type: application/json"),
    ("query-form", "", "application/x-www-form-urlencoded", 415, "Content-Type: application/json"),
    ("query-multipart", "", "multipart/form-data; boundary=x", 415, "Content-Type: application/json"),
    ("query-none", "", None, 415, "Content-Type: application/json"),
    ("query-lookalike", "", "application/jsonx", 415, "Content-Type: application/json"),
    ("mini-text-plain", "mini/", "text/plain", 415, "Content-Type: application/json"),
    ("query-json-charset", "", "application/json; charset=utf-8", 200, "count"),
    ("job-text-plain", "jobs?index=wiki", "text/plain", 415, "as the raw request body"),
    ("job-form", "jobs?index=wiki", "application/x-www-form-urlencoded", 415, "as the raw request body"),
    ("policy-text-plain", "policies", "text/plain", 415, "as the raw request body"),
]


@pytest.mark.parametrize(("name", "path", "content_type", "status", "fragment"), CONTENT_TYPES, ids=[case[0] for case in CONTENT_TYPES])
def test_a_cross_site_form_cannot_reach_a_route(server: Server, name: str, path: str, content_type: str | None, status: int, fragment: str):
    body = json.dumps({"index": "wiki", "query_type": "count", "query": "the"}).encode()
    headers = {"Content-Type": content_type} if content_type else {}
    counted(requests.post(server.url + path, data=body, headers=headers, timeout=30), status, fragment, server)


def test_a_multipart_upload_is_told_what_to_send(server: Server):
    response = requests.post(server.url + "jobs", params={"index": "wiki"}, files={"file": ("b.jsonl", BENCH)}, timeout=30)
    counted(response, 415, "send the benchmark file as the raw request body, not as a form (multipart/form-data): Content-Type: application/octet-stream", server)
    assert sorted(p.name for p in server.jobs.iterdir()) == ["policies"]


def test_downloads_and_errors_carry_the_security_headers(server: Server):
    counted(requests.get(server.url + "nowhere", timeout=30), 404, "Not Found", server)
    counted(requests.get(server.url + "mini/", timeout=30), 405, "Method Not Allowed", server)
    counted(requests.get(server.url + "docs", timeout=30), 404, "Not Found", server)
    job = requests.post(server.url + "jobs", params={"index": "wiki", "filename": "b.jsonl"}, data=BENCH, timeout=30).json()
    job = wait_for(server, job)
    assert job["status"] == "done", job
    counted(requests.get(server.url + f"jobs/{job['id']}/result", timeout=30), 200, '"item_id"', server)
    assert requests.delete(server.url + f"jobs/{job['id']}", timeout=30).ok


# The token ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def guarded(wiki_index: Path, tmp_path_factory) -> Iterator[Server]:
    served = start(
        tmp_path_factory.mktemp("token"), "--index", f"wiki={wiki_index}", "--allowed-host", "audit.example",
        env={"AUDIT_SERVE_TOKEN": TOKEN}, headers={"Authorization": f"Bearer {TOKEN}"},
    )
    yield served
    served.stop()


AUTHORIZATIONS = [
    ("none", None, 401),
    ("wrong", f"Bearer {TOKEN[:-1]}x", 401),
    ("prefix", f"Bearer {TOKEN[:8]}", 401),
    ("longer", f"Bearer {TOKEN}x", 401),
    ("basic-scheme", f"Basic {TOKEN}", 401),
    ("bare-token", TOKEN, 401),
    ("scheme-only", "Bearer", 401),
    ("right", f"Bearer {TOKEN}", 200),
    ("right-lower-scheme", f"bearer {TOKEN}", 200),
]


@pytest.mark.parametrize(("name", "authorization", "status"), AUTHORIZATIONS, ids=[case[0] for case in AUTHORIZATIONS])
def test_the_token_is_required_on_every_route(guarded: Server, name: str, authorization: str | None, status: int):
    headers = {"Authorization": authorization} if authorization else {}
    response = query(guarded, headers=headers)
    counted(response, status, "Authorization: Bearer TOKEN" if status == 401 else "count", guarded)
    if status == 401:
        assert response.headers["WWW-Authenticate"] == "Bearer"
        counted(requests.get(guarded.url + "health", headers=headers, timeout=30), 401, "Authorization: Bearer TOKEN", guarded)


def test_an_allowed_host_is_answered(guarded: Server):
    headers = {"Host": f"audit.example:{guarded.port}", "Authorization": f"Bearer {TOKEN}"}
    counted(query(guarded, headers=headers), 200, "count", guarded)
    counted(query(guarded, headers={**headers, "Host": "audit.example"}), 200, "count", guarded)
    counted(query(guarded, headers={**headers, "Host": f"other.example:{guarded.port}"}), 421, "not an address of this server", guarded)
    counted(query(guarded, headers={**headers, "Host": "audit.example.evil.example"}), 421, "not an address of this server", guarded)


def test_a_tokenless_job_never_runs(guarded: Server):
    response = requests.post(guarded.url + "jobs", params={"index": "wiki", "filename": "b.jsonl"}, data=BENCH, timeout=30)
    counted(response, 401, "Authorization: Bearer TOKEN", guarded)
    assert sorted(p.name for p in guarded.jobs.iterdir()) == ["policies"]


REFUSED_STARTS = [
    ("wildcard-without-token", ["--host", "0.0.0.0"], {}, "--host 0.0.0.0 opens the server to other machines: give a token"),
    ("v6-wildcard-without-token", ["--host", "::"], {}, "--host :: opens the server to other machines"),
    ("short-token", ["--token", "short"], {}, "must be at least 16 printable characters"),
    ("short-token-from-env", [], {"AUDIT_SERVE_TOKEN": "short"}, "must be at least 16 printable characters"),
    ("zero-body-timeout", ["--body-timeout", "0"], {}, "--body-timeout must be more than 0"),
    ("zero-inflated-limit", ["--max-inflated-bytes", "0"], {}, "--max-inflated-bytes must be at least 1"),
    ("zero-retention", ["--job-retention-days", "0"], {}, "--job-retention-days must be more than 0"),
]


@pytest.mark.parametrize(("name", "args", "env", "message"), REFUSED_STARTS, ids=[case[0] for case in REFUSED_STARTS])
def test_a_server_open_to_others_needs_a_token(tmp_path: Path, name: str, args: list[str], env: dict[str, str], message: str):
    done = subprocess.run(
        [sys.executable, "-m", "audit.server", "--port", "0", "--jobs-dir", str(tmp_path / "jobs"), *args],
        capture_output=True, text=True, timeout=60, env={**os.environ, **env}, cwd=tempfile.gettempdir(),
    )
    TALLY["cases"] += 1
    TALLY["tracebacks"] += "Traceback" in done.stderr
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "listening" not in done.stdout
    TALLY["clear_errors"] += 1


def test_a_job_on_a_tokenized_index_carries_the_servers_token(tmp_path_factory):
    """A tokenized index's job queries the server's own protocol, which asks for the token too:
    a question copied from the index is seen, so the job's queries were answered, not refused."""
    from test_server import OLMO2, TOKEN_DOCS, build_token_index

    from audit.auditfile import read_audit

    tmp_path = tmp_path_factory.mktemp("tok")  # a short path: infini-gram's engine crashes on long index paths
    index = build_token_index(TOKEN_DOCS, OLMO2, tmp_path / "olmo", width=4)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    served = start(tmp_path, "--index", f"olmo={index}", "--tokenizer", f"olmo={OLMO2}", env={"AUDIT_SERVE_TOKEN": TOKEN}, headers=auth)
    try:
        question = {"item_id": "uw", "source_lang": "en", "variants": {"en": {"question": TOKEN_DOCS[0], "answer": "Seattle"}}}
        job = requests.post(served.url + "jobs", params={"index": "olmo", "filename": "b.jsonl"}, data=json.dumps(question).encode(), headers=auth, timeout=30).json()
        job = wait_for(served, job, headers=auth)
        assert job["status"] == "done", job
        (tmp_path / "b.audit.jsonl").write_bytes(requests.get(served.url + f"jobs/{job['id']}/result", headers=auth, timeout=30).content)
        assert [r["exposure"] for r in read_audit(tmp_path / "b.audit.jsonl").records] == ["seen"]
    finally:
        served.stop()
    assert "Traceback" not in served.log.read_text()


def test_an_index_path_the_engine_would_crash_on_is_refused(wiki_index: Path, tmp_path_factory):
    """infini-gram's engine takes any path holding 'tokenized' for a shard file's and crashes."""
    link = tmp_path_factory.mktemp("tokenized_indexes") / "wiki"
    link.symlink_to(wiki_index)
    done = subprocess.run(
        [sys.executable, "-m", "audit.server", "--port", "0", "--index", f"wiki={link}", "--jobs-dir", str(link.parent / "jobs")],
        capture_output=True, text=True, timeout=60, cwd=tempfile.gettempdir(),
    )
    TALLY["cases"] += 1
    TALLY["tracebacks"] += "Traceback" in done.stderr or done.returncode < 0
    assert done.returncode == 2 and "holds the word 'tokenized'" in done.stderr and "Traceback" not in done.stderr, (done.returncode, done.stderr)
    TALLY["clear_errors"] += 1


def test_a_wildcard_bind_answers_this_machines_names_with_the_token(wiki_index: Path, tmp_path: Path):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    served = start(tmp_path, "--host", "0.0.0.0", "--index", f"wiki={wiki_index}", "--token", TOKEN, headers=auth)
    try:
        named = {**auth, "Host": f"{socket.gethostname()}:{served.port}"}
        counted(query(served, headers=named), 200, "count", served)
        counted(query(served, headers={**named, "Authorization": "Bearer wrong"}), 401, "Authorization: Bearer TOKEN", served)
        counted(query(served, headers={**auth, "Host": f"evil.example:{served.port}"}), 421, "not an address of this server", served)
        counted(query(served, headers={**auth, "Host": f"0.0.0.0:{served.port}"}), 421, "not an address of this server", served)
    finally:
        served.stop()


def test_a_registry_entry_reaches_a_token_server_with_the_token_from_its_environment(guarded: Server, tmp_path: Path, monkeypatch):
    """The API backend sends the token the entry's `token_env` names; without it the server
    refuses every query (the variant is unknown), and an unset variable is a clear error."""
    from click.testing import CliRunner

    from audit.auditfile import read_audit
    from audit.cli import main

    registry = tmp_path / "registry.toml"
    registry.write_text(f'[corpora.team]\nbackend = "infini-gram-api"\nurl = "{guarded.url}"\nindex = "wiki"\ntoken_env = "TEAM_TOKEN"\ncache = "c.sqlite"\n', encoding="utf-8")
    (tmp_path / "b.jsonl").write_bytes(BENCH)
    monkeypatch.chdir(tmp_path)
    args = ["check", "b.jsonl", "--corpus", "team", "--registry", str(registry), "--no-report", "--signals", "ngram"]
    unset = CliRunner().invoke(main, [*args, "--out", "unset.audit.jsonl"], env={"TEAM_TOKEN": ""})
    assert unset.exit_code == 2 and "corpora.team.token_env" in unset.output and "TEAM_TOKEN is not set" in unset.output, unset.output
    # Refused answers are not cached, so the right token's run after it asks the server again.
    wrong = CliRunner().invoke(main, [*args, "--out", "w.audit.jsonl"], env={"TEAM_TOKEN": TOKEN[:-1] + "x"})
    assert wrong.exit_code == 0 and all(record["exposure"] == "unknown" for record in read_audit(tmp_path / "w.audit.jsonl").records)
    done = CliRunner().invoke(main, [*args, "--out", "a.audit.jsonl"], env={"TEAM_TOKEN": TOKEN})
    assert done.exit_code == 0, done.output
    records = read_audit(tmp_path / "a.audit.jsonl").records
    assert records and all(record["exposure"] != "unknown" for record in records)
    assert TOKEN not in (tmp_path / "a.audit.jsonl").read_text(encoding="utf-8")
