"""`make topology`: the multi-host topology from local binaries, for a person to try.

Starts PostgreSQL primary + replica, PgBouncer, Redis + replica + three Sentinels, two web
hosts, two workers and HAProxy under var/topology, loads the demo data, prints where each
part listens, and runs until Ctrl-C (then stops everything it started)."""

import argparse
import signal
import sys
import time
from pathlib import Path

from tools.topology.harness import ROOT, Topology, TopologyError


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base", type=Path, default=ROOT / "var" / "topology")
    parser.add_argument("--no-demo", action="store_true", help="do not load the demo data")
    args = parser.parse_args()
    topology = Topology(args.base.resolve())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        topology.start()
        if not args.no_demo:
            topology.manage("loaddemo", "--if-empty")
        ports = topology.ports
        print(f"koinon topology is up: {topology.url}/ (HAProxy)")
        for name in sorted(ports):
            print(f"  {name:<14} 127.0.0.1:{ports[name]}")
        print(f"  logs in {topology.logs}; Ctrl-C stops everything")
        while True:
            time.sleep(3600)
    except TopologyError as error:
        print(f"topology: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        topology.stop()


if __name__ == "__main__":
    sys.exit(main())
