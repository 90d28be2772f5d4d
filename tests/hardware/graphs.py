"""Networks as explicit graphs: count their ports, find their bisection by max-flow.

A network is a :class:`~collections.Counter` of links, ``(u, v) -> multiplicity``;
the bisection bandwidth is the max-flow (networkx) from one set of hosts to another,
each link carrying ``B`` each way: an independent check of the closed forms.
"""

from collections import Counter

import networkx as nx

B = 400.0  # Gb/s per link


def bisection(links: Counter, half_a: list, half_b: list) -> float:
    """Max-flow from ``half_a`` to ``half_b``; each link carries ``B`` each way."""
    g = nx.DiGraph()
    for (u, v), n in links.items():
        g.add_edge(u, v, capacity=n * B)
        g.add_edge(v, u, capacity=n * B)
    for h in half_a:
        g.add_edge("source", h)  # no capacity: unbounded
    for h in half_b:
        g.add_edge(h, "sink")
    return nx.maximum_flow_value(g, "source", "sink")


def port_counts(links: Counter) -> Counter:
    """Ports in use at each node (a link of multiplicity n uses n at each end)."""
    ports = Counter()
    for (u, v), n in links.items():
        ports[u] += n
        ports[v] += n
    return ports
