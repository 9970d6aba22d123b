"""Apache Kafka's jars from Maven Central, fetched once into a cache (DESIGN §5).

The broker is the official artifact ``org.apache.kafka:kafka_2.13`` with its runtime
dependencies (and log4j's SLF4J binding, so the broker's log reaches the log4j2 file the
fixture configures). A tiny generated ``pom.xml`` and ``mvn dependency:copy-dependencies`` put
them in ``<cache>/kafka-<version>/lib``; ``classpath.txt`` is written last, so its presence means
a complete fetch and later starts do not run Maven at all. The cache is
``$STREAMBAYES_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/streambayes`` (``~/.cache/streambayes``).

``python -m streambayes.devtools.kafka_dist fetch`` fills the cache and formats the template log
directory of :mod:`~streambayes.devtools.kafka_broker` (``.ci/run`` does this before the tests;
it needs only the standard library); the fixture does both on first use too.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from streambayes.errors import BrokerError

DEFAULT_VERSION = "4.1.1"  # served by Maven Central; STREAMBAYES_KAFKA_VERSION picks another 4.x
_LOG4J_VERSION = "2.24.3"  # the log4j-core that kafka_2.13 4.1 depends on
_FETCH_TIMEOUT = 900.0

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>streambayes.devtools</groupId>
  <artifactId>kafka-dist</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>{version}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId>
      <version>{log4j}</version>
    </dependency>
  </dependencies>
</project>
"""


def kafka_version() -> str:
    """The Kafka version to use: ``STREAMBAYES_KAFKA_VERSION`` or :data:`DEFAULT_VERSION`."""
    return os.environ.get("STREAMBAYES_KAFKA_VERSION") or DEFAULT_VERSION


def cache_root() -> Path:
    """Where fetched distributions live (see the module docstring)."""
    given = os.environ.get("STREAMBAYES_CACHE_DIR")
    if given:
        return Path(given)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "streambayes"


def dist_dir(version: str | None = None) -> Path:
    return cache_root() / f"kafka-{version or kafka_version()}"


def java_command() -> str | None:
    """The ``java`` executable: ``$JAVA_HOME/bin/java`` if present, else ``java`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def maven_command() -> str | None:
    return shutil.which("mvn")


def cached_classpath(version: str | None = None) -> list[Path] | None:
    """The jars of a complete earlier fetch, or None (nothing fetched, or a jar has gone)."""
    listing = dist_dir(version) / "classpath.txt"
    if not listing.is_file():
        return None
    jars = [Path(line) for line in listing.read_text().splitlines() if line.strip()]
    return jars if jars and all(j.is_file() for j in jars) else None


def fetch(version: str | None = None, *, quiet: bool = True) -> list[Path]:
    """The broker's classpath, running Maven once if the cache does not hold it yet.

    Raises :class:`~streambayes.errors.BrokerError` with Maven's last lines if it fails."""
    version = version or kafka_version()
    jars = cached_classpath(version)
    if jars:
        return jars
    mvn = maven_command()
    if mvn is None:
        raise BrokerError("cannot fetch Apache Kafka: no `mvn` on PATH (install Maven)")
    target = dist_dir(version)
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be fetching the same version
        jars = cached_classpath(version)
        if jars:
            return jars
        return _run_maven(mvn, version, target, quiet)


def _run_maven(mvn: str, version: str, target: Path, quiet: bool) -> list[Path]:
    (target / "pom.xml").write_text(_POM.format(version=version, log4j=_LOG4J_VERSION))
    lib = target / "lib"
    shutil.rmtree(lib, ignore_errors=True)
    command = [mvn, "-B", "-f", str(target / "pom.xml"), "dependency:copy-dependencies",
               f"-DoutputDirectory={lib}", "-DincludeScope=runtime"]
    if quiet:
        command.insert(2, "-q")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=_FETCH_TIMEOUT,
                              check=False)
    except subprocess.TimeoutExpired:
        raise BrokerError(f"Maven did not fetch kafka_2.13:{version} within "
                          f"{_FETCH_TIMEOUT:g} s") from None
    if done.returncode != 0:
        tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-8:])
        raise BrokerError(f"Maven could not fetch org.apache.kafka:kafka_2.13:{version} "
                          f"(exit {done.returncode}): {tail}")
    jars = sorted(lib.glob("*.jar"))
    if not any(j.name == f"kafka_2.13-{version}.jar" for j in jars):
        raise BrokerError(f"Maven ran but {lib} holds no kafka_2.13-{version}.jar")
    listing = target / "classpath.txt"
    partial = listing.with_suffix(".tmp")
    partial.write_text("".join(f"{j}\n" for j in jars))
    os.replace(partial, listing)  # last: its presence means a complete fetch
    return jars


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streambayes.devtools.kafka_dist",
                                     description="Fetch Apache Kafka's jars into the cache.")
    parser.add_argument("command", choices=["fetch", "path"])
    parser.add_argument("--version", default=None, help=f"default: {kafka_version()}")
    args = parser.parse_args(argv)
    version = args.version or kafka_version()
    if args.command == "path":
        print(dist_dir(version))
        return 0
    started = time.monotonic()
    cached = cached_classpath(version) is not None
    try:
        jars = fetch(version, quiet=True)
        java = java_command()
        if java is not None:  # format the template log directory too (one JVM start saved later)
            from streambayes.devtools.kafka_broker import formatted_template

            formatted_template(java, os.pathsep.join(map(str, jars)), version)
    except BrokerError as exc:
        print(f"kafka_dist: {exc}", file=sys.stderr)
        return 1
    how = "already cached" if cached else "fetched with Maven"
    print(f"Apache Kafka {version}: {len(jars)} jars in {dist_dir(version)} ({how}, "
          f"{time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
