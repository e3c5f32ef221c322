"""Runs a reward function written in Python for hy's trainer.

    python -m hy_reward.serve FILE FUNCTION

FILE is a Python file and FUNCTION a function in it, in either of verl's
two forms (a verl reward file works as it is):

  per sample  FUNCTION(data_source, solution_str, ground_truth,
                       extra_info=None) -> float | {"score": float, ...}
  batched     FUNCTION(data_sources, solution_strs, ground_truths,
                       extra_infos) -> [float | {"score": float, ...}]

(batched when the function has a ``solution_strs`` parameter).
``solution_str`` is the response as decoded (up to its eos),
``ground_truth`` the record's "answer", ``data_source`` its "data_source"
field ("" when it has none), ``extra_info`` the record's other fields
plus "prompt" (the prompt's text as the model saw it), "ended_with_eos"
and "index".

Protocol (what hy's PythonReward speaks): the worker writes one line
``{"ready": true}``, or ``{"error": ...}`` when FILE or FUNCTION cannot be
loaded, and exits. Then, per line read on stdin,
``{"data_sources": [...], "solution_strs": [...], "ground_truths": [...],
"extra_infos": [...]}``, it writes one line: ``{"scores": [...],
"correct": [bool or null, ...], "seconds": t}`` ("correct": verl's "acc"
key where the function returned a dict with one), or ``{"error": MESSAGE, "index": i}`` naming the sample
whose score raised or is not a finite number (for a batched function that
raised, the sample found by calling it on one sample at a time; null when
none alone raises). What the function prints goes to stderr, never into
the protocol. The worker exits when stdin closes.
"""

import importlib.util
import inspect
import json
import math
import os
import sys
import time
import traceback


def _load(path, name):
    spec = importlib.util.spec_from_file_location("hy_user_reward", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec.loader.exec_module(module)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise AttributeError(f"{path} has no function {name!r}")
    return fn


def _correct_of(value):
    """verl's "acc" of a dict answer as a bool, else None."""
    if isinstance(value, dict) and isinstance(value.get("acc"),
                                              (bool, int, float)):
        return bool(value["acc"])
    return None


def _score_of(value):
    """A float from a function's answer for one sample, or raises."""
    if isinstance(value, dict):
        if "score" not in value:
            raise ValueError(f"returned a dict without \"score\": {value!r}")
        value = value["score"]
    if isinstance(value, bool):
        value = float(value)
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"returned {value!r}, not a finite number")
    return float(value)


def _error(e):
    last = traceback.extract_tb(e.__traceback__)[-1:]
    where = f" ({last[0].filename}:{last[0].lineno})" if last else ""
    return f"{type(e).__name__}: {e}{where}"


class Worker:
    def __init__(self, fn):
        self.fn = fn
        params = inspect.signature(fn).parameters
        self.batched = "solution_strs" in params

    def one(self, req, i):
        """The function's answer for sample i alone (raises as it does)."""
        if self.batched:
            out = self.fn(data_sources=[req["data_sources"][i]],
                          solution_strs=[req["solution_strs"][i]],
                          ground_truths=[req["ground_truths"][i]],
                          extra_infos=[req["extra_infos"][i]])
            if len(out) != 1:
                raise ValueError(f"returned {len(out)} scores for 1 sample")
            return out[0]
        return self.fn(req["data_sources"][i], req["solution_strs"][i],
                       req["ground_truths"][i], req["extra_infos"][i])

    def score(self, req):
        n = len(req["solution_strs"])
        if not self.batched:
            out = []
            for i in range(n):
                try:
                    out.append(self.one(req, i))
                except Exception as e:
                    return {"error": _error(e), "index": i}
            return self.answer(out)
        try:
            out = list(self.fn(data_sources=req["data_sources"],
                               solution_strs=req["solution_strs"],
                               ground_truths=req["ground_truths"],
                               extra_infos=req["extra_infos"]))
            if len(out) != n:
                return {"error": f"returned {len(out)} scores for {n} "
                                 "samples", "index": None}
        except Exception as e:
            for i in range(n):  # Which sample makes it raise?
                try:
                    self.one(req, i)
                except Exception as e_one:
                    return {"error": _error(e_one), "index": i}
            return {"error": _error(e), "index": None}
        return self.answer(out)

    @staticmethod
    def answer(out):
        scores = []
        for i, value in enumerate(out):
            try:
                scores.append(_score_of(value))
            except ValueError as e:
                return {"error": str(e), "index": i}
        return {"scores": scores, "correct": [_correct_of(v) for v in out]}


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    # The protocol keeps the real stdout; the function's prints go to stderr.
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        worker = Worker(_load(argv[1], argv[2]))
    except Exception as e:
        proto.write(json.dumps({"error": _error(e)}) + "\n")
        proto.flush()
        return 1
    proto.write(json.dumps({"ready": True}) + "\n")
    proto.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        start = time.perf_counter()
        try:
            answer = worker.score(json.loads(line))
        except (ValueError, KeyError, TypeError, IndexError) as e:
            answer = {"error": f"bad request: {_error(e)}", "index": None}
        answer["seconds"] = time.perf_counter() - start
        proto.write(json.dumps(answer) + "\n")
        proto.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
