"""halite's Python worker: runs custom Salt modules (_modules, _states,
_grains, _utils, _renderers, #!py) as Salt's loader would, for the halite
minion that started it.

Standard library only. Spoken over stdin/stdout: frames of a 4-byte
big-endian length and a UTF-8 JSON object (docs/python.md). Anything a
module prints goes to stderr, never into the frames.
"""

import importlib.util
import inspect
import json
import os
import re
import struct
import sys
import traceback
import types

# --- the frame channel: the real stdout is kept for frames, fd 1 becomes stderr
_IN = os.fdopen(os.dup(0), "rb", buffering=0)
_OUT = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)
sys.stdout = sys.stderr
_devnull = os.open(os.devnull, os.O_RDONLY)
os.dup2(_devnull, 0)
sys.stdin = open(os.devnull)


def _read_exact(n):
    buf = b""
    while len(buf) < n:
        chunk = _IN.read(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def read_frame():
    (size,) = struct.unpack(">I", _read_exact(4))
    return json.loads(_read_exact(size).decode("utf-8"))


def _default(obj):
    # What Salt's JSON outputter does with what JSON has no word for.
    # (salt-call --out json: default=repr, so b"xy" is "b'xy'" and {1} is "{1}").
    return repr(obj)


def write_frame(obj):
    data = json.dumps(obj, default=_default, allow_nan=True).encode("utf-8")
    _OUT.write(struct.pack(">I", len(data)) + data)


# --- the tiny `salt` package shim: only what public custom modules import
def _install_salt_shim():
    if "salt" in sys.modules:
        return
    salt = types.ModuleType("salt")
    salt.__path__ = []
    exceptions = types.ModuleType("salt.exceptions")

    class SaltException(Exception):
        def __init__(self, message="", *args, **kwargs):
            super().__init__(message, *args)
            self.message = self.strerror = message

    class CommandExecutionError(SaltException):
        def __init__(self, message="", info=None):
            super().__init__(message)
            self.info = info

    class SaltInvocationError(SaltException):
        pass

    class CommandNotFoundError(SaltException):
        pass

    class MinionError(SaltException):
        pass

    class SaltRenderError(SaltException):
        pass

    for cls in (SaltException, CommandExecutionError, SaltInvocationError,
                CommandNotFoundError, MinionError, SaltRenderError):
        setattr(exceptions, cls.__name__, cls)
    utils = types.ModuleType("salt.utils")
    utils.__path__ = []
    args = types.ModuleType("salt.utils.args")

    def clean_kwargs(**kwargs):
        return {k: v for k, v in kwargs.items() if not k.startswith("__")}

    def get_function_argspec(func):
        return inspect.getfullargspec(func)

    args.clean_kwargs = clean_kwargs
    args.get_function_argspec = get_function_argspec
    data = types.ModuleType("salt.utils.data")

    def is_true(value=None):
        try:
            value = int(value)
        except (ValueError, TypeError):
            pass
        if isinstance(value, (int, float)):
            return value > 0
        if isinstance(value, str):
            return str(value).lower() == "true"
        return bool(value)

    data.is_true = is_true
    versions = types.ModuleType("salt.utils.versions")

    def _loose(v):
        # distutils' LooseVersion: runs of digits as ints, other runs as text.
        parts = []
        for part in re.split(r"(\d+|[a-z]+|\.)", str(v)):
            if part and part != ".":
                parts.append(int(part) if part.isdigit() else part)
        return parts

    def version_cmp(pkg1, pkg2, ignore_epoch=False):
        if ignore_epoch:
            pkg1, pkg2 = (str(p).split(":", 1)[-1] for p in (pkg1, pkg2))
        try:
            a, b = _loose(pkg1), _loose(pkg2)
            return (a > b) - (a < b)
        except TypeError:
            return None

    def compare(ver1="", oper="==", ver2="", cmp_func=None, ignore_epoch=False):
        wanted = {"<": (-1,), "<=": (-1, 0), "==": (0,), ">=": (0, 1), ">": (1,)}
        if oper != "!=" and oper not in wanted:
            return False
        res = (cmp_func or version_cmp)(ver1, ver2, ignore_epoch=ignore_epoch)
        if not isinstance(res, int):
            return False
        if oper == "!=":
            return res != 0
        return max(-1, min(1, res)) in wanted[oper]

    versions.version_cmp = version_cmp
    versions.compare = compare
    salt.exceptions = exceptions
    salt.utils = utils
    utils.args = args
    utils.data = data
    utils.versions = versions
    sys.modules.update({
        "salt": salt, "salt.exceptions": exceptions, "salt.utils": utils,
        "salt.utils.args": args, "salt.utils.data": data,
        "salt.utils.versions": versions,
    })


_install_salt_shim()
from salt.exceptions import CommandExecutionError, SaltInvocationError  # noqa: E402


# --- the dunders every loaded module shares (refreshed per request)
OPTS, GRAINS, PILLAR, CONTEXT = {}, {}, {}, {}


def ask_halite(frame):
    """Sends a question to halite and waits for its answer, serving the
    requests halite sends meanwhile (a Rust function calling Python)."""
    write_frame(frame)
    while True:
        msg = read_frame()
        op = msg.get("op")
        if op == "salt_return":
            return msg.get("ret")
        if op == "salt_error":
            raise CommandExecutionError(msg.get("message", ""))
        serve(msg)


class RustCall:
    """A function halite provides in Rust, reached through a salt_call frame."""

    def __init__(self, fun):
        self.fun = fun
        self.__name__ = fun.split(".")[-1]

    def __call__(self, *args, **kwargs):
        return ask_halite({"op": "salt_call", "fun": self.fun, "args": list(args),
                           "kwargs": {k: v for k, v in kwargs.items()}})


class RustState:
    """A state function halite provides in Rust (`__states__['file.managed']`):
    run by halite with the calling state's test mode; returns its dict."""

    def __init__(self, fun):
        self.fun = fun
        self.__name__ = fun.split(".")[-1]

    def __call__(self, *args, **kwargs):
        if len(args) > 1:
            raise SaltInvocationError(
                "{}: pass the arguments after name as keywords".format(self.fun))
        if args:
            kwargs.setdefault("name", args[0])
        return ask_halite({"op": "state_call", "fun": self.fun,
                           "kwargs": {k: v for k, v in kwargs.items()}})


class FunctionMap:
    """Salt's __salt__/__states__/__utils__: a dict-like of functions."""

    def __init__(self, kind):
        self.kind = kind

    def _local(self):
        return LOADER.functions[self.kind]

    def _native(self, key):
        if self.kind == "modules":
            if key in LOADER.native:
                return RustCall(key)
            if LOADER.open_salt and key not in LOADER.asked_missing:
                # salt_fallback: Salt's own function, if halite's Salt has it.
                if ask_halite({"op": "salt_has", "fun": key}):
                    LOADER.native.add(key)
                    return RustCall(key)
                LOADER.asked_missing.add(key)
        elif self.kind == "states" and key in LOADER.native_states:
            return RustState(key)
        return None

    def __getitem__(self, key):
        local = self._local()
        if key in local:
            return local[key]
        native = self._native(key)
        if native is not None:
            return native
        mod = key.split(".")[0]
        if mod in LOADER.declined[self.kind]:
            raise KeyError(LOADER.missing(key, self.kind))
        raise KeyError(key)

    def __contains__(self, key):
        return key in self._local() or self._native(key) is not None

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:
            return default

    def keys(self):
        names = set(self._local())
        if self.kind == "modules":
            names |= LOADER.native
        elif self.kind == "states":
            names |= LOADER.native_states
        return sorted(names)

    def __iter__(self):
        return iter(self.keys())

    def __len__(self):
        return len(self.keys())

    def items(self):
        return [(k, self[k]) for k in self.keys()]

    def values(self):
        return [self[k] for k in self.keys()]


SALT, STATES, UTILS = FunctionMap("modules"), FunctionMap("states"), FunctionMap("utils")
KINDS = ("utils", "modules", "states", "grains", "renderers", "returners")


class Loader:
    def __init__(self):
        self.dirs = None
        self.native = set()
        self.native_states = set()
        self.open_salt = False
        self.asked_missing = set()
        self.modules = {k: {} for k in KINDS}
        self.functions = {k: {} for k in KINDS}
        self.declined = {k: {} for k in KINDS}
        self.errors = []

    def missing(self, fun, kind="modules"):
        mod = fun.split(".")[0]
        if mod in self.declined[kind]:
            reason = self.declined[kind][mod]
            if reason:
                return "'{}' __virtual__ returned False: {}".format(mod, reason)
            return "'{}' __virtual__ returned False".format(mod)
        return "'{}' is not available.".format(fun)

    def _files(self, dirs):
        seen = {}
        for d in dirs:
            try:
                entries = sorted(os.listdir(d))
            except OSError:
                continue
            for entry in entries:
                path = os.path.join(d, entry)
                if entry.startswith((".", "_")):
                    continue
                if entry.endswith(".py") and os.path.isfile(path):
                    name = entry[:-3]
                elif os.path.isfile(os.path.join(path, "__init__.py")):
                    name, path = entry, os.path.join(path, "__init__.py")
                else:
                    continue
                seen.setdefault(name, path)  # the first directory wins
        return seen

    def load(self, dirs, native, native_states=(), open_salt=False):
        self.__init__()
        self.dirs = dirs
        self.native = set(native)
        self.native_states = set(native_states)
        self.open_salt = bool(open_salt)
        for kind in KINDS:
            for name, path in self._files(dirs.get(kind, [])).items():
                self._load_one(kind, name, path)

    def _load_one(self, kind, name, path):
        # Salt's loader names: salt.loaded.ext.module.x, ...ext.states.x, ...ext.render.x
        tag = {"modules": "module", "renderers": "render"}.get(kind, kind)
        modname = "salt.loaded.ext.{}.{}".format(tag, name)
        try:
            spec = importlib.util.spec_from_file_location(
                modname, path,
                submodule_search_locations=[os.path.dirname(path)] if path.endswith("__init__.py") else None)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[modname] = mod
            self._inject(mod, kind)
            spec.loader.exec_module(mod)
        except Exception:
            sys.modules.pop(modname, None)
            self.errors.append("Failed to import {} {}:\n{}".format(kind, name, traceback.format_exc()))
            self.declined[kind][name] = "Failed to import {} {}, this is due most likely to a syntax error".format(kind, name)
            return
        self._inject(mod, kind)
        if kind == "states":
            # __running__ is asked of halite only for modules that read it
            # (it is the whole run so far: costly to send every call).
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    mod.__halite_reads_running__ = "__running__" in fh.read()
            except OSError:
                mod.__halite_reads_running__ = True
        virtualname = getattr(mod, "__virtualname__", name)
        virtual = getattr(mod, "__virtual__", None)
        if virtual is not None:
            try:
                ok = virtual()
            except Exception as exc:
                self.declined[kind][virtualname] = "Exception raised when processing __virtual__ function for {}. Module will not be loaded: {}".format(modname, exc)
                return
            reason = None
            if isinstance(ok, tuple):
                ok, reason = ok[0], (ok[1] if len(ok) > 1 else None)
            if ok is False:
                self.declined[kind][virtualname] = reason
                return
            if isinstance(ok, str):
                virtualname = ok
        self.declined[kind].pop(virtualname, None)
        self.modules[kind][virtualname] = mod
        aliases = getattr(mod, "__func_alias__", {}) or {}
        for attr, value in list(vars(mod).items()):
            if attr.startswith("_") or not inspect.isfunction(value):
                continue
            if getattr(value, "__module__", None) != mod.__name__:
                continue  # imported from elsewhere: not one of the module's functions
            public = aliases.get(attr, attr)
            self.functions[kind]["{}.{}".format(virtualname, public)] = value

    def _inject(self, mod, kind):
        mod.__opts__ = OPTS
        mod.__grains__ = GRAINS
        mod.__pillar__ = PILLAR
        mod.__context__ = CONTEXT
        mod.__salt__ = SALT
        mod.__utils__ = UTILS
        if kind in ("states", "renderers"):
            mod.__states__ = STATES

    def inventory(self):
        out = {}
        for kind in KINDS:
            funs = {}
            for full in self.functions[kind]:
                mod, fun = full.split(".", 1)
                funs.setdefault(mod, []).append(fun)
            for mod in self.modules[kind]:
                funs.setdefault(mod, [])
            out[kind] = funs
        out["declined"] = {k: v for k, v in self.declined.items()}
        out["errors"] = self.errors
        return out


LOADER = Loader()


# __context__ is one dict per job, as in Salt (a job's process starts with
# an empty one): the dict every module holds is swapped in place when a
# request of another job arrives, and the last few jobs' dicts are kept
# for a job whose calls interleave with another's.
CONTEXT_JOB = [None]
SAVED_CONTEXTS = {}


def switch_context(job):
    if job == CONTEXT_JOB[0]:
        return
    if CONTEXT_JOB[0] is not None:
        SAVED_CONTEXTS[CONTEXT_JOB[0]] = dict(CONTEXT)
        while len(SAVED_CONTEXTS) > 16:
            SAVED_CONTEXTS.pop(next(iter(SAVED_CONTEXTS)))
    CONTEXT.clear()
    CONTEXT.update(SAVED_CONTEXTS.pop(job, {}) if job is not None else {})
    CONTEXT_JOB[0] = job


def set_dunders(d, low=None):
    for target, key in ((OPTS, "opts"), (GRAINS, "grains"), (PILLAR, "pillar")):
        if key in d:
            target.clear()
            target.update(d[key] or {})
    switch_context(d.get("job"))
    saltenv = d.get("saltenv") or OPTS.get("saltenv") or "base"
    for kind in KINDS:
        for mod in LOADER.modules[kind].values():
            mod.__env__ = saltenv
            mod.__saltenv__ = saltenv
            if kind == "states":
                mod.__low__ = low or {}
                mod.__running__ = d.get("running") or {}
                mod.__instance_id__ = d.get("instance_id") or ""
    OPTS["test"] = bool(d.get("test", OPTS.get("test", False)))


def bind_args(func, args, kwargs):
    """Salt's format_call: pass only the keywords the function accepts."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return args, kwargs
    params = sig.parameters.values()
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return args, kwargs
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return args, {k: v for k, v in kwargs.items() if k in names}


def call_exec(msg):
    fun = msg["fun"]
    func = LOADER.functions["modules"].get(fun)
    if func is None:
        raise CommandExecutionError(LOADER.missing(fun))
    kwargs = {k: v for k, v in (msg.get("kwargs") or {}).items() if not k.startswith("__pub_")}
    return func(*(msg.get("args") or []), **kwargs)


def call_returner(msg):
    """A `_returners` module's `returner(ret)` (Salt's minion calls it
    with the job's return dict after the job)."""
    fun = msg["fun"]
    func = LOADER.functions["returners"].get(fun)
    if func is None:
        raise CommandExecutionError("'{}' is not available.".format(fun))
    return func(*(msg.get("args") or []))


def call_state(msg):
    fun = msg["fun"]
    func = LOADER.functions["states"].get(fun)
    if func is None:
        raise CommandExecutionError("State '{}' was not found in SLS".format(fun))
    low = dict(msg.get("kwargs") or {})
    kwargs = {k: v for k, v in low.items() if not k.startswith("__") and k not in (
        "state", "fun", "order", "watch", "require", "onchanges", "onfail", "prereq",
        "watch_in", "require_in", "onchanges_in", "onfail_in", "prereq_in", "use",
        "use_in", "listen", "listen_in", "unless", "onlyif", "creates", "check_cmd",
        "reload_modules", "reload_grains", "reload_pillar", "retry", "parallel",
        "runas", "runas_password", "fire_event")}
    mod = LOADER.modules["states"].get(fun.split(".")[0])
    if mod is not None and getattr(mod, "__halite_reads_running__", False):
        mod.__running__ = ask_halite({"op": "running"}) or {}
    if fun.endswith(".mod_watch"):
        kwargs["sfun"] = msg.get("sfun")
        kwargs["__reqs__"] = msg.get("reqs") or {}
    args, kwargs = bind_args(func, [], kwargs)
    return func(*args, **kwargs)


def collect_grains(msg):
    merged = {}
    for name, mod in sorted(LOADER.modules["grains"].items()):
        for attr, value in sorted(vars(mod).items()):
            if attr.startswith("_") or not inspect.isfunction(value):
                continue
            if getattr(value, "__module__", None) != mod.__name__:
                continue
            try:
                ret = value()
            except Exception:
                sys.stderr.write("grains function {}.{} failed:\n{}".format(name, attr, traceback.format_exc()))
                continue
            if isinstance(ret, dict):
                merged.update(ret)
                GRAINS.update(ret)
    return merged


# --- #!pyobjects: Salt's pyobjects renderer (salt/renderers/pyobjects.py)
PYOBJECTS_REQUISITES = (
    "listen", "onchanges", "onfail", "require", "watch", "use",
    "listen_in", "onchanges_in", "onfail_in", "require_in", "watch_in", "use_in",
)


class DuplicateState(Exception):
    pass


class InvalidFunction(Exception):
    pass


# `from salt://x.sls import A, B as C` and `import salt://x.sls` lines of a
# #!pyobjects file (Salt's pyobjects renderer handles them before exec).
PYOBJECTS_FROM_RE = re.compile(r"^\s*from\s+(salt:\/\/.*)\s+import (.*)$")
PYOBJECTS_IMPORT_RE = re.compile(r"^\s*import\s+(salt:\/\/.*)$")
PYOBJECTS_AS_RE = re.compile(r"^(.*) as (.*)$")


class PyobjectsModule:
    """`import salt://x.sls`: the imported file's globals as `x.Name`."""

    def __init__(self, name, attrs):
        self.name = name
        self.__dict__ = attrs

    def __repr__(self):
        return "<module '{}' (pyobjects)>".format(self.name)


class MapMeta(type):
    """Salt's pyobjects Map: at class creation the inner classes matching
    the minion's grains (`__grain__`, default os_family; `__match__`,
    default the class name; ordered by `priority`, else by declaration)
    and the pillar at `merge` become the class's attributes."""

    def __init__(cls, name, bases, namespace):
        super().__init__(name, bases, namespace)
        cls._apply_matches(namespace)

    def _apply_matches(cls, namespace):
        found = []
        for item, value in list(namespace.items()):
            if item.startswith("_") or not inspect.isclass(value):
                continue
            grain = getattr(value, "__grain__", "os_family")
            match = getattr(value, "__match__", item)
            attrs = {k: v for k, v in value.__dict__.items() if not k.startswith("_")}
            found.append((grain, match, attrs))
        priority = getattr(cls, "priority", None)
        if priority is not None:
            if not hasattr(priority, "__iter__"):
                sys.stderr.write("pyobjects: priority must be an iterable\n")
            else:
                first = [f for grain in priority for f in found if f[0] == grain]
                found = first + [f for f in found if f not in first]
        merged = {}
        if found:
            values = Map.__salt__["grains.item"](*sorted({f[0] for f in found}))
            for grain, match, attrs in found:
                if grain in values and values[grain] == match:
                    merged.update(attrs)
        if hasattr(cls, "merge"):
            pillar = Map.__salt__["pillar.get"](cls.merge)
            if pillar:
                merged.update(pillar)
        for key, value in merged.items():
            setattr(cls, key, value)


class Map(metaclass=MapMeta):
    __salt__ = None


def state_functions(module):
    """The functions of state module `module` (halite's and the custom
    ones), for pyobjects' check of `Pkg.installed`; empty when unknown."""
    prefix = module + "."
    names = {f[len(prefix):] for f in LOADER.native_states if f.startswith(prefix)}
    if module in LOADER.modules["states"]:
        names = {f[len(prefix):] for f in LOADER.functions["states"] if f.startswith(prefix)}
    return names


def render_pyobjects(msg):
    """Runs a #!pyobjects file: State objects made by `Pkg.installed(...)`
    and friends register into high data, as Salt's Registry does."""
    states, extends, includes, stack = {}, {}, [], []
    # Off while an imported file runs: its states are not registered, only
    # its objects are taken (Salt's Registry.enabled).
    enabled = [True]

    class Extend:
        def __init__(self, name):
            self.name = name

    class Requisite:
        def __init__(self, requisite, module, id_):
            self.requisite, self.module, self.id_ = requisite, module, id_

        def __call__(self):
            return {self.module: self.id_}

        def __enter__(self):
            if enabled[0]:
                stack.append(self)

        def __exit__(self, *exc):
            if enabled[0]:
                stack.pop()

    class State:
        def __init__(self, id_, module, func, **kwargs):
            for attr in PYOBJECTS_REQUISITES:
                if attr in kwargs:
                    try:
                        iter(kwargs[attr])
                    except TypeError:
                        kwargs[attr] = [kwargs[attr]]
            self.module, self.func, self.kwargs = module, func, kwargs
            target = states
            if isinstance(id_, Extend):
                target, id_ = extends, id_.name
            self.id_ = id_
            self.requisite = Requisite("require", module, id_)
            if not enabled[0]:
                return
            full = "{}.{}".format(module, func)
            if id_ in target and full in target[id_]:
                raise DuplicateState("A state with id ''{}'', type ''{}'' exists".format(id_, full))
            target.setdefault(id_, {})
            for req in stack:
                kwargs.setdefault(req.requisite, []).append(req())
            for attr in PYOBJECTS_REQUISITES:
                if attr in kwargs:
                    kwargs[attr] = [r() if isinstance(r, Requisite) else r for r in kwargs[attr]]
            target[id_][full] = [{k: kwargs[k]} for k in sorted(kwargs)]

        def __enter__(self):
            if enabled[0]:
                stack.append(self.requisite)

        def __exit__(self, *exc):
            if enabled[0]:
                stack.pop()

    class StateFactory:
        def __init__(self, module, valid_funcs=None):
            self.module = module

        def __getattr__(self, func):
            if func.startswith("__"):
                raise AttributeError(func)
            known = state_functions(self.module)
            if known and func not in known:
                raise InvalidFunction(
                    "The function '{}' does not exist in the StateFactory for '{}'".format(
                        func, self.module))

            def make_state(id_, **kwargs):
                return State(id_, self.module, func, **kwargs)
            return make_state

        def __call__(self, id_, requisite="require"):
            return Requisite(requisite, self.module, id_)

    class SaltObject:
        def __getattr__(self, mod):
            class Wrapper:
                def __getattr__(wself, func):
                    try:
                        return SALT["{}.{}".format(mod, func)]
                    except KeyError:
                        raise AttributeError(func)
            return Wrapper()

    import builtins

    class Globals(dict):
        # `Pkg`, `File`, `SshAuth`...: a StateFactory for the state module
        # of that name (Salt makes one per loaded state module).
        def __missing__(self, key):
            if key in builtins.__dict__:
                return builtins.__dict__[key]
            if key[:1].isupper() and key.isidentifier():
                module = re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()
                factory = StateFactory(module)
                self[key] = factory
                return factory
            raise KeyError(key)

    def dunder(name):
        try:
            return SALT[name]
        except KeyError:
            return None

    def include(*names):
        if enabled[0]:
            includes.extend(names)

    Map.__salt__ = SALT
    sls = msg.get("sls", "")
    saltenv = msg.get("saltenv") or "base"
    g = Globals({
        "__builtins__": builtins,
        "StateFactory": StateFactory,
        "include": include,
        "extend": Extend,
        "Map": Map,
        "salt": SaltObject(),
        "pillar": dunder("pillar.get"),
        "grains": dunder("grains.get"),
        "mine": dunder("mine.get"),
        "config": dunder("config.get"),
        "__salt__": SALT,
        "__pillar__": PILLAR,
        "__grains__": GRAINS,
        "__opts__": OPTS,
        "__sls__": sls,
    })
    def process_template(text):
        """The file without its salt:// import lines, and the globals those
        imports fill (each imported file processed the same way and run
        with the registry off)."""
        kept, scope = [], Globals(g)
        for line in text.splitlines():
            line = line.rstrip("\r\n")
            m = PYOBJECTS_IMPORT_RE.match(line) or PYOBJECTS_FROM_RE.match(line)
            if m is None:
                kept.append(line)
                continue
            url = m.group(1).strip()
            names = m.group(2).split(",") if m.re is PYOBJECTS_FROM_RE else None
            text_of = SALT["cp.get_file_str"](url, saltenv=saltenv)
            if not isinstance(text_of, str):
                raise ImportError("Could not find the file '{}'".format(url))
            code, sub = process_template(text_of)
            exec(compile(code, url, "exec"), sub)
            if names is None:
                name = os.path.splitext(os.path.basename(url))[0]
                scope[name] = PyobjectsModule(name, sub)
                continue
            for name in names:
                name = alias = name.strip()
                am = PYOBJECTS_AS_RE.match(name)
                if am is not None:
                    name, alias = am.group(1).strip(), am.group(2).strip()
                if name not in sub:
                    raise ImportError("'{}' was not found in '{}'".format(name, url))
                scope[alias] = sub[name]
        return "\n".join(kept), scope

    enabled[0] = False
    try:
        code, scope = process_template(msg.get("text", ""))
    finally:
        enabled[0] = True
    g.update(scope)
    exec(compile(code, msg.get("path") or "<pyobjects sls>", "exec"), g)
    data = dict(states)
    if includes:
        data["include"] = includes
    if extends:
        data["extend"] = extends
    return data


def render(msg):
    text = msg.get("text", "")
    path = msg.get("path") or "<py sls>"
    renderer = msg.get("renderer", "py")
    if renderer == "pyobjects":
        return render_pyobjects(msg)
    if renderer == "py":
        mod = types.ModuleType("salt.loaded.ext.render.py_sls")
        mod.__file__ = path
        LOADER._inject(mod, "renderers")
        for key, value in (msg.get("names") or {}).items():
            setattr(mod, key, value)
        mod.__env__ = mod.__saltenv__ = mod.saltenv = msg.get("saltenv") or "base"
        mod.sls = msg.get("sls", "")
        mod.__sls__ = msg.get("sls", "")
        exec(compile(text, path, "exec"), mod.__dict__)
        if not callable(getattr(mod, "run", None)):
            raise SaltInvocationError("The #!py file {} has no run() function".format(path))
        return mod.run()
    func = LOADER.functions["renderers"].get(renderer + ".render")
    if func is None:
        raise CommandExecutionError("The renderer '{}' is not available".format(renderer))
    data = msg.get("data", text)
    return func(data, saltenv=msg.get("saltenv") or "base", sls=msg.get("sls", ""))


def serve(msg):
    op = msg.get("op")
    try:
        if op == "load":
            set_dunders(msg.get("dunders") or {})
            LOADER.load(msg.get("dirs") or {}, msg.get("native") or [],
                        msg.get("native_states") or [], msg.get("open_salt"))
            write_frame({"op": "return", "ret": LOADER.inventory()})
            return
        set_dunders(msg.get("dunders") or {}, msg.get("kwargs") if op == "call" and msg.get("kind") == "state" else None)
        if op == "call":
            kind = msg.get("kind")
            ret = call_state(msg) if kind == "state" else call_returner(msg) if kind == "returner" else call_exec(msg)
        elif op == "grains":
            ret = collect_grains(msg)
        elif op == "render":
            ret = render(msg)
        else:
            raise SaltInvocationError("unknown request {!r}".format(op))
        write_frame({"op": "return", "ret": ret})
    except Exception as exc:
        write_frame({
            "op": "raise",
            "type": type(exc).__name__,
            "message": getattr(exc, "message", None) or str(exc),
            "traceback": traceback.format_exc(),
        })


def main():
    while True:
        try:
            msg = read_frame()
        except EOFError:
            return
        serve(msg)


main()
