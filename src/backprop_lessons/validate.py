"""The checks of inputs that every engine and helper calls at its boundary.

Each takes the operation's name (`op`) and the argument's (`name`), returns
the value (converted where that is the point: an int, a float array) and
raises a TypeError or ValueError whose message names both and says what
was expected.  Called where a chapter or a user calls in (constructors,
`gpt_forward`, the exercises' checks), they keep the formulas inside free
of guard clutter (tests/conventions/test_guard_ratio.py).

    positive_int(op, name, value)   the size check of every constructor
    real_array(op, name, x)         numbers or an ndarray as a float array
    class_labels(op, name, y, K)    integer labels (B,) in [0, K)
    token_ids(op, name, ids, V)     integer token ids in [0, V), any shape
    real_number(op, name, x)        a float, never None, a bool or a string
    instance_of(op, name, x, cls)   x itself, or a TypeError naming `cls`
    non_negative(op, name, value)   a number >= 0 (noise levels)
    one_of, entries_of, length_is, rows_of, in_range
                                    a choice, a list of one kind, a count,
                                    rows of a width, a closed range
    flag(op, name, value)           True or False (a bool or NumPy's bool)
    integer_array(op, name, x, what)  integers (whole floats too if asked)
    below(op, name, arr, n)         every entry in [0, n) (labels, token ids)
    axes(op, axis, ndim)            None, an int or ints as sorted axes
    one_axis(op, axis, shape)       the one non-empty axis of a softmax
    int_args(op, name, args)        f(2, 3) or f((2, 3)) as a tuple of ints
    permutation(op, axes, shape)    a transpose's axes, non-negative
    same_shape(op, name, arr, shape, whose)   arr.shape == shape
    broadcast_shape(what, a, b)     the broadcast shape of a and b
    broadcast_source(op, name, shape, target)  shape broadcasts to target
    matmul_shapes(op, a, b)         the shape of a @ b for stacks of matrices
    gradient_shape(op, g, shape)    a gradient has its input's shape
    real_operand, real_power_domain, finite_quotient_domain, positive_number
                                    the scalar engines' operands and domains
    real_numbers(op, xs)            a non-empty sequence of numbers as floats
    function(op, name, f)           f if it can be called
    counts_match(op, a, what_a, b, what_b)  as many of each
    ready(op, value, todo)          value, or a RuntimeError: do `todo` first
    named_arrays(op, arrays, shapes)  a dict of exactly these arrays, shapes
                                    and one float dtype (a model's parameters)
    token_batch(op, name, ids, max_T)  token ids (B, T), B, T >= 1, T <= max_T
    numpy_generator, python_random  the random generators engines draw from
    number_or(op, name, x, kinds)   a number (not a bool) or one of `kinds`
    at_least(op, name, x, lo)       x >= lo
    float_dtype(op, name, dtype)    a NumPy float dtype
    nonempty_text, nonempty_sequence  a string, a list with something in it
    probability_rows(op, name, Y, B, K)  (B, K) rows of probabilities
    gradient_for(op, name, g, shape)  a parameter's gradient has its shape
    token_stream(op, name, data, T)  a 1-d token array longer than T
    tile_size, qkv_heads, output_gradient, classifier_inputs
                                    the tiled GPT layers' arguments
                                    (FlashAttention, the fused classifier)
    batch_of_channels(op, inp, weight, bias)  batch norm's (B, C) input,
                                    B >= 2, and its (C,) weight and bias
"""

from __future__ import annotations

import math
import numbers
import random
from collections.abc import Sequence

import numpy as np

__all__ = [
    "real_numbers",
    "function",
    "counts_match",
    "ready",
    "named_arrays",
    "token_batch",
    "positive_int",
    "instance_of",
    "real_number",
    "real_array",
    "class_labels",
    "token_ids",
    "non_negative",
    "one_of",
    "entries_of",
    "length_is",
    "rows_of",
    "in_range",
    "flag",
    "integer_array",
    "below",
    "axes",
    "one_axis",
    "int_args",
    "permutation",
    "same_shape",
    "broadcast_shape",
    "broadcast_source",
    "matmul_shapes",
    "gradient_shape",
    "real_operand",
    "real_power_domain",
    "finite_quotient_domain",
    "positive_number",
    "numpy_generator",
    "python_random",
    "number_or",
    "at_least",
    "float_dtype",
    "nonempty_text",
    "nonempty_sequence",
    "probability_rows",
    "gradient_for",
    "token_stream",
    "tile_size",
    "qkv_heads",
    "output_gradient",
    "classifier_inputs",
]


