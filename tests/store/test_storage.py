"""Where data lives, without a server: URL resolution, storage options, store errors, and
listings from inventory files (``--src-list``) on the local disk."""

from __future__ import annotations

import csv
import datetime
import gzip
import io
import json
import sys
from pathlib import Path
from urllib.parse import quote_plus

import pytest
from helpers import invoke_ishard

from ishard.errors import IshardError, SourceError, UsageError, WriteError
from ishard.model import Tally
from ishard.names import HIDDEN
from ishard.planning.inventory import list_inventory
from ishard.store import parse_storage_options, resolve
from ishard.store.failures import storage_error
from ishard.store.fsspec import FsspecStore
from ishard.store.local import LocalStore

# ---------------------------------------------------------------- resolve


@pytest.fixture
def no_ais(monkeypatch):
    monkeypatch.delenv("AIS_ENDPOINT", raising=False)


def test_a_local_path_or_file_url_is_a_local_directory(tmp_path):
    for url in (str(tmp_path), f"file://{tmp_path}"):
        loc = resolve(url)
        assert isinstance(loc.store, LocalStore) and not loc.store.capabilities.many_at_once
        assert loc.root == str(tmp_path) and loc.prefix == ""
        assert loc.child("a/b.tar") == str(tmp_path / "a" / "b.tar")


KEYS = {"key": "K", "secret": "S"}


@pytest.mark.parametrize(
    "url, bucket, prefix",
    [
        ("s3://bkt", "bkt", ""),
        ("s3://bkt/", "bkt", ""),
        ("s3://bkt/ImageNet/Data", "bkt", "ImageNet/Data"),
        ("s3://bkt/matched_prefix_", "bkt", "matched_prefix_"),
        ("s3://bkt/data/", "bkt", "data/"),  # a trailing slash keeps data-old/ out
        ("s3a://bkt/a/b", "bkt", "a/b"),
    ],
)
def test_a_bucket_url_is_bucket_and_listing_prefix(url, bucket, prefix):
    loc = resolve(url, endpoint_url="http://127.0.0.1:1", storage_options=KEYS)
    assert loc.store.scheme == "s3" and loc.store.capabilities.many_at_once
    assert (loc.root, loc.prefix, loc.url) == (bucket, prefix, url)
    assert loc.key("shard-000000.tar") == "/".join(
        p for p in (prefix.strip("/"), "shard-000000.tar") if p
    )
    assert loc.child("shard-000000.tar") == "s3://" + "/".join(
        p for p in (bucket, prefix.strip("/"), "shard-000000.tar") if p
    )


@pytest.mark.parametrize(
    "url, scheme",
    [("gs://bkt/p", "gs"), ("gcs://bkt/p", "gs"), ("az://bkt/p", "az"), ("abfs://bkt/p", "az")],
)
def test_gcs_and_azure_urls_are_obstore_buckets(url, scheme):
    options = {"account_name": "devstoreaccount1", "use_emulator": True} if scheme == "az" else {}
    loc = resolve(url, endpoint_url="http://127.0.0.1:1", storage_options=options)
    assert loc.store.scheme == scheme and (loc.root, loc.prefix) == ("bkt", "p")


def test_the_fsspec_backend_is_taken_on_request_with_ishards_retry_settings():
    options = parse_storage_options(
        ["backend=fsspec", "key=K", "secret=S", "config_kwargs.connect_timeout=3"]
    )
    loc = resolve("s3://bkt/p", endpoint_url="http://127.0.0.1:9", storage_options=options)
    assert isinstance(loc.store, FsspecStore) and loc.store.scheme == "s3"
    fs = loc.store.fs
    assert fs.endpoint_url == "http://127.0.0.1:9" and (fs.key, fs.secret) == ("K", "S")
    # the nested option merges with ishard's settings instead of replacing them
    assert fs.config_kwargs["connect_timeout"] == 3
    assert fs.config_kwargs["retries"]["max_attempts"] == 2
    assert getattr(fs, "max_concurrency", 1) == 1  # no HEAD before every whole-object read


