"""HCCL's algorithms' costs against the formulas of HCCL's own algorithm pages."""

import math

import pytest
from aiinfra.comm.cost import LinkModel
from aiinfra.comm.hccl.cost import ALL_REDUCE, fastest

A, B, G = LinkModel(1.0, 0.0), LinkModel(0.0, 1.0), LinkModel(0.0, 0.0, 1.0)


def coefficients(name, p):
    """(c_alpha, c_beta, c_gamma) of the all-reduce ``name`` at p, n = 1."""
    f = ALL_REDUCE[name]
    return f(0.0, p, A), f(1.0, p, B), f(1.0, p, G)


@pytest.mark.parametrize("p", [2, 3, 4, 5, 6, 7, 8, 12, 16, 384])
def test_coefficients_are_hccls_published_formulas(p):
    lg, q = math.ceil(math.log2(p)), 2 ** math.floor(math.log2(p))
    f = (p - 1) / p
    # docs/en/user_guide/coll_algo_intro/{Ring,Mesh,RHD,NHR,NB}.md, AllReduce rows.
    assert coefficients("ring", p) == pytest.approx((2 * (p - 1), 2 * f, f))
    assert coefficients("Mesh", p) == pytest.approx((2, 2 / p, f))
    assert coefficients("NHR", p) == pytest.approx((2 * lg, 2 * f, f))
    assert coefficients("NB", p) == pytest.approx((2 * lg, 2 * f, f))
    fq = (q - 1) / q
    if p == q:  # RHD, power of two: 2 log p alpha + 2 (p-1)/p n beta + ...
        assert coefficients("H-D_R", p) == pytest.approx((2 * lg, 2 * f, f))
    else:  # (2 floor(log p) + 2) alpha + (2 (p'-1)/p' + 2) n beta + ...
        want = (2 * math.floor(math.log2(p)) + 2, 2 * fq + 2, fq + 1)
        assert coefficients("H-D_R", p) == pytest.approx(want)


def test_fastest_by_hand():
    # p = 5, alpha = 1, beta = 1e-3 per byte: at n = 0 Mesh's 2 alpha wins; NHR
    # (6 alpha) beats ring (8 alpha) and H-D_R (6 alpha + 2n beta more bytes).
    link = LinkModel(1.0, 1e-3)
    assert fastest(0.0, 5, link) == "Mesh"
    assert fastest(0.0, 5, link, ("ring", "H-D_R", "NHR")) == "H-D_R"  # tie: first
    assert fastest(1e4, 5, link, ("ring", "H-D_R", "NHR")) == "NHR"
    with pytest.raises(ValueError, match="names"):
        fastest(1.0, 5, link, ("tree",))