def positive_int(op: str, name: str, value, minimum: int = 1) -> int:
    """`value` as an int if it is a whole number >= `minimum`, else a ValueError.

    Accepts Python and NumPy integers (`np.int64(2)` is a size, as when it
    comes from an array's shape); rejects bools (Python counts True as an
    int, but `True` layers is a bug) and floats, even whole ones.
    """
    # numbers.Integral holds int and NumPy's integer types, and also bool
    integral = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if integral and value >= minimum:
        return int(value)
    what = "a positive int" if minimum == 1 else f"an int of at least {minimum}"
    raise ValueError(f"{op}: {name} must be {what}, got {value!r}")


def instance_of(op: str, name: str, value, cls, hint: str = ""):
    """`value` if it is a `cls` (a class or a tuple of classes), else a
    TypeError naming `op`, `name` and the expected type (plus `hint`)."""
    if isinstance(value, cls):
        return value
    classes = cls if isinstance(cls, tuple) else (cls,)
    expected = " or ".join(c.__name__ for c in classes)
    article = "an" if expected[0].lower() in "aeiou" else "a"
    raise TypeError(
        f"{op}: {name} must be {article} {expected}{hint}, "
        f"got {type(value).__name__} {value!r:.40}"
    )


def numpy_generator(op: str, name: str, rng) -> np.random.Generator:
    """`rng` if it is a numpy.random.Generator, else a TypeError saying how
    to make one."""
    if isinstance(rng, np.random.Generator):
        return rng
    raise TypeError(
        f"{op}: {name} must be a numpy.random.Generator "
        f"(np.random.default_rng(seed)), got {type(rng).__name__}"
    )


def python_random(op: str, name: str, rng) -> random.Random:
    """`rng` if it is a random.Random, a fresh random.Random(0) if it is
    None, else a TypeError."""
    if rng is None:
        return random.Random(0)
    if isinstance(rng, random.Random):
        return rng
    raise TypeError(
        f"{op}: {name} must be a random.Random (e.g. random.Random(42)) or "
        f"None, got {type(rng).__name__} {rng!r}"
    )


def real_number(op: str, name: str, value, finite: bool = True) -> float:
    """`value` as a float if it is a real number (finite unless `finite` is
    False), else a TypeError/ValueError naming `op` and `name`."""
    if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)):
        raise TypeError(
            f"{op}: {name} must be a real number, "
            f"got {type(value).__name__} {value!r}"
        )
    if finite and not np.isfinite(value):
        raise ValueError(f"{op}: {name} must be finite, got {value!r}")
    return float(value)


def real_array(
    op: str, name: str, x, dtype=None, bool_arrays: bool = False
) -> np.ndarray:
    """`x` (a number, nested lists of numbers, an ndarray) as an ndarray of
    real numbers (of `dtype` if given), or a TypeError naming `op`, `name`.

    NumPy alone would turn None into nan, keep strings as strings, and drop
    the imaginary part of complex numbers with only a warning.  Booleans are
    refused unless `bool_arrays` (then a bool array is accepted, as masks
    are, but a lone True or False still is not).
    """
    try:
        arr = np.asarray(x)
    except ValueError as e:  # ragged nested lists
        raise ValueError(
            f"{op}: {name} must be a rectangular array of real numbers ({e})"
        ) from None
    kinds = "fiub" if bool_arrays else "fiu"
    if arr.dtype.kind not in kinds or (arr.dtype.kind == "b" and arr.ndim == 0):
        raise TypeError(
            f"{op}: {name} must be real numbers (a number, nested lists or an "
            f"ndarray), got {type(x).__name__} of dtype {arr.dtype}"
        )
    return arr if dtype is None else arr.astype(dtype, copy=False)


