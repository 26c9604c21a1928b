"""The product never imports its test tools: nothing under admin/, bot/, node/, serve/ or
telephony/ imports ``testkit`` or ``bench`` (testkit and bench may import the product).

``switchboard dial`` used to take its caller from ``testkit.caller``; it is ``node.dialcli``
now. Checked twice: every import statement of the product's source read with ``ast``
(also ``importlib.import_module`` and ``__import__`` with a written name), and the dial
command run in an interpreter in which ``testkit`` and ``bench`` cannot be imported.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("admin", "bot", "node", "serve", "telephony")
TEST_TOOLS = ("testkit", "bench")


def imported_names(source: str) -> list[str]:
    """Every module name ``source`` imports, as written (absolute imports only: the product
    has no relative ones, and a relative one cannot reach testkit or bench)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if called in ("import_module", "__import__") and isinstance(first, ast.Constant):
                names.append(str(first.value))
    return names


def is_test_tool(name: str) -> bool:
    return name.split(".", maxsplit=1)[0] in TEST_TOOLS


def test_the_check_sees_each_kind_of_import() -> None:
    source = (
        "import testkit.wire\nfrom bench.sip_node import echo\nimport importlib\n"
        "importlib.import_module('testkit.caller')\n__import__('bench')\nimport numpy\n"
    )
    found = [n for n in imported_names(source) if is_test_tool(n)]
    assert found == ["testkit.wire", "bench.sip_node", "testkit.caller", "bench"]


def test_no_product_module_imports_testkit_or_bench() -> None:
    files = sorted(p for part in PRODUCT for p in (ROOT / part).rglob("*.py"))
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in files
        for name in imported_names(path.read_text(encoding="utf-8"))
        if is_test_tool(name)
    ]
    assert offenders == []
    scanned = {str(p.relative_to(ROOT)) for p in files}
    assert {"node/cli.py", "node/dialcli.py", "telephony/dialer.py"} <= scanned
    assert len(scanned) > 100


def test_switchboard_dial_runs_without_the_test_tools(tmp_path: Path) -> None:
    # A --say file that is not a WAV: the command reads it (node.dialcli) and stops with
    # its one-line error before anything is dialled.
    bad = tmp_path / "notes.wav"
    bad.write_text("not audio")
    script = (
        "import sys\n"
        "sys.modules['testkit'] = None  # 'import testkit' now raises ImportError\n"
        "sys.modules['bench'] = None\n"
        "from node.cli import main\n"
        f"sys.exit(main(['dial', 'sip:bot@127.0.0.1:9', '--say', {str(bad)!r}]))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 2, run.stderr[-2000:]
    assert f"--say {bad}: not a WAV file" in run.stderr
    assert "Traceback" not in run.stderr
