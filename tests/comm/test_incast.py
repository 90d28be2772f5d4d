"""The incast simulation against closed forms of a store-and-forward network.

Ground truths: one packet per slot per link and one slot per hop give a lone
sender's completion time (S packet times plus one per extra hop); a port that
receives N packets a slot and sends one grows by N - 1 a slot, so S-packet bursts
from N senders peak at (N - 1) S packets and then drain N S packets back to back;
a dropped packet cannot arrive before its timeout; a flow paused behind a congested
port gets at most that port's fair share, 1/N.
"""

from __future__ import annotations

import pytest
from aiinfra.comm.incast import (
    MODES,
    TCP_RTO_MIN_S,
    IncastConfig,
    rc_timeout_s,
    simulate_incast,
)

S = 32  # packets per sender
BIG = 10**5  # a buffer nothing fills


@pytest.mark.parametrize("mode", MODES)
def test_one_sender_takes_its_bytes_over_the_link_rate_plus_two_hops(mode: str) -> None:
    # sender -> switch A -> switch T -> receiver: three links, store and forward
    result = simulate_incast(mode, IncastConfig(senders=1, packets_per_sender=S))
    assert result.completion_slots == S + 2
    assert (result.sent, result.delivered, result.dropped) == (S, S, 0)


@pytest.mark.parametrize("n", [2, 5, 16])
def test_an_unbounded_port_peaks_at_n_minus_1_bursts_and_drains_back_to_back(
    n: int,
) -> None:
    result = simulate_incast(
        "lossy", IncastConfig(senders=n, packets_per_sender=S, buffer_packets=BIG)
    )
    assert result.max_queue == (n - 1) * S
    assert result.completion_slots == n * S + 1  # N S packets at one a slot, one hop
    assert result.dropped == 0


@pytest.mark.parametrize("n", [2, 4, 8])
def test_lossy_port_drops_exactly_when_its_buffer_is_below_the_peak(n: int) -> None:
    peak = (n - 1) * S
    fits = IncastConfig(senders=n, packets_per_sender=S, buffer_packets=peak)
    short = IncastConfig(senders=n, packets_per_sender=S, buffer_packets=peak - 1)
    assert simulate_incast("lossy", fits).dropped == 0
    assert simulate_incast("lossy", short).dropped > 0


def test_lossy_conserves_packets_and_waits_for_the_timeout() -> None:
    config = IncastConfig(senders=8, packets_per_sender=S, buffer_packets=64)
    result = simulate_incast("lossy", config)
    assert result.dropped > 0
    assert result.delivered == 8 * S
    assert result.sent == result.delivered + result.dropped  # one resend per drop
    assert result.completion_slots > config.rto_slots  # a drop costs a timeout


def test_lossy_goodput_collapses_once_the_burst_overflows_the_buffer() -> None:
    buffer = 64  # holds the peak (N - 1) S of N <= 3 senders only
    goodput = {
        n: simulate_incast(
            "lossy",
            IncastConfig(senders=n, packets_per_sender=S, buffer_packets=buffer),
        ).goodput
        for n in (2, 3, 4, 8, 16)
    }
    assert goodput[2] > 0.95 and goodput[3] > 0.95
    assert max(goodput[4], goodput[8], goodput[16]) < 0.2
    assert goodput[16] <= goodput[4]


@pytest.mark.parametrize("n", [2, 8, 24])
def test_pfc_never_drops_and_keeps_the_bottleneck_busy(n: int) -> None:
    config = IncastConfig(
        senders=n, packets_per_sender=S, buffer_packets=64, victim_rate=0.5
    )
    result = simulate_incast("pfc", config)
    assert result.dropped == 0 and result.sent == n * S
    assert result.max_queue <= config.buffer_packets
    assert result.completion_slots == n * S + 1  # as fast as an unbounded buffer


def test_pfc_pauses_the_victim_down_to_the_congested_ports_share() -> None:
    n, rate = 16, 0.5
    config = IncastConfig(
        senders=n, packets_per_sender=128, buffer_packets=64, victim_rate=rate
    )
    lossy, pfc, ecn = (simulate_incast(mode, config) for mode in MODES)
    # the victim's receiver is idle: without pauses it gets what it offers
    assert lossy.victim_throughput == pytest.approx(rate, rel=0.02)
    # paused with sender 0, whose share of the congested port is 1/N
    assert pfc.victim_throughput < 1.5 / n
    assert ecn.victim_throughput > 0.8 * rate
    assert ecn.dropped == 0 and ecn.pause_slots < pfc.pause_slots / 4
    mean = {r.mode: sum(r.queue_trace) / len(r.queue_trace) for r in (pfc, ecn)}
    assert mean["ecn"] < mean["pfc"] / 3