def class_labels(op: str, name: str, y, K: int | None = None, n=None):
    """`y` as integer class labels (B,) in [0, K), or a clear error.

    `n` is the number of rows they label (checked if given).  Whole floats
    are refused too: a label array of floats is usually predictions or
    one-hot rows passed by mistake, and (B, 1) against (B,) would broadcast.
    """
    y = real_array(op, name, y)
    if y.ndim != 1 or y.dtype.kind not in "iu":
        raise ValueError(
            f"{op}: {name} must be a 1-D array of integer classes, "
            f"got shape {y.shape} and dtype {y.dtype}"
        )
    if n is not None and y.shape[0] != n:
        raise ValueError(f"{op}: {y.shape[0]} {name} for {n} rows")
    return y if K is None else below(op, name, y, K)


def token_ids(op: str, name: str, ids, vocab_size=None, min_size: int = 0):
    """`ids` (a list, nested lists or an integer ndarray) as an int64 array of
    token ids in [0, vocab_size), with at least `min_size` entries.

    Refuses floats (1.7 is no token; NumPy would truncate it) and negative ids
    (Python would count -1 from the end and quietly read the last token).
    """
    arr = integer_array(op, name, ids, "token ids").astype(np.int64)
    if arr.size < min_size:
        raise ValueError(
            f"{op}: {name} must hold at least {min_size} token(s), got {arr.size}"
        )
    return below(op, name, arr, vocab_size or math.inf)


def non_negative(op: str, name: str, value) -> float:
    """`value` as a float if it is a real number >= 0 (not a bool), else a
    ValueError naming `op` and `name`."""
    real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if real and value >= 0:
        return float(value)
    raise ValueError(f"{op}: {name} must be a number >= 0, got {value!r}")


def one_of(op: str, name: str, value, choices: tuple):
    """`value` if it is one of `choices`, else a ValueError listing them."""
    if value in choices:
        return value
    raise ValueError(f"{op}: {name} must be one of {choices}, got {value!r}")


def entries_of(op: str, name: str, items, cls, what: str) -> list:
    """`items` (a sequence, or one entry) as a list whose entries are all
    `cls` (bools refused), else a TypeError naming the first bad entry."""
    if isinstance(items, cls) and not isinstance(items, bool):
        return [items]
    if isinstance(items, (str, bytes)) or not hasattr(items, "__len__"):
        raise TypeError(
            f"{op}: {name}s must be a list of {what}s, got {type(items).__name__}"
        )
    for x in items:
        if not isinstance(x, cls) or isinstance(x, bool):
            raise TypeError(
                f"{op}: every {name} must be {what}, "
                f"got {type(x).__name__} {x!r:.40}"
            )
    return list(items)


def length_is(op: str, name: str, items, n: int):
    """`items` if it has `n` entries, else a ValueError with both counts."""
    if len(items) == n:
        return items
    raise ValueError(f"{op}: expected {n} {name}, got {len(items)}")


def rows_of(op: str, name: str, arr: np.ndarray, width: int) -> np.ndarray:
    """`arr` if it is 2-D with `width` columns (B, width), else a ValueError."""
    if arr.ndim == 2 and arr.shape[1] == width:
        return arr
    raise ValueError(
        f"{op}: {name} must have shape (B, {width}), got {arr.shape}"
    )


def in_range(op: str, name: str, value, lo, hi):
    """`value` if lo <= value <= hi, else a ValueError naming the range."""
    if lo <= value <= hi:
        return value
    raise ValueError(f"{op}: {name} must lie in [{lo}, {hi}], got {value}")


