"""A module whose __virtual__ declines, as public ones do when a binary is missing."""
__virtualname__ = "nah"


def __virtual__():
    return (False, "the nope binary is missing")


def f():
    return 1
