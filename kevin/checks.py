"""(being written)"""


def register_commands(subparsers) -> None:
    pass
