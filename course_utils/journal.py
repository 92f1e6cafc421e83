"""The student's log: one JSON object a line in predictions.jsonl (or the file COURSE_PREDICTIONS names).

predict appends a line for every revealed prediction (it has a "key"), hints one for every hint opened
(it has a "hint"). Both read it back: the scoreboard, the calibration picture, and an instructor who
collects the files see what a student guessed and how much help they asked for."""
from __future__ import annotations

import datetime
import json
import os
from pathlib import Path


def path() -> Path:
    return Path(os.environ.get("COURSE_PREDICTIONS") or "predictions.jsonl")


def append(entry: dict) -> None:
    """Add one entry, stamped with the time. A read-only folder must not stop the lesson."""
    entry = {**entry, "time": datetime.datetime.now().isoformat(timespec="seconds")}
    try:
        with path().open("a") as f:
            f.write(json.dumps(entry, default=str) + "\n")
    except OSError:
        pass


def entries() -> list[dict]:
    """Every entry in the order written; a line that is not a JSON object is skipped."""
    out = []
    try:
        lines = path().read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict):
            out.append(e)
    return out
