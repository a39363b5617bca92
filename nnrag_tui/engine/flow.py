"""Which names a module-level compound statement reads only after binding them itself.

torch_geometric's ``typing.py`` probes each optional package with its own ``try: import
torch_sparse ... except ImportError as e: warnings.warn(f"... {e}")``, and diffusers'
``attention_dispatch.py`` does the same seven times. Every handler binds ``e`` and reads it, and
that read is of its own binding, never of another statement's ``e``. Taken as a read of the
module's ``e``, it made each such statement depend on the others: a cycle, and a file whose
definitions came out in an order that does not import.

The walk follows execution order and keeps the set of names the statement has *definitely*
bound so far: both arms of an ``if`` must bind a name for it to count after the ``if``; an
``except`` clause starts from what was bound before the ``try`` (any line of its body may have
raised) plus its own ``as`` name; loop bodies and ``with`` bodies may not run (or may be cut
short), so what they bind does not count after them. A read inside a function or lambda runs
later, when any statement may have rebound the name, so it never counts as satisfied.
"""

from __future__ import annotations

import ast

from nnrag_tui.engine import treewalk

_COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def reads_after_own_binding(node: ast.stmt) -> frozenset[str]:
    """The names that ``node`` reads while the module executes only where its own earlier code
    has definitely bound them. A name it also reads anywhere else (before binding it, on a path
    that may skip the binding, inside a function) is left out."""
    flow = _Flow()
    flow.block([node], frozenset())
    return frozenset(flow.satisfied - flow.unsatisfied)


def definitely_bound(body: list[ast.stmt]) -> frozenset[str]:
    """The names bound once ``body``, module-level statements in their order, has run to its
    end: a name bound only on some paths (in one arm of an ``if``, in a loop, in a ``try``
    body whose handler does not bind it) or deleted again is left out. Reads are not
    tracked, so no function or class body is walked: tensordict's ``TensorDictBase``, some
    ten thousand lines, was walked in full for each import of one of its names."""
    return _Flow(track_reads=False).block(body, frozenset())


def _ends_in_raise(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], ast.Raise)


