"""Dataset sources: the bundled sample datasets, and loading CSV/Parquet files and uploads with
a clear ValueError for every bad file (size, encoding, CSV bombs)."""

from __future__ import annotations

import codecs
import contextlib
import csv
import dataclasses
import errno
import io
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pandas as pd

from estimator_workbench import resources
from estimator_workbench.data import memory_budget

__all__ = [
    'CSV_ENCODINGS',
    'CSV_FORMAT_ATTR',
    'DEFAULT_MAX_BYTES',
    'DELIMITERS',
    'MAX_CELLS',
    'MAX_COLUMNS',
    'MAX_ROWS',
    'SAMPLE_DATA_DIR',
    'CsvFormat',
    'DatasetInfo',
    'bundled_path',
    'csv_format',
    'delete_upload',
    'detect_delimiter',
    'detect_encoding',
    'list_bundled',
    'list_uploads',
    'load_csv',
    'load_table',
    'save_upload',
    'upload_owner',
    'upload_path',
]


SAMPLE_DATA_DIR = resources.sample_data_dir()  # installed as estimator_workbench.sample_data


DEFAULT_MAX_BYTES = 200 * 1024 * 1024  # Streamlit's default upload limit


# A wide header is a CSV bomb: 32 MB of "c0,c1,..." with one row took 107 s and 4 GB of memory
# in pandas. 10,000 columns is far beyond what the forms and the input pipeline are built for.
MAX_COLUMNS = 10_000

# A 332 KB Parquet file held 40M rows (1.5 GB, 41 s to load; a 3.3 MB one raised ArrowMemoryError):
# the row count is read from the footer and refused before any data is read.
MAX_ROWS = 5_000_000

# Rows and columns pass their limits one at a time: a 2.8 MB Parquet file of 5M rows x 120 columns
# reached 5 GB in the UI server. Their product is limited too, for every format, before the frame is
# built: 20M cells are 160 MB as float64 (text cells several times more).
MAX_CELLS = 20_000_000


def _check_cells(kind: str, where: str, size: int, n_rows: int, n_cols: int) -> None:
    if n_rows > MAX_ROWS:
        raise ValueError(f"{kind} file {where} ({_fmt_size(size)}) has {n_rows:,} rows, over the "
                         f"limit of {MAX_ROWS:,}. Load a sample of the rows.")
    if n_rows * n_cols > MAX_CELLS:
        raise ValueError(
            f"{kind} file {where} ({_fmt_size(size)}) has {n_rows:,} rows x {n_cols:,} columns = "
            f"{n_rows * n_cols:,} cells, over the limit of {MAX_CELLS:,} cells that one dataset may "
            "hold in memory. Load a sample of the rows, or keep only the columns the model needs.")

# Magic bytes of formats that are often saved or renamed as .csv.
_SIGNATURES: tuple[tuple[bytes, str, str], ...] = (
    (b"PAR1", "a Parquet file", "rename it to .parquet"),
    (b"PK\x03\x04", "a zip archive", "unzip it and load the CSV file inside"),
    (b"\x1f\x8b", "a gzip-compressed file", "decompress it (`gunzip`) first"),
    (b"\xd0\xcf\x11\xe0", "an old Excel (.xls) workbook", "open it and save it as 'CSV UTF-8'"),
    (b"%PDF", "a PDF document", "export the table from it as CSV"),
)


_BUNDLED: dict[str, tuple[str, str]] = {
    # name: (task, description)
    "iris": ("classification", "Fisher's iris flowers: 4 measurements, 3 species (150 rows)."),
    "wine": ("classification", "Wine chemistry: 13 measurements, 3 cultivars (178 rows)."),
    "breast_cancer": ("classification", "Breast cancer Wisconsin: 30 cell features, malignant/benign (569 rows)."),
    "diabetes": ("regression", "Diabetes progression: 10 baseline variables, numeric target (442 rows)."),
    "digits": ("classification", "Handwritten digits: 8x8 images as 64 pixel columns, labels 0-9 (1797 rows)."),
    "penguins": ("classification", "Palmer penguins: numeric and categorical columns with missing values, 3 species (344 rows)."),
}


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """A bundled dataset, as listed in the UI.

    Example:
        >>> [d.name for d in list_bundled()][:2]
        ['breast_cancer', 'diabetes']
    """

    name: str
    path: Path
    task: str
    description: str
    size_bytes: int
    n_rows: int
    columns: tuple[str, ...]


