"""The fields dsprof reads from files that may come from someone else (measurement records, LUTs, edge results and
bundle manifests, plans, fronts, importance files, merged models), checked: one rule per field, written once here
and used by every reader, before a value is shown, put in a command, or used to build a model.

Each check returns the value (typed where a file holds it as text) or raises `FieldError` ("field 'device': ..."),
which the reader turns into its own one-line error naming the file (and the line or row). Names are held to a
charset and a length: a device or environment name cannot carry a shell substitution, markup or a formula; counts
and sizes to sane bounds, so that a file cannot ask for a model of a billion channels; model options cannot name
weights or paths (weights are always the caller's own choice, never a file's)."""

from __future__ import annotations

import math
import re
import sys
from typing import Any, Mapping

from .errors import BadFileError

__all__ = ["FieldError", "MAX_BATCH", "MAX_CHANNELS", "MAX_COUNT", "MAX_NAME", "MAX_RESOLUTION", "MAX_SAMPLE_S",
           "MAX_THREADS", "MERGED_DTYPES", "OPTION_BOUNDS", "check_count", "check_environment",
           "check_model_options", "check_name", "check_number", "check_plain", "check_shape", "check_samples",
           "check_text", "check_token", "is_number", "plain", "shown"]


class FieldError(BadFileError):
    """A field of a file that does not hold what it may hold; the message names the field (the reader adds the
    file and the line)."""


#: Characters of a name that is a word of a key or a command (device, backend, dtype, layout, environment id...).
MAX_TOKEN = 64
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:+-]*")
#: The control characters free text may not hold (`check_text`): C0 and DEL.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: Characters of a name shown to people (a device's model name, a plan's name).
MAX_NAME = 200
_NAME_PUNCTUATION = frozenset(" _.,:()@+/#-'&*\u00ae\u2122")  # "Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz", "(R)", "TM"
#: Bounds of the counts a file may carry.
MAX_BATCH = 65536
MAX_THREADS = 4096
MAX_RESOLUTION = 4096  # pixels of an input side
MAX_CHANNELS = 1 << 16
MAX_SAMPLE_S = 86400.0  # one timed sample: a day at most
MAX_SAMPLES = 1_000_000
MAX_COUNT = 10 ** 15  # MACs, parameters, iterations: any count a file may carry
#: The parameter dtypes a merged model file may name (`torch.<name>`).
MERGED_DTYPES = ("float32", "float16", "bfloat16", "float64")
#: Model options that name weights or files: never taken from a file (the caller gives weights).
_WEIGHT_OPTIONS = frozenset({"pretrained", "weights", "checkpoint", "checkpoint_path", "pretrained_cfg",
                             "pretrained_cfg_overlay", "pretrained_file", "file", "path"})
#: Sane bounds of the size options a file may carry, checked before a model is built: (low, high), inclusive.
OPTION_BOUNDS: Mapping[str, tuple[float, float]] = {
    "num_classes": (1, 100_000), "width": (0.01, 8.0), "depths": (0, 64), "resolution": (8, MAX_RESOLUTION),
    "resolution_w": (8, MAX_RESOLUTION),
}
_INTEGER_OPTIONS = frozenset({"num_classes", "depths", "resolution", "resolution_w"})
_MAX_NUMBER = 1e6  # any other numeric option
_MAX_ITEMS = 256  # items of a list option


def is_number(value: Any) -> bool:
    """``value`` is a number a file may carry: a float, or an integer (not a boolean) a float can hold. JSON reads a
    400-digit integer too, which no float holds (`math.isfinite` of it raises `OverflowError`)."""
    if isinstance(value, float):
        return True
    return isinstance(value, int) and not isinstance(value, bool) and -sys.float_info.max <= value <= sys.float_info.max


def check_token(value: Any, field: str, *, empty: bool = False) -> str:
    """``value`` as a word of a key or a command: a string of at most 64 letters, digits and ``_ . : + -``, not
    starting with punctuation (``cpu``, ``cuda:0``, ``onnxruntime``, ``fp32``, ``channels_last``, an environment id);
    ``empty``: "" too."""
    if value == "" and empty:
        return value
    if not isinstance(value, str):
        raise FieldError(f"field {field!r} must be a string, got {type(value).__name__}")
    if len(value) > MAX_TOKEN or not _TOKEN.fullmatch(value):
        raise FieldError(f"field {field!r} is {shown(value)}: it may hold up to {MAX_TOKEN} letters, digits and "
                         "_ . : + - (starting with a letter or digit)")
    return value


