"""Writes the generated part of the bad-input corpus (binary files, files named .csv that are not
CSV). Run once from the repository root: ``.venv/bin/python tests/data/bad/make_more.py``; the
output is committed, so the tests do not need pyarrow or openpyxl to exist at write time."""

from __future__ import annotations

import gzip
import io
import random
import zipfile
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
SMALL = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "y": ["a", "b", "a", "b"]})
CSV = SMALL.to_csv(index=False).encode()


def main() -> None:
    buf = io.BytesIO()
    SMALL.to_parquet(buf, index=False)
    (HERE / "parquet_named.csv").write_bytes(buf.getvalue())
    (HERE / "truncated.parquet").write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    buf = io.BytesIO()
    SMALL.iloc[:0].to_parquet(buf, index=False)
    (HERE / "zero_rows.parquet").write_bytes(buf.getvalue())
    buf = io.BytesIO()
    SMALL.to_excel(buf, index=False)
    (HERE / "xlsx_named.csv").write_bytes(buf.getvalue())
    (HERE / "gzip_named.csv").write_bytes(gzip.compress(CSV, mtime=0))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("data.csv", CSV)
    (HERE / "zip_named.csv").write_bytes(buf.getvalue())
    (HERE / "xls_named.csv").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504))
    (HERE / "pdf_named.csv").write_bytes(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n")
    rng = random.Random(14)
    (HERE / "binary_junk.csv").write_bytes(bytes([0x41, 0x00]) + bytes(rng.randrange(256) for _ in range(512)))
    (HERE / "utf16.csv").write_bytes(CSV.decode().encode("utf-16"))
    (HERE / "cr_only.csv").write_bytes(CSV.replace(b"\n", b"\r"))
    (HERE / "crlf.csv").write_bytes(CSV.replace(b"\n", b"\r\n"))
    (HERE / "bom.csv").write_bytes(b"\xef\xbb\xbf" + CSV)
    (HERE / "long_line.csv").write_bytes(b"x,y\n" + b"1," + b"a" * 200_000 + b"\n2,b\n")
    (HERE / "whitespace_only.csv").write_bytes(b"  \n\t\n\n")
    folder = HERE / "folder.csv"
    folder.mkdir(exist_ok=True)
    (folder / "README.md").write_text("A folder named like a CSV file (the loader must say 'is a folder').\n")


if __name__ == "__main__":
    main()
