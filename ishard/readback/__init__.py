"""Reading shards back: their members (`archive.py`), and a destination checked against its manifest (`verify.py`, one shard at a time in `shard.py`)."""