def list_bundled() -> list[DatasetInfo]:
    """The CSVs in ``sample_data/``, sorted by name (header and row count read, not the data)."""
    infos = []
    for path in sorted(SAMPLE_DATA_DIR.glob("*.csv")):
        with open(path, encoding="utf-8") as f:
            header = next(csv.reader(f), [])
            n_rows = sum(1 for line in f if line.strip())
        task, description = _BUNDLED.get(path.stem, ("unknown", ""))
        infos.append(DatasetInfo(path.stem, path, task, description, path.stat().st_size,
                                 n_rows, tuple(header)))
    return infos


def bundled_path(name: str) -> Path:
    """Path of the bundled dataset ``name``; ValueError listing the known names otherwise."""
    path = SAMPLE_DATA_DIR / f"{name}.csv"
    if not re.fullmatch(r"[A-Za-z0-9_\-]+", str(name)) or not path.is_file():
        known = sorted(p.stem for p in SAMPLE_DATA_DIR.glob("*.csv"))
        raise ValueError(f"Unknown bundled dataset name: {name!r}. Choose one of {known}.")
    return path


def _describe_source(source: Any) -> str:
    if isinstance(source, (str, os.PathLike)):
        return repr(os.fspath(source))
    name = getattr(source, "name", None)
    return repr(name) if isinstance(name, str) else "(uploaded data)"


def _source_size(source: Any) -> int:
    """Size in bytes without reading the content."""
    if isinstance(source, (str, os.PathLike)):
        return os.path.getsize(source)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return len(source)
    size = getattr(source, "size", None)  # Streamlit's UploadedFile
    if isinstance(size, int):
        return size
    if hasattr(source, "getbuffer"):
        return source.getbuffer().nbytes
    pos = source.tell()
    end = source.seek(0, io.SEEK_END)
    source.seek(pos)
    return end - pos


def _read_bytes(source: Any) -> bytes:
    if isinstance(source, (str, os.PathLike)):
        return Path(source).read_bytes()
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    data = source.read()
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def _fmt_size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n} bytes"


def _check_size(source: Any, where: str, max_bytes: int | None) -> int:
    if isinstance(source, (str, os.PathLike)) and os.path.isdir(source):
        raise ValueError(f"Data file {where} is a folder, not a file. Give the path of a .csv or "
                         ".parquet file inside it.")
    try:
        size = _source_size(source)
    except FileNotFoundError:
        raise ValueError(f"Data file {where} does not exist. Check the path.") from None
    except PermissionError:
        raise ValueError(f"Data file {where} cannot be read (permission denied). Check its "
                         "permissions.") from None
    if max_bytes is not None and max_bytes <= 0:
        raise ValueError(f"max_bytes must be a positive number of bytes or None, got {max_bytes!r}.")
    if max_bytes is not None and size > max_bytes:
        raise ValueError(
            f"Data file {where} is {_fmt_size(size)}, over the size limit of {_fmt_size(max_bytes)} "
            f"(max_bytes={max_bytes}). Upload a smaller sample of the rows, or raise the limit."
        )
    return size


#: The field delimiters a CSV file is sniffed for (spreadsheets export ';' where ',' is the decimal mark).
DELIMITERS = (",", ";", "\t", "|")
#: The text encodings an analyst can choose for a CSV file (``load_csv(encoding=)``).
CSV_ENCODINGS = ("utf-8", "utf-8-sig", "cp1252", "latin-1")
#: The text encodings tried after UTF-8: what spreadsheets on Western-European Windows save.
_LEGACY_ENCODINGS = ("cp1252", "latin_1")
#: Where ``load_csv`` records how it read the file: ``df.attrs[CSV_FORMAT_ATTR]`` (a CsvFormat dict).
CSV_FORMAT_ATTR = "csv_format"
_SNIFF_CHARS = 64 * 1024


