"""What several commands share: the display of an index build, which `audit index build` and
`audit check` (building an index a corpus names) both show."""
from __future__ import annotations

from rich.progress import DownloadColumn

from audit.bars import Steps, progress_display
from audit.index.progress import ProgressHook as IndexProgress


def build_progress_display() -> tuple[Steps, IndexProgress]:
    """A display for index builds and the hook that feeds it.  The display starts on the first
    report, which comes after the build has forked its workers: no thread exists at the fork."""
    progress = progress_display(DownloadColumn())
    tasks: dict[str, int] = {}

    def report(stage: str, done: int, total: int) -> None:
        if not tasks:
            progress.start()
        if stage not in tasks:
            tasks[stage] = progress.add_task("reading documents" if stage == "read" else "sorting suffixes", total=total if stage == "read" else None)
        if stage == "read":
            progress.update(tasks[stage], completed=done)
        else:
            progress.update(tasks[stage], description=f"sorting suffixes, shard {min(done + 1, total)} of {total}")
            if done >= total:
                progress.end_steps()

    return progress, report
