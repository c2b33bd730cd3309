"""Which files and folders may be trusted: owned by this user, writable by no one else.

The compile cache loads shared objects (their code runs when loaded), and the tuner keeps its
logs and its machine-wide lock in the temporary folder that every user shares. Both must refuse
what another user could have planted or can still change: a path owned by someone else, one that
group or others may write, or a symbolic link where a plain file or folder is expected.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

_UID = os.getuid() if hasattr(os, "getuid") else None  # no owners to check on Windows


def untrusted(path: Path, *, follow: bool = False) -> str | None:
    """Why ``path`` must not be trusted, or None when it may be.

    It must exist, belong to the current user and be writable by no one else. Without ``follow``
    a symbolic link is refused as well (nothing inside a private folder needs one).
    """
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if _UID is not None and st.st_uid != _UID:
        return f"is owned by uid {st.st_uid}, not by you (uid {_UID})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def untrusted_ancestor(path: Path) -> str | None:
    """Why a folder above ``path`` would let another user swap it, or None.

    Each ancestor must belong to this user or to root, and be writable by others only with the
    sticky bit set (as ``/tmp`` is), which stops them renaming what they do not own.
    """
    for parent in Path(os.path.abspath(path)).parents:
        try:
            st = os.stat(parent)
        except OSError:
            continue  # not there (yet): it will be created by this user
        if _UID is not None and st.st_uid not in (_UID, 0):
            return f"{parent} is owned by uid {st.st_uid}"
        if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
            return f"{parent} is writable by others without the sticky bit"
    return None


def private_dir(path: Path) -> Path:
    """``path`` as a folder only this user can use: created ``0700``, or checked if it exists.

    Raises:
        PermissionError: the folder exists and is not private (the message says what to do).
    """
    path = Path(path)
    try:
        path.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        pass
    why = untrusted(path)
    if why is None and not path.is_dir():
        why = "is not a folder"
    if why is not None:
        raise PermissionError(f"{path} {why}; remove it, or make it yours with mode 700 "
                              f"(chmod 700 {path})")
    return path


def user_temp_dir() -> Path:
    """A private folder of this user in the shared temporary folder (``<tmp>/pypto-<uid>``).

    Fixed names directly in ``/tmp`` can be created or linked by another user first; one folder
    per user, refused unless it is the user's own, closes that door for everything inside.
    """
    name = f"pypto-{_UID}" if _UID is not None else "pypto"
    return private_dir(Path(tempfile.gettempdir()) / name)