def check_name(value: Any, field: str) -> str:
    """``value`` as a name shown to people (a device's model name): a string of 1 to 200 letters, digits, spaces and
    ``_ . , : ( ) @ + / # - ' & *`` (no markup, no shell or formula characters), starting with a letter or digit."""
    if not isinstance(value, str):
        raise FieldError(f"field {field!r} must be a string, got {type(value).__name__}")
    bad = next((c for c in value if not (c.isalnum() or c in _NAME_PUNCTUATION)), None)
    if not value or len(value) > MAX_NAME or bad is not None or not value[0].isalnum():
        why = (f"it holds {bad!r}" if bad is not None else "it is empty" if not value else
               f"it is longer than {MAX_NAME} characters" if len(value) > MAX_NAME else "it starts with punctuation")
        raise FieldError(f"field {field!r} is {shown(value)}: {why}; a name holds up to {MAX_NAME} letters, digits, "
                         "spaces and _ . , : ( ) @ + / # - ' & *, starting with a letter or digit")
    return value



def check_text(value: Any, field: str, *, limit: int = 1000, none: bool = False, quoted: bool = False) -> str | None:
    """``value`` as free text (a plan's name, a note): a string of at most ``limit`` characters without control
    characters (a newline, an escape) and without backquotes, which dsprof's messages keep for the parameters and
    calls the command line shows as its own options and commands (`dsprof.cli.flags.command_line_text`), so that a
    name from a file can never print as a command to run; ``quoted``: backquotes too (a runtime's error message,
    which is only shown); ``none``: None too."""
    if value is None and none:
        return None
    if not isinstance(value, str):
        raise FieldError(f"field {field!r} must be a string, got {type(value).__name__}")
    if len(value) > limit or _CONTROL.search(value):
        raise FieldError(f"field {field!r} must be text of at most {limit} characters without control characters")
    if "`" in value and not quoted:
        raise FieldError(f"field {field!r} is {shown(value)}: it holds a backquote, which dsprof keeps for the "
                         "commands its messages suggest; write it without backquotes")
    return value


def check_count(value: Any, field: str, low: int, high: int, *, none: bool = False) -> int | None:
    """``value`` as an integer from ``low`` to ``high`` (a batch, threads, a resolution); ``none``: None too."""
    if value is None and none:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise FieldError(f"field {field!r} must be an integer, got {shown(value)}")
    if not low <= value <= high:
        raise FieldError(f"field {field!r} is {shown(value)}: it must be from {low} to {high}")
    return value


def check_samples(values: Any, field: str = "samples_s") -> tuple[float, ...]:
    """``values`` as timed samples: a list of at most a million numbers of seconds, each finite, above 0 and at most a
    day. An empty list is a workload that failed (its error says why)."""
    if not isinstance(values, (list, tuple)):
        raise FieldError(f"field {field!r} must be a list of seconds, got {type(values).__name__}")
    if len(values) > MAX_SAMPLES:
        raise FieldError(f"field {field!r} holds {len(values)} samples, more than {MAX_SAMPLES}")
    for i, v in enumerate(values):
        if not is_number(v) or not math.isfinite(v) or not 0 < v <= MAX_SAMPLE_S:
            raise FieldError(f"field {field!r}, sample {i + 1} is {shown(v)}: a sample is a number of seconds "
                             f"above 0 and at most {MAX_SAMPLE_S:.0f}")
    return tuple(float(v) for v in values)


def check_shape(values: Any, field: str = "input_shape") -> tuple[int, ...]:
    """``values`` as an input shape (N, C, H, W): four positive integers, the batch, channels and sides bounded."""
    if not isinstance(values, (list, tuple)) or len(values) != 4:
        raise FieldError(f"field {field!r} must be a list of 4 integers (N, C, H, W), got {shown(values)}")
    highs = (MAX_BATCH, MAX_CHANNELS, MAX_RESOLUTION, MAX_RESOLUTION)
    return tuple(check_count(v, f"{field}[{i}]", 1, high) for i, (v, high) in enumerate(zip(values, highs)))