def flag(op: str, name: str, value) -> bool:
    """`value` as a bool if it is True or False (NumPy's bools too), else a
    TypeError: a string such as "no" would otherwise count as True."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(
        f"{op}: {name} must be True or False, "
        f"got {type(value).__name__} {value!r}"
    )


def integer_array(
    op: str, name: str, x, what: str = "numbers", whole_floats: bool = False
) -> np.ndarray:
    """`x` as an array of integers (`what` names them in the error), or a
    TypeError.  With `whole_floats`, floats that are whole numbers (a Tensor's
    data holds floats) become int64; 1.7 never does."""
    arr = real_array(op, name, x)
    if whole_floats and arr.dtype.kind == "f" and np.all(arr == np.round(arr)):
        arr = arr.astype(np.int64)
    if arr.dtype.kind in "iu" or not arr.size:
        return arr
    raise TypeError(f"{op}: {name} must be integer {what}, got dtype {arr.dtype}")


def below(op: str, name: str, arr: np.ndarray, n) -> np.ndarray:
    """`arr` if every entry lies in [0, n) (class labels, token ids), else a
    ValueError with the range found.  Python would count -1 from the end."""
    if not arr.size or (arr.min() >= 0 and arr.max() < n):
        return arr
    raise ValueError(
        f"{op}: {name} must lie in [0, {n}), "
        f"got values from {arr.min()} to {arr.max()}"
    )


def axes(op: str, axis, ndim: int) -> tuple:
    """`axis` (None for all, an int or a tuple of ints, negative ones counted
    from the end) as a sorted tuple of distinct axes of an `ndim`-dimensional
    array, or a TypeError/ValueError naming `op`."""
    if axis is None:
        return tuple(range(ndim))
    given = (axis,) if isinstance(axis, numbers.Integral) else axis
    if not isinstance(given, (tuple, list)) or not all(
        isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in given
    ):
        raise TypeError(
            f"{op}: axis must be None, an int or a tuple of ints, got {axis!r}"
        )
    for a in given:
        if not -ndim <= a < ndim:
            raise ValueError(
                f"{op}: axis {a} is out of range for a tensor "
                f"with {ndim} dimensions"
            )
    out = sorted(a % ndim for a in given)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {axis}")
    return tuple(out)


def one_axis(op: str, axis, shape: tuple) -> int:
    """`axis` as the one non-negative axis (of an array of `shape`) that a
    softmax works along; it must be a single int and not empty."""
    if not isinstance(axis, numbers.Integral):
        raise TypeError(f"{op}: axis must be one int, got {axis!r}")
    (ax,) = axes(op, axis, len(shape))
    if shape[ax] == 0:
        raise ValueError(f"{op}: axis {axis} of shape {shape} is empty")
    return ax


def int_args(op: str, name: str, args: tuple) -> tuple:
    """Ints passed as f(2, 3) or as f((2, 3)) (NumPy's reshape and transpose
    take both) as one tuple, or a TypeError naming `op` and `name`."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    if all(
        isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in args
    ):
        return args
    raise TypeError(f"{op}: {name} must be ints, got {args!r}")


def permutation(op: str, axes: tuple, shape: tuple) -> tuple:
    """`axes` (negative ones counted from the end) as a permutation of the
    axes of an array of `shape`, or a ValueError."""
    n = len(shape)
    if sorted(a % n if -n <= a < n else a for a in axes) != list(range(n)):
        raise ValueError(
            f"{op}: {axes} is not a permutation of the axes of a tensor "
            f"of shape {shape}"
        )
    return tuple(a % n for a in axes)


def same_shape(op: str, name: str, arr, shape: tuple, whose: str):
    """`arr` if it has `shape` (the shape of `whose`), else a ValueError
    naming both shapes."""
    if arr.shape == shape:
        return arr
    raise ValueError(
        f"{op}: {name} has shape {arr.shape} but {whose} has shape {shape}; "
        "they must be equal"
    )


def broadcast_shape(what: str, a: tuple, b: tuple) -> tuple:
    """The broadcast shape of `a` and `b`, or a ValueError that starts with
    `what` (the operation and both shapes, e.g. "add: (3, 4) + (5,)")."""
    try:
        return np.broadcast_shapes(a, b)
    except ValueError:
        raise ValueError(
            f"{what}: shapes do not broadcast (aligned from the right, "
            "each pair of sizes must be equal or contain a 1)"
        ) from None


def broadcast_source(op: str, name: str, shape: tuple, target: tuple) -> tuple:
    """`shape` if broadcasting an array of that shape can give `target` (new
    leading axes, size-1 axes stretched), else a ValueError."""
    extra = len(target) - len(shape)
    if extra >= 0 and all(n in (1, m) for n, m in zip(shape, target[extra:])):
        return shape
    raise ValueError(
        f"{op}: {name} of shape {target} cannot come from broadcasting "
        f"shape {shape}"
    )


