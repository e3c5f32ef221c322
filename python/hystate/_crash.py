"""A test hook: the crash points of hy's commit protocols.

HY_TEST_CRASH_AT=<point>[:<rank>] ends the process at that point, as a
kill -9 would (os._exit, no cleanup, nothing flushed), on every rank or only
on <rank>. The crash-point tests (tests/python/test_crash_points.py) set it
and check that the next reader loads the newest step the coordinator
decided, and that a step nobody decided is invisible. Unset, a point costs
a dictionary lookup.

Points (in the order a save passes them):
  save.prepared       hystate.save: this rank's part is prepared, no vote yet
  save.decided        hystate.save, rank 0: its store committed (the decision),
                      the others not told yet
  save.before_follow  hystate.save, rank > 0: told commit, not committed here
  save.followed       hystate.save, rank > 0: committed here
  dcp.decided         hystate.dcp's finish: the coordinator's store committed,
                      no other store yet
  dcp.copied          hystate.dcp's finish: one other store committed, the rest
                      not
"""

import os

EXIT_CODE = 86


def crash_point(name: str, rank: int) -> None:
    want = os.environ.get("HY_TEST_CRASH_AT")
    if not want:
        return
    point, _, only = want.partition(":")
    if point == name and (not only or int(only) == rank):
        os._exit(EXIT_CODE)