def test_an_unknown_backend_is_a_usage_error():
    with pytest.raises(UsageError, match="backend=obstore"):
        resolve("s3://bkt/p", storage_options={"backend": "boto"})


def test_ais_uses_ais_endpoint_plus_s3(monkeypatch):
    for value in ("http://h:1", "http://h:1/"):
        monkeypatch.setenv("AIS_ENDPOINT", value)
        loc = resolve("ais://bkt/ImageNet/Data", storage_options={"backend": "fsspec"})
        assert loc.store.fs.endpoint_url == "http://h:1/s3"
        assert (loc.root, loc.prefix) == ("bkt", "ImageNet/Data")


def test_ais_endpoint_url_option_wins_as_given(monkeypatch):
    monkeypatch.setenv("AIS_ENDPOINT", "http://h:1")
    loc = resolve(
        "ais://bkt", endpoint_url="http://127.0.0.1:2/s3", storage_options={"backend": "fsspec"}
    )
    assert loc.store.fs.endpoint_url == "http://127.0.0.1:2/s3"


def test_ais_without_an_endpoint_is_a_usage_error(no_ais):
    with pytest.raises(UsageError) as err:
        resolve("ais://bkt/p", role="source")
    assert err.value.exit_code == 2
    message = str(err.value)
    assert "\n" not in message
    assert "'ais://bkt/p'" in message and "AIS_ENDPOINT" in message and "--endpoint-url" in message


@pytest.mark.parametrize("url", ["s3://", "s3:///", "ais://"])
def test_a_url_without_bucket_is_a_usage_error(url, monkeypatch):
    monkeypatch.setenv("AIS_ENDPOINT", "http://h:1")
    with pytest.raises(UsageError, match="names no bucket"):
        resolve(url)


def test_an_unknown_scheme_is_a_usage_error():
    with pytest.raises(UsageError) as err:
        resolve("nosuchscheme://x/y", role="destination")
    assert "destination" in str(err.value) and "'nosuchscheme://'" in str(err.value)


def test_other_fsspec_urls_are_paths_on_their_filesystem():
    loc = resolve("memory://ishard-test/data/")
    assert isinstance(loc.store, FsspecStore) and loc.store.scheme == "memory"
    assert (loc.root, loc.prefix) == ("/ishard-test/data", "")
    assert loc.child("a.tar") == "memory:///ishard-test/data/a.tar"


# ---------------------------------------------------------------- storage options


def test_storage_options_are_typed_and_nested():
    assert parse_storage_options(None) == {} and parse_storage_options(()) == {}
    assert parse_storage_options(
        ["anon=true", "use_ssl=False", "max_concurrency=16", "offset=-1", "profile=dev=ops",
         "client_kwargs.region_name=us-east-1", "config_kwargs.retries.max_attempts=3",
         "version=1.5", "key=0123abc"]
    ) == {
        "anon": True,
        "use_ssl": False,
        "max_concurrency": 16,
        "offset": -1,
        "profile": "dev=ops",
        "client_kwargs": {"region_name": "us-east-1"},
        "config_kwargs": {"retries": {"max_attempts": 3}},
        "version": "1.5",
        "key": "0123abc",
    }  # fmt: skip
    assert parse_storage_options({"anon": True}) == {"anon": True}


@pytest.mark.parametrize("item", ["anon", "=true", ""])
def test_a_storage_option_without_key_and_value_is_a_usage_error(item):
    with pytest.raises(UsageError) as err:
        parse_storage_options([item])
    assert err.value.exit_code == 2 and "KEY=VALUE" in str(err.value)


# ---------------------------------------------------------------- store errors