@dataclasses.dataclass(frozen=True)
class CsvFormat:
    """How a CSV file was read: its text encoding, field delimiter and decimal mark.

    Example:
        >>> CsvFormat("cp1252", ";", ",").describe()
        "cp1252 text, ';' between fields, ',' as the decimal mark"
    """

    encoding: str
    delimiter: str
    decimal: str = "."

    def describe(self) -> str:
        return (f"{self.encoding} text, {self.delimiter!r} between fields"
                + (f", {self.decimal!r} as the decimal mark" if self.decimal != "." else ""))


def detect_encoding(raw: bytes) -> str:
    """The encoding of ``raw``: ``utf-8-sig`` (a byte order mark), ``utf-8``, else the legacy
    encoding charset-normalizer finds best among cp1252 and Latin-1 (cp1252 when it cannot tell).

    Example:
        >>> detect_encoding("prix;été\\n3;4\\n".encode("cp1252")), detect_encoding(b"a,b\\n")
        ('cp1252', 'utf-8')
    """
    if raw.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    try:
        raw.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    best = from_bytes(raw[:1024 * 1024], cp_isolation=list(_LEGACY_ENCODINGS)).best()
    found = best.encoding if best is not None else "cp1252"
    try:
        raw.decode(found)
    except UnicodeDecodeError:  # a byte cp1252 leaves undefined (0x81, ...) past the sample
        found = "latin_1"
    return "latin-1" if found == "latin_1" else found


def detect_delimiter(text: str) -> str:
    """The field delimiter of CSV ``text`` among ``DELIMITERS`` (``csv.Sniffer`` on its start);
    ``','`` when the sniffer cannot tell or the header holds no other delimiter.

    Example:
        >>> detect_delimiter("a;b;c\\n1,5;2;3\\n"), detect_delimiter("a|b\\n1|2\\n"), detect_delimiter("a,b\\n1,2\\n")
        (';', '|', ',')
    """
    header = text[:_SNIFF_CHARS].split("\n", 1)[0]
    in_header = [d for d in DELIMITERS if d in header]
    if len(in_header) <= 1:  # no choice to make: skip the sniffer (slow on a 2,000-column header)
        return in_header[0] if in_header else ","
    sample = text[:_SNIFF_CHARS]
    if len(text) > _SNIFF_CHARS and "\n" in sample:
        sample = sample[:sample.rfind("\n")]
    try:
        found = csv.Sniffer().sniff(sample, delimiters="".join(in_header)).delimiter
    except csv.Error:
        return "," if "," in in_header else in_header[0]
    return found


def csv_format(df: pd.DataFrame) -> CsvFormat | None:
    """How ``load_csv`` read ``df`` (None for data that did not come from a CSV file)."""
    recorded = df.attrs.get(CSV_FORMAT_ATTR)
    return CsvFormat(**recorded) if isinstance(recorded, dict) else None


_DECIMAL_NUMBER = re.compile(r"^\s*[-+]?\d+(,\d+)?\s*$")


