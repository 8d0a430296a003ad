"""A custom state module in the style of public ones: it wraps a core
state through __states__, and reports Salt's __running__ and __low__."""


def managed(name, contents):
    ret = __states__["file.managed"](name=name, contents=contents, makedirs=True)
    ret["comment"] = "wrapped: " + ret["comment"]
    return ret


def report(name):
    lines = []
    for tag in sorted(__running__):
        r = __running__[tag]
        lines.append("{} result={} run_num={} id={}".format(
            tag, r["result"], r.get("__run_num__"), r.get("__id__")))
    lines.append("low: " + ",".join(sorted(__low__)))
    lines.append("low name={} state={} fun={} id={} sls={}".format(
        __low__["name"], __low__["state"], __low__["fun"], __low__["__id__"], __low__["__sls__"]))
    lines.append("test: {}".format(__opts__["test"]))
    return {"name": name, "result": True, "changes": {}, "comment": "\n".join(lines)}
