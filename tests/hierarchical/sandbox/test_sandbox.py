"""The sandbox on valid programs, its API checks, its static check's messages, and the OS layers
under it (tested on code that skips the static check, as if it had a hole)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from robocompose.hierarchical.base import Param, Skill, SkillResult
from robocompose.hierarchical.sandbox import (
    ApiFunction,
    SandboxAPI,
    SandboxLimits,
    SandboxRefusal,
    check_program,
    run_program,
    validate_args,
)
from robocompose.hierarchical.sandbox.ast_check import FILENAME
from robocompose.hierarchical.sandbox.names import (
    MATH_MEMBERS,
    METHODS,
    NUMPY_LINALG_MEMBERS,
    NUMPY_MEMBERS,
)
from robocompose.hierarchical.sandbox.runner import _ROOT, _Session

FAST = SandboxLimits(cpu_s=2, wall_s=5.0)
OBJECTS = ("red", "green", "blue")
POSES = {"red": [0.1, 0.0, 0.02], "green": [0.0, 0.2, 0.02], "blue": [-0.1, -0.1, 0.02]}


def make_api(log: list) -> SandboxAPI:
    def record(name: str):
        return lambda args: log.append((name, args)) or {"success": True}

    return SandboxAPI(
        [
            ApiFunction("pick", (Param("obj", "str", choices=OBJECTS),), record("pick")),
            ApiFunction(
                "place",
                (Param("obj", "str", choices=OBJECTS), Param("target", "str", choices=OBJECTS)),
                record("place"),
            ),
            ApiFunction(
                "move_to",
                (Param("xy", "vec2", low=-0.5, high=0.5), Param("z", "float", low=0.0, high=0.3)),
                record("move_to"),
            ),
            ApiFunction("object_names", (), lambda args: list(OBJECTS)),
            ApiFunction(
                "object_pose", (Param("obj", "str", choices=OBJECTS),), lambda a: POSES[a["obj"]]
            ),
        ]
    )


VALID = """
def stack(order):
    for top, bottom in zip(order[1:], order):
        pick(top)
        place(top, bottom)
    return len(order) - 1

names = sorted(object_names(), key=lambda n: object_pose(n)[0])
moves = stack(names)
centre = np.mean(np.array([object_pose(n) for n in names]), axis=0)
height = min(0.3, math.sqrt(centre[2] ** 2) * 5)
i = 0
while i < 2:
    move_to(centre[:2] + np.array([0.05 * i, 0.0]), z=height)
    i += 1