def load_csv(path_or_buffer: str | os.PathLike | bytes | BinaryIO, max_bytes: int | None = DEFAULT_MAX_BYTES,
             delimiter: str | None = None, encoding: str | None = None) -> pd.DataFrame:
    """Reads a CSV with a header row, with a clear ValueError for every malformed file.

    The encoding (UTF-8, UTF-8 with a byte order mark, cp1252 or Latin-1) and the delimiter
    (``,`` ``;`` tab ``|``) are detected unless given; a ``;`` file whose numbers use a decimal
    comma (``12,5``) reads them as numbers. What was used is recorded as
    ``df.attrs['csv_format']`` (``csv_format(df)``), for the data profile to show.

    The size is checked before anything is read. Rejected: empty files, bytes the encoding cannot
    decode, a header without rows, ragged rows (the line is named), a single column, duplicate or
    blank column names. Missing values (empty cells, ``NA``, ``NaN``, ...) become NaN.

    Args:
        path_or_buffer: a path, the raw bytes, or a binary file-like object (an upload).
        max_bytes: the size limit in bytes (None: no limit).
        delimiter: the field delimiter (None: detected).
        encoding: the text encoding, a Python codec name (None: detected).

    Returns:
        The DataFrame (text columns as strings, numeric columns as int64/float64).

    Example:
        >>> load_csv(b"a,b\\n1,x\\n2,y\\n").shape
        (2, 2)
        >>> csv_format(load_csv("a;b\\n1,5;x\\n".encode("cp1252")))
        CsvFormat(encoding='utf-8', delimiter=';', decimal=',')
    """
    if delimiter is not None and (not isinstance(delimiter, str) or len(delimiter) != 1):
        raise ValueError(f"delimiter must be one character such as ',' or ';', given: {delimiter!r}.")
    if encoding is not None:
        try:
            codecs.lookup(encoding)
        except (LookupError, TypeError):
            raise ValueError(f"encoding {encoding!r} is not a known text encoding; use e.g. 'utf-8', "
                             "'cp1252' or 'latin-1'.") from None
    where = _describe_source(path_or_buffer)
    size = _check_size(path_or_buffer, where, max_bytes)
    try:
        raw = _read_bytes(path_or_buffer)
    except OSError as e:
        raise ValueError(f"Data file {where} could not be read: {e.strerror or e}.") from None
    if raw.startswith(b"PK\x03\x04") and b"xl/" in raw[:65536]:
        raise ValueError(f"CSV file {where} is not a CSV file: it is an Excel (.xlsx) workbook. Open "
                         "it and save it as 'CSV UTF-8', or rename it to .xlsx and export a CSV.")
    for magic, what, fix in _SIGNATURES:
        if raw.startswith(magic):
            raise ValueError(f"CSV file {where} is not a CSV file: it is {what}. {fix[0].upper()}{fix[1:]}.")
    head = raw[:1024].lstrip().lower()
    if head.startswith((b"<!doctype html", b"<html")):
        raise ValueError(f"CSV file {where} is an HTML page, not a CSV file (a web page saved "
                         "instead of the file it links to). Download the raw CSV file.")
    if b"\x00" in raw[:65536]:
        raise ValueError(f"CSV file {where} holds binary data (NUL bytes), not text. Check that "
                         "it is a CSV file (UTF-16 files: save them as UTF-8).")
    if not raw or raw.isspace():  # (raw.strip() would copy the whole file)
        raise ValueError(
            f"CSV file {where} is empty ({len(raw)} bytes). Provide a file with a header row and "
            "at least one data row."
        )
    used_encoding = encoding or detect_encoding(raw)
    try:
        raw.decode(used_encoding)  # a check only: the rows are read from the bytes, decoded in chunks
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        column = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise ValueError(
            f"CSV file {where} is not valid {used_encoding}: byte 0x{raw[e.start]:02x} at line {line}, "
            f"column {column}. Give its encoding, or save the file as UTF-8 (e.g. 'CSV UTF-8' in Excel, or "
            "`iconv -f latin1 -t utf-8 in.csv > out.csv`) and load it again."
        ) from None
    if b"\r" in raw and b"\n" not in raw:
        # Classic Mac line endings: csv handles them, but say it instead of guessing rows.
        raw = raw.replace(b"\r", b"\n")
    reading = "utf-8-sig" if used_encoding in ("utf-8", "utf-8-sig") else used_encoding  # a BOM is no field
    sep = delimiter or detect_delimiter(raw[:4 * _SNIFF_CHARS].decode(reading, errors="replace"))

    def rows() -> Iterator[list[str]]:
        # Streams the bytes (io.StringIO(text) held the file again as 4-byte characters: a 200 MB
        # CSV peaked at 1.27 GB before any row was parsed into the frame).
        return csv.reader(io.TextIOWrapper(io.BytesIO(raw), encoding=reading, newline=""), delimiter=sep)

    try:
        # The header first, alone: a bomb (a huge header) is refused before the rows are parsed.
        header = next(rows())
        if len(header) > MAX_COLUMNS:
            raise ValueError(
                f"CSV file {where} has {len(header):,} columns, over the limit of {MAX_COLUMNS:,}. "
                "Keep the columns the model needs (or transpose the file if rows and columns are "
                "swapped).")
        # csv.reader runs in C; map(len, ...) counts the fields of every row without a Python loop.
        lengths = np.fromiter(map(len, rows()), dtype=np.int64)
    except csv.Error as e:
        raise ValueError(f"CSV file {where} could not be parsed: {e}. Check the quoting (a field "
                         "over the limit is usually an unclosed quote).") from None
    n_cols = len(header)
    if n_cols == 1:
        other = next((s for s in DELIMITERS if s in header[0] and s != sep), None)
        hint = (f" The header contains {other!r}: give it as the delimiter."
                if other else " A dataset needs at least one feature column and a label column.")
        raise ValueError(f"CSV file {where} has only one column ({header[0]!r}).{hint}")
    blank = [i + 1 for i, name in enumerate(header) if not name.strip()]
    if blank:
        raise ValueError(
            f"CSV file {where} has a blank column name at column {blank[0]} of the header "
            f"{header!r}. Give every column a name in the first row."
        )
    seen: dict[str, int] = {}
    for i, name in enumerate(header):
        if name in seen:
            raise ValueError(
                f"CSV file {where} has a duplicate column name: {name!r} (columns {seen[name] + 1} "
                f"and {i + 1}). Rename them so that every column name is unique."
            )
        seen[name] = i
    body = lengths[1:]
    if not (body > 0).any():
        raise ValueError(f"CSV file {where} has a header but no data rows. Add at least one row.")
    _check_cells("CSV", where, size, int((body > 0).sum()), n_cols)
    bad = np.flatnonzero((body != n_cols) & (body != 0))  # blank lines (0 fields) are skipped
    if bad.size:
        reader = rows()
        for row_index, row in enumerate(reader):  # noqa: B007  (error path only): find the physical line
            if row_index == bad[0] + 1:
                break
        raise ValueError(
            f"CSV file {where} has a ragged row: line {reader.line_num} has {len(row)} fields but "
            f"the header has {n_cols} ({int(bad.size)} such rows). Fix that line (a stray or "
            f"missing separator, or an unclosed quote) so that every row has {n_cols} fields."
        )
    try:
        df = pd.read_csv(io.BytesIO(raw), sep=sep, encoding=reading)
        decimal = "."
        if sep != "," and _has_decimal_commas(df):
            df, decimal = pd.read_csv(io.BytesIO(raw), sep=sep, encoding=reading, decimal=","), ","
        df.attrs[CSV_FORMAT_ATTR] = dataclasses.asdict(CsvFormat(used_encoding, sep, decimal))
        return df
    except MemoryError:
        raise ValueError(f"CSV file {where} is too large to load in memory. Load a sample of "
                         "the rows.") from None
    except Exception as e:
        raise ValueError(f"CSV file {where} could not be parsed: {e}. Check the quoting (an "
                         "unclosed quote runs to the end of the file).") from None


