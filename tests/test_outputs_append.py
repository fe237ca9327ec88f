"""A head and a body written beforehand become one file in one atomic write, the body copied by
the kernel where it can, through a buffer where it cannot, and a failed copy leaves nothing."""
from __future__ import annotations

import errno
import os
import random
from pathlib import Path

import pytest

from audit import outputs
from audit.outputs import atomic_write_parts


def _body(path: Path) -> bytes:
    data = random.Random(7).randbytes(3 * (1 << 20) + 12345) + "ünïcode ☃\n".encode()
    path.write_bytes(data)
    return data


def test_the_head_and_the_body_are_one_file(tmp_path: Path):
    body = _body(tmp_path / ".body")
    atomic_write_parts(tmp_path / "out.jsonl", b'{"record": "manifest"}\n', tmp_path / ".body")
    assert (tmp_path / "out.jsonl").read_bytes() == b'{"record": "manifest"}\n' + body
    assert sorted(p.name for p in tmp_path.iterdir()) == [".body", "out.jsonl"]


@pytest.mark.parametrize("failure", [AttributeError("no sendfile"), OSError(errno.EINVAL, "not for these files")])
def test_without_the_kernel_copy_the_body_goes_through_a_buffer(tmp_path: Path, monkeypatch, failure: Exception):
    body = _body(tmp_path / ".body")

    def refused(*args: object) -> int:
        raise failure

    monkeypatch.setattr(os, "sendfile", refused)
    atomic_write_parts(tmp_path / "out.jsonl", b"head\n", tmp_path / ".body")
    assert (tmp_path / "out.jsonl").read_bytes() == b"head\n" + body


def test_a_copy_failing_half_way_leaves_no_file(tmp_path: Path, monkeypatch):
    _body(tmp_path / ".body")
    (tmp_path / "out.jsonl").write_bytes(b"the previous file\n")
    real, calls = os.sendfile, []

    def failing(out: int, source: int, offset: int, count: int) -> int:
        calls.append(offset)
        if len(calls) > 1:
            raise OSError(errno.EIO, "the disk failed")
        return real(out, source, offset, min(count, 1 << 20))

    monkeypatch.setattr(outputs.os, "sendfile", failing)
    with pytest.raises(OSError, match="the disk failed"):
        atomic_write_parts(tmp_path / "out.jsonl", b"head\n", tmp_path / ".body")
    assert (tmp_path / "out.jsonl").read_bytes() == b"the previous file\n" and calls == [0, 1 << 20]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".body", "out.jsonl"]