print(f"stacked {moves}: {names}", {n: round(object_pose(n)[1], 2) for n in names})
"""


def test_valid_program_runs_and_its_calls_arrive_in_order():
    log: list = []
    result = run_program(VALID, make_api(log), FAST)
    assert result.ok, result.error
    assert not result.refused and result.limit is None and not result.killed
    assert [name for name, _ in log] == ["pick", "place", "pick", "place", "move_to", "move_to"]
    assert log[:4] == [  # sorted by x: blue (-0.1), green (0.0), red (0.1)
        ("pick", {"obj": "green"}),
        ("place", {"obj": "green", "target": "blue"}),
        ("pick", {"obj": "red"}),
        ("place", {"obj": "red", "target": "green"}),
    ]
    centre = [sum(POSES[n][k] for n in OBJECTS) / 3 for k in range(3)]
    assert log[4][1]["xy"] == pytest.approx(centre[:2])
    assert log[5][1]["xy"] == pytest.approx([centre[0] + 0.05, centre[1]])
    assert log[4][1]["z"] == pytest.approx(min(0.3, centre[2] * 5))
    assert result.stdout == "stacked 2: ['blue', 'green', 'red'] {'blue': -0.1, 'green': 0.2, " \
                            "'red': 0.0}\n"  # fmt: skip
    assert [(c.name, c.args) for c in result.executed_calls if c.name in ("pick", "place")] == [
        (n, a) for n, a in log if n in ("pick", "place")
    ]
    assert result.cpu_s > 0 and result.wall_s > 0


EVERY_MEMBER = """
a = np.array([[1.0, 2.0], [3.0, 4.0]])
v = np.asarray([3.0, 4.0])
arrays = [
    np.abs(v), np.all(v), np.allclose(v, v), np.any(v), np.arange(3), np.arccos(0.5),
    np.arcsin(0.5), np.arctan(1.0), np.arctan2(1.0, 1.0), np.argmax(v), np.argmin(v),
    np.argsort(v), np.ceil(v), np.clip(v, 0, 1), np.concatenate([v, v]), np.cos(v),
    np.cross([1, 0, 0], [0, 1, 0]), np.cumsum(v), np.deg2rad(90), np.degrees(1.0), np.diff(v),
    np.dot(v, v), np.e, np.exp(v), np.eye(2), np.floor(v), np.full(2, 1.0), np.hstack([v, v]),
    np.hypot(3, 4), np.inf, np.interp(0.5, [0, 1], [0, 10]), np.isclose(v, v), np.isfinite(v),
    np.linspace(0, 1, 3), np.log(v), np.max(v), np.maximum(v, 3.5), np.mean(v), np.median(v),
    np.min(v), np.minimum(v, 3.5), np.nan, np.ones(2), np.pi, np.prod(v), np.rad2deg(1.0),
    np.radians(90), np.round(v, 1), np.sign(v), np.sin(v), np.sort(v), np.sqrt(v), np.square(v),
    np.stack([v, v]), np.std(v), np.sum(v), np.tan(v), np.vstack([v, v]), np.where(v > 3, 1, 0),
    np.zeros(2), np.linalg.norm(v), np.linalg.det(a), np.linalg.inv(a), np.linalg.solve(a, v),
    numpy.pi,
]
numbers = [
    math.acos(0.5), math.asin(0.5), math.atan(1), math.atan2(1, 1), math.ceil(1.2),
    math.copysign(1, -1), math.cos(1), math.degrees(1), math.dist([0, 0], [3, 4]), math.e,
    math.exp(1), math.fabs(-1), math.floor(1.5), math.fmod(5, 3), math.fsum([1, 2]),
    math.hypot(3, 4), math.inf, math.isclose(1, 1), math.isfinite(1), math.isinf(1),
    math.isnan(1), math.log(2), math.log10(10), math.log2(8), math.nan, math.pi, math.pow(2, 3),
    math.prod([2, 3]), math.radians(90), math.sin(1), math.sqrt(4), math.tan(1), math.tau,
    math.trunc(1.5),
]
print(len(arrays), len(numbers), np.median(v), np.linalg.solve(a, v).tolist(), a)
"""


def test_every_member_of_the_math_and_numpy_views_works_inside_the_sandbox():
    """Each name names.py promises is called after isolation, where a lazy import would fail."""
    promised = [f"np.{m}" for m in NUMPY_MEMBERS if m != "linalg"]
    promised += [f"np.linalg.{m}" for m in NUMPY_LINALG_MEMBERS]
    promised += [f"math.{m}" for m in MATH_MEMBERS]
    used = [n for n in promised if f"{n}(" in EVERY_MEMBER or f"{n}," in EVERY_MEMBER]
    assert used == promised
    result = run_program(EVERY_MEMBER, make_api([]), FAST)
    assert result.ok, result.error
    assert result.stdout == "65 34 3.5 [-2.0, 2.5] [[1. 2.]\n [3. 4.]]\n"


EVERY_METHOD = """
l = [3, 1, 2]
l.append(4); l.extend([5]); l.insert(0, 0); l.pop(); l.remove(0); l.sort(); l.reverse()
i, c, l2 = l.index(1), l.count(1), l.copy()
l2.clear()
d = {"a": 1}
k, v, it, g = list(d.keys()), list(d.values()), list(d.items()), d.get("a")
d.update({"b": 2}); d.setdefault("c", 3); d.pop("c"); d.popitem()
s = {1, 2}
s.add(3); s.discard(1)
sets = [s.union({9}), s.intersection({2}), s.difference({2}), s.issubset({2, 3}), s.issuperset({2})]
t = " Red Block "
texts = [
    t.lower(), t.upper(), t.strip(), t.lstrip(), t.rstrip(), t.split(), t.rsplit(" ", 1),
    "-".join(["a", "b"]), t.startswith(" "), t.endswith(" "), t.replace("Red", "Blue"),
    t.find("Block"), t.rfind("B"), t.capitalize(), t.title(), "12".isdigit(), "ab".isalpha(),
    "a1".isalnum(), "a b".splitlines(), t.partition("d"),
]
f = 2.5
floats = [f.real, f.imag, f.is_integer(), f.conjugate()]
a = np.array([[1.0, 2.0], [3.0, 4.0]])
arrays = [
    a.shape, a.ndim, a.size, a.T, a.tolist(), a[0, 0].item(), a.reshape(4), a.flatten(),
    a.ravel(), a.astype(int), a.sum(), a.mean(), a.min(), a.max(), a.argmin(), a.argmax(),
    a.std(), a.dot(a), a.clip(0, 1), a.round(), a.any(), a.all(), a.cumsum(), a.prod(),
    a.squeeze(), a.transpose(), a.copy(),
]
print(l, d, s, len(sets), len(texts), floats[2], arrays[10], arrays[-4])
"""


def test_every_allowed_method_works_inside_the_sandbox():
    """numpy's array methods import helpers from C through the caller's builtins: they must
    still work in the program's reduced builtins."""
    assert sorted(m for m in METHODS if f".{m}" not in EVERY_METHOD) == []
    result = run_program(EVERY_METHOD, make_api([]), FAST)
    assert result.ok, result.error
    assert result.stdout == "[4, 3, 2, 1] {'a': 1} {2, 3} 5 20 False 10.0 24.0\n"