def _has_decimal_commas(df: pd.DataFrame) -> bool:
    """A text column whose every value is a number, some with a decimal comma ('12,5', '7')."""
    for name in df.columns:
        values = df[name].dropna()
        if (values.dtype == object or pd.api.types.is_string_dtype(values)) and len(values):
            text = values.astype(str)
            if text.str.match(_DECIMAL_NUMBER).all() and text.str.contains(",", regex=False).any():
                return True
    return False


def load_table(path: str | os.PathLike, max_bytes: int | None = DEFAULT_MAX_BYTES,
               delimiter: str | None = None, encoding: str | None = None) -> pd.DataFrame:
    """Loads a ``.csv`` (see ``load_csv``) or ``.parquet`` file, checked the same way.

    ``delimiter`` and ``encoding`` are passed to ``load_csv`` (None: detected); a Parquet file
    takes neither. Parquet needs ``pyarrow``; without it the error says so and how to install it.
    """
    if isinstance(path, (str, os.PathLike)) and os.path.isdir(path):
        raise ValueError(f"Data file {_describe_source(path)} is a folder, not a file. Give the "
                         "path of a .csv or .parquet file inside it.")
    suffix = Path(path).suffix.lower()
    if suffix in (".csv", ".txt"):
        size = os.path.getsize(path) if os.path.isfile(path) else 0  # missing: load_csv says so
        peak = int(memory_budget.CSV_PEAK_PER_BYTE * size)
        with memory_budget.parse_budget().reserve(peak, _describe_source(path)):
            return load_csv(path, max_bytes=max_bytes, delimiter=delimiter, encoding=encoding)
    if suffix in (".parquet", ".pq"):
        if delimiter is not None or encoding is not None:
            raise ValueError(f"Parquet file {_describe_source(path)} has no delimiter or text encoding "
                             f"to choose (given delimiter={delimiter!r}, encoding={encoding!r}); these "
                             "apply to CSV files only.")
        where = _describe_source(path)
        _check_size(path, where, max_bytes)
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ValueError(
                f"Reading Parquet file {where} needs the 'pyarrow' package, which is not installed. "
                "Install it with `pip install pyarrow`, or save the data as CSV."
            ) from None
        try:
            import pyarrow.parquet as pq

            meta = pq.read_metadata(path)  # the footer only: a bomb is refused unread
            width, n_rows = meta.num_columns, meta.num_rows
        except Exception as e:
            raise ValueError(f"Parquet file {where} could not be read ({e}). Check that it is a "
                             "Parquet file, or save the data as CSV.") from None
        if width > MAX_COLUMNS:
            raise ValueError(f"Parquet file {where} has {width:,} columns, over the limit of "
                             f"{MAX_COLUMNS:,}. Keep the columns the model needs.")
        _check_cells("Parquet", where, os.path.getsize(path), n_rows, width)
        with memory_budget.parse_budget().reserve(memory_budget.PARQUET_PEAK_PER_CELL * n_rows * width, where):
            try:
                df = pd.read_parquet(path)
            except MemoryError:
                raise ValueError(f"Parquet file {where} is too large to load in memory. Load a sample "
                                 "of the rows.") from None
            except Exception as e:
                raise ValueError(f"Parquet file {where} could not be read ({type(e).__name__}: {e}). "
                                 "Check that it is a Parquet file, or save the data as CSV.") from None
        names = [str(c) for c in df.columns]
        if len(df) == 0 or df.shape[1] == 0:
            raise ValueError(f"Parquet file {where} is empty. Provide at least one row and two columns.")
        if df.shape[1] == 1:
            raise ValueError(f"Parquet file {where} has only one column ({names[0]!r}). A dataset "
                             "needs at least one feature column and a label column.")
        if len(set(names)) != len(names) or any(not n.strip() for n in names):
            raise ValueError(f"Parquet file {where} has duplicate or blank column names: {names!r}. "
                             "Rename them so that every column has a unique name.")
        df.columns = names
        return df
    raise ValueError(
        f"Unsupported data file type {suffix or '(no extension)'!r} for {os.fspath(path)!r}: "
        "expected a .csv or .parquet file."
    )


