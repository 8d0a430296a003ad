"""A custom execution module in the style of public ones."""
import logging

log = logging.getLogger(__name__)

__virtualname__ = "hello"
__func_alias__ = {"list_": "list"}


def __virtual__():
    return __virtualname__


def greet(who="world"):
    return "hello {} from {}".format(who, __grains__["kernel"])


def shell(cmd):
    return __salt__["cmd.run"](cmd, python_shell=True)


def list_():
    return {"b": 1, "a": [1, None, True]}


def _secret():
    return 42
