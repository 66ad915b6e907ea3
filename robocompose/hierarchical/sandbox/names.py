"""What a sandboxed program may name: builtins, the `math` and `np` members, and methods.

Plain data shared by the static check (parent) and the child, so both agree on one allow-list.
Everything not listed here is refused; the reasons below explain the common refusals to the LLM.
"""

from __future__ import annotations

SAFE_BUILTINS = (
    "abs", "all", "any", "bool", "callable", "chr", "dict", "divmod", "enumerate", "filter",
    "float", "frozenset", "int", "isinstance", "len", "list", "map", "max", "min", "next", "ord",
    "pow", "print", "range", "repr", "reversed", "round", "set", "slice", "sorted", "str", "sum",
    "tuple", "zip", "Exception", "ValueError", "RuntimeError", "TypeError", "KeyError",
    "IndexError", "ZeroDivisionError",
)  # fmt: skip

MATH_MEMBERS = (
    "acos", "asin", "atan", "atan2", "ceil", "copysign", "cos", "degrees", "dist", "e", "exp",
    "fabs", "floor", "fmod", "fsum", "hypot", "inf", "isclose", "isfinite", "isinf", "isnan",
    "log", "log10", "log2", "nan", "pi", "pow", "prod", "radians", "sin", "sqrt", "tan", "tau",
    "trunc",
)  # fmt: skip

NUMPY_MEMBERS = (
    "abs", "all", "allclose", "any", "arange", "arccos", "arcsin", "arctan", "arctan2", "argmax",
    "argmin", "argsort", "array", "asarray", "ceil", "clip", "concatenate", "cos", "cross",
    "cumsum", "deg2rad", "degrees", "diff", "dot", "e", "exp", "eye", "floor", "full", "hstack",
    "hypot", "inf", "interp", "isclose", "isfinite", "linalg", "linspace", "log", "max", "maximum",
    "mean", "median", "min", "minimum", "nan", "ones", "pi", "prod", "rad2deg", "radians", "round",
    "sign", "sin", "sort", "sqrt", "square", "stack", "std", "sum", "tan", "vstack", "where",
    "zeros",
)  # fmt: skip
NUMPY_LINALG_MEMBERS = ("norm", "det", "inv", "solve")

# Read-only namespaces in the child: name in the program -> (members, nested namespaces).
MODULES: dict[str, tuple[tuple[str, ...], dict[str, tuple[str, ...]]]] = {
    "math": (MATH_MEMBERS, {}),
    "np": (NUMPY_MEMBERS, {"linalg": NUMPY_LINALG_MEMBERS}),
    "numpy": (NUMPY_MEMBERS, {"linalg": NUMPY_LINALG_MEMBERS}),
}

# Methods and data attributes of lists, dicts, sets, strings, numbers and arrays.
METHODS = frozenset((
    # list
    "append", "extend", "insert", "pop", "remove", "index", "count", "sort", "reverse", "copy",
    "clear",
    # dict
    "keys", "values", "items", "get", "update", "setdefault", "popitem",
    # set
    "add", "discard", "union", "intersection", "difference", "issubset", "issuperset",
    # str
    "lower", "upper", "strip", "lstrip", "rstrip", "split", "rsplit", "join", "startswith",
    "endswith", "replace", "find", "rfind", "capitalize", "title", "isdigit", "isalpha",
    "isalnum", "splitlines", "partition",
    # numbers
    "real", "imag", "is_integer", "conjugate",
    # numpy arrays
    "shape", "ndim", "size", "T", "tolist", "item", "reshape", "flatten", "ravel", "astype",
    "sum", "mean", "min", "max", "argmin", "argmax", "std", "dot", "clip", "round", "any", "all",
    "cumsum", "prod", "squeeze", "transpose",
))  # fmt: skip

FORBIDDEN_NAMES = {
    **dict.fromkeys(("exec", "eval", "compile"), "it runs code the check has not seen"),
    **dict.fromkeys(("open", "input", "breakpoint", "help", "exit", "quit"),
                    "it reaches files, the terminal or the interpreter"),  # fmt: skip
    **dict.fromkeys(("getattr", "setattr", "delattr", "hasattr"),
                    "it reaches attributes by string, around the attribute check"),  # fmt: skip
    **dict.fromkeys(("globals", "locals", "vars", "dir"), "it exposes the program's namespaces"),
    **dict.fromkeys(("type", "object", "super", "classmethod", "staticmethod", "property",
                     "memoryview", "bytearray", "id"),
                    "it reaches classes and objects' internals"),  # fmt: skip
    **dict.fromkeys(("format", "iter"), "it is not in the sandbox's builtins"),
    **dict.fromkeys(("os", "sys", "subprocess", "socket", "importlib", "builtins", "pathlib",
                     "shutil", "ctypes", "multiprocessing", "threading", "signal", "io"),
                    "modules cannot be imported; only the API, `math` and `np` are in scope"),
}  # fmt: skip

ATTRIBUTE_REASONS = {
    "format": "str.format reads attributes through its fields; use an f-string",
    "format_map": "str.format_map reads attributes through its fields; use an f-string",
    "tofile": "arrays cannot be written to files",
    "dump": "arrays cannot be written to files",
    "ctypes": "arrays' raw memory is not reachable",
}
