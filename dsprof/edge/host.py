"""The remote machine a run times on over ssh, as one object (`RemoteHost`): what `dsprof.measure(remote=...)` takes
(`dsprof.edge.remote.measure_remote` runs it). Plain data."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RemoteHost"]


@dataclass(frozen=True)
class RemoteHost:
    """``host``: ``USER@HOST``; ``ssh``: the ssh command prefix that reaches it (e.g. ``("ssh", "-p", "2222")``);
    ``python``: the Python that runs the bundle's runner there; ``dir``: the folder there that bundles go to."""

    host: str
    ssh: tuple[str, ...] = ("ssh",)
    python: str = "python3"
    dir: str = "dsprof-bundles"

    def __post_init__(self) -> None:
        object.__setattr__(self, "ssh", tuple(self.ssh))
