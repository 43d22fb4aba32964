"""Outputs never replace what they should not (issue 57, R1).

dnscost runs as root: an output path the user names may be a device (``-o /dev/null`` to see
only the class table), a FIFO, a symbolic link or a directory. A regular file is replaced
atomically; a device or a FIFO is written through and stays what it was; a link's target is
replaced, not the link; a directory is refused in one line. Observed by ``stat`` of the path,
not by the writer's word."""

from __future__ import annotations

import os
import stat
import subprocess
import threading
from pathlib import Path

import pytest
from conftest import need
from dnscost.engine import engine_path
from dnscost.results import open_atomic, write_atomic


def _null_device(path: Path) -> Path:
    """A character device of the null driver (1, 3) at ``path``: what /dev/null is."""
    need(os.geteuid() == 0, "needs root (mknod)")
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return path


def _is_null_device(path: Path) -> bool:
    st = os.lstat(path)
    return stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 1 and os.minor(st.st_rdev) == 3


def test_a_device_is_written_through_never_replaced(tmp_path: Path) -> None:
    dev = _null_device(tmp_path / "null")
    write_atomic(dev, "a population\n")
    write_atomic(dev, b"bytes too\n")
    assert _is_null_device(dev)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"], "no temporary copy left beside it"


def test_a_fifo_is_written_through(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    write_atomic(fifo, "through the pipe\n")
    reader.join(timeout=10)
    assert got == ["through the pipe\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_link_keeps_being_a_link_and_its_file_is_replaced(tmp_path: Path) -> None:
    real = tmp_path / "real.toml"
    real.write_text("old\n")
    link = tmp_path / "link.toml"
    link.symlink_to(real)
    write_atomic(link, "new\n")
    assert link.is_symlink()
    assert real.read_text() == "new\n"


def test_a_directory_is_refused_naming_it(tmp_path: Path) -> None:
    d = tmp_path / "out"
    d.mkdir()
    with pytest.raises(IsADirectoryError, match="out"):
        write_atomic(d, "x")
    assert d.is_dir()


def test_a_regular_file_is_replaced_whole_or_not_at_all(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_text("before\n")
    with pytest.raises(RuntimeError), open_atomic(path) as f:
        f.write("half")
        raise RuntimeError("interrupted")
    assert path.read_text() == "before\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc.json"]
    write_atomic(path, "after\n")
    assert path.read_text() == "after\n"


def test_population_outputs_to_devices_leave_the_devices_as_they_were(tmp_path: Path) -> None:
    """The campaign's reproduction: ``dnscost population CAP -o DEV`` and ``--flows DEV``
    exit 0, print the class table, and leave the device a device."""
    from dnscost.capturegen import OPERATOR_MIX, write_capture

    pcap = tmp_path / "cap.pcap"
    write_capture(pcap, list(OPERATOR_MIX)[:2])
    out, flows = _null_device(tmp_path / "out-null"), _null_device(tmp_path / "flows-null")
    exe = Path(str(engine_path())).with_name("dnscost")
    r = subprocess.run(
        [str(exe), "population", str(pcap), "-o", str(out), "--flows", str(flows)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert "class" in r.stdout
    assert _is_null_device(out) and _is_null_device(flows)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cap.pcap", "flows-null", "out-null"]
