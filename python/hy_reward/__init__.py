"""hy's reward worker: a reward function written in Python, run beside the
trainer (``python -m hy_reward.serve FILE FUNCTION``; hy's PythonReward,
trainer/data/python_reward.cc, starts one per rank and talks to it in JSON
lines).
"""
