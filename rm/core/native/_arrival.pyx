# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled pieces of a job's arrival (the Python references: ``JobSpec.task_durations``
in rm/core/jobs.py, ``ClusterState._eligible`` in rm/core/cluster.py).

``eligible``: an app's eligibility bytes, their count and h^c from the node-by-node match
of its constraint, fit of its demand and tasks per node — one pass over the nodes where the
reference makes four numpy calls (an AND, its bytes, a count, a masked sum), on every
arrival of a (constraint, demand) pair not seen before.

``task_durations``: a job's durations come from ``np.random.default_rng([seed, crc32(id)])``,
a PCG64 seeded through NumPy's ``SeedSequence`` (O'Neill's seed_seq_fe: hash the entropy
words into a pool of four, mix every pool word into every other, hash the pool out into
the generator's 128-bit state and increment).  NumPy runs those steps as Python-level
array code, several times the cost of the draws of a small job; here they are C integer
arithmetic, and the state goes into one generator reused for every job.  The state is
the one NumPy computes, bit for bit (tests/test_native.py compares them on random seeds
and ids), so the draws are the same numbers.
"""

import threading
import zlib

import numpy as np

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport uint32_t, uint64_t

# SeedSequence's constants (numpy/random/bit_generator.pyx)
cdef uint32_t INIT_A = 0x43b0d7e5
cdef uint32_t MULT_A = 0x931e8875
cdef uint32_t INIT_B = 0x8b51f9dd
cdef uint32_t MULT_B = 0x58f38ded
cdef uint32_t MIX_MULT_L = 0xca01f9dd
cdef uint32_t MIX_MULT_R = 0x4973f715
DEF POOL = 4
# PCG64's 128-bit LCG multiplier (PCG_DEFAULT_MULTIPLIER_128)
_PCG_MULT = (0x2360ED051FC65DA4 << 64) | 0x4385DF649FCCF645
_MASK128 = (1 << 128) - 1


cdef inline uint32_t _hashmix(uint32_t value, uint32_t *hash_const):
    value ^= hash_const[0]
    hash_const[0] *= MULT_A
    value *= hash_const[0]
    value ^= value >> 16
    return value


cdef inline uint32_t _mix(uint32_t x, uint32_t y):
    cdef uint32_t result = MIX_MULT_L * x - MIX_MULT_R * y
    result ^= result >> 16
    return result


cdef void _pcg64_words(uint32_t w0, uint32_t w1, uint64_t *out):
    """SeedSequence([w0, w1]).generate_state(4, np.uint64) into out[0..3]: two entropy words
    (each below 2**32, so one word each), no spawn key, a pool of four."""
    cdef uint32_t pool[POOL]
    cdef uint32_t entropy[2]
    cdef uint32_t hash_const = INIT_A, data
    cdef uint32_t state[2 * POOL]
    cdef int i, src, dst
    entropy[0], entropy[1] = w0, w1
    for i in range(POOL):
        pool[i] = _hashmix(entropy[i] if i < 2 else 0, &hash_const)
    for src in range(POOL):
        for dst in range(POOL):
            if src != dst:
                pool[dst] = _mix(pool[dst], _hashmix(pool[src], &hash_const))
    hash_const = INIT_B
    for i in range(2 * POOL):
        data = pool[i % POOL] ^ hash_const
        hash_const *= MULT_B
        data *= hash_const
        data ^= data >> 16
        state[i] = data
    for i in range(POOL):           # little-endian pairs of 32-bit words
        out[i] = (<uint64_t> state[2 * i]) | ((<uint64_t> state[2 * i + 1]) << 32)


def pcg64_state(uint32_t w0, uint32_t w1) -> tuple:
    """(state, inc) of ``PCG64(SeedSequence([w0, w1]))``: the four state words give the seed
    s = (words[0], words[1]) and the stream i = (words[2], words[3]) as 128-bit integers, set
    as pcg_setseq_128_srandom_r does: inc = 2i + 1, state = (inc + s) * MULT + inc mod 2**128
    (one LCG step from 0, s added, one more step)."""
    cdef uint64_t words[POOL]
    _pcg64_words(w0, w1, words)
    seed = (<object> words[0] << 64) | words[1]
    inc = (((<object> words[2] << 64) | words[3]) << 1 | 1) & _MASK128
    state = ((inc + seed) * _PCG_MULT + inc) & _MASK128
    return state, inc


_local = threading.local()


def _generator(uint32_t w0, uint32_t w1):
    """A generator in the state of ``np.random.default_rng([w0, w1])`` (this thread's one,
    reseeded)."""
    rng = getattr(_local, "rng", None)
    if rng is None:
        rng = _local.rng = np.random.Generator(np.random.PCG64(0))
    state, inc = pcg64_state(w0, w1)
    rng.bit_generator.state = {"bit_generator": "PCG64", "state": {"state": state, "inc": inc},
                               "has_uint32": 0, "uinteger": 0}
    return rng


def task_durations(jobspec, seed) -> np.ndarray:
    """``JobSpec.task_durations``: the same draws from the same generator state (a Pareto
    one scaled and capped in one pass, ``_pareto``)."""
    rng = _generator(int(seed) & 0xFFFFFFFF, zlib.crc32(jobspec.app.app_id.encode()))
    durations = jobspec.durations
    if durations.dist == "pareto":
        return _pareto(durations, jobspec.app.num_tasks, rng)
    return durations.draw(jobspec.app.num_tasks, rng)


cdef _pareto(durations, Py_ssize_t n, rng):
    """``Durations.draw`` of a Pareto: x_m (1 + p) for each of NumPy's draws p, then min(x, S)
    when S > 0 — the same double operations in the same order as the reference's three
    array operations, in one loop over the draws (NumPy's minimum keeps x when x <= S)."""
    cdef double alpha = durations.alpha
    cdef double xm = durations.mean * (durations.alpha - 1) / durations.alpha
    cdef double cap = durations.max, x
    cdef Py_ssize_t i
    out = rng.pareto(alpha, n)
    cdef double[::1] v = out
    for i in range(n):
        x = xm * (1.0 + v[i])
        v[i] = cap if cap > 0 and x > cap else x
    return out


def eligible(const unsigned char[::1] match, const unsigned char[::1] fits, const double[::1] per):
    """(eligible, count, h^c) with eligible[m] = match[m] and fits[m] (as 0 or 1 bytes), count
    the nodes eligible, h^c = Σ per[m] over them, summed in node order — the caller's
    ``exact`` says that order gives numpy's float."""
    cdef Py_ssize_t m, n = match.shape[0], count = 0
    cdef double h_c = 0.0
    out = PyBytes_FromStringAndSize(NULL, n)
    cdef char *elig = PyBytes_AS_STRING(out)
    for m in range(n):
        if match[m] and fits[m]:
            elig[m] = 1
            count += 1
            h_c += per[m]
        else:
            elig[m] = 0
    return out, count, h_c
