"""The LP side of offline progressive filling: a warm HiGHS model and the rounds of Algorithm 1.

``Filling`` runs the rounds and the freeze step that ``rm/offline/filling.py`` describes
(tsf-paper §V-B, Algorithm 1), on one LP built once and re-solved warm.

``LinearProgram`` is that LP.  Progressive filling solves a chain of LPs that
differ in a few bounds and costs (Gavel's lesson: build the model once, re-solve
it warm).  scipy's public ``linprog`` rebuilds and re-validates the model on every
call, which costs far more than HiGHS's dual simplex needs for a warm re-solve,
so this module drives a HiGHS model directly through ``highspy``, HiGHS's own
Python binding (the solver linprog calls underneath).  ``linprog`` remains as an
independent second path; both solve the same model (a test runs both):

    min  cost · x    s.t.   row_lo ≤ A x ≤ row_hi,   col_lo ≤ x ≤ col_hi.

The matrix is built from numpy triplets straight into HiGHS's column-wise form:
on the audit's thousands of tiny instances, building it is what costs.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import sys

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

import highspy as _highs

#: HiGHS feasibility tolerances (its defaults are 1e-7)
TOLERANCE = 1e-9
#: set False to force the linprog path (tests use this to check both agree)
USE_BINDINGS = True
#: a user that can rise by less than this (in units of h_i) is saturated
TOL_SATURATED = 1e-7
#: the freeze LP asks each candidate for at most this rise (units of h_i); small, so
#: that unsaturated users rarely compete for it and one LP usually finds them all
T_CAP = 1e-3
#: if HiGHS calls a later LP infeasible because a level carried from an earlier
#: one sits at the edge of its tolerance, the carried bounds are relaxed by this
#: (units of h_i) and the LP solved again; normally they are kept exact
RELAX = 1e-9


class LinearProgram:
    """One LP, modified in place and re-solved; ``solve()`` returns x or raises RuntimeError.

    The matrix comes as triplets (row, column, value) of its non-zeros.
    """

    def __init__(self, shape, rows, cols, vals, cost, col_lo, col_hi, row_lo, row_hi):
        n_rows, n_cols = shape
        rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
        order = np.lexsort((rows, cols))
        self.shape = (n_rows, n_cols)
        self.indptr = np.concatenate([[0], np.cumsum(np.bincount(cols, minlength=n_cols))]).astype(np.int32)
        self.indices = rows[order].astype(np.int32)
        self.data = np.asarray(vals, dtype=float)[order]
        self.cost = np.array(cost, dtype=float)
        self.col_lo, self.col_hi = np.array(col_lo, dtype=float), np.array(col_hi, dtype=float)
        self.row_lo, self.row_hi = np.array(row_lo, dtype=float), np.array(row_hi, dtype=float)
        self._highs = _build(self) if USE_BINDINGS else None

    def set_cost(self, cols, value: float) -> None:
        cols = np.atleast_1d(np.asarray(cols, dtype=np.int32))
        self.cost[cols] = value
        if self._highs is not None and len(cols):
            self._highs.changeColsCost(len(cols), cols, self.cost[cols])

    def set_col_bounds(self, cols, lo: float, hi: float) -> None:
        cols = np.atleast_1d(np.asarray(cols, dtype=np.int32))
        self.col_lo[cols], self.col_hi[cols] = lo, hi
        if self._highs is not None and len(cols):
            self._highs.changeColsBounds(len(cols), cols, _finite(self.col_lo[cols]), _finite(self.col_hi[cols]))

    def set_row_bounds(self, rows, lo, hi) -> None:
        rows = np.atleast_1d(np.asarray(rows, dtype=np.int64))
        self.row_lo[rows], self.row_hi[rows] = lo, hi
        if self._highs is not None:
            for r, a, b in zip(rows.tolist(), _finite(self.row_lo[rows]).tolist(),
                               _finite(self.row_hi[rows]).tolist()):
                self._highs.changeRowBounds(r, a, b)

    def solve(self) -> np.ndarray:
        if self._highs is not None:
            self._highs.run()
            status = self._highs.getModelStatus()
            if status != _highs.HighsModelStatus.kOptimal:
                raise RuntimeError(f"offline LP failed: {self._highs.modelStatusToString(status)}")
            return np.array(self._highs.getSolution().col_value)
        return self._solve_linprog()

    def _solve_linprog(self) -> np.ndarray:
        a = sparse.csc_matrix((self.data, self.indices, self.indptr), shape=self.shape).tocsr()
        upper, lower = np.isfinite(self.row_hi), np.isfinite(self.row_lo)
        a_ub = sparse.vstack([a[upper], -a[lower]]).tocsc()
        b_ub = np.concatenate([self.row_hi[upper], -self.row_lo[lower]])
        res = linprog(self.cost, A_ub=a_ub, b_ub=b_ub, bounds=np.column_stack([self.col_lo, self.col_hi]),
                      method="highs", options={"primal_feasibility_tolerance": TOLERANCE,
                                               "dual_feasibility_tolerance": TOLERANCE})
        if res.status != 0:
            raise RuntimeError(f"offline LP failed: {res.message}")
        return res.x


def _finite(values: np.ndarray) -> np.ndarray:
    """HiGHS reads ±1e30 and beyond as infinite."""
    return np.minimum(np.maximum(values, -1e30), 1e30)


def _build(lp: LinearProgram):
    model = _highs.HighsLp()
    rows, cols = lp.shape
    model.num_col_, model.num_row_ = cols, rows
    model.a_matrix_.num_col_, model.a_matrix_.num_row_ = cols, rows
    model.a_matrix_.format_ = _highs.MatrixFormat.kColwise
    model.a_matrix_.start_ = lp.indptr
    model.a_matrix_.index_ = lp.indices
    model.a_matrix_.value_ = lp.data
    model.col_cost_ = lp.cost
    model.col_lower_, model.col_upper_ = _finite(lp.col_lo), _finite(lp.col_hi)
    model.row_lower_, model.row_upper_ = _finite(lp.row_lo), _finite(lp.row_hi)
    with _stdout_to_devnull():
        solver = _highs.Highs()          # the first one in a process prints HiGHS's banner
    # Quiet, 1e-9 tolerances, no presolve (so re-solves stay warm).
    for name, value in (("output_flag", False), ("log_to_console", False),
                        ("primal_feasibility_tolerance", TOLERANCE),
                        ("dual_feasibility_tolerance", TOLERANCE), ("presolve", "off")):
        solver.setOptionValue(name, value)
    solver.passModel(model)
    return solver


@contextlib.contextmanager
def _stdout_to_devnull():
    """Point file descriptor 1 at /dev/null for the block, so C code cannot print on stdout.

    HiGHS writes its banner ("Running HiGHS ...") with C stdio when the first
    ``Highs`` object of a process is built, before any option can turn it off, and
    it goes to the descriptor, not to ``sys.stdout``: ``rayrm offline --json`` must
    print exactly one JSON document.  Both stdio layers are flushed before the
    descriptor is swapped back, so nothing buffered leaks out after the block.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
        try:
            yield
        finally:
            _flush_c_stdio()
            os.dup2(saved, 1)
    finally:
        os.close(saved)


