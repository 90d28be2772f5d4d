"""NCCL's environment variables, its log labeller and its topology items.

The labeller is checked against labels assigned by hand to every line of the
committed log (three public GitHub issues) and to lines written here in the formats
NCCL prints; the PyTorch variables against the headers of the installed torch.
"""

from pathlib import Path

import pytest
import torch
from aiinfra.comm.nccl_env import (
    ENV_VARS,
    LABELS,
    MEANINGS,
    TOPOLOGY,
    label_line,
    nccl_log_excerpt,
    strip_prefix,
)

# The committed excerpt, labelled by reading each line (in file order).
HAND_LABELS = [
    "environment",  # NCCL_SOCKET_IFNAME set by environment to eth0
    "bootstrap",  # Bootstrap: Using eth0:...
    "version",  # cudaDriverVersion 12040
    "version",  # NCCL version 2.24.3+cuda12.2
    "other",  # Comm config Blocking set to 1
    "network plugin",  # NET/Plugin: Loaded net plugin ...
    "network plugin",  # NET/Plugin: Loaded collnet plugin SHARP
    "environment",  # NCCL_IB_PCI_RELAXED_ORDERING set by environment
    "network: InfiniBand",  # NET/IB : Using [0]ibp0:1/IB/SHARP ...
    "network: InfiniBand",  # Using network IBext_v8
    "init start",  # ncclCommInitRankConfig ... Init START
    "bootstrap",  # Bootstrap timings total ...
    "topology",  # Setting affinity for GPU 0
    "topology",  # NVLS multicast support is available
    "rings, trees, channels",  # Channel 00/02 :    0   1 ...
    "rings, trees, channels",  # Trees [0] ...
    "send/receive chunk size",  # P2P Chunksize set to 524288 (ncclSend/Recv)
    "transport: P2P",  # ... via P2P/direct pointer/read
    "transport: SHM",  # ... via SHM/direct/direct
    "topology",  # comm ... nRanks 16 nNodes 2 localRanks 8
    "rings, trees, channels",  # Channel 00/08 : ring order over 16 ranks
    "rings, trees, channels",  # Trees [0] 2/-1/-1->1->0 ...
    "init done",  # ncclCommInitRank ... Init COMPLETE
    "init done",  # Init timings: ...
]

# Lines in the formats of other NCCL logs, labelled by hand.
WRITTEN = {
    "h:1:2 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>": "network: sockets",
    "NCCL INFO NET/IB : No device found.": "network: InfiniBand",
    "h:1:2 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[0] [send] via NET/IB/0": (
        "transport: NET"
    ),
    "h:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM": "transport: P2P",
    "h:1:2 [1] NCCL INFO Ring 00 : 0 -> 1 -> 0": "rings, trees, channels",
    "h:1:2 [1] NCCL INFO Tree 1 : 0 -> 1 -> -1/-1/-1": "rings, trees, channels",
    "h:1:2 [1] NCCL INFO Connected all rings": "init done",
    "h:1:2 [1] NCCL INFO NVLS comm 0x55 headRank 0 nHeads 1": "transport: NVLS",
    "NCCL version 2.21.5+cuda12.4": "version",
    "h:1:2 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.": "environment",
    "h:1:2 [0] NCCL INFO Using network Socket": "network: sockets",
    "a line NCCL never prints": "other",
}


def test_every_line_of_the_real_log_gets_its_hand_label():
    lines = nccl_log_excerpt()
    assert [label_line(line) for _, line in lines] == HAND_LABELS
    sources = {s for s, _ in lines}
    assert sources == {
        f"https://github.com/NVIDIA/nccl/issues/{n}" for n in (1584, 1027, 1412)
    }


def test_the_log_excerpt_is_anonymised():
    text = "\n".join(line for _, line in nccl_log_excerpt())
    for original in ("swat1-04", "UIBE-DC-GPUSVR-01", "10.7.147.73"):
        assert original not in text


@pytest.mark.parametrize(("line", "label"), WRITTEN.items())
def test_written_lines_get_their_hand_label(line, label):
    assert label_line(line) == label


def test_strip_prefix_removes_host_pid_tid_and_level():
    line = "node-a:2017630:2017669 [0] NCCL INFO Channel 00/08 :    0   5"
    assert strip_prefix(line) == "Channel 00/08 :    0   5"
    assert strip_prefix("Bootstrap: Using eth0") == "Bootstrap: Using eth0"


def test_label_line_rejects_bytes():
    with pytest.raises(TypeError, match="line must be a str"):
        label_line(b"NCCL INFO Init COMPLETE")


def test_every_label_has_a_meaning():
    assert set(MEANINGS) == set(LABELS)


def test_env_table_covers_the_variables_users_set():
    names = [v.name for v in ENV_VARS]
    assert len(names) == len(set(names))
    asked = {  # the variables users set most: the page's table must have them
        "NCCL_DEBUG",
        "NCCL_DEBUG_SUBSYS",
        "NCCL_SOCKET_IFNAME",
        "NCCL_IB_HCA",
        "NCCL_IB_DISABLE",
        "NCCL_P2P_DISABLE",
        "NCCL_ALGO",
        "NCCL_PROTO",
        "NCCL_NET_GDR_LEVEL",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING",
        "TORCH_NCCL_BLOCKING_WAIT",
        "TORCH_NCCL_TRACE_BUFFER_SIZE",
        "TORCH_NCCL_DUMP_ON_TIMEOUT",
        "TORCH_DISTRIBUTED_DEBUG",
    }
    assert asked <= set(names)
    for v in ENV_VARS:
        assert v.source.startswith("https://"), v.name
        assert v.what and v.values, v.name
    assert {v.layer for v in ENV_VARS} == {"NCCL", "PyTorch"}


def _torch_header(name: str) -> str:
    path = Path(torch.__file__).parent / "include/torch/csrc/distributed/c10d" / name
    if not path.is_file():
        pytest.skip(f"this torch ships no {name}")
    return path.read_text()


def test_torch_nccl_variables_exist_in_the_installed_torch():
    header = _torch_header("ProcessGroupNCCL.hpp")
    for v in ENV_VARS:
        if v.name.startswith("TORCH_NCCL_") and not v.unsure:
            assert f'"{v.name}"' in header, v.name
    # The watchdog's default timeout of ten minutes, and the default mode 3.
    assert (
        "kProcessGroupNCCLDefaultTimeout =\n    std::chrono::milliseconds(10 * 60"
        in (header)
    )
    assert "(3 - SkipCleanUp)" in header


def test_flight_recorder_buffer_default_is_2000_in_the_installed_torch():
    header = _torch_header("FlightRecorder.hpp")
    assert '{"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"}, 2000)' in header
    row = next(v for v in ENV_VARS if v.name == "TORCH_NCCL_TRACE_BUFFER_SIZE")
    assert "2000" in row.values


def test_topology_items_name_the_dump_variable_and_xml_elements():
    items = [t.item for t in TOPOLOGY]
    assert items[0] == "NCCL_TOPO_DUMP_FILE"
    for element in ("<system>", "<cpu", "<pci", "<gpu", "<nvlink", "<nic>"):
        assert any(i.startswith(element) for i in items), element
    assert all(t.source.startswith("https://") for t in TOPOLOGY)