@pytest.mark.parametrize(
    "kind, role, error, code, needle",
    [
        ("missing", "source", UsageError, 2, "does not exist"),
        ("missing", "destination", UsageError, 2, "does not exist"),
        ("denied", "source", SourceError, 1, "denied"),
        ("denied", "destination", WriteError, 1, "denied"),
        ("credentials", "source", SourceError, 1, "no credentials"),
        ("unreachable", "destination", WriteError, 1, "cannot reach"),
    ],
)  # fmt: skip
def test_store_errors_become_one_line_with_exit_code(kind, role, error, code, needle):
    out = storage_error(kind, ConnectionError("refused\nsecond line"), "s3://bkt/p", role)
    assert isinstance(out, error) and isinstance(out, IshardError)
    assert out.exit_code == code
    assert "\n" not in str(out)
    assert needle in str(out) and role in str(out) and "'s3://bkt/p'" in str(out)


# ---------------------------------------------------------------- inventories


def entries(where, **kwargs) -> list[tuple[str, int, int]]:
    return [(e.name, e.size, e.mtime) for e in list_inventory(str(where), **kwargs)]


def test_csv_with_a_header_any_column_order_extra_columns(tmp_path):
    path = tmp_path / "list.csv"
    path.write_text(
        "etag,size,name,mtime\n"
        'x,3,"b/2,with comma.jpg",1700000000\n'
        "y,1,a/1.jpg,\n"
        "z,22,b/10.jpg,1700000001.5\n"
    )
    assert entries(path) == [
        ("a/1.jpg", 1, 0),
        ("b/10.jpg", 22, 1700000001),
        ("b/2,with comma.jpg", 3, 1700000000),
    ]


def test_csv_key_column_and_iso_dates(tmp_path):
    path = tmp_path / "list.csv"
    path.write_text("Key,Size,LastModified\nk/a.bin,5,2024-01-01T00:00:01.000Z\n")
    assert entries(path) == [("k/a.bin", 5, 1704067201)]


def test_gzipped_csv_is_read(tmp_path):
    path = tmp_path / "list.csv.gz"
    path.write_bytes(gzip.compress(b"name,size\nz.jpg,1\na.jpg,2\n"))
    assert entries(path) == [("a.jpg", 2, 0), ("z.jpg", 1, 0)]