@functools.cache
def _libc():
    try:
        return ctypes.CDLL(None)
    except OSError:                     # no C library to load (not a POSIX system)
        return None


def _flush_c_stdio() -> None:
    libc = _libc()
    if libc is not None and hasattr(libc, "fflush"):
        libc.fflush(None)


def solve_once(shape, rows, cols, vals, cost, col_lo, col_hi, row_lo, row_hi) -> np.ndarray:
    """Build and solve one LP (no warm start needed)."""
    return LinearProgram(shape, rows, cols, vals, cost, col_lo, col_hi, row_lo, row_hi).solve()


class Filling:
    """The rounds of Algorithm 1 over coalesced variables y_v = n_v / h_i (module docstring).

    Agents are users (one level per user), or (user, type) pairs for per-machine DRF;
    agent k's level is c_k · z_k with z_k = Σ_{v of k} y_v.  One LP is built once and
    re-solved warm; its columns are [y_v..., s, t_k...] and its rows the machine
    constraints (4), the task limits, then two rows per agent, each on or off:

        z_k − s / c_k − t_k ≥ 0        (on while k is active: eq. 2, and the freeze test)
        z_k             ≥ floor_k     (on once k is inactive: eq. 3)
    """

    def __init__(self, problem, h, users, types, count, cap_t, agent_of_var, level, limits=True):
        n_vars = len(users)
        n_agents = len(level)
        agent_user = np.zeros(n_agents, dtype=int)
        agent_user[agent_of_var] = users
        self.c = np.asarray(level, dtype=float)
        self.agent_of_var, self.n_vars, self.n_agents = agent_of_var, n_vars, n_agents
        # (4) machine constraints per type and resource, as shares of the cluster total.
        total = problem.total
        n_res = len(total)
        coef = h[users, None] * problem.demand[users] / np.where(total > 0, total, 1.0)   # V x R
        var, res = np.nonzero((coef > 0) & (total > 0))
        used_rows, row_of = np.unique(types[var] * n_res + res, return_inverse=True)
        rows, cols, vals = [row_of.reshape(-1)], [var], [coef[var, res]]
        rhs = [((cap_t * count[:, None]) / np.where(total > 0, total, 1.0)).reshape(-1)[used_rows]]
        self.n_fixed = len(used_rows)
        # The tasks each app has: Σ_t y_it ≤ limit_i / h_i.
        finite = np.flatnonzero(np.isfinite(problem.limit) & (h > 0) & limits)
        if len(finite):
            pick = np.flatnonzero(np.isin(users, finite))
            rows.append(self.n_fixed + np.searchsorted(finite, users[pick]))
            cols.append(pick)
            vals.append(np.ones(len(pick)))
            rhs.append(problem.limit[finite] / h[finite])
            self.n_fixed += len(finite)
        self.s_col = n_vars
        self.active = (np.bincount(agent_of_var, minlength=n_agents) > 0) \
            & (problem.limit[agent_user] > 0) & (self.c > 0)
        # Two rows per agent, switched on and off by their bounds alone so HiGHS
        # keeps its basis: "rise" rows  z_k − s / c_k − t_k ≥ 0  (active agents) and
        # "floor" rows  z_k ≥ floor_k  (inactive agents, eq. 3).
        self.rise_row = self.n_fixed + np.arange(n_agents)
        self.floor_row = self.n_fixed + n_agents + np.arange(n_agents)
        positive = np.flatnonzero(self.c > 0)
        rows += [self.rise_row[agent_of_var], self.rise_row[positive], self.rise_row,
                 self.floor_row[agent_of_var]]
        cols += [np.arange(n_vars), np.full(len(positive), self.s_col), self.s_col + 1 + np.arange(n_agents),
                 np.arange(n_vars)]
        vals += [np.ones(n_vars), -1.0 / self.c[positive], -np.ones(n_agents), np.ones(n_vars)]
        n_cols = n_vars + 1 + n_agents
        cost = np.zeros(n_cols)
        cost[self.s_col] = -1.0
        col_hi = np.concatenate([np.full(n_vars, np.inf), [np.inf], np.zeros(n_agents)])
        row_lo = np.concatenate([np.full(self.n_fixed, -np.inf), np.where(self.active, 0.0, -np.inf),
                                 np.full(n_agents, -np.inf)])
        row_hi = np.concatenate(rhs + [np.full(2 * n_agents, np.inf)])
        self.lp = LinearProgram((self.n_fixed + 2 * n_agents, n_cols), np.concatenate(rows),
                                np.concatenate(cols), np.concatenate(vals), cost, np.zeros(n_cols), col_hi,
                                row_lo, row_hi)
        self.floor = np.zeros(n_agents)     # frozen levels z_k of inactive agents
        self.relax = 0.0

    def _solve(self) -> np.ndarray:
        try:
            return self.lp.solve()
        except RuntimeError:
            if self.relax:
                raise
        self.relax = RELAX
        frozen = np.flatnonzero(~self.active & (self.floor > 0))
        self.lp.set_row_bounds(self.floor_row[frozen], self.floor[frozen] - RELAX, np.inf)
        if self.lp.col_lo[self.s_col] == self.lp.col_hi[self.s_col]:     # in a freeze LP
            self.lp.set_row_bounds(self.rise_row[self.active], -RELAX, np.inf)
        return self.lp.solve()

    def _round_lp(self, s_prev: float) -> tuple[float, np.ndarray]:
        """(1)-(4): the largest s with c_k z_k ≥ s for every active agent."""
        lp = self.lp
        lp.set_col_bounds(self.s_col, s_prev, np.inf)
        lp.set_cost(self.s_col, -1.0)
        lp.set_row_bounds(self.rise_row[self.active], 0.0, np.inf)
        x = self._solve()
        return float(x[self.s_col]), x[:self.n_vars]

    def _unsaturated(self, s: float, candidates: np.ndarray) -> np.ndarray:
        """One freeze LP: max Σ t_k, 0 ≤ t_k ≤ T_CAP, z_k − t_k ≥ s / c_k for candidates k."""
        lp, tcols = self.lp, self.s_col + 1 + candidates
        lp.set_col_bounds(self.s_col, s, s)
        lp.set_cost(self.s_col, 0.0)
        lp.set_row_bounds(self.rise_row[self.active], -self.relax, np.inf)
        lp.set_col_bounds(tcols, 0.0, T_CAP)
        lp.set_cost(tcols, -1.0)
        x = self._solve()
        lp.set_col_bounds(tcols, 0.0, 0.0)
        lp.set_cost(tcols, 0.0)
        return x[tcols] > TOL_SATURATED

    def _freeze(self, agents: np.ndarray, s: float) -> None:
        """Eq. (3) from now on: the agents keep their level z_k = s / c_k."""
        self.floor[agents] = s / self.c[agents]
        self.active[agents] = False
        self.lp.set_row_bounds(self.rise_row[agents], -np.inf, np.inf)
        self.lp.set_row_bounds(self.floor_row[agents], self.floor[agents] - self.relax, np.inf)

    def run(self) -> tuple[np.ndarray, int]:
        y = np.zeros(self.n_vars)
        rounds, s_prev = 0, 0.0
        while self.active.any():
            rounds += 1
            s, y = self._round_lp(s_prev)
            act = np.flatnonzero(self.active)
            if rounds > 1 and np.all((s - s_prev) / self.c[act] < 1e-12):
                saturated = act                       # no progress: nobody can rise
            else:
                saturated = act
                while len(saturated):
                    up = self._unsaturated(s, saturated)
                    if not up.any():
                        break
                    saturated = saturated[~up]
            self._freeze(saturated, s)
            s_prev = s
        # Every agent is now at its frozen level (none could rise); report exactly those levels.
        y = np.maximum(y, 0.0)
        z = np.bincount(self.agent_of_var, weights=y, minlength=self.n_agents)
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(z > 0, self.floor / z, 0.0)
        return y * scale[self.agent_of_var], rounds
