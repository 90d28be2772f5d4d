"""Incast on one switch port: lossy Ethernet, PFC and ECN (DCQCN), slot by slot.

When N senders send a burst to one receiver at once (the receive side of an
all-to-all, a parameter server, a storage read), N packets arrive at the receiver's
switch port for every one it can send: the port's buffer fills. Lossy Ethernet drops
what does not fit and the senders resend after a retransmission timeout (RTO), so
the burst waits for timeouts (Phanishayee et al. 2008); Priority Flow Control (PFC,
IEEE 802.1Qbb) pauses the upstream link instead, which loses nothing but also stops
every other flow on that link, a *victim* (head-of-line blocking, Guo et al. 2016);
ECN marks packets once the queue passes a threshold and DCQCN (Zhu et al. 2015) has
each marked sender cut its rate, so queues stay short and pauses rare.

The network is in units of packets and *slots*, the time a link takes to send one
packet; every link runs at one packet per slot and a packet crosses one link per
slot. Incast sender 0 and the victim V sit on switch A, whose one uplink goes to
switch T; senders 1..N-1 are wired to T directly; T's port R leads to the receiver
and port R2 to the victim's idle receiver. Each switch port holds ``buffer_packets``
in one queue per input link, served round robin; PFC pauses an input link whose
packets fill its share of the buffer, and resumes it at half. Simplifications: loss
is detected by an exact timer (selective resend, no duplicates; RoCE NICs that go
back N do worse), a pause acts at the next slot (real PFC keeps headroom for the
bytes on the cable), ECN marks above a fixed threshold (not RED), and DCQCN's two
timers are one.
Nothing is random: a run is a function of its arguments.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass

from aiinfra import checks

#: Unit of an RDMA reliable connection's local ACK timeout (InfiniBand spec;
#: ``ibv_modify_qp``'s ``timeout``, which NCCL sets from ``NCCL_IB_TIMEOUT``).
RC_TIMEOUT_UNIT_S = 4.096e-6
#: ``NCCL_IB_TIMEOUT`` when unset, in current NCCL (``net_ib.cc``; 14, then 18, in
#: older releases).
NCCL_IB_TIMEOUT_DEFAULT = 20
#: Linux's minimum TCP retransmission timeout, ``TCP_RTO_MIN`` = ``HZ / 5``.
TCP_RTO_MIN_S = 0.2
MODES = ("lossy", "pfc", "ecn")  # ecn: DCQCN on a PFC network, as deployed
VICTIM = -1  # flow id of the victim
_Packet = tuple[int, int, int, bool]  # (flow, seq, slot sent, ECN-marked)


@dataclass(frozen=True)
class IncastConfig:
    """One incast: the burst, the switch and the congestion control knobs.

    Args:
        senders: N, senders of the burst.
        packets_per_sender: packets each sender sends to the receiver.
        buffer_packets: packets one switch port holds (all its input queues).
        rto_slots: retransmission timeout of a dropped packet, slots after sending.
        victim_rate: packets per slot the victim offers to its idle receiver; 0: no
            victim.
        ecn_threshold: queue depth (packets) at or above which arrivals are marked.
        feedback_slots: slots from a marked delivery to the sender's rate cut.
        increase_slots: slots without a cut after which DCQCN raises the rate.
        dcqcn_g: gain g of DCQCN's estimate alpha of the marked fraction.
        rate_ai: additive increase of DCQCN's target rate, packets per slot.
        min_rate: lowest rate DCQCN cuts to, packets per slot.
        max_slots: give up (``RuntimeError``) after this many slots.
    """

    senders: int = 8
    packets_per_sender: int = 32
    buffer_packets: int = 64
    rto_slots: int = 1000
    victim_rate: float = 0.0
    ecn_threshold: int = 8
    feedback_slots: int = 4
    increase_slots: int = 64
    dcqcn_g: float = 1 / 16
    rate_ai: float = 1 / 32
    min_rate: float = 1 / 256
    max_slots: int = 1_000_000

    def __post_init__(self) -> None:
        for name in ("senders", "packets_per_sender", "buffer_packets", "rto_slots"):
            checks.positive_int(name, getattr(self, name))
        for name in ("ecn_threshold", "feedback_slots", "increase_slots", "max_slots"):
            checks.positive_int(name, getattr(self, name))
        for name in ("dcqcn_g", "rate_ai", "min_rate"):
            value = getattr(self, name)
            if isinstance(value, bool) or not 0 < value <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {value!r}")
        if isinstance(self.victim_rate, bool) or not 0 <= self.victim_rate <= 1:
            raise ValueError(f"victim_rate must be in [0, 1], got {self.victim_rate!r}")
        if self.buffer_packets < self.senders + 1:
            raise ValueError(
                "buffer_packets must be > senders (PFC gives every input link of a "
                f"port a share), got {self.buffer_packets} for {self.senders} senders"
            )


@dataclass(frozen=True)
class IncastResult:
    """What one run measured; packets and slots.

    Attributes:
        mode: ``"lossy"``, ``"pfc"`` or ``"ecn"``.
        config: the run's configuration.
        completion_slots: slot at whose end the receiver holds the whole burst.
        sent: burst packets sent, resends included.
        delivered: burst packets the receiver got.
        dropped: burst packets dropped by a full port.
        max_queue: deepest the receiver's port R got, packets.
        pause_slots: link-slots spent paused by PFC (all links).
        victim_delivered: victim packets delivered before ``completion_slots``.
        queue_trace: depth of port R at the end of every slot.
        drop_trace: burst packets dropped in every slot.
        pause_trace: input links paused at the end of every slot.
        mark_trace: packets ECN-marked on arrival at port R in every slot.
    """

    mode: str
    config: IncastConfig
    completion_slots: int
    sent: int
    delivered: int
    dropped: int
    max_queue: int
    pause_slots: int
    victim_delivered: int
    queue_trace: tuple[int, ...]
    drop_trace: tuple[int, ...] = ()
    pause_trace: tuple[int, ...] = ()
    mark_trace: tuple[int, ...] = ()

    @property
    def goodput(self) -> float:
        """Burst packets delivered per slot, as a fraction of the port's rate."""
        return self.delivered / self.completion_slots

    @property
    def victim_throughput(self) -> float:
        """Victim packets delivered per slot while the burst ran."""
        return self.victim_delivered / self.completion_slots