def test_large_output_arrives_whole_and_safe_to_print():
    limits = SandboxLimits(cpu_s=2, wall_s=5.0, max_stdout_chars=300_000)
    code = "print('\\x00' * 100000)\nprint('a' * 100000, chr(0xD800))"
    result = run_program(code, make_api([]), limits)
    assert result.ok, result.error
    assert result.stdout == "\x00" * 100000 + "\n" + "a" * 100000 + " ?\n"
    result.stdout.encode("utf-8")  # lone surrogates were replaced


def test_print_takes_sep_end_and_flush_but_no_file():
    code = "print(1, 2, sep='-', flush=True)\nprint(3, end='')\nprint(4, file=None)"
    result = run_program(code, make_api([]), FAST)
    assert result.stdout == "1-2\n3"
    assert result.error == "line 3: TypeError: print() got an unexpected keyword argument 'file'"


def test_refusal_names_the_line_the_construct_and_why():
    result = run_program("x = 1\ny = [x]\nz = y.__class__", make_api([]), FAST)
    assert result.refused and not result.ok and result.calls == []
    assert "line 3: attribute `__class__` is not allowed (names starting with '_' are private)" in (
        result.error
    )


def test_check_lists_every_problem_once():
    code = "import os\nx = eval('1')\nnp.save('f', 1)\nclass A:\n    y = ().__class__\n"
    with pytest.raises(SandboxRefusal) as refusal:
        check_program(code, ["pick"])
    assert refusal.value.problems == [
        "line 1: `import` is not allowed: only the API, `math` and `np` are in scope",
        "line 4: class definitions are not allowed; use functions, lists and dicts",
        "line 2: `eval` is not allowed (it runs code the check has not seen)",
        refusal.value.problems[3],
    ]
    assert refusal.value.problems[3].startswith("line 3: `np.save` is not available")


def test_checked_program_keeps_its_line_numbers_and_counts_steps():
    tree = check_program("x = 0\nwhile x < 3:\n    x += 1\n", [])
    assert compile(tree, FILENAME, "exec").co_filename == FILENAME
    loop = tree.body[1]
    assert loop.lineno == 2 and loop.body[0].lineno == 2  # the tick sits on the loop's line


def test_runtime_error_names_its_line():
    result = run_program("a = [1, 2]\nb = 0\nc = a[5]\n", make_api([]), FAST)
    assert not result.ok and not result.refused and result.limit is None
    assert result.error == "line 3: IndexError: list index out of range"


def test_api_failure_reaches_the_program_and_is_recorded():
    def jam(args):
        raise RuntimeError("gripper jammed")

    api = SandboxAPI([ApiFunction("pick", (Param("obj", "str"),), jam)])
    result = run_program("pick('red')\npick('blue')", api, FAST)
    assert not result.ok
    assert result.error == "line 1: ApiError: pick() failed: RuntimeError: gripper jammed"
    assert len(result.calls) == 1 and result.calls[0].executed
    assert result.calls[0].error == "pick() failed: RuntimeError: gripper jammed"


def test_return_values_must_be_plain_data():
    api = SandboxAPI([ApiFunction("thing", (), lambda args: object())])
    result = run_program("x = thing()", api, FAST)
    assert not result.ok and "cannot be returned to the program" in result.error