def matmul_shapes(op: str, a: tuple, b: tuple) -> tuple:
    """The shape of A @ B for A (..., m, n) and B (..., n, k): (..., m, k),
    the stacks broadcast; or a ValueError naming both shapes."""
    what = f"{op}: {a} @ {b}"
    if len(a) < 2 or len(b) < 2:
        raise ValueError(
            f"{what}: both operands need at least 2 dimensions "
            "(use reshape to make a row or a column)"
        )
    if a[-1] != b[-2]:
        raise ValueError(f"{what}: inner dimensions {a[-1]} and {b[-2]} differ")
    batch = f"{what}: batch dimensions {a[:-2]} and {b[:-2]}"
    return (*broadcast_shape(batch, a[:-2], b[:-2]), a[-2], b[-1])


def gradient_shape(op: str, g, shape: tuple):
    """`g` if it has `shape`, the shape of the input it is the gradient of
    (the shape-check rule of every backward), else a RuntimeError naming the
    backward of `op`: a rule that breaks it has a bug."""
    if g.shape == shape:
        return g
    raise RuntimeError(
        f"backward of {op}: a gradient of shape {g.shape} for an input of "
        f"shape {shape}; a gradient must have its input's shape"
    )


def real_operand(x, op: str, kind: str = "Value") -> float:
    """A Python or NumPy real number as a float, or a TypeError naming `op`.

    `kind` names the engine's own number type in the message ("Value" in
    `scalar`, "Dual" in `forward_mode`).
    """
    if isinstance(x, numbers.Real) and not isinstance(x, bool):
        return float(x)
    raise TypeError(
        f"{kind} {op}: expected a {kind} or a real number, "
        f"got {type(x).__name__} {x!r}"
    )


def real_power_domain(op: str, x: float, k: float) -> None:
    """A clear error where x ** k is no real number: 0 ** negative, or a
    negative base with a fractional exponent."""
    if x == 0.0 and k < 0:
        raise ZeroDivisionError(
            f"{op}: 0.0 ** {k!r} is undefined (division by zero)"
        )
    if x < 0 and not k.is_integer():
        raise ValueError(
            f"{op}: {x!r} ** {k!r} is not a real number "
            "(a negative base needs an integer exponent)"
        )


def finite_quotient_domain(op: str, a: float, b: float) -> None:
    """A clear error where a / b is no finite float: b = 0, or 1 / b beyond
    the largest float (b subnormal)."""
    if b == 0.0:
        raise ZeroDivisionError(f"{op}: division of {a!r} by 0.0")
    if math.isinf(1.0 / b):
        raise OverflowError(
            f"{op}: {a!r} / {b!r} overflows a float "
            "(1 / the divisor is larger than the largest float)"
        )


def positive_number(op: str, what: str, x: float) -> float:
    """`x` if it is > 0 (NaN passes, to propagate), else a ValueError."""
    if x <= 0.0:
        raise ValueError(
            f"{op}: {what} is defined for positive numbers, got {x!r}"
        )
    return x


def real_numbers(op: str, xs) -> list[float]:
    """A non-empty list of floats from a sequence of real numbers (the
    inputs of a function of several numbers), or a clear error."""
    if isinstance(xs, (str, bytes)) or not isinstance(xs, Sequence):
        raise TypeError(
            f"{op}: expected a sequence of real numbers, got {type(xs).__name__}"
        )
    if len(xs) == 0:
        raise ValueError(f"{op}: expected at least one input, got an empty list")
    out = []
    for i, x in enumerate(xs):
        if not isinstance(x, numbers.Real) or isinstance(x, bool):
            raise TypeError(
                f"{op}: input {i} must be a real number, "
                f"got {type(x).__name__} {x!r}"
            )
        out.append(float(x))
    return out


def function(op: str, name: str, f):
    """`f` if it can be called, else a TypeError."""
    if callable(f):
        return f
    raise TypeError(f"{op}: {name} must be a function, got {type(f).__name__}")


def counts_match(op: str, a, what_a: str, b, what_b: str, hint: str = ""):
    """Nothing if `a` and `b` have as many entries, else a ValueError with
    both counts: "jvp: 3 primals but 2 tangents"."""
    if len(a) != len(b):
        raise ValueError(f"{op}: {len(a)} {what_a} but {len(b)} {what_b}{hint}")