class _Flow:
    def __init__(self, track_reads: bool = True) -> None:
        self.track_reads = track_reads
        self.satisfied: set[str] = set()
        self.unsatisfied: set[str] = set()

    # -- expressions -------------------------------------------------------------------------
    def read(self, expr: ast.AST | None, bound: frozenset[str], local: frozenset[str] = frozenset()
             ) -> None:
        if expr is None or not self.track_reads:
            return
        if isinstance(expr, ast.Name):
            if isinstance(expr.ctx, ast.Load) and expr.id not in local:
                (self.satisfied if expr.id in bound else self.unsatisfied).add(expr.id)
            return
        if isinstance(expr, ast.Lambda):
            for d in (*expr.args.defaults, *expr.args.kw_defaults):
                self.read(d, bound, local)
            self.later(expr.body)
            return
        if isinstance(expr, ast.NamedExpr):
            # binds in the module scope mid-expression: too fine to track, so never satisfied
            self.unsatisfied.add(expr.target.id)  # type: ignore[union-attr]
            self.read(expr.value, bound, local)
            return
        if isinstance(expr, _COMPS):
            inner = local | {n.id for g in expr.generators for n in treewalk.walk(g.target)
                             if isinstance(n, ast.Name)}
            for i, g in enumerate(expr.generators):
                self.read(g.iter, bound, local if i == 0 else inner)
                for cond in g.ifs:
                    self.read(cond, bound, inner)
            for part in ("elt", "key", "value"):
                self.read(getattr(expr, part, None), bound, inner)
            return
        for child in treewalk.children(expr):
            self.read(child, bound, local)

    def later(self, node: ast.AST) -> None:
        """Code that runs after the module executed (a function body): any read may see
        another statement's binding."""
        if not self.track_reads:
            return
        self.unsatisfied.update(n.id for n in treewalk.walk(node)
                                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))

    def bind_target(self, target: ast.AST, bound: frozenset[str]) -> frozenset[str]:
        names = set()
        for n in treewalk.walk(target):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.add(n.id)
            elif isinstance(n, (ast.Attribute, ast.Subscript)):
                self.read(n.value, bound)
                if isinstance(n, ast.Subscript):
                    self.read(n.slice, bound)
        return bound | names

    # -- statements --------------------------------------------------------------------------
    def block(self, body: list[ast.stmt], bound: frozenset[str]) -> frozenset[str]:
        for st in body:
            bound = self.stmt(st, bound)
        return bound

    def stmt(self, st: ast.stmt, bound: frozenset[str]) -> frozenset[str]:
        if not self.track_reads and isinstance(
                st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return bound | {st.name}  # (its body binds nothing at module level)
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = st.args
            for expr in (*st.decorator_list, *a.defaults, *a.kw_defaults, st.returns,
                         *(arg.annotation for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs,
                                                      a.vararg, a.kwarg) if arg is not None)):
                self.read(expr, bound)
            for s in st.body:
                self.later(s)
            return bound | {st.name}
        if isinstance(st, ast.ClassDef):
            for expr in (*st.decorator_list, *st.bases, *(k.value for k in st.keywords)):
                self.read(expr, bound)
            self.block(st.body, bound)  # class-body names satisfy class-body reads
            return bound | {st.name}
        if isinstance(st, ast.Import):
            return bound | {a.asname or a.name.split(".")[0] for a in st.names}
        if isinstance(st, ast.ImportFrom):
            return bound | {a.asname or a.name for a in st.names if a.name != "*"}
        if isinstance(st, ast.Assign):
            self.read(st.value, bound)
            for t in st.targets:
                bound = self.bind_target(t, bound)
            return bound
        if isinstance(st, ast.AugAssign):
            self.read(ast.Name(st.target.id, ast.Load()) if isinstance(st.target, ast.Name)
                      else st.target, bound)
            self.read(st.value, bound)
            return self.bind_target(st.target, bound)
        if isinstance(st, ast.AnnAssign):
            self.read(st.annotation, bound)
            if st.value is None:
                return bound
            self.read(st.value, bound)
            return self.bind_target(st.target, bound)
        if isinstance(st, ast.Delete):
            gone = {n.id for t in st.targets for n in treewalk.walk(t) if isinstance(n, ast.Name)}
            for t in st.targets:
                self.bind_target(t, bound)
            return bound - gone
        if isinstance(st, ast.If):
            self.read(st.test, bound)
            arms = [(self.block(body, bound), _ends_in_raise(body))
                    for body in (st.body, st.orelse)]
            done = [names for names, raises in arms if not raises]
            return done[0] & done[1] if len(done) == 2 else done[0] if done else bound
        if isinstance(st, ast.While):
            self.read(st.test, bound)
            self.block(st.body, bound)
            self.block(st.orelse, bound)
            return bound
        if isinstance(st, (ast.For, ast.AsyncFor)):
            self.read(st.iter, bound)
            self.block(st.body, self.bind_target(st.target, bound))
            self.block(st.orelse, bound)
            return bound
        if isinstance(st, (ast.With, ast.AsyncWith)):
            for item in st.items:
                self.read(item.context_expr, bound)
                if item.optional_vars is not None:
                    bound = self.bind_target(item.optional_vars, bound)
            self.block(st.body, bound)  # a context manager may swallow an exception
            return bound
        if isinstance(st, ast.Try) or type(st).__name__ == "TryStar":
            # after it: the body and ``else`` ran to the end, or a handler did (one that ends
            # in ``raise`` never does); ``finally`` runs either way
            done = self.block(st.orelse, self.block(st.body, bound))
            for h in st.handlers:  # type: ignore[attr-defined]
                self.read(h.type, bound)
                handled = self.block(h.body, bound | {h.name} if h.name else bound)
                if not _ends_in_raise(h.body):
                    done &= handled - {h.name}
            final = self.block(st.finalbody, bound)
            return (done | final) - (bound - final)
        if isinstance(st, ast.Match):
            self.later(st)  # patterns bind in ways not tracked here: never satisfied
            return bound
        for child in treewalk.children(st):  # Expr, Return, Raise, Assert, ...
            self.read(child, bound)
        return bound