def test_from_skills_runs_each_validated_call_through_the_planner():
    ran: list = []
    skill = Skill(
        "push",
        "push an object by a planar offset",
        (Param("obj", "str", choices=OBJECTS), Param("offset", "vec2", low=-0.1, high=0.1)),
        run=lambda world, **args: SkillResult(True),
    )

    def execute(name, args):
        ran.append((name, args))
        return True

    names = ApiFunction("object_names", (), lambda args: list(OBJECTS))
    api = SandboxAPI.from_skills({"push": skill}, execute, perception=[names])
    assert api.listing().splitlines() == [
        "push(obj: str, offset: vec2)  # push an object by a planar offset",
        "object_names()",
    ]
    result = run_program("for n in object_names():\n    push(n, offset=[0.05, -0.02])", api, FAST)
    assert result.ok, result.error
    assert ran == [("push", {"obj": n, "offset": [0.05, -0.02]}) for n in OBJECTS]


def test_time_spent_running_skills_is_not_charged_to_the_program():
    api = SandboxAPI([ApiFunction("slow", (), lambda args: time.sleep(1.5))])
    result = run_program("slow()\nslow()", api, SandboxLimits(cpu_s=1, wall_s=2.5))
    assert result.ok, result.error
    assert result.wall_s > 2.5  # longer than the wall limit, yet not stopped


def _open_pipes() -> set[str]:
    pipes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except FileNotFoundError:  # the listing's own descriptor
            continue
        if target.startswith("pipe:"):
            pipes.add(f"{fd}->{target}")
    return pipes


def test_concurrent_runs_keep_their_calls_apart_and_leak_nothing():
    logs: dict[int, list] = {i: [] for i in range(3)}
    results: dict[int, list] = {}
    pipes_before = _open_pipes()

    def worker(i: int) -> None:
        api = make_api(logs[i])
        code = f"for k in range({i + 2}):\n    pick({OBJECTS[i]!r})\nprint({i})"
        results[i] = [run_program(code, api, FAST), run_program("pick('x')", api, FAST)]

    threads = [threading.Thread(target=worker, args=(i,)) for i in logs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, (good, bad) in results.items():
        assert good.ok and good.stdout == f"{i}\n"
        assert logs[i] == [("pick", {"obj": OBJECTS[i]})] * (i + 2)
        assert not bad.ok and "`pick` argument `obj` must be one of" in bad.error
    assert _open_pipes() == pipes_before  # every child's pipe ends were closed


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ([], {}, "`move_to` is missing the argument `xy`."),
        ([[0.1, 0.2], 0.1, 3], {}, "`move_to` takes 2 arguments (['xy', 'z']). Got 3 positional."),
        (
            [[0.1, 0.2]],
            {"zz": 0.1},
            "`move_to` takes no argument 'zz'; its parameters: ['xy', 'z'].",
        ),  # fmt: skip
        ([[0.1, 0.2]], {"xy": [0, 0]}, "`move_to` got the argument `xy` twice."),
        ([[0.1, 0.9], 0.1], {}, "`move_to` argument `xy` must be in [-0.5, 0.5]. Got 0.9."),
    ],
)
def test_validate_args_names_the_parameter_and_the_expectation(args, kwargs, message):
    move_to = make_api([]).functions["move_to"]
    with pytest.raises(ValueError) as error:
        validate_args(move_to, args, kwargs)
    assert str(error.value) == message


def test_validate_args_keeps_the_echo_of_a_huge_value_short():
    with pytest.raises(ValueError) as error:
        validate_args(make_api([]).functions["move_to"], [[0.1, 0.2], "z" * 100_000], {})
    message = str(error.value)
    assert message.startswith("`move_to` argument `z` must be a number. Got str 'zzz")
    assert message.endswith("zzz... (cut)") and len(message) == 300


def test_validate_args_suggests_the_nearest_name_and_returns_plain_values():
    api = make_api([])
    with pytest.raises(ValueError, match=r"Got 'gren'. Did you mean 'green'\?"):
        api.validate("pick", ["gren"], {})
    with pytest.raises(ValueError, match=r"`pik` is not an API function; did you mean 'pick'\?"):
        api.validate("pik", [], {})
    assert api.validate("move_to", [(0, 0.5)], {"z": 0}) == {"xy": [0.0, 0.5], "z": 0.0}