def test_listing_rules_apply_prefixes_hidden_markers_duplicates_order(tmp_path):
    path = tmp_path / "list.jsonl"
    rows = [
        {"name": "ds/b.jpg", "size": 2},
        {"name": "ds/a.jpg", "size": 1, "mtime": 7},
        {"name": "ds/dir/", "size": 0},
        {"name": "ds/.cache/x.jpg", "size": 1},
        {"name": "ds/a.jpg", "size": 1, "mtime": 7},
        {"name": "ds/Z.jpg", "size": 3},
        {"name": "ds/é.jpg", "size": 4},
        {"name": "ds-old/c.jpg", "size": 1},
        {"name": "other/d.jpg", "size": 1},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    tally = Tally()
    assert [n for n, _, _ in entries(path, list_prefix="ds/", tally=tally)] == [
        "ds/Z.jpg", "ds/a.jpg", "ds/b.jpg", "ds/é.jpg",  # bytewise: 'Z' < 'a' < 'é'
    ]  # fmt: skip
    assert [(s.reason, s.count) for s in tally.freeze()] == [(HIDDEN, 1)]
    assert [n for n, _, _ in entries(path, list_prefix="ds", prefix="ds/a")] == ["ds/a.jpg"]
    assert entries(path, list_prefix="ds/", prefix="other") == []
    hidden = [n for n, _, _ in entries(path, list_prefix="ds/", include_hidden=True)]
    assert "ds/.cache/x.jpg" in hidden


@pytest.mark.parametrize(
    "name, text, needle",
    [
        ("list.csv", "a.jpg,1\nb.jpg,2\n", "no header"),
        ("list.csv", "name,size\na.jpg,big\n", "line 2"),
        ("list.jsonl", '{"name": "a.jpg", "size": 1}\n{"name": "b.jpg"}\n', "line 2"),
        ("list.jsonl", '{"name": "a.jpg", "size": 1}\n{not json\n', "line 2"),
    ],
)
def test_malformed_inventory_is_a_usage_error_naming_the_line(tmp_path, name, text, needle):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(UsageError) as err:
        entries(path)
    assert err.value.exit_code == 2
    assert "--src-list" in str(err.value) and needle in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_inventory_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        entries(tmp_path / "nothere.csv")


# AWS S3 Inventory, laid out as AWS writes it:
#   <dest-prefix>/<source-bucket>/<config-id>/<YYYY-MM-DDTHH-MMZ>/manifest.json
#   <dest-prefix>/<source-bucket>/<config-id>/data/<uuid>.csv.gz   (headerless, all quoted)
WIDE_SCHEMA = (
    "Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size, LastModifiedDate, ETag, "
    "StorageClass, IsMultipartUploaded"
)


def s3_inventory(root: Path, rows: list[list[str]], schema: str = WIDE_SCHEMA) -> Path:
    config = root / "inv" / "src-bucket" / "daily"
    (config / "data").mkdir(parents=True)
    (config / "2024-01-02T00-00Z").mkdir()
    files = []
    for part, chunk in enumerate((rows[:2], rows[2:])):
        text = io.StringIO()
        csv.writer(text, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(chunk)
        name = f"{part}c1e5d9a-1b2c-4d3e-8f90-a1b2c3d4e5f6.csv.gz"
        (config / "data" / name).write_bytes(gzip.compress(text.getvalue().encode()))
        files.append({"key": f"inv/src-bucket/daily/data/{name}", "size": 1, "MD5checksum": "0"})
    manifest = {
        "sourceBucket": "src-bucket",
        "destinationBucket": "arn:aws:s3:::inv-bucket",
        "version": "2016-11-30",
        "creationTimestamp": "1704153600000",
        "fileFormat": "CSV",
        "fileSchema": schema,
        "files": files,
    }
    path = config / "2024-01-02T00-00Z" / "manifest.json"
    path.write_text(json.dumps(manifest))
    return path


def wide_row(key: str, size: int, date: str = "2024-01-01T00:00:00.000Z") -> list[str]:
    return ["src-bucket", quote_plus(key, safe=""), "v1", "true", "false", str(size), date,
            "etag", "STANDARD", "false"]  # fmt: skip


def test_s3_inventory_decodes_keys_and_reads_every_data_file(tmp_path):
    path = s3_inventory(
        tmp_path,
        [
            wide_row("ds/a b+c%41.jpg", 10, "2024-01-01T00:00:05.000Z"),
            wide_row("ds/naïve/x.jpg", 20),
            wide_row("ds/z/1.jpg", 30),
            wide_row("other/y.jpg", 40),
        ],
    )
    assert entries(path, list_prefix="ds/") == [
        ("ds/a b+c%41.jpg", 10, 1704067205),
        ("ds/na\u00efve/x.jpg", 20, 1704067200),
        ("ds/z/1.jpg", 30, 1704067200),
    ]


def test_s3_inventory_without_size_or_data_files_is_a_usage_error(tmp_path):
    path = s3_inventory(tmp_path / "a", [wide_row("k", 1)] * 3, schema="Bucket, Key, ETag")
    with pytest.raises(UsageError, match="Key and Size"):
        entries(path)
    path = s3_inventory(tmp_path / "b", [wide_row("k", 1)] * 3)
    for data in (path.parent.parent / "data").iterdir():
        data.unlink()
    with pytest.raises(UsageError, match="data file"):
        entries(path)


@pytest.mark.parametrize("bad", ["size", "short"])
def test_s3_inventory_row_not_matching_the_schema_is_a_usage_error(tmp_path, bad):
    row = wide_row("ds/b.jpg", 1)
    row = row[:3] if bad == "short" else [*row[:5], "big", *row[6:]]
    path = s3_inventory(tmp_path, [wide_row("ds/a.jpg", 1), row, wide_row("ds/c.jpg", 1)])
    with pytest.raises(UsageError) as err:
        entries(path)
    assert err.value.exit_code == 2
    assert "line 2" in str(err.value) and "fileSchema" in str(err.value)
    assert "\n" not in str(err.value)


PARQUET_SCHEMA = (
    "message s3.inventory { required binary bucket (STRING); required binary key (STRING); "
    "optional int64 size; optional int64 last_modified_date (TIMESTAMP(MILLIS,true)); "
    "optional binary e_tag (STRING); optional binary storage_class (STRING);}"
)


def s3_parquet_inventory(
    root: Path, rows: list[tuple], schema: str = PARQUET_SCHEMA, fmt: str = "Parquet"
) -> Path:
    """An AWS S3 Inventory report in Parquet: manifest.json and two data files of ``rows``
    (key, size, ISO time), written by DuckDB with AWS's column names and types."""
    import duckdb

    config = root / "inv" / "src-bucket" / "daily"
    (config / "data").mkdir(parents=True)
    (config / "2024-01-02T00-00Z").mkdir()
    files = []
    with duckdb.connect() as con:
        for part, chunk in enumerate((rows[:2], rows[2:])):
            name = f"{part}c1e5d9a-1b2c-4d3e-8f90-a1b2c3d4e5f6.parquet"
            con.execute(
                "CREATE OR REPLACE TABLE t (bucket VARCHAR, key VARCHAR, size BIGINT, "
                "last_modified_date TIMESTAMP, e_tag VARCHAR, storage_class VARCHAR)"
            )
            con.executemany(
                "INSERT INTO t VALUES ('src-bucket', ?, ?, CAST(? AS TIMESTAMP), 'x', 'STANDARD')",
                [list(r) for r in chunk],
            )
            con.execute(f"COPY t TO '{config / 'data' / name}' (FORMAT parquet)")
            files.append(
                {"key": f"inv/src-bucket/daily/data/{name}", "size": 1, "MD5checksum": "0"}
            )
    manifest = {
        "sourceBucket": "src-bucket",
        "destinationBucket": "arn:aws:s3:::inv-bucket",
        "version": "2016-11-30",
        "creationTimestamp": "1704153600000",
        "fileFormat": fmt,
        "fileSchema": schema,
        "files": files,
    }
    path = config / "2024-01-02T00-00Z" / "manifest.json"
    path.write_text(json.dumps(manifest))
    return path


def shard_dry(tmp_path: Path, manifest: Path):
    """``ishard shard`` dry run over a local folder with ``--src-list manifest``."""
    (tmp_path / "data").mkdir(exist_ok=True)
    return invoke_ishard("shard", tmp_path / "data", "--src-list", manifest, "--dry-run")


def test_s3_inventory_size_past_2_63_is_one_line_naming_the_row(tmp_path):
    """Finding: a size of 2^63 in a report's data file was an 'unexpected OverflowError'. In
    CSV and in Parquet it is one line naming the data file, the line (row) and the number."""
    rows = [wide_row("ds/a.jpg", 1), wide_row("ds/b.jpg", 1 << 63), wide_row("ds/c.jpg", 1)]
    path = s3_inventory(tmp_path / "csv", rows)
    done = shard_dry(tmp_path, path)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(
        f"ishard: error: --src-list '{path}: data file inv/src-bucket/"
        "daily/data/0c1e5d9a-1b2c-4d3e-8f90-a1b2c3d4e5f6.csv.gz' line 2: "
        "the size is 9223372036854775808, over 9223372036854775807 "
        "(2^63-1), the most bytes a file can have"
    ), done.stderr
    import duckdb

    path = s3_parquet_inventory(tmp_path / "pq", [("ds/a.jpg", 1, "2024-01-01 00:00:00")] * 3)
    data = path.parent.parent / "data" / "1c1e5d9a-1b2c-4d3e-8f90-a1b2c3d4e5f6.parquet"
    duckdb.execute(
        f"COPY (SELECT *, TIMESTAMP '2024-01-01' AS last_modified_date FROM (VALUES "
        "('src-bucket', 'ds/b.jpg', 1::UBIGINT), ('src-bucket', 'ds/c.jpg', "
        f"9223372036854775808)) t(bucket, key, size)) TO '{data}' (FORMAT parquet)"
    )
    done = shard_dry(tmp_path, path)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert (
        f"data file inv/src-bucket/daily/data/{data.name}' row 2: the size is "
        "9223372036854775808, over 9223372036854775807 (2^63-1)" in done.stderr
    )


@pytest.mark.parametrize(
    "key",
    [
        "../../../../../../../../etc/passwd",
        "/etc/passwd",
        "inv/src-bucket/daily/../../../outside.csv.gz",
        "link",
    ],
)
def test_s3_inventory_data_files_outside_the_report_are_refused(tmp_path, key):
    """Finding: a manifest whose files[].key was '../../../../etc/passwd' had that file read as
    the report's data. A key that is absolute or has a '..' part, or a data file that a
    symbolic link leads out of the report's folder, is one line naming the key, exit 2; and
    nothing of the file outside is read."""
    outside = tmp_path / "outside.csv.gz"
    outside.write_bytes(gzip.compress((",".join(wide_row("secret/x.jpg", 1)) + "\n").encode()))
    path = s3_inventory(tmp_path / "report", [wide_row("ds/a.jpg", 1)] * 3)
    manifest = json.loads(path.read_text())
    if key == "link":
        (path.parent.parent / "data" / "x.csv.gz").symlink_to(outside)
        key = "inv/src-bucket/daily/data/x.csv.gz"
    manifest["files"].append({"key": key, "size": 1, "MD5checksum": "0"})
    path.write_text(json.dumps(manifest))
    done = shard_dry(tmp_path, path)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(
        f"ishard: error: --src-list '{path}' names data file {key!r}, which lies outside the report"
    ), line
    assert line.endswith(
        "ishard reads only the data files of the report itself: use the "
        "manifest.json AWS wrote, in its place"
    )


def test_s3_inventory_in_parquet_reads_keys_as_they_are(tmp_path):
    """Parquet keys are not URL-encoded (CSV's are): '+' and '%41' stay; sizes, whole-second
    times and the prefix filter as for CSV; rows of every data file, sorted bytewise."""
    path = s3_parquet_inventory(
        tmp_path,
        [
            ("ds/z/1.jpg", 30, "2024-01-01 00:00:05.999"),
            ("ds/a b+c%41.jpg", 10, "2024-01-01 00:00:05"),
            ("ds/naïve/x.jpg", 20, "2024-01-01 00:00:00"),
            ("other/y.jpg", 40, "2024-01-01 00:00:00"),
        ],
    )
    assert entries(path, list_prefix="ds/") == [
        ("ds/a b+c%41.jpg", 10, 1704067205),
        ("ds/na\u00efve/x.jpg", 20, 1704067200),
        ("ds/z/1.jpg", 30, 1704067205),
    ]


def test_s3_inventory_in_parquet_or_orc_that_cannot_be_read_is_one_line(tmp_path):
    rows = [("k1", 1, "2024-01-01 00:00:00")] * 3
    no_size = s3_parquet_inventory(tmp_path / "a", rows, schema="message s3.inventory { "
                                   "required binary bucket (STRING); required binary key (STRING);}")  # fmt: skip
    with pytest.raises(UsageError, match="Key and Size"):
        entries(no_size)
    avro = s3_parquet_inventory(tmp_path / "b", rows, fmt="Avro")
    with pytest.raises(UsageError, match="in Avro format, which ishard cannot read") as err:
        entries(avro)
    assert "CSV, ORC or Parquet" in str(err.value) and "\n" not in str(err.value)
    for fmt, schema in (("Parquet", PARQUET_SCHEMA), ("ORC", ORC_SCHEMA)):
        broken = s3_parquet_inventory(tmp_path / fmt, rows, schema=schema, fmt=fmt)
        for data in (broken.parent.parent / "data").iterdir():
            data.write_bytes(b"not " + fmt.encode())
        with pytest.raises(UsageError, match=f"cannot be read as the manifest's {fmt}") as err:
            entries(broken)
        assert "\n" not in str(err.value)


ORC_SCHEMA = (
    "struct<bucket:string,key:string,size:bigint,last_modified_date:timestamp,e_tag:string,"
    "storage_class:string>"
)


def s3_orc_inventory(root: Path, rows: list[tuple], schema: str = ORC_SCHEMA) -> Path:
    """The same report in ORC (AWS's third format): data files written by pyarrow."""
    import pyarrow as pa
    from pyarrow import orc

    path = s3_parquet_inventory(root, rows, schema=schema, fmt="ORC")
    manifest = json.loads(path.read_text())
    types = pa.schema([("bucket", pa.string()), ("key", pa.string()), ("size", pa.int64()),
                       ("last_modified_date", pa.timestamp("ms")), ("e_tag", pa.string()),
                       ("storage_class", pa.string())])  # fmt: skip
    for item, chunk in zip(manifest["files"], (rows[:2], rows[2:])):
        (root / item["key"]).unlink()  # the Parquet file, replaced by an ORC one
        item["key"] = item["key"].replace(".parquet", ".orc")
        when = [datetime.datetime.fromisoformat(t) for _, _, t in chunk]
        table = pa.table([["src-bucket"] * len(chunk), [k for k, _, _ in chunk],
                          [n for _, n, _ in chunk], when, ["x"] * len(chunk),
                          ["STANDARD"] * len(chunk)], schema=types)  # fmt: skip
        orc.write_table(table, str(root / item["key"]))
    path.write_text(json.dumps(manifest))
    return path


def test_s3_inventory_in_orc_lists_what_its_parquet_form_lists(tmp_path):
    rows = [
        ("ds/z/1.jpg", 30, "2024-01-01 00:00:05.999"),
        ("ds/a b+c%41.jpg", 10, "2024-01-01 00:00:05"),
        ("ds/naïve/x.jpg", 20, "1969-12-31 23:59:59.500"),
        ("other/y.jpg", 40, "2024-01-01 00:00:00"),
    ]
    orc = entries(s3_orc_inventory(tmp_path / "orc", rows), list_prefix="ds/")
    assert orc == entries(s3_parquet_inventory(tmp_path / "parquet", rows), list_prefix="ds/")
    assert orc == [("ds/a b+c%41.jpg", 10, 1704067205), ("ds/na\u00efve/x.jpg", 20, 0),
                   ("ds/z/1.jpg", 30, 1704067205)]  # seconds toward zero, as Parquet's  # fmt: skip


def test_s3_inventory_in_orc_without_pyarrow_says_which_extra_reads_it(tmp_path, monkeypatch):
    path = s3_orc_inventory(tmp_path, [("k1", 1, "2024-01-01 00:00:00")] * 3)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # what an install without it sees
    with pytest.raises(UsageError, match=r"pip install 'ishard\[orc\]'") as err:
        entries(path)
    assert err.value.exit_code == 2 and "\n" not in str(err.value)


def test_the_local_walk_yields_names_in_bytewise_order_without_sorting(tmp_path):
    """Folders are walked depth first, each one's entries ordered as their full names sort
    (a folder as if it ended in '/'), so the listing needs no sort afterwards: 'a.txt' comes
    before 'a/b', 'a-b' before 'a/', an undecodable byte after every ASCII name."""
    import os

    from ishard.store.local.walk import _LocalWalk

    names = ["a.txt", "a/b.jpg", "a/a/c.jpg", "a-b/c.jpg", "ab/x.jpg", "é/y.jpg", "z.jpg",
             "A.jpg", "a/b/c.jpg", "a0", "a/.hid/x"]  # fmt: skip
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    os.mkdir(os.path.join(os.fsencode(tmp_path), b"q\xff"))
    with open(os.path.join(os.fsencode(tmp_path), b"q\xff", b"r.jpg"), "wb") as f:
        f.write(b"y")
    walk = _LocalWalk(tmp_path, str(tmp_path), "", False, False, Tally(), None)
    walk.run()
    listed = walk.entries.names
    want = sorted((n for n in names if "/." not in n), key=str.encode) + ["q\udcff/r.jpg"]
    assert listed == sorted(want, key=lambda n: n.encode("utf-8", "surrogateescape"))