UPLOADS_DIR = "datasets"  # <workspace>/datasets/: the uploads, kept across reloads and restarts
# <workspace>/predict_inputs/: a row typed on the Predict page is the input of a predict run, not
# a dataset: it is kept (the run reads it) but never listed among the uploads (issue 28 item 9).
PREDICT_INPUTS_DIR = "predict_inputs"
_UPLOAD_NAME = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_.\-]*\.(csv|parquet|pq)")


def list_uploads(workspace: str | os.PathLike) -> list[Path]:
    """The uploaded files stored in the workspace, newest first."""
    folder = Path(workspace) / UPLOADS_DIR
    if not folder.is_dir():
        return []
    files = [p for p in folder.iterdir() if p.is_file() and _UPLOAD_NAME.fullmatch(p.name)]
    return sorted(files, key=lambda p: (-p.stat().st_mtime_ns, p.name))


def upload_path(workspace: str | os.PathLike, name: str) -> Path:
    """The stored upload ``name`` (a bare file name, as ``list_uploads`` gives); ValueError when
    the name is not one or no such upload exists."""
    if not isinstance(name, str) or not _UPLOAD_NAME.fullmatch(name):
        raise ValueError(f"Upload name {name!r} is not a stored upload's name (letters, digits, '_', '-', "
                         "'.', ending .csv or .parquet).")
    path = Path(workspace) / UPLOADS_DIR / name
    if not path.is_file():
        known = [p.name for p in list_uploads(workspace)]
        raise ValueError(f"No upload named {name!r} in the workspace; stored uploads: {known}. Upload it again.")
    return path