@pytest.mark.parametrize(
    ("param", "message"),
    [
        (Param("a", "vec3"), "has type 'vec3'"),
        (Param("a", "float", "", None, 0.0, "1"), "`low`/`high` must be numbers"),
        (Param("a", "float", low=1.0, high=0.0), "`low` must be <= `high`"),
        (Param("a", "float", "", ("x",)), '`choices` must be str values of a "str"'),
        (Param("a", "str", low=0.0), "takes `choices`, not `low`/`high`"),
    ],
)
def test_malformed_parameter_specs_fail_when_the_api_is_built(param, message):
    with pytest.raises(ValueError, match=message):
        ApiFunction("f", (param,), lambda args: None)


@pytest.mark.parametrize("name", ["print", "np", "open", "_hidden", "two words"])
def test_api_names_must_be_free_public_identifiers(name):
    with pytest.raises(ValueError, match=f"`name` .*{name!r}"):
        ApiFunction(name, (), lambda args: None)


def test_run_program_names_a_wrong_argument():
    with pytest.raises(TypeError, match="`api` must be a SandboxAPI. Got function."):
        run_program("x = 1", lambda name, args: None)
    with pytest.raises(TypeError, match="`limits` must be a SandboxLimits. Got dict."):
        run_program("x = 1", make_api([]), {"cpu_s": 1})


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("cpu_s", 0, "`cpu_s` must be in [1, 3600]. Got 0."),
        ("wall_s", 0.1, "`wall_s` must be in [0.5, 36000]. Got 0.1."),
        ("memory_mb", 64, "`memory_mb` must be in [256, 65536]. Got 64."),
        ("max_steps", 1.5, "`max_steps` must be an int. Got 1.5."),
    ],
)
def test_limits_validate(field, value, message):
    with pytest.raises((ValueError, TypeError)) as error:
        SandboxLimits(**{field: value})
    assert str(error.value) == message


# -- the OS layers, as if the static check had a hole ------------------------------------------
ESCAPE = (  # the classic walk from a tuple to the `os` module the child has loaded
    "os = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close']"
    "[0].__init__.__globals__['sys'].modules['os']\n"
)


def _run_unchecked(code: str, limits: SandboxLimits = FAST):
    """Run code in the child without the static check: what the OS layers alone stop."""
    log: list = []
    return _Session(make_api(log), limits).run(compile(code, FILENAME, "exec")), log


