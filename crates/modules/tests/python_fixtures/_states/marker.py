import os


def present(name, contents="x"):
    ret = {"name": name, "changes": {}, "result": True, "comment": ""}
    if os.path.exists(name) and open(name).read() == contents:
        ret["comment"] = "{} is already present".format(name)
        return ret
    if __opts__["test"]:
        ret["result"] = None
        ret["changes"] = {"new": contents}
        ret["comment"] = "{} would be written".format(name)
        return ret
    with open(name, "w") as f:
        f.write(contents)
    ret["changes"] = {"new": contents}
    ret["comment"] = "{} written".format(name)
    return ret


def mod_watch(name, sfun=None, **kwargs):
    with open(name + ".watched", "w") as f:
        f.write(str(sfun))
    return {"name": name, "changes": {"watched": sfun}, "result": True, "comment": "Watch fired"}
