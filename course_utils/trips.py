"""Count the trips: kernel launches and the HBM bytes each kernel reads and writes.

    t = trips.count(lambda: torch.nn.functional.gelu(x + b))
    t.launches, t.bytes_read, t.bytes_written, t.kernels

PyTorch operators are counted as they are dispatched: one launch each, reading their input tensors
and writing their outputs (a matmul is one library call, cuBLAS on a GPU: its operands read once, its
output written once). A graph compiled by Inductor (count_compiled, trips.compile) is counted kernel by
kernel from Inductor's own plan, with the buffers that pass between its kernels. Triton kernels are counted by what they really load and store, by
running them in the instrumented interpreter (on a GPU, on copies of the arguments, before the
real launch). Bytes are *distinct* bytes per kernel, what a perfect cache would fetch from HBM;
`requested_*` adds up every load and store as issued, so re-reads show up there.
"""
from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import _interp
from .environment import DEVICE, INTERPRET
from .numbers import byte_size as _fmt

# Operators that launch no kernel: allocation, metadata, scalar reads.
_NO_KERNEL = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "set_", "resize_",
              "_local_scalar_dense", "lift_fresh", "size", "stride", "is_same_size", "record_stream", "sym_size",
              "sym_stride", "sym_numel", "sym_storage_offset", "is_nonzero", "equal",
              "_unsafe_view"}   # a view that is not marked as one (torch.matmul reshapes with it)
# In-place operators that overwrite `self` without reading it.
_active: list = []   # the counts in progress, innermost last (for trips.compile)
_WRITE_ONLY_SELF = {"copy_", "fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_", "exponential_"}


def _shape_only_self(op: str) -> bool:
    """Operators that take from `self` only its shape, dtype and device, never its values: torch.zeros_like(x)
    and the other *_like, x.new_zeros(...) and the other new_*. They read nothing of x, as torch.zeros reads
    nothing."""
    return op.endswith("_like") or op.startswith("new_")


@dataclass
class Kernel:
    """One launch: its name, and what it moved."""
    name: str
    kind: str                       # "torch", "triton", "library" (a matmul: cuBLAS on a GPU), "inductor"
                                    # (a kernel Inductor generated) or "extern" (another call it kept)
    bytes_read: int
    bytes_written: int
    requested_read: int
    requested_written: int
    reads: dict = field(default_factory=dict)    # argument -> distinct bytes
    writes: dict = field(default_factory=dict)
    launches: int = 1               # a compiled graph row stands for all the kernels it launches

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written


@dataclass
class Trips:
    kernels: list = field(default_factory=list)
    result: object = None

    launches = property(lambda self: sum(k.launches for k in self.kernels))
    bytes_read = property(lambda self: sum(k.bytes_read for k in self.kernels))
    bytes_written = property(lambda self: sum(k.bytes_written for k in self.kernels))
    bytes = property(lambda self: self.bytes_read + self.bytes_written)
    requested_read = property(lambda self: sum(k.requested_read for k in self.kernels))
    requested_written = property(lambda self: sum(k.requested_written for k in self.kernels))
    requested = property(lambda self: self.requested_read + self.requested_written)

    def scaled(self, factor: float) -> "Trips":
        """The same kernels with their bytes times factor: trips counted on a small copy, stated for the full
        size (bytes grow with the elements; a part that does not, a bias vector, is scaled all the same)."""
        def times(d):
            return {k: round(v * factor) for k, v in d.items()}
        return Trips([Kernel(k.name, k.kind, round(k.bytes_read * factor), round(k.bytes_written * factor),
                             round(k.requested_read * factor), round(k.requested_written * factor),
                             times(k.reads), times(k.writes), k.launches) for k in self.kernels])

    def per_element(self, n: int) -> float:
        """HBM bytes per element of a tensor of n elements: 8.0 means one fp32 read and one write."""
        return self.bytes / n

    def summary(self) -> str:
        s = f"{self.launches} launch{'es' if self.launches != 1 else ''}, {_fmt(self.bytes)} " \
            f"({_fmt(self.bytes_read)} read + {_fmt(self.bytes_written)} written)"
        if self.requested != self.bytes:
            s += f"; requested by all loads/stores: {_fmt(self.requested)}"
        return s

    def table(self, max_rows: int = 20) -> str:
        rows = [("#", "kernel", "kind", "read", "written", "requested", "reads / writes")]
        for i, k in enumerate(self.kernels[:max_rows]):
            rw = ", ".join(f"{a} {_fmt(b)}" for a, b in k.reads.items())
            rw += " -> " + ", ".join(f"{a} {_fmt(b)}" for a, b in k.writes.items())
            rows.append((str(i + 1), k.name, k.kind, _fmt(k.bytes_read), _fmt(k.bytes_written),
                         _fmt(k.requested_read + k.requested_written), rw))
        widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
        if len(self.kernels) > max_rows:
            lines.append(f"... and {len(self.kernels) - max_rows} more kernels")
        lines.append("total: " + self.summary())
        return "\n".join(lines)

    __repr__ = table

    def _repr_html_(self) -> str:
        import html
        return "<pre>" + html.escape(self.table()) + "</pre>"


