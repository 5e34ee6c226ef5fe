"""How training consumers divide shards and samples among ranks, workers and epochs."""

from __future__ import annotations

POLICIES = ("dali", "whale", "webdataset", "torch", "streaming")
