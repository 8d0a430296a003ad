"""A custom renderer: YAML-free `key=value` lines of marker states."""


def render(data, saltenv="base", sls="", **kwargs):
    out = {}
    for line in data.splitlines():
        if "=" in line:
            path, contents = line.split("=", 1)
            out[path.strip()] = {"marker.present": [{"contents": contents.strip().upper()}]}
    return out
