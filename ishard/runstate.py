"""A run's records in DST while it works: its plan's fingerprint and its finished shards."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from . import __version__, localstate
from .errors import IshardError, WriteError
from .formats.compress import gzip_library
from .lock import STATE_DIR
from .model import Plan, ShardResult
from .retry import Retrier
from .sinks import TEMP_SUFFIX, WRITE_FIX, put_file
from .storage import Location, storage_error
from .table import ShardList

RUN_NAME = f"{STATE_DIR}/run.json"
DONE_DIR = f"{STATE_DIR}/done"
# Options that change how a run goes, not what it writes: a resume may change them.
EXECUTION_ONLY = frozenset({"jobs", "overwrite", "resume", "executor", "scheduler",
                            "read_buffer", "retries", "part_size", "endpoint_url",
                            "storage_options", "strict"})
MD5_CHUNK = 8 << 20


def fingerprint(plan: Plan) -> str:
    """A digest of everything the shards' bytes depend on: ishard's version, the gzip library,
    the source, the options that shape output, the seed, and every planned member (name,
    size, mtime, and its stamp: nanosecond mtime and inode locally, ETag and mtime on a store)
    in every shard, so a file rewritten within the same second is not taken for the same."""
    options = {k: v for k, v in plan.options.items() if k not in EXECUTION_ONLY}
    level = options.get("compress_level")
    digest = hashlib.sha256(orjson.dumps(
        {"ishard": __version__, "source": plan.source, "options": options, "seed": plan.seed,
         "gzip": gzip_library(6 if level is None else level, options.get("gzip_library", "auto"))[0]},
        option=orjson.OPT_SORT_KEYS,
    ))
    shards = plan.shards
    if isinstance(shards, ShardList):
        shards.digest(digest.update)
    else:
        for shard in shards:
            digest.update(f"\x01{shard.name}\n".encode("utf-8", "surrogateescape"))
            for f in shard.members():
                digest.update(f"{f.name}\x00{f.size}\x00{f.mtime}\n"
                              .encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


class RunState:
    """``DST/.ishard-run/``: ``run.json`` (the fingerprint, and the seed of an unseeded
    shuffle) and ``done/<index>.json`` (one per finished shard: its name, size and md5).
    Removed once the manifest is written. Locally nothing in it is read, written or removed
    through a link (see ``localstate``)."""

    def __init__(self, dest: Location, retrier: Retrier) -> None:
        self._dest, self._retrier = dest, retrier

    def _local(self, name: str, use, *, create: bool = False):
        """``use(dir_fd, base)`` on ``name`` (a path inside ``.ishard-run``) in its real folder;
        None when that folder is missing."""
        inner, _, base = name.rpartition("/")
        fd = localstate.open_dir(self._dest.root, inner, create=create)
        if fd is None:
            return None
        try:
            return use(fd, base)
        finally:
            os.close(fd)

    def _read(self, name: str) -> bytes | None:
        dest = self._dest
        try:
            if dest.is_local:
                return self._local(name, localstate.read)
            return self._retrier.run(partial(dest.fs.cat_file, dest.child(name)))
        except FileNotFoundError:
            return None
        except IshardError:
            raise
        except OSError as err:
            raise IshardError(f"cannot read {name!r} in {dest.url!r}: {err.strerror or err} — "
                              "check the destination's permissions") from None
        except Exception as err:
            raise storage_error(err, dest, "destination") from None

    def _put(self, name: str, data: bytes) -> None:
        dest = self._dest
        if not dest.is_local:
            put_file(dest, name, data, self._retrier)
            return
        temp = f".{name.rpartition('/')[2]}.{os.getpid()}{TEMP_SUFFIX}"
        try:
            self._local(name, lambda fd, base: localstate.write(fd, base, data, temp),
                        create=True)
        except OSError as err:
            raise WriteError(f"cannot write {str(Path(dest.root) / name)!r}: "
                             f"{err.strerror or err} — {WRITE_FIX.get(err.errno, WRITE_FIX[None])}"
                             ) from None

    def earlier(self) -> dict:
        """What an earlier, unfinished run recorded here (``fingerprint``, ``seed`` …), if any."""
        data = self._read(RUN_NAME)
        try:
            record = orjson.loads(data) if data else {}
        except orjson.JSONDecodeError:
            return {}
        return record if isinstance(record, dict) else {}

    def earlier_fingerprint(self) -> str | None:
        """The fingerprint an earlier, unfinished run recorded here, if any."""
        fingerprint = self.earlier().get("fingerprint")
        return fingerprint if isinstance(fingerprint, str) else None

    def begin(self, fingerprint: str, shards: int, shuffle_seed: int | None = None,
              replaced: list[str] | None = None, plan: dict | None = None) -> None:
        """Record this run's fingerprint (before any shard is written), the seed ishard
        drew for an unseeded ``--sort shuffle`` (which a ``--resume`` reuses), the earlier
        run's archives to remove once the manifest is written (which a ``--resume`` removes),
        and what the plan was made from (``planrecord.plan_record``: a refused ``--resume``
        names what changed)."""
        record: dict = {"fingerprint": fingerprint, "shards": shards}
        if plan is not None:
            record["plan"] = plan
        if shuffle_seed is not None:
            record["shuffle_seed"] = shuffle_seed
        if replaced:
            record["replaced"] = replaced
        self._put(RUN_NAME, orjson.dumps(record))

    def record(self, index: int, result: ShardResult) -> None:
        """Note that shard ``index`` is complete (called after it got its final name)."""
        record = {"name": result.name, "filesize": result.filesize, "md5": result.md5}
        if result.etag is not None:
            record["etag"] = result.etag
        self._put(f"{DONE_DIR}/{index:09d}.json", orjson.dumps(record))

    def _done_names(self) -> list[str]:
        """The names in ``done/``; a killed run's temp records are removed on the way."""
        dest = self._dest
        if dest.is_local:
            def names(fd: int, _: str) -> list[str]:
                found = os.listdir(fd)
                for name in found:
                    if name.endswith(TEMP_SUFFIX):
                        localstate.remove(fd, name)
                return found
            return self._local(f"{DONE_DIR}/.", names) or []
        found = self._retrier.run(partial(dest.fs.find, dest.child(DONE_DIR)))
        return [p.rpartition("/")[2] for p in found]

    def recorded(self) -> dict[int, dict]:
        """The finished shards recorded so far, by plan index (anything else in ``done/`` —
        a killed run's temp record, a stray file — is not a record)."""
        try:
            names = self._done_names()
        except IshardError:
            raise
        except Exception as err:
            raise storage_error(err, self._dest, "destination") from None
        records = {}
        for name in names:
            stem = name.removesuffix(".json")
            if not (name.endswith(".json") and stem.isascii() and stem.isdigit()):
                continue
            data = self._read(f"{DONE_DIR}/{name}")
            try:
                records[int(stem)] = orjson.loads(data) if data else None
            except orjson.JSONDecodeError:
                continue  # unreadable: the shard is written again
        return {i: r for i, r in records.items() if isinstance(r, dict)}

    def _remove(self, names: Iterable[str], *, quiet: bool = False) -> None:
        dest = self._dest
        try:
            if dest.is_local:
                for name in names:
                    inner, _, base = name.rpartition("/")
                    if inner:
                        self._local(name, localstate.remove)
                    else:
                        fd = os.open(dest.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                        try:
                            localstate.remove(fd, base)
                        finally:
                            os.close(fd)
                return
            self._remove_remote()  # run.json and done/: a store's lock is the lease's
        except FileNotFoundError:
            pass
        except IshardError:
            raise
        except Exception as err:
            if not (quiet and dest.is_local):
                raise storage_error(err, dest, "destination") from None

    def clear(self) -> None:
        """Remove every record (locally the lock's file too: the run is over or starts afresh;
        a store's lock object is the lease's to remove)."""
        self._remove([STATE_DIR], quiet=True)  # the manifest is written: the run succeeded

    def forget_shards(self) -> None:
        """A fresh run over old records: drop them, keep the lock."""
        self._remove([DONE_DIR, RUN_NAME])

    def _remove_remote(self) -> None:
        """Remove ``run.json`` and ``done/``, one retried request at a time (a retry repeats
        one request, not a composite call that may fail at the same step again)."""
        dest, run = self._dest, self._retrier.run
        fs: Any = dest.fs
        if not dest.is_s3:
            for name in (DONE_DIR, RUN_NAME):
                path = dest.child(name)
                if run(partial(fs.exists, path)):
                    run(partial(fs.rm, path, recursive=True))
            return
        bucket, _, done = dest.child(DONE_DIR).partition("/")
        keys = [dest.child(RUN_NAME).partition("/")[2]]
        token: dict[str, str] = {}
        while True:
            page = run(partial(fs.call_s3, "list_objects_v2", Bucket=bucket, Prefix=done + "/",
                               **token))
            keys += [item["Key"] for item in page.get("Contents", [])]
            if not page.get("IsTruncated"):
                break
            token = {"ContinuationToken": page["NextContinuationToken"]}
        for start in range(0, len(keys), 1000):  # S3's most per request
            batch = [{"Key": key} for key in keys[start : start + 1000]]
            run(partial(fs.call_s3, "delete_objects", Bucket=bucket,
                        Delete={"Objects": batch, "Quiet": True}))
        fs.invalidate_cache(dest.child(STATE_DIR))


def file_md5(path: Path) -> str:
    """The md5 of a local file, read in chunks."""
    digest = hashlib.md5()
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(MD5_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def still_complete(dest: Location, record: dict, retrier: Retrier | None = None) -> bool:
    """Is the recorded shard still there, whole? Its size always, then what was recorded: on
    S3 its ETag (from the write; else the md5 when the ETag is a plain md5), elsewhere its md5
    (re-read). Nothing recorded to compare with (``--checksum none``): the size alone."""
    name = record.get("name")
    if not isinstance(name, str):
        return False
    run = retrier.run if retrier is not None else (lambda call: call())
    md5 = record.get("md5")
    try:
        if dest.is_local:
            path = Path(dest.root) / name
            st = path.lstat()  # a link planted under a shard's name is no shard: rewritten
            if not stat.S_ISREG(st.st_mode) or st.st_size != record.get("filesize"):
                return False
            return md5 is None or file_md5(path) == md5
        fs: Any = dest.fs
        where = dest.child(name)
        if dest.is_s3:
            bucket, _, key = where.partition("/")
            head = run(lambda: fs.call_s3("head_object", Bucket=bucket, Key=key))
            if head.get("ContentLength") != record.get("filesize"):
                return False
            etag = head.get("ETag")
            if record.get("etag") is not None:
                return etag == record["etag"]
            plain = (etag or "").strip('"')
            if md5 is not None and len(plain) == 32 and "-" not in plain:
                return plain == md5
        elif run(lambda: fs.info(where))["size"] != record.get("filesize"):
            return False
        return md5 is None or run(lambda: _store_md5(fs, where)) == md5
    except FileNotFoundError:
        return False
    except OSError:
        return False


def _store_md5(fs, path: str) -> str:
    """The md5 of an object, read in chunks."""
    digest = hashlib.md5()
    with fs.open(path, "rb") as f:
        while chunk := f.read(MD5_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def remove_temp_files(dest: Location, names: Iterable[str]) -> int:
    """Remove temp files a killed run left beside the shards (local destinations)."""
    if not dest.is_local:
        return 0
    removed = 0
    root = Path(dest.root)
    folders = {(root / name).parent for name in names}
    folders.add(root)
    for folder in folders:
        if any(p.is_symlink() for p in (folder, *folder.parents) if root in p.parents):
            continue  # a linked folder leads out of DST: nothing there is ours to remove
        for temp in folder.glob(f".*{TEMP_SUFFIX}"):
            temp.unlink(missing_ok=True)
            removed += 1
    return removed
