"""`measure_remote`: export a bundle, run it on another machine over ssh, import the results.

For a lab with a few boards and one workstation: ``dsprof measure --remote user@board`` exports the
workloads, streams the bundle to the board (a tar archive through ``ssh``, so only ``ssh`` and ``tar`` are
needed), runs its runner there with the board's Python, fetches the results through ``ssh ... cat`` and
imports them. ``ssh`` is a command prefix (``--ssh "ssh -p 2222 -i key"``); the remote command runs in the
remote user's shell, from the home folder.
"""

from __future__ import annotations

import io
import shlex
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

from torch import nn

from .._moved import moved_keywords
from ..errors import HINT, DeviceError, ImportHint
from ..models import ModelRef
from ..profiler.runner import MODEL_KEYWORDS
from ..runtimes import BACKENDS, RUNTIMES
from .export import export_bundle
from .importer import ImportResult, import_results
from .manifest import EdgeError

__all__ = ["measure_remote"]


def _tar(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(str(folder), arcname=".")
    return buffer.getvalue()


def measure_remote(
    host: str,
    model: str | nn.Module | ModelRef = "mobilenet_v2",
    *,
    backend: str = "onnxruntime",
    device: str = "cpu",
    threads: int | None = None,
    ssh: Sequence[str] = ("ssh",),
    python: str = "python3",
    remote_dir: str = "dsprof-bundles",
    out: str | Path = "results",
    overwrite: bool = False,
    log: Callable[[str], None] | None = None,
    **export_options: Any,
) -> ImportResult:
    """Time ``model``'s workloads on ``host`` (reached with the ``ssh`` command prefix) and import them.

    ``model``: anything `ModelRef.of` takes (a `ModelRef` carries its name, options and resolution). ``backend``
    picks the runner's runtime: onnxruntime, openvino, tflite, or torch (TorchScript; its blocks are timed ``linear``
    too unless ``variants`` says otherwise: the bundle's default, `dsprof.runtimes.bundle_block_variants`); ``device`` cpu or cuda;
    ``threads`` the runtime's CPU threads (default: the remote cores). ``export_options`` go to `export_bundle`
    (batch, variants, blocks, timing, extra_models...). The results land in ``out`` as by `import_results`. Raises
    `EdgeError` when a remote step fails; the local bundle is then kept and its path given. The keywords of before
    (``name=``, ``model_options=``, ``resolution=``) still work for a release, with a `DeprecationWarning`.
    """
    old = {k: export_options.pop(k) for k in MODEL_KEYWORDS if k in export_options}
    model = ModelRef.of(model, **moved_keywords("dsprof.edge.measure_remote", old, MODEL_KEYWORDS).get("model", {}))
    remote = [b.name for b in BACKENDS.values() if b.remote_runtime]
    if backend not in BACKENDS:
        raise DeviceError(f"`remote=` times backends {', '.join(remote)}; got {backend!r}")
    runtime = BACKENDS[backend].remote_runtime
    if runtime is None:
        raise DeviceError(f"`remote=` cannot time `backend={backend!r}`: {BACKENDS[backend].no_remote}")
    fmt = RUNTIMES[runtime].format
    say = log or (lambda message: None)
    work = Path(tempfile.mkdtemp(prefix="dsprof-remote-"))
    try:
        bundle = export_bundle(model, formats=(fmt,), out=work / "bundle", **export_options)
    except BaseException:  # nothing was sent: nothing to keep (a failed remote step keeps the bundle, below)
        shutil.rmtree(work, ignore_errors=True)
        raise
    folder = f"{remote_dir.rstrip('/')}/{bundle.manifest['bundle_id']}"
    q = shlex.quote
    results = f"{folder}/results.jsonl"
    runner = f"{folder}/run_bundle.py"  # the runner's own command line (edge/runner.py), not dsprof's
    run = [python, runner, "--runtime", runtime, "--device", device, "--out", results, "--quiet"]
    if threads is not None:
        run += ["--threads", str(threads)]
    run_command = f"cd && {shlex.join(run)}"  # every word quoted: the remote shell runs it

    unpack = f"cd && mkdir -p {q(folder)} && tar xzf - -C {q(folder)}"
    read_back = f"cd && cat {q(results)}"
    fetched = work / "results.jsonl"
    # what is left to do by hand after each remote step fails: shell commands of ssh and tar, then the import, as data
    copy = f"tar czf - -C {q(str(bundle.path))} . | {shlex.join([*ssh, '--', host, unpack])}"
    fetch = f"{shlex.join([*ssh, '--', host, read_back])} > {q(str(fetched))}"
    left = [copy, shlex.join([*ssh, "--", host, run_command]), fetch]
    steps = {"copying the bundle": left, "the runner": left[1:], "fetching the results": left[2:]}
    importing = ImportHint(str(bundle.path), str(fetched), str(out))

    def remote(command: str, what: str, stdin: bytes | None = None, capture: bool = False) -> bytes:
        # "--" ends ssh's options: a host that starts with "-" is a host, never an option
        done = subprocess.run([*ssh, "--", host, command], input=stdin, stdout=subprocess.PIPE if capture else None,
                              stderr=subprocess.PIPE if capture else None)
        if done.returncode != 0:
            detail = (done.stderr or b"").decode(errors="replace").strip().splitlines()[-1:] if capture else []
            then = "`, then `".join(steps[what])
            raise EdgeError(
                f"{what} on {host} failed (exit {done.returncode}{': ' + detail[0] if detail else ''}); the bundle is "
                f"kept in {bundle.path}. Check `{shlex.join([*ssh, '--', host, 'true'])}`, then go on by hand: "
                f"`{then}`, then {HINT}", hint=importing
            )
        return done.stdout or b""

    say(f"copying {bundle.workloads} workloads to {host}:{folder}")
    remote(unpack, "copying the bundle", stdin=_tar(bundle.path), capture=True)
    say(f"running {runtime} on {host}")
    remote(run_command, "the runner", capture=True)  # its own summary says to import, which is done here
    fetched.write_bytes(remote(read_back, "fetching the results", capture=True))
    imported = import_results(bundle.path, fetched, out=out, overwrite=overwrite)
    shutil.rmtree(work, ignore_errors=True)
    return imported
