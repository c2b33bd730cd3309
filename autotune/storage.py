"""Opening the Optuna storage a tuning run (or ``pypto study``) reads and writes.

A storage URL comes from the command line (``--storage``), so every way it can fail to open is a
user error with one clear message: a file that is not an SQLite database, a folder that does not
exist, an unknown scheme, a missing database driver, a server that cannot be reached. The message
names the URL with its password hidden (it ends up in terminals and logs) and says what to do;
SQLAlchemy's own traceback is never shown.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

from pypto.errors import ParamError

T = TypeVar("T")


def storage_url(text: str) -> str:
    """``text`` as an SQLAlchemy URL: a plain path is an SQLite file."""
    return text if "://" in text else f"sqlite:///{os.path.abspath(text)}"


def shown(url: str) -> str:
    """``url`` with its password replaced by ``***``, safe to print."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not even a URL: it holds no parsable password, and the text is the clue
        scheme, sep, rest = url.partition("://")
        return f"{scheme}{sep}***" if sep and "@" in rest else url


def _advice(url: str, err: BaseException) -> str:
    if isinstance(err, ImportError):
        return "install the database driver for this URL (psycopg2 for postgresql://)"
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
        folder = os.path.dirname(path) or "."
        if not os.path.isdir(folder):
            return f"the folder {folder} does not exist; create it or give another --storage"
        if os.path.isdir(path):
            return (f"{path} is a folder; give a file in it, e.g. "
                    f"--storage {os.path.join(path, 'pypto_tune.db')}")
        if os.path.exists(path):
            return (f"{path} is not an Optuna SQLite database (or cannot be read); give another "
                    "--storage, or move the file away")
        return f"check that {folder} can be written"
    return ("check the URL (sqlite:///FILE, postgresql://USER@HOST/DB, ...), that the server is "
            "reachable, and that the database exists")


def opening(url: str, fn: Callable[[], T]) -> T:
    """Runs ``fn`` (which opens or reads the storage at ``url``) and turns the ways a storage
    fails to open into a ParamError naming the URL (password hidden) and what to do."""
    import sqlalchemy.exc

    try:
        return fn()
    except (sqlalchemy.exc.SQLAlchemyError, ImportError) as e:
        reason = str(getattr(e, "orig", None) or e).strip().splitlines()[0][:300].rstrip(".")
        raise ParamError(f"cannot open the tuning storage {shown(url)}: {reason}; "
                         f"{_advice(url, e)}") from None