def check_model_options(options: Any, field: str = "model_options") -> dict[str, Any]:
    """``options`` as a model's build options read from a file: an object of plain values (numbers, booleans,
    short strings, lists of numbers) whose sizes (`OPTION_BOUNDS`: ``num_classes``, ``width``, ``depths``,
    ``resolution``; any other number within a million) are sane, and that names no weights and no file (an option
    ``pretrained``, a string with a path in it): weights are given by whoever runs dsprof, never by a file."""
    if not isinstance(options, dict):
        raise FieldError(f"field {field!r} must be an object of options, got {type(options).__name__}")
    for key, value in options.items():
        name = f"{field}.{key}"
        check_token(key, f"{field} key")
        if key in _WEIGHT_OPTIONS:
            raise FieldError(f"field {name!r}: a file cannot choose weights or files to load; give weights yourself "
                             "(the weights parameter)")
        low, high = OPTION_BOUNDS.get(key, (-_MAX_NUMBER, _MAX_NUMBER))
        items = value if isinstance(value, (list, tuple)) else [value]
        if len(items) > _MAX_ITEMS:
            raise FieldError(f"field {name!r} holds {len(items)} values, more than {_MAX_ITEMS}")
        for item in items:
            if isinstance(item, str):
                if "/" in item or "\\" in item or item.startswith("~") or len(item) > MAX_TOKEN:
                    raise FieldError(f"field {name!r} is {shown(item)}: an option read from a file cannot name a "
                                     f"path (or exceed {MAX_TOKEN} characters); give weights yourself (the weights "
                                     "parameter)")
                if key in OPTION_BOUNDS:
                    raise FieldError(f"field {name!r} must be a number, got {shown(item)}")
                check_token(item, name)
            elif item is None or isinstance(item, bool):
                if key in OPTION_BOUNDS:
                    raise FieldError(f"field {name!r} must be a number, got {shown(item)}")
            elif not is_number(item) or not math.isfinite(item) or not low <= item <= high:
                raise FieldError(f"field {name!r} is {shown(item)}: it must be a number from {low:g} to {high:g}")
            elif key in _INTEGER_OPTIONS and not isinstance(item, int):
                raise FieldError(f"field {name!r} is {shown(item)}: it must be an integer")
    return options


def check_number(value: Any, field: str, low: float = -math.inf, high: float = math.inf, *, none: bool = False,
                 finite: bool = True) -> float | None:
    """``value`` as a number (an integer or a float, not a boolean) from ``low`` to ``high``; ``finite``: not NaN or
    infinite; ``none``: None too."""
    if value is None and none:
        return None
    if not is_number(value):
        raise FieldError(f"field {field!r} must be a number, got {shown(value)}")
    if finite and not math.isfinite(value):
        raise FieldError(f"field {field!r} is {value}: it must be a finite number")
    if not math.isnan(value) and not low <= value <= high:
        raise FieldError(f"field {field!r} is {value:g}: it must be from {low:g} to {high:g}")
    return value


def check_plain(value: Any, field: str, *, depth: int = 4) -> Any:
    """``value`` as plain data that dsprof only shows (a machine's description, a run's state): objects with text
    keys, lists, text without control characters (`check_text`), finite numbers, booleans and None, nested at most
    ``depth`` deep."""
    if isinstance(value, dict) and depth > 0:
        for key, item in value.items():
            check_text(key, f"{field} key")
            check_plain(item, f"{field}.{key}", depth=depth - 1)
    elif isinstance(value, list) and depth > 0:
        for i, item in enumerate(value):
            check_plain(item, f"{field}[{i}]", depth=depth - 1)
    elif isinstance(value, str):
        check_text(value, field)
    elif is_number(value):
        check_number(value, field)
    elif not (value is None or isinstance(value, bool)):
        raise FieldError(f"field {field!r} holds {shown(value)}: more nested than {depth} levels")
    return value


def check_environment(env: Any, field: str = "environment") -> dict[str, Any]:
    """``env`` as the machine a record was timed on (what `dsprof.portable.hardware` reads there): plain data
    (`check_plain`) whose ``cpu``, ``jetson`` and ``versions`` are objects, ``gpu`` a list of objects, and whose
    ``host``, ``allocator`` and versions are text."""
    if not isinstance(env, dict):
        raise FieldError(f"field {field!r} must be an object, got {type(env).__name__}")
    check_plain(env, field)
    for key in ("cpu", "jetson", "versions"):
        if not isinstance(env.get(key, {}), dict):
            raise FieldError(f"field '{field}.{key}' must be an object, got {type(env[key]).__name__}")
    gpu = env.get("gpu", [])
    if not isinstance(gpu, list) or not all(isinstance(g, dict) for g in gpu):
        raise FieldError(f"field '{field}.gpu' must be a list of objects, got {shown(gpu)}")
    for key in ("host", "allocator"):
        check_text(env.get(key), f"{field}.{key}", none=True)
    for key, version in env.get("versions", {}).items():
        check_text(version, f"{field}.versions.{key}", limit=200)
    return env


def plain(text: Any) -> str:
    """``text`` (data: a value from a file, a library's error about it) for a message, each backquote written
    ``\\x60`` (as Python may write it), so that no data forms a span that `dsprof.cli.flags.command_line_text` would
    show as a command."""
    return str(text).replace("`", "\\x60")


def shown(value: Any) -> str:
    """``value`` for a message: its repr (`plain`), cut to 60 characters."""
    text = plain(repr(value))
    return text if len(text) <= 60 else text[:57] + "..."
