"""The policies audit jobs may name: the server's own (`--policy`, else the built-in one) and
those in its policies folder, each kept under its digest by `POST /policies`."""
from __future__ import annotations

import os
import tempfile
import tomllib
from pathlib import Path

from audit.policyfile import Policy, PolicyError, load_policy
from audit.server.errors import JobError
from audit.server.names import BadName, policy_file


class PolicyFolder:
    """`ROOT/policies`: the policies a job may name, by name, never by path."""

    def __init__(self, root: Path, default: Policy) -> None:
        self.folder = root / "policies"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.default = default

    def add(self, text: bytes) -> Policy:
        """Keep an uploaded policy (merged over the built-in one, as `audit check --policy`
        merges) under its digest, so jobs can name it."""
        try:
            tomllib.loads(text.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            raise JobError(f"policy: not valid UTF-8 TOML ({error})") from None
        with tempfile.TemporaryDirectory(dir=self.folder) as scratch:
            staged = Path(scratch) / "policy.toml"
            staged.write_bytes(text)
            try:
                policy = load_policy(staged)
            except PolicyError as error:
                raise JobError(f"policy: {str(error).removeprefix(f'{staged}: ')}") from None
            os.replace(staged, self.folder / f"{policy.digest}.toml")
        return policy

    def get(self, name: str | None) -> Policy:
        """The server's policy, or one of its policies folder by name (a digest POST /policies
        answered); a load error is told without the server's path."""
        if name is None or name == self.default.digest:
            return self.default
        try:
            path = policy_file(self.folder, name)
        except BadName as error:
            raise JobError(str(error)) from None
        if not path.is_file():
            raise JobError(f"no policy {name!r}; upload one with POST /policies", 404)
        try:
            return load_policy(path)
        except PolicyError as error:
            raise JobError(f"policy {name!r}: {str(error).replace(str(path), 'the policy file')}") from None