class _Port:
    """A switch output port: one FIFO per input link, served round robin."""

    def __init__(self, inputs: list[object]) -> None:
        self.queues: dict[object, deque[_Packet]] = {k: deque() for k in inputs}
        self.order, self.turn, self.depth = list(inputs), 0, 0

    def push(self, link: object, packet: _Packet) -> None:
        self.queues[link].append(packet)
        self.depth += 1

    def pop(self) -> _Packet | None:
        for i in range(len(self.order)):
            link = self.order[(self.turn + i) % len(self.order)]
            if self.queues[link]:
                self.turn = (self.turn + i + 1) % len(self.order)
                self.depth -= 1
                return self.queues[link].popleft()
        return None


class _Sender:
    """A NIC: new packets in order, resends when their timer fires, DCQCN's rate."""

    def __init__(self, packets: float, max_rate: float) -> None:
        self.packets, self.next_seq, self.resend = packets, 0, []
        self.max_rate = self.rate = self.target = max_rate
        self.credit, self.alpha, self.quiet = 0.0, 1.0, 0

    def send(self, t: int) -> int | None:
        """The sequence number to send in slot t, or None (no credit, no packet)."""
        self.credit = min(1.0, self.credit + self.rate)
        if self.credit < 1.0:
            return None
        if self.resend and self.resend[0][0] <= t:
            seq = heapq.heappop(self.resend)[1]
        elif self.next_seq < self.packets:
            seq, self.next_seq = self.next_seq, self.next_seq + 1
        else:
            return None
        self.credit -= 1.0
        return seq

    def cut(self, g: float, min_rate: float) -> None:
        """DCQCN's reaction to a congestion notification (CNP)."""
        self.target = self.rate
        self.rate = max(min_rate, self.rate * (1 - self.alpha / 2))
        self.alpha, self.quiet = (1 - g) * self.alpha + g, 0

    def recover(self, g: float, ai: float) -> None:
        """DCQCN's increase after a quiet period: halfway back to the target."""
        self.alpha *= 1 - g
        self.target = min(self.max_rate, self.target + ai)
        self.rate, self.quiet = (self.rate + self.target) / 2, 0


def rc_timeout_s(timeout: int = NCCL_IB_TIMEOUT_DEFAULT) -> float:
    """Seconds an RDMA RC queue pair waits for an ACK before it retransmits.

    ``4.096 us x 2^timeout`` (the InfiniBand spec's local ACK timeout); after
    ``NCCL_IB_RETRY_CNT`` (7) such retries the QP fails and NCCL reports an error.

    Args:
        timeout: the QP's 5-bit ``timeout`` field, 1..31 (0 means never).

    Raises:
        TypeError: ``timeout`` not an int.
        ValueError: ``timeout`` outside 1..31.
    """
    checks.integer("timeout", timeout, low=1, high=31)
    return RC_TIMEOUT_UNIT_S * 2**timeout