def _distinct_bytes(t: torch.Tensor) -> int:
    """Bytes a kernel must fetch for t: a broadcast (stride-0) dimension is fetched once."""
    n = 1
    for size, stride in zip(t.shape, t.stride()):
        if stride != 0:
            n *= size
    return n * t.element_size() if t.numel() else 0


def _label(t: torch.Tensor) -> str:
    short = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
             torch.int64: "i64", torch.int32: "i32", torch.bool: "bool", torch.uint8: "u8", torch.int8: "i8"}
    return f"{short.get(t.dtype, str(t.dtype).replace('torch.', ''))}{list(t.shape)}"


def _by_label(tensors) -> dict:
    """{label: bytes}, adding up tensors that share a label (two f32[4096] inputs are 32 KiB)."""
    out: dict = {}
    for t in tensors:
        out[_label(t)] = out.get(_label(t), 0) + _distinct_bytes(t)
    return out


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)


def _dynamo_skipped(dispatch):
    """dispatch, kept out of Dynamo's tracing once Dynamo is loaded. torch wraps a mode's __torch_dispatch__
    in the same way, but its wrapper imports torch._dynamo (sympy with it: two to four seconds) on the first
    op counted. Dynamo traces nothing before it is imported, so until then the plain method runs."""
    skipped = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        nonlocal skipped
        if "torch._dynamo" not in sys.modules:
            return dispatch(self, func, types, args, kwargs)
        if skipped is None:
            skipped = torch._disable_dynamo(dispatch, recursive=True)
        return skipped(self, func, types, args, kwargs)
    return __torch_dispatch__


