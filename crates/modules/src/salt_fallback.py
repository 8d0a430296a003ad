"""halite's salt_fallback shim: runs one function through Salt's own
loader with the options, grains and pillar halite gives it.

Run as `<salt_fallback python> -I -B <this file>`; reads one JSON request
on stdin ({"fun", "args", "kwargs", "opts", "grains", "pillar"}) and
writes one JSON answer on stdout: {"ret": ...}, {"missing": text} when
Salt has no such function either, or {"error": text}. With "check": true
the function is not called: the answer is {"has": true} or {"missing": fun}.
"""
import json
import os
import sys


def main():
    req = json.load(sys.stdin)
    real_stdout = sys.stdout
    # Anything Salt or a module prints goes to stderr: stdout is the answer.
    sys.stdout = sys.stderr
    import salt.config
    import salt.loader
    from salt.exceptions import CommandExecutionError, SaltInvocationError

    # The defaults, without minion_config's id and DNS lookups.
    opts = dict(salt.config.DEFAULT_MINION_OPTS)
    for key, value in (req.get("opts") or {}).items():
        if not key.startswith("__"):
            opts[key] = value
    cachedir = os.path.join(opts.get("cachedir") or "/var/cache/halite/minion", "salt_fallback")
    opts["cachedir"] = cachedir
    opts["extension_modules"] = os.path.join(cachedir, "extmods")
    opts["file_client"] = "local"
    opts["grains"] = req.get("grains") or {}
    opts["pillar"] = req.get("pillar") or {}
    fun = req["fun"]
    # Salt's functions reach its utils through __utils__ (network.calc_net
    # does): without them the loader hands every module an empty one.
    utils = salt.loader.utils(opts)
    funcs = salt.loader.minion_mods(opts, utils=utils)
    if fun not in funcs:
        answer = {"missing": fun}
    elif req.get("check"):
        answer = {"has": True}
    else:
        try:
            ret = funcs[fun](*req.get("args", []), **req.get("kwargs", {}))
            answer = {"ret": ret}
        except (CommandExecutionError, SaltInvocationError) as exc:
            answer = {"error": str(exc), "kind": type(exc).__name__}
        except Exception as exc:  # the job's failed result, as salt-call shows it
            import traceback
            answer = {"error": traceback.format_exc(), "kind": type(exc).__name__}
    real_stdout.write(json.dumps(answer, default=repr))
    real_stdout.flush()


main()