def test_runs_are_deterministic() -> None:
    config = IncastConfig(senders=6, packets_per_sender=16, victim_rate=0.25)
    assert simulate_incast("ecn", config) == simulate_incast("ecn", config)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"senders": 0}, "senders"),
        ({"packets_per_sender": 1.5}, "packets_per_sender"),
        ({"rto_slots": True}, "rto_slots"),
        ({"victim_rate": 1.5}, "victim_rate"),
        ({"dcqcn_g": 0.0}, "dcqcn_g"),
        ({"senders": 64, "buffer_packets": 64}, "buffer_packets"),
    ],
)
def test_bad_config_raises_naming_the_field(kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        IncastConfig(**kwargs)


def test_bad_mode_and_too_few_slots_raise() -> None:
    with pytest.raises(ValueError, match="mode"):
        simulate_incast("tcp")
    with pytest.raises(RuntimeError, match="max_slots"):
        simulate_incast("pfc", IncastConfig(senders=4, max_slots=10))


def test_rc_timeout_is_4_096_us_times_two_to_the_timeout() -> None:
    # IB spec / Linux qib: 4.096 us x 2^timeout. NCCL's default 20: 4,096 ns x
    # 1,048,576 = 4.29 s; 14 (NCCL's old default): 67.1 ms. TCP's floor: 200 ms
    # (HZ / 5). Neither is "milliseconds" alike: the RDMA wait is seconds.
    assert rc_timeout_s() == pytest.approx(4.294967296)
    assert rc_timeout_s(14) == pytest.approx(0.067108864)
    assert TCP_RTO_MIN_S == 0.2
    assert rc_timeout_s() / TCP_RTO_MIN_S > 20
    for bad, error in ((0, ValueError), (32, ValueError), (2.0, TypeError)):
        with pytest.raises(error, match="timeout"):
            rc_timeout_s(bad)


def test_the_traces_add_up_to_the_runs_counts():
    config = IncastConfig(senders=16, packets_per_sender=32, buffer_packets=64)
    for mode in MODES:
        r = simulate_incast(mode, config)
        lengths = {len(r.queue_trace), len(r.drop_trace), len(r.pause_trace)}
        assert lengths == {len(r.mark_trace)} == {r.completion_slots}
        assert sum(r.drop_trace) == r.dropped
        assert sum(r.pause_trace) == r.pause_slots
        assert (sum(r.mark_trace) > 0) == (mode == "ecn")  # only ECN marks
        # A lossy port drops only while it is full.
        for depth, drops in zip(r.queue_trace, r.drop_trace, strict=True):
            assert not drops or depth == config.buffer_packets


def test_the_book_frames_draw_the_simulated_queue_and_its_events():
    from aiinfra.book.communication import networks as book

    slot_us = book.PACKET_BYTES * 8 / (book.LINK_GBITS * 1e9) * 1e6
    frames = book.incast_frames()
    # lossy, PFC and ECN close up; ECN's whole burst; all three (the book figure)
    assert len(frames) == len(MODES) + 2
    views = [(m,) for m in MODES] + [("ecn",), MODES]
    for fig, modes in zip(frames, views, strict=True):
        (ax,) = fig.axes
        upto = round(ax.get_xlim()[1] / slot_us)
        for line, mode in zip(ax.lines, modes, strict=False):
            r = simulate_incast(mode, book.STEADY)
            assert list(line.get_ydata()) == list(r.queue_trace[:upto])
        if len(modes) == 1:
            r = simulate_incast(modes[0], book.STEADY)
            traces = {"x": r.drop_trace, "|": r.pause_trace, ".": r.mark_trace}
            drawn = [c.get_offsets()[:, 0] for c in ax.collections]
            expected = [
                [i * slot_us for i, n in enumerate(t[:upto]) if n]
                for t in traces.values()
                if any(t[:upto])
            ]
            assert len(drawn) == len(expected)
            for got, want in zip(drawn, expected, strict=True):
                assert list(got) == pytest.approx(want)
    assert len(frames[-1].axes[0].lines) == len(book.queue_figure().axes[0].lines)