class _Recorder(TorchDispatchMode):
    def __init__(self, trips: Trips):
        super().__init__()
        self.trips = trips

    def _dispatch(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not _interp.inside_launch():
            self._record(func, args, kwargs, out)
        return out

    def _record(self, func, args, kwargs, out):
        name = func.overloadpacket.__name__
        if name in _NO_KERNEL or func.is_view or func.namespace not in ("aten", "prims"):
            return
        reads, writes = {}, {}
        schema = func._schema
        bound = list(zip(schema.arguments, args)) + [(a, kwargs[a.name]) for a in schema.arguments
                                                     if a.name in kwargs]
        for arg, value in bound:
            info = arg.alias_info
            is_write = info is not None and info.is_write
            if arg.name == "self" and _shape_only_self(name):
                continue
            for t in _tensors(value):
                if is_write:
                    writes[t.data_ptr(), _distinct_bytes(t)] = _label(t)
                if not is_write or not (arg.kwarg_only or name in _WRITE_ONLY_SELF):
                    reads[t.data_ptr(), _distinct_bytes(t)] = _label(t)
        aliased = any(r.alias_info is not None for r in schema.returns)
        if not aliased:
            for t in _tensors(out):
                writes[t.data_ptr(), _distinct_bytes(t)] = _label(t)
        rb = sum(n for _, n in reads)
        wb = sum(n for _, n in writes)
        # a matmul is one library call (cuBLAS on a GPU): its operands read once, its output written once
        device = next((t.device.type for _, v in bound for t in _tensors(v)), "cpu")
        lib = _library_name(name, device)
        self.trips.kernels.append(Kernel(
            name=f"aten.{name}" + (f" ({lib})" if lib else ""), kind="library" if lib else "torch",
            bytes_read=rb, bytes_written=wb, requested_read=rb,
            requested_written=wb, reads=_sum_by_label(reads), writes=_sum_by_label(writes)))


# set after the class is made, past TorchDispatchMode.__init_subclass__, which would wrap it the costly way
_Recorder.__torch_dispatch__ = _dynamo_skipped(_Recorder._dispatch)


def _sum_by_label(seen: dict) -> dict:
    """Bytes per label; two tensors of one shape and dtype (x and y of x + y) show as "2 × f32[4096]"."""
    total: dict = {}
    count: dict = {}
    for (_, n), lab in seen.items():
        total[lab] = total.get(lab, 0) + n
        count[lab] = count.get(lab, 0) + 1
    return {(f"{count[lab]} × {lab}" if count[lab] > 1 else lab): n for lab, n in total.items()}


def _on_launch(trips: Trips):
    def listen(launch: _interp.Launch):
        trips.kernels.append(Kernel(
            name=launch.name, kind="triton",
            bytes_read=launch.distinct_bytes("read"), bytes_written=launch.distinct_bytes("write"),
            requested_read=launch.requested_read, requested_written=launch.requested_written,
            reads=launch.by_argument("read"), writes=launch.by_argument("write")))
    return listen


@contextlib.contextmanager
def _shadow_gpu_launches():
    """On a GPU, run each Triton launch once more in the instrumented interpreter, on copies of its
    arguments, so that what it loads and stores can be counted; then launch it for real.

    A launch is compiled before its replay: a kernel the GPU refuses (a Python `if` on a block, say) fails as
    the GPU says, not with what the interpreter makes of code that cannot compile. Two ways to launch are seen:
    kernel[grid](...) (JITFunction.run) and a kernel compiled ahead and launched from its handle
    (compiled = kernel.warmup(..., grid=(1,)); compiled[grid](...), as Triton's fused-softmax tutorial sizes a
    persistent grid): CompiledKernel.__getitem__."""
    if INTERPRET:
        yield
        return
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    original, original_bench, original_item = JITFunction.run, Autotuner._bench, CompiledKernel.__getitem__

    def run(self, *args, grid, warmup, **kwargs):
        if not warmup and not _interp.inside_launch():
            original(self, *args, grid=grid, warmup=True, **kwargs)   # compiled (and cached) first
            # the replay's own launch is recorded by the interpreter's listeners, as on the CPU
            _interp.replay(self, args, kwargs, grid)
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    def bench(self, *args, **kwargs):
        # @triton.autotune times every config on the real arguments before the launch that counts:
        # those trial launches (and do_bench's cache flushes) are nobody's traffic, and not replayed
        with _interp.muted():
            return original_bench(self, *args, **kwargs)

    def item(self, grid):
        launch = original_item(self, grid)
        kernel = getattr(self.src, "fn", None)   # the JITFunction it was compiled from (an ASTSource's)
        if not isinstance(kernel, JITFunction):
            return launch

        def replayed(*args, **kwargs):
            if not _interp.inside_launch():
                _interp.replay(kernel, args, {}, tuple(grid))   # every argument, constexprs too, by position
            return launch(*args, **kwargs)
        return replayed

    JITFunction.run, Autotuner._bench, CompiledKernel.__getitem__ = run, bench, item
    try:
        yield
    finally:
        JITFunction.run, Autotuner._bench, CompiledKernel.__getitem__ = original, original_bench, original_item


@contextlib.contextmanager
def counting():
    """`with trips.counting() as t:` counts everything run inside the block into t."""
    trips = Trips()
    listen = _on_launch(trips)
    _interp._listeners.append(listen)
    _active.append(trips)
    try:
        with _shadow_gpu_launches(), _Recorder(trips):
            yield trips
    finally:
        _active.pop()
        _interp._listeners.remove(listen)


def count(fn, *args, **kwargs) -> Trips:
    """Run fn(*args, **kwargs) once and count its launches and HBM bytes; the return value is in .result.

    Count on a small problem: on the interpreter every access is recorded in Python. Bytes scale with
    the problem size, so compare bytes per element (`per_element`) across sizes."""
    if not callable(fn):
        raise TypeError("trips.count takes a function to run, e.g. trips.count(lambda: f(x)), "
                        f"not {type(fn).__name__}")
    with counting() as t:
        t.result = fn(*args, **kwargs)
    return t


def _counting_backend(sink):
    """An Inductor backend that reports each run of a compiled graph through sink(row), one row per
    kernel Inductor generated and one per library call it kept (a matmul through cuBLAS).

    Inductor's kernels bypass the dispatcher, so what they move is taken from Inductor's own plan:
    after it has fused the graph into kernels (its post-fusion pass), each kernel's reads and writes
    (Inductor's read_writes), in bytes, with the intermediates between kernels, evaluated for the
    shapes of each run. If that plan cannot be read, the graph is counted at its boundary instead, in
    one row that says so: its inputs read and its outputs written."""
    import torch._inductor.metrics as metrics
    from torch._inductor.compile_fx import compile_fx

    def backend(gm, example_inputs):
        before = metrics.generated_kernel_count
        plans: list = []
        with _inductor_plan_hook(plans):
            compiled = compile_fx(gm, example_inputs)
        n_kernels = metrics.generated_kernel_count - before
        plan = plans[-1] if plans and plans[-1] is not None else None
        names = [n.name.removeprefix("l_").removeprefix("g_").strip("_") or n.name
                 for n in gm.graph.nodes if n.op == "placeholder"]

        def run(*inputs):
            out = compiled(*inputs)
            rows = None
            if plan is not None:
                try:
                    rows = plan.rows(inputs, names)
                except Exception:   # an unexpected plan: count at the boundary rather than fail
                    rows = None
            for row in rows if rows is not None else [_boundary_row(inputs, out, n_kernels)]:
                sink(row)
            return out
        return run
    return backend


def _boundary_row(inputs, out, n_kernels) -> Kernel:
    reads = _by_label({x.data_ptr(): x for x in _tensors(list(inputs))}.values())
    writes = _by_label({x.data_ptr(): x for x in _tensors(out)}.values())
    name = "compiled graph" + (f" ({n_kernels} kernels: traffic between them not counted)"
                               if n_kernels > 1 else "")
    rb, wb = sum(reads.values()), sum(writes.values())
    return Kernel(name=name, kind="inductor", bytes_read=rb, bytes_written=wb, requested_read=rb,
                  requested_written=wb, reads=reads, writes=writes, launches=max(n_kernels, 1))


# A library call Inductor or eager PyTorch hands to a vendor library, and what to call it in a row.
_LIBRARY = {"mm": "matmul", "addmm": "matmul", "bmm": "matmul", "baddbmm": "matmul", "addbmm": "matmul",
            "mv": "matmul", "addmv": "matmul", "dot": "matmul", "_addmm_activation": "matmul",
            "_int_mm": "matmul", "_scaled_mm": "matmul", "convolution": "convolution"}


def _library_name(op: str, device_type: str) -> str | None:
    what = _LIBRARY.get(op)
    if what is None:
        return None
    lib = {"cuda": {"matmul": "cuBLAS", "convolution": "cuDNN"}}.get(device_type, {}).get(what, "library")
    return f"{lib} {what}"


@contextlib.contextmanager
def _inductor_plan_hook(plans: list):
    """While compiling, record Inductor's fused schedule of each graph into plans (None if unreadable).
    Inductor's caches are turned off here: a graph loaded from a cache is never scheduled."""
    import torch._inductor.config as iconfig

    def post_fusion(nodes):
        try:
            plans.append(_Plan(nodes))
        except Exception:
            plans.append(None)
        return nodes

    patches = {"_post_fusion_custom_pass": post_fusion, "fx_graph_cache": False}
    with contextlib.ExitStack() as stack:
        stack.enter_context(iconfig.patch({k: v for k, v in patches.items() if hasattr(iconfig, k)}))
        try:
            import torch._functorch.config as fconfig
            if hasattr(fconfig, "enable_autograd_cache"):
                stack.enter_context(fconfig.patch(enable_autograd_cache=False))
        except ImportError:
            pass
        yield


class _Plan:
    """What Inductor's scheduler decided for one graph: its kernels and library calls in launch order,
    each with the bytes it reads and writes per buffer, as sizes that may depend on the input shapes."""

    def __init__(self, nodes):
        from torch._inductor import ir
        from torch._inductor.dependencies import StarDep, WeakDep
        from torch._inductor.scheduler import ExternKernelSchedulerNode, NopKernelSchedulerNode
        from torch._inductor.virtualized import V

        graph = V.graph
        self.inputs = list(graph.graph_input_names)
        # an input's shape, as expressions, to find the value of each shape symbol at run time
        self.input_sizes = [_sizes_of(graph.graph_inputs[n]) for n in self.inputs]
        self.buffers: dict = {}     # name -> (dtype, shape expressions)
        self.steps: list = []       # (name, kind, {buffer: numel expr}, {buffer: numel expr})
        outputs = set(graph.get_output_names())

        made_by: dict = {}          # buffer -> the step of the library call that wrote it

        def shape(name):
            if name not in self.buffers:
                self.buffers[name] = (graph.get_dtype(name), _sizes_of(graph.graph_inputs.get(name) or
                                                                          graph.get_buffer(name)))
            return name

        def target(name):
            """A buffer that only mutates another (an input updated in place) is that other's bytes."""
            try:
                mutated = graph.get_buffer(name).get_mutation_names()
            except Exception:
                mutated = []
            return mutated[0] if len(mutated) == 1 else name

        def numel(dep, name):
            whole = graph.get_numel(name)
            if isinstance(dep, StarDep) or dep.is_indirect():
                return whole
            return _smaller(dep.get_numel(), whole)

        for node in nodes:
            if isinstance(node, NopKernelSchedulerNode):
                continue
            if isinstance(node, ExternKernelSchedulerNode) and isinstance(node.node, ir.MultiOutput):
                # one output of a library call that returns several: written by that call
                parent = next(iter(d.name for d in node.read_writes.reads), None)
                if parent in made_by:
                    made_by[parent][3][shape(node.node.get_name())] = graph.get_numel(node.node.get_name())
                continue
            inside = {n.get_name() for n in node.get_nodes()}
            written = {d.name for d in node.read_writes.writes if not isinstance(d, WeakDep)}
            reads, writes = {}, {}
            for dep in node.read_writes.reads:
                if isinstance(dep, WeakDep) or dep.name in written or not _is_tensor(graph, dep.name):
                    continue
                reads[shape(dep.name)] = _larger(reads.get(dep.name), numel(dep, dep.name))
            for dep in node.read_writes.writes:
                if isinstance(dep, WeakDep) or not _is_tensor(graph, dep.name):
                    continue
                users = node.scheduler.name_to_buf[dep.name].users if dep.name in node.scheduler.name_to_buf else ()
                kept = (dep.name in outputs or dep.name in graph.graph_inputs or not users or
                        any(getattr(u.node, "get_name", lambda: None)() not in inside for u in users))
                if kept:
                    buf = target(dep.name)
                    writes[shape(buf)] = _larger(writes.get(buf), numel(dep, buf))
            device = node.get_device()
            device_type = device.type if device is not None else "cpu"
            if isinstance(node, ExternKernelSchedulerNode):
                op = _extern_op(node.node)
                lib = _library_name(op, device_type)
                name = f"extern {op}" + (f" ({lib})" if lib else "")
                self.steps.append([name, "library" if lib else "extern", reads, writes, None])
                made_by.update((d.name, self.steps[-1]) for d in node.read_writes.writes)
            else:
                group = self.steps[-1] if self.steps else None
                if device_type == "cpu" and not node.is_template() and group is not None \
                        and group[1] == "inductor" and group[4] is not None:
                    # on a CPU Inductor writes consecutive kernels into one C++ function, one call:
                    # what it wrote before, it reads back inside that call
                    group[4].extend(node.get_nodes())
                    for buf, count in reads.items():
                        if buf not in group[3]:
                            group[2][buf] = _larger(group[2].get(buf), count)
                    for buf, count in writes.items():
                        group[3][buf] = _larger(group[3].get(buf), count)
                    continue
                self.steps.append([None, "inductor", reads, writes,
                                   list(node.get_nodes()) if device_type == "cpu" else None])
                self.steps[-1][0] = _kernel_name(node.get_nodes(), device_type)
        for step in self.steps:
            if step[1] == "inductor" and step[4] is not None:
                step[0] = _kernel_name(step[4], "cpu")
            del step[4:]

    def rows(self, inputs, labels) -> list:
        import sympy
        tensors = list(inputs)
        values: dict = {}
        if len(tensors) != len(self.inputs):
            tensors = []     # inputs Inductor merged or added: only shapes known when compiling can be read
        for sizes, value in zip(self.input_sizes, tensors):
            if isinstance(value, torch.Tensor):
                for expr, n in zip(sizes, value.shape):
                    if isinstance(expr, sympy.Symbol):
                        values[expr] = n
            elif isinstance(sizes, sympy.Symbol) and isinstance(value, int):
                values[sizes] = value
        names = dict(zip(self.inputs, labels)) if len(labels) == len(self.inputs) else {}

        def n(expr) -> int:
            return int(sympy.sympify(expr).subs(values))

        def label(buf):
            dtype, sizes = self.buffers[buf]
            shape = [n(s) for s in sizes] if isinstance(sizes, (list, tuple)) else []
            fake = torch.empty(0, dtype=dtype)
            return f"{names.get(buf, buf)} {_label(fake).split('[')[0]}{shape}"

        def sized(deps):
            out = {}
            for buf, count in deps.items():
                size = n(count) * self.buffers[buf][0].itemsize
                out[label(buf)] = out.get(label(buf), 0) + size
            return out

        rows = []
        for name, kind, reads, writes in self.steps:
            r, w = sized(reads), sized(writes)
            rb, wb = sum(r.values()), sum(w.values())
            rows.append(Kernel(name=name, kind=kind, bytes_read=rb, bytes_written=wb, requested_read=rb,
                               requested_written=wb, reads=r, writes=w))
        return rows


def _sizes_of(node):
    import sympy
    if isinstance(node, sympy.Expr):
        return node
    try:
        return list(node.get_size())
    except Exception:
        return []


def _is_tensor(graph, name) -> bool:
    import sympy
    value = graph.graph_inputs.get(name)
    if value is not None:
        return not isinstance(value, sympy.Expr) and hasattr(value, "get_size")
    try:
        graph.get_dtype(name)
        return graph.get_buffer(name) is not None
    except Exception:
        return False


def _smaller(a, b):
    import sympy
    try:
        return sympy.Min(a, b) if (a - b).free_symbols else (a if a <= b else b)
    except TypeError:
        return sympy.Min(a, b)


def _larger(a, b):
    import sympy
    if a is None:
        return b
    try:
        return sympy.Max(a, b) if (a - b).free_symbols else (a if a >= b else b)
    except TypeError:
        return sympy.Max(a, b)


def _extern_op(node) -> str:
    """mm for extern_kernels.mm or aten.mm.default: the operator's short name."""
    op = getattr(node, "op_overload", None)
    if op is not None and hasattr(op, "_overloadpacket"):
        return op._overloadpacket.__name__
    name = getattr(node, "python_kernel_name", None) or type(node).__name__
    return str(name).split(".")[-2 if str(name).endswith(("default", "out")) else -1]


def _kernel_name(nodes, device_type: str) -> str:
    """The descriptive name Inductor gives the kernel (triton_fused_add_gelu), less its category
    (poi, red, per) and index, which it picks later."""
    try:
        from torch._inductor.utils import get_fused_kernel_name
        fused = get_fused_kernel_name(nodes, "original_aten")
    except Exception:
        fused = "_".join(n.get_name() for n in nodes)
    return f"{'triton' if device_type == 'cuda' else 'cpp'}_{fused}"


def count_compiled(fn, *args, **compile_options) -> Trips:
    """Compile fn with torch.compile (Inductor), run it, and count what the compiled graph launches."""
    t = Trips()
    compiled = torch.compile(fn, backend=_counting_backend(t.kernels.append), **compile_options)
    compiled(*args)            # the first call compiles
    t.kernels.clear()
    t.result = compiled(*args)
    return t


def compile(fn, **options):
    """torch.compile(fn, **options), but visible to trips.count (and so to bench.compare's model).

    Under an active count, torch.compile would see the counting mode and fall back to eager
    operators, so the count would describe code that never runs on the GPU. Inside a count this
    runs a twin compiled for counting (same kernels, without options like CUDA graphs) instead."""
    twin = None

    def counting_twin():
        nonlocal twin
        if twin is None:
            twin = torch.compile(fn, backend=_counting_backend(lambda row: _active and _active[-1].kernels.append(row)))
        return twin

    # Without a GPU the twin also serves outside a count: Inductor makes the same C++ kernels for both, and
    # compiling them once instead of twice halves what a lesson's compiled row costs on a CPU (seconds each).
    real = torch.compile(fn, **options) if DEVICE == "cuda" else None

    def call(*args, **kwargs):
        if not _active:
            return (real or counting_twin())(*args, **kwargs)
        counting_twin()
        from torch.utils._python_dispatch import _disable_current_modes
        # the twin reports its own row; what Inductor runs while compiling or launching is not counted again
        with _disable_current_modes(), _interp.muted():
            return twin(*args, **kwargs)

    call.__name__ = f"compiled {getattr(fn, '__name__', 'fn')}"
    return call


# The GPU's own count of the same bytes, through Nsight Compute (trips.hardware, as the lessons call it): in a
# module of its own, below this one, re-exported here. It imports nothing of trips (tests/test_trips.py).
from .hardware_bytes import Hardware, hardware, prepare_hardware  # noqa: E402,F401
