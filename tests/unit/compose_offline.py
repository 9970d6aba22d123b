"""``docker-compose config`` without the binary: load, interpolate, merge, validate, resolve.

Used by ``test_deploy.py`` when ``docker-compose`` is not on PATH (a fresh machine). What it does,
following the Compose Specification (https://github.com/compose-spec/compose-spec):

- every file is read with PyYAML (anchors and ``<<`` merge keys resolved), its ``${VAR}``,
  ``${VAR:-default}``, ``${VAR-default}``, ``${VAR:?error}`` and ``${VAR?error}`` interpolated (``$$``
  kept, as ``config`` writes it)
  from the given variables, and validated against the specification's JSON schema (vendored in
  ``tests/data/compose``) with ``jsonschema``;
- override files merge into the first: mappings key by key, ``ports``/``volumes``/``expose`` of
  a service by union, any other list or scalar replaced;
- the checks ``config`` makes beyond the schema: every service has an image or a build, a build
  context that exists with its Dockerfile, ``depends_on`` and named volumes that are declared,
  ``env_file`` files that exist;
- the result is written as ``config`` writes it: extension fields and ``version`` dropped, keys
  sorted, ``environment`` and ``depends_on`` as mappings, build contexts absolute.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import yaml

SCHEMA = Path(__file__).resolve().parents[1] / "data" / "compose" / "compose-spec.json"
UNION_LISTS = ("ports", "volumes", "expose")
_VAR = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[^}]*)\}|(?P<named>[_A-Za-z][_A-Za-z0-9]*)"
                  r"|(?P<bad>\{))")
_BRACED = re.compile(r"^(?P<name>[_A-Za-z][_A-Za-z0-9]*)(?:(?P<op>:?[-?])(?P<arg>.*))?$", re.S)


class ComposeError(ValueError):
    """A compose file that ``docker-compose config`` would refuse."""


def interpolate(value, variables: dict[str, str], where: str = ""):
    """``value`` with every string's variables substituted (recursively)."""
    if isinstance(value, dict):
        return {k: interpolate(v, variables, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, variables, f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value
    return _VAR.sub(lambda m: _substitute(m, variables, where), value)


def _substitute(match: re.Match, variables: dict[str, str], where: str) -> str:
    if match.group("escaped"):
        return "$$"  # `config` keeps the escape, so that its output reads back the same
    if match.group("bad"):
        raise ComposeError(f"{where}: invalid interpolation format (an unclosed ${{)")
    if match.group("named"):
        return variables.get(match.group("named"), "")
    braced = _BRACED.match(match.group("braced"))
    if braced is None:
        raise ComposeError(f"{where}: invalid interpolation format ${{{match.group('braced')}}}")
    name, op, arg = braced.group("name", "op", "arg")
    value = variables.get(name)
    unset = value is None or (op is not None and op.startswith(":") and value == "")
    if op in (":-", "-"):
        return arg if unset else value
    if op in (":?", "?") and unset:
        raise ComposeError(f"{where}: required variable {name} is missing a value: {arg}")
    return value or ""


def validate(document: dict, name: str) -> None:
    """Raise :class:`ComposeError` if ``document`` breaks the Compose Specification's schema."""
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(document), key=lambda e: list(e.path))
    if errors:
        lines = [f"{'.'.join(map(str, e.path)) or '(top)'}: {e.message}" for e in errors[:5]]
        raise ComposeError(f"{name} does not follow the Compose Specification:\n" + "\n".join(lines))


def merge(base, override, key: str = ""):
    """``override`` merged into ``base`` as compose merges override files."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base)
        for k, v in override.items():
            out[k] = merge(base[k], v, k) if k in base else v
        return out
    if key in UNION_LISTS and isinstance(base, list) and isinstance(override, list):
        return base + [v for v in override if v not in base]
    return override


def load(root: Path, files: tuple[str, ...], variables: dict[str, str]) -> dict:
    """The merged, interpolated, validated project of ``files`` (relative to ``root``)."""
    merged: dict = {}
    for name in files:
        path = root / name
        try:
            document = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ComposeError(f"{name}: {exc}") from None
        if not isinstance(document, dict):
            raise ComposeError(f"{name}: top level must be a mapping")
        document = interpolate(document, variables, name)
        validate(document, name)
        merged = merge(merged, document)
    return merged


def resolve(root: Path, files: tuple[str, ...], variables: dict[str, str]) -> dict:
    """What ``config`` prints, as data; :class:`ComposeError` where ``config`` fails."""
    project = {k: v for k, v in load(root, files, variables).items()
               if not k.startswith("x-") and k != "version"}
    services = project.get("services") or {}
    volumes = set(project.get("volumes") or {})
    for name, service in services.items():
        service = {k: v for k, v in service.items() if not k.startswith("x-")}
        services[name] = _resolve_service(root, name, service, services, volumes)
        env = services[name].get("environment")
        if env:  # a variable without a value takes the shell's, as `config` shows it
            services[name]["environment"] = {k: variables.get(k) if v is None else v for k, v in env.items()}
    return project


def _resolve_service(root: Path, name: str, service: dict, services: dict, volumes: set) -> dict:
    if "image" not in service and "build" not in service:
        raise ComposeError(f"service {name!r} has neither an image nor a build context")
    if "build" in service:
        service["build"] = _build(root, name, service["build"])
    env = service.get("environment")
    if isinstance(env, list):
        service["environment"] = dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    depends = service.get("depends_on")
    if isinstance(depends, list):
        service["depends_on"] = {d: {"condition": "service_started"} for d in depends}
    for other in service.get("depends_on") or {}:
        if other not in services:
            raise ComposeError(f"service {name!r} depends on undefined service {other!r}")
    for mount in service.get("volumes") or []:
        source = mount.get("source") if isinstance(mount, dict) else mount.split(":")[0]
        kind = mount.get("type", "volume") if isinstance(mount, dict) else None
        named = source and not source.startswith((".", "/", "~", "$")) and kind in (None, "volume")
        if isinstance(mount, str) and ":" not in mount:
            named = False  # an anonymous volume: only a container path
        if named and source not in volumes:
            raise ComposeError(f"service {name!r} refers to undefined volume {source!r}")
    for env_file in _as_list(service.get("env_file")):
        path = env_file.get("path") if isinstance(env_file, dict) else env_file
        if not (root / path).is_file():
            raise ComposeError(f"service {name!r}: env_file {path} not found")
    return service


def _build(root: Path, name: str, build) -> dict:
    build = {"context": build} if isinstance(build, str) else dict(build)
    context = (root / build.get("context", ".")).resolve()
    if not context.is_dir():
        raise ComposeError(f"service {name!r}: build path {context} does not exist")
    dockerfile = build.get("dockerfile", "Dockerfile")
    if not (context / dockerfile).is_file():
        raise ComposeError(f"service {name!r}: Dockerfile {dockerfile} not found in {context}")
    build["context"] = str(context)
    return build


def _as_list(value) -> list:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def config_text(root: Path, files: tuple[str, ...], variables: dict[str, str]) -> str:
    """``resolve`` written as YAML the way ``docker-compose config`` writes it."""
    return yaml.safe_dump(resolve(root, files, variables), default_flow_style=False, sort_keys=True,
                          width=80)
