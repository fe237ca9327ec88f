"""A local index whose shards are held by Ray actors, each mapping its own shard files from
storage every node sees.

`DistributedIndex` is a `LocalIndex` in every answer: the merging (counts summed, longest
matches maxed per position, occurrences shared out over the shards' ranges, documents by
global number) is `LocalIndex`'s own code, only the groups it asks are actors.  An actor whose
process dies is restarted by Ray and the call retried (every call is a pure read); a call that
still fails raises, and the signal asking records `failed`, which the policy reads as
`unknown`, never as absence.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from audit.corpora.local import LocalIndex
from audit.corpora.shardgroup import ShardGroup
from audit.corpora.shards import IndexOpenError
from audit.executors import Executor, connect

if TYPE_CHECKING:
    from ray.actor import ActorHandle

# An actor killed mid-call is restarted and the call re-sent this many times before it fails.
RESTARTS = 3
# Calls one actor answers at once: its reads share nothing, and the suffix-array searches run
# without the GIL, so a node's workers are not queued behind each other.
ACTOR_THREADS = 8


class ShardActor(ShardGroup):
    """A shard group living in a Ray actor; `ready` answers once its shards are mapped and
    checked, so a damaged shard is found when the index opens, not at its first query."""

    def ready(self) -> int:
        return len(self.shards)


def contiguous_groups(sizes: list[int], groups: int) -> list[list[int]]:
    """Positions 0..len(sizes)-1 cut into at most `groups` contiguous runs of about equal bytes."""
    groups = max(1, min(groups, len(sizes)))
    total, cuts, running = sum(sizes), [], 0
    for position, size in enumerate(sizes[:-1]):
        running += size
        if len(cuts) < groups - 1 and running * groups >= total * (len(cuts) + 1) and len(sizes) - position - 1 >= groups - 1 - len(cuts):
            cuts.append(position + 1)
    while len(cuts) < groups - 1:
        cuts.append(len(sizes) - (groups - 1 - len(cuts)))
    bounds = [0, *cuts, len(sizes)]
    return [list(range(bounds[i], bounds[i + 1])) for i in range(len(bounds) - 1)]


class DistributedIndex(LocalIndex):
    """A local index served by `groups` Ray actors, each holding a contiguous run of shards of
    about equal bytes.  By default there is one actor per node of the cluster (at most one per
    shard), spread over the nodes: every call to an actor costs a round trip, so fewer, threaded
    actors answer a variant's queries sooner than one per shard."""

    def __init__(
        self,
        path: Path,
        name: str | None = None,
        neardup_redis: str | None = None,
        *,
        executor: Executor,
        groups: int | None = None,
        actors: list[ActorHandle] | None = None,
    ) -> None:
        self.executor = executor
        self._wanted = groups
        self._actors = actors
        super().__init__(path, name, neardup_redis)

    def _open_groups(self) -> list[ActorHandle]:  # type: ignore[override]
        ray = connect(self.executor)
        layout = self.layout
        nodes = sum(1 for node in ray.nodes() if node.get("Alive"))
        parts = contiguous_groups(layout.shard_bytes, self._wanted or max(1, nodes))
        self.group_starts = [layout.first_documents[part[0]] for part in parts]
        if self._actors is not None:
            return self._actors
        remote = ray.remote(ShardActor).options(
            max_restarts=RESTARTS, max_task_retries=RESTARTS, max_concurrency=ACTOR_THREADS, num_cpus=0, scheduling_strategy="SPREAD"
        )
        path = str(self.path.resolve())
        actors = [remote.remote(path, [layout.numbers[i] for i in part], [layout.first_documents[i] for i in part]) for part in parts]
        try:
            ray.get([actor.ready.remote() for actor in actors])
        except ray.exceptions.RayError as error:
            for actor in actors:
                ray.kill(actor)
            raise IndexOpenError(_cause(error)) from None
        return actors

    def __reduce__(self) -> tuple:
        return (_attached, (self.path, self.info.name, self.neardup_redis, self.executor, self._wanted, self.groups))

    def ask(self, method: str, *args: object) -> list[object]:
        ray = connect(self.executor)
        return ray.get([getattr(actor, method).remote(*args) for actor in self.groups])

    def _ask_each(self, method: str, arguments: list[object]) -> list[object]:
        ray = connect(self.executor)
        return ray.get([getattr(actor, method).remote(argument) for actor, argument in zip(self.groups, arguments, strict=True)])

    def _ask_group(self, group: int, method: str, *args: object) -> object:
        ray = connect(self.executor)
        return ray.get(getattr(self.groups[group], method).remote(*args))

    def close(self) -> None:
        """Stop the actors (they also end with the driver that made them)."""
        ray = connect(self.executor)
        for actor in self.groups:
            ray.kill(actor)


def _attached(path: Path, name: str, neardup_redis: str | None, executor: Executor, groups: int | None, actors: list[ActorHandle]) -> DistributedIndex:
    """The index in another process of the cluster, asking the same actors."""
    return DistributedIndex(path, name, neardup_redis, executor=executor, groups=groups, actors=actors)


def _cause(error: Exception) -> str:
    """The error an actor raised, without Ray's traceback around it."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, Exception):
        return str(cause)
    text = str(error)
    marker = "IndexOpenError: "
    return text[text.rindex(marker) + len(marker) :].strip().splitlines()[0] if marker in text else text