def delete_upload(workspace: str | os.PathLike, name: str) -> None:
    """Deletes the stored upload ``name`` (runs that used it keep their fingerprint, but cannot
    be re-run on it)."""
    path = upload_path(workspace, name)
    path.unlink()
    _owner_file(path).unlink(missing_ok=True)


def _owner_file(path: Path) -> Path:
    # A dot file beside the upload: never listed (upload names start with a letter, digit, _ or -).
    return path.with_name(f".{path.name}.owner")


def upload_owner(workspace: str | os.PathLike, name: str) -> str | None:
    """Who uploaded ``name`` first (None: an upload from before owners were recorded)."""
    try:
        return _owner_file(upload_path(workspace, name)).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def _store_as(tmp: Path, folder: Path, stem: str, suffix: str, data: bytes) -> Path:
    """Stores the complete file ``tmp`` as ``<stem><suffix>``, or ``<stem>_<n><suffix>`` when that
    name holds other content; returns the name that holds ``data``. Each name is claimed
    atomically (``os.link`` fails on an existing name, and the file appears whole)."""
    n = 1
    while True:
        target = folder / (f"{stem}{suffix}" if n == 1 else f"{stem}_{n}{suffix}")
        try:
            os.link(tmp, target)
            return target
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links: claim the name, then move over it
            try:
                os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                os.replace(tmp, target)
                return target
            except FileExistsError:
                pass
        try:
            if target.read_bytes() == data:
                return target  # the same file, stored before (or by a concurrent upload)
        except OSError:
            pass
        n += 1


def save_upload(workspace: str | os.PathLike, filename: str, data: bytes,
                max_bytes: int | None = DEFAULT_MAX_BYTES, owner: str | None = None, *,
                folder_name: str = UPLOADS_DIR) -> Path:
    """Checks an uploaded file and stores it as ``<workspace>/datasets/<name>``; returns the path.

    Who uploaded it is recorded beside it (``upload_owner``): ``owner`` (the UI's signed-in user),
    else ``$WORKBENCH_USER`` or the OS account; the same file uploaded again keeps its first owner.
    ``folder_name``: another folder of the workspace for files that are not datasets to list
    (``PREDICT_INPUTS_DIR``: the rows typed on the Predict page).

    The file is parsed first (so a bad upload leaves the workspace untouched), then written to a
    temporary name and renamed. The name keeps only ``[A-Za-z0-9_.-]``; an existing file with
    different content gets a numbered name instead of being overwritten.

    Concurrent uploads (sessions of one UI share a process) never collide (issue 24 item 7): the
    temporary file has a unique name (``tempfile`` in the uploads folder), and the stored name is
    claimed with a hard link, which never replaces a file that another upload took meanwhile.
    """
    base = Path(str(filename)).name
    stem, suffix = os.path.splitext(base)
    stem = re.sub(r"[^A-Za-z0-9_\-]+", "_", stem).strip("._") or "dataset"
    suffix = suffix.lower()
    if suffix not in (".csv", ".parquet", ".pq"):
        raise ValueError(f"Unsupported upload {filename!r}: expected a .csv or .parquet file.")
    _check_size(data, repr(filename), max_bytes)
    folder = Path(workspace) / folder_name
    folder.mkdir(parents=True, exist_ok=True)
    tmp: Path | None = None
    try:
        try:  # keeps the suffix so load_table picks the reader
            fd, tmp_name = tempfile.mkstemp(prefix=".upload-", suffix=suffix, dir=folder)
            os.close(fd)
            tmp = Path(tmp_name)
            tmp.write_bytes(data)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise ValueError(f"Upload {filename!r} was not saved: the disk is full ({folder}). "
                                 "Free some space and upload it again.") from None
            raise ValueError(f"Upload {filename!r} was not saved to {folder}: {e.strerror or e}.") from None
        try:
            load_table(tmp, max_bytes=max_bytes)
        except ValueError as e:
            raise ValueError(str(e).replace(repr(str(tmp)), repr(filename))) from None
        target = _store_as(tmp, folder, stem, suffix, data)
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
    from estimator_workbench.store.users import current_user

    with contextlib.suppress(FileExistsError):  # the first uploader of this content keeps it
        fd = os.open(_owner_file(target), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(owner or current_user())
    return target