def simulate_incast(mode: str, config: IncastConfig | None = None) -> IncastResult:
    """Run one incast burst to completion on lossy, PFC or ECN/DCQCN switches.

    Args:
        mode: ``"lossy"`` (drop-tail, resend after ``rto_slots``), ``"pfc"``
            (pause an input link whose packets fill its share of the port) or
            ``"ecn"`` (PFC, plus marking and DCQCN rate control).
        config: the burst and the knobs; ``IncastConfig()`` if None.

    Returns:
        The run's measurements.

    Raises:
        ValueError: an unknown mode.
        RuntimeError: the burst did not complete within ``config.max_slots``.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    c = config if config is not None else IncastConfig()
    n, size, buffer = c.senders, c.packets_per_sender, c.buffer_packets
    flows = {i: _Sender(size, 1.0) for i in range(n)}
    if c.victim_rate > 0:
        flows[VICTIM] = _Sender(float("inf"), c.victim_rate)
    uplink = _Port([0, VICTIM])  # switch A to switch T
    port_r, port_r2 = _Port(list(range(1, n)) + ["up"]), _Port(["up"])
    # region pfc-shares
    share_t = buffer // n  # T: inputs 1..N-1 and the uplink share port R's buffer
    share_a = buffer // (2 if c.victim_rate > 0 else 1)
    paused: dict[tuple[str, object], bool] = {}
    # endregion
    cnps: deque[tuple[int, int]] = deque()  # (slot it arrives, flow)
    last_cnp = dict.fromkeys(flows, -(10**9))
    sent = dropped = delivered = victim = max_queue = pause_slots = 0
    trace: list[int] = []
    traces: dict[str, list[int]] = {"drop": [], "pause": [], "mark": []}
    now = {"drop": 0, "mark": 0}  # this slot's drops and marks

    def enqueue(port: _Port, link: object, packet: _Packet) -> None:
        nonlocal dropped
        if port.depth >= buffer:  # only lossy ports fill: PFC pauses before
            dropped += packet[0] != VICTIM
            now["drop"] += packet[0] != VICTIM
            if packet[0] != VICTIM:
                heapq.heappush(
                    flows[packet[0]].resend, (packet[2] + c.rto_slots, packet[1])
                )
            return
        marked = mode == "ecn" and port.depth >= c.ecn_threshold
        now["mark"] += marked and port is port_r
        port.push(link, packet[:3] + (marked,))

    t = 0
    while t < c.max_slots:
        # T's ports send to the receivers, the uplink to T, the NICs to their switch:
        # downstream first, so a packet crosses one link per slot.
        for port in (port_r, port_r2):
            packet = port.pop()
            if packet is None:
                continue
            flow, _, _, marked = packet
            if flow == VICTIM:
                victim += 1
            else:
                delivered += 1
            if marked and t - last_cnp[flow] >= c.feedback_slots:
                last_cnp[flow] = t
                cnps.append((t + c.feedback_slots, flow))
        if not paused.get(("T", "up")):
            packet = uplink.pop()
            if packet is not None:
                enqueue(port_r2 if packet[0] == VICTIM else port_r, "up", packet)
        for flow, nic in flows.items():
            on_a = flow in (0, VICTIM)
            if paused.get(("A", flow) if on_a else ("T", flow)):
                continue
            seq = nic.send(t)
            if seq is None:
                continue
            sent += flow != VICTIM
            enqueue(uplink if on_a else port_r, flow, (flow, seq, t, False))
        # region pfc-pause
        if mode != "lossy":  # pause an input link above its share, resume at half
            held = {("T", k): len(q) for k, q in port_r.queues.items()}
            held["T", "up"] += port_r2.depth
            held.update({("A", k): len(q) for k, q in uplink.queues.items()})
            for link, count in held.items():
                share = share_t if link[0] == "T" else share_a
                if count >= share:
                    paused[link] = True
                elif count <= share // 2:
                    paused[link] = False
            pause_slots += sum(paused.values())
        # endregion
        while cnps and cnps[0][0] <= t:
            flows[cnps.popleft()[1]].cut(c.dcqcn_g, c.min_rate)
        if mode == "ecn":
            for nic in flows.values():
                nic.quiet += 1
                if nic.quiet >= c.increase_slots:
                    nic.recover(c.dcqcn_g, c.rate_ai)
        max_queue = max(max_queue, port_r.depth)
        trace.append(port_r.depth)
        traces["pause"].append(sum(paused.values()))
        for kind in now:
            traces[kind].append(now[kind])
            now[kind] = 0
        if delivered == n * size:
            counts = (sent, delivered, dropped, max_queue, pause_slots, victim)
            return IncastResult(
                mode,
                c,
                t + 1,
                *counts,
                tuple(trace),
                *(tuple(traces[k]) for k in ("drop", "pause", "mark")),
            )
        t += 1
        if not (uplink.depth or port_r.depth or cnps or VICTIM in flows):
            # nothing moves until the next resend: skip the idle slots
            idle = all(nic.next_seq >= nic.packets for nic in flows.values())
            due = min(
                (nic.resend[0][0] for nic in flows.values() if nic.resend), default=t
            )
            if idle and due > t:
                trace.extend([0] * (due - t))
                for kind in traces:
                    traces[kind].extend([0] * (due - t))
                t = due
    raise RuntimeError(f"the burst did not complete in max_slots={c.max_slots}")
