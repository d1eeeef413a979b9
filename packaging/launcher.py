"""Entry point of the packaged app: the GUI, or the CLI when the first argument is `cli`."""

import sys


def run() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "cli":
        from engine.cli import main as cli_main

        return cli_main(sys.argv[2:])
    from app.main import main

    return main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(run())
