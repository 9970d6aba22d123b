"""The import rules of the architecture (STYLE.md): pure layers do no I/O and import no Kafka,
pydantic or runtime; a learner never imports runtime."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "streambayes"
STDLIB_AND_NUMPY = {"numpy"}
ALLOWED = {  # third-party imports each pure layer may use besides the standard library
    "stats": STDLIB_AND_NUMPY | {"scipy"},  # scipy.special.gammaln: the Dirichlet evidence (alpha="auto")
    "features": STDLIB_AND_NUMPY | {"mmh3"},  # MurmurHash3: the stable feature hash
    "models": STDLIB_AND_NUMPY,
    "evaluate": STDLIB_AND_NUMPY | {"river", "matplotlib"},
}
RIVER_COMPAT = PACKAGE / "models" / "river_compat.py"
COMPILED = PACKAGE / "models" / "seminaive" / "compiled.py"  # numba (the fast extra): in memory only
FORBIDDEN_INTERNAL = ("streambayes.runtime", "streambayes.cli", "streambayes.config", "streambayes.snapshot")
FORBIDDEN_CALLS = {"open", "print", "input"}


def imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append(node.module)
    return out


def modules(layer: str) -> list[Path]:
    return sorted((PACKAGE / layer).rglob("*.py"))


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_pure_layers_import_only_what_they_may(layer):
    import sys

    assert modules(layer), f"no modules in {layer}"
    for path in modules(layer):
        river_face = {"river", "pandas"}  # River's frames in learn_many (River needs pandas)
        allowed = ALLOWED[layer] | (river_face if path == RIVER_COMPAT else set()) \
            | ({"numba"} if path == COMPILED else set())
        for name in imports(path):
            top = name.split(".")[0]
            if top == "streambayes":
                assert not name.startswith(FORBIDDEN_INTERNAL), f"{path.name} imports {name}"
            else:
                assert top in sys.stdlib_module_names or top in allowed, f"{path.name} imports {name}"


def test_the_compiled_kernels_are_never_cached_on_disk():
    """numba's ``cache=True`` would write the machine code beside the module: I/O in a pure
    layer. Every jit there says ``cache=False``."""
    tree = ast.parse(COMPILED.read_text(encoding="utf-8"))
    jits = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("njit", "jit")]
    assert jits
    for call in jits:
        cache = {k.arg: k.value for k in call.keywords}.get("cache")
        assert isinstance(cache, ast.Constant) and cache.value is False, ast.unparse(call)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_pure_layers_do_no_file_or_terminal_io(layer):
    for path in modules(layer):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = {n.func.id for n in ast.walk(tree)
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert not calls & FORBIDDEN_CALLS, f"{path.name} calls {calls & FORBIDDEN_CALLS}"


def test_no_salted_hash_and_no_pickle_anywhere():
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id != "hash", f"{path.name}:{node.lineno} uses the salted hash()"
        top_level = {n.split(".")[0] for n in imports(path)}
        assert not {"pickle", "cloudpickle", "joblib", "dill"} & top_level, path


def test_ruff_clean():
    import subprocess
    import sys

    root = PACKAGE.parent
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "streambayes", "tests", "bench"],
                          cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_hashed_text_table_grows_with_the_text_seen_not_the_hash_space():
    from streambayes.models import NaiveBayes

    m = NaiveBayes()
    m.learn_many([{"colour": "red", "size": 2.0}, {"colour": "blue", "size": 5.0}], ["a", "b"])
    assert m.memory_bytes() < 2**12  # no token table for a model that never saw text
    before = m.predict_proba_one({"colour": "red", "text": "never seen words"})
    m.learn_one({"colour": "red", "text": "free prize"}, "a")
    assert m.memory_bytes() < 2**13 and before["a"] > 0.5  # 2 ids, not 2 x 2^20 buckets
    assert m.predict_proba_one({"text": "free prize"})["a"] > 0.5