def ready(op: str, value, todo: str):
    """`value`, unless it is None: then a RuntimeError saying what to do first
    ("call forward(X) first")."""
    if value is None:
        raise RuntimeError(f"{op}: {todo}")
    return value


def named_arrays(op: str, arrays, shapes: dict) -> dict:
    """`arrays` if it is a dict of exactly the names of `shapes`, each an
    ndarray of its shape, all of one float dtype (a model's parameters)."""
    if not isinstance(arrays, dict) or set(arrays) != set(shapes):
        got = (
            sorted(arrays) if isinstance(arrays, dict) else type(arrays).__name__
        )
        raise ValueError(f"{op}: expected the keys {list(shapes)}, got {got}")
    for name, shape in shapes.items():
        a = arrays[name]
        if not isinstance(a, np.ndarray) or a.shape != shape:
            got = a.shape if isinstance(a, np.ndarray) else type(a).__name__
            raise ValueError(
                f"{op}: {name} must be an array of shape {shape}, got {got}"
            )
    dtypes = {a.dtype for a in arrays.values()}
    if len(dtypes) != 1 or not np.issubdtype(next(iter(dtypes)), np.floating):
        raise ValueError(
            f"{op}: all parameters must share one float dtype, got {dtypes}"
        )
    return arrays


def token_batch(op: str, name: str, ids, max_T: int, shape=None) -> np.ndarray:
    """Token ids of shape (B, T), B and T at least 1, T at most `max_T` (and
    `shape` if given: targets have the shape of the inputs)."""
    a = np.asarray(ids)
    if shape is not None and a.shape != shape:
        raise ValueError(
            f"{op}: {name} must have the shape of idx {shape}, got {a.shape}"
        )
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(
            f"{op}: {name} must have shape (B, T) with B, T >= 1, got {a.shape}"
        )
    if a.shape[1] > max_T:
        raise ValueError(
            f"{op}: sequence length T={a.shape[1]} is longer than "
            f"block_size={max_T}"
        )
    return a


def number_or(op: str, name: str, value, kinds: tuple = (), expected="number"):
    """`value` if it is a real number (not a bool) or one of `kinds` (an
    engine's own number types), else a TypeError: "{op}: {name} must be a
    {expected}"."""
    if isinstance(value, kinds) or (
        isinstance(value, numbers.Real) and not isinstance(value, bool)
    ):
        return value
    raise TypeError(
        f"{op}: {name} must be a {expected}, got {type(value).__name__} "
        f"{value!r:.40}"
    )


def at_least(op: str, name: str, value, lo):
    """`value` if value >= lo, else a ValueError: "{op}: {name} must be >=
    {lo}, got {value}"."""
    if value >= lo:
        return value
    raise ValueError(f"{op}: {name} must be >= {lo}, got {value}")


def float_dtype(op: str, name: str, dtype) -> np.dtype:
    """`dtype` as a NumPy dtype if it is a float type, else a ValueError."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return dtype
    raise ValueError(f"{op}: {name} must be a float type, got {dtype}")


def nonempty_text(op: str, name: str, value) -> str:
    """`value` if it is a string of at least one character."""
    if isinstance(value, str) and value:
        return value
    raise ValueError(f"{op}: the {name} must hold at least one character")


def nonempty_sequence(op: str, name: str, value, what: str):
    """`value` if it is a sequence (not a string) with at least one entry;
    `what` names an entry ("layer size")."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{op}: {name} must be a list of {what}s, got {value!r}")
    if len(value) == 0:
        raise ValueError(f"{op}: {name} must list at least one {what}, got []")
    return value


def probability_rows(op: str, name: str, Y: np.ndarray, B: int, K: int):
    """`Y` if it is (B, K) rows of probabilities (one-hot rows, or soft
    targets), else a ValueError; integer labels (B,) are the other form."""
    if Y.shape != (B, K):
        raise ValueError(
            f"{op}: {name} must be integer labels ({B},) or one-hot rows "
            f"({B}, {K}), got shape {Y.shape}"
        )
    if np.any(Y < 0) or not np.allclose(Y.sum(axis=1), 1.0):
        raise ValueError(
            f"{op}: each row of {name} must be a probability distribution "
            "(one-hot: a single 1, zeros elsewhere)"
        )
    return Y


