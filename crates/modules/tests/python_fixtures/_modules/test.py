"""Overrides halite's native `test` module, as a custom module does in Salt."""


def ping():
    return "custom ping"


def crash():
    return {}["nope"]


def boom():
    from salt.exceptions import CommandExecutionError

    raise CommandExecutionError("it broke, see the log")
