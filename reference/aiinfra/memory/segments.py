"""How many checkpoints: the sqrt(L) rule of Chen et al. 2016.

Split a chain of L layers into c checkpointed segments. Forward keeps only the c
segment inputs, a_in bytes each. Backward walks the segments from the last to the
first; at segment j it recomputes that segment and holds its activations, a_layer
bytes per layer, while the inputs of segments 1..j are still kept. The peak is
therefore about c a_in + (L/c) a_layer, smallest at c = sqrt(L a_layer / a_in): with
a_layer = a_in, sqrt(L) checkpoints and O(sqrt(L)) memory for one extra forward pass
(Chen et al., "Training Deep Nets with Sublinear Memory Cost", Sec. 4; the paper
writes n for the layers and k for the segments). :func:`checkpointed_peak_bytes` is
the exact count, which the tests hold against the bytes measured with
:class:`aiinfra.memory.measure.SavedTensorLog` over a chain of real layers.
"""

from __future__ import annotations

import math


def segment_sizes(n_layers: int, segments: int) -> list[int]:
    """Layers per segment, as :func:`aiinfra.memory.checkpoint.checkpoint_sequential`.

    Args:
        n_layers: L, layers in the chain.
        segments: c, 1 to L.

    Returns:
        c sizes adding up to L; the first ``L % c`` segments get one extra layer.

    Raises:
        ValueError: ``segments`` is not between 1 and ``n_layers``.
    """
    if n_layers < 1 or not 1 <= segments <= n_layers:
        raise ValueError(
            f"segments must be between 1 and n_layers = {n_layers}, got {segments}"
        )
    q, r = divmod(n_layers, segments)
    return [q + (1 if j < r else 0) for j in range(segments)]


def checkpointed_peak_bytes(
    n_layers: int, segments: int, layer_bytes: float, input_bytes: float
) -> float:
    """Peak bytes saved for backward when L layers run as c checkpointed segments.

    While segment j (1-based, from the input) is recomputed, the inputs of segments
    1..j are held (j a_in) and so are the activations of its L_j layers
    (L_j a_layer); its first layer saves the segment input again, which is the same
    memory, so a_in is subtracted once. Without checkpointing (c = 1) this is
    L a_layer.

    Args:
        n_layers: L, identical layers in a chain.
        segments: c, the number of segments.
        layer_bytes: a_layer, bytes one layer saves for backward, its input included.
        input_bytes: a_in, bytes of one layer's input (a checkpoint).

    Returns:
        max over j of j a_in + L_j a_layer - a_in, in bytes.

    Raises:
        ValueError: ``segments`` is not between 1 and ``n_layers``, or a size is
            negative.
    """
    if layer_bytes < 0 or input_bytes < 0:
        raise ValueError("layer_bytes and input_bytes must be non-negative")
    sizes = segment_sizes(n_layers, segments)
    return max(
        j * input_bytes + size * layer_bytes - input_bytes
        for j, size in enumerate(sizes, start=1)
    )


def optimal_segments(n_layers: int, layer_bytes: float, input_bytes: float) -> int:
    """The number of segments that minimises the peak (exact search over c).

    Args:
        n_layers: L, identical layers in a chain.
        layer_bytes: a_layer, bytes one layer saves, its input included.
        input_bytes: a_in, bytes of one checkpoint.

    Returns:
        The smallest c with the least :func:`checkpointed_peak_bytes`; close to
        :func:`sqrt_rule`.
    """
    return min(
        range(1, n_layers + 1),
        key=lambda k: checkpointed_peak_bytes(n_layers, k, layer_bytes, input_bytes),
    )


def sqrt_rule(
    n_layers: int, layer_bytes: float = 1.0, input_bytes: float = 1.0
) -> float:
    """Chen et al.'s continuous optimum c* = sqrt(L a_layer / a_in) (sqrt(L) if equal).

    Args:
        n_layers: L, layers in the chain.
        layer_bytes: a_layer, bytes one layer saves.
        input_bytes: a_in, bytes of one checkpoint (positive).

    Returns:
        The real-valued optimum number of segments.

    Raises:
        ValueError: ``input_bytes`` is not positive.
    """
    if input_bytes <= 0:
        raise ValueError(f"input_bytes must be positive, got {input_bytes}")
    return math.sqrt(n_layers * layer_bytes / input_bytes)