def gradient_for(op: str, name: str, g, shape: tuple):
    """`g` if it has `shape`, the shape of the parameter `name` it updates,
    else a ValueError naming both."""
    if g.shape == shape:
        return g
    raise ValueError(
        f"{op}: gradient {name} has shape {g.shape}, the parameter {shape}"
    )


def token_stream(op: str, name: str, data, block_size: int) -> np.ndarray:
    """`data` as a 1-d array of token ids longer than `block_size` (a corpus
    to cut windows of block_size + 1 tokens from)."""
    data = token_ids(op, name, data)
    if data.ndim == 1 and len(data) >= block_size + 1:
        return data
    raise ValueError(
        f"{op}: {name} must be a 1-d token array longer than "
        f"block_size={block_size}, got shape {data.shape}"
    )


# ---- the tiled GPT layers' arguments (gpt.layers) ------------------------------


def tile_size(op: str, name: str, value) -> int:
    """A positive integer tile or chunk size (or number of heads), as an
    int: a TypeError for a non-integer, a ValueError below 1."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(
            f"{op}: {name} must be a positive integer, got {type(value).__name__}"
        )
    if value < 1:
        raise ValueError(f"{op}: {name} must be a positive integer, got {value}")
    return int(value)


def qkv_heads(op: str, inp, n_head) -> int:
    """hs, the head size, for attention's input inp (B, T, 3C) with C
    divisible by n_head; else a clear error."""
    inp = np.asarray(inp)
    if inp.ndim != 3:
        raise ValueError(f"{op}: inp must have shape (B, T, 3C), got {inp.shape}")
    C3 = inp.shape[-1]
    n_head = tile_size(op, "n_head", n_head)
    if C3 % 3 or (C3 // 3) % n_head:
        raise ValueError(
            f"{op}: the last axis {C3} must be 3*C with C divisible by "
            f"n_head={n_head}"
        )
    return C3 // 3 // n_head


def output_gradient(op: str, dout, shape: tuple):
    """`dout` if it has the output's `shape`, else a ValueError."""
    if dout.shape == shape:
        return dout
    raise ValueError(
        f"{op}: dout must have the shape of the output {shape}, got {dout.shape}"
    )


def classifier_inputs(op: str, inp, wte, targets, chunk) -> tuple:
    """(chunk, targets) for the fused classifier: inp (B, T, C), wte (V, C)
    with the same C, integer targets (B, T) in [0, V), a positive chunk."""
    inp, wte, targets = np.asarray(inp), np.asarray(wte), np.asarray(targets)
    if inp.ndim != 3 or wte.ndim != 2 or inp.shape[-1] != wte.shape[-1]:
        raise ValueError(
            f"{op}: inp must be (B, T, C) and wte (V, C) with the same C, "
            f"got {inp.shape} and {wte.shape}"
        )
    if targets.shape != inp.shape[:2] or targets.dtype.kind not in "iu":
        raise ValueError(
            f"{op}: targets must be integers of shape {inp.shape[:2]} (B, T), "
            f"got {targets.dtype} {targets.shape}"
        )
    V = wte.shape[0]
    if targets.size and (targets.min() < 0 or targets.max() >= V):
        raise ValueError(f"{op}: targets must lie in [0, V={V})")
    return tile_size(op, "chunk", chunk), targets


def batch_of_channels(op: str, inp, weight, bias) -> np.ndarray:
    """`inp` as a real array (B, C) with B >= 2 examples (a batch's
    statistics need two, as PyTorch's batch norm in training says), with
    `weight` and `bias` of shape (C,); else a clear error."""
    inp = real_array(op, "inp", inp)
    if inp.ndim != 2 or inp.shape[0] < 2:
        raise ValueError(
            f"{op}: inp must have shape (B, C) with B >= 2 examples per "
            f"channel (a batch's mean and variance), got {inp.shape}"
        )
    C = inp.shape[1]
    for name, a in (("weight", weight), ("bias", bias)):
        if np.shape(a) != (C,):
            raise ValueError(
                f"{op}: {name} must have shape (C,) = ({C},), got {np.shape(a)}"
            )
    return inp