@pytest.fixture
def open_folder():
    """A world-writable folder straight under /tmp: no permission stands in the program's way,
    only the sandbox (pytest's own tmp_path sits under a folder only root may enter)."""
    folder = Path(tempfile.mkdtemp(prefix="sandbox-open-"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder)


def test_escaped_program_cannot_fork_or_open_files(open_folder):
    folder = open_folder
    canary = folder / "canary.txt"
    canary.write_text("untouched")
    canary.chmod(0o666)
    code = ESCAPE + (
        "def attempt(label, f):\n"
        "    try:\n"
        "        f()\n"
        "        print(label, 'ALLOWED')\n"
        "    except os.error:\n"
        "        print(label, 'blocked')\n"
        "attempt('fork', os.fork)\n"
        f"attempt('write', lambda: os.open({str(canary)!r}, os.O_WRONLY))\n"
        f"attempt('create', lambda: os.open({str(folder / 'new')!r}, os.O_CREAT | os.O_WRONLY))\n"
        "attempt('setuid', lambda: os.setuid(0))\n"
        "attempt('read', lambda: os.open('/etc/passwd', os.O_RDONLY))\n"
    )
    result, log = _run_unchecked(code)
    assert result.ok, result.error
    assert result.stdout.split("\n")[:-1] == [
        "fork blocked", "write blocked", "create blocked", "setuid blocked", "read blocked"
    ]  # fmt: skip
    assert canary.read_text() == "untouched" and sorted(os.listdir(folder)) == ["canary.txt"]


def test_network_namespace_leaves_no_route_to_the_host():
    """With one descriptor slot left free on purpose (the rlimit is tested elsewhere), a socket
    made after isolation still cannot reach a server listening on the host's loopback."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    script = (
        f"import json, os, socket, sys; sys.path.insert(0, {_ROOT!r})\n"
        "from dataclasses import asdict\n"
        "from robocompose.hierarchical.sandbox.child import isolate\n"
        "from robocompose.hierarchical.sandbox.limits import SandboxLimits\n"
        "spare = os.open('/dev/null', os.O_RDONLY)\n"
        "layers = isolate(asdict(SandboxLimits()), (spare,))\n"
        "os.close(spare)\n"
        "s = socket.socket()\n"
        "try:\n"
        f"    s.connect(('127.0.0.1', {listener.getsockname()[1]})); outcome = 'CONNECTED'\n"
        "except OSError as e:\n"
        "    outcome = 'blocked'\n"
        "print(json.dumps([layers, outcome]))\n"
    )
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, timeout=30)
    layers, outcome = json.loads(done.stdout)
    if "no-network" not in layers:
        pytest.skip("this kernel refused a private network namespace")
    assert outcome == "blocked"
    with pytest.raises(BlockingIOError):
        listener.accept()
    listener.close()


@pytest.mark.parametrize(
    ("attack", "limit", "wall_s"),
    [
        ("os.write(4, b'\\x00\\x00\\x00\\x05garbage')", "protocol", 5.0),  # not JSON
        ("os.write(4, b'\\xff\\xff\\xff\\xff')", "protocol", 5.0),  # a 4 GB frame announced
        ('os.write(4, b\'\\x00\\x00\\x00\\x0f{"op": "boom"}\')', "protocol", 5.0),  # unknown
        ("os.read(3, 1)", "wall", 1.0),  # blocks without using CPU: only the wall clock ends it
    ],
)
def test_parent_survives_a_child_that_breaks_the_protocol(attack, limit, wall_s):
    result, log = _run_unchecked(ESCAPE + attack, SandboxLimits(cpu_s=1, wall_s=wall_s))
    assert not result.ok and result.killed and result.limit == limit, result.error
    assert log == []


def _frame(message: str) -> str:
    """Escaped code that writes one well-formed frame straight onto the channel."""
    return f"os.write(4, len({message!r}).to_bytes(4, 'big') + {message!r}.encode())\n"


def test_parent_kills_a_child_that_announces_itself_twice():
    ready = '{"op": "ready", "isolation": ["none"]}'
    result, _ = _run_unchecked(ESCAPE + _frame(ready) + "x = 1\n" * 3, SandboxLimits(wall_s=5.0))
    assert result.killed and result.limit == "protocol"
    assert "unexpected message" in result.error


def test_parent_never_blocks_on_a_child_that_stops_reading_replies():
    """Calls sent without waiting: the replies fill the pipe; the parent stops at the deadline
    instead of hanging in a write."""
    log: list = []
    api = SandboxAPI([ApiFunction("scene", (), lambda args: log.append(1) or "x" * 4000)])
    call = '{"op": "call", "name": "scene", "args": [], "kwargs": {}}'
    code = ESCAPE + "for i in range(60):\n    " + _frame(call) + "while True:\n    pass\n"
    limits = SandboxLimits(cpu_s=10, wall_s=2.5)  # the wall clock, not the CPU, must end it
    result = _Session(api, limits).run(compile(code, FILENAME, "exec"))
    assert result.killed and result.limit == "protocol"
    assert result.error == "the sandbox child misbehaved: the child stopped reading its replies"
    assert 10 < len(log) < 60  # about 64 KB of replies fit in the pipe


def test_escaped_import_statements_get_nothing():
    result, _ = _run_unchecked("import os\n")
    assert result.error == "line 1: ImportError: import of 'os' is not allowed in the sandbox"


def test_child_that_dies_is_reported_with_its_exit():
    result, _ = _run_unchecked(ESCAPE + "os._exit(3)")
    assert not result.ok and result.limit is None
    assert result.error.startswith("the sandbox process ended without a result (exit 3)")


def test_isolation_layers_are_reported():
    result = run_program("x = 1", make_api([]), FAST)
    assert result.ok
    assert {"rlimits", "no-fork", "no-new-files"} <= set(result.isolation)
    if os.geteuid() == 0:
        assert "user-nobody" in result.isolation


def test_child_starts_from_an_empty_environment_and_root_cwd():
    result, _ = _run_unchecked(ESCAPE + "print(os.getcwd(), sorted(os.environ))")
    assert result.ok, result.error
    cwd, _, names = result.stdout.strip().partition(" ")
    assert cwd == "/" and "HOME" not in names and "VIRTUAL_ENV" not in names
