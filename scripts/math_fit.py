#!/usr/bin/env python3
"""Prints the coefficients of erf's tail in codegen/math.cc (kErfTail).

On [1, 3.92], log(erfc(x)) is fitted by a Chebyshev interpolant of degree 10
(in double, from Python's math.erfc), rewritten as a polynomial in
u = x - 2.46 and rounded to float; the script also reports the fit's worst
error on a fine grid. Run: python3 scripts/math_fit.py
"""
import math
import struct

LO, HI, DEGREE = 1.0, 3.92, 10


def to_f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


def target(x):
    return math.log(math.erfc(x))


def chebyshev_interpolant(f, lo, hi, degree):
    """Monomial coefficients in t = (x - mid) / half, t in [-1, 1]."""
    n = degree + 1
    nodes = [math.cos(math.pi * (j + 0.5) / n) for j in range(n)]
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    values = [f(mid + half * t) for t in nodes]
    cheb = [2.0 / n * sum(values[j] * math.cos(math.pi * k * (j + 0.5) / n) for j in range(n)) for k in range(n)]
    cheb[0] /= 2
    # T_k as monomials, by T_{k+1} = 2 t T_k - T_{k-1}.
    basis = [[1.0], [0.0, 1.0]]
    while len(basis) < n:
        prev, prev2 = basis[-1], basis[-2]
        nxt = [0.0] * (len(prev) + 1)
        for i, v in enumerate(prev):
            nxt[i + 1] += 2 * v
        for i, v in enumerate(prev2):
            nxt[i] -= v
        basis.append(nxt)
    mono = [0.0] * n
    for k in range(n):
        for i, v in enumerate(basis[k]):
            mono[i] += cheb[k] * v
    return mono


def main():
    mono = chebyshev_interpolant(target, LO, HI, DEGREE)
    half = (HI - LO) / 2
    coefs = [to_f32(m / half**k) for k, m in enumerate(mono)]
    center = (LO + HI) / 2
    worst = 0.0
    for i in range(20001):
        x = LO + (HI - LO) * i / 20000
        u = x - center
        q = sum(c * u**k for k, c in enumerate(coefs))
        worst = max(worst, abs(q - target(x)))
    print("center %.9g, worst error of q %.3g" % (center, worst))
    print(", ".join("%.9g" % c for c in coefs))


if __name__ == "__main__":
    main()
