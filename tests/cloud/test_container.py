"""Namespaces and cgroup limits read from /proc (``aiinfra.cloud.container``).

Ground truths: ``os.readlink`` on the namespace links of a live child process, a
child moved to a new user namespace by ``unshare`` (the check can fail), and cgroup
v2 files written by hand in the formats of the kernel's cgroup-v2 documentation.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiinfra.cloud import container as c

SLEEPER = [sys.executable, "-c", "import time; time.sleep(10)"]


def _inode(link: str) -> int:
    """``'pid:[4026531836]'`` -> 4026531836, parsed independently of the module."""
    return int(link.split("[", 1)[1].rstrip("]"))


def _wait_for_exec(pid: int, marker: str) -> None:
    """Wait until ``pid`` is the Python running ``marker``: exec'd, not the forked
    copy, nor a launcher (``unshare``) whose arguments also hold ``marker``."""
    for _ in range(500):
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        argv = argv.split("\0")
        if argv[0] == sys.executable and marker in " ".join(argv):
            return
        time.sleep(0.01)
    raise TimeoutError(f"pid {pid} never ran {marker!r}")


def test_self_namespaces_match_readlink():
    got = c.namespaces()
    assert got, "no namespace read from /proc/self/ns"
    for kind, inode in got.items():
        assert inode == _inode(os.readlink(f"/proc/self/ns/{kind}"))


def test_child_process_shares_the_parents_namespaces():
    child = subprocess.Popen(SLEEPER)
    try:
        _wait_for_exec(child.pid, "time.sleep")
        theirs = c.namespaces(child.pid)
        ours = {k: _inode(os.readlink(f"/proc/self/ns/{k}")) for k in theirs}
    finally:
        child.kill()
        child.wait()
    assert set(theirs) == set(c.namespaces())
    assert theirs == ours


def test_child_in_a_new_user_namespace_has_another_inode():
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare(1) not installed")
    probe = subprocess.run([unshare, "--user", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"unprivileged user namespaces refused: {probe.stderr!r}")
    child = subprocess.Popen([unshare, "--user", *SLEEPER])
    try:
        _wait_for_exec(child.pid, "time.sleep")
        theirs = c.namespaces(child.pid)
    finally:
        child.kill()
        child.wait()
    ours = c.namespaces()
    assert theirs["user"] != ours["user"]
    assert theirs["pid"] == ours["pid"]  # only the user namespace was unshared


def test_initial_inodes_are_the_kernels_constants():
    # 0xEFFFFFFF - k for ipc, uts, user, pid, cgroup, time (include/linux/proc_ns.h)
    order = ["ipc", "uts", "user", "pid", "cgroup", "time"]
    assert [c.INITIAL_INODES[k] for k in order] == [4026531839 - k for k in range(6)]
    assert set(c.INITIAL_INODES) <= set(c.NAMESPACE_ISOLATES)


@pytest.mark.parametrize("pid", [0, -3, "1", 1.5, "me"])
def test_bad_pid_is_rejected(pid):
    with pytest.raises(ValueError, match="pid must be"):
        c.namespaces(pid)


def test_malformed_namespace_link_is_rejected(tmp_path):
    ns = tmp_path / "7" / "ns"
    ns.mkdir(parents=True)
    (ns / "pid").symlink_to("pid:4026531836")  # no brackets
    with pytest.raises(ValueError, match=r"ns/pid: expected 'pid:\[inode\]'"):
        c.namespaces(7, proc=tmp_path)


def _cgroup(tmp_path: Path, path: str, files: dict[str, str]) -> tuple[Path, Path]:
    root = tmp_path / "sys" / "fs" / "cgroup"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    root.mkdir(parents=True, exist_ok=True)
    proc = tmp_path / "cgroup"
    proc.write_text(f"0::{path}\n")
    return root, proc


def test_cgroup_v2_with_limits_takes_the_tightest_along_the_path(tmp_path):
    root, proc = _cgroup(
        tmp_path,
        "/kubepods/pod1/ctr",
        {
            "kubepods/cpu.max": "max 100000\n",
            "kubepods/pod1/cpu.max": "400000 100000\n",  # 4 cores for the pod
            "kubepods/pod1/ctr/cpu.max": "250000 100000\n",  # 2.5 for the container
            "kubepods/pod1/memory.max": "8589934592\n",  # 8 GiB for the pod
            "kubepods/pod1/ctr/memory.max": "max\n",
        },
    )
    got = c.cgroup_limits(root, proc)
    assert got == {"cgroup": "/kubepods/pod1/ctr", "cpus": 2.5, "memory_bytes": 8 << 30}


def test_cgroup_v2_without_limits_is_none(tmp_path):
    root, proc = _cgroup(
        tmp_path, "/user.slice", {"user.slice/cpu.max": "max 100000\n"}
    )
    assert c.cgroup_limits(root, proc) == {
        "cgroup": "/user.slice",
        "cpus": None,
        "memory_bytes": None,
    }
    root, proc = _cgroup(tmp_path / "bare", "/", {})  # the root cgroup has no files
    assert c.cgroup_limits(root, proc)["cpus"] is None


@pytest.mark.parametrize(
    ("name", "text", "match"),
    [
        ("cpu.max", "100000\n", "cpu.max: expected"),
        ("cpu.max", "half 100000\n", "cpu.max: quota must be"),
        ("cpu.max", "100000 0\n", "cpu.max: expected"),
        ("memory.max", "8G\n", "memory.max: expected 'max' or bytes"),
    ],
)
def test_malformed_cgroup_file_names_the_file_and_line(tmp_path, name, text, match):
    root, proc = _cgroup(tmp_path, "/job", {f"job/{name}": text})
    with pytest.raises(ValueError, match=match) as err:
        c.cgroup_limits(root, proc)
    assert str(root / "job" / name) in str(err.value)
    assert repr(text) in str(err.value)


def test_cgroup_v1_only_is_rejected(tmp_path):
    proc = tmp_path / "cgroup"
    proc.write_text("4:memory:/x\n1:cpu:/\n")
    with pytest.raises(ValueError, match="expected one '0::/path' line"):
        c.cgroup_limits(tmp_path, proc)


def test_distribution_sizes_match_the_files_of_a_known_distribution():
    sizes = dict(c.distribution_sizes(top=10_000))
    dist = importlib_metadata_dist("pytest")
    expected = sum(
        Path(dist.locate_file(f)).stat().st_size
        for f in dist.files
        if Path(dist.locate_file(f)).is_file()
    )
    assert sizes["pytest"] == expected > 0
    top = c.distribution_sizes(top=3)
    assert len(top) == 4 and top[-1][0] == "other"
    assert [v for _, v in top[:3]] == sorted((v for _, v in top[:3]), reverse=True)
    assert sum(v for _, v in top) == sum(sizes.values())
    with pytest.raises(ValueError, match="top must be >= 1"):
        c.distribution_sizes(top=0)


def importlib_metadata_dist(name: str):
    """The installed distribution ``name`` (the ground truth's own lookup)."""
    import importlib.metadata

    return importlib.metadata.distribution(name)


def test_the_dockerfile_installs_are_read_in_order_without_the_index():
    text = (Path(__file__).parents[2] / "deploy" / "Dockerfile").read_text()
    installs = c.dockerfile_pip_installs(text)
    # What the training image's Dockerfile says, in its order.
    assert installs[0] == ["torch==2.13.0"] and installs[-1][-1] == "./[cloud]"
    other = (
        "FROM x\nRUN pip install --index-url=https://i/simple a==1\n"
        'RUN pip install --index-url "${IDX}" b==2 --no-deps\nRUN echo pip install c\n'
    )
    assert c.dockerfile_pip_installs(other) == [["a==1"], ["b==2", "--no-deps"]]
    with pytest.raises(ValueError, match="no 'RUN pip install' line"):
        c.dockerfile_pip_installs("FROM x\nRUN echo hi\n")


def _wheel(folder: Path, name: str, payload: bytes) -> Path:
    """A minimal pure-Python wheel (``name`` 1.0 with one module of ``payload``)."""
    import base64
    import hashlib
    import zipfile

    files = {
        f"{name}.py": payload,
        f"{name}-1.0.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
        ).encode(),
        f"{name}-1.0.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
            b"Tag: py3-none-any\n"
        ),
    }
    record = ""
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        record += f"{path},sha256={digest.decode()},{len(data)}\n"
    record += f"{name}-1.0.dist-info/RECORD,,\n"
    files[f"{name}-1.0.dist-info/RECORD"] = record.encode()
    wheel = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    return wheel


@pytest.mark.slow
def test_an_image_layer_is_replayed_in_a_new_environment_and_weighed(tmp_path):
    wheel = _wheel(tmp_path, "tinypkg", b"X = 1\n" + b"#" * 300_000 + b"\n")
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(
        'FROM python:3.11-slim\nRUN pip install --index-url "${IDX}" '
        f"--no-index {wheel.name}\n"
    )
    # The wheel's path is relative to the build context, as a COPY would make it.
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        res = c.image_distribution_sizes(dockerfile, tmp_path, top=10)
    finally:
        os.chdir(cwd)
    sizes = dict(res["sizes"])
    assert res["installs"] == [["--no-index", wheel.name]]
    # The module file and the dist-info, as pip wrote them: more than the payload.
    assert 300_000 < sizes["tinypkg"] < 310_000
    assert "pip" in sizes  # python -m venv puts pip in every environment
    with pytest.raises(FileNotFoundError, match="dockerfile"):
        c.image_distribution_sizes(tmp_path / "nope", tmp_path)
