"""Entry point of the packaged app: the GUI, or the CLI when the first argument is `cli`."""

import sys


def run() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "cli":
        from engine.cli.main import main as cli_main

        return cli_main(sys.argv[2:])
    from app.main import main

    return main(sys.argv[1:])


if __name__ == "__main__":
    import multiprocessing

    multiprocessing.freeze_support()  # a target split over RPC workers runs in a spawned child (engine/serving/remote_engine.py)
    sys.exit(run())
