"""A tuning record: one measured (or failed) schedule of one workload on one target.

A record is a plain value: text fields and floats, so that it stores as one row of the tuning
database (:mod:`ember.tune.database`) and as one line of a JSON-lines file
(:meth:`Record.to_json`, :meth:`Record.from_json`) with nothing lost.
"""
from __future__ import annotations

import dataclasses
import json
import math
import statistics

from ..errors import TuneError

# the error text of a record that sets its trace aside: slower in the model than the default
# schedule, though it won alone (ember.tune.in_model)
SET_ASIDE = "slower in the model"
# the error text of a record that passes over its trace alone: in the model it lost to a
# runner-up of the same workload, which is applied instead (ember.tune.in_model)
PASSED_OVER = "passed over in the model"
_TEXT_FIELDS = ("workload", "target", "trace", "decisions", "error", "task", "features", "ember_version")
_REQUIRED = ("workload", "target", "trace")


@dataclasses.dataclass(frozen=True)
class Record:
    """One candidate schedule of a workload, and what measuring it gave.

    ``times`` are seconds per call, one per timed batch or round (empty when it failed): as
    measured, or, where they were timed beside the default schedule's, scaled by the pair's
    ratio to the default's least time (:func:`ember.tune.tuner._comparable`); timed in the
    model (:mod:`ember.tune.in_place`) or alone, the tuner compares them alike; ``error`` is ``""``
    on success and otherwise says why it failed (``"crash: signal 11"``, ``"timeout: 10 s"``,
    ``"wrong: max diff 3.1"``, ``"build: ScheduleError ..."``). ``trace`` is the schedule as
    ``Trace.to_json()`` text and ``decisions`` the knob decisions that made it (a JSON object's
    text). ``features`` is the cost model's features of this candidate (a JSON list's text, or
    ``""``). The database fills in ``created`` (when 0) and ``ember_version`` (when ``""``).
    """

    workload: str
    target: str
    trace: str
    decisions: str = "{}"
    times: tuple = ()
    error: str = ""
    task: str = ""
    features: str = ""
    ember_version: str = ""
    created: float = 0.0

    def __post_init__(self):
        for name in _TEXT_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, str):
                raise TuneError(f"Record.{name} must be a str, not {type(value).__name__} ({value!r:.80})")
        times = self.times
        if isinstance(times, (str, bytes)) or not hasattr(times, "__iter__"):
            raise TuneError(f"Record.times must be a sequence of seconds, not {type(times).__name__} ({times!r:.80})")
        try:
            times = tuple(float(t) for t in times)
        except (TypeError, ValueError) as e:
            raise TuneError(f"Record.times must be numbers of seconds: {self.times!r:.80} ({e})") from None
        if any(not math.isfinite(t) or t < 0 for t in times):
            raise TuneError(f"Record.times must be finite, non-negative seconds: {times!r:.80}")
        object.__setattr__(self, "times", times)
        try:
            created = float(self.created)
        except (TypeError, ValueError):
            raise TuneError(f"Record.created must be a time in seconds, not {self.created!r:.80}") from None
        if not math.isfinite(created):
            raise TuneError(f"Record.created must be finite, not {created!r}")
        object.__setattr__(self, "created", created)

    @property
    def ok(self) -> bool:
        """Whether the measurement succeeded: no error, and at least one time."""
        return not self.error and bool(self.times)

    @property
    def median(self) -> float:
        """The median of ``times`` in seconds; ``inf`` when the record is not :attr:`ok`."""
        return statistics.median(self.times) if self.ok else math.inf

    def to_json(self) -> str:
        """This record as one JSON object on one line (text fields stay text)."""
        return json.dumps(dataclasses.asdict(self) | {"times": list(self.times)},
                          separators=(",", ":"), ensure_ascii=False, allow_nan=False)

    @staticmethod
    def from_json(line: str | bytes, where: str = "") -> "Record":
        """A record from one JSON line (:meth:`to_json`'s form).

        Missing optional keys take their defaults and unknown keys are ignored (records of other
        Ember versions). ``trace``, ``decisions`` and ``features`` may also be given as JSON
        values instead of their text. ``where`` (``"records.jsonl:12"``) names the line in errors.
        A line that is not such an object raises :class:`~ember.errors.TuneError` saying why.
        """
        at = f" ({where})" if where else ""
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError as e:
                raise TuneError(f"tuning record{at} is not UTF-8 text: {e}") from None
        if not isinstance(line, str):
            raise TuneError(f"tuning record{at} must be a line of JSON text, not {type(line).__name__}")
        shown = line.strip()
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise TuneError(f"tuning record{at} is not JSON ({e}): {shown!r}") from None
        if not isinstance(obj, dict):
            raise TuneError(f"tuning record{at} must be a JSON object, not {type(obj).__name__}: {shown!r}")
        missing = [k for k in _REQUIRED if k not in obj]
        if missing:
            raise TuneError(f"tuning record{at} lacks {', '.join(map(repr, missing))}: {shown!r}")
        fields = {}
        for f in dataclasses.fields(Record):
            if f.name not in obj:
                continue
            value = obj[f.name]
            if f.name in ("trace", "decisions", "features") and not isinstance(value, str):
                if f.name == "features" and value is None:
                    value = ""
                else:
                    value = json.dumps(value)
            fields[f.name] = value
        try:
            return Record(**fields)
        except TuneError as e:
            raise TuneError(f"tuning record{at}: {e}") from None
